"""An optional reranking stage after any method's scoring (the reranker of the Zep design).

A method scores every unit; the stage takes the ``candidates`` best-scored turns (every scored unit
when the method scores no turn), asks a :class:`Reranker` to order their texts for the query, and
fuses that order with the method's own (:func:`fuse`, weighted reciprocal-rank fusion). The
candidates then score above every other unit in the fused order, so sessions follow their best
candidate turn; the rest keep the method's ranking. Relevance (``Hit.relevance``) is not touched.

No PyPI package ships a cross-encoder that loads offline (checked 2026-11-30: flashrank and swiftrank
download their ONNX zips from the Hugging Face hub at run time, small-hybrid-reranker fetches a
static embedder and is a LightGBM ranker, mxbai-rerank, rerankers, rag-reranker, local-reranker,
kjarni, convmemory, coremem, tinyintent and watson-lite ship code only). The reranker offered is
therefore listwise through the LLM layer (:class:`LLMReranker`): one JSON call per query. With the
bundled local model on 2 cores it costs seconds per query, so the stage is off by default.

Use: ``method.reranker = rerank_stage("llm:local")`` (or ``"llm:openai:<model>@<url>"``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol, Sequence

import numpy as np

from memgas.core.errors import InvalidInputError, LLMError
from memgas.kernels.fusion import reciprocal_rank_fusion
from memgas.store import texts_of

if TYPE_CHECKING:
    from memgas.llm.wrapper import LLM
    from memgas.methods.ranking import Scored

__all__ = ["Reranker", "LLMReranker", "RerankStage", "fuse", "rerank_stage"]

log = logging.getLogger(__name__)


class Reranker(Protocol):
    """Orders texts by relevance to a query."""

    id: str

    def order(self, query: str, texts: Sequence[str]) -> list[int]:
        """Positions in ``texts``, most relevant first: distinct, in range; texts left out rank last."""
        ...


def fuse(first: np.ndarray, order: Sequence[int], weight: float = 0.5, k: float = 60.0) -> np.ndarray:
    """Weighted reciprocal-rank fusion of the candidates' first-stage ``first`` scores and a reranker's
    ``order`` of them: ``(1 - weight) / (k + r1) + weight / (k + r2)`` with 1-based ranks r1, r2.

    Candidates missing from ``order`` share the rank after its last; ties keep the first-stage order
    (``weight`` 1 gives the reranker's order, 0 the method's). Higher is better.
    """
    n = len(first)
    by_first = np.argsort(-np.asarray(first, dtype=np.float64), kind="stable")
    fused = reciprocal_rank_fusion([by_first, order], n, k, weights=(1.0 - weight, weight))
    missing = np.ones(n, dtype=bool)
    missing[np.asarray(order, dtype=np.int64)] = False
    fused[missing] += weight / (k + len(order) + 1.0)
    tie_break = np.empty(n)
    tie_break[by_first] = 1e-9 / (k + np.arange(1, n + 1))
    return fused + tie_break


class LLMReranker:
    """A listwise reranker through the LLM layer: the model lists the numbers of the most useful
    snippets, best first, in JSON constrained by a schema (an ``enum`` of the numbers shown, at most
    ``top`` of them, so a small model can neither invent nor repeat one past the limit).

    Args:
        llm: an :class:`memgas.llm.wrapper.LLM` (responses cached when it has a cache).
        top: most snippets the model lists; the rest keep the first-stage order below them.
        max_chars: each snippet cut to this many characters (prompt length is the cost).
    """

    def __init__(self, llm: LLM, *, top: int = 10, max_chars: int = 300) -> None:
        if top < 1 or max_chars < 20:
            raise InvalidInputError("top must be >= 1 and max_chars >= 20")
        self.llm = llm
        self.top = top
        self.max_chars = max_chars
        self.id = f"llm-listwise:{llm.id}"

    def order(self, query: str, texts: Sequence[str]) -> list[int]:
        """The model's order of ``texts`` (see the class notes); duplicates after the first dropped.

        Raises:
            memgas.core.errors.LLMError: the call failed or the reply stayed invalid.
        """
        numbers = list(range(1, len(texts) + 1))
        snippets = "\n".join(f"[{i}] {' '.join(t.split())[: self.max_chars]}" for i, t in zip(numbers, texts))
        schema = {"type": "object", "required": ["ranking"], "properties": {"ranking": {
            "type": "array", "items": {"type": "integer", "enum": numbers}, "maxItems": min(self.top, len(texts))}}}
        messages = [
            {"role": "system", "content": "You rank memory snippets of a user's past conversations by how useful "
                                          "each is to answer a question. Reply with JSON only."},
            {"role": "user", "content": f"Question: {query}\n\nSnippets:\n{snippets}\n\nList the numbers of the "
                                        f"{min(self.top, len(texts))} most useful snippets, most useful first, as "
                                        '{"ranking": [numbers]}.'},
        ]
        reply = self.llm.complete_json(messages, schema, max_tokens=8 * min(self.top, len(texts)) + 16)
        return [n - 1 for n in dict.fromkeys(reply["ranking"])]


@dataclass(frozen=True, slots=True)
class RerankStage:
    """A reranker applied to a method's scores (see the module notes).

    Attributes:
        reranker: what orders the candidates.
        candidates: how many best-scored turns it sees.
        weight: the reranker's share in :func:`fuse` (1: its order alone).
    """

    reranker: Reranker
    candidates: int = 20
    weight: float = 0.5

    def __post_init__(self) -> None:
        if self.candidates < 2 or not 0.0 <= self.weight <= 1.0:
            raise InvalidInputError("candidates must be >= 2 and weight in [0, 1]")

    def describe(self) -> dict[str, Any]:
        """What the stage is, for reports."""
        return {"reranker": self.reranker.id, "candidates": self.candidates, "weight": self.weight}

    def apply(self, scored: Scored, query: str) -> Scored:
        """``scored`` with its candidates re-scored in fused order, above every other unit; unchanged when the
        reranker's LLM fails (logged: the search goes on with the method's order)."""
        scores = scored.scores
        finite = np.isfinite(scores)
        rows = scored.index.masks["turn"]
        rows = rows[finite[rows]]
        if not len(rows):  # a method that scores sessions or summaries only: rerank what it scored
            rows = np.flatnonzero(finite)
        top = rows[np.argsort(-scores[rows], kind="stable")[: self.candidates]]
        if len(top) < 2:
            return scored
        try:
            order = self.reranker.order(query, texts_of(scored.index.table.texts, top))
        except LLMError as e:
            log.warning("reranking failed, keeping the method's order: %s", e)
            return scored
        if sorted(order) != sorted(set(order)) or any(not 0 <= i < len(top) for i in order):
            raise InvalidInputError(f"reranker {self.reranker.id} returned an invalid order {order}")
        fused = fuse(scores[top], order, self.weight)
        out = scores.astype(np.float64)
        # Fused values are below 1: offset by the best score so the candidates lead, in fused order.
        out[top] = float(scores[finite].max()) + 1.0 + fused
        return replace(scored, scores=out)


def rerank_stage(spec: str, *, candidates: int = 20, weight: float = 0.5, llm_cache: Any = None) -> RerankStage:
    """A :class:`RerankStage` from a spec: ``"llm:<LLM spec>"`` (see :func:`memgas.llm.factory.get_llm`), e.g.
    ``"llm:local"`` or ``"llm:openai:gpt-4o-mini"``.

    Raises:
        InvalidInputError: an unknown spec.
    """
    from memgas.llm.factory import stage_llm

    llm = stage_llm(spec, stage="reranker", hint="no offline cross-encoder ships", cache=llm_cache)
    return RerankStage(LLMReranker(llm), candidates=candidates, weight=weight)
