"""Shared test set-up: the run's caches in its own temporary folder, one real embedder for the whole run, a loopback OpenAI-compatible server (``stub``), a private default LLM response cache per test, and
one throwaway PostgreSQL cluster for the whole run (started on first use) with a fresh database per test.

``Memory(llm=...)`` caches answers in ``llm.sqlite`` beside the embedding cache by default. Tests count
requests to a loopback server whose port may repeat across tests, so a shared response cache could
answer a later test's prompts; the embedding cache stays shared (vectors do not depend on the test).
"""

from __future__ import annotations

import itertools
import os
import shutil
import sqlite3
import tempfile
from pathlib import Path
from typing import Any, Iterator

import pytest

from memgas.embed.base import Embedder
from memgas.embed.factory import get_embedder
from support.openai_stub import OpenAIStub
from support.pg import Cluster, unavailable


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark what needs a server: ``pg`` where a test uses PostgreSQL (its fixtures, or the postgres case of a
    backend parameter), ``server`` for the service tests (each runs a live ``memgas serve`` or MCP server)."""
    service = Path(__file__).parent / "service"
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        params = getattr(getattr(item, "callspec", None), "params", {})
        if fixtures & {"pg_url", "pg_cluster"} or any("postgres" in str(v) for v in params.values()):
            item.add_marker(pytest.mark.pg)
        if service in Path(item.path).parents:
            item.add_marker(pytest.mark.server)


def pytest_configure(config: pytest.Config) -> None:
    """The run's caches (embeddings, LLM answers, extracted model files) in a temporary folder of its own, never in
    the user's ``~/.cache``: set before the test modules are read, so every command and server they start inherits
    it; removed at the end of the run."""
    folder = Path(tempfile.mkdtemp(prefix="memgas-test-cache-"))
    os.environ["MEMGAS_CACHE_DIR"] = str(folder)
    config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    """The default embedder (the shipped MiniLM), loaded once for every test that needs it."""
    return get_embedder()


@pytest.fixture
def stub(monkeypatch: pytest.MonkeyPatch) -> Iterator[OpenAIStub]:
    """An OpenAI-compatible server on loopback with scripted answers (``tests/support/openai_stub.py``)."""
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    with OpenAIStub() as server:
        yield server


@pytest.fixture(autouse=True)
def _private_llm_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("memgas.memory.default_llm_cache_path", lambda: tmp_path / "llm-cache.sqlite")


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[Cluster]:
    """A PostgreSQL cluster on a free loopback port, removed after the run; the test skips, saying why,
    where no server can be started (psycopg or the server binaries missing)."""
    reason = unavailable()
    if reason:
        pytest.skip(f"PostgreSQL: {reason}")
    cluster = Cluster()
    yield cluster
    cluster.stop()


_databases = itertools.count()


@pytest.fixture
def pg_url(pg_cluster: Cluster) -> Iterator[str]:
    """The URL of a new empty database, dropped after the test (so tests stay independent)."""
    name = f"t{next(_databases)}"
    pg_cluster.admin(f"CREATE DATABASE {name}")
    yield pg_cluster.url(name)
    pg_cluster.admin(f"DROP DATABASE {name} WITH (FORCE)")


@pytest.fixture
def no_secure_delete(monkeypatch: pytest.MonkeyPatch) -> None:
    """SQLite connections with ``secure_delete`` off, as on a default build, whatever this Python's SQLite was built
    with: a scan of the files for deleted bytes then sees what memgas itself leaves (the delete and retention tests)."""
    connect = sqlite3.connect

    def connect_plain(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = connect(*args, **kwargs)
        conn.execute("PRAGMA secure_delete = OFF")
        return conn

    monkeypatch.setattr(sqlite3, "connect", connect_plain)
