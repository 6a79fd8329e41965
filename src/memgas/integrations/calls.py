"""Calling any memgas facade from sync or async framework code: ``Memory`` and ``Client`` answer at once,
``AsyncMemory`` and ``AsyncClient`` with a coroutine; the adapters call :func:`call` and :func:`acall` with the
facade's bound method (so a renamed call or parameter is a type error, not a surprise at run time) and get the
result either way."""

from __future__ import annotations

import asyncio
import inspect
from typing import TYPE_CHECKING, Any, Callable, Union

from memgas.core.errors import InvalidInputError

if TYPE_CHECKING:
    from memgas.async_memory import AsyncMemory
    from memgas.client import AsyncClient, Client
    from memgas.memory import Memory

__all__ = ["call", "acall", "AnyMemory"]

#: What an adapter takes: any face of the declared API (:class:`memgas.api.MemoryAPI`), sync or async.
AnyMemory = Union["Memory", "AsyncMemory", "Client", "AsyncClient"]


def call(method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``method(*args, **kwargs)`` from synchronous code; a coroutine (an async facade's) is run to its end here,
    which needs a thread with no running event loop (use the adapter's async methods there)."""
    result = method(*args, **kwargs)
    if not inspect.isawaitable(result):
        return result
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_await(result))
    if inspect.iscoroutine(result):
        result.close()  # never awaited: closed, so Python does not warn
    raise InvalidInputError(f"an async memory was called from sync code inside an event loop: use the async "
                            f"form of this call (a{method.__name__})")


async def acall(method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``method(*args, **kwargs)`` from async code: awaited for an async facade's, run in a worker thread for a
    sync one's (so its blocking work stays off the event loop)."""
    if inspect.iscoroutinefunction(method):
        return await method(*args, **kwargs)
    return await asyncio.to_thread(method, *args, **kwargs)


async def _await(awaitable: Any) -> Any:
    return await awaitable
