"""The SQLite embedding cache, keyed by (embedder, text hash) and tagged with the sessions that produced
each row, and :class:`CachedEmbedder`, an embedder that reads and fills it.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import Sequence

import numpy as np

from memgas.core.errors import InvalidInputError
from memgas.core.provenance import current_source, current_tags
from memgas.core.tagged_cache import TaggedCache
from memgas.embed.base import Embedder, check_texts

__all__ = ["EmbeddingCache", "CachedEmbedder", "COUNT_MEMO"]

# ----------------------------------------------------------------------------- cache

_IN_CHUNK = 500  # host parameters per IN (...) query: well under SQLite's limit (999 before 3.32)


def _hash(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


#: How many texts' token counts a :class:`CachedEmbedder` remembers.
COUNT_MEMO = 50_000


class EmbeddingCache(TaggedCache):
    """Vectors keyed by (embedder id, SHA-256 of the UTF-8 text), in SQLite (WAL mode), with their sources.

    Every row written or hit inside :func:`memgas.core.provenance.source` (a session ingested, a zep
    community summary) gets a *use* of its sessions, one tag ``(user_id, session_id, use)`` per
    session; a row several sessions produced has several uses. :meth:`forget` ends a session's (or a
    user's) uses (a use of several sessions ends with any of them) and drops every row left without a
    tag, so a delete leaves no vector or text hash that only the deleted session produced. Rows written
    outside an ingest (embeddings made directly, e.g. by ``memgas bench``) and rows of cache files
    written before tags existed have no tag and are never forgotten; when an ingest hits one, it gets the untagged mark
    ``('', '', '')`` (ids are never empty) beside the session's tag, so it stays after that session is
    deleted, as the LLM response cache does (:class:`memgas.llm.cache.ResponseCache`). Deleted rows are
    overwritten (``secure_delete``) and the WAL is checkpointed and truncated after a forget, so their
    bytes leave every file of the cache.

    Safe for one writer (several processes may read); calls are serialised within a process.

    Args:
        path: the database file (its folder is created); ``None`` keeps the cache in memory.
    """

    sources_index = "sources_by_row"  # the name files written before the shared migration have

    def __init__(self, path: str | Path | None = None) -> None:
        super().__init__(path, label="the embedding cache", table="embeddings",
                         key_columns={"embedder_id": "TEXT", "text_hash": "BLOB"})
        if path is not None:
            self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS embeddings (embedder_id TEXT NOT NULL, text_hash BLOB NOT NULL,"
            " dim INTEGER NOT NULL, vector BLOB NOT NULL, PRIMARY KEY (embedder_id, text_hash)) WITHOUT ROWID"
        )
        self._db.commit()
        self._migrate_sources(mark_old_rows=False)  # old rows stay untagged until a use tags them

    def get_many(self, embedder_id: str, texts: Sequence[str]) -> dict[int, np.ndarray]:
        """The cached vectors of ``texts``, as ``{index in texts: float32 vector}`` (misses absent).

        Inside an ingest every hit is tagged with the ingested session too: that session produced the
        text as well, so the row must outlive the deletion of the session that wrote it first. A hit
        row without a tag (made outside any ingest) gets the untagged mark first, so it stays too.
        """
        hashes = [_hash(t) for t in texts]
        found: dict[bytes, np.ndarray] = {}
        unique = list(dict.fromkeys(hashes))
        tags = current_tags()
        with self._lock, self._db:
            for i in range(0, len(unique), _IN_CHUNK):
                chunk = unique[i : i + _IN_CHUNK]
                rows = self._db.execute(
                    f"SELECT text_hash, dim, vector FROM embeddings WHERE embedder_id = ?"
                    f" AND text_hash IN ({','.join('?' * len(chunk))})",
                    [embedder_id, *chunk],
                )
                for h, dim, blob in rows:
                    if len(blob) == 4 * dim:
                        found[h] = np.frombuffer(blob, dtype=np.float32).copy()
            if tags and found:
                keys = [(embedder_id, h) for h in found]
                self._db.executemany(
                    "INSERT INTO sources SELECT '', '', ?1, ?2, '' WHERE NOT EXISTS"
                    " (SELECT 1 FROM sources WHERE embedder_id = ?1 AND text_hash = ?2)", keys)
                self._tag(tags, embedder_id, list(found))
        return {i: found[h] for i, h in enumerate(hashes) if h in found}

    def put_many(self, embedder_id: str, texts: Sequence[str], vectors: np.ndarray) -> None:
        """Store ``vectors[i]`` as the vector of ``texts[i]`` (replacing any older one), tagged with the
        sessions of :func:`memgas.core.provenance.source`, if any.

        Raises:
            InvalidInputError: ``vectors`` is not a 2-D array with one row per text.
        """
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[0] != len(texts):
            raise InvalidInputError(f"put_many: {len(texts)} texts but vectors of shape {vectors.shape}")
        dim = int(vectors.shape[1])
        hashes = [_hash(t) for t in texts]
        rows = [(embedder_id, h, dim, v.tobytes()) for h, v in zip(hashes, vectors)]
        tags = current_tags()
        with self._lock, self._db:
            self._db.executemany("INSERT OR REPLACE INTO embeddings VALUES (?, ?, ?, ?)", rows)
            if tags:
                self._tag(tags, embedder_id, hashes)

    def _tag(self, tags: Sequence[tuple[str, str, str]], embedder_id: str, hashes: Sequence[bytes]) -> None:
        """Record that the use ``tags`` produced the rows ``hashes`` (caller holds the lock and a transaction)."""
        self._db.executemany("INSERT OR IGNORE INTO sources VALUES (?, ?, ?, ?, ?)",
                             [(u, s, embedder_id, h, use) for u, s, use in tags for h in hashes])


class CachedEmbedder:
    """An embedder that looks texts up in an :class:`EmbeddingCache` first.

    Identical texts in one call are embedded once. Counters: ``hits`` and ``misses`` count distinct
    texts per call found in / missing from the cache; ``seconds`` is the time spent in the inner
    model. Token counts are remembered in this process for the last :data:`COUNT_MEMO` texts, keyed by
    their hash (no text is kept): an append counts the session's unchanged turns again, for free.

    Args:
        inner: the model.
        cache: where vectors are kept.
        cache_queries: also write the vectors of texts embedded outside an ingest (outside
            :func:`memgas.core.provenance.source`: search queries). Such rows carry no session tag, so no
            delete removes them; :class:`memgas.Memory` passes ``False`` because a query may hold
            what its user later deletes. Reads hit the cache either way.
    """

    def __init__(self, inner: Embedder, cache: EmbeddingCache, *, cache_queries: bool = True) -> None:
        self.inner = inner
        self.cache = cache
        self.cache_queries = cache_queries
        self.id = inner.id
        self.max_tokens = inner.max_tokens
        self.hits = 0
        self.misses = 0
        self.seconds = 0.0
        self._counts: OrderedDict[bytes, int] = OrderedDict()
        self._counts_lock = threading.Lock()

    @property
    def dim(self) -> int:
        """The inner model's dimension."""
        return self.inner.dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of ``texts``: cached ones from the cache, the rest from the inner model (then cached)."""
        texts = check_texts(texts)
        unique = list(dict.fromkeys(texts))
        cached = self.cache.get_many(self.id, unique)
        todo = [t for i, t in enumerate(unique) if i not in cached]
        vecs = {unique[i]: v for i, v in cached.items()}
        if todo:
            t0 = time.perf_counter()
            new = self.inner.embed(todo)
            self.seconds += time.perf_counter() - t0
            if self.cache_queries or current_source() is not None:
                self.cache.put_many(self.id, todo, new)
            vecs.update(zip(todo, new))
        self.hits += len(unique) - len(todo)
        self.misses += len(todo)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([vecs[t] for t in texts]).astype(np.float32, copy=False)

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """The inner model's token counts (remembered for recent texts)."""
        keys = [_hash(t) for t in texts]
        with self._counts_lock:
            known = {k: self._counts[k] for k in keys if k in self._counts}
            for k in known:
                self._counts.move_to_end(k)
        todo = [i for i, k in enumerate(keys) if k not in known]
        if todo:
            counted = self.inner.count_tokens([texts[i] for i in todo])
            with self._counts_lock:
                for i, n in zip(todo, counted):
                    known[keys[i]] = self._counts[keys[i]] = int(n)
                while len(self._counts) > COUNT_MEMO:
                    self._counts.popitem(last=False)
        return [known[k] for k in keys]

    def split_to_window(self, text: str, max_tokens: int | None = None) -> list[str]:
        """The inner model's split (see :meth:`OnnxMiniLMEmbedder.split_to_window`); a text that fits is
        answered from the remembered count."""
        window = self.max_tokens if max_tokens is None else max_tokens
        special = getattr(self.inner, "_special", None)
        if isinstance(text, str) and special is not None and 0 < window <= self.max_tokens \
                and self.count_tokens([text])[0] <= window - special:
            return [text]
        return self.inner.split_to_window(text, max_tokens)
