"""An echo agent on the `a2a-sdk` 1.3 reference server (JSON-RPC binding, A2A 1.0).

A message whose text starts with ``fail`` fails its task (with the text in the status
message); any other message completes with one artifact ``echo: <text>``. Every message
received is recorded as (contextId, text).
"""

from __future__ import annotations

from typing import Any

from a2a.helpers.proto_helpers import new_task_from_user_message, new_text_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, Part, Role
from starlette.applications import Starlette


class EchoExecutor(AgentExecutor):
    def __init__(self, messages: list[tuple[str, str]]) -> None:
        self.messages = messages

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        text = context.get_user_input()
        self.messages.append((context.context_id or "", text))
        task = context.current_task or new_task_from_user_message(context.message)
        await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.start_work()
        if text.startswith("fail"):
            await updater.failed(new_text_message(f"cannot do that: {text}", role=Role.ROLE_AGENT))
            return
        await updater.add_artifact([Part(text=f"echo: {text}")], name="answer")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError


def build_echo_app(base: str, messages: list[tuple[str, str]]) -> Any:
    card = AgentCard(
        name="echo",
        description="echoes what it is told",
        version="1.0.0",
        supported_interfaces=[AgentInterface(url=f"{base}/a2a", protocol_binding="JSONRPC", protocol_version="1.0")],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="echo", name="Echo", description="echoes", tags=["echo"])],
    )
    handler = DefaultRequestHandler(agent_executor=EchoExecutor(messages), task_store=InMemoryTaskStore(), agent_card=card)
    routes = create_agent_card_routes(card) + create_jsonrpc_routes(handler, "/a2a")
    return Starlette(routes=routes)
