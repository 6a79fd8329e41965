"""The course of a user's conversations: each session's digest, what it brought up, in order.

A session's **digest** is read off what was made of it at add: its turn units' vectors cut it into items where the
subject changes (:func:`memgas.kernels.segment.topic_starts`), and each item is the line of a person's message that
brought the subject up (the user's, or in a conversation between people any participant's). Nothing is stored
besides the units, so a digest is current the moment a session is appended to, edited or deleted: a deleted
message's item goes with its turn unit.

With a topic, only the items about it are kept (their best turn's cosine with the topic at least the floor, or half
the topic's words in it), each read from the turn that speaks of it most, across sessions oldest first: the course
of one subject.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Collection, Mapping

import numpy as np

from memgas.core.types import Session, Turn
from memgas.core.validate import naive_utc, parse_timestamp
from memgas.kernels.excerpt import excerpt
from memgas.kernels.lexical import terms_held
from memgas.kernels.people import people_of
from memgas.kernels.segment import topic_starts
from memgas.kernels.text import word_head
from memgas.store import Store

__all__ = ["DigestItem", "SessionDigest", "TOPIC_SHIFT", "TOPIC_FLOOR", "LINE_CHARS", "timeline"]

#: A turn whose cosine with the mean of the subject under way falls below this starts a new item. Set before any
#: measurement (a third of the way from unrelated to the same): a digest reads as a list of what came up, a few
#: turns each (BENCHMARKS.md, "the course of a conversation", gives items per session on each benchmark).
TOPIC_SHIFT = 0.3
#: An item is about a topic when its best turn's cosine with the topic is at least this (the context's floor).
TOPIC_FLOOR = 0.2
#: The most of a message an item shows.
LINE_CHARS = 200


@dataclass(frozen=True, slots=True)
class DigestItem:
    """One thing a session brought up.

    Attributes:
        session_id: the session.
        message: the position (0-based) of the message the line is read from.
        turn_start: the item's first turn; ``turn_end``: one past its last.
        speaker: who said it (the message's name, else its role).
        text: the line: the start of the message, or with a topic the part of it about the topic.
        timestamp: the session's time.
        relevance: with a topic, the cosine of the item's best turn with it (``None`` without one).
    """

    session_id: str
    message: int
    turn_start: int
    turn_end: int
    speaker: str
    text: str
    timestamp: datetime | None = None
    relevance: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """The item as JSON-ready values (the timestamp in ISO 8601)."""
        return {"session_id": self.session_id, "message": self.message, "turn_start": self.turn_start,
                "turn_end": self.turn_end, "speaker": self.speaker, "text": self.text,
                "timestamp": None if self.timestamp is None else self.timestamp.isoformat(),
                "relevance": None if self.relevance is None else round(self.relevance, 6)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DigestItem:
        """The item of a :meth:`to_dict` view (as the REST API returns it)."""
        relevance = data.get("relevance")
        return cls(str(data["session_id"]), int(data["message"]), int(data["turn_start"]), int(data["turn_end"]),
                   str(data["speaker"]), str(data["text"]), parse_timestamp(data.get("timestamp")),
                   None if relevance is None else float(relevance))


@dataclass(frozen=True, slots=True)
class SessionDigest:
    """What one session brought up, in order."""

    session_id: str
    timestamp: datetime | None
    items: tuple[DigestItem, ...]

    def to_dict(self) -> dict[str, Any]:
        """The digest as JSON-ready values."""
        return {"session_id": self.session_id,
                "timestamp": None if self.timestamp is None else self.timestamp.isoformat(),
                "items": [i.to_dict() for i in self.items]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SessionDigest:
        """The digest of a :meth:`to_dict` view."""
        return cls(str(data["session_id"]), parse_timestamp(data.get("timestamp")),
                   tuple(DigestItem.from_dict(i) for i in data["items"]))


def _turn_vectors(store: Store, user_id: str, session_id: str, n_turns: int) -> np.ndarray | None:
    """Each turn's vector (the mean of its chunks' when it was cut), ``None`` where the method stores no turn units
    or they do not cover the session as it is (a rewrite under way)."""
    table = store.session_units(user_id, session_id, texts=False)
    rows = np.flatnonzero(table.mask("turn")) if len(table) else np.zeros(0, np.int64)
    if len(rows) == 0:
        return None
    vectors = np.zeros((n_turns, table.vectors.shape[1]), np.float64)
    seen = np.zeros(n_turns, bool)
    for r in rows:
        t = int(table.turn_start[r])
        if t < n_turns:
            vectors[t] += table.vectors[r]
            seen[t] = True
    if not seen.all():
        return None
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True).clip(1e-12)).astype(np.float32)


def _said(turn: Turn, people: frozenset[str]) -> int:
    """The offset in ``turn`` of its first message a person said (the user's, or a participant's), else 0."""
    for offset, m in enumerate(turn.messages):
        if m.role == "user" or (m.role == "assistant" and (m.name or "").casefold() in people):
            return offset
    return 0


def _line(text: str, chars: int) -> str:
    """The start of ``text`` on one line, within ``chars``."""
    flat = " ".join(text.split())
    head = word_head(flat, chars)
    return head + (" …" if len(head) < len(flat) else "")


def _digest(session: Session, vectors: np.ndarray | None, topic: np.ndarray | None, terms: frozenset[str],
            shift: float, floor: float, chars: int) -> tuple[DigestItem, ...]:
    """One session's items (with a topic, only those about it)."""
    turns = session.turns
    if not turns:
        return ()
    people = people_of(session.metadata, [(m.role, m.name) for m in session.messages])
    # without turn vectors (a method that keeps none) every turn is an item of its own
    starts = topic_starts(vectors, shift) if vectors is not None else np.arange(len(turns))
    ends = np.append(starts[1:], len(turns))
    cosine = vectors @ topic if vectors is not None and topic is not None else None
    if topic is not None and len(terms):
        need = max(2, -(-len(terms) // 2))
        holds = np.array([len(held) >= need for held in terms_held([t.text for t in turns], terms)])
    else:
        holds = np.zeros(len(turns), bool)
    items = []
    for start, end in zip(starts.tolist(), ends.tolist()):
        best, relevance = start, None
        if topic is not None:
            span = np.arange(start, end)
            score = cosine[span] if cosine is not None else holds[span].astype(np.float32)
            best = int(span[int(np.argmax(score))])
            relevance = float(score.max())
            if relevance < floor and not holds[span].any():
                continue
        turn = turns[best]
        offset = _said(turn, people)
        m = turn.messages[offset]
        text = _line(excerpt(m.content, terms, chars)[0], chars + 4) if topic is not None else _line(m.content, chars)
        items.append(DigestItem(session.session_id, turn.msg_start + offset, start, end, m.name or m.role, text,
                                session.timestamp, relevance))
    return tuple(items)


def timeline(store: Store, user_id: str, *, topic: np.ndarray | None = None, topic_terms: Collection[str] = (),
             since: datetime | None = None, until: datetime | None = None, within: Collection[str] | None = None,
             shift: float = TOPIC_SHIFT, floor: float = TOPIC_FLOOR, line_chars: int = LINE_CHARS
             ) -> list[SessionDigest]:
    """The digests of the user's sessions, oldest first (see the module docstring).

    Args:
        store: where the sessions and their units are.
        user_id: whose.
        topic: the topic's vector (``None``: every item of every session).
        topic_terms: the topic's words (:func:`memgas.kernels.excerpt.query_terms`): an item that holds half of
            them is about it whatever its cosine, and the line shows the part of the message that holds them.
        since, until: only sessions dated in ``[since, until)``; an undated session is left out when either is given.
        within: only these sessions (``None``: all).
        shift: :data:`TOPIC_SHIFT`; floor: :data:`TOPIC_FLOOR`; line_chars: :data:`LINE_CHARS`.
    """
    terms = frozenset(topic_terms)
    low = None if since is None else naive_utc(since)
    high = None if until is None else naive_utc(until)
    out = []
    for header in store.list_sessions(user_id):
        if within is not None and header.session_id not in within:
            continue
        if low is not None or high is not None:
            if header.timestamp is None:
                continue
            when = naive_utc(header.timestamp)
            if (low is not None and when < low) or (high is not None and when >= high):
                continue
        session = store.get_session(user_id, header.session_id)
        vectors = _turn_vectors(store, user_id, header.session_id, len(session.turns))
        items = _digest(session, vectors, topic, terms, shift, floor, line_chars)
        if items or topic is None:
            out.append(SessionDigest(session.session_id, session.timestamp, items))
    return out
