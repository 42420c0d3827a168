"""`oatf_serve.playable`: what of a document is not played is named, field by field, before anything is
served."""

from __future__ import annotations

from pathlib import Path

from oatf_engine.monitor import load_library
from oatf_serve.agents import AgentUrls
from oatf_serve.playable import limitations

from .harness import ATTACKS


def test_limitations_name_the_field(tmp_path: Path) -> None:
    [loaded] = load_library([str(ATTACKS / "OW-021_support-agent-config-disclosure.yaml")]).attacks
    [limitation] = limitations(loaded.path, loaded.document)
    assert limitation.fatal and limitation.field == "mode"
    assert "mcp_client is played against the agent's endpoint: give it with --agent URL (or --agent" in str(limitation)
    assert limitations(loaded.path, loaded.document, AgentUrls("http://127.0.0.1:1/mcp")) == []
    document = tmp_path / "a2a.yaml"
    document.write_text(A2A_UNPLAYABLE, encoding="utf-8")
    [loaded] = load_library([str(document)]).attacks
    found = {limitation.field: limitation.message for limitation in limitations(loaded.path, loaded.document)}
    assert set(found) == {"state.agent_card.url", "state.agent_card.skills[0].rating",
                          "state.task_responses[0].content", "state.task_responses[1].content.extra",
                          "state.task_responses[2].synthesize", "state.mood",
                          "on_enter.send_push_notification.payload"}
    assert "not carried by the a2a-sdk's Agent Card" in found["state.agent_card.skills[0].rating"]
    assert "not an A2A Message the a2a-sdk can send" in found["state.task_responses[0].content"]
    assert "not an A2A StreamResponse" in found["on_enter.send_push_notification.payload"]


def test_a2a_client_actions_the_sdk_client_cannot_send_are_named(tmp_path: Path) -> None:
    document = tmp_path / "a2a-client.yaml"
    document.write_text(A2A_CLIENT_UNPLAYABLE, encoding="utf-8")
    [loaded] = load_library([str(document)]).attacks
    found = {limitation.field: limitation.message
             for limitation in limitations(loaded.path, loaded.document, AgentUrls("http://127.0.0.1:1/"))}
    assert set(found) == {"state.actions[1].params.message.mood", "state.actions[1].params.configuration.tone",
                          "state.actions[2].method", "state.actions[3].params"}
    assert "not a method the a2a-sdk client sends" in found["state.actions[2].method"]
    assert "params.id: Field required (the action is not sent)" in found["state.actions[3].params"]


A2A_UNPLAYABLE = """\
oatf: "0.1"
attack:
  id: SERVE-002
  name: "An A2A agent with what the a2a-sdk cannot serve"
  version: 1
  severity: low
  execution:
    mode: a2a_server
    phases:
      - on_enter:
          - send_push_notification: {url: "http://127.0.0.1:1/", payload: {}}
        state:
          mood: sneaky
          agent_card:
            name: Odd
            url: "https://odd.example/"
            skills: [{id: s, name: S, description: D, tags: [x], rating: 5}]
          task_responses:
            - when: {message.parts: {exists: false}}
              content: {kind: message, role: agent}
            - when: {message.role: agent}
              content: {kind: message, role: agent, messageId: m, parts: [{kind: text, text: hi}], extra: 1}
            - synthesize: {prompt: "make something up"}
  indicators:
    - id: SERVE-002-01
      surface: message/send
      target: "message.parts[*].text"
      pattern: {contains: secret}
"""


A2A_CLIENT_UNPLAYABLE = """\
oatf: "0.1"
attack:
  id: SERVE-003
  name: "An A2A client with what the a2a-sdk client cannot send"
  version: 1
  severity: low
  execution:
    mode: a2a_client
    state:
      actions:
        - method: agent_card/get
        - method: message/send
          params:
            message: {kind: message, role: user, messageId: m1, parts: [{kind: text, text: hi}], mood: odd}
            configuration: {blocking: true, tone: loud}
        - method: tasks/pushNotificationConfig/set
          params: {}
        - method: tasks/get
          params: {historyLength: 2}
  indicators:
    - id: SERVE-003-01
      surface: message/send
      direction: response
      target: "status.state"
      pattern: {contains: completed}
"""
