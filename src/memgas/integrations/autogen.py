"""AutoGen: ``MemgasMemory``, an ``autogen_core.memory.Memory``. Extra ``autogen`` (``autogen-core``).

What maps to what: ``add`` stores a ``MemoryContent`` as a memgas session of ``user_id`` (its text as one user
message, its ``metadata`` and MIME type kept in the session's metadata); ``query`` is :meth:`Memory.search
<memgas.memory.Memory.search>`, each hit one ``MemoryContent`` (the session's best turns, with ``session_id``,
``timestamp``, ``score`` and ``relevance`` in its metadata); ``update_context`` searches for the context's last
user message and, when memgas finds something, adds :meth:`Memory.context <memgas.memory.Memory.context>` as a
``SystemMessage`` (what an ``AssistantAgent`` does with its ``memory=[...]`` before each model call); ``clear``
deletes all of the user's memory; ``close`` leaves the memgas memory open for its owner.
"""

from __future__ import annotations

import json
from typing import Any

from autogen_core import CancellationToken
from autogen_core.memory import Memory, MemoryContent, MemoryMimeType, MemoryQueryResult, UpdateContextResult
from autogen_core.model_context import ChatCompletionContext
from autogen_core.models import SystemMessage, UserMessage

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


class MemgasMemory(Memory):
    """memgas as an AutoGen memory (see the module docstring).

    Args:
        memory: a ``Memory``, ``AsyncMemory``, ``Client`` or ``AsyncClient``.
        user_id: whose memory.
        k: sessions recalled per query.
        max_tokens: the budget of the context ``update_context`` adds (4 characters a token).
    """

    component_type = "memory"

    def __init__(self, memory: AnyMemory, *, user_id: str, k: int = 3, max_tokens: int = 500) -> None:
        self.memory, self.user_id, self.k, self.max_tokens = memory, user_id, k, max_tokens

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
        """Add what memgas recalls for the last user message to ``model_context``, as a system message."""
        asked = [m.content for m in await model_context.get_messages()
                 if isinstance(m, UserMessage) and isinstance(m.content, str) and m.content.strip()]
        if not asked:
            return UpdateContextResult(memories=MemoryQueryResult(results=[]))
        found = await self.query(asked[-1][:10_000])
        if found.results:
            text = await acall(self.memory.context, asked[-1][:10_000], user_id=self.user_id, k=self.k,
                               max_tokens=self.max_tokens)
            await model_context.add_message(SystemMessage(content=text))
        return UpdateContextResult(memories=found)

    async def clear(self) -> None:
        """Delete all of the user's memory."""
        try:
            await acall(self.memory.delete, user_id=self.user_id)
        except NotFoundError:
            pass

    async def close(self) -> None:
        """Nothing to release: the memgas memory belongs to its owner."""
