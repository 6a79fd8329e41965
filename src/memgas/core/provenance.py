"""Which stored sessions a derived value (an embedding, an LLM answer) was made from.

The caches of :mod:`memgas.embed` and :mod:`memgas.llm` keep what they compute across processes. To
let a delete forget a session completely, every cache row written or reused inside :func:`source` is
tagged with the sessions it was made from: a session being ingested, the retrieved sessions of an
``answer`` prompt, the sessions behind the facts of a zep community summary.

A row's tags form *uses*. One ``source`` block is one use: a row made from one session is needed
while that session exists; a row made from several at once (a prompt showing all of them) holds the
content of each, so its use ends when *any* of them is deleted. A row is kept while one use (or the
untagged mark of a use outside any source) remains, so text two sessions each produced stays until
both are deleted, while an answer over two sessions goes with the first. In the caches' ``sources``
tables a use is the rows sharing a ``use`` id: ``''`` for a one-session use, :func:`use_id` otherwise.
"""

from __future__ import annotations

import hashlib
import json
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Iterator

__all__ = ["source", "current_source", "current_tags", "use_id"]

_SOURCE: ContextVar[tuple[str, tuple[str, ...]] | None] = ContextVar("memgas_source", default=None)


@contextmanager
def source(user_id: str, *session_ids: str) -> Iterator[None]:
    """Tag every cache row written or reused inside this context (this thread or task) with one use of
    the sessions (see the module notes).

    With no session (an ``answer`` prompt that retrieved nothing) rows are written as outside any
    source: they hold no session's content, so they get the untagged mark.
    """
    token = _SOURCE.set((user_id, tuple(dict.fromkeys(session_ids))) if session_ids else None)
    try:
        yield
    finally:
        _SOURCE.reset(token)


def current_source() -> tuple[str, tuple[str, ...]] | None:
    """``(user_id, session ids)`` whose content is being used (each id once, in order), or ``None``
    outside any :func:`source` (e.g. a search query)."""
    return _SOURCE.get()


def use_id(user_id: str, session_ids: tuple[str, ...]) -> str:
    """The ``use`` column of a use of ``session_ids``: ``''`` for one session, else a digest of the set."""
    if len(session_ids) == 1:
        return ""
    return hashlib.sha256(json.dumps([user_id, sorted(session_ids)]).encode("utf-8", "surrogatepass")).hexdigest()


def current_tags() -> list[tuple[str, str, str]]:
    """The ``(user_id, session_id, use)`` rows of :func:`current_source`, one per session; empty outside."""
    current = _SOURCE.get()
    if current is None:
        return []
    user_id, sessions = current
    use = use_id(user_id, sessions)
    return [(user_id, s, use) for s in sessions]
