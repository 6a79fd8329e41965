"""Which stored session a derived value (an embedding, an LLM answer) was made for.

The caches of :mod:`memgas.embed` and :mod:`memgas.llm` keep what they compute across processes. To
let a delete forget a session completely, every cache row written while a session is being ingested
is tagged with that session's ``(user_id, session_id)``; deleting the session removes the tags and
every row no other session still uses. Ingest code wraps its work in :func:`source`; the caches read
:func:`current_source`.
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import Iterator

__all__ = ["source", "current_source"]

_SOURCE: ContextVar[tuple[str, str] | None] = ContextVar("memgas_source", default=None)


@contextmanager
def source(user_id: str, session_id: str) -> Iterator[None]:
    """Tag every cache row written inside this context (this thread or task) with the session."""
    token = _SOURCE.set((user_id, session_id))
    try:
        yield
    finally:
        _SOURCE.reset(token)


def current_source() -> tuple[str, str] | None:
    """The ``(user_id, session_id)`` being ingested, or ``None`` outside an ingest (e.g. a query)."""
    return _SOURCE.get()
