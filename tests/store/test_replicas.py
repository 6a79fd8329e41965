"""Reads from a replica that lags, and a client that never misses its own acknowledged write (issue 40).

A real primary and a real streaming replica that applies what it receives 400 ms late (``recovery_min_apply_delay``),
so a read sent to the replica right after a write would miss it: each test first shows that on the replica itself.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator

import pytest

from memgas import Memory
from memgas.core.errors import InvalidInputError, UnavailableError
from memgas.embed.base import Embedder
from memgas.store.postgres import PostgresStore, split_read_options
from support.pg import Cluster, unavailable

LAG_MS = 400
_names = itertools.count()


@pytest.fixture(scope="module")
def replicated() -> Iterator[tuple[Cluster, Cluster]]:
    """A primary and its replica, 400 ms behind."""
    reason = unavailable()
    if reason:
        pytest.skip(f"PostgreSQL: {reason}")
    primary = Cluster()
    try:
        replica = Cluster(primary=primary, apply_delay_ms=LAG_MS)
    except BaseException:
        primary.stop()
        raise
    yield primary, replica
    replica.stop()
    primary.stop()


def _on_replica(url: str, sql: str, *args: object) -> list[tuple[object, ...]]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(sql, args).fetchall()


def _caught_up(replica_url: str, sql: str, *args: object, timeout: float = 10.0) -> None:
    """Wait until the replica answers ``sql`` with at least one row."""
    deadline = time.monotonic() + timeout
    while not _on_replica(replica_url, sql, *args):
        assert time.monotonic() < deadline, f"the replica never showed: {sql}"
        time.sleep(0.05)


@pytest.fixture
def urls(replicated: tuple[Cluster, Cluster]) -> Iterator[tuple[str, str]]:
    """A new database: its URL on the primary and on the replica (once the replica has it too)."""
    primary, replica = replicated
    name = f"r{next(_names)}"
    primary.admin(f"CREATE DATABASE {name}")
    _caught_up(replica.url(), "SELECT 1 FROM pg_database WHERE datname = %s", name)
    with PostgresStore(primary.url(name)):  # the schema, made once and replicated before the test
        pass
    _caught_up(replica.url(name), "SELECT 1 FROM pg_tables WHERE tablename = 'users'")
    yield primary.url(name), replica.url(name)
    primary.admin(f"DROP DATABASE {name} WITH (FORCE)")


@pytest.mark.slow
def test_a_write_is_read_back_at_once_though_the_replica_lags(urls: tuple[str, str], embedder: Embedder) -> None:
    """The store waits for the replica to show the write, then reads there (the URL parameters are its options)."""
    primary, replica = urls
    with Memory(f"{primary}?read_url={replica}&read_wait=5", embedder=embedder) as mem:
        mem.add("My sister Ines lives in Lisbon.", user_id="ana", session_id="s1")
        assert _on_replica(replica, "SELECT 1 FROM sessions WHERE user_id = 'ana'") == []  # the replica lags
        started = time.monotonic()
        hits = mem.search("Where does Ines live?", user_id="ana", k=1)
        assert [h.session_id for h in hits] == ["s1"]
        assert time.monotonic() - started >= (LAG_MS - 100) / 1000  # it waited for the replica ...
        assert mem.store.reads["replica"] >= 1 and mem.store.reads["primary_after_wait"] == 0  # ... and read there


@pytest.mark.slow
def test_past_read_wait_the_primary_serves_the_read(urls: tuple[str, str], embedder: Embedder) -> None:
    primary, replica = urls
    with Memory(PostgresStore(primary, read_url=replica, read_wait=0.05), embedder=embedder) as mem:
        mem.add("The boat is called Gaivota.", user_id="ana", session_id="s1")
        assert [h.session_id for h in mem.search("boat name", user_id="ana", k=1)] == ["s1"]
        assert mem.store.reads["primary_after_wait"] >= 1 and mem.store.reads["replica"] == 0


@pytest.mark.slow
def test_a_deleted_session_is_not_read_back_from_a_lagging_replica(urls: tuple[str, str], embedder: Embedder) -> None:
    """A delete is a write the replica must show too: what was deleted is never recalled from a replica behind it."""
    primary, replica = urls
    with Memory(PostgresStore(primary, read_url=replica, read_wait=5), embedder=embedder) as mem:
        mem.add("My PIN is 4417.", user_id="ana", session_id="secret")
        mem.add("I like sailing.", user_id="ana", session_id="hobby")
        _caught_up(replica, "SELECT 1 FROM sessions WHERE session_id = 'hobby'")
        mem.delete("secret", user_id="ana")
        assert _on_replica(replica, "SELECT 1 FROM sessions WHERE session_id = 'secret'")  # still there
        assert [s.session_id for s in mem.list(user_id="ana")] == ["hobby"]
        assert all(h.session_id != "secret" for h in mem.search("What is my PIN?", user_id="ana", k=5))


@pytest.mark.slow
def test_a_user_written_elsewhere_is_first_read_on_the_primary(urls: tuple[str, str], embedder: Embedder) -> None:
    """A store that has not written a user reads it from the primary first and learns its last write there (the
    ``users.xid`` column); later reads go to the replica once it shows that write."""
    primary, replica = urls
    with Memory(primary, embedder=embedder) as writer, \
            Memory(PostgresStore(primary, read_url=replica, read_wait=5), embedder=embedder) as reader:
        writer.add("Bruno's cat is Miso.", user_id="bruno", session_id="s1")
        assert _on_replica(replica, "SELECT 1 FROM sessions WHERE user_id = 'bruno'") == []  # the replica lags
        assert [s.session_id for s in reader.list(user_id="bruno")] == ["s1"]
        assert reader.store.reads["primary"] == 1  # the first read only; the next ones wait for the replica
        served = reader.store.reads["replica"]
        writer.append("Miso is nine years old.", user_id="bruno", session_id="s1")  # unknown to the reader: the
        time.sleep(2 * LAG_MS / 1000)  # read after it may show either state; once the replica has it, it serves
        assert len(reader.get("s1", user_id="bruno").messages) == 2
        # the replica served the read (the session's messages and the expiry check's headers), the primary nothing more
        assert reader.store.reads["replica"] > served and reader.store.reads["primary"] == 1


@pytest.mark.slow
def test_without_a_replica_to_be_had_reads_go_to_the_primary(urls: tuple[str, str], embedder: Embedder) -> None:
    from memgas.core.ports import free_port

    primary, _ = urls
    nowhere = f"postgresql://postgres@127.0.0.1:{free_port()}/none"
    with Memory(PostgresStore(primary, read_url=nowhere, read_wait=0.2), embedder=embedder) as mem:
        mem.add("Tea, no sugar.", user_id="ana", session_id="s1")
        assert [h.session_id for h in mem.search("how do I take tea", user_id="ana", k=1)] == ["s1"]
        assert mem.store.reads["replica"] == 0


@pytest.mark.slow
def test_a_lost_server_connection_is_replaced_or_reported_as_unavailable(replicated: tuple[Cluster, Cluster],
                                                                         urls: tuple[str, str]) -> None:
    """A pooled connection the server dropped (a failover, a restart) is replaced before a block begins; one lost
    inside a block is UnavailableError (503 in the service), not a driver error."""
    import psycopg

    primary, _ = urls
    with PostgresStore(primary) as store:
        store.version("ana")  # the pool holds a connection now
        with psycopg.connect(primary, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                          " WHERE datname = current_database() AND pid <> pg_backend_pid()")
            assert store.version("ana") == 0  # a new connection: no error
            with pytest.raises(UnavailableError, match="unreachable"):
                with store.reading("ana"):
                    admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                                  " WHERE datname = current_database() AND pid <> pg_backend_pid()")
                    store.version("ana")


def test_memgas_takes_its_own_parameters_out_of_the_url() -> None:
    url, read, wait = split_read_options("postgresql://u@h:6432/db?sslmode=disable&read_url=postgresql://u@h:6432/ro"
                                         "&read_wait=1.5")
    assert (url, read, wait) == ("postgresql://u@h:6432/db?sslmode=disable", "postgresql://u@h:6432/ro", 1.5)
    assert split_read_options("postgresql://u@h/db") == ("postgresql://u@h/db", None, None)
    with pytest.raises(InvalidInputError, match="read_wait"):
        split_read_options("postgresql://u@h/db?read_wait=soon")
