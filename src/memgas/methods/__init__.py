"""Memory methods, selectable by name (``memgas``, its ablations, the baselines, and structured methods
from the literature: ``sgmem``, ``memtree``, ``raptor``, ``episodic``, ``secom``).

A method's module is imported when the method is first made (or its class first named here), not with
this package, so ``import memgas.memory`` pays for no method and a ``Memory`` only for the one it uses.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from memgas.core.errors import InvalidInputError
from memgas.core.lazy import lazy_exports
from memgas.methods.base import IngestStats, MemoryMethod

if TYPE_CHECKING:
    from memgas.embed.base import Embedder
    from memgas.llm.wrapper import LLM
    from memgas.methods.amem import AMem
    from memgas.methods.baselines import BM25Method, DenseMethod
    from memgas.methods.comedy import Comedy
    from memgas.methods.decompose import DecomposeStage
    from memgas.methods.episodic import Episodic
    from memgas.methods.fullhistory import FullHistory
    from memgas.methods.hipporag import HippoRAG
    from memgas.methods.hmem import HMem
    from memgas.methods.memgas import MemGAS, MemGASConfig
    from memgas.methods.memtree import MemTree
    from memgas.methods.messages import MessageMethod
    from memgas.methods.mpc import MPC
    from memgas.methods.mpnet import MPNetMethod
    from memgas.methods.raptor import Raptor
    from memgas.methods.recursum import RecurSum
    from memgas.methods.rerank import RerankStage
    from memgas.methods.secom import SeCom
    from memgas.methods.sgmem import SGMem
    from memgas.methods.zep import Zep

#: Each class (or config) exported here and the submodule that defines it.
_LAZY: dict[str, str] = {
    "MemGAS": "memgas", "MemGASConfig": "memgas", "DenseMethod": "baselines", "BM25Method": "baselines",
    "SGMem": "sgmem", "MemTree": "memtree", "Raptor": "raptor", "Episodic": "episodic", "SeCom": "secom",
    "Zep": "zep",
    "MPC": "mpc", "AMem": "amem", "HippoRAG": "hipporag", "HMem": "hmem",
    "FullHistory": "fullhistory", "MPNetMethod": "mpnet", "RecurSum": "recursum", "Comedy": "comedy",
    "MessageMethod": "messages",
}

__all__ = ["METHODS", "MethodSpec", "get_method", "MemoryMethod", "IngestStats", *_LAZY, "NEEDS_LLM", "QA_ONLY",
           "LLM_DESCRIBED"]


@dataclass(frozen=True, slots=True)
class MethodSpec:
    """A method as the registry knows it: what it is and what it needs, so no caller has to know.

    Attributes:
        cls: its class (a name in :data:`_LAZY`).
        fixed: the options the name fixes, which win over the caller's (an ablation stays ablated whatever
            else is set).
        needs_llm: it cannot work without an LLM; :func:`get_method` hands it ``llm``.
        qa_only: it answers questions only (``bench --qa``): its memory ranks no session, so retrieval is refused.
        describes_groups: its tree nodes get LLM-written descriptions when an LLM is given
            (:func:`get_method` hands it a :class:`~memgas.methods.trees.LLMGroupSummarizer`).
        fallback: the method whose hits the facade adds when this one is degraded
            (:meth:`~memgas.methods.base.MemoryMethod.degraded`: an LLM that could not be reached).
        keeps_facts: it keeps a temporal knowledge graph: it has ``facts``, ``history``, ``communities``,
            ``pending`` and ``retry_pending`` (the facade's ``kg``).
    """

    cls: str
    fixed: dict[str, Any] = field(default_factory=dict)
    needs_llm: bool = False
    qa_only: bool = False
    describes_groups: bool = False
    fallback: str | None = None
    keeps_facts: bool = False


#: Every method by name. The ``memgas-no-*`` ablations switch one part of MemGAS off.
METHODS: dict[str, MethodSpec] = {
    "memgas": MethodSpec("MemGAS", {}),
    "memgas-no-assoc": MethodSpec("MemGAS", {"use_association": False}),
    "memgas-no-router": MethodSpec("MemGAS", {"use_router": False}),
    "memgas-no-ppr": MethodSpec("MemGAS", {"use_ppr": False}),
    "memgas-no-lexical": MethodSpec("MemGAS", {"use_lexical": False}),
    "memgas-no-session": MethodSpec("MemGAS", {"session_weight": 0.0}),
    "bm25": MethodSpec("BM25Method", {"side": "user"}),
    "bm25-all": MethodSpec("BM25Method", {"side": "all"}),
    "dense-session": MethodSpec("DenseMethod", {"granularity": "session"}),
    "dense-turn": MethodSpec("DenseMethod", {"granularity": "turn"}),
    "dense-summary": MethodSpec("DenseMethod", {"granularity": "summary"}),
    "dense-keyword": MethodSpec("DenseMethod", {"granularity": "keyword"}),
    "vector-messages": MethodSpec("MessageMethod", {"hybrid": False}),
    "hybrid-messages": MethodSpec("MessageMethod", {"hybrid": True}),
    "sgmem": MethodSpec("SGMem", {}),
    "memtree": MethodSpec("MemTree", {}, describes_groups=True),
    "raptor": MethodSpec("Raptor", {}, describes_groups=True),
    "episodic": MethodSpec("Episodic", {}),
    "secom": MethodSpec("SeCom", {}),
    "zep": MethodSpec("Zep", {}, needs_llm=True, fallback="memgas", keeps_facts=True),
    "mpc": MethodSpec("MPC", {}, needs_llm=True),
    "amem": MethodSpec("AMem", {}, needs_llm=True),
    "amem-extractive": MethodSpec("AMem", {"use_llm": False}),
    "hipporag": MethodSpec("HippoRAG", {}, needs_llm=True),
    "hipporag-rules": MethodSpec("HippoRAG", {"use_llm": False}),
    "hmem": MethodSpec("HMem", {}, needs_llm=True),
    "hmem-clusters": MethodSpec("HMem", {"use_llm": False}),
    "full-history": MethodSpec("FullHistory", {}, qa_only=True),
    "mpnet": MethodSpec("MPNetMethod", {}),
    "recursum": MethodSpec("RecurSum", {"extractive": False}, needs_llm=True),
    "recursum-extractive": MethodSpec("RecurSum", {"extractive": True}),
    "comedy": MethodSpec("Comedy", {}, needs_llm=True, qa_only=True),
}
#: Methods that cannot work without an LLM: they take ``llm=`` (a spec or an instance).
NEEDS_LLM: frozenset[str] = frozenset(name for name, spec in METHODS.items() if spec.needs_llm)
#: Methods that answer questions only (``bench --qa``): their memory ranks no session, so retrieval is refused.
QA_ONLY: frozenset[str] = frozenset(name for name, spec in METHODS.items() if spec.qa_only)
#: Methods whose tree nodes get LLM-written descriptions when an LLM is configured (``group_summarizer=``).
LLM_DESCRIBED: frozenset[str] = frozenset(name for name, spec in METHODS.items() if spec.describes_groups)


__getattr__, __dir__ = lazy_exports(__name__, globals(), _LAZY)


def get_method(name: str, embedder: Embedder, *, llm: LLM | None = None, reranker: RerankStage | None = None,
               decomposer: DecomposeStage | None = None, **kwargs: Any) -> MemoryMethod:
    """Instantiate the method called ``name`` (importing its module on first use).

    Args:
        name: a key of :data:`METHODS`.
        embedder: the embedder the method embeds units and queries with.
        llm: the language model, if any: handed to a method that needs one (``llm=``) and, as a group
            summarizer, to a method whose tree nodes it describes (:class:`MethodSpec`); others ignore it.
        reranker, decomposer: the optional search stages (:mod:`memgas.methods.rerank`,
            :mod:`memgas.methods.decompose`), which every method takes.
        **kwargs: the method's parameters; those the name fixes (an ablation's switch, a baseline's side or
            granularity) override them.

    Returns:
        The method, its ``name`` set to ``name``.

    Raises:
        InvalidInputError: unknown name (the message lists the known ones), or a parameter the method does not
            take (``Memory(method="bm25", current_first=True)``; the message lists those it takes).
    """
    try:
        spec = METHODS[name]
    except KeyError:
        raise InvalidInputError(f"unknown method {name!r}; choose from {', '.join(METHODS)}") from None
    cls = __getattr__(spec.cls)
    takes = _parameters(cls)
    unknown = sorted(k for k in kwargs if k not in takes)
    if unknown:
        raise InvalidInputError(f"method {name!r} takes no parameter {unknown[0]!r}; its parameters: "
                                f"{', '.join(sorted(takes - set(spec.fixed))) or 'none'}")
    if llm is not None and spec.needs_llm:
        kwargs.setdefault("llm", llm)
    if llm is not None and spec.describes_groups:
        from memgas.methods.trees import LLMGroupSummarizer

        kwargs.setdefault("group_summarizer", LLMGroupSummarizer(llm))
    method: MemoryMethod = cls(embedder, **{**kwargs, **spec.fixed})
    method.name = name
    method.reranker, method.decomposer = reranker, decomposer
    return method


def _parameters(cls: type) -> set[str]:
    """The keyword parameters a method class takes: those of every ``__init__`` along its classes (they pass the
    rest on), and for a configured method the fields of its configuration."""
    import inspect
    from dataclasses import fields, is_dataclass

    names: set[str] = set()
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is not None:
            names |= {p.name for p in inspect.signature(init).parameters.values()
                      if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}
    config = getattr(cls, "config_class", None)
    if config is not None and is_dataclass(config):
        names |= {f.name for f in fields(config)}
    return names - {"self", "embedder"}
