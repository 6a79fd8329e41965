"""From unit scores to ranked sessions: a method's scored units, the best unit per session, and the hits
with their best turns.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Collection, Mapping

import numpy as np

from memgas.core.types import Hit, TurnHit
from memgas.methods.index import UserIndex
from memgas.store import texts_of

__all__ = ["Scored", "Ranking", "session_hits", "rank_units", "sessions_within", "session_scores"]


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
    #: Per channel, its share of each session's evidence (a value per session of ``index``), when the method
    #: computes one (MemGAS): what each hit's :attr:`~memgas.core.types.Hit.channels` shows.
    channels: dict[str, np.ndarray] | None = None
    #: How many of the given stems (:func:`memgas.kernels.lexical.tokenize`'s) each turn's text holds, a value per
    #: row of ``index.masks["turn"]``, when the method's index knows it without reading the texts (MemGAS's BM25
    #: over the whole turns); ``None``: read the texts.
    turn_words: Callable[[Collection[str]], np.ndarray] | None = None


@dataclass(frozen=True, slots=True)
class Ranking:
    """Every session and every turn of a user, ranked for one query (for benchmarks)."""

    sessions: list[str]
    turns: list[tuple[str, int]]  # (session id, turn index)


def sessions_within(index: UserIndex, within: Collection[str]) -> np.ndarray:
    """A boolean per session of ``index``: whether its id is in ``within``."""
    keep = within if isinstance(within, (set, frozenset)) else set(within)
    return np.fromiter((sid in keep for sid in index.sessions), bool, len(index.sessions))


def session_scores(index: UserIndex, scores: np.ndarray) -> np.ndarray:
    """Each session's score: the best of its units' (``-inf`` for a session with none finite)."""
    out = np.full(len(index.sessions), -np.inf)
    np.maximum.at(out, index.session_of, scores)
    return out


def rank_units(index: UserIndex, scores: np.ndarray) -> Ranking:
    """Rank all sessions (by their best unit) and all turns (by their own score, then their session's).

    Turns a method did not score (``-inf``) follow in the order of their sessions, so a session-level
    method still yields a complete turn ranking.
    """
    session_score = session_scores(index, scores)
    order = np.argsort(-session_score, kind="stable")
    rows = index.masks["turn"]
    turn_score = scores[rows]
    turn_order = rows[np.lexsort((index.table.turn_start[rows], -session_score[index.session_of[rows]], -turn_score))]
    return Ranking(
        sessions=[index.sessions[s] for s in order],
        turns=[(index.table.session_ids[r], int(index.table.turn_start[r])) for r in turn_order],
    )


def _shares(channels: Mapping[str, np.ndarray], s: int) -> dict[str, float]:
    """Session ``s``'s evidence by channel, as fractions of it (summing to 1), the channels that gave none left out;
    ``{}`` when no channel found more in the session than in the user's average unit (it ranks by association, or
    as the best of few)."""
    given = {c: float(v[s]) for c, v in channels.items() if float(v[s]) > 0}
    total = sum(given.values())
    return {c: v / total for c, v in given.items()} if total > 0 else {}


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
    channels: dict[str, np.ndarray] | None = None,
) -> list[Hit]:
    """Map per-unit ``scores`` to the top ``k`` sessions (a session scores as its best unit).

    Each hit carries its best turns by the same scores. With ``seed`` (the per-unit seed scores of a
    graph method), a session that had no seed unit is marked as reached ``via_association``.
    ``relevance`` (per unit, in [0, 1]) gives each hit its :attr:`~memgas.core.types.Hit.relevance`: the
    best of its units', clipped to [0, 1]. Sessions whose relevance is below ``min_score`` are left
    out, and the ``k`` best of the others returned (the ranking itself is unchanged).
    """
    n = len(index.sessions)
    session_score = session_scores(index, scores)
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
    shown = []
    for s in order:
        if not np.isfinite(session_score[s]) or session_score[s] <= 0:
            break
        rows = turn_rows[index.session_of[turn_rows] == s]
        shown.append((s, rows[np.argsort(-scores[rows], kind="stable")[:turns_per_hit]]))
    texts = iter(texts_of(index.table.texts, [int(r) for _, best in shown for r in best]))  # one read for all hits
    hits = []
    for s, best in shown:
        sid = index.sessions[s]
        hits.append(
            Hit(
                session_id=sid,
                score=float(session_score[s]),
                timestamp=index.timestamps.get(sid),
                turns=[TurnHit(int(index.table.turn_start[r]), next(texts), float(scores[r])) for r in best],
                weights=dict(weights or {}),
                via_association=seed is not None and bool(session_seed[s] == 0),
                seed_score=float(session_seed[s]),
                method=method,
                relevance=float(session_relevance[s]),
                channels=_shares(channels or {}, s),
            )
        )
    return hits
