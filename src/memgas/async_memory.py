"""``AsyncMemory``: every method of :class:`~memgas.memory.Memory` as a coroutine, for asyncio agents and frameworks.

Each call runs the ``Memory`` method in a worker thread (:func:`asyncio.to_thread`), so embedding, ranking and
SQLite I/O never block the event loop, and calls of many tasks run side by side as ``Memory``'s own threads do:
searches in parallel, writes one at a time (``Memory`` takes its write lock; one writer per store file, one per
user on PostgreSQL). The results and errors are ``Memory``'s.

>>> import asyncio
>>> from memgas import AsyncMemory
>>> async def main() -> list[str]:
...     async with AsyncMemory() as mem:
...         await mem.append("I moved to Lisbon.", user_id="ana", session_id="chat")
...         return [h.session_id for h in await mem.search("where do I live?", user_id="ana")]
>>> asyncio.run(main())
['chat']
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any, Callable, Coroutine, TypeVar

from memgas.memory import KnowledgeGraph, Memory

__all__ = ["AsyncMemory", "AsyncKnowledgeGraph"]

T = TypeVar("T")


def _offloaded(method: Callable[..., T]) -> Callable[..., Coroutine[Any, Any, T]]:
    """The coroutine form of a ``Memory`` method: the same signature and docstring, run in a worker thread."""

    @functools.wraps(method)
    async def call(self: AsyncMemory | AsyncKnowledgeGraph, *args: Any, **kwargs: Any) -> T:
        return await asyncio.to_thread(method, self._wrapped, *args, **kwargs)

    return call


class AsyncMemory:
    """Long-term memory with coroutine methods (see the module docstring).

    Args:
        memory: a :class:`~memgas.memory.Memory` to wrap (it is closed with this one), or nothing;
        *args, **kwargs: otherwise, what :class:`~memgas.memory.Memory` takes, to open one (a blocking call, as
            opening a file is: open it before the event loop's hot path, or wrap one made elsewhere).
    """

    def __init__(self, memory: Memory | Any = None, *args: Any, **kwargs: Any) -> None:
        self.memory = memory if isinstance(memory, Memory) else Memory(memory, *args, **kwargs)
        self._wrapped = self.memory
        #: The knowledge graph's calls as coroutines, only where the method keeps one (``Memory.kg``); else ``None``.
        self.kg = None if self.memory.kg is None else AsyncKnowledgeGraph(self.memory.kg)

    add = _offloaded(Memory.add)
    add_many = _offloaded(Memory.add_many)
    append = _offloaded(Memory.append)
    update_message = _offloaded(Memory.update_message)
    delete_message = _offloaded(Memory.delete_message)
    delete = _offloaded(Memory.delete)
    search = _offloaded(Memory.search)
    context = _offloaded(Memory.context)
    profile = _offloaded(Memory.profile)
    expire = _offloaded(Memory.expire)
    timeline = _offloaded(Memory.timeline)
    answer = _offloaded(Memory.answer)
    get = _offloaded(Memory.get)
    users = _offloaded(Memory.users)
    units = _offloaded(Memory.units)
    graph = _offloaded(Memory.graph)
    stats = _offloaded(Memory.stats)
    llm_usage = _offloaded(Memory.llm_usage)
    index_cache = _offloaded(Memory.index_cache)
    close = _offloaded(Memory.close)
    list = _offloaded(Memory.list)  # last: in a class body this name would shadow the builtin below it

    async def __aenter__(self) -> AsyncMemory:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class AsyncKnowledgeGraph:
    """:class:`~memgas.memory.KnowledgeGraph`'s calls as coroutines (``AsyncMemory.kg``)."""

    def __init__(self, kg: KnowledgeGraph) -> None:
        self._wrapped = kg

    facts = _offloaded(KnowledgeGraph.facts)
    history = _offloaded(KnowledgeGraph.history)
    communities = _offloaded(KnowledgeGraph.communities)
    retry_pending = _offloaded(KnowledgeGraph.retry_pending)
