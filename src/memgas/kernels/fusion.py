"""Reciprocal-rank fusion (Cormack, Clarke and Buettcher, 2009): several rankings of the same items made one.

Each ranking gives an item ``weight / (k + rank)`` (rank from 1); an item a ranking omits gets nothing from
it. Zep's hybrid search fuses its BM25, cosine and graph rankings with equal weights; the rerank stage fuses
a method's ranking with a reranker's with weights that sum to 1.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

__all__ = ["reciprocal_rank_fusion"]


def reciprocal_rank_fusion(rankings: Sequence[np.ndarray | Sequence[int]], n: int, k: float = 60.0,
                           weights: Sequence[float] | None = None) -> np.ndarray:
    """RRF: ``sum over rankings of weight / (k + rank)`` (rank from 1) per item.

    Parameters
    ----------
    rankings : arrays of item indexes in ``range(n)``, best first (each may be partial).
    n : the number of items.
    k : the damping constant (60 in Cormack et al.).
    weights : one per ranking (default: 1 each).

    Returns
    -------
    A float array of length ``n`` (0 for items in no ranking).

    Examples
    --------
    >>> reciprocal_rank_fusion([[2, 0], [0, 1]], n=3, k=1.0).round(3).tolist()
    [0.833, 0.333, 0.5]
    """
    out = np.zeros(n)
    for ranking, weight in zip(rankings, weights if weights is not None else [1.0] * len(rankings), strict=True):
        r = np.asarray(ranking, dtype=np.int64)
        np.add.at(out, r, weight / (k + np.arange(1, len(r) + 1)))
    return out
