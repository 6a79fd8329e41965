"""Shared test set-up: one real embedder for the whole run, a loopback OpenAI-compatible server (``stub``), a private default LLM response cache per test, and
one throwaway PostgreSQL cluster for the whole run (started on first use) with a fresh database per test.

``Memory(llm=...)`` caches answers in ``llm.sqlite`` beside the embedding cache by default. Tests count
requests to a loopback server whose port may repeat across tests, so a shared response cache could
answer a later test's prompts; the embedding cache stays shared (vectors do not depend on the test).
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Iterator

import pytest

from memgas.embed import Embedder, get_embedder

from openai_stub import OpenAIStub
from pg import Cluster, unavailable


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    """The default embedder (the shipped MiniLM), loaded once for every test that needs it."""
    return get_embedder()


@pytest.fixture
def stub(monkeypatch: pytest.MonkeyPatch) -> Iterator[OpenAIStub]:
    """An OpenAI-compatible server on loopback with scripted answers (``tests/openai_stub.py``)."""
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
