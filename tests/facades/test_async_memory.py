"""``AsyncMemory``: Memory's methods as coroutines, off the event loop, on a real store with the real embedder."""

from __future__ import annotations

import asyncio
import inspect
import json
import time
from pathlib import Path

import pytest

from memgas import AsyncMemory, Memory, NotFoundError
from memgas.embed.base import Embedder
from support.openai_stub import OpenAIStub


def test_every_public_method_of_memory_is_a_coroutine_with_its_signature() -> None:
    public = {n for n, v in vars(Memory).items() if callable(v) and not n.startswith("_")}
    assert public <= set(vars(AsyncMemory))
    for name in public:
        method = getattr(AsyncMemory, name)
        assert inspect.iscoroutinefunction(method), name
        assert inspect.signature(method) == inspect.signature(getattr(Memory, name)), name
        assert method.__doc__ == getattr(Memory, name).__doc__


def test_concurrent_tasks_add_and_search_as_memory_does(tmp_path: Path, embedder: Embedder) -> None:
    async def scenario() -> None:
        async with AsyncMemory(tmp_path / "a.db", embedder=embedder) as mem:
            users = [f"u{i}" for i in range(8)]
            added = await asyncio.gather(*(mem.add([{"role": "user", "content": f"I keep {i} goldfish named Bo{i}."}],
                                                   user_id=u, session_id="s") for i, u in enumerate(users)))
            assert [a.session_id for a in added] == ["s"] * 8
            found = await asyncio.gather(*(mem.search(f"how many goldfish named Bo{i}?", user_id=u, k=1)
                                           for i, u in enumerate(users)))
            assert [f[0].session_id for f in found] == ["s"] * 8
            await mem.append("And a cat.", user_id="u0", session_id="s")
            assert (await mem.get("s", user_id="u0")).messages[-1].content == "And a cat."
            assert await mem.list(user_id="nobody") == []
            with pytest.raises(NotFoundError):
                await mem.get("nope", user_id="u0")
        with Memory(tmp_path / "a.db", embedder=embedder) as sync:  # what the tasks wrote, as Memory sees it
            assert len(sync.users()) == 8

    asyncio.run(scenario())


@pytest.mark.slow
def test_a_long_call_does_not_block_the_event_loop(embedder: Embedder) -> None:
    long_session = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}: " + "kayak " * 120}
                    for i in range(80)]

    async def scenario() -> tuple[int, float]:
        async with AsyncMemory(embedder=embedder) as mem:
            beats = 0

            async def heartbeat() -> None:
                nonlocal beats
                while True:
                    beats += 1
                    await asyncio.sleep(0.005)

            beat = asyncio.create_task(heartbeat())
            t0 = time.perf_counter()
            await mem.add(long_session, user_id="u", session_id="long")
            took = time.perf_counter() - t0
            beat.cancel()
            return beats, took

    beats, took = asyncio.run(scenario())
    assert took > 0.05 and beats >= 3  # the loop kept running while the add worked in a thread


def _one_fact(body: dict) -> str:
    """The stub LLM for zep: one fact per message, every judged fact new, summaries naming the members."""
    system = body["messages"][0]["content"]
    if system.startswith("You extract facts"):
        return json.dumps({"facts": [{"subject": "Anna", "relation": "works at", "object": "Siemens"}]})
    if system.startswith("You summarise"):
        return json.dumps({"summary": "About Anna."})
    return json.dumps({"verdict": "new", "ids": []})


def test_the_knowledge_graph_reads_through_the_method_the_memory_has_now(tmp_path: Path, embedder: Embedder,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A memory opened without an embedder follows a re-embedding with a new method (``Memory._use``); its graph,
    and ``AsyncMemory.kg`` made over it before, read through that one, not the method of the old vectors."""
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    with OpenAIStub(_one_fact) as stub, Memory(tmp_path / "kg.db", method="zep", embedder=embedder, llm_units=False,
                                                llm=f"openai:tiny@{stub.base_url}") as mem:
        mem.add([{"role": "user", "content": "Anna works at Siemens now."}], user_id="u", session_id="a")
        held = AsyncMemory(mem).kg
        assert held is not None and mem.kg is not None
        old = mem.method
        mem._use(embedder)  # what following a switch does: the method of the new vectors
        assert mem.method is not old and mem.kg._method is mem.method and held._wrapped is mem.kg
        facts = asyncio.run(held.facts(user_id="u"))
        assert [(f.subject, f.relation, f.object) for f in facts] == [("Anna", "works at", "Siemens")]
