"""Attest protocol v1 engine (`attest-engine`): evaluates Attest assertions on agent traces.

Run it as the `attest-engine` command (see `attest_engine.cli`); the protocol is in
`../shared/seeds/attest-protocol-v1.md` and this package's README.md says how each section is implemented.

For producers of traces (such as the proxy's session export) the trace model is importable here:
`build_trace` / `make_step` assemble a §3 trace from plain Python data and validate it with the same §7
rules the engine applies (`validate_trace`).
"""

from .session import ENGINE_VERSION, PROTOCOL_VERSION
from .trace_builder import InvalidTraceError, build_trace, make_step
from .trace_validation import STEP_TYPES, TraceError, TraceLimits, validate_trace

__all__ = [
    "ENGINE_VERSION",
    "PROTOCOL_VERSION",
    "STEP_TYPES",
    "InvalidTraceError",
    "TraceError",
    "TraceLimits",
    "build_trace",
    "make_step",
    "validate_trace",
]
