"""A throwaway PostgreSQL cluster for benchmarks (``--pg-temp``): ``initdb`` in a temporary folder,
``pg_ctl start`` on a free loopback port with trust authentication, removed again by :meth:`TempCluster.stop`.

The test suite's fixture (``tests/support/pg.py``) uses it too. The server refuses to run as root, so as root every
server command runs as the ``postgres``
system user (``runuser``) in a folder that user owns. Durability is not measured: ``fsync`` is off,
as a benchmark of the store's own work on a busy machine would otherwise time the disk.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

from memgas.core.errors import MemgasError
from memgas.core.ports import free_port

__all__ = ["TempCluster", "find_pg_bin", "unavailable"]


def find_pg_bin() -> Path | None:
    """The folder of ``initdb`` and ``pg_ctl``: on ``PATH``, else the newest Debian install, else ``None``."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(os.path.realpath(found)).parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    return Path(versions[-1]).parent if versions else None


def unavailable() -> str | None:
    """Why no cluster can be started here (a one-line reason), or ``None``."""
    try:
        import psycopg  # noqa: F401  (found now: the message below says what to install)
        import psycopg_pool  # noqa: F401
    except ImportError:
        return "psycopg or psycopg-pool is not installed (pip install -e '.[postgres]')"
    if find_pg_bin() is None:
        return "PostgreSQL server binaries (initdb, pg_ctl) not found (apt-get install postgresql)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no 'postgres' user to run the server as"
        if shutil.which("runuser") is None:
            return "running as root without runuser to start the server as 'postgres'"
    return None


class TempCluster:
    """A running throwaway cluster; :meth:`url` names a database in it (superuser ``postgres``, no password).

    With ``primary``, a streaming replica of that cluster (``pg_basebackup``), hot standby, which applies what it
    receives ``apply_delay_ms`` late (``recovery_min_apply_delay``): a replica that lags, on purpose.

    Raises:
        MemgasError: no server binaries, root without a ``postgres`` user, or a server that does not start.
    """

    def __init__(self, max_connections: int = 200, *, primary: "TempCluster | None" = None,
                 apply_delay_ms: int = 0) -> None:
        reason = unavailable()
        if reason is not None:
            raise MemgasError(reason)
        self.bin: Path = find_pg_bin()  # type: ignore[assignment]
        self._as: list[str] = []
        owner = None
        if os.geteuid() == 0:
            owner = pwd.getpwnam("postgres")
            self._as = ["runuser", "-u", "postgres", "--"]
        self.dir = Path(tempfile.mkdtemp(prefix="memgas-pgbench-"))
        if owner is not None:
            os.chown(self.dir, owner.pw_uid, owner.pw_gid)
        self.data = self.dir / "data"
        self.port = free_port()
        try:
            if primary is None:
                self._run("initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "-E", "UTF8",
                          "--locale=C", "--no-sync")
            else:
                self._run("pg_basebackup", "-D", str(self.data), "-h", "127.0.0.1", "-p", str(primary.port),
                          "-U", "postgres", "-R", "-X", "stream", "--no-sync")
            options = (f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=off "
                       f"-c synchronous_commit=off -c full_page_writes=off -c max_connections={max_connections} "
                       f"-c recovery_min_apply_delay={apply_delay_ms}")
            self._run("pg_ctl", "-D", str(self.data), "-l", str(self.dir / "log"), "-o", options, "-w", "start")
        except BaseException:
            shutil.rmtree(self.dir, ignore_errors=True)
            raise

    def _run(self, program: str, *args: str) -> None:
        done = subprocess.run([*self._as, str(self.bin / program), *args], capture_output=True, text=True,
                              timeout=120, cwd=self.dir)
        if done.returncode:
            raise MemgasError(f"{program} failed ({done.returncode}): {done.stderr.strip() or done.stdout.strip()}")

    def url(self, database: str = "postgres") -> str:
        """The connection URL of a database of this cluster."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def admin(self, statement: str) -> None:
        """Run one statement outside a transaction on the maintenance database (CREATE/DROP DATABASE)."""
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(statement)

    def create_database(self, name: str) -> str:
        """Create an empty database and return its URL."""
        self.admin(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self) -> None:
        """Stop the server at once and remove its folder."""
        try:
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> "TempCluster":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
