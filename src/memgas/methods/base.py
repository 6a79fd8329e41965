"""What every memory method implements, and the shared per-user index cache.

A method turns sessions into stored units (``ingest``) and answers queries over them
(``search``). It talks to storage only through :class:`memgas.store.Store`; never SQL.
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Collection, Generic, Sequence, TypeVar

import numpy as np

from memgas.core.types import GRANULARITIES, Edge, Hit, Session, Unit
from memgas.embed.base import Embedder
from memgas.methods.units import Keyworder, Known, Summarizer, build_units, summary_turns
from memgas.store import Store, UnitTable

if TYPE_CHECKING:
    from memgas.methods.decompose import DecomposeStage
    from memgas.methods.rerank import RerankStage
from memgas.methods.index import IndexCache, UserIndex
from memgas.methods.ranking import Ranking, Scored, rank_units, session_hits, sessions_within

__all__ = ["MemoryMethod", "ConfiguredMethod", "IngestStats", "match_units"]


@dataclass(slots=True)
class IngestStats:
    """What one ``ingest`` did: units and edges written, and where the time went (seconds)."""

    session_id: str
    unit_ids: list[int]
    n_units: int
    n_edges: int
    seconds: dict[str, float] = field(default_factory=dict)
    association: dict[str, int] = field(default_factory=dict)


class MemoryMethod(ABC):
    """A memory method over the shared store.

    Subclasses set ``name`` and implement :meth:`search`; the default :meth:`ingest` writes the
    multi-granular units of the session with no association edges.
    """

    name: str = ""
    #: The method's per-user search indexes (set by subclasses that keep any).
    _indexes: IndexCache[Any] | None = None
    #: An optional reranking stage after :meth:`score`, for every method (off by default; see
    #: :mod:`memgas.methods.rerank`).
    reranker: RerankStage | None = None
    #: An optional query-decomposition stage: a question that needs several sessions is scored as its parts too,
    #: and the rankings fused, before any reranking (off by default; see :mod:`memgas.methods.decompose`).
    decomposer: DecomposeStage | None = None

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
        # The session this thread just appended to and the unit ids the append dropped, while it brings its index up
        # to it (see rewrite).
        self._appending = threading.local()

    def build(self, session: Session, known: Known | None = None, summary_reach: int | None = None) -> list[Unit]:
        """The session's multi-granular units, with vectors (see :func:`memgas.methods.units.build_units`); with
        ``known``, only those a change at the session's end makes again; the summary and keywords read the first
        ``summary_reach`` turns (``None``: all)."""
        return build_units(session, self.embedder, summarizer=self.summarizer, keyworder=self.keyworder, known=known,
                           summary_reach=summary_reach)

    def caches(self) -> list[IndexCache[Any]]:
        """The per-user index caches this method keeps (what :meth:`limit_caches` sizes)."""
        return [c for c in vars(self).values() if isinstance(c, IndexCache)]

    def limit_caches(self, max_bytes: int) -> None:
        """Size this method's index caches by memory: ``max_bytes`` in all, shared evenly between them."""
        caches = self.caches()
        for cache in caches:
            cache.limit(max_bytes // max(len(caches), 1))

    def flush(self, timeout: float | None = None) -> bool:
        """Wait for the index snapshots this method's caches are writing in the background; return whether all were
        written (or given up) within ``timeout`` seconds."""
        return all(cache.flush(timeout) for cache in self.caches())

    def cache_usage(self, store: Store) -> dict[str, int]:
        """``{"users", "bytes", "builds", "snapshot_loads"}``: what this method's caches hold for ``store`` (users:
        the most any one holds), and how many indexes they built whole and loaded from store snapshots so far."""
        caches = self.caches()
        held = [c.held(store) for c in caches]
        return {"users": max((u for u, _ in held), default=0), "bytes": sum(b for _, b in held),
                "builds": sum(c.builds for c in caches), "snapshot_loads": sum(c.loads for c in caches)}

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
            ids = store.add_session(session, units, [], embedder_id=self.embedder.id)
        if self._indexes is not None:
            self._indexes.refresh(store, session.user_id)
        t2 = time.perf_counter()
        return IngestStats(session.session_id, ids, len(units), 0, {"units": t1 - t0, "write": t2 - t1})

    def rewrite(self, store: Store, session: Session, *, keep_messages: int, append: bool = False) -> IngestStats:
        """Bring the stored session to ``session`` (whose first ``keep_messages`` messages are the stored ones):
        afterwards it holds exactly the units an add of the whole ``session`` would write, and the units
        that did not change keep their ids and edges; but for an ``append`` the summary and keyword units read the
        session's first :func:`memgas.methods.units.summary_turns` turns (at least four fifths of them) where a whole
        add reads every turn.

        Only what the change reaches is derived again (:meth:`known`): the turns from the one holding message
        ``keep_messages`` on, the session chunks from the one holding that turn on, and the summary and keyword
        units when the turns they read changed or the session passed a point of their schedule
        (:func:`memgas.methods.units.summary_turns`). The new units are matched with the stored ones of that part by
        granularity, turn range, chunk and text; the stored ones without a match are dropped, the new ones written
        with their edges (:meth:`new_edges`), all in one transaction, under the user's write lock. So an append to a
        long session reads, embeds and writes its end, not the whole session.

        ``append`` says that the stored messages are all kept (``keep_messages`` is their count): the method's index
        may then be brought up to date in place rather than built again (an edit's old text must leave it).
        """
        t0 = time.perf_counter()
        store.bind_embedder(self.embedder.id, self.embedder.dim)
        with store.writing(session.user_id):
            known, part, before = self.known(store, session, keep_messages, append=append)
            units = self.build(session, known, summary_turns(len(session.turns)) if append else None)
            t1 = time.perf_counter()
            kept, drop = match_units(part, units)
            new_rows = [i for i in range(len(units)) if i not in kept]
            position = {i: k for k, i in enumerate(new_rows)}
            # The stored chunks before the part derived again, for the edges of a new summary (it links every chunk).
            kept.update({len(units) + j: uid for j, (_, uid) in enumerate(before)})
            linked = units + [u for u, _ in before]

            def ref(i: int) -> int:
                return kept[i] if i in kept else -(position[i] + 1)

            edges = self.new_edges(store, session, linked, new_rows, ref)
            t2 = time.perf_counter()
            ids = store.rewrite_session(session, keep_messages=keep_messages, drop_units=drop,
                                        units=[units[i] for i in new_rows], edges=edges,
                                        embedder_id=self.embedder.id)
        if self._indexes is not None:
            self._appending.value = (session, drop) if append else None
            try:
                self._indexes.refresh(store, session.user_id)
            finally:
                self._appending.value = None
        t3 = time.perf_counter()
        return IngestStats(session.session_id, ids, len(new_rows), len(edges),
                           {"units": t1 - t0, "associate": t2 - t1, "write": t3 - t2})

    def known(self, store: Store, session: Session, keep_messages: int, *, append: bool = False
              ) -> tuple[Known | None, UnitTable, list[tuple[Unit, int]]]:
        """What :meth:`rewrite` derives again and what it reuses, read from the store: the :class:`Known` for
        :meth:`build` (``None``: the whole session is derived again), the stored units of the part derived again (all
        of them for ``None``), and, when the summary is written again, the stored chunks before that part as
        ``(unit, id)`` (its edges link them).

        The part starts at the stored chunk that holds the first changed turn (or that ends where it begins: a chunk
        at the session's end may take the next turn in), so its reads are the session's end and, when the summary is
        written again, the stored vectors of the unchanged turns (O(log n) times over a session's life). The first
        changed turn is the one holding message ``keep_messages`` or, unless ``append`` says that no stored message
        went, the one before it (a deleted reply was its last message).
        """
        uid, sid = session.user_id, session.session_id
        turns = session.turns
        changed = next((t.index for t in turns if t.msg_end > keep_messages - (not append)), len(turns))
        tail = store.session_units(uid, sid, texts=False, after=changed - 1) if changed > 0 else None
        if tail is None or not tail.mask("session").any():  # a change at the first turn: derive it whole
            return None, store.session_units(uid, sid), []
        chunks = np.flatnonzero(tail.mask("session")).tolist()
        first = min(chunks, key=lambda r: int(tail.chunk[r]))
        start, chunk = int(tail.turn_start[first]), int(tail.chunk[first])
        part = store.session_units(uid, sid, after=start)
        rows = {GRANULARITIES[int(g)]: np.flatnonzero(part.granularity == g) for g in np.unique(part.granularity)}
        vectors = {int(part.turn_start[r]): part.vectors[r] for r in rows.get("turn", ()) if part.turn_start[r] < changed}
        ends = [int(part.turn_end[r]) for g in ("summary", "keyword") for r in rows.get(g, ())]
        # kept while the turns they read did not change and they read as far as the schedule asks (an append) or the
        # whole session (an edit); a whole add read every turn, so an append keeps them until the next point
        reach = summary_turns(len(turns)) if append else len(turns)
        if len(ends) == 2 and ends[0] == ends[1] and reach <= ends[0] <= changed:
            s, k = (int(rows[g][0]) for g in ("summary", "keyword"))
            summary = (Unit(sid, "summary", part.texts[s], 0, ends[0], vector=part.vectors[s]),
                       Unit(sid, "keyword", part.texts[k], 0, ends[0], vector=part.vectors[k]))
            return Known(start, chunk, vectors, summary), part, []
        whole = store.session_units(uid, sid, texts=False)
        before = []
        for r in range(len(whole)):
            g, a, b = GRANULARITIES[int(whole.granularity[r])], int(whole.turn_start[r]), int(whole.turn_end[r])
            if g == "turn" and a < changed:
                vectors.setdefault(a, whole.vectors[r])
            elif g == "session" and b <= start:
                before.append((Unit(sid, "session", "", a, b, chunk=int(whole.chunk[r]), vector=whole.vectors[r]),
                               int(whole.ids[r])))
        return Known(start, chunk, vectors), part, before

    def degraded(self, store: Store, user_id: str) -> str | None:
        """Why this method's answers for ``user_id`` are incomplete now (e.g. its LLM could not be reached), or
        ``None``. The facade then warns and adds its registry fallback's hits (:class:`MethodSpec`)."""
        return None

    def new_edges(self, store: Store, session: Session, units: list[Unit], new_rows: list[int],
                  ref: Callable[[int], int]) -> list[Edge]:
        """The edges a rewrite writes for the new units ``units[i]``, ``i`` in ``new_rows`` (``ref(i)`` is how an
        edge names unit ``i``: its stored id, or its reference in the write): none for a method without edges."""
        return []

    @abstractmethod
    def score(self, store: Store, user_id: str, query: str, *, query_time: datetime | None = None) -> Scored:
        """Score every unit of ``user_id`` for ``query``."""

    def score_within(self, store: Store, user_id: str, query: str, *, query_time: datetime | None = None,
                     within: Collection[str] | None = None) -> Scored:
        """Score the units of the sessions ``within`` (``None``: all), the others ``-inf``.

        Here the sessions ``within`` keep the scores an unfiltered :meth:`score` gives them, so a filtered
        search ranks them as the unfiltered one does, and returns ``k`` of them whenever ``k`` match. A method
        whose scores depend on what else is stored (MemGAS: standardised channels, PageRank) overrides this to
        score as if the store held only those sessions.
        """
        scored = self.score(store, user_id, query, query_time=query_time)
        if within is None or len(scored.scores) == 0:
            return scored
        keep = sessions_within(scored.index, within)[scored.index.session_of]
        return replace(scored, scores=np.where(keep, scored.scores, -np.inf))

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
        within: Collection[str] | None = None,
    ) -> list[Hit]:
        """The ``k`` most relevant sessions of ``user_id`` for ``query``, best first; with ``within``, of those
        sessions only, scored as :meth:`score_within` says.

        Each hit's ``relevance`` is the best cosine similarity between the query and any of the
        session's units, clipped to [0, 1] (:meth:`relevance`): it depends on the query and that
        session alone, unlike ``score``. Hits with ``relevance < min_score`` are dropped, so a query
        about nothing stored can return nothing.
        """
        s = self.scored(store, user_id, query, query_time=query_time, within=within)
        if len(s.scores) == 0:
            return []
        return session_hits(s.index, s.scores, k, method=self.name, weights=s.weights, seed=s.seed,
                            turns_per_hit=turns_per_hit, relevance=s.relevance, min_score=min_score, channels=s.channels)

    def scored(self, store: Store, user_id: str, query: str, *, query_time: datetime | None = None,
               within: Collection[str] | None = None) -> Scored:
        """Every unit of ``user_id`` scored for ``query`` as :meth:`search` ranks them (:meth:`score_within`, then the
        optional stages), with each unit's :meth:`relevance` set (what :mod:`memgas.context` builds from)."""
        s = self._with_stages(lambda q: self.score_within(store, user_id, q, query_time=query_time, within=within), query)
        if len(s.scores) == 0 or s.relevance is not None:
            return s
        return replace(s, relevance=self.relevance(s.index, query))

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
        s = self._with_stages(lambda q: self.score(store, user_id, q, query_time=query_time), query)
        return rank_units(s.index, s.scores)

    def _with_stages(self, score: Callable[[str], Scored], query: str) -> Scored:
        """``score(query)`` after the optional stages: the query's parts fused in (:attr:`decomposer`), then the
        reranking (:attr:`reranker`)."""
        scored = score(query)
        if len(scored.scores) == 0:
            return scored
        if self.decomposer is not None:
            scored = self.decomposer.apply(scored, query, score)
        return scored if self.reranker is None else self.reranker.apply(scored, query)

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


C = TypeVar("C")


class ConfiguredMethod(MemoryMethod, Generic[C]):
    """A method whose parameters are one dataclass, ``config_class``, that validates itself in ``__post_init__``.

    Args:
        embedder: the embedder.
        config: the parameters (default: ``config_class()``); keyword overrides are applied on top.
        summarizer, keyworder: the summary and keyword writers of the units (see :class:`MemoryMethod`).
        **overrides: fields of ``config_class`` to change.

    Raises:
        InvalidInputError: a parameter out of range (raised by the config class).
        TypeError: an override that is not a field of the config.
    """

    config_class: ClassVar[type]

    def __init__(
        self,
        embedder: Embedder,
        config: C | None = None,
        *,
        summarizer: Summarizer | None = None,
        keyworder: Keyworder | None = None,
        **overrides: Any,
    ) -> None:
        super().__init__(embedder, summarizer=summarizer, keyworder=keyworder)
        chosen: Any = config or self.config_class()  # a dataclass (the class's config_class)
        self.cfg: C = replace(chosen, **overrides)  # replace() runs __post_init__ again

    def config(self) -> dict[str, Any]:
        cfg: Any = self.cfg
        return {**super().config(), **asdict(cfg)}


def match_units(stored: UnitTable, units: Sequence[Unit]) -> tuple[dict[int, int], list[int]]:
    """Which of a session's newly built ``units`` are already stored, unchanged.

    Returns:
        ``{position in units: stored id}`` for each unit whose granularity, turn range, chunk and text equal a
        stored unit's (its vector then is the same, made from the same text), and the stored ids matched by none.
    """
    by_key = {(int(stored.granularity[r]), int(stored.turn_start[r]), int(stored.turn_end[r]), int(stored.chunk[r]),
               stored.texts[r]): int(stored.ids[r]) for r in range(len(stored))}
    kept = {}
    for i, u in enumerate(units):
        found = by_key.pop((GRANULARITIES.index(u.granularity), u.turn_start, u.turn_end, u.chunk, u.text), None)
        if found is not None:
            kept[i] = found
    return kept, sorted(by_key.values())
