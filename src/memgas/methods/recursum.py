"""``recursum``: a running memory summary, updated after each session, that answers and ranks sessions.

Wang et al., 2023/2025, "Recursively Summarizing Enables Long-Term Dialogue Memory in Large Language
Models" (RecurSum), a MemGAS baseline: after each session the LLM rewrites the memory from the previous
memory and the new session, and responses are generated from the latest memory.

Here the memory is a list of short entries (at most ``max_entries``). After each session (oldest first),
the LLM sees the numbered entries and the session and returns ``{"keep": [numbers], "add": [entries]}``:
the entries still true and worth keeping, and new or rewritten ones (a changed fact is an old entry
dropped and a new one added). Asking for the changes rather than the whole rewritten memory is the
simplification: it bounds the model's output, and it lets every entry carry the sessions it came from.

Session mapping (so that retrieval metrics apply): a kept entry keeps its sessions; an added entry is
credited to the session being folded in, plus the sessions of every entry dropped in the same update
whose cosine with it is at least ``inherit`` (a rewrite inherits what it rewrote). When the memory
exceeds ``max_entries``, the most redundant entries (highest cosine with another entry; the older on a
tie) are dropped first.

Ranking: each entry is embedded; a session scores as the best cosine with the query among the entries
credited to it; sessions no entry is credited to (their content was summarised away) come after, in
time order. Every turn of a session scores as its session (the memory holds no turns), so turn metrics
only reflect the session ranking. For ``bench --qa`` the reader sees the whole memory.

``recursum-extractive`` is the no-LLM approximation: each update keeps every entry and adds the session's
extractive summary sentences (:class:`memgas.methods.units.ExtractiveSummarizer`), then prunes by redundancy as
above. A failed LLM update falls back to the extractive one for that session (counted in ``fallbacks``).

The memory of a user is built from the store on first use and extended session by session afterwards
(rebuilt when the stored sessions are no longer an extension of those folded in); LLM answers go through
the response cache, so a rebuild repeats no call.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
from segtok.segmenter import split_multi

from memgas.core import provenance
from memgas.core.errors import InvalidInputError, LLMError
from memgas.core.types import MemoryItem, Session
from memgas.embed.base import Embedder
from memgas.kernels.text import fit_texts
from memgas.llm.base import ChatModel
from memgas.llm.cache import ResponseCache
from memgas.llm.factory import get_llm
from memgas.llm.wrapper import LLM
from memgas.methods.base import MemoryMethod
from memgas.methods.index import IndexCache, UserIndex, turn_docs
from memgas.methods.ranking import Scored
from memgas.methods.units import ExtractiveSummarizer, embed_texts, embedding_view
from memgas.store import Store

__all__ = ["RecurSum", "MemoryEntry", "update_schema", "update_prompt", "prune_redundant"]

log = logging.getLogger("memgas.llm")


@dataclass(frozen=True, slots=True)
class MemoryEntry:
    """One entry of the running memory and the sessions it is credited to."""

    text: str
    sessions: frozenset[str]


@dataclass(slots=True)
class _State:
    """A user's memory after folding in ``folded`` (session ids, oldest first)."""

    folded: tuple[str, ...] = ()
    entries: list[MemoryEntry] = field(default_factory=list)
    vectors: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.float32))
    last_time: datetime | None = None


def update_schema(n_entries: int, max_new: int) -> dict[str, Any]:
    """The update's JSON: ``{"keep": [entry numbers], "add": [new entries]}``."""
    return {"type": "object", "required": ["keep", "add"], "additionalProperties": False,
            "properties": {"keep": {"type": "array", "items": {"type": "integer"}, "maxItems": max(n_entries, 1)},
                           "add": {"type": "array", "items": {"type": "string", "minLength": 1},
                                   "maxItems": max_new}}}


def update_prompt(entries: list[str], session_text: str, when: datetime | None, max_new: int) -> list[dict[str, str]]:
    """Messages asking which memory entries to keep and what to add after a session (entries numbered from 1)."""
    memory = "\n".join(f"{i}. {e}" for i, e in enumerate(entries, start=1)) or "(empty)"
    date = f" on {when:%Y-%m-%d (%A)}" if when else ""
    user = (f"Current memory about the user:\n{memory}\n\nNew conversation{date}:\n<conversation>\n{session_text}\n"
            f"</conversation>\n\nUpdate the memory. Return a JSON object with\n"
            '- "keep": the numbers of the memory entries that are still true and worth remembering;\n'
            f'- "add": at most {max_new} new short entries with the facts of this conversation worth remembering '
            "(names, dates, places, numbers, preferences, plans); when a fact changed, drop the old entry and add "
            "the updated one.")
    return [{"role": "system", "content": "You maintain a long-term memory of a user's conversations for a personal "
                                          "assistant. Reply with JSON only."},
            {"role": "user", "content": user}]


def prune_redundant(vectors: np.ndarray, limit: int) -> list[int]:
    """Rows kept (ascending) after dropping the most redundant until ``limit`` remain.

    Redundancy of a row: its highest cosine with another remaining row; on a tie the older (lower) row goes.
    """
    keep = list(range(len(vectors)))
    if len(keep) <= limit:
        return keep
    sims = vectors @ vectors.T
    np.fill_diagonal(sims, -np.inf)
    while len(keep) > limit:
        sub = sims[np.ix_(keep, keep)]
        keep.pop(int(np.argmax(sub.max(axis=1))))  # argmax: the first (oldest) of equals
    return keep


class RecurSum(MemoryMethod):
    """The running-summary memory (see the module notes).

    Args:
        embedder: embeds the entries and the queries.
        llm: the model that updates the memory (a spec or an instance); ``None`` with ``extractive``.
        llm_cache: the response cache for a spec; default the user's LLM cache.
        extractive: the no-LLM approximation (``recursum-extractive``).
        max_entries: most entries in the memory.
        max_new: most entries one update may add.
        inherit: cosine at or above which an added entry inherits the sessions of an entry it replaced.
        max_tokens: most tokens the model may write per update.

    Raises:
        InvalidInputError: no ``llm`` without ``extractive``, or a bad parameter.
    """

    name = "recursum"
    keep_newest = False

    def __init__(self, embedder: Embedder, *, llm: str | LLM | ChatModel | None = None,
                 llm_cache: ResponseCache | None = None, extractive: bool = False, max_entries: int = 30,
                 max_new: int = 8, inherit: float = 0.8, max_tokens: int = 400, **kwargs: Any) -> None:
        super().__init__(embedder, **kwargs)
        if max_entries < 1 or max_new < 1 or max_tokens < 16:
            raise InvalidInputError("recursum needs max_entries >= 1, max_new >= 1 and max_tokens >= 16")
        if not extractive and llm is None:
            raise InvalidInputError("the 'recursum' method needs an LLM (llm='local' or 'openai:<model>@<url>'); "
                                    "'recursum-extractive' needs none")
        self.extractive = extractive
        self.llm = None if extractive or llm is None else get_llm(llm, cache=llm_cache or ResponseCache())
        self.max_entries, self.max_new, self.inherit, self.max_tokens = max_entries, max_new, inherit, max_tokens
        self._extractive = ExtractiveSummarizer()
        self.fallbacks = 0
        self._states: IndexCache[_State] = IndexCache(self._fresh_state, update=self._fold)
        self._indexes: IndexCache[tuple[UserIndex, _State]] = IndexCache(self._build)

    def config(self) -> dict[str, Any]:
        return {**super().config(), "llm": self.llm.id if self.llm else None, "extractive": self.extractive,
                "max_entries": self.max_entries, "max_new": self.max_new, "inherit": self.inherit}

    # ------------------------------------------------------------------ building the memory

    def _fold(self, store: Store, user_id: str, state: _State) -> _State | None:
        """``state`` extended by the sessions stored after those it folded in; ``None`` when they are not
        an extension of them (a delete, or a session stored with an earlier time): then it is rebuilt."""
        infos = store.list_sessions(user_id)
        ids = tuple(i.session_id for i in infos)
        if ids[: len(state.folded)] != state.folded:
            return None
        new = _State(state.folded, list(state.entries), state.vectors, state.last_time)
        for info in infos[len(state.folded):]:
            self._update(new, store.get_session(user_id, info.session_id), user_id)
        return new

    def _update(self, state: _State, session: Session, user_id: str) -> None:
        """Fold one session into ``state`` (in place)."""
        old = [e.text for e in state.entries]
        decided = None
        if self.llm is not None:
            with provenance.source(user_id, *state.folded, session.session_id):
                decided = self._llm_update(old, session)
        keep, add = decided if decided is not None else (list(range(len(old))), self._extract(session))
        add = [a for a in dict.fromkeys(" ".join(a.split()) for a in add) if a and a not in {old[i] for i in keep}]
        dropped = [i for i in range(len(old)) if i not in set(keep)]
        new_vectors = embed_texts(self.embedder, add) if add else np.zeros((0, self.embedder.dim), np.float32)
        entries = [state.entries[i] for i in keep]
        for text, vec in zip(add, new_vectors):
            credit = {session.session_id}
            for i in dropped:
                if float(state.vectors[i] @ vec) >= self.inherit:
                    credit |= state.entries[i].sessions
            entries.append(MemoryEntry(text, frozenset(credit)))
        vectors = np.vstack([state.vectors[keep].reshape(len(keep), -1) if keep else
                             np.zeros((0, self.embedder.dim), np.float32), new_vectors])
        rows = prune_redundant(vectors, self.max_entries)
        state.entries = [entries[r] for r in rows]
        state.vectors = vectors[rows]
        state.folded = (*state.folded, session.session_id)
        state.last_time = session.timestamp or state.last_time

    def _llm_update(self, old: list[str], session: Session) -> tuple[list[int], list[str]] | None:
        """The model's (kept rows, added entries), or ``None`` after a logged, counted failure."""
        assert self.llm is not None
        memory_tokens = self.llm.count_tokens("\n".join(old))
        budget = max(self.llm.context_tokens - self.max_tokens - memory_tokens - 300, 64)
        text = "\n".join(fit_texts([embedding_view(t, 600) for t in session.turns], budget, self.llm.count_tokens))
        try:
            value = self.llm.complete_json(update_prompt(old, text, session.timestamp, self.max_new),
                                           update_schema(len(old), self.max_new), max_tokens=self.max_tokens)
        except LLMError as e:
            self.fallbacks += 1
            log.warning("recursum update failed for session %r, using the extractive update: %s", session.session_id, e)
            return None
        keep = sorted({k - 1 for k in value["keep"] if isinstance(k, int) and 1 <= k <= len(old)})
        return keep, [str(a) for a in value["add"]]

    def _extract(self, session: Session) -> list[str]:
        """The session's extractive summary, as sentences."""
        if not session.turns:
            return []
        vectors = embed_texts(self.embedder, [embedding_view(t) for t in session.turns])
        summary = self._extractive.summarize(session, vectors)
        return [s.strip() for s in split_multi(summary) if s.strip()]

    def memory(self, store: Store, user_id: str) -> list[MemoryEntry]:
        """The user's current memory, its entries in order (kept ones first, then newer additions)."""
        return list(self._states.get(store, user_id).entries)

    # ------------------------------------------------------------------ using it

    def _fresh_state(self, store: Store, user_id: str) -> _State:
        """The user's state folded from nothing (every session is new to it)."""
        state = self._fold(store, user_id, _State())
        assert state is not None  # a fold from an empty state always makes one
        return state

    def _build(self, store: Store, user_id: str) -> tuple[UserIndex, _State]:
        return turn_docs(store, user_id, "all"), self._states.get(store, user_id)

    def score(self, store: Store, user_id: str, query: str, *, query_time: Any = None) -> Scored:
        """Each turn scores as its session: the best cosine of the query with an entry credited to it."""
        docs, state = self._indexes.get(store, user_id)
        session_score = np.full(len(docs.sessions), -np.inf)
        if state.entries:
            sims = state.vectors @ self.embed_query(query)
            pos = {s: i for i, s in enumerate(docs.sessions)}
            for entry, sim in zip(state.entries, sims):
                for sid in entry.sessions:
                    if sid in pos:
                        session_score[pos[sid]] = max(session_score[pos[sid]], float(sim))
        scores = session_score[docs.session_of] if len(docs.table) else np.zeros(0)
        return Scored(docs, scores, relevance=np.clip(np.nan_to_num(scores, neginf=0.0), 0.0, 1.0))

    def memory_items(self, store: Store, user_id: str, question: str, *, k: int = 5,
                     query_time: datetime | None = None) -> list[MemoryItem]:
        """The whole memory as one item (the reader answers from the summary, as in the paper)."""
        state = self._states.get(store, user_id)
        if not state.entries:
            return []
        return [MemoryItem("recursum-memory", "\n".join(f"- {e.text}" for e in state.entries), state.last_time)]
