"""Honest baselines over the same store: dense retrieval at one granularity, and BM25.

``dense-<g>`` ranks sessions by their best unit of granularity ``g`` (same embedder and units as
MemGAS). ``bm25`` ranks sessions by their best turn under BM25 over the user's words (the corpus
of the LongMemEval reference code); ``bm25-all`` indexes every speaker (see :mod:`memgas.kernels.lexical`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import numpy as np

from memgas.core.errors import InvalidInputError
from memgas.core.types import Granularity
from memgas.embed.base import Embedder
from memgas.kernels.lexical import LexicalIndex
from memgas.methods.base import MemoryMethod
from memgas.methods.index import IndexCache, UserIndex, build_user_index, turn_docs, update_user_index
from memgas.methods.ranking import Scored
from memgas.store import Store

__all__ = ["DenseMethod", "BM25Method"]


class DenseMethod(MemoryMethod):
    """Dense retrieval over one granularity's units; a session scores as its best unit."""

    def __init__(self, embedder: Embedder, granularity: Granularity, **kwargs: Any) -> None:
        super().__init__(embedder, **kwargs)
        self.granularity = granularity
        self.name = f"dense-{granularity}"
        self._indexes: IndexCache[UserIndex] = IndexCache(build_user_index, update=update_user_index)

    def score(self, store: Store, user_id: str, query: str, *, query_time: datetime | None = None) -> Scored:
        index = self._indexes.get(store, user_id)
        rows = index.masks[self.granularity]
        scores = np.full(len(index.table), -np.inf)
        if rows.size:
            scores[rows] = index.table.vectors[rows] @ self.embed_query(query)
        return Scored(index, scores)

    def config(self) -> dict[str, Any]:
        return {**super().config(), "granularity": self.granularity}


class BM25Method(MemoryMethod):
    """BM25 over every turn; a session scores as its best turn.

    ``side="user"`` indexes only what the user said in each turn (the LongMemEval reference corpus);
    ``side="all"`` indexes every speaker (LoCoMo's conversations are between two people). Having no
    vectors, a hit's relevance is lexical: the largest share of the query's distinct tokens found in
    one of the session's turns (:meth:`memgas.kernels.lexical.LexicalIndex.coverage`). ``bm25_k1`` and
    ``bm25_b`` are BM25's parameters (bm25s's defaults, as the LongMemEval reference's BM25 uses).
    """

    def __init__(self, embedder: Embedder, side: str = "user", *, bm25_k1: float = 1.5, bm25_b: float = 0.75,
                 **kwargs: Any) -> None:
        super().__init__(embedder, **kwargs)
        if side not in ("user", "all"):
            raise InvalidInputError(f"side must be 'user' or 'all', not {side!r}")
        self.side = side
        self.k1, self.b = bm25_k1, bm25_b
        self.name = "bm25" if side == "user" else "bm25-all"
        self._indexes: IndexCache[tuple[UserIndex, LexicalIndex]] = IndexCache(self._build)

    def _build(self, store: Store, user_id: str) -> tuple[UserIndex, LexicalIndex]:
        docs = turn_docs(store, user_id, self.side)
        return docs, LexicalIndex(docs.table.texts, k1=self.k1, b=self.b)

    def score(self, store: Store, user_id: str, query: str, *, query_time: datetime | None = None) -> Scored:
        docs, lexical = self._indexes.get(store, user_id)
        return Scored(docs, lexical.scores(query), relevance=lexical.coverage(query))

    def config(self) -> dict[str, Any]:
        return {**super().config(), "side": self.side, "bm25_k1": self.k1, "bm25_b": self.b}
