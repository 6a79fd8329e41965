"""SeCom-style memory: sessions segmented into topically coherent segments, retrieved as segments.

Pan et al., 2025, "On Memory Construction and Retrieval for Personalized Conversational Agents"
(SeCom, ICLR 2025), a MemGAS baseline. SeCom segments each session with an LLM and retrieves
segments. Here the segmentation is embedding-based, TextTiling (Hearst, 1997) over turn vectors:

1. at each gap between two turns of a session, the *gap similarity* is the cosine between the mean
   vectors of the ``block`` turns before and after it (fewer at the session's edges);
2. a gap's *depth* is how far its similarity lies below the nearest peaks on both sides, found by
   climbing while the similarity does not decrease: ``(left peak − s) + (right peak − s)``;
3. a gap becomes a boundary when its depth is a local maximum in its session and exceeds
   ``mean − cutoff · std`` of all the user's depths (Hearst's liberal cutoff at ``cutoff = 0.5``).

Each segment's vector is the mean of its turns' stored vectors (nothing is re-embedded); a segment
scores as its cosine with the query, and each turn as its segment, ties broken by its own
similarity (see :func:`memgas.kernels.segment.structure_scores`); :meth:`SeCom.segments` lists a user's
segments. SeCom's compression-based denoising (LLMLingua-2) before retrieval is not done: it needs a
model. The segments are rebuilt from the store whenever the user's memory changes (cached per store
version).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np

from memgas.core.errors import InvalidInputError
from memgas.kernels.segment import chronological_rows, labels_from_starts, pooled, run_starts, structure_scores
from memgas.methods.base import ConfiguredMethod
from memgas.methods.index import IndexCache, UserIndex, build_user_index
from memgas.methods.ranking import Scored
from memgas.store import Store

__all__ = ["SeComConfig", "gap_similarities", "depth_scores", "texttiling_starts", "SeCom"]


@dataclass(frozen=True, slots=True)
class SeComConfig:
    """Parameters of the SeCom-style method.

    Attributes:
        block: turns on each side of a gap whose mean vectors are compared (TextTiling's block size).
        cutoff: a boundary's depth must exceed ``mean − cutoff · std`` of the depths.
    """

    block: int = 2
    cutoff: float = 0.5


def gap_similarities(vectors: np.ndarray, session_start: np.ndarray, block: int) -> np.ndarray:
    """Per position ``t``, the cosine between the mean vectors of the ``block`` units before and from ``t``.

    Blocks stop at session edges. ``NaN`` at a session's first unit (no gap before it).

    Raises:
        InvalidInputError: ``block`` below 1.
    """
    if block < 1:
        raise InvalidInputError(f"block must be at least 1, got {block}")
    v = np.asarray(vectors, dtype=np.float64)
    n = v.shape[0]
    t = np.arange(n)
    starts = np.asarray(session_start, dtype=bool)
    first = np.maximum.accumulate(np.where(starts, t, 0))
    # One past each session's last unit: the next session's start (or n).
    next_start = np.append(np.flatnonzero(starts), n)
    end = next_start[np.searchsorted(next_start, t, side="right")]
    csum = np.vstack([np.zeros((1, v.shape[1])), np.cumsum(v, axis=0)])
    left = csum[t] - csum[np.maximum(t - block, first)]
    right = csum[np.minimum(t + block, end)] - csum[t]
    with np.errstate(invalid="ignore", divide="ignore"):
        cos = (left * right).sum(axis=1) / (np.linalg.norm(left, axis=1) * np.linalg.norm(right, axis=1))
    cos[starts] = np.nan
    return cos


def _peaks(s: np.ndarray, opens: np.ndarray) -> np.ndarray:
    """Per gap, the similarity reached by climbing left while it does not decrease (not past a run's start)."""
    idx = np.arange(s.size)
    climbs = np.zeros(s.size, dtype=bool)
    climbs[1:] = s[:-1] >= s[1:]
    stop = np.maximum.accumulate(np.where(opens | ~climbs, idx, 0))
    return s[stop]


def depth_scores(gaps: np.ndarray, session_of_gap: np.ndarray) -> np.ndarray:
    """TextTiling depth of each gap: ``(left peak − s) + (right peak − s)``, climbing within its session.

    Args:
        gaps: gap similarities, in stream order.
        session_of_gap: per gap, its session (gaps of one session are contiguous).

    Returns:
        Non-negative depths, one per gap.
    """
    s = np.asarray(gaps, dtype=np.float64)
    opens = run_starts(session_of_gap)
    closes = run_starts(np.asarray(session_of_gap)[::-1])
    left = _peaks(s, opens)
    right = _peaks(s[::-1], closes)[::-1]
    return (left - s) + (right - s)


def texttiling_starts(vectors: np.ndarray, session_start: np.ndarray, cfg: SeComConfig) -> np.ndarray:
    """Segment start positions of a stream of turns (the module's steps 1-3); session starts always start one."""
    session_start = np.asarray(session_start, dtype=bool)
    sims = gap_similarities(vectors, session_start, cfg.block)
    gap_pos = np.flatnonzero(~session_start)
    if gap_pos.size == 0:
        return np.flatnonzero(session_start)
    session = np.cumsum(session_start)[gap_pos]
    depth = depth_scores(sims[gap_pos], session)
    # A local maximum within the session: not below the previous gap, above the next (ties: first).
    same_prev = np.append(False, session[1:] == session[:-1])
    same_next = np.append(session[1:] == session[:-1], False)
    prev = np.where(same_prev, np.roll(depth, 1), -np.inf)
    nxt = np.where(same_next, np.roll(depth, -1), -np.inf)
    cutoff = depth.mean() - cfg.cutoff * depth.std()
    boundary = (depth >= prev) & (depth > nxt) & (depth > cutoff) & (depth > 0)
    return np.union1d(np.flatnonzero(session_start), gap_pos[boundary])


@dataclass(slots=True)
class _Index:
    units: UserIndex
    rows: np.ndarray  # stream position → unit row
    segment_of: np.ndarray  # stream position → segment
    segment_vectors: np.ndarray


class SeCom(ConfiguredMethod[SeComConfig]):
    """SeCom-style segment memory over the user's turns (see the module docstring).

    Args:
        embedder: the embedder.
        config: parameters (:class:`SeComConfig`); keyword overrides are applied on top.
    """

    name = "secom"
    config_class = SeComConfig

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._indexes: IndexCache[_Index] = IndexCache(self._build)

    def _build(self, store: Store, user_id: str) -> _Index:
        units = build_user_index(store, user_id)
        table = units.table
        rows = chronological_rows(units.masks["turn"], table.session_ids, table.turn_start,
                                  [s.session_id for s in store.list_sessions(user_id)] if len(table) else [])
        if not rows.size:
            return _Index(units, rows, np.zeros(0, dtype=np.int64), np.zeros((0, table.vectors.shape[1])))
        vectors = table.vectors[rows]
        session_start = run_starts(np.array([table.session_ids[r] for r in rows], dtype=object))
        segment_of = labels_from_starts(texttiling_starts(vectors, session_start, self.cfg), rows.size)
        return _Index(units, rows, segment_of, pooled(vectors, segment_of))

    def segments(self, store: Store, user_id: str) -> list[list[tuple[str, int]]]:
        """The user's segments in stream order, each as its turns ``(session id, turn index)``."""
        index = self._indexes.get(store, user_id)
        table = index.units.table
        out: list[list[tuple[str, int]]] = [[] for _ in range(len(index.segment_vectors))]
        for seg, r in zip(index.segment_of, index.rows):
            out[seg].append((table.session_ids[r], int(table.turn_start[r])))
        return out

    def score(self, store: Store, user_id: str, query: str, *, query_time: datetime | None = None) -> Scored:
        """Score the user's turns: each as its segment's similarity to the query."""
        index = self._indexes.get(store, user_id)
        scores = np.full(len(index.units.table), -np.inf)
        n = index.rows.size
        if n:
            qv = self.embed_query(query)
            scores[index.rows] = structure_scores(index.segment_vectors @ qv, index.segment_of, np.arange(n), n,
                                                  own=index.units.table.vectors[index.rows] @ qv)
        return Scored(index.units, scores)
