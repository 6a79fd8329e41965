"""What a caller may do with a :class:`~memgas.memory.Memory`, in the caller's own user namespace.

The REST routes and the MCP tools both call :class:`ScopedMemory`: it maps the caller's user ids to
stored ones (:meth:`Principal.stored_user`), calls the facade, and returns plain JSON-ready values
with the caller's ids. Nothing here knows HTTP; errors are memgas's exceptions.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from memgas.memory import Memory
from memgas.service.keys import Principal

__all__ = ["ScopedMemory"]


class ScopedMemory:
    """The facade as one principal sees it (see the module docstring)."""

    def __init__(self, memory: Memory, principal: Principal) -> None:
        self.memory = memory
        self.principal = principal

    def _user(self, user_id: str) -> str:
        return self.principal.stored_user(user_id)

    def add(self, user_id: str, messages: Sequence[Any], *, session_id: str | None = None,
            timestamp: str | None = None, metadata: dict[str, Any] | None = None, agent_id: str | None = None,
            run_id: str | None = None) -> dict[str, Any]:
        """Store one session (:meth:`Memory.add`)."""
        return self.memory.add(messages, user_id=self._user(user_id), session_id=session_id, timestamp=timestamp,
                               metadata=metadata, agent_id=agent_id, run_id=run_id)

    def add_many(self, user_id: str, sessions: Sequence[Mapping[str, Any]], *,
                 skip_existing: bool = False) -> list[dict[str, Any]]:
        """Store several sessions in one transaction (:meth:`Memory.add_many`)."""
        return self.memory.add_many(sessions, user_id=self._user(user_id), skip_existing=skip_existing)

    def append(self, user_id: str, session_id: str, messages: Any, *, timestamp: str | None = None,
               metadata: dict[str, Any] | None = None, agent_id: str | None = None, run_id: str | None = None,
               return_context: bool = False, context_tokens: int = 1000) -> dict[str, Any]:
        """Add messages to the end of a session, making it if new (:meth:`Memory.append`)."""
        return self.memory.append(messages, user_id=self._user(user_id), session_id=session_id, timestamp=timestamp,
                                  metadata=metadata, agent_id=agent_id, run_id=run_id,
                                  return_context=return_context, context_tokens=context_tokens)

    def update_message(self, user_id: str, session_id: str, index: int, content: str) -> dict[str, Any]:
        """Replace one message's content (:meth:`Memory.update_message`)."""
        return self.memory.update_message(session_id, index, content, user_id=self._user(user_id))

    def delete_message(self, user_id: str, session_id: str, index: int) -> dict[str, Any]:
        """Delete one message (:meth:`Memory.delete_message`)."""
        return self.memory.delete_message(session_id, index, user_id=self._user(user_id))

    def search(self, user_id: str, query: str, *, k: int = 5, query_time: str | None = None,
               min_score: float = 0.0, exclude_sessions: Sequence[str] = (),
               filters: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        """The best sessions for ``query`` (:meth:`Memory.search`), as dicts. A filter only narrows what this
        principal's user holds: it is applied inside that one user's memory."""
        hits = self.memory.search(query, user_id=self._user(user_id), k=k, query_time=query_time, min_score=min_score,
                                  exclude_sessions=exclude_sessions, filters=filters)
        return [h.to_dict() for h in hits]

    def context(self, user_id: str, query: str, *, k: int = 5, max_tokens: int = 1000,
                exclude_sessions: Sequence[str] = (), query_time: str | None = None, min_score: float | None = None,
                filters: Mapping[str, Any] | None = None) -> str:
        """Prompt-ready text of the relevant memories (:meth:`Memory.context`)."""
        return self.memory.context(query, user_id=self._user(user_id), k=k, max_tokens=max_tokens,
                                   exclude_sessions=exclude_sessions, query_time=query_time, min_score=min_score,
                                   filters=filters)

    def profile(self, user_id: str, *, exclude_sessions: Sequence[str] = (),
                filters: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        """The user's standing instructions and preferences (:meth:`Memory.profile`), as dicts."""
        return [s.to_dict() for s in self.memory.profile(user_id=self._user(user_id),
                                                         exclude_sessions=exclude_sessions, filters=filters)]

    def get(self, user_id: str, session_id: str) -> dict[str, Any]:
        """One stored session (:meth:`Memory.get`), with the caller's user id."""
        return {**self.memory.get(session_id, user_id=self._user(user_id)), "user_id": user_id}

    def sessions(self, user_id: str, *, filters: Mapping[str, Any] | None = None, limit: int | None = None,
                 cursor: str | None = None, order: str = "oldest") -> dict[str, Any]:
        """A page of the user's session headers (:meth:`Memory.list`): ``{"sessions", "next_cursor"}``, the
        latter ``None`` on the last page."""
        rows = self.memory.list(user_id=self._user(user_id), filters=filters,
                                limit=None if limit is None else limit + 1, cursor=cursor, order=order)
        more = limit is not None and len(rows) > limit
        rows = rows[:limit] if more else rows
        return {"sessions": rows, "next_cursor": rows[-1]["cursor"] if more else None}

    def units(self, user_id: str, session_id: str) -> dict[str, Any]:
        """A session's units and associated sessions (:meth:`Memory.units`)."""
        return self.memory.units(session_id, user_id=self._user(user_id))

    def graph(self, user_id: str, *, limit: int = 300) -> dict[str, Any]:
        """The user's sessions as an association graph (:meth:`Memory.graph`)."""
        return self.memory.graph(user_id=self._user(user_id), limit=limit)

    def users(self) -> list[dict[str, Any]]:
        """The users the caller may see, with their session counts."""
        out = []
        for row in self.memory.list():
            visible = self.principal.visible_user(row["user_id"])
            if visible is not None:
                out.append({**row, "user_id": visible})
        return out

    def delete(self, user_id: str, session_id: str | None = None, *,
               filters: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Delete one session, the sessions that pass ``filters``, or all of the user's memory
        (:meth:`Memory.delete`)."""
        result = self.memory.delete(session_id, user_id=self._user(user_id), filters=filters)
        return {**result, "user_id": user_id}

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

    def answer(self, user_id: str, question: str, *, question_date: str | None = None, k: int = 5,
               use_filter: bool = True) -> dict[str, Any]:
        """An answer from the user's memories (:meth:`Memory.answer`), as a dict."""
        return self.memory.answer(question, user_id=self._user(user_id), question_date=question_date, k=k,
                                  use_filter=use_filter).to_dict()

    def facts(self, user_id: str, *, entity: str | None = None, as_of: str | None = None,
              include_invalid: bool = False) -> list[dict[str, Any]]:
        """The user's knowledge-graph facts (:meth:`Memory.facts`), as dicts."""
        return [f.to_dict() for f in self.memory.facts(user_id=self._user(user_id), entity=entity, as_of=as_of,
                                                       include_invalid=include_invalid)]
