"""The evaluation engine shared by both front doors (the mitmproxy addon in `addon/`, and `oatf evaluate`,
`oatf tap` and `oatf recover` in `oatf_cli/`): no mitmproxy, no threads, no processes.

Sans-I/O: `events` (the event model), `wire` (HTTP exchanges and stdio lines in, events out), `monitor`
(sessions and episodes, runs, phases, indicators, delivery, verdicts), `replay` (recorded events through session
placement and the monitor), `engine_config` (every setting, for both front doors), `attest_traces`, `text`.
File sinks, used by both front doors: `reports` (the per-run report files and `verdicts.jsonl`), `journal` and
`recovery` (nothing lost when a process dies), `monitor.library` (reading attack documents), `semantic` (loading a
configured semantic evaluator).
"""
