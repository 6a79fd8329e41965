"""``memgas bench cluster`` end to end, small: its own cluster, three users of two sessions, one-second load phases,
one host failover and one PostgreSQL kill (issue 40)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memgas.bench.hacluster import unavailable
from memgas.cli.commands import main
from support.datasets import lme_records

pytestmark = [pytest.mark.slow, pytest.mark.cluster]


def test_the_cluster_bench_measures_every_part_and_loses_nothing(tmp_path: Path, capsys) -> None:
    reason = unavailable()
    if reason:
        pytest.skip(reason)
    data = tmp_path / "lme.json"
    data.write_text(json.dumps(lme_records()))
    out = tmp_path / "cluster"
    assert main(["bench", "cluster", "--data", str(data), "--users", "3", "--sessions", "2", "--drills", "1",
                 "--clients", "2", "--seconds", "1", "--index-cache-mb", "64", "--no-progress",
                 "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    result = json.loads((out / "results.json").read_text())
    assert result["users"] == 3 and result["fill_sessions_per_s"] > 0
    assert set(result["round_robin"]) == {"3", "1"} and all(r["ratio"] > 0 for r in result["round_robin"].values())
    assert set(result["load"]) == {"3", "2", "1"}
    assert all(r["writes_per_s"] > 0 and r["searches_per_s"] > 0 for r in result["load"].values())
    sizes = result["bytes_per_session"]
    assert sizes["messages"] > 0 and sizes["units"] > 0 and sizes["store"] == pytest.approx(
        sum(sizes[t] for t in ("messages", "units", "sessions", "snapshots", "users")))
    host, postgres = result["drills"]
    assert host["promoted"] != host["killed"] and postgres["acknowledged"] > 0
    assert result["failover"]["lost"] == 0 and result["failover"]["stale"] == 0 and result["failover"]["acknowledged"] == host["acknowledged"] + \
        postgres["acknowledged"]
    assert "| 1 (host) |" in printed and "| 2 (PostgreSQL) |" in printed and "writes/s" in printed
