"""LLM faults over loopback HTTP: malformed 200 answers, wrong types in ``usage``, a trickling body, a server
that never answers. Each call ends within its deadline and fails as an :class:`LLMError`; ``add`` still
stores the session (extractive units, or zep's pending extractions); the response cache forgets a
deleted session's answers from every file."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from memgas import Memory
from memgas.core import provenance
from memgas.core.errors import DuplicateSessionError, InvalidInputError, LLMError, MemgasError
from memgas.core.http import post_json
from memgas.core.validate import make_session
from memgas.llm.cache import ResponseCache
from memgas.llm.factory import get_llm
from memgas.llm.openai import OpenAIChat
from memgas.llm.wrapper import LLM
from memgas.methods.zep import Zep
from memgas.store import open_store
from support.openai_stub import OpenAIStub, completion_payload

ASK = [{"role": "user", "content": "Summarise: Ann moved to Lisbon."}]
MARGIN = 0.8  # seconds a failed call may take past its deadline (thread wake-up, socket teardown)


def _completion(**message: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "message": {"role": "assistant", **message}}]}


#: 200 answers that are not a usable chat completion, each with the words its error names.
MALFORMED: dict[str, tuple[dict[str, Any], str]] = {
    "content is a number": ({"payload": _completion(content=12345)}, "content is int"),
    "content is null": ({"payload": _completion(content=None)}, "content is NoneType"),
    "a refusal": ({"payload": _completion(content=None, refusal="I cannot help")}, "refused: I cannot help"),
    "content is a list": ({"payload": _completion(content=["a"])}, "content is list"),
    "no choices": ({"payload": {"id": "x"}}, "no choices"),
    "empty choices": ({"payload": {"choices": []}}, "no choices"),
    "choices is a string": ({"payload": {"choices": "ok"}}, "no choices"),
    "choice is a string": ({"payload": {"choices": ["ok"]}}, "no choices"),
    "message is a string": ({"payload": {"choices": [{"message": "ok"}]}}, "no message"),
    "a JSON array": ({"payload": [1, 2]}, "no choices"),
    "usage is a string": ({"payload": {**completion_payload("fine"), "usage": "none"}}, "usage is str"),
    "prompt_tokens n/a": ({"payload": completion_payload("fine", usage={"prompt_tokens": "n/a"})},  # type: ignore
                          "prompt_tokens is 'n/a'"),
    "completion_tokens negative": ({"payload": completion_payload("fine", usage={"completion_tokens": -3})},
                                   "completion_tokens is -3"),
    "completion_tokens fractional": ({"payload": completion_payload("fine", usage={"completion_tokens": 1.5})},
                                     "completion_tokens is 1.5"),
    "prompt_tokens a boolean": ({"payload": completion_payload("fine", usage={"prompt_tokens": True})},
                                "prompt_tokens is True"),
    "not JSON": ({"raw": b"<html>502 bad gateway</html>"}, "did not answer JSON"),
    "JSON nested too deep": ({"raw": b"[" * 100_000}, "did not answer JSON"),
    "a lone surrogate": ({"raw": b'{"choices": [{"message": {"content": "\\ud800"}}]}'}, "not valid Unicode"),
}


def _chat(stub: OpenAIStub, **options: Any) -> OpenAIChat:
    return OpenAIChat("tiny", base_url=stub.base_url, **{"backoff": 0.01, "max_backoff": 0.05, **options})


# ----------------------------------------------------------------------------- malformed answers


@pytest.mark.parametrize("kind", list(MALFORMED))
def test_a_malformed_200_is_a_failed_call(stub: OpenAIStub, kind: str) -> None:
    step, words = MALFORMED[kind]
    stub.script = [step]
    llm = LLM(_chat(stub, timeout=2.0), ResponseCache())
    with pytest.raises(LLMError, match="malformed completion|did not answer JSON") as info:
        llm.complete(ASK)
    assert words in str(info.value)
    assert llm.usage.failures == 1 and llm.usage.calls == 0 and len(llm.cache) == 0  # nothing cached
    assert llm.complete(ASK).text == "ok"  # the next call, well answered, is not affected


def test_usage_absent_null_or_whole_floats_is_fine(stub: OpenAIStub) -> None:
    stub.script = [{"payload": {**completion_payload("a"), "usage": None}},
                   {"payload": completion_payload("b", usage={"prompt_tokens": 12.0, "completion_tokens": 3})},
                   {"payload": _completion(content="")}]
    model = _chat(stub, timeout=2.0)
    first = model.complete(ASK)
    assert first.text == "a" and first.prompt_tokens > 0 and first.completion_tokens > 0  # estimated
    assert (model.complete(ASK).prompt_tokens, model.complete(ASK).text) == (12, "")


def test_add_falls_back_to_extractive_units_on_every_malformed_kind(embedder, stub, tmp_path: Path) -> None:
    messages = [{"role": "user", "content": "I adopted a corgi named Biscuit in May."},
                {"role": "assistant", "content": "Biscuit sounds lovely!"}]
    with Memory(tmp_path / "m.db", embedder=embedder, llm=f"openai:tiny@{stub.base_url}?timeout=2&retries=0") as mem:
        for n, (step, _) in enumerate(MALFORMED.values()):
            stub.script = [step]
            mem.add(messages, user_id="u", session_id=f"s{n}")
        assert [s.session_id for s in mem.list(user_id="u")] == [f"s{n}" for n in range(len(MALFORMED))]
        assert mem.get("s0", user_id="u").to_dict()["messages"] == messages
        assert mem.stats()["llm"]["units"] == {"written": 0, "fallbacks": len(MALFORMED)}
        assert mem.search("What is my dog called?", user_id="u", k=1)[0].turns[0].text.count("Biscuit")


# ----------------------------------------------------------------------------- deadlines


def _ends_within(deadline: float, call: Any) -> float:
    t0 = time.perf_counter()
    with pytest.raises(LLMError, match="deadline"):
        call()
    elapsed = time.perf_counter() - t0
    assert elapsed < deadline + MARGIN, f"{elapsed:.2f} s for a {deadline} s deadline"
    return elapsed


@pytest.mark.slow
def test_a_trickling_body_is_cut_at_the_deadline(stub: OpenAIStub) -> None:
    stub.script = [{"trickle": 0.05}]  # ~300 bytes at 20 bytes a second: 15 s, each byte well within any socket timeout
    _ends_within(1.5, lambda: _chat(stub, timeout=1.5).complete(ASK))
    assert len(stub.requests) == 1  # the deadline is spent: no retry


def test_a_silent_server_costs_one_deadline_not_one_per_retry(stub: OpenAIStub) -> None:
    stub.script = [{"silent": 30}] * 4
    _ends_within(1.0, lambda: _chat(stub, timeout=1.0, max_retries=3).complete(ASK))


@pytest.mark.slow
def test_hung_attempts_are_retried_within_the_deadline(stub: OpenAIStub) -> None:
    stub.script = [{"silent": 30}] * 10
    _ends_within(1.5, lambda: _chat(stub, timeout=1.5, attempt_timeout=0.3, max_retries=9).complete(ASK))
    assert 3 <= len(stub.requests) <= 5


def test_a_retry_after_beyond_the_deadline_ends_the_call_at_once(stub: OpenAIStub) -> None:
    stub.script = [{"status": 503, "headers": {"Retry-After": "20"}}]
    elapsed = _ends_within(1.5, lambda: _chat(stub, timeout=1.5, max_backoff=60).complete(ASK))
    assert elapsed < 0.5 and len(stub.requests) == 1


def test_the_shared_post_json_has_the_deadline_too(stub: OpenAIStub) -> None:
    """The embedder's transport (embed.OpenAIEmbedder) is the same function."""
    stub.script = [{"trickle": 0.05}]
    t0 = time.perf_counter()
    with pytest.raises(MemgasError, match="deadline"):
        post_json(f"{stub.base_url}/chat/completions", {"model": "m", "messages": ASK}, {}, timeout=1.0,
                  max_retries=2, backoff=0.01, max_backoff=0.05, what="embedding server")
    assert time.perf_counter() - t0 < 1.0 + MARGIN


@pytest.mark.slow
def test_the_deadline_and_retries_come_from_the_spec(stub: OpenAIStub) -> None:
    llm = get_llm(f"openai:qwen2.5:7b@{stub.base_url}?timeout=1.5&retries=0&attempt_timeout=0.5")
    model = llm.model
    assert isinstance(model, OpenAIChat) and model.model == "qwen2.5:7b" and model.base_url == stub.base_url
    assert (model.timeout, model.max_retries, model.attempt_timeout) == (1.5, 0, 0.5)
    assert get_llm("openai:gpt-4o-mini?timeout=7").model.timeout == 7.0  # type: ignore[attr-defined]
    stub.script = [{"trickle": 0.05}]
    _ends_within(1.5, lambda: llm.complete(ASK))
    for bad in ("?timeout=soon", "?timeout=0", "?retries=-1", "?retries=1.5", "?colour=red"):
        with pytest.raises(InvalidInputError):
            get_llm(f"openai:tiny@{stub.base_url}{bad}")


@pytest.mark.slow
def test_add_with_a_trickling_llm_stores_the_session_within_the_deadline(embedder, stub, tmp_path: Path) -> None:
    messages = [{"role": "user", "content": "Ann moved to Lisbon in March."}]
    with Memory(tmp_path / "m.db", embedder=embedder, llm=f"openai:tiny@{stub.base_url}?timeout=1.5") as mem:
        stub.responder = lambda body: json.dumps({"summary": "A warm-up.", "keywords": ["warm-up"]})
        mem.add([{"role": "user", "content": "warm-up"}], user_id="u", session_id="s0")
        stub.script = [{"trickle": 0.05}]
        t0 = time.perf_counter()
        mem.add(messages, user_id="u", session_id="s1")
        assert time.perf_counter() - t0 < 1.5 + MARGIN + 1.0  # + the embedding of the units
        assert mem.get("s1", user_id="u").to_dict()["messages"] == messages
        assert mem.stats()["llm"]["units"] == {"written": 1, "fallbacks": 1}


# ----------------------------------------------------------------------------- zep


FACTS = {"I live in Paris.": ("user", "lives in", "Paris"), "Rex is my dog.": ("user", "has dog", "Rex")}


def _zep_answer(body: dict[str, Any]) -> str:
    system, user = body["messages"][0]["content"], body["messages"][1]["content"]
    if system.startswith("You extract facts"):
        message = user.split("CURRENT MESSAGE:\n", 1)[1].split(": ", 1)[1]
        triple = FACTS.get(message)
        return json.dumps({"facts": [dict(zip(("subject", "relation", "object"), triple))] if triple else []})
    return json.dumps({"verdict": "new", "ids": []})


def _zep(embedder: Any, stub: OpenAIStub) -> Zep:
    stub.responder = _zep_answer
    return Zep(embedder, llm=LLM(_chat(stub, timeout=1.0, max_retries=0), ResponseCache()))


def _talk(sid: str, text: str) -> Any:
    return make_session([{"role": "user", "content": text}, {"role": "assistant", "content": "Noted."}],
                        user_id="u", session_id=sid, timestamp="2024-01-10T09:00:00")


@pytest.mark.parametrize("fault", [{"status": 500}, {"payload": _completion(content=12345)}, {"silent": 30}])
def test_zep_keeps_a_session_whose_extraction_failed_and_retries_it(embedder, stub, tmp_path, fault) -> None:
    store = open_store(tmp_path / "m.db")
    zep = _zep(embedder, stub)
    stub.script = [fault]
    t0 = time.perf_counter()
    zep.ingest(store, _talk("s1", "I live in Paris."))  # returns normally: the session was committed
    assert time.perf_counter() - t0 < 1.0 + MARGIN + 1.0
    assert len(stub.requests) == 1  # the failed call opened the breaker: the assistant message waits uncalled
    assert [i.session_id for i in store.list_sessions("u")] == ["s1"]
    assert zep.pending(store) == {"pending_sessions": 1, "pending_extractions": 2}
    assert zep.stats(store, "u")["pending_sessions"] == 1 and zep.facts(store, "u") == []
    with pytest.raises(DuplicateSessionError):  # a retry of the add is refused because the session is stored
        zep.ingest(store, _talk("s1", "I live in Paris."))
    assert zep.retry_pending(store, "u") == 0  # the LLM answers again
    assert [f.object for f in zep.facts(store, "u")] == ["Paris"]
    assert zep.pending(store, "u") == {"pending_sessions": 0, "pending_extractions": 0}
    assert zep.search_facts(store, "u", "Where does the user live?", k=1)[0].fact.object == "Paris"


def test_zep_retries_pending_extractions_at_the_next_add(embedder, stub, tmp_path) -> None:
    store = open_store(tmp_path / "m.db")
    zep = _zep(embedder, stub)
    stub.script = [{"status": 503}]
    zep.ingest(store, _talk("s1", "I live in Paris."))
    assert zep.stats(store, "u")["pending_extractions"] == 2
    zep.ingest(store, _talk("s2", "Rex is my dog."))
    assert sorted(f.object for f in zep.facts(store, "u")) == ["Paris", "Rex"]
    assert zep.stats(store, "u")["pending_sessions"] == 0


def test_zep_does_not_retry_output_that_stays_invalid(embedder, stub, tmp_path) -> None:
    store = open_store(tmp_path / "m.db")
    zep = _zep(embedder, stub)
    stub.script = [{"text": "no JSON here"}, {"text": "still none"}]  # the reply and its one repair attempt
    zep.ingest(store, _talk("s1", "I live in Paris."))
    stats = zep.stats(store, "u")
    assert stats["extraction_failures"] == 1 and stats["pending_extractions"] == 0  # the cache would replay it


def test_memory_stats_report_zep_pending(embedder, stub, tmp_path) -> None:
    stub.responder = _zep_answer
    with Memory(tmp_path / "m.db", method="zep", embedder=embedder, llm_units=False,
                llm=f"openai:tiny@{stub.base_url}?timeout=1&retries=0") as mem:
        stub.script = [{"payload": {"usage": "none"}}]
        assert mem.add([{"role": "user", "content": "I live in Paris."}], user_id="u", session_id="s1").units > 0
        assert mem.stats("u")["method"]["pending_sessions"] == 1
        with pytest.raises(DuplicateSessionError):
            mem.add([{"role": "user", "content": "I live in Paris."}], user_id="u", session_id="s1")
        assert mem.kg.retry_pending(user_id="u") == 0  # the LLM answers again
        assert mem.stats("u")["method"]["pending_sessions"] == 0
        assert [f.object for f in mem.kg.facts(user_id="u")] == ["Paris"]


# ----------------------------------------------------------------------------- the response cache forgets


def _bytes_under(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file())


def test_forget_removes_a_sessions_answers_from_every_file(stub: OpenAIStub, tmp_path: Path) -> None:
    folder = tmp_path / "cache"
    stub.responder = lambda body: {"secret": "The code word is PLUMTREE-4417.", "shared": "SHARED-NOTE-93",
                                   "query": "QUERY-ANSWER-12"}[body["messages"][0]["content"]]
    cache = ResponseCache(folder / "llm.sqlite")
    llm = LLM(_chat(stub, timeout=2.0), cache)

    def ask(what: str) -> str:
        return llm.complete([{"role": "user", "content": what}]).text

    with provenance.source("u", "s1"):
        ask("secret")
        ask("shared")
    with provenance.source("u", "s2"):
        ask("shared")  # a cache hit: s2 needs the row too
    ask("query")  # outside an ingest: untagged
    assert len(stub.requests) == 3 and b"PLUMTREE-4417" in _bytes_under(folder)
    assert cache._db.execute("PRAGMA secure_delete").fetchone() == (1,)  # whatever this SQLite build's default
    assert cache.forget("u", "s1") == 1
    left = _bytes_under(folder)
    assert b"PLUMTREE-4417" not in left and b"SHARED-NOTE-93" in left and b"QUERY-ANSWER-12" in left
    assert {p.name for p in folder.iterdir()} <= {"llm.sqlite", "llm.sqlite-wal", "llm.sqlite-shm"}
    assert ask("shared") == "SHARED-NOTE-93" and len(stub.requests) == 3  # still cached
    assert cache.forget("u") == 1 and len(cache) == 1  # s2 went with the user; the untagged answer stays
    assert b"SHARED-NOTE-93" not in _bytes_under(folder)
    cache.close()
    cache.close()  # idempotent
    assert not (folder / "llm.sqlite-wal").exists()  # the connection really closed (the last one removes the WAL)
    with pytest.raises(MemgasError, match="closed"):
        cache.get(b"x")


def test_an_old_cache_file_is_migrated_and_its_answers_are_never_forgotten(tmp_path: Path) -> None:
    path = tmp_path / "llm.sqlite"
    with sqlite3.connect(path) as db:  # the layout before provenance: one table, user_version 0
        db.execute("CREATE TABLE responses (key BLOB PRIMARY KEY, model_id TEXT NOT NULL, text TEXT NOT NULL,"
                   " prompt_tokens INTEGER NOT NULL, completion_tokens INTEGER NOT NULL, seconds REAL NOT NULL)"
                   " WITHOUT ROWID")
        db.execute("INSERT INTO responses VALUES (?, 'm', 'OLD-ANSWER', 1, 1, 0.1)", (b"k" * 32,))
    db.close()
    with ResponseCache(path) as cache:
        with provenance.source("u", "s1"):
            assert cache.get(b"k" * 32).text == "OLD-ANSWER"  # type: ignore[union-attr]  # hit: tagged s1 too
        assert cache.forget("u", "s1") == 0 and len(cache) == 1
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 2
        assert db.execute("SELECT user_id, session_id FROM sources").fetchall() == [("", "")]
    db.close()
