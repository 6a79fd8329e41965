"""Request rate limits: a token bucket per key (an API key id, or a client address for failed authentications),
in one process."""

from __future__ import annotations

import math
import threading
import time

__all__ = ["RateLimiter", "MAX_KEYS"]

#: Buckets kept before full ones are forgotten.
MAX_KEYS = 100_000


class RateLimiter:
    """Allow ``rate`` requests per second per key on average, in bursts of up to ``burst``.

    Args:
        rate: tokens added per second (> 0).
        burst: bucket size (default ``max(1, rate)``: one second's worth).
        clock: a monotonic clock in seconds (for tests).
    """

    def __init__(self, rate: float, burst: float | None = None, *, clock=time.monotonic) -> None:  # type: ignore[no-untyped-def]
        if not (math.isfinite(rate) and rate > 0):
            raise ValueError(f"rate must be a positive number, got {rate!r}")
        self.rate = float(rate)
        self.burst = float(burst if burst is not None else max(1.0, rate))
        self._clock = clock
        self._lock = threading.Lock()
        self._buckets: dict[str, tuple[float, float]] = {}

    def wait(self, key: str) -> float:
        """The seconds until ``key`` has a token again (0.0: it has one now), without taking one."""
        now = self._clock()
        with self._lock:
            tokens, last = self._buckets.get(key, (self.burst, now))
        tokens = min(self.burst, tokens + (now - last) * self.rate)
        return 0.0 if tokens >= 1.0 else (1.0 - tokens) / self.rate

    def acquire(self, key: str) -> float:
        """Take one token for ``key``: 0.0 when allowed, else the seconds until a token is due."""
        now = self._clock()
        with self._lock:
            tokens, last = self._buckets.get(key, (self.burst, now))
            tokens = min(self.burst, tokens + (now - last) * self.rate)
            if tokens >= 1.0:
                self._buckets[key] = (tokens - 1.0, now)
                return 0.0
            self._buckets[key] = (tokens, now)
            if len(self._buckets) > MAX_KEYS:  # forget the keys whose bucket has refilled (a flood of addresses)
                self._buckets = {k: v for k, v in self._buckets.items()
                                 if min(self.burst, v[0] + (now - v[1]) * self.rate) < self.burst}
            return (1.0 - tokens) / self.rate
