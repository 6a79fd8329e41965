"""``comedy``: one compressed memory of all sessions (user profile, relationship, key events); QA only.

Chen et al., 2025, "Compress to Impress: Unleashing the Potential of Compressive Memory in Real-World
Long-Term Conversations" (COMEDY, COLING 2025), a MemGAS baseline. COMEDY uses one LLM for three tasks:
(1) a short memory of each session, (2) compression of all session memories into a compressive memory
(the user's profile, the user-assistant relationship and the key events), (3) responses grounded on it.
There is no retrieval: the compressed memory is the whole context of every answer.

Here (1) is one LLM call per session, ``{"memories": [...]}`` (at most ``max_facts`` short facts), and (2)
one call over the dated session memories, oldest first (cut to fit the window, every session keeping a
fair share), returning ``{"user_profile", "relationship", "key_events": [...]}``. Task (3) is the
harness's shared reader (``bench --qa``), which sees the compressed memory as one item. The paper's
fine-tuned COMEDY-7B/13B models are replaced by whatever model is configured. A failed session call falls
back to the session's extractive summary, a failed compression to the session memories themselves (each
counted in ``fallbacks``). QA only: the compressed memory maps to no session ranking (``score`` raises).

The memory is recomputed when the user's sessions change (cached per store version); the per-session
calls and an unchanged compression come from the LLM response cache.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

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
from memgas.methods.index import IndexCache
from memgas.methods.qa_memory import qa_only_error
from memgas.methods.ranking import Scored
from memgas.methods.units import ExtractiveSummarizer, embed_texts, embedding_view
from memgas.store import Store

__all__ = ["Comedy", "CompressedMemory", "SESSION_SCHEMA", "COMPRESS_SCHEMA", "session_prompt", "compress_prompt"]

log = logging.getLogger("memgas.llm")

#: Task 1's JSON; ``maxItems`` is set per call from ``max_facts``.
SESSION_SCHEMA: dict[str, Any] = {
    "type": "object", "required": ["memories"], "additionalProperties": False,
    "properties": {"memories": {"type": "array", "items": {"type": "string", "minLength": 1}}},
}
#: Task 2's JSON.
COMPRESS_SCHEMA: dict[str, Any] = {
    "type": "object", "required": ["user_profile", "relationship", "key_events"], "additionalProperties": False,
    "properties": {"user_profile": {"type": "string"}, "relationship": {"type": "string"},
                   "key_events": {"type": "array", "items": {"type": "string", "minLength": 1}, "maxItems": 20}},
}
_SYSTEM = "You write the long-term memory of a personal assistant about its user. Reply with JSON only."


def _date(t: datetime | None) -> str:
    return f"{t:%Y-%m-%d}" if t else "date unknown"


def session_prompt(session_text: str, when: datetime | None, max_facts: int) -> list[dict[str, str]]:
    """Task 1: the messages asking for one session's memory."""
    user = (f"Conversation on {_date(when)}:\n<conversation>\n{session_text}\n</conversation>\n\n"
            f'Return a JSON object {{"memories": [...]}} with at most {max_facts} short facts from this '
            "conversation worth remembering about the user: events, plans, preferences, people, places, dates "
            "and numbers.")
    return [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": user}]


def compress_prompt(session_memories: str) -> list[dict[str, str]]:
    """Task 2: the messages asking to compress all session memories."""
    user = (f"Memories of past sessions, oldest first:\n{session_memories}\n\n"
            "Compress them into one memory. Return a JSON object with\n"
            '- "user_profile": who the user is: facts, preferences, habits, people in their life;\n'
            '- "relationship": how the user relates to the assistant;\n'
            '- "key_events": the important events with their dates, oldest first; when a fact changed, keep the '
            "latest.")
    return [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": user}]


@dataclass(frozen=True, slots=True)
class CompressedMemory:
    """COMEDY's compressive memory of one user; ``by_llm`` is false when the compression fell back."""

    user_profile: str
    relationship: str
    key_events: tuple[str, ...]
    by_llm: bool
    last_time: datetime | None

    def text(self) -> str:
        """The memory as the reader sees it."""
        events = "\n".join(f"- {e}" for e in self.key_events)
        return f"User profile: {self.user_profile}\nRelationship: {self.relationship}\nKey events:\n{events}"


class Comedy(MemoryMethod):
    """COMEDY's compressive memory (see the module notes).

    Args:
        embedder: used only for the extractive fallback of a session memory.
        llm: the model (a spec or an instance).
        llm_cache: the response cache for a spec; default the user's LLM cache.
        max_facts: most facts in one session memory.
        max_tokens: most tokens the model may write per call.

    Raises:
        InvalidInputError: no ``llm``, or a bad parameter.
    """

    name = "comedy"
    keep_newest = False

    def __init__(self, embedder: Embedder, *, llm: str | LLM | ChatModel | None = None,
                 llm_cache: ResponseCache | None = None, max_facts: int = 6, max_tokens: int = 500,
                 **kwargs: Any) -> None:
        super().__init__(embedder, **kwargs)
        if llm is None:
            raise InvalidInputError("the 'comedy' method needs an LLM: llm='local' or 'openai:<model>@<url>'")
        if max_facts < 1 or max_tokens < 16:
            raise InvalidInputError("comedy needs max_facts >= 1 and max_tokens >= 16")
        self.llm = get_llm(llm, cache=llm_cache or ResponseCache())
        self.max_facts, self.max_tokens = max_facts, max_tokens
        self.fallbacks = 0
        self._extractive = ExtractiveSummarizer()
        self._indexes: IndexCache[CompressedMemory | None] = IndexCache(self._build)

    def config(self) -> dict[str, Any]:
        return {**super().config(), "llm": self.llm.id, "max_facts": self.max_facts}

    def _session_memory(self, user_id: str, session: Session) -> list[str]:
        """Task 1 for one session (its extractive summary when the call fails)."""
        budget = max(self.llm.context_tokens - self.max_tokens - 300, 64)
        text = "\n".join(fit_texts([embedding_view(t, 600) for t in session.turns], budget, self.llm.count_tokens))
        schema = {**SESSION_SCHEMA, "properties": {"memories": {**SESSION_SCHEMA["properties"]["memories"],
                                                                "maxItems": self.max_facts}}}
        try:
            with provenance.source(user_id, session.session_id):
                value = self.llm.complete_json(session_prompt(text, session.timestamp, self.max_facts), schema,
                                               max_tokens=self.max_tokens)
            return [" ".join(str(m).split()) for m in value["memories"] if str(m).strip()]
        except LLMError as e:
            self.fallbacks += 1
            log.warning("comedy session memory failed for %r, using its extractive summary: %s", session.session_id, e)
            vectors = embed_texts(self.embedder, [embedding_view(t) for t in session.turns])
            return [self._extractive.summarize(session, vectors)] if session.turns else []

    def _build(self, store: Store, user_id: str) -> CompressedMemory | None:
        sessions = [store.get_session(user_id, i.session_id) for i in store.list_sessions(user_id)]
        if not sessions:
            return None
        blocks = [f"[{_date(s.timestamp)}] " + " ".join(self._session_memory(user_id, s)) for s in sessions]
        budget = max(self.llm.context_tokens - self.max_tokens - 300, 64)
        text = "\n".join(fit_texts(blocks, budget, self.llm.count_tokens))
        last = max((s.timestamp for s in sessions if s.timestamp), default=None)
        try:
            with provenance.source(user_id, *(s.session_id for s in sessions)):
                value = self.llm.complete_json(compress_prompt(text), COMPRESS_SCHEMA, max_tokens=self.max_tokens)
        except LLMError as e:
            self.fallbacks += 1
            log.warning("comedy compression failed, using the session memories: %s", e)
            return CompressedMemory("", "", tuple(text.split("\n")), False, last)
        return CompressedMemory(" ".join(value["user_profile"].split()), " ".join(value["relationship"].split()),
                                tuple(" ".join(e.split()) for e in value["key_events"]), True, last)

    def compressed(self, store: Store, user_id: str) -> CompressedMemory | None:
        """The user's compressed memory (``None`` for a user with no session)."""
        return self._indexes.get(store, user_id)

    def memory_items(self, store: Store, user_id: str, question: str, *, k: int = 5,
                     query_time: datetime | None = None) -> list[MemoryItem]:
        """The compressed memory as one item (``question`` and ``k`` unused: COMEDY does not retrieve)."""
        memory = self.compressed(store, user_id)
        return [] if memory is None else [MemoryItem("comedy-memory", memory.text(), memory.last_time)]

    def score(self, store: Store, user_id: str, query: str, *, query_time: Any = None) -> Scored:
        """Refused: COMEDY ranks nothing (see :func:`memgas.methods.qa_memory.qa_only_error`)."""
        raise qa_only_error(self.name)
