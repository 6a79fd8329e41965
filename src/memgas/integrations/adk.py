"""Google's Agent Development Kit (ADK): ``MemgasMemoryService``, a ``google.adk.memory.BaseMemoryService``. Extra
``adk`` (``google-adk``).

What maps to what: ADK's ``user_id`` is memgas's ``user_id``, its ``app_name`` memgas's ``agent_id`` (every session
the service writes carries it, every search is filtered by it), an ADK session one memgas session of the same id.
``add_session_to_memory(session)`` appends the session's events not yet stored (it may be called after every turn:
an event is stored once, known by its id); ``add_events_to_memory`` appends the events it is given;
``add_memory`` stores each memory entry as a session of its own. An event is one message: the user's events
``user``, the agents' ``assistant``, a function call ``[tool call] name(args)``, a function response ``tool``; the
event id and author are kept in the message's metadata. ``search_memory`` is :meth:`Memory.context
<memgas.memory.Memory.context>` for the query, one ``MemoryEntry`` holding the dated, cited text (ADK's
``PreloadMemoryTool`` puts it into the prompt, ``load_memory`` returns it to the model).

>>> import asyncio
>>> from google.adk.events import Event
>>> from google.adk.sessions import Session
>>> from google.genai import types
>>> from memgas import Memory
>>> from memgas.integrations.adk import MemgasMemoryService
>>> service = MemgasMemoryService(Memory())
>>> said = Event(author="user", content=types.Content(role="user", parts=[types.Part(text="My locker code is 4512.")]))
>>> asyncio.run(service.add_session_to_memory(Session(id="monday", app_name="coach", user_id="ana", events=[said])))
>>> found = asyncio.run(service.search_memory(app_name="coach", user_id="ana", query="What is my locker code?"))
>>> print(found.memories[0].content.parts[0].text.splitlines()[1])
[1] ... · monday · user: My locker code is 4512.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from google.adk.events import Event
from google.adk.memory import BaseMemoryService
from google.adk.memory.base_memory_service import SearchMemoryResponse
from google.adk.memory.memory_entry import MemoryEntry
from google.adk.sessions import Session
from google.genai import types

from memgas.core.errors import NotFoundError
from memgas.integrations.calls import AnyMemory, acall

__all__ = ["MemgasMemoryService", "event_message"]

#: The message metadata keys that hold the ADK event's id and author.
EVENT_KEY, AUTHOR_KEY = "adk_event_id", "adk_author"


def _parts_text(content: types.Content | None) -> tuple[str, str]:
    """The role and text an event's content is stored as."""
    texts, role = [], "assistant"
    for part in (content.parts or []) if content is not None else []:
        if part.text and not part.thought:
            texts.append(part.text)
        elif part.function_call is not None:
            call = part.function_call
            texts.append(f"[tool call] {call.name}({json.dumps(call.args or {}, default=str)})")
        elif part.function_response is not None:
            role = "tool"
            texts.append(json.dumps(part.function_response.response or {}, default=str))
    return role, "\n".join(t for t in texts if t.strip())


def event_message(event: Event) -> dict[str, Any] | None:
    """The memgas message an ADK event is stored as, or ``None`` for an event with no text (a state change)."""
    role, text = _parts_text(event.content)
    if not text.strip():
        return None
    if event.author == "user" and role != "tool":
        role = "user"
    return {"role": role, "content": text, "metadata": {EVENT_KEY: event.id, AUTHOR_KEY: event.author}}


class MemgasMemoryService(BaseMemoryService):
    """ADK's memory service over memgas (see the module docstring).

    Args:
        memory: a ``Memory``, ``AsyncMemory``, ``Client`` or ``AsyncClient``.
        k: sessions a search draws on.
        max_tokens: the budget of what a search returns (4 characters a token).
    """

    def __init__(self, memory: AnyMemory, *, k: int = 5, max_tokens: int = 800) -> None:
        self.memory, self.k, self.max_tokens = memory, k, max_tokens

    async def _stored_ids(self, user_id: str, session_id: str) -> set[str]:
        try:
            session = await acall(self.memory.get, session_id, user_id=user_id)
        except NotFoundError:
            return set()
        return {str((m.metadata or {}).get(EVENT_KEY)) for m in session.messages}

    async def _append(self, app_name: str, user_id: str, session_id: str, events: Sequence[Event]) -> None:
        known = await self._stored_ids(user_id, session_id)
        messages = [m for e in events if e.id not in known and (m := event_message(e)) is not None]
        if messages:
            await acall(self.memory.append, messages, user_id=user_id, session_id=session_id, agent_id=app_name)

    async def add_session_to_memory(self, session: Session) -> None:
        """Append the session's events that are not stored yet to the memgas session of the same id."""
        await self._append(session.app_name, session.user_id, session.id, session.events)

    async def add_events_to_memory(self, *, app_name: str, user_id: str, events: Sequence[Event],
                                   session_id: str | None = None,
                                   custom_metadata: Mapping[str, object] | None = None) -> None:
        """Append ``events`` to the memgas session ``session_id`` (a new session without one)."""
        if session_id is None:
            messages = [m for e in events if (m := event_message(e)) is not None]
            if messages:
                await acall(self.memory.add, messages, user_id=user_id, agent_id=app_name)
            return
        await self._append(app_name, user_id, session_id, events)

    async def add_memory(self, *, app_name: str, user_id: str, memories: Sequence[MemoryEntry],
                         custom_metadata: Mapping[str, object] | None = None) -> None:
        """Store each memory entry's text as a session of its own."""
        for entry in memories:
            _, text = _parts_text(entry.content)
            if text.strip():
                await acall(self.memory.add, [{"role": "user", "content": text}], user_id=user_id, agent_id=app_name,
                            metadata=dict(entry.custom_metadata) or None)

    async def search_memory(self, *, app_name: str, user_id: str, query: str) -> SearchMemoryResponse:
        """What from the user's memory of this app matters for ``query``: one entry of dated, cited text."""
        text = await acall(self.memory.context, query[:10_000], user_id=user_id, k=self.k,
                           max_tokens=self.max_tokens, filters={"agent_id": app_name})
        if not text:
            return SearchMemoryResponse()
        entry = MemoryEntry(content=types.Content(role="user", parts=[types.Part(text=text)]), author="memgas")
        return SearchMemoryResponse(memories=[entry])
