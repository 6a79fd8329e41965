"""CrewAI: ``MemgasCrewMemory``, a CrewAI ``Memory`` (what ``Agent(memory=...)`` and ``Crew(memory=...)`` take) whose
recall is memgas's and whose memories are kept in memgas. Extra ``crewai`` (``crewai``; it pins ``openai<3``, which
the OpenAI Agents SDK cannot share, so ``scripts/test`` gives it an environment of its own).

What maps to what: one memory is one user's (``user_id``); what CrewAI keeps after a kickoff or a task
(``Input: ...`` / ``Task: ...`` with the agent's ``Result: ...``) is appended to the memgas session ``session_id`` as
the user's message and the agent's reply, as said, with no LLM distilling it (CrewAI's own memory calls its LLM to
extract "memories" and an embedder to store them); ``recall(query)`` is :meth:`Memory.context
<memgas.memory.Memory.context>` for the query, one match of dated, cited text, which CrewAI puts into the agent's
prompt under "Relevant memories". What a kickoff is answering is kept only after it ran, so it never recalls itself.
"""

from __future__ import annotations

import re
from typing import Any

from crewai.memory.types import MemoryMatch, MemoryRecord
from crewai.memory.unified_memory import Memory as CrewMemory
from pydantic import PrivateAttr

from memgas.integrations.calls import AnyMemory, call

__all__ = ["MemgasCrewMemory", "said_in"]

#: How CrewAI writes what a kickoff (``Input``) or a task (``Task``) gave and what the agent answered (``Result``).
_KEPT = re.compile(r"^(?:Input|Task): (?P<asked>.*?)\n(?:.*\n)*?Agent: (?P<agent>.*?)\n(?:.*\n)*?Result: (?P<result>.*)$",
                   re.S)


def said_in(raw: str) -> list[dict[str, Any]]:
    """The memgas messages a CrewAI memory item is kept as: the request and the agent's result when CrewAI wrote it
    its way, else the whole text as one user message."""
    m = _KEPT.match(raw.strip())
    if m is None:
        return [{"role": "user", "content": raw.strip()}] if raw.strip() else []
    messages = [{"role": "user", "content": m["asked"].strip()},
                {"role": "assistant", "content": m["result"].strip(), "name": m["agent"].strip() or None}]
    return [{k: v for k, v in msg.items() if v is not None} for msg in messages if msg["content"]]


class _NoStorage:
    """CrewAI's vector storage, never used: memgas keeps and ranks the memories."""

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(f"MemgasCrewMemory keeps no CrewAI vector storage (asked for {name!r})")


class MemgasCrewMemory(CrewMemory):  # type: ignore[misc]  # crewai is untyped for mypy here
    """memgas as CrewAI's memory (see the module docstring).

    Args:
        memory: a ``Memory`` or ``Client`` (CrewAI calls its memory synchronously).
        user_id: whose memory.
        session_id: the memgas session what CrewAI keeps is appended to.
        k: sessions a recall draws on.
        max_tokens: the budget of a recall (4 characters a token).
    """

    _memgas: Any = PrivateAttr()
    _user_id: str = PrivateAttr()
    _session_id: str = PrivateAttr()
    _k: int = PrivateAttr()
    _max_tokens: int = PrivateAttr()

    def __init__(self, memory: AnyMemory, *, user_id: str, session_id: str, k: int = 5, max_tokens: int = 800,
                 **options: Any) -> None:
        super().__init__(storage=_NoStorage(), llm="none", embedder=None, **options)
        self._memgas, self._user_id, self._session_id = memory, user_id, session_id
        self._k, self._max_tokens = k, max_tokens

    def extract_memories(self, content: str) -> list[str]:
        """What CrewAI would distil with its LLM is kept as said: the text itself."""
        return [content] if content.strip() else []

    def remember(self, content: str, *args: Any, **kwargs: Any) -> MemoryRecord | None:
        """Append ``content`` to the memgas session (as the request and the agent's result where it holds both)."""
        records = self.remember_many([content], *args, **kwargs)
        return records[0] if records else None

    def remember_many(self, contents: list[str], *args: Any, **kwargs: Any) -> list[MemoryRecord]:
        """Append each item to the memgas session, at once (CrewAI's own runs in the background)."""
        if self.read_only:
            return []
        messages = [m for content in contents for m in said_in(content)]
        if messages:
            call(self._memgas.append, messages, user_id=self._user_id, session_id=self._session_id)
        return [MemoryRecord(content=c) for c in contents if c.strip()]

    def recall(self, query: str, *args: Any, limit: int = 10, **kwargs: Any) -> list[MemoryMatch]:
        """What memgas recalls for ``query``: one match of dated, cited text, or none."""
        text = call(self._memgas.context, query[:10_000], user_id=self._user_id, k=min(max(limit, 1), self._k),
                    max_tokens=self._max_tokens)
        return [MemoryMatch(record=MemoryRecord(content=str(text)), score=1.0)] if text else []

    def drain_writes(self) -> None:
        """Nothing waits: every write is done when ``remember_many`` returns."""

    def close(self) -> None:
        """The memgas memory belongs to its owner: nothing to close here."""
