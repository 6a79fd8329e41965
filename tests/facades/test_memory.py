"""The public facade end to end: real SQLite file, real embedding model."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from importlib import resources
from typing import Any

import numpy as np
import pytest

from memgas import Memory
from memgas.core.errors import DuplicateSessionError, EmbedderMismatchError, InvalidInputError, NotFoundError

DEMO = json.loads(resources.files("memgas").joinpath("data/demo_conversation.json").read_text("utf-8"))


def _fill(mem: Memory, user: str = "maya", n: int | None = None) -> None:
    for s in DEMO["sessions"][:n]:
        mem.add(s["messages"], user_id=user, session_id=s["session_id"], timestamp=s["timestamp"])


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("mem") / "demo.db")
    with Memory(path) as mem:
        _fill(mem)
    return path


def test_search_finds_paraphrased_facts(demo_db: str) -> None:
    with Memory(demo_db) as mem:
        found = 0
        for q in DEMO["queries"]:
            hits = mem.search(q["query"], user_id="maya", k=3)
            assert 1 <= len(hits) <= 3
            found += any(h.session_id in q["expected_sessions"] for h in hits)
        assert found >= len(DEMO["queries"]) - 1


def test_hit_explains_itself(demo_db: str) -> None:
    with Memory(demo_db) as mem:
        hits = mem.search("What is my corgi called?", user_id="maya", k=3)
    h = hits[0]
    assert set(h.weights) == {"session", "turn", "summary", "keyword", "lexical"}  # "corgi" is in the text
    assert abs(sum(h.weights.values()) - 1.0) < 1e-6
    assert h.timestamp is not None and h.turns and h.turns[0].text
    assert isinstance(h.via_association, bool)
    assert [x.score for x in hits] == sorted((x.score for x in hits), reverse=True)
    assert json.loads(json.dumps(h.to_dict()))["session_id"] == h.session_id


def test_reopen_searches_without_recomputing(demo_db: str) -> None:
    with Memory(demo_db) as mem:
        before = mem.stats("maya")
        hits = mem.search("Where does my sister live?", user_id="maya", k=2)
        # only the query was embedded: nothing stored was recomputed
        assert mem.embedder.misses == 1  # type: ignore[attr-defined]
        assert hits and mem.stats("maya")["units"] == before["units"]


def test_get_list_stats(demo_db: str) -> None:
    with Memory(demo_db) as mem:
        s = mem.get("2024-03-07-meal-prep", user_id="maya")
        assert s.messages[0].role == "user" and "cilantro" in json.dumps(s.to_dict()).lower()
        sessions = mem.list(user_id="maya")
        assert [x.session_id for x in sessions] == [x["session_id"] for x in DEMO["sessions"]]
        assert sessions.next_cursor is None
        assert [u.to_dict() for u in mem.users()] == [{"user_id": "maya", "sessions": len(DEMO["sessions"])}]
        st = mem.stats("maya")
        assert st["sessions"] == len(DEMO["sessions"]) and st["edges"] > 0
        with pytest.raises(NotFoundError):
            mem.get("nope", user_id="maya")


def test_delete_session_and_user(tmp_path) -> None:
    with Memory(str(tmp_path / "d.db")) as mem:
        _fill(mem, n=4)
        units = sum(mem.stats("maya")["units"].values())
        mem.delete("2024-03-07-meal-prep", user_id="maya")
        assert "2024-03-07-meal-prep" not in [x.session_id for x in mem.list(user_id="maya")]
        assert sum(mem.stats("maya")["units"].values()) < units
        hits = mem.search("foods I avoid, cilantro", user_id="maya", k=5)
        assert all(h.session_id != "2024-03-07-meal-prep" for h in hits)
        assert mem.delete(user_id="maya").deleted_sessions == 3
        assert mem.search("anything", user_id="maya") == [] and mem.list(user_id="maya") == []  # empty, not an error
        with pytest.raises(NotFoundError):
            mem.delete("2024-03-02-running", user_id="maya")


def test_tenant_isolation() -> None:
    with Memory() as mem:
        mem.add([{"role": "user", "content": "My locker code is 4417."}], user_id="alice", session_id="a1")
        mem.add([{"role": "user", "content": "I love sailing on Lake Como."}], user_id="bob", session_id="b1")
        hits = mem.search("What is my locker code?", user_id="bob", k=5)
        assert [h.session_id for h in hits] == ["b1"]
        with Memory() as alone:  # bob's graph is the one he gets without alice in the store
            alone.add([{"role": "user", "content": "I love sailing on Lake Como."}], user_id="bob", session_id="b1")
            assert mem.stats("bob")["edges"] == alone.stats("bob")["edges"] > 0
            assert mem.stats("bob")["units"] == alone.stats("bob")["units"]
        table = mem.store.load_units("bob")
        assert set(table.session_ids) == {"b1"}
        edges = mem.store.load_edges("bob")
        assert set(np.concatenate([edges.src, edges.dst]).tolist()) <= set(table.ids.tolist())


BAD = [
    ([], "empty"),
    ([{"role": "user"}], "content"),
    ([{"role": "user", "content": 42}], "string"),
    ([{"role": "wizard", "content": "hi"}], "role"),
    ([{"role": "user", "content": "x" * 2_000_001}], "limit"),
    (42, "list"),
]


@pytest.mark.parametrize("messages,needle", BAD)
def test_bad_input_is_refused_and_nothing_is_written(tmp_path, messages, needle) -> None:
    with Memory(str(tmp_path / "b.db")) as mem:
        mem.add([{"role": "user", "content": "hello"}], user_id="u", session_id="ok")
        before = mem.stats()
        with pytest.raises(InvalidInputError, match=needle):
            mem.add(messages, user_id="u", session_id="bad")
        assert mem.stats() == {**before, "calls": mem.stats()["calls"]}


def test_bad_timestamp_duplicate_and_unknown_user(tmp_path) -> None:
    with Memory(str(tmp_path / "c.db")) as mem:
        msgs = [{"role": "user", "content": "hello"}]
        with pytest.raises(InvalidInputError, match="timestamp"):
            mem.add(msgs, user_id="u", session_id="s", timestamp="next tuesday-ish")
        mem.add(msgs, user_id="u", session_id="s", timestamp="2024-01-02T03:04:05")
        with pytest.raises(DuplicateSessionError):
            mem.add(msgs, user_id="u", session_id="s")
        assert mem.stats("u")["sessions"] == 1
        assert mem.search("hello", user_id="nobody") == [] and mem.list(user_id="nobody") == []
        with pytest.raises(NotFoundError, match="no session"):
            mem.get("s", user_id="nobody")
        with pytest.raises(InvalidInputError):
            mem.search("   ", user_id="u")
        with pytest.raises(InvalidInputError):
            mem.add(msgs, user_id="bad id with spaces", session_id="x")


def test_refuses_to_mix_embedders(tmp_path) -> None:
    path = str(tmp_path / "e.db")
    with Memory(path) as mem:
        mem.add([{"role": "user", "content": "hello"}], user_id="u", session_id="s")
    with pytest.raises(EmbedderMismatchError, match="all-MiniLM"):
        Memory(path, embedder="openai:text-embedding-3-small@http://127.0.0.1:9/v1")


def test_association_is_incremental(tmp_path) -> None:
    """Adding session N+1 only adds edges that touch its own units; older edges stay as they were."""
    with Memory(str(tmp_path / "i.db")) as mem:
        _fill(mem, n=6)
        old = mem.store.load_edges("maya")
        old_set = {(int(a), int(b)): float(w) for a, b, w in zip(old.src, old.dst, old.weight)}
        s = DEMO["sessions"][6]
        mem.add(s["messages"], user_id="maya", session_id=s["session_id"], timestamp=s["timestamp"])
        table = mem.store.load_units("maya")
        new_units = {int(i) for i, sid in zip(table.ids, table.session_ids) if sid == s["session_id"]}
        new = mem.store.load_edges("maya")
        new_set = {(int(a), int(b)): float(w) for a, b, w in zip(new.src, new.dst, new.weight)}
        assert old_set.items() <= new_set.items()
        added = set(new_set) - set(old_set)
        assert added and all(a in new_units or b in new_units for a, b in added)
        cross = [e for e in added if not (e[0] in new_units and e[1] in new_units)]
        assert cross, "the new session was associated with nothing in its history"
        # the GMM accept set never links a unit to everything it was compared with
        per_unit: dict[int, int] = {}
        for a, b in cross:
            u = a if a in new_units else b
            per_unit[u] = per_unit.get(u, 0) + 1
        assert max(per_unit.values()) < len(table) // 2


def test_aware_timestamps_and_time_expressions(tmp_path) -> None:
    """A session stored with a zone is compared in UTC with the query's window (was a TypeError)."""
    msgs = [{"role": "user", "content": "I went kayaking on the river with my cousin."}]
    with Memory(str(tmp_path / "tz.db")) as mem:
        mem.add(msgs, user_id="u", session_id="march", timestamp="2023-03-01 10:00")  # naive
        mem.add(msgs, user_id="u", session_id="weekend", timestamp="2023-05-20T10:00:00Z")  # aware
        for when in ("2023-05-23T10:00:00+02:00", "2023-05-23 10:00", None):
            hits = mem.search("what did I do last weekend?", user_id="u", k=2,
                              query_time=when if when else datetime(2023, 5, 23, 8, tzinfo=timezone.utc))
            # same text, so only the time prior tells them apart: the aware session is in the window
            assert [h.session_id for h in hits] == ["weekend", "march"] and hits[0].score > hits[1].score
        assert mem.get("weekend", user_id="u").timestamp.isoformat() == "2023-05-20T10:00:00+00:00"  # zone kept for display


@pytest.mark.parametrize("kwargs,needle", [
    ({"session_id": ""}, "invalid session_id ''"),
    ({"session_id": 0}, "invalid session_id 0"),
    ({"session_id": False}, "invalid session_id False"),
    ({"user_id": "alice\n"}, "invalid user_id"),
    ({"timestamp": "0001-01-01T00:00:00+05:00"}, "out of range"),
    ({"timestamp": "9999-12-31T23:59:59-05:00"}, "out of range"),
    ({"metadata": ["a"]}, "metadata must be a JSON object"),
    ({"metadata": "a"}, "metadata must be a JSON object"),
    ({"metadata": {"a": float("nan")}}, "not a finite number"),
    ({"metadata": {"\udc80": 1}}, "not valid Unicode"),
    ({"messages": [{"role": "user", "content": "caf\udce9"}]}, "not valid Unicode"),
])
def test_add_refuses_bad_input_and_writes_nothing(tmp_path, kwargs, needle) -> None:
    args = {"messages": [{"role": "user", "content": "hello"}], "user_id": "u", "session_id": "s2", **kwargs}
    with Memory(str(tmp_path / "r.db")) as mem:
        mem.add([{"role": "user", "content": "hello"}], user_id="u", session_id="s1")
        before = mem.stats()
        with pytest.raises(InvalidInputError, match=needle) as e:
            mem.add(args.pop("messages"), **args)
        assert "\n" not in str(e.value)
        assert mem.stats() == {**before, "calls": mem.stats()["calls"]}
        assert [u.to_dict() for u in mem.users()] == [{"user_id": "u", "sessions": 1}]


def test_session_id_none_makes_one_and_metadata_round_trips(tmp_path) -> None:
    with Memory(str(tmp_path / "n.db")) as mem:
        meta = {"source": "chat", "tags": ("a", "b"), "n": {"deep": [1, 2.5, None, True]}}
        sid = mem.add([{"role": "user", "content": "hello"}], user_id="u", metadata=meta).session_id
        assert len(sid) == 32
        assert mem.get(sid, user_id="u").metadata == {"source": "chat", "tags": ["a", "b"],
                                                         "n": {"deep": [1, 2.5, None, True]}}


def test_reads_refuse_malformed_ids_and_bad_queries(tmp_path) -> None:
    with Memory(str(tmp_path / "q.db")) as mem:
        mem.add([{"role": "user", "content": "hello there"}], user_id="u", session_id="s")
        for bad in (5, None, {"s": 1}, b"s"):  # never a TypeError: the input is named
            for read in (mem.search, mem.context):
                with pytest.raises(InvalidInputError, match="exclude_sessions must be a list"):
                    read("hello", user_id="u", exclude_sessions=bad)
            with pytest.raises(InvalidInputError, match="exclude_sessions must be a list"):
                mem.profile(user_id="u", exclude_sessions=bad)
        for call in (lambda: mem.get("bad id", user_id="u"), lambda: mem.delete("s\n", user_id="u"),
                     lambda: mem.get("s", user_id=""), lambda: mem.list(user_id="u\n"),
                     lambda: mem.stats("a b"), lambda: mem.delete(0, user_id="u")):
            with pytest.raises(InvalidInputError, match="invalid (user|session)_id"):
                call()
        with pytest.raises(NotFoundError):  # well-formed but unknown: not found, not invalid
            mem.get("other", user_id="u")
        for kwargs, needle in (({"k": True}, "k must be"), ({"k": 1001}, "k must be"), ({"k": 0}, "k must be"),
                               ({"query": "q" * 10_001}, "over the limit"), ({"query": "hi \ud800"}, "Unicode"),
                               ({"query_time": "0001-01-02T00:00:00"}, "out of range")):
            with pytest.raises(InvalidInputError, match=needle):
                mem.search(**{"query": "last month", "user_id": "u", **kwargs})
        assert mem.search("q" * 10_000, user_id="u", k=1000)[0].session_id == "s"
        assert mem.list(user_id="u")[0].session_id == "s"


def test_stats_count_calls_and_their_time_including_a_batch(embedder) -> None:  # type: ignore[no-untyped-def]
    with Memory(None, embedder=embedder) as mem:
        mem.add([{"role": "user", "content": "I play chess on Sundays."}], user_id="u", session_id="a")
        mem.add_many([{"messages": [{"role": "user", "content": f"note {i}"}]} for i in range(3)], user_id="u")
        for _ in range(4):
            mem.search("chess", user_id="u")
        calls = mem.stats()["calls"]
    assert calls["add"]["count"] == 4 and calls["search"]["count"] == 4 and calls["answer"]["count"] == 0
    assert calls["add"]["seconds"] > 0 and calls["search"]["seconds"] > 0


def test_the_index_cache_is_sized_by_memory_and_reported(embedder: Any) -> None:
    with Memory(None, embedder=embedder, index_cache_mb=1) as mem:
        for user in ("a", "b", "c", "d"):
            for i in range(4):
                mem.add(f"{user}: note {i} about the greyhound Pixel and the kitchen paint " * 20, user_id=user)
            mem.search("greyhound", user_id=user)
        held = mem.stats()["index_cache"]
        assert held["limit_bytes"] == 2**20 and 0 < held["bytes"] <= 2**20 and 1 <= held["users"] <= 4
        assert mem.index_cache() == held and mem.search("greyhound", user_id="a")  # evicted or not: it answers
    with Memory(None, embedder=embedder, index_cache_mb=None) as mem:
        mem.add("one", user_id="u")
        mem.search("one", user_id="u")
        assert mem.index_cache() == {"users": 1, "bytes": 0, "limit_bytes": None, "builds": 1,
                                     "snapshot_loads": 0}  # counted by users; built by the search
    with Memory(None, embedder=embedder) as mem, Memory(mem.store, embedder=embedder) as other:
        for i in range(3):
            mem.add(f"note {i}", user_id="u")
        assert mem.method.flush(timeout=30)  # the snapshot is written in the background
        assert other.search("note", user_id="u") and other.index_cache()["snapshot_loads"] == 1  # read, not rebuilt
        assert other.index_cache()["builds"] == 0
    for bad in (0, -1, True, "10", float("nan")):
        with pytest.raises(InvalidInputError, match="index_cache_mb"):
            Memory(None, embedder=embedder, index_cache_mb=bad)
