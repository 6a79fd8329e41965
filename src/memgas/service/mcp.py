"""The MCP tools (placeholder until the MCP server lands: nothing is mounted)."""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Callable

__all__ = ["mount_mcp"]


def mount_mcp(app: Any, state: Any) -> Callable[[], Any]:
    """Mount nothing yet; return the lifespan to enter with the app's."""

    @asynccontextmanager
    async def lifespan() -> AsyncIterator[None]:
        yield

    return lifespan
