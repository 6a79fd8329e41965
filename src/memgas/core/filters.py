"""The filter language of ``search``, ``context``, ``list`` and ``delete``: which of a user's sessions a call sees.

A filter is a JSON object. Each key is a field with a condition, or a logical operator; the keys of one object
must all hold (an implicit ``$and``)::

    {"agent_id": "planner"}                                  equality
    {"project": {"$in": ["apollo", "gemini"]}}               one of
    {"priority": {"$gte": 2, "$lt": 5}}                      numbers (and times) compared
    {"timestamp": {"$gte": "2026-03-01"}}                    times: ISO 8601, read as UTC like every timestamp
    {"$or": [{"run_id": "r1"}, {"tags.team": "core"}]}       any of
    {"$not": {"project": "apollo"}}                          none of

Fields: ``session_id``, ``timestamp`` (when the session happened), ``created_at`` (when it was stored),
``agent_id``, ``run_id``; any other name is a key of the session's metadata, a dotted name a path into nested
objects and lists (``"tags.team"`` reads ``metadata["tags"]["team"]``, ``"path.0"`` the first item of a list,
unless the metadata has the key ``"tags.team"`` itself, which is read first); ``metadata.NAME`` reaches a metadata key
that shares a field's name.

Operators on a field: ``$eq`` (what a bare value means), ``$ne``, ``$in`` and ``$nin`` (a list of values),
``$gt``, ``$gte``, ``$lt``, ``$lte`` (numbers, or times on ``timestamp`` and ``created_at``), ``$exists``
(``true``/``false``). Logical: ``$and`` and ``$or`` (a non-empty list of filters), ``$not`` (a filter).

A session without the field (a metadata key it does not have, no ``agent_id``) matches no condition on it but
``{"$eq": null}``, ``{"$in": [..., null]}`` and ``{"$exists": false}``: an unknown key matches nothing rather
than erroring, and ``$ne``/``$nin`` only match sessions that have the field (``$not`` matches the others too).
Values compare by JSON type: ``true`` never equals ``1``; a number equals the same number as an integer or a
float; strings compare only by equality. A malformed filter raises :class:`InvalidInputError` naming the
offending part (``filters.$or[1].timestamp.$gt: ...``).

>>> from types import SimpleNamespace as S
>>> f = compile_filter({"project": "apollo", "priority": {"$gte": 2}})
>>> f.matches(S(session_id="s1", timestamp=None, created_at=None, agent_id=None, run_id=None,
...             metadata={"project": "apollo", "priority": 3}))
True
>>> compile_filter({"priority": {"$gt": "high"}})
Traceback (most recent call last):
...
memgas.core.errors.InvalidInputError: filters.priority.$gt: expected a number, got 'high'
"""

from __future__ import annotations

import numbers
import re
from datetime import datetime
from typing import Any, Callable, Mapping, Protocol

from memgas.core.errors import InvalidInputError
from memgas.core.validate import naive_utc, parse_timestamp

__all__ = ["Filter", "compile_filter", "FIELDS", "SessionFields"]

#: The session fields a filter names directly; every other name is a metadata key.
FIELDS = ("session_id", "timestamp", "created_at", "agent_id", "run_id")
_TIMES = frozenset({"timestamp", "created_at"})
_ORDER = {"$gt": lambda a, b: a > b, "$gte": lambda a, b: a >= b, "$lt": lambda a, b: a < b,
          "$lte": lambda a, b: a <= b}
_OPERATORS = ("$eq", "$ne", "$in", "$nin", "$exists", *_ORDER)
#: Most conditions (fields, operators, list items) one filter may hold: a filter selects, it is not a program.
MAX_FILTER_NODES = 1_000
#: How deep ``$and``/``$or``/``$not`` may nest (checked before recursing: a filter never exhausts the stack).
MAX_FILTER_DEPTH = 32
#: A metadata path step that indexes a list: ASCII decimal digits, at most 9 (``"²"`` or 5,000 digits is a key).
_INDEX = re.compile(r"[0-9]{1,9}")
_MISSING = object()


class SessionFields(Protocol):
    """What a filter reads of a session (a :class:`memgas.store.SessionInfo` has it all)."""

    @property
    def session_id(self) -> str: ...

    @property
    def timestamp(self) -> datetime | None: ...

    @property
    def created_at(self) -> datetime | None: ...

    @property
    def agent_id(self) -> str | None: ...

    @property
    def run_id(self) -> str | None: ...

    @property
    def metadata(self) -> Mapping[str, Any]: ...


Test = Callable[[SessionFields], bool]


class Filter:
    """A compiled filter (:func:`compile_filter`): ``matches(session)`` says whether the session passes."""

    __slots__ = ("spec", "_test")

    def __init__(self, spec: Mapping[str, Any], test: Test) -> None:
        self.spec = spec
        self._test = test

    def matches(self, session: SessionFields) -> bool:
        """Whether ``session`` passes the filter."""
        return self._test(session)

    def __repr__(self) -> str:
        return f"Filter({self.spec!r})"


def compile_filter(spec: object) -> Filter:
    """Check a filter (see the module docstring) and compile it.

    Raises:
        InvalidInputError: a filter that is not an object, an unknown operator, an operand of the wrong type, an
            empty ``$and``/``$or``, or more than :data:`MAX_FILTER_NODES` conditions; the message names where.
    """
    budget = [MAX_FILTER_NODES]
    return Filter(spec, _object(spec, "filters", budget, 0))  # type: ignore[arg-type]


def _spend(budget: list[int], where: str, n: int = 1) -> None:
    budget[0] -= n
    if budget[0] < 0:
        raise InvalidInputError(f"{where}: the filter holds more than {MAX_FILTER_NODES:,} conditions")


def _object(spec: object, where: str, budget: list[int], depth: int) -> Test:
    if depth > MAX_FILTER_DEPTH:
        raise InvalidInputError(f"{where}: $and, $or and $not nest at most {MAX_FILTER_DEPTH} deep")
    if not isinstance(spec, Mapping):
        raise InvalidInputError(f"{where}: a filter is a JSON object, got {_kind(spec)}")
    tests: list[Test] = []
    for key, value in spec.items():
        if not isinstance(key, str) or not key:
            raise InvalidInputError(f"{where}: keys are non-empty strings, got {key!r}")
        here = f"{where}.{key}"
        _spend(budget, here)
        if key in ("$and", "$or"):
            if not isinstance(value, list) or not value:
                raise InvalidInputError(f"{here}: expected a non-empty list of filters, got {_kind(value)}")
            parts = [_object(v, f"{here}[{i}]", budget, depth + 1) for i, v in enumerate(value)]
            tests.append(_all(parts) if key == "$and" else _any(parts))
        elif key == "$not":
            inner = _object(value, here, budget, depth + 1)
            tests.append(_negated(inner))
        elif key.startswith("$"):
            raise InvalidInputError(f"{here}: unknown operator; at the top of a filter use $and, $or or $not")
        else:
            tests.append(_field(key, value, here, budget))
    return _all(tests)


def _all(tests: list[Test]) -> Test:
    if len(tests) == 1:
        return tests[0]
    return lambda s: all(t(s) for t in tests)


def _any(tests: list[Test]) -> Test:
    return lambda s: any(t(s) for t in tests)


def _reader(name: str) -> Callable[[SessionFields], Any]:
    """How to read field ``name`` of a session (``_MISSING`` when it has none)."""
    if name in FIELDS:
        def read(s: SessionFields) -> Any:
            value = getattr(s, name)
            return _MISSING if value is None else value
        return read
    path = name[len("metadata."):] if name.startswith("metadata.") and len(name) > len("metadata.") else name
    steps = path.split(".")

    def read_metadata(s: SessionFields) -> Any:
        data: Any = s.metadata
        if path in data:
            return data[path]
        for step in steps:
            if isinstance(data, Mapping) and step in data:
                data = data[step]
            elif isinstance(data, (list, tuple)) and _INDEX.fullmatch(step) and int(step) < len(data):
                data = data[int(step)]
            else:
                return _MISSING
        return data
    return read_metadata


def _field(name: str, condition: object, where: str, budget: list[int]) -> Test:
    read = _reader(name)
    is_time = name in _TIMES
    if not isinstance(condition, Mapping) or not any(isinstance(k, str) and k.startswith("$") for k in condition):
        condition = {"$eq": condition}
    tests: list[Test] = []
    for op, operand in condition.items():
        here = f"{where}.{op}"
        _spend(budget, here)
        if op not in _OPERATORS:
            raise InvalidInputError(f"{here}: unknown operator; use one of {', '.join(_OPERATORS)}")
        if op == "$exists":
            if not isinstance(operand, bool):
                raise InvalidInputError(f"{here}: expected true or false, got {_kind(operand)}")
            tests.append(_exists(read, operand))
        elif op in ("$eq", "$ne"):
            value = _value(operand, here, is_time)
            same = _equal_to(value)
            tests.append(_matching(read, [same], op == "$eq"))
        elif op in ("$in", "$nin"):
            if not isinstance(operand, list):
                raise InvalidInputError(f"{here}: expected a list of values, got {_kind(operand)}")
            _spend(budget, here, len(operand))
            checks = [_equal_to(_value(v, f"{here}[{i}]", is_time)) for i, v in enumerate(operand)]
            tests.append(_matching(read, checks, op == "$in"))
        else:
            bound = _time(operand, here) if is_time else _number(operand, here)
            tests.append(_ordered(read, _ORDER[op], bound, is_time))
    return _all(tests)


Reader = Callable[[SessionFields], Any]


def _negated(inner: Test) -> Test:
    return lambda s: not inner(s)


def _exists(read: Reader, want: bool) -> Test:
    return lambda s: (read(s) is not _MISSING) == want


def _matching(read: Reader, checks: list[Callable[[Any], bool]], inside: bool) -> Test:
    """``$eq``/``$in`` (``inside``): the field equals one of the values (a missing field is ``None``); ``$ne``/``$nin``:
    it is present, not null, and equals none of them."""
    def test(s: SessionFields) -> bool:
        v = read(s)
        if inside:
            return any(c(v) for c in checks)
        return v is not _MISSING and v is not None and not any(c(v) for c in checks)
    return test


def _ordered(read: Reader, order: Callable[[Any, Any], bool], bound: Any, is_time: bool) -> Test:
    """``$gt``/``$gte``/``$lt``/``$lte`` against ``bound``: a time (compared as naive UTC) or a number."""
    def test(s: SessionFields) -> bool:
        v = read(s)
        if is_time:
            return v is not _MISSING and order(naive_utc(v), bound)
        return _is_number(v) and order(v, bound)
    return test


def _value(operand: object, where: str, is_time: bool) -> Any:
    """An equality operand: a time on a time field, else a JSON scalar (``None`` for "has no value")."""
    if operand is None:
        return None
    if is_time:
        return _time(operand, where)
    if isinstance(operand, (str, bool)) or _is_number(operand):
        return operand
    raise InvalidInputError(f"{where}: expected a string, number, boolean or null, got {_kind(operand)}")


def _equal_to(value: Any) -> Callable[[Any], bool]:
    """A test of a read field against ``value``, by JSON type (``True`` is not ``1``); ``None`` matches a
    missing or null field."""
    if value is None:
        return lambda v: v is _MISSING or v is None
    if isinstance(value, datetime):
        return lambda v: isinstance(v, datetime) and naive_utc(v) == value
    if isinstance(value, bool):
        return lambda v: isinstance(v, bool) and v == value
    if isinstance(value, str):
        return lambda v: isinstance(v, str) and v == value
    return lambda v: _is_number(v) and v == value


def _is_number(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def _number(operand: object, where: str) -> float:
    if not _is_number(operand) or operand != operand:  # NaN compares with nothing
        raise InvalidInputError(f"{where}: expected a number, got {_kind(operand)}")
    return operand  # type: ignore[return-value]


def _time(operand: object, where: str) -> datetime:
    if not isinstance(operand, (str, datetime)):
        raise InvalidInputError(f"{where}: expected a time (ISO 8601), got {_kind(operand)}")
    try:
        parsed = parse_timestamp(operand)
    except InvalidInputError as e:
        raise InvalidInputError(f"{where}: {e}") from None
    assert parsed is not None
    return naive_utc(parsed)


def _kind(value: object) -> str:
    """How an error message shows a wrong operand: short values as they are, others by their type."""
    if isinstance(value, (str, int, float)) and not isinstance(value, bool) and len(repr(value)) <= 40:
        return repr(value)
    return {dict: "an object", list: "a list", bool: "a boolean", type(None): "null"}.get(type(value),
                                                                                         type(value).__name__)
