"""The OpenAI Agents SDK: ``MemgasSession`` (the SDK's ``Session`` protocol over one memgas session) and
``memgas_tools`` (function tools to search and add memories). Extra ``openai-agents``.

What maps to what: a ``MemgasSession`` is one memgas session of ``user_id``; each SDK item (a user or assistant
message, a function call or its output, a reasoning item, ...) is one memgas message that keeps the item whole in
its ``metadata["openai_agents"]``, so ``get_items`` returns exactly what ``add_items`` was given, and it is also
ordinary memory: its text (a message's text parts, ``[tool call] name(arguments)`` for a call, the output for a
call's output, ``[reasoning]`` for reasoning, ``[type]`` for other items) is what memgas indexes and searches. Roles:
the item's own (``developer`` read as ``system``); a call is the assistant's, an output the ``tool``'s. Messages
that reached the session another way (``Memory.append``) come back as plain ``{"role", "content"}`` items.
``pop_item`` deletes the last message (the session with it, when it was the only one); ``clear_session`` deletes the
session.

A long conversation: ``MemgasSession(..., window=N)`` gives the SDK ``SessionSettings(limit=N)``, so the model reads
the latest ``N`` items as they are, and its tools (:meth:`MemgasSession.tools`) recall the older items of the same
conversation with every other one (``Memory.context``'s ``in_prompt``: the latest ``N`` messages are what the prompt
holds). Without a window the SDK reads the whole session, and the tools leave the session out.
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Mapping

from agents import FunctionTool, SessionSettings, function_tool

from memgas.core.errors import NotFoundError
from memgas.integrations.calls import AnyMemory, acall
from memgas.integrations.tools import memory_tools

__all__ = ["MemgasSession", "memgas_tools", "item_message"]

#: The message metadata key that holds the SDK item.
ITEM_KEY = "openai_agents"
_ROLES = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}


def _text(content: Any) -> str:
    """The text of a message's content: a string, or its text parts (input/output text, refusals)."""
    if isinstance(content, str):
        return content
    parts = []
    for part in content or []:
        if isinstance(part, dict):
            text = part.get("text", part.get("refusal"))
            parts.append(text if isinstance(text, str) else f"[{part.get('type', 'part')}]")
    return "\n".join(p for p in parts if p)


def item_message(item: dict[str, Any]) -> dict[str, Any]:
    """The memgas message an SDK item is stored as (see the module docstring), the item kept in its metadata."""
    kind = item.get("type", "message" if "role" in item else None)
    if kind == "message":
        role, text = _ROLES.get(str(item.get("role")), "user"), _text(item.get("content"))
    elif kind == "function_call":
        role, text = "assistant", f"[tool call] {item.get('name', 'tool')}({item.get('arguments', '')})"
    elif kind == "function_call_output":
        output = item.get("output")
        role, text = "tool", output if isinstance(output, str) else _text(output) or json.dumps(output, default=str)
    elif kind == "reasoning":
        role, text = "assistant", "[reasoning]"  # scratch work: kept for the SDK, not indexed as what was said
    else:
        role, text = "assistant", f"[{kind or 'item'}]"
    return {"role": role, "content": text.strip() or f"[{kind or 'item'}]", "metadata": {ITEM_KEY: item}}


def _item(message: dict[str, Any]) -> Any:
    """The SDK item a stored message holds, or a plain message item for one stored another way."""
    held = (message.get("metadata") or {}).get(ITEM_KEY)
    if held is not None:
        return held
    role = message["role"] if message["role"] in ("user", "assistant", "system") else "assistant"
    return {"role": role, "content": message["content"]}


class MemgasSession:
    """The Agents SDK ``Session`` protocol over one memgas session (see the module docstring).

    Args:
        session_id: the memgas session (and the SDK session id).
        memory: a ``Memory``, ``AsyncMemory``, ``Client`` or ``AsyncClient``.
        user_id: whose memory.
        window: how many of the latest items the SDK reads as they are (``None``: all of them).
    """

    def __init__(self, session_id: str, memory: AnyMemory, *, user_id: str, window: int | None = None) -> None:
        if window is not None and window < 1:
            raise ValueError("window must be at least 1 item")
        self.session_id, self.memory, self.user_id, self.window = session_id, memory, user_id, window
        self.session_settings = None if window is None else SessionSettings(limit=window)

    async def _messages(self) -> list[dict[str, Any]]:
        try:
            session = await acall(self.memory.get, self.session_id, user_id=self.user_id)
        except NotFoundError:
            return []
        return [m.to_dict() for m in session.messages]

    def tools(self, *, k: int = 5, max_tokens: int = 800) -> list[FunctionTool]:
        """:func:`memgas_tools` for an agent run with this session: its user's memory without what the agent already
        reads in its prompt (the whole conversation, or with a ``window`` its latest items), which never comes back
        as memory."""
        if self.window is None:
            return memgas_tools(self.memory, user_id=self.user_id, k=k, max_tokens=max_tokens,
                                exclude_sessions=[self.session_id])
        return memgas_tools(self.memory, user_id=self.user_id, k=k, max_tokens=max_tokens,
                            in_prompt={self.session_id: self.window})

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The session's items, oldest first; with ``limit``, the latest ``limit`` of them."""
        messages = await self._messages()
        if limit is not None:
            messages = messages[-limit:] if limit > 0 else []
        return [_item(m) for m in messages]

    async def add_items(self, items: list[Any]) -> None:
        """Append items to the session (made on first use), each as one memgas message."""
        if items:
            await acall(self.memory.append, [item_message(dict(i)) for i in items], user_id=self.user_id,
                        session_id=self.session_id)

    async def pop_item(self) -> Any | None:
        """Remove and return the latest item, or ``None`` when the session is empty."""
        messages = await self._messages()
        if not messages:
            return None
        await acall(self.memory.delete_message, self.session_id, len(messages) - 1, user_id=self.user_id)
        return _item(messages[-1])

    async def clear_session(self) -> None:
        """Delete the session and everything memgas made of it."""
        try:
            await acall(self.memory.delete, self.session_id, user_id=self.user_id)
        except NotFoundError:
            pass


def memgas_tools(memory: AnyMemory, *, user_id: str, k: int = 5, max_tokens: int = 800,
                 exclude_sessions: Iterable[str] = (), in_prompt: Mapping[str, int] | None = None) -> list[FunctionTool]:
    """Function tools for an Agents SDK agent: ``search_memory`` (what from earlier conversations matters for a
    query, as dated, cited text: :meth:`Memory.context <memgas.memory.Memory.context>`) and ``add_memory`` (store a
    fact as its own session). ``memory`` as for :class:`MemgasSession`; ``exclude_sessions``: the conversations the
    agent already has in its prompt (:meth:`MemgasSession.tools` leaves out its own), never recalled as memory;
    ``in_prompt``: ``{session_id: n}``, conversations whose latest ``n`` messages the prompt holds (their older ones
    are memory)."""
    return [function_tool(f) for f in memory_tools(memory, user_id=user_id, k=k, max_tokens=max_tokens,
                                                   exclude_sessions=exclude_sessions, in_prompt=in_prompt)]
