"""memgas: long-term memory for LLM agents (multi-granularity association and selection), offline first.

>>> from memgas import Memory
>>> mem = Memory("memory.db")
>>> mem.add([{"role": "user", "content": "I hiked Mount Hood"}], user_id="alice", session_id="s1")
>>> mem.search("where did I hike?", user_id="alice", k=5)

The public names are imported on first use (PEP 562), so ``import memgas.cli`` for ``memgas --help``
does not pay for numpy, scipy, the embedder or the methods.
"""

from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING, Any

# onnxruntime/OpenMP worker threads must not busy-wait on small machines (set before runtimes load).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

if TYPE_CHECKING:
    from .memory import Memory
    from .model import (
        ConvergenceError,
        DuplicateSessionError,
        EmbedderMismatchError,
        Hit,
        InvalidInputError,
        MemgasError,
        NotFoundError,
        TurnHit,
    )

__version__ = "0.1.0"

#: Each public name and the submodule that defines it.
_LAZY: dict[str, str] = {
    "Memory": "memory",
    **{name: "model" for name in ("Hit", "TurnHit", "MemgasError", "InvalidInputError", "DuplicateSessionError",
                                  "NotFoundError", "EmbedderMismatchError", "ConvergenceError")},
}

__all__ = [*_LAZY, "__version__"]


def __getattr__(name: str) -> Any:
    """Import a public name's submodule on first access and cache the name in this module."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'memgas' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
