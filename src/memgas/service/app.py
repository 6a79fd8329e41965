"""The REST application: ``create_app(memory, ...)`` builds the FastAPI app that ``memgas serve`` runs.

Every request passes one ASGI middleware (:class:`RequestContext`) that gives it a request id, refuses
bodies over the size limit (413) before the app reads them, and on completion counts it in
:class:`~memgas.service.metrics.Metrics` and writes one JSON log line. Errors of every kind leave as
``{"error": {"code", "message"}, "request_id"}`` (:mod:`memgas.service.errors`).
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
import uuid
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import datetime, timezone
from typing import Any, AsyncIterator, Callable
from urllib.parse import urlsplit

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memgas.core.errors import MemgasError
from memgas.core.version import __version__
from memgas.memory import Memory
from memgas.service.deps import DEFAULT_MAX_BODY, ServiceState
from memgas.service.errors import STATUS_CODES, error_response, status_of, validation_message
from memgas.service.keys import is_loopback
from memgas.service.ratelimit import rate_limiter
from memgas.service.schemas import ErrorResponse

__all__ = ["create_app"]

log = logging.getLogger("memgas.service")
_REQUEST_ID_RE = re.compile(r"[A-Za-z0-9._-]{1,64}")
#: Characters no path of this API holds (ids are letters, digits and . : @ / + - _).
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


#: A Host header (or an origin's authority) as RFC 9110 writes one: a name or IPv4 address, or an IPv6 address in
#: brackets, then an optional port; nothing else (no user info, nothing after the brackets).
_AUTHORITY = re.compile(r"(?:\[(?P<v6>[0-9A-Fa-f:.]+)\]|(?P<name>[A-Za-z0-9.-]+))(?::(?P<port>[0-9]{1,5}))?")


def _loopback_host(authority: str) -> bool:
    """Whether a Host header or an origin's ``host[:port]`` (``[v6][:port]``) names this machine, read strictly:
    ``127.0.0.1:80@evil.example`` or ``[::1]x.evil.example`` is no loopback host."""
    m = _AUTHORITY.fullmatch(authority)
    if m is None or (m.group("port") is not None and not 0 < int(m.group("port")) < 65536):
        return False  # a port no socket has names no server of this machine
    return is_loopback((m.group("v6") or m.group("name")).lower())


def _local_request(headers: dict[str, str]) -> bool:
    """A request addressed to a loopback host, from no origin or a loopback one (the ``--no-auth`` rule)."""
    host = headers.get("host", "")
    origin = headers.get("origin")
    if not _loopback_host(host):
        return False
    if origin is None:
        return True
    parts = urlsplit(origin)
    return parts.scheme in ("http", "https") and parts.path in ("", "/") and _loopback_host(parts.netloc)


class RequestContext:
    """ASGI middleware: request id, body size limit, metrics and one structured log line per request."""

    def __init__(self, app: ASGIApp, state: ServiceState) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        t0 = time.perf_counter()
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        given = headers.get("x-request-id", "")
        request_id = given if _REQUEST_ID_RE.fullmatch(given) else uuid.uuid4().hex
        scope.setdefault("state", {})["request_id"] = request_id
        status = 500
        limit = self.state.max_body

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message.setdefault("headers", [])
                if not any(k.lower() == b"x-request-id" for k, _ in message["headers"]):
                    message["headers"] = [*message["headers"], (b"x-request-id", request_id.encode())]
            await send(message)

        received = 0

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:  # a body sent without Content-Length (chunked)
                    raise HTTPException(413, too_large)
            return message

        if not self.state.auth and not _local_request(headers):
            # Without keys only this machine may call; a page in a browser reaching us through a rebound
            # DNS name (another Host) or from a foreign Origin is refused before it touches any data.
            status = 421
            await error_response(421, "misdirected_request", "without API keys (--no-auth) this server answers only "
                                 "requests addressed to a loopback host from a loopback origin", request_id)(
                                     scope, receive, send)
            self._finish(scope, request_id, status, t0)
            return
        if _CONTROL.search(scope["path"]):
            # Starlette matches routes with ``$``, which also matches before a final newline: ``/users/alice%0A``
            # would reach alice. No id holds a control character, so such a path names nothing: refused whole.
            status = 422
            await error_response(422, "validation_error", "the path holds a control character (no id may)",
                                 request_id)(scope, receive, send)
            self._finish(scope, request_id, status, t0)
            return
        length = headers.get("content-length", "")
        too_large = f"request body over the limit of {limit:,} bytes"
        try:
            if length.isdigit() and int(length) > limit:  # refused before a byte of it is read
                status = 413
                await error_response(413, "payload_too_large", too_large, request_id)(scope, receive, send)
            else:
                await self.app(scope, limited_receive, send_with_id)
        finally:
            self._finish(scope, request_id, status, t0)

    def _finish(self, scope: Scope, request_id: str, status: int, t0: float) -> None:
        """Count the request in the metrics and write its log line."""
        seconds = time.perf_counter() - t0
        route = scope.get("route")
        template = getattr(route, "path", None) or "unmatched"
        self.state.metrics.observe(scope["method"], template, status, seconds)
        who = scope.get("state", {}).get("principal")
        log.info(json.dumps({"ts": datetime.now(timezone.utc).isoformat(timespec="milliseconds"), "pid": os.getpid(),
                             "request_id": request_id, "method": scope["method"], "path": scope["path"],
                             "route": template, "status": status, "ms": round(seconds * 1000, 2),
                             "key": getattr(who, "key_id", None)}))


def create_app(memory: Memory, *, auth: bool = True, rate_limit: float | None = None,
               max_body: int = DEFAULT_MAX_BODY, mcp: bool = True,
               on_shutdown: Callable[[], None] | None = None) -> FastAPI:
    """The REST (and, with the ``mcp`` package, MCP-over-HTTP at ``/mcp``) application over ``memory``.

    Args:
        memory: the facade every route calls.
        auth: require an API key (``memgas keys create``) on every call but ``/healthz``, ``/readyz`` and
            the OpenAPI schema; ``False`` only for a server bound to loopback (``memgas serve --no-auth``).
        rate_limit: requests per second allowed per key (bursts of one second's worth); ``None``: no limit.
        max_body: largest request body in bytes (413 above).
        mcp: also serve the MCP tools over streamable HTTP at ``/mcp`` (same keys).
        on_shutdown: called when the app stops (e.g. closing the memory it was given).
    """
    state = ServiceState(memory=memory, auth=auth, max_body=max_body,
                         limiter=rate_limiter(memory.store, rate_limit) if rate_limit else None)
    lifespans: list[Callable[[], Any]] = []

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            for enter in lifespans:
                await stack.enter_async_context(enter())
            try:
                yield
            finally:
                if on_shutdown is not None:
                    on_shutdown()

    error_responses: dict[int | str, dict[str, Any]] = {
        code: {"model": ErrorResponse, "description": name} for code, name in STATUS_CODES.items()
        if code in (400, 401, 403, 404, 409, 413, 422, 429, 503)}
    # /docs and /redoc are memgas's own pages (routes/pages.py): FastAPI's load their scripts from a CDN.
    app = FastAPI(title="memgas", version=__version__, lifespan=lifespan, responses=error_responses,
                  description="Long-term memory for LLM agents: store conversations, search what matters.",
                  docs_url=None, redoc_url=None)
    app.state.memgas = state

    from memgas.service.routes import experience, inspect, messages, ops, pages, search, sessions, users

    for module in (messages, sessions, users, search, experience, inspect, ops, pages):
        app.include_router(module.router)
    pages.mount_static(app)

    def request_id(request: Request) -> str:
        return request.scope.get("state", {}).get("request_id", "")

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        kind = request.headers.get("content-type", "")
        if first.get("loc", ())[:1] == ("body",) and "json" not in kind.lower():
            # FastAPI reads a body without a JSON Content-Type as no object at all: say what the client must send.
            return error_response(422, "validation_error", "the request body must be JSON, sent with the header "
                                  f"'Content-Type: application/json' (this request's: {kind or 'none'})",
                                  request_id(request))
        if first.get("type") == "json_invalid":
            detail = (first.get("ctx") or {}).get("error", "")
            return error_response(422, "validation_error", f"the request body is not valid JSON ({detail}, at "
                                  f"character {first.get('loc', ('', 0))[-1]})", request_id(request))
        return error_response(422, "validation_error", validation_message(exc.errors()), request_id(request))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = STATUS_CODES.get(exc.status_code, "error")
        message = exc.detail if isinstance(exc.detail, str) else code
        if exc.status_code == 404 and message == "Not Found":
            message = f"no route {request.method} {request.url.path}"
        return error_response(exc.status_code, code, message, request_id(request), dict(exc.headers or {}))

    @app.exception_handler(MemgasError)
    async def memgas_error(request: Request, exc: MemgasError) -> JSONResponse:
        status, code, headers = status_of(exc)
        if status >= 500:
            log.warning("request %s: %s: %s", request_id(request), type(exc).__name__, exc)
        who = getattr(request.state, "principal", None)
        message = who.unscoped(str(exc)) if who is not None else " ".join(str(exc).split())
        return error_response(status, code, message, request_id(request), headers)

    @app.exception_handler(Exception)  # a bug: Starlette re-raises it after this reply, so the server logs it
    async def internal_error(request: Request, exc: Exception) -> JSONResponse:
        return error_response(500, "internal", "internal error; see the server log", request_id(request))

    if mcp:
        from memgas.service.mcp import mount_mcp

        lifespans.append(mount_mcp(app, state))

    app.add_middleware(RequestContext, state=state)
    return app
