"""The memory tools the framework adapters hand an agent, as plain async functions: ``search_memory`` and
``add_memory``. Each framework wraps them in its own tool type (the Agents SDK's ``function_tool``, Pydantic AI's
``FunctionToolset``), reading the tool's name from the function and its description and arguments from the
docstring, so every framework's agent sees the same two tools."""

from __future__ import annotations

from typing import Awaitable, Callable, Iterable, Mapping

from memgas.integrations.calls import AnyMemory, acall

__all__ = ["memory_tools"]


def memory_tools(memory: AnyMemory, *, user_id: str, k: int = 5, max_tokens: int = 800,
                 exclude_sessions: Iterable[str] = (), in_prompt: Mapping[str, int] | None = None
                 ) -> tuple[Callable[[str], Awaitable[str]], Callable[[str], Awaitable[str]]]:
    """``(search_memory, add_memory)`` over ``user_id``'s memory: the first is :meth:`Memory.context
    <memgas.memory.Memory.context>` for a query (``exclude_sessions`` and ``in_prompt`` as there: what the agent
    already reads never comes back), the second stores a fact as a session of its own."""
    excluded = list(exclude_sessions)
    held = dict(in_prompt or {})

    async def search_memory(query: str) -> str:
        """Find what the user said or was told in earlier conversations.

        Args:
            query: what to look for, e.g. the user's question.
        """
        text = await acall(memory.context, query[:10_000], user_id=user_id, k=k, max_tokens=max_tokens,
                           exclude_sessions=excluded, in_prompt=held or None)
        return text or "(no memories found)"

    async def add_memory(text: str) -> str:
        """Remember a fact about the user for later conversations.

        Args:
            text: the fact, in a sentence.
        """
        added = await acall(memory.add, [{"role": "user", "content": text}], user_id=user_id)
        return f"stored as session {added.session_id}"

    return search_memory, add_memory
