"""Running the service: ``memgas serve`` (uvicorn, one or several workers) over a configured memory.

Workers are separate processes, so the configuration travels to them in the environment
(:data:`CONFIG_ENV`, JSON) and each builds its own :class:`~memgas.memory.Memory` with
:func:`app_from_env`. SQLite serves with one worker (one writer per file); PostgreSQL with several.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import socket
import sys
import threading
from dataclasses import asdict, dataclass, field
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from memgas.core.errors import InvalidInputError, MemgasError
from memgas.service.keys import is_loopback

__all__ = ["ServeConfig", "Expirer", "build_app", "app_from_env", "serve", "CONFIG_ENV"]

#: The environment variable that hands a :class:`ServeConfig` to worker processes.
CONFIG_ENV = "MEMGAS_SERVE_CONFIG"


#: Seconds a connection may stay open without sending a request (the first one included), by default.
IDLE_TIMEOUT = 10.0
#: Seconds a request may take to arrive whole (its headers and body), from its first byte, by default.
REQUEST_TIMEOUT = 30.0
#: Bytes a request's line and headers may take; a larger head is answered 431 (uvicorn's h11 default is 16 KiB).
MAX_HEAD_BYTES = 64 * 1024


@dataclass(frozen=True)
class ServeConfig:
    """What a server process needs to build its app (see ``memgas serve --help``)."""

    db: str
    method: str | None = None  # None: the method the store was made with, else memgas
    llm: str | None = None
    supersession_check: str | None = None  # "llm:<LLM spec>" (memgas.context.confirm); None: off
    auth: bool = True
    rate_limit: float | None = None
    max_body: int | None = None
    mcp: bool = True
    idle_timeout: float = IDLE_TIMEOUT
    request_timeout: float = REQUEST_TIMEOUT
    index_cache_mb: float | None = None  # None: the library's default
    options: dict[str, Any] = field(default_factory=dict)  # the method's parameters (memgas serve --set)
    retention_days: float | None = None  # None: keep everything
    retention: dict[str, float] = field(default_factory=dict)  # some users' or tenants' own periods
    expire_every: float = 3600.0  # seconds between two deletions of what has expired


class Expirer:
    """Deletes what has expired (sessions past their ``expires_at`` or the memory's retention period) every ``every``
    seconds, in a thread of its own, until
    :meth:`stop` (each worker process runs one: a session two of them find is deleted once, in one transaction)."""

    def __init__(self, memory: Any, every: float) -> None:
        self._memory, self._every = memory, every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="memgas-expire", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        log = logging.getLogger("memgas.service")
        while not self._stop.is_set():
            try:
                gone = self._memory.expire()
                if gone:
                    log.info(json.dumps({"event": "expired", "sessions": gone}))
            except MemgasError as exc:  # a store briefly away: the next round tries again
                log.warning(json.dumps({"event": "expire_failed", "error": str(exc)}))
            self._stop.wait(self._every)

    def stop(self) -> None:
        """Stop after the round under way, if any."""
        self._stop.set()
        self._thread.join(timeout=60)


def build_app(config: ServeConfig) -> Any:
    """The FastAPI app of ``config``, owning (and closing on shutdown) the memory it opens."""
    from memgas.memory import Memory
    from memgas.service.app import create_app
    from memgas.service.deps import DEFAULT_MAX_BODY

    cache: dict[str, Any] = {} if config.index_cache_mb is None else {"index_cache_mb": config.index_cache_mb}
    # embeddings cached in memory only
    memory = Memory(config.db, method=config.method, llm=config.llm, supersession_check=config.supersession_check,
                    retention_days=config.retention_days,
                    retention=config.retention, **cache,
                    **config.options)
    expirer = Expirer(memory, config.expire_every)  # sessions may carry their own expiry, whatever the period

    def shutdown() -> None:
        if expirer is not None:
            expirer.stop()
        memory.close()

    return create_app(memory, auth=config.auth, rate_limit=config.rate_limit,
                      max_body=config.max_body or DEFAULT_MAX_BODY, mcp=config.mcp, on_shutdown=shutdown)


def app_from_env() -> Any:
    """The app factory uvicorn's workers call: :func:`build_app` of the config in :data:`CONFIG_ENV`."""
    _configure_logging()
    return build_app(ServeConfig(**json.loads(os.environ[CONFIG_ENV])))


def _configure_logging() -> None:
    """One JSON line per request on stderr (logger ``memgas.service``), without uvicorn's access log."""
    log = logging.getLogger("memgas.service")
    if not log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
        log.propagate = False


@functools.cache
def _configured(name: str, default: float) -> float:
    """A timeout of this server's configuration (every worker process inherits it), else ``default``."""
    raw = os.environ.get(CONFIG_ENV)
    return float(json.loads(raw).get(name, default)) if raw else default


#: What a request whose head is over :data:`MAX_HEAD_BYTES` is told, before its connection closes.
_HEAD_TOO_LARGE = json.dumps({"error": {"code": "header_too_large", "message": (
    f"the request line and headers are over {MAX_HEAD_BYTES // 1024} KiB: send less in headers (ids and filters "
    "go in the body)")}, "request_id": None}).encode()


class IdleClosingH11(H11Protocol):
    """uvicorn's h11 protocol with deadlines a slow client cannot stretch, and a 431 for an oversized head. A
    module-level class: worker processes unpickle it by name.

    - A connection that sends nothing for the idle timeout is closed from the moment it opens (uvicorn's own
      keep-alive timer starts only after a first response, so a silent client held a connection forever).
    - A request must arrive whole (headers and body) within the request timeout of its first byte: a byte every few
      seconds resets the idle timer, not this one.
    - A head over :data:`MAX_HEAD_BYTES` gets ``431`` and the connection closes once the client has had time to read
      it (the rest of what it sends is dropped unread rather than reset).
    """

    def connection_made(self, transport: Any) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.timeout_keep_alive_task = self.loop.call_later(_configured("idle_timeout", IDLE_TIMEOUT),
                                                            self.timeout_keep_alive_handler)
        self._deadline: asyncio.TimerHandle | None = None
        self._refused = False

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return  # answered 431: what follows is read and dropped until the connection closes
        if self._deadline is None and self.conn.their_state in (h11.IDLE, h11.SEND_BODY):
            self._deadline = self.loop.call_later(_configured("request_timeout", REQUEST_TIMEOUT), self._too_slow)
        if self.conn.their_state is h11.IDLE and self._head_too_large(data):
            self._refuse_head()
            return
        super().data_received(data)
        if self.conn.their_state not in (h11.IDLE, h11.SEND_BODY) and self._deadline is not None:
            self._deadline.cancel()  # the request is whole
            self._deadline = None

    def _head_too_large(self, data: bytes) -> bool:
        """Whether the request being read has no end of head (a blank line) within :data:`MAX_HEAD_BYTES` (a body
        arriving in the same read does not count)."""
        held = self.conn.trailing_data[0]
        if len(held) + len(data) <= MAX_HEAD_BYTES:
            return False
        return b"\r\n\r\n" not in (bytes(held) + data[:MAX_HEAD_BYTES + 4])[:MAX_HEAD_BYTES + 4]

    def _too_slow(self) -> None:
        self._deadline = None
        if self.conn.their_state in (h11.IDLE, h11.SEND_BODY) and not self.transport.is_closing():
            self.logger.info("memgas: closed a connection whose request did not arrive within the request timeout")
            self.transport.close()

    def _refuse_head(self) -> None:
        self._refused = True
        head = (b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: application/json\r\n"
                b"connection: close\r\ncontent-length: " + str(len(_HEAD_TOO_LARGE)).encode() + b"\r\n\r\n")
        self.transport.write(head + _HEAD_TOO_LARGE)
        self.loop.call_later(2.0, self.transport.close)

    def connection_lost(self, exc: Exception | None) -> None:
        deadline = getattr(self, "_deadline", None)
        if deadline is not None:
            deadline.cancel()
        super().connection_lost(exc)


def _check_port(host: str, port: int) -> None:
    """Raise :class:`MemgasError` (one line) when ``host:port`` cannot be listened on, before any worker starts."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds: TIME_WAIT is no obstacle
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise MemgasError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


def serve(config: ServeConfig, *, host: str = "127.0.0.1", port: int = 8000, workers: int = 1,
          log_level: str = "warning", announce: str | None = None) -> None:
    """Run the server until interrupted; once every check passed, print ``announce`` (which store) and the
    address on stderr.

    Raises:
        InvalidInputError: ``auth`` off on a host that is not loopback, several workers on SQLite, a
            bad port or worker count.
        MemgasError: the port is in use (or the host is not this machine's).
    """
    import uvicorn

    from memgas.store import KeyStore, open_store, part

    if not config.auth and not is_loopback(host):
        raise InvalidInputError(f"--no-auth serves anyone who can connect: it binds only to loopback, not {host!r}")
    if not 0 <= port <= 65535 or workers < 1:
        raise InvalidInputError(f"invalid port {port} or worker count {workers}")
    if workers > 1 and not config.db.startswith(("postgresql://", "postgres://")):
        raise InvalidInputError("several workers need a PostgreSQL store; a SQLite file is served by one worker")
    with open_store(config.db) as store:  # create or migrate the schema once, before any worker starts
        keys = [k for k in part(store, KeyStore).list_api_keys() if k.revoked_at is None] if config.auth else []
    _check_port(host, port)
    if config.auth and not keys:  # said once every check passed: a refused start prints its one error line only
        print(f"memgas: warning: this store has no API key yet, so every request will get 401: make one with "
              f"`memgas keys create --db {config.db} --scope admin` (or serve a local trial with --no-auth)",
              file=sys.stderr)
    if not config.auth:
        print(f"memgas: warning: --no-auth: every caller on {host} may read and delete every user's memory",
              file=sys.stderr)
    os.environ[CONFIG_ENV] = json.dumps(asdict(config))
    if announce:
        print(announce, file=sys.stderr)
    print(f"memgas: serving http://{host}:{port} ({workers} worker{'s' if workers > 1 else ''}); Ctrl-C stops it",
          file=sys.stderr)
    print(f"memgas: the inspector at http://{host}:{port}/ui, the API's docs at http://{host}:{port}/docs",
          file=sys.stderr)
    uvicorn.run("memgas.service.serve:app_from_env", factory=True, host=host, port=port, workers=workers,
                log_level=log_level, access_log=False, timeout_graceful_shutdown=10,
                http=IdleClosingH11, timeout_keep_alive=int(max(1, config.idle_timeout)),
                h11_max_incomplete_event_size=2 * MAX_HEAD_BYTES)  # the head's own limit is ours (431), not h11's
