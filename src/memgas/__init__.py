"""memgas: long-term memory for LLM agents (multi-granularity association and selection), offline first.

>>> from memgas import Memory
>>> mem = Memory("memory.db")
>>> mem.add([{"role": "user", "content": "I hiked Mount Hood"}], user_id="alice", session_id="s1")
>>> mem.search("where did I hike?", user_id="alice", k=5)
"""

from __future__ import annotations

import os

# onnxruntime/OpenMP worker threads must not busy-wait on small machines (set before runtimes load).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from .memory import Memory  # noqa: E402
from .model import (  # noqa: E402
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
__all__ = [
    "Memory",
    "Hit",
    "TurnHit",
    "MemgasError",
    "InvalidInputError",
    "DuplicateSessionError",
    "NotFoundError",
    "EmbedderMismatchError",
    "ConvergenceError",
    "__version__",
]
