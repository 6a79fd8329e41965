"""SQLite storage backend: one file (or memory) holding every user's sessions, units and edges.

Schema (version :data:`SCHEMA_VERSION`, kept in ``PRAGMA user_version``):

* ``meta(key, value)``: ``embedder_id``, ``dim`` (set once by :meth:`SQLiteStore.bind_embedder`)
  and ``version_seq``, the store-wide counter that user versions are drawn from.
* ``users(user_id, version)``: one row per user that has at least one session.
* ``sessions(pk, user_id, session_id, timestamp, metadata, n_messages, n_turns, created_at, agent_id,
  run_id)``, unique on ``(user_id, session_id)``, indexed on ``(user_id, agent_id)`` and ``(user_id, run_id)``;
  ``timestamp`` and ``created_at`` are ISO 8601 text, ``metadata`` is JSON.
* ``messages(session_pk, position, role, name, content, metadata)`` (``metadata`` JSON or ``NULL``); ``content``
  holds the text packed (:func:`memgas.core.packing.pack_text`: deflated where that is shorter), a BLOB since
  schema 9 although the column is declared ``TEXT``.
* ``units(id, session_pk, user_id, granularity, turn_start, turn_end, chunk, text, vector, msg_start, msg_end)``:
  ``granularity`` indexes :data:`memgas.core.types.GRANULARITIES`, ``vector`` is the unit's vector as little-endian
  float16 bytes (:mod:`memgas.kernels.quantize`; float32 before schema 6, re-encoded by its migration). For a unit
  whose text is its turns' texts joined (a turn's own, a session chunk's), ``text`` is empty and ``msg_start``,
  ``msg_end`` (schema 7) name the messages whose ``speaker: content`` lines make it: reads join them again, so it
  is not stored twice (-1, -1 for a text stored as it is). ``id`` is
  ``AUTOINCREMENT`` so a deleted unit's id is never handed out again. ``links`` (schema 9) holds the unit's edges
  to older units, packed (:func:`memgas.core.packing.pack_links`: each undirected edge once, on its newer unit;
  ``NULL`` for none); before schema 9 they were rows of a table ``edges(src, dst, weight, user_id)``.
* ``api_keys(key_id, secret_hash, scope, tenant, users, name, created_at, revoked_at)``: the service's
  API keys (:mod:`memgas.service.keys`), store-wide; only a SHA-256 of each key's secret is kept.
* ``experiences(id, scope, kind, key, payload, vector, created_at, updated_at)``: experience memory
  (:mod:`memgas.experience`), scoped by ``agent:NAME`` or ``user:ID``.
* ``snapshots(user_id, kind, version, data)``: a method's index of a user as of ``version``, so that loading it
  costs a read, not a rebuild (:meth:`SQLiteStore.save_snapshot`); derived data, dropped by every delete.

Deleting a session cascades (foreign keys) to its messages and its units (with their links); the links other
sessions' newer units hold to them are taken off in the same transaction.

Concurrency: one write connection per store object, used by one thread at a time, and in a file
one read connection per thread (WAL), so a search reads its snapshot while another thread or
process holds the write lock for a whole association step. Forgetting: every connection sets
``secure_delete`` (freed pages are zeroed), and a delete empties the write-ahead log afterwards.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any, Iterator

from memgas.core.errors import InvalidInputError, MemgasError, UnavailableError
from memgas.core.types import GRANULARITIES
from memgas.core.validate import check_id
from memgas.store.sql import (
    API_KEYS_TABLE,
    JOINED_MIGRATION,
    SCOPES_MIGRATION,
    SNAPSHOTS_TABLE,
    TAIL_INDEX,
    SQLStore,
    add_session_versions,
    compact_unit_vectors,
    links_from_edges,
    pack_message_texts,
)

__all__ = ["SQLiteStore", "SCHEMA_VERSION", "MIGRATIONS"]

_SCHEMA = (
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value) WITHOUT ROWID",
    "INSERT INTO meta (key, value) VALUES ('version_seq', 0)",
    "CREATE TABLE users (user_id TEXT PRIMARY KEY, version INTEGER NOT NULL) WITHOUT ROWID",
    """CREATE TABLE sessions (
        pk INTEGER PRIMARY KEY,
        user_id TEXT NOT NULL,
        session_id TEXT NOT NULL,
        timestamp TEXT,
        metadata TEXT NOT NULL,
        n_messages INTEGER NOT NULL,
        n_turns INTEGER NOT NULL,
        created_at TEXT NOT NULL,
        UNIQUE (user_id, session_id))""",
    """CREATE TABLE messages (
        session_pk INTEGER NOT NULL REFERENCES sessions (pk) ON DELETE CASCADE,
        position INTEGER NOT NULL,
        role TEXT NOT NULL,
        name TEXT,
        content TEXT NOT NULL,
        PRIMARY KEY (session_pk, position))""",
    f"""CREATE TABLE units (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        session_pk INTEGER NOT NULL REFERENCES sessions (pk) ON DELETE CASCADE,
        user_id TEXT NOT NULL,
        granularity INTEGER NOT NULL CHECK (granularity BETWEEN 0 AND {len(GRANULARITIES) - 1}),
        turn_start INTEGER NOT NULL,
        turn_end INTEGER NOT NULL,
        chunk INTEGER NOT NULL,
        text TEXT NOT NULL,
        vector BLOB NOT NULL)""",
    "CREATE INDEX units_user ON units (user_id)",
    "CREATE INDEX units_session ON units (session_pk)",
    """CREATE TABLE edges (
        src INTEGER NOT NULL REFERENCES units (id) ON DELETE CASCADE,
        dst INTEGER NOT NULL REFERENCES units (id) ON DELETE CASCADE,
        weight REAL NOT NULL,
        user_id TEXT NOT NULL,
        PRIMARY KEY (src, dst),
        CHECK (src < dst)) WITHOUT ROWID""",
    # The primary key serves cascades from ``src``; this index serves those from ``dst``.
    "CREATE INDEX edges_dst ON edges (dst)",
    "CREATE INDEX edges_user ON edges (user_id)",
)

#: Migrations, in order: ``MIGRATIONS[i]`` upgrades a file from schema version ``i`` to ``i + 1``
#: (:mod:`memgas.store.postgres` keeps the same list for PostgreSQL, with the version in a table).
MIGRATIONS: tuple[tuple[Any, ...], ...] = (
    _SCHEMA,
    # 2: the service's API keys (memgas.service.keys), only hashes of their secrets.
    (API_KEYS_TABLE.format(collate=""),),
    # 3: experience memory (memgas.experience): templates, principles, ... per agent or user.
    ("""CREATE TABLE experiences (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        scope TEXT NOT NULL,
        kind TEXT NOT NULL,
        key TEXT NOT NULL,
        payload TEXT NOT NULL,
        vector BLOB,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL)""",
        "CREATE INDEX experiences_scope ON experiences (scope, kind, id)",),
    # 4: sessions' agent and run ids, messages' own metadata.
    tuple(statement.format(collate="") for statement in SCOPES_MIGRATION),
    # 5: the shared rate-limit buckets live in PostgreSQL only; the version is kept in step.
    (),
    # 6: per-user index snapshots; unit vectors re-encoded as float16 (memgas.kernels.quantize).
    (SNAPSHOTS_TABLE.format(collate="", blob="BLOB"), lambda conn: compact_unit_vectors(conn, "?")),
    # 7: a unit whose text is its turns' texts joined (a turn's, a session chunk's) stores its messages' range instead.
    JOINED_MIGRATION,
    # 8: sessions' version column, where a store reached version 4 before migration 4 made it.
    (add_session_versions,),
    # 9: messages' content packed (memgas.core.packing.pack_text): a BLOB in the column declared TEXT; the edges
    # kept on their newer unit (units.links, memgas.core.packing.pack_links) instead of a table of their own.
    (lambda conn: pack_message_texts(conn, "?", ("session_pk", "position")),
     "ALTER TABLE units ADD COLUMN links BLOB",
     lambda conn: links_from_edges(conn, "?", conn.execute("SELECT user_id, dst, src, weight FROM edges"
                                                           " ORDER BY dst, src")),
     "DROP TABLE edges"),
    # 10: a session's units by granularity and where their turns end, so an append reads the session's tail alone.
    (TAIL_INDEX.format(user=""),),
)

#: Version of the on-disk schema this code reads and writes.
SCHEMA_VERSION = len(MIGRATIONS)


#: Seconds a delete waits, in all, for other connections' read transactions to end so that it can
#: empty the write-ahead log; checkpoint attempts poll in steps of ``_FORGET_STEP_MS``.
_FORGET_WAIT = 2.0
_FORGET_STEP_MS = 50


def _row_id(cursor: sqlite3.Cursor) -> int:
    """The id of the row an INSERT just wrote (set by every INSERT of one row)."""
    assert cursor.lastrowid is not None
    return cursor.lastrowid


class _ThreadState(threading.local):
    """What one thread holds in one store: its read connection and the depth of its open blocks."""

    def __init__(self) -> None:
        self.reader: sqlite3.Connection | None = None
        self.read_depth = 0
        self.write_depth = 0
        self.deleted = False  # the open write transaction deleted something: empty the WAL after it


class SQLiteStore(SQLStore):
    """A :class:`~memgas.store.sql.SQLStore` in one SQLite file, or in memory.

    Several threads may share a store object and several processes may open the same file (WAL
    journal, ``timeout`` seconds of waiting for another writer's lock). Writes go through one
    connection, held by one thread at a time for a whole :meth:`writing` block or write call; each is
    a ``BEGIN IMMEDIATE`` transaction, so a failure or a crash mid-write leaves nothing of it. Reads
    in a file use one connection per thread, so they never wait for a writer; in memory they share
    the one connection. Never use a store object in a child process created by ``fork``: open a new one.

    Args:
        path: the database file (created, with its parent directories, if missing), or
            ``":memory:"`` for a store that lives as long as this object.
        timeout: seconds to wait for another connection's lock before failing.

    Raises:
        InvalidInputError: the file is not a SQLite database, holds other tables than a memgas
            store's, or was written by a newer memgas (schema version above :data:`SCHEMA_VERSION`).
    """

    def __init__(self, path: str | Path = ":memory:", *, timeout: float = 30.0) -> None:
        self._path = None if str(path) == ":memory:" else Path(path).expanduser()
        self._timeout = timeout
        # Held by the thread that writes (for a whole writing() block), and in memory by the
        # thread that reads too, since there every read shares the one connection.
        self._lock = threading.RLock()
        self._state = _ThreadState()
        self._readers: list[tuple[threading.Thread, sqlite3.Connection]] = []
        self._readers_lock = threading.Lock()
        self._generation = 0
        self._wal_dirty = False  # a committed delete whose text may still be in the WAL
        self._conn: sqlite3.Connection | None = None
        if self._path is not None:
            self._path.parent.mkdir(parents=True, exist_ok=True)
        conn = None
        try:
            conn = self._connect()
            self._conn = conn
            self._init_schema()
            # WAL only once the file is known to be a memgas store: a refused foreign file keeps its bytes.
            if self._path is not None:
                conn.execute("PRAGMA journal_mode = WAL")
        except BaseException as exc:
            if conn is not None:
                conn.close()
            self._conn = None
            if isinstance(exc, sqlite3.DatabaseError):
                raise InvalidInputError(f"cannot open {path} as a memgas store: {exc}") from exc
            raise

    def _connect(self) -> sqlite3.Connection:
        """A new connection with the store's settings (write connection, or a thread's reader)."""
        # isolation_level=None: the module never opens transactions by itself; _read/_write do.
        conn = sqlite3.connect(
            ":memory:" if self._path is None else str(self._path),
            timeout=self._timeout,
            isolation_level=None,
            check_same_thread=False,
        )
        try:
            conn.execute("PRAGMA foreign_keys = ON")
            # Deleted content is overwritten with zeros instead of lingering in free pages.
            conn.execute("PRAGMA secure_delete = ON")
            conn.execute("PRAGMA synchronous = NORMAL")
        except BaseException:
            conn.close()
            raise
        return conn

    def _init_schema(self) -> None:
        """Create the schema in a new database or apply pending migrations; refuse a foreign or newer one.

        The version lives in ``PRAGMA user_version`` (the file header, written in the same transaction
        as the migration, and present in every file memgas ever wrote); :attr:`schema_upgrade` records
        what was found.
        """
        found = version = self._conn.execute("PRAGMA user_version").fetchone()[0]  # type: ignore[union-attr]
        if version < SCHEMA_VERSION:
            with self._write() as conn:
                # Re-read under the write lock: another process may have migrated it meanwhile.
                found = version = conn.execute("PRAGMA user_version").fetchone()[0]
                if version == 0 and conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
                    raise InvalidInputError(f"{self._path} is a SQLite database but not a memgas store")
                if version < SCHEMA_VERSION:
                    for statements in MIGRATIONS[version:]:
                        for statement in statements:
                            if not callable(statement):
                                conn.execute(statement)
                            elif found:  # a step in Python re-encodes rows or mends a column: nothing to do yet
                                statement(conn)
                    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                    version = SCHEMA_VERSION
            if found < 9 and self._path is not None and found:
                # Schema 6 re-encoded the vectors in place, 9 packed the messages: give the freed pages back.
                self._writer().execute("VACUUM")
        if version > SCHEMA_VERSION:
            raise InvalidInputError(
                f"{self._path} has store schema version {version}, newer than this memgas supports "
                f"({SCHEMA_VERSION}); upgrade memgas to open it"
            )
        #: ``(version found at open, version now)``; 0 found means the schema was created.
        self.schema_upgrade: tuple[int, int] = (found, version)

    # -- transactions ------------------------------------------------------------------------
    def _writer(self) -> sqlite3.Connection:
        conn = self._conn
        if conn is None:
            raise MemgasError("the store is closed")
        return conn

    def _reader(self) -> sqlite3.Connection:
        """This thread's read connection: its own in a file (opened on first use), the shared one in memory."""
        writer = self._writer()
        if self._path is None:
            return writer
        conn = self._state.reader
        if conn is None:
            conn = self._connect()
            conn.execute("PRAGMA query_only = ON")
            with self._readers_lock:
                if self._conn is None:  # closed meanwhile
                    conn.close()
                    raise MemgasError("the store is closed")
                # Threads that ended took their slot with them; close their connections here.
                for thread, old in self._readers:
                    if not thread.is_alive():
                        old.close()
                self._readers = [(t, c) for t, c in self._readers if t.is_alive()]
                self._readers.append((threading.current_thread(), conn))
            self._state.reader = conn
        return conn

    @contextmanager
    def _read(self, user_id: str | None = None) -> Iterator[sqlite3.Connection]:
        """The connection to read from, inside one read transaction: the thread's open write or read
        transaction if there is one (joined), else a new snapshot on its reader, ended on exit."""
        state = self._state
        if state.write_depth:
            yield self._joined()
            return
        if state.read_depth:
            state.read_depth += 1
            try:
                yield self._reader()
            finally:
                state.read_depth -= 1
            return
        # In memory the snapshot is the shared connection's, so it holds the lock throughout.
        with self._lock if self._path is None else nullcontext():
            conn = self._reader()
            conn.execute("BEGIN")
            state.read_depth = 1
            try:
                yield conn
            finally:
                state.read_depth = 0
                if conn.in_transaction:
                    conn.execute("ROLLBACK")  # a read-only transaction: ending it is all there is to do

    def _joined(self) -> sqlite3.Connection:
        """The write connection of this thread's open write transaction, which must still be open."""
        conn = self._writer()
        if not conn.in_transaction:  # SQLite rolled it back by itself (disk full): autocommit must not follow
            raise MemgasError("the store's write transaction was rolled back by an earlier error")
        return conn

    @contextmanager
    def _write(self, user_id: str | None = None) -> Iterator[sqlite3.Connection]:
        """The write connection inside one write transaction: committed on exit, rolled back on any
        exception. Inside an open one a savepoint keeps the inner block atomic by itself. ``user_id``
        changes nothing: SQLite has one writer per file, so every write holds the one lock."""
        state = self._state
        if state.write_depth:
            conn = self._joined()
            name = f"w{state.write_depth}"
            conn.execute(f"SAVEPOINT {name}")
            state.write_depth += 1
            try:
                yield conn
            except BaseException:
                if conn.in_transaction:
                    conn.execute(f"ROLLBACK TO {name}")
                    conn.execute(f"RELEASE {name}")
                self._generation += 1
                raise
            else:
                conn.execute(f"RELEASE {name}")
            finally:
                state.write_depth -= 1
            return
        if state.read_depth:
            raise MemgasError("cannot write inside store.reading(): its snapshot would not see the write; "
                              "use store.writing() for a block that reads and writes")
        with self._lock:
            conn = self._writer()
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc):
                    raise
                # another process held the file's write lock past the timeout: the caller may retry, nothing was written
                raise UnavailableError(f"the store {self._path} stayed locked by another writer for {self._timeout:g} s;"
                                       " nothing was written, try again") from None
            state.write_depth, state.deleted = 1, False
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:  # some errors (disk full) already rolled back
                    conn.execute("ROLLBACK")
                # Reads made inside saw rows, ids and versions that are gone now and may be reused.
                self._generation += 1
                raise
            finally:
                state.write_depth = 0
            if self._path is not None and (state.deleted or self._wal_dirty):
                self._wal_dirty = True
                try:
                    self._empty_wal(conn, _FORGET_WAIT if state.deleted else 0.0)
                except sqlite3.Error:
                    pass  # the write is committed and must be reported so; the next write or close retries

    def _empty_wal(self, conn: sqlite3.Connection, wait: float) -> None:
        """Copy the write-ahead log into the database and truncate it, so deleted text leaves the
        ``-wal`` file (its pages in the database are zeroed by ``secure_delete``).

        An open read transaction of another connection keeps the frames it may still read: the
        truncation is retried for ``wait`` seconds, then left to the next write or :meth:`close`.
        """
        conn.execute(f"PRAGMA busy_timeout = {_FORGET_STEP_MS}")
        try:
            deadline = time.monotonic() + wait
            while True:
                busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
                if not busy or time.monotonic() >= deadline:
                    break
        finally:
            conn.execute(f"PRAGMA busy_timeout = {int(self._timeout * 1000)}")
        self._wal_dirty = bool(busy)

    @contextmanager
    def reading(self, user_id: str | None = None) -> Iterator[None]:
        """Every read of this thread inside sees one snapshot (one SQLite read transaction); ``user_id`` is not used.

        Reentrant; inside :meth:`writing` it joins the write transaction. A write started inside it
        (outside ``writing()``) raises :class:`MemgasError`. In a file the snapshot is this thread's
        own connection, so it neither waits for nor blocks writers; it does keep the WAL from being
        emptied after a delete until it ends (keep read blocks short).
        """
        with self._read():
            yield

    @contextmanager
    def writing(self, user_id: str) -> Iterator[None]:
        """Hold the store's write lock (SQLite has one writer per file, so this serialises every user):
        reads and writes of this thread inside are one ``BEGIN IMMEDIATE`` transaction, committed on
        exit and rolled back on an exception. Reentrant for any user (nested blocks join; each nested
        block and write call is atomic by itself through a savepoint).

        Raises:
            InvalidInputError: an invalid user id.
            MemgasError: called inside :meth:`reading` (outside ``writing()``), or the store is closed.
        """
        check_id("user_id", user_id)
        with self._write():
            yield

    @property
    def generation(self) -> int:
        """How many write transactions (or parts of one) this store object rolled back; see
        :attr:`Store.generation`. SQLite rolls back AUTOINCREMENT ids and version counters too."""
        return self._generation

    @property
    def path(self) -> Path | None:
        """The database file, or ``None`` for an in-memory store."""
        return self._path

    def __repr__(self) -> str:
        return f"SQLiteStore({str(self._path) if self._path else ':memory:'!r})"

    # -- what differs from PostgreSQL ----------------------------------------------------------
    _UNIT_COLUMNS = ("SELECT u.id, s.session_id, u.granularity, u.turn_start, u.turn_end, u.chunk, u.text, u.msg_start,"
                     " u.msg_end, u.session_pk, u.vector"
                     " FROM units u JOIN sessions s ON s.pk = u.session_pk")
    _LINKS_HEAD = "lower(hex(substr(links, 1, 2)))"

    def _messages(self, conn: sqlite3.Connection, user_id: str, session_pk: int) -> list[Any]:
        return conn.execute(
            "SELECT role, content, name, metadata FROM messages WHERE session_pk = ? ORDER BY position", (session_pk,)
        ).fetchall()

    def _new_version(self, conn: sqlite3.Connection, user_id: str) -> None:
        conn.execute("UPDATE meta SET value = value + 1 WHERE key = 'version_seq'")
        conn.execute(
            "INSERT INTO users (user_id, version) SELECT ?, value FROM meta WHERE key = 'version_seq'"
            " ON CONFLICT (user_id) DO UPDATE SET version = excluded.version",
            (user_id,),
        )

    def _deleted(self) -> None:
        self._state.deleted = True  # _write empties the WAL once the transaction commits

    def _storage(self, conn: sqlite3.Connection) -> dict[str, Any]:
        file_bytes = None
        if self._path is not None:
            files = (self._path, self._path.with_name(self._path.name + "-wal"))
            file_bytes = sum(f.stat().st_size for f in files if f.exists())
        return {"path": None if self._path is None else str(self._path), "file_bytes": file_bytes}

    # -- writes ------------------------------------------------------------------------------
    def _insert_session(self, conn: sqlite3.Connection, row: tuple[Any, ...]) -> int:
        return _row_id(conn.execute(
            "INSERT INTO sessions (user_id, session_id, timestamp, metadata, n_messages, n_turns, created_at,"
            " agent_id, run_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", row))

    def _insert_messages(self, conn: sqlite3.Connection, user_id: str, session_pk: int, start: int,
                         rows: list[tuple[Any, ...]]) -> None:
        conn.executemany(
            "INSERT INTO messages (session_pk, position, role, name, content, metadata) VALUES (?, ?, ?, ?, ?, ?)",
            [(session_pk, start + i, *row) for i, row in enumerate(rows)],
        )

    def _new_unit_ids(self, conn: sqlite3.Connection, n: int) -> list[int]:
        # What AUTOINCREMENT would hand out (past the largest id ever used, kept in sqlite_sequence), drawn under the
        # write lock so that each unit's links, which name ids, are packed before its row is written.
        row = conn.execute("SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'units'), 0),"
                           " coalesce((SELECT max(id) FROM units), 0))").fetchone()
        return list(range(int(row[0]) + 1, int(row[0]) + 1 + n))

    @staticmethod
    def _check_endpoints(conn: sqlite3.Connection, user_id: str, unit_ids: set[int]) -> None:
        """Raise :class:`InvalidInputError` unless every id is a stored unit of ``user_id``."""
        if not unit_ids:
            return
        found = {
            row[0]
            for row in conn.execute(
                "SELECT id FROM units WHERE user_id = ? AND id IN (SELECT value FROM json_each(?))",
                (user_id, json.dumps(sorted(unit_ids))),
            )
        }
        missing = sorted(unit_ids - found)
        if missing:
            # Same message whether the unit is absent or another user's: tenants stay invisible.
            raise InvalidInputError(f"edge endpoint {missing[0]} is not a unit of user {user_id!r}")

    def close(self) -> None:
        """Close every connection (idempotent), first emptying the WAL if a delete could not.
        Any later call raises :class:`MemgasError`."""
        with self._lock:
            if self._conn is None:
                return
            if self._wal_dirty:
                try:
                    self._empty_wal(self._conn, _FORGET_WAIT)
                except sqlite3.Error:
                    pass  # closing must not fail; the last connection to close checkpoints anyway
            with self._readers_lock:
                for _, conn in self._readers:
                    conn.close()
                self._readers = []
                self._conn.close()
                self._conn = None
