"""The input validators of ``memgas.core.validate``: each rule with a case just inside and just outside its limit."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from types import MappingProxyType

import numpy as np
import pytest

from memgas.core.errors import InvalidInputError
from memgas.core.validate import (
    MAX_K,
    MAX_METADATA_BYTES,
    MAX_METADATA_DEPTH,
    MAX_QUERY_CHARS,
    MAX_TIMESTAMP,
    MIN_TIMESTAMP,
    check_id,
    check_k,
    check_metadata,
    check_query,
    check_unicode,
    make_session,
    naive_utc,
    parse_timestamp,
)

SURROGATE = "caf\udce9"  # what undecodable bytes become under surrogateescape


def refused(match: str | None = None) -> pytest.RaisesContext[InvalidInputError]:
    return pytest.raises(InvalidInputError, match=match)


def test_errors_are_one_line_and_short() -> None:
    with refused() as e:
        check_id("user_id", "x\n" * 100_000)
    assert "\n" not in str(e.value) and len(str(e.value)) < 200


# -- ids -------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["a", "a" * 256, "alice@example.com", "u/1:2+3-4_5.6", "café"])
def test_id_accepted(value: str) -> None:
    assert check_id("user_id", value) == value


@pytest.mark.parametrize("value", ["", "a" * 257, "alice\n", "\nalice", "a b", "a\x00", 0, 5, False, None, b"ab"])
def test_id_refused(value: object) -> None:
    with refused("invalid user_id"):
        check_id("user_id", value)


# -- unicode, query, k -----------------------------------------------------------------------


def test_unicode() -> None:
    assert check_unicode("x", "emoji 😀 and é") == "emoji 😀 and é"  # a surrogate *pair* is fine
    with refused(r"x is not valid Unicode: a lone surrogate at character 3"):
        check_unicode("x", SURROGATE)


def test_query_limits() -> None:
    assert check_query("q" * MAX_QUERY_CHARS) == "q" * MAX_QUERY_CHARS
    with refused("over the limit of 10,000"):
        check_query("q" * (MAX_QUERY_CHARS + 1))
    for bad in ("", " \n\t", None, 3, ["what"]):
        with refused("non-empty string"):
            check_query(bad)
    with refused("not valid Unicode"):
        check_query(SURROGATE)


def test_k_limits() -> None:
    assert check_k(1) == 1 and check_k(MAX_K) == MAX_K
    assert check_k(np.int64(3)) == 3 and type(check_k(np.int64(3))) is int
    for bad in (0, -1, MAX_K + 1, True, False, 2.0, "3", None):
        with refused("k must be an integer from 1 to 1,000"):
            check_k(bad)


# -- timestamps ------------------------------------------------------------------------------


def test_timestamp_range_naive() -> None:
    assert parse_timestamp("1000-01-01T00:00:00") == MIN_TIMESTAMP
    assert parse_timestamp(MAX_TIMESTAMP) == MAX_TIMESTAMP
    assert parse_timestamp("2023/05/20 (Sat) 07:47") == datetime(2023, 5, 20, 7, 47)  # LongMemEval
    for bad in ("0999-12-31T23:59:59.999999", "9000-01-01T00:00:00", "0001-01-01", MAX_TIMESTAMP + timedelta(microseconds=1)):
        with refused("out of range: accepted from 1000-01-01 to 8999-12-31"):
            parse_timestamp(bad)


def test_timestamp_range_aware_is_checked_in_utc() -> None:
    t = parse_timestamp("1000-01-01T05:00:00+05:00")
    assert t == MIN_TIMESTAMP.replace(tzinfo=timezone.utc) and t.tzinfo is not None  # kept aware, in UTC
    assert parse_timestamp("2023-05-20T10:00:00Z") == datetime(2023, 5, 20, 10, tzinfo=timezone.utc)
    for bad in ("1000-01-01T04:59:59+05:00", "8999-12-31T23:00:00-01:00",
                "0001-01-01T00:00:00+05:00", "9999-12-31T23:59:59-05:00"):  # the last two overflowed
        with refused("out of range"):
            parse_timestamp(bad)


@pytest.mark.parametrize("bad", ["", "  ", "next tuesday", SURROGATE, "2023-05-20T10:00:00" + "\udc80", 20230520, [2023]])
def test_timestamp_not_recognised(bad: object) -> None:
    with refused("invalid timestamp"):
        parse_timestamp(bad)


def test_naive_utc() -> None:
    assert naive_utc(datetime(2023, 5, 20, 12)) == datetime(2023, 5, 20, 12)
    tz = timezone(timedelta(hours=2))
    assert naive_utc(datetime(2023, 5, 20, 1, tzinfo=tz)) == datetime(2023, 5, 19, 23)
    with refused("outside the representable range"):
        naive_utc(datetime(1, 1, 1, tzinfo=tz))


# -- metadata --------------------------------------------------------------------------------


def _nested(depth: int) -> dict:
    value: dict = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


def test_metadata_depth() -> None:
    assert check_metadata(_nested(MAX_METADATA_DEPTH)) == _nested(MAX_METADATA_DEPTH)
    with refused("nested deeper than 32 levels"):
        check_metadata(_nested(MAX_METADATA_DEPTH + 1))
    with refused("nested deeper"):
        check_metadata(_nested(5_000))  # no RecursionError
    lists: object = [1]
    for _ in range(MAX_METADATA_DEPTH - 2):
        lists = [lists]
    assert check_metadata({"l": lists})["l"] == lists  # lists count as levels too: 32 in all
    with refused("nested deeper"):
        check_metadata({"l": [lists]})


def test_metadata_size() -> None:
    # '{"a": "' + n characters + '"}' is n + 9 bytes of JSON
    assert check_metadata({"a": "x" * (MAX_METADATA_BYTES - 9)})
    with refused("65,537 bytes as JSON is over the limit of 65,536"):
        check_metadata({"a": "x" * (MAX_METADATA_BYTES - 8)})
    with refused("over the limit"):  # counted in UTF-8 bytes, not characters
        check_metadata({"a": "é" * (MAX_METADATA_BYTES // 2)})


def test_metadata_numbers() -> None:
    ok = {"max": 2**63 - 1, "min": -(2**63), "big": 1e308, "np": np.float32(0.5), "npi": np.int64(7), "t": True}
    clean = check_metadata(ok)
    assert clean == {"max": 2**63 - 1, "min": -(2**63), "big": 1e308, "np": 0.5, "npi": 7, "t": True}
    assert type(clean["npi"]) is int and type(clean["np"]) is float and clean["t"] is True
    for bad in (2**63, -(2**63) - 1):
        with refused("does not fit in 64 bits"):
            check_metadata({"n": bad})
    for bad in (float("nan"), float("inf"), -float("inf"), np.float64("nan")):
        with refused("not a finite number"):
            check_metadata({"x": [1, bad]})


@pytest.mark.parametrize("bad", [[("a", 1)], {"a", "b"}, "ab", ("a",), 3, b"{}"])
def test_metadata_must_be_an_object(bad: object) -> None:
    with refused("metadata must be a JSON object"):
        check_metadata(bad)


@pytest.mark.parametrize("bad,needle", [
    ({1: "a"}, "key 1 is not a string"),
    ({"a": {(1, 2): "b"}}, r"metadata\['a'\]: key"),
    ({"a": {1, 2}}, "set is not a JSON value"),
    ({"a": b"bytes"}, "bytes is not a JSON value"),
    ({"a": datetime(2023, 1, 1)}, "datetime is not a JSON value"),
    ({"a": 1j}, "complex is not a JSON value"),
    ({SURROGATE: 1}, "metadata key is not valid Unicode"),
    ({"a": ["ok", SURROGATE]}, r"metadata\['a'\]\[1\] is not valid Unicode"),
])
def test_metadata_values(bad: dict, needle: str) -> None:
    with refused(needle):
        check_metadata(bad)


def test_metadata_is_copied_to_plain_json() -> None:
    inner = {"tags": ("a", "b"), "list": [1]}
    clean = check_metadata(MappingProxyType({"x": inner, "none": None}))
    assert clean == {"x": {"tags": ("a", "b"), "list": [1]}, "none": None} and type(clean) is dict
    assert json.loads(json.dumps(clean, allow_nan=False)) == {"x": {"tags": ["a", "b"], "list": [1]}, "none": None}
    inner["list"].append(2)
    assert clean["x"]["list"] == [1]  # a copy, not a view of the caller's objects
    assert check_metadata(None) == {}


# -- sessions --------------------------------------------------------------------------------


@pytest.mark.parametrize("message,needle", [
    ({"role": "user", "content": SURROGATE}, "message 0: 'content' is not valid Unicode"),
    ({"role": "user", "content": "hi", "name": SURROGATE}, "message 0: 'name' is not valid Unicode"),
    ({"role": "user", "content": "hi", "name": ""}, "message 0: 'name' is empty"),  # whose line would say no one's
    ({"role": "user", "content": "hi", "speaker": "  "}, "message 0: 'name' is empty"),
    ({"role": ["user"], "content": "hi"}, "unknown role"),  # unhashable: was a TypeError
    ({"role": "user", "content": "x" * 2_000_001}, "over the limit of 2,000,000"),
])
def test_make_session_refuses(message: dict, needle: str) -> None:
    with refused(needle):
        make_session([message], user_id="u", session_id="s")


def test_make_session_keeps_valid_input() -> None:
    s = make_session([{"role": "user", "content": "x" * 2_000_000, "name": "Ann"}], user_id="u", session_id="s",
                     timestamp="2023-05-20T10:00:00+02:00", metadata={"a": [1, 2.5, None]})
    assert s.messages[0].name == "Ann" and s.metadata == {"a": [1, 2.5, None]}
    assert s.timestamp == datetime(2023, 5, 20, 8, tzinfo=timezone.utc)
    with refused("metadata must be a JSON object"):
        make_session([{"role": "user", "content": "hi"}], user_id="u", session_id="s", metadata=[])
