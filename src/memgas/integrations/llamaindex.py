"""LlamaIndex: ``MemgasMemoryBlock``, a ``llama_index.core.memory.BaseMemoryBlock``. Extra ``llamaindex``
(``llama-index-core``).

What maps to what: the block's content for a turn (``_aget``) is :meth:`Memory.context
<memgas.memory.Memory.context>` for the last user message of the turn (dated, session-cited excerpts within
``max_tokens``; empty when there is none), which LlamaIndex's ``Memory`` puts into the prompt inside its
``<memory>`` system message; messages put into the block (``_aput``: what the short-term memory flushes, or a
direct ``aput``) are appended to the memgas session ``session_id`` of ``user_id``. LlamaIndex roles map to
memgas's (``user``, ``assistant``, ``system``, ``tool``; ``chatbot``/``model`` are ``assistant``, ``developer``
``system``, ``function`` ``tool``).

>>> import asyncio
>>> from llama_index.core.llms import ChatMessage
>>> from memgas import Memory
>>> from memgas.integrations.llamaindex import MemgasMemoryBlock
>>> mem = Memory()
>>> monday = MemgasMemoryBlock(memory=mem, user_id="ana", session_id="monday")
>>> asyncio.run(monday.aput([ChatMessage(role="user", content="My locker code is 4512.")]))
>>> tuesday = MemgasMemoryBlock(memory=mem, user_id="ana", session_id="tuesday")
>>> print(asyncio.run(tuesday.aget([ChatMessage(role="user", content="What is my locker code?")])).splitlines()[1])
[1] ... · monday · user: My locker code is 4512.
"""

from __future__ import annotations

from typing import Any, List, Optional

from llama_index.core.llms import ChatMessage
from llama_index.core.memory import BaseMemoryBlock
from pydantic import Field

from memgas.integrations.calls import acall

__all__ = ["MemgasMemoryBlock"]

_ROLES = {"user": "user", "assistant": "assistant", "system": "system", "tool": "tool", "chatbot": "assistant",
          "model": "assistant", "developer": "system", "function": "tool"}


def _text(message: ChatMessage) -> str:
    return message.content if isinstance(message.content, str) else str(message.content or "")


class MemgasMemoryBlock(BaseMemoryBlock[str]):
    """Long-term memory from memgas for LlamaIndex's ``Memory`` (see the module docstring).

    Args:
        memory: a ``Memory``, ``AsyncMemory``, ``Client`` or ``AsyncClient``.
        user_id: whose memory.
        session_id: the memgas session the block's messages (those LlamaIndex flushes out of its short-term window)
            are appended to; its context recalls from it too.
        k: sessions recalled per turn.
        max_tokens: the context's budget (4 characters a token).
    """

    name: str = "memgas"
    description: Optional[str] = "what earlier conversations said that matters now"
    memory: Any = Field(exclude=True)
    user_id: str
    session_id: str = "llamaindex"
    k: int = 3
    max_tokens: int = 500

    async def _aget(self, messages: Optional[List[ChatMessage]] = None, **block_kwargs: Any) -> str:
        asked = [_text(m) for m in messages or () if str(getattr(m.role, "value", m.role)) == "user" and _text(m)]
        if not asked:
            return ""
        # The block's own session is what LlamaIndex flushed out of its short-term window: memory to recall, not a
        # repeat of the prompt (what is still in the window was never put here).
        return await acall(self.memory.context, asked[-1][:10_000], user_id=self.user_id, k=self.k,
                           max_tokens=self.max_tokens)

    async def _aput(self, messages: List[ChatMessage]) -> None:
        stored = [{"role": _ROLES.get(str(getattr(m.role, "value", m.role)), "user"), "content": _text(m)}
                  for m in messages if _text(m).strip()]
        if stored:
            await acall(self.memory.append, stored, user_id=self.user_id, session_id=self.session_id)
