"""``amem``: agentic memory notes with LLM-chosen links and memory evolution, after A-MEM.

Xu et al., "A-MEM: Agentic Memory for LLM Agents", arXiv:2502.12110 (2025). Each interaction becomes a
note: its content plus LLM-written keywords, tags and a context sentence, embedded together. A new note
is shown its nearest existing notes by embedding; the LLM chooses which of them to link to, and may
*evolve* them: rewrite a neighbour's context and tags in the light of the new note (the neighbour is
re-embedded). Retrieval takes the ``top_k`` notes nearest the query and adds the notes linked to them.

Here a note is one stored turn, built in time order. Two LLM calls per turn: the note (JSON
``{"keywords", "tags", "context"}``), then, when earlier notes exist, links and evolution in one call
(JSON ``{"links": [i], "updates": [{"note": i, "context", "tags"}]}``; the paper's implementation also
asks both in one call). The note's vector embeds content, context, keywords and tags. A failed note
call leaves the note as its bare content; a failed link call adds no link. Ranking, for the
benchmarks: the ``top_k`` nearest notes first (by cosine), then the notes linked to them (by their
own cosine), then every other note by cosine; a session ranks as its best turn. Not built: the
paper's tool use and its agent loop; ``retrieve`` is the ranking above.

``amem-extractive`` (no LLM): a note is the turn's own text and stored vector (no keywords, tags or
context), links go to the ``neighbours`` nearest earlier notes whose cosine reaches
``link_threshold`` (no LLM choice), and there is no evolution. It is labelled as such in every table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from memgas.core.errors import InvalidInputError
from memgas.core.types import Session, Turn
from memgas.methods.derived import DerivedMethod, TurnCorpus
from memgas.methods.ranking import Scored
from memgas.methods.units import embed_texts

__all__ = ["AMem", "Note", "NOTE_SCHEMA", "LINK_SCHEMA", "note_messages", "link_messages"]

NOTE_SCHEMA: dict[str, Any] = {
    "type": "object", "required": ["keywords", "tags", "context"],
    "properties": {"keywords": {"type": "array", "maxItems": 6, "items": {"type": "string"}},
                   "tags": {"type": "array", "maxItems": 4, "items": {"type": "string"}},
                   "context": {"type": "string"}},
}
LINK_SCHEMA: dict[str, Any] = {
    "type": "object", "required": ["links", "updates"],
    "properties": {"links": {"type": "array", "maxItems": 10, "items": {"type": "integer"}},
                   "updates": {"type": "array", "maxItems": 10, "items": {
                       "type": "object", "required": ["note", "context", "tags"],
                       "properties": {"note": {"type": "integer"}, "context": {"type": "string"},
                                      "tags": {"type": "array", "maxItems": 4, "items": {"type": "string"}}}}}},
}
_NOTE_SYSTEM = (
    "You write memory notes. For the conversation excerpt, give up to 6 keywords (the specific people, "
    "things, places, dates), up to 4 short topic tags, and one sentence of context saying what it is "
    "about and why it may matter later. Reply with JSON only: "
    '{"keywords": ["..."], "tags": ["..."], "context": "..."}.'
)
_LINK_SYSTEM = (
    "You maintain a network of memory notes. A NEW NOTE arrives with its NEIGHBOURS (numbered). In \"links\" "
    "list the numbers of the neighbours that are genuinely related to the new note (same person, thing, "
    "event or topic). In \"updates\", for a neighbour whose context or tags should change in the light of "
    "the new note, give its number with its new context sentence and tags; leave it empty otherwise. "
    'Reply with JSON only: {"links": [i, ...], "updates": [{"note": i, "context": "...", "tags": ["..."]}]}.'
)


@dataclass(slots=True)
class Note:
    """A memory note: a turn's content with its keywords, tags, context and links (note positions)."""

    session_id: str
    turn: int
    content: str
    keywords: list[str] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    context: str = ""
    links: set[int] = field(default_factory=set)

    def text(self) -> str:
        """What the note's vector embeds: content, then context, keywords and tags when there are any."""
        parts = [self.content]
        if self.context:
            parts.append(f"Context: {self.context}")
        if self.keywords:
            parts.append("Keywords: " + ", ".join(self.keywords))
        if self.tags:
            parts.append("Tags: " + ", ".join(self.tags))
        return "\n".join(parts)

    def brief(self, max_chars: int) -> str:
        """The note for a prompt: content cut to ``max_chars``, then context and tags."""
        return f"{self.content[:max_chars]}\n   context: {self.context or '-'}; tags: {', '.join(self.tags) or '-'}"


def _content(turn: Turn, max_chars: int) -> str:
    return "\n".join(f"{m.name or m.role}: {' '.join(m.content.split())[:max_chars]}" for m in turn.messages)


def note_messages(content: str, session: Session) -> list[dict[str, str]]:
    """The chat messages of one note-writing call."""
    when = f"Date: {session.timestamp.date().isoformat()}\n" if session.timestamp else ""
    return [{"role": "system", "content": _NOTE_SYSTEM}, {"role": "user", "content": f"{when}EXCERPT:\n{content}"}]


def link_messages(new: Note, neighbours: list[Note], max_chars: int) -> list[dict[str, str]]:
    """The chat messages of one link-and-evolve call (neighbours numbered from 0)."""
    listed = "\n".join(f"{i}. {n.brief(max_chars)}" for i, n in enumerate(neighbours))
    return [{"role": "system", "content": _LINK_SYSTEM},
            {"role": "user", "content": f"NEW NOTE:\n{new.brief(max_chars)}\n\nNEIGHBOURS:\n{listed}"}]


def _strings(values: list[Any]) -> list[str]:
    return list(dict.fromkeys(" ".join(v.split()) for v in values if isinstance(v, str) and v.strip()))


@dataclass(frozen=True, slots=True)
class _View:
    corpus: TurnCorpus
    notes: tuple[Note, ...]
    vectors: np.ndarray
    rows: np.ndarray  # note → unit row


class AMem(DerivedMethod[_View]):
    """A-MEM notes, links and evolution (see the module notes).

    Args:
        embedder: embeds notes and queries.
        neighbours: nearest earlier notes shown to the LLM (or linked by threshold without it).
        top_k: notes taken by cosine before their links are added.
        link_threshold: least cosine of a link in ``amem-extractive``.
        max_chars: characters of each message in a note's content.
        **kwargs: ``llm``, ``llm_cache``, ``use_llm`` (see :class:`~memgas.methods.derived.DerivedMethod`).
    """

    name = "amem"
    no_llm_note = "'amem-extractive' links each turn to its nearest earlier turns by embedding"

    def __init__(self, embedder: Any, *, neighbours: int = 5, top_k: int = 5, link_threshold: float = 0.5,
                 max_chars: int = 500, **kwargs: Any) -> None:
        super().__init__(embedder, **kwargs)
        if neighbours < 1 or top_k < 1 or max_chars < 1 or not -1 <= link_threshold <= 1:
            raise InvalidInputError("neighbours, top_k and max_chars must be >= 1; link_threshold in [-1, 1]")
        self.neighbours = neighbours
        self.top_k = top_k
        self.link_threshold = link_threshold
        self.max_chars = max_chars

    def derive(self, corpus: TurnCorpus) -> _View:
        notes: list[Note] = []
        rows: list[int] = []
        vectors = np.zeros((sum(len(s.turns) for s in corpus.sessions), self.embedder.dim), np.float32)
        for session in corpus.sessions:
            for turn in session.turns:
                i = len(notes)
                note = Note(session.session_id, turn.index, _content(turn, self.max_chars))
                rows.append(corpus.row_of[(session.session_id, turn.index)])
                if self.use_llm:
                    self._write(note, session)
                    vectors[i] = embed_texts(self.embedder, [note.text()])[0]
                else:
                    vectors[i] = corpus.vectors[rows[-1]]
                sims = vectors[:i] @ vectors[i]
                near = [int(j) for j in np.argsort(-sims, kind="stable")[: self.neighbours]]
                notes.append(note)
                if not near:
                    continue
                if self.use_llm:
                    self._link(notes, near, vectors, session)
                else:
                    self._connect(notes, i, [j for j in near if sims[j] >= self.link_threshold])
        n = len(notes)
        return _View(corpus, tuple(notes), vectors[:n], np.asarray(rows, dtype=np.int64))

    def _write(self, note: Note, session: Session) -> None:
        reply = self.ask(note_messages(note.content, session), NOTE_SCHEMA, user_id=session.user_id,
                         sessions=[session.session_id], max_tokens=250)
        if reply is not None:
            note.keywords = _strings(reply["keywords"])
            note.tags = _strings(reply["tags"])
            note.context = " ".join(reply["context"].split())

    def _link(self, notes: list[Note], near: list[int], vectors: np.ndarray, session: Session) -> None:
        """Ask for the new note's links and its neighbours' evolution; re-embed the neighbours changed."""
        i = len(notes) - 1
        shown = [notes[j] for j in near]
        sources = list(dict.fromkeys([session.session_id, *(n.session_id for n in shown)]))
        reply = self.ask(link_messages(notes[i], shown, self.max_chars), LINK_SCHEMA, user_id=session.user_id,
                         sessions=sources, max_tokens=400)
        if reply is None:
            return
        self._connect(notes, i, [near[k] for k in reply["links"] if 0 <= k < len(near)])
        changed = []
        for update in reply["updates"]:
            k = update["note"]
            if 0 <= k < len(near) and update["context"].strip():
                target = notes[near[k]]
                target.context = " ".join(update["context"].split())
                target.tags = _strings(update["tags"]) or target.tags
                changed.append(near[k])
        changed = list(dict.fromkeys(changed))
        if changed:
            vectors[changed] = embed_texts(self.embedder, [notes[j].text() for j in changed])

    @staticmethod
    def _connect(notes: list[Note], i: int, others: list[int]) -> None:
        for j in others:
            if j != i:
                notes[i].links.add(j)
                notes[j].links.add(i)

    def score_view(self, view: _View, query: str, query_time: datetime | None) -> Scored:
        scores = np.full(len(view.corpus.index.table), -np.inf)
        if not view.notes:
            return Scored(view.corpus.index, scores)
        sims = view.vectors @ self.embed_query(query)
        note_scores = sims.astype(np.float64)  # cosines in [-1, 1]: the rest
        top = np.argsort(-sims, kind="stable")[: self.top_k]
        linked = {j for i in top for j in view.notes[i].links} - set(top.tolist())
        note_scores[list(linked)] += 2.0  # linked notes after the top ones, before the rest
        note_scores[top] += 4.0
        scores[view.rows] = note_scores
        return Scored(view.corpus.index, scores)

    def notes(self, store: Any, user_id: str) -> list[Note]:
        """The user's notes, oldest first (positions are the links' numbers)."""
        return list(self._indexes.get(store, user_id).notes)

    def config(self) -> dict[str, Any]:
        return {**super().config(), "neighbours": self.neighbours, "top_k": self.top_k,
                "link_threshold": self.link_threshold, "max_chars": self.max_chars}
