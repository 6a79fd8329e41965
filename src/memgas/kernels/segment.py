"""Contiguous segments of a turn stream, and the scores that structures pass to the turns they cover.

Pure numeric helpers shared by the structured memory methods (:mod:`memgas.methods.sgmem`,
``memtree``, ``raptor``, ``episodic``, ``secom``). A user's turns are laid out as one chronological
stream (sessions oldest first, turns in order); a *segmentation* of the stream is given by the start
positions of its segments, so the segments cover every position exactly once by construction.

A structured method scores its own structures (chunks, tree nodes, events, segments) and hands
each turn the score of the best structure that contains it (:func:`structure_scores`); the memory
methods' shared ranking (:func:`memgas.methods.ranking.rank_units`) then ranks sessions by their best
turn.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from memgas.core.errors import InvalidInputError

__all__ = [
    "SELECTED_OFFSET",
    "TIE_WEIGHT",
    "chronological_rows",
    "run_starts",
    "fixed_chunks",
    "labels_from_starts",
    "starts_from_labels",
    "pooled",
    "structure_scores",
    "topic_starts",
]

#: Added to the score of a turn inside a *selected* structure (one the method retrieved), so that
#: such turns rank above every other turn: structure scores are cosine similarities, in [-1, 1].
SELECTED_OFFSET = 4.0
#: Weight of a turn's own similarity in its score: it orders the turns inside one structure and
#: is too small to reorder structures whose scores differ by more than ``2 * TIE_WEIGHT``.
TIE_WEIGHT = 1e-3


def chronological_rows(
    rows: np.ndarray, row_session: Sequence[str], turn_start: np.ndarray, sessions: Sequence[str]
) -> np.ndarray:
    """The turn rows of a unit table in stream order: sessions in the given order, turns in order.

    Args:
        rows: the table rows to order (a user's turn units).
        row_session: per table row, its session id.
        turn_start: per table row, its first turn index.
        sessions: the session ids, oldest first (e.g. from ``Store.list_sessions``).

    Returns:
        ``rows`` permuted into stream order.
    """
    rows = np.asarray(rows, dtype=np.int64)
    rank = {sid: i for i, sid in enumerate(sessions)}
    session_rank = np.fromiter((rank[row_session[r]] for r in rows), np.int64, rows.size)
    return rows[np.lexsort((np.asarray(turn_start)[rows], session_rank))]


def run_starts(keys: np.ndarray) -> np.ndarray:
    """Boolean mask of the positions where a new run of equal keys starts (position 0 always does)."""
    keys = np.asarray(keys)
    out = np.ones(keys.shape[0], dtype=bool)
    out[1:] = keys[1:] != keys[:-1]
    return out


def fixed_chunks(keys: np.ndarray, size: int) -> np.ndarray:
    """Cut each run of equal keys (a session) into consecutive chunks of ``size`` positions.

    The last chunk of a run may be shorter; no chunk spans two runs.

    Args:
        keys: per position, the run it belongs to (runs must be contiguous).
        size: positions per chunk (>= 1).

    Returns:
        Per position, its chunk number (0, 1, ... in stream order).

    Raises:
        InvalidInputError: ``size`` below 1.
    """
    if size < 1:
        raise InvalidInputError(f"chunk size must be at least 1, got {size}")
    starts = run_starts(keys)
    n = starts.size
    run_begin = np.maximum.accumulate(np.where(starts, np.arange(n), 0))
    chunk_start = starts | ((np.arange(n) - run_begin) % size == 0)
    return np.cumsum(chunk_start) - 1


def labels_from_starts(starts: np.ndarray, n: int) -> np.ndarray:
    """Per position, the segment it belongs to, from the segments' start positions.

    Args:
        starts: strictly increasing start positions, the first one 0, all below ``n``.
        n: stream length (>= 1).

    Returns:
        ``int64`` labels ``0 .. len(starts) - 1``; every position has exactly one.

    Raises:
        InvalidInputError: the starts do not describe a segmentation of ``range(n)``.
    """
    starts = np.asarray(starts, dtype=np.int64)
    if n < 1 or starts.ndim != 1 or starts.size == 0 or starts[0] != 0 or starts[-1] >= n \
            or np.any(np.diff(starts) <= 0):
        raise InvalidInputError(f"segment starts {starts.tolist()[:8]} do not segment a stream of {n}")
    flags = np.zeros(n, dtype=np.int64)
    flags[starts] = 1
    return np.cumsum(flags) - 1


def starts_from_labels(labels: np.ndarray) -> np.ndarray:
    """The start positions of the runs of equal labels (inverse of :func:`labels_from_starts`)."""
    return np.flatnonzero(run_starts(labels))


def pooled(vectors: np.ndarray, labels: np.ndarray, n_groups: int | None = None) -> np.ndarray:
    """The re-normalised mean vector of each group of rows (a zero mean stays zero).

    Args:
        vectors: ``(n, dim)`` L2-normalised rows.
        labels: per row, its group in ``0 .. n_groups - 1``.
        n_groups: number of groups (default ``labels.max() + 1``).

    Returns:
        ``(n_groups, dim)`` float32 matrix.
    """
    labels = np.asarray(labels, dtype=np.int64)
    k = int(labels.max()) + 1 if n_groups is None else n_groups
    out = np.zeros((k, vectors.shape[1]), dtype=np.float64)
    np.add.at(out, labels, vectors)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return (out / np.where(norms > 0, norms, 1.0)).astype(np.float32)


def structure_scores(
    struct_score: np.ndarray,
    member_struct: np.ndarray,
    member_unit: np.ndarray,
    n_units: int,
    *,
    selected: np.ndarray | None = None,
    own: np.ndarray | None = None,
) -> np.ndarray:
    """Score units (turns) by the structures that contain them.

    A unit scores as the best structure containing it. With ``selected`` (the structures the method
    retrieved), a unit in a selected structure scores as the best *selected* structure containing
    it plus :data:`SELECTED_OFFSET`, so it ranks above every unit outside the retrieved set, which
    still follows in structure order (a complete ranking for the benchmarks). With ``own``,
    ``TIE_WEIGHT * own`` is added, so inside one structure the units most similar on their own
    come first.

    Args:
        struct_score: per structure, its (finite) score.
        member_struct, member_unit: the membership pairs (structure, unit); a unit may be in several
            structures (a tree node and its ancestors), a structure holds one or more units.
        n_units: number of units.
        selected: optional boolean mask over structures.
        own: optional per-unit score.

    Returns:
        Per unit, its score; ``-inf`` for a unit in no structure.
    """
    member_struct = np.asarray(member_struct, dtype=np.int64)
    member_unit = np.asarray(member_unit, dtype=np.int64)
    member_score = np.asarray(struct_score, dtype=np.float64)[member_struct]
    best = np.full(n_units, -np.inf)
    np.maximum.at(best, member_unit, member_score)
    if selected is not None:
        sel = np.asarray(selected, dtype=bool)[member_struct]
        best_selected = np.full(n_units, -np.inf)
        np.maximum.at(best_selected, member_unit[sel], member_score[sel])
        best = np.where(np.isfinite(best_selected), best_selected + SELECTED_OFFSET, best)
    if own is not None:
        best = best + TIE_WEIGHT * np.asarray(own, dtype=np.float64)
    return best


def topic_starts(vectors: np.ndarray, shift: float) -> np.ndarray:
    """Where a new subject starts in a run of turns: the positions whose vector's cosine with the mean of the
    current subject's turns falls below ``shift`` (position 0 always starts one).

    Args:
        vectors: ``(n, dim)`` L2-normalised turn vectors, in conversation order.
        shift: the cosine below which a turn leaves the subject under way.

    Returns:
        The start positions, ascending.

    >>> v = np.array([[1, 0], [0.9, 0.436], [0, 1], [0.1, 0.995]], np.float32)
    >>> topic_starts(v, 0.5).tolist()
    [0, 2]
    """
    vectors = np.asarray(vectors, np.float32)
    if len(vectors) == 0:
        return np.zeros(0, np.int64)
    starts = [0]
    total = vectors[0].astype(np.float64)
    for i in range(1, len(vectors)):
        norm = float(np.linalg.norm(total))
        if norm == 0.0 or float(vectors[i] @ total) / norm < shift:
            starts.append(i)
            total = vectors[i].astype(np.float64)
        else:
            total = total + vectors[i]
    return np.asarray(starts, np.int64)
