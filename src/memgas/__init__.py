"""memgas: long-term memory for LLM agents (multi-granularity association and selection), offline first.

>>> from memgas import Memory
>>> mem = Memory("memory.db")
>>> mem.add([{"role": "user", "content": "I hiked Mount Hood"}], user_id="alice", session_id="s1")
>>> mem.search("where did I hike?", user_id="alice", k=5)

The public names are imported on first use (PEP 562), so ``import memgas.cli`` for ``memgas --help``
does not pay for numpy, scipy, the embedder or the methods.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

# onnxruntime/OpenMP worker threads must not busy-wait on small machines (set before runtimes load).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from .lazy import lazy_exports

if TYPE_CHECKING:
    from .client import AsyncClient, Client
    from .experience.facade import Experience
    from .memory import Memory
    from .model import (
        AuthError,
        ConvergenceError,
        DuplicateSessionError,
        EmbedderMismatchError,
        ForbiddenError,
        Hit,
        InvalidInputError,
        MemgasError,
        NotFoundError,
        RateLimitedError,
        TurnHit,
        UnavailableError,
    )

__version__ = "0.1.0"

#: Each public name and the submodule that defines it.
_LAZY: dict[str, str] = {
    "Memory": "memory",
    "Client": "client",
    "AsyncClient": "client",
    "Experience": "experience.facade",
    **{name: "model" for name in ("Hit", "TurnHit", "MemgasError", "InvalidInputError", "DuplicateSessionError",
                                  "NotFoundError", "EmbedderMismatchError", "ConvergenceError", "AuthError",
                                  "ForbiddenError", "RateLimitedError", "UnavailableError")},
}

__all__ = [*_LAZY, "__version__"]


__getattr__, __dir__ = lazy_exports(__name__, globals(), _LAZY)
