"""A primary lost under load, and what the clients saw: the failover drill of the cluster tests and ``memgas bench
cluster``.

Writers append numbered messages to their own user's session through the router, as agents do; searchers search their
users. A write is *acknowledged* when the service answered it with success. At a moment the primary is killed
(:meth:`~memgas.bench.hacluster.HACluster.kill_host`: PostgreSQL, Patroni and etcd at once; or the PostgreSQL server
only). Writers that fail wait 50 ms and go on with their next message. When a new primary has taken writes for a
while, the clients stop and every session is read back through the router: each acknowledged message must be there,
in order; an unacknowledged one may be there or not (the connection was lost at ``COMMIT``), but whole and once.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from memgas.bench.hacluster import HACluster

__all__ = ["Drill", "run_drill"]


@dataclass
class Drill:
    """What one failover drill saw."""

    killed: str = ""
    promoted: str = ""
    acknowledged: int = 0
    failed: int = 0
    lost: list[str] = field(default_factory=list)  # acknowledged writes the primary's database lacks afterwards
    stale: list[str] = field(default_factory=list)  # acknowledged writes the primary has, missing from a read after
    duplicated: list[str] = field(default_factory=list)
    out_of_order: int = 0  # sessions whose acknowledged messages are not in the order they were written
    searches: int = 0
    failed_searches: int = 0
    downtime_s: float = 0.0  # the longest time no write succeeded, from the kill on
    promoted_after_s: float = 0.0  # from the kill to Patroni's new primary

    def row(self) -> dict[str, Any]:
        """The drill as a plain dict (for the benchmark's JSON)."""
        return {k: (len(v) if isinstance(v, list) else v) for k, v in self.__dict__.items()}


def run_drill(cluster: HACluster, *, kill: str = "host", writers: int = 4, searchers: int = 2,
              before_s: float = 3.0, after_s: float = 5.0, tag: str = "d") -> Drill:
    """Kill the primary (``kill``: ``"host"`` or ``"postgres"``) while clients write and search; see the module."""
    from memgas.client import Client

    drill = Drill()
    stop = threading.Event()
    acked: dict[str, list[str]] = {f"{tag}u{i}": [] for i in range(writers)}
    success_times: list[float] = []
    lock = threading.Lock()

    def write(user: str) -> None:
        with Client(cluster.url, cluster.key, timeout=30, retries=0) as client:
            n = 0
            while not stop.is_set():
                text = f"{user} note {n}: the ferry leaves at {n % 24}h"
                try:
                    client.append([{"role": "user", "content": text}], user_id=user, session_id="log")
                except Exception:  # unacknowledged: counted, and the next message goes on
                    with lock:
                        drill.failed += 1
                    time.sleep(0.05)
                else:
                    acked[user].append(text)
                    with lock:
                        drill.acknowledged += 1
                        success_times.append(time.monotonic())
                n += 1

    def search(i: int) -> None:
        user = f"{tag}u{i % writers}"
        with Client(cluster.url, cluster.key, timeout=30, retries=0) as client:
            while not stop.is_set():
                try:
                    client.search("when does the ferry leave", user_id=user, k=3)
                    with lock:
                        drill.searches += 1
                except Exception:
                    with lock:
                        drill.failed_searches += 1
                    time.sleep(0.05)

    threads = [threading.Thread(target=write, args=(user,), daemon=True) for user in acked]
    threads += [threading.Thread(target=search, args=(i,), daemon=True) for i in range(searchers)]
    for t in threads:
        t.start()
    time.sleep(before_s)
    drill.killed = cluster.primary() or ""
    killed_at = time.monotonic()
    if kill == "host":
        cluster.kill_host(drill.killed)
    else:
        cluster.kill_postgres(drill.killed)
    drill.promoted = cluster.wait_primary(other_than=drill.killed if kill == "host" else None)
    drill.promoted_after_s = time.monotonic() - killed_at
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # until writes have gone through the new primary for after_s
        with lock:
            recent = [t for t in success_times if t > killed_at]
        if recent and time.monotonic() - recent[0] >= after_s:
            break
        time.sleep(0.2)
    stop.set()
    for t in threads:
        t.join(60)
    with lock:
        times = sorted([killed_at] + [t for t in success_times if t >= killed_at])
    drill.downtime_s = max((b - a for a, b in zip(times, times[1:])), default=0.0)
    _check(cluster, drill, acked)
    return drill


def _check(cluster: HACluster, drill: Drill, acked: dict[str, list[str]]) -> None:
    """Read every session back through the router: acknowledged messages all there, in order, nothing twice. One
    missing from that read is looked up on the primary itself: *lost* if it lacks it too, else a *stale* read."""
    import psycopg

    from memgas.client import Client
    from memgas.core.errors import NotFoundError

    with Client(cluster.url, cluster.key, timeout=30, retries=5) as client, \
            psycopg.connect(cluster.node_url(cluster.primary() or ""), autocommit=True) as primary:
        for user, texts in acked.items():
            try:
                stored = [m.content for m in client.get("log", user_id=user).messages]
            except NotFoundError:  # none of the user's writes went through
                stored = []
            present = set(stored)
            for text in texts:
                if text not in present:
                    found = primary.execute("SELECT count(*) FROM messages WHERE user_id = %s AND content = %s",
                                            (user, text)).fetchone()
                    (drill.stale if found and found[0] else drill.lost).append(text)
            drill.duplicated += sorted({t for t in stored if stored.count(t) > 1})
            order = [t for t in stored if t in set(texts)]
            drill.out_of_order += order != [t for t in texts if t in present]
