"""How memgas's exceptions become HTTP errors: one JSON shape, ``{"error": {"code", "message"}, "request_id"}``."""

from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse

from memgas.core.errors import (
    AuthError,
    DuplicateSessionError,
    ForbiddenError,
    InvalidInputError,
    LLMError,
    MemgasError,
    NotFoundError,
    RateLimitedError,
    UnavailableError,
)

__all__ = ["status_of", "STATUS_CODES", "error_response"]

#: The ``code`` of each status this API returns.
STATUS_CODES: dict[int, str] = {
    400: "invalid_input", 401: "unauthorized", 403: "forbidden", 404: "not_found", 405: "method_not_allowed",
    409: "conflict", 421: "misdirected_request", 413: "payload_too_large", 422: "validation_error", 429: "rate_limited",
    500: "internal", 503: "unavailable",
}


def status_of(exc: BaseException) -> tuple[int, str, dict[str, Any]]:
    """``(status, code, headers)`` of an exception raised while serving a request.

    Order matters: :class:`DuplicateSessionError` is an :class:`InvalidInputError`, and an
    :class:`LLMError` or a store failure (any other :class:`MemgasError`) is the server's trouble, not
    the caller's, so it is 503 and may be retried.
    """
    if isinstance(exc, AuthError):
        return 401, "unauthorized", {"WWW-Authenticate": "Bearer"}
    if isinstance(exc, ForbiddenError):
        return 403, "forbidden", {}
    if isinstance(exc, RateLimitedError):
        return 429, "rate_limited", {"Retry-After": str(max(1, round(exc.retry_after + 0.5)))}
    if isinstance(exc, NotFoundError):
        return 404, "not_found", {}
    if isinstance(exc, DuplicateSessionError):
        return 409, "conflict", {}
    if isinstance(exc, InvalidInputError):
        return 400, "invalid_input", {}
    if isinstance(exc, LLMError):
        return 503, "llm_unavailable", {"Retry-After": "5"}
    if isinstance(exc, UnavailableError):
        return 503, "unavailable", {}
    if isinstance(exc, MemgasError):
        return 503, "unavailable", {"Retry-After": "1"}
    return 500, "internal", {}


def error_response(status: int, code: str, message: str, request_id: str,
                   headers: dict[str, str] | None = None) -> JSONResponse:
    """The JSON error reply every failure gets: ``{"error": {"code", "message"}, "request_id"}``."""
    body = {"error": {"code": code, "message": message}, "request_id": request_id}
    return JSONResponse(body, status_code=status, headers={**(headers or {}), "X-Request-ID": request_id})
