"""Deletion that forgets: after ``Memory.delete`` no file memgas wrote holds the deleted session's bytes.

One Memory over real files (a SQLite store, a SQLite embedding cache, an LLM over loopback HTTP with a
SQLite response cache; the LLM writes each session's summary, so a derived copy of the secret exists
too). Each test deletes a session holding a unique secret word, then scans every file under the store's
and caches' folders (``-wal`` and ``-shm`` included) for the secret's UTF-8 bytes and for the cache key
(SHA-256) and vector bytes of every text only that session produced.

Connections start with ``secure_delete`` off, as on a SQLite build without ``SQLITE_SECURE_DELETE``
(this machine's build has it on by default and would hide a missing pragma).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import pytest
from openai_stub import OpenAIStub

from memgas import Memory
from memgas.embed import CachedEmbedder, Embedder
from memgas.model import MemgasError, NotFoundError

SECRET = "Zorblaxquintic"  # appears in no other text: any byte match is a leak
SHARED = [  # the same first turn in both sessions: its cache rows are produced by both
    {"role": "user", "content": "We planned the garden beds for spring: tomatoes, basil and runner beans."},
    {"role": "assistant", "content": "Tomatoes and basil grow well together; give the beans a trellis."},
]
SECRET_SESSION = SHARED + [
    {"role": "user", "content": f"My bank vault passphrase is {SECRET}, please remember it for me."},
    {"role": "assistant", "content": f"Noted: the passphrase is {SECRET}. I will keep it safe."},
]
OTHER_SESSION = SHARED + [
    {"role": "user", "content": "The compost heap needs turning every two weeks in summer."},
    {"role": "assistant", "content": "Turning it often keeps the compost aerated and warm."},
]


def _summary(body: dict[str, Any]) -> str:
    """The stub LLM's units: its summary and keywords repeat the secret when the prompt holds it."""
    prompt = " ".join(str(m.get("content", "")) for m in body.get("messages", []))
    topic = SECRET if SECRET in prompt else "compost"
    return json.dumps({"summary": f"The user talked about {topic} and the garden ({topic}).",
                       "keywords": [topic, "garden beds"]})


@pytest.fixture
def stub(monkeypatch: pytest.MonkeyPatch) -> Iterator[OpenAIStub]:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    with OpenAIStub(_summary) as server:
        yield server


@pytest.fixture(autouse=True)
def _no_secure_delete_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    connect = sqlite3.connect

    def connect_plain(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = connect(*args, **kwargs)
        conn.execute("PRAGMA secure_delete = OFF")
        return conn

    monkeypatch.setattr(sqlite3, "connect", connect_plain)


class Recorded:
    """Every text a Memory's embedder was asked for (hits and misses), per add."""

    def __init__(self, emb: CachedEmbedder, monkeypatch: pytest.MonkeyPatch) -> None:
        self.texts: list[str] = []
        embed: Callable[[Sequence[str]], np.ndarray] = emb.embed

        def recording(texts: Sequence[str]) -> np.ndarray:
            self.texts.extend(texts)
            return embed(texts)

        monkeypatch.setattr(emb, "embed", recording)

    def take(self) -> set[str]:
        out, self.texts = set(self.texts), []
        return out


def open_memory(root: Path, stub: OpenAIStub, embedder: Embedder) -> Memory:
    return Memory(root / "store" / "mem.db", embedder=embedder, embedding_cache=root / "cache" / "emb.sqlite",
                  llm=f"openai:tiny@{stub.base_url}", llm_cache=root / "cache" / "llm.sqlite")


def leaks(root: Path, needles: dict[str, bytes]) -> list[str]:
    """``file: needle`` for every needle found in a file under ``root``."""
    found = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        data = path.read_bytes()
        found += [f"{path.relative_to(root)}: {name}" for name, blob in needles.items() if blob in data]
    return found


def needles_of(texts: set[str], emb: CachedEmbedder) -> dict[str, bytes]:
    """The secret, and the cache key and vector bytes of each text."""
    out = {"secret": SECRET.encode("utf-8")}
    vectors = emb.inner.embed(sorted(texts))
    for text, vec in zip(sorted(texts), vectors):
        out[f"key of {text[:40]!r}"] = hashlib.sha256(text.encode("utf-8")).digest()
        out[f"vector of {text[:40]!r}"] = vec.tobytes()[:64]
    return out


def test_delete_session_forgets_it_in_every_file(tmp_path: Path, stub: OpenAIStub, embedder: Embedder,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    mem = open_memory(tmp_path, stub, embedder)
    emb = mem.embedder
    assert isinstance(emb, CachedEmbedder)
    record = Recorded(emb, monkeypatch)
    mem.add(SECRET_SESSION, user_id="u", session_id="secret")  # first: it writes the shared rows
    secret_texts = record.take()
    mem.add(OTHER_SESSION, user_id="u", session_id="garden")  # hits the shared rows
    other_texts = record.take()
    assert mem.stats()["llm"]["units"]["written"] == 2
    assert [h.session_id for h in mem.search(f"what is my {SECRET} passphrase?", user_id="u", k=1)] == ["secret"]
    record.take()
    gone = secret_texts - other_texts
    assert secret_texts & other_texts and any(SECRET in t for t in gone)  # the test covers both kinds of row
    needles = needles_of(gone, emb)
    query = f"what is my {SECRET} passphrase?"
    needles["query key"] = hashlib.sha256(query.encode("utf-8")).digest()
    before = leaks(tmp_path, needles)
    assert any(f.startswith("store") for f in before) and any(f.startswith("cache/llm") for f in before)
    assert any(f.startswith("cache/emb") and "key of" in f for f in before)  # else the scan proves nothing

    assert mem.delete("secret", user_id="u") == {"user_id": "u", "deleted_sessions": 1}

    assert leaks(tmp_path, needles) == []  # with the Memory still open
    assert emb.cache.get_many(emb.id, sorted(gone)) == {}
    kept = sorted(other_texts)
    assert sorted(emb.cache.get_many(emb.id, kept)) == list(range(len(kept)))  # shared rows too: "garden" made them
    assert [h.session_id for h in mem.search("when should the compost be turned?", user_id="u", k=1)] == ["garden"]
    mem.close()
    assert leaks(tmp_path, needles) == []
    assert sorted(p.name for p in (tmp_path / "cache").iterdir() if p.name.endswith(("-wal", "-shm"))) == []


def test_delete_user_forgets_every_session(tmp_path: Path, stub: OpenAIStub, embedder: Embedder,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    with open_memory(tmp_path, stub, embedder) as mem:
        emb = mem.embedder
        assert isinstance(emb, CachedEmbedder)
        record = Recorded(emb, monkeypatch)
        mem.add(SECRET_SESSION, user_id="gone", session_id="a")
        mem.add(OTHER_SESSION, user_id="gone", session_id="b")
        gone_texts = record.take()
        mem.add(OTHER_SESSION, user_id="stays", session_id="c")
        stays_texts = record.take()
        needles = needles_of(gone_texts - stays_texts, emb)
        assert any(f.startswith("cache/emb") for f in leaks(tmp_path, needles))

        assert mem.delete(user_id="gone") == {"user_id": "gone", "deleted_sessions": 2}

        assert leaks(tmp_path, needles) == []
        assert sorted(emb.cache.get_many(emb.id, sorted(stays_texts))) == list(range(len(stays_texts)))
        assert mem.list() == [{"user_id": "stays", "sessions": 1}]
        with pytest.raises(NotFoundError):
            mem.delete(user_id="gone")
    assert leaks(tmp_path, needles) == []


def test_close_closes_everything_and_is_idempotent(tmp_path: Path, stub: OpenAIStub, embedder: Embedder) -> None:
    mem = open_memory(tmp_path, stub, embedder)
    mem.add(OTHER_SESSION, user_id="u", session_id="s")
    assert mem.llm is not None and mem.llm.cache is not None
    with mem:
        pass  # __exit__ closes
    mem.close()  # again: nothing happens
    for call in (lambda: mem.search("compost", user_id="u"), lambda: mem.add(SHARED, user_id="u"),
                 lambda: mem.delete("s", user_id="u"), lambda: mem.embedder.embed(["compost"]),
                 lambda: len(mem.llm.cache)):  # type: ignore[union-attr]
        with pytest.raises(MemgasError, match="closed"):
            call()
    # No connection is left open: every WAL was checkpointed away when its last connection closed.
    assert sorted(p.name for p in tmp_path.rglob("*") if p.name.endswith(("-wal", "-shm"))) == []
