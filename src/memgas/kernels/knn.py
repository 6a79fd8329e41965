"""A sparse k-nearest-neighbour similarity graph over L2-normalised vectors, built in blocks.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

__all__ = ["knn_graph"]


def knn_graph(vectors: np.ndarray, k: int, threshold: float, block: int = 1024) -> sp.csr_matrix:
    """Symmetric graph linking each row to its ``k`` most similar other rows with cosine >= ``threshold``.

    Computed a block of rows at a time (memory ``block × n``); an edge found from either end is kept,
    weighted by the cosine.

    Args:
        vectors: ``(n, dim)`` L2-normalised rows.
        k: neighbours per row (>= 1).
        threshold: least cosine of an edge.
        block: rows per similarity block.

    Returns:
        ``(n, n)`` CSR matrix with no self-loops.
    """
    n = vectors.shape[0]
    kk = min(k, n - 1)
    if kk < 1:
        return sp.csr_matrix((n, n))
    src, dst, weight = [], [], []
    for start in range(0, n, block):
        sims = vectors[start:start + block] @ vectors.T
        local = np.arange(sims.shape[0])
        sims[local, start + local] = -np.inf
        top = np.argpartition(-sims, kk - 1, axis=1)[:, :kk]
        top_sims = np.take_along_axis(sims, top, axis=1)
        keep = top_sims >= threshold
        src.append(np.repeat(start + local, kk)[keep.ravel()])
        dst.append(top[keep])
        weight.append(top_sims[keep])
    a = sp.coo_matrix((np.concatenate(weight), (np.concatenate(src), np.concatenate(dst))), shape=(n, n)).tocsr()
    return a.maximum(a.T).tocsr()
