"""The store contract, run against both backends (a real SQLite file and a real PostgreSQL database; one
parametrised suite), then what is particular to each: SQLite's files, WAL and pragmas; PostgreSQL's migrations,
user-scoped statements and many processes writing at once."""

from __future__ import annotations

import contextlib
import re
import sqlite3
import subprocess
import sys
import threading
import time
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memgas.core.errors import (
    DuplicateSessionError,
    EmbedderMismatchError,
    InvalidInputError,
    MemgasError,
    NotFoundError,
)
from memgas.core.types import Edge, Message, Session, Unit
from memgas.core.validate import make_session
from memgas.kernels.quantize import from_half, to_half
from memgas.store import SQLiteStore, Store, UnitTable, migrate, open_store
from memgas.store.base import PREVIEW_CHARS
from memgas.store.sqlite import _FORGET_WAIT, SCHEMA_VERSION

try:
    import psycopg

    _DB_ERRORS: tuple[type[Exception], ...] = (sqlite3.DatabaseError, psycopg.Error)
except ImportError:  # the PostgreSQL tests skip (conftest.pg_cluster says why)
    _DB_ERRORS = (sqlite3.DatabaseError,)

DIM = 8
EMBEDDER = "test-embedder"


def _vectors(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.standard_normal((n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _session(user: str, sid: str, n_turns: int = 2, timestamp: str | None = None, **metadata: object) -> Session:
    messages = []
    for t in range(n_turns):
        messages.append({"role": "user", "content": f"{sid} question {t}"})
        messages.append({"role": "assistant", "content": f"{sid} answer {t}", "name": "bot"})
    return make_session(messages, user_id=user, session_id=sid, timestamp=timestamp, metadata=metadata)


def _units(session: Session, rng: np.random.Generator) -> list[Unit]:
    """A session unit, one unit per turn and a keyword unit, with random unit vectors."""
    n = len(session.turns)
    specs = [("session", 0, n)] + [("turn", t, t + 1) for t in range(n)] + [("keyword", 0, n)]
    vecs = _vectors(rng, len(specs))
    return [
        Unit(session_id=session.session_id, granularity=g, text=f"{session.session_id}/{g}/{s}", turn_start=s,
             turn_end=e, vector=v)
        for (g, s, e), v in zip(specs, vecs)
    ]


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "sub" / "memory.db"


@pytest.fixture(params=["sqlite", "postgres"])
def target(request: pytest.FixtureRequest, db: Path) -> str:
    """What a store is opened from: a SQLite file's path, or the URL of a fresh PostgreSQL database."""
    return str(db) if request.param == "sqlite" else request.getfixturevalue("pg_url")


@pytest.fixture
def store(target: str):
    with open_store(target) as s:
        s.bind_embedder(EMBEDDER, DIM)
        yield s


@pytest.fixture
def sqlite_store(db: Path):
    with SQLiteStore(db) as s:
        s.bind_embedder(EMBEDDER, DIM)
        yield s


def _sql(store: Store, statement: str) -> list[tuple]:
    """Run one statement on the store's database from outside the store's transactions (a SQLite temp
    trigger must live on the write connection, so there it runs on that)."""
    if isinstance(store, SQLiteStore):
        return store._conn.execute(statement).fetchall()
    with psycopg.connect(store._url, autocommit=True) as conn:
        cur = conn.execute(statement)
        return cur.fetchall() if cur.description else []


def _fail_edge_inserts(store: Store) -> None:
    """Make every insert of a unit with edges fail (after the session and message rows of its call were written)."""
    if isinstance(store, SQLiteStore):
        _sql(store, "CREATE TEMP TRIGGER fail BEFORE INSERT ON units WHEN NEW.links IS NOT NULL"
                    " BEGIN SELECT RAISE(ABORT, 'disk on fire'); END")
    else:
        _sql(store, "CREATE FUNCTION fail() RETURNS trigger LANGUAGE plpgsql AS "
                    "$$ BEGIN RAISE EXCEPTION 'disk on fire'; END $$")
        _sql(store, "CREATE TRIGGER fail BEFORE INSERT ON units FOR EACH ROW WHEN (NEW.links IS NOT NULL)"
                    " EXECUTE FUNCTION fail()")


def _repair_edge_inserts(store: Store) -> None:
    _sql(store, "DROP TRIGGER fail" if isinstance(store, SQLiteStore) else "DROP TRIGGER fail ON units")


def _n_messages(store: Store) -> int:
    return _sql(store, "SELECT count(*) FROM messages")[0][0]


def _snapshot(store: Store) -> tuple:
    """Everything observable about the store, to check that a failed call changed nothing."""
    users = store.list_users()
    stats = store.stats()
    del stats["file_bytes"]  # the WAL may grow or be checkpointed without any change of content
    return (
        stats,
        users,
        {u: (store.version(u), [s.session_id for s in store.list_sessions(u)], store.load_units(u).ids.tolist(),
             store.load_edges(u).src.tolist()) for u in users},
    )


def test_round_trip_through_a_reopened_store(target: str, rng: np.random.Generator) -> None:
    s1 = _session("alice", "s1", 2, "2023/05/20 (Sat) 07:47", topic="cats", tags=["a", "b"])
    s2 = _session("alice", "s2", 3, "2023-05-21T09:00:00+02:00")
    u1, u2 = _units(s1, rng), _units(s2, rng)
    with open_store(target) as store:
        assert store.embedder_id is None
        store.bind_embedder(EMBEDDER, DIM)
        ids1 = store.add_session(s1, u1, [Edge(-1, -2, 0.5)])
        ids2 = store.add_session(s2, u2, [Edge(ids1[0], -1, 0.75), Edge(-3, ids1[2], 0.25)])
    assert ids1 == sorted(ids1) and ids2[0] > ids1[-1]

    with open_store(target) as store:
        assert store.embedder_id == EMBEDDER
        table = store.load_units("alice")
        assert table.ids.tolist() == ids1 + ids2
        assert table.session_ids == ("s1",) * len(u1) + ("s2",) * len(u2)
        assert table.texts == tuple(u.text for u in u1 + u2)
        assert table.granularity.dtype == np.int8 and table.vectors.dtype == np.float32
        assert table.vectors.shape == (len(u1) + len(u2), DIM)
        stored = np.stack([u.vector for u in u1 + u2])
        np.testing.assert_array_equal(table.vectors, from_half(to_half(stored)))  # the float16 values, exactly
        assert 0 < np.abs(table.vectors - stored).max() <= 2**-12
        assert table.mask("turn").sum() == 5 and table.mask("summary").sum() == 0
        np.testing.assert_array_equal(table.turn_start[table.mask("turn")], [0, 1, 0, 1, 2])
        np.testing.assert_array_equal(table.turn_end[table.mask("turn")], [1, 2, 1, 2, 3])

        edges = store.load_edges("alice")
        got = sorted(zip(edges.src.tolist(), edges.dst.tolist(), edges.weight.tolist()))
        want = sorted([(ids1[0], ids1[1], 0.5), (ids1[0], ids2[0], 0.75), (ids1[2], ids2[2], 0.25)])
        assert got == want
        assert (edges.src < edges.dst).all()

        assert store.get_session("alice", "s1") == s1
        assert store.get_session("alice", "s2") == s2
        assert store.get_session("alice", "s2").timestamp == datetime(2023, 5, 21, 7, 0, tzinfo=timezone.utc)


def test_list_sessions_orders_by_timestamp_then_insertion(store: Store) -> None:
    for sid, ts in [("late", "2024-01-02"), ("none1", None), ("early", "2023-01-01T00:00:00"),
                    ("none2", None), ("mid", "2023-06-01T12:00:00.500000")]:
        store.add_session(_session("bob", sid, timestamp=ts), [], [])
    infos = store.list_sessions("bob")
    assert [i.session_id for i in infos] == ["early", "mid", "late", "none1", "none2"]
    assert infos[0].n_messages == 4 and infos[0].n_turns == 2
    assert infos[0].created_at.tzinfo is not None
    assert store.list_sessions("nobody") == []


def test_duplicate_session_changes_nothing(store: Store, rng: np.random.Generator) -> None:
    s = _session("alice", "s1")
    store.add_session(s, _units(s, rng), [Edge(-1, -2, 0.5)])
    before = _snapshot(store)
    other = _session("alice", "s1", 3)
    with pytest.raises(DuplicateSessionError, match="s1"):
        store.add_session(other, _units(other, rng), [Edge(-1, -2, 0.5)])
    assert _snapshot(store) == before
    # The same session id under another user is a different session.
    store.add_session(_session("bob", "s1"), [], [])
    assert store.list_users() == ["alice", "bob"]


def test_embedder_binding(target: str, rng: np.random.Generator) -> None:
    with open_store(target) as store:
        s = _session("alice", "s1")
        with pytest.raises(InvalidInputError, match="bind_embedder"):
            store.add_session(s, _units(s, rng), [])
        store.bind_embedder(EMBEDDER, DIM)
        store.bind_embedder(EMBEDDER, DIM)  # same binding again is fine
        store.add_session(s, _units(s, rng), [])
    with open_store(target) as store:
        with pytest.raises(EmbedderMismatchError, match="test-embedder.*other-model"):
            store.bind_embedder("other-model", DIM)
        with pytest.raises(EmbedderMismatchError):
            store.bind_embedder(EMBEDDER, DIM * 2)
        assert store.embedder_id == EMBEDDER
        with pytest.raises(InvalidInputError):
            store.bind_embedder("", DIM)


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda u: setattr(u, "vector", None), "no vector"),
        (lambda u: setattr(u, "vector", np.ones(DIM + 1, np.float32)), "8 floats"),
        (lambda u: setattr(u, "vector", np.full(DIM, np.nan, np.float32)), "NaN"),
        (lambda u: setattr(u, "session_id", "other"), "belongs to session"),
        (lambda u: setattr(u, "granularity", "paragraph"), "granularity"),
        (lambda u: setattr(u, "turn_end", 9), "do not fit"),
    ],
)
def test_invalid_unit_writes_nothing(store: Store, rng: np.random.Generator, change, message: str) -> None:
    s = _session("alice", "s1")
    units = _units(s, rng)
    change(units[2])
    with pytest.raises(InvalidInputError, match=message):
        store.add_session(s, units, [])
    assert not store.has_user("alice") and store.stats()["sessions"] == 0


def test_edges_are_checked_and_tenant_isolated(store: Store, rng: np.random.Generator) -> None:
    sa, sb = _session("alice", "a1"), _session("bob", "b1")
    ids_a = store.add_session(sa, _units(sa, rng), [])
    ids_b = store.add_session(sb, _units(sb, rng), [])
    s2 = _session("alice", "a2")
    before = _snapshot(store)
    for edges, message in [
        ([Edge(-1, ids_b[0], 0.5)], "not a unit of user 'alice'"),  # bob's unit
        ([Edge(-1, max(ids_b) + 100, 0.5)], "not a unit of user 'alice'"),  # no such unit
        ([Edge(-1, -99, 0.5)], "neither"),  # past this call's units
        ([Edge(0, -1, 0.5)], "neither"),
        ([Edge(-2, -2, 0.5)], "itself"),
        ([Edge(-1, -2, float("nan"))], "weight"),
        ([Edge(-1, -2, 0.0)], "weight"),
    ]:
        with pytest.raises(InvalidInputError, match=message):
            store.add_session(s2, _units(s2, rng), edges)
        assert _snapshot(store) == before
    # Bob's edges never see alice's units and the other way round.
    new = store.add_session(s2, _units(s2, rng), [Edge(ids_a[1], -1, 0.5), Edge(-1, ids_a[1], 0.9)])
    assert store.load_edges("bob").src.size == 0
    edges = store.load_edges("alice")
    assert (edges.src.tolist(), edges.dst.tolist()) == ([ids_a[1]], [new[0]])
    assert edges.weight.tolist() == [pytest.approx(0.9)]  # the pair given twice keeps the larger weight


def test_delete_session_cascades_across_sessions(store: Store, rng: np.random.Generator) -> None:
    s1, s2, s3 = (_session("alice", f"s{i}") for i in (1, 2, 3))
    ids1 = store.add_session(s1, _units(s1, rng), [Edge(-1, -2, 0.5)])
    ids2 = store.add_session(s2, _units(s2, rng), [Edge(-1, ids1[0], 0.5), Edge(-1, -2, 0.5)])
    ids3 = store.add_session(s3, _units(s3, rng), [Edge(-1, ids2[0], 0.5), Edge(-1, ids1[1], 0.5)])
    v = store.version("alice")
    store.delete_session("alice", "s1")
    assert store.version("alice") > v
    table = store.load_units("alice")
    assert table.ids.tolist() == ids2 + ids3 and set(table.session_ids) == {"s2", "s3"}
    edges = store.load_edges("alice")
    remaining = set(zip(edges.src.tolist(), edges.dst.tolist()))
    assert remaining == {(ids2[0], ids2[1]), (ids2[0], ids3[0])}  # every edge touching s1 is gone
    with pytest.raises(NotFoundError, match="s1"):
        store.get_session("alice", "s1")
    assert store.get_session("alice", "s2") == s2
    with pytest.raises(NotFoundError):
        store.delete_session("alice", "s1")
    stats = store.stats("alice")
    assert (stats["sessions"], stats["messages"], stats["edges"]) == (2, 8, 2)
    # Unit ids are never reused, even for the highest deleted one.
    store.delete_session("alice", "s3")
    s4 = _session("alice", "s4")
    assert min(store.add_session(s4, _units(s4, rng), [])) > max(ids3)


def test_delete_user_and_versions(store: Store, rng: np.random.Generator) -> None:
    assert store.version("alice") == 0
    seen = {0}
    for i in range(3):
        s = _session("alice", f"s{i}")
        store.add_session(s, _units(s, rng), [Edge(-1, -2, 0.5)])
        v = store.version("alice")
        assert v not in seen
        seen.add(v)
    sb = _session("bob", "b1")
    store.add_session(sb, _units(sb, rng), [])
    v_bob = store.version("bob")
    assert store.version("alice") == v  # bob's write leaves alice's version alone

    assert store.delete_user("alice") == 3
    assert not store.has_user("alice") and store.list_users() == ["bob"]
    assert len(store.load_units("alice")) == 0 and len(store.load_edges("alice")) == 0
    assert store.list_sessions("alice") == [] and store.version("alice") == 0
    assert store.version("bob") == v_bob and len(store.load_units("bob")) == len(_units(sb, rng))
    with pytest.raises(NotFoundError, match="alice"):
        store.delete_user("alice")
    # A re-created user never gets back a version number a cache may still hold.
    store.add_session(_session("alice", "s0"), [], [])
    assert store.version("alice") not in seen
    # Deleting the last session of a user removes the user too.
    store.delete_session("bob", "b1")
    assert store.list_users() == ["alice"] and store.version("bob") == 0


def test_stats_counts(store: Store, rng: np.random.Generator) -> None:
    s1, s2 = _session("alice", "s1", 2), _session("alice", "s2", 3)
    sb = _session("bob", "b1", 1)
    store.add_session(s1, _units(s1, rng), [Edge(-1, -2, 0.5)])
    store.add_session(s2, _units(s2, rng), [Edge(-1, -2, 0.5), Edge(-1, -3, 0.4)])
    store.add_session(sb, _units(sb, rng), [])
    stats = store.stats()
    assert stats["users"] == 2 and stats["sessions"] == 3
    assert stats["turns"] == 6 and stats["messages"] == 12
    assert stats["units"] == {"session": 3, "turn": 6, "summary": 0, "keyword": 3}
    assert stats["edges"] == 3 and stats["embedder_id"] == EMBEDDER and stats["dim"] == DIM
    assert stats["file_bytes"] > 0 and stats["path"] == (None if store.path is None else str(store.path))
    alice = store.stats("alice")
    assert (alice["users"], alice["sessions"], alice["turns"], alice["edges"]) == (1, 2, 5, 3)
    assert alice["units"]["turn"] == 5
    assert store.stats("nobody")["units"] == {"session": 0, "turn": 0, "summary": 0, "keyword": 0}


def test_failure_mid_transaction_rolls_back(store: Store, rng: np.random.Generator,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    s1 = _session("alice", "s1")
    ids1 = store.add_session(s1, _units(s1, rng), [])
    before = _snapshot(store)
    s2 = _session("alice", "s2")
    # A database error after the session, messages and units rows were written.
    _fail_edge_inserts(store)
    with pytest.raises(_DB_ERRORS, match="disk on fire"):
        store.add_session(s2, _units(s2, rng), [Edge(-1, ids1[0], 0.5)])
    _repair_edge_inserts(store)
    assert _snapshot(store) == before
    # A Python error at the very end of the write.
    monkeypatch.setattr(type(store), "_touch", staticmethod(lambda conn, user: 1 / 0))
    with pytest.raises(ZeroDivisionError):
        store.add_session(s2, _units(s2, rng), [])
    monkeypatch.undo()
    assert _snapshot(store) == before
    assert _n_messages(store) == len(s1.messages)
    # The store still works.
    store.add_session(s2, _units(s2, rng), [Edge(-1, ids1[0], 0.5)])
    assert [i.session_id for i in store.list_sessions("alice")] == ["s1", "s2"]


_CRASH = """
import os, sys
import numpy as np
from memgas.core.types import Unit
from memgas.core.validate import make_session
from memgas.store import open_store
store = open_store(sys.argv[1])
type(store)._touch = staticmethod(lambda conn, user: os._exit(3))  # die with the transaction open
s = make_session([{"role": "user", "content": "hi"}], user_id="alice", session_id="crash")
v = np.ones(8, np.float32) / np.sqrt(8)
store.add_session(s, [Unit("crash", "turn", "hi", 0, 1, vector=v)], [])
"""


def test_process_crash_mid_write_leaves_store_consistent(target: str, rng: np.random.Generator) -> None:
    with open_store(target) as store:
        store.bind_embedder(EMBEDDER, DIM)
        s = _session("alice", "s1")
        store.add_session(s, _units(s, rng), [])
        before = _snapshot(store)
    done = subprocess.run([sys.executable, "-c", _CRASH, target], capture_output=True, text=True, timeout=60)
    assert done.returncode == 3, done.stderr
    with open_store(target) as store:
        assert _snapshot(store) == before
        if isinstance(store, SQLiteStore):
            assert store._conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        s2 = _session("alice", "s2")
        store.add_session(s2, _units(s2, rng), [])
        assert store.stats()["sessions"] == 2


def test_threads_share_one_store(store: Store, rng: np.random.Generator) -> None:
    sessions = [_session(f"user{i % 3}", f"s{i}") for i in range(24)]
    units = [_units(s, rng) for s in sessions]
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            for i in range(k, len(sessions), 4):
                store.add_session(sessions[i], units[i], [Edge(-1, -2, 0.5)])
                store.load_units(sessions[i].user_id)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    stats = store.stats()
    assert stats["sessions"] == 24 and stats["edges"] == 24 and stats["users"] == 3


def test_schema_version_and_foreign_files(tmp_path: Path) -> None:
    newer = tmp_path / "newer.db"
    SQLiteStore(newer).close()
    with sqlite3.connect(newer) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(InvalidInputError, match="newer than this memgas"):
        SQLiteStore(newer)

    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE t (x)")
    before = other.read_bytes()
    with pytest.raises(InvalidInputError, match="not a memgas store"):
        SQLiteStore(other)
    assert other.read_bytes() == before  # refused untouched (no switch to WAL)
    assert not other.with_name("other.db-wal").exists()

    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not a database" * 100)
    with pytest.raises(InvalidInputError, match="cannot open"):
        SQLiteStore(garbage)


def test_file_pragmas(sqlite_store: SQLiteStore) -> None:
    conn = sqlite_store._conn
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL


def test_closed_store(store: Store) -> None:
    store.close()
    store.close()  # idempotent
    with pytest.raises(MemgasError, match="closed"):
        store.list_users()


def test_in_memory_store(rng: np.random.Generator) -> None:
    with SQLiteStore() as store:
        assert store.load_units("alice").vectors.shape == (0, 0)
        store.bind_embedder(EMBEDDER, DIM)
        assert store.load_units("alice").vectors.shape == (0, DIM)
        s = _session("alice", "s1")
        units = _units(s, rng)
        ids = store.add_session(s, units, [Edge(-1, -3, 0.3)])
        table = store.load_units("alice")
        assert isinstance(table, UnitTable) and table.ids.tolist() == ids
        np.testing.assert_array_equal(table.vectors, from_half(to_half(np.stack([u.vector for u in units]))))
        assert store.stats()["file_bytes"] is None and store.path is None


def test_open_store_factory(tmp_path: Path) -> None:
    for target in (None, ":memory:", "sqlite://", "sqlite:///:memory:"):
        store = open_store(target)
        assert isinstance(store, SQLiteStore) and store.path is None
        store.close()
    with open_store(tmp_path / "a.db") as store:
        assert store.path == tmp_path / "a.db"
    with open_store(str(tmp_path / "b.db")) as store:
        assert store.path == tmp_path / "b.db"
    with open_store(f"sqlite:///{tmp_path / 'c.db'}") as store:  # sqlite:////abs/path
        assert store.path == tmp_path / "c.db" and store.path.exists()
    existing = SQLiteStore()
    assert open_store(existing) is existing
    existing.close()
    with pytest.raises(MemgasError, match="cannot open PostgreSQL store postgresql://me:\\*\\*\\*@127.0.0.1:1/x"):
        open_store("postgresql://me:secret@127.0.0.1:1/x")  # nothing listens on port 1; no password shown
    with pytest.raises(InvalidInputError, match="scheme"):
        open_store("mysql://localhost/db")
    with pytest.raises(InvalidInputError):
        open_store(42)  # type: ignore[arg-type]
    assert issubclass(SQLiteStore, Store)


def test_load_units_after_reads_what_was_added_and_counts_what_is_left(store: Store,
                                                                        rng: np.random.Generator) -> None:
    first = _session("u", "a")
    store.add_session(first, _units(first, rng), [])
    before = store.load_units("u")
    for sid in ("b", "c"):
        s = _session("u", sid)
        store.add_session(s, _units(s, rng), [])
    kept, added = store.load_units_after("u", int(before.ids[-1]))
    assert kept == len(before) and set(added.session_ids) == {"b", "c"}
    whole = store.load_units("u")
    refreshed = before.extended(added)
    assert refreshed.ids.tolist() == whole.ids.tolist() and refreshed.texts == whole.texts
    np.testing.assert_array_equal(refreshed.vectors, whole.vectors)
    store.delete_session("u", "a")
    kept, added = store.load_units_after("u", int(before.ids[-1]))
    assert kept == 0 and len(added) == len(whole) - len(before)  # a deletion shows in the count
    assert store.load_units_after("nobody", 0)[0] == 0
    with pytest.raises(InvalidInputError, match="larger ids"):
        whole.extended(before)
    picked = whole.select(whole.granularity == 1)
    assert len(picked) == int((whole.granularity == 1).sum()) and set(picked.granularity.tolist()) == {1}


def _tenant_view(store: Store, user: str) -> tuple:
    """Everything the per-user calls of the interface return for ``user``."""
    units, edges = store.load_units(user), store.load_edges(user)
    middle = int(units.ids[len(units) // 2 - 1]) if len(units) > 1 else 0
    kept, added = store.load_units_after(user, middle)
    later = store.load_edges_after(user, middle)
    infos = store.list_sessions(user)
    stats = store.stats(user)
    del stats["file_bytes"]  # the size of the whole store's files
    return (store.has_user(user), store.version(user), stats,
            [(i.session_id, i.timestamp, i.n_messages, i.n_turns, i.created_at) for i in infos],
            [store.get_session(user, i.session_id) for i in infos],
            units.ids.tolist(), units.session_ids, units.texts, units.vectors.tobytes(),
            edges.src.tolist(), edges.dst.tolist(), edges.weight.tolist(),
            kept, added.ids.tolist(), later.src.tolist(), later.dst.tolist())


def test_every_call_is_tenant_isolated(store: Store, rng: np.random.Generator) -> None:
    """Alice and bob hold sessions of the same ids, written interleaved: no call naming one user shows, or
    changes, anything of the other (reads, adds, refused adds, deletes, rolled-back blocks)."""
    def add(user: str, sid: str) -> list[int]:
        s = _session(user, sid, timestamp=f"2024-01-0{len(sid)}")
        units = _units(s, rng)
        for u in units:
            u.text = f"{user}:{u.text}"
        history = store.load_units(user).ids.tolist()
        return store.add_session(s, units, [Edge(-1, -2, 0.5)] + [Edge(-1, h, 0.25) for h in history[:1]])

    for sid in ("s1", "s2"):
        add("alice", sid)
        add("bob", sid)
    bob_ids = add("bob", "bob-only")
    alice, bob = _tenant_view(store, "alice"), _tenant_view(store, "bob")
    # Reads of alice hold alice's rows only, and all of them.
    assert alice[0] and [i[0] for i in alice[3]] == ["s1", "s2"]
    assert {t.split(":")[0] for t in alice[7]} == {"alice"} and len(alice[5]) == 2 * 4
    assert not set(alice[5]) & set(bob[5]) and set(alice[9] + alice[10]) <= set(alice[5])
    assert (alice[2]["users"], alice[2]["sessions"], alice[2]["messages"], alice[2]["edges"]) == (1, 2, 8, 3)
    assert (alice[12], alice[13]) == (4, alice[5][4:]) and len(alice[14]) == 2  # the ..._after reads too
    # Calls naming alice never reach bob's rows: his session ids and units are not hers.
    with pytest.raises(NotFoundError):
        store.get_session("alice", "bob-only")
    with pytest.raises(NotFoundError):
        store.delete_session("alice", "bob-only")
    s = _session("alice", "s3")
    with pytest.raises(InvalidInputError, match="not a unit of user 'alice'"):
        store.add_session(s, _units(s, rng), [Edge(-1, bob_ids[0], 0.5)])
    with pytest.raises(DuplicateSessionError):
        store.add_session(_session("alice", "s1"), [], [])
    # Texts by id and snapshots are the user's own: bob's unit ids read nothing for alice, his snapshot is his.
    assert store.unit_texts("alice", bob_ids) == {}
    assert store.save_snapshot("bob", "k", (store.version("bob"), store.generation), b"bob's")
    assert store.load_snapshot("alice", "k") is None
    assert not store.save_snapshot("alice", "k", (store.version("bob"), store.generation), b"x")  # not her version
    assert _tenant_view(store, "alice") == alice and _tenant_view(store, "bob") == bob

    def rolled_back() -> None:
        with pytest.raises(RuntimeError), store.writing("bob"):
            add("bob", "s9")
            store.delete_session("bob", "s2")
            raise RuntimeError

    # Nothing done to bob changes alice, though his session ids are hers too...
    for change in (lambda: add("bob", "s3"), lambda: store.delete_session("bob", "s1"), rolled_back,
                   lambda: store.delete_user("bob")):
        change()
        assert _tenant_view(store, "alice") == alice
    # ...nor the other way round.
    add("bob", "s1")
    bob = _tenant_view(store, "bob")
    store.delete_session("alice", "s1")
    store.delete_user("alice")
    assert _tenant_view(store, "bob") == bob and store.list_users() == ["bob"]


# -- consistency: reading(), writing(), generation ------------------------------------------------------------
def _add(store: Store, user: str, sid: str, rng: np.random.Generator) -> list[int]:
    s = _session(user, sid)
    return store.add_session(s, _units(s, rng), [Edge(-1, -2, 0.5)])


def test_writing_block_is_one_transaction(store: Store, rng: np.random.Generator) -> None:
    _add(store, "alice", "s0", rng)
    before, generation = _snapshot(store), store.generation
    seen: list[object] = []
    with pytest.raises(RuntimeError, match="abandon"):
        with store.writing("alice"):
            ids = _add(store, "alice", "s1", rng)
            store.delete_session("alice", "s0")
            # Reads inside the block see its uncommitted writes...
            seen.append([i.session_id for i in store.list_sessions("alice")])
            with store.reading():
                seen.append(store.load_units("alice").ids.tolist())
            # ...and another thread, on its own snapshot, does not (nor does it wait for the writer).
            other = threading.Thread(target=lambda: seen.append(store.list_sessions("alice")[0].session_id))
            other.start()
            other.join(10)
            raise RuntimeError("abandon the transaction")
    assert seen == [["s1"], ids, "s0"]
    assert _snapshot(store) == before  # the add and the delete are both undone
    assert store.generation == generation + 1
    with store.writing("alice"):
        _add(store, "alice", "s1", rng)
        store.delete_session("alice", "s0")
    assert [i.session_id for i in store.list_sessions("alice")] == ["s1"] and store.generation == generation + 1


def test_nested_writes_join_and_a_failed_call_inside_leaves_nothing(store: Store,
                                                                     rng: np.random.Generator) -> None:
    with store.writing("alice"):
        _add(store, "alice", "a1", rng)
        with store.writing("bob"):  # another user in the same thread joins the transaction
            _add(store, "bob", "b1", rng)
        if isinstance(store, SQLiteStore):
            _fail_edge_inserts(store)
        else:  # inside the open transaction: DDL from another connection would wait for its locks
            store._state.conn.execute("CREATE FUNCTION fail() RETURNS trigger LANGUAGE plpgsql AS"
                                      " $$ BEGIN RAISE EXCEPTION 'disk on fire'; END $$")
            store._state.conn.execute("CREATE TRIGGER fail BEFORE INSERT ON units FOR EACH ROW"
                                      " WHEN (NEW.links IS NOT NULL) EXECUTE FUNCTION fail()")
        with pytest.raises(_DB_ERRORS, match="disk on fire"):
            _add(store, "alice", "a2", rng)  # its session, messages and units were written, then undone
        if isinstance(store, SQLiteStore):
            _repair_edge_inserts(store)
        else:
            store._state.conn.execute("DROP TRIGGER fail ON units")
        with pytest.raises(DuplicateSessionError):
            _add(store, "alice", "a1", rng)
        _add(store, "alice", "a3", rng)
    assert store.generation == 2  # the failed add and the refused duplicate each rolled back their part
    assert [i.session_id for i in store.list_sessions("alice")] == ["a1", "a3"]
    assert store.list_users() == ["alice", "bob"]
    assert _n_messages(store) == 3 * 4
    assert set(store.load_units("alice").session_ids) == {"a1", "a3"}


def test_after_a_rollback_caches_key_on_version_and_generation(store: Store, rng: np.random.Generator) -> None:
    assert Store.generation.fget(store) == 0  # type: ignore[attr-defined]  # the interface's default
    _add(store, "alice", "s0", rng)
    with pytest.raises(RuntimeError):
        with store.writing("alice"):
            ids = _add(store, "alice", "s1", rng)
            inside = (store.version("alice"), store.generation)
            raise RuntimeError
    after_ids = _add(store, "alice", "s2", rng)
    if isinstance(store, SQLiteStore):  # SQLite hands ids and versions out again...
        assert after_ids == ids and store.version("alice") == inside[0]
    else:  # ...PostgreSQL's sequences never do
        assert min(after_ids) > max(ids) and store.version("alice") > inside[0]
    assert (store.version("alice"), store.generation) != inside  # so (version, generation) differs


@pytest.mark.parametrize("kind", ["file", "memory", "postgres"])
def test_reading_sees_one_snapshot(request: pytest.FixtureRequest, db: Path, rng: np.random.Generator, kind: str,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("memgas.store.sqlite._FORGET_WAIT", 0.05)  # the delete below waits for this snapshot
    in_memory = kind == "memory"
    with open_store({"file": db, "memory": ":memory:"}.get(kind) or request.getfixturevalue("pg_url")) as store:
        store.bind_embedder(EMBEDDER, DIM)
        _add(store, "alice", "s0", rng)
        writer = threading.Thread(target=lambda: (_add(store, "alice", "s1", rng), store.delete_session("alice", "s0")))
        with store.reading():
            version, ids = store.version("alice"), store.load_units("alice").ids.tolist()
            writer.start()
            writer.join(0.5 if in_memory else 10)  # in memory the writer waits for the snapshot to end
            with store.reading():  # reentrant: still the same snapshot
                assert store.version("alice") == version and store.load_edges_after("alice", 0).src.size == 1
            assert store.load_units("alice").ids.tolist() == ids
            assert [i.session_id for i in store.list_sessions("alice")] == ["s0"]
            assert store.get_session("alice", "s0").session_id == "s0"
            with pytest.raises(MemgasError, match="inside store.reading"):
                store.delete_session("alice", "s0")
        writer.join(10)
        assert not writer.is_alive()
        assert [i.session_id for i in store.list_sessions("alice")] == ["s1"] and store.version("alice") != version


def test_load_edges_after_and_the_edge_rule(store: Store, rng: np.random.Generator) -> None:
    a1 = _add(store, "alice", "a1", rng)
    _add(store, "bob", "b1", rng)  # bob's edges have larger ids than a1's and must not show
    s = _session("alice", "a2")
    a2 = store.add_session(s, _units(s, rng), [Edge(-1, a1[0], 0.5), Edge(a1[1], -2, 0.25), Edge(-1, -3, 0.5)])
    whole = store.load_edges("alice")
    for after in (0, a1[1], a2[0], a2[1], a2[-1]):
        got = store.load_edges_after("alice", after)
        keep = whole.dst > after
        assert got.src.tolist() == whole.src[keep].tolist() and got.dst.tolist() == whole.dst[keep].tolist()
        np.testing.assert_array_equal(got.weight, whole.weight[keep])
    assert store.load_edges_after("alice", a2[0]).dst.tolist() == [a2[1], a2[2]]  # dst > a2[0], not >=
    before = _snapshot(store)
    s3 = _session("alice", "a3")
    with pytest.raises(InvalidInputError, match="two stored units"):
        store.add_session(s3, _units(s3, rng), [Edge(-1, -2, 0.5), Edge(a1[0], a2[0], 0.5)])
    assert _snapshot(store) == before


# -- deletion that forgets --------------------------------------------------------------------------------------
def _files_holding(directory: Path, secret: bytes) -> list[str]:
    return sorted(f.name for f in directory.iterdir() if f.is_file() and secret in f.read_bytes())


def _secret_session(user: str, sid: str, secret: str, rng: np.random.Generator) -> tuple[Session, list[Unit]]:
    s = make_session([{"role": "user", "content": f"my locker code is {secret}"},
                      {"role": "assistant", "content": "noted"}], user_id=user, session_id=sid)
    units = _units(s, rng)
    units[1].text = f"locker {secret}"
    return s, units


def test_delete_leaves_the_text_in_no_file(db: Path, rng: np.random.Generator) -> None:
    in_db, in_wal = "ZQX-checkpointed-7731", "ZQX-in-the-log-5519"
    with SQLiteStore(db) as store, SQLiteStore(db) as other:
        store.bind_embedder(EMBEDDER, DIM)
        _add(store, "alice", "keep", rng)
        store.add_session(*_secret_session("alice", "old", in_db, rng), [])
        store._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        store.add_session(*_secret_session("bob", "new", in_wal, rng), [])
        assert other.load_units("bob").texts[1] == f"locker {in_wal}"  # another connection is open and has read
        assert "memory.db" in _files_holding(db.parent, in_db.encode())  # (its page may be in the log too)
        assert _files_holding(db.parent, in_wal.encode()) == ["memory.db-wal"]
        store.delete_session("alice", "old")
        store.delete_user("bob")
        for secret in (in_db, in_wal):
            assert _files_holding(db.parent, secret.encode()) == []
        assert {f.name for f in db.parent.iterdir()} >= {"memory.db", "memory.db-wal", "memory.db-shm"}
        assert [i.session_id for i in other.list_sessions("alice")] == ["keep"]
        for conn in (store._conn, store._reader(), other._reader()):
            assert conn.execute("PRAGMA secure_delete").fetchone()[0] == 1


def test_a_long_reader_delays_forgetting_until_close(db: Path, rng: np.random.Generator,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("memgas.store.sqlite._FORGET_WAIT", 0.2)
    secret = "ZQX-held-by-a-reader-2207"
    store = SQLiteStore(db)
    store.bind_embedder(EMBEDDER, DIM)
    _add(store, "alice", "keep", rng)
    store.add_session(*_secret_session("alice", "s", secret, rng), [])
    reader = sqlite3.connect(db, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM messages").fetchone()  # holds a snapshot that still has the text
    store.delete_session("alice", "s")
    assert _files_holding(db.parent, secret.encode()) == ["memory.db-wal"]  # the documented limit
    _add(store, "alice", "next", rng)  # still held: the next write tries again without waiting
    assert _files_holding(db.parent, secret.encode()) == ["memory.db-wal"]
    reader.execute("ROLLBACK")
    store.close()  # the reader is done: close empties the log
    assert _files_holding(db.parent, secret.encode()) == []
    reader.close()


def test_a_failed_checkpoint_does_not_fail_the_committed_delete(sqlite_store: SQLiteStore, rng: np.random.Generator,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    store = sqlite_store
    _add(store, "alice", "s0", rng)
    _add(store, "alice", "s1", rng)
    calls: list[float] = []

    def broken(conn: sqlite3.Connection, wait: float) -> None:
        calls.append(wait)
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(store, "_empty_wal", broken)
    store.delete_session("alice", "s0")  # committed: reported as done, forgetting is retried
    assert [i.session_id for i in store.list_sessions("alice")] == ["s1"] and store._wal_dirty
    _add(store, "alice", "s2", rng)
    assert calls == [_FORGET_WAIT, 0.0]  # the delete waited for readers, the retry does not
    monkeypatch.undo()
    _add(store, "alice", "s3", rng)
    assert not store._wal_dirty and store.path.with_name("memory.db-wal").stat().st_size == 0


# -- PostgreSQL in particular -----------------------------------------------------------------------------------
_DATA_TABLES = ("users", "sessions", "messages", "units")


def _is_scoped(statement: str) -> bool:
    """Whether a statement on a data table is limited to one user: an insert that writes ``user_id``
    first, or a statement whose every table reference and join (or subquery on a scoped table's rows) is
    constrained by ``user_id``."""
    flat = " ".join(statement.split())
    if flat.startswith("INSERT INTO"):
        return flat.split("(", 1)[1].startswith("user_id,")
    n_tables = len(re.findall(rf"\b(?:FROM|JOIN|UPDATE) ({'|'.join(_DATA_TABLES)})\b", flat))
    joined = flat.count("s.user_id = u.user_id") + flat.count("m.user_id = s.user_id")  # to a scoped table
    return flat.count("user_id = %s") + joined >= n_tables > 0


def test_postgres_every_statement_is_scoped_by_user(pg_url: str, rng: np.random.Generator,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from memgas.store.postgres import CROSS_USER_STATEMENTS

    seen: list[str] = []
    for name in ("execute", "executemany"):
        original = getattr(psycopg.Cursor, name)

        def record(self, query, *args, _original=original, **kwargs):  # type: ignore[no-untyped-def]
            seen.append(query if isinstance(query, str) else query.as_string(self))
            return _original(self, query, *args, **kwargs)

        monkeypatch.setattr(psycopg.Cursor, name, record)
    with open_store(pg_url) as store:  # every call of the interface, each path once
        store.bind_embedder(EMBEDDER, DIM)
        ids = _add(store, "alice", "a1", rng)
        s = _session("alice", "a2", timestamp="2024-01-01")
        store.add_session(s, _units(s, rng), [Edge(-1, ids[0], 0.5)])
        _add(store, "bob", "b1", rng)
        with store.writing("alice"), store.reading():
            store.load_units_after("alice", ids[-1]), store.load_edges_after("alice", ids[0])
        store.load_units("alice"), store.load_edges("alice"), store.get_session("alice", "a1")
        store.list_sessions("alice"), store.version("alice"), store.has_user("alice"), store.embedder_id
        store.stats("alice"), store.stats(), store.list_users()
        store.unit_texts("alice", ids), store.load_units("alice", texts=False)
        key = (store.version("alice"), store.generation)
        assert store.save_snapshot("alice", "k", key, b"x") and store.load_snapshot("alice", "k") == (key[0], b"x")
        store.delete_session("alice", "a1"), store.delete_user("bob")
        with pytest.raises(DuplicateSessionError):
            store.add_session(s, [], [])
    data = [q for q in dict.fromkeys(seen)  # the queries (the schema's DDL runs once, at creation)
            if q.lstrip().startswith(("SELECT", "INSERT", "UPDATE", "DELETE"))
            and re.search(rf"\b({'|'.join(_DATA_TABLES)})\b", q)]
    unscoped = [q for q in data if not _is_scoped(q)]
    assert len(data) >= 20 and sorted(unscoped) == sorted(CROSS_USER_STATEMENTS)
    # The rule bites: a query that forgets its user, or joins without it, is caught.
    assert not _is_scoped("SELECT role FROM messages WHERE session_pk = %s")
    assert not _is_scoped("SELECT u.id FROM units u JOIN sessions s ON s.pk = u.session_pk WHERE u.user_id = %s")
    assert not _is_scoped("INSERT INTO edges (src, dst, weight, user_id) VALUES (%s, %s, %s, %s)")


def test_migrations_create_once_and_refuse_newer_or_foreign_databases(pg_url: str, pg_cluster: Any,
                                                                       tmp_path: Path) -> None:
    from memgas.store.postgres import SCHEMA_VERSION as PG_SCHEMA_VERSION

    assert migrate(pg_url) == (0, PG_SCHEMA_VERSION) and migrate(pg_url) == (PG_SCHEMA_VERSION,) * 2
    db = tmp_path / "m.db"
    assert migrate(db) == (0, SCHEMA_VERSION) and migrate(f"sqlite:///{db}") == (SCHEMA_VERSION,) * 2
    with psycopg.connect(pg_url, autocommit=True) as conn:
        assert conn.execute("SELECT version FROM schema_version ORDER BY version").fetchall() == [
            (v,) for v in range(1, PG_SCHEMA_VERSION + 1)]
        conn.execute("INSERT INTO schema_version (version) VALUES (%s)", (PG_SCHEMA_VERSION + 1,))
    with pytest.raises(InvalidInputError, match="newer than this memgas"):
        open_store(pg_url)
    pg_cluster.admin("CREATE DATABASE foreign_db")
    try:
        with psycopg.connect(pg_cluster.url("foreign_db"), autocommit=True) as conn:
            conn.execute("CREATE TABLE t (x int)")
        with pytest.raises(InvalidInputError, match="not empty and holds no memgas store"):
            migrate(pg_cluster.url("foreign_db"))
        with psycopg.connect(pg_cluster.url("foreign_db"), autocommit=True) as conn:  # refused untouched
            assert conn.execute("SELECT to_regclass('schema_version')").fetchone()[0] is None
    finally:
        pg_cluster.admin("DROP DATABASE foreign_db WITH (FORCE)")


def test_concurrent_openers_create_the_schema_once(pg_url: str) -> None:
    from memgas.store.postgres import SCHEMA_VERSION as PG_SCHEMA_VERSION

    errors: list[BaseException] = []

    def open_one() -> None:
        try:
            open_store(pg_url).close()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and migrate(pg_url)[0] == PG_SCHEMA_VERSION


def _pg_worker(url: str, user: str, name: str, n_adds: int, out: str) -> None:
    """A process adding ``n_adds`` sessions for ``user`` through :class:`memgas.Memory` while a thread of it
    searches; writes the acknowledged adds, the search count and every error to ``out`` as JSON."""
    import json

    from memgas import Memory
    from support.datasets import TOPICS
    from support.hash_embedder import HashEmbedder

    report: dict[str, Any] = {"adds": [], "searches": 0, "errors": []}
    done = threading.Event()
    with Memory(url, embedder=HashEmbedder()) as memory:
        def search() -> None:
            while not done.is_set() or report["searches"] < 5:
                try:
                    memory.search(f"what about {TOPICS[report['searches'] % len(TOPICS)]}?", user_id=user, k=3)
                except BaseException as exc:
                    report["errors"].append(repr(exc))
                report["searches"] += 1

        searcher = threading.Thread(target=search)  # started once the user exists (else: NotFoundError)
        for i in range(n_adds):
            sid, topic = f"{name}-{i}", TOPICS[(i * 3 + len(name)) % len(TOPICS)]
            try:
                memory.add([{"role": "user", "content": f"Let me tell you about {topic} ({sid})."},
                            {"role": "assistant", "content": f"Tell me more about {topic}."}],
                           user_id=user, session_id=sid, timestamp="2024-05-01T10:00:00")
                report["adds"].append([user, sid])
            except BaseException as exc:
                report["errors"].append(repr(exc))
            if i == 0:
                searcher.start()
        done.set()
        searcher.join()
    Path(out).write_text(json.dumps(report))


def _edge_keys(store: Store, user: str) -> set[tuple]:
    """A user's edges named by their units' content (ids differ between stores), weights rounded."""
    table, edges = store.load_units(user), store.load_edges(user)
    key = {int(i): (table.session_ids[r], int(table.granularity[r]), int(table.turn_start[r]), table.texts[r])
           for r, i in enumerate(table.ids)}
    return {(key[int(a)], key[int(b)], round(float(w), 5)) for a, b, w in zip(edges.src, edges.dst, edges.weight)}


@pytest.mark.slow
def test_postgres_many_processes_lose_nothing_and_associate_as_a_sequential_ingest(pg_url: str,
                                                                                   tmp_path: Path) -> None:
    """The issue's configuration: 4 processes add to one user while 8 add to a user each, every process
    searching its user meanwhile: every acknowledged add is stored, no call fails, and each user's association
    edges equal a sequential SQLite ingest of the same sessions in the order the user's lock let them in."""
    import json
    import multiprocessing

    from memgas import Memory
    from support.hash_embedder import HashEmbedder

    open_store(pg_url).close()  # the schema exists before the workers race to open it
    ctx = multiprocessing.get_context("spawn")
    jobs = [("shared", f"s{k}") for k in range(4)] + [(f"own{k}", f"o{k}") for k in range(8)]
    outs = [tmp_path / f"report{i}.json" for i in range(len(jobs))]
    t0 = time.perf_counter()
    procs = [ctx.Process(target=_pg_worker, args=(pg_url, user, name, 5, str(out)))
             for (user, name), out in zip(jobs, outs)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0, f"worker process ended with {p.exitcode}"
    elapsed = time.perf_counter() - t0
    reports = [json.loads(out.read_text()) for out in outs]
    assert [e for r in reports for e in r["errors"]] == []
    added = {tuple(a) for r in reports for a in r["adds"]}
    assert len(added) == 5 * len(jobs) and sum(r["searches"] for r in reports) >= 5 * len(jobs)
    with Memory(pg_url, embedder=HashEmbedder()) as shared, \
            Memory(tmp_path / "sequential.db", embedder=HashEmbedder()) as sequential:
        store = shared.store
        assert {(u, i.session_id) for u in store.list_users() for i in store.list_sessions(u)} == added
        assert len(store.list_users()) == 9 and len(store.list_sessions("shared")) == 20
        order = [sid.split("-")[0] for sid in dict.fromkeys(store.load_units("shared").session_ids)]
        assert sum(a != b for a, b in zip(order, order[1:])) >= 3  # the shared user's writers did overlap
        for user in store.list_users():
            table = store.load_units(user)
            first = {}
            for sid, uid in zip(table.session_ids, table.ids.tolist()):
                first.setdefault(sid, uid)
            for sid in sorted(first, key=first.get):  # the order the user's lock let them in
                s = store.get_session(user, sid)
                sequential.add([{"role": m.role, "content": m.content} for m in s.messages], user_id=user,
                               session_id=sid, timestamp=s.timestamp)
            edges = _edge_keys(store, user)
            assert edges and edges == _edge_keys(sequential.store, user), user
    print(f"\nPostgreSQL, 12 processes (4 on one user, 8 on a user each), {len(added)} adds: {elapsed:.1f} s")


def test_cli_migrate_and_commands_on_a_postgresql_url(pg_url: str, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from memgas.cli.commands import main
    from memgas.store.postgres import SCHEMA_VERSION as PG_SCHEMA_VERSION

    assert main(["migrate", "--db", pg_url]) == 0
    assert json.loads(capsys.readouterr().out) == {"schema_version_before": 0, "schema_version": PG_SCHEMA_VERSION}
    assert main(["migrate", "--db", pg_url]) == 0
    assert json.loads(capsys.readouterr().out)["schema_version_before"] == PG_SCHEMA_VERSION
    session = tmp_path / "s.json"
    session.write_text(json.dumps([{"role": "user", "content": "I keep bees on the roof."}]))
    assert main(["add", "--db", pg_url, "--user", "alice", "--session", "s1", str(session)]) == 0
    capsys.readouterr()
    assert main(["search", "--db", pg_url, "--user", "alice", "--json", "bees"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["session_id"] == "s1"
    assert main(["migrate", "--db", str(tmp_path / "none.db")]) == 2  # a file store must exist
    assert not (tmp_path / "none.db").exists()
    assert main(["migrate", "--db", "postgresql://me@127.0.0.1:1/x"]) == 1
    assert "cannot open PostgreSQL store" in capsys.readouterr().err


def test_rewrite_session_keeps_what_it_is_told_and_writes_the_rest_in_one_transaction(store: Store,
                                                                                        rng: np.random.Generator) -> None:
    """What ``Memory.append`` and message edits stand on, on both backends."""
    old = _session("u", "s1", n_turns=2)
    ids = store.add_session(old, _units(old, rng), [])
    other = _session("u", "s2", n_turns=1)
    other_ids = store.add_session(other, _units(other, rng), [])
    grown = _session("u", "s1", n_turns=3, timestamp="2024-03-01T00:00:00", topic="x")
    new_units = [u for u in _units(grown, rng) if u.turn_start == 2]
    version = store.version("u")
    new_ids = store.rewrite_session(grown, keep_messages=len(old.messages), drop_units=[ids[0]], units=new_units,
                                    edges=[Edge(-1, ids[1], 0.5), Edge(-1, other_ids[0], 0.25)])
    assert store.version("u") > version
    assert store.get_session("u", "s1") == grown  # messages, timestamp and metadata are the new session's
    kept = store.session_units("u", "s1")
    assert kept.ids.tolist() == [*ids[1:], *new_ids] and min(new_ids) > max(other_ids)  # new ids are the largest
    edges = store.load_edges("u")
    assert sorted(zip(edges.src.tolist(), edges.dst.tolist())) == sorted(
        [tuple(sorted((new_ids[0], ids[1]))), tuple(sorted((new_ids[0], other_ids[0])))])
    assert store.unit_ids("u").tolist() == sorted([*ids[1:], *new_ids, *other_ids])
    info = {i.session_id: i for i in store.list_sessions("u")}["s1"]
    assert (info.n_messages, info.n_turns) == (len(grown.messages), 3)


def test_a_sessions_tail_is_its_units_past_a_turn_and_its_summaries_sought_by_the_tail_index(
        store: Store, rng: np.random.Generator) -> None:
    long = _session("u", "long", n_turns=12)
    turns = long.turns
    # a keyword unit over all (first: ids do not follow the granularities), then chunks and turns whose texts are
    # their turns' (kept as message ranges)
    chunks = [Unit("long", "session", "\n".join(t.text for t in turns[a:b]), a, b, chunk=c, vector=v)
              for c, ((a, b), v) in enumerate(zip([(0, 5), (5, 9), (9, 12)], _vectors(rng, 3)))]
    units = [u for u in _units(long, rng) if u.granularity == "keyword"] + chunks + [
        Unit("long", "turn", t.text, t.index, t.index + 1, vector=v) for t, v in zip(turns, _vectors(rng, 12))]
    ids = store.add_session(long, units, [])
    store.add_session(_session("u", "other", n_turns=3), _units(_session("u", "other", n_turns=3), rng), [])
    for after in (-1, 0, 4, 5, 8, 11, 12):
        tail = store.session_units("u", "long", after=after)
        want = [i for i, u in zip(ids, units) if u.turn_end > after or u.granularity in ("summary", "keyword")]
        assert tail.ids.tolist() == want  # in id order, the keyword unit whatever its range
        assert store.session_units("u", "long", after=after, texts=False).ids.tolist() == want
    # a rewrite that replaces the last reply finds the units reaching past the kept messages (chunk 2, turn 11) and,
    # as they are kept here, keeps their texts (a unit missed would read the new reply through its range)
    edited = replace(long, messages=(*long.messages[:-1], Message("assistant", "and one more thing")))
    store.rewrite_session(edited, keep_messages=len(long.messages) - 1, drop_units=[], units=[], edges=[])
    assert list(store.session_units("u", "long").texts) == [u.text for u in units]
    assert not any("one more thing" in t for t in store.session_units("u", "long").texts)
    if isinstance(store, SQLiteStore):  # sought, not scanned: every part of the read goes through the index
        with store._read("u") as conn:
            plan = conn.execute("EXPLAIN QUERY PLAN SELECT id FROM units u WHERE u.session_pk = 1 AND"
                                " u.granularity = 1 AND u.turn_end > 3").fetchall()
        assert "units_tail" in str(plan) and "turn_end>?" in str(plan)


def test_rewrite_session_refuses_and_writes_nothing(store: Store, rng: np.random.Generator) -> None:
    a = _session("u", "a")
    a_ids = store.add_session(a, _units(a, rng), [])
    b = _session("u", "b")
    b_ids = store.add_session(b, _units(b, rng), [])
    before = (store.version("u"), store.get_session("u", "a"), store.unit_ids("u").tolist())
    grown = _session("u", "a", n_turns=3)
    unit = [u for u in _units(grown, rng) if u.turn_start == 2]
    with pytest.raises(InvalidInputError, match="is not a unit of session 'a'"):
        store.rewrite_session(grown, keep_messages=2, drop_units=[b_ids[0]], units=unit, edges=[])
    with pytest.raises(InvalidInputError, match="which is dropped"):
        store.rewrite_session(grown, keep_messages=2, drop_units=[a_ids[0]], units=unit, edges=[Edge(-1, a_ids[0], 0.5)])
    with pytest.raises(InvalidInputError, match="keep_messages 9"):
        store.rewrite_session(grown, keep_messages=9, drop_units=[], units=unit, edges=[])
    with pytest.raises(NotFoundError, match="no session 'zz'"):
        store.rewrite_session(_session("u", "zz"), keep_messages=0, drop_units=[], units=[], edges=[])
    assert (store.version("u"), store.get_session("u", "a"), store.unit_ids("u").tolist()) == before
    assert store.session_units("u", "nope").ids.tolist() == [] and store.unit_ids("nobody").tolist() == []


def test_the_store_records_the_first_method_that_wrote_it(store: Store) -> None:
    assert store.method is None
    store.record_method("zep")
    store.record_method("memgas")  # kept: the first one stays
    assert store.method == "zep"
    with pytest.raises(InvalidInputError):
        store.record_method("not a method name")


def _unpack_messages(target: str) -> None:
    """Put the store back as the schemas before SQLite 9 and PostgreSQL 10 kept it (an older store): messages as
    plain text, the edges as rows of their own table (made by that schema's statements), no ``links`` column, and the
    schema's version back to before."""
    from memgas.core.packing import unpack_links, unpack_text
    from memgas.store import postgres, sqlite

    def edge_rows(rows: list) -> list[tuple]:
        return [(user, int(src), int(uid), float(w)) for user, uid, blob in rows if blob is not None
                for src, w in zip(*unpack_links(int(uid), blob))]

    if target.startswith("postgresql://"):
        with psycopg.connect(target, autocommit=True) as conn:
            rows = conn.execute("SELECT user_id, session_pk, position, content FROM messages").fetchall()
            conn.execute("ALTER TABLE messages ALTER COLUMN content TYPE text USING ''")
            conn.cursor().executemany("UPDATE messages SET content = %s WHERE user_id = %s AND session_pk = %s"
                                      " AND position = %s", [(unpack_text(c), u, pk, p) for u, pk, p, c in rows])
            edges = edge_rows(conn.execute("SELECT user_id, id, links FROM units").fetchall())
            for statement in postgres.MIGRATIONS[0]:
                if "edges" in statement:
                    conn.execute(statement)
            conn.cursor().executemany("INSERT INTO edges (user_id, src, dst, weight) VALUES (%s, %s, %s, %s)", edges)
            conn.execute("ALTER TABLE units DROP COLUMN links")
            conn.execute("DELETE FROM schema_version WHERE version >= 10")
    else:
        conn = sqlite3.connect(target)
        rows = conn.execute("SELECT session_pk, position, content FROM messages").fetchall()
        conn.executemany("UPDATE messages SET content = ? WHERE session_pk = ? AND position = ?",
                         [(unpack_text(c), pk, p) for pk, p, c in rows])
        edges = edge_rows(conn.execute("SELECT user_id, id, links FROM units").fetchall())
        for statement in sqlite.MIGRATIONS[0]:
            if "edges" in statement:
                conn.execute(statement)
        conn.executemany("INSERT INTO edges (user_id, src, dst, weight) VALUES (?, ?, ?, ?)", edges)
        conn.execute("ALTER TABLE units DROP COLUMN links")
        conn.execute("PRAGMA user_version = 8")
        conn.commit()
        conn.close()


def test_messages_are_packed_and_a_store_of_plain_texts_is_packed_once_opened(target: str,
                                                                              rng: np.random.Generator) -> None:
    """Content is kept packed (deflated where shorter); a store of the schema before (plain text, an edges table) is
    packed by its migration, in batches across users, and reads back the same: sessions, previews, turn texts, edges."""
    from memgas.core.packing import unpack_text
    from memgas.store import sql as sql_module
    long = " ".join(f"On day {i} we walked along the river and talked about the garden again." for i in range(40))
    sessions = [Session(user_id=user, session_id=sid, messages=(Message("user", f"{long} ({user} {sid})"),
                                                                Message("assistant", "Noted — ça va.")))
                for user in ("alice", "bob") for sid in ("s1", "s2", "s3")]
    with open_store(target) as store:
        store.bind_embedder(EMBEDDER, DIM)
        first: dict[str, int] = {}
        for s in sessions:  # each user's later sessions linked to the first unit of their first
            older = [Edge(first[s.user_id], -1, 0.25)] if s.user_id in first else []
            first.setdefault(s.user_id, store.add_session(s, _units(s, rng), [Edge(-1, -2, 0.5)] + older)[0])
        texts = store.load_units("alice").texts
        edges = {u: store.load_edges(u) for u in ("alice", "bob")}
        previews = [i.preview for i in store.list_sessions("bob", previews=True)]
    assert previews == [f"{long} (bob {sid})"[:PREVIEW_CHARS] for sid in ("s1", "s2", "s3")]

    def stored() -> list:
        if target.startswith("postgresql://"):
            with psycopg.connect(target) as conn:
                return [r[0] if isinstance(r[0], str) else bytes(r[0])
                        for r in conn.execute("SELECT content FROM messages ORDER BY 1")]
        with sqlite3.connect(target) as conn:
            return [r[0] for r in conn.execute("SELECT content FROM messages ORDER BY 1")]

    packed = stored()
    assert sorted(unpack_text(c) for c in packed) == sorted(m.content for s in sessions for m in s.messages)
    assert sum(c[:1] == b"\x01" for c in packed) == 6 and max(map(len, packed)) < len(long) // 4  # deflated
    assert sum(c[:1] == b"\x00" for c in packed) == 6  # the short replies: kept as they are
    _unpack_messages(target)
    assert all(isinstance(c, str) for c in stored())
    sql_module._MIGRATION_BATCH, batch = 4, sql_module._MIGRATION_BATCH  # several batches, across users
    try:
        with open_store(target) as store:
            assert store.schema_upgrade[0] == (9 if target.startswith("postgresql://") else 8)
            assert [store.get_session(s.user_id, s.session_id) for s in sessions] == sessions
            assert store.load_units("alice").texts == texts
            assert [i.preview for i in store.list_sessions("bob", previews=True)] == previews
            for user, before in edges.items():  # the edges, from their table onto their newer units
                after = store.load_edges(user)
                assert after.src.tolist() == before.src.tolist() and after.dst.tolist() == before.dst.tolist()
                assert after.weight.tolist() == before.weight.tolist() and after.src.size >= 3
            assert store.stats()["edges"] == sum(e.src.size for e in edges.values())
    finally:
        sql_module._MIGRATION_BATCH = batch
    assert stored() == packed  # packed as a new store packs them


def test_schema_6_reencodes_float32_vectors_as_float16(target: str, rng: np.random.Generator) -> None:
    """A store of schema 5 (float32 vector bytes, no snapshots) opened by this memgas: every vector is re-encoded
    in the migration's transaction (and reads as its float16 values), the snapshots table exists, nothing else moves."""
    s1 = _session("alice", "s1", 3)
    units = _units(s1, rng)
    vectors = np.stack([u.vector for u in units]).astype(np.float32)
    with open_store(target) as store:
        store.bind_embedder(EMBEDDER, DIM)
        ids = store.add_session(s1, units, [Edge(-1, -2, 0.5)])
    old = [(v.astype("<f4").tobytes(), i) for v, i in zip(vectors, ids)]  # how schema 5 wrote them
    _unpack_messages(target)
    if target.startswith("postgresql://"):
        with psycopg.connect(target, autocommit=True) as conn:
            conn.execute("DROP TABLE snapshots")
            conn.execute("ALTER TABLE units DROP COLUMN msg_start, DROP COLUMN msg_end")
            conn.execute("ALTER TABLE users DROP COLUMN xid")  # schema 8, PostgreSQL's own
            conn.execute("DELETE FROM schema_version WHERE version >= 6")
            conn.cursor().executemany("UPDATE units SET vector = %s WHERE id = %s", old)
    else:
        conn = sqlite3.connect(target)
        conn.execute("DROP TABLE snapshots")
        conn.execute("ALTER TABLE units DROP COLUMN msg_start")
        conn.execute("ALTER TABLE units DROP COLUMN msg_end")
        conn.executemany("UPDATE units SET vector = ? WHERE id = ?", old)
        conn.execute("PRAGMA user_version = 5")
        conn.commit()
        conn.close()
    from memgas.store.postgres import SCHEMA_VERSION as PG_SCHEMA_VERSION

    latest = PG_SCHEMA_VERSION if target.startswith("postgresql://") else SCHEMA_VERSION
    with open_store(target) as store:
        assert store.schema_upgrade == (5, latest)
        table = store.load_units("alice")
        np.testing.assert_array_equal(table.vectors, from_half(to_half(vectors)))
        assert table.ids.tolist() == ids and table.texts == tuple(u.text for u in units)
        assert store.load_edges("alice").weight.tolist() == [0.5] and store.load_snapshot("alice", "k") is None
        assert store.get_session("alice", "s1").messages == s1.messages
    with open_store(target) as store:
        assert store.schema_upgrade == (latest, latest)  # once
        np.testing.assert_array_equal(store.load_units("alice").vectors, table.vectors)


def test_units_can_leave_their_texts_in_the_store(store: Store, rng: np.random.Generator) -> None:
    """``load_units(texts=False)``: the same table but texts read when asked for, many in one read; a unit deleted
    since reads as ""; selecting and extending keep them in the store."""
    from memgas.store import StoredTexts, texts_of

    s1, s2 = _session("alice", "s1", 2), _session("alice", "s2", 2)
    u1, u2 = _units(s1, rng), _units(s2, rng)
    ids = store.add_session(s1, u1, []) + store.add_session(s2, u2, [])
    full, lazy = store.load_units("alice"), store.load_units("alice", texts=False)
    assert isinstance(lazy.texts, StoredTexts) and not isinstance(full.texts, StoredTexts)
    assert lazy.texts == full.texts and len(lazy.texts) == len(ids) and lazy.texts[-1] == full.texts[-1]
    np.testing.assert_array_equal(lazy.vectors, full.vectors)
    assert texts_of(lazy.texts, [3, 0]) == [full.texts[3], full.texts[0]] == texts_of(full.texts, [3, 0])
    assert store.unit_texts("alice", [ids[1], 10**9]) == {ids[1]: u1[1].text}
    assert store.unit_texts("bob", ids) == {}  # another user's ids read nothing
    picked = lazy.select(np.array([False, True] + [False] * (len(ids) - 2)))
    assert isinstance(picked.texts, StoredTexts) and list(picked.texts) == [u1[1].text]
    kept, added = store.load_units_after("alice", ids[len(u1) - 1], texts=False)
    grown = store.load_units("alice", texts=False).select(np.arange(len(u1))).extended(added)
    assert kept == len(u1) and grown.texts == full.texts
    store.delete_session("alice", "s1")
    assert lazy.texts[0] == "" and lazy.texts[-1] == u2[-1].text  # deleted since: empty, the rest as before
    with pytest.raises(IndexError):
        lazy.texts[len(ids)]


def test_a_text_that_joins_its_turns_is_stored_once(target: str, store: Store, rng: np.random.Generator) -> None:
    """A unit whose text is its turns' texts joined (a turn's own, a session chunk's) keeps no copy: the stored text
    is empty, its messages' range is kept, and every read joins them again, exactly; any other text is stored as
    given."""
    s = _session("alice", "s1", 3)
    turns = [t.text for t in s.turns]
    vecs = _vectors(rng, 4)
    units = [Unit("s1", "session", "\n".join(turns[0:2]), 0, 2, vector=vecs[0]),
             Unit("s1", "turn", turns[2], 2, 3, vector=vecs[1]),
             Unit("s1", "turn", turns[1] + " (edited)", 1, 2, vector=vecs[2]),  # not its turn's text: kept
             Unit("s1", "summary", "a summary", 0, 3, vector=vecs[3])]
    ids = store.add_session(s, units, [])
    if target.startswith("postgresql://"):
        with psycopg.connect(target) as conn:
            raw = conn.execute("SELECT text, msg_start, msg_end FROM units ORDER BY id").fetchall()
    else:
        with contextlib.closing(sqlite3.connect(target)) as conn:
            raw = conn.execute("SELECT text, msg_start, msg_end FROM units ORDER BY id").fetchall()
    assert raw == [("", 0, 4), ("", 4, 6), (turns[1] + " (edited)", -1, -1), ("a summary", -1, -1)]
    texts = tuple(u.text for u in units)
    assert store.load_units("alice").texts == texts and store.session_units("alice", "s1").texts == texts
    assert store.load_units_after("alice", ids[0])[1].texts == texts[1:]
    assert store.unit_texts("alice", ids) == dict(zip(ids, texts))
    assert list(store.load_units("alice", texts=False).texts) == list(texts)


def test_one_sessions_units_with_or_without_their_texts(store: Store, rng: np.random.Generator) -> None:
    for sid in ("a", "b", "c"):
        session = _session("u", sid, n_turns=3)
        store.add_session(session, _units(session, rng), [])
    whole, lean = store.session_units("u", "b"), store.session_units("u", "b", texts=False)
    assert lean.ids.tolist() == whole.ids.tolist() and set(whole.session_ids) == {"b"}
    np.testing.assert_array_equal(lean.vectors, whole.vectors)
    assert list(lean.texts) == list(whole.texts)  # read from the store when asked for


def test_one_sessions_units_are_found_by_the_sessions_key_not_the_users(sqlite_store: SQLiteStore) -> None:
    """SQLite's planner, left to itself, took the user's index and read every unit row of the user for each session
    (a timeline read all of them once per session)."""
    statement = SQLiteStore._UNIT_COLUMNS + f" WHERE {SQLiteStore._UNITS_OF_SESSION} ORDER BY u.id"
    with sqlite3.connect(sqlite_store.path) as conn:
        plan = " ".join(str(row[-1]) for row in conn.execute("EXPLAIN QUERY PLAN " + statement, ("u", "u", "s")))
    assert "units_session" in plan and "units_user" not in plan


def test_edges_are_kept_on_their_newer_unit_and_a_delete_takes_them_off_the_others(store: Store,
                                                                                   rng: np.random.Generator) -> None:
    """Each edge lives once, packed on its newer unit (``links``); deleting or replacing a unit takes every edge to it
    off the newer units of other sessions, so edges, links between sessions and counts never name a unit gone."""
    ids = {}
    for user in ("alice", "bob"):
        s = _session(user, "s1", n_turns=3)
        ids[user] = store.add_session(s, _units(s, rng), [Edge(-1, -2, 0.75), Edge(-3, -1, 0.25), Edge(-2, -1, 0.5)])
    a = ids["alice"]
    s2 = _session("alice", "s2", n_turns=2)
    new = store.add_session(s2, _units(s2, rng), [Edge(a[0], -1, 0.5), Edge(-2, a[1], 0.125), Edge(-1, -2, 0.375)])
    s3 = _session("alice", "s3")
    last = store.add_session(s3, _units(s3, rng), [Edge(new[0], -1, 0.25), Edge(a[2], -1, 0.5)])
    edges = store.load_edges("alice")
    assert list(zip(edges.src.tolist(), edges.dst.tolist(), edges.weight.tolist())) == [
        (a[0], a[1], 0.75), (a[0], a[2], 0.25), (a[0], new[0], 0.5), (a[1], new[1], 0.125),
        (a[2], last[0], 0.5), (new[0], new[1], 0.375), (new[0], last[0], 0.25)]  # the larger of a repeated edge
    after = store.load_edges_after("alice", new[-1])
    assert after.dst.tolist() == [last[0], last[0]]
    assert store.session_links("alice") == [("s1", "s2", 2, 0.625, 0.5), ("s1", "s3", 1, 0.5, 0.5),
                                            ("s2", "s3", 1, 0.25, 0.25)]
    assert store.session_links("alice", "s3") == [("s1", "s3", 1, 0.5, 0.5), ("s2", "s3", 1, 0.25, 0.25)]
    assert store.stats("alice")["edges"] == 7 and store.stats("bob")["edges"] == 2 and store.stats()["edges"] == 9
    store.delete_session("alice", "s2")  # its units held two edges from s1; s3's unit held one to it
    edges = store.load_edges("alice")
    assert list(zip(edges.src.tolist(), edges.dst.tolist())) == [(a[0], a[1]), (a[0], a[2]), (a[2], last[0])]
    assert store.session_links("alice") == [("s1", "s3", 1, 0.5, 0.5)]
    assert store.stats("alice")["edges"] == 3 and store.stats()["edges"] == 5
    kept = store.get_session("alice", "s1")
    store.rewrite_session(kept, keep_messages=len(kept.messages), drop_units=[a[2]], units=[], edges=[])
    edges = store.load_edges("alice")
    assert list(zip(edges.src.tolist(), edges.dst.tolist())) == [(a[0], a[1])]  # s3's link to it went with it
    assert store.stats("alice")["edges"] == 1 and store.load_edges("bob").src.size == 2


def test_a_snapshot_of_a_new_format_drops_the_users_snapshots_of_the_old(store: Store, rng: np.random.Generator
                                                                          ) -> None:
    for user in ("alice", "bob"):
        s = _session(user, "s1")
        store.add_session(s, _units(s, rng), [])
    key = {u: (store.version(u), store.generation) for u in ("alice", "bob")}
    for user in ("alice", "bob"):
        assert store.save_snapshot(user, "m/1/x=1", key[user], b"old")
        assert store.save_snapshot(user, "m/1/x=2", key[user], b"old, other settings")
        assert store.save_snapshot(user, "other/1/x=1", key[user], b"another method's")
    assert store.save_snapshot("alice", "m/2/x=1", key["alice"], b"new", replaces=("m/1/",))
    assert store.load_snapshot("alice", "m/2/x=1") == (key["alice"][0], b"new")
    assert store.load_snapshot("alice", "m/1/x=1") is None and store.load_snapshot("alice", "m/1/x=2") is None
    assert store.load_snapshot("alice", "other/1/x=1") is not None  # another method's stays
    assert store.load_snapshot("bob", "m/1/x=1") == (key["bob"][0], b"old")  # and every other user's
    # a snapshot that is not kept (a state no longer the user's) drops nothing
    assert not store.save_snapshot("bob", "m/2/x=1", (key["bob"][0] - 1, key["bob"][1]), b"new", replaces=("m/1/",))
    assert store.load_snapshot("bob", "m/1/x=2") is not None


def test_a_units_messages_and_a_sessions_speakers_are_read_without_the_rest(store: Store,
                                                                            rng: np.random.Generator) -> None:
    s = _session("u", "s1", n_turns=3, participants=["Ann"])
    units = _units(s, rng)
    units[2] = replace(units[2], text=s.turns[1].text)  # turn 1's unit: its turn's text, kept as a message range
    ids = store.add_session(s, units, [])
    other = _session("u", "s2")
    store.add_session(other, _units(other, rng), [])
    got = store.unit_messages("u", [ids[2], ids[1], 10**9])
    assert got == {ids[2]: (s.turns[1].msg_start, s.turns[1].messages), ids[1]: (-1, ())}  # turn 0's: kept as is
    assert store.unit_messages("someone else", [ids[2]]) == {}
    assert store.session_metadata("u", ["s1", "s2", "nope"]) == {"s1": {"participants": ["Ann"]}, "s2": {}}
    assert store.session_speakers("u", ["s1", "nope"]) == {
        "s1": ({"participants": ["Ann"]}, tuple((m.role, m.name) for m in s.messages))}
    assert store.session_speakers("u", []) == {} and store.session_metadata("someone else", ["s1"]) == {}


def test_unit_vectors_are_the_stored_halves_by_id_with_zeros_for_units_gone(store: Store,
                                                                         rng: np.random.Generator) -> None:
    from memgas.kernels.quantize import to_half
    for sid in ("a", "b", "c"):
        s = _session("u", sid)
        store.add_session(s, _units(s, rng), [])
    other = _session("v", "x")
    store.add_session(other, _units(other, rng), [])  # another user's units lie between none of u's ids, but exist
    whole = store.load_units("u")
    got = store.unit_vectors("u", whole.ids)
    assert got.dtype == np.float16 and got.shape == whole.vectors.shape
    np.testing.assert_array_equal(got, to_half(whole.vectors))
    gone = store.session_units("u", "b").ids
    store.delete_session("u", "b")
    got = store.unit_vectors("u", whole.ids)
    missing = np.isin(whole.ids, gone)
    assert not got[missing].any()  # a unit no longer stored reads as zeros
    np.testing.assert_array_equal(got[~missing], to_half(whole.vectors[~missing]))
    some = whole.ids[[0, 3, len(whole) - 1]]
    np.testing.assert_array_equal(store.unit_vectors("u", some), to_half(whole.vectors[[0, 3, len(whole) - 1]]))
    assert not store.unit_vectors("v", whole.ids).any()  # another user's ids read nothing
    assert store.unit_vectors("u", np.array([], np.int64)).shape[0] == 0


def test_a_file_locked_by_another_writer_past_the_timeout_is_unavailable_and_nothing_is_written(
        db: Path, rng: np.random.Generator) -> None:
    from memgas.core.errors import UnavailableError

    with SQLiteStore(db, timeout=0.2) as store:
        store.bind_embedder(EMBEDDER, DIM)
        first = _session("u", "s1")
        store.add_session(first, _units(first, rng), [])
        other = sqlite3.connect(db, isolation_level=None)  # another process's writer, holding the lock
        other.execute("BEGIN IMMEDIATE")
        second = _session("u", "s2")
        with pytest.raises(UnavailableError, match="stayed locked by another writer for 0.2 s; nothing was written"):
            store.add_session(second, _units(second, rng), [])
        other.execute("ROLLBACK")
        other.close()
        assert [i.session_id for i in store.list_sessions("u")] == ["s1"]
        store.add_session(second, _units(second, rng), [])  # once the lock is free, the same call goes through
        assert [i.session_id for i in store.list_sessions("u")] == ["s1", "s2"]
