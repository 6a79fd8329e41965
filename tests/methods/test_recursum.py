"""``recursum`` and ``recursum-extractive``: the running memory, its session mapping, and the LLM update
through a scripted model on loopback HTTP (real SQLite store, real embedder)."""

from __future__ import annotations

import json
import re
from typing import Any, Iterator

import numpy as np
import pytest

from memgas.core.errors import InvalidInputError
from memgas.core.validate import make_session
from memgas.llm.cache import ResponseCache
from memgas.llm.openai import OpenAIChat
from memgas.llm.wrapper import LLM
from memgas.methods import get_method
from memgas.methods.recursum import RecurSum, prune_redundant
from memgas.store import open_store
from support.openai_stub import OpenAIStub

#: What the scripted model does after each conversation: entries to keep (by text) and to add.
UPDATES = {
    "I live in Paris and my dog is called Rex.": ([], ["The user lives in Paris.", "The user's dog is called Rex."]),
    "I moved to London last month, new flat!": (["The user's dog is called Rex."], ["The user lives in London."]),
    "My sister Anna lives in Berlin and plays the cello.": (
        ["The user's dog is called Rex.", "The user lives in London."], ["The user's sister Anna plays the cello."]),
}
SESSIONS = [("s1", "2024-01-10T09:00:00", "I live in Paris and my dog is called Rex."),
            ("s2", "2024-03-05T09:00:00", "I moved to London last month, new flat!"),
            ("s3", "2024-04-01T09:00:00", "My sister Anna lives in Berlin and plays the cello.")]


def respond(body: dict[str, Any]) -> str:
    """Keep and add per :data:`UPDATES`, reading the numbered memory from the prompt; anything else: bad JSON."""
    user = body["messages"][-1]["content"]
    said = re.search(r"user: (.*)\n", user)
    if said is None or said.group(1) not in UPDATES:
        return "not json"
    numbered = dict((text, int(n)) for n, text in re.findall(r"^(\d+)\. (.*)$", user.split("New conversation")[0], re.M))
    keep, add = UPDATES[said.group(1)]
    return json.dumps({"keep": [numbered[k] for k in keep], "add": add})


@pytest.fixture()
def llm_stub() -> Iterator[OpenAIStub]:
    with OpenAIStub(respond) as s:
        yield s


def _session(sid: str, ts: str, text: str) -> Any:
    return make_session([{"role": "user", "content": text}, {"role": "assistant", "content": "Noted."}],
                        user_id="u", session_id=sid, timestamp=ts)


def _fill(method: RecurSum, store: Any, sessions: list[tuple[str, str, str]] = SESSIONS) -> None:
    for sid, ts, text in sessions:
        method.ingest(store, _session(sid, ts, text))


def _llm(stub: OpenAIStub) -> LLM:
    return LLM(OpenAIChat("tiny", base_url=stub.base_url, max_retries=0, timeout=10), ResponseCache())


def test_llm_updates_keep_add_and_credit_sessions(embedder, llm_stub, tmp_path) -> None:
    store = open_store(tmp_path / "m.sqlite")
    method = RecurSum(embedder, llm=_llm(llm_stub), inherit=0.6)
    _fill(method, store)
    memory = {e.text: set(e.sessions) for e in method.memory(store, "u")}
    # Paris was dropped; London replaced it and inherits s1; the unrelated new entry does not.
    assert memory == {"The user's dog is called Rex.": {"s1"}, "The user lives in London.": {"s1", "s2"},
                      "The user's sister Anna plays the cello.": {"s3"}}
    assert len(llm_stub.requests) == 3 and method.fallbacks == 0
    ranking = method.rank(store, "u", "What instrument does Anna play?")
    assert ranking.sessions == ["s3", "s1", "s2"]
    assert [sid for sid, _ in ranking.turns] == ["s3", "s1", "s2"]  # a turn scores as its session
    hits = method.search(store, "u", "Which city does the user live in?", k=2)
    assert [h.session_id for h in hits] == ["s1", "s2"] and 0 < hits[0].relevance <= 1
    # One more session: one more call, the earlier updates are not redone.
    method.ingest(store, _session("s4", "2024-05-01T09:00:00", "Nothing much today."))
    method.rank(store, "u", "anything")
    assert len(llm_stub.requests) == 4 + 1  # the failed reply was retried once
    assert method.fallbacks == 1  # the invalid update fell back to the extractive one
    assert any("s4" in e.sessions for e in method.memory(store, "u"))
    items = method.memory_items(store, "u", "Where does the user live?")
    assert len(items) == 1 and "- The user lives in London." in items[0].text
    assert items[0].timestamp.month == 5


def test_unrelated_session_is_last_and_credits_nothing(embedder, llm_stub, tmp_path) -> None:
    store = open_store(tmp_path / "m.sqlite")
    method = RecurSum(embedder, llm=_llm(llm_stub), inherit=0.99)
    _fill(method, store)
    memory = {e.text: set(e.sessions) for e in method.memory(store, "u")}
    assert memory["The user lives in London."] == {"s2"}  # below the inherit threshold: no credit to s1
    assert method.rank(store, "u", "Which city does the user live in?").sessions[0] == "s2"


def test_extractive_variant_bounds_the_memory(embedder, tmp_path) -> None:
    store = open_store(tmp_path / "m.sqlite")
    method = get_method("recursum-extractive", embedder, max_entries=2)
    _fill(method, store)
    memory = method.memory(store, "u")
    assert len(memory) == 2 and method.name == "recursum-extractive"
    assert all(len(e.sessions) == 1 for e in memory)
    unbounded = get_method("recursum-extractive", embedder)
    texts = [e.text for e in unbounded.memory(store, "u")]
    assert texts == [text for _, _, text in SESSIONS]  # one user sentence per session, in time order
    assert unbounded.rank(store, "u", "Anna plays the cello").sessions[0] == "s3"


def test_prune_redundant_drops_the_most_redundant_oldest_first() -> None:
    v = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.6, 0.8]], dtype=np.float32)
    assert prune_redundant(v, 4) == [0, 1, 2, 3]
    assert prune_redundant(v, 3) == [1, 2, 3]  # rows 0 and 1 are duplicates: the older goes
    assert prune_redundant(v, 2) == [1, 3]  # rows 2 and 3 then tie (0.8): the older goes


def test_llm_variant_needs_an_llm(embedder) -> None:
    with pytest.raises(InvalidInputError, match="needs an LLM"):
        get_method("recursum", embedder)
    with pytest.raises(InvalidInputError):
        RecurSum(embedder, extractive=True, max_entries=0)
