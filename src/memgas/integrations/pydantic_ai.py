"""Pydantic AI: ``MemgasHistory`` (a history processor: a short-term window, what leaves it kept in memgas, and
memgas's context for the current prompt) and ``memgas_toolset`` (tools to search and add memories). Extra
``pydantic-ai``.

What maps to what: one ``MemgasHistory`` is one conversation, the memgas session ``session_id`` of ``user_id``. Before
each model request Pydantic AI hands it the message history; it keeps the last ``window`` messages (starting at a
user prompt), appends what falls out of them to the memgas session (user prompts as ``user``, text replies as
``assistant``, tool calls as ``[tool call] name(args)``, tool returns as ``tool``; system prompts stay out: they are
instructions, not conversation), and puts :meth:`Memory.context <memgas.memory.Memory.context>` for the latest user
prompt into the first request of the window as a system prompt part. Pydantic AI keeps the processed history as the
run's, so a trimmed message is dropped once, stored once. The memgas session holds only what left the window, so the
context recalls it (and every other conversation of the user) but never the turn being asked.

>>> import asyncio
>>> from pydantic_ai import Agent
>>> from pydantic_ai.capabilities import ProcessHistory
>>> from pydantic_ai.models.test import TestModel
>>> from memgas import Memory
>>> from memgas.integrations.pydantic_ai import MemgasHistory
>>> mem = Memory()
>>> _ = mem.add("My locker code is 4512.", user_id="ana", session_id="monday")
>>> history = MemgasHistory(mem, user_id="ana", session_id="tuesday")
>>> agent = Agent(TestModel(custom_output_text="ok"), capabilities=[ProcessHistory(history)])
>>> result = asyncio.run(agent.run("What is my locker code?"))
>>> print(result.all_messages()[0].parts[0].content.splitlines()[2])
[1] ... · monday · user: My locker code is 4512.
"""

from __future__ import annotations

import json
from typing import Any, Iterable

from pydantic_ai import messages as pm
from pydantic_ai.toolsets import FunctionToolset

from memgas.integrations.calls import AnyMemory, acall
from memgas.integrations.tools import memory_tools

__all__ = ["MemgasHistory", "memgas_toolset", "CONTEXT_HEADER"]

#: The first line of the system prompt part that carries memgas's context (how the processor finds its own part).
CONTEXT_HEADER = "Long-term memory (memgas), from earlier in this and other conversations:"


def _stored(message: pm.ModelMessage) -> list[dict[str, Any]]:
    """The memgas messages one Pydantic AI message is kept as (none for system prompts and retries)."""
    out = []
    for part in message.parts:
        if isinstance(part, pm.UserPromptPart):
            text = part.content if isinstance(part.content, str) else " ".join(
                c for c in part.content if isinstance(c, str))
            out.append({"role": "user", "content": text})
        elif isinstance(part, pm.TextPart):
            out.append({"role": "assistant", "content": part.content})
        elif isinstance(part, pm.ToolCallPart):
            args = part.args if isinstance(part.args, str) else json.dumps(part.args or {}, default=str)
            out.append({"role": "assistant", "content": f"[tool call] {part.tool_name}({args})"})
        elif isinstance(part, pm.ToolReturnPart):
            out.append({"role": "tool", "content": part.model_response_str()})
    return [m for m in out if m["content"].strip()]


def _asks(message: pm.ModelMessage) -> bool:
    return isinstance(message, pm.ModelRequest) and any(isinstance(p, pm.UserPromptPart) for p in message.parts)


def _without_context(message: pm.ModelMessage) -> pm.ModelMessage:
    if not isinstance(message, pm.ModelRequest):
        return message
    parts = [p for p in message.parts
             if not (isinstance(p, pm.SystemPromptPart) and p.content.startswith(CONTEXT_HEADER))]
    return message if len(parts) == len(message.parts) else pm.ModelRequest(parts=parts,
                                                                              instructions=message.instructions)


class MemgasHistory:
    """A Pydantic AI history processor over memgas (see the module docstring); give it to the agent as
    ``capabilities=[ProcessHistory(MemgasHistory(...))]``.

    Args:
        memory: a ``Memory``, ``AsyncMemory``, ``Client`` or ``AsyncClient``.
        user_id: whose memory.
        session_id: the memgas session this conversation's older messages are kept in.
        window: how many of the latest messages the model reads as they are (at least 1).
        k: sessions the context draws on.
        max_tokens: the context's budget (4 characters a token).
    """

    def __init__(self, memory: AnyMemory, *, user_id: str, session_id: str, window: int = 20, k: int = 5,
                 max_tokens: int = 800) -> None:
        if window < 1:
            raise ValueError("window must be at least 1 message")
        self.memory, self.user_id, self.session_id = memory, user_id, session_id
        self.window, self.k, self.max_tokens = window, k, max_tokens

    def _cut(self, messages: list[pm.ModelMessage]) -> int:
        """Where the window starts: ``window`` messages from the end, moved back to a user prompt."""
        start = max(0, len(messages) - self.window)
        while start > 0 and not _asks(messages[start]):
            start -= 1
        return start

    async def __call__(self, messages: list[pm.ModelMessage]) -> list[pm.ModelMessage]:
        """The history the model reads: the window, memgas's context in its first request."""
        messages = [_without_context(m) for m in messages]
        start = self._cut(messages)
        left = [m for message in messages[:start] for m in _stored(message)]
        if left:
            await acall(self.memory.append, left, user_id=self.user_id, session_id=self.session_id)
        kept = messages[start:]
        asked = [p.content for m in kept if isinstance(m, pm.ModelRequest) for p in m.parts
                 if isinstance(p, pm.UserPromptPart) and isinstance(p.content, str) and p.content.strip()]
        if not asked or not kept or not isinstance(kept[0], pm.ModelRequest):
            return kept
        text = await acall(self.memory.context, asked[-1][:10_000], user_id=self.user_id, k=self.k,
                           max_tokens=self.max_tokens)
        if text:
            first = kept[0]
            assert isinstance(first, pm.ModelRequest)
            kept[0] = pm.ModelRequest(parts=[pm.SystemPromptPart(content=f"{CONTEXT_HEADER}\n{text}"), *first.parts],
                                      instructions=first.instructions)
        return kept


def memgas_toolset(memory: AnyMemory, *, user_id: str, k: int = 5, max_tokens: int = 800,
                   exclude_sessions: Iterable[str] = ()) -> FunctionToolset[Any]:
    """A toolset for a Pydantic AI agent: ``search_memory`` (what from earlier conversations matters for a query, as
    dated, cited text) and ``add_memory`` (store a fact as its own session). ``exclude_sessions``: conversations the
    agent already reads in full, never recalled as memory."""
    return FunctionToolset(list(memory_tools(memory, user_id=user_id, k=k, max_tokens=max_tokens,
                                             exclude_sessions=exclude_sessions)))
