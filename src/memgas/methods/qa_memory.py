"""What a method that answers from its own memory (not from retrieved sessions) offers ``bench --qa``.

Some baselines of the MemGAS paper keep a memory that is not a ranking of the stored sessions: a running
summary (RecurSum), a compressed profile (COMEDY), or the raw history itself (full history). For question
answering they hand the reader that memory as :class:`memgas.core.types.MemoryItem` s through
:meth:`MemoryFromMethod.memory_items`; ``bench --qa`` then answers with the same reader and judge prompts
as for every other system. Methods whose memory maps to no session ranking are *QA only*: their
``score`` raises :func:`qa_only_error`, so a retrieval benchmark never reports numbers for them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol, runtime_checkable

from memgas.core.errors import InvalidInputError
from memgas.core.types import MemoryItem
from memgas.store import Store

__all__ = ["MemoryFromMethod", "qa_only_error"]


@runtime_checkable
class MemoryFromMethod(Protocol):
    """A method that answers from its own memory (see the module notes).

    ``keep_newest``: when the items exceed the reader's window, drop the oldest (a history) rather than
    cut every item to a fair share (a set of retrieved items).
    """

    keep_newest: bool

    def memory_items(self, store: Store, user_id: str, question: str, *, k: int = 5,
                     query_time: datetime | None = None) -> list[MemoryItem]:
        """The memory shown to the reader for ``question``."""


def qa_only_error(name: str) -> InvalidInputError:
    """The error a QA-only method raises when asked to rank sessions."""
    return InvalidInputError(f"method {name!r} is QA only: its memory does not rank sessions, so retrieval metrics "
                             f"are undefined; run it with `memgas bench <dataset> --qa --qa-systems {name}`")
