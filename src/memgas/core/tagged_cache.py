"""The SQLite file behind the embedding cache and the LLM response cache: rows tagged with the sessions
that produced them (:mod:`memgas.core.provenance`), and :meth:`TaggedCache.forget` that drops what only deleted
sessions produced, leaving no byte of it in the file or its write-ahead log.

Each cache keeps its rows in one data table keyed by ``key_columns`` and its tags in a table
``sources (user_id, session_id, <key_columns>, use)``; the subclasses create both and read and write them.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Mapping, Self

from memgas.core.errors import InvalidInputError, MemgasError

__all__ = ["TaggedCache"]


class TaggedCache:
    """An open cache file (``None``: in memory) with ``secure_delete`` on and, for a file, WAL journaling.

    Args:
        path: the database file (its folder is created); ``None`` keeps the cache in memory.
        label: what the cache is, for error messages ("the embedding cache").
        table: the data table.
        key_columns: the data table's key, repeated in ``sources``: each column and its SQL type.
    """

    #: The layout of ``sources`` that :meth:`_migrate_sources` brings every file to (``PRAGMA user_version``).
    SOURCES_VERSION = 2
    #: The name of the index of ``sources`` by the data table's key.
    sources_index = "sources_by_key"

    def __init__(self, path: str | Path | None, *, label: str, table: str, key_columns: Mapping[str, str]) -> None:
        if path is not None:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self.path = None if path is None else Path(path)
        self._label = label
        self._table = table
        self._key_columns = tuple(key_columns)
        self._key_types = dict(key_columns)
        self._lock = threading.Lock()
        db = sqlite3.connect(":memory:" if path is None else str(path), check_same_thread=False, timeout=30)
        self._conn: sqlite3.Connection | None = db
        # Freed cells and pages are zeroed, whatever the SQLite build's default: a forgotten row must not
        # survive in the file's free space.
        db.execute("PRAGMA secure_delete=ON")
        if path is not None:
            db.execute("PRAGMA journal_mode=WAL")

    @property
    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            raise MemgasError(f"{self._label} {self.path or ':memory:'} is closed")
        return self._conn

    def _migrate_sources(self, *, mark_old_rows: bool) -> None:
        """Create ``sources``, or bring an older file's to :attr:`SOURCES_VERSION`, in one transaction that
        another process opening the same old file waits for (it then finds the work done).

        A file from before tags (no ``sources``) gets the table; with ``mark_old_rows`` each of its rows gets
        the untagged mark ``('', '', key, '')``, so no delete ever forgets it (otherwise its rows stay
        untagged until a use tags them). A file whose tags predate uses (no ``use`` column) keeps each tag
        as a one-session use (``''``), as it was; a new primary key needs a new table.
        """
        db = self._db
        columns = [row[1] for row in db.execute("PRAGMA table_info(sources)")]
        if "use" in columns and db.execute("PRAGMA user_version").fetchone()[0] >= self.SOURCES_VERSION:
            return
        keys = ", ".join(self._key_columns)
        db.execute("BEGIN IMMEDIATE")
        try:
            columns = [row[1] for row in db.execute("PRAGMA table_info(sources)")]  # again, under the lock
            if "use" not in columns:
                if columns:
                    db.execute("ALTER TABLE sources RENAME TO sources_v1")
                defs = ", ".join(f"{c} {kind} NOT NULL" for c, kind in self._key_types.items())
                db.execute(f"CREATE TABLE sources (user_id TEXT NOT NULL, session_id TEXT NOT NULL, {defs},"
                           f" use TEXT NOT NULL, PRIMARY KEY (user_id, session_id, {keys}, use)) WITHOUT ROWID")
                if columns:
                    db.execute(f"INSERT INTO sources SELECT user_id, session_id, {keys}, '' FROM sources_v1")
                    db.execute("DROP TABLE sources_v1")  # with its index, whose name the new one takes
                elif mark_old_rows:
                    db.execute(f"INSERT INTO sources SELECT '', '', {keys}, '' FROM {self._table}")
            db.execute(f"CREATE INDEX IF NOT EXISTS {self.sources_index} ON sources ({keys})")
            db.execute(f"PRAGMA user_version = {self.SOURCES_VERSION}")
        except BaseException:
            db.rollback()
            raise
        db.commit()

    def forget(self, user_id: str, session_id: str | None = None) -> int:
        """End every use of one session (or of every session of ``user_id``) and drop every row left untagged.

        A use of several sessions ends with any of them (all its tags go). Rows another session also
        produced keep that session's use and stay. The deleted rows are overwritten in the file
        (``secure_delete``) and the WAL is checkpointed and truncated, so their bytes are gone from the
        cache's files, unless another process is reading the cache at that moment (then its next
        checkpoint completes the job).

        Args:
            user_id: whose rows.
            session_id: one session; ``None`` for all of the user's sessions.

        Returns:
            The number of data rows deleted.

        Raises:
            InvalidInputError: an empty ``user_id`` or ``session_id`` (empty ids name the untagged mark).
        """
        if not user_id or session_id == "":
            raise InvalidInputError("forget needs a non-empty user id (and session id, if given)")
        where, args = ("user_id = ?", (user_id,)) if session_id is None else (
            "user_id = ? AND session_id = ?", (user_id, session_id))
        keys = ", ".join(self._key_columns)
        match = " AND ".join(f"{c} = ?{i + 1}" for i, c in enumerate(self._key_columns))
        with self._lock:
            with self._db:
                uses = self._db.execute(f"SELECT DISTINCT {keys}, use FROM sources WHERE {where}", args).fetchall()
                self._db.execute(f"DELETE FROM sources WHERE {where}", args)
                self._db.executemany(f"DELETE FROM sources WHERE {match} AND use = ?{len(self._key_columns) + 1}",
                                     [u for u in uses if u[-1]])
                before = self._db.total_changes
                self._db.executemany(f"DELETE FROM {self._table} WHERE {match} AND NOT EXISTS"
                                     f" (SELECT 1 FROM sources WHERE {match})", list({u[:-1] for u in uses}))
                deleted = self._db.total_changes - before
            if self.path is not None:
                self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return deleted

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute(f"SELECT COUNT(*) FROM {self._table}").fetchone()[0])

    def close(self) -> None:
        """Close the database (idempotent). Any later call raises :class:`MemgasError`."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
