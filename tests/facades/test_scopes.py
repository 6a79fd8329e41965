"""Scopes and filters in ``Memory``: agent and run ids, filtered search inside the ranking (MemGAS: exactly a
search over a store of the matching sessions alone, checked as a property), hits with their session's header,
pages of headers, delete by filter, on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any, Iterator

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memgas import Memory
from memgas.core.errors import InvalidInputError, NotFoundError
from memgas.core.types import GRANULARITIES, Edge, Unit
from memgas.embed.base import Embedder
from memgas.store import SQLiteStore, Store, open_store

TOPICS = [
    ("I adopted a greyhound called Pixel last spring.", "Greyhounds love short sprints."),
    ("My sister Ana moved to Lisbon for a job at a bakery.", "Lisbon has great pastries."),
    ("I am training for a half marathon in October.", "Build your long run slowly."),
    ("We repainted the kitchen a pale green colour.", "Pale green brightens a room."),
    ("My favourite board game is Terraforming Mars.", "It rewards long-term planning."),
    ("I started learning the cello in January.", "Scales every day help a lot."),
    ("Our team switched the backend to PostgreSQL.", "Plan the migration carefully."),
    ("I am allergic to peanuts, so I check labels.", "Many sauces hide peanuts."),
    ("The greyhound Pixel hurt a paw at the park.", "Rest and a vet visit are wise."),
    ("Ana sent me a box of pastries from Lisbon.", "That is a lovely present."),
    ("I ran 18 kilometres on Sunday for the marathon.", "Great progress on the long run."),
    ("The cello teacher says my bowing improved.", "Practice shows."),
]
QUERIES = ["How is my dog doing?", "Where does my sister live?", "How is the marathon training going?",
           "What music instrument do I play?", "What did we do with the database?"]
START = datetime(2026, 1, 1, tzinfo=timezone.utc)


def fill(mem: Memory, user: str = "u") -> None:
    for i, (said, reply) in enumerate(TOPICS):
        mem.add([{"role": "user", "content": said}, {"role": "assistant", "content": reply}], user_id=user,
                session_id=f"s{i}", timestamp=START + timedelta(days=7 * i), agent_id=("planner", "coder")[i % 2],
                run_id=f"r{i % 3}", metadata={"i": i, "project": ("apollo", "gemini")[i // 6], "tags": {"n": i % 4}})


@pytest.fixture(scope="module")
def filled(embedder: Embedder) -> Iterator[Memory]:
    with Memory(None, embedder=embedder) as mem:
        fill(mem)
        yield mem


def restricted_copy(store: Store, user: str, keep: set[str]) -> Store:
    """A new store holding only the sessions ``keep`` of ``user``, with their units (same vectors) and the
    edges between them, written in the original's order: what a filtered search is defined against."""
    copy = SQLiteStore(":memory:")
    copy.bind_embedder(store.embedder_id, store.load_units(user).vectors.shape[1])
    table, edges = store.load_units(user), store.load_edges(user)
    order = list(dict.fromkeys(table.session_ids))
    new_id: dict[int, int] = {}
    for sid in (s for s in order if s in keep):
        rows = [r for r in range(len(table)) if table.session_ids[r] == sid]
        mine = {int(table.ids[r]): k for k, r in enumerate(rows)}
        units = [Unit(sid, GRANULARITIES[table.granularity[r]], table.texts[r], int(table.turn_start[r]),
                      int(table.turn_end[r]), int(table.chunk[r]), table.vectors[r]) for r in rows]
        ref = {**new_id, **{i: -(k + 1) for i, k in mine.items()}}
        own = [Edge(ref[int(a)], ref[int(b)], float(w)) for a, b, w in zip(edges.src, edges.dst, edges.weight)
               if (int(a) in mine or int(b) in mine) and int(a) in ref and int(b) in ref]
        ids = copy.add_session(store.get_session(user, sid), units, own)
        new_id.update({i: ids[k] for i, k in mine.items()})
    return copy


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(keep=st.sets(st.integers(0, len(TOPICS) - 1), min_size=1), query=st.sampled_from(QUERIES),
       k=st.integers(1, 6))
def test_a_filtered_memgas_search_is_a_search_over_the_matching_sessions_alone(
        filled: Memory, embedder: Embedder, keep: set[int], query: str, k: int) -> None:
    when = START + timedelta(days=100)
    got = filled.search(query, user_id="u", k=k, query_time=when, filters={"i": {"$in": sorted(keep)}})
    with Memory(restricted_copy(filled.store, "u", {f"s{i}" for i in keep}), embedder=embedder) as alone:
        want = alone.search(query, user_id="u", k=k, query_time=when)
    assert len(got) == min(k, len(want))
    assert [h.session_id for h in got] == [h.session_id for h in want]
    assert np.allclose([h.score for h in got], [h.score for h in want], rtol=1e-5, atol=1e-7)
    assert [[t.index for t in h.turns] for h in got] == [[t.index for t in h.turns] for h in want]
    for a, b in zip(got, want):
        assert a.weights == pytest.approx(b.weights, abs=1e-4)


def test_a_filter_that_keeps_few_sessions_still_returns_k_of_them(filled: Memory) -> None:
    unfiltered = [h.session_id for h in filled.search("How is my dog doing?", user_id="u", k=3)]
    assert "s0" in unfiltered  # the greyhound: apollo, which the filter below leaves out
    hits = filled.search("How is my dog doing?", user_id="u", k=3, filters={"project": "gemini"})
    assert len(hits) == 3 and {h.metadata["project"] for h in hits} == {"gemini"}
    assert filled.search("dog", user_id="u", filters={"project": "nothing"}) == []


@pytest.mark.parametrize("method", ["bm25", "dense-turn"])
def test_other_methods_rank_the_matching_sessions_as_unfiltered(embedder: Embedder, method: str) -> None:
    with Memory(None, embedder=embedder, method=method) as mem:
        fill(mem)
        full = [h.session_id for h in mem.search("Pixel the greyhound, Lisbon and the cello", user_id="u", k=12)]
        got = [h.session_id for h in mem.search("Pixel the greyhound, Lisbon and the cello", user_id="u", k=3,
                                                filters={"agent_id": "coder"})]
        assert got == [sid for sid in full if int(sid[1:]) % 2 == 1][:3] and len(got) == 3


def test_hits_carry_their_sessions_header(filled: Memory) -> None:
    hit = filled.search("Where does my sister live?", user_id="u", k=1)[0]
    assert hit.session_id == "s1" and hit.agent_id == "coder" and hit.run_id == "r1"
    assert hit.metadata == {"i": 1, "project": "apollo", "tags": {"n": 1}}
    assert hit.created_at is not None and hit.created_at.tzinfo is not None
    assert set(hit.channels) <= {"session", "turn", "summary", "keyword", "lexical"} and hit.channels["turn"] > 0
    assert sum(hit.channels.values()) == pytest.approx(1.0) and min(hit.channels.values()) > 0  # shares of it
    last = filled.search("Where does my sister live?", user_id="u", k=12)[-1]
    assert last.channels == {}  # a session no channel singles out has no evidence to share out, not zeros
    assert hit.to_dict()["agent_id"] == "coder" and type(hit).from_dict(hit.to_dict()).to_dict() == hit.to_dict()
    # s1 is run r1; s9 (run r0) holds Lisbon too, less relevant than the floor: no floor here
    text = filled.context("Where does my sister live?", user_id="u", k=3, filters={"run_id": "r0"}, min_score=0.0)
    assert "· s9 · user: Ana sent me a box of pastries from Lisbon." in text and "· s1 ·" not in text
    assert filled.context("Where does my sister live?", user_id="u", k=3, filters={"run_id": "r0"}) == ""


def test_filters_combine_with_excluded_sessions(filled: Memory) -> None:
    hits = filled.search("Lisbon pastries", user_id="u", k=5, filters={"project": "gemini"},
                         exclude_sessions=["s9"])
    assert hits and all(h.session_id != "s9" and h.metadata["project"] == "gemini" for h in hits)


def test_pages_walk_every_matching_session_once_in_order_while_sessions_come_and_go(embedder: Embedder) -> None:
    with Memory(None, embedder=embedder, method="bm25") as mem:
        fill(mem)
        page = mem.list(user_id="u", limit=5, order="newest")
        assert [s.session_id for s in page] == ["s11", "s10", "s9", "s8", "s7"]
        assert page[0].preview == TOPICS[11][0] and page[0].agent_id == "coder" and page[0].run_id == "r2"
        mem.delete("s7", user_id="u")  # the cursor's own session goes: the next page starts after its place
        mem.add("I bought a new cello bow.", user_id="u", session_id="late", timestamp=START - timedelta(days=1))
        rest = mem.list(user_id="u", limit=100, order="newest", cursor=page[-1].cursor)
        assert [s.session_id for s in rest] == ["s6", "s5", "s4", "s3", "s2", "s1", "s0", "late"]
        oldest = mem.list(user_id="u", filters={"agent_id": "planner"}, limit=2)
        nxt = mem.list(user_id="u", filters={"agent_id": "planner"}, limit=2, cursor=oldest[-1].cursor)
        assert [s.session_id for s in oldest + nxt] == ["s0", "s2", "s4", "s6"]
        assert [s.session_id for s in mem.list(user_id="u")][:2] == ["late", "s0"]
        mem.add("undated", user_id="u", session_id="undated")
        mem.add_many([{"session_id": "nodate", "timestamp": None, "messages": "no date at all"}], user_id="u")
        assert [s.session_id for s in mem.list(user_id="u", order="newest")][-2:] == ["late", "nodate"]
        with pytest.raises(InvalidInputError, match="order 'newest', not 'oldest'"):
            mem.list(user_id="u", cursor=page[0].cursor)
        for bad in ("x", "eyJ4IjogMX0", page[0].cursor[:-3] + "AAA"):
            with pytest.raises(InvalidInputError, match="cursor"):
                mem.list(user_id="u", cursor=bad, order="newest")
        for kwargs in ({"limit": 0}, {"limit": True}, {"order": "random"}):
            with pytest.raises(InvalidInputError):
                mem.list(user_id="u", **kwargs)
        with pytest.raises(TypeError, match="user_id"):
            mem.list(limit=3)  # type: ignore[call-arg]
        assert mem.list(user_id="nobody", limit=3) == []


def test_scope_ids_on_add_add_many_and_append(embedder: Embedder) -> None:
    with Memory(None, embedder=embedder, method="bm25") as mem:
        mem.add_many([{"messages": "one", "session_id": "a", "agent_id": "x", "run_id": "r"}], user_id="u")
        assert mem.get("a", user_id="u").agent_id == "x" and mem.get("a", user_id="u").run_id == "r"
        mem.append("live", user_id="u", session_id="live", agent_id="x")
        mem.append("more", user_id="u", session_id="live")  # left out: the stored scope stays
        mem.append("again", user_id="u", session_id="live", agent_id="x")
        assert mem.get("live", user_id="u").agent_id == "x" and len(mem.get("live", user_id="u").messages) == 3
        with pytest.raises(InvalidInputError, match="has agent_id 'x', not 'y'"):
            mem.append("moved", user_id="u", session_id="live", agent_id="y")
        assert len(mem.get("live", user_id="u").messages) == 3  # the refusal wrote nothing
        with pytest.raises(InvalidInputError, match="invalid agent_id"):
            mem.add("bad", user_id="u", agent_id="no spaces")
        with pytest.raises(InvalidInputError, match="session 0: unknown keys"):
            mem.add_many([{"messages": "m", "agent": "x"}], user_id="u")


def test_a_messages_metadata_round_trips(embedder: Embedder) -> None:
    with Memory(None, embedder=embedder, method="bm25") as mem:
        item = {"type": "function_call", "call_id": "c1", "arguments": '{"city": "Lisbon"}'}
        mem.add([{"role": "user", "content": "weather?", "metadata": {"raw": item}},
                 {"role": "assistant", "content": "sunny"}], user_id="u", session_id="s")
        messages = mem.get("s", user_id="u").messages
        assert messages[0].metadata == {"raw": item} and messages[1].metadata is None
        with pytest.raises(InvalidInputError, match="message 0: metadata must be a JSON object"):
            mem.add([{"role": "user", "content": "x", "metadata": ["not", "an", "object"]}], user_id="u")


def test_delete_by_filter_removes_exactly_the_matching_sessions(embedder: Embedder) -> None:
    with Memory(None, embedder=embedder) as mem:
        fill(mem)
        assert mem.delete(user_id="u", filters={"run_id": "r0", "project": "apollo"}).to_dict() == {
            "user_id": "u", "deleted_sessions": 2}  # s0 and s3
        left = {s.session_id for s in mem.list(user_id="u")}
        assert left == {f"s{i}" for i in range(12)} - {"s0", "s3"}
        assert all(h.session_id not in ("s0", "s3") for h in mem.search("greyhound Pixel", user_id="u", k=12))
        assert mem.delete(user_id="u", filters={"project": "none"}).deleted_sessions == 0
        with pytest.raises(InvalidInputError, match="empty filter"):
            mem.delete(user_id="u", filters={})
        with pytest.raises(InvalidInputError, match="not both"):
            mem.delete("s1", user_id="u", filters={"i": 1})
        with pytest.raises(NotFoundError):
            mem.delete(user_id="nobody", filters={"i": 1})
        assert len(mem.list(user_id="u")) == 10


def test_a_filter_never_reaches_another_user(embedder: Embedder) -> None:
    with Memory(None, embedder=embedder) as mem:
        fill(mem, "alice")
        mem.add("My greyhound is called Pixel.", user_id="bob", session_id="s0", metadata={"i": 0})
        for spec in ({"session_id": "s1"}, {"user_id": "alice"}, {"$not": {"i": 0}}, {"metadata.user_id": "alice"}):
            assert all(h.session_id == "s0" for h in mem.search("greyhound", user_id="bob", k=10, filters=spec))
            assert {s.session_id for s in mem.list(user_id="bob", filters=spec)} <= {"s0"}
        assert mem.delete(user_id="bob", filters={"$not": {"i": 99}}).deleted_sessions == 1
        assert len(mem.list(user_id="alice")) == 12


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_scopes_and_filters_on_both_stores(backend: str, embedder: Embedder, request: pytest.FixtureRequest,
                                           tmp_path: Any) -> None:
    url = request.getfixturevalue("pg_url") if backend == "postgres" else str(tmp_path / "m.db")
    with Memory(open_store(url), embedder=embedder) as mem:
        fill(mem)
        hits = mem.search("How is my dog doing?", user_id="u", k=2, filters={"tags.n": {"$in": [0, 1]}})
        assert len(hits) == 2 and all(h.metadata["tags"]["n"] in (0, 1) for h in hits)
        assert hits[0].agent_id in ("planner", "coder") and hits[0].created_at is not None
        page = mem.list(user_id="u", filters={"agent_id": "coder"}, limit=4, order="newest")
        assert [s.session_id for s in page] == ["s11", "s9", "s7", "s5"] and page[0].preview == TOPICS[11][0]
        mem.add([{"role": "assistant", "content": "hello first"}, {"role": "user", "content": "the user line"}],
                user_id="u", session_id="mixed", metadata={"i": 99}, agent_id="a", run_id="b")
        row = mem.list(user_id="u", filters={"i": 99})[0]
        assert row.preview == "the user line" and row.agent_id == "a" and row.run_id == "b"
        assert mem.delete(user_id="u", filters={"agent_id": "a"}).deleted_sessions == 1


def test_a_store_of_schema_3_is_migrated_and_its_sessions_have_no_scope(tmp_path: Any, embedder: Embedder) -> None:
    import sqlite3

    from memgas.store.sqlite import MIGRATIONS

    db = tmp_path / "v3.db"
    conn = sqlite3.connect(db)
    for statements in MIGRATIONS[:3]:
        for statement in statements:
            conn.execute(statement)
    conn.execute("INSERT INTO sessions (user_id, session_id, timestamp, metadata, n_messages, n_turns, created_at)"
                 " VALUES ('u', 'old', NULL, '{\"k\": 1}', 1, 1, '2025-01-01T00:00:00+00:00')")
    conn.execute("INSERT INTO messages (session_pk, position, role, name, content) VALUES (1, 0, 'user', NULL, 'hi')")
    conn.execute("INSERT INTO users (user_id, version) VALUES ('u', 1)")
    conn.execute("PRAGMA user_version = 3")
    conn.commit()
    conn.close()
    store = SQLiteStore(db)
    assert store.schema_upgrade == (3, len(MIGRATIONS))
    session = store.get_session("u", "old")
    assert session.agent_id is None and session.messages[0].metadata is None
    info = store.list_sessions("u", previews=True)[0]
    assert info.preview == "hi" and info.metadata == {"k": 1} and info.run_id is None
    assert store.list_sessions("u")[0].preview == "" and store.sessions_since("u", 0) == ([], 1)  # written before 4
    store.close()


def test_the_header_catalogue_follows_every_write_of_this_and_other_processes(tmp_path: Any,
                                                                               embedder: Embedder) -> None:
    db = tmp_path / "c.db"
    with Memory(db, embedder=embedder, method="bm25") as mem, Memory(db, embedder=embedder, method="bm25") as other:
        fill(mem)
        spec = {"project": "gemini"}

        def listed() -> list[tuple[str, Any, Any]]:
            return [(s.session_id, s.metadata, s.agent_id) for s in mem.list(user_id="u", filters=spec)]

        assert len(listed()) == 6
        before = mem._catalog._cache.builds
        mem.append("one more line", user_id="u", session_id="s6", metadata={"note": "x"})
        other.add("from another process", user_id="u", session_id="x1", metadata={"project": "gemini"},
                  agent_id="bot")
        other.append("appended elsewhere", user_id="u", session_id="s7", metadata={"project": "apollo"})
        got = listed()
        assert ("x1", {"project": "gemini"}, "bot") in got and all(sid != "s7" for sid, _, _ in got)
        assert ("s6", {"i": 6, "project": "gemini", "tags": {"n": 2}, "note": "x"}, "planner") in got
        assert mem._catalog._cache.builds == before  # brought up to date from the rows written, not reread
        other.delete("s8", user_id="u")
        assert [sid for sid, _, _ in listed()] == [sid for sid, _, _ in got if sid != "s8"]
        with Memory(db, embedder=embedder, method="bm25") as fresh:
            assert sorted(map(str, listed())) == sorted(map(str, [(s.session_id, s.metadata, s.agent_id)
                                                                  for s in fresh.list(user_id="u", filters=spec)]))
