"""How memgas's exceptions become HTTP errors: one JSON shape, ``{"error": {"code", "message"}, "request_id"}``."""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

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

__all__ = ["status_of", "STATUS_CODES", "error_response", "validation_message"]

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


#: A step of an error's location that names a branch of a union (``list[MessageIn]``, ``str``,
#: ``constrained-str``, ``function-after[...]``), not a field: the message leaves it out.
_BRANCH = re.compile(r"^(str|int|float|bool|list|dict|none|constrained-\w+|function-\w+)(\[.*\])?$|\[")


def _where(loc: Sequence[Any]) -> str:
    """An error's location as the client wrote it: ``body.sessions.0.messages.0.role``, union branches left out."""
    return ".".join(str(p) for p in loc if isinstance(p, int) or not _BRANCH.search(str(p)))


def _said(error: Mapping[str, Any]) -> str:
    """One error as ``where: what was expected (got what was sent)``."""
    text = f"{_where(error.get('loc', ())) or 'the request'}: {error.get('msg', 'invalid')}"
    given = error.get("input")
    if error.get("type") not in ("missing", "extra_forbidden") and isinstance(given, (str, int, float, bool)) and (
            not isinstance(given, str) or len(given) <= 40):
        text += f" (got {given!r})"
    return text


def validation_message(errors: Sequence[Mapping[str, Any]], *, most: int = 3) -> str:
    """What a 422 says: each distinct error (at most ``most``, then how many more) as its field, what was expected
    and what came, one line. Where a value could be one of several shapes (a message list or a string), the errors
    of the shape it was not (``Input should be a valid string`` for a list) are left out when another says more.

    >>> validation_message([{"loc": ("body", "sessions", 0, "messages"), "msg": "Field required", "type": "missing"},
    ...                     {"loc": ("body", "sessions", 0, "content"), "msg": "Extra inputs are not permitted",
    ...                      "type": "extra_forbidden", "input": "hi"}])
    'body.sessions.0.messages: Field required; body.sessions.0.content: Extra inputs are not permitted'
    """
    by_place: dict[str, list[Mapping[str, Any]]] = {}
    for error in errors:
        by_place.setdefault(_where(error.get("loc", ())), []).append(error)
    kept: list[Mapping[str, Any]] = []
    for place, found in by_place.items():
        deeper = any(other != place and other.startswith(place + ".") for other in by_place)
        wrong_shape = [e for e in found if str(e.get("type", "")).endswith("_type")]
        if wrong_shape and (deeper or len(wrong_shape) < len(found)):
            found = [e for e in found if e not in wrong_shape]  # another branch of the union says what is wrong
        elif len(wrong_shape) > 1:  # of no shape it could be: name them all at once
            wants = [str(e.get("msg", "")).removeprefix("Input should be ") for e in wrong_shape]
            found = [{**wrong_shape[0], "msg": "Input should be " + " or ".join(dict.fromkeys(wants))}]
        kept += found
    said = list(dict.fromkeys(_said(e) for e in kept)) or ["invalid request"]
    extra = len(said) - most
    return "; ".join(said[:most]) + (f" (and {extra} more)" if extra > 0 else "")
