"""Prometheus text-format metrics of one server process (no client library: a few counters and histograms).

With several workers each process keeps its own; Prometheus sums them when it scrapes every worker,
or an operator reads one worker's share.
"""

from __future__ import annotations

import bisect
import threading
from collections import defaultdict
from typing import Any

__all__ = ["Metrics", "LATENCY_BUCKETS", "COUNTERS"]

#: The named counters every server exposes (``memgas_<name>_total``).
COUNTERS = ("adds", "searches", "answers")

#: Upper bounds (seconds) of the request-latency histogram buckets.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


def _labels(pairs: tuple[tuple[str, str], ...]) -> str:
    if not pairs:
        return ""
    body = ",".join(f'{k}="{v.replace(chr(92), chr(92) * 2).replace(chr(34), chr(92) + chr(34))}"' for k, v in pairs)
    return "{" + body + "}"


class Metrics:
    """Request counts and latencies by route, plus named counters; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requests: dict[tuple[str, str, str], int] = defaultdict(int)
        self._buckets: dict[str, list[int]] = {}
        self._sums: dict[str, float] = defaultdict(float)
        # Exposed from the start at 0, so a scrape before the first add already shows them (rate() needs that).
        self._counters: dict[str, int] = defaultdict(int, {name: 0 for name in COUNTERS})

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        """Count one finished request and its latency."""
        with self._lock:
            self._requests[(method, route, str(status))] += 1
            buckets = self._buckets.setdefault(route, [0] * (len(LATENCY_BUCKETS) + 1))
            buckets[bisect.bisect_left(LATENCY_BUCKETS, seconds)] += 1
            self._sums[route] += seconds

    def inc(self, name: str, value: int = 1) -> None:
        """Add ``value`` to the counter ``name`` (e.g. ``adds``, ``searches``)."""
        with self._lock:
            self._counters[name] += value

    def render(self, extra: dict[str, Any] | None = None, gauges: dict[str, Any] | None = None) -> str:
        """The exposition text; ``extra`` maps more counter names (e.g. LLM use read at scrape time) to values,
        ``gauges`` names of values that go up and down (what the index cache holds)."""
        lines = ["# HELP memgas_http_requests_total HTTP requests by method, route and status.",
                 "# TYPE memgas_http_requests_total counter"]
        with self._lock:
            for (method, route, status), n in sorted(self._requests.items()):
                lines.append(f"memgas_http_requests_total{_labels((('method', method), ('route', route), ('status', status)))} {n}")
            lines += ["# HELP memgas_http_request_seconds HTTP request latency by route.",
                      "# TYPE memgas_http_request_seconds histogram"]
            for route, buckets in sorted(self._buckets.items()):
                running = 0
                for bound, n in zip((*LATENCY_BUCKETS, float("inf")), buckets):
                    running += n
                    le = "+Inf" if bound == float("inf") else repr(bound)
                    lines.append(f"memgas_http_request_seconds_bucket{_labels((('route', route), ('le', le)))} {running}")
                lines.append(f"memgas_http_request_seconds_sum{_labels((('route', route),))} {self._sums[route]:.6f}")
                lines.append(f"memgas_http_request_seconds_count{_labels((('route', route),))} {running}")
            counters = {**self._counters, **(extra or {})}
        for name, value in sorted(counters.items()):
            lines += [f"# TYPE memgas_{name}_total counter", f"memgas_{name}_total {value}"]
        for name, value in sorted((gauges or {}).items()):
            lines += [f"# TYPE memgas_{name} gauge", f"memgas_{name} {value}"]
        return "\n".join(lines) + "\n"
