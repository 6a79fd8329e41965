"""The storage interface every backend implements (SQLite now, PostgreSQL later).

A store holds users, sessions (with their messages), memory units with float32 vectors, and
association edges, all scoped by user. It knows nothing about memory methods: methods read
:class:`UnitTable` snapshots and hand back units and edges to write.
"""

from __future__ import annotations

import operator
import weakref
from abc import ABC, abstractmethod
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Iterator, Sequence, overload

import numpy as np

from memgas.core.errors import InvalidInputError
from memgas.core.types import GRANULARITIES, Edge, Session, Unit

__all__ = ["Store", "UnitTable", "EdgeTable", "SessionInfo", "PREVIEW_CHARS", "StoredTexts", "texts_of"]

#: Characters of a session's first user message that its header keeps as a preview.
PREVIEW_CHARS = 200


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """A stored session's header: what a filter reads (:mod:`memgas.core.filters`) and a listing shows.

    ``preview`` is the start of the session's first user message (its first message when none is the user's),
    at most :data:`PREVIEW_CHARS` characters, where the read asked for it (else empty).
    """

    session_id: str
    timestamp: datetime | None
    n_messages: int
    n_turns: int
    created_at: datetime
    agent_id: str | None = None
    run_id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    preview: str = ""


class StoredTexts(Sequence[str]):
    """The texts of a user's units, left in the store and read when asked for (:meth:`read` reads many in one query).

    An index scores units by their vectors and BM25 statistics; it shows the texts of a few turns per search (its
    hits'). Holding every text in memory would be about half of what a cached user costs (long turns, and session
    chunks that repeat them), so an index may keep only the unit ids and read the texts of its hits from the store.
    A unit's text never changes (an edit writes a new unit); a unit deleted since the index was read reads as
    ``""``. The store is held weakly: an index does not keep a closed, dropped store alive.
    """

    __slots__ = ("_store", "_user_id", "_ids")

    def __init__(self, store: "Store", user_id: str, ids: np.ndarray) -> None:
        self._store = weakref.ref(store)
        self._user_id = user_id
        self._ids = np.asarray(ids, dtype=np.int64)

    def read(self, rows: Sequence[int] | np.ndarray) -> list[str]:
        """The texts of ``rows`` (positions), in one read of the store."""
        ids = [int(self._ids[r]) for r in rows]
        store = self._store()
        found = store.unit_texts(self._user_id, ids) if ids and store is not None else {}
        return [found.get(i, "") for i in ids]

    def __len__(self) -> int:
        return int(self._ids.size)

    @overload
    def __getitem__(self, i: int) -> str: ...

    @overload
    def __getitem__(self, i: slice) -> tuple[str, ...]: ...

    def __getitem__(self, i: int | slice) -> "str | tuple[str, ...]":
        if isinstance(i, slice):
            return tuple(self.read(range(*i.indices(len(self)))))
        if not -len(self) <= i < len(self):
            raise IndexError("text index out of range")
        return self.read([int(i) % len(self)])[0]

    def __iter__(self) -> Iterator[str]:
        return iter(self.read(range(len(self))))

    def select(self, rows: np.ndarray) -> "StoredTexts":
        """The texts of ``rows`` (positions), still in the store."""
        store = self._store()
        if store is None:
            raise InvalidInputError("the store of these texts is gone")
        return StoredTexts(store, self._user_id, self._ids[rows])

    def extended(self, ids: np.ndarray) -> "StoredTexts":
        """These texts followed by those of the units ``ids`` (written to the store)."""
        store = self._store()
        if store is None:
            raise InvalidInputError("the store of these texts is gone")
        return StoredTexts(store, self._user_id, np.concatenate([self._ids, np.asarray(ids, dtype=np.int64)]))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str) or len(other) != len(self):
            return False
        return list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]  # compared by content, like a list

    def __repr__(self) -> str:
        return f"StoredTexts(user {self._user_id!r}, {len(self)} units)"


def texts_of(texts: Sequence[str], rows: Sequence[int] | np.ndarray) -> list[str]:
    """The texts at ``rows`` of a table's ``texts``, in one store read when they are :class:`StoredTexts`."""
    return texts.read(rows) if isinstance(texts, StoredTexts) else [texts[int(r)] for r in rows]



def _picked(items: Sequence[str], rows: np.ndarray) -> tuple[str, ...]:
    """``items`` at ``rows``, as a tuple (one C call: a table's columns are a user's units, thousands of rows)."""
    if rows.size == 0:
        return ()
    if rows.size == 1:
        return (items[int(rows[0])],)
    return operator.itemgetter(*rows.tolist())(items)  # type: ignore[no-any-return]

@dataclass(frozen=True, slots=True)
class UnitTable:
    """Every unit of one user, column-wise, in a stable order (ascending ``ids``).

    ``granularity`` holds indexes into :data:`memgas.core.types.GRANULARITIES`; ``vectors`` is an
    ``(n, dim)`` float32 matrix of L2-normalised rows.
    """

    ids: np.ndarray  # int64, (n,)
    session_ids: tuple[str, ...]
    granularity: np.ndarray  # int8, (n,)
    turn_start: np.ndarray  # int32, (n,)
    turn_end: np.ndarray  # int32, (n,)
    chunk: np.ndarray  # int32, (n,)
    texts: Sequence[str]  # a tuple, or StoredTexts (read from the store when asked: load_units(texts=False))
    vectors: np.ndarray  # float32, (n, dim)

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    def mask(self, granularity: str) -> np.ndarray:
        """Boolean mask of the rows of one granularity."""
        return self.granularity == GRANULARITIES.index(granularity)  # type: ignore[arg-type]

    def select(self, rows: np.ndarray) -> "UnitTable":
        """The table of the given rows (indexes or a boolean mask), in their order."""
        idx = np.flatnonzero(rows) if np.asarray(rows).dtype == bool else np.asarray(rows, dtype=np.int64)
        texts = self.texts.select(idx) if isinstance(self.texts, StoredTexts) else _picked(self.texts, idx)
        return UnitTable(self.ids[idx], _picked(self.session_ids, idx), self.granularity[idx],
                         self.turn_start[idx], self.turn_end[idx], self.chunk[idx], texts, self.vectors[idx])

    def extended(self, more: "UnitTable") -> "UnitTable":
        """This table followed by ``more`` (whose ids must all be larger)."""
        if len(more) == 0:
            return self
        if len(self) and more.ids[0] <= self.ids[-1]:
            raise InvalidInputError("a table can only be extended by units with larger ids")
        # Texts left in the store stay there (the new units are written, their texts read when asked for).
        texts = (self.texts.extended(more.ids) if isinstance(self.texts, StoredTexts)
                 else tuple(self.texts) + tuple(more.texts))
        return UnitTable(np.concatenate([self.ids, more.ids]), self.session_ids + more.session_ids,
                         np.concatenate([self.granularity, more.granularity]),
                         np.concatenate([self.turn_start, more.turn_start]),
                         np.concatenate([self.turn_end, more.turn_end]), np.concatenate([self.chunk, more.chunk]),
                         texts, np.concatenate([self.vectors, more.vectors]))

    @classmethod
    def empty(cls, dim: int) -> "UnitTable":
        """A table with no rows."""
        z = np.zeros(0, dtype=np.int64)
        return cls(z, (), z.astype(np.int8), z.astype(np.int32), z.astype(np.int32), z.astype(np.int32), (),
                   np.zeros((0, dim), dtype=np.float32))


@dataclass(frozen=True, slots=True)
class EdgeTable:
    """Every association edge of one user, as parallel arrays of unit ids and weights."""

    src: np.ndarray  # int64
    dst: np.ndarray  # int64
    weight: np.ndarray  # float32

    def __len__(self) -> int:
        return int(self.src.shape[0])


class Store(ABC):
    """Abstract memory store. All methods are scoped by ``user_id``; all writes are transactional.

    Edge endpoints given to :meth:`add_session` are unit ids already stored, or negative numbers
    ``-(i + 1)`` that refer to the ``i``-th unit of the same call (whose ids do not exist yet).
    """

    # -- writes ------------------------------------------------------------------------------
    @abstractmethod
    def bind_embedder(self, embedder_id: str, dim: int) -> None:
        """Record the embedder of this store on first use; afterwards refuse any other.

        Raises:
            EmbedderMismatchError: the store already holds vectors of another embedder or dimension.
        """

    @abstractmethod
    def add_session(self, session: Session, units: Sequence[Unit], edges: Sequence[Edge], *,
                    embedder_id: str | None = None) -> list[int]:
        """Write a session, its units (with vectors) and edges in one transaction; return the new unit ids.

        ``embedder_id`` names the embedder of the vectors: when given, the write is refused unless the store is
        bound to it at the moment it commits (a re-embedding may have switched it since the vectors were made).

        Every edge has at least one endpoint among this call's units (a negative reference): an edge
        is written with the newer of its units, so :meth:`load_edges_after` reads edges exactly.

        Raises:
            EmbedderMismatchError: ``embedder_id`` is not the store's embedder (nothing is written).
            DuplicateSessionError: the user already has a session with this id (nothing is written).
            InvalidInputError: an invalid unit or edge, e.g. one linking two stored units (nothing is written).
        """

    @abstractmethod
    def rewrite_session(self, session: Session, *, keep_messages: int, drop_units: Sequence[int],
                        units: Sequence[Unit], edges: Sequence[Edge], embedder_id: str | None = None) -> list[int]:
        """Bring a stored session to ``session`` in one transaction, keeping its first ``keep_messages`` messages
        and every unit not in ``drop_units`` (with their edges); write ``units`` and ``edges`` (and check
        ``embedder_id``) as :meth:`add_session` does; return the new unit ids."""

    @abstractmethod
    def session_units(self, user_id: str, session_id: str, *, texts: bool = True, after: int | None = None) -> UnitTable:
        """The units of one session, in id order (empty when there is no such session); with ``texts=False`` their
        texts are not read (:class:`StoredTexts`, as :meth:`load_units_after` gives them). With ``after``, only the
        units whose turn range ends past turn ``after`` (``turn_end > after``) and the summary and keyword units:
        what an append to the session's end may change, read without the rest of a long session."""

    @abstractmethod
    def unit_ids(self, user_id: str) -> np.ndarray:
        """The ids of the user's units, ascending."""

    @abstractmethod
    def delete_session(self, user_id: str, session_id: str) -> None:
        """Delete a session with its units and every edge touching them.

        A delete forgets: once the call (or the :meth:`writing` block around it) returns, the
        deleted text is overwritten wherever the backend controls its storage (freed pages, logs);
        each backend documents what it cannot reach.

        Raises:
            NotFoundError: no such session.
        """

    @abstractmethod
    def delete_user(self, user_id: str) -> int:
        """Delete all of a user's memory, their experience items (scope ``user:ID``) with it; return the
        number of sessions deleted. Forgets as :meth:`delete_session` does.

        Raises:
            NotFoundError: no such user (no session and no experience item).
        """

    # -- reads -------------------------------------------------------------------------------
    @abstractmethod
    def has_user(self, user_id: str) -> bool:
        """Whether the user has any stored session."""

    @abstractmethod
    def list_users(self) -> list[str]:
        """All user ids, sorted."""

    @abstractmethod
    def list_sessions(self, user_id: str, *, previews: bool = False) -> list[SessionInfo]:
        """The user's session headers, oldest first (by timestamp, then insertion); ``preview`` is filled only
        with ``previews``."""

    @abstractmethod
    def session_links(self, user_id: str, session_id: str | None = None) -> list[tuple[str, str, int, float, float]]:
        """The association between the user's sessions (of ``session_id`` only, when given): ``(session a,
        session b, edges, summed weight, largest weight)`` per linked pair."""

    @abstractmethod
    def sessions_since(self, user_id: str, version: int) -> tuple[list[SessionInfo], int]:
        """The headers of the user's sessions added or rewritten after the user's ``version`` (:meth:`version`),
        and the user's session count now."""

    @abstractmethod
    def session_infos(self, user_id: str, session_ids: Sequence[str], *,
                      previews: bool = False) -> dict[str, SessionInfo]:
        """The headers of the given sessions of the user (``preview`` filled only with ``previews``), by id (ids
        the user does not have are left out)."""

    @abstractmethod
    def get_session(self, user_id: str, session_id: str) -> Session:
        """One stored session with its messages.

        Raises:
            NotFoundError: no such session.
        """

    @abstractmethod
    def load_units(self, user_id: str, *, texts: bool = True) -> UnitTable:
        """All units of a user (an empty table for an unknown user); with ``texts=False`` their texts are left in the
        store (:class:`StoredTexts`, read when asked for)."""

    @abstractmethod
    def unit_texts(self, user_id: str, ids: Sequence[int]) -> dict[int, str]:
        """The texts of the user's units ``ids`` that exist, by id."""

    def load_units_after(self, user_id: str, after_id: int, *, texts: bool = True) -> tuple[int, UnitTable]:
        """One consistent read for refreshing a copy of the unit table that ends at ``after_id``.

        Returns how many of the user's units have ids ``<= after_id`` (fewer than the copy holds means
        some were deleted), and the table of the units with larger ids (added since). Committed unit
        ids are never reused (ids seen inside a write that rolled back may be: see :attr:`generation`).
        Backends override this with a query that reads only the new rows.
        """
        table = self.load_units(user_id, texts=texts)
        newer = table.ids > after_id
        return int((~newer).sum()), table.select(newer)

    @abstractmethod
    def load_edges(self, user_id: str) -> EdgeTable:
        """All association edges among a user's units."""

    def load_edges_after(self, user_id: str, after_id: int) -> EdgeTable:
        """The user's edges that touch a unit with id ``> after_id`` (each stored once with ``src < dst``,
        so these are the edges with ``dst > after_id``). Every edge is written together with at least one
        of its endpoints, so a copy of the edges up to ``after_id`` plus these is the whole edge table.
        Backends override this with a query that reads only those rows."""
        edges = self.load_edges(user_id)
        keep = edges.dst > after_id
        return EdgeTable(edges.src[keep], edges.dst[keep], edges.weight[keep])

    # -- consistency ---------------------------------------------------------------------------
    def reading(self, user_id: str | None = None) -> AbstractContextManager[None]:
        """A context in which every read of this thread sees one snapshot of the store.

        ``user_id`` says whose data the block reads: a PostgreSQL store with replicas (``read_url``) may then serve
        it from a replica that already shows every write of that user this store made (else from the primary).

        Reads made inside (``version``, ``load_units``, ``list_sessions``, ``get_session`` ...) run in one
        read transaction, so an index built from several reads never mixes two states of the store.
        Reentrant; inside :meth:`writing` it joins the write transaction (and sees its uncommitted
        writes). A write started inside ``reading()`` but outside ``writing()`` is refused with
        :class:`~memgas.core.errors.MemgasError`: it could not be seen by the snapshot it runs in. A
        PostgreSQL backend maps this to a ``REPEATABLE READ`` transaction.
        """
        return nullcontext()

    def writing(self, user_id: str) -> AbstractContextManager[None]:
        """A context holding the exclusive write lock of ``user_id``: reads and writes made inside by this
        thread are one transaction, committed on exit and rolled back on an exception.

        A method reads the history it associates with and writes the new session under one lock, so a
        concurrent add or delete of the same user can neither be missed nor refuse the write.
        Reentrant, also for other users (a nested block joins the outer transaction); each call made
        inside (``add_session``, ``delete_session`` ...) stays atomic: if it fails, what it wrote is
        undone and the block may go on. Writes of other users may proceed in parallel where the backend
        allows it (SQLite has one writer per file; PostgreSQL takes ``pg_advisory_xact_lock`` on the user).
        """
        return nullcontext()

    @property
    def generation(self) -> int:
        """A counter of this store object's rolled-back writes, for caches (0 where nothing rolls back).

        A backend increments it whenever a write transaction, or a part of one, is rolled back. What
        was read inside a write transaction (its uncommitted state) is then gone, and the counters it
        drew (unit ids, :meth:`version` numbers) may be handed out again for other content, so a cache
        must key what it reads on ``(version(user_id), generation)``, not on the version alone.
        """
        return 0

    @abstractmethod
    def version(self, user_id: str) -> int:
        """A counter that changes whenever the user's units or edges change (for caches)."""

    @abstractmethod
    def stats(self, user_id: str | None = None) -> dict[str, Any]:
        """Counts of users, sessions, turns, units per granularity and edges (for one user or all)."""

    @abstractmethod
    def close(self) -> None:
        """Release the connection. The store is unusable afterwards."""

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
