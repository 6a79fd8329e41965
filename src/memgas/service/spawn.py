"""``memgas serve`` as a child process on a free loopback port: for the HTTP benchmark and the service tests."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Mapping

from memgas.core.ports import free_port

__all__ = ["spawn_server", "stop_server"]


def stop_server(proc: subprocess.Popen[bytes], grace: float = 15.0) -> None:
    """Stop a server: SIGTERM (it finishes its requests and closes its store), SIGKILL after ``grace`` seconds."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def spawn_server(target: str | Path, *options: str, log: Path, env: Mapping[str, str] | None = None,
                 timeout: float = 120.0) -> tuple[subprocess.Popen[bytes], str, list[str]]:
    """Start ``memgas serve --db target`` with ``options`` on a free loopback port, its stderr in ``log``, and
    wait until ``/healthz`` answers.

    Returns:
        ``(process, base URL, argv)``.

    Raises:
        RuntimeError: the server exited or did not answer within ``timeout`` seconds (its log's tail is in the
            message; the process is stopped).
    """
    import httpx

    port = free_port()
    argv = [sys.executable, "-m", "memgas.cli", "serve", "--db", str(target), "--create", "--host", "127.0.0.1",
            "--port", str(port), *options]
    url = f"http://127.0.0.1:{port}"
    with open(log, "wb") as err:
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err,
                                env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE", **(env or {})})
    deadline = time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return proc, url, argv
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    status = proc.poll()
    stop_server(proc)
    tail = "\n".join(log.read_text("utf-8", "replace").splitlines()[-20:])
    raise RuntimeError(f"memgas serve {'exited with ' + str(status) if status is not None else 'did not answer'} "
                       f"within {timeout:g} s:\n{tail}")
