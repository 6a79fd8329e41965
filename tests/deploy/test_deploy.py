"""The cluster's configuration files (memgas.deploy): every placeholder filled, and each file accepted by the program
that reads it (HAProxy's and Patroni's own checks; PgBouncer by starting it)."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from memgas.bench.hacluster import unavailable
from memgas.deploy import FILES, files_markdown, render
from memgas.store.pgtemp import find_pg_bin

NODE = dict(scope="memgas", name="db1", address="127.77.0.10", etcd_hosts="127.77.0.10:2379,127.77.0.11:2379",
            ttl=10, loop_wait=1, retry_timeout=3, sync_standbys=2, fsync="on", network="127.77.0.0/24")
SERVERS = "    server db1 127.77.0.10:5432 check port 8008\n    server db2 127.77.0.11:5432 check port 8008"
ROUTER = dict(address="127.77.0.20", check_interval="500ms", primary_servers=SERVERS, replica_servers=SERVERS,
              worker_servers="    server w1 127.77.0.31:8080 check")


def test_a_missing_value_is_refused_and_dollars_survive() -> None:
    with pytest.raises(KeyError, match="address"):
        render("haproxy.cfg", check_interval="1s", primary_servers="", replica_servers="", worker_servers="")
    text = render("haproxy.cfg", **ROUTER)
    assert "json_query('$.user_id')" in text and "${" not in text  # $$ in a template is one $
    unit = render("systemd/memgas.service", workers=2)
    assert "--db ${MEMGAS_DB}" in unit and "--workers 2" in unit


def test_the_guide_shows_every_file() -> None:
    shown = files_markdown()
    assert all(f"### `{name}`" in shown for name in FILES)
    assert "synchronous_commit: remote_apply" in shown and "pool_mode = transaction" in shown


@pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))
def test_haproxy_and_patroni_accept_their_files(tmp_path: Path) -> None:
    (tmp_path / "haproxy.cfg").write_text(render("haproxy.cfg", **ROUTER))
    done = subprocess.run([shutil.which("haproxy") or "/usr/sbin/haproxy", "-c", "-f", str(tmp_path / "haproxy.cfg")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    (tmp_path / "patroni.yml").write_text(render("patroni.yml", **NODE, data_dir=tmp_path / "data",
                                                 bin_dir=find_pg_bin(), home=tmp_path))
    with contextlib.ExitStack() as etcd:  # Patroni's check connects to each etcd host: two listening sockets
        for host in NODE["etcd_hosts"].split(","):  # type: ignore[union-attr]
            address, port = host.split(":")
            etcd.enter_context(socket.create_server((address, int(port))))
        done = subprocess.run(["patroni", "--validate-config", str(tmp_path / "patroni.yml")], capture_output=True,
                              text=True)
        assert done.returncode == 0, done.stdout + done.stderr
        broken = (tmp_path / "patroni.yml").read_text().replace("ttl: 10", "ttl: soon")  # the check bites
        (tmp_path / "broken.yml").write_text(broken)
        done = subprocess.run(["patroni", "--validate-config", str(tmp_path / "broken.yml")], capture_output=True,
                              text=True)
    assert done.returncode != 0 and "ttl" in done.stdout + done.stderr
