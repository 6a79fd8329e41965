"""Which of a user's sessions a call sees, and in what order: the session headers kept per user in step with the
store (what filters read, :mod:`memgas.core.filters`), the listing orders and their page cursors.

A cursor names a place in one order (the listed session's sort key, not its position), so paging stays exact
while sessions are added or deleted between pages: a page holds the sessions after the cursor's place as the
store is at that call, whatever happened to the session the cursor came from.
"""

from __future__ import annotations

import base64
import binascii
import json
from bisect import bisect_right
from datetime import datetime, timedelta
from typing import Literal, Sequence

from memgas.core.errors import InvalidInputError
from memgas.core.filters import Filter
from memgas.core.results import SessionHeader
from memgas.core.validate import check_count, check_id, naive_utc, session_expiry
from memgas.methods.index import IndexCache
from memgas.store import SessionInfo, Store

__all__ = ["SessionCatalog", "ORDERS", "Order", "ordered_page", "session_header"]

Order = Literal["oldest", "newest"]
#: Listing orders: ``oldest`` first (by when the session happened, undated sessions last, then when it was
#: stored, then by id), or ``newest`` first (dated sessions latest first, then the undated ones, the latest
#: stored first; ties by id).
ORDERS: tuple[str, ...] = ("oldest", "newest")
_EPOCH = datetime(1, 1, 1)
_MICROSECOND = timedelta(microseconds=1)


class _Headers:
    """One user's session headers by id, as of the user's store ``version``, and (once asked for) the expiries they
    carry, soonest first."""

    __slots__ = ("version", "by_id", "_expiries")

    def __init__(self, version: int, by_id: dict[str, SessionInfo]) -> None:
        self.version, self.by_id = version, by_id
        self._expiries: list[tuple[datetime, str]] | None = None

    def expiries(self) -> list[tuple[datetime, str]]:
        """``(expiry, session id)`` of the sessions whose metadata sets ``expires_at``, soonest first."""
        if self._expiries is None:
            self._expiries = sorted((when, h.session_id) for h in self.by_id.values()
                                    if "expires_at" in h.metadata and (when := session_expiry(h.metadata)) is not None)
        return self._expiries


def _read_headers(store: Store, user_id: str) -> _Headers:
    return _Headers(store.version(user_id), {h.session_id: h for h in store.list_sessions(user_id)})


def _update_headers(store: Store, user_id: str, old: _Headers) -> _Headers | None:
    """``old`` brought up to date by reading only the sessions written since its version; ``None`` (rebuild)
    when sessions were deleted meanwhile."""
    changed, count = store.sessions_since(user_id, old.version)
    by_id = {**old.by_id, **{h.session_id: h for h in changed}}
    return _Headers(store.version(user_id), by_id) if len(by_id) == count else None


class SessionCatalog:
    """Each user's session headers, kept for the users used most recently (``max_users``) in step with the store:
    after a write only the sessions it wrote are read again (:meth:`Store.sessions_since`; a delete rereads all),
    so that a filtered call costs a pass over headers in memory."""

    def __init__(self, max_users: int = 64) -> None:
        self._cache: IndexCache[_Headers] = IndexCache(_read_headers, max_users=max_users, update=_update_headers)

    def expired(self, store: Store, user_id: str, now: datetime) -> list[str]:
        """The user's sessions whose own expiry (metadata ``expires_at``) is ``now`` (naive UTC) or earlier; a pass over
        the sessions that carry one, kept per store version."""
        expiries = self._cache.get(store, user_id).expiries()
        return [sid for _, sid in expiries[:bisect_right(expiries, (now, "\U0010ffff"))]]

    def matching(self, store: Store, user_id: str, flt: Filter | None) -> list[SessionInfo]:
        """The user's headers that pass ``flt`` (all of them for ``None``), in no particular order."""
        headers = self._cache.get(store, user_id).by_id.values()
        return list(headers) if flt is None else [h for h in headers if flt.matches(h)]

    def past(self, store: Store, user_id: str, *, now: datetime, before: datetime | None = None) -> set[str]:
        """The one retention check every read and :meth:`Memory.expire <memgas.memory.Memory.expire>` go through:
        the user's sessions past their own expiry at ``now`` (metadata ``expires_at``), and, with ``before``, those
        older than it (by their time, or by when they were stored if they have none). Times are aware or naive UTC.
        """
        gone = set(self.expired(store, user_id, naive_utc(now)))
        if before is not None:
            limit = naive_utc(before)
            gone.update(h.session_id for h in self._cache.get(store, user_id).by_id.values()
                        if naive_utc(h.timestamp if h.timestamp is not None else h.created_at) < limit)
        return gone


def _micros(t: datetime) -> int:
    """A time as whole microseconds since year 1 (naive UTC): exact, and negatable for descending order."""
    return (naive_utc(t) - _EPOCH) // _MICROSECOND


def _key(info: SessionInfo, order: str) -> tuple[int, int, int, str]:
    sign = 1 if order == "oldest" else -1
    dated = info.timestamp is not None
    return (0 if dated else 1, sign * _micros(info.timestamp) if dated else 0,  # type: ignore[arg-type]
            sign * _micros(info.created_at), info.session_id)


def _encode(order: str, key: tuple[int, int, int, str]) -> str:
    raw = json.dumps([order, *key], separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def _decode(cursor: object, order: str) -> tuple[int, int, int, str]:
    """The sort key a cursor names in ``order``; a cursor that is not one of ours is an InvalidInputError."""
    if not isinstance(cursor, str) or not 0 < len(cursor) <= 2048:
        raise InvalidInputError("cursor must be a string that a listing returned")
    try:
        value = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode("utf-8"))
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise InvalidInputError("cursor is not one that a listing returned") from None
    ints = value[1:4] if isinstance(value, list) and len(value) == 5 else None
    if ints is None or not all(isinstance(v, int) and not isinstance(v, bool) for v in ints) \
            or not isinstance(value[4], str):
        raise InvalidInputError("cursor is not one that a listing returned")
    if value[0] != order:
        raise InvalidInputError(f"cursor belongs to order {value[0]!r}, not {order!r}: page with the order it "
                                "came from")
    check_id("session_id", value[4])
    return (ints[0], ints[1], ints[2], value[4])


def ordered_page(headers: Sequence[SessionInfo], *, order: str = "oldest", limit: int | None = None,
                 cursor: str | None = None) -> list[tuple[SessionInfo, str]]:
    """``headers`` in ``order``, those after ``cursor`` only, at most ``limit`` of them, each with its cursor.

    Raises:
        InvalidInputError: an unknown order, ``limit`` not an integer from 1 to 10,000, a bad cursor.
    """
    if order not in ORDERS:
        raise InvalidInputError(f"order must be one of {', '.join(ORDERS)}, got {order!r}")
    if limit is not None:
        check_count("limit", limit, 10_000)
    keyed = sorted(((_key(h, order), h) for h in headers), key=lambda pair: pair[0])
    start = 0 if cursor is None else bisect_right([k for k, _ in keyed], _decode(cursor, order))
    chosen = keyed[start:] if limit is None else keyed[start:start + limit]
    return [(h, _encode(order, k)) for k, h in chosen]


def session_header(info: SessionInfo, cursor: str | None = None) -> SessionHeader:
    """A session header as :meth:`Memory.list <memgas.memory.Memory.list>` returns it."""
    return SessionHeader(info.session_id, info.timestamp, info.n_messages, info.n_turns, info.created_at,
                         info.agent_id, info.run_id, dict(info.metadata), info.preview, cursor)
