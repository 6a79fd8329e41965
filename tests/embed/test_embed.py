"""Tests of memgas.embed with the real int8 MiniLM model, a real SQLite file and real HTTP on loopback."""

from __future__ import annotations

import json
import random
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np
import pytest
from tokenizers import Tokenizer

from memgas.core.errors import InvalidInputError, MemgasError, MissingDependencyError
from memgas.core.paths import default_cache_path
from memgas.core.provenance import source
from memgas.embed.cache import CachedEmbedder, EmbeddingCache
from memgas.embed.factory import get_embedder
from memgas.embed.onnx import OnnxMiniLMEmbedder
from memgas.embed.openai import OpenAIEmbedder
from memgas.embed.st import SentenceTransformerEmbedder

TOKENIZER = Path(__file__).resolve().parents[2] / "src" / "memgas" / "data" / "minilm_tokenizer.json"
WORDS = ("memory agent session sister wedding Lisbon hiking dog lake router coffee budget "
         "flight museum garden piano recipe doctor").split()


@pytest.fixture(scope="module")
def model() -> OnnxMiniLMEmbedder:
    emb = get_embedder()
    assert isinstance(emb, OnnxMiniLMEmbedder)
    return emb


def long_text(n_words: int, seed: int = 0) -> str:
    """Sentences of 4-24 words, with line and paragraph breaks now and then."""
    rng = random.Random(seed)
    out, written = [], 0
    while written < n_words:
        k = rng.randint(4, 24)
        out.append(" ".join(rng.choice(WORDS) for _ in range(k)).capitalize() + rng.choice(".!?"))
        out.append(rng.choice([" "] * 8 + ["\n", "\n\n"]))
        written += k
    return "".join(out)


# ----------------------------------------------------------------------------- the ONNX model


def test_vectors_shape_dtype_and_unit_norm(model: OnnxMiniLMEmbedder) -> None:
    vecs = model.embed(["I adopted a puppy last week.", "", "Meeting moved to Friday at 3pm"])
    assert model.id == "onnx:all-MiniLM-L6-v2-int8" and model.dim == 384 and model.max_tokens == 256
    assert vecs.shape == (3, 384) and vecs.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)


def test_paraphrases_score_far_above_unrelated_texts(model: OnnxMiniLMEmbedder) -> None:
    a, b, c = model.embed([
        "How do I reset my wifi router?",
        "What are the steps to restart my wireless router?",
        "My grandmother's lasagna recipe uses three cheeses.",
    ])
    assert float(a @ b) > 0.6
    assert float(a @ c) < 0.3 and float(b @ c) < 0.3


def test_batches_match_single_texts_and_keep_input_order(model: OnnxMiniLMEmbedder) -> None:
    # Mixed lengths (one past the window) so sorting, several batches and padding all happen.
    texts = [long_text(n, seed=n) for n in (3, 40, 7, 300, 15, 1, 90, 22)]
    small = OnnxMiniLMEmbedder(batch_size=3, max_batch_tokens=300)
    batched = small.embed(texts)
    single = np.stack([model.embed([t])[0] for t in texts])
    np.testing.assert_allclose(batched, single, atol=1e-5)
    perm = [5, 2, 7, 0, 3, 1, 6, 4]
    np.testing.assert_allclose(model.embed([texts[i] for i in perm]), single[perm], atol=1e-5)


def test_truncates_at_the_window_not_at_the_files_128(model: OnnxMiniLMEmbedder) -> None:
    text = long_text(400, seed=3)
    tok = Tokenizer.from_file(str(TOKENIZER))
    tok.no_truncation()
    offsets = tok.encode(text, add_special_tokens=False).offsets
    head = text[: offsets[253][1]]  # the 254 word pieces that fit with [CLS] and [SEP]
    shorter = text[: offsets[127][1]]
    full, cut, cut128 = model.embed([text, head, shorter])
    np.testing.assert_allclose(full, cut, atol=1e-5)
    assert float(full @ cut128) < 0.9999


def test_empty_list_and_bad_input(model: OnnxMiniLMEmbedder) -> None:
    empty = model.embed([])
    assert empty.shape == (0, 384) and empty.dtype == np.float32
    with pytest.raises(InvalidInputError, match="single string"):
        model.embed("hello")
    with pytest.raises(InvalidInputError, match="text 1"):
        model.embed(["ok", 3])  # type: ignore[list-item]


def test_count_tokens_matches_the_tokenizer(model: OnnxMiniLMEmbedder) -> None:
    texts = ["Hello, world!", "", "Straße naïve café 2023/05/20", long_text(500)]
    tok = Tokenizer.from_file(str(TOKENIZER))
    tok.no_truncation()
    tok.no_padding()  # the file pads to 128 too
    expected = [len(tok.encode(t, add_special_tokens=False).ids) for t in texts]
    assert model.count_tokens(texts) == expected
    assert expected[0] == 4 and expected[1] == 0 and expected[3] > 256


# ----------------------------------------------------------------------------- split_to_window


def test_split_long_text_fits_window_and_loses_nothing(model: OnnxMiniLMEmbedder) -> None:
    text = long_text(3000)
    pieces = model.split_to_window(text)
    counts = model.count_tokens(pieces)
    assert len(pieces) > 10
    assert max(counts) + 2 <= model.max_tokens
    assert "".join(pieces) == text
    assert " ".join(" ".join(pieces).split()) == " ".join(text.split())
    # Cuts fall on boundaries: every piece but the last ends in whitespace, none starts with it.
    assert all(p[-1].isspace() for p in pieces[:-1]) and all(not p[0].isspace() for p in pieces)
    assert sum(counts) == model.count_tokens([text])[0]  # WordPiece adds up exactly at whitespace


def test_split_respects_a_smaller_window_and_short_text(model: OnnxMiniLMEmbedder) -> None:
    assert model.split_to_window("short text") == ["short text"]
    assert model.split_to_window("") == [""]
    pieces = model.split_to_window(long_text(300), max_tokens=40)
    assert max(model.count_tokens(pieces)) <= 38
    with pytest.raises(InvalidInputError):
        model.split_to_window("text", max_tokens=2)
    with pytest.raises(InvalidInputError):
        model.split_to_window("text", max_tokens=1000)


def test_split_giant_words_terminates(model: OnnxMiniLMEmbedder) -> None:
    # WordPiece reads any word over 100 characters as one [UNK]: it fits as it is.
    giant = "x" * 100_000
    assert model.split_to_window(giant) == [giant]
    # A word that must be cut inside: pieces fit and concatenate back.
    word = "antidisestablishmentarianism" * 3
    pieces = model.split_to_window(word, max_tokens=5)
    assert "".join(pieces) == word and max(model.count_tokens(pieces)) <= 3
    # The same with a character-based counter, on a 100k-character word.
    approx = OpenAIEmbedder("m", base_url="http://127.0.0.1:9/v1", dim=3, max_tokens=500)
    t0 = time.perf_counter()
    pieces = approx.split_to_window(giant)
    assert time.perf_counter() - t0 < 2
    assert "".join(pieces) == giant and max(approx.count_tokens(pieces)) <= 500


# ----------------------------------------------------------------------------- cache


class CountingEmbedder:
    """Delegates to a real embedder and records what it was asked to embed."""

    def __init__(self, inner: OnnxMiniLMEmbedder) -> None:
        self.inner = inner
        self.id, self.dim, self.max_tokens = inner.id, inner.dim, inner.max_tokens
        self.calls: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(list(texts))
        return self.inner.embed(texts)

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return self.inner.count_tokens(texts)

    def split_to_window(self, text: str, max_tokens: int | None = None) -> list[str]:
        return self.inner.split_to_window(text, max_tokens)


def test_cache_round_trip_on_a_sqlite_file(model: OnnxMiniLMEmbedder, tmp_path: Path) -> None:
    texts = [f"turn {i}: {long_text(12, seed=i)}" for i in range(20)]
    path = tmp_path / "sub" / "emb.sqlite"
    counting = CountingEmbedder(model)
    first = CachedEmbedder(counting, EmbeddingCache(path))
    v1 = first.embed(texts)
    assert (first.hits, first.misses, len(counting.calls)) == (0, 20, 1) and first.seconds > 0
    first.cache.close()

    second = get_embedder(counting, cache=path)  # reopen the file: the vectors persisted
    assert isinstance(second, CachedEmbedder) and second.id == model.id and second.dim == 384
    v2 = second.embed(texts)
    assert (second.hits, second.misses, second.seconds) == (20, 0, 0.0)
    assert len(counting.calls) == 1  # the model was not called again
    np.testing.assert_array_equal(v1, v2)
    v3 = second.embed(texts[:2] + ["a new text"])
    assert (second.hits, second.misses) == (22, 1) and counting.calls[-1] == ["a new text"]
    np.testing.assert_array_equal(v3[:2], v1[:2])


def test_cached_embedder_deduplicates_within_a_call(model: OnnxMiniLMEmbedder) -> None:
    counting = CountingEmbedder(model)
    emb = CachedEmbedder(counting, EmbeddingCache(None))
    vecs = emb.embed(["same", "other", "same", "same"])
    assert counting.calls == [["same", "other"]] and emb.misses == 2
    np.testing.assert_array_equal(vecs[0], vecs[2])
    assert not np.allclose(vecs[0], vecs[1])
    assert emb.embed([]).shape == (0, 384)


def test_cache_get_many_beyond_the_sqlite_variable_limit(tmp_path: Path) -> None:
    texts = [f"text {i}" for i in range(1_300)]
    vecs = np.random.default_rng(0).normal(size=(1_300, 8)).astype(np.float32)
    with EmbeddingCache(tmp_path / "c.sqlite") as cache:
        cache.put_many("fake:model", texts[:1_200], vecs[:1_200])
        got = cache.get_many("fake:model", texts)
        assert sorted(got) == list(range(1_200)) and len(cache) == 1_200
        np.testing.assert_array_equal(np.stack([got[i] for i in range(1_200)]), vecs[:1_200])
        assert cache.get_many("other:model", texts[:5]) == {}
        with pytest.raises(InvalidInputError):
            cache.put_many("fake:model", texts[:3], vecs[:2])


def test_cache_forgets_the_rows_only_a_deleted_session_produced(tmp_path: Path) -> None:
    vecs = np.eye(4, dtype=np.float32)
    path = tmp_path / "c.sqlite"
    with EmbeddingCache(path) as cache:
        cache.put_many("m", ["untagged"], vecs[:1])  # outside an ingest (e.g. memgas bench): kept
        with source("u", "s1"):
            cache.put_many("m", ["only s1", "shared"], vecs[1:3])
        with source("u", "s2"):
            assert sorted(cache.get_many("m", ["shared", "missing"])) == [0]  # a hit tags the row with s2
            cache.put_many("m", ["only s2"], vecs[3:])
        with source("v", "s1"):  # another user's session of the same id
            cache.get_many("m", ["only s1"])
        assert cache.forget("u", "s1") == 0  # "only s1" is still v's
        assert cache.forget("v", "s1") == 1
        assert sorted(cache.get_many("m", ["untagged", "only s1", "shared", "only s2"])) == [0, 2, 3]
        assert cache.forget("u") == 2 and cache.forget("u") == 0
        assert sorted(cache.get_many("m", ["untagged", "shared", "only s2"])) == [0]
        assert path.with_name("c.sqlite-wal").stat().st_size == 0  # checkpointed and truncated
    with EmbeddingCache(path) as again:  # tags persist
        assert len(again) == 1
    with pytest.raises(MemgasError, match="closed"):
        again.get_many("m", ["untagged"])
    again.close()  # idempotent


def test_cache_file_without_tags_is_migrated_and_its_rows_kept(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "old.sqlite"
    old = sqlite3.connect(path)
    old.execute("CREATE TABLE embeddings (embedder_id TEXT NOT NULL, text_hash BLOB NOT NULL, dim INTEGER NOT NULL,"
                " vector BLOB NOT NULL, PRIMARY KEY (embedder_id, text_hash)) WITHOUT ROWID")
    old.commit()
    old.close()
    with EmbeddingCache(path) as cache:
        cache.put_many("m", ["old row", "old, used again"], np.ones((2, 3), np.float32))  # untagged, as before
        with source("u", "s"):
            cache.get_many("m", ["old, used again"])  # the session produced it too
            cache.put_many("m", ["new row"], np.ones((1, 3), np.float32))
        assert cache.forget("u", "s") == 1  # the rows made outside a session stay, the one used again too
        assert sorted(cache.get_many("m", ["old row", "old, used again", "new row"])) == [0, 1]
        with pytest.raises(InvalidInputError):
            cache.forget("")


def test_cached_embedder_can_leave_queries_out_of_the_cache(model: OnnxMiniLMEmbedder) -> None:
    counting = CountingEmbedder(model)
    emb = CachedEmbedder(counting, EmbeddingCache(None), cache_queries=False)
    emb.embed(["a query"])
    emb.embed(["a query"])
    assert len(counting.calls) == 2 and len(emb.cache) == 0  # outside an ingest: not written
    with source("u", "s"):
        emb.embed(["a turn", "a query"])
    emb.embed(["a turn"])
    assert counting.calls[2:] == [["a turn", "a query"]] and len(emb.cache) == 2 and emb.hits == 1


def test_default_cache_path_honours_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MEMGAS_CACHE_DIR", str(tmp_path))
    assert default_cache_path() == tmp_path / "embeddings.sqlite"
    monkeypatch.delenv("MEMGAS_CACHE_DIR")
    assert default_cache_path() == Path.home() / ".cache" / "memgas" / "embeddings.sqlite"


# ----------------------------------------------------------------------------- factory


def test_get_embedder_specs(model: OnnxMiniLMEmbedder) -> None:
    assert get_embedder("default") is model and get_embedder("minilm") is model
    assert get_embedder("onnx:all-MiniLM-L6-v2-int8") is model
    oa = get_embedder("openai:nomic-embed-text@http://localhost:11434/v1/")
    assert isinstance(oa, OpenAIEmbedder)
    assert oa.id == "openai:http://localhost:11434/v1:nomic-embed-text" and oa.url.endswith("/v1/embeddings")
    with pytest.raises(InvalidInputError, match="unknown embedder"):
        get_embedder("word2vec")
    with pytest.raises(InvalidInputError):
        get_embedder(42)  # type: ignore[arg-type]


def test_sentence_transformers_missing_names_the_extra() -> None:
    with pytest.raises(MissingDependencyError, match=r"pip install -e '\.\[st\]'") as info:
        get_embedder("st:all-MiniLM-L6-v2")
    assert isinstance(info.value, ImportError) and isinstance(info.value, MemgasError)
    with pytest.raises(ImportError):
        SentenceTransformerEmbedder("all-MiniLM-L6-v2")


# ----------------------------------------------------------------------------- OpenAI-compatible HTTP


class FakeServer:
    """A /v1/embeddings server: answers ``failures`` with their status codes first, then 200."""

    def __init__(self) -> None:
        self.failures: list[int] = []
        self.requests: list[dict] = []
        self.headers: list[dict] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                owner.requests.append(body)
                owner.headers.append(dict(self.headers))
                if self.path != "/v1/embeddings":
                    return self._send(404, {"error": "no such route"})
                if owner.failures:
                    code = owner.failures.pop(0)
                    return self._send(code, {"error": f"status {code}"}, {"Retry-After": "0"} if code == 429 else {})
                # Unnormalised vectors, listed in reverse with their index (servers may reorder).
                data = [{"index": i, "embedding": [len(t), 1.0, 2.0]} for i, t in enumerate(body["input"])]
                self._send(200, {"object": "list", "data": data[::-1], "model": body["model"]})

            def _send(self, code: int, payload: dict, headers: dict | None = None) -> None:
                raw = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeServer]:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    srv = FakeServer()
    srv.thread.start()
    yield srv
    srv.httpd.shutdown()
    srv.httpd.server_close()


def expected(texts: list[str]) -> np.ndarray:
    raw = np.array([[len(t), 1.0, 2.0] for t in texts], dtype=np.float32)
    return raw / np.linalg.norm(raw, axis=1, keepdims=True)


def test_openai_success_batches_and_normalises(server: FakeServer) -> None:
    emb = OpenAIEmbedder("tiny", base_url=server.base_url, api_key="sk-test", batch_size=2)
    texts = ["a", "bbbb", "cc", "dddddd", "e"]
    vecs = emb.embed(texts)
    np.testing.assert_allclose(vecs, expected(texts), atol=1e-6)
    assert vecs.dtype == np.float32 and emb.dim == 3
    assert [r["input"] for r in server.requests] == [["a", "bbbb"], ["cc", "dddddd"], ["e"]]
    assert server.requests[0]["model"] == "tiny" and server.headers[0]["Authorization"] == "Bearer sk-test"
    assert emb.id == f"openai:{server.base_url}:tiny"
    server.requests.clear()  # a token budget also bounds a request: 3 x 34 estimated tokens > 80
    OpenAIEmbedder("tiny", base_url=server.base_url, max_batch_tokens=80).embed(["x" * 100] * 3)
    assert [len(r["input"]) for r in server.requests] == [2, 1]


def test_openai_dim_is_probed_once_when_not_given(server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMGAS_EMBED_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    emb = OpenAIEmbedder("tiny", base_url=server.base_url)
    assert emb.dim == 3 and emb.dim == 3 and len(server.requests) == 1
    assert emb.embed([]).shape == (0, 3)
    assert server.headers[0]["Authorization"] == "Bearer sk-env"


def test_openai_retries_a_429(server: FakeServer) -> None:
    server.failures = [429]
    emb = OpenAIEmbedder("tiny", base_url=server.base_url, backoff=0.01)
    np.testing.assert_allclose(emb.embed(["hello"]), expected(["hello"]), atol=1e-6)
    assert len(server.requests) == 2


def test_openai_persistent_500_fails_after_max_retries(server: FakeServer) -> None:
    server.failures = [500] * 10
    emb = OpenAIEmbedder("tiny", base_url=server.base_url, max_retries=2, backoff=0.05)
    t0 = time.perf_counter()
    with pytest.raises(MemgasError, match="HTTP 500") as info:
        emb.embed(["hello"])
    assert time.perf_counter() - t0 < 2
    assert len(server.requests) == 3 and server.base_url in str(info.value)


def test_openai_client_error_is_not_retried(server: FakeServer) -> None:
    server.failures = [400]
    emb = OpenAIEmbedder("tiny", base_url=server.base_url, backoff=0.01)
    with pytest.raises(MemgasError, match="HTTP 400.*status 400"):
        emb.embed(["hello"])
    assert len(server.requests) == 1


def test_openai_unreachable_names_the_url() -> None:
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    emb = OpenAIEmbedder("tiny", base_url=url, dim=3, max_retries=2, backoff=0.01, timeout=2)
    t0 = time.perf_counter()
    with pytest.raises(MemgasError, match="cannot reach") as info:
        emb.embed(["hello"])
    assert f"{url}/embeddings" in str(info.value) and time.perf_counter() - t0 < 3
