"""Where memgas keeps its files by default (``$MEMGAS_CACHE_DIR``, else ``~/.cache/memgas``).
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["default_cache_path", "default_llm_cache_path"]


def default_cache_path() -> Path:
    """``$MEMGAS_CACHE_DIR/embeddings.sqlite``, else ``~/.cache/memgas/embeddings.sqlite``."""
    base = os.environ.get("MEMGAS_CACHE_DIR")
    return (Path(base) if base else Path.home() / ".cache" / "memgas") / "embeddings.sqlite"


# ----------------------------------------------------------------------------- response cache


def default_llm_cache_path() -> Path:
    """``llm.sqlite`` next to the embedding cache (``$MEMGAS_CACHE_DIR`` or ``~/.cache/memgas``)."""
    return default_cache_path().with_name("llm.sqlite")
