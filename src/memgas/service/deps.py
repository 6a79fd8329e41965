"""FastAPI dependencies: who is calling (the API key), whether they are over their rate, and their scoped memory."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Depends, Path, Query, Request
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from memgas.core.errors import AuthError, RateLimitedError
from memgas.memory import Memory
from memgas.service.keys import ANONYMOUS, KnownKeyIds, Principal, refusal, verify_key
from memgas.service.metrics import Metrics
from memgas.service.ratelimit import RateLimiter, SharedRateLimiter
from memgas.service.schemas import ID_PATTERN
from memgas.service.scoped import ScopedMemory
from memgas.store import KeyStore, RateLimitStore, part

__all__ = [
    "principal", "scoped", "UserQuery", "UserPath", "SessionPath", "bearer_scheme", "api_key_header",
    "ServiceState", "DEFAULT_MAX_BODY", "AUTH_FAILURES_PER_S", "AUTH_FAILURES_BURST",
]

#: ``?user_id=`` (ids may hold ``/``, so they travel in the query or as the last path segment).
UserQuery = Annotated[str, Query(min_length=1, max_length=256, pattern=ID_PATTERN, description="whose memory")]
UserPath = Annotated[str, Path(min_length=1, max_length=256, pattern=ID_PATTERN, description="whose memory")]
SessionPath = Annotated[str, Path(min_length=1, max_length=256, pattern=ID_PATTERN, description="the session id")]

bearer_scheme = HTTPBearer(auto_error=False, description="an API key made by `memgas keys create`")
api_key_header = APIKeyHeader(name="X-API-Key", auto_error=False, description="the same key, for clients without bearer auth")


def principal(request: Request, bearer: HTTPAuthorizationCredentials | None = Depends(bearer_scheme),
              header: str | None = Depends(api_key_header)) -> Principal:
    """The caller's :class:`Principal` from ``Authorization: Bearer`` or ``X-API-Key``; rate-limited per key.

    Raises:
        AuthError: no key, a wrong or revoked key (401).
        RateLimitedError: the key is over its rate, or the client address sent too many requests with no key or a
            key id the store does not hold (:data:`AUTH_FAILURES_PER_S`; 429 before any lookup). A key whose id the
            store holds is always looked up: a flood of bad keys from one address never refuses a valid key. On a
            store with shared buckets (PostgreSQL) the rate holds across every worker.
    """
    state = request.app.state.memgas
    if not state.auth:
        who = ANONYMOUS
    else:
        address = request.client.host if request.client is not None else "unknown"
        key = bearer.credentials if bearer is not None else header
        if not state.known_keys.holds(key):
            # No key, a malformed one or an id the store does not hold: refused without a lookup, and charged to
            # the address, which past its rate is told to wait. A valid key is never charged nor refused here.
            wait = state.failed_auth.acquire(address)
            if wait:
                raise RateLimitedError("too many requests with a missing or invalid API key from this address",
                                       retry_after=wait)
            raise refusal(key)
        try:
            who = verify_key(part(state.memory.store, KeyStore), key)
        except AuthError:
            state.failed_auth.acquire(address)
            raise
    request.state.principal = who
    if state.limiter is not None:
        wait = state.limiter.acquire(who.key_id)
        if wait:
            raise RateLimitedError(f"rate limit of {state.limiter.rate:g} requests/s for this key exceeded",
                                   retry_after=wait)
    return who


def scoped(request: Request, who: Principal = Depends(principal)) -> ScopedMemory:
    """The memory as the caller may see it."""
    return ScopedMemory(request.app.state.memgas.memory, who)


#: Largest accepted request body, in bytes (a batch of sessions is the largest body there is).
DEFAULT_MAX_BODY = 8 * 1024 * 1024
#: Requests without a valid key that one client address may send per second, on average, and in a burst.
AUTH_FAILURES_PER_S = 20.0
AUTH_FAILURES_BURST = 200.0


@dataclass
class ServiceState:
    """What the routes share: the memory, the auth switch, the rate limiter and the metrics."""

    memory: Memory
    auth: bool = True
    limiter: RateLimiter | SharedRateLimiter | None = None
    max_body: int = DEFAULT_MAX_BODY
    #: Bad attempts per client address: in the store where it keeps shared buckets (every worker of a PostgreSQL
    #: store then counts against one rate), else in this process.
    failed_auth: RateLimiter | SharedRateLimiter = field(init=False)
    metrics: Metrics = field(default_factory=Metrics)
    known_keys: KnownKeyIds = field(init=False)

    def __post_init__(self) -> None:
        self.known_keys = KnownKeyIds(part(self.memory.store, KeyStore))
        store = self.memory.store
        self.failed_auth = (SharedRateLimiter(store, AUTH_FAILURES_PER_S, AUTH_FAILURES_BURST, prefix="auth:")
                            if isinstance(store, RateLimitStore) else RateLimiter(AUTH_FAILURES_PER_S,
                                                                                   AUTH_FAILURES_BURST))
