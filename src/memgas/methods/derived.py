"""What the methods that derive their own memory from the stored conversation share (MPC, A-Mem,
HippoRAG 2, H-MEM): the user's turns with their stored vectors, turn-level scores, and LLM steps.

These methods keep the store's units (written by any method's ``ingest``) as their source of truth and
derive their structure (memory entries, notes, a phrase graph, a hierarchy) from the stored sessions
when the user's index is built. The derivation is redone whole when the store changes (no incremental
update): every LLM answer goes through the response cache of :mod:`memgas.llm`, so a rebuild replays
its calls from the cache (counted as ``cached``, costing no tokens) and only a new session's calls
reach the model. Each call runs inside :func:`memgas.core.provenance.source` of the sessions its prompt
shows, so deleting a session forgets the answers it fed. Every structure maps back to turns: a
method scores turn rows, and :func:`memgas.methods.ranking.rank_units` ranks sessions by their best turn.
"""

from __future__ import annotations

import re
from abc import abstractmethod
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Generic, Mapping, Sequence, TypeVar

import numpy as np

from memgas.core import provenance
from memgas.core.errors import InvalidInputError, LLMError
from memgas.core.types import Session
from memgas.embed.base import Embedder
from memgas.llm.base import ChatModel
from memgas.llm.cache import ResponseCache
from memgas.llm.factory import get_llm
from memgas.llm.wrapper import LLM
from memgas.methods.base import MemoryMethod
from memgas.methods.index import IndexCache, UserIndex, build_user_index
from memgas.methods.ranking import Scored
from memgas.store import Store

__all__ = ["TurnCorpus", "load_corpus", "DerivedMethod", "best_match", "best_turn", "valid_turns", "numbered_turns", "unit_rows",
           "as_matrix", "normalised"]

V = TypeVar("V")
_WORD = re.compile(r"\w\w+")


@dataclass(frozen=True, slots=True)
class TurnCorpus:
    """A user's stored units and sessions: ``sessions`` oldest first, ``row_of[(session, turn)]`` the unit
    row of that turn (its vector is the turn's stored vector)."""

    index: UserIndex
    sessions: tuple[Session, ...]
    row_of: Mapping[tuple[str, int], int]

    @property
    def vectors(self) -> np.ndarray:
        """Every unit row's vector (turn rows are those of ``row_of``)."""
        return self.index.table.vectors

    def turn_vector(self, session_id: str, turn: int) -> np.ndarray:
        """The stored vector of one turn."""
        return self.vectors[self.row_of[(session_id, turn)]]


def load_corpus(store: Store, user_id: str) -> TurnCorpus:
    """The user's units and sessions (call inside ``store.reading()``, as an :class:`IndexCache` build is)."""
    index = build_user_index(store, user_id)
    infos = sorted(store.list_sessions(user_id), key=lambda i: (i.timestamp or datetime.min, i.session_id))
    sessions = tuple(store.get_session(user_id, i.session_id) for i in infos)
    rows = index.masks["turn"]
    table = index.table
    row_of = {(table.session_ids[r], int(table.turn_start[r])): int(r) for r in rows}
    return TurnCorpus(index, sessions, row_of)


def unit_rows(corpus: TurnCorpus, turn_scores: Mapping[tuple[str, int], float]) -> np.ndarray:
    """Per-unit scores from per-turn scores: each turn's row gets its score, every other row ``-inf``."""
    out = np.full(len(corpus.index.table), -np.inf)
    for key, value in turn_scores.items():
        row = corpus.row_of.get(key)
        if row is not None:
            out[row] = max(out[row], value)
    return out


def numbered_turns(session: Session, max_chars: int) -> str:
    """The session for a prompt: one ``[i] speaker: text`` line per message, ``i`` its turn index; each
    message cut to ``max_chars`` characters (a pasted file is cut, the stored turn stays whole)."""
    lines = []
    for turn in session.turns:
        for m in turn.messages:
            text = " ".join(m.content.split())
            lines.append(f"[{turn.index}] {m.name or m.role}: {text[:max_chars]}")
    return "\n".join(lines)


def best_match(text: str, candidates: Sequence[str]) -> int:
    """Position of the candidate sharing the most words with ``text`` (the first on a tie; 0 if none)."""
    words = set(_WORD.findall(text.lower()))
    overlaps = [len(words & set(_WORD.findall(c.lower()))) for c in candidates]
    return int(np.argmax(overlaps)) if overlaps else 0


def best_turn(text: str, session: Session) -> int:
    """The session's turn sharing the most words with ``text``: where an LLM-written entry that cites no
    valid turn is attached."""
    turns = session.turns
    return turns[best_match(text, [t.text for t in turns])].index if turns else 0


def valid_turns(cited: Any, session: Session) -> list[int]:
    """The integers of ``cited`` (an LLM's list) that are turn indexes of ``session``, each once, in order."""
    n = len(session.turns)
    if not isinstance(cited, list):
        return []
    return list(dict.fromkeys(t for t in cited if isinstance(t, int) and not isinstance(t, bool) and 0 <= t < n))


class DerivedMethod(MemoryMethod, Generic[V]):
    """A method whose per-user view ``V`` is derived from the stored sessions (see the module notes).

    Args:
        embedder: embeds what the method derives, and queries.
        llm: an :func:`memgas.llm.factory.get_llm` spec or instance; ``None`` for the method's no-LLM variant.
        llm_cache: the response cache for a spec (a :class:`ResponseCache` or a path); default in memory.
        use_llm: whether the method's LLM steps run (the no-LLM variants set ``False``); when true the
            LLM is required at first use.
    """

    #: How the paper's LLM steps are replaced when ``use_llm`` is false (set by each subclass).
    no_llm_note: str = ""

    def __init__(self, embedder: Embedder, *, llm: str | LLM | ChatModel | None = None,
                 llm_cache: ResponseCache | str | Path | None = None, use_llm: bool = True, **kwargs: Any) -> None:
        super().__init__(embedder, **kwargs)
        self.use_llm = use_llm
        self.llm = None if llm is None or not use_llm else get_llm(
            llm, cache=llm_cache if llm_cache is not None else ResponseCache())
        #: LLM calls that failed or stayed invalid (the step then fell back; see each method).
        self.llm_failures = 0
        self._indexes: IndexCache[V] = IndexCache(self._build)

    def _build(self, store: Store, user_id: str) -> V:
        if self.use_llm and self.llm is None:
            raise InvalidInputError(
                f"the {self.name!r} method needs an LLM: pass llm='openai:<model>@<base_url>' or llm='local' "
                f"(its no-LLM variant does not: {self.no_llm_note})")
        return self.derive(load_corpus(store, user_id))

    @abstractmethod
    def derive(self, corpus: TurnCorpus) -> V:
        """The method's view of the user's memory (all LLM steps of the build run here)."""

    @abstractmethod
    def score_view(self, view: V, query: str, query_time: datetime | None) -> Scored:
        """Score the user's units for ``query`` from the view."""

    def score(self, store: Store, user_id: str, query: str, *, query_time: datetime | None = None) -> Scored:
        return self.score_view(self._indexes.get(store, user_id), query, query_time)

    def ask(self, messages: Sequence[Mapping[str, str]], schema: Mapping[str, Any], *, user_id: str,
            sessions: Sequence[str], max_tokens: int) -> Any | None:
        """The LLM's JSON answer, or ``None`` when the call failed or stayed invalid (counted in
        :attr:`llm_failures`; the caller falls back). Runs inside the sessions' provenance."""
        assert self.llm is not None
        with provenance.source(user_id, *sessions):
            try:
                return self.llm.complete_json(messages, schema, max_tokens=max_tokens)
            except LLMError:
                self.llm_failures += 1
                return None

    def config(self) -> dict[str, Any]:
        return {**super().config(), "llm": None if self.llm is None else self.llm.id, "use_llm": self.use_llm}


def as_matrix(vectors: Sequence[np.ndarray], dim: int) -> np.ndarray:
    """Stack row vectors into a float32 matrix (``(0, dim)`` when there are none)."""
    return np.stack(vectors).astype(np.float32) if len(vectors) else np.zeros((0, dim), np.float32)


def normalised(v: np.ndarray) -> np.ndarray:
    """``v`` scaled to unit length (rows, when a matrix); a zero row stays zero."""
    norm = np.linalg.norm(v, axis=-1, keepdims=True)
    return np.divide(v, norm, out=np.zeros_like(v), where=norm > 0).astype(np.float32)
