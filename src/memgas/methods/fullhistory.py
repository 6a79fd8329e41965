"""``full-history``: the reader sees the whole conversation history, newest kept when it does not fit.

The "full history" baseline of the MemGAS paper (Xu et al., 2025) and of LongMemEval (Wu et al., 2025):
no memory at all, every stored session given to the answer model in time order. When the history exceeds
the reader's window (minus the prompt and the answer), sessions are dropped from the oldest end and the
oldest one kept may lose its beginning (:func:`memgas.answer.fit_items` with ``keep_newest``), so the
budget is the answer model's own window. QA only: it ranks nothing, so retrieval metrics are undefined
(``score`` raises).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from memgas.core.types import MemoryItem, items_from_sessions
from memgas.methods.base import MemoryMethod
from memgas.methods.qa_memory import qa_only_error
from memgas.methods.ranking import Scored
from memgas.store import Store

__all__ = ["FullHistory"]


class FullHistory(MemoryMethod):
    """Every stored session of the user, oldest first, for the reader (see the module notes)."""

    name = "full-history"
    keep_newest = True

    def memory_items(self, store: Store, user_id: str, question: str, *, k: int = 5,
                     query_time: datetime | None = None) -> list[MemoryItem]:
        """All the user's sessions with their whole text, oldest first (``question`` and ``k`` unused)."""
        return items_from_sessions(store.get_session(user_id, i.session_id) for i in store.list_sessions(user_id))

    def score(self, store: Store, user_id: str, query: str, *, query_time: Any = None) -> Scored:
        """Refused: full history ranks nothing (see :func:`memgas.methods.qa_memory.qa_only_error`)."""
        raise qa_only_error(self.name)
