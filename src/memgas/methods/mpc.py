"""``mpc``: memory written and read through prompts, after the Modular Prompted Chatbot.

Lee et al., "Prompted LLMs as Chatbot Modules for Long Open-domain Conversation", Findings of ACL 2023
(arXiv:2305.04533). MPC's memory processor is a prompted LLM that turns each finished session into
short memory entries about the speakers (persona) and what happened (events); its retriever (DPR in the
paper) finds the entries relevant to the current utterance.

Here: one LLM call per session (JSON: ``{"memories": [{"kind": "persona"|"event", "text", "turns"}]}``)
writes the entries; ``turns`` cites the session's turns an entry comes from (the prompt numbers them).
An entry citing no valid turn is attached to the turn sharing most words with it. Entries are embedded
with the memory's embedder (not DPR) and a query scores every entry by cosine; a turn scores as its best
entry, a session as its best turn, so the benchmarks' session and turn metrics apply. Turns no entry
cites are not scored (they follow in their sessions' order). Simplified against the paper: no
utterance-level persona clarifier, no memory de-duplication across sessions, no response generator
(QA goes through the shared reader). A session whose call fails gets no entries (counted in
``llm_failures``). There is no no-LLM variant: without the prompted processor the entries would be
the turns themselves, which is ``dense-turn``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np

from memgas.core.errors import InvalidInputError
from memgas.core.types import Session
from memgas.methods.derived import (
    DerivedMethod,
    TurnCorpus,
    as_matrix,
    best_turn,
    numbered_turns,
    unit_rows,
    valid_turns,
)
from memgas.methods.ranking import Scored
from memgas.methods.units import embed_texts

__all__ = ["MPC", "MemoryEntry", "MEMORY_SCHEMA", "memory_messages", "parse_entries"]

MEMORY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["memories"],
    "properties": {"memories": {"type": "array", "maxItems": 6, "items": {
        "type": "object", "required": ["kind", "text", "turns"],
        "properties": {"kind": {"type": "string", "enum": ["persona", "event"]},
                       "text": {"type": "string", "minLength": 1},
                       "turns": {"type": "array", "items": {"type": "integer"}}}}}},
}

_SYSTEM = (
    "You are the memory processor of a chatbot. Read one conversation session and write the memories worth "
    "keeping for later conversations: persona memories (facts about a speaker: preferences, possessions, "
    "relationships, plans, jobs) and event memories (what happened or was decided, with dates when given). "
    "Each memory is one short self-contained sentence in your own words naming the speaker; never copy a "
    "line. Cite the numbers [i] of the lines it comes from in \"turns\". Write one memory per fact, "
    "as many as the session holds. Reply with JSON only: "
    '{"memories": [{"kind": "persona" or "event", "text": "...", "turns": [i, ...]}, ...]}.'
)


@dataclass(frozen=True, slots=True)
class MemoryEntry:
    """One memory: its kind, text, session and the turns it was written from."""

    kind: str
    text: str
    session_id: str
    turns: tuple[int, ...]


def memory_messages(session: Session, max_chars: int) -> list[dict[str, str]]:
    """The chat messages of one session's memory-writing call."""
    when = f"Date of the session: {session.timestamp.date().isoformat()}\n" if session.timestamp else ""
    return [{"role": "system", "content": _SYSTEM},
            {"role": "user", "content": f"{when}SESSION:\n{numbered_turns(session, max_chars)}"}]


def parse_entries(value: Any, session: Session) -> list[MemoryEntry]:
    """The entries of a reply (already schema-valid): texts stripped, repeats dropped, each with at least
    one valid turn (the best-matching turn when it cites none)."""
    out: dict[str, MemoryEntry] = {}
    for item in value["memories"]:
        text = " ".join(item["text"].split())
        if text.lower() in out:
            continue
        turns = valid_turns(item["turns"], session) or [best_turn(text, session)]
        out[text.lower()] = MemoryEntry(item["kind"], text, session.session_id, tuple(turns))
    return list(out.values())


@dataclass(frozen=True, slots=True)
class _View:
    corpus: TurnCorpus
    entries: tuple[MemoryEntry, ...]
    vectors: np.ndarray


class MPC(DerivedMethod[_View]):
    """Prompted memory entries per session, retrieved by embedding (see the module notes).

    Args:
        embedder: embeds entries and queries.
        max_chars: characters of each message shown to the memory processor.
        **kwargs: ``llm``, ``llm_cache`` (see :class:`~memgas.methods.derived.DerivedMethod`).
    """

    name = "mpc"

    def __init__(self, embedder: Any, *, max_chars: int = 400, **kwargs: Any) -> None:
        super().__init__(embedder, **kwargs)
        if max_chars < 1:
            raise InvalidInputError("max_chars must be at least 1")
        self.max_chars = max_chars

    def derive(self, corpus: TurnCorpus) -> _View:
        entries: list[MemoryEntry] = []
        for session in corpus.sessions:
            if not session.turns:
                continue
            reply = self.ask(memory_messages(session, self.max_chars), MEMORY_SCHEMA, user_id=session.user_id,
                             sessions=[session.session_id], max_tokens=800)
            if reply is not None:
                entries += parse_entries(reply, session)
        vectors = embed_texts(self.embedder, [e.text for e in entries]) if entries else as_matrix([], self.embedder.dim)
        return _View(corpus, tuple(entries), vectors)

    def score_view(self, view: _View, query: str, query_time: datetime | None) -> Scored:
        sims = view.vectors @ self.embed_query(query) if len(view.entries) else np.zeros(0)
        best: dict[tuple[str, int], float] = {}
        for entry, sim in zip(view.entries, sims):
            for t in entry.turns:
                key = (entry.session_id, t)
                best[key] = max(best.get(key, -np.inf), float(sim))
        return Scored(view.corpus.index, unit_rows(view.corpus, best))

    def entries(self, store: Any, user_id: str) -> list[MemoryEntry]:
        """The user's memory entries, oldest session first."""
        return list(self._indexes.get(store, user_id).entries)

    def config(self) -> dict[str, Any]:
        return {**super().config(), "max_chars": self.max_chars}
