"""`oatf serve`: plays OATF documents' attackers against a real agent over the official protocol SDKs, and
judges what it served with the engine (issue 19). Modules, each named after what it does: `serve` (the
command: ports, uvicorn, lifetime, summary), `mcp_server` (an `mcp_server` actor on the `mcp` SDK),
`mcp_state` (MCP phase state → answers), `player` (one actor's phases for one agent session), `playable`
(what of a document is not played), `judge` (the wire tap and the engine behind it).
"""
