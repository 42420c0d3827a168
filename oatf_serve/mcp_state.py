"""What an `mcp_server` actor's phase state answers (format spec §7.1.4 "Execution State (MCP Server)",
§7.0.1 response dispatch). Sans-I/O: the state, the request's params and a renderer in, MCP result objects
(plain JSON values, MCP's wire names) out.

Structural keys map to operations: `server_info`, `instructions`, `capabilities` (and `protocol_version`,
which the SDK negotiates: see `oatf_serve.playable`) to `initialize`; `tools` to `tools/list` and
`tools/call`; `resources` to `resources/list` and `resources/read`; `resource_templates` to
`resources/templates/list`; `prompts` to `prompts/list` and `prompts/get`; `elicitations` to the
`elicitation/create` requests sent while a tool or prompt request is handled. Everything inside them is
pass-through; the OATF extensions (`responses`, a resource's `content`) are removed from listings.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import oatf

from .state import INVALID_PARAMS, Refusal, Render, as_is, dispatch, entries, mapping

DEFAULT_SERVER_INFO = {"name": "oatf-server", "version": "1.0.0"}
"""§7.1.4: `server_info` when the state has none."""
DEFAULT_CAPABILITIES: dict[str, Any] = {
    "tools": {"listChanged": True}, "resources": {"subscribe": True, "listChanged": True},
    "prompts": {"listChanged": True},
}
"""§7.1.4: "Omitting `tools`, `resources`, `resource_templates`, or `prompts` means the capability is declared
[…] but empty"; `listChanged` is declared so that phase changes can be announced."""
LISTS = {"tools": "tools/list", "resources": "resources/list", "resource_templates": "resources/templates/list",
         "prompts": "prompts/list"}
"""Each listed structural key and the operation that lists it."""
LIST_CHANGED = {"tools": "notifications/tools/list_changed", "resources": "notifications/resources/list_changed",
                "resource_templates": "notifications/resources/list_changed",
                "prompts": "notifications/prompts/list_changed"}
"""The notification that announces a change of each listing (MCP 2025-11-25)."""
ANSWERED = {"tools/call": ("tools", "name"), "prompts/get": ("prompts", "name"), "resources/read": ("resources", "uri")}
"""The requests answered from one entry of a listing: the listing and the field naming the entry."""
_EXTENSIONS = frozenset({"responses", "content"})

RESOURCE_NOT_FOUND = -32002


def server_identity(state: Any, render: Render) -> tuple[dict[str, Any], str | None, dict[str, Any]]:
    """The `initialize` answer's parts: server info, instructions and capabilities (§7.1.4 defaults applied)."""
    info = mapping(state).get("server_info")
    instructions = mapping(state).get("instructions")
    capabilities = mapping(state).get("capabilities")
    return (dict(render(info)) if isinstance(info, Mapping) else dict(DEFAULT_SERVER_INFO),
            render(instructions) if isinstance(instructions, str) else None,
            dict(capabilities) if isinstance(capabilities, Mapping) else dict(DEFAULT_CAPABILITIES))


def listing(state: Any, key: str, render: Render) -> list[dict[str, Any]]:
    """The entries of `tools`, `resources`, `resource_templates` or `prompts` as listed: OATF extensions
    removed, templates resolved."""
    return [render({k: v for k, v in entry.items() if k not in _EXTENSIONS}) for entry in entries(state, key)]


def list_result(state: Any, method: str, render: Render) -> dict[str, Any]:
    """The result of a `*/list` method (one page: the whole listing)."""
    key = next(k for k, m in LISTS.items() if m == method)
    field = "resourceTemplates" if key == "resource_templates" else key
    return {field: listing(state, key, render)}


def _named(state: Any, key: str, name: Any) -> tuple[int, Mapping[str, Any]] | None:
    for index, entry in enumerate(entries(state, key)):
        if entry.get("name") == name:
            return index, entry
    return None


def call_tool(state: Any, params: Mapping[str, Any], render: Render) -> dict[str, Any]:
    """`tools/call`: the selected response's `content` (a CallToolResult, pass-through), rendered against the
    request; a tool without responses answers empty content. An unknown tool is an error (-32602)."""
    found = _named(state, "tools", params.get("name"))
    if found is None:
        raise Refusal(INVALID_PARAMS, "Unknown tool")
    index, tool = found
    chosen = dispatch(tool.get("responses"), params, f"state.tools[{index}].responses")
    content = chosen.get("content") if chosen is not None else None
    return dict(render(content)) if isinstance(content, Mapping) else {"content": []}


def get_prompt(state: Any, params: Mapping[str, Any], render: Render) -> dict[str, Any]:
    """`prompts/get`: the selected response's `messages` (and the prompt's description), rendered."""
    found = _named(state, "prompts", params.get("name"))
    if found is None:
        raise Refusal(INVALID_PARAMS, "Unknown prompt")
    index, prompt = found
    chosen = dispatch(prompt.get("responses"), params, f"state.prompts[{index}].responses")
    result: dict[str, Any] = {"messages": render(chosen.get("messages", [])) if chosen is not None else []}
    if isinstance(prompt.get("description"), str):
        result["description"] = render(prompt["description"])
    return result


def read_resource(state: Any, params: Mapping[str, Any], render: Render) -> dict[str, Any]:
    """`resources/read`: the resource's OATF `content` wrapped in MCP's `contents[]` (§7.1.4). An unknown URI
    is MCP's "Resource not found" (-32002)."""
    uri = params.get("uri")
    for resource in entries(state, "resources"):
        if resource.get("uri") == uri:
            item: dict[str, Any] = {"uri": uri}
            if isinstance(resource.get("mimeType"), str):
                item["mimeType"] = resource["mimeType"]
            content = resource.get("content")
            if isinstance(content, Mapping):
                item.update(render({k: v for k, v in content.items() if k in ("text", "blob")}))
            if "text" not in item and "blob" not in item:
                item["text"] = ""
            return {"contents": [item]}
    raise Refusal(RESOURCE_NOT_FOUND, "Resource not found")


def elicitation(state: Any, params: Mapping[str, Any], render: Render) -> dict[str, Any] | None:
    """The `elicitation/create` params to send while handling a request with `params` (§7.1.4
    `elicitations`: the first entry whose `when` matches, else the first without one), rendered; `mode`
    defaults to `form`."""
    chosen = oatf.select_response(entries(state, "elicitations"), params)
    if chosen is None:
        return None
    request = dict(render(chosen))
    request.setdefault("mode", "form")
    return request


def defines(state: Any, method: str, params: Mapping[str, Any]) -> bool:
    """Whether the state itself answers `tools/call`, `prompts/get` or `resources/read` with `params` (a tool
    or prompt of that name, a resource of that URI)."""
    key, field = ANSWERED[method]
    return any(entry.get(field) == params.get(field) for entry in entries(state, key))


def entry_messages(actions: Sequence[tuple[str, Any]], before: Any, after: Any) -> list[tuple[str, Any]]:
    """The JSON-RPC messages (method, params) entering a phase sends (§7.1.6): its `send` actions in document
    order, then `notifications/*/list_changed` for each listing that differs between the states `before` and
    `after` (None: unknown) when no action sent it already, so that clients which cache listings see a rug
    pull."""
    messages = [(value["method"], value.get("params")) for key, value in actions
                if key == "send" and isinstance(value, Mapping) and isinstance(value.get("method"), str)]
    if before is not None:
        sent = {method for method, _ in messages}
        messages += [(method, None) for method in changed_listings(before, after) if method not in sent]
    return messages


def changed_listings(before: Any, after: Any) -> list[str]:
    """The list_changed notifications a phase change calls for: one per listing whose listed entries differ
    (a change of `responses` only is not announced: the listing is the same)."""
    methods: list[str] = []
    for key, method in LIST_CHANGED.items():
        if listing(before, key, as_is) != listing(after, key, as_is) and method not in methods:
            methods.append(method)
    return methods

