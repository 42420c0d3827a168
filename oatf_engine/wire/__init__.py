"""Sans-I/O wire decoders: HTTP exchanges of MCP, A2A and AG-UI traffic in, `oatf_engine.events.ObservedEvent`s out.

Never imports mitmproxy (`addon/mitm_tap.py` is the glue). Modules, each named after what it does:
`decoder` (the exchange and message stream APIs), `ndjson` (MCP's stdio transport), `sse` (WHATWG event
streams), `jsonrpc` (JSON-RPC 2.0 classification and correlation), `encoding` (Content-Encoding),
`recognition` (which protocol), and the bindings `mcp`, `a2a`, `ag_ui` (event names and content Values, format
spec §7.1–§7.3).
"""

from .decoder import (
    STREAMED_MEDIA_TYPES,
    UNINSPECTED,
    DecoderConfig,
    Diagnostic,
    Unread,
    WireDecoder,
    is_streamed,
    kept_header,
    uninspected,
)
from .recognition import Override, parse_overrides
from .sse import SSEEvent, SSEParser

__all__ = ["STREAMED_MEDIA_TYPES", "UNINSPECTED", "DecoderConfig", "Diagnostic", "Override", "SSEEvent", "SSEParser",
           "Unread", "WireDecoder", "is_streamed", "kept_header", "parse_overrides", "uninspected"]
