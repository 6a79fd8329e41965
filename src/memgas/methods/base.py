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
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, Callable, Generic, TypeVar

import numpy as np

from ..embed import Embedder
from ..model import GRANULARITIES, Hit, Session, TurnHit, Unit
from ..store import Store, UnitTable
from ..units import Keyworder, Summarizer, build_units

if TYPE_CHECKING:
    from ..rerank import RerankStage

__all__ = ["MemoryMethod", "IngestStats", "IndexCache", "UserIndex", "Scored", "Ranking", "build_user_index",
           "extend_user_index", "update_user_index", "session_hits", "rank_units"]

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


class RowBuffer:
    """Float32 rows with spare capacity at the end, so that appending does not copy what is held.

    :meth:`extend` writes past the end of every view handed out so far, so a reader holding an older
    (shorter) view never sees a change. Thread-safe: extending from a length that is no longer the
    buffer's end (someone extended it already) copies instead of overwriting.
    """

    def __init__(self, rows: np.ndarray, capacity: int | None = None) -> None:
        n, dim = rows.shape
        self._data = np.empty((max(capacity or 0, n), dim), dtype=np.float32)
        self._data[:n] = rows
        self._n = n
        self._lock = threading.Lock()

    def view(self, n: int | None = None) -> np.ndarray:
        """The first ``n`` rows (default: all), read-only."""
        out = self._data[: self._n if n is None else n]
        out.flags.writeable = False
        return out

    def extend(self, n: int, more: np.ndarray) -> "RowBuffer":
        """A buffer holding the first ``n`` rows of this one, then ``more``: this one when its end is at
        ``n`` and ``more`` fits, else a new one with room to double."""
        with self._lock:
            m = more.shape[0]
            if n == self._n and n + m <= self._data.shape[0]:
                self._data[n:n + m] = more
                self._n = n + m
                return self
        return RowBuffer(np.concatenate([self._data[:n], more]), capacity=2 * (n + m))


@dataclass(slots=True)
class UserIndex:
    """A user's units with the lookups every method needs: unit row → session, rows per granularity.

    ``rows`` holds ``table.vectors`` with room to grow (see :func:`extend_user_index`).
    """

    table: UnitTable
    session_of: np.ndarray  # unit row → position in ``sessions``
    sessions: tuple[str, ...]
    timestamps: dict[str, datetime | None]
    masks: dict[str, np.ndarray]  # granularity → row indexes
    rows: RowBuffer | None = None


def _with_rows(table: UnitTable, rows: RowBuffer) -> UnitTable:
    """``table`` with its vectors read from ``rows`` (same values, a buffer that can grow)."""
    return UnitTable(table.ids, table.session_ids, table.granularity, table.turn_start, table.turn_end,
                     table.chunk, table.texts, rows.view(len(table)))


def build_user_index(store: Store, user_id: str) -> UserIndex:
    """Load a user's units from ``store`` and derive the row lookups (call inside ``store.reading()``)."""
    table = store.load_units(user_id)
    # The vectors are copied once into a growable buffer, so that extending the index later need not
    # copy them again, and a fresh build and an extended one hold their rows alike (same BLAS results).
    rows = RowBuffer(table.vectors, capacity=len(table) + len(table) // 4 + 16)
    table = _with_rows(table, rows)
    pos: dict[str, int] = {}
    session_of = np.fromiter((pos.setdefault(s, len(pos)) for s in table.session_ids), np.int64, len(table))
    timestamps = {i.session_id: i.timestamp for i in store.list_sessions(user_id)} if len(table) else {}
    masks = {g: np.flatnonzero(table.mask(g)) for g in GRANULARITIES}
    return UserIndex(table, session_of, tuple(pos), timestamps, masks, rows)


def extend_user_index(store: Store, user_id: str, index: UserIndex) -> tuple[UserIndex, dict[str, Session]] | None:
    """``index`` brought up to the store's state by reading only the units added since it was built.

    Returns the new index and the stored sessions that the added units belong to (read for their
    timestamps; callers reuse their turns), or ``None`` when some of the held units were deleted
    (then the caller rebuilds). Call inside ``store.reading()``. ``index`` itself is not changed.
    """
    old = index.table
    if len(old) == 0:
        return None
    kept, added = store.load_units_after(user_id, int(old.ids[-1]))
    if kept != len(old):
        return None
    if len(added) == 0:
        return index, {}
    n = len(old)
    rows = (index.rows or RowBuffer(old.vectors)).extend(n, added.vectors)
    # Extending the columns without their vectors: the buffer already holds every row, uncopied.
    none = old.vectors[:0]
    table = _with_rows(replace(old, vectors=none).extended(replace(added, vectors=none)), rows)
    new_sessions = dict.fromkeys(added.session_ids)
    sessions = {sid: store.get_session(user_id, sid) for sid in new_sessions}
    pos = {sid: i for i, sid in enumerate(index.sessions)}
    for sid in new_sessions:
        pos.setdefault(sid, len(pos))
    session_of = np.concatenate([index.session_of, np.fromiter(map(pos.__getitem__, added.session_ids), np.int64,
                                                               len(added))])
    timestamps = {**index.timestamps, **{sid: s.timestamp for sid, s in sessions.items()}}
    masks = {g: np.concatenate([index.masks[g], n + np.flatnonzero(added.mask(g))]) for g in GRANULARITIES}
    return UserIndex(table, session_of, tuple(pos), timestamps, masks, rows), sessions


def update_user_index(store: Store, user_id: str, index: UserIndex) -> UserIndex | None:
    """``index`` extended by what was added since (:func:`extend_user_index`); ``None`` after a delete."""
    extended = extend_user_index(store, user_id, index)
    return None if extended is None else extended[0]


@dataclass(slots=True)
class Scored:
    """A method's answer to one query: a score per unit row of ``index`` (``-inf`` = not scored).

    ``weights`` are the router's granularity weights (graph methods), ``seed`` the per-unit seed
    scores before propagation (to tell which hits came through association). ``relevance`` is each
    unit's calibrated relevance in [0, 1] when the method computed it on the way (its cosine with
    the query); otherwise :meth:`MemoryMethod.search` derives it (see :func:`session_hits`).
    """

    index: UserIndex
    scores: np.ndarray
    weights: dict[str, float] = field(default_factory=dict)
    seed: np.ndarray | None = None
    relevance: np.ndarray | None = None


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
    relevance: np.ndarray | None = None,
    min_score: float = 0.0,
) -> list[Hit]:
    """Map per-unit ``scores`` to the top ``k`` sessions (a session scores as its best unit).

    Each hit carries its best turns by the same scores. With ``seed`` (the per-unit seed scores of a
    graph method), a session that had no seed unit is marked as reached ``via_association``.
    ``relevance`` (per unit, in [0, 1]) gives each hit its :attr:`~memgas.model.Hit.relevance`: the
    best of its units', clipped to [0, 1]. Sessions whose relevance is below ``min_score`` are left
    out, and the ``k`` best of the others returned (the ranking itself is unchanged).
    """
    n = len(index.sessions)
    session_score = _session_scores(index, scores)
    session_seed = np.zeros(n)
    if seed is not None:
        np.maximum.at(session_seed, index.session_of, seed)
    session_relevance = np.zeros(n)
    if relevance is not None:
        np.maximum.at(session_relevance, index.session_of, np.nan_to_num(relevance, neginf=0.0))
        np.clip(session_relevance, 0.0, 1.0, out=session_relevance)
    order = np.argsort(-session_score, kind="stable")
    if min_score > 0:
        order = order[session_relevance[order] >= min_score]
    order = order[:k]
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
                relevance=float(session_relevance[s]),
            )
        )
    return hits


class IndexCache(Generic[T]):
    """Per-store, per-user search indexes, invalidated by the store's version counter.

    Rebuilding an index (vectors matrix, graph, BM25) costs far more than a query; a store's
    ``version(user_id)`` changes on every write, so a cached index is reused exactly while it is valid.
    Everything an index is built from is read inside one ``store.reading()`` block together with the
    version it is filed under, so an index never mixes two states of the store, whatever other threads
    and processes write meanwhile. The key is ``(version, store.generation)``: a write that rolled back
    may have shown uncommitted rows and its version number may be drawn again, so after a rollback an
    index is rebuilt, never updated from what it held.

    With ``update``, an index that went stale is brought up to date from its previous value (e.g. by
    reading only what was added) instead of being rebuilt; ``update`` must leave that value usable by
    readers still holding it, and returns ``None`` when it cannot (e.g. after a delete): then the
    index is built whole. One thread at a time builds or updates a given user's index (others
    wait for it rather than repeat the work). Stores are held weakly (a closed, dropped store takes
    its indexes with it); at most ``max_users`` users are kept per store, least recently used first out.
    """

    def __init__(self, build: Callable[[Store, str], T], max_users: int = 8,
                 update: Callable[[Store, str, T], T | None] | None = None) -> None:
        self._build = build
        self._update = update
        self._max = max_users
        self._stores: weakref.WeakKeyDictionary[Store, OrderedDict[str, tuple[tuple[int, int], T]]] = (
            weakref.WeakKeyDictionary())
        self._builders: weakref.WeakKeyDictionary[Store, dict[str, threading.Lock]] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()
        #: How many full builds and incremental updates this cache ran (for tests and benchmarks).
        self.builds = 0
        self.updates = 0

    def _cached(self, store: Store, user_id: str, key: tuple[int, int]) -> tuple[tuple[int, int], T] | None:
        with self._lock:
            items = self._stores.setdefault(store, OrderedDict())
            hit = items.get(user_id)
            if hit is not None and hit[0] == key:
                items.move_to_end(user_id)
            return hit

    def refresh(self, store: Store, user_id: str) -> None:
        """Bring the cached index of ``user_id`` up to date now (right after a write), so the next search
        finds it ready; nothing when none is cached or this cache cannot update (a rebuild waits for a
        search that needs it)."""
        if self._update is not None:
            with self._lock:
                cached = user_id in self._stores.get(store, {})
            if cached:
                self.get(store, user_id)

    def get(self, store: Store, user_id: str) -> T:
        """The index of ``user_id`` in ``store`` as of now, updated or rebuilt if the store changed."""
        # Store first, then this cache's locks, in every thread (a writer holding the store may call here).
        with store.reading():
            key = (store.version(user_id), store.generation)
            hit = self._cached(store, user_id, key)
            if hit is not None and hit[0] == key:
                return hit[1]
            with self._lock:
                builder = self._builders.setdefault(store, {}).setdefault(user_id, threading.Lock())
            with builder:
                hit = self._cached(store, user_id, key)  # another thread may have built it meanwhile
                if hit is not None and hit[0] == key:
                    return hit[1]
                updated = None
                if hit is not None and self._update is not None and hit[0][1] == key[1]:
                    updated = self._update(store, user_id, hit[1])
                if updated is not None:
                    index = updated
                    self.updates += 1
                else:
                    index = self._build(store, user_id)
                    self.builds += 1
                with self._lock:
                    items = self._stores.setdefault(store, OrderedDict())
                    items[user_id] = (key, index)
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
    #: An optional reranking stage after :meth:`score`, for every method (off by default; see :mod:`memgas.rerank`).
    reranker: RerankStage | None = None

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
        self._last_query = threading.local()

    def build(self, session: Session) -> list[Unit]:
        """The session's multi-granular units, with vectors (see :func:`memgas.units.build_units`)."""
        return build_units(session, self.embedder, summarizer=self.summarizer, keyworder=self.keyworder)

    def prepare(self, store: Store, user_id: str) -> None:
        """Build the user's search index now rather than on the first query."""
        if self._indexes is not None:
            self._indexes.get(store, user_id)

    def ingest(self, store: Store, session: Session) -> IngestStats:
        """Build the session's units (embedding, outside any lock) and write them under the user's write lock."""
        t0 = time.perf_counter()
        store.bind_embedder(self.embedder.id, self.embedder.dim)
        units = self.build(session)
        t1 = time.perf_counter()
        with store.writing(session.user_id):
            ids = store.add_session(session, units, [])
        if self._indexes is not None:
            self._indexes.refresh(store, session.user_id)
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
        min_score: float = 0.0,
    ) -> list[Hit]:
        """The ``k`` most relevant sessions of ``user_id`` for ``query``, best first.

        Each hit's ``relevance`` is the best cosine similarity between the query and any of the
        session's units, clipped to [0, 1] (:meth:`relevance`): it depends on the query and that
        session alone, unlike ``score``. Hits with ``relevance < min_score`` are dropped, so a query
        about nothing stored can return nothing.
        """
        s = self._reranked(self.score(store, user_id, query, query_time=query_time), query)
        if len(s.scores) == 0:
            return []
        relevance = s.relevance if s.relevance is not None else self.relevance(s.index, query)
        return session_hits(s.index, s.scores, k, method=self.name, weights=s.weights, seed=s.seed,
                            turns_per_hit=turns_per_hit, relevance=relevance, min_score=min_score)

    def relevance(self, index: UserIndex, query: str) -> np.ndarray:
        """Each unit's calibrated relevance to ``query``: its cosine similarity with the query vector
        (units are L2-normalised, so this is the embedder's own scale, the same whatever else is stored).

        An index without unit vectors (lexical baselines) scores 0; such methods override this.
        """
        vectors = index.table.vectors
        if vectors.shape[1] != self.embedder.dim:
            return np.zeros(len(index.table))
        return vectors @ self.embed_query(query)

    def rank(self, store: Store, user_id: str, query: str, *, query_time: datetime | None = None) -> Ranking:
        """All sessions and turns of ``user_id`` ranked for ``query`` (what the benchmarks score)."""
        s = self._reranked(self.score(store, user_id, query, query_time=query_time), query)
        return rank_units(s.index, s.scores)

    def _reranked(self, scored: Scored, query: str) -> Scored:
        """``scored`` after the reranking stage, when one is set."""
        return scored if self.reranker is None or len(scored.scores) == 0 else self.reranker.apply(scored, query)

    def config(self) -> dict[str, Any]:
        """The method's parameters, for reports and reproducibility."""
        return {"name": self.name, "embedder": self.embedder.id}

    def embed_query(self, query: str) -> np.ndarray:
        """The query's unit vector. The last query of each thread is remembered in memory (only), so
        that :meth:`search` can compute relevance after :meth:`score` without embedding it twice."""
        last = getattr(self._last_query, "value", None)
        if last is not None and last[0] == query:
            return last[1]
        vector = self.embedder.embed([query])[0]
        self._last_query.value = (query, vector)
        return vector
