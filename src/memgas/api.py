"""The memory API, declared once: every call, its parameters in order, and its typed result.

:class:`MemoryAPI` is what a memory does; :class:`KnowledgeGraphAPI` is what only a method that keeps a temporal
knowledge graph adds (``Memory(method="zep", ...).kg``). Every face follows them, with the same names, order and
defaults: :class:`~memgas.memory.Memory` and the service's scoped memory as written, :class:`~memgas.async_memory.
AsyncMemory` and :class:`~memgas.client.AsyncClient` with each call a coroutine, :class:`~memgas.client.Client`,
the REST API (the same parameters as JSON fields or query parameters, less those of the path), the MCP tools that
exist for a call, and the TypeScript client (its options in camelCase). ``tests/system/test_api.py`` reads each face
against this module and fails on any difference; the docs' API reference is generated from it.

>>> from memgas.api import MemoryAPI, calls
>>> [name for name, _ in calls(MemoryAPI)][:4]
['add', 'add_many', 'append', 'update_message']
"""

from __future__ import annotations

import builtins
import inspect
from datetime import datetime
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Protocol

from memgas.answer import Answer
from memgas.context.profile import StandingStatement
from memgas.core.results import Added, Appended, Deleted, Edited, SessionPage, UserSessions
from memgas.core.types import Hit, Session
from memgas.sessions.timeline import SessionDigest

if TYPE_CHECKING:
    from memgas.kernels.temporal_graph import Fact
    from memgas.methods.zep import CommunitySummary

__all__ = ["MemoryAPI", "KnowledgeGraphAPI", "calls", "reference_markdown", "Timestamp"]

#: A time as the API takes it: ISO 8601 (read as UTC without a zone), a datetime, or ``None``.
Timestamp = str | datetime | None


class MemoryAPI(Protocol):
    """Store conversations, read what matters from them, edit and delete them, per user."""

    # -- writes -------------------------------------------------------------------------------
    def add(self, messages: Iterable[Any], *, user_id: str, session_id: str | None = None,
            timestamp: Timestamp = None, metadata: dict[str, Any] | None = None, agent_id: str | None = None,
            run_id: str | None = None) -> Added:
        """Store one conversation session (a random id when ``session_id`` is ``None``)."""

    def add_many(self, sessions: Iterable[Mapping[str, Any]], *, user_id: str,
                 skip_existing: bool = False) -> list[Added]:
        """Store several sessions of one user in one transaction: all of them, or none."""

    def append(self, messages: Any, *, user_id: str, session_id: str, timestamp: Timestamp = None,
               metadata: dict[str, Any] | None = None, agent_id: str | None = None, run_id: str | None = None,
               return_context: bool = False, context_tokens: int = 1000, window: int = 20) -> Appended:
        """Add messages to the end of a session, creating it when it does not exist: call it every turn."""

    def update_message(self, session_id: str, index: int, content: str, *, user_id: str) -> Edited:
        """Replace the content of message ``index`` (0-based) of a session."""

    def delete_message(self, session_id: str, index: int, *, user_id: str) -> Edited:
        """Delete message ``index`` (0-based) of a session (the session with its last message)."""

    def delete(self, session_id: str | None = None, *, user_id: str,
               filters: Mapping[str, Any] | None = None) -> Deleted:
        """Delete one session, the sessions that pass ``filters``, or all of a user's memory."""

    def expire(self, *, user_id: str | None = None, before: Timestamp = None) -> int:
        """Delete what expired (its own expiry, the retention period, or ``before``) as a delete does; how many went."""

    # -- reads --------------------------------------------------------------------------------
    def search(self, query: str, *, user_id: str, k: int = 5, query_time: Timestamp = None, min_score: float = 0.0,
               exclude_sessions: Iterable[str] = (), filters: Mapping[str, Any] | None = None) -> list[Hit]:
        """The ``k`` sessions most relevant to ``query``, best first."""

    def context(self, query: str, *, user_id: str, k: int = 5, max_tokens: int = 1000,
                exclude_sessions: Iterable[str] = (), query_time: Timestamp = None, min_score: float | None = None,
                filters: Mapping[str, Any] | None = None, in_prompt: Mapping[str, int] | None = None) -> str:
        """Prompt-ready text of what matters from the past for ``query``, within ``max_tokens``."""

    def profile(self, *, user_id: str, exclude_sessions: Iterable[str] = (),
                filters: Mapping[str, Any] | None = None) -> list[StandingStatement]:
        """The user's standing instructions and preferences, oldest first."""

    def timeline(self, *, user_id: str, topic: str | None = None, since: Timestamp = None, until: Timestamp = None,
                 filters: Mapping[str, Any] | None = None) -> builtins.list[SessionDigest]:
        """The course of the user's conversations: each session's digest, oldest first (with ``topic``, its items)."""

    def answer(self, question: str, *, user_id: str, question_date: Timestamp = None, k: int = 5,
               use_filter: bool = True) -> Answer:
        """Answer ``question`` from the user's memories with an LLM, citing the sessions used."""

    def get(self, session_id: str, *, user_id: str) -> Session:
        """One stored session with its messages."""

    def list(self, *, user_id: str, filters: Mapping[str, Any] | None = None, limit: int | None = None,
             cursor: str | None = None, order: str = "oldest") -> SessionPage:
        """A page of the user's session headers."""

    def users(self) -> builtins.list[UserSessions]:
        """The users with memory, and how many sessions each has."""

    def units(self, session_id: str, *, user_id: str) -> dict[str, Any]:
        """What memgas made of one session, for inspection: its units and its associated sessions."""

    def graph(self, *, user_id: str, limit: int = 300) -> dict[str, Any]:
        """The user's sessions as an association graph, for inspection."""

    def stats(self, user_id: str | None = None) -> dict[str, Any]:
        """Store counts, this process's timings and LLM use."""


class KnowledgeGraphAPI(Protocol):
    """A temporal knowledge graph's facts (``method="zep"``): present only where the method keeps one."""

    def facts(self, *, user_id: str, entity: str | None = None, as_of: Timestamp = None,
              include_invalid: bool = False) -> list[Fact]:
        """The user's facts valid now (or at ``as_of``); ``include_invalid`` adds the invalidated history."""

    def history(self, fact_id: int, *, user_id: str) -> list[Fact]:
        """How one fact changed, oldest version first."""

    def communities(self, *, user_id: str) -> list[CommunitySummary]:
        """The user's entity communities with their summaries."""

    def retry_pending(self, *, user_id: str) -> int:
        """Retry the extractions that failed at ``add``; how many messages are still pending."""


def calls(api: type) -> list[tuple[str, inspect.Signature]]:
    """Each call that ``api`` (:class:`MemoryAPI` or :class:`KnowledgeGraphAPI`) declares, in declaration order,
    with its signature (without ``self``)."""
    out = []
    for name, member in vars(api).items():
        if not name.startswith("_") and callable(member):
            sig = inspect.signature(member)
            out.append((name, sig.replace(parameters=list(sig.parameters.values())[1:])))
    return out


def reference_markdown() -> str:
    """The declared calls as a Markdown table (``| call | returns | does |``): the docs' API reference, kept in
    ``docs/reference/api.md`` (``scripts/references.py``)."""
    rows = ["| call | returns | does |", "|---|---|---|"]
    for api, prefix in ((MemoryAPI, ""), (KnowledgeGraphAPI, "kg.")):
        for name, sig in calls(api):
            returns = str(sig.return_annotation).replace("builtins.", "")
            params = _names_and_defaults(sig)
            doc = (inspect.getdoc(getattr(api, name)) or "").replace("``", "`")
            rows.append(f"| `{prefix}{name}{params}` | `{returns}` | {doc} |")
    return "\n".join(rows)


def _names_and_defaults(sig: inspect.Signature) -> str:
    """``(query, *, user_id, k=5)``: a signature without its annotations."""
    out, starred = [], False
    for p in sig.parameters.values():
        if p.kind is p.KEYWORD_ONLY and not starred:
            out.append("*")
            starred = True
        out.append(p.name if p.default is p.empty else f"{p.name}={p.default!r}")
    return f"({', '.join(out)})"
