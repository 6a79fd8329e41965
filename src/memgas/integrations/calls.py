"""Calling any memgas facade from sync or async framework code: ``Memory`` and ``Client`` answer at once,
``AsyncMemory`` and ``AsyncClient`` with a coroutine; the adapters call :func:`call` and :func:`acall` and get
the result either way."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

from memgas.core.errors import InvalidInputError

__all__ = ["call", "acall"]


def call(memory: Any, method: str, *args: Any, **kwargs: Any) -> Any:
    """``memory.method(*args, **kwargs)`` from synchronous code; a coroutine (an async facade) is run to its end
    here, which needs a thread with no running event loop (use the adapter's async methods there)."""
    result = getattr(memory, method)(*args, **kwargs)
    if not inspect.isawaitable(result):
        return result
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_await(result))
    if inspect.iscoroutine(result):
        result.close()  # never awaited: closed, so Python does not warn
    raise InvalidInputError(f"an async memory was called from sync code inside an event loop: use the async "
                            f"form of this call (a{method})")


async def acall(memory: Any, method: str, *args: Any, **kwargs: Any) -> Any:
    """``memory.method(*args, **kwargs)`` from async code: awaited for an async facade, run in a worker thread
    for a sync one (so its blocking work stays off the event loop)."""
    bound = getattr(memory, method)
    if inspect.iscoroutinefunction(bound):
        return await bound(*args, **kwargs)
    return await asyncio.to_thread(bound, *args, **kwargs)


async def _await(awaitable: Any) -> Any:
    return await awaitable
