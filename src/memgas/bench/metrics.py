"""Retrieval metrics of LongMemEval and LoCoMo, as their official evaluation code computes them.

Pure functions over ranked id lists; ids are any hashable (session ids, ``(session_id, turn)``
pairs, official turn-id strings).

References:
    LongMemEval, ``src/retrieval/eval_utils.py`` (``evaluate_retrieval``, ``ndcg``,
    ``evaluate_retrieval_turn2session``), github.com/xiaowu0162/LongMemEval.
    LoCoMo, ``task_eval/evaluation.py`` (``eval_question_answering``, recall part),
    github.com/snap-research/LoCoMo.
"""

from __future__ import annotations

import re
from numbers import Real
from typing import Any, Collection, Hashable, Mapping, Sequence, TypeGuard

import numpy as np

from memgas.core.errors import InvalidInputError

__all__ = [
    "LME_KS",
    "dcg",
    "recall_any_at_k",
    "recall_all_at_k",
    "ndcg_any_at_k",
    "retrieval_scores",
    "newest_first",
    "sessions_from_turn_ranking",
    "session_scores_from_turns",
    "locomo_recall",
    "aggregate",
]

#: The cutoffs LongMemEval reports.
LME_KS: tuple[int, ...] = (1, 3, 5, 10, 30, 50)

_SESSION_ID = re.compile(r"S(\d+)")
_DIA_ID = re.compile(r"D(\d+):(\d+)")


def _check_k(k: int) -> int:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InvalidInputError(f"invalid k {k!r}: expected a positive integer")
    return k


def dcg(relevances: Sequence[float] | np.ndarray, k: int) -> float:
    """Discounted cumulative gain of the first ``k`` relevances, in LongMemEval's form.

    ``DCG = rel_1 + sum_{i=2..k} rel_i / log2(i)`` (the first position is not discounted).
    """
    rel = np.asarray(relevances, dtype=np.float64)[: _check_k(k)]
    if rel.size == 0:
        return 0.0
    return float(rel[0] + np.sum(rel[1:] / np.log2(np.arange(2, rel.size + 1))))


def recall_any_at_k(ranked_ids: Sequence[Hashable], gold: Collection[Hashable], k: int) -> float:
    """1.0 if any gold id is among the first ``k`` ranked ids, else 0.0 (0.0 for empty gold)."""
    top = set(ranked_ids[: _check_k(k)])
    return float(any(g in top for g in gold))


def recall_all_at_k(ranked_ids: Sequence[Hashable], gold: Collection[Hashable], k: int) -> float:
    """1.0 if every gold id is among the first ``k`` ranked ids, else 0.0.

    As in the official code, empty gold gives 1.0 (``all([])``); such questions are not scorable.
    """
    top = set(ranked_ids[: _check_k(k)])
    return float(all(g in top for g in gold))


def _ndcg(relevant: np.ndarray, n_relevant: int, k: int) -> float:
    """nDCG@k of a boolean relevance vector when ``n_relevant`` relevant items exist in all."""
    ideal = dcg(np.ones(min(n_relevant, k)), k) if n_relevant else 0.0
    return dcg(relevant, k) / ideal if ideal > 0 else 0.0


def ndcg_any_at_k(ranked_ids: Sequence[Hashable], gold: Collection[Hashable], k: int) -> float:
    """LongMemEval's ``ndcg_any@k``: binary-relevance nDCG of the first ``k`` ranked ids.

    Each ranked position is relevant when its id is in ``gold``. The ideal DCG is the DCG of the
    ideal ordering of all relevance labels, i.e. of ``min(R, k)`` ones, where ``R`` is the number of
    relevant positions. Officially the whole corpus is ranked, so ``R`` counts every relevant corpus
    entry; here ``R = max(relevant positions in ranked_ids, len(gold))``, which is the same number
    for a full ranking and still counts gold ids that a truncated ranking left out.
    A repeated id scores at each of its positions, as a repeated corpus id does officially.

    Returns:
        DCG / IDCG, or 0.0 when there is no gold.
    """
    _check_k(k)
    gold = set(gold)
    relevant = np.fromiter((i in gold for i in ranked_ids), dtype=bool, count=len(ranked_ids))
    return _ndcg(relevant, max(int(relevant.sum()), len(gold)), k)


def retrieval_scores(
    ranked_ids: Sequence[Hashable], gold: Collection[Hashable], ks: Sequence[int] = LME_KS
) -> dict[str, float]:
    """``recall_any@k``, ``recall_all@k`` and ``ndcg_any@k`` for every ``k`` in ``ks``, in one dict."""
    out: dict[str, float] = {}
    for k in ks:
        out[f"recall_any@{k}"] = recall_any_at_k(ranked_ids, gold, k)
        out[f"recall_all@{k}"] = recall_all_at_k(ranked_ids, gold, k)
        out[f"ndcg_any@{k}"] = ndcg_any_at_k(ranked_ids, gold, k)
    return out


def newest_first(ranked_ids: Sequence[Hashable], gold_by_time: Sequence[Hashable]) -> float:
    """1.0 when the newest gold session (the last of ``gold_by_time``, oldest first) ranks above every other gold
    session in ``ranked_ids``, else 0.0 (a gold session missing from the ranking ranks below all that are there).

    The project's own measure of "the latest state first" (not an official metric): on questions whose evidence
    spans an old and a new session, whether the new one leads.

    Raises:
        InvalidInputError: fewer than two gold sessions.
    """
    if len(gold_by_time) < 2:
        raise InvalidInputError("newest_first needs at least two gold sessions")
    rank = {sid: i for i, sid in enumerate(ranked_ids)}
    place = [rank.get(sid, len(ranked_ids) + 1) for sid in gold_by_time]
    return float(place[-1] < min(place[:-1]))


def _session_of(turn_id: Hashable) -> Hashable:
    """The session of a turn: ``(session_id, turn)`` → ``session_id``; ``"<sid>_<n>"`` → ``"<sid>"``."""
    if isinstance(turn_id, tuple):
        return turn_id[0]
    if isinstance(turn_id, str) and "_" in turn_id:
        return turn_id.rsplit("_", 1)[0]  # the official strip_turn_id
    raise InvalidInputError(f"invalid turn id {turn_id!r}: expected (session_id, turn) or '<session_id>_<n>'")


def _cutoff(keys: Sequence[Hashable], k: int) -> int:
    """Length of the shortest prefix of ``keys`` with ``k`` distinct values (all of it if fewer)."""
    seen: set[Hashable] = set()
    for i, key in enumerate(keys):
        seen.add(key)
        if len(seen) >= k:
            return i + 1
    return len(keys)


def sessions_from_turn_ranking(ranked_turn_ids: Sequence[Hashable], k: int) -> list[Hashable]:
    """The sessions of a turn ranking, cut by the official rule: the top turns that cover ``k``
    distinct sessions, mapped to their sessions, deduplicated in rank order.

    Turn ids are ``(session_id, turn)`` pairs or official strings ``<session_id>_<n>``.

    Returns:
        At most ``k`` session ids (fewer when the ranking covers fewer sessions).
    """
    _check_k(k)
    sessions = [_session_of(t) for t in ranked_turn_ids]
    return list(dict.fromkeys(sessions[: _cutoff(sessions, k)]))


def session_scores_from_turns(
    ranked_turn_ids: Sequence[Hashable], gold_turns: Collection[Hashable], ks: Sequence[int] = LME_KS
) -> dict[str, float]:
    """Session-level LongMemEval scores of a turn ranking (official ``evaluate_retrieval_turn2session``).

    Officially, in an answer session only the user turns with ``has_answer`` keep the ``answer`` id;
    the others are renamed ``noans_*``, so after stripping the turn number they map to a different
    "session". Hence, for each ``k``: a ranked turn of a gold session that is not itself a gold turn
    counts as a distinct, non-gold session; the cutoff grows until the top turns cover ``k`` distinct
    such sessions; recall_any/recall_all ask whether the gold sessions (those of ``gold_turns``) are
    reached by a gold turn in that prefix; ndcg_any scores each gold turn in it (a session reached
    twice scores twice), against ``len(gold_turns)`` relevant items.

    Args:
        ranked_turn_ids: turns, best first: ``(session_id, turn)`` pairs or ``<session_id>_<n>`` strings.
        gold_turns: the gold turns, as the same kind of id.
        ks: the cutoffs, in distinct sessions.

    Returns:
        ``{"recall_any@k", "recall_all@k", "ndcg_any@k"}`` for each ``k``.
    """
    gold_turns = set(gold_turns)
    gold_sessions = {_session_of(t) for t in gold_turns}
    keys: list[Hashable] = []
    for t in ranked_turn_ids:
        s = _session_of(t)
        keys.append(s if t in gold_turns or s not in gold_sessions else ("noans", s))
    relevant = np.fromiter((t in gold_turns for t in ranked_turn_ids), dtype=bool, count=len(keys))
    n_relevant = max(int(relevant.sum()), len(gold_turns))
    out: dict[str, float] = {}
    for k in ks:
        cut = _cutoff(keys, _check_k(k))
        reached = set(keys[:cut])
        out[f"recall_any@{k}"] = float(any(s in reached for s in gold_sessions))
        out[f"recall_all@{k}"] = float(all(s in reached for s in gold_sessions))
        out[f"ndcg_any@{k}"] = _ndcg(relevant, n_relevant, cut) if cut else 0.0
    return out


def locomo_recall(retrieved: Collection[str], evidence: Collection[str]) -> float:
    """LoCoMo's retrieval recall: the fraction of evidence ids the retrieved context covers.

    An evidence id ``D<n>:<t>`` is covered when it is itself retrieved (dialogue-level retrieval)
    or when its session ``S<n>`` is (session-level retrieval). Evidence ids are counted as given
    (a list with a repeat counts it twice, as officially). Empty evidence gives 1.0, as officially.

    Raises:
        InvalidInputError: an evidence id is not of the form ``D<n>:<t>``.
    """
    if not evidence:
        return 1.0
    got = set(retrieved)
    sessions = {int(m.group(1)) for r in got if (m := _SESSION_ID.fullmatch(r))}
    hits = 0
    for ev in evidence:
        m = _DIA_ID.fullmatch(ev)
        if not m:
            raise InvalidInputError(f"invalid LoCoMo evidence id {ev!r}: expected D<session>:<turn>")
        hits += ev in got or int(m.group(1)) in sessions
    return hits / len(evidence)


def _is_number(v: object) -> TypeGuard[Real]:
    return isinstance(v, Real) and not isinstance(v, bool)


def aggregate(
    per_question: Sequence[Mapping[str, Any]], by: str | None = None, metrics: Sequence[str] | None = None
) -> dict[str, Any]:
    """Mean of each metric over questions, overall and per group, with the counts.

    Args:
        per_question: one dict per question, e.g. ``{"qtype": ..., "recall_any@5": 1.0, ...}``.
        by: the key to group by (e.g. ``"qtype"``), or None for the overall means only.
        metrics: the keys to average; default: every key (other than ``by``) whose value is a
            number (not a bool) in every row.

    Returns:
        ``{"overall": {"n": N, metric: mean, ...}, "by": by, "groups": {group: {"n": n_g, metric: mean, ...}}}``,
        groups sorted by name (``groups`` is empty when ``by`` is None); with no rows, ``overall`` is ``{"n": 0}``.

    Raises:
        InvalidInputError: a named metric is missing or not a number in some row, or a row lacks ``by``.
    """
    if metrics is None:
        names = [k for k, v in per_question[0].items() if k != by and _is_number(v)] if per_question else []
        metrics = [m for m in names if all(_is_number(row.get(m)) for row in per_question)]
    values = np.empty((len(per_question), len(metrics)))
    for i, row in enumerate(per_question):
        for j, m in enumerate(metrics):
            v = row.get(m)
            if not _is_number(v):
                raise InvalidInputError(f"row {i}: metric {m!r} is {v!r}, not a number")
            values[i, j] = float(v)

    def summary(rows: list[int]) -> dict[str, Any]:
        means = values[rows].mean(axis=0) if rows else ()
        return {"n": len(rows), **{m: float(x) for m, x in zip(metrics, means)}}

    groups: dict[str, list[int]] = {}
    if by is not None:
        for i, row in enumerate(per_question):
            if by not in row:
                raise InvalidInputError(f"row {i} has no {by!r} to group by")
            groups.setdefault(str(row[by]), []).append(i)
    return {
        "overall": summary(list(range(len(per_question)))),
        "by": by,
        "groups": {g: summary(ix) for g, ix in sorted(groups.items())},
    }
