"""An `ag_ui_client` actor driven against the agent's AG-UI endpoint (`--agent URL`; format spec §7.3 "AG-UI
Binding"): the attacker plays the frontend.

Each phase whose own state has a `run_agent_input` POSTs it (rendered: `{{extractor}}`,
`{{actor.extractor}}`) when the phase is entered (`oatf_serve.client`: the phase loop and the tap every byte
passes through, to the judge and to the actor's own decoder), and reads the agent's SSE answer to its end.
The body is sent as the document gives it (pass-through); one that AG-UI's `RunAgentInput` type
(`ag-ui-protocol`) does not accept is sent anyway, with a note. The actor's events are `run_agent_input`,
then each SSE event in snake_case, tool call events enriched with their `toolCallName` (§7.3.2).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx
import pydantic
from ag_ui.core import RunAgentInput
from ag_ui.encoder import EventEncoder

from oatf_engine.text import printable

from .client import TIMEOUT, ClientActor
from .player import Entered


class AgUiActor(ClientActor):
    """One `ag_ui_client` actor run against the agent (see the module docstring)."""

    client: httpx.AsyncClient

    async def run(self) -> None:
        """Play every phase."""
        async with httpx.AsyncClient(transport=self.tap, timeout=TIMEOUT, trust_env=False) as self.client:
            await self.play_phases()

    async def play(self, entered: list[Entered]) -> None:
        body = self.requests().get("run_agent_input")
        if isinstance(body, Mapping):
            rendered = self.player.render(body)
            await self._post({k: v for k, v in rendered.items() if k != "synthesize"})

    async def _post(self, body: dict[str, Any]) -> None:
        try:
            RunAgentInput.model_validate(body)
        except pydantic.ValidationError as exc:
            error = exc.errors()[0]
            self.say(f"actor {self.player.name}, phase {printable(self.player.phase, 60)}: run_agent_input is not "
                     f"an AG-UI RunAgentInput ({printable('.'.join(map(str, error['loc'])), 80)}: "
                     f"{printable(error['msg'], 120)}); sent as written")
        try:
            async with self.client.stream("POST", self.agent, json=body,
                                     headers={"accept": EventEncoder().get_content_type()}) as response:
                async for _ in response.aiter_raw():
                    pass  # the tap decodes the stream as it passes
                if response.status_code >= 400:
                    self.say(f"actor {self.player.name}: the agent answered the run with HTTP {response.status_code}")
        except httpx.HTTPError as exc:
            self.say(f"actor {self.player.name}: the run failed: {printable(str(exc) or type(exc).__name__, 200)}")
