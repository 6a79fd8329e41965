"""``MemgasHistory`` and ``memgas_toolset`` inside Pydantic AI's own agent loop, the model a ``FunctionModel`` of the
test's own (Pydantic AI's scripted model: it sees exactly the messages the agent sends): the shared scenario
(``tests/support/scenario.py``), and the toolset called by the model."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("pydantic_ai", reason="pydantic-ai is not installed (pip install -e '.[pydantic-ai]')")

from pydantic_ai import Agent
from pydantic_ai import messages as pm
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.models.function import AgentInfo, FunctionModel

from memgas import Memory
from memgas.embed.base import Embedder
from memgas.integrations.pydantic_ai import CONTEXT_HEADER, MemgasHistory, memgas_toolset
from support.scenario import (
    FACT,
    QUESTION,
    check_not_recalled,
    check_recalled,
    check_recalled_later,
    check_window_lost_it,
    turns,
)


def text_of(messages: list[pm.ModelMessage], *, memory: bool = True) -> str:
    """Everything the model was sent, as text (``memory=False``: without memgas's context part)."""
    out = []
    for message in messages:
        for part in message.parts:
            content = getattr(part, "content", None)
            if isinstance(part, pm.SystemPromptPart) and part.content.startswith(CONTEXT_HEADER) and not memory:
                continue
            if isinstance(content, str):
                out.append(content)
    return "\n".join(out)


class Scripted:
    """The model: answers "Noted." and keeps every prompt it was sent."""

    def __init__(self) -> None:
        self.prompts: list[list[pm.ModelMessage]] = []

    def __call__(self, messages: list[pm.ModelMessage], info: AgentInfo) -> pm.ModelResponse:
        self.prompts.append(list(messages))
        return pm.ModelResponse(parts=[pm.TextPart("Noted.")])


async def conversation(mem: Memory, user: str, session: str, said: list[str], window: int = 10) -> Scripted:
    model = Scripted()
    agent = Agent(FunctionModel(model), capabilities=[ProcessHistory(MemgasHistory(mem, user_id=user,
                                                                                     session_id=session,
                                                                                     window=window))])
    history: list[pm.ModelMessage] = []
    for text in said:
        history = (await agent.run(text, message_history=history)).all_messages()
    return model


@pytest.mark.slow
def test_the_shared_scenario_in_the_agent_loop(embedder: Embedder) -> None:
    with Memory(embedder=embedder) as mem:
        first = asyncio.run(conversation(mem, "ana", "chat-1", turns()))
        last = first.prompts[-1]
        check_window_lost_it(text_of(last, memory=False))  # 10 messages: the fact left 30 turns ago
        check_recalled(text_of(last))
        stored = [m.content for m in mem.get("chat-1", user_id="ana").messages]
        assert FACT in stored and QUESTION not in stored  # what left the window, not the turn being asked
        again = asyncio.run(conversation(mem, "ana", "chat-2", [QUESTION]))
        check_recalled_later(text_of(again.prompts[-1]))
        other = asyncio.run(conversation(mem, "bo", "chat-3", [QUESTION]))
        check_not_recalled(text_of(other.prompts[-1]))


def test_the_window_starts_at_a_user_prompt_and_the_context_is_replaced_not_piled(embedder: Embedder) -> None:
    with Memory(embedder=embedder) as mem:
        mem.add(FACT, user_id="ana", session_id="old")
        model = asyncio.run(conversation(mem, "ana", "now", ["Hello there.", "Nice weather.", QUESTION], window=3))
        last = model.prompts[-1]
        assert isinstance(last[0], pm.ModelRequest) and any(isinstance(p, pm.UserPromptPart) for p in last[0].parts)
        assert text_of(last).count(CONTEXT_HEADER) == 1 and FACT in text_of(last)
    with pytest.raises(ValueError, match="window"):
        MemgasHistory(mem, user_id="ana", session_id="x", window=0)


def test_the_toolset_is_called_by_the_model_and_leaves_the_current_conversation_out(embedder: Embedder) -> None:
    with Memory(embedder=embedder) as mem:
        mem.add(FACT, user_id="ana", session_id="monday")
        mem.add(QUESTION, user_id="ana", session_id="today")
        returned: list[str] = []

        def model(messages: list[pm.ModelMessage], info: AgentInfo) -> pm.ModelResponse:
            results = [p for m in messages for p in m.parts if isinstance(p, pm.ToolReturnPart)]
            if not results:
                assert {t.name for t in info.function_tools} == {"search_memory", "add_memory"}
                return pm.ModelResponse(parts=[pm.ToolCallPart("search_memory", {"query": "locker code"})])
            returned.append(str(results[-1].content))
            return pm.ModelResponse(parts=[pm.TextPart("It is 4512.")])

        agent: Agent[Any, str] = Agent(FunctionModel(model), toolsets=[memgas_toolset(
            mem, user_id="ana", exclude_sessions=["today"])])
        assert asyncio.run(agent.run(QUESTION)).output == "It is 4512."
        assert FACT in returned[0] and "· today ·" not in returned[0]
