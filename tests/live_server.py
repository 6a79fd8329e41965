"""A real ``memgas serve`` on loopback for the service tests: a subprocess on a free port, ready when it answers."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import httpx

from memgas.service.keys import create_key
from memgas.store import open_store


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (the server binds it a moment later)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def log_lines(self) -> list[str]:
        """What the server wrote on stderr so far."""
        return self.log.read_text("utf-8", "replace").splitlines()


def start_server(db: str | Path, *extra: str, tmp: Path, timeout: float = 90.0,
                 env: dict[str, str] | None = None) -> LiveServer:
    """Start ``memgas serve --db db`` with ``extra`` options on a free loopback port; wait for ``/healthz``.

    The server's caches (the LLM response cache) live under ``tmp/cache``, never in the user's home.

    Raises:
        RuntimeError: the server exited or did not answer within ``timeout`` seconds (with its log).
    """
    port = free_port()
    log = tmp / f"server-{port}.log"
    cmd = [sys.executable, "-m", "memgas.cli", "serve", "--db", str(db), "--host", "127.0.0.1", "--port", str(port),
           *extra]
    with open(log, "wb") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err,
                                env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE", "MEMGAS_CACHE_DIR": str(tmp / "cache"),
                                     "NO_PROXY": "127.0.0.1", **(env or {})})
    server = LiveServer(f"http://127.0.0.1:{port}", proc, log, str(db))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"memgas serve exited with {proc.returncode}:\n{log.read_text()}")
        try:
            if httpx.get(f"{server.url}/healthz", timeout=2).status_code == 200:
                return server
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    server.stop()
    raise RuntimeError(f"memgas serve did not answer within {timeout} s:\n{log.read_text()}")
