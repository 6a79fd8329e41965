"""The store cut by concern: the core interface (sessions, messages, units, edges, versions) and, apart, what only
some layers use (binding, index snapshots, API keys, experience items, quoted parts of sessions, shared rate-limit
buckets), each backend holding the parts it can on one database."""

from __future__ import annotations

import time

import pytest

from memgas.core.errors import InvalidInputError
from memgas.store import (
    ExperienceStore,
    KeyStore,
    QuoteStore,
    RateLimitStore,
    SnapshotStore,
    SQLiteStore,
    Store,
    StoreBinding,
    part,
)
from memgas.store.postgres import PostgresStore

PARTS = (StoreBinding, SnapshotStore, KeyStore, ExperienceStore, QuoteStore, RateLimitStore)


def test_the_core_interface_holds_sessions_units_and_edges_only() -> None:
    assert len(Store.__abstractmethods__) <= 20
    for interface in PARTS:  # no call of another concern is the core's
        assert not set(interface.__abstractmethods__) & set(dir(Store)), interface


def test_each_backend_holds_the_parts_it_can() -> None:
    assert [issubclass(SQLiteStore, p) for p in PARTS] == [True, True, True, True, True, False]  # limits: one process
    assert all(issubclass(PostgresStore, p) for p in PARTS)  # buckets shared by every worker on the database


def test_a_layer_asks_for_its_part_and_is_told_when_the_store_lacks_it() -> None:
    with SQLiteStore(":memory:") as store:
        assert part(store, KeyStore) is store
        with pytest.raises(InvalidInputError, match="SQLiteStore has no RateLimitStore part"):
            part(store, RateLimitStore)


def test_postgres_rate_limit_buckets_are_shared_by_every_store_object(pg_url: str) -> None:
    """Two store objects (as two worker processes hold) take from one bucket, on the database's clock."""
    from concurrent.futures import ThreadPoolExecutor

    from memgas.store.postgres import PostgresStore

    with PostgresStore(pg_url) as a, PostgresStore(pg_url) as b:
        assert isinstance(a, RateLimitStore) and not isinstance(SQLiteStore(":memory:"), RateLimitStore)
        assert [a.take_token("k", 1.0, 3.0) for _ in range(2)] == [0.0, 0.0]
        assert b.take_token("k", 1.0, 3.0) == 0.0  # the third of the burst, taken by the other object
        wait = a.take_token("k", 1.0, 3.0)
        assert 0.5 < wait <= 1.0 and b.take_token("other", 1.0, 3.0) == 0.0  # buckets are per name
        time.sleep(1.1)
        assert b.take_token("k", 1.0, 3.0) == 0.0  # refilled at 1 a second
        start = time.monotonic()
        with ThreadPoolExecutor(8) as pool:  # concurrent takes from both objects: no token is handed out twice
            got = list(pool.map(lambda i: (a if i % 2 else b).take_token("burst", 10.0, 20.0), range(200)))
        allowed = sum(g == 0.0 for g in got)
        assert 20 <= allowed <= 20 + 10 * (time.monotonic() - start) + 1
