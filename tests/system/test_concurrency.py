"""Threads and processes adding, deleting and searching one store file at the same time.

Two levels: the store itself (each search one ``reading()`` snapshot, each add ``writing()`` the association
read and the insert), and :class:`memgas.Memory` with a fast deterministic embedder. Each worker reports
what it was told succeeded (acknowledged adds and deletes) and every exception; the test then checks the
end state. The figures are printed (``pytest -s``) for the README's RELIABILITY section.
"""


from __future__ import annotations

import json
import multiprocessing
import random
import threading
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import pytest

from memgas.core.types import Edge, Unit
from memgas.core.validate import make_session
from memgas.store import SQLiteStore
from support.datasets import TOPICS
from support.hash_embedder import HashEmbedder

DIM = 8
USERS = ("u0", "u1", "u2")
UNITS_PER_SESSION = 4  # session unit, two turns, keyword: a session's units are written all or none


# -- store level ------------------------------------------------------------------------------------------------
def _store_add(store: SQLiteStore, user: str, sid: str, rng: random.Random) -> None:
    """Add a session linked to up to three units of the user's history, read under the same write lock."""
    messages = []
    for t in range(2):
        messages += [{"role": "user", "content": f"{sid} q{t}"}, {"role": "assistant", "content": f"{sid} a{t}"}]
    session = make_session(messages, user_id=user, session_id=sid)
    specs = [("session", 0, 2), ("turn", 0, 1), ("turn", 1, 2), ("keyword", 0, 2)]
    vectors = np.random.default_rng(rng.randrange(2**32)).standard_normal((len(specs), DIM)).astype(np.float32)
    units = [Unit(sid, g, f"{sid}/{g}/{s}", s, e, vector=v) for (g, s, e), v in zip(specs, vectors)]
    with store.writing(user):
        history = store.load_units(user).ids.tolist()
        old = rng.sample(history, min(3, len(history)))
        store.add_session(session, units, [Edge(-1, -2, 0.5)] + [Edge(-(i + 2), o, 0.3) for i, o in enumerate(old)])


def _store_search(store: SQLiteStore, user: str, copy: dict[str, Any]) -> None:
    """Read a user's index as a search does, check that it is one consistent state, and check that the
    incremental reads (``load_units_after``, ``load_edges_after``) bring ``copy`` to the same state."""
    with store.reading():
        version = store.version(user)
        table = store.load_units(user)
        edges = store.load_edges(user)
        infos = store.list_sessions(user)
        kept, added = store.load_units_after(user, copy["last"])
        newer = store.load_edges_after(user, copy["last"])
        sessions = {i.session_id for i in infos}
        counts: dict[str, int] = {}
        for sid in table.session_ids:
            counts[sid] = counts.get(sid, 0) + 1
        if set(counts) != sessions or set(counts.values()) - {UNITS_PER_SESSION}:
            raise AssertionError(f"units {counts} do not match sessions {sorted(sessions)}")
        if len(edges) and not (np.isin(edges.src, table.ids).all() and np.isin(edges.dst, table.ids).all()):
            raise AssertionError("an edge points to a unit that is not in the same snapshot")
        for sid in list(sessions)[:2]:
            if len(store.get_session(user, sid).messages) != 4:
                raise AssertionError(f"session {sid} is half-written")
        if (version == 0) != (not infos):
            raise AssertionError(f"version {version} with {len(infos)} sessions")
    if kept == len(copy["ids"]):  # nothing deleted since the copy: it can be refreshed incrementally
        ids = copy["ids"] + added.ids.tolist()
        pairs = copy["edges"] | set(zip(newer.src.tolist(), newer.dst.tolist()))
        if ids != table.ids.tolist() or pairs != set(zip(edges.src.tolist(), edges.dst.tolist())):
            raise AssertionError("the incremental refresh differs from a full read")
    copy.update(ids=table.ids.tolist(), edges=set(zip(edges.src.tolist(), edges.dst.tolist())),
                last=int(table.ids[-1]) if len(table) else 0)


def _run_workers(writer: Callable[[], None], searcher: Callable[[], None], n_searchers: int,
                 min_searches: int, counts: dict[str, Any]) -> None:
    """One writer thread and ``n_searchers`` searcher threads; searchers go on until the writer is done and
    they made ``min_searches`` searches together. Exceptions are counted and kept in ``counts``."""
    done = threading.Event()

    def guard(step: Callable[[], None], loop: bool) -> None:
        while True:
            try:
                step()
            except BaseException:
                counts["errors"].append(traceback.format_exc(limit=4))
            if not loop:
                done.set()
                return
            counts["searches"] += 1  # += on a dict item is not atomic, but only these threads write it
            if done.is_set() and counts["searches"] >= min_searches:
                return

    threads = [threading.Thread(target=guard, args=(writer, False))]
    threads += [threading.Thread(target=guard, args=(searcher, True)) for _ in range(n_searchers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def _store_worker(db: str, name: str, n_adds: int, min_searches: int, seed: int) -> dict[str, Any]:
    """A writer thread (adds, and deletes of some of its own sessions) and two searcher threads on one store
    object; returns the acknowledged adds and deletes, the search count and every error."""
    rng, search_rng = random.Random(seed), random.Random(seed + 1)
    counts: dict[str, Any] = {"adds": [], "deletes": [], "searches": 0, "errors": []}
    copies = {u: {"ids": [], "edges": set(), "last": 0} for u in USERS}
    copy_lock = threading.Lock()
    with SQLiteStore(db) as store:
        store.bind_embedder("hash", DIM)

        def write() -> None:
            for i in range(n_adds):
                user = USERS[i % len(USERS)]
                _store_add(store, user, f"{name}-{i}", rng)
                counts["adds"].append([user, f"{name}-{i}"])
                mine = [a for a in counts["adds"] if a not in counts["deletes"]]
                if i % 3 == 2 and len(mine) > len(USERS):
                    victim = rng.choice(mine[len(USERS):])  # the first session of each user stays
                    store.delete_session(*victim)
                    counts["deletes"].append(victim)

        def search() -> None:
            user = search_rng.choice(USERS)
            with copy_lock:  # a copy is refreshed by one thread at a time, as a cache would be
                _store_search(store, user, copies[user])

        _run_workers(write, search, 2, min_searches, counts)
    return counts


def _child(target: Callable[..., dict[str, Any]], out: str, *args: Any) -> None:
    """Run a worker in a child process and write its report as JSON."""
    Path(out).write_text(json.dumps(target(*args)))


def _in_processes(tmp_path: Path, target: Callable[..., dict[str, Any]], argsets: Sequence[tuple[Any, ...]],
                  local: dict[str, Any]) -> list[dict[str, Any]]:
    """Run ``target`` in one spawned process per argument tuple while ``local`` runs here; gather the reports."""
    ctx = multiprocessing.get_context("spawn")
    outs = [tmp_path / f"report{i}.json" for i in range(len(argsets))]
    procs = [ctx.Process(target=_child, args=(target, str(out), *args)) for out, args in zip(outs, argsets)]
    for p in procs:
        p.start()
    reports = [local["run"]()]
    for p in procs:
        p.join(120)
        assert p.exitcode == 0, f"worker process ended with {p.exitcode}"
    return reports + [json.loads(out.read_text()) for out in outs]


def _check_end_state(list_sessions: Callable[[str], list[str]], reports: list[dict[str, Any]]) -> dict[str, int]:
    """Every acknowledged add present unless acknowledged deleted, every acknowledged delete absent."""
    stored = {(u, sid) for u in USERS for sid in list_sessions(u)}
    added = {tuple(a) for r in reports for a in r["adds"]}
    deleted = {tuple(d) for r in reports for d in r["deletes"]}
    figures = {
        "adds": len(added), "deletes": len(deleted), "searches": sum(r["searches"] for r in reports),
        "errors": sum(len(r["errors"]) for r in reports),
        "lost_adds": len(added - deleted - stored), "deleted_present": len(deleted & stored),
        "unacknowledged_present": len(stored - added),
    }
    errors = [e for r in reports for e in r["errors"]]
    assert errors == [], f"{len(errors)} errors, first:\n{errors[0]}"
    assert figures["lost_adds"] == 0 and figures["deleted_present"] == 0 and figures["unacknowledged_present"] == 0
    return figures


@pytest.mark.slow
def test_store_threads_and_processes(tmp_path: Path) -> None:
    db = str(tmp_path / "store.db")
    SQLiteStore(db).close()
    argsets = [(db, f"p{k}", 60, 1200, 100 + k) for k in range(2)]
    local = {"run": lambda: _store_worker(db, "main", 60, 1200, 7)}
    t0 = time.perf_counter()
    reports = _in_processes(tmp_path, _store_worker, argsets, local)
    with SQLiteStore(db) as store:
        figures = _check_end_state(lambda u: [i.session_id for i in store.list_sessions(u)], reports)
        assert store._conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert store._conn.execute("PRAGMA foreign_key_check").fetchall() == []
    print(f"\nstore level, 3 processes x (1 writer + 2 searcher threads): {figures}, "
          f"{time.perf_counter() - t0:.1f} s")
    assert figures["searches"] >= 3600 and figures["deletes"] >= 45


def _memory_worker(db: str, name: str, n_adds: int, min_searches: int, seed: int) -> dict[str, Any]:
    """One Memory shared by a writer thread (adds and some deletes) and two searcher threads."""
    from memgas import Memory

    rng, search_rng = random.Random(seed), random.Random(seed + 1)
    counts: dict[str, Any] = {"adds": [], "deletes": [], "searches": 0, "errors": []}
    with Memory(db, embedder=HashEmbedder()) as memory:
        def write() -> None:
            for i in range(n_adds):
                user, topic = USERS[i % len(USERS)], rng.choice(TOPICS)
                sid = f"{name}-{i}"
                memory.add([{"role": "user", "content": f"Let me tell you about {topic} ({sid})."},
                            {"role": "assistant", "content": f"Sounds great, tell me more about {topic}."}],
                           user_id=user, session_id=sid)
                counts["adds"].append([user, sid])
                mine = [a for a in counts["adds"] if a not in counts["deletes"]]
                if i % 3 == 2 and len(mine) > len(USERS):
                    victim = rng.choice(mine[len(USERS):])
                    memory.delete(victim[1], user_id=victim[0])
                    counts["deletes"].append(victim)

        def search() -> None:
            query = f"what did I say about {search_rng.choice(TOPICS)}?"
            if not memory.search(query, user_id=search_rng.choice(USERS), k=3):
                raise AssertionError("no hit for a user with sessions")

        _run_workers(write, search, 2, min_searches, counts)
    return counts


@pytest.mark.slow
def test_memory_threads_and_processes(tmp_path: Path) -> None:
    from memgas import Memory

    db = str(tmp_path / "memory.db")
    argsets = [(db, "p0", 30, 700, 200)]
    local = {"run": lambda: _memory_worker(db, "main", 30, 700, 9)}
    t0 = time.perf_counter()
    with Memory(db, embedder=HashEmbedder()) as memory:  # every user has a session no worker deletes
        for user in USERS:
            memory.add([{"role": "user", "content": f"I am {user}."}], user_id=user, session_id="base")
    reports = _in_processes(tmp_path, _memory_worker, argsets, local)
    reports.append({"adds": [[u, "base"] for u in USERS], "deletes": [], "searches": 0, "errors": []})
    with Memory(db, embedder=HashEmbedder()) as memory:
        figures = _check_end_state(lambda u: [s.session_id for s in memory.list(user_id=u)], reports)
    print(f"\nMemory level, 2 processes x (1 writer + 2 searcher threads): {figures}, "
          f"{time.perf_counter() - t0:.1f} s")
    assert figures["searches"] >= 1400
