"""memgas: long-term memory for LLM agents (multi-granularity association and selection), offline first.

>>> from memgas import Memory
>>> mem = Memory("memory.db")
>>> mem.add([{"role": "user", "content": "I hiked Mount Hood"}], user_id="alice", session_id="s1").units
4
>>> [hit.session_id for hit in mem.search("where did I hike?", user_id="alice", k=5)]
['s1']
>>> mem.close()

The public names are imported on first use (PEP 562), so ``import memgas.cli`` for ``memgas --help``
does not pay for numpy, scipy, the embedder or the methods.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

# onnxruntime/OpenMP worker threads must not busy-wait on small machines (set before runtimes load).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from memgas.core.lazy import lazy_exports
from memgas.core.version import __version__

if TYPE_CHECKING:
    from memgas.async_memory import AsyncMemory
    from memgas.client import AsyncClient, Client
    from memgas.core.errors import (
        AuthError,
        ConvergenceError,
        DuplicateSessionError,
        EmbedderMismatchError,
        ForbiddenError,
        InvalidInputError,
        MemgasError,
        NotFoundError,
        RateLimitedError,
        UnavailableError,
    )
    from memgas.core.types import Hit, TurnHit
    from memgas.experience.facade import Experience
    from memgas.memory import Memory


#: Each public name and the submodule that defines it.
_LAZY: dict[str, str] = {
    "Memory": "memory",
    "AsyncMemory": "async_memory",
    "Client": "client",
    "AsyncClient": "client",
    "Experience": "experience.facade",
    "Hit": "core.types",
    "TurnHit": "core.types",
    **{name: "core.errors" for name in ("MemgasError", "InvalidInputError", "DuplicateSessionError", "NotFoundError",
                                        "EmbedderMismatchError", "ConvergenceError", "AuthError", "ForbiddenError",
                                        "RateLimitedError", "UnavailableError")},
}

__all__ = [*_LAZY, "__version__"]


__getattr__, __dir__ = lazy_exports(__name__, globals(), _LAZY)
