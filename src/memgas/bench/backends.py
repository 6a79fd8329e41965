"""``memgas bench store`` and ``memgas bench scale``: what the storage backend costs, SQLite or PostgreSQL.

*Throughput* (:func:`run_throughput`): N client processes start together, each adds its own sessions
(LongMemEval sessions, distinct across clients) to its own user through :class:`~memgas.memory.Memory`,
then all search their users; adds/s and searches/s are all clients' operations over the phase's wall
time (first start to last end). With a fresh embedding cache per client, the embedding model dominates
an add; with a pre-warmed cache (``--cache``, holding these sessions' texts) the store's cost shows.

*Scale* (:func:`run_scale`): many users of 20 sessions each. Embedding and association are the method's
cost, not the store's, so a few template users are ingested once by MemGAS (in memory) and what their
ingest wrote (sessions, units with vectors, edges) is replayed into the measured store for every user,
template ``i % T`` for user ``i``: the store holds the rows a real ingest would write. At each checkpoint
it reports the store's size on disk, search latency for a user whose index this process has not built
(cold: read the user's units and build the index) and for the same user again (warm), and the memory a
cached user's index holds (Python and numpy allocations left by building it, traced).
"""

from __future__ import annotations

import gc
import json
import os
import queue
import sys
import tempfile
import time
import tracemalloc
from contextlib import closing
from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from memgas.bench.cost import distinct_sessions
from memgas.bench.datasets import load_longmemeval
from memgas.core.errors import InvalidInputError
from memgas.core.types import Edge, Session, Unit
from memgas.store import Store, open_store

__all__ = ["run_throughput", "throughput_markdown", "run_scale", "scale_markdown", "store_size", "template_users",
           "replay_user", "percentiles"]


def _messages(session: Session) -> list[dict[str, str]]:
    return [{"role": m.role, "content": m.content} for m in session.messages]


def _client(index: int, target: str, user_id: str, sessions: list[Session], queries: list[str],
            cache: str | None, barrier: Any, out: Any) -> None:
    """One client process: open the store, add its sessions, then search its user (phases start on the barrier)."""
    from memgas.memory import Memory

    own_cache = cache is None
    cache_path = cache or os.path.join(tempfile.mkdtemp(prefix="memgas-bench-cache-"), "emb.sqlite")
    try:
        with Memory(target, embedding_cache=cache_path) as mem:
            getattr(mem.embedder, "inner", mem.embedder).embed(["load the model before the clock starts"])
            adds, searches = [], []
            barrier.wait()
            start = time.time()
            for s in sessions:
                t0 = time.perf_counter()
                mem.add(_messages(s), user_id=user_id, session_id=s.session_id, timestamp=s.timestamp)
                adds.append(time.perf_counter() - t0)
            add_span = (start, time.time())
            barrier.wait()
            start = time.time()
            for q in queries:
                t0 = time.perf_counter()
                mem.search(q, user_id=user_id, k=5)
                searches.append(time.perf_counter() - t0)
            out.put({"client": index, "adds": adds, "add_span": add_span, "searches": searches,
                     "search_span": (start, time.time())})
    except BaseException as exc:  # the parent reports it rather than waiting on a dead client
        barrier.abort()
        out.put({"client": index, "error": f"{type(exc).__name__}: {exc}"})
        raise
    finally:
        if own_cache:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{cache_path}{suffix}").unlink(missing_ok=True)
            os.rmdir(os.path.dirname(cache_path))


def rate(records: list[dict[str, Any]], ops: str, span: str) -> dict[str, float]:
    lat = np.concatenate([r[ops] for r in records]) * 1000
    wall = max(r[span][1] for r in records) - min(r[span][0] for r in records)
    return {"n": float(len(lat)), "wall_s": wall, "per_s": len(lat) / wall,
            "p50_ms": float(np.percentile(lat, 50)), "p95_ms": float(np.percentile(lat, 95))}


def run_throughput(
    target: str, data: Path, clients: Sequence[int], *, adds: int, searches: int, cache: Path | None,
    tag: str = "tp",
) -> list[dict[str, Any]]:
    """Adds/s and searches/s of ``n`` client processes on one store, for each ``n`` in ``clients``.

    Args:
        target: the store (a SQLite path or a ``postgresql://`` URL), shared by every client and run;
            each run's clients write users of their own (``<tag>-n<n>-c<i>``).
        data: LongMemEval file the sessions (distinct across all clients of a run) and queries come from.
        clients: client-process counts to run, one after another.
        adds: sessions each client adds; searches: queries each client then runs on its user.
        cache: an embedding cache shared by the clients (pre-warmed: the store's cost shows); ``None``:
            a fresh empty cache per client, so every add runs the embedding model.

    Returns:
        Per run: ``{"clients", "add": {n, wall_s, per_s, p50_ms, p95_ms}, "search": {...}}``.

    Raises:
        InvalidInputError: fewer sessions in ``data`` than the largest run needs, or counts below 1.
        RuntimeError: a client failed (its error is in the message).
    """
    import multiprocessing as mp

    if adds < 1 or searches < 1 or not clients or min(clients) < 1:
        raise InvalidInputError("clients, sessions and searches must be positive")
    need = max(clients) * adds
    sessions, questions = distinct_sessions(data, need)
    if len(sessions) < need:
        raise InvalidInputError(f"{data} holds {len(sessions)} distinct sessions; {need} are needed")
    if len(questions) < searches:
        questions = [q.question for q in load_longmemeval(data, limit=searches)]
    ctx = mp.get_context("spawn")  # never fork a process holding a store or a model runtime
    runs = []
    for n in clients:
        barrier, out = ctx.Barrier(n), ctx.Queue()
        procs = [ctx.Process(target=_client, args=(i, target, f"{tag}-n{n}-c{i}", sessions[i * adds:(i + 1) * adds],
                                                   questions[:searches], None if cache is None else str(cache),
                                                   barrier, out))
                 for i in range(n)]
        for p in procs:
            p.start()
        records = [_report(out, procs) for _ in procs]
        for p in procs:
            p.join()
        errors = [r["error"] for r in records if "error" in r]
        if errors:
            raise RuntimeError(f"{len(errors)} client(s) failed: {errors[0]}")
        runs.append({"clients": n, "add": rate(records, "adds", "add_span"),
                     "search": rate(records, "searches", "search_span")})
    return runs


def _report(out: Any, procs: list[Any]) -> dict[str, Any]:
    """The next client's report; a client that died without one (killed, out of memory) is an error, not a wait
    for ever."""
    while True:
        try:
            return dict(out.get(timeout=1.0))
        except queue.Empty:
            dead = [p for p in procs if p.exitcode not in (None, 0)]
            if dead:
                return {"error": f"client process {dead[0].pid} exited with {dead[0].exitcode} without a report"}


def throughput_markdown(results: dict[str, list[dict[str, Any]]]) -> str:
    """A table of adds/s and searches/s per backend and client count (``results``: label → runs)."""
    lines = ["| store | clients | adds/s | add p50 / p95 (ms) | searches/s | search p50 / p95 (ms) |",
             "|---|---:|---:|---:|---:|---:|"]
    for label, runs in results.items():
        for r in runs:
            a, s = r["add"], r["search"]
            lines.append(f"| {label} | {r['clients']} | {a['per_s']:.2f} | {a['p50_ms']:.0f} / {a['p95_ms']:.0f} | "
                         f"{s['per_s']:.1f} | {s['p50_ms']:.1f} / {s['p95_ms']:.1f} |")
    return "\n".join(lines) + "\n"


# -- scale ------------------------------------------------------------------------------------

#: One template user's ingest: per session, what MemGAS handed ``add_session`` and the unit ids it got back.
Template = list[tuple[Session, list[Unit], list[Edge], list[int]]]


def template_users(data: Path, n_templates: int, per_user: int, embedder: Any) -> tuple[list[Template], list[str]]:
    """Ingest ``n_templates`` users of ``per_user`` LongMemEval sessions each with MemGAS (in memory), recording
    every ``add_session`` call; and one question per template, to search with."""
    from memgas.methods import MemGAS

    ingester = MemGAS(embedder)
    sessions, questions = distinct_sessions(data, n_templates * per_user)
    if len(sessions) < n_templates * per_user:
        raise InvalidInputError(f"{data} holds {len(sessions)} distinct sessions; {n_templates * per_user} needed")
    templates: list[Template] = []
    for t in range(n_templates):
        record: Template = []
        with open_store(None) as store:
            original = store.add_session

            def recording(session: Session, units: Sequence[Unit], edges: Sequence[Edge], *,
                          embedder_id: str | None = None) -> list[int]:
                kept = [replace(u, id=None) for u in units]  # the store may set ids on what it is given
                ids = original(session, units, edges, embedder_id=embedder_id)
                record.append((session, kept, list(edges), list(ids)))
                return ids

            store.add_session = recording  # type: ignore[method-assign]
            for s in sessions[t::n_templates][:per_user]:
                ingester.ingest(store, replace(s, user_id="template"))
        templates.append(record)
    return templates, (questions * n_templates)[:n_templates]


def replay_user(store: Store, user_id: str, template: Template) -> None:
    """Write a template's sessions, units and edges for ``user_id``, mapping stored unit ids to the new ones."""
    new_id: dict[int, int] = {}
    for session, units, edges, old_ids in template:
        mapped = [Edge(e.src if e.src < 0 else new_id[e.src], e.dst if e.dst < 0 else new_id[e.dst], e.weight)
                  for e in edges]
        ids = store.add_session(replace(session, user_id=user_id), [replace(u, id=None) for u in units], mapped)
        new_id.update(zip(old_ids, ids))


def store_size(target: str) -> int:
    """Bytes the store takes on disk: a SQLite file with its WAL (checkpointed first), or on PostgreSQL its tables
    with their indexes and TOAST as its ``stats()`` counts them (not the database's own catalogs, a fixed 7 to 8 MB
    that would swamp a small store)."""
    if target.startswith(("postgresql://", "postgres://")):
        with open_store(target) as store:
            return int(store.stats()["file_bytes"])
    import sqlite3

    # The write-ahead log holds pages not yet copied into the file (up to the whole of a fresh store): copy them
    # first, so that the size is the store's, not the log's.
    with closing(sqlite3.connect(target)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return sum(os.path.getsize(f"{target}{s}") for s in ("", "-wal") if os.path.exists(f"{target}{s}"))


#: Users whose indexes are held at once to measure memory per cached user (the index cache keeps 8 by default).
_HELD_USERS = 5


def percentiles(seconds: list[float]) -> dict[str, float]:
    ms = np.asarray(seconds) * 1000
    return {"p50_ms": float(np.percentile(ms, 50)), "p95_ms": float(np.percentile(ms, 95))}


def run_scale(
    target: str, data: Path, checkpoints: Sequence[int], embedder: Any, *, per_user: int = 20,
    n_templates: int = 10, probes: int = 40, seed: int = 0,
) -> list[dict[str, Any]]:
    """Fill a store with users of ``per_user`` sessions and measure it at each user count in ``checkpoints``.

    Args:
        target: the store (SQLite path or ``postgresql://`` URL); it should be empty.
        data: LongMemEval file the template sessions and queries come from.
        checkpoints: user counts to measure at, ascending.
        embedder: the embedder (give it a warm cache: templates are ingested for real once).
        per_user: sessions per user; n_templates: distinct template users; probes: users searched per checkpoint.

    Returns:
        Per checkpoint: ``users``, ``sessions``, ``write_sessions_per_s`` (replay since the previous checkpoint),
        ``size_bytes``, ``cold`` and ``warm`` search ``{p50_ms, p95_ms}``, ``cached_user_bytes``.

    Raises:
        InvalidInputError: checkpoints not ascending positive integers, or too few sessions in ``data``.
    """
    from datetime import datetime

    from memgas.methods import get_method

    if not checkpoints or list(checkpoints) != sorted(set(checkpoints)) or checkpoints[0] < 1:
        raise InvalidInputError("checkpoints must be ascending positive integers")
    templates, questions = template_users(data, n_templates, per_user, embedder)
    # Query vectors are put in the cache first: the latencies are the store's and the index's, not the model's.
    cache = getattr(embedder, "cache", None)
    if cache is not None:
        cache.put_many(embedder.id, questions, getattr(embedder, "inner", embedder).embed(questions))
    rng = np.random.default_rng(seed)
    now = datetime(2030, 1, 1)
    out: list[dict[str, Any]] = []
    with open_store(target) as store:
        store.bind_embedder(embedder.id, embedder.dim)
        users = 0
        for checkpoint in checkpoints:
            t0 = time.perf_counter()
            for u in range(users, checkpoint):
                replay_user(store, f"u{u:06d}", templates[u % n_templates])
            written = (checkpoint - users) * per_user / (time.perf_counter() - t0)
            users = checkpoint
            picked = rng.choice(users, size=min(probes, users), replace=False)
            method = get_method("memgas", embedder)  # a fresh index cache: every picked user is cold
            cold: list[float] = []
            warm: list[float] = []
            for u in picked:
                uid, query = f"u{u:06d}", questions[u % n_templates]
                for times in (cold, warm):
                    t1 = time.perf_counter()
                    method.search(store, uid, query, k=5, query_time=now)
                    times.append(time.perf_counter() - t1)
            del method
            # Memory of cached indexes: what building a user's index leaves allocated (numpy reports its
            # buffers to tracemalloc), over a few cold users, all within the index cache's capacity.
            method = get_method("memgas", embedder)
            method.search(store, "u000000", questions[0], k=5, query_time=now)  # one-time allocations first
            held = list(range(1, min(_HELD_USERS, users - 1) + 1))
            gc.collect()
            tracemalloc.start()
            base = tracemalloc.get_traced_memory()[0]
            for u in held:
                method.search(store, f"u{u:06d}", questions[u % n_templates], k=5, query_time=now)
            gc.collect()
            cached = (tracemalloc.get_traced_memory()[0] - base) / max(1, len(held))
            tracemalloc.stop()
            del method
            out.append({"users": users, "sessions": users * per_user, "write_sessions_per_s": written,
                        "size_bytes": store_size(target), "cold": percentiles(cold), "warm": percentiles(warm),
                        "cached_user_bytes": cached})
            print(f"scale: {json.dumps(out[-1])}", file=sys.stderr, flush=True)  # a long run shows each checkpoint
    return out


def scale_markdown(results: dict[str, list[dict[str, Any]]]) -> str:
    """A table per backend and checkpoint (``results``: label → checkpoints)."""
    lines = ["| store | users | sessions | size (MB) | bytes / session | writes (sessions/s) | cold search p50 / p95 (ms) "
             "| warm search p50 / p95 (ms) | memory per cached user (MB) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for label, rows in results.items():
        for r in rows:
            c, w = r["cold"], r["warm"]
            lines.append(f"| {label} | {r['users']:,} | {r['sessions']:,} | {r['size_bytes'] / 1e6:.1f} | "
                         f"{r['size_bytes'] / r['sessions']:,.0f} | {r['write_sessions_per_s']:.0f} | "
                         f"{c['p50_ms']:.1f} / {c['p95_ms']:.1f} | {w['p50_ms']:.1f} / {w['p95_ms']:.1f} | "
                         f"{r['cached_user_bytes'] / 1e6:.2f} |")
    return "\n".join(lines) + "\n"
