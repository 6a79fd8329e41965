"""The cluster where network namespaces cannot be made: each host a loopback address of its own (127.77.x.y), a host
killed by killing its processes. The same failover holds (issue 40)."""

from __future__ import annotations

import pytest

from memgas.bench.failover import run_drill
from memgas.bench.hacluster import HACluster, unavailable

pytestmark = [pytest.mark.slow, pytest.mark.cluster]


def test_the_loopback_fallback_fails_over_without_loss() -> None:
    reason = unavailable()
    if reason:
        pytest.skip(reason)
    with HACluster(workers=1, namespaces=False) as cluster:
        assert cluster.hosts.mode == "loopback addresses"
        assert cluster.address("db1").startswith("127.77.") and cluster.url.startswith("http://127.77.")
        drill = run_drill(cluster, kill="host", writers=2, searchers=1, before_s=2, after_s=2, tag="lo")
        assert drill.promoted != drill.killed and drill.acknowledged > 0
        assert drill.lost == [] and drill.stale == [] and drill.duplicated == []
