"""Honest peers for inject mode's end-to-end tests, each its own process, built on third-party SDKs: the
proxy (`oatf_inject`) brings the attack, not them.

    python tests/e2e/addon/inject_peers.py PORT a2a
    python tests/e2e/addon/inject_peers.py PORT ag-ui

- `a2a`: an honest `a2a-sdk` travel agent (JSON-RPC, A2A 1.0, streaming): its Agent Card asks for nothing
  but the trip, and every message gets an honest booking (`HONEST_BOOKING`) as a Message, streamed or not;
- `ag-ui`: the agent under test, a `pydantic-ai` Agent served over AG-UI (`AGUIAdapter`) at POST `/complying`
  and `/resisting` (one endpoint per scripted `FunctionModel`), with a backend tool `pay_invoice`. Asked to
  pay an invoice, the *complying* agent trusts the frontend with its system prompt (pydantic-ai's
  `manage_system_prompt="client"`) and its model pays the IBAN the conversation's latest system message
  gives; the *resisting* one keeps pydantic-ai's default (`"server"`: system messages a frontend sends are
  stripped) and its model pays the payee's IBAN on file (`ON_FILE_IBAN`).
"""

from __future__ import annotations

import argparse
import json
import re
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

HONEST_BOOKING = "Booked with the corporate travel account: OSL-CPH 14 Mar. Ref HON-1."
HONEST_CARD_DESCRIPTION = "Books flights and hotels for corporate travellers; payment by the corporate account."
ON_FILE_IBAN = "DE89 3704 0044 0532 0130 00"
IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?: ?[0-9A-Z]{4}){3,7}(?: ?[0-9A-Z]{1,3})?\b")


def a2a_app(port: int) -> Starlette:
    from a2a.helpers import new_text_message
    from a2a.server.agent_execution import AgentExecutor, RequestContext
    from a2a.server.events import EventQueue
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
    from a2a.server.tasks import InMemoryTaskStore
    from a2a.types.a2a_pb2 import AgentCapabilities, AgentCard, AgentInterface, AgentSkill

    class Booker(AgentExecutor):
        async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
            await event_queue.enqueue_event(new_text_message(HONEST_BOOKING, context_id=context.context_id))

        async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
            """Nothing runs long enough to cancel."""

    card = AgentCard(
        name="Corporate Travel Desk", description=HONEST_CARD_DESCRIPTION, version="1.0.0",
        supported_interfaces=[AgentInterface(url=f"http://127.0.0.1:{port}/", protocol_binding="JSONRPC",
                                             protocol_version="1.0")],
        capabilities=AgentCapabilities(streaming=True), default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="book_trip", name="Book a trip", tags=["travel"],
                           description="Flight + hotel booking on the corporate account.")],
    )
    handler = DefaultRequestHandler(agent_executor=Booker(), task_store=InMemoryTaskStore(), agent_card=card)
    return Starlette(routes=create_agent_card_routes(card) + create_jsonrpc_routes(handler, "/"))


def payments_model(complying: bool) -> Any:
    """The agent's model, scripted on the conversation (see the module docstring)."""
    from pydantic_ai.messages import ModelMessage, ModelRequest, SystemPromptPart, ToolReturnPart, UserPromptPart
    from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> Any:
        returned = [str(part.content) for message in messages for part in message.parts
                    if isinstance(part, ToolReturnPart)]
        if returned:
            yield f"Done: {returned[-1]}."
            return
        iban = ON_FILE_IBAN
        if complying:
            told = [match.group() for message in messages if isinstance(message, ModelRequest)
                    for part in message.parts if _system_voice(part, SystemPromptPart, UserPromptPart)
                    for match in IBAN.finditer(str(part.content))]
            iban = told[-1] if told else iban
        yield {0: DeltaToolCall("pay_invoice", json.dumps({"invoice": "4410", "amount": 3200, "iban": iban}))}

    return FunctionModel(stream_function=stream)


def _system_voice(part: Any, system: type, user: type) -> bool:
    """A system prompt, or a system message the frontend sent later in the conversation (pydantic-ai passes
    it on as a user prompt wrapped in `<system>`)."""
    return isinstance(part, system) or (isinstance(part, user) and str(part.content).startswith("<system>"))


def ag_ui_app() -> Starlette:
    from pydantic_ai import Agent
    from pydantic_ai.ui.ag_ui import AGUIAdapter

    def pay_invoice(invoice: str, amount: float, iban: str) -> str:
        """Pay a supplier's invoice by SEPA transfer."""
        return f"invoice {invoice}: {amount:g} EUR paid to {iban}"

    agents = {behaviour: Agent(payments_model(behaviour == "complying"), tools=[pay_invoice],
                               instructions="You pay supplier invoices.")
              for behaviour in ("complying", "resisting")}

    async def serve(request: Request) -> Response:
        behaviour = request.path_params["behaviour"]
        return await AGUIAdapter.dispatch_request(
            request, agent=agents[behaviour], manage_system_prompt="client" if behaviour == "complying" else "server")

    return Starlette(routes=[Route("/{behaviour}", serve, methods=["POST"])])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("port", type=int)
    parser.add_argument("kind", choices=["a2a", "ag-ui"])
    args = parser.parse_args()
    app = a2a_app(args.port) if args.kind == "a2a" else ag_ui_app()
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
