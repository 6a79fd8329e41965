"""``MemgasAgnoMemory`` inside Agno's own agent loop: an ``Agent`` with Agno's in-memory session store showing the
model its latest 3 runs, memgas's context as a run dependency and the run kept by a post-hook; the model Agno's own
``OpenAIChat`` against the loopback OpenAI-protocol stub, which keeps every request: the shared scenario
(``tests/support/scenario.py``)."""

from __future__ import annotations

import pytest

pytest.importorskip("agno", reason="agno is not installed (pip install -e '.[agno]')")

from agno.agent import Agent
from agno.db.in_memory import InMemoryDb
from agno.models.openai import OpenAIChat

from memgas import Memory
from memgas.embed.base import Embedder
from memgas.integrations.agno import MemgasAgnoMemory
from support.openai_stub import OpenAIStub
from support.scenario import (
    FACT,
    QUESTION,
    check_not_recalled,
    check_recalled,
    check_recalled_later,
    check_window_lost_it,
    turns,
)


def prompt_of(body: dict) -> tuple[str, str]:
    """(everything the model was sent, the conversation's own words: Agno keeps each run's user message with the
    additional context it was given, so earlier runs' memory blocks are cut off too)."""
    every = "\n".join(str(m.get("content")) for m in body["messages"])
    window = "\n".join(str(m.get("content")).split("<additional context>")[0] for m in body["messages"]
                       if m["role"] != "system")
    return every, window


@pytest.mark.slow
def test_the_shared_scenario_in_the_agent_loop(embedder: Embedder, stub: OpenAIStub) -> None:
    stub.responder = lambda body: "Noted."
    with Memory(embedder=embedder) as mem:
        memory = MemgasAgnoMemory(mem, window_runs=3)
        agent = Agent(model=OpenAIChat(id="gpt-4o-mini", base_url=stub.base_url, api_key="test"), db=InMemoryDb(),
                      add_history_to_context=True, num_history_runs=3, dependencies={"memory": memory.context},
                      add_dependencies_to_context=True, post_hooks=[memory.keep], telemetry=False)

        def conversation(user: str, session: str, said: list[str]) -> tuple[str, str]:
            for text in said:
                agent.run(text, user_id=user, session_id=session)
            return prompt_of(stub.requests[-1])

        every, window = conversation("ana", "chat-1", turns())
        check_window_lost_it(window)
        check_recalled(every)
        kept = [m.content for m in mem.get("chat-1", user_id="ana").messages]
        assert kept[2:4] == [FACT, "Noted."] and len(kept) == 2 * len(turns())
        check_recalled_later(conversation("ana", "chat-2", [QUESTION])[0])
        check_not_recalled(conversation("bo", "chat-3", [QUESTION])[0])
    with pytest.raises(ValueError, match="window_runs"):
        MemgasAgnoMemory(mem, window_runs=-1)
