"""`oatf serve`: plays OATF documents' attackers against a real agent over the official protocol SDKs, and
judges what it served with the engine (issue 19). Modules, each named after what it does: `serve` (the
command: ports, uvicorn, lifetime, summary), `mcp_server` (an `mcp_server` actor on the `mcp` SDK), `stdio`
(that actor on MCP's stdio transport), `mcp_state` (MCP phase state → answers), `a2a_server` (an `a2a_server`
actor on the `a2a-sdk`), `a2a_state` (A2A phase state → answers), `client` (what client actors share: the
tap and the phase loop), `ag_ui_client`, `mcp_client`, `a2a_client` (those actors driven against the agent),
`state` (what every mode's state shares), `player` (one actor's phases), `playable` (what of a document is
not played), `judge` (the wire tap and the engine behind it).
"""
