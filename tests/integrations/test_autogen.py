"""``MemgasMemory`` with AutoGen's own packages: the Memory protocol on a real store, and an ``AssistantAgent`` whose
(scripted) model, AutoGen's ``ReplayChatCompletionClient``, is called with a fact stored in an earlier run."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("autogen_core.memory", reason="autogen-core is not installed (pip install -e '.[autogen]')")

from autogen_core.memory import MemoryContent, MemoryMimeType
from autogen_core.model_context import BufferedChatCompletionContext
from autogen_core.models import SystemMessage, UserMessage

from memgas import AsyncMemory, Memory
from memgas.context.assemble import PROFILE_HEADER
from memgas.embed.base import Embedder
from memgas.integrations.autogen import MemgasMemory
from support.scenario import (
    QUESTION,
    check_not_recalled,
    check_recalled,
    check_recalled_later,
    check_window_lost_it,
    turns,
)


def test_add_query_update_context_and_clear(embedder: Embedder) -> None:
    async def scenario() -> None:
        with Memory(embedder=embedder) as mem:
            memory = MemgasMemory(AsyncMemory(mem), user_id="ana", k=2)
            await memory.add(MemoryContent(content="My locker code is 4512.", mime_type=MemoryMimeType.TEXT,
                                           metadata={"source": "gym"}))
            await memory.add(MemoryContent(content="I adopted a greyhound called Pixel.",
                                           mime_type=MemoryMimeType.TEXT))
            found = await memory.query("what is my locker code?")
            assert "4512" in found.results[0].content and 0 < found.results[0].metadata["relevance"] <= 1
            stored = mem.get(found.results[0].metadata["session_id"], user_id="ana")
            assert stored.metadata["autogen"]["metadata"] == {"source": "gym"}
            context = BufferedChatCompletionContext(buffer_size=10)
            await context.add_message(UserMessage(content="What is my locker code?", source="user"))
            result = await memory.update_context(context)
            messages = await context.get_messages()
            assert result.memories.results and isinstance(messages[-1], SystemMessage)
            assert "4512" in messages[-1].content and " · user: My locker code is 4512." in messages[-1].content
            await memory.clear()
            assert mem.list(user_id="ana") == [] and (await memory.query("locker")).results == []
            await memory.close()

    asyncio.run(scenario())


def test_an_assistant_agent_sees_a_fact_from_an_earlier_run(embedder: Embedder) -> None:
    agents = pytest.importorskip("autogen_agentchat.agents", reason="autogen-agentchat is not installed")
    replay = pytest.importorskip("autogen_ext.models.replay", reason="autogen-ext is not installed")

    async def scenario() -> list[str]:
        with Memory(embedder=embedder) as mem:
            memory = MemgasMemory(mem, user_id="bo")
            await memory.add(MemoryContent(content="My locker code is 4512.", mime_type=MemoryMimeType.TEXT))
            client = replay.ReplayChatCompletionClient(["Your locker code is 4512."])
            agent = agents.AssistantAgent("assistant", model_client=client, memory=[memory])
            result = await agent.run(task="What is my locker code?")
            assert result.messages[-1].content == "Your locker code is 4512."
            seen = await agent.model_context.get_messages()  # what the model was given
            return [str(m.content) for m in seen]

    prompt = asyncio.run(scenario())
    assert any("My locker code is 4512." in text for text in prompt)


@pytest.mark.slow
def test_the_shared_scenario_in_an_assistant_agents_loop(embedder: Embedder) -> None:
    """40 runs of one ``AssistantAgent`` whose model context shows the latest 10 messages: the memory keeps the
    conversation in its session and the fact of turn 2 reaches the model at turn 40 (``ReplayChatCompletionClient``,
    its ``create`` wrapped to keep each prompt)."""
    agents = pytest.importorskip("autogen_agentchat.agents", reason="autogen-agentchat is not installed")
    replay = pytest.importorskip("autogen_ext.models.replay", reason="autogen-ext is not installed")

    class Recorded(replay.ReplayChatCompletionClient):  # type: ignore[misc,name-defined]
        prompts: list[tuple[str, str]]

        async def create(self, messages: Any, *args: Any, **kwargs: Any) -> Any:
            every = "\n".join(str(m.content) for m in messages)
            window = "\n".join(str(m.content) for m in messages if not isinstance(m, SystemMessage))
            self.prompts.append((every, window))
            return await super().create(messages, *args, **kwargs)

    async def conversation(mem: Memory, user: str, session: str, said: list[str]) -> list[tuple[str, str]]:
        client = Recorded(["Noted."] * len(said))
        client.prompts = []
        agent = agents.AssistantAgent("assistant", model_client=client,
                                      model_context=BufferedChatCompletionContext(buffer_size=10),
                                      memory=[MemgasMemory(mem, user_id=user, session_id=session)])
        for text in said:
            await agent.run(task=text)
        return client.prompts

    with Memory(embedder=embedder) as mem:
        every, window = asyncio.run(conversation(mem, "ana", "chat-1", turns()))[-1]
        check_window_lost_it(window)
        check_recalled(every)
        assert [m.content for m in mem.get("chat-1", user_id="ana").messages][:2] == [turns()[0], "Noted."]
        check_recalled_later(asyncio.run(conversation(mem, "ana", "chat-2", [QUESTION]))[-1][0])
        check_not_recalled(asyncio.run(conversation(mem, "bo", "chat-3", [QUESTION]))[-1][0])


def test_a_lone_standing_statement_reaches_a_request_it_bears_on(embedder: Embedder) -> None:
    """The issue's case: the one memory "Erin is vegetarian and allergic to peanuts." and the request "Suggest a
    dinner recipe for me." (a cosine of 0.17, under the evidence floor) gave the model nothing. The learned detector
    reads it as a standing statement, so the user card shows it."""
    async def scenario() -> str:
        with Memory(embedder=embedder) as mem:
            memory = MemgasMemory(mem, user_id="erin")
            await memory.add(MemoryContent(content="Erin is vegetarian and allergic to peanuts.",
                                           mime_type=MemoryMimeType.TEXT))
            context = BufferedChatCompletionContext(buffer_size=10)
            await context.add_message(UserMessage(content="Suggest a dinner recipe for me.", source="user"))
            await memory.update_context(context)
            return str((await context.get_messages())[-1].content)

    card = asyncio.run(scenario()).partition(PROFILE_HEADER)[2]
    assert "user: Erin is vegetarian and allergic to peanuts." in card
