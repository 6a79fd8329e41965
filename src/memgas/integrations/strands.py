"""Strands Agents: ``MemgasMemoryStore``, a ``strands.memory.MemoryStore`` for Strands' ``MemoryManager`` plugin.
Extra ``strands`` (``strands-agents``; it pins ``mcp<2.2``, so it installs beside memgas's library and frameworks but
not beside ``memgas[server]``: ``scripts/test`` gives it an environment of its own).

What maps to what: one store is one conversation of ``user_id``, the memgas session ``session_id``. The manager's
extraction hands the store the conversation's messages after each invocation (``add_messages``: the store takes the
raw messages, so no model call distils them; the text blocks of each message become one memgas message of its role);
``add`` (the manager's add tool) stores a fact as a session of its own. ``search`` is :meth:`Memory.context
<memgas.memory.Memory.context>` for the query, one entry of dated, cited text, which the manager injects before each
model call and its ``search_memory`` tool returns. Give ``window`` the agent's ``SlidingWindowConversationManager``
size: the context leaves those latest messages out (``in_prompt``) and recalls the conversation's older part with
every other conversation of the user.
"""

from __future__ import annotations

from typing import Any

from strands.memory import (
    AddMessagesContext,
    ExtractionConfig,
    InvocationTrigger,
    MemoryEntry,
    MemoryStore,
    SearchOptions,
)

from memgas.integrations.calls import AnyMemory, acall

__all__ = ["MemgasMemoryStore", "message_of"]


def message_of(message: Any) -> dict[str, str] | None:
    """The memgas message a Strands message is kept as (its text blocks), or ``None`` when it has no text."""
    blocks = message.get("content") or []
    text = "\n".join(b["text"] for b in blocks if isinstance(b, dict) and isinstance(b.get("text"), str))
    if not text.strip():
        return None
    return {"role": "user" if message.get("role") == "user" else "assistant", "content": text}


class MemgasMemoryStore(MemoryStore):
    """memgas as a Strands memory store (see the module docstring).

    Args:
        memory: a ``Memory``, ``AsyncMemory``, ``Client`` or ``AsyncClient``.
        user_id: whose memory.
        session_id: the memgas session the conversation is kept in.
        window: how many of the latest messages the agent's prompt holds (``None``: leave nothing out).
        name: the store's name in the manager's tools.
        max_search_results: sessions a search draws on.
        max_tokens: the budget of what a search returns (4 characters a token).
    """

    def __init__(self, memory: AnyMemory, *, user_id: str, session_id: str, window: int | None = None,
                 name: str = "memgas", max_search_results: int = 5, max_tokens: int = 800) -> None:
        if window is not None and window < 0:
            raise ValueError("window must be 0 or more messages")
        self.memory, self.user_id, self.session_id = memory, user_id, session_id
        self.window, self.max_tokens = window, max_tokens
        self.name, self.max_search_results, self.writable = name, max_search_results, True
        self.description: str | None = "what the user said in earlier conversations and earlier in this one"
        # every invocation's messages, once it has run: the turn being answered is never memory yet
        self.extraction: ExtractionConfig | bool | None = ExtractionConfig(trigger=[InvocationTrigger()])

    async def search(self, query: str, options: SearchOptions | None = None) -> list[MemoryEntry]:
        """What memgas recalls for ``query``: one entry of dated, cited text, or none."""
        k = (options or {}).get("max_search_results", self.max_search_results)
        held = {self.session_id: self.window} if self.window else None
        text = await acall(self.memory.context, query[:10_000], user_id=self.user_id, k=k, max_tokens=self.max_tokens,
                           in_prompt=held)
        return [MemoryEntry(content=text, metadata={"user_id": self.user_id})] if text else []

    async def add(self, content: str, metadata: dict[str, Any] | None = None) -> str:
        """Store a fact as a session of its own; returns its id."""
        added = await acall(self.memory.add, [{"role": "user", "content": content}], user_id=self.user_id,
                            metadata=metadata or None)
        return str(added.session_id)

    async def add_messages(self, messages: list[Any], context: AddMessagesContext | None = None) -> int:
        """Append the messages' text to the conversation's memgas session; returns how many were kept."""
        kept = [m for m in (message_of(x) for x in messages) if m is not None]
        if kept:
            await acall(self.memory.append, kept, user_id=self.user_id, session_id=self.session_id)
        return len(kept)
