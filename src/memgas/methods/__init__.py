"""Memory methods, selectable by name (``memgas``, its ablations, the baselines, and structured methods
from the literature: ``sgmem``, ``memtree``, ``raptor``, ``episodic``, ``secom``).

A method's module is imported when the method is first made (or its class first named here), not with
this package, so ``import memgas.memory`` pays for no method and a ``Memory`` only for the one it uses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..lazy import lazy_exports
from ..model import InvalidInputError
from .base import IngestStats, MemoryMethod

if TYPE_CHECKING:
    from ..embed import Embedder
    from .baselines import BM25Method, DenseMethod
    from .episodic import Episodic
    from .memgas import MemGAS, MemGASConfig
    from .memtree import MemTree
    from .raptor import Raptor
    from .secom import SeCom
    from .sgmem import SGMem
    from .zep import Zep
    from .amem import AMem
    from .hipporag import HippoRAG
    from .hmem import HMem
    from .mpc import MPC
    from .comedy import Comedy
    from .fullhistory import FullHistory
    from .mpnet import MPNetMethod
    from .recursum import RecurSum

#: Each class (or config) exported here and the submodule that defines it.
_LAZY: dict[str, str] = {
    "MemGAS": "memgas", "MemGASConfig": "memgas", "DenseMethod": "baselines", "BM25Method": "baselines",
    "SGMem": "sgmem", "MemTree": "memtree", "Raptor": "raptor", "Episodic": "episodic", "SeCom": "secom",
    "Zep": "zep",
    "MPC": "mpc", "AMem": "amem", "HippoRAG": "hipporag", "HMem": "hmem",
    "FullHistory": "fullhistory", "MPNetMethod": "mpnet", "RecurSum": "recursum", "Comedy": "comedy",
}

__all__ = ["METHODS", "get_method", "MemoryMethod", "IngestStats", *_LAZY, "NEEDS_LLM", "QA_ONLY", "LLM_DESCRIBED"]

#: Every method by name: its class (a name in :data:`_LAZY`) and the options the name fixes, which win over
#: the caller's (an ablation stays ablated whatever else is set). The ``memgas-no-*`` ablations switch one
#: part of MemGAS off.
METHODS: dict[str, tuple[str, dict[str, Any]]] = {
    "memgas": ("MemGAS", {}),
    "memgas-no-assoc": ("MemGAS", {"use_association": False}),
    "memgas-no-router": ("MemGAS", {"use_router": False}),
    "memgas-no-ppr": ("MemGAS", {"use_ppr": False}),
    "memgas-no-lexical": ("MemGAS", {"use_lexical": False}),
    "memgas-no-session": ("MemGAS", {"session_weight": 0.0}),
    "bm25": ("BM25Method", {"side": "user"}),
    "bm25-all": ("BM25Method", {"side": "all"}),
    "dense-session": ("DenseMethod", {"granularity": "session"}),
    "dense-turn": ("DenseMethod", {"granularity": "turn"}),
    "dense-summary": ("DenseMethod", {"granularity": "summary"}),
    "dense-keyword": ("DenseMethod", {"granularity": "keyword"}),
    "sgmem": ("SGMem", {}),
    "memtree": ("MemTree", {}),
    "raptor": ("Raptor", {}),
    "episodic": ("Episodic", {}),
    "secom": ("SeCom", {}),
    "zep": ("Zep", {}),
    "mpc": ("MPC", {}),
    "amem": ("AMem", {}),
    "amem-extractive": ("AMem", {"use_llm": False}),
    "hipporag": ("HippoRAG", {}),
    "hipporag-rules": ("HippoRAG", {"use_llm": False}),
    "hmem": ("HMem", {}),
    "hmem-clusters": ("HMem", {"use_llm": False}),
    "full-history": ("FullHistory", {}),
    "mpnet": ("MPNetMethod", {}),
    "recursum": ("RecurSum", {"extractive": False}),
    "recursum-extractive": ("RecurSum", {"extractive": True}),
    "comedy": ("Comedy", {}),
}
#: Methods that cannot work without an LLM: they take ``llm=`` (a spec or an instance).
NEEDS_LLM: frozenset[str] = frozenset({"zep", "mpc", "amem", "hipporag", "hmem", "recursum", "comedy"})
#: Methods that answer questions only (``bench --qa``): their memory ranks no session, so retrieval is refused.
QA_ONLY: frozenset[str] = frozenset({"full-history", "comedy"})
#: Methods whose tree nodes get LLM-written descriptions when an LLM is configured (``group_summarizer=``).
LLM_DESCRIBED: frozenset[str] = frozenset({"memtree", "raptor"})


__getattr__, __dir__ = lazy_exports(__name__, globals(), _LAZY)


def get_method(name: str, embedder: Embedder, **kwargs: Any) -> MemoryMethod:
    """Instantiate the method called ``name`` (importing its module on first use).

    Args:
        name: a key of :data:`METHODS`.
        embedder: the embedder the method embeds units and queries with.
        **kwargs: the method's parameters; those the name fixes (an ablation's switch, a baseline's side or
            granularity) override them.

    Returns:
        The method, its ``name`` set to ``name``.

    Raises:
        InvalidInputError: unknown name (the message lists the known ones).
    """
    try:
        cls_name, fixed = METHODS[name]
    except KeyError:
        raise InvalidInputError(f"unknown method {name!r}; choose from {', '.join(METHODS)}") from None
    method: MemoryMethod = __getattr__(cls_name)(embedder, **{**kwargs, **fixed})
    method.name = name
    return method
