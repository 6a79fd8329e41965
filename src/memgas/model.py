"""Plain data types shared by every layer of memgas, and the input validation.

Nothing here does I/O or imports another memgas module: data flows one way,
``model`` → ``embed``/``llm`` → ``units`` → ``store`` → ``methods`` → ``memory``.
"""

from __future__ import annotations

import json
import math
import numbers
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
    "MAX_QUERY_CHARS",
    "MAX_K",
    "MAX_METADATA_DEPTH",
    "MAX_METADATA_BYTES",
    "MIN_TIMESTAMP",
    "MAX_TIMESTAMP",
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
    "check_unicode",
    "check_query",
    "check_k",
    "check_metadata",
    "naive_utc",
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
#: Longest accepted search query, in characters. A query is a question, not a document: the
#: embedder reads only its first few hundred tokens, and the lexical channel's cost grows with it.
MAX_QUERY_CHARS = 10_000
#: Most sessions one search may return.
MAX_K = 1_000
#: Deepest accepted nesting of session metadata (the top-level object is level 1).
MAX_METADATA_DEPTH = 32
#: Largest accepted session metadata, in bytes of its UTF-8 JSON. Metadata is tags and references;
#: what was said belongs in the messages.
MAX_METADATA_BYTES = 65_536
#: Earliest and latest accepted timestamps (naive UTC, both inclusive). The margin of about a
#: millennium on each side of ``datetime``'s years 1-9999 keeps the windows computed around them
#: ("three years ago", a window widened by its own length) representable.
MIN_TIMESTAMP = datetime(1000, 1, 1)
MAX_TIMESTAMP = datetime(8999, 12, 31, 23, 59, 59, 999999)

#: One character of a user or session id (letters, digits and ``. : @ / + - _``); ids are 1-256 of them.
ID_CHAR = r"[\w.:@/+-]"
_ID_RE = re.compile(ID_CHAR + "{1,256}")
# Integers beyond 64 bits are not held exactly by SQLite's JSON functions nor by most JSON readers.
_INT_LIMIT = 2**63


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


class AuthError(MemgasError):
    """A service call without an API key, or with a malformed, unknown or revoked one (HTTP 401)."""


class ForbiddenError(MemgasError):
    """A service call the API key's scope does not allow (HTTP 403)."""


class RateLimitedError(MemgasError):
    """A service call over the API key's request rate (HTTP 429); ``retry_after`` is in seconds."""

    def __init__(self, message: str, retry_after: float = 1.0) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class UnavailableError(MemgasError):
    """The service cannot serve the call now (HTTP 503): its store is unreachable, or no LLM is configured."""


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
    the same in every search (see ``min_score`` of ``Memory.search``).
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
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Hit:
        """The hit of a :meth:`to_dict` view (as the REST API returns it); the timestamp becomes a datetime again."""
        stamp = data.get("timestamp")
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
        )


_TS_FORMATS = (
    "%Y/%m/%d (%a) %H:%M",  # LongMemEval: 2023/05/20 (Sat) 07:47
    "%I:%M %p on %d %B, %Y",  # LoCoMo: 1:56 pm on 8 May, 2023
    "%Y-%m-%d %H:%M",
    "%Y/%m/%d %H:%M",
    "%Y/%m/%d",
)


def _show(value: object, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters, for one-line error messages about arbitrary input."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def check_unicode(what: str, value: str) -> str:
    """Return ``value`` if it can be encoded as UTF-8 (no lone surrogate), else raise.

    Raises:
        InvalidInputError: ``value`` holds a lone surrogate (e.g. from undecodable bytes).
    """
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise InvalidInputError(f"{what} is not valid Unicode: a lone surrogate at character {e.start}") from None
    return value


def naive_utc(t: datetime) -> datetime:
    """The instant ``t`` as a naive UTC datetime: aware ones are converted, naive ones are taken as UTC.

    Every comparison between times inside memgas is made this way; stored timestamps keep their zone
    for display.

    Raises:
        InvalidInputError: the converted time falls outside ``datetime``'s range.
    """
    if t.tzinfo is None:
        return t
    try:
        return t.astimezone(timezone.utc).replace(tzinfo=None)
    except OverflowError:
        raise InvalidInputError(f"timestamp {t.isoformat()} is outside the representable range in UTC") from None


def parse_timestamp(value: str | datetime | None) -> datetime | None:
    """Parse a timestamp: ISO 8601, or the LongMemEval and LoCoMo formats. ``None`` stays ``None``.

    Naive results are kept naive (the benchmarks' times have no zone, and are read as UTC); aware
    ones are converted to UTC and stay aware. Accepted times lie from :data:`MIN_TIMESTAMP` to
    :data:`MAX_TIMESTAMP` (years 1000 to 8999) in UTC.

    Raises:
        InvalidInputError: the value is not a recognised timestamp, or lies outside that range.
    """
    if value is None:
        return None
    if isinstance(value, datetime):
        parsed = value
    elif not isinstance(value, str) or not value.strip():
        raise InvalidInputError(f"invalid timestamp {_show(value)}: expected an ISO 8601 string")
    else:
        parsed = _parse_text_timestamp(value)
    try:
        utc: datetime | None = naive_utc(parsed)
    except InvalidInputError:  # past datetime's own range once in UTC: out of ours too
        utc = None
    if utc is None or not MIN_TIMESTAMP <= utc <= MAX_TIMESTAMP:
        raise InvalidInputError(
            f"timestamp {_show(value)} is out of range: accepted from {MIN_TIMESTAMP:%Y-%m-%d} "
            f"to {MAX_TIMESTAMP:%Y-%m-%d} (UTC)"
        )
    return utc.replace(tzinfo=timezone.utc) if parsed.tzinfo is not None else parsed


def _parse_text_timestamp(value: str) -> datetime:
    text = value.strip()
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:  # UnicodeEncodeError (a surrogate) is a ValueError too
        pass
    for fmt in _TS_FORMATS:
        try:
            return datetime.strptime(text, fmt)
        except ValueError:
            continue
    raise InvalidInputError(f"invalid timestamp {_show(value)}: expected ISO 8601, e.g. 2023-05-20T10:00:00")


def check_id(kind: str, value: object) -> str:
    """Return ``value`` if it is a usable user or session id, else raise :class:`InvalidInputError`.

    An id is 1-256 characters of letters, digits and ``. : @ / + - _``, the whole string (no
    trailing newline).
    """
    if not isinstance(value, str) or not _ID_RE.fullmatch(value):
        raise InvalidInputError(
            f"invalid {kind} {_show(value)}: use 1-256 characters of letters, digits and . : @ / + - _"
        )
    return value


def check_query(query: object) -> str:
    """Return ``query`` if it is a usable search query: a non-blank string of valid Unicode of at most
    :data:`MAX_QUERY_CHARS` characters.

    Raises:
        InvalidInputError: otherwise.
    """
    if not isinstance(query, str) or not query.strip():
        raise InvalidInputError("query must be a non-empty string")
    if len(query) > MAX_QUERY_CHARS:
        raise InvalidInputError(f"query of {len(query):,} characters is over the limit of {MAX_QUERY_CHARS:,}")
    return check_unicode("query", query)


def check_k(k: object) -> int:
    """Return ``k`` as an int if it is an integer (not a bool) from 1 to :data:`MAX_K`.

    Raises:
        InvalidInputError: otherwise.
    """
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or not 1 <= k <= MAX_K:
        raise InvalidInputError(f"k must be an integer from 1 to {MAX_K:,}, got {_show(k)}")
    return int(k)


def check_metadata(value: object) -> dict[str, Any]:
    """Validate session metadata into a plain JSON object (``None`` is an empty one).

    Metadata must be a mapping with string keys whose values are JSON-safe: strings (valid
    Unicode), integers within 64 bits, finite floats, booleans, ``None``, lists/tuples and mappings
    of the same, nested at most :data:`MAX_METADATA_DEPTH` levels, and at most
    :data:`MAX_METADATA_BYTES` bytes as UTF-8 JSON.

    Returns:
        A copy made of ``dict``, ``list``, ``tuple`` and scalars, which ``json.dumps`` writes as
        standard JSON (a tuple comes back from the store as a list).

    Raises:
        InvalidInputError: any rule is broken; the message names where.
    """
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidInputError(
            f"metadata must be a JSON object (a dict with string keys), got {type(value).__name__}"
        )
    clean = _json_value(value, "metadata", 1)
    size = len(json.dumps(clean, ensure_ascii=False, allow_nan=False).encode("utf-8"))
    if size > MAX_METADATA_BYTES:
        raise InvalidInputError(f"metadata of {size:,} bytes as JSON is over the limit of {MAX_METADATA_BYTES:,}")
    return clean


def _json_value(value: object, where: str, depth: int) -> Any:
    """A JSON-safe copy of ``value`` (at nesting ``depth``, named ``where`` in errors), or raise."""
    if isinstance(value, str):
        return check_unicode(where, value)
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, numbers.Integral):
        if not -_INT_LIMIT <= value < _INT_LIMIT:
            raise InvalidInputError(f"{where}: integer {_show(value)} does not fit in 64 bits")
        return int(value)
    if isinstance(value, numbers.Real):
        if not math.isfinite(value):
            raise InvalidInputError(f"{where}: {value} is not a finite number (JSON has no NaN or infinity)")
        return float(value)
    if not isinstance(value, (Mapping, list, tuple)):
        raise InvalidInputError(f"{where}: {type(value).__name__} is not a JSON value")
    if depth > MAX_METADATA_DEPTH:
        raise InvalidInputError(f"metadata is nested deeper than {MAX_METADATA_DEPTH} levels")
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidInputError(f"{where}: key {_show(key)} is not a string")
            check_unicode(f"{where} key", key)
            out[key] = _json_value(item, f"{where}[{_show(key, 30)}]", depth + 1)
        return out
    items = [_json_value(item, f"{where}[{i}]", depth + 1) for i, item in enumerate(value)]
    return tuple(items) if isinstance(value, tuple) else items  # in memory as given; JSON writes both as arrays


def _message(i: int, raw: object, max_chars: int) -> Message:
    if isinstance(raw, Message):
        raw = {"role": raw.role, "content": raw.content, "name": raw.name}
    if not isinstance(raw, Mapping):
        raise InvalidInputError(f"message {i}: expected a dict with 'role' and 'content', got {type(raw).__name__}")
    role = raw.get("role")
    if not isinstance(role, str) or role not in ROLES:
        raise InvalidInputError(f"message {i}: unknown role {_show(role)}; expected one of {sorted(ROLES)}")
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
    check_unicode(f"message {i}: 'content'", content)
    name = raw.get("name", raw.get("speaker"))
    if name is not None and not isinstance(name, str):
        raise InvalidInputError(f"message {i}: 'name' must be a string")
    if name:
        check_unicode(f"message {i}: 'name'", name)
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
        InvalidInputError: on an empty session, a bad message, a bad id, timestamp or metadata
            (see :func:`check_id`, :func:`parse_timestamp`, :func:`check_metadata`).
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
        metadata=check_metadata(metadata),
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
