"""A throwaway PostgreSQL cluster for tests: ``initdb`` in a temporary folder, ``pg_ctl start`` on a free
loopback port with trust authentication, removed again by :meth:`Cluster.stop`.

The server refuses to run as root, so as root (CI containers) every server command runs as the
``postgres`` system user (``runuser``), in a folder that user owns.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

__all__ = ["Cluster", "find_bin", "unavailable"]


def find_bin() -> Path | None:
    """The folder of ``initdb`` and ``pg_ctl``: on ``PATH``, else the newest Debian install, else ``None``."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(os.path.realpath(found)).parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    return Path(versions[-1]).parent if versions else None


def unavailable() -> str | None:
    """Why no cluster can be started here, or ``None``."""
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError:
        return "psycopg or psycopg-pool is not installed (pip install -e '.[postgres]')"
    if find_bin() is None:
        return "PostgreSQL server binaries (initdb, pg_ctl) not found (apt-get install postgresql)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no 'postgres' user to run the server as"
        if shutil.which("runuser") is None:
            return "running as root without runuser to start the server as 'postgres'"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Cluster:
    """A running throwaway cluster; ``url(db)`` names a database in it (superuser ``postgres``, no password)."""

    def __init__(self) -> None:
        self.bin = find_bin()
        assert self.bin is not None, unavailable()
        self.dir = Path(tempfile.mkdtemp(prefix="memgas-pg-"))
        self.data = self.dir / "data"
        self.port = _free_port()
        self._as = []
        if os.geteuid() == 0:
            user = pwd.getpwnam("postgres")
            os.chown(self.dir, user.pw_uid, user.pw_gid)
            self._as = ["runuser", "-u", "postgres", "--"]
        try:
            self._run("initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "-E", "UTF8",
                      "--locale=C", "--no-sync")
            # Durability is not under test: fsync off keeps a per-test CREATE DATABASE fast.
            options = (f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=off "
                       "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200")
            self._run("pg_ctl", "-D", str(self.data), "-l", str(self.dir / "log"), "-o", options, "-w", "start")
        except BaseException:
            shutil.rmtree(self.dir, ignore_errors=True)
            raise

    def _run(self, program: str, *args: str) -> None:
        done = subprocess.run([*self._as, str(self.bin / program), *args], capture_output=True, text=True,
                              timeout=120, cwd=self.dir)
        if done.returncode:
            raise RuntimeError(f"{program} failed ({done.returncode}): {done.stderr.strip() or done.stdout.strip()}")

    def url(self, database: str = "postgres") -> str:
        """The connection URL of a database of this cluster."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def admin(self, statement: str) -> None:
        """Run one statement outside a transaction on the maintenance database (CREATE/DROP DATABASE)."""
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(statement)

    def stop(self) -> None:
        """Stop the server at once and remove its folder."""
        try:
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)
