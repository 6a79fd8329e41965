"""Whether ``--rate-limit`` holds for the whole server: ``memgas bench ratelimit``.

For each worker count, a ``memgas serve --rate-limit RATE --workers N`` subprocess serves the store (several
workers need PostgreSQL, where the buckets live in the database); ``clients`` threads, each with its own keep-alive
connection (so the workers share them), call ``GET /v1/users`` with one admin key as fast as they can for
``seconds``. A key is due its burst (``max(1, RATE)``) and ``RATE`` a second over the run; the table gives the
requests let through against that, and the 429s.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, Sequence

import httpx

from memgas.service.keys import create_key
from memgas.service.spawn import spawn_server, stop_server
from memgas.store import KeyStore, open_store, part

__all__ = ["run_ratelimit", "ratelimit_markdown"]


def _hammer(url: str, key: str, clients: int, seconds: float) -> tuple[list[int], float]:
    codes: list[int] = []
    lock = threading.Lock()
    start_line = threading.Barrier(clients + 1)

    def client() -> None:
        mine = []
        with httpx.Client(timeout=30) as http:
            start_line.wait()
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                mine.append(http.get(f"{url}/v1/users", headers={"Authorization": f"Bearer {key}"}).status_code)
        with lock:
            codes.extend(mine)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    start_line.wait()
    t0 = time.monotonic()
    for t in threads:
        t.join()
    return codes, time.monotonic() - t0


def run_ratelimit(target: str, workers: Sequence[int], *, rate: float = 5.0, seconds: float = 4.0, clients: int = 8,
                  log: Path) -> dict[str, Any]:
    """Measure each worker count (see the module docstring)."""
    with open_store(target) as store:
        key = create_key(part(store, KeyStore), "admin")[0]
    rows = []
    for n in workers:
        proc, url, argv = spawn_server(target, "--rate-limit", f"{rate:g}", "--workers", str(n), "--no-mcp", log=log)
        try:
            codes, elapsed = _hammer(url, key, clients, seconds)
        finally:
            stop_server(proc)
        due = max(1.0, rate) + rate * elapsed
        rows.append({"workers": n, "seconds": elapsed, "requests": len(codes), "allowed": codes.count(200),
                     "refused": codes.count(429), "other": len(codes) - codes.count(200) - codes.count(429),
                     "due": due, "ratio": codes.count(200) / due})
    return {"rate": rate, "clients": clients, "rows": rows}


def ratelimit_markdown(result: dict[str, Any]) -> str:
    """The runs as a Markdown table."""
    lines = [f"| workers | seconds | requests | let through | due ({result['rate']:g}/s and the burst) | "
             "let through / due | 429 | other |", "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in result["rows"]:
        lines.append(f"| {r['workers']} | {r['seconds']:.1f} | {r['requests']:,} | {r['allowed']} | {r['due']:.1f} | "
                     f"{r['ratio']:.2f} | {r['refused']:,} | {r['other']} |")
    return "\n".join(lines) + "\n"
