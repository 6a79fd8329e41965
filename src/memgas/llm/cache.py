"""The SQLite response cache of LLM calls, keyed by (model, messages, schema, limits) and tagged with the
sessions whose text each prompt held.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Mapping, Sequence

from memgas.core.provenance import current_tags
from memgas.core.tagged_cache import TaggedCache
from memgas.llm.base import ChatMessage, Completion

__all__ = ["ResponseCache"]


class ResponseCache(TaggedCache):
    """Model answers keyed by SHA-256 of (model id, messages, schema, max_tokens, temperature), in SQLite,
    with the sessions they were made for.

    A re-run of the same prompts with the same model costs no calls. The model id names provider,
    server and model (see :class:`ChatModel`). Safe for one writer; calls are serialised in a process.

    Provenance: an answer written or hit inside :func:`memgas.core.provenance.source` (a session ingested,
    the retrieved sessions of an ``answer`` prompt, the sessions behind a zep community summary) gets a
    *use* of those sessions, one tag ``(user_id, session_id, use)`` per session; one written outside (a
    benchmark's judge) gets the untagged mark ``('', '', '')`` (ids are never empty). :meth:`forget`
    ends every use of a session (all its tags: a use of several sessions ends with any of them) and
    drops every answer left with none, so the LLM's summary or facts of a deleted session, and every
    answer whose prompt showed it, leave the file; an answer another use still needs stays.

    Schema (``PRAGMA user_version`` 2): ``responses (key, model_id, text, prompt_tokens,
    completion_tokens, seconds)`` and ``sources (user_id, session_id, key, use)``. Migrations: from
    version 0 (files written before tags existed) the ``sources`` table is added and every existing
    answer gets the untagged mark, so no old answer is ever forgotten by a delete; from version 1 (tags
    without uses) every tag becomes a one-session use (``use`` ``''``), as it was.

    Args:
        path: the database file (its folder is created); ``None`` keeps the cache in memory.
    """

    def __init__(self, path: str | Path | None = None) -> None:
        super().__init__(path, label="the LLM response cache", table="responses", key_columns={"key": "BLOB"})
        db = self._db
        with db:
            db.execute(
                "CREATE TABLE IF NOT EXISTS responses (key BLOB PRIMARY KEY, model_id TEXT NOT NULL,"
                " text TEXT NOT NULL, prompt_tokens INTEGER NOT NULL, completion_tokens INTEGER NOT NULL,"
                " seconds REAL NOT NULL) WITHOUT ROWID"
            )
        self._migrate_sources(mark_old_rows=True)  # no delete may forget an answer from before tags

    @staticmethod
    def key(model_id: str, messages: Sequence[ChatMessage], schema: Mapping[str, Any] | None, max_tokens: int,
            temperature: float) -> bytes:
        """The cache key of one request."""
        blob = json.dumps([model_id, [dict(m) for m in messages], schema, max_tokens, temperature],
                          sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).digest()

    def get(self, key: bytes) -> Completion | None:
        """The cached answer, marked ``cached``, or ``None``. Inside :func:`memgas.core.provenance.source` a
        hit is tagged with its sessions too (they need the answer as well)."""
        tags = current_tags()
        with self._lock:
            row = self._db.execute(
                "SELECT text, prompt_tokens, completion_tokens, seconds FROM responses WHERE key = ?", (key,)
            ).fetchone()
            if row is not None and tags:
                known = "SELECT 1 FROM sources WHERE user_id = ? AND session_id = ? AND key = ? AND use = ?"
                new = [(u, s, key, use) for u, s, use in tags
                       if self._db.execute(known, (u, s, key, use)).fetchone() is None]
                if new:  # a write only for a new tag
                    with self._db:
                        self._db.executemany("INSERT OR IGNORE INTO sources VALUES (?, ?, ?, ?)", new)
        return None if row is None else Completion(row[0], row[1], row[2], row[3], cached=True)

    def put(self, key: bytes, model_id: str, completion: Completion) -> None:
        """Store an answer (replacing an older one), tagged with the sessions of
        :func:`memgas.core.provenance.source` or marked untagged."""
        with self._lock, self._db:
            self._db.execute("INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?, ?, ?)",
                             (key, model_id, completion.text, completion.prompt_tokens,
                              completion.completion_tokens, completion.seconds))
            self._db.executemany("INSERT OR IGNORE INTO sources VALUES (?, ?, ?, ?)",
                                 [(u, s, key, use) for u, s, use in current_tags() or [("", "", "")]])
