"""Which standing statements the user card shows for a request: a learned choice (issue 61).

Every standing statement of the user's profile (:class:`memgas.context.profile.Profiles`) is a candidate for the card
of a request. Each is described by :data:`CARD_FEATURES`: its relevance to the request (the greater of its text's
and its condition's cosine) and its rank by it, whether the request bears on its subject
(:func:`memgas.kernels.subjects.bearing`) and whether it is among the subject's nearest statements, its kind, its
length, the rank of its session among the method's for the request (a memory of many people, subjects or projects
holds many statements near a request; the sessions the method finds for it say whose and which), and how the request
reads. A logistic regression (:class:`memgas.context.select.Selection` over these features) gives each its
probability of being what the request needs; the card takes them by that probability per token (see
:attr:`memgas.context.assemble.ContextOptions.card_cost`) within its share of the budget. None is left out for being
unlikely: on BEAM, leaving out those below a probability of 0.05, whose room the evidence then took, lost more of
the gold than it gained (BENCHMARKS.md).

The weights are data (``memgas/data/card.npz``), fitted by ``memgas bench card`` on the gold evidence of BEAM's
development conversations, each conversation a user and all of them one user; that command reports them out of fold
(BENCHMARKS.md).
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Sequence

import numpy as np

from memgas.context.select import Selection, rank_feature

__all__ = ["CARD_FEATURES", "card_features", "shipped_card"]

#: What describes a standing statement for a request, in the model's order.
CARD_FEATURES = ("relevance", "relevance rank", "subject bearing", "leads its subject", "an instruction",
                 "a preference", "tokens (log)", "session rank", "session rank times relevance", "asks across time",
                 "asks about the past", "asks about now")


def card_features(relevance: np.ndarray, bears: np.ndarray, lead: np.ndarray, kinds: Sequence[str],
                  tokens: Sequence[int], session_ranks: Sequence[float], mode: str) -> np.ndarray:
    """The :data:`CARD_FEATURES` of each statement (one row each): its ``relevance`` to the request, the subject's
    probability where the request ``bears`` on it, the same where it ``lead``\\ s its subject, its kind
    (``"instruction"``, ``"preference"``, ``"fact"``), its line's ``tokens``, its session's rank among the method's
    (0 the best; ``inf`` where the method scored none of it) and the request's reading (``mode``:
    :func:`memgas.context.question.context_mode`).

    >>> X = card_features(np.array([0.5, 0.2]), np.zeros(2), np.zeros(2), ["instruction", "fact"], [20, 40],
    ...                   [0, math.inf], "now")
    >>> X.shape, float(X[0, 7]), float(X[1, 7]), float(X[0, 11])
    ((2, 12), 1.0, 0.0, 1.0)
    """
    n = len(relevance)
    order = np.argsort(-relevance, kind="stable")
    rank = np.empty(n)
    rank[order] = np.arange(n)
    session = np.array([0.0 if math.isinf(r) else rank_feature(r) for r in session_ranks], np.float64)
    kind = np.asarray(kinds, dtype=object)
    return np.column_stack([
        relevance, 1.0 / np.log2(2.0 + rank), bears, lead, kind == "instruction", kind == "preference",
        np.log1p(np.asarray(tokens, np.float64)) / 8.0, session, session * relevance,
        np.full(n, mode == "time"), np.full(n, mode == "past"), np.full(n, mode == "now"),
    ]).astype(np.float32).reshape(n, len(CARD_FEATURES))


@lru_cache(maxsize=1)
def shipped_card() -> Selection:
    """The card's model ``memgas/data/card.npz`` ships, read once."""
    return Selection.load(features=CARD_FEATURES, shipped="card.npz")
