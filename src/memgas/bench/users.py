"""Many users against one process's index cache: ``memgas bench users``.

``users`` users of ``sessions`` LongMemEval-S dev sessions each are written to a fresh store (ten template users are
ingested with MemGAS once and replayed under new ids, so the store holds real units and edges without embedding
every copy). Query vectors are put in the embedding cache first: the latencies are the store's and the index's,
not the model's. Then, with MemGAS and its index cache sized to ``index_cache_mb``:

* *warm*: one user searched ``probes`` times (its index built by a first search);
* *round robin*: every user in turn, ``rounds`` times over, with a cache that starts empty (the first round loads or
  builds each user's index; the others find it cached or not, as the cache's size allows).

A cache size may be given as ``(MiB, False)`` to measure it with MemGAS's snapshots off (``snapshots=False``): an
evicted user is then rebuilt from the store instead of loaded from its snapshot. The first row's round robin also
writes every user's snapshot (each first load is a build); later rows read them.

With ``http_workers``, the same warm and round-robin searches then go over HTTP to a ``memgas serve --workers N``
subprocess on the store (default index cache, one client opening a connection per request so that the workers
share them, and one query for every user, so that the server embeds it once and what is timed is the index's work;
the first round of each, which loads or builds the indexes, is reported apart).

Each table row gives p50/p95 of both, their ratio (p50), what the cache held at the end, how many indexes were
built and loaded from snapshots, and the process's resident memory per cached user (RSS after the round robin less
RSS before it, over the users held; given for the first row only: later rows reuse the memory earlier ones freed). The
store's bytes per session are given before and after the snapshots.
"""

from __future__ import annotations

import gc
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Sequence

from memgas.bench.backends import percentiles, replay_user, store_size, template_users
from memgas.bench.live import rss_mb
from memgas.methods import get_method
from memgas.service.keys import create_key
from memgas.service.spawn import spawn_server, stop_server
from memgas.store import KeyStore, open_store, part

__all__ = ["run_users", "users_markdown"]


def run_users(target: str, data: Path, embedder: Any, *, users: int = 12, sessions: int = 100,
              cache_mb: Sequence[float | None | tuple[float | None, bool]] = (1024, 1), rounds: int = 4,
              probes: int = 40, http_workers: Sequence[int] = ()) -> dict[str, Any]:
    """Measure round-robin searches against a warm user at each cache size (see the module docstring)."""
    n_templates = min(10, users)
    templates, questions = template_users(data, n_templates, sessions, embedder)
    cache = getattr(embedder, "cache", None)
    if cache is not None:
        cache.put_many(embedder.id, questions, getattr(embedder, "inner", embedder).embed(questions))
    now = datetime(2030, 1, 1)
    rows = []
    with open_store(target) as store:
        store.bind_embedder(embedder.id, embedder.dim)
        for u in range(users):
            replay_user(store, f"u{u:05d}", templates[u % n_templates])
        size = store_size(target)
        for spec in cache_mb:
            mb, snapshots = spec if isinstance(spec, tuple) else (spec, True)

            def fresh() -> Any:
                method = get_method("memgas", embedder, snapshots=snapshots)
                if mb is not None:
                    method.limit_caches(int(mb * 2**20))
                return method

            method = fresh()
            warm = []
            method.search(store, "u00000", questions[0], k=5, query_time=now)
            for _ in range(probes):
                t0 = time.perf_counter()
                method.search(store, "u00000", questions[0], k=5, query_time=now)
                warm.append(time.perf_counter() - t0)
            method.flush()  # the warm user's snapshot, written in the background
            del method
            gc.collect()
            rss_before = rss_mb()
            method = fresh()  # an empty cache for the round robin
            robin: list[float] = []
            first: list[float] = []
            for r in range(rounds):
                for u in range(users):
                    t0 = time.perf_counter()
                    method.search(store, f"u{u:05d}", questions[u % n_templates], k=5, query_time=now)
                    (first if r == 0 else robin).append(time.perf_counter() - t0)
            method.flush()  # the snapshots the round robin's builds wrote in the background (for the rows after)
            gc.collect()
            held = method.cache_usage(store)
            rows.append({"cache_mb": mb, "snapshots": snapshots, "warm": percentiles(warm),
                         "round_robin": percentiles(robin), "first_round": percentiles(first),
                         "held_users": held["users"], "held_bytes": held["bytes"], "builds": method._indexes.builds,
                         "loads": method._indexes.loads,
                         "rss_mb_per_user": (rss_mb() - rss_before) / max(1, held["users"])})
            del method
        key = create_key(part(store, KeyStore), "admin", name="bench users")[0] if http_workers else ""
    http_rows = [_over_http(target, key, workers, users, questions, rounds, probes)
                 for workers in http_workers]
    return {"users": users, "sessions": sessions, "store_bytes_per_session": size / (users * sessions),
            "store_bytes_per_session_with_snapshots": store_size(target) / (users * sessions),
            "rounds": rounds, "rows": rows, "http": http_rows}


def _timed(calls: int, call: Callable[[int], None]) -> list[float]:
    """The seconds each of ``calls`` calls of ``call(i)`` took."""
    out = []
    for i in range(calls):
        t0 = time.perf_counter()
        call(i)
        out.append(time.perf_counter() - t0)
    return out


def _over_http(target: str, key: str, workers: int, users: int, questions: list[str], rounds: int,
               probes: int) -> dict[str, Any]:
    """The warm and round-robin searches of :func:`run_users` over HTTP, to ``memgas serve --workers workers``."""
    import httpx

    with tempfile.TemporaryDirectory() as tmp:
        proc, url, _ = spawn_server(target, "--workers", str(workers), log=Path(tmp) / "serve.log")
        try:
            # A connection per request, so that the workers share the requests (a kept-alive one stays with one).
            with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=120,
                              limits=httpx.Limits(max_keepalive_connections=0)) as http:
                def search(user: str, query: str) -> None:
                    http.post("/v1/search", json={"user_id": user, "query": query, "k": 5,
                                                  "query_time": "2030-01-01T00:00:00"}).raise_for_status()

                first = _timed(2 * workers, lambda i: search("u00000", questions[0]))  # each worker loads it
                warm = _timed(probes, lambda i: search("u00000", questions[0]))
                # One query for every user: the server embeds it once, so that what is timed is the index's work.
                first += _timed(users, lambda i: search(f"u{i:05d}", questions[0]))
                robin = _timed((rounds - 1) * users, lambda i: search(f"u{i % users:05d}", questions[0]))
        finally:
            stop_server(proc)
    return {"workers": workers, "warm": percentiles(warm), "round_robin": percentiles(robin),
            "first_round": percentiles(first)}


def users_markdown(r: dict[str, Any]) -> str:
    """The runs as a Markdown table."""
    lines = [f"{r['users']} users × {r['sessions']} sessions; store {r['store_bytes_per_session'] / 1e3:.1f} KB per "
             f"session ({r['store_bytes_per_session_with_snapshots'] / 1e3:.1f} KB with every user's snapshot); round "
             f"robin: {r['rounds'] - 1} rounds after the first (which loads or builds every index).", "",
             "| index cache | warm p50 / p95 (ms) | round robin p50 / p95 (ms) | round robin / warm (p50) | "
             "first round p50 (ms) | users held | MB held | builds | snapshot loads | RSS per cached user (MiB) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row in r["rows"]:
        w, rr, f = row["warm"], row["round_robin"], row["first_round"]
        label = "8 users" if row["cache_mb"] is None else f"{row['cache_mb']:g} MiB"
        label += "" if row["snapshots"] else ", snapshots off"
        rss = f"{row['rss_mb_per_user']:.2f}" if row is r["rows"][0] else "—"
        lines.append(f"| {label} | {w['p50_ms']:.1f} / {w['p95_ms']:.1f} | {rr['p50_ms']:.1f} / {rr['p95_ms']:.1f} | "
                     f"{rr['p50_ms'] / w['p50_ms']:.2f} | {f['p50_ms']:.1f} | {row['held_users']} | "
                     f"{row['held_bytes'] / 2**20:.1f} | {row['builds']} | {row['loads']} | "
                     f"{rss} |")
    if r.get("http"):
        lines += ["", "Over HTTP (`memgas serve`, the default index cache, one client, a connection per request):", "",
                  "| workers | warm p50 / p95 (ms) | round robin p50 / p95 (ms) | round robin / warm (p50) | "
                  "first round p50 (ms) |", "|---:|---:|---:|---:|---:|"]
        for row in r["http"]:
            w, rr, f = row["warm"], row["round_robin"], row["first_round"]
            lines.append(f"| {row['workers']} | {w['p50_ms']:.1f} / {w['p95_ms']:.1f} | {rr['p50_ms']:.1f} / "
                         f"{rr['p95_ms']:.1f} | {rr['p50_ms'] / w['p50_ms']:.2f} | {f['p50_ms']:.1f} |")
    return "\n".join(lines) + "\n"
