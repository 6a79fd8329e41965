"""An optional query-decomposition stage before any method's ranking: a question that needs several sessions is
searched as its parts as well.

"How many bikes did I service?", "What do Jon and Gina both like?": the answer is spread over sessions, each of
which says one part of it in its own words, and one search for the whole question finds the sessions nearest to
the question's wording first, not one per part. A :class:`Decomposer` names the parts ("bike repairs", "Jon's
hobbies", "Gina's hobbies"), or none for a question one search answers; each part is scored like the whole
question (with the same filter and query time), and the units' rankings are interleaved round-robin
(:func:`interleave`): the whole question's best unit, each part's best, the whole question's second, and so on.
So the session that answers each part joins the best few beside the one that answers the question's own words;
a question with fewer than two parts, or whose decomposition fails, keeps the method's ranking exactly. Relevance
(``Hit.relevance``) stays the
whole question's cosine.

No rule splits such questions without a model (splitting at "and" / "or" lost on both benchmarks,
the benchmark log "Retrieval quality v2"), so the decomposer offered is an LLM (:class:`LLMDecomposer`), one JSON call
per search; off by default.

Use: ``method.decomposer = decompose_stage("llm:local")`` (or ``"llm:openai:<model>@<url>"``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable, Protocol, Sequence

import numpy as np

from memgas.core.errors import InvalidInputError, LLMError

if TYPE_CHECKING:
    from memgas.llm.wrapper import LLM
    from memgas.methods.ranking import Scored

__all__ = ["Decomposer", "LLMDecomposer", "DecomposeStage", "interleave", "decompose_stage"]

log = logging.getLogger(__name__)


class Decomposer(Protocol):
    """Names the separate searches a question needs."""

    id: str

    def parts(self, query: str) -> list[str]:
        """The searches, one per part of the answer; none (or one) when a single search answers ``query``."""
        ...


_SYSTEM = ("You plan searches over a user's past conversations with an assistant. Each conversation is about one "
           "thing. Reply with JSON only.")
_TASK = ("Question: {query}\n\nIf answering it needs facts from several different conversations (a count, a total or "
         "a list of things done at different times, a comparison, or something about each of two people), write one "
         "short search for each separate fact or person, using only words of the question: never guess an answer, a "
         "name or a date it does not say. If one conversation answers it, write no search. "
         "Reply as {{\"searches\": [...]}}.")


class LLMDecomposer:
    """Parts through the LLM layer: JSON constrained by a schema (at most ``max_parts`` strings), so a small
    model can neither ramble nor repeat past the limit.

    Args:
        llm: an :class:`memgas.llm.wrapper.LLM` (responses cached when it has a cache).
        max_parts: most searches the model may name.
    """

    def __init__(self, llm: LLM, *, max_parts: int = 3) -> None:
        if not 2 <= max_parts <= 10:
            raise InvalidInputError(f"max_parts must be from 2 to 10, got {max_parts!r}")
        self.llm = llm
        self.max_parts = max_parts
        self.id = f"llm-decompose:{llm.id}"

    def parts(self, query: str) -> list[str]:
        """The model's searches for ``query``: blank ones, repeats and the question itself dropped.

        Raises:
            memgas.core.errors.LLMError: the call failed or the reply stayed invalid.
        """
        schema = {"type": "object", "required": ["searches"], "properties": {"searches": {
            "type": "array", "items": {"type": "string", "maxLength": 80}, "maxItems": self.max_parts}}}
        messages = [{"role": "system", "content": _SYSTEM},
                    {"role": "user", "content": _TASK.format(query=" ".join(query.split()))}]
        reply = self.llm.complete_json(messages, schema, max_tokens=24 * self.max_parts + 16)
        asked = " ".join(query.split()).casefold()
        seen: dict[str, str] = {}
        for part in reply["searches"]:
            text = " ".join(str(part).split())
            if text and text.casefold() != asked:
                seen.setdefault(text.casefold(), text)
        return list(seen.values())[: self.max_parts]


@dataclass(frozen=True, slots=True)
class DecomposeStage:
    """A decomposer applied to a method's scoring (see the module notes).

    Attributes:
        decomposer: what names the parts.
        whole_weight: how many places the whole question takes in each round of the interleaving, each part
            taking one (:func:`interleave`): above 1, the sessions that answer the question's own words keep more
            of their lead.
    """

    decomposer: Decomposer
    whole_weight: float = 1.0

    def __post_init__(self) -> None:
        if not self.whole_weight > 0.0:
            raise InvalidInputError(f"whole_weight must be > 0, got {self.whole_weight!r}")

    def describe(self) -> dict[str, Any]:
        """What the stage is, for reports."""
        return {"decomposer": self.decomposer.id, "whole_weight": self.whole_weight}

    def apply(self, scored: Scored, query: str, score: Callable[[str], Scored]) -> Scored:
        """``scored`` (the whole question's) interleaved with what ``score`` gives each part; unchanged for a
        question with fewer than two parts, and when the decomposer fails (an LLM that cannot be reached or keeps
        replying outside the schema: logged, and the search goes on with the question alone). Units the whole
        question did not score (``-inf``) stay unscored."""
        try:
            parts = self.decomposer.parts(query)
        except LLMError as e:
            log.warning("query decomposition failed, searching with the question alone: %s", e)
            return scored
        if len(parts) < 2:
            return scored
        finite = np.isfinite(scored.scores)
        rankings = [_ranked(scored.scores, finite)]
        for part in parts:
            part_scores = score(part).scores
            if part_scores.shape != scored.scores.shape:  # the store changed between the searches: nothing to fuse
                return scored
            rankings.append(_ranked(part_scores, finite))
        fused = interleave(rankings, len(scored.scores), [self.whole_weight] + [1.0] * len(parts))
        return replace(scored, scores=np.where(finite, fused, -np.inf))


def interleave(rankings: Sequence[np.ndarray], n: int, weights: Sequence[float]) -> np.ndarray:
    """Round-robin fusion of ``rankings`` (item indexes in ``range(n)``, best first): an item's place is its best
    rank over the rankings, each rank (from 1) divided by its ranking's weight, ties going to the earlier ranking;
    returned as a score per item, higher first (0 for items in no ranking).

    With equal weights this takes each ranking's first item in turn, then each one's second, and so on, skipping
    what was taken: every part's best unit comes before any ranking's second. Reciprocal-rank fusion would instead
    favour what every ranking places fairly high (the question's wording again), which is not what a part adds.

    Examples
    --------
    >>> interleave([np.array([0, 1, 2]), np.array([3, 0])], n=5, weights=[1.0, 1.0]).tolist()
    [4.0, 2.0, 1.0, 3.0, 0.0]
    """
    place = np.full(n, np.inf)
    turn = np.zeros(n, dtype=np.int64)
    for q, (ranking, weight) in enumerate(zip(rankings, weights, strict=True)):
        r = np.asarray(ranking, dtype=np.int64)
        mine = (np.arange(1, len(r) + 1) / weight)
        better = mine < place[r]  # strictly: a tie keeps the earlier ranking's turn
        place[r[better]] = mine[better]
        turn[r[better]] = q
    order = np.lexsort((turn, place))  # by place, then by ranking
    out = np.zeros(n)
    listed = order[np.isfinite(place[order])]
    out[listed] = np.arange(len(listed), 0, -1, dtype=np.float64)
    return out


def _ranked(scores: np.ndarray, finite: np.ndarray) -> np.ndarray:
    """The rows ``finite`` marks, best score first (ties in row order)."""
    rows = np.flatnonzero(finite & np.isfinite(scores))
    return rows[np.argsort(-scores[rows], kind="stable")]


def decompose_stage(spec: str, *, whole_weight: float = 1.0, llm_cache: Any = None) -> DecomposeStage:
    """A :class:`DecomposeStage` from a spec: ``"llm:<LLM spec>"`` (see :func:`memgas.llm.factory.get_llm`), e.g.
    ``"llm:local"`` or ``"llm:openai:gpt-4o-mini"``.

    Raises:
        InvalidInputError: an unknown spec.
    """
    from memgas.llm.factory import stage_llm

    llm = stage_llm(spec, stage="decomposer", hint="no rule splits such questions", cache=llm_cache)
    return DecomposeStage(LLMDecomposer(llm), whole_weight=whole_weight)
