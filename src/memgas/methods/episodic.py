"""Episodic memory in the style of EM-LLM: surprise-based events, refined by graph modularity.

Fountas et al., 2024, "Human-like Episodic Memory for Infinite Context LLMs" (EM-LLM,
arXiv:2407.09450), at the granularity of turns rather than tokens. A user's turns form one
chronological stream (sessions oldest first); the stream is cut into *events*:

1. **Surprise.** Each turn gets a surprise score (:class:`Surprise`). EM-LLM uses the LLM's negative
   log-likelihood of the next tokens. The default here is NOT that: it is an **embedding-drift
   surprise** (:class:`EmbeddingDriftSurprise`), ``1 − cos(v_t, mean of the previous turns' vectors)``
   within the session: how far the conversation moved away from what was just being discussed.
   EM-LLM's own surprise, each turn's mean token NLL given the preceding turns under a local GGUF
   model, is :class:`memgas.llm.local.TokenNLLSurprise` (needs llama-cpp-python and a bundled
   model; seconds per turn on 2 CPU cores): ``Episodic(embedder, surprise=TokenNLLSurprise())``.
2. **Boundaries.** A turn starts a new event when its surprise exceeds ``μ + γ·σ`` of the surprises
   of the ``window`` turns before it (EM-LLM's threshold); every session start is a boundary too.
3. **Refinement.** Each surprise boundary is moved, inside the window formed by the events on its
   two sides, to the split that maximises the modularity (Newman, 2006) of the turns' similarity
   graph (cosines clipped at 0), as EM-LLM's Algorithm 1 does with attention-key similarity.
   Boundaries are refined left to right, each window starting at the already refined boundary
   on its left.
4. **Indexing.** Each event is indexed by its most representative turn: the one closest to the
   event's centroid (largest summed cosine to the event's turns).

Retrieval: events are ranked by the similarity of their representative turn to the query; the
``k_similar`` best are retrieved with their ``contiguity`` neighbouring events on each side in the
stream (EM-LLM's similarity and contiguity buffers). Every turn of a retrieved event ranks above
every other turn; within that set and outside it, turns rank by their event's similarity, ties
broken by the turn's own similarity (see :func:`memgas.kernels.segment.structure_scores`).

The events are rebuilt from the store whenever the user's memory changes (cached per store
version); nothing is embedded beyond the turn vectors already stored.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, Sequence

import numpy as np

from memgas.core.errors import InvalidInputError
from memgas.embed.base import Embedder
from memgas.kernels.segment import chronological_rows, labels_from_starts, run_starts, structure_scores
from memgas.methods.base import ConfiguredMethod
from memgas.methods.index import IndexCache, UserIndex, build_user_index
from memgas.methods.ranking import Scored
from memgas.store import Store

__all__ = [
    "Surprise",
    "EmbeddingDriftSurprise",
    "EpisodicConfig",
    "surprise_boundaries",
    "split_modularity",
    "refine_boundaries",
    "representatives",
    "segment_events",
    "Episodic",
]


class Surprise(Protocol):
    """Scores how surprising each unit of a stream is, given the units before it."""

    def surprise(self, texts: Sequence[str], vectors: np.ndarray, session_start: np.ndarray) -> np.ndarray:
        """Per unit, its surprise (higher = more surprising); ``NaN`` where undefined.

        Args:
            texts: the units' texts, in stream order.
            vectors: their L2-normalised vectors, one row each.
            session_start: boolean, per unit, whether it opens a session (a unit with no context).
        """
        ...


class EmbeddingDriftSurprise:
    """Embedding-drift surprise, a stand-in for EM-LLM's token NLL (see the module docstring).

    ``surprise_t = 1 − cos(v_t, c_t)``, where ``c_t`` is the mean vector of the up to ``context``
    units before ``t`` in the same session; ``NaN`` at a session's first unit. Vectorised with
    cumulative sums.

    Args:
        context: how many preceding units form the context (>= 1).

    Raises:
        InvalidInputError: ``context`` below 1.
    """

    def __init__(self, context: int = 3) -> None:
        if context < 1:
            raise InvalidInputError(f"context must be at least 1, got {context}")
        self.context = context

    def surprise(self, texts: Sequence[str], vectors: np.ndarray, session_start: np.ndarray) -> np.ndarray:
        """Per unit, ``1 − cos(v_t, mean of its context)``; ``NaN`` at session starts."""
        v = np.asarray(vectors, dtype=np.float64)
        n = v.shape[0]
        t = np.arange(n)
        first = np.maximum.accumulate(np.where(session_start, t, 0))
        lo = np.maximum(t - self.context, first)
        csum = np.vstack([np.zeros((1, v.shape[1])), np.cumsum(v, axis=0)])
        ctx = csum[t] - csum[lo]
        norms = np.linalg.norm(ctx, axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            cos = (v * ctx).sum(axis=1) / norms
        out = 1.0 - cos
        out[(t == lo) | (norms == 0)] = np.nan
        return out


@dataclass(frozen=True, slots=True)
class EpisodicConfig:
    """Parameters of the episodic method.

    Attributes:
        context: units forming the drift surprise's context (:class:`EmbeddingDriftSurprise`).
        window: preceding surprises whose mean and deviation set the boundary threshold (τ).
        gamma: γ in the threshold ``μ + γ·σ``.
        refine: move surprise boundaries to the modularity-maximising split.
        k_similar: events retrieved by similarity (the similarity buffer).
        contiguity: neighbouring events retrieved on each side of each of them (the contiguity buffer).
    """

    context: int = 3
    window: int = 10
    gamma: float = 1.0
    refine: bool = True
    k_similar: int = 5
    contiguity: int = 1

    def __post_init__(self) -> None:
        if self.k_similar < 1 or self.contiguity < 0:
            raise InvalidInputError("Episodic needs k_similar >= 1 and contiguity >= 0")


def surprise_boundaries(surprise: np.ndarray, forced: np.ndarray, *, window: int, gamma: float) -> np.ndarray:
    """Event start positions: the forced ones, and where surprise exceeds ``μ + γ·σ`` of the previous ``window``.

    Args:
        surprise: per position, its surprise (``NaN`` = undefined, never a boundary on its own and
            left out of the statistics).
        forced: boolean, positions that always start an event (position 0 is always a start).
        window: how many preceding positions the mean and standard deviation read (>= 2).
        gamma: γ.

    Returns:
        Sorted start positions, the first one 0. A position whose window holds fewer than two
        defined surprises only starts an event when forced.

    Raises:
        InvalidInputError: ``window`` below 2, or arrays of different lengths.
    """
    s = np.asarray(surprise, dtype=np.float64)
    forced = np.asarray(forced, dtype=bool)
    if window < 2 or s.shape != forced.shape:
        raise InvalidInputError("surprise_boundaries needs window >= 2 and one forced flag per position")
    n = s.size
    valid = ~np.isnan(s)
    x = np.where(valid, s, 0.0)

    def trailing(a: np.ndarray) -> np.ndarray:  # sum of a over the window before each position
        c = np.concatenate([[0.0], np.cumsum(a)])
        t = np.arange(n)
        return c[t] - c[np.maximum(t - window, 0)]

    count = trailing(valid.astype(np.float64))
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = trailing(x) / count
        std = np.sqrt(np.maximum(trailing(x * x) / count - mean * mean, 0.0))
    surprising = valid & (count >= 2) & (s > mean + gamma * std)
    start = forced | surprising
    if n:
        start[0] = True
    return np.flatnonzero(start)


def split_modularity(adjacency: np.ndarray) -> np.ndarray:
    """Modularity of every split of a sequence graph into a prefix and a suffix community.

    For ``m`` nodes and split point ``p`` (communities ``[0, p)`` and ``[p, m)``),
    ``Q(p) = Σ_c [L_c / W − (D_c / W)²]`` with ``W`` the total weight (``Σ_ij A_ij``), ``L_c`` the
    weight inside community ``c`` (``Σ_{i,j ∈ c} A_ij``) and ``D_c`` its degree sum (Newman, 2006).
    All ``m − 1`` splits come from one 2-D prefix sum.

    Args:
        adjacency: ``(m, m)`` symmetric, non-negative weights, ``m >= 2``.

    Returns:
        ``Q(p)`` for ``p = 1 .. m − 1`` (index ``p − 1``); all zeros when the graph has no weight.
    """
    a = np.asarray(adjacency, dtype=np.float64)
    m = a.shape[0]
    total = a.sum()
    if total <= 0:
        return np.zeros(m - 1)
    prefix = np.zeros((m + 1, m + 1))
    prefix[1:, 1:] = a.cumsum(axis=0).cumsum(axis=1)
    p = np.arange(1, m)
    inside_left = prefix[p, p]
    degree_left = prefix[p, m]
    inside_right = total - 2.0 * degree_left + inside_left
    return (inside_left + inside_right) / total - (degree_left**2 + (total - degree_left) ** 2) / total**2


def refine_boundaries(starts: np.ndarray, vectors: np.ndarray, fixed: np.ndarray) -> np.ndarray:
    """Move each non-fixed event start to the modularity-best split of the two events around it.

    Args:
        starts: sorted event start positions (the first one 0).
        vectors: ``(n, dim)`` L2-normalised unit vectors.
        fixed: boolean per position: starts that must not move (session starts).

    Returns:
        The refined starts, sorted; the number of events is unchanged.
    """
    out = np.asarray(starts, dtype=np.int64).copy()
    ends = np.append(out[1:], vectors.shape[0])  # event i ends where event i + 1 started before refinement
    for i in range(1, out.size):
        if fixed[out[i]]:
            continue
        lo, hi = out[i - 1], ends[i]
        if hi - lo < 3:  # two one-unit events: nothing to move
            continue
        block = vectors[lo:hi]
        a = np.clip(block @ block.T, 0.0, None)
        np.fill_diagonal(a, 0.0)
        q = split_modularity(a)
        out[i] = lo + 1 + int(np.argmax(q))
    return out


def representatives(vectors: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Per event, the position of its most representative unit: the largest summed cosine to its event.

    ``v_u · Σ_{j ∈ e} v_j`` is that sum, so one pass over the pooled sums finds every event's medoid.
    Ties go to the earliest unit.
    """
    labels = np.asarray(labels, dtype=np.int64)
    k = int(labels.max()) + 1
    sums = np.zeros((k, vectors.shape[1]))
    np.add.at(sums, labels, vectors)
    fit = (vectors * sums[labels]).sum(axis=1)
    order = np.lexsort((np.arange(labels.size), -fit, labels))
    return order[run_starts(labels[order])]


def segment_events(
    texts: Sequence[str],
    vectors: np.ndarray,
    session_start: np.ndarray,
    cfg: EpisodicConfig,
    surprise: Surprise | None = None,
) -> np.ndarray:
    """Cut a stream into events (steps 1-3 of the module docstring); returns the sorted event starts."""
    session_start = np.asarray(session_start, dtype=bool)
    scorer = surprise if surprise is not None else EmbeddingDriftSurprise(cfg.context)
    starts = surprise_boundaries(scorer.surprise(texts, vectors, session_start), session_start,
                                 window=cfg.window, gamma=cfg.gamma)
    return refine_boundaries(starts, vectors, session_start) if cfg.refine else starts


@dataclass(slots=True)
class _Index:
    units: UserIndex
    rows: np.ndarray  # stream position → unit row
    event_of: np.ndarray  # stream position → event
    rep_vectors: np.ndarray  # per event, its representative turn's vector


class Episodic(ConfiguredMethod[EpisodicConfig]):
    """EM-LLM-style episodic memory over the user's turns (see the module docstring).

    Args:
        embedder: the embedder.
        config: parameters (:class:`EpisodicConfig`); keyword overrides are applied on top.
        surprise: the surprise model (default :class:`EmbeddingDriftSurprise`).
    """

    name = "episodic"
    config_class = EpisodicConfig

    def __init__(self, embedder: Embedder, config: EpisodicConfig | None = None, *,
                 surprise: Surprise | None = None, **kwargs: Any) -> None:
        super().__init__(embedder, config, **kwargs)
        self.surprise = surprise or EmbeddingDriftSurprise(self.cfg.context)
        self._indexes: IndexCache[_Index] = IndexCache(self._build)

    def config(self) -> dict[str, Any]:
        return {**super().config(), "surprise": type(self.surprise).__name__}

    def _build(self, store: Store, user_id: str) -> _Index:
        units = build_user_index(store, user_id)
        table = units.table
        rows = chronological_rows(units.masks["turn"], table.session_ids, table.turn_start,
                                  [s.session_id for s in store.list_sessions(user_id)] if len(table) else [])
        if not rows.size:
            return _Index(units, rows, np.zeros(0, dtype=np.int64), np.zeros((0, table.vectors.shape[1])))
        vectors = table.vectors[rows]
        session_start = run_starts(np.array([table.session_ids[r] for r in rows], dtype=object))
        starts = segment_events([table.texts[r] for r in rows], vectors, session_start, self.cfg, self.surprise)
        event_of = labels_from_starts(starts, rows.size)
        return _Index(units, rows, event_of, vectors[representatives(vectors, event_of)])

    def score(self, store: Store, user_id: str, query: str, *, query_time: datetime | None = None) -> Scored:
        """Score the user's turns: retrieved events (similarity + contiguity buffers) first, each turn as its event."""
        index = self._indexes.get(store, user_id)
        scores = np.full(len(index.units.table), -np.inf)
        n = index.rows.size
        if not n:
            return Scored(index.units, scores)
        qv = self.embed_query(query)
        event_sims = index.rep_vectors @ qv
        k = min(self.cfg.k_similar, event_sims.size)
        similar = np.argpartition(-event_sims, k - 1)[:k]
        selected = np.zeros(event_sims.size, dtype=bool)
        for offset in range(-self.cfg.contiguity, self.cfg.contiguity + 1):
            selected[np.clip(similar + offset, 0, event_sims.size - 1)] = True
        scores[index.rows] = structure_scores(event_sims, index.event_of, np.arange(n), n, selected=selected,
                                              own=index.units.table.vectors[index.rows] @ qv)
        return Scored(index.units, scores)
