"""A PgBouncer in transaction pooling mode on a free loopback port in front of a test PostgreSQL cluster: two server
connections at most, so consecutive transactions of one client may run on different server connections (what
breaks a client that keeps session state, such as server-side prepared statements)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from memgas.core.ports import free_port

__all__ = ["PgBouncer", "unavailable"]


def unavailable() -> str | None:
    """Why no PgBouncer can run here, or ``None``."""
    return None if shutil.which("pgbouncer") or Path("/usr/sbin/pgbouncer").exists() else \
        "no pgbouncer binary (Debian: apt-get install pgbouncer; scripts/test installs it)"


class PgBouncer:
    """The running pooler; :meth:`url` names a database of the cluster behind it."""

    def __init__(self, server_port: int, *, pool_size: int = 2) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="memgas-pgbouncer-"))
        self.port = free_port()
        (self.dir / "users.txt").write_text("", encoding="utf-8")
        (self.dir / "pgbouncer.ini").write_text(f"""[databases]
* = host=127.0.0.1 port={server_port} user=postgres
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {self.port}
auth_type = any
auth_file = {self.dir}/users.txt
pool_mode = transaction
default_pool_size = {pool_size}
max_client_conn = 200
unix_socket_dir =
logfile = {self.dir}/pgbouncer.log
pidfile = {self.dir}/pgbouncer.pid
""", encoding="utf-8")
        binary = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
        command = [binary, str(self.dir / "pgbouncer.ini")]
        if os.geteuid() == 0:  # PgBouncer refuses to run as root
            self.dir.chmod(0o777)
            for path in self.dir.iterdir():
                path.chmod(0o666)
            command[1:1] = ["-u", "nobody"]
        self.proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self._wait()

    def _wait(self, timeout: float = 30.0) -> None:
        import socket

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"pgbouncer exited: {self.log()[-2000:]}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError("pgbouncer did not listen in time")

    def url(self, database: str) -> str:
        """The URL of ``database`` through the pooler."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def log(self) -> str:
        """What the pooler logged."""
        path = self.dir / "pgbouncer.log"
        return path.read_text("utf-8", "replace") if path.exists() else ""

    def stop(self) -> None:
        """Stop the pooler and remove its folder."""
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        shutil.rmtree(self.dir, ignore_errors=True)
