"""`oatf_serve.mcp_state` and `oatf_serve.player` without a network: what a phase state answers, for any
params an agent sends (Hypothesis), and the phases a player enters."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import oatf
from oatf_engine.monitor import load_library
from oatf_serve import mcp_state, state
from oatf_serve.player import ActorPlayer

from .harness import ATTACKS

STATE: dict[str, Any] = {
    "tools": [{"name": "lookup", "description": "Find {{request.arguments.q}}.", "inputSchema": {"type": "object"},
               "responses": [
                   {"when": {"arguments.q": "vip"}, "content": {"content": [{"type": "text", "text": "VIP"}]}},
                   {"synthesize": {"prompt": "make something up"}}]}],
    "resources": [{"uri": "file:///notes", "name": "notes", "mimeType": "text/plain", "content": {"text": "hi"}}],
    "prompts": [{"name": "greet", "description": "Greets.", "responses": [{"messages": [
        {"role": "user", "content": {"type": "text", "text": "Hello {{request.arguments.who}}"}}]}]}],
}
params = st.dictionaries(st.sampled_from(["name", "uri", "arguments", "q", "x"]),
                         st.none() | st.integers() | st.text(max_size=10)
                         | st.dictionaries(st.sampled_from(["q", "who"]), st.text(max_size=10), max_size=2),
                         max_size=4)


def render_with(request: Any) -> state.Render:
    return lambda value: oatf.interpolate_value(value, {}, request)[0]


@given(params)
def test_any_params_get_an_answer_or_a_refusal(request: dict[str, Any]) -> None:
    for answer in (mcp_state.call_tool, mcp_state.read_resource, mcp_state.get_prompt):
        try:
            result = answer(STATE, request, render_with(request))
        except state.Refusal as refusal:
            assert refusal.code in (-32602, -32002, -32603)
        else:
            assert isinstance(result, dict)


def test_answers() -> None:
    vip = {"name": "lookup", "arguments": {"q": "vip"}}
    assert mcp_state.call_tool(STATE, vip, render_with(vip)) == {"content": [{"type": "text", "text": "VIP"}]}
    other = {"name": "lookup", "arguments": {"q": "x"}}
    with pytest.raises(state.Unplayable, match=r"state.tools\[0\].responses.*synthesize"):
        mcp_state.call_tool(STATE, other, render_with(other))
    listed = mcp_state.list_result(STATE, "tools/list", render_with({}))
    assert listed == {"tools": [{"name": "lookup", "description": "Find .", "inputSchema": {"type": "object"}}]}
    read = {"uri": "file:///notes"}
    assert mcp_state.read_resource(STATE, read, render_with(read)) == {
        "contents": [{"uri": "file:///notes", "mimeType": "text/plain", "text": "hi"}]}
    greet = {"name": "greet", "arguments": {"who": "Ada"}}
    assert mcp_state.get_prompt(STATE, greet, render_with(greet))["messages"][0]["content"]["text"] == "Hello Ada"
    assert mcp_state.server_identity({}, render_with({}))[0] == mcp_state.DEFAULT_SERVER_INFO


def test_rug_pull_player_and_announcements() -> None:
    """OW-006 played by hand: two calls, the swap (its on_enter send), the listing changed, then terminal."""
    [loaded] = load_library([str(ATTACKS / "OW-006_fx-converter-rug-pull.yaml")]).attacks
    player = ActorPlayer(loaded.attack.execution.actors[0])  # type: ignore[union-attr]
    call = {"name": "convert_currency", "arguments": {"amount": 1, "from": "EUR", "to": "SEK"}}
    before = player.state()
    assert player.exchange("tools/call", call, {"content": []}) == []
    [entered] = player.exchange("tools/call", call, {"content": []})
    assert entered.phase == "swap_description"
    assert entered.actions == (("send", {"method": "notifications/tools/list_changed"}),)
    assert mcp_state.changed_listings(before, player.state()) == ["notifications/tools/list_changed"]
    [entered] = player.exchange("tools/list", {}, {"tools": []})
    assert entered.phase == "exploit" and entered.actions == ()
