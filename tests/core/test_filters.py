"""The filter language (memgas.core.filters): each operator, what a session without the field matches, JSON types
compared strictly, dotted paths, times, and errors that name the offending part."""

from __future__ import annotations

from datetime import datetime, timezone
from types import SimpleNamespace
from typing import Any

import pytest

from memgas.core.errors import InvalidInputError
from memgas.core.filters import MAX_FILTER_DEPTH, MAX_FILTER_NODES, compile_filter


def session(sid: str = "s1", *, timestamp: datetime | None = None, agent_id: str | None = None,
            run_id: str | None = None, **metadata: Any) -> SimpleNamespace:
    return SimpleNamespace(session_id=sid, timestamp=timestamp, agent_id=agent_id, run_id=run_id, metadata=metadata,
                           created_at=datetime(2026, 1, 1, tzinfo=timezone.utc))


def passes(spec: Any, s: SimpleNamespace) -> bool:
    return compile_filter(spec).matches(s)


APOLLO = session("a", agent_id="planner", run_id="r1", project="apollo", priority=3, done=True,
                 tags={"team": "core", "level": 2}, path=["a", "b"], timestamp=datetime(2026, 3, 5, 12, 0, tzinfo=timezone.utc))
BARE = session("b")


@pytest.mark.parametrize(("spec", "apollo", "bare"), [
    ({"project": "apollo"}, True, False),
    ({"project": {"$eq": "gemini"}}, False, False),
    ({"project": {"$ne": "gemini"}}, True, False),  # $ne needs the field
    ({"project": {"$in": ["gemini", "apollo"]}}, True, False),
    ({"project": {"$nin": ["gemini"]}}, True, False),
    ({"project": {"$in": ["gemini", None]}}, False, True),  # null in $in: sessions without the field
    ({"project": None}, False, True),
    ({"project": {"$exists": False}}, False, True),
    ({"project": {"$exists": True}}, True, False),
    ({"priority": {"$gte": 3, "$lt": 4}}, True, False),
    ({"priority": {"$gt": 3}}, False, False),
    ({"priority": 3.0}, True, False),  # a number equals the same number as a float
    ({"done": 1}, False, False),  # true is not 1
    ({"done": True}, True, False),
    ({"priority": True}, False, False),
    ({"tags.team": "core"}, True, False),
    ({"tags.level": {"$lte": 2}}, True, False),
    ({"tags.missing.deeper": "x"}, False, False),
    ({"path.1": "b"}, True, False),  # a list by position
    ({"path.2": "c"}, False, False),
    ({"path.x": "a"}, False, False),
    ({"agent_id": "planner", "run_id": "r1"}, True, False),
    ({"agent_id": None}, False, True),
    ({"session_id": {"$in": ["b", "c"]}}, False, True),
    ({"timestamp": {"$gte": "2026-03-01", "$lt": "2026-04-01"}}, True, False),
    ({"timestamp": {"$gt": "2026-03-05T12:00:00+00:00"}}, False, False),
    ({"timestamp": {"$lte": "2026-03-05 07:00-05:00"}}, True, False),  # the same instant in another zone
    ({"created_at": {"$lt": "2026-01-02"}}, True, True),
    ({"$or": [{"project": "gemini"}, {"agent_id": "planner"}]}, True, False),
    ({"$and": [{"project": "apollo"}, {"priority": {"$gt": 5}}]}, False, False),
    ({"$not": {"project": "apollo"}}, False, True),  # $not: the sessions without the field too
    ({"unknown": "x"}, False, False),  # an unknown key matches nothing, no error
    ({}, True, True),
])
def test_each_operator_on_a_session_with_and_without_the_field(spec: Any, apollo: bool, bare: bool) -> None:
    assert (passes(spec, APOLLO), passes(spec, BARE)) == (apollo, bare)


def test_a_dotted_key_held_literally_is_read_first_and_metadata_dot_reaches_a_shadowed_field() -> None:
    s = session(**{"tags.team": "literal", "tags": {"team": "nested"}})
    s.metadata["agent_id"] = "in-metadata"
    assert passes({"tags.team": "literal"}, s) and not passes({"tags.team": "nested"}, s)
    assert passes({"metadata.agent_id": "in-metadata"}, s) and not passes({"agent_id": "in-metadata"}, s)


def test_strings_only_compare_by_equality_and_a_string_field_never_passes_a_number_range() -> None:
    s = session(priority="3")
    assert not passes({"priority": {"$gt": 1}}, s) and not passes({"priority": 3}, s)


@pytest.mark.parametrize(("spec", "where"), [
    ([], "filters: a filter is a JSON object, got a list"),
    ({"priority": {"$gt": "high"}}, "filters.priority.$gt: expected a number, got 'high'"),
    ({"timestamp": {"$gt": 5}}, "filters.timestamp.$gt: expected a time (ISO 8601), got 5"),
    ({"timestamp": {"$gt": "yesterday"}}, "filters.timestamp.$gt: "),
    ({"$or": []}, "filters.$or: expected a non-empty list of filters"),
    ({"$or": [{"a": 1}, {"b": {"$regex": "x"}}]}, "filters.$or[1].b.$regex: unknown operator"),
    ({"$where": "1"}, "filters.$where: unknown operator"),
    ({"a": {"$in": "apollo"}}, "filters.a.$in: expected a list of values"),
    ({"a": {"$in": [["nested"]]}}, "filters.a.$in[0]: expected a string, number, boolean or null"),
    ({"a": {"b": 1}}, "filters.a.$eq: expected a string, number, boolean or null, got an object"),
    ({"a": {"$exists": 1}}, "filters.a.$exists: expected true or false"),
    ({"a": {"$gt": float("nan")}}, "filters.a.$gt: expected a number"),
    ({"$not": [1]}, "filters.$not: a filter is a JSON object"),
    ({"a": {}}, "filters.a.$eq: expected a string, number, boolean or null, got an object"),
])
def test_a_malformed_filter_names_the_offending_part(spec: Any, where: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        compile_filter(spec)
    assert str(caught.value).startswith(where)


def test_a_filter_holds_a_bounded_number_of_conditions() -> None:
    compile_filter({"a": {"$in": list(range(MAX_FILTER_NODES - 2))}})
    with pytest.raises(InvalidInputError, match="more than 1,000 conditions"):
        compile_filter({"a": {"$in": list(range(MAX_FILTER_NODES))}})


def test_a_path_step_is_a_list_index_only_when_it_is_plain_decimal_digits() -> None:
    s = SimpleNamespace(session_id="s", timestamp=None, created_at=None, agent_id=None, run_id=None,
                        metadata={"tags": ["x", "y"], "n": {"²": "sup"}})
    assert compile_filter({"tags.1": "y"}).matches(s)  # type: ignore[arg-type]
    assert compile_filter({"n.²": "sup"}).matches(s)  # a superscript digit names a key, never an index
    assert not compile_filter({"tags.²": "x"}).matches(s)  # type: ignore[arg-type]
    assert not compile_filter({"tags." + "1" * 5000: "x"}).matches(s)  # type: ignore[arg-type]


@pytest.mark.parametrize("op", ["$and", "$or", "$not"])
def test_nesting_is_bounded_before_any_recursion(op: str) -> None:
    def nested(depth: int) -> object:
        spec: object = {"agent_id": "a"}
        for _ in range(depth):
            spec = {op: spec} if op == "$not" else {op: [spec]}
        return spec

    compile_filter(nested(MAX_FILTER_DEPTH))  # the limit itself is allowed
    for depth in (MAX_FILTER_DEPTH + 1, 995):
        with pytest.raises(InvalidInputError, match=f"nest at most {MAX_FILTER_DEPTH} deep"):
            compile_filter(nested(depth))
