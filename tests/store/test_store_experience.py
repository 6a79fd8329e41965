"""The store's experience items, on SQLite and PostgreSQL: scoped, validated, updated, deleted for good."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import numpy as np
import pytest

from memgas.core.errors import InvalidInputError, NotFoundError
from memgas.store import Store, open_store

DIM = 8


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    target = str(tmp_path / "x.db") if request.param == "sqlite" else request.getfixturevalue("pg_url")
    with open_store(target) as s:
        s.bind_embedder("test-embedder", DIM)
        yield s


def unit(i: int) -> np.ndarray:
    v = np.zeros(DIM, dtype=np.float32)
    v[i % DIM] = 1.0
    return v


def test_items_round_trip_per_scope_and_kind(store: Store) -> None:
    a = store.add_experience("agent:solver", "template", "sum digits", {"template": "add them", "n": [1, 2]}, unit(0))
    b = store.add_experience("agent:solver", "pending", "raw", {"solution": "ü ✓"}, None)
    c = store.add_experience("user:alice/1", "template", "other scope", {}, unit(1))
    assert a < b < c
    items = store.list_experiences("agent:solver")
    assert [(i.id, i.kind, i.key) for i in items] == [(a, "template", "sum digits"), (b, "pending", "raw")]
    assert items[0].payload == {"template": "add them", "n": [1, 2]} and items[1].payload == {"solution": "ü ✓"}
    np.testing.assert_array_equal(items[0].vector, unit(0))
    assert items[1].vector is None and items[0].vector.dtype == np.float32
    assert [i.id for i in store.list_experiences("agent:solver", "template")] == [a]
    assert [i.id for i in store.list_experiences("user:alice/1")] == [c]
    assert store.list_experiences("agent:nobody") == []


def test_update_changes_only_what_is_given(store: Store) -> None:
    b = store.add_experience("agent:s", "pending", "raw", {"solution": "x"}, None)
    before = store.list_experiences("agent:s")[0]
    after = store.update_experience("agent:s", b, kind="template", payload={"template": "t"}, vector=unit(2))
    assert (after.kind, after.key, after.payload) == ("template", "raw", {"template": "t"})
    np.testing.assert_array_equal(after.vector, unit(2))
    assert after.created_at == before.created_at and after.updated_at >= before.updated_at
    stored = store.list_experiences("agent:s")
    assert [(i.id, i.kind, i.payload, i.updated_at) for i in stored] == [(b, "template", {"template": "t"},
                                                                          after.updated_at)]
    with pytest.raises(NotFoundError):
        store.update_experience("agent:other", b, key="stolen")  # another scope's id is not found
    assert store.list_experiences("agent:s")[0].key == "raw"


def test_bad_items_are_refused_and_write_nothing(store: Store) -> None:
    bad = [("agent", "template", "k", {}, None), ("team:x", "template", "k", {}, None),
           ("agent:s", "Template", "k", {}, None), ("agent:s", "template", "k\x00", {}, None),
           ("agent:s", "template", "k", ["not", "an", "object"], None),
           ("agent:s", "template", "k", {"x": float("nan")}, None),
           ("agent:s", "template", "k", {}, np.ones(DIM + 1)), ("agent:s", "template", "k", {}, np.full(DIM, np.inf)),
           ("agent:s", "template", "\ud800", {}, None)]
    for args in bad:
        with pytest.raises(InvalidInputError):
            store.add_experience(*args)  # type: ignore[arg-type]
    assert store.list_experiences("agent:s") == []


def test_delete_by_ids_kind_or_all_and_refuse_unknown_ids(store: Store) -> None:
    ids = [store.add_experience("agent:s", kind, f"k{i}", {}, None)
           for i, kind in enumerate(["template", "template", "pending", "principle"])]
    other = store.add_experience("agent:t", "template", "keep", {}, None)
    with pytest.raises(NotFoundError, match="nothing was deleted"):
        store.delete_experiences("agent:s", [ids[0], other])
    assert len(store.list_experiences("agent:s")) == 4
    assert store.delete_experiences("agent:s", [ids[0]]) == 1
    assert store.delete_experiences("agent:s", kind="template") == 1
    assert [i.kind for i in store.list_experiences("agent:s")] == ["pending", "principle"]
    assert store.delete_experiences("agent:s") == 2 and store.list_experiences("agent:s") == []
    assert [i.id for i in store.list_experiences("agent:t")] == [other]
    new = store.add_experience("agent:s", "template", "again", {}, None)
    assert new > max(ids + [other])  # ids are never reused


def test_a_deleted_item_leaves_no_text_in_the_sqlite_file(tmp_path: Path) -> None:
    db = tmp_path / "forget.db"
    with open_store(db) as store:
        i = store.add_experience("agent:s", "template", "SECRET-KEY-TEXT", {"p": "SECRET-PAYLOAD"}, None)
        store.delete_experiences("agent:s", [i])
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("forget.db"))
    assert b"SECRET-KEY-TEXT" not in raw and b"SECRET-PAYLOAD" not in raw


def test_deleting_a_user_deletes_their_own_experience_in_the_same_transaction(store: Store) -> None:
    from memgas.core.validate import make_session

    store.add_session(make_session([{"role": "user", "content": "hi"}], user_id="alice", session_id="s1"), [], [])
    mine = store.add_experience("user:alice", "principle", "when alice is sad", {}, unit(0))
    shared = store.add_experience("agent:helper", "template", "an agent's, learned across users", {}, unit(1))
    other = store.add_experience("user:alice2", "principle", "another user's", {}, unit(2))
    store.add_experience("user:bob", "principle", "a user with experience and no session", {}, unit(3))
    assert store.delete_user("alice") == 1
    assert store.list_experiences("user:alice") == [] and not store.has_user("alice")
    assert [i.id for i in store.list_experiences("agent:helper")] == [shared]
    assert [i.id for i in store.list_experiences("user:alice2")] == [other] and mine not in (shared, other)
    assert store.delete_user("bob") == 0 and store.list_experiences("user:bob") == []  # no session, still a user
    with pytest.raises(NotFoundError, match="no user 'bob'"):
        store.delete_user("bob")
