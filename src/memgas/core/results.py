"""What the memory API's calls return: one typed result per kind of call, the same on every Python face.

:class:`~memgas.memory.Memory`, :class:`~memgas.async_memory.AsyncMemory`, the service's scoped memory and
both HTTP clients return these; the REST API sends their :meth:`to_dict` views, which :meth:`from_dict` reads
back. A search's hits (:class:`~memgas.core.types.Hit`) and a stored session (:class:`~memgas.core.types.Session`)
are the plain types of :mod:`memgas.core.types`.

>>> added = Added(session_id="s1", units=9, edges=4, seconds=0.02)
>>> added.to_dict()
{'session_id': 's1', 'units': 9, 'edges': 4, 'seconds': 0.02, 'skipped': False}
>>> Added.from_dict(added.to_dict()) == added
True
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar, Iterable, Mapping, TypeVar

__all__ = ["Added", "Appended", "Edited", "Deleted", "SessionHeader", "SessionPage", "UserSessions", "RESULTS"]

R = TypeVar("R", bound="_Result")


class _Result:
    """JSON views of a result dataclass: datetimes as ISO 8601 strings, both ways (see ``_TIMES``)."""

    #: The fields that hold a datetime (``None`` allowed).
    _TIMES: ClassVar[frozenset[str]] = frozenset()

    def to_dict(self) -> dict[str, Any]:
        """The result as the REST API sends it."""
        out = {}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            out[f.name] = value.isoformat() if isinstance(value, datetime) else value
        return out

    @classmethod
    def from_dict(cls: type[R], data: Mapping[str, Any]) -> R:
        """The result of a :meth:`to_dict` view; keys it does not know are ignored (a newer server may add some)."""
        names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        values = {k: (datetime.fromisoformat(v) if k in cls._TIMES and isinstance(v, str) else v)
                  for k, v in data.items() if k in names}
        return cls(**values)


@dataclass(frozen=True, slots=True)
class Added(_Result):
    """One stored session of an ``add`` (or of an ``add_many`` batch): the units and association edges written
    for it and the seconds it took; ``skipped`` when ``add_many(..., skip_existing=True)`` left it out because the
    user already had its id (nothing written)."""

    session_id: str
    units: int = 0
    edges: int = 0
    seconds: float = 0.0
    skipped: bool = False


@dataclass(frozen=True, slots=True)
class Appended(_Result):
    """An ``append``: whether it ``created`` the session, the session's message count now, the units and edges
    this call wrote, and ``context`` (the prompt-ready text for the last user message) when it was asked for."""

    session_id: str
    created: bool
    messages: int
    units: int
    edges: int
    seconds: float
    context: str | None = None


@dataclass(frozen=True, slots=True)
class Edited(_Result):
    """An ``update_message`` or ``delete_message``: the session's message count now, the units and edges made
    again; ``deleted_session`` when the last message left was deleted (and the session with it)."""

    session_id: str
    messages: int
    units: int = 0
    edges: int = 0
    seconds: float = 0.0
    deleted_session: bool = False


@dataclass(frozen=True, slots=True)
class Deleted(_Result):
    """A ``delete``: how many of the user's sessions it deleted."""

    user_id: str
    deleted_sessions: int


@dataclass(frozen=True, slots=True)
class SessionHeader(_Result):
    """A stored session as a listing shows it: its counts, scope, metadata, the start of its first user message
    (``preview``) and ``cursor``, the place after it for the next page (see ``list``)."""

    _TIMES: ClassVar[frozenset[str]] = frozenset({"timestamp", "created_at"})

    session_id: str
    timestamp: datetime | None
    messages: int
    turns: int
    created_at: datetime
    agent_id: str | None = None
    run_id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    preview: str = ""
    cursor: str | None = None


class SessionPage(list[SessionHeader]):
    """A page of session headers (a list), with ``next_cursor``: the cursor of the next page, ``None`` on the last.

    >>> page = SessionPage([], next_cursor=None)
    >>> page, page.next_cursor
    ([], None)
    """

    def __init__(self, headers: Iterable[SessionHeader] = (), *, next_cursor: str | None = None) -> None:
        super().__init__(headers)
        self.next_cursor = next_cursor

    def to_dict(self) -> dict[str, Any]:
        """The page as the REST API sends it: ``{"sessions": [...], "next_cursor"}``."""
        return {"sessions": [h.to_dict() for h in self], "next_cursor": self.next_cursor}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SessionPage:
        """The page of a :meth:`to_dict` view."""
        return cls((SessionHeader.from_dict(h) for h in data["sessions"]), next_cursor=data.get("next_cursor"))


@dataclass(frozen=True, slots=True)
class UserSessions(_Result):
    """A user the caller may see, with the number of sessions stored for them (``users``)."""

    user_id: str
    sessions: int


#: Every result type, by name (the API declaration's return types name them).
RESULTS: dict[str, type] = {t.__name__: t for t in (Added, Appended, Edited, Deleted, SessionHeader, SessionPage,
                                                     UserSessions)}
