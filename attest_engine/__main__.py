"""`python -m attest_engine`: the `attest-engine` command."""

from .cli import main

raise SystemExit(main())
