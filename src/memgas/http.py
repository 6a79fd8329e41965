"""JSON over HTTP for the OpenAI-compatible providers (embeddings and chat), with bounded retries.

Standard library only (``urllib``): no HTTP client dependency for an optional feature.
"""

from __future__ import annotations

import http.client
import json
import random
import time
import urllib.error
import urllib.request
from typing import Any, Callable, Mapping

from .model import MemgasError

__all__ = ["RETRY_STATUS", "HTTPStatusError", "json_headers", "retry_after_seconds", "post_json"]

#: Statuses worth retrying: timeouts, conflicts, rate limits, server errors.
RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


class HTTPStatusError(MemgasError):
    """The server answered with a status that retrying will not fix (a 4xx other than 408/409/425/429)."""

    def __init__(self, message: str, status: int, detail: str) -> None:
        super().__init__(message)
        self.status = status
        self.detail = detail


def json_headers(api_key: str | None) -> dict[str, str]:
    """Headers of a JSON request, with a bearer token when there is a key."""
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    return headers


def retry_after_seconds(value: str | None) -> float | None:
    """A ``Retry-After`` header in seconds, or ``None`` (absent, or an HTTP date: use our own backoff)."""
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def post_json(
    url: str,
    body: Mapping[str, Any],
    headers: Mapping[str, str],
    *,
    timeout: float,
    max_retries: int,
    backoff: float,
    max_backoff: float,
    what: str = "server",
    error: type[MemgasError] = MemgasError,
    status_error: Callable[[str, int, str], Exception] = HTTPStatusError,
) -> Any:
    """POST ``body`` as JSON and return the parsed JSON answer, retrying transient failures.

    Transient: HTTP 408/409/425/429/5xx, timeouts, refused or dropped connections. They are retried
    ``max_retries`` times with exponential backoff (``backoff * 2**attempt``, capped at
    ``max_backoff``) and jitter (x0.5-1), or after the server's ``Retry-After`` when it sends one
    (capped too). The number of attempts is bounded: there is no infinite retry loop.

    Args:
        what: how error messages name the server ("embedding server", "LLM endpoint").
        error: the class raised when the server cannot be reached or answers non-JSON.
        status_error: the class raised on a non-transient HTTP status, called with
            ``(message, status, detail)``.

    Raises:
        status_error: a non-transient HTTP status (not retried).
        error: the server could not be reached after every attempt, or answered non-JSON.
    """
    data = json.dumps(body).encode("utf-8")
    problem = ""
    for attempt in range(max_retries + 1):
        retry_after: float | None = None
        try:
            req = urllib.request.Request(url, data=data, headers=dict(headers), method="POST")
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                raw = resp.read()
            try:
                return json.loads(raw)
            except ValueError as e:
                raise error(f"{what} {url} did not answer JSON: {raw[:200]!r}") from e
        except urllib.error.HTTPError as e:
            detail = e.read(500).decode("utf-8", "replace").strip()
            if e.code not in RETRY_STATUS:
                raise status_error(f"{what} {url} answered HTTP {e.code}: {detail}", e.code, detail) from e
            problem = f"HTTP {e.code}: {detail}"
            retry_after = retry_after_seconds(e.headers.get("Retry-After"))
        except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
            problem = f"{type(e).__name__}: {getattr(e, 'reason', None) or e}"
        if attempt == max_retries:
            break
        delay = min(max_backoff, backoff * 2**attempt) * (0.5 + random.random() / 2)
        time.sleep(min(max_backoff, retry_after) if retry_after is not None else delay)
    raise error(f"cannot reach {what} {url} after {max_retries + 1} attempts: {problem}")
