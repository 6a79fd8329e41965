"""Plain data types shared by every layer of memgas, and the input validation.

Nothing here does I/O or imports another memgas module: data flows one way,
``model`` → ``embed``/``llm`` → ``units`` → ``store`` → ``methods`` → ``memory``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Iterable, Literal, Mapping, Sequence

import numpy as np

__all__ = [
    "GRANULARITIES",
    "Granularity",
    "ROLES",
    "MAX_MESSAGE_CHARS",
    "MemgasError",
    "InvalidInputError",
    "DuplicateSessionError",
    "NotFoundError",
    "EmbedderMismatchError",
    "ConvergenceError",
    "Message",
    "Turn",
    "Session",
    "Unit",
    "Edge",
    "TurnHit",
    "Hit",
    "check_id",
    "parse_timestamp",
    "make_session",
    "group_turns",
]

Granularity = Literal["session", "turn", "summary", "keyword"]
#: The four MemGAS granularities, in a fixed order used everywhere (router weights, reports).
GRANULARITIES: tuple[Granularity, ...] = ("session", "turn", "summary", "keyword")
#: Roles a message may have. A turn starts at each ``user`` message.
ROLES: frozenset[str] = frozenset({"user", "assistant", "system"})
#: Longest accepted message, in characters. Longer input is almost always a paste error
#: (a file, a log); the real benchmarks' longest message is ~77k characters.
MAX_MESSAGE_CHARS = 200_000

_ID_RE = re.compile(r"^[\w.:@/+-]{1,256}$")


class MemgasError(Exception):
    """Base class of every error memgas raises on purpose."""


class InvalidInputError(MemgasError, ValueError):
    """The caller passed data memgas cannot store or use; nothing was written."""


class DuplicateSessionError(InvalidInputError):
    """A session with this id already exists for this user."""


class NotFoundError(MemgasError, KeyError):
    """The user, session or unit asked for does not exist."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else "not found"


class EmbedderMismatchError(MemgasError):
    """A store holds vectors of one embedder and was opened with another."""


class ConvergenceError(MemgasError, RuntimeError):
    """An iterative kernel (PageRank, EM) did not converge within its budget."""


@dataclass(frozen=True, slots=True)
class Message:
    """One message of a conversation. ``name`` is the speaker's name when known."""

    role: str
    content: str
    name: str | None = None


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
        return "\n".join(f"{m.name or m.role}: {m.content}" for m in self.messages)

    @property
    def user_text(self) -> str:
        """Only the user-side messages' content (what LongMemEval indexes)."""
        return "\n".join(m.content for m in self.messages if m.role == "user")


@dataclass(frozen=True, slots=True)
class Session:
    """A validated conversation session, owned by one user."""

    user_id: str
    session_id: str
    messages: tuple[Message, ...]
    timestamp: datetime | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @property
    def turns(self) -> tuple[Turn, ...]:
        """The session cut into turns (see :func:`group_turns`)."""
        return group_turns(self.messages)

    @property
    def text(self) -> str:
        """The whole session as text."""
        return "\n".join(t.text for t in self.turns)


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


@dataclass(slots=True)
class Hit:
    """One retrieved session, with the evidence of why it was retrieved.

    ``weights`` are the router's granularity weights for the query; ``via_association`` is true when
    the session got more score from graph propagation than from its own seed similarity.
    """

    session_id: str
    score: float
    timestamp: datetime | None
    turns: list[TurnHit]
    weights: dict[str, float]
    via_association: bool = False
    seed_score: float = 0.0
    method: str = ""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable view of the hit."""
        return {
            "session_id": self.session_id,
            "score": round(float(self.score), 6),
            "timestamp": self.timestamp.isoformat() if self.timestamp else None,
            "turns": [{"index": t.index, "score": round(float(t.score), 6), "text": t.text} for t in self.turns],
            "weights": {g: round(float(w), 4) for g, w in self.weights.items()},
            "via_association": self.via_association,
            "seed_score": round(float(self.seed_score), 6),
            "method": self.method,
        }


_TS_FORMATS = (
    "%Y/%m/%d (%a) %H:%M",  # LongMemEval: 2023/05/20 (Sat) 07:47
    "%I:%M %p on %d %B, %Y",  # LoCoMo: 1:56 pm on 8 May, 2023
    "%Y-%m-%d %H:%M",
    "%Y/%m/%d %H:%M",
    "%Y/%m/%d",
)


def parse_timestamp(value: str | datetime | None) -> datetime | None:
    """Parse a timestamp: ISO 8601, or the LongMemEval and LoCoMo formats. ``None`` stays ``None``.

    Naive results are kept naive (the benchmarks' times have no zone); aware ones are converted to UTC.

    Raises:
        InvalidInputError: the value is not a recognised timestamp.
    """
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.astimezone(timezone.utc) if value.tzinfo else value
    if not isinstance(value, str) or not value.strip():
        raise InvalidInputError(f"invalid timestamp {value!r}: expected an ISO 8601 string")
    text = value.strip()
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
        return parsed.astimezone(timezone.utc) if parsed.tzinfo else parsed
    except ValueError:
        pass
    for fmt in _TS_FORMATS:
        try:
            return datetime.strptime(text, fmt)
        except ValueError:
            continue
    raise InvalidInputError(f"invalid timestamp {value!r}: expected ISO 8601, e.g. 2023-05-20T10:00:00")


def check_id(kind: str, value: object) -> str:
    """Return ``value`` if it is a usable user or session id, else raise :class:`InvalidInputError`."""
    if not isinstance(value, str) or not _ID_RE.match(value):
        raise InvalidInputError(
            f"invalid {kind} {value!r}: use 1-256 characters of letters, digits and . : @ / + - _"
        )
    return value


def _message(i: int, raw: object, max_chars: int) -> Message:
    if isinstance(raw, Message):
        raw = {"role": raw.role, "content": raw.content, "name": raw.name}
    if not isinstance(raw, Mapping):
        raise InvalidInputError(f"message {i}: expected a dict with 'role' and 'content', got {type(raw).__name__}")
    role = raw.get("role")
    if role not in ROLES:
        raise InvalidInputError(f"message {i}: unknown role {role!r}; expected one of {sorted(ROLES)}")
    if "content" not in raw or raw["content"] is None:
        raise InvalidInputError(f"message {i}: missing 'content'")
    content = raw["content"]
    if not isinstance(content, str):
        raise InvalidInputError(f"message {i}: 'content' must be a string, got {type(content).__name__}")
    if not content.strip():
        raise InvalidInputError(f"message {i}: 'content' is empty")
    if len(content) > max_chars:
        raise InvalidInputError(
            f"message {i}: {len(content):,} characters is over the limit of {max_chars:,}; split it into several messages"
        )
    name = raw.get("name", raw.get("speaker"))
    if name is not None and not isinstance(name, str):
        raise InvalidInputError(f"message {i}: 'name' must be a string")
    return Message(role=role, content=content, name=name or None)


def make_session(
    messages: Iterable[object],
    *,
    user_id: str,
    session_id: str,
    timestamp: str | datetime | None = None,
    metadata: Mapping[str, Any] | None = None,
    max_message_chars: int = MAX_MESSAGE_CHARS,
) -> Session:
    """Validate raw input (a list of ``{"role", "content"[, "name"]}`` dicts) into a :class:`Session`.

    Raises:
        InvalidInputError: on an empty session, a bad message, a bad id or timestamp.
    """
    check_id("user_id", user_id)
    check_id("session_id", session_id)
    if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Iterable):
        raise InvalidInputError("messages must be a list of {'role', 'content'} dicts")
    msgs = tuple(_message(i, m, max_message_chars) for i, m in enumerate(messages))
    if not msgs:
        raise InvalidInputError(f"session {session_id!r} is empty: it needs at least one message")
    return Session(
        user_id=user_id,
        session_id=session_id,
        messages=msgs,
        timestamp=parse_timestamp(timestamp),
        metadata=dict(metadata or {}),
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
