"""memgas through PgBouncer in transaction pooling mode (issue 40, in part): the pooler hands each transaction any of
its two server connections, so a client that keeps session state between transactions breaks there. memgas keeps
none: no server-side prepared statements, advisory locks held to the end of their transaction."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from memgas import Memory
from memgas.embed.base import Embedder
from support.pg import Cluster
from support.pgbouncer import PgBouncer, unavailable


@pytest.fixture
def pooled(pg_cluster: Cluster, pg_url: str) -> Iterator[str]:
    """``pg_url``'s database through a PgBouncer in transaction mode."""
    reason = unavailable()
    if reason:
        pytest.skip(reason)
    bouncer = PgBouncer(pg_cluster.port)
    try:
        yield bouncer.url(pg_url.rsplit("/", 1)[1])
    finally:
        bouncer.stop()


@pytest.mark.slow
def test_the_pooler_breaks_a_client_that_prepares_statements(pooled: str) -> None:
    """The premise: behind this pooler, psycopg's own prepared statements (after five runs of a query) fail."""
    import psycopg

    with psycopg.connect(pooled, autocommit=True) as a, psycopg.connect(pooled, autocommit=True) as b:
        with pytest.raises(psycopg.Error, match="prepared statement"):
            for i in range(20):  # two clients interleaving: transactions move between the server connections
                a.execute("SELECT %s::int + 1", (i,)).fetchone()
                b.execute("SELECT %s::text || 'x'", (str(i),)).fetchone()
                a.execute("SELECT pg_sleep(0)").fetchone()


@pytest.mark.slow
def test_memory_works_through_the_pooler_from_many_threads(pooled: str, pg_url: str, embedder: Embedder) -> None:
    errors: list[str] = []
    with Memory(pooled, embedder=embedder) as mem:
        for i in range(6):
            mem.add(f"Note {i}: I like topic {i} very much.", user_id="ana", session_id=f"s{i}")

        def work(n: int) -> None:
            try:
                for j in range(15):
                    assert mem.search(f"topic {j % 6}", user_id="ana", k=3)
                    mem.list(user_id="ana")
                    mem.append(f"step {j} of worker {n}", user_id=f"w{n}", session_id="chat")
            except Exception as exc:  # collected: a thread's failure must fail the test
                errors.append(repr(exc)[:300])

        threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert errors == []
    with Memory(pg_url, embedder=embedder) as direct:  # what went through the pooler is all there
        assert all(len(direct.get("chat", user_id=f"w{n}").messages) == 15 for n in range(4))
        assert direct.search("topic 3", user_id="ana", k=1)[0].session_id == "s3"
