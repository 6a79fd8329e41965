"""Shared test set-up: one real embedder for the whole run, and a private default LLM response cache per test.

``Memory(llm=...)`` caches answers in ``llm.sqlite`` beside the embedding cache by default. Tests count
requests to a loopback server whose port may repeat across tests, so a shared response cache could
answer a later test's prompts; the embedding cache stays shared (vectors do not depend on the test).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from memgas.embed import Embedder, get_embedder


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    """The default embedder (the shipped MiniLM), loaded once for every test that needs it."""
    return get_embedder()


@pytest.fixture(autouse=True)
def _private_llm_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("memgas.memory.default_llm_cache_path", lambda: tmp_path / "llm-cache.sqlite")
