"""Memory methods, selectable by name (``memgas``, its ablations, the baselines, and structured methods
from the literature: ``sgmem``, ``memtree``, ``raptor``, ``episodic``, ``secom``)."""

from __future__ import annotations

from typing import Any, Callable

from ..embed import Embedder
from ..model import InvalidInputError
from .base import IngestStats, MemoryMethod
from .baselines import BM25Method, DenseMethod
from .episodic import Episodic
from .memgas import MemGAS, MemGASConfig
from .memtree import MemTree
from .raptor import Raptor
from .secom import SeCom
from .sgmem import SGMem
from .zep import Zep

__all__ = ["METHODS", "get_method", "MemoryMethod", "IngestStats", "MemGAS", "MemGASConfig", "DenseMethod",
           "BM25Method", "SGMem", "MemTree", "Raptor", "Episodic", "SeCom", "Zep", "NEEDS_LLM",
           "LLM_DESCRIBED"]


def _memgas(**fixed: Any) -> Callable[..., MemoryMethod]:
    def make(embedder: Embedder, **kwargs: Any) -> MemoryMethod:
        return MemGAS(embedder, **{**kwargs, **fixed})  # the ablated part stays off whatever else is set

    return make


def _dense(granularity: str) -> Callable[..., MemoryMethod]:
    return lambda embedder, **kwargs: DenseMethod(embedder, granularity, **kwargs)  # type: ignore[arg-type]


#: Every method by name. The ``memgas-no-*`` ablations switch one part of MemGAS off.
METHODS: dict[str, Callable[..., MemoryMethod]] = {
    "memgas": _memgas(),
    "memgas-no-assoc": _memgas(use_association=False),
    "memgas-no-router": _memgas(use_router=False),
    "memgas-no-ppr": _memgas(use_ppr=False),
    "memgas-no-lexical": _memgas(use_lexical=False),
    "memgas-no-session": _memgas(session_weight=0.0),
    "bm25": lambda embedder, **kwargs: BM25Method(embedder, side="user", **kwargs),
    "bm25-all": lambda embedder, **kwargs: BM25Method(embedder, side="all", **kwargs),
    "dense-session": _dense("session"),
    "dense-turn": _dense("turn"),
    "dense-summary": _dense("summary"),
    "dense-keyword": _dense("keyword"),
    "sgmem": SGMem,
    "memtree": MemTree,
    "raptor": Raptor,
    "episodic": Episodic,
    "secom": SeCom,
    "zep": Zep,
}
#: Methods that cannot work without an LLM: they take ``llm=`` (a spec or an instance).
NEEDS_LLM: frozenset[str] = frozenset({"zep"})
#: Methods whose tree nodes get LLM-written descriptions when an LLM is configured (``group_summarizer=``).
LLM_DESCRIBED: frozenset[str] = frozenset({"memtree", "raptor"})


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
