"""What every memory method implements, and the shared per-user index cache.

A method turns sessions into stored units (``ingest``) and answers queries over them
(``search``). It talks to storage only through :class:`memgas.store.Store`; never SQL.
"""

from __future__ import annotations

import threading
import weakref
import time
from abc import ABC, abstractmethod
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, Generic, TypeVar

import numpy as np

from ..embed import Embedder
from ..model import GRANULARITIES, Hit, Session, TurnHit, Unit
from ..store import Store, UnitTable
from ..units import Keyworder, Summarizer, build_units

__all__ = ["MemoryMethod", "IngestStats", "IndexCache", "UserIndex", "Scored", "Ranking", "build_user_index",
           "session_hits", "rank_units"]

T = TypeVar("T")


@dataclass(slots=True)
class IngestStats:
    """What one ``ingest`` did: units and edges written, and where the time went (seconds)."""

    session_id: str
    unit_ids: list[int]
    n_units: int
    n_edges: int
    seconds: dict[str, float] = field(default_factory=dict)
    association: dict[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class UserIndex:
    """A user's units with the lookups every method needs: unit row → session, rows per granularity."""

    table: UnitTable
    session_of: np.ndarray  # unit row → position in ``sessions``
    sessions: tuple[str, ...]
    timestamps: dict[str, datetime | None]
    masks: dict[str, np.ndarray]  # granularity → row indexes


def build_user_index(store: Store, user_id: str) -> UserIndex:
    """Load a user's units from ``store`` and derive the row lookups."""
    table = store.load_units(user_id)
    pos: dict[str, int] = {}
    session_of = np.fromiter((pos.setdefault(s, len(pos)) for s in table.session_ids), np.int64, len(table))
    timestamps = {i.session_id: i.timestamp for i in store.list_sessions(user_id)} if len(table) else {}
    masks = {g: np.flatnonzero(table.mask(g)) for g in GRANULARITIES}
    return UserIndex(table, session_of, tuple(pos), timestamps, masks)


@dataclass(slots=True)
class Scored:
    """A method's answer to one query: a score per unit row of ``index`` (``-inf`` = not scored).

    ``weights`` are the router's granularity weights (graph methods), ``seed`` the per-unit seed
    scores before propagation (to tell which hits came through association).
    """

    index: UserIndex
    scores: np.ndarray
    weights: dict[str, float] = field(default_factory=dict)
    seed: np.ndarray | None = None


@dataclass(frozen=True, slots=True)
class Ranking:
    """Every session and every turn of a user, ranked for one query (for benchmarks)."""

    sessions: list[str]
    turns: list[tuple[str, int]]  # (session id, turn index)


def _session_scores(index: UserIndex, scores: np.ndarray) -> np.ndarray:
    out = np.full(len(index.sessions), -np.inf)
    np.maximum.at(out, index.session_of, scores)
    return out


def rank_units(index: UserIndex, scores: np.ndarray) -> Ranking:
    """Rank all sessions (by their best unit) and all turns (by their own score, then their session's).

    Turns a method did not score (``-inf``) follow in the order of their sessions, so a session-level
    method still yields a complete turn ranking.
    """
    session_score = _session_scores(index, scores)
    order = np.argsort(-session_score, kind="stable")
    rows = index.masks["turn"]
    turn_score = scores[rows]
    turn_order = rows[np.lexsort((index.table.turn_start[rows], -session_score[index.session_of[rows]], -turn_score))]
    return Ranking(
        sessions=[index.sessions[s] for s in order],
        turns=[(index.table.session_ids[r], int(index.table.turn_start[r])) for r in turn_order],
    )


def session_hits(
    index: UserIndex,
    scores: np.ndarray,
    k: int,
    *,
    method: str,
    weights: dict[str, float] | None = None,
    seed: np.ndarray | None = None,
    turns_per_hit: int = 3,
) -> list[Hit]:
    """Map per-unit ``scores`` to the top ``k`` sessions (a session scores as its best unit).

    Each hit carries its best turns by the same scores. With ``seed`` (the per-unit seed scores of a
    graph method), a session that had no seed unit is marked as reached ``via_association``.
    """
    n = len(index.sessions)
    session_score = _session_scores(index, scores)
    session_seed = np.zeros(n)
    if seed is not None:
        np.maximum.at(session_seed, index.session_of, seed)
    order = np.argsort(-session_score, kind="stable")[:k]
    turn_rows = index.masks["turn"]
    hits = []
    for s in order:
        if not np.isfinite(session_score[s]) or session_score[s] <= 0:
            break
        rows = turn_rows[index.session_of[turn_rows] == s]
        best = rows[np.argsort(-scores[rows], kind="stable")[:turns_per_hit]]
        sid = index.sessions[s]
        hits.append(
            Hit(
                session_id=sid,
                score=float(session_score[s]),
                timestamp=index.timestamps.get(sid),
                turns=[TurnHit(int(index.table.turn_start[r]), index.table.texts[r], float(scores[r])) for r in best],
                weights=dict(weights or {}),
                via_association=seed is not None and bool(session_seed[s] == 0),
                seed_score=float(session_seed[s]),
                method=method,
            )
        )
    return hits


class IndexCache(Generic[T]):
    """Per-store, per-user search indexes, invalidated by the store's version counter.

    Rebuilding an index (vectors matrix, graph, BM25) costs far more than a query; a store's
    ``version(user_id)`` changes on every write, so a cached index is reused exactly while it is valid.
    Stores are held weakly (a closed, dropped store takes its indexes with it); at most ``max_users``
    users are kept per store, least recently used first out. With ``update``, an index that went
    stale is brought up to date from its previous value (e.g. by reading only what was added)
    instead of being rebuilt.
    """

    def __init__(self, build: Callable[[Store, str], T], max_users: int = 8,
                 update: Callable[[Store, str, T], T] | None = None) -> None:
        self._build = build
        self._update = update
        self._max = max_users
        self._stores: weakref.WeakKeyDictionary[Store, OrderedDict[str, tuple[int, T]]] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def get(self, store: Store, user_id: str) -> T:
        """The index of ``user_id`` in ``store``, rebuilt if the store changed since it was built."""
        version = store.version(user_id)
        with self._lock:
            items = self._stores.setdefault(store, OrderedDict())
            hit = items.get(user_id)
            if hit is not None and hit[0] == version:
                items.move_to_end(user_id)
                return hit[1]
        if hit is not None and self._update is not None:
            index = self._update(store, user_id, hit[1])
        else:
            index = self._build(store, user_id)
        with self._lock:
            items[user_id] = (version, index)
            items.move_to_end(user_id)
            while len(items) > self._max:
                items.popitem(last=False)
        return index


class MemoryMethod(ABC):
    """A memory method over the shared store.

    Subclasses set ``name`` and implement :meth:`search`; the default :meth:`ingest` writes the
    multi-granular units of the session with no association edges.
    """

    name: str = ""
    #: The method's per-user search indexes (set by subclasses that keep any).
    _indexes: IndexCache[Any] | None = None

    def __init__(
        self,
        embedder: Embedder,
        *,
        summarizer: Summarizer | None = None,
        keyworder: Keyworder | None = None,
    ) -> None:
        self.embedder = embedder
        self.summarizer = summarizer
        self.keyworder = keyworder

    def build(self, session: Session) -> list[Unit]:
        """The session's multi-granular units, with vectors (see :func:`memgas.units.build_units`)."""
        return build_units(session, self.embedder, summarizer=self.summarizer, keyworder=self.keyworder)

    def prepare(self, store: Store, user_id: str) -> None:
        """Build the user's search index now rather than on the first query."""
        if self._indexes is not None:
            self._indexes.get(store, user_id)

    def ingest(self, store: Store, session: Session) -> IngestStats:
        """Build the session's units and write them (one transaction)."""
        t0 = time.perf_counter()
        store.bind_embedder(self.embedder.id, self.embedder.dim)
        units = self.build(session)
        t1 = time.perf_counter()
        ids = store.add_session(session, units, [])
        t2 = time.perf_counter()
        return IngestStats(session.session_id, ids, len(units), 0, {"units": t1 - t0, "write": t2 - t1})

    @abstractmethod
    def score(self, store: Store, user_id: str, query: str, *, query_time: datetime | None = None) -> Scored:
        """Score every unit of ``user_id`` for ``query``."""

    def search(
        self,
        store: Store,
        user_id: str,
        query: str,
        *,
        k: int = 5,
        query_time: datetime | None = None,
        turns_per_hit: int = 3,
    ) -> list[Hit]:
        """The ``k`` most relevant sessions of ``user_id`` for ``query``, best first."""
        s = self.score(store, user_id, query, query_time=query_time)
        if len(s.scores) == 0:
            return []
        return session_hits(s.index, s.scores, k, method=self.name, weights=s.weights, seed=s.seed,
                            turns_per_hit=turns_per_hit)

    def rank(self, store: Store, user_id: str, query: str, *, query_time: datetime | None = None) -> Ranking:
        """All sessions and turns of ``user_id`` ranked for ``query`` (what the benchmarks score)."""
        s = self.score(store, user_id, query, query_time=query_time)
        return rank_units(s.index, s.scores)

    def config(self) -> dict[str, Any]:
        """The method's parameters, for reports and reproducibility."""
        return {"name": self.name, "embedder": self.embedder.id}

    def embed_query(self, query: str) -> np.ndarray:
        """The query's unit vector."""
        return self.embedder.embed([query])[0]
