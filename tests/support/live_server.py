"""A real ``memgas serve`` on loopback for the service tests: a subprocess on a free port, ready when it answers."""

from __future__ import annotations

import itertools
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from memgas.core.ports import free_port
from memgas.service.keys import create_key
from memgas.service.spawn import spawn_server, stop_server
from memgas.store import open_store

__all__ = ["LiveServer", "start_server", "make_key", "free_port"]


def make_key(db: str | Path, scope: str = "admin", users: Sequence[str] | None = None) -> str:
    """Create an API key in the store ``db`` and return it (as ``memgas keys create`` does)."""
    with open_store(str(db)) as store:
        return create_key(store, scope, users=users)[0]


@dataclass
class LiveServer:
    """A running server: its base ``url``, its process and its stderr log file."""

    url: str
    proc: subprocess.Popen[bytes]
    log: Path
    db: str
    keys: dict[str, str] = field(default_factory=dict)

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after 15 s)."""
        stop_server(self.proc)

    def log_lines(self) -> list[str]:
        """What the server wrote on stderr so far."""
        return self.log.read_text("utf-8", "replace").splitlines()


_servers = itertools.count()


def start_server(db: str | Path, *extra: str, tmp: Path, timeout: float = 90.0,
                 env: dict[str, str] | None = None) -> LiveServer:
    """Start ``memgas serve --db db`` with ``extra`` options on a free loopback port; wait for ``/healthz``.

    The server's caches (the LLM response cache) live under ``tmp/cache``, never in the user's home.

    Raises:
        RuntimeError: the server exited or did not answer within ``timeout`` seconds (with its log).
    """
    log = tmp / f"server-{next(_servers)}.log"
    proc, url, _ = spawn_server(db, *extra, log=log, timeout=timeout,
                                env={"MEMGAS_CACHE_DIR": str(tmp / "cache"), "NO_PROXY": "127.0.0.1", **(env or {})})
    return LiveServer(url, proc, log, str(db))
