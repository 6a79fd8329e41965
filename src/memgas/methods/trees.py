"""What the tree methods (RAPTOR, MemTree) share: group summarizers that describe a node from its children
(extractive, or written by an LLM) and collapsed-tree retrieval (:func:`tree_hits`).
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import Any, Callable, Protocol, Sequence

import numpy as np

from memgas.core.errors import InvalidInputError
from memgas.methods.index import UserIndex

__all__ = ["GroupSummarizer", "ExtractiveGroupSummarizer", "LLMGroupSummarizer", "GROUP_SCHEMA", "TreeHit", "tree_hits"]

# ----------------------------------------------------------------------------- summaries


class GroupSummarizer(Protocol):
    """Writes the description of a group of memories (a tree node's children)."""

    def summarize_group(self, texts: Sequence[str], vectors: np.ndarray) -> str:
        """Return a non-empty description of ``texts``.

        ``vectors`` holds the texts' L2-normalised vectors, one row each, so an extractive
        summarizer can rank them without embedding anything. An LLM summarizer ignores them.
        """
        ...


class ExtractiveGroupSummarizer:
    """A description made of the members nearest the group's centroid, without an LLM.

    Members are ranked by cosine to the normalised mean of their vectors (the most typical first,
    cf. centroid-based summarisation, Radev et al., 2004); the ``max_members`` first are kept, each
    shortened at a word boundary to an equal share of ``max_chars``, and joined one per line.

    Args:
        max_members: most members quoted (>= 1).
        max_chars: most characters in the description (>= 20 per member).

    Raises:
        InvalidInputError: a limit is out of range.
    """

    def __init__(self, max_members: int = 3, max_chars: int = 600) -> None:
        if max_members < 1 or max_chars < 20 * max_members:
            raise InvalidInputError("ExtractiveGroupSummarizer needs max_members >= 1 and "
                                    "max_chars >= 20 * max_members")
        self.max_members = max_members
        self.max_chars = max_chars

    def summarize_group(self, texts: Sequence[str], vectors: np.ndarray) -> str:
        """Return the extractive description of ``texts`` (see the class notes).

        Raises:
            InvalidInputError: no texts, or not one vector per text.
        """
        vectors = np.asarray(vectors, dtype=np.float32)
        if not texts or vectors.shape[0] != len(texts):
            raise InvalidInputError(f"summarize_group needs one vector per text ({len(texts)} texts, "
                                    f"{vectors.shape[0]} vectors)")
        top = np.argsort(-(vectors @ vectors.mean(axis=0)), kind="stable")[: self.max_members]
        width = self.max_chars // len(top) - 1
        return "\n".join(_clip(texts[i], width) for i in top)


#: The JSON an LLM group summarizer must return.
GROUP_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"description": {"type": "string", "minLength": 1}},
    "required": ["description"],
    "additionalProperties": False,
}


class LLMGroupSummarizer:
    """Descriptions of tree nodes written by an LLM (one call per node), the extractive ones as fallback.

    The model gets the members' texts (each cut to an equal share of ``max_input_chars``) and returns
    ``{"description"}``; a failed call or invalid output falls back to
    :class:`ExtractiveGroupSummarizer` and is counted in ``fallbacks``. Calls go through the LLM
    layer, so its response cache makes a rebuilt tree cost no new calls.

    Args:
        llm: a :class:`memgas.llm.wrapper.LLM`.
        max_input_chars: characters of member text shown to the model.
        max_tokens: the description's token budget.
    """

    def __init__(self, llm: Any, max_input_chars: int = 6000, max_tokens: int = 200) -> None:
        self.llm = llm
        self.max_input_chars = max_input_chars
        self.max_tokens = max_tokens
        self.fallback = ExtractiveGroupSummarizer()
        self.written = 0
        self.fallbacks = 0

    def summarize_group(self, texts: Sequence[str], vectors: np.ndarray) -> str:
        """The LLM's description of ``texts`` (see the class notes)."""
        from memgas.core.errors import LLMError

        share = max(80, self.max_input_chars // max(len(texts), 1))
        listing = "\n".join(f"{i + 1}. {' '.join(t.split())[:share]}" for i, t in enumerate(texts))
        messages = [
            {"role": "system", "content": "You organise a personal assistant's long-term memory. Reply with JSON only."},
            {"role": "user", "content": "These memories belong together. Write a JSON object with one field, "
                                        '"description": 1 to 3 sentences stating what they are about, keeping '
                                        "names, places, dates and numbers.\n\n" + listing},
        ]
        try:
            value = self.llm.complete_json(messages, GROUP_SCHEMA, max_tokens=self.max_tokens)
            description = str(value["description"]).strip()
            if not description:
                raise LLMError("empty description")
        except (LLMError, InvalidInputError, KeyError, TypeError):
            self.fallbacks += 1
            return self.fallback.summarize_group(texts, vectors)
        self.written += 1
        return description


def _clip(text: str, width: int) -> str:
    """``text`` shortened at a word boundary to ``width`` characters (cut hard if its first word is longer)."""
    out = textwrap.shorten(text, width, placeholder=" …")
    return out if out.strip("… ") else text.strip()[:width]


@dataclass(frozen=True, slots=True)
class TreeHit:
    """A tree node retrieved for a query: its text (a memory or a description) and the turns it covers."""

    node: int
    leaf: bool
    score: float
    text: str
    turns: list[tuple[str, int]]  # (session id, turn index)


def tree_hits(
    index: UserIndex,
    rows: np.ndarray,
    texts: Sequence[str],
    leaves_of: Callable[[int], np.ndarray],
    is_leaf: np.ndarray,
    sims: np.ndarray,
    k: int,
    threshold: float,
) -> list[TreeHit]:
    """The ``k`` nodes most similar to the query above ``threshold`` (collapsed-tree retrieval), best first.

    Args:
        index: the user's units.
        rows: leaf position → the index's turn row.
        texts: per node, its text.
        leaves_of: node → the leaf positions it covers.
        is_leaf: per node, whether it is a leaf (a memory) rather than a description.
        sims: per node, its similarity to the query.
        k, threshold: the cut-offs.
    """
    hits = []
    for node in np.argsort(-sims, kind="stable")[:k]:
        if not sims[node] > threshold:
            break
        covered = rows[leaves_of(int(node))]
        turns = sorted((index.table.session_ids[r], int(index.table.turn_start[r])) for r in covered)
        hits.append(TreeHit(int(node), bool(is_leaf[node]), float(sims[node]), texts[node], turns))
    return hits
