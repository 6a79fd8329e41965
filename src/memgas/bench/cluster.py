"""``memgas bench cluster``: memgas past one machine, measured on the cluster of :mod:`memgas.bench.hacluster`
(three PostgreSQL nodes under Patroni, a router with HAProxy and PgBouncer, three workers; every host a network
namespace where that can be made, all on this machine's cores).

In order, on one cluster:

1. *Fill*: ``users`` users of ``sessions`` LongMemEval-S dev sessions each, replayed from ten ingested templates (as
   ``bench users`` does) through the pooler into the primary; the store's bytes per session, table by table.
2. *Round robin*: a warm user searched ``probes`` times, then every user in turn through the router, ``rounds``
   rounds after a first one that loads each index: the router sends each user to one worker, so each worker's
   cache (``cache_mb``) holds its third of the users. One query text for every user, embedded once per worker.
3. *Throughput* with 3, 2 and 1 workers (the others' hosts killed in turn): ``clients`` threads append to users of
   their own for ``load_s`` seconds, then search them for as long; the replicas' lag behind the primary is sampled
   while they write. The same round robin again with the one worker left, whose cache cannot hold every user.
4. *Failover*: ``drills`` times, the primary's host killed under load (:func:`memgas.bench.failover.run_drill`) and
   started again once a replica has taken over; once, its PostgreSQL alone.
"""

from __future__ import annotations

import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

from memgas.bench.backends import percentiles, replay_user, template_users
from memgas.bench.failover import run_drill
from memgas.bench.hacluster import HACluster

__all__ = ["run_cluster", "cluster_markdown"]

#: The tables of a store, for the bytes-per-session breakdown.
_TABLES = ("messages", "units", "sessions", "snapshots", "users")


def _fill(cluster: HACluster, data: Path, embedder: Any, users: int, sessions: int) -> tuple[str, list[str], float]:
    """Replay the users into the cluster: the query to search them with, their ids, the sessions written per second."""
    from memgas.store.postgres import PostgresStore

    templates, questions = template_users(data, min(10, users), sessions, embedder)
    ids = [f"rr{u:05d}" for u in range(users)]
    started = time.perf_counter()
    with PostgresStore(cluster.database_url(read_replicas=False)) as store:
        store.bind_embedder(embedder.id, embedder.dim)
        # Four writers: each commit waits for two replicas, so one writer would mostly wait.
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(lambda u: replay_user(store, ids[u], templates[u % len(templates)]), range(users)))
    return questions[0], ids, users * sessions / (time.perf_counter() - started)


def _bytes(cluster: HACluster, n_sessions: int) -> dict[str, float]:
    """Bytes per session on the primary: the store (its tables with their indexes and TOAST), each table, and the
    whole database (with PostgreSQL's own catalogs, a fixed 7 to 8 MB that a small store cannot spread)."""
    import psycopg

    with psycopg.connect(cluster.node_url(cluster.primary() or "db1"), autocommit=True) as conn:
        conn.execute("CHECKPOINT")
        total = conn.execute("SELECT pg_database_size(current_database())").fetchone()[0]  # type: ignore[index]
        tables = {table: conn.execute("SELECT pg_total_relation_size(%s::regclass)",
                                      (table,)).fetchone()[0] / n_sessions for table in _TABLES}  # type: ignore[index]
    return {"store": sum(tables.values()), **tables, "database": total / n_sessions}


def _round_robin(cluster: HACluster, query: str, users: list[str], rounds: int, probes: int) -> dict[str, Any]:
    """Warm and round-robin searches through the router (a connection per request)."""
    import httpx

    with httpx.Client(base_url=cluster.url, headers={"Authorization": f"Bearer {cluster.key}"}, timeout=120,
                      limits=httpx.Limits(max_keepalive_connections=0)) as http:
        def search(user: str) -> float:
            t0 = time.perf_counter()
            http.post("/v1/search", json={"user_id": user, "query": query, "k": 5,
                                          "query_time": "2030-01-01T00:00:00"}).raise_for_status()
            return time.perf_counter() - t0

        for _ in range(2):
            search(users[0])
        warm = percentiles([search(users[0]) for _ in range(probes)])
        first = percentiles([search(u) for u in users])
        robin = percentiles([search(u) for _ in range(rounds - 1) for u in users])
    return {"warm": warm, "round_robin": robin, "first_round": first, "ratio": robin["p50_ms"] / warm["p50_ms"]}


def _lag_sampler(cluster: HACluster, stop: threading.Event, seen: list[tuple[float, float]]) -> None:
    """Sample the replicas' replay lag (seconds, bytes) on the primary every 0.25 s until ``stop``."""
    import psycopg

    while not stop.is_set():
        try:
            with psycopg.connect(cluster.node_url(cluster.primary() or "db1"), autocommit=True,
                                 connect_timeout=2) as conn:
                while not stop.is_set():
                    for seconds, behind in conn.execute(
                            "SELECT coalesce(extract(epoch FROM replay_lag), 0),"
                            " pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn) FROM pg_stat_replication"):
                        seen.append((float(seconds), float(behind or 0)))
                    time.sleep(0.25)
        except psycopg.Error:
            time.sleep(0.25)


def _load(cluster: HACluster, clients: int, seconds: float, tag: str) -> dict[str, Any]:
    """``clients`` threads appending for ``seconds``, then searching for as long: rates, latencies, replica lag."""
    from memgas.client import Client

    def phase(call: Callable[[Client, str, int], object]) -> tuple[int, list[float]]:
        stop, lock, times = threading.Event(), threading.Lock(), []

        def run(i: int) -> None:
            with Client(cluster.url, cluster.key, timeout=60, retries=0) as client:
                n = 0
                while not stop.is_set():
                    t0 = time.perf_counter()
                    call(client, f"{tag}c{i}", n)
                    with lock:
                        times.append(time.perf_counter() - t0)
                    n += 1

        with ThreadPoolExecutor(clients) as pool:
            running = [pool.submit(run, i) for i in range(clients)]
            time.sleep(seconds)
            stop.set()
            for client in running:
                client.result()  # a client's failure fails the measurement, rather than thinning it unseen
        return len(times), times

    lag: list[tuple[float, float]] = []
    sampling = threading.Event()
    sampler = threading.Thread(target=_lag_sampler, args=(cluster, sampling, lag), daemon=True)
    sampler.start()
    n_writes, writes = phase(lambda c, user, n: c.append(
        [{"role": "user", "content": f"{user} note {n}: the ferry leaves at {n % 24}h from pier {n % 7}"}],
        user_id=user, session_id=f"s{n // 20}"))
    sampling.set()
    sampler.join()
    n_searches, searches = phase(lambda c, user, n: c.search("when does the ferry leave", user_id=user, k=5))
    return {"writes_per_s": n_writes / seconds, "write": percentiles(writes), "searches_per_s": n_searches / seconds,
            "search": percentiles(searches), "lag_max_s": max((s for s, _ in lag), default=0.0),
            "lag_max_bytes": max((b for _, b in lag), default=0.0)}


def run_cluster(data: Path, embedder: Any, *, users: int = 1000, sessions: int = 10, cache_mb: float = 100,
                rounds: int = 3, probes: int = 40, clients: int = 8, load_s: float = 8.0, drills: int = 5,
                namespaces: bool = True, progress: Callable[[str], None] = lambda line: None) -> dict[str, Any]:
    """Measure the cluster (see the module docstring)."""
    out: dict[str, Any] = {"users": users, "sessions": sessions, "cache_mb": cache_mb}
    with HACluster(workers=3, worker_options=("--index-cache-mb", f"{cache_mb:g}"), namespaces=namespaces) as cluster:
        out["hosts"] = cluster.hosts.mode
        progress(f"cluster up ({cluster.hosts.mode}); filling {users} users x {sessions} sessions")
        query, ids, out["fill_sessions_per_s"] = _fill(cluster, data, embedder, users, sessions)
        out["bytes_per_session"] = _bytes(cluster, users * sessions)
        progress("round robin, 3 workers")
        out["round_robin"] = {3: _round_robin(cluster, query, ids, rounds, probes)}
        out["bytes_per_session_with_snapshots"] = _bytes(cluster, users * sessions)["store"]
        out["load"] = {}
        for k in (3, 2, 1):
            progress(f"load, {k} workers")
            out["load"][k] = _load(cluster, clients, load_s, f"l{k}")
            if k > 1:
                cluster.kill_host(f"w{k}")
                cluster.wait_routed({f"w{i + 1}" for i in range(k - 1)})
        progress("round robin, 1 worker")
        out["round_robin"][1] = _round_robin(cluster, query, ids, rounds, probes)
        for worker in ("w2", "w3"):
            cluster.start_worker(worker)
        cluster.wait_routed()
        out["drills"] = []
        for d in range(drills + 1):
            kill = "host" if d < drills else "postgres"
            progress(f"failover drill {d + 1} of {drills + 1} ({kill})")
            drill = run_drill(cluster, kill=kill, tag=f"f{d}")
            out["drills"].append(drill.row())
            if kill == "host":
                cluster.restart_node(drill.killed)
            cluster.wait_replicas(2)
    hosts = out["drills"][:-1]  # the last drill kills PostgreSQL only
    out["failover"] = {"downtime_median_s": statistics.median(r["downtime_s"] for r in hosts) if hosts else None,
                       "promoted_median_s": statistics.median(r["promoted_after_s"] for r in hosts) if hosts else None,
                       "lost": sum(r["lost"] for r in out["drills"]),
                       "stale": sum(r["stale"] for r in out["drills"]),
                       "acknowledged": sum(r["acknowledged"] for r in out["drills"])}
    return out


def cluster_markdown(r: dict[str, Any]) -> str:
    """The results as Markdown tables."""
    b = r["bytes_per_session"]
    lines = [f"Hosts: {r['hosts']}. {r['users']:,} users × {r['sessions']} sessions, filled at "
             f"{r['fill_sessions_per_s']:.0f} sessions/s (4 writers, two synchronous replicas).", "",
             "Store bytes per session on the primary (each table with its indexes and TOAST): "
             + ", ".join(f"{k} {v / 1e3:.1f} KB" for k, v in b.items())
             + f"; {r['bytes_per_session_with_snapshots'] / 1e3:.1f} KB with the snapshots the round robin wrote.", "",
             f"Round robin through the router ({r['cache_mb']:g} MiB index cache per worker; a connection per request):",
             "", "| workers | warm p50 / p95 (ms) | round robin p50 / p95 (ms) | round robin / warm (p50) | "
             "first round p50 (ms) |", "|---:|---:|---:|---:|---:|"]
    for k, row in sorted(r["round_robin"].items(), key=lambda kv: -int(kv[0])):
        w, rr, f = row["warm"], row["round_robin"], row["first_round"]
        lines.append(f"| {k} | {w['p50_ms']:.1f} / {w['p95_ms']:.1f} | {rr['p50_ms']:.1f} / {rr['p95_ms']:.1f} | "
                     f"**{row['ratio']:.2f}** | {f['p50_ms']:.1f} |")
    lines += ["", "Load through the router (appends, then searches, by concurrent clients):", "",
              "| workers | writes/s | write p50 / p95 (ms) | searches/s | search p50 / p95 (ms) | replica lag max |",
              "|---:|---:|---:|---:|---:|---:|"]
    for k, row in sorted(r["load"].items(), key=lambda kv: -int(kv[0])):
        lines.append(f"| {k} | {row['writes_per_s']:.1f} | {row['write']['p50_ms']:.0f} / {row['write']['p95_ms']:.0f} "
                     f"| {row['searches_per_s']:.1f} | {row['search']['p50_ms']:.0f} / {row['search']['p95_ms']:.0f} | "
                     f"{row['lag_max_s'] * 1000:.0f} ms, {row['lag_max_bytes'] / 1e3:.0f} KB |")
    f = r["failover"]
    lines += ["", "Failover drills (writers append, searchers search, the primary killed under them):", "",
              "| drill | killed | promoted | promoted after (s) | longest time without a write (s) | acknowledged | "
              "failed | lost | read stale | doubled |", "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for i, d in enumerate(r["drills"]):
        what = "host" if i < len(r["drills"]) - 1 else "PostgreSQL"
        lines.append(f"| {i + 1} ({what}) | {d['killed']} | {d['promoted']} | {d['promoted_after_s']:.1f} | "
                     f"{d['downtime_s']:.1f} | {d['acknowledged']} | {d['failed']} | {d['lost']} | {d['stale']} | {d['duplicated']} |")
    if f["downtime_median_s"] is not None:
        lines += ["", f"Host killed: median {f['downtime_median_s']:.1f} s without a write, a replica promoted after "
                      f"{f['promoted_median_s']:.1f} s (median); acknowledged writes lost in all drills: "
                      f"**{f['lost']}** of {f['acknowledged']}; missing from a read but in the database: {f['stale']}."]
    return "\n".join(lines) + "\n"
