"""JSON over HTTP for the OpenAI-compatible providers (embeddings and chat), with bounded retries and one
deadline per call.

Standard library only (``urllib``): no HTTP client dependency for an optional feature.
"""

from __future__ import annotations

import http.client
import json
import random
import socket
import threading
import time
import urllib.error
import urllib.request
from typing import Any, Callable, Mapping

from memgas.core.errors import MemgasError

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


class _Watchdog:
    """Shuts down the sockets of one attempt when its time is up.

    A socket timeout bounds each wait for a byte, not the whole exchange: a server that trickles its
    status line, headers or body one byte at a time never trips it. Shutting the socket down from a
    timer thread wakes the blocked read (it sees end of file) wherever urllib is waiting.
    """

    def __init__(self, seconds: float) -> None:
        self.fired = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True
        self._timer.start()

    def track(self, sock: socket.socket) -> None:
        """Watch ``sock`` (shut at once if the time is already up)."""
        with self._lock:
            self._sockets.append(sock)
            if self.fired:
                _shut(sock)

    def _fire(self) -> None:
        with self._lock:
            self.fired = True
            for sock in self._sockets:
                _shut(sock)

    def cancel(self) -> None:
        """Stop the timer (the attempt ended in time)."""
        self._timer.cancel()


def _shut(sock: socket.socket) -> None:
    try:  # the plain socket call, also for TLS sockets: no TLS close_notify from a foreign thread
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    except OSError:
        pass  # already closed


def _opener(watch: _Watchdog) -> urllib.request.OpenerDirector:
    """urllib's opener (proxies and all) whose connections report their sockets to ``watch``."""

    def tracked(base: type[http.client.HTTPConnection]) -> Callable[..., http.client.HTTPConnection]:
        class Connection(base):  # type: ignore[valid-type, misc]
            def connect(self) -> None:
                super().connect()
                watch.track(self.sock)

        return Connection

    plain, tls = tracked(http.client.HTTPConnection), tracked(http.client.HTTPSConnection)

    class HTTP(urllib.request.HTTPHandler):
        def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
            return self.do_open(plain, req)

    class HTTPS(urllib.request.HTTPSHandler):
        def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
            return self.do_open(tls, req, context=self._context)  # type: ignore[attr-defined]

    return urllib.request.build_opener(HTTP(), HTTPS())


def post_json(
    url: str,
    body: Mapping[str, Any],
    headers: Mapping[str, str],
    *,
    timeout: float,
    max_retries: int,
    backoff: float,
    max_backoff: float,
    attempt_timeout: float | None = None,
    what: str = "server",
    error: type[MemgasError] = MemgasError,
    status_error: Callable[[str, int, str], Exception] = HTTPStatusError,
) -> Any:
    """POST ``body`` as JSON and return the parsed JSON answer, retrying transient failures, within ``timeout``.

    ``timeout`` is one deadline for the whole call: connecting, every attempt, every wait between
    attempts, and reading an answer however slowly it trickles in. Transient failures (HTTP
    408/409/425/429/5xx, timeouts, refused or dropped connections) are retried ``max_retries`` times
    with exponential backoff (``backoff * 2**attempt``, capped at ``max_backoff``) and jitter (x0.5-1),
    or after the server's ``Retry-After`` when it sends one (capped too), while time is left.

    Args:
        timeout: seconds for the whole call (see above).
        attempt_timeout: seconds one attempt may wait for the next byte, so that a hung connection is
            retried within the deadline; default: the time left.
        what: how error messages name the server ("embedding server", "LLM endpoint").
        error: the class raised when the server cannot be reached in time or answers non-JSON.
        status_error: the class raised on a non-transient HTTP status, called with
            ``(message, status, detail)``.

    Raises:
        status_error: a non-transient HTTP status (not retried).
        error: no JSON answer within the deadline or after every attempt, or an answer that is not JSON.
    """
    data = json.dumps(body).encode("utf-8")
    end = time.monotonic() + timeout
    problem = "no time left for an attempt"

    def late(attempts: int) -> MemgasError:
        return error(f"{what} {url} gave no complete answer within the {timeout:.3g} s deadline "
                     f"({attempts} attempts): {problem}")

    for attempt in range(max_retries + 1):
        left = end - time.monotonic()
        if left <= 0:
            raise late(attempt)
        retry_after: float | None = None
        watch = _Watchdog(left)
        try:
            req = urllib.request.Request(url, data=data, headers=dict(headers), method="POST")
            with _opener(watch).open(req, timeout=min(left, attempt_timeout or left)) as resp:
                raw = resp.read()
            if watch.fired:  # a read cut by the shutdown can look like a complete, shorter body
                raise TimeoutError("the answer was cut at the deadline")
            try:
                return json.loads(raw)
            except (ValueError, RecursionError) as e:
                raise error(f"{what} {url} did not answer JSON: {raw[:200]!r}") from e
        except urllib.error.HTTPError as e:
            detail = e.read(500).decode("utf-8", "replace").strip()
            if e.code not in RETRY_STATUS:
                raise status_error(f"{what} {url} answered HTTP {e.code}: {detail}", e.code, detail) from e
            problem = f"HTTP {e.code}: {detail}"
            retry_after = retry_after_seconds(e.headers.get("Retry-After"))
        except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
            problem = f"{type(e).__name__}: {getattr(e, 'reason', None) or e}"
        finally:
            watch.cancel()
        if watch.fired:
            raise late(attempt + 1)
        if attempt == max_retries:
            break
        delay = min(max_backoff, backoff * 2**attempt) * (0.5 + random.random() / 2)
        delay = min(max_backoff, retry_after) if retry_after is not None else delay
        if time.monotonic() + delay >= end:
            raise late(attempt + 1)
        time.sleep(delay)
    raise error(f"cannot reach {what} {url} after {max_retries + 1} attempts: {problem}")
