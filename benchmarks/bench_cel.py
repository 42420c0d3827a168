"""CEL indicator throughput (SDK spec §4.3/§6.1): prints evaluations per second, asserts nothing.

    .venv/bin/python benchmarks/bench_cel.py            # oatf.cel, through evaluate_indicator
    .venv/bin/python benchmarks/bench_cel.py --celpy    # plus cel-python's own runners, for comparison

Each figure is the best of several timed rounds on one core: full `evaluate_indicator` calls (context
binding, evaluation, verdict with timestamp and evidence) over realistic MCP messages, a 30-tool
`tools/list` result and a `tools/call` request. The default evaluator converts nothing per message, so a
fresh message object per call costs the same as a reused one.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

from oatf.cel import DefaultCelEvaluator
from oatf.evaluation import evaluate_indicator
from oatf.model import Indicator

COMMAND = "cd /work/main && .venv/bin/python benchmarks/bench_cel.py"


def tools_list_result(count: int = 30) -> dict[str, Any]:
    """An MCP `tools/list` result with `count` tools shaped like real servers' (schema, annotations)."""
    tools = []
    for index in range(count):
        tools.append({
            "name": f"workspace_tool_{index}",
            "title": f"Workspace Tool {index}",
            "description": (
                f"Tool {index}: reads files from the current workspace and returns their content as text. "
                "Paths are relative to the workspace root; binary files are returned base64-encoded. "
                "Use the `limit` argument to cap the number of bytes returned for very large files."
            ),
            "inputSchema": {
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File path relative to the workspace root"},
                    "limit": {"type": "integer", "minimum": 1, "description": "Maximum bytes to return"},
                },
                "required": ["path"],
            },
            "annotations": {"readOnlyHint": index % 7 != 3, "openWorldHint": False},
        })
    return {"tools": tools, "nextCursor": None}


def tools_call_request() -> dict[str, Any]:
    """An MCP `tools/call` request's params."""
    return {
        "name": "read_file",
        "arguments": {"path": "/home/alice/.ssh/id_rsa", "limit": 4096},
        "_meta": {"progressToken": "c7a1f1e2"},
    }


def best_rate(function: Callable[[], object], iterations: int, rounds: int = 5) -> float:
    """Calls per second of `function`: the best of `rounds` timed runs of `iterations` calls."""
    function()  # warm caches (compiled programs, regexes)
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(iterations):
            function()
        best = min(best, time.perf_counter() - start)
    return iterations / best


CASES: list[tuple[str, str, Callable[[], dict[str, Any]]]] = [
    ("tools/list 30 tools: exists + size + contains",
     'message.tools.exists(t, size(t.description) > 500 && t.description.contains("IMPORTANT:"))',
     tools_list_result),
    ("tools/list 30 tools: exists + matches (RE2)",
     'message.tools.exists(t, t.description.matches("(?i)ignore (all )?previous instructions"))',
     tools_list_result),
    ("tools/list 30 tools: filter + has + size",
     "message.tools.filter(t, has(t.annotations) && t.annotations.readOnlyHint == false).size() > 3",
     tools_list_result),
    ("tools/call: == + matches",
     'message.name == "read_file" && message.arguments.path.matches("(id_rsa|passwd|\\\\.env)")',
     tools_call_request),
    ("tools/call: has + startsWith",
     'has(message.arguments.path) && message.arguments.path.startsWith("/home/")',
     tools_call_request),
]


def _indicator(cel: str) -> Indicator:
    return Indicator.from_dict({"id": "BENCH-01", "target": "", "expression": {"cel": cel}})


def bench_oatf() -> None:
    evaluator = DefaultCelEvaluator()
    print("oatf.cel.DefaultCelEvaluator via evaluate_indicator (target: >= 5,000 evaluations/s)")
    for label, cel, make_message in CASES:
        indicator = _indicator(cel)
        message = make_message()
        verdict = evaluate_indicator(indicator, message, cel_evaluator=evaluator)
        iterations = 2_000 if "30 tools" in label else 20_000
        rate = best_rate(
            lambda i=indicator, m=message: evaluate_indicator(i, m, cel_evaluator=evaluator), iterations
        )
        print(f"  {label:<48} {rate:>10,.0f} evaluations/s  ({verdict.result})")


def bench_celpy() -> None:
    """cel-python's own runners, the naive way: convert the message with `json_to_cel`, then evaluate."""
    import celpy
    from celpy.celparser import CELParser

    for runner in (celpy.InterpretedRunner, celpy.CompiledRunner):
        CELParser.CEL_PARSER = None  # celpy's parser is a singleton bound to one runner's tree class
        environment = celpy.Environment(runner_class=runner)
        print(f"cel-python {runner.__name__} (json_to_cel per message, program compiled once)")
        for label, cel, make_message in CASES:
            program = environment.program(environment.compile(cel))
            message = make_message()
            iterations = 20 if "30 tools" in label else 500
            rate = best_rate(
                lambda p=program, m=message: p.evaluate({"message": celpy.json_to_cel(m)}), iterations, 3
            )
            print(f"  {label:<48} {rate:>10,.0f} evaluations/s")
    CELParser.CEL_PARSER = None


if __name__ == "__main__":
    print(f"command: {COMMAND}{' --celpy' if '--celpy' in sys.argv else ''}")
    bench_oatf()
    if "--celpy" in sys.argv:
        bench_celpy()
