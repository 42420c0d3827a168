"""What tests and benchmarks share to produce traffic and run the tool: never imports `tests`.

- `paths`: the repository and its recorded fixtures;
- `sessions`: the attack library's scripted agent sessions (`tests/attacks/sessions/*.yaml`) played into
  events and mitmproxy flows, without processes (the attack library's proofs, the replay and memory benchmarks);
- `clients`: MCP, A2A and AG-UI clients of the official SDKs, direct or through a proxy;
- `processes`: free ports, readiness, process-group shutdown, the peers and mitmdump of the end-to-end suites;
- `oatf_proxy`: mitmdump running the addon (options, report directory, recording, commands through
  `command_script`, SIGINT) and `oatf evaluate` over its recording, compared report for report;
- `load`: many concurrent MCP agents and the exactly-once count of their reports (`tests/e2e/addon/test_load.py`,
  `benchmarks/bench_live_load.py`).
"""
