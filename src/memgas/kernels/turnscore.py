"""Turns ranked by their own evidence inside their session's score, as a pure function.

A graph method scores every unit (PageRank plus its session's evidence), and a session ranks as its
best unit. Scoring turns the same way lifts every turn of a strong session by what its *other* units
gathered (PageRank mass flows from a session's chunk to all its turns), so the second-best session's
best turn falls below the best session's weakest turns. :func:`own_turn_scores` gives each turn a
score of its own (e.g. its seed plus its session's evidence) while every session keeps its score:

* a turn's new score is capped at its session's score (a turn never outranks its session);
* the *carrier* units of a session (its chunks) take the session's score, so its best unit, and with
  it the session ranking, stays exactly what it was.
"""

from __future__ import annotations

import numpy as np

from memgas.core.errors import InvalidInputError

__all__ = ["own_turn_scores"]


def own_turn_scores(
    scores: np.ndarray,
    session_of: np.ndarray,
    n_sessions: int,
    turn_rows: np.ndarray,
    turn_scores: np.ndarray,
    carrier_rows: np.ndarray,
) -> np.ndarray:
    """Unit scores with the turns re-scored by ``turn_scores`` and every session's best score unchanged.

    Parameters:
        scores: ``(n,)`` finite unit scores; a session's score is the max over its units.
        session_of: ``(n,)`` session position of each unit, in ``[0, n_sessions)``.
        n_sessions: number of sessions.
        turn_rows: rows of the turn units (distinct).
        turn_scores: ``(len(turn_rows),)`` the turns' own scores.
        carrier_rows: rows (not turns) that carry their session's score; a session without one keeps
            the max of its other units, which may then be lower than before.

    Returns:
        A new ``(n,)`` array: turns get ``min(turn_score, session score)``, carriers the session score,
        every other unit its old score.

    Raises:
        InvalidInputError: shapes disagree, non-finite scores, or a session index out of range.
    """
    scores = np.asarray(scores, dtype=np.float64)
    turn_scores = np.asarray(turn_scores, dtype=np.float64)
    n = scores.shape[0]
    if scores.ndim != 1 or session_of.shape != (n,) or turn_scores.shape != turn_rows.shape:
        raise InvalidInputError("scores, session_of and the turn rows/scores must be 1-D and agree in length")
    if not (np.isfinite(scores).all() and np.isfinite(turn_scores).all()):
        raise InvalidInputError("scores must be finite")
    if n and (session_of.min() < 0 or session_of.max() >= n_sessions):
        raise InvalidInputError(f"session_of must lie in [0, {n_sessions})")
    session_score = np.full(n_sessions, -np.inf)
    np.maximum.at(session_score, session_of, scores)
    out = scores.copy()
    out[turn_rows] = np.minimum(turn_scores, session_score[session_of[turn_rows]])
    out[carrier_rows] = session_score[session_of[carrier_rows]]
    return out
