"""``comedy`` and ``full-history``: QA-only methods. COMEDY's two LLM tasks through a scripted model on
loopback HTTP; both answer in ``bench --qa`` through the shared reader and refuse to rank sessions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import pytest

from memgas.bench.qa import qa_markdown, run_qa
from memgas.core.errors import InvalidInputError
from memgas.core.validate import make_session
from memgas.llm.cache import ResponseCache
from memgas.llm.openai import OpenAIChat
from memgas.llm.wrapper import LLM
from memgas.methods import QA_ONLY, get_method
from memgas.methods.comedy import Comedy
from memgas.store import open_store
from support.datasets import write_locomo
from support.openai_stub import OpenAIStub
from support.scripted import qa_responder


def comedy_respond(body: dict[str, Any]) -> str:
    """Task 1: the user's line as the session memory; task 2: key events from the dated memories."""
    user = body["messages"][-1]["content"]
    if "Compress them" in user:
        events = [line for line in user.split("oldest first:\n", 1)[1].split("\n\n")[0].splitlines()]
        return json.dumps({"user_profile": "Ann, a potter.", "relationship": "friendly", "key_events": events})
    if "Conversation on" in user:
        said = user.split("<conversation>\n", 1)[1].split("\n", 1)[0].split(": ", 1)[1]
        return json.dumps({"memories": [said]})
    if "Memories of past conversations" in user:  # the reader: the fact the question asks about, if shown
        question = user.split("\n\nQuestion: ", 1)[1].split("\n", 1)[0]
        wanted = "pottery" if "class" in question else "Oslo"
        return json.dumps({"answer": wanted if wanted in user.split("Question: ")[0] else "I don't know",
                           "sources": [1]})
    return qa_responder(body)  # the judge of the QA tests


@pytest.fixture()
def llm_stub(monkeypatch: pytest.MonkeyPatch) -> Iterator[OpenAIStub]:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    with OpenAIStub(comedy_respond) as s:
        yield s


def _llm(stub: OpenAIStub) -> LLM:
    return LLM(OpenAIChat("tiny", base_url=stub.base_url, max_retries=0, timeout=10), ResponseCache())


def _session(sid: str, ts: str, text: str) -> Any:
    return make_session([{"role": "user", "content": text}, {"role": "assistant", "content": "Noted."}],
                        user_id="u", session_id=sid, timestamp=ts)


def test_comedy_compresses_session_memories_once(embedder, llm_stub, tmp_path) -> None:
    store = open_store(tmp_path / "m.sqlite")
    comedy = Comedy(embedder, llm=_llm(llm_stub))
    comedy.ingest(store, _session("s1", "2024-01-10T09:00:00", "I started pottery classes."))
    comedy.ingest(store, _session("s2", "2024-03-05T09:00:00", "I moved to Oslo."))
    memory = comedy.compressed(store, "u")
    assert memory is not None and memory.by_llm and memory.user_profile == "Ann, a potter."
    assert memory.key_events == ("[2024-01-10] I started pottery classes.", "[2024-03-05] I moved to Oslo.")
    assert len(llm_stub.requests) == 3  # one memory per session, one compression
    items = comedy.memory_items(store, "u", "Where did Ann move?")
    assert len(items) == 1 and "Key events:\n- [2024-01-10] I started pottery classes." in items[0].text
    assert items[0].timestamp.month == 3
    comedy.ingest(store, _session("s3", "2024-04-01T09:00:00", "I adopted a cat."))
    assert len(comedy.compressed(store, "u").key_events) == 3
    assert len(llm_stub.requests) == 3 + 2  # the new session and a new compression; the rest was cached


def test_comedy_falls_back_when_the_model_fails(embedder, tmp_path) -> None:
    with OpenAIStub(lambda body: "not json") as bad:
        store = open_store(tmp_path / "m.sqlite")
        comedy = Comedy(embedder, llm=_llm(bad))
        comedy.ingest(store, _session("s1", "2024-01-10T09:00:00", "I started pottery classes."))
        memory = comedy.compressed(store, "u")
    assert memory is not None and not memory.by_llm and comedy.fallbacks == 2
    assert memory.key_events == ("[2024-01-10] I started pottery classes.",)  # the extractive session memory


@pytest.mark.parametrize("name", sorted(QA_ONLY))
def test_qa_only_methods_refuse_to_rank(name: str, embedder, llm_stub, tmp_path) -> None:
    store = open_store(tmp_path / "m.sqlite")
    method = get_method(name, embedder, **({"llm": _llm(llm_stub)} if name == "comedy" else {}))
    method.ingest(store, _session("s1", "2024-01-10T09:00:00", "I moved to Oslo."))
    with pytest.raises(InvalidInputError, match="QA only"):
        method.rank(store, "u", "Where?")
    with pytest.raises(InvalidInputError, match="QA only"):
        method.search(store, "u", "Where?")


def test_full_history_shows_every_session_oldest_first(embedder, tmp_path) -> None:
    store = open_store(tmp_path / "m.sqlite")
    method = get_method("full-history", embedder)
    for sid, ts in (("late", "2024-03-01T09:00:00"), ("early", "2024-01-01T09:00:00")):
        method.ingest(store, _session(sid, ts, f"This is the {sid} session."))
    items = method.memory_items(store, "u", "anything")
    assert [i.session_id for i in items] == ["early", "late"] and method.keep_newest
    assert items[0].text == "user: This is the early session.\nassistant: Noted."


def test_method_systems_answer_through_the_shared_reader(embedder, llm_stub, tmp_path: Path) -> None:
    data = write_locomo(tmp_path / "locomo.json")
    llm = LLM(OpenAIChat("tiny", base_url=llm_stub.base_url, backoff=0.01))
    systems = ["comedy", "recursum-extractive", "dense-turn"]
    result = run_qa("locomo", data, llm, embedder, systems=systems, k=1, progress=False)
    assert len(result.questions) == 2
    for q in result.questions:
        assert set(q["methods"]) == set(systems)
        assert q["methods"]["comedy"]["shown"] == ["comedy-memory"]
        assert q["methods"]["recursum-extractive"]["shown"] == ["recursum-memory"]
        assert len(q["methods"]["dense-turn"]["shown"]) == 1  # its top-1 session, whole
        assert all(r["metrics"]["judge"] == 1.0 for r in q["methods"].values())  # the memory holds both facts
    assert result.config["memory_llm"]["comedy"]["calls"] == 3 and "recursum-extractive" not in result.config["memory_llm"]
    assert "LLM use building the memory of comedy per haystack session: 1.50 calls" in qa_markdown(result)
    with pytest.raises(InvalidInputError, match="unknown QA system"):
        run_qa("locomo", data, llm, embedder, systems=["no-such-method"])
