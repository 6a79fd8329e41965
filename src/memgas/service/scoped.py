"""What a caller may do with a :class:`~memgas.memory.Memory`, in the caller's own user namespace.

The REST routes and the MCP tools both call :class:`ScopedMemory`: the declared API (:class:`memgas.api.MemoryAPI`,
the same parameters and typed results as ``Memory``'s), with the caller's user ids mapped to stored ones
(:meth:`Principal.stored_user`) on the way in and back on the way out. Nothing here knows HTTP; errors are
memgas's exceptions.
"""

from __future__ import annotations

import builtins
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from memgas.answer import Answer
from memgas.api import Timestamp
from memgas.context import StandingStatement
from memgas.core.results import Added, Appended, Deleted, Edited, SessionPage, UserSessions
from memgas.core.types import Hit, Session
from memgas.memory import KnowledgeGraph, Memory
from memgas.service.keys import Principal
from memgas.sessions.timeline import SessionDigest

if TYPE_CHECKING:
    from memgas.kernels.temporal_graph import Fact
    from memgas.methods.zep import CommunitySummary

__all__ = ["ScopedMemory", "ScopedKnowledgeGraph"]


class ScopedMemory:
    """The facade as one principal sees it (see the module docstring)."""

    def __init__(self, memory: Memory, principal: Principal) -> None:
        self.memory = memory
        self.principal = principal
        #: The knowledge graph's calls (:class:`ScopedKnowledgeGraph`), only where the method keeps one.
        self.kg = None if memory.kg is None else ScopedKnowledgeGraph(memory.kg, principal)

    def _user(self, user_id: str) -> str:
        return self.principal.stored_user(user_id)

    def add(self, messages: Iterable[Any], *, user_id: str, session_id: str | None = None,
            timestamp: Timestamp = None, metadata: dict[str, Any] | None = None, agent_id: str | None = None,
            run_id: str | None = None) -> Added:
        """Store one session (:meth:`Memory.add`)."""
        return self.memory.add(messages, user_id=self._user(user_id), session_id=session_id, timestamp=timestamp,
                               metadata=metadata, agent_id=agent_id, run_id=run_id)

    def add_many(self, sessions: Iterable[Mapping[str, Any]], *, user_id: str,
                 skip_existing: bool = False) -> list[Added]:
        """Store several sessions in one transaction (:meth:`Memory.add_many`)."""
        return self.memory.add_many(sessions, user_id=self._user(user_id), skip_existing=skip_existing)

    def append(self, messages: Any, *, user_id: str, session_id: str, timestamp: Timestamp = None,
               metadata: dict[str, Any] | None = None, agent_id: str | None = None, run_id: str | None = None,
               return_context: bool = False, context_tokens: int = 1000, window: int = 20) -> Appended:
        """Add messages to the end of a session, making it if new (:meth:`Memory.append`)."""
        return self.memory.append(messages, user_id=self._user(user_id), session_id=session_id, timestamp=timestamp,
                                  metadata=metadata, agent_id=agent_id, run_id=run_id,
                                  return_context=return_context, context_tokens=context_tokens, window=window)

    def update_message(self, session_id: str, index: int, content: str, *, user_id: str) -> Edited:
        """Replace one message's content (:meth:`Memory.update_message`)."""
        return self.memory.update_message(session_id, index, content, user_id=self._user(user_id))

    def delete_message(self, session_id: str, index: int, *, user_id: str) -> Edited:
        """Delete one message (:meth:`Memory.delete_message`)."""
        return self.memory.delete_message(session_id, index, user_id=self._user(user_id))

    def delete(self, session_id: str | None = None, *, user_id: str,
               filters: Mapping[str, Any] | None = None) -> Deleted:
        """Delete one session, the sessions that pass ``filters``, or all of the user's memory
        (:meth:`Memory.delete`)."""
        return replace(self.memory.delete(session_id, user_id=self._user(user_id), filters=filters), user_id=user_id)

    def expire(self, *, user_id: str | None = None, before: Timestamp = None) -> int:
        """Delete the user's expired sessions (:meth:`Memory.expire`); those of every user need an admin key."""
        if user_id is None:
            self.principal.require_admin()
        return self.memory.expire(user_id=None if user_id is None else self._user(user_id), before=before)

    def search(self, query: str, *, user_id: str, k: int = 5, query_time: Timestamp = None, min_score: float = 0.0,
               exclude_sessions: Iterable[str] = (), filters: Mapping[str, Any] | None = None) -> list[Hit]:
        """The best sessions for ``query`` (:meth:`Memory.search`). A filter only narrows what this principal's
        user holds: it is applied inside that one user's memory."""
        return self.memory.search(query, user_id=self._user(user_id), k=k, query_time=query_time,
                                  min_score=min_score, exclude_sessions=exclude_sessions, filters=filters)

    def context(self, query: str, *, user_id: str, k: int = 5, max_tokens: int = 1000,
                exclude_sessions: Iterable[str] = (), query_time: Timestamp = None, min_score: float | None = None,
                filters: Mapping[str, Any] | None = None, in_prompt: Mapping[str, int] | None = None) -> str:
        """Prompt-ready text of the relevant memories (:meth:`Memory.context`)."""
        return self.memory.context(query, user_id=self._user(user_id), k=k, max_tokens=max_tokens,
                                   exclude_sessions=exclude_sessions, query_time=query_time, min_score=min_score,
                                   filters=filters, in_prompt=in_prompt)

    def profile(self, *, user_id: str, exclude_sessions: Iterable[str] = (),
                filters: Mapping[str, Any] | None = None) -> list[StandingStatement]:
        """The user's standing instructions and preferences (:meth:`Memory.profile`)."""
        return self.memory.profile(user_id=self._user(user_id), exclude_sessions=exclude_sessions, filters=filters)

    def timeline(self, *, user_id: str, topic: str | None = None, since: Timestamp = None, until: Timestamp = None,
                 filters: Mapping[str, Any] | None = None) -> list[SessionDigest]:
        """The course of the user's conversations (:meth:`Memory.timeline`)."""
        return self.memory.timeline(user_id=self._user(user_id), topic=topic, since=since, until=until,
                                    filters=filters)

    def answer(self, question: str, *, user_id: str, question_date: Timestamp = None, k: int = 5,
               use_filter: bool = True) -> Answer:
        """An answer from the user's memories (:meth:`Memory.answer`)."""
        return self.memory.answer(question, user_id=self._user(user_id), question_date=question_date, k=k,
                                  use_filter=use_filter)

    def get(self, session_id: str, *, user_id: str) -> Session:
        """One stored session (:meth:`Memory.get`), with the caller's user id."""
        return replace(self.memory.get(session_id, user_id=self._user(user_id)), user_id=user_id)

    def list(self, *, user_id: str, filters: Mapping[str, Any] | None = None, limit: int | None = None,
             cursor: str | None = None, order: str = "oldest") -> SessionPage:
        """A page of the user's session headers (:meth:`Memory.list`)."""
        return self.memory.list(user_id=self._user(user_id), filters=filters, limit=limit, cursor=cursor,
                                order=order)

    def users(self) -> builtins.list[UserSessions]:
        """The users the caller may see, with their session counts."""
        out = []
        for row in self.memory.users():
            visible = self.principal.visible_user(row.user_id)
            if visible is not None:
                out.append(replace(row, user_id=visible))
        return out

    def units(self, session_id: str, *, user_id: str) -> dict[str, Any]:
        """A session's units and associated sessions (:meth:`Memory.units`)."""
        return self.memory.units(session_id, user_id=self._user(user_id))

    def graph(self, *, user_id: str, limit: int = 300) -> dict[str, Any]:
        """The user's sessions as an association graph (:meth:`Memory.graph`)."""
        return self.memory.graph(user_id=self._user(user_id), limit=limit)

    def stats(self, user_id: str | None = None) -> dict[str, Any]:
        """The user's counts; store-wide counts (``user_id`` ``None``) need an admin key."""
        if user_id is None:
            self.principal.require_admin()
            return self.memory.stats()
        out = self.memory.stats(self._user(user_id))
        if not self.principal.is_admin:  # a tenant learns its user's counts, not where the store lives
            for key in ("path", "url", "file_bytes", "calls", "llm"):
                out.pop(key, None)
        return out


class ScopedKnowledgeGraph:
    """:class:`~memgas.memory.KnowledgeGraph` in the caller's user namespace (``ScopedMemory.kg``)."""

    def __init__(self, kg: KnowledgeGraph, principal: Principal) -> None:
        self._kg = kg
        self._principal = principal

    def facts(self, *, user_id: str, entity: str | None = None, as_of: Timestamp = None,
              include_invalid: bool = False) -> list[Fact]:
        """The user's facts (:meth:`KnowledgeGraph.facts`)."""
        return self._kg.facts(user_id=self._principal.stored_user(user_id), entity=entity, as_of=as_of,
                              include_invalid=include_invalid)

    def history(self, fact_id: int, *, user_id: str) -> list[Fact]:
        """How one fact changed (:meth:`KnowledgeGraph.history`)."""
        return self._kg.history(fact_id, user_id=self._principal.stored_user(user_id))

    def communities(self, *, user_id: str) -> list[CommunitySummary]:
        """The user's entity communities (:meth:`KnowledgeGraph.communities`)."""
        return self._kg.communities(user_id=self._principal.stored_user(user_id))

    def retry_pending(self, *, user_id: str) -> int:
        """Retry the failed extractions (:meth:`KnowledgeGraph.retry_pending`)."""
        return self._kg.retry_pending(user_id=self._principal.stored_user(user_id))
