"""The ``zep`` method end to end: a real SQLite store, the real embedder, and a scripted LLM over loopback HTTP."""


from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import pytest

from memgas.core.errors import InvalidInputError, NotFoundError
from memgas.core.validate import make_session
from memgas.llm.cache import ResponseCache
from memgas.llm.openai import OpenAIChat
from memgas.llm.wrapper import LLM
from memgas.methods.zep import Zep
from memgas.store import open_store
from support.openai_stub import OpenAIStub
from support.scripted import zep_responder

FAMILY = [
    ("f1", "2024-01-10T09:00:00", "My sister Anna lives in Berlin."),
    ("f2", "2024-02-10T09:00:00", "Anna works at Siemens now."),
    ("f3", "2024-03-10T09:00:00", "Anna's husband Tom is a pilot."),
]
SESSIONS = [
    ("s1", "2024-01-10T09:00:00", "I live in Paris and my dog is called Rex."),
    ("s2", "2024-03-05T09:00:00", "I moved to London last month, new flat!"),
    ("s3", "2024-04-01T09:00:00", "Rex loves the parks here."),
]


def _session(sid: str, ts: str, text: str, user: str = "u") -> Any:
    msgs = [{"role": "user", "content": text}, {"role": "assistant", "content": "Thanks for telling me."}]
    return make_session(msgs, user_id=user, session_id=sid, timestamp=ts)



@pytest.fixture()
def stub():
    with OpenAIStub(zep_responder) as s:
        yield s


def _method(embedder, stub: OpenAIStub, **options: Any) -> Zep:
    llm = LLM(OpenAIChat("tiny", base_url=stub.base_url, max_retries=0, timeout=10), ResponseCache())
    return Zep(embedder, llm=llm, **options)


def _summary_calls(stub: OpenAIStub) -> int:
    return sum(b["messages"][0]["content"].startswith("You summarise") for b in stub.requests)


def _judge_calls(stub: OpenAIStub) -> int:
    return sum(b["messages"][0]["content"].startswith("You maintain") for b in stub.requests)


def test_extraction_contradiction_and_free_duplicates(embedder, stub, tmp_path) -> None:
    store = open_store(tmp_path / "m.sqlite")
    zep = _method(embedder, stub)
    for sid, ts, text in SESSIONS:
        zep.ingest(store, _session(sid, ts, text))
    current = {(f.subject, f.relation, f.object) for f in zep.facts(store, "u")}
    assert current == {("user", "lives in", "London"), ("user", "has dog", "Rex"), ("Rex", "loves", "parks")}
    paris = next(f for f in zep.facts(store, "u", include_invalid=True) if f.object == "Paris")
    assert paris.invalid_at == datetime(2024, 3, 5, 9) and paris.episodes == ["s1#0"]
    assert [f.object for f in zep.history(store, "u", paris.id)] == ["Paris", "London"]
    assert [f.object for f in zep.facts(store, "u", entity="User", as_of=datetime(2024, 2, 1))] == ["Paris", "Rex"]
    rex = next(f for f in zep.facts(store, "u") if f.object == "Rex")
    assert rex.episodes == ["s1#0", "s3#0"]  # the repeat was merged, without a judge call
    stats = zep.stats(store, "u")
    assert stats["episodes"] == 6 and stats["duplicate_free"] == 1 and stats["contradiction"] == 1
    assert stats["extraction_failures"] == 0 and _judge_calls(stub) == stats["judge_calls"] == 3
    assert len(stub.requests) == 6 + 3  # one extraction per message, one judge call per non-trivial fact


def test_retrieval_puts_the_current_value_first_and_maps_to_sessions(embedder, stub, tmp_path) -> None:
    store = open_store(tmp_path / "m.sqlite")
    zep = _method(embedder, stub)
    for sid, ts, text in SESSIONS:
        zep.ingest(store, _session(sid, ts, text))
    hits = zep.search_facts(store, "u", "Where does the user live?", k=5)
    assert hits[0].fact.object == "London" and all(h.fact.object != "Paris" for h in hits)
    assert hits[0].episodes[0].content == "I moved to London last month, new flat!"
    with_history = zep.search_facts(store, "u", "Where does the user live?", k=5, include_invalid=True)
    objects = [h.fact.object for h in with_history]
    assert objects[0] == "London" and "Paris" in objects  # history after the current value (halved, MMR-diverse)
    past = zep.search_facts(store, "u", "Where does the user live?", as_of=datetime(2024, 2, 1))
    assert past[0].fact.object == "Paris"
    ranking = zep.rank(store, "u", "Where do I live now?")
    assert ranking.sessions[0] == "s2" and ranking.turns[0] == ("s2", 0)
    assert sorted(ranking.sessions) == ["s1", "s2", "s3"]
    search = zep.search(store, "u", "my dog Rex", k=3)
    assert search[0].session_id in ("s1", "s3") and search[0].method == "zep"


def test_a_failed_call_keeps_the_episode_and_is_counted(embedder, stub, tmp_path) -> None:
    store = open_store(tmp_path / "m.sqlite")
    zep = _method(embedder, stub)
    stub.script.append({"status": 500})  # the first extraction call fails
    zep.ingest(store, _session("s1", "2024-01-10T09:00:00", "I started a job at Acme as a nurse."))
    graph = zep.graph(store, "u")
    assert graph.episodes["s1#0"].content == "I started a job at Acme as a nurse."
    assert zep.stats(store, "u")["extraction_failures"] == 1 and graph.facts == []
    assert zep.llm is not None and zep.llm.usage.failures == 1
    # a later session is still processed, and the failed episode stays stored for a rebuild
    zep.ingest(store, _session("s2", "2024-02-10T09:00:00", "I started a job at Acme as a nurse."))
    assert [f.object for f in zep.facts(store, "u")] == ["Acme"]
    assert len(zep.graph(store, "u").episodes) == 4


def test_incremental_build_and_a_rebuild_repeat_no_call(embedder, stub, tmp_path) -> None:
    store = open_store(tmp_path / "m.sqlite")
    zep = _method(embedder, stub)
    zep.ingest(store, _session(*SESSIONS[0]))
    first = len(stub.requests)
    zep.ingest(store, _session(*SESSIONS[1]))
    assert len(stub.requests) - first == 2 + 1  # only the new session's messages (and one judge call)
    before = len(stub.requests)
    store.delete_session("u", "s2")  # forces a rebuild from the store: every answer comes from the cache
    assert [f.object for f in zep.facts(store, "u")] == ["Paris", "Rex"]
    assert len(stub.requests) == before and zep.llm is not None and zep.llm.usage.cached >= 2


def test_without_an_llm_the_method_says_how_to_configure_one(embedder, tmp_path) -> None:
    store = open_store(tmp_path / "m.sqlite")
    zep = Zep(embedder)
    with pytest.raises(InvalidInputError, match="llm='openai:<model>@<base_url>'"):
        zep.ingest(store, _session(*SESSIONS[0]))
    assert store.list_sessions("u") == []  # nothing written
    with pytest.raises(InvalidInputError, match="needs an LLM"):
        zep.rank(store, "u", "anything")
    with pytest.raises(InvalidInputError):
        Zep(embedder, mmr_lambda=2.0)


def test_the_memory_facade_serves_facts_and_history(stub, tmp_path) -> None:
    from memgas import Memory

    llm = LLM(OpenAIChat("tiny", base_url=stub.base_url, max_retries=0, timeout=10), ResponseCache())
    with Memory(str(tmp_path / "z.db"), method="zep", llm=llm, llm_units=False) as mem:
        for sid, ts, text in SESSIONS:
            mem.add([{"role": "user", "content": text}, {"role": "assistant", "content": "Thanks for telling me."}],
                    user_id="u", session_id=sid, timestamp=ts)
        now = {(f.relation, f.object) for f in mem.kg.facts(user_id="u", entity="user")}
        assert ("lives in", "London") in now and ("lives in", "Paris") not in now
        before = {f.object for f in mem.kg.facts(user_id="u", entity="user", as_of="2024-02-01T00:00:00")}
        assert "Paris" in before
        paris = next(f for f in mem.kg.facts(user_id="u", include_invalid=True) if f.object == "Paris")
        assert [f.object for f in mem.kg.history(paris.id, user_id="u")] == ["Paris", "London"]
        assert mem.search("Where do I live now?", user_id="u", k=1)[0].session_id == "s2"
        assert mem.kg.communities(user_id="u") == []  # 4 facts: no batch of 50 yet
        for bad in ("0", None, 1.5, True, -1):  # each a one-line error of the documented class
            with pytest.raises(InvalidInputError, match="fact_id"):
                mem.kg.history(bad, user_id="u")  # type: ignore[arg-type]
        with pytest.raises(NotFoundError, match="no fact 999"):
            mem.kg.history(999, user_id="u")
        for bad in (5, ["x"], "", "  "):
            with pytest.raises(InvalidInputError, match="entity"):
                mem.kg.facts(user_id="u", entity=bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidInputError, match="include_invalid"):
            mem.kg.facts(user_id="u", include_invalid="yes")  # type: ignore[arg-type]
        # a user with no memory: empty collections, as every read answers; no such fact
        assert mem.kg.facts(user_id="nobody") == [] == mem.kg.communities(user_id="nobody")
        assert mem.kg.retry_pending(user_id="nobody") == 0
        with pytest.raises(NotFoundError, match="no fact 0"):
            mem.kg.history(0, user_id="nobody")
    with Memory() as plain:
        plain.add([{"role": "user", "content": "hello"}], user_id="u", session_id="x")
        assert plain.kg is None  # a method without a knowledge graph has none of its calls


def test_communities_are_summarised_once_per_batch_and_join_retrieval(embedder, stub, tmp_path) -> None:
    store = open_store(tmp_path / "m.sqlite")
    zep = _method(embedder, stub, refresh_every=3)
    zep.ingest(store, _session(*FAMILY[0]))
    assert zep.communities(store, "u") == [] and _summary_calls(stub) == 0  # 2 facts: no batch yet
    zep.ingest(store, _session(*FAMILY[1]))  # the 3rd fact closes a batch: Louvain, then one summary
    (community,) = zep.communities(store, "u")
    assert community.by_llm and _summary_calls(stub) == 1
    assert community.members == ("anna", "berlin", "siemens", "user")
    assert community.summary == "Family and work: Anna, Berlin, Siemens, user."
    zep.ingest(store, _session(*FAMILY[2]))  # 2 more facts, no new batch: Tom joins by inheritance only
    assert zep.graph(store, "u").entities["tom"].community == 0
    assert _summary_calls(stub) == 1 and zep.communities(store, "u") == [community]
    assert zep.stats(store, "u")["community_summaries"] == 1
    # "family" is in no fact, only in the community's summary: the community channel brings its facts
    plain = _method(embedder, stub, refresh_every=3, seed_communities=0)
    with_channel = zep.search_facts(store, "u", "family", k=3)
    without = plain.search_facts(store, "u", "family", k=3)
    assert with_channel[0].score > without[0].score
    assert {h.fact.subject for h in with_channel} <= {"Anna", "Tom"}


def test_a_failed_community_call_falls_back_to_an_extractive_summary(embedder, stub, tmp_path) -> None:
    store = open_store(tmp_path / "m.sqlite")
    zep = _method(embedder, stub, refresh_every=3)
    zep.ingest(store, _session(*FAMILY[0]))
    # the model now answers the summary prompt with prose, twice (the retry quoting the error too)
    def prose_summaries(body: dict[str, Any]) -> str:
        summarise = body["messages"][0]["content"].startswith("You summarise")
        return "Sure! Here is a summary." if summarise else zep_responder(body)

    stub.responder = prose_summaries
    zep.ingest(store, _session(*FAMILY[1]))
    (community,) = zep.communities(store, "u")
    assert not community.by_llm and "Anna lives in Berlin" in community.summary
    stats = zep.stats(store, "u")
    assert stats["community_failures"] == 1 and stats["community_summaries"] == 1
    assert len(zep.graph(store, "u").episodes) == 4  # nothing lost


def test_a_new_process_rebuilds_the_graph_from_the_store_without_calling_again(stub, tmp_path) -> None:
    from memgas import Memory

    spec = f"openai:tiny@{stub.base_url}"
    with Memory(str(tmp_path / "z.db"), method="zep", llm=spec, llm_units=False) as mem:
        for sid, ts, text in SESSIONS:
            mem.add([{"role": "user", "content": text}, {"role": "assistant", "content": "Thanks for telling me."}],
                    user_id="u", session_id=sid, timestamp=ts)
        before = sorted((f.relation, f.object, f.invalid_at) for f in mem.kg.facts(user_id="u", include_invalid=True))
    calls = len(stub.requests)
    with Memory(str(tmp_path / "z.db"), method="zep", llm=spec, llm_units=False) as again:  # e.g. after a restart
        after = sorted((f.relation, f.object, f.invalid_at) for f in again.kg.facts(user_id="u", include_invalid=True))
    assert after == before and len(stub.requests) == calls  # every answer came from the default response cache
    assert (tmp_path / "llm-cache.sqlite").exists()  # (tests/conftest.py points the default at the test's folder)


@pytest.mark.slow
def test_the_command_line_adds_with_zep_and_prints_facts(stub, tmp_path, capsys) -> None:
    from memgas.cli.commands import main

    db, spec = str(tmp_path / "cli.db"), f"openai:tiny@{stub.base_url}"
    for sid, ts, text in SESSIONS[:2]:
        path = tmp_path / f"{sid}.json"
        path.write_text(json.dumps({"session_id": sid, "timestamp": ts, "messages": [
            {"role": "user", "content": text}, {"role": "assistant", "content": "Thanks for telling me."}]}))
        assert main(["add", str(path), "--user", "u", "--db", db, "--method", "zep", "--llm", spec]) == 0
    capsys.readouterr()
    assert main(["facts", "--user", "u", "--db", db, "--llm", spec]) == 0
    now = capsys.readouterr().out
    assert "user | lives in | London" in now and "Paris" not in now and "still valid" in now
    assert main(["facts", "--user", "u", "--db", db, "--llm", spec, "--all", "--json"]) == 0
    paris = next(f for f in json.loads(capsys.readouterr().out) if f["object"] == "Paris")
    assert paris["invalid_at"] == "2024-03-05T09:00:00" and paris["episodes"] == ["s1#0"]
    assert main(["facts", "--user", "u", "--db", db, "--llm", spec, "--as-of", "2024-02-01T00:00:00"]) == 0
    assert "user | lives in | Paris" in capsys.readouterr().out
    assert main(["facts", "--user", "u", "--db", db]) == 2  # zep without an LLM: one clear error line
    assert "needs an LLM" in capsys.readouterr().err
