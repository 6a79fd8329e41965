"""Memory methods, selectable by name (``memgas``, its ablations, and the baselines)."""

from __future__ import annotations

from typing import Any, Callable

from ..embed import Embedder
from ..model import InvalidInputError
from .base import IngestStats, MemoryMethod
from .baselines import BM25Method, DenseMethod
from .memgas import MemGAS, MemGASConfig

__all__ = ["METHODS", "get_method", "MemoryMethod", "IngestStats", "MemGAS", "MemGASConfig", "DenseMethod",
           "BM25Method"]


def _memgas(**fixed: Any) -> Callable[..., MemoryMethod]:
    def make(embedder: Embedder, **kwargs: Any) -> MemoryMethod:
        return MemGAS(embedder, **{**fixed, **kwargs})

    return make


def _dense(granularity: str) -> Callable[..., MemoryMethod]:
    return lambda embedder, **kwargs: DenseMethod(embedder, granularity, **kwargs)  # type: ignore[arg-type]


#: Every method by name. The ``memgas-no-*`` ablations switch one part of MemGAS off.
METHODS: dict[str, Callable[..., MemoryMethod]] = {
    "memgas": _memgas(),
    "memgas-no-assoc": _memgas(use_association=False),
    "memgas-no-router": _memgas(use_router=False),
    "memgas-no-ppr": _memgas(use_ppr=False),
    "memgas-no-lexical": _memgas(lexical_weight=0.0),
    "bm25": lambda embedder, **kwargs: BM25Method(embedder, side="user", **kwargs),
    "bm25-all": lambda embedder, **kwargs: BM25Method(embedder, side="all", **kwargs),
    "dense-session": _dense("session"),
    "dense-turn": _dense("turn"),
    "dense-summary": _dense("summary"),
    "dense-keyword": _dense("keyword"),
}


def get_method(name: str, embedder: Embedder, **kwargs: Any) -> MemoryMethod:
    """Instantiate the method called ``name``.

    Raises:
        InvalidInputError: unknown name (the message lists the known ones).
    """
    try:
        factory = METHODS[name]
    except KeyError:
        raise InvalidInputError(f"unknown method {name!r}; choose from {', '.join(METHODS)}") from None
    method = factory(embedder, **kwargs)
    method.name = name
    return method
