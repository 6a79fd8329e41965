"""The anchors a user would pick instead of a memory engine: a vector store over messages, and a vector + BM25
hybrid over messages.

Each message is one document, ``speaker: text`` (the speaker is its name, else its role), embedded with the same
model as every other method. ``vector-messages`` ranks the messages by cosine with the query; ``hybrid-messages``
fuses that ranking with BM25's over the same texts by reciprocal rank fusion (k = 60, equal weights: what
MemPalace's search and Zep's hybrid do). A session ranks as its best message, a turn as its best message.

Their context (:meth:`MessageMethod.context`) is what such a store gives an agent: the best messages, one dated
line each, until the budget.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np

from memgas.core.types import speaker_line
from memgas.embed.base import Embedder
from memgas.kernels.fusion import reciprocal_rank_fusion
from memgas.kernels.lexical import LexicalIndex
from memgas.kernels.text import lines_within
from memgas.methods.base import MemoryMethod
from memgas.methods.index import IndexCache, UserIndex
from memgas.methods.ranking import Ranking, Scored
from memgas.store import Store, UnitTable

__all__ = ["MessageMethod", "MessageIndex"]

#: The header of a message store's context (the same words as the other methods' plain contexts).
HEADER = "Memories from earlier conversations (most relevant first):"


@dataclass(frozen=True, slots=True)
class MessageIndex:
    """One row per stored message: ``index`` (its session, turn and ``speaker: text``; ``table.chunk`` holds the
    message's position in its session), the messages' vectors, and BM25 over the same texts."""

    index: UserIndex
    lexical: LexicalIndex


def build_message_index(store: Store, user_id: str, embedder: Embedder) -> MessageIndex:
    """Every message of ``user_id`` as a document, embedded (the embedder's cache answers for texts seen before)."""
    session_ids: list[str] = []
    turns: list[int] = []
    positions: list[int] = []
    texts: list[str] = []
    timestamps = {}
    for info in store.list_sessions(user_id):
        timestamps[info.session_id] = info.timestamp
        for turn in store.get_session(user_id, info.session_id).turns:
            for offset, m in enumerate(turn.messages):
                session_ids.append(info.session_id)
                turns.append(turn.index)
                positions.append(turn.msg_start + offset)
                texts.append(speaker_line(m.role, m.name, m.content))
    n = len(texts)
    vectors = embedder.embed(texts) if n else np.zeros((0, embedder.dim), np.float32)
    t32 = np.asarray(turns, dtype=np.int32)
    table = UnitTable(np.arange(n, dtype=np.int64), tuple(session_ids), np.ones(n, dtype=np.int8), t32, t32 + 1,
                      np.asarray(positions, dtype=np.int32), tuple(texts), np.asarray(vectors, np.float32))
    pos: dict[str, int] = {}
    session_of = np.fromiter((pos.setdefault(s, len(pos)) for s in session_ids), np.int64, n)
    return MessageIndex(UserIndex(table, session_of, tuple(pos), timestamps, {"turn": np.arange(n)}),
                        LexicalIndex(texts))


def _day(stamp: datetime | None) -> str:
    return f"{stamp:%Y-%m-%d}" if stamp else "undated"


class MessageMethod(MemoryMethod):
    """A plain message store: ``hybrid=False`` ranks messages by cosine (``vector-messages``), ``hybrid=True`` by
    the reciprocal rank fusion of cosine and BM25 (``hybrid-messages``)."""

    def __init__(self, embedder: Embedder, hybrid: bool = False, **kwargs: Any) -> None:
        super().__init__(embedder, **kwargs)
        self.hybrid = hybrid
        self.name = "hybrid-messages" if hybrid else "vector-messages"
        self._indexes: IndexCache[MessageIndex] = IndexCache(
            lambda store, user_id: build_message_index(store, user_id, self.embedder))

    def message_index(self, store: Store, user_id: str) -> MessageIndex:
        """The user's messages as this method indexes them (built once, then kept per store and user)."""
        return self._indexes.get(store, user_id)

    def score(self, store: Store, user_id: str, query: str, *, query_time: datetime | None = None) -> Scored:
        built = self.message_index(store, user_id)
        index = built.index
        cosine = index.table.vectors @ self.embed_query(query) if len(index.table) else np.zeros(0)
        if not self.hybrid or len(cosine) == 0:
            return Scored(index, cosine, relevance=cosine)
        lexical = built.lexical.scores(query)
        by_words = np.argsort(-lexical, kind="stable")[: int(np.count_nonzero(lexical > 0))]
        fused = reciprocal_rank_fusion([np.argsort(-cosine, kind="stable"), by_words], len(cosine))
        return Scored(index, fused, relevance=cosine)

    def rank(self, store: Store, user_id: str, query: str, *, query_time: datetime | None = None) -> Ranking:
        """Sessions by their best message, turns by their best message (each turn once)."""
        s = self._with_stages(lambda q: self.score(store, user_id, q, query_time=query_time), query)
        order = np.argsort(-s.scores, kind="stable")
        table = s.index.table
        sessions = list(dict.fromkeys(table.session_ids[r] for r in order))
        turns = list(dict.fromkeys((table.session_ids[r], int(table.turn_start[r])) for r in order))
        return Ranking(sessions, turns)

    def context(self, store: Store, user_id: str, query: str, *, max_tokens: int,
                query_time: datetime | None = None) -> str:
        """The best messages, one dated line each (``[n] date · session · speaker: text``), until ``max_tokens``;
        the first that does not fit is cut at a word to what is left and ends the block."""
        s = self.score(store, user_id, query, query_time=query_time)
        table, stamps = s.index.table, s.index.timestamps
        return lines_within(HEADER, (f"[{n}] {_day(stamps.get(table.session_ids[r]))} · {table.session_ids[r]} · "
                                     f"{table.texts[r]}"
                                     for n, r in enumerate(np.argsort(-s.scores, kind="stable"), start=1)),
                            max_tokens)

    def config(self) -> dict[str, Any]:
        return {**super().config(), "hybrid": self.hybrid, "rrf_k": 60}
