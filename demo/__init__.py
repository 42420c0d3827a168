"""A self-contained demonstration: a poisoned MCP server, a scripted agent, and mitmdump with the addon."""
