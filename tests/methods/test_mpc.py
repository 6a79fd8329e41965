"""``mpc``: prompted memory entries per session, over a real SQLite store, the real embedder and a scripted
LLM on loopback HTTP."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memgas.core.errors import InvalidInputError
from memgas.core.validate import make_session
from memgas.llm.cache import ResponseCache
from memgas.llm.openai import OpenAIChat
from memgas.llm.wrapper import LLM
from memgas.methods import get_method
from memgas.methods.mpc import MPC
from memgas.store import open_store
from support.openai_stub import OpenAIStub

#: The scripted memory processor: a session's first user line → its memories.
MEMORIES = {
    "We spent the whole Saturday outside.": [
        {"kind": "event", "text": "Alex adopted a corgi puppy named Biscuit on Saturday.", "turns": [1]},
        {"kind": "persona", "text": "Alex loves long walks in the park.", "turns": [99]},  # no such turn
    ],
    "Work was busy this week.": [
        {"kind": "persona", "text": "Alex works as a nurse at the city hospital.", "turns": [0]},
    ],
}
SESSIONS = {
    "s1": ["We spent the whole Saturday outside.", "We picked up the little one from the breeder.",
           "Then we walked around the park for hours."],
    "s2": ["Work was busy this week.", "Lots of night shifts, and the cafeteria was closed."],
}


def respond(body: dict[str, Any]) -> str:
    """The memory processor: the memories of the session whose first user line the prompt shows."""
    prompt = body["messages"][1]["content"]
    first = prompt.split("SESSION:\n[0] user: ", 1)[1].split("\n", 1)[0]
    return json.dumps({"memories": MEMORIES.get(first, [])})


def _session(sid: str, lines: list[str], day: int) -> Any:
    msgs = [m for line in lines for m in ({"role": "user", "content": line}, {"role": "assistant", "content": "I see."})]
    return make_session(msgs, user_id="u", session_id=sid, timestamp=f"2024-05-0{day}T10:00:00")


def _mpc(embedder: Any, stub: OpenAIStub) -> MPC:
    llm = LLM(OpenAIChat("tiny", base_url=stub.base_url, max_retries=0, timeout=10), ResponseCache())
    return get_method("mpc", embedder, llm=llm)  # type: ignore[return-value]


@pytest.fixture()
def store(tmp_path: Path) -> Any:
    s = open_store(tmp_path / "m.db")
    yield s
    s.close()


def test_entries_rank_the_turns_they_cite(embedder, stub: OpenAIStub, store: Any) -> None:
    stub.responder = respond
    mpc = _mpc(embedder, stub)
    for day, (sid, lines) in enumerate(SESSIONS.items(), 1):
        mpc.ingest(store, _session(sid, lines, day))
    entries = {e.text: e for e in mpc.entries(store, "u")}
    assert entries["Alex adopted a corgi puppy named Biscuit on Saturday."].turns == (1,)
    # a cited turn that does not exist: attached to the turn sharing most words ("park")
    assert entries["Alex loves long walks in the park."].turns == (2,)
    ranking = mpc.rank(store, "u", "What is the name of Alex's dog?")
    # turn 1 never says "dog", "corgi" or "Biscuit": only the memory entry written from it does
    assert ranking.turns[0] == ("s1", 1) and ranking.sessions[0] == "s1"
    assert mpc.rank(store, "u", "Where does Alex work?").turns[0] == ("s2", 0)
    hits = mpc.search(store, "u", "Alex's job", k=1)
    assert hits[0].session_id == "s2" and hits[0].method == "mpc"


def test_one_call_per_session_and_a_rebuild_replays_from_the_cache(embedder, stub: OpenAIStub, store: Any) -> None:
    stub.responder = respond
    mpc = _mpc(embedder, stub)
    mpc.ingest(store, _session("s1", SESSIONS["s1"], 1))
    mpc.prepare(store, "u")
    assert len(stub.requests) == 1
    mpc.ingest(store, _session("s2", SESSIONS["s2"], 2))
    mpc.prepare(store, "u")
    assert len(stub.requests) == 2  # the rebuild asked only about the new session
    assert mpc.llm is not None and mpc.llm.usage.cached == 1


def test_a_failed_call_leaves_the_session_without_entries(embedder, stub: OpenAIStub, store: Any) -> None:
    stub.responder = respond
    stub.script.append({"status": 500})
    mpc = _mpc(embedder, stub)
    mpc.ingest(store, _session("s1", SESSIONS["s1"], 1))
    mpc.ingest(store, _session("s2", SESSIONS["s2"], 2))
    ranking = mpc.rank(store, "u", "Where does Alex work?")
    assert mpc.llm_failures == 1 and all(e.session_id == "s2" for e in mpc.entries(store, "u"))
    assert sorted(ranking.sessions) == ["s1", "s2"] and ranking.sessions[0] == "s2"


def test_without_an_llm_it_says_so(embedder, store: Any) -> None:
    mpc = get_method("mpc", embedder)
    mpc.ingest(store, _session("s1", SESSIONS["s1"], 1))
    with pytest.raises(InvalidInputError, match="'mpc' method needs an LLM"):
        mpc.rank(store, "u", "dog")
