"""The `oatf` command line: for people who write and check OATF documents."""
