"""A memgas cluster on one machine, from Debian's packages and the files in :mod:`memgas.deploy`: for the failover and
read-your-writes tests and ``memgas bench cluster``.

Hosts (:class:`~memgas.bench.hosts.Hosts`: network namespaces on a bridge, else loopback addresses):

* ``db1``, ``db2``, ``db3``: PostgreSQL 15 under Patroni 3.0, each with an etcd 3.4 member. Patroni rather than
  pg_auto_failover: its REST API tells a router which node is the primary and which are replicas (HAProxy checks it),
  its synchronous mode promotes only a standby that has every acknowledged commit, and its etcd is a quorum of the
  database nodes themselves (pg_auto_failover's monitor is one more node, and a single point of failure);
* ``router``: HAProxy (port 5000 the primary, 5001 the replicas, 8000 the workers by user id) and PgBouncer (6432, in
  transaction pooling mode; databases ``memgas`` and ``memgas_ro``);
* ``w1`` .. ``wN``: ``memgas serve`` on port 8080, its store the pooler's ``memgas`` with ``read_url`` its
  ``memgas_ro``, with API keys.

Durability is the cluster's (synchronous replication, ``remote_apply``), not one disk's: ``fsync`` is off, as in
:class:`memgas.store.pgtemp.TempCluster` (a host here dies by its processes being killed; the machine's page cache
survives it).
"""

from __future__ import annotations

import json
import os
import pwd
import re
import shutil
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any, Callable, Sequence

from memgas.bench.hosts import Hosts
from memgas.core.errors import MemgasError
from memgas.deploy import render
from memgas.store.pgtemp import find_pg_bin

__all__ = ["HACluster", "unavailable", "DATABASE"]

#: The database the workers share.
DATABASE = "memgas"
_PROGRAMS = {"patroni": "patroni", "etcd": "etcd-server", "haproxy": "haproxy", "pgbouncer": "pgbouncer"}


def _which(program: str) -> str | None:
    return shutil.which(program) or next((p for p in (f"/usr/sbin/{program}", f"/usr/bin/{program}")
                                          if Path(p).exists()), None)


def unavailable() -> str | None:
    """Why no cluster can start here (one line naming the Debian packages to install), or ``None``."""
    missing = [package for program, package in _PROGRAMS.items() if _which(program) is None]
    if find_pg_bin() is None:
        missing.append("postgresql")
    if missing:
        return f"the cluster needs Debian's {', '.join(missing)} (apt-get install {' '.join(missing)})"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no 'postgres' user to run the database nodes as"
    return None


def _get(url: str, timeout: float = 2.0) -> tuple[int, Any]:
    """``(status, JSON body or None)`` of a GET; status 0 when nothing answered."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as reply:
            return reply.status, json.loads(reply.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, None
    except (OSError, ValueError):
        return 0, None


#: A log line that says why a component failed (PostgreSQL's FATAL/PANIC/ERROR, Python's tracebacks, a refused path).
_FAILURE = re.compile(r"\b(?:FATAL|PANIC|ERROR|CRITICAL|Traceback|could not|[Pp]ermission denied|cannot|failed)\b"
                      r"|[Ee]rror:")


def first_errors(logs: Sequence[Path]) -> str:
    """The first line of each log that says why something failed, as ``"; first errors: name: line, ..."`` (empty
    when none does): a cluster that does not come up is reported with its cause, not only with a timeout.

    >>> import tempfile; folder = Path(tempfile.mkdtemp())
    >>> _ = (folder / "patroni-n1.log").write_text("starting\\nFATAL:  could not change directory to \\"/x\\"\\n")
    >>> _ = (folder / "etcd-n1.log").write_text("ready\\n")
    >>> first_errors([folder / "patroni-n1.log", folder / "etcd-n1.log", folder / "gone.log"])
    '; first errors: patroni-n1: FATAL:  could not change directory to "/x"'
    """
    found = []
    for path in logs:
        try:
            lines = path.read_text("utf-8", "replace").splitlines()
        except OSError:
            continue
        line = next((line.strip() for line in lines if _FAILURE.search(line)), None)
        if line is not None:
            found.append(f"{path.stem}: {line[:300]}")
    return "; first errors: " + "; ".join(found) if found else ""


def _wait(what: str, ready: Callable[[], bool], timeout: float, logs: Callable[[], str] = lambda: "") -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            raise MemgasError(f"the cluster's {what} within {timeout:g} s{logs()}")
        time.sleep(0.2)


class HACluster:
    """The running cluster; :attr:`url` is the router's HTTP address, :attr:`key` an admin API key.

    Args:
        workers: memgas worker hosts.
        worker_options: more ``memgas serve`` options for each worker (``--workers 2``, ``--set k=v``).
        ttl: Patroni's leader-key lifetime in seconds: a dead primary is replaced about this long after it died.
        namespaces: put the hosts in network namespaces where that is possible.

    Raises:
        MemgasError: a package missing (:func:`unavailable`) or a component that did not start (its log's tail).
    """

    NODES = ("db1", "db2", "db3")

    def __init__(self, workers: int = 3, *, worker_options: tuple[str, ...] = (), ttl: int = 10,
                 namespaces: bool = True) -> None:
        reason = unavailable()
        if reason is not None:
            raise MemgasError(reason)
        self.workers = tuple(f"w{i + 1}" for i in range(workers))
        self.dir = Path(tempfile.mkdtemp(prefix="memgas-cluster-"))
        self.dir.chmod(0o755)
        self.hosts = Hosts([*self.NODES, "router", *self.workers], namespaces=namespaces)
        self.ttl = ttl
        self._worker_options = worker_options
        self._owner = pwd.getpwnam("postgres") if os.geteuid() == 0 else None
        try:
            self._start()
        except BaseException:
            self.stop()
            raise

    # -- addresses ----------------------------------------------------------------------------
    def address(self, host: str) -> str:
        """A host's address."""
        return self.hosts.address[host]

    @property
    def url(self) -> str:
        """The router's HTTP address: the memgas service, each user served by one worker."""
        return f"http://{self.address('router')}:8000"

    def database_url(self, read_replicas: bool = True) -> str:
        """The store URL the workers use: the pooler's primary database, and its replicas as ``read_url``."""
        base = f"postgresql://postgres@{self.address('router')}:6432"
        return f"{base}/memgas?read_url={base}/memgas_ro" if read_replicas else f"{base}/memgas"

    def node_url(self, node: str, database: str = DATABASE) -> str:
        """A database node's own address (no router, no pooler)."""
        return f"postgresql://postgres@{self.address(node)}:5432/{database}"

    # -- start --------------------------------------------------------------------------------
    def _folder(self, name: str) -> Path:
        folder = self.dir / name
        folder.mkdir(mode=0o700, exist_ok=True)
        if self._owner is not None:
            os.chown(folder, self._owner.pw_uid, self._owner.pw_gid)
        return folder

    def _log(self, name: str) -> Path:
        return self.dir / f"{name}.log"

    def _tail(self, *names: str) -> str:
        out = []
        for name in names:
            path = self._log(name)
            if path.exists():
                out.append(f"\n--- {name}.log\n" + "\n".join(path.read_text("utf-8", "replace").splitlines()[-15:]))
        return "".join(out)

    def _node_logs(self) -> str:
        """The first error line of each database node's Patroni log, then their tails."""
        names = [f"patroni-{node}" for node in self.NODES]
        return first_errors([self._log(name) for name in names]) + self._tail(*names)

    def _start(self) -> None:
        for node in self.NODES:
            self._write_node(node)
        for node in self.NODES:
            self._start_etcd(node)
        for node in self.NODES:
            self._start_patroni(node)
        _wait("database nodes were not ready", lambda: self._members_ready(len(self.NODES)), 180,
              lambda: first_errors([self._log(f"etcd-{n}") for n in self.NODES]) + self._node_logs()
              + self._tail(*(f"etcd-{n}" for n in self.NODES)))
        self._create_database()
        self._start_router()
        self._start_workers()

    def _write_node(self, node: str) -> None:
        home = self._folder(node)
        initial = ",".join(f"{n}=http://{self.address(n)}:2380" for n in self.NODES)
        values = dict(scope=f"memgas-{self.hosts.tag}", name=node, address=self.address(node),
                      etcd_hosts=",".join(f"{self.address(n)}:2379" for n in self.NODES), ttl=self.ttl,
                      loop_wait=1, retry_timeout=max(2, self.ttl // 3), sync_standbys=len(self.NODES) - 1,
                      fsync="off", network=self.hosts.network, data_dir=home / "data",
                      bin_dir=find_pg_bin(), home=home)
        (home / "patroni.yml").write_text(render("patroni.yml", **values), encoding="utf-8")
        (home / "etcd.env").write_text(render("etcd.env", name=node, data_dir=home / "etcd",
                                              address=self.address(node), initial_cluster=initial,
                                              scope=values["scope"]), encoding="utf-8")

    def _env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """A clean environment for Debian's programs (no virtualenv's Python paths)."""
        keep = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "TZ")}
        keep["PATH"] = "/usr/sbin:/usr/bin:/sbin:/bin"
        return {**keep, "HOME": str(self.dir), **(extra or {})}

    def _start_etcd(self, node: str) -> None:
        home = self.dir / node
        env = dict(line.split("=", 1) for line in (home / "etcd.env").read_text().splitlines()
                   if line and not line.startswith("#"))
        if (home / "etcd").exists():  # a member that comes back rejoins the cluster it was in
            env["ETCD_INITIAL_CLUSTER_STATE"] = "existing"
        self.hosts.spawn(node, [_which("etcd") or "etcd"], self._log(f"etcd-{node}"), user="postgres",
                         env=self._env(env))

    def _start_patroni(self, node: str) -> None:
        self.hosts.spawn(node, [_which("patroni") or "patroni", str(self.dir / node / "patroni.yml")],
                         self._log(f"patroni-{node}"), user="postgres", env=self._env())

    def members(self) -> list[dict[str, Any]]:
        """Patroni's view of the cluster (``name``, ``role``, ``state``, ``lag``...), from any node that answers."""
        for node in self.NODES:
            status, body = _get(f"http://{self.address(node)}:8008/cluster")
            if status == 200 and body:
                return list(body.get("members", []))
        return []

    def primary(self) -> str | None:
        """The node that is the primary now, if any."""
        return next((m["name"] for m in self.members() if m.get("role") == "leader" and m.get("state") == "running"),
                    None)

    def _members_ready(self, n: int) -> bool:
        """Whether ``n`` members run: one primary and ``n - 1`` synchronous standbys."""
        members = self.members()
        leader = [m for m in members if m.get("role") == "leader" and m.get("state") == "running"]
        sync = [m for m in members if m.get("role") == "sync_standby" and m.get("state") in ("streaming", "running")]
        return len(leader) == 1 and len(sync) == n - 1

    def _create_database(self) -> None:
        import psycopg

        with psycopg.connect(self.node_url(self.primary() or "db1", "postgres"), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {DATABASE}")

    def _start_router(self) -> None:
        home = self._folder("router")
        nodes = [(n, self.address(n)) for n in self.NODES]
        servers = "\n".join(f"    server {n} {a}:5432 check port 8008" for n, a in nodes)
        workers = "\n".join(f"    server {w} {self.address(w)}:8080 check" for w in self.workers)
        (home / "haproxy.cfg").write_text(render(
            "haproxy.cfg", address=self.address("router"), check_interval="500ms", primary_servers=servers,
            replica_servers=servers, worker_servers=workers), encoding="utf-8")
        self.hosts.spawn("router", [_which("haproxy") or "haproxy", "-f", str(home / "haproxy.cfg")],
                         self._log("haproxy"), env=self._env())
        (home / "users.txt").write_text('"postgres" ""\n', encoding="utf-8")
        (home / "pgbouncer.ini").write_text(render(
            "pgbouncer.ini", router=self.address("router"), database=DATABASE, address=self.address("router"),
            auth_type="trust", auth_file=home / "users.txt", pool_size=20, logfile=home / "pgbouncer.log",
            pidfile=home / "pgbouncer.pid"), encoding="utf-8")
        if self._owner is not None:
            for path in home.iterdir():
                os.chown(path, self._owner.pw_uid, self._owner.pw_gid)
        self.hosts.spawn("router", [_which("pgbouncer") or "pgbouncer", str(home / "pgbouncer.ini")],
                         self._log("pgbouncer-out"), user="postgres", env=self._env())
        _wait("router did not answer", self._router_ready, 60, lambda: self._tail("haproxy", "pgbouncer-out"))

    def _router_ready(self) -> bool:
        import psycopg

        try:
            with psycopg.connect(self.database_url(read_replicas=False), connect_timeout=2, autocommit=True) as conn:
                return conn.execute("SELECT NOT pg_is_in_recovery()").fetchone()[0]  # type: ignore[index, no-any-return]
        except psycopg.Error:
            return False

    def _start_workers(self) -> None:
        from memgas.service.keys import create_key
        from memgas.store import KeyStore, open_store, part

        with open_store(self.database_url(read_replicas=False)) as store:  # the schema, once, before the workers
            self.key, _ = create_key(part(store, KeyStore), "admin", name="cluster")
        for worker in self.workers:
            self.start_worker(worker)
        self.wait_routed()

    def start_worker(self, worker: str) -> None:
        """Start (or start again) a worker host's ``memgas serve``."""
        argv = [sys.executable, "-m", "memgas.cli", "serve", "--db", self.database_url(), "--host",
                self.address(worker), "--port", "8080", *self._worker_options]
        env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE", "NO_PROXY": "*"}
        self.hosts.spawn(worker, argv, self._log(worker), env=env)

    def wait_routed(self, workers: set[str] | None = None, timeout: float = 180.0) -> None:
        """Wait until the router sends requests to exactly ``workers`` (default: all), each answering."""
        want = set(self.workers) if workers is None else workers
        _wait("workers were not all routed", lambda: all(self.worker_up(w) for w in want) and self.routed() == want,
              timeout, lambda: self._tail("haproxy", *want))

    def routed(self) -> set[str]:
        """The workers the router sends requests to now (a request without a user id goes round robin)."""
        seen = set()
        for _ in range(4 * len(self.workers)):
            try:
                with urllib.request.urlopen(f"{self.url}/healthz", timeout=2) as reply:
                    seen.add(reply.headers.get("X-Memgas-Worker", ""))
            except OSError:
                pass
        return seen

    def worker_up(self, worker: str) -> bool:
        """Whether a worker answers ``/healthz``."""
        return _get(f"http://{self.address(worker)}:8080/healthz")[0] == 200

    # -- faults -------------------------------------------------------------------------------
    def kill_host(self, host: str) -> None:
        """Kill -9 every process on a host (a database node: its PostgreSQL, Patroni and etcd member)."""
        self.hosts.kill(host)

    def kill_postgres(self, node: str) -> None:
        """Kill -9 a node's PostgreSQL server only (its postmaster, whose children then end); Patroni lives on."""
        pid = int((self.dir / node / "data" / "postmaster.pid").read_text().split()[0])
        os.kill(pid, 9)

    def restart_node(self, node: str) -> None:
        """Start a killed database node's etcd member and Patroni again: it rejoins as a replica (pg_rewind)."""
        self._start_etcd(node)
        self._start_patroni(node)

    def wait_primary(self, *, other_than: str | None = None, timeout: float = 120.0) -> str:
        """Wait for a running primary (one that is not ``other_than``) and for the router to reach it; its name."""
        def ready() -> bool:
            leader = self.primary()
            return leader is not None and leader != other_than and self._router_ready()
        _wait("primary was not back", ready, timeout, self._node_logs)
        return self.primary()  # type: ignore[return-value]

    def wait_replicas(self, n: int = 2, timeout: float = 180.0) -> None:
        """Wait until ``n`` replicas stream from the primary and are synchronous."""
        _wait(f"{n} synchronous replicas were not there", lambda: self._members_ready(n + 1), timeout,
              self._node_logs)

    # -- stop ---------------------------------------------------------------------------------
    def stop(self) -> None:
        """Kill every host, remove the namespaces and the cluster's folder."""
        self.hosts.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> "HACluster":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
