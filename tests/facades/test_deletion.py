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

from memgas import Memory
from memgas.core.errors import MemgasError, NotFoundError
from memgas.core.packing import pack_text
from memgas.embed.base import Embedder
from memgas.embed.cache import CachedEmbedder
from support.openai_stub import OpenAIStub
from support.sqlite_files import open_files

pytestmark = pytest.mark.usefixtures("no_secure_delete")  # the scans see what memgas itself leaves

SECRET = "Zorblaxquintic"  # appears in no other text: any byte match is a leak
SHARED = [  # the same first turn in both sessions: its cache rows are produced by both
    {"role": "user", "content": "We planned the garden beds for spring: tomatoes, basil and runner beans."},
    {"role": "assistant", "content": "Tomatoes and basil grow well together; give the beans a trellis."},
]
SECRET_SESSION = SHARED + [
    {"role": "user", "content": f"My bank vault passphrase is {SECRET}, please remember it for me."},
    {"role": "assistant", "content": f"Noted: the passphrase is {SECRET}. I will keep it safe. " + " ".join(
        f"Rule {i}: never say the passphrase aloud, never write it on paper." for i in range(12))},
]
OTHER_SESSION = SHARED + [
    {"role": "user", "content": "The compost heap needs turning every two weeks in summer."},
    {"role": "assistant", "content": "Turning it often keeps the compost aerated and warm."},
]


def _summary(body: dict[str, Any]) -> str:
    """The stub LLM: units, the answer filter (keeps every memory) and answers, each repeating the secret
    when the prompt holds it."""
    prompt = " ".join(str(m.get("content", "")) for m in body.get("messages", []))
    topic = SECRET if SECRET in prompt else "compost"
    if prompt.startswith("You judge which memories"):
        return json.dumps({str(i): True for i in range(1, prompt.count("\n[") + 1)})
    if prompt.startswith("You answer questions"):
        return json.dumps({"answer": f"It is {topic}.", "sources": [1]})
    return json.dumps({"summary": f"The user talked about {topic} and the garden ({topic}).",
                       "keywords": [topic, "garden beds"]})


@pytest.fixture
def stub(monkeypatch: pytest.MonkeyPatch) -> Iterator[OpenAIStub]:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    with OpenAIStub(_summary) as server:
        yield server


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
    long = SECRET_SESSION[-1]["content"]
    assert pack_text(long)[:1] == b"\x01"  # deflated in the store: the plain secret is not in its bytes there
    out["packed long reply"] = pack_text(long)[1:]
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
    assert any(f.startswith("store") and "packed long reply" in f for f in before)  # the message as the store keeps it
    assert any(f.startswith("cache/emb") and "key of" in f for f in before)  # else the scan proves nothing

    assert mem.delete("secret", user_id="u").to_dict() == {"user_id": "u", "deleted_sessions": 1}

    assert leaks(tmp_path, needles) == []  # with the Memory still open
    assert emb.cache.get_many(emb.id, sorted(gone)) == {}
    kept = sorted(other_texts)
    assert sorted(emb.cache.get_many(emb.id, kept)) == list(range(len(kept)))  # shared rows too: "garden" made them
    assert [h.session_id for h in mem.search("when should the compost be turned?", user_id="u", k=1)] == ["garden"]
    mem.close()
    assert leaks(tmp_path, needles) == []
    assert open_files(tmp_path / "cache") == []


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

        assert mem.delete(user_id="gone").to_dict() == {"user_id": "gone", "deleted_sessions": 2}

        assert leaks(tmp_path, needles) == []
        assert sorted(emb.cache.get_many(emb.id, sorted(stays_texts))) == list(range(len(stays_texts)))
        assert [u.to_dict() for u in mem.users()] == [{"user_id": "stays", "sessions": 1}]
        with pytest.raises(NotFoundError):
            mem.delete(user_id="gone")
    assert leaks(tmp_path, needles) == []


def test_delete_forgets_the_answers_whose_prompts_showed_the_session(tmp_path: Path, stub: OpenAIStub,
                                                                     embedder: Embedder) -> None:
    with open_memory(tmp_path, stub, embedder) as mem:
        assert mem.llm is not None and mem.llm.cache is not None
        mem.add(SECRET_SESSION, user_id="u", session_id="secret")
        mem.add(OTHER_SESSION, user_id="u", session_id="garden")
        both = mem.answer("what did we plan for the garden beds?", user_id="u", k=2)
        assert SECRET in both.answer and sorted(m.session_id for m in both.memories) == ["garden", "secret"]
        only_garden = "when should the compost be turned?"
        other = mem.answer(only_garden, user_id="u", k=1)
        assert [m.session_id for m in other.memories] == ["garden"] and SECRET not in other.answer
        # 2 units' answers, the filter's and the answer's over both sessions, the answer over "garden"
        assert len(mem.llm.cache) == 5
        needles = {"secret": SECRET.encode("utf-8")}
        assert any(f.startswith("cache/llm") for f in leaks(tmp_path, needles))

        mem.delete("secret", user_id="u")

        assert leaks(tmp_path, needles) == []
        assert len(mem.llm.cache) == 2  # the filter's answer went too: its prompt showed the secret session
        calls = len(stub.requests)
        again = mem.answer(only_garden, user_id="u", k=1)
        assert (again.answer, len(stub.requests)) == (other.answer, calls)  # served from the cache
        assert mem.stats()["llm"]["answer"]["total"]["cached"] == 1
    assert leaks(tmp_path, needles) == []


#: What the scripted zep model extracts from each user message.
ZEP_FACTS = {
    "I started a job at Acme as a nurse.": [("user", "works at", "Acme")],
    f"My sister Anna lives in {SECRET}.": [("Anna", "is sister of", "user"), ("Anna", "lives in", SECRET)],
    "Anna works at Siemens now.": [("Anna", "works at", "Siemens")],
}


def _zep(body: dict[str, Any]) -> str:
    """The stub LLM for zep: facts from ``ZEP_FACTS``, every judged fact new, summaries naming the members."""
    system, user = body["messages"][0]["content"], body["messages"][1]["content"]
    if system.startswith("You summarise"):
        return json.dumps({"summary": "About " + user.split("ENTITIES: ", 1)[1].split("\n", 1)[0]})
    if system.startswith("You extract facts"):
        triples = ZEP_FACTS.get(user.split("CURRENT MESSAGE:\n", 1)[1].split(": ", 1)[1], [])
        return json.dumps({"facts": [{"subject": a, "relation": r, "object": b} for a, r, b in triples]})
    return json.dumps({"verdict": "new", "ids": []})


def test_delete_forgets_zep_community_summaries_made_from_the_session(tmp_path: Path, embedder: Embedder,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    with OpenAIStub(_zep) as stub, Memory(
            tmp_path / "store" / "mem.db", method="zep", embedder=embedder, llm_units=False, refresh_every=2,
            embedding_cache=tmp_path / "cache" / "emb.sqlite", llm=f"openai:tiny@{stub.base_url}",
            llm_cache=tmp_path / "cache" / "llm.sqlite") as mem:
        def summaries(since: int = 0) -> list[str]:
            return [b["messages"][1]["content"] for b in stub.requests[since:]
                    if b["messages"][0]["content"].startswith("You summarise")]

        texts: set[str] = set()  # every summary written, whose vector the embedding cache keeps
        for sid, text in [("a", "I started a job at Acme as a nurse."),
                          ("secret", f"My sister Anna lives in {SECRET}."), ("b", "Anna works at Siemens now.")]:
            mem.add([{"role": "user", "content": text}], user_id="u", session_id=sid)
            texts.update(c.summary for c in mem.kg.communities(user_id="u"))
        # summarised while "b" was added, from the facts of "secret" too
        assert SECRET in summaries()[-1] and "Siemens" in summaries()[-1]
        mem.delete("a", user_id="u")
        calls = len(stub.requests)
        mem.search("family", user_id="u")  # rebuilds the graph without "a": new communities, summarised now
        assert any(SECRET in p for p in summaries(calls))
        texts.update(c.summary for c in mem.kg.communities(user_id="u"))
        needles = {"secret": SECRET.encode("utf-8")}
        needles.update({f"key of {t!r}": hashlib.sha256(t.encode("utf-8")).digest() for t in texts if SECRET in t})
        found = leaks(tmp_path, needles)
        assert any(f.startswith("cache/llm") for f in found) and any(f.startswith("cache/emb") for f in found)

        mem.delete("secret", user_id="u")

        assert leaks(tmp_path, needles) == []
        calls = len(stub.requests)
        assert [f.object for f in mem.kg.facts(user_id="u")] == ["Siemens"]  # "b"'s facts, from the cache
        assert len(stub.requests) == calls
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
    assert open_files(tmp_path) == []


def test_close_closes_the_search_stages_caches(tmp_path: Path, stub: OpenAIStub, embedder: Embedder) -> None:
    stub.responder = lambda body: ('{"ranking": [1]}' if "ranking" in json.dumps(body.get("response_format"))
                                   else '{"searches": ["compost heap", "tomato seedlings"]}')
    spec = f"llm:openai:tiny@{stub.base_url}"
    mem = Memory(tmp_path / "store" / "mem.db", embedder=embedder, embedding_cache=tmp_path / "cache" / "emb.sqlite",
                 llm_cache=tmp_path / "cache" / "llm.sqlite", rerank=spec, decompose=spec)
    mem.add(OTHER_SESSION, user_id="u", session_id="s")
    mem.add(SHARED, user_id="u", session_id="t")
    mem.search("compost and seedlings?", user_id="u")
    assert len(stub.requests) == 2  # the decomposer and the reranker, through the response cache
    stages = [mem.method.reranker.reranker.llm, mem.method.decomposer.decomposer.llm]  # type: ignore[union-attr]
    assert all(llm.cache is not None and len(llm.cache) for llm in stages)
    mem.close()
    for llm in stages:
        with pytest.raises(MemgasError, match="closed"):
            len(llm.cache)
    assert open_files(tmp_path) == []


@pytest.mark.parametrize("bad", [{"llm": "gpt-5"}, {"embedder": "word2vec"}, {"rerank": "llm:gpt-5"},
                                 {"decompose": "rules"}, {"colour": "blue"}])
def test_a_failed_open_leaves_nothing_open(tmp_path: Path, embedder: Embedder, bad: dict[str, str]) -> None:
    Memory(tmp_path / "store" / "mem.db", embedder=embedder).close()  # the store exists: reopening it is the test
    options: dict[str, Any] = {"embedder": embedder, **bad}
    with pytest.raises(MemgasError) as failure:  # kept: its traceback holds the half-made Memory
        Memory(tmp_path / "store" / "mem.db", embedding_cache=tmp_path / "cache" / "emb.sqlite",
               llm_cache=tmp_path / "cache" / "llm.sqlite", **options)
    assert failure.value is not None and open_files(tmp_path) == []


def test_tags_written_before_uses_existed_keep_their_meaning(tmp_path: Path) -> None:
    """Cache files whose ``sources`` has no ``use`` column: each tag becomes a one-session use."""
    from memgas.core import provenance
    from memgas.embed.cache import EmbeddingCache
    from memgas.llm.base import Completion
    from memgas.llm.cache import ResponseCache

    llm_path, emb_path = tmp_path / "llm.sqlite", tmp_path / "emb.sqlite"
    with sqlite3.connect(llm_path) as db:  # user_version 1: tags without uses
        db.execute("CREATE TABLE responses (key BLOB PRIMARY KEY, model_id TEXT NOT NULL, text TEXT NOT NULL,"
                   " prompt_tokens INTEGER NOT NULL, completion_tokens INTEGER NOT NULL, seconds REAL NOT NULL)"
                   " WITHOUT ROWID")
        db.execute("CREATE TABLE sources (user_id TEXT NOT NULL, session_id TEXT NOT NULL, key BLOB NOT NULL,"
                   " PRIMARY KEY (user_id, session_id, key)) WITHOUT ROWID")
        db.execute("CREATE INDEX sources_by_key ON sources (key)")
        db.executemany("INSERT INTO responses VALUES (?, 'm', ?, 1, 1, 0.1)", [(b"a" * 32, "A"), (b"b" * 32, "B")])
        db.executemany("INSERT INTO sources VALUES ('u', ?, ?)", [("s1", b"a" * 32), ("s2", b"a" * 32),
                                                                  ("s1", b"b" * 32)])
        db.execute("PRAGMA user_version = 1")
    db.close()
    with sqlite3.connect(emb_path) as db:
        db.execute("CREATE TABLE embeddings (embedder_id TEXT NOT NULL, text_hash BLOB NOT NULL,"
                   " dim INTEGER NOT NULL, vector BLOB NOT NULL, PRIMARY KEY (embedder_id, text_hash)) WITHOUT ROWID")
        db.execute("CREATE TABLE sources (user_id TEXT NOT NULL, session_id TEXT NOT NULL, embedder_id TEXT NOT NULL,"
                   " text_hash BLOB NOT NULL, PRIMARY KEY (user_id, session_id, embedder_id, text_hash)) WITHOUT ROWID")
        db.execute("CREATE INDEX sources_by_row ON sources (embedder_id, text_hash)")
        old = hashlib.sha256(b"old").digest()
        db.execute("INSERT INTO embeddings VALUES ('m', ?, 3, ?)", (old, np.ones(3, np.float32).tobytes()))
        db.execute("INSERT INTO sources VALUES ('u', 's1', 'm', ?)", (old,))
    db.close()
    with EmbeddingCache(emb_path) as emb:  # the old sources table gains its column
        with provenance.source("u", "s1"):
            emb.put_many("m", ["one"], np.ones((1, 3), np.float32))
        with provenance.source("u", "s1", "s2"):
            emb.put_many("m", ["both"], np.ones((1, 3), np.float32))
        assert emb.forget("u", "s2") == 1 and sorted(emb.get_many("m", ["one", "both", "old"])) == [0, 2]
        assert emb.forget("u", "s1") == 2 and len(emb) == 0
    with ResponseCache(llm_path) as cache:
        with provenance.source("u", "s2", "s3"):
            cache.put(b"c" * 32, "m", Completion("C", 1, 1, 0.1))
        assert cache.forget("u", "s1") == 1  # B; A was also made by s2 alone
        assert [cache.get(k) is not None for k in (b"a" * 32, b"b" * 32, b"c" * 32)] == [True, False, True]
        assert cache.forget("u", "s3") == 1  # C: its use of s2 and s3 ended with s3
        assert len(cache) == 1
    with sqlite3.connect(llm_path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 2
        assert db.execute("SELECT user_id, session_id, use FROM sources").fetchall() == [("u", "s2", "")]
    db.close()


@pytest.mark.parametrize("change", ["update", "delete"])
def test_editing_or_deleting_a_message_forgets_its_text_in_every_file(tmp_path: Path, stub: OpenAIStub,
                                                                       embedder: Embedder, change: str) -> None:
    with open_memory(tmp_path, stub, embedder) as mem:
        emb = mem.embedder
        assert isinstance(emb, CachedEmbedder)
        mem.add(OTHER_SESSION, user_id="u", session_id="garden")
        mem.add(SECRET_SESSION, user_id="u", session_id="secret")
        assert [h.session_id for h in mem.search(f"what is my {SECRET} passphrase?", user_id="u", k=1)] == ["secret"]
        needles = {"secret": SECRET.encode("utf-8")}
        assert any(f.startswith("cache/emb") or f.startswith("cache/llm") for f in leaks(tmp_path, needles))
        index = next(i for i, m in enumerate(SECRET_SESSION) if SECRET in m["content"])
        for i in range(2):  # both messages that hold the secret: the user's and the reply
            if change == "update":
                mem.update_message("secret", index + i, "I changed my mind about the vault.", user_id="u")
            else:
                mem.delete_message("secret", index, user_id="u")

        assert leaks(tmp_path, needles) == []  # store, embedding cache and LLM cache, their WALs too
        assert SECRET not in str(mem.get("secret", user_id="u"))
        assert mem.search(f"what is my {SECRET} passphrase?", user_id="u", k=5)  # the session stays searchable
    assert leaks(tmp_path, needles) == []
