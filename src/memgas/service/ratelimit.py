"""Request rate limits: a token bucket per key (an API key id, or a client address for failed authentications),
in one process (:class:`RateLimiter`) or in the store, shared by every worker and server on it
(:class:`SharedRateLimiter`, PostgreSQL: what ``--rate-limit`` uses there, so it holds whatever ``--workers`` is)."""

from __future__ import annotations

import math
import threading
import time

from memgas.store.limits import RateLimitStore

__all__ = ["RateLimiter", "SharedRateLimiter", "rate_limiter", "bucket_size", "MAX_KEYS"]

#: Buckets kept before full ones are forgotten.
MAX_KEYS = 100_000


def bucket_size(rate: float, burst: float | None) -> tuple[float, float]:
    """``(rate, burst)`` of a token bucket, ``burst`` defaulting to one second's worth (at least 1).

    Raises:
        ValueError: ``rate`` not a positive finite number.
    """
    if not (math.isfinite(rate) and rate > 0):
        raise ValueError(f"rate must be a positive number, got {rate!r}")
    return float(rate), float(burst if burst is not None else max(1.0, rate))


class RateLimiter:
    """Allow ``rate`` requests per second per key on average, in bursts of up to ``burst``.

    Args:
        rate: tokens added per second (> 0).
        burst: bucket size (default ``max(1, rate)``: one second's worth).
        clock: a monotonic clock in seconds (for tests).
    """

    def __init__(self, rate: float, burst: float | None = None, *, clock=time.monotonic) -> None:  # type: ignore[no-untyped-def]
        self.rate, self.burst = bucket_size(rate, burst)
        self._clock = clock
        self._lock = threading.Lock()
        self._buckets: dict[str, tuple[float, float]] = {}

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


class SharedRateLimiter:
    """:class:`RateLimiter`'s ``acquire`` with its buckets in the store (:meth:`RateLimitStore.take_token`): one bucket per
    key for every process on the store, on the database's clock. Each call is one statement on the database.

    Args:
        store: a store that keeps shared buckets (PostgreSQL).
        rate, burst: as for :class:`RateLimiter`.
        prefix: what the buckets of this limiter are named with (limiters with other rates keep apart).
    """

    def __init__(self, store: RateLimitStore, rate: float, burst: float | None = None, *,
                 prefix: str = "key:") -> None:
        self.rate, self.burst = bucket_size(rate, burst)
        self._store, self._prefix = store, prefix

    def acquire(self, key: str) -> float:
        """Take one token for ``key``: 0.0 when allowed, else the seconds until a token is due."""
        return self._store.take_token(self._prefix + key, self.rate, self.burst)


def rate_limiter(store: object, rate: float) -> RateLimiter | SharedRateLimiter:
    """The per-key limiter of ``--rate-limit``: shared through the store where it can (PostgreSQL), else this
    process's own (SQLite is served by one worker)."""
    return SharedRateLimiter(store, rate) if isinstance(store, RateLimitStore) else RateLimiter(rate)
