"""MemGAS: multi-granularity memory association and selection.

Ingest: a session becomes units at four granularities (:mod:`memgas.methods.units`). Each new unit is
compared with the user's stored units of the same granularity; the top ``candidates``
similarities are clustered by a two-component Gaussian mixture (:mod:`memgas.kernels.gmm`) and the
high component becomes weighted association edges. Units of one session are linked to each
other (session chunk ↔ its turns, summary and keywords ↔ chunks).

Search: five channels score the units — the four granularities (cosine similarity) and BM25 over
the turns (:mod:`memgas.kernels.lexical`; the words of the query no turn's view holds are looked up in the rest of
the replies, ``reply_tail_weight``). Each channel's scores are standardised (z-scores) and the
entropy router (:mod:`memgas.kernels.router`) weights each channel by the inverse entropy of
softmax(z / λ); a unit's seed is the weighted sum of its positive z-scores, times a time prior
when the query names a time window (:mod:`memgas.kernels.temporal`). The top ``seeds`` units seed
Personalized PageRank (:mod:`memgas.kernels.ppr`) over the association graph; node scores are mapped
back to sessions (a session scores as its best unit plus its evidence across channels) and turns
(a turn scores as its own seed plus its session's evidence, never above its session). PageRank chooses the best
few sessions (``direct_window``); what each scores without PageRank, its own evidence, orders them.

Reference: Xu et al., "Towards Multi-Granularity Memory Association and Selection for
Long-Term Conversational Agents" (MemGAS), 2025.
"""

from __future__ import annotations

import time
import zlib
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Callable, Collection, Optional

import numpy as np
import scipy.sparse as sp

from memgas.core.errors import InvalidInputError
from memgas.core.packing import narrowed, pack, unpack
from memgas.core.types import GRANULARITIES, Edge, Session, Unit
from memgas.kernels.gmm import accept_masks
from memgas.kernels.lexical import LexicalIndex
from memgas.kernels.ppr import personalized_pagerank
from memgas.kernels.quantize import from_half, to_half
from memgas.kernels.router import granularity_weights
from memgas.kernels.temporal import parse_time_window
from memgas.kernels.tense import asks_about_now
from memgas.kernels.turnscore import own_turn_scores
from memgas.methods.base import ConfiguredMethod, IngestStats
from memgas.methods.index import (
    IndexCache,
    UserIndex,
    appended_index,
    build_user_index,
    extend_user_index,
    user_index_arrays,
    user_index_from_arrays,
)
from memgas.methods.ranking import Scored, session_scores, sessions_within
from memgas.methods.units import embedding_view, turn_tail
from memgas.store import EdgeTable, Store, UnitTable

__all__ = ["MemGASConfig", "MemGAS", "session_edges", "association_edges"]


#: Turn documents for BM25: each turn's view, and its replies' tails past the view (``None``: tails not read).
_Documents = tuple[list[str], Optional[list[str]]]


@dataclass(frozen=True, slots=True)
class MemGASConfig:
    """Parameters of MemGAS. The defaults were chosen on the benchmarks (see BENCHMARKS.md).

    Attributes:
        candidates: stored units per new unit whose similarities the GMM sees (top-N pre-selection).
        temperature: router temperature λ in softmax(z / λ), z the standardised channel scores.
        seeds: number of top seed units kept in the personalization vector (α).
        damping: PageRank damping factor.
        tol, max_iter: PageRank convergence tolerance and iteration budget.
        use_association: add cross-session GMM edges (off = intra-session links only).
        use_router: entropy weights (off = uniform weights over granularities).
        use_ppr: propagate over the graph (off = rank by seed scores).
        use_lexical: BM25 over the turns as a fifth channel (off = the four dense granularities).
        assoc_min_weight: cross-session edges below this cosine are left out of the search graph.
        assoc_scale: factor on cross-session edge weights in the search graph (intra-session links
            keep theirs), i.e. how much PageRank mass may flow between sessions.
        time_weight: γ of the time prior: seeds in sessions inside the window a query names
            ("last weekend", "in April") are multiplied by 1 + γ (0 = off).
        session_weight: β of session evidence: every unit's score (PageRank, scaled to a maximum
            of 1) gains β times its session's evidence Σ_c w_c · max(0, best z_c in the session),
            scaled the same way (0 = off).
        bm25_k1, bm25_b: BM25's term-frequency saturation and length normalisation over the turns.
            Turns are short, and one mention of a rare word is the evidence a question looks for, so
            a term's weight saturates sooner (k1 0.9) and length matters less (b 0.4) than
            :class:`memgas.kernels.lexical.LexicalIndex`'s defaults (1.5, 0.75, those of bm25s); 0.9 / 0.4 are
            Anserini's defaults, and measured better on both datasets (BENCHMARKS.md).
        turn_seed: with session evidence, a turn scores by its own seed (scaled to a maximum of 1)
            plus β times its session's evidence, capped at its session's score, instead of by its
            PageRank score (which every turn of a strong session shares through the session's chunk);
            sessions rank as before (:func:`memgas.kernels.turnscore.own_turn_scores`). Off = every unit alike.
        current_first: for a question about how things stand now (:func:`memgas.kernels.tense.asks_about_now`),
            among the ``current_window`` best sessions, a newer session that states what a better-ranked older one
            states moves above it (the newer says how it is now). "States the same": it scores at least
            ``current_ratio`` of the older one, holds at least ``current_lexical`` of its BM25 evidence (the
            question's own words, so the same specifics), and their turns nearest the question have a cosine of at
            least ``current_similarity``. Sessions move, turns keep their own scores. Off by default: it wins on
            LongMemEval, not on LoCoMo (the benchmark log, "Newest first").
        current_window, current_ratio, current_lexical, current_similarity: see ``current_first``.
        direct_window: PageRank chooses the ``direct_window`` best sessions, and what each of them says itself
            orders them: its best seed plus its session evidence, what it scores without PageRank (``use_ppr`` off).
            PageRank carries evidence between associated sessions, which brings a multi-session question's other
            sessions into the best few, but it also lifts a session that many others point to above the one that
            answers in its own words; ordering the few by their direct evidence keeps the first and mends the
            second. 0 or 1 = off.
        lexical_reply_chars: how much of each reply BM25 reads (the vector reads 300 characters, the BM25 view the
            same by default): more makes facts said deep in long replies findable by their words (measured in
            the benchmark log, "Long replies").
        reply_tail_weight: words of the question that no turn's BM25 view holds are looked up in the rest of each
            turn (replies past ``lexical_reply_chars``, a user message past what the embedder reads; an index of
            its own), and that BM25 score, times this weight, is
            added to the turn's: a fact said deep in a long reply is found by the words only it holds, while a
            question whose words the views hold scores exactly as without it (0 = the tails are not read; measured
            in the benchmark log, "Long replies"). "No view holds" is over all the user's turns, in a filtered search
            too (the tails keep postings only for such words).
        snapshots: keep each user's index in the store as a snapshot (:meth:`memgas.store.Store.save_snapshot`),
            so that a user this process does not hold (evicted from the index cache, or never searched here) is
            loaded with one read instead of being rebuilt; results are the same bit for bit (off: always rebuild).
    """

    candidates: int = 50
    temperature: float = 2.0
    seeds: int = 30
    damping: float = 0.5
    tol: float = 1e-6
    max_iter: int = 100
    use_association: bool = True
    use_router: bool = True
    use_ppr: bool = True
    use_lexical: bool = True
    assoc_min_weight: float = 0.0
    assoc_scale: float = 1.0
    time_weight: float = 0.5
    session_weight: float = 1.0
    bm25_k1: float = 0.9
    bm25_b: float = 0.4
    turn_seed: bool = True
    current_first: bool = False
    current_window: int = 5
    current_ratio: float = 0.55
    current_lexical: float = 0.6
    current_similarity: float = 0.4
    snapshots: bool = True
    direct_window: int = 3
    lexical_reply_chars: int = 300
    reply_tail_weight: float = 1.0


@dataclass(slots=True)
class _Index:
    """A user's units, the association graph over them, and BM25 over the turn units.

    The graph is kept as its edge list (rows of ``units``, each undirected edge once, with its
    search weight), which an add extends in O(new edges); the symmetric sparse matrix PageRank reads
    is made on first use, by extending the previous snapshot's matrix when that one was made
    (``_parent``: its matrix and edge count), else from the edge list. ``lexical`` may hold more
    documents than this snapshot (a later snapshot appended to it): its first
    ``units.masks["turn"].size`` are this one's; so may ``tails``, which always grows with it.
    """

    units: UserIndex
    src: np.ndarray  # int64 unit rows
    dst: np.ndarray
    weight: np.ndarray  # float64, > 0
    lexical: LexicalIndex | None  # documents = the rows ``units.masks["turn"]``, in that order (see ``documents``)
    tails: LexicalIndex | None = None  # the same documents' reply tails (MemGASConfig.reply_tail_weight)
    _adjacency: sp.csr_matrix | None = None
    _parent: tuple[sp.csr_matrix, int] | None = None
    #: The BM25 document of each turn row, when some documents are retired (a turn an append continued: its new
    #: text is a new document, the old one stays, never scored, until a rebuild); ``None``: row i is document i.
    turn_documents: np.ndarray | None = None
    #: How many BM25 documents this index reads (its turns and the retired documents among them), with
    #: ``turn_documents``.
    n_documents: int = 0

    def documents(self) -> tuple[int, np.ndarray | None]:
        """How many of the BM25 indexes' documents are this index's, and the live ones (``None``: all of them, one
        per turn row in order)."""
        if self.turn_documents is None:
            return self.units.masks["turn"].size, None
        live = np.zeros(self.n_documents, bool)
        live[self.turn_documents] = True
        return self.n_documents, live

    def retired(self) -> int:
        """How many of this index's BM25 documents are retired."""
        return 0 if self.turn_documents is None else self.n_documents - self.turn_documents.size

    def adjacency(self) -> sp.csr_matrix:
        """The symmetric weighted adjacency matrix, in canonical CSR form (columns sorted in each row),
        so that an index extended edge by edge and one built at once multiply alike, bit for bit."""
        if self._adjacency is None:
            n = len(self.units.table)
            if self._parent is not None:
                a, m = self._parent
                self._adjacency = _extended_adjacency(a, self.src[m:], self.dst[m:], self.weight[m:], n)
            else:
                rows = np.concatenate([self.src, self.dst])
                cols = np.concatenate([self.dst, self.src])
                a = sp.csr_matrix((np.concatenate([self.weight, self.weight]), (rows, cols)), shape=(n, n))
                a.sum_duplicates()  # sorts each row's columns (there are no duplicates: each edge is stored once)
                self._adjacency = a
            self._parent = None  # let the previous matrix go
        return self._adjacency

    def turn_words(self, terms: Collection[str]) -> np.ndarray:
        """How many of ``terms`` (stems) each turn's whole text holds, a value per row of ``units.masks["turn"]``:
        its BM25 view and its replies' tail together hold every word of it (:meth:`MemGAS._turn_views`). Needs both
        indexes (``lexical`` and ``tails``)."""
        assert self.lexical is not None and self.tails is not None
        n, _ = self.documents()
        views, tails = self.lexical.holding(terms, n), self.tails.holding(terms, n)
        out = np.zeros(n, np.int64)
        for term in views.keys() | tails.keys():
            held = np.zeros(n, bool)
            for docs in (views.get(term), tails.get(term)):
                if docs is not None:
                    held[docs] = True
            out += held
        return out if self.turn_documents is None else out[self.turn_documents]


class _Snapshots:
    """A MemGAS index as a store snapshot (:class:`~memgas.methods.index.IndexCache`): the units (their vectors and
    texts stay in the store, read back by id), the search graph's edge list, and BM25's vocabulary and postings; the
    PageRank matrix is made again on first use, as after a build. The kind names the format and the settings the
    index is derived with (a change of either reads no old snapshot)."""

    #: Bumped whenever what the index holds, or how it is derived from the store, changes.
    FORMAT = 4
    #: The older formats' kinds, dropped when a snapshot of this one is kept.
    replaces = tuple(f"memgas/{n}/" for n in range(1, FORMAT))

    def __init__(self, cfg: MemGASConfig) -> None:
        self._cfg = cfg
        self.kind = (f"memgas/{self.FORMAT}/association={int(cfg.use_association)},min={cfg.assoc_min_weight!r},"
                     f"scale={cfg.assoc_scale!r},lexical={int(cfg.use_lexical)},reply={cfg.lexical_reply_chars}"
                     + (f",tail={cfg.reply_tail_weight!r}" if cfg.reply_tail_weight > 0 else ""))

    def rows(self, index: _Index) -> int:
        """How many units ``index`` holds."""
        return len(index.units.table)

    def encode(self, index: _Index) -> bytes:
        """``index`` as one packed byte string (:func:`memgas.core.packing.pack`), deflated: the vocabularies and the
        postings' small numbers take about half the bytes so. Encoding runs in the background writer (some 30 ms per
        megabyte); a load inflates at about 4 ms per megabyte."""
        arrays, meta = user_index_arrays(index.units)
        arrays.update(src=narrowed(index.src), dst=narrowed(index.dst), weight=narrowed(index.weight))
        n, _ = index.documents()
        for prefix, lexical in (("lex", index.lexical), ("tail", index.tails)):
            if lexical is not None:
                _put_lexical(arrays, meta, prefix, lexical, n)
        if index.turn_documents is not None:
            arrays["turn_documents"] = narrowed(index.turn_documents)
        return zlib.compress(pack(arrays, meta), 6)

    def decode(self, store: Store, user_id: str, data: bytes) -> _Index:
        """The index :meth:`encode` wrote: it scores and grows bit for bit as the index it was written from."""
        try:
            arrays, meta = unpack(zlib.decompress(data))
        except zlib.error as exc:
            raise InvalidInputError(f"not a MemGAS snapshot: {exc}") from None
        lexical = _get_lexical(arrays, meta, "lex", self._cfg)
        documents = arrays["turn_documents"].astype(np.int64) if "turn_documents" in arrays else None
        return _Index(user_index_from_arrays(store, user_id, arrays, meta), arrays["src"].astype(np.int64),
                      arrays["dst"].astype(np.int64), arrays["weight"].astype(np.float64), lexical,
                      _get_lexical(arrays, meta, "tail", self._cfg), turn_documents=documents,
                      n_documents=0 if lexical is None else len(lexical))


#: Where a snapshot's header keeps each BM25 index's vocabulary: the turns' views and the replies' tails
#: (:attr:`MemGASConfig.reply_tail_weight`).
_VOCABULARY = {"lex": "vocabulary", "tail": "tail_vocabulary"}


def _put_lexical(arrays: dict[str, np.ndarray], meta: dict[str, Any], prefix: str, lexical: LexicalIndex,
                 n: int) -> None:
    """Add BM25 over the first ``n`` turns to a snapshot's ``arrays`` and ``meta``, under ``prefix``. Documents,
    counts and lengths are whole numbers: each array is kept in the smallest type that holds it exactly
    (:func:`memgas.core.packing.narrowed`), and widened back on load."""
    vocabulary, parts, present = lexical.to_arrays(n)
    arrays.update({f"{prefix}_{name}": narrowed(parts[name]) for name in
                   ("starts", "docs", "tfs", "lengths", "present_starts", "present_docs")})
    meta[_VOCABULARY[prefix]] = vocabulary
    meta[f"{_VOCABULARY[prefix]}_present"] = present


def _get_lexical(arrays: dict[str, np.ndarray], meta: dict[str, Any], prefix: str, cfg: MemGASConfig
                 ) -> LexicalIndex | None:
    """The BM25 index :func:`_put_lexical` put under ``prefix`` (``None`` when the snapshot has none)."""
    if _VOCABULARY[prefix] not in meta:
        return None
    return LexicalIndex.from_arrays(meta[_VOCABULARY[prefix]], {
        "starts": arrays[f"{prefix}_starts"].copy(), "docs": arrays[f"{prefix}_docs"],
        "tfs": arrays[f"{prefix}_tfs"], "lengths": arrays[f"{prefix}_lengths"],
        "present_starts": arrays[f"{prefix}_present_starts"], "present_docs": arrays[f"{prefix}_present_docs"]},
        meta[f"{_VOCABULARY[prefix]}_present"], k1=cfg.bm25_k1, b=cfg.bm25_b)


def _extended_adjacency(a: sp.csr_matrix, src: np.ndarray, dst: np.ndarray, weight: np.ndarray,
                        n: int) -> sp.csr_matrix:
    """The canonical symmetric CSR matrix ``a`` grown to ``n × n`` with the undirected edges
    ``src``–``dst`` (``dst`` rows all new, i.e. ``>= a.shape[0]``), without re-sorting ``a``.

    Each new entry's column is larger than any column of its row in ``a`` when the row is old (the
    other end is new), so it goes at the row's end; new rows are all new entries. One sort of the new
    entries and one ``np.insert`` per array (a copy of ``a``, O(nnz)) give the canonical result.
    """
    n_old = a.shape[0]
    rows = np.concatenate([src, dst])
    cols = np.concatenate([dst, src])
    order = np.lexsort((cols, rows))
    rows, cols, w = rows[order], cols[order], np.concatenate([weight, weight])[order]
    at = a.indptr[np.minimum(rows + 1, n_old)]  # the end of each old row; the end of everything for new rows
    indptr = np.concatenate([a.indptr, np.full(n - n_old, a.indptr[-1])])
    indptr = indptr + np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=n))])
    return sp.csr_matrix((np.insert(a.data, at, w), np.insert(a.indices, at, cols), indptr), shape=(n, n))


def session_edges(units: list[Unit], floor: float = 0.05) -> list[Edge]:
    """Links among the units of one new session (refs ``-(i + 1)`` as :meth:`Store.add_session` expects).

    Each session chunk is linked to the turns it covers; the summary and keyword units to every
    chunk. Weights are the cosine similarities, clipped below at ``floor`` so that structure is kept
    even between dissimilar views of the same session.
    """
    chunks = [i for i, u in enumerate(units) if u.granularity == "session"]
    edges: list[Edge] = []

    def link(i: int, j: int) -> None:
        w = float(np.dot(units[i].vector, units[j].vector))  # type: ignore[arg-type]
        edges.append(Edge(-(i + 1), -(j + 1), max(w, floor)))

    for i, u in enumerate(units):
        if u.granularity == "turn":
            for c in chunks:
                if units[c].turn_start <= u.turn_start < units[c].turn_end:
                    link(c, i)
                    break
        elif u.granularity in ("summary", "keyword"):
            for c in chunks:
                link(c, i)
    return edges


def association_edges(
    units: list[Unit], table: UnitTable, *, candidates: int, exclude: np.ndarray | None = None
) -> tuple[list[Edge], dict[str, int]]:
    """Cross-session association edges of the new ``units`` with the stored ``table``.

    For each new unit, the ``candidates`` most similar stored units of the same granularity are
    pre-selected (so insert cost grows with history size only through one matrix product), and a
    two-component GMM over their similarities picks the accept set (:func:`memgas.kernels.gmm.accept_masks`,
    which fits the mixtures of all new units of one granularity in one vectorised EM).

    ``exclude`` (a boolean per stored row) leaves rows out of the history: a rewritten session's own units.

    Returns:
        The edges (new unit refs ``-(i + 1)`` → stored unit ids) and counts of how each accept
        decision was made (``gmm`` or one of the documented fallbacks).
    """
    edges: list[Edge] = []
    decisions: dict[str, int] = {}
    if len(table) == 0:
        return edges, decisions
    for g in GRANULARITIES:
        new_rows = [i for i, u in enumerate(units) if u.granularity == g]
        old_rows = np.flatnonzero(table.mask(g) if exclude is None else table.mask(g) & ~exclude)
        if not new_rows or old_rows.size == 0:
            continue
        new_vecs = np.stack([units[i].vector for i in new_rows])  # type: ignore[misc]
        sims = new_vecs @ table.vectors[old_rows].T  # (m, n)
        top = min(candidates, old_rows.size)
        cand = np.argpartition(-sims, top - 1, axis=1)[:, :top] if top < old_rows.size else np.tile(
            np.arange(old_rows.size), (len(new_rows), 1)
        )
        cand_sims = np.take_along_axis(sims, cand, axis=1)
        for r, (i, result) in enumerate(zip(new_rows, accept_masks(cand_sims))):  # one batched EM per granularity
            decisions[result.method] = decisions.get(result.method, 0) + 1
            for j, s in zip(cand[r][result.mask], cand_sims[r][result.mask]):
                if s > 0:
                    edges.append(Edge(-(i + 1), int(table.ids[old_rows[j]]), float(s)))
    return edges, decisions


def _best_sessions(session: np.ndarray, window: int) -> list[int]:
    """The positions of the ``window`` best sessions with a finite score, best first (ties in stored order)."""
    return [int(t) for t in np.argsort(-session, kind="stable")[:window] if np.isfinite(session[t])]


def _reordered(units: UserIndex, scores: np.ndarray, session: np.ndarray, top: list[int],
               order: list[int]) -> np.ndarray:
    """``scores`` with the sessions ``top`` (best first, ``session`` their scores) ranked in ``order`` (positions
    into ``top``): their scores are handed out again in the new order, a session moved up through its carrier units
    (session chunks), one moved down by capping its units, so that turns keep their own order."""
    if list(order) == list(range(len(top))):
        return scores
    out = scores.copy()
    values = [session[t] for t in top]  # best first: handed out in the new order
    carriers = units.masks["session"]
    for rank, k in enumerate(order):
        if values[rank] > session[top[k]]:  # moved up: its session chunks carry the new score
            rows = carriers[units.session_of[carriers] == top[k]]
            out[rows] = np.maximum(out[rows], values[rank])
        elif values[rank] < session[top[k]]:  # moved down: no unit of it stays above its new score
            mine = np.flatnonzero(units.session_of == top[k])
            out[mine] = np.minimum(out[mine], values[rank])
    return out


def _without_rows(index: _Index, alive: np.ndarray, units: UserIndex) -> _Index:
    """The graph of ``index`` over the rows where ``alive`` holds, with ``units``: the compacted units
    :func:`~memgas.methods.index.extend_user_index` made (the matrix is made anew on first use), and its BM25 with the
    documents of the turns that leave retired."""
    position = np.cumsum(alive) - 1  # old row -> new row, as compacted_index numbers them
    keep = alive[index.src] & alive[index.dst]
    n, _ = index.documents()
    staying = alive[index.units.masks["turn"]]
    documents, count = index.turn_documents, index.n_documents
    if not staying.all():
        documents, count = (np.arange(n) if documents is None else documents)[staying], n
    return _Index(units, position[index.src[keep]], position[index.dst[keep]],
                  index.weight[keep], index.lexical, index.tails, turn_documents=documents, n_documents=count)


class MemGAS(ConfiguredMethod[MemGASConfig]):
    """The MemGAS memory method (see the module docstring). Variants switch parts off for ablations."""

    name = "memgas"
    config_class = MemGASConfig

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # One cache per user: association (at add) reads the units of the index the searches use, so a user's
        # vectors are held once, and an add keeps one index up to date.
        self._indexes: IndexCache[_Index] = IndexCache(self._build_index, update=self._update_index,
                                                       snapshots=_Snapshots(self.cfg) if self.cfg.snapshots else None)

    # -- ingest ------------------------------------------------------------------------------
    def ingest(self, store: Store, session: Session) -> IngestStats:
        """Build units, associate them with the user's history, and write all in one transaction.

        Units (the embedding, most of the cost) are built outside any lock; reading the history,
        associating with it and writing happen under the user's write lock, so a concurrent delete
        can neither remove an association target before the write nor hide a unit added meanwhile.
        """
        t0 = time.perf_counter()
        store.bind_embedder(self.embedder.id, self.embedder.dim)
        units = self.build(session)
        t1 = time.perf_counter()
        edges = session_edges(units)
        decisions: dict[str, int] = {}
        extended, key = None, (0, 0)
        with store.writing(session.user_id):
            t2 = time.perf_counter()
            cached = None
            if store.has_user(session.user_id):
                cached = self._indexes.get(store, session.user_id)
                assoc, decisions = association_edges(units, cached.units.table, candidates=self.cfg.candidates)
                edges += assoc
            t3 = time.perf_counter()
            ids = store.add_session(session, units, edges, embedder_id=self.embedder.id)
            if cached is not None:  # nothing else wrote this user since ``cached`` was read: this write is the change
                extended = self._index_with_added(cached, session, units, ids, edges)
                key = (store.version(session.user_id), store.generation)
        t4 = time.perf_counter()
        # A search usually follows an add (an agent's next turn): extend the cached index now, once, from what was
        # just written (filed after the commit; a rollback changes the generation, so it would never be served).
        if extended is not None:
            self._indexes.put(store, session.user_id, key, extended)
        self._indexes.refresh(store, session.user_id)
        t5 = time.perf_counter()
        return IngestStats(
            session.session_id, ids, len(units), len(edges),
            {"units": t1 - t0, "lock": t2 - t1, "associate": t3 - t2, "write": t4 - t3, "index": t5 - t4},
            decisions,
        )

    def new_edges(self, store: Store, session: Session, units: list[Unit], new_rows: list[int],
                  ref: Callable[[int], int]) -> list[Edge]:
        """A rewrite's edges: the session's own links that touch a new unit, and the new units' association
        with the user's other sessions, exactly as :meth:`ingest` makes them for the whole session."""
        fresh = set(new_rows)
        edges = [Edge(ref(-e.src - 1), ref(-e.dst - 1), e.weight) for e in session_edges(units)
                 if -e.src - 1 in fresh or -e.dst - 1 in fresh]
        if new_rows and store.has_user(session.user_id):
            held = self._indexes.get(store, session.user_id).units
            table = held.table
            position = held.sessions.index(session.session_id) if session.session_id in held.sessions else -1
            own = held.session_of == position
            assoc, _ = association_edges([units[i] for i in new_rows], table, candidates=self.cfg.candidates,
                                         exclude=own)
            edges += assoc
        return edges

    # -- index -------------------------------------------------------------------------------
    def _graph_edges(self, units: UserIndex, edges: EdgeTable) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Stored edges as unit rows of ``units`` with their search weights; edges weighted 0 are dropped."""
        src = np.searchsorted(units.table.ids, edges.src)
        dst = np.searchsorted(units.table.ids, edges.dst)
        w = edges.weight.astype(np.float64)
        cross = units.session_of[src] != units.session_of[dst]
        if not self.cfg.use_association:
            w[cross] = 0.0
        else:
            w[cross & (w < self.cfg.assoc_min_weight)] = 0.0
            w[cross] *= self.cfg.assoc_scale
        keep = w > 0
        return src[keep], dst[keep], w[keep]

    def _turn_views(self, units: UserIndex, rows: np.ndarray, sessions: dict[str, Session]) -> _Documents:
        """The lexical documents of turn ``rows``: each turn read as its vector is (user words whole, replies'
        first ``lexical_reply_chars``, 300 as the vector by default), so the two channels see the same evidence and
        long assistant answers do not drown the user's; with ``reply_tail_weight``, also the rest of each reply
        (:func:`memgas.methods.units.turn_tail`, which also holds a user message past what the embedder reads), for a
        BM25 index of its own."""
        table = units.table
        reply = self.cfg.lexical_reply_chars
        keys = [(table.session_ids[r], int(table.turn_start[r])) for r in rows]
        turns = [sessions[sid].turns[i] for sid, i in keys]
        views = [embedding_view(turn, reply) for turn in turns]
        if self.cfg.reply_tail_weight <= 0:
            return views, None
        return views, [turn_tail(turn, reply) for turn in turns]

    def _lexical(self, texts: list[str]) -> LexicalIndex:
        """BM25 over ``texts`` with this configuration's parameters."""
        return LexicalIndex(texts, k1=self.cfg.bm25_k1, b=self.cfg.bm25_b)

    def _tails(self, replies: list[str], views: LexicalIndex) -> LexicalIndex:
        """BM25 over the turns' reply tails, holding postings only for the words no view holds (``views``): only
        those are ever looked up in it, and they are a fifth of a long reply's postings."""
        tails = LexicalIndex(k1=self.cfg.bm25_k1, b=self.cfg.bm25_b)
        tails.add(replies, skip=views.terms())
        return tails

    def _build_index(self, store: Store, user_id: str) -> _Index:
        """The user's whole index from the store (inside the cache's ``store.reading()``). Unit texts are not held:
        they are most of a cached user's bytes, and a search shows only its hits' turns (read from the store)."""
        units = build_user_index(store, user_id, texts=False)
        src, dst, weight = self._graph_edges(units, store.load_edges(user_id))
        lexical = tails = None
        if self.cfg.use_lexical and len(units.table):
            sessions = {sid: store.get_session(user_id, sid) for sid in units.sessions}
            views, replies = self._turn_views(units, units.masks["turn"], sessions)
            lexical = self._lexical(views)
            tails = None if replies is None else self._tails(replies, lexical)
        return _Index(units, src, dst, weight, lexical, tails)

    def _update_index(self, store: Store, user_id: str, index: _Index) -> _Index | None:
        """``index`` extended by what was added since it was read: the new units' rows, the edges that
        touch them, their sessions' timestamps and turns (inside the cache's ``store.reading()``).

        Only the new rows are read and appended (vectors into spare capacity, edges to the edge list,
        documents to BM25), so search right after an add costs about a warm search. An append made here
        (:meth:`rewrite` with ``append``) that continued a turn retires the turn's old BM25 document: it stays,
        never scored, and the scores are those of an index without it (BM25's statistics read the live documents
        only), until retired documents are as many as the live ones. After a delete or an edit, or once retired
        documents are that many, it returns ``None`` and the cache rebuilds the index: a delete is rare, and
        rebuilding keeps the rows dense and forgets the old text. ``index`` stays valid for readers still holding it.
        """
        appended = getattr(self._appending, "value", None)
        written = None if appended is None else appended[0]
        extended = extend_user_index(store, user_id, index.units, compact=True,
                                     known=None if written is None else {written.session_id: written},
                                     gone=None if appended is None else np.asarray(appended[1], dtype=np.int64))
        if extended is None:
            return None
        units, sessions, alive, compacted = extended
        last_id = int(index.units.table.ids[-1])
        had_matrix = index._adjacency is not None
        if alive is not None and compacted is not None:  # a session was rewritten: its replaced units leave
            if (not alive[index.units.masks["turn"]].all() and index.lexical is not None
                    and written is None):
                return None  # a turn was replaced by an edit (or by another writer): BM25 is rebuilt, the old text gone
            index = _without_rows(index, alive, compacted)
            if index.retired() > index.units.masks["turn"].size:
                return None  # as many retired BM25 documents as live ones: rebuilt (amortized over those appends)
        if len(units.table) == len(index.units.table):
            return index

        def all_views(held: UserIndex) -> _Documents:
            return self._turn_views(held, held.masks["turn"], {sid: store.get_session(user_id, sid)
                                                               for sid in held.sessions})

        return self._extended_index(index, units, sessions, store.load_edges_after(user_id, last_id), had_matrix, all_views)

    def _extended_index(self, index: _Index, units: UserIndex, sessions: dict[str, Session], edges: EdgeTable,
               had_matrix: bool, all_views: Callable[[UserIndex], _Documents] | None = None) -> _Index | None:
        """``index`` grown to ``units`` (``index``'s rows then new ones, of ``sessions``) with the new ``edges``:
        edges appended to the edge list, the new turns' documents to BM25 (or to a copy of ``index``'s documents,
        made by ``all_views``, when a later index already appended to its BM25; ``None`` without ``all_views``)."""
        src, dst, weight = self._graph_edges(units, edges)
        lexical, tails = index.lexical, index.tails
        documents, count = index.turn_documents, index.n_documents
        if lexical is not None:
            old_turns = index.units.masks["turn"].size
            n, _ = index.documents()
            if len(lexical) != n:  # a later snapshot already appended to it: start a copy of ours (retiring none)
                if all_views is None:
                    return None
                views, replies = all_views(index.units)
                lexical = self._lexical(views)
                tails = None if replies is None else self._tails(replies, lexical)
                documents, n = None, old_turns
            views, replies = self._turn_views(units, units.masks["turn"][old_turns:], sessions)
            lexical.add(views)
            if tails is not None and replies is not None:  # a word the views now hold is never looked up here
                tails.add(replies, skip=lexical.terms())
            if documents is not None:
                documents, count = np.concatenate([documents, np.arange(n, n + len(views))]), n + len(views)
        parent = None if index._adjacency is None else (index._adjacency, index.src.size)
        out = _Index(units, np.concatenate([index.src, src]), np.concatenate([index.dst, dst]),
                     np.concatenate([index.weight, weight]), lexical, tails, _parent=parent,
                     turn_documents=documents, n_documents=count)
        if had_matrix:
            out.adjacency()  # searches used the graph before: grow it now (cheap) rather than in the next one
        return out

    def _index_with_added(self, index: _Index, session: Session, units: list[Unit], ids: list[int],
                 edges: list[Edge]) -> _Index | None:
        """``index`` with the session an add just wrote (its ``units`` with their new ``ids``, and ``edges``), made
        from what is in memory, equal to what reading them back would give: vectors rounded as the store keeps
        them, edges with their ends resolved and ordered and their weights in float32. ``None`` when it cannot."""
        added = UnitTable(
            np.asarray(ids, dtype=np.int64), tuple(u.session_id for u in units),
            np.array([GRANULARITIES.index(u.granularity) for u in units], dtype=np.int8),
            np.array([u.turn_start for u in units], dtype=np.int32), np.array([u.turn_end for u in units], dtype=np.int32),
            np.array([u.chunk for u in units], dtype=np.int32), tuple(u.text for u in units),
            from_half(to_half(np.stack([np.asarray(u.vector) for u in units]))))
        ends = np.array([[ids[-e - 1] if e < 0 else e for e in (edge.src, edge.dst)] for edge in edges],
                        dtype=np.int64).reshape(-1, 2)
        ends.sort(axis=1)
        table = EdgeTable(ends[:, 0].copy(), ends[:, 1].copy(), np.array([e.weight for e in edges], dtype=np.float32))
        sessions = {session.session_id: session}
        grown = appended_index(index.units, added, sessions)
        return self._extended_index(index, grown, sessions, table, index._adjacency is not None)

    # -- search ------------------------------------------------------------------------------
    def _time_prior(self, units: UserIndex, query: str, query_time: datetime) -> np.ndarray:
        """Per session: 1 + γ when the session falls in the time window the query names, else 1.

        Sessions are when something was *said*, and people tell of events a while after they
        happen, so the window is widened after its end by its own length (at least a week).
        """
        prior = np.ones(len(units.sessions))
        window = parse_time_window(query, query_time)
        if window is None:
            return prior
        # widened() stops at datetime's range; contains() compares stored aware timestamps as naive UTC
        span = window.widened(timedelta(days=1), max(window.end - window.start, timedelta(days=7)))
        for i, sid in enumerate(units.sessions):
            t = units.timestamps.get(sid)
            if t is not None and span.contains(t):
                prior[i] += self.cfg.time_weight
        return prior

    # -- scoring: channels → router → seeds → PageRank → session evidence → ordering --------------------------
    def _channels(self, index: _Index, sims: np.ndarray, query: str,
                  allowed: np.ndarray | None) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Each channel's unit rows and raw scores: the four granularities (the units' cosines with the query) and,
        over the turn units, BM25 (with the reply tails for words no view holds). With ``allowed`` (a boolean per
        unit row), only those rows, BM25 with their own statistics."""
        masks = index.units.masks
        if allowed is not None:
            masks = {g: rows[allowed[rows]] for g, rows in masks.items()}
        channels = {g: (rows, sims[rows]) for g, rows in masks.items() if rows.size}
        if index.lexical is not None:
            turns = index.units.masks["turn"]
            within = None if allowed is None else allowed[turns]
            n, live = index.documents()  # with retired documents: BM25 over the live ones, as if alone
            scored = live
            if within is not None and live is not None:
                scored = np.zeros(n, bool)
                scored[index.turn_documents[within]] = True  # type: ignore[index]
            lexical = index.lexical.scores(query, n, within=within if live is None else scored)
            if index.tails is not None:  # the question's words no view of the user holds, read in the reply tails
                missing = index.lexical.absent(query, n, within=live)
                if missing:
                    lexical += self.cfg.reply_tail_weight * index.tails.scores(
                        query, n, within=within if live is None else scored, only=missing)
            if live is not None:
                lexical = lexical[index.turn_documents]
            if within is not None:
                lexical = lexical[within]
            if lexical.size and lexical.max() > 0:
                channels["lexical"] = (masks["turn"], lexical)
        return channels

    def _route(self, channels: dict[str, tuple[np.ndarray, np.ndarray]]
               ) -> tuple[dict[str, float], dict[str, np.ndarray]]:
        """Each channel standardised (z-scores over its units: cosines bunch around 0.1–0.6, BM25 is unbounded) and
        the entropy router's weight for it (equal weights without the router)."""
        z = {}
        for c, (_, s) in channels.items():
            sd = float(s.std())
            z[c] = (s - s.mean()) / sd if sd > 1e-9 else np.zeros_like(s)
        if self.cfg.use_router:
            return granularity_weights(z, temperature=self.cfg.temperature), z
        return {c: 1.0 / len(z) for c in z}, z

    def _seed(self, index: _Index, channels: dict[str, tuple[np.ndarray, np.ndarray]], z: dict[str, np.ndarray],
              weights: dict[str, float]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Every unit's seed, Σ_c w_c · max(z_c, 0), and each channel's share of every session's evidence
        (w_c · the session's best max(z_c, 0); their sum is the session's evidence)."""
        seed = np.zeros(len(index.units.table))
        shares = {}
        for c, (rows, _) in channels.items():
            positive = np.clip(z[c], 0.0, None)
            seed[rows] += weights[c] * positive
            best = np.zeros(len(index.units.sessions))
            np.maximum.at(best, index.units.session_of[rows], positive)
            shares[c] = weights[c] * best
        return seed, shares

    def _propagate(self, index: _Index, personalization: np.ndarray,
                   allowed: np.ndarray | None) -> tuple[np.ndarray, bool]:
        """Personalized PageRank from the seeds over the association graph (between the allowed sessions only);
        the seeds alone, normalised, where there is no graph. Also whether a graph carried the mass."""
        adjacency = index.adjacency() if self.cfg.use_ppr else None
        if adjacency is not None and allowed is not None:
            adjacency = adjacency[allowed][:, allowed]  # the graph between the sessions searched
        if adjacency is None or not adjacency.nnz:
            return personalization / personalization.sum(), False
        if allowed is None:
            return personalized_pagerank(adjacency, personalization, damping=self.cfg.damping, tol=self.cfg.tol,
                                         max_iter=self.cfg.max_iter, symmetric=True).scores, True
        scores = np.zeros_like(personalization)
        scores[allowed] = personalized_pagerank(adjacency, personalization[allowed], damping=self.cfg.damping,
                                                tol=self.cfg.tol, max_iter=self.cfg.max_iter, symmetric=True).scores
        return scores, True

    def _with_evidence(self, index: _Index, scores: np.ndarray, personalization: np.ndarray,
                       evidence: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``scores`` with each session's evidence added, and what each unit scores without PageRank (its own seed
        plus its session's evidence, as ``memgas-no-ppr``). Evidence spread over a session's granularities (its best
        chunk, turn, summary, keywords and BM25 hit together) outweighs one unit that a single channel favours."""
        direct = personalization / personalization.max()
        if self.cfg.session_weight <= 0 or evidence.max() <= 0:
            return scores, direct
        units = index.units
        bonus = self.cfg.session_weight * evidence / evidence.max()
        direct = direct + bonus[units.session_of]
        scores = scores / scores.max() + bonus[units.session_of]
        if self.cfg.turn_seed:
            # PageRank ranks sessions (mass flows between associated ones); a turn is ranked by its own seed, i.e.
            # its cosine and BM25 evidence, within its session's prior.
            turns = units.masks["turn"]
            scores = own_turn_scores(scores, units.session_of, len(units.sessions), turns, direct[turns],
                                     units.masks["session"])
        return scores, direct

    def score(self, store: Store, user_id: str, query: str, *, query_time: datetime | None = None,
              within: Collection[str] | None = None) -> Scored:
        """Score the user's units for ``query``: channels → router → seeds → PageRank → session evidence →
        ordering (each a method of its own).

        With ``within`` (session ids), the units of the other sessions score ``-inf`` and the rest score as in
        a store that held only those sessions with their units and the edges among them: channels standardised
        over their units, BM25 with their statistics, PageRank on the graph between them (no mass reaches or
        leaves through an excluded session).
        """
        index = self._indexes.get(store, user_id)
        if len(index.units.table) == 0:
            return Scored(index.units, np.zeros(0))
        allowed = None if within is None else sessions_within(index.units, within)[index.units.session_of]
        if allowed is not None and allowed.all():
            allowed = None
        sims = index.units.table.vectors @ self.embed_query(query)
        channels = self._channels(index, sims, query, allowed)
        weights, z = self._route(channels)
        seed, shares = self._seed(index, channels, z, weights)
        evidence = np.zeros(len(index.units.sessions))
        for share in shares.values():  # in channel order: a float sum depends on it
            evidence += share
        if seed.max() <= 0:  # no unit stands out in any channel: all are equally good seeds
            seed = np.ones_like(seed) if allowed is None else allowed.astype(np.float64)
        if query_time is not None and self.cfg.time_weight > 0:
            prior = self._time_prior(index.units, query, query_time)
            seed *= prior[index.units.session_of]
            evidence *= prior
        if allowed is not None and not allowed.any():
            return Scored(index.units, np.full(seed.size, -np.inf), weights, np.zeros_like(seed), relevance=sims)
        top = min(self.cfg.seeds, seed.size if allowed is None else int(allowed.sum()))
        seed_rows = np.argpartition(-seed, top - 1)[:top]
        personalization = np.zeros_like(seed)
        personalization[seed_rows] = seed[seed_rows]
        scores, propagated = self._propagate(index, personalization, allowed)
        scores, direct = self._with_evidence(index, scores, personalization, evidence)
        if allowed is not None:
            scores = np.where(allowed, scores, -np.inf)
            direct = np.where(allowed, direct, -np.inf)
        if self.cfg.direct_window > 1 and propagated:
            scores = self._directly_ordered(index, scores, direct)
        if self.cfg.current_first and asks_about_now(query, query_time):
            scores = self._current_first(index, scores, sims, shares.get("lexical"))
        return Scored(index.units, scores, weights, personalization, relevance=sims, channels=shares,
                      turn_words=index.turn_words if index.lexical is not None and index.tails is not None else None)

    def _directly_ordered(self, index: _Index, scores: np.ndarray, direct: np.ndarray) -> np.ndarray:
        """``scores`` with the ``direct_window`` best sessions ordered by their best ``direct`` score
        (:attr:`MemGASConfig.direct_window`)."""
        units = index.units
        session = session_scores(units, scores)
        top = _best_sessions(session, self.cfg.direct_window)
        if len(top) < 2:
            return scores
        own = session_scores(units, direct)[top]
        return _reordered(units, scores, session, top, [int(k) for k in np.argsort(-own, kind="stable")])

    def _current_first(self, index: _Index, scores: np.ndarray, sims: np.ndarray,
                       lexical: np.ndarray | None) -> np.ndarray:
        """``scores`` with the best sessions reordered as :attr:`MemGASConfig.current_first` says (``sims``: each
        unit's cosine with the query; ``lexical``: each session's BM25 evidence). The top sessions' scores are
        handed out again in the new order, a session moved up through its carrier units (session chunks), one
        moved down by capping its units, so that turns keep their own order."""
        units = index.units
        session = session_scores(units, scores)
        top = _best_sessions(session, self.cfg.current_window)
        if len(top) < 2:
            return scores
        turns = units.masks["turn"]
        nearest = []  # per top session: the vectors of its (up to) three turns nearest the query
        for t in top:
            rows = turns[units.session_of[turns] == t]
            nearest.append(units.table.vectors[rows[np.argsort(-sims[rows], kind="stable")[:3]]].astype(np.float32))
        evidence = np.zeros(len(units.sessions)) if lexical is None else lexical

        def states_what(newer: int, older: int) -> bool:
            a, b = top[older], top[newer]
            return (session[b] >= self.cfg.current_ratio * session[a]
                    and evidence[b] > 0 and evidence[b] >= self.cfg.current_lexical * evidence[a]
                    and nearest[older].size > 0 and nearest[newer].size > 0
                    and float((nearest[older] @ nearest[newer].T).max()) >= self.cfg.current_similarity)

        when = [units.timestamps.get(units.sessions[t]) for t in top]
        order = list(range(len(top)))  # positions into top, best first
        for _ in range(len(top) ** 2):  # each move puts a newer session before an older one; capped all the same
            move = next(((i, j) for i in range(len(order)) for j in range(i + 1, len(order))
                         if _newer(when[order[j]], when[order[i]]) and states_what(order[j], order[i])), None)
            if move is None:
                break
            order.insert(move[0], order.pop(move[1]))
        return _reordered(units, scores, session, top, order)

    def score_within(self, store: Store, user_id: str, query: str, *, query_time: datetime | None = None,
                     within: Collection[str] | None = None) -> Scored:
        """:meth:`score` over the sessions ``within`` alone (see there)."""
        return self.score(store, user_id, query, query_time=query_time, within=within)


def _newer(a: datetime | None, b: datetime | None) -> bool:
    """Whether ``a`` is a later time than ``b`` (never when either is unknown)."""
    return a is not None and b is not None and a > b
