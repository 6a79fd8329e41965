"""Validation of what callers hand in: ids, queries, ``k``, timestamps, metadata and messages,
with the limits that bound them; :func:`make_session` turns raw input into a :class:`~memgas.core.types.Session`.
"""

from __future__ import annotations

import json
import math
import numbers
import re
from datetime import datetime, timezone
from typing import Any, Iterable, Mapping

from memgas.core.errors import InvalidInputError
from memgas.core.transcripts import to_messages
from memgas.core.types import ROLES, Message, Session

__all__ = [
    "ID_CHAR", "MAX_MESSAGE_CHARS", "INDEXED_MESSAGE_CHARS", "MAX_QUERY_CHARS", "MAX_K", "MAX_METADATA_DEPTH", "MAX_METADATA_BYTES",
    "MIN_TIMESTAMP", "MAX_TIMESTAMP", "check_id", "check_unicode", "check_query", "check_k", "check_count",
    "check_metadata", "session_expiry", "TENANT_SEPARATOR", "TENANT_NAME", "naive_utc", "parse_timestamp", "make_session",
]

#: Between a tenant's name and its user's id in a stored user id (``acme::alice``; tenant names cannot hold it).
TENANT_SEPARATOR = "::"
#: A tenant's name: 1-64 of ``a-z 0-9 _ -``, starting with a letter or digit.
TENANT_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")

#: Longest accepted message, in characters (2 MB of ASCII, a quarter of a request body's default limit). A pasted
#: log or document is ordinary in agent conversations (BEAM holds a 348,853-character reply): it is stored whole, and
#: the embedder reads at most :data:`INDEXED_MESSAGE_CHARS` of it (every word stays in the lexical index).
MAX_MESSAGE_CHARS = 2_000_000
#: The most of one message the embedder reads: the bound on the work an add does, not on what is kept.
INDEXED_MESSAGE_CHARS = 200_000
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
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or not 1 <= int(k) <= MAX_K:
        raise InvalidInputError(f"k must be an integer from 1 to {MAX_K:,}, got {_show(k)}")
    return int(k)


def check_count(kind: str, value: object, most: int) -> int:
    """Return ``value`` if it is an ``int`` (not a bool) from 1 to ``most``, else raise :class:`InvalidInputError`
    naming ``kind`` (a page size, a token budget, ...)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
        raise InvalidInputError(f"{kind} must be an integer from 1 to {most:,}, got {value!r}")
    return value


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
    clean: dict[str, Any] = _json_value(value, "metadata", 1)
    _check_participants(clean.get("participants"))
    if "expires_at" in clean:
        session_expiry(clean)
    size = len(json.dumps(clean, ensure_ascii=False, allow_nan=False).encode("utf-8"))
    if size > MAX_METADATA_BYTES:
        raise InvalidInputError(f"metadata of {size:,} bytes as JSON is over the limit of {MAX_METADATA_BYTES:,}")
    return clean


def session_expiry(metadata: Mapping[str, Any]) -> datetime | None:
    """When a session expires: its metadata's ``expires_at`` (an ISO 8601 time, read as UTC without a zone), as naive
    UTC; ``None`` without one. From then on the session is never read, and ``Memory.expire`` deletes it.

    >>> session_expiry({"expires_at": "2027-01-01T12:00:00+02:00"})
    datetime.datetime(2027, 1, 1, 10, 0)

    Raises:
        InvalidInputError: ``expires_at`` is not an ISO 8601 time.
    """
    value = metadata.get("expires_at")
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidInputError(f"metadata.expires_at must be an ISO 8601 time, got {type(value).__name__}")
    try:
        parsed = parse_timestamp(value)
        assert parsed is not None  # a string
        return naive_utc(parsed)
    except InvalidInputError as exc:
        raise InvalidInputError(f"metadata.expires_at: {exc}") from None


def _check_participants(value: object) -> None:
    """``metadata["participants"]``, where given: who takes part in the session (:mod:`memgas.kernels.people`), a
    list of the people's names or an object of names to ``"person"`` or ``"agent"``."""
    if value is None:
        return
    if isinstance(value, Mapping):
        for name, kind in value.items():
            if not name.strip() or kind not in ("person", "agent"):
                raise InvalidInputError(f"metadata.participants[{name!r}] must be 'person' or 'agent' under a "
                                        f"non-blank name, got {kind!r}")
    elif isinstance(value, (list, tuple)):
        if not all(isinstance(n, str) and n.strip() for n in value):
            raise InvalidInputError("metadata.participants must list the people's names as non-blank strings")
    else:
        raise InvalidInputError(f"metadata.participants must be a list of names or an object of names to 'person' "
                                f"or 'agent', got {type(value).__name__}")


def _json_value(value: object, where: str, depth: int) -> Any:
    """A JSON-safe copy of ``value`` (at nesting ``depth``, named ``where`` in errors), or raise."""
    if isinstance(value, str):
        return check_unicode(where, value)
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, numbers.Integral):
        if not -_INT_LIMIT <= int(value) < _INT_LIMIT:
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
        raw = {"role": raw.role, "content": raw.content, "name": raw.name, "metadata": raw.metadata}
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
    if name is not None and not name.strip():  # a speaker whose line would say whose it is, and says nothing
        raise InvalidInputError(f"message {i}: 'name' is empty; give the speaker's name or leave it out")
    if name:
        check_unicode(f"message {i}: 'name'", name)
    metadata = raw.get("metadata")
    if metadata is not None:
        try:
            metadata = check_metadata(metadata)
        except InvalidInputError as e:
            raise InvalidInputError(f"message {i}: {e}") from None
    return Message(role=role, content=content, name=name or None, metadata=metadata or None)


def make_session(
    messages: object,
    *,
    user_id: str,
    session_id: str,
    timestamp: str | datetime | None = None,
    metadata: Mapping[str, Any] | None = None,
    agent_id: str | None = None,
    run_id: str | None = None,
    max_message_chars: int = MAX_MESSAGE_CHARS,
) -> Session:
    """Validate raw input into a :class:`Session`: a list of ``{"role", "content"[, "name"][, "metadata"]}``
    dicts, or any transcript :func:`memgas.core.transcripts.to_messages` reads (OpenAI or Anthropic messages, a
    plain string). ``agent_id`` and ``run_id`` are optional ids of the same form as ``user_id``.

    Raises:
        InvalidInputError: on an empty session, a bad message, a bad id, timestamp or metadata
            (see :func:`check_id`, :func:`parse_timestamp`, :func:`check_metadata`).
    """
    check_id("user_id", user_id)
    check_id("session_id", session_id)
    for kind, value in (("agent_id", agent_id), ("run_id", run_id)):
        if value is not None:
            check_id(kind, value)
    messages = to_messages(messages)
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
        agent_id=agent_id,
        run_id=run_id,
    )
