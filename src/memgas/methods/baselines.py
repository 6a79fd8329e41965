"""Honest baselines over the same store: dense retrieval at one granularity, and BM25.

``dense-<g>`` ranks sessions by their best unit of granularity ``g`` (same embedder and units as
MemGAS). ``bm25`` ranks sessions by their best user turn under BM25 (the bm25s library, English
stop words and Snowball stemming), the lexical setup of the LongMemEval reference code.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import bm25s
import numpy as np
import Stemmer

from ..embed import Embedder
from ..model import Granularity
from ..store import Store, UnitTable
from .base import IndexCache, MemoryMethod, Scored, UserIndex, build_user_index

__all__ = ["DenseMethod", "BM25Method", "tokenize", "bm25_scores"]

_STEMMER = Stemmer.Stemmer("english")


def tokenize(texts: list[str]) -> list[list[str]]:
    """Tokens of ``texts`` for BM25: lower-cased words, English stop words removed, Snowball-stemmed."""
    return bm25s.tokenize(texts, stopwords="en", stemmer=_STEMMER, return_ids=False, show_progress=False)


def bm25_scores(bm25: bm25s.BM25, query: str) -> np.ndarray:
    """BM25 scores of every indexed document for ``query`` (all zero when no query term is indexable)."""
    tokens = tokenize([query])[0]
    if not tokens:
        return np.zeros(bm25.scores["num_docs"], dtype=np.float64)
    return np.asarray(bm25.get_scores(tokens), dtype=np.float64)


class DenseMethod(MemoryMethod):
    """Dense retrieval over one granularity's units; a session scores as its best unit."""

    def __init__(self, embedder: Embedder, granularity: Granularity, **kwargs: Any) -> None:
        super().__init__(embedder, **kwargs)
        self.granularity = granularity
        self.name = f"dense-{granularity}"
        self._indexes: IndexCache[UserIndex] = IndexCache(build_user_index)

    def score(self, store: Store, user_id: str, query: str, *, query_time: datetime | None = None) -> Scored:
        index = self._indexes.get(store, user_id)
        rows = index.masks[self.granularity]
        scores = np.full(len(index.table), -np.inf)
        if rows.size:
            scores[rows] = index.table.vectors[rows] @ self.embed_query(query)
        return Scored(index, scores)

    def config(self) -> dict[str, Any]:
        return {**super().config(), "granularity": self.granularity}


@dataclass(slots=True)
class _BM25Index:
    docs: UserIndex  # one row per turn: its user-side text
    bm25: bm25s.BM25 | None


def _build_bm25(store: Store, user_id: str) -> _BM25Index:
    session_ids: list[str] = []
    starts: list[int] = []
    texts: list[str] = []
    timestamps = {}
    for info in store.list_sessions(user_id):
        timestamps[info.session_id] = info.timestamp
        for turn in store.get_session(user_id, info.session_id).turns:
            session_ids.append(info.session_id)
            starts.append(turn.index)
            texts.append(turn.user_text or turn.text)
    n = len(texts)
    i32 = np.asarray(starts, dtype=np.int32)
    table = UnitTable(
        np.arange(n, dtype=np.int64), tuple(session_ids), np.ones(n, dtype=np.int8), i32, i32 + 1,
        np.zeros(n, dtype=np.int32), tuple(texts), np.zeros((n, 0), dtype=np.float32),
    )
    pos: dict[str, int] = {}
    session_of = np.fromiter((pos.setdefault(s, len(pos)) for s in session_ids), np.int64, n)
    docs = UserIndex(table, session_of, tuple(pos), timestamps, {"turn": np.arange(n)})
    if n == 0:
        return _BM25Index(docs, None)
    bm25 = bm25s.BM25()
    bm25.index(tokenize(texts), show_progress=False)
    return _BM25Index(docs, bm25)


class BM25Method(MemoryMethod):
    """BM25 over the user side of every turn; a session scores as its best turn."""

    name = "bm25"

    def __init__(self, embedder: Embedder, **kwargs: Any) -> None:
        super().__init__(embedder, **kwargs)
        self._indexes: IndexCache[_BM25Index] = IndexCache(_build_bm25)

    def score(self, store: Store, user_id: str, query: str, *, query_time: datetime | None = None) -> Scored:
        index = self._indexes.get(store, user_id)
        if index.bm25 is None:
            return Scored(index.docs, np.zeros(0))
        return Scored(index.docs, bm25_scores(index.bm25, query))
