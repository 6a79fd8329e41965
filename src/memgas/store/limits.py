"""Rate-limit buckets a store shares with every process on it: the :class:`RateLimitStore` interface, used only by
:mod:`memgas.service.ratelimit` (a store without it leaves each service process to limit on its own)."""

from __future__ import annotations

from abc import ABC, abstractmethod

__all__ = ["RateLimitStore"]


class RateLimitStore(ABC):
    """Token buckets in the database, so that a limit holds across the service's workers (PostgreSQL)."""

    @abstractmethod
    def take_token(self, bucket: str, rate: float, burst: float) -> float:
        """Take a token from a rate-limit bucket shared by every process on the store: 0.0 when taken, else the
        seconds until one is due."""
