"""The plain data types every layer shares: messages, turns, sessions, units, edges and hits.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Iterable, Literal, Mapping, Sequence

import numpy as np

__all__ = [
    "GRANULARITIES", "Granularity", "ROLES", "Message", "Turn", "Session", "Unit", "Edge", "TurnHit", "Hit",
    "group_turns", "MemoryItem", "items_from_hits", "items_from_sessions", "speaker_line",
]

Granularity = Literal["session", "turn", "summary", "keyword"]
#: The four MemGAS granularities, in a fixed order used everywhere (router weights, reports).
GRANULARITIES: tuple[Granularity, ...] = ("session", "turn", "summary", "keyword")
#: Roles a message may have. A turn starts at each ``user`` message; ``tool`` messages (a tool's result) are
#: replies inside the turn, never the user's words.
ROLES: frozenset[str] = frozenset({"user", "assistant", "system", "tool"})


@dataclass(frozen=True, slots=True)
class Message:
    """One message of a conversation. ``name`` is the speaker's name when known; ``metadata`` is a JSON
    object kept with the message (e.g. a framework's own item, so that it comes back as it was given)."""

    role: str
    content: str
    name: str | None = None
    metadata: Mapping[str, Any] | None = field(default=None, hash=False)

    def to_dict(self) -> dict[str, Any]:
        """The message as the API takes and returns it: ``role``, ``content``, and ``name``/``metadata`` when set."""
        return {"role": self.role, "content": self.content, **({"name": self.name} if self.name else {}),
                **({"metadata": dict(self.metadata)} if self.metadata else {})}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Message:
        """The message of a :meth:`to_dict` view."""
        return cls(str(data["role"]), str(data["content"]), data.get("name"), data.get("metadata"))


def speaker_line(role: str, name: str | None, content: str) -> str:
    """A message as one ``speaker: content`` line of a turn's text (the speaker is the name, else the role).

    >>> speaker_line("user", "Ann", "hi"), speaker_line("assistant", None, "hello")
    ('Ann: hi', 'assistant: hello')
    """
    return f"{name or role}: {content}"


@dataclass(frozen=True, slots=True)
class Turn:
    """A user message with the replies to it (or a run of messages before the first user message).

    ``msg_start``/``msg_end`` are the 0-based, end-exclusive positions of its messages in the session.
    """

    index: int
    messages: tuple[Message, ...]
    msg_start: int
    msg_end: int

    @property
    def text(self) -> str:
        """The turn as text, one ``speaker: content`` line per message."""
        return "\n".join(speaker_line(m.role, m.name, m.content) for m in self.messages)

    @property
    def user_text(self) -> str:
        """Only the user-side messages' content (what LongMemEval indexes)."""
        return "\n".join(m.content for m in self.messages if m.role == "user")


@dataclass(frozen=True, slots=True)
class Session:
    """A validated conversation session, owned by one user; ``agent_id`` and ``run_id`` scope it further
    (the agent that held the conversation, one run of a workflow), both optional."""

    user_id: str
    session_id: str
    messages: tuple[Message, ...]
    timestamp: datetime | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    agent_id: str | None = None
    run_id: str | None = None
    # The turns, cut once per session object (a long session is cut by several steps of one append).
    _turns: tuple[Turn, ...] | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def turns(self) -> tuple[Turn, ...]:
        """The session cut into turns (see :func:`group_turns`)."""
        if self._turns is None:
            object.__setattr__(self, "_turns", group_turns(self.messages))
        return self._turns  # type: ignore[return-value]

    def extended(self, messages: Sequence[Message], **changes: Any) -> Session:
        """This session with ``messages`` after its own (and ``changes`` to its other fields), cut into turns from
        this one's last turn on: new messages only continue that turn or start others (:func:`group_turns`).

        >>> s = Session("u", "s", (Message("user", "Hi"), Message("assistant", "Hello")))
        >>> tuple(len(t.messages) for t in s.extended([Message("assistant", "Yes?"), Message("user", "Bye")]).turns)
        (3, 1)
        """
        out = replace(self, messages=self.messages + tuple(messages), **changes)
        if self._turns is not None and self._turns:
            *kept, last = self._turns
            tail = tuple(replace(t, index=t.index + len(kept), msg_start=t.msg_start + last.msg_start,
                                 msg_end=t.msg_end + last.msg_start)
                         for t in group_turns(out.messages[last.msg_start:]))
            object.__setattr__(out, "_turns", (*kept, *tail))
        return out

    @property
    def text(self) -> str:
        """The whole session as text."""
        return "\n".join(t.text for t in self.turns)

    def to_dict(self) -> dict[str, Any]:
        """The session as the API returns it (``get``): ids, ISO timestamp, metadata, scope and messages."""
        return {"session_id": self.session_id, "user_id": self.user_id,
                "timestamp": self.timestamp.isoformat() if self.timestamp else None, "metadata": dict(self.metadata),
                "agent_id": self.agent_id, "run_id": self.run_id, "messages": [m.to_dict() for m in self.messages]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Session:
        """The session of a :meth:`to_dict` view (as the REST API returns it)."""
        stamp = data.get("timestamp")
        return cls(str(data["user_id"]), str(data["session_id"]),
                   tuple(Message.from_dict(m) for m in data["messages"]),
                   datetime.fromisoformat(stamp) if stamp else None, dict(data.get("metadata") or {}),
                   data.get("agent_id"), data.get("run_id"))


@dataclass(slots=True)
class Unit:
    """A memory unit: one granularity's view of (part of) a session.

    ``turn_start``/``turn_end`` give the 0-based, end-exclusive turn range the unit covers;
    ``chunk`` numbers the pieces of a granularity that had to be split (long sessions).
    ``id`` is assigned by the store; ``vector`` is the unit's L2-normalised embedding.
    """

    session_id: str
    granularity: Granularity
    text: str
    turn_start: int
    turn_end: int
    chunk: int = 0
    vector: np.ndarray | None = None
    id: int | None = None


@dataclass(frozen=True, slots=True)
class Edge:
    """An undirected association between two units, with a similarity weight in (0, 1]."""

    src: int
    dst: int
    weight: float


@dataclass(frozen=True, slots=True)
class TurnHit:
    """A turn inside a retrieved session, with its own score."""

    index: int
    text: str
    score: float

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TurnHit:
        """The turn of a :meth:`Hit.to_dict` view (as the REST API returns it)."""
        return cls(index=int(data["index"]), text=str(data["text"]), score=float(data["score"]))


@dataclass(slots=True)
class Hit:
    """One retrieved session, with the evidence of why it was retrieved.

    ``weights`` are the router's granularity weights for the query; ``via_association`` is true when
    the session got more score from graph propagation than from its own seed similarity. ``score``
    ranks the hits of one search against each other; ``relevance`` (in [0, 1]) is the query's best
    cosine similarity with any of the session's units, a measure of that session alone that means
    the same in every search (see ``min_score`` of ``Memory.search``). ``metadata``, ``agent_id``,
    ``run_id`` and ``created_at`` (when the session was stored) are the session's, so that a hit needs no
    second read. ``channels`` (MemGAS) is each channel's share of the session's evidence (its router weight times
    the session's best score in it above the user's average unit, before any time prior), as fractions summing to
    1: why it ranks where it does. Channels that gave nothing are left out, and a session that no channel singles
    out (one found by association, or the best of a few) has none.
    """

    session_id: str
    score: float
    timestamp: datetime | None
    turns: list[TurnHit]
    weights: dict[str, float]
    via_association: bool = False
    seed_score: float = 0.0
    method: str = ""
    relevance: float = 0.0
    metadata: dict[str, Any] = field(default_factory=dict)
    agent_id: str | None = None
    run_id: str | None = None
    created_at: datetime | None = None
    channels: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable view of the hit."""
        return {
            "session_id": self.session_id,
            "score": round(float(self.score), 6),
            "relevance": round(float(self.relevance), 6),
            "timestamp": self.timestamp.isoformat() if self.timestamp else None,
            "turns": [{"index": t.index, "score": round(float(t.score), 6), "text": t.text} for t in self.turns],
            "weights": {g: round(float(w), 4) for g, w in self.weights.items()},
            "via_association": self.via_association,
            "seed_score": round(float(self.seed_score), 6),
            "method": self.method,
            "metadata": self.metadata,
            "agent_id": self.agent_id,
            "run_id": self.run_id,
            "created_at": self.created_at.isoformat() if self.created_at else None,
            "channels": {c: round(float(v), 4) for c, v in self.channels.items()},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Hit:
        """The hit of a :meth:`to_dict` view (as the REST API returns it); the timestamp becomes a datetime again."""
        stamp, created = data.get("timestamp"), data.get("created_at")
        return cls(
            session_id=str(data["session_id"]),
            score=float(data["score"]),
            timestamp=datetime.fromisoformat(stamp) if stamp else None,
            turns=[TurnHit.from_dict(t) for t in data["turns"]],
            weights={str(g): float(w) for g, w in data["weights"].items()},
            via_association=bool(data.get("via_association", False)),
            seed_score=float(data.get("seed_score", 0.0)),
            method=str(data.get("method", "")),
            relevance=float(data.get("relevance", 0.0)),
            metadata=dict(data.get("metadata") or {}),
            agent_id=data.get("agent_id"),
            run_id=data.get("run_id"),
            created_at=datetime.fromisoformat(created) if created else None,
            channels={str(c): float(v) for c, v in (data.get("channels") or {}).items()},
        )


def group_turns(messages: Sequence[Message]) -> tuple[Turn, ...]:
    """Cut messages into turns: each ``user`` message starts a turn that takes the replies after it.

    Messages before the first user message form a turn of their own, so every message belongs to
    exactly one turn.
    """
    turns: list[Turn] = []
    start = 0
    for i in range(1, len(messages) + 1):
        if i == len(messages) or messages[i].role == "user":
            turns.append(Turn(index=len(turns), messages=tuple(messages[start:i]), msg_start=start, msg_end=i))
            start = i
    return tuple(turns)


@dataclass(frozen=True, slots=True)
class MemoryItem:
    """One memory shown to the model: a session's text (or its best turns) with its date."""

    session_id: str
    text: str
    timestamp: datetime | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MemoryItem:
        """The item of an :meth:`Answer.to_dict` view's ``memories``."""
        stamp = data.get("timestamp")
        return cls(str(data["session_id"]), str(data["text"]), datetime.fromisoformat(stamp) if stamp else None)


def items_from_hits(hits: Iterable[Hit]) -> list[MemoryItem]:
    """One item per retrieved session: its best turns in conversation order (relevance order kept)."""
    return [MemoryItem(h.session_id, "\n".join(t.text for t in sorted(h.turns, key=lambda t: t.index)), h.timestamp)
            for h in hits]


def items_from_sessions(sessions: Iterable[Session]) -> list[MemoryItem]:
    """One item per session, with its whole text."""
    return [MemoryItem(s.session_id, s.text, s.timestamp) for s in sessions]
