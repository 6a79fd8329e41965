"""memgas past one machine (issue 40): three PostgreSQL nodes under Patroni with etcd, HAProxy and PgBouncer on a
router host, three workers on hosts of their own, each host a network namespace (``memgas.bench.hacluster``, started
from Debian's packages and the files in ``memgas.deploy``). The failover drills come last: they kill the primary."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from memgas.bench.failover import run_drill
from memgas.bench.hacluster import HACluster, unavailable
from memgas.client import Client

pytestmark = [pytest.mark.slow, pytest.mark.cluster]


@pytest.fixture(scope="module")
def cluster() -> Iterator[HACluster]:
    reason = unavailable()
    if reason:
        pytest.skip(reason)
    with HACluster(workers=3) as running:
        print(f"cluster hosts: {running.hosts.mode}")  # -s shows whether namespaces could be made
        yield running


def _served_by(cluster: HACluster, user: str) -> str:
    """The worker that serves a search of ``user``. Right after a worker is lost, until the router's checks mark it
    down (two failed checks, half a second apart), a request may get a 502 or 503: it is sent again, as a client
    would, for up to 10 s."""
    deadline = time.monotonic() + 10
    while True:
        reply = httpx.post(f"{cluster.url}/v1/search", json={"user_id": user, "query": "trains", "k": 1},
                           headers={"Authorization": f"Bearer {cluster.key}"}, timeout=60)
        if reply.status_code not in (502, 503) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert reply.status_code == 200, reply.text
    return reply.headers["X-Memgas-Worker"]


def test_the_cluster_is_three_nodes_with_two_synchronous_replicas(cluster: HACluster) -> None:
    roles = sorted(m["role"] for m in cluster.members())
    assert roles == ["leader", "sync_standby", "sync_standby"]
    import psycopg

    with psycopg.connect(cluster.node_url(cluster.primary() or ""), autocommit=True) as conn:
        settings = dict(conn.execute("SELECT name, setting FROM pg_settings WHERE name IN"
                                     " ('synchronous_commit', 'synchronous_standby_names')").fetchall())
    assert settings["synchronous_commit"] == "remote_apply" and settings["synchronous_standby_names"].startswith("2")
    config = httpx.get(f"http://{cluster.address(cluster.NODES[0])}:8008/config", timeout=10).json()
    assert config["synchronous_mode"] and config["synchronous_mode_strict"]


def test_each_user_stays_on_one_worker_until_it_is_lost(cluster: HACluster) -> None:
    """The router hashes the user id: every request of a user reaches one worker (whose index cache holds that user),
    the users spread over the workers, and a lost worker's users move to the others while the rest stay put."""
    users = [f"sticky{i}" for i in range(24)]
    with Client(cluster.url, cluster.key) as client:
        for user in users:
            client.add([{"role": "user", "content": f"{user} takes the 7:40 train"}], user_id=user, session_id="s")
    placed = {user: _served_by(cluster, user) for user in users}
    assert all(_served_by(cluster, user) == placed[user] for user in users for _ in range(2))
    assert len(set(placed.values())) == 3
    lost = placed[users[0]]
    cluster.kill_host(lost)
    try:
        moved = {user: _served_by(cluster, user) for user in users}  # the router retries on a failed connection
        assert all(moved[u] != lost for u in users)
        assert all(moved[u] == placed[u] for u in users if placed[u] != lost)  # consistent hashing: others stay
    finally:
        cluster.start_worker(lost)
    deadline = time.monotonic() + 120
    while not (cluster.worker_up(lost) and all(_served_by(cluster, u) == placed[u] for u in users)):
        assert time.monotonic() < deadline, "the restarted worker did not get its users back"
        time.sleep(0.5)


def test_a_client_reads_its_own_writes_and_replicas_serve_reads(cluster: HACluster) -> None:
    """Write, then read at once through the router, 30 times: every read shows the write just acknowledged, and the
    workers served reads from the replicas (their /metrics say where)."""
    def replica_reads() -> int:
        total = 0
        for worker in cluster.workers:
            text = httpx.get(f"http://{cluster.address(worker)}:8080/metrics",
                             headers={"Authorization": f"Bearer {cluster.key}"}, timeout=30).text
            total += sum(int(line.split()[-1]) for line in text.splitlines()
                         if line.startswith("memgas_store_reads_replica_total"))
        return total

    before = replica_reads()
    with Client(cluster.url, cluster.key) as client:
        for i in range(30):
            user = f"ryw{i % 3}"
            client.append([{"role": "user", "content": f"Reminder {i}: the locker code is {1000 + i}."}],
                          user_id=user, session_id="notes")
            assert client.get("notes", user_id=user).messages[-1].content.startswith(f"Reminder {i}:")
            hits = client.search(f"locker code reminder {i}", user_id=user, k=1)
            assert [h.session_id for h in hits] == ["notes"]
    assert replica_reads() > before


def test_the_primary_host_killed_under_load_loses_no_acknowledged_write(cluster: HACluster) -> None:
    """kill -9 of the primary's whole host (PostgreSQL, Patroni, etcd) while clients append and search: a synchronous
    replica is promoted, the workers go on by themselves, no acknowledged write is lost, none is doubled; the old
    primary, started again, rejoins as a synchronous replica."""
    drill = run_drill(cluster, kill="host", tag="host")
    assert drill.promoted != drill.killed
    assert drill.lost == [] and drill.stale == [] and drill.duplicated == [] and drill.out_of_order == 0
    assert drill.acknowledged > 0 and drill.searches > 0
    assert drill.downtime_s < 60, drill.row()
    cluster.restart_node(drill.killed)
    cluster.wait_replicas(2)
    roles = {m["name"]: m["role"] for m in cluster.members()}
    assert roles[drill.killed] == "sync_standby" and roles[drill.promoted] == "leader"


def test_the_primary_postgresql_killed_under_load_loses_no_acknowledged_write(cluster: HACluster) -> None:
    """kill -9 of the primary's PostgreSQL alone: Patroni, alive on that node, restarts it (crash recovery) faster
    than a failover would take; nothing acknowledged is lost either way."""
    drill = run_drill(cluster, kill="postgres", tag="pg")
    assert drill.lost == [] and drill.stale == [] and drill.duplicated == [] and drill.out_of_order == 0
    assert drill.acknowledged > 0
    cluster.wait_replicas(2)
