"""``MemgasMemoryService`` inside Google ADK's own runner loop: an ``LlmAgent`` with ADK's ``PreloadMemoryTool`` (which
searches the memory service before each model call and puts what it finds into the request), the session stored in
memgas after every turn (ADK's ``add_session_to_memory``), the model a ``BaseLlm`` of the test's own that records
every request: the shared scenario (``tests/support/scenario.py``)."""

from __future__ import annotations

import asyncio
from typing import Any, AsyncGenerator

import pytest

pytest.importorskip("google.adk", reason="google-adk is not installed (pip install -e '.[adk]')")

from google.adk.agents import LlmAgent
from google.adk.agents.callback_context import CallbackContext
from google.adk.models import BaseLlm, LlmRequest, LlmResponse
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.adk.tools.preload_memory_tool import PreloadMemoryTool
from google.genai import types

from memgas import Memory
from memgas.embed.base import Embedder
from memgas.integrations.adk import MemgasMemoryService
from support.scenario import (
    FACT,
    QUESTION,
    check_not_recalled,
    check_recalled,
    check_recalled_later,
    check_window_lost_it,
    turns,
)

WINDOW = 6  # contents of the session the model reads as they are (the app's short-term window)


class Scripted(BaseLlm):
    """Answers "Noted." and records each request's text: (everything sent, the session's window alone)."""

    prompts: list[tuple[str, str]] = []

    async def generate_content_async(self, llm_request: LlmRequest,
                                     stream: bool = False) -> AsyncGenerator[LlmResponse, None]:
        def text(contents: list[types.Content]) -> str:
            return "\n".join(p.text for c in contents for p in c.parts or [] if p.text)

        system = str(llm_request.config.system_instruction or "") if llm_request.config else ""
        window = [c for c in llm_request.contents if "PAST_CONVERSATIONS" not in text([c])]
        self.prompts.append((system + "\n" + text(llm_request.contents), text(window)))
        yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text="Noted.")]))


def keep_window(callback_context: CallbackContext, llm_request: LlmRequest) -> None:
    """The app's short-term window: the model reads the last few contents of the session."""
    llm_request.contents = llm_request.contents[-WINDOW:]


async def remember(callback_context: CallbackContext) -> None:
    await callback_context.add_session_to_memory()  # every turn, as ADK documents for long conversations


async def conversation(service: MemgasMemoryService, user: str, session: str, said: list[str]) -> Scripted:
    model = Scripted(model="scripted", prompts=[])
    agent = LlmAgent(name="coach", model=model, instruction="Answer from what you know.",
                     tools=[PreloadMemoryTool()], before_model_callback=keep_window, after_agent_callback=remember)
    sessions = InMemorySessionService()
    runner = Runner(app_name="gym", agent=agent, session_service=sessions, memory_service=service)
    await sessions.create_session(app_name="gym", user_id=user, session_id=session)
    for text in said:
        message = types.Content(role="user", parts=[types.Part(text=text)])
        async for _ in runner.run_async(user_id=user, session_id=session, new_message=message):
            pass
    return model


@pytest.mark.slow
def test_the_shared_scenario_in_the_runner_loop(embedder: Embedder) -> None:
    with Memory(embedder=embedder) as mem:
        service = MemgasMemoryService(mem)
        first = asyncio.run(conversation(service, "ana", "chat-1", turns()))
        prompt, window = first.prompts[-1]
        check_window_lost_it(window)
        check_recalled(prompt)
        stored = mem.get("chat-1", user_id="ana")
        assert stored.agent_id == "gym" and [m.role for m in stored.messages[:2]] == ["user", "assistant"]
        assert len(stored.messages) == 2 * len(turns())  # each event stored once, though saved every turn
        again = asyncio.run(conversation(service, "ana", "chat-2", [QUESTION]))
        check_recalled_later(again.prompts[-1][0])
        other = asyncio.run(conversation(service, "bo", "chat-3", [QUESTION]))
        check_not_recalled(other.prompts[-1][0])


def test_memories_and_event_deltas_are_stored_and_an_app_sees_only_its_own(embedder: Embedder) -> None:
    from google.adk.events import Event
    from google.adk.memory.memory_entry import MemoryEntry

    def said(text: str, author: str = "user") -> Event:
        return Event(author=author, content=types.Content(role="user", parts=[types.Part(text=text)]))

    async def scenario(service: MemgasMemoryService) -> dict[str, Any]:
        await service.add_memory(app_name="gym", user_id="ana", memories=[MemoryEntry(
            content=types.Content(parts=[types.Part(text=FACT)]), custom_metadata={"source": "form"})])
        await service.add_events_to_memory(app_name="gym", user_id="ana", session_id="s1",
                                           events=[said("I train on Tuesdays."), said("Good plan.", "coach")])
        await service.add_events_to_memory(app_name="gym", user_id="ana", events=[said("I like rowing.")])
        call = Event(author="coach", content=types.Content(role="model", parts=[types.Part(
            function_call=types.FunctionCall(name="lookup", args={"q": "rowing"}))]))
        await service.add_events_to_memory(app_name="gym", user_id="ana", session_id="s1", events=[call])
        return {"gym": await service.search_memory(app_name="gym", user_id="ana", query=QUESTION),
                "bank": await service.search_memory(app_name="bank", user_id="ana", query=QUESTION)}

    with Memory(embedder=embedder) as mem:
        found = asyncio.run(scenario(MemgasMemoryService(mem)))
        assert FACT in found["gym"].memories[0].content.parts[0].text and found["bank"].memories == []
        s1 = mem.get("s1", user_id="ana").messages
        assert [(m.role, m.content) for m in s1] == [("user", "I train on Tuesdays."), ("assistant", "Good plan."),
                                                    ("assistant", '[tool call] lookup({"q": "rowing"})')]
        assert len(mem.list(user_id="ana")) == 3 and all(h.agent_id == "gym" for h in mem.list(user_id="ana"))
