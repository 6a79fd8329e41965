"""AutoGen: ``MemgasMemory``, an ``autogen_core.memory.Memory``. Extra ``autogen`` (``autogen-core``).

What maps to what: ``add`` stores a ``MemoryContent`` as a memgas session of ``user_id`` (its text as one user
message, its ``metadata`` and MIME type kept in the session's metadata); ``query`` is :meth:`Memory.search
<memgas.memory.Memory.search>`, each hit one ``MemoryContent`` (the session's best turns, with ``session_id``,
``timestamp``, ``score`` and ``relevance`` in its metadata); ``update_context`` searches for the context's last
user message and, when memgas finds something, adds :meth:`Memory.context <memgas.memory.Memory.context>` as a
``SystemMessage`` (what an ``AssistantAgent`` does with its ``memory=[...]`` before each model call); ``clear``
deletes all of the user's memory; ``close`` leaves the memgas memory open for its owner.

A long conversation: with ``session_id``, ``update_context`` also keeps the conversation in that memgas session (the
model context's user and assistant messages not stored yet, read from its whole state, so what a
``BufferedChatCompletionContext`` no longer shows is there too), and recalls its older part with every other
conversation: what the model context shows of it is left out (``Memory.context``'s ``in_prompt``), the message being
answered first of all.
"""

from __future__ import annotations

import json
from typing import Any

from autogen_core import CancellationToken
from autogen_core.memory import Memory, MemoryContent, MemoryMimeType, MemoryQueryResult, UpdateContextResult
from autogen_core.model_context import ChatCompletionContext
from autogen_core.models import AssistantMessage, LLMMessage, SystemMessage, UserMessage

from memgas.core.errors import NotFoundError
from memgas.core.types import Hit
from memgas.integrations.calls import AnyMemory, acall

__all__ = ["MemgasMemory"]


def _content(hit: Hit) -> MemoryContent:
    turns = sorted(hit.turns, key=lambda t: -t.score)
    return MemoryContent(content="\n".join(t.text for t in turns), mime_type=MemoryMimeType.TEXT,
                         metadata={"session_id": hit.session_id, "score": float(hit.score),
                                   "relevance": float(hit.relevance),
                                   "timestamp": hit.timestamp.isoformat() if hit.timestamp else None})


def _said(message: LLMMessage | dict[str, Any]) -> dict[str, str] | None:
    """A user or assistant text message of the model context (as a message or its saved state) as a memgas message;
    ``None`` for the rest (system messages, memgas's own among them; tool calls and their results)."""
    data = message if isinstance(message, dict) else message.model_dump()
    content = data.get("content")
    if data.get("type") not in (UserMessage.__name__, AssistantMessage.__name__) or not isinstance(content, str):
        return None
    if not content.strip():
        return None
    return {"role": "user" if data["type"] == UserMessage.__name__ else "assistant", "content": content}


class MemgasMemory(Memory):
    """memgas as an AutoGen memory (see the module docstring).

    Args:
        memory: a ``Memory``, ``AsyncMemory``, ``Client`` or ``AsyncClient``.
        user_id: whose memory.
        k: sessions recalled per query.
        max_tokens: the budget of the context ``update_context`` adds (4 characters a token).
        session_id: the memgas session the conversation is kept in (``None``: it is not kept).
    """

    component_type = "memory"

    def __init__(self, memory: AnyMemory, *, user_id: str, k: int = 3, max_tokens: int = 500,
                 session_id: str | None = None) -> None:
        self.memory, self.user_id, self.k, self.max_tokens = memory, user_id, k, max_tokens
        self.session_id = session_id
        self._kept: int | None = None  # how many of the conversation's messages the session holds

    async def _keep(self, model_context: ChatCompletionContext) -> None:
        """Append the conversation's messages the session does not hold yet."""
        assert self.session_id is not None
        if self._kept is None:
            try:
                self._kept = len((await acall(self.memory.get, self.session_id, user_id=self.user_id)).messages)
            except NotFoundError:
                self._kept = 0
        state = await model_context.save_state()
        said = [m for m in (_said(x) for x in state.get("messages", [])) if m is not None]
        new = said[self._kept:]
        if new:
            await acall(self.memory.append, new, user_id=self.user_id, session_id=self.session_id)
            self._kept = len(said)

    async def add(self, content: MemoryContent, cancellation_token: CancellationToken | None = None) -> None:
        """Store one memory as its own session."""
        text = content.content if isinstance(content.content, str) else json.dumps(content.content, default=str)
        meta = {"autogen": {"mime_type": str(content.mime_type), "metadata": content.metadata or {}}}
        await acall(self.memory.add, [{"role": "user", "content": text}], user_id=self.user_id, metadata=meta)

    async def query(self, query: str | MemoryContent, cancellation_token: CancellationToken | None = None,
                    **kwargs: Any) -> MemoryQueryResult:
        """The sessions most relevant to ``query`` (``k=`` overrides the memory's)."""
        text = query if isinstance(query, str) else str(query.content)
        hits = await acall(self.memory.search, text, user_id=self.user_id, k=kwargs.get("k", self.k))
        return MemoryQueryResult(results=[_content(h) for h in hits])

    async def update_context(self, model_context: ChatCompletionContext) -> UpdateContextResult:
        """Add what memgas recalls for the last user message to ``model_context``, as a system message (with a
        ``session_id``, after keeping the conversation's new messages)."""
        shown = await model_context.get_messages()
        asked = [m.content for m in shown if isinstance(m, UserMessage) and isinstance(m.content, str)
                 and m.content.strip()]
        if not asked:
            return UpdateContextResult(memories=MemoryQueryResult(results=[]))
        held = None
        if self.session_id is not None:
            await self._keep(model_context)
            held = {self.session_id: sum(_said(m) is not None for m in shown)}
        text = await acall(self.memory.context, asked[-1][:10_000], user_id=self.user_id, k=self.k,
                           max_tokens=self.max_tokens, in_prompt=held)
        if not text:
            return UpdateContextResult(memories=MemoryQueryResult(results=[]))
        await model_context.add_message(SystemMessage(content=text))
        return UpdateContextResult(memories=MemoryQueryResult(results=[MemoryContent(
            content=text, mime_type=MemoryMimeType.TEXT, metadata={"user_id": self.user_id})]))

    async def clear(self) -> None:
        """Delete all of the user's memory."""
        try:
            await acall(self.memory.delete, user_id=self.user_id)
        except NotFoundError:
            pass

    async def close(self) -> None:
        """Nothing to release: the memgas memory belongs to its owner."""
