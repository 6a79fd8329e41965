"""The errors memgas raises: one hierarchy under :class:`MemgasError`, each a plain exception with a one-line message.
"""

from __future__ import annotations

__all__ = [
    "MemgasError", "InvalidInputError", "DuplicateSessionError", "NotFoundError", "EmbedderMismatchError",
    "AuthError", "ForbiddenError", "RateLimitedError", "UnavailableError", "ConvergenceError",
    "MissingDependencyError", "LLMError",
]


class MemgasError(Exception):
    """Base class of every error memgas raises on purpose."""


class InvalidInputError(MemgasError, ValueError):
    """The caller passed data memgas cannot store or use; nothing was written."""


class DuplicateSessionError(InvalidInputError):
    """A session with this id already exists for this user."""


class NotFoundError(MemgasError, KeyError):
    """The user, session or unit asked for does not exist."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else "not found"


class EmbedderMismatchError(MemgasError):
    """A store holds vectors of one embedder and was opened with another."""


class AuthError(MemgasError):
    """A service call without an API key, or with a malformed, unknown or revoked one (HTTP 401)."""


class ForbiddenError(MemgasError):
    """A service call the API key's scope does not allow (HTTP 403)."""


class RateLimitedError(MemgasError):
    """A service call over the API key's request rate (HTTP 429); ``retry_after`` is in seconds."""

    def __init__(self, message: str, retry_after: float = 1.0) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class UnavailableError(MemgasError):
    """The service cannot serve the call now (HTTP 503): its store is unreachable, or no LLM is configured."""


class ConvergenceError(MemgasError, RuntimeError):
    """An iterative kernel (PageRank, EM) did not converge within its budget."""


class MissingDependencyError(MemgasError, ImportError):
    """An optional package an embedder needs is not installed."""


class LLMError(MemgasError):
    """An LLM call failed: the endpoint is unreachable or refused, or the output stayed invalid.

    ``raw`` holds the model's last text when the failure is invalid output (else ``None``).
    """

    def __init__(self, message: str, raw: str | None = None) -> None:
        super().__init__(message)
        self.raw = raw
