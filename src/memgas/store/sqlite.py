"""SQLite storage backend: one file (or memory) holding every user's sessions, units and edges.

Schema (version :data:`SCHEMA_VERSION`, kept in ``PRAGMA user_version``):

* ``meta(key, value)``: ``embedder_id``, ``dim`` (set once by :meth:`SQLiteStore.bind_embedder`)
  and ``version_seq``, the store-wide counter that user versions are drawn from.
* ``users(user_id, version)``: one row per user that has at least one session.
* ``sessions(pk, user_id, session_id, timestamp, metadata, n_messages, n_turns, created_at)``,
  unique on ``(user_id, session_id)``; ``timestamp`` and ``created_at`` are ISO 8601 text,
  ``metadata`` is JSON.
* ``messages(session_pk, position, role, name, content)``.
* ``units(id, session_pk, user_id, granularity, turn_start, turn_end, chunk, text, vector)``:
  ``granularity`` indexes :data:`memgas.model.GRANULARITIES`, ``vector`` is little-endian float32
  bytes. ``id`` is ``AUTOINCREMENT`` so a deleted unit's id is never handed out again.
* ``edges(src, dst, weight, user_id)``: each undirected edge stored once, with ``src < dst``.

Deleting a session cascades (foreign keys) to its messages, its units and every edge touching
those units, whichever session the other endpoint belongs to.

Concurrency: one write connection per store object, used by one thread at a time, and in a file
one read connection per thread (WAL), so a search reads its snapshot while another thread or
process holds the write lock for a whole association step. Forgetting: every connection sets
``secure_delete`` (freed pages are zeroed), and a delete empties the write-ahead log afterwards.
"""

from __future__ import annotations

import json
import operator
import sqlite3
import threading
import time
from contextlib import contextmanager, nullcontext
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np

from ..model import (
    GRANULARITIES,
    DuplicateSessionError,
    Edge,
    EmbedderMismatchError,
    InvalidInputError,
    MemgasError,
    Message,
    NotFoundError,
    Session,
    Unit,
    check_id,
    parse_timestamp,
)
from .base import EdgeTable, SessionInfo, Store, UnitTable

__all__ = ["SQLiteStore", "SCHEMA_VERSION", "MIGRATIONS"]

#: Vectors are stored as little-endian float32 so files move between machines.
_VEC_DTYPE = np.dtype("<f4")

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
MIGRATIONS: tuple[tuple[str, ...], ...] = (_SCHEMA,)

#: Version of the on-disk schema this code reads and writes.
SCHEMA_VERSION = len(MIGRATIONS)


def _unit_rows(session: Session, units: Sequence[Unit], dim: int | None) -> list[tuple[Any, ...]]:
    """Validate a call's units; return ``(granularity, turn_start, turn_end, chunk, text, vector bytes)`` rows.

    Raises:
        InvalidInputError: a unit of another session, an unknown granularity, a turn range outside
            the session, or a missing, mis-sized or non-finite vector (or no embedder bound yet).
    """
    if units and dim is None:
        raise InvalidInputError("the store has no embedder yet: call bind_embedder before adding units")
    n_turns = len(session.turns)
    rows = []
    for i, u in enumerate(units):
        if u.session_id != session.session_id:
            raise InvalidInputError(f"unit {i} belongs to session {u.session_id!r}, not {session.session_id!r}")
        if u.granularity not in GRANULARITIES:
            raise InvalidInputError(f"unit {i}: unknown granularity {u.granularity!r}; expected one of {GRANULARITIES}")
        try:
            start, end, chunk = operator.index(u.turn_start), operator.index(u.turn_end), operator.index(u.chunk)
        except TypeError:
            raise InvalidInputError(f"unit {i}: turn_start, turn_end and chunk must be integers") from None
        if not 0 <= start < end <= n_turns or chunk < 0:
            raise InvalidInputError(
                f"unit {i}: turns [{start}, {end}) chunk {chunk} do not fit a session of {n_turns} turns"
            )
        if not isinstance(u.text, str):
            raise InvalidInputError(f"unit {i}: text must be a string, got {type(u.text).__name__}")
        if u.vector is None:
            raise InvalidInputError(f"unit {i} has no vector")
        vec = np.asarray(u.vector)
        if vec.shape != (dim,) or not (np.issubdtype(vec.dtype, np.floating) or np.issubdtype(vec.dtype, np.integer)):
            raise InvalidInputError(
                f"unit {i}: vector of shape {vec.shape} and dtype {vec.dtype}; the store's embedder gives {dim} floats"
            )
        vec = vec.astype(_VEC_DTYPE)
        if not np.isfinite(vec).all():
            raise InvalidInputError(f"unit {i}: vector has NaN or infinite values")
        rows.append((GRANULARITIES.index(u.granularity), start, end, chunk, u.text, vec.tobytes()))
    return rows


def _edge_rows(edges: Sequence[Edge], n_new: int) -> list[tuple[int, int, float]]:
    """Validate a call's edges; return ``(src, dst, weight)`` rows, endpoints still unresolved.

    Raises:
        InvalidInputError: an endpoint that is 0, a negative reference past this call's units,
            an edge between two stored units, a self-loop, or a weight that is not a positive finite number.
    """
    rows = []
    for i, e in enumerate(edges):
        try:
            src, dst, weight = operator.index(e.src), operator.index(e.dst), float(e.weight)
        except (TypeError, ValueError):
            raise InvalidInputError(f"edge {i}: endpoints must be integers and weight a number") from None
        for end in (src, dst):
            if end == 0 or end < -n_new:
                raise InvalidInputError(
                    f"edge {i}: endpoint {end} is neither a stored unit id (> 0) nor one of this call's "
                    f"{n_new} units (-1 .. -{n_new})"
                )
        if src > 0 and dst > 0:
            # Edges are written with their newer unit, which is what makes load_edges_after exact.
            raise InvalidInputError(
                f"edge {i}: links two stored units ({src}, {dst}); one end must be a unit of this call"
            )
        if src == dst:
            raise InvalidInputError(f"edge {i}: a unit cannot be linked to itself ({src})")
        if not (np.isfinite(weight) and weight > 0):
            raise InvalidInputError(f"edge {i}: weight {weight!r} is not a positive finite number")
        rows.append((src, dst, weight))
    return rows


#: Seconds a delete waits, in all, for other connections' read transactions to end so that it can
#: empty the write-ahead log; checkpoint attempts poll in steps of ``_FORGET_STEP_MS``.
_FORGET_WAIT = 2.0
_FORGET_STEP_MS = 50


class _ThreadState(threading.local):
    """What one thread holds in one store: its read connection and the depth of its open blocks."""

    def __init__(self) -> None:
        self.reader: sqlite3.Connection | None = None
        self.read_depth = 0
        self.write_depth = 0
        self.deleted = False  # the open write transaction deleted something: empty the WAL after it


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _datetime(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


class SQLiteStore(Store):
    """A :class:`~memgas.store.base.Store` in one SQLite file, or in memory.

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
                            conn.execute(statement)
                    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                    version = SCHEMA_VERSION
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
    def _read(self) -> Iterator[sqlite3.Connection]:
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
    def _write(self) -> Iterator[sqlite3.Connection]:
        """The write connection inside one write transaction: committed on exit, rolled back on any
        exception. Inside an open one a savepoint keeps the inner block atomic by itself."""
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
            conn.execute("BEGIN IMMEDIATE")
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
    def reading(self) -> Iterator[None]:
        """Every read of this thread inside sees one snapshot (one SQLite read transaction).

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

    # -- embedder binding -------------------------------------------------------------------
    @staticmethod
    def _meta(conn: sqlite3.Connection, key: str) -> Any:
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else row[0]

    def bind_embedder(self, embedder_id: str, dim: int) -> None:
        """Record the embedder of this store on first call; afterwards refuse any other.

        Args:
            embedder_id: a stable name of the embedding model (and its settings).
            dim: the model's vector dimension.

        Raises:
            InvalidInputError: an empty id or a non-positive dimension.
            EmbedderMismatchError: the store is bound to another embedder id or dimension.
        """
        if not isinstance(embedder_id, str) or not embedder_id:
            raise InvalidInputError(f"invalid embedder id {embedder_id!r}")
        if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or dim <= 0:
            raise InvalidInputError(f"invalid embedding dimension {dim!r}")
        with self._write() as conn:
            bound_id, bound_dim = self._meta(conn, "embedder_id"), self._meta(conn, "dim")
            if bound_id is None:
                conn.executemany(
                    "INSERT INTO meta (key, value) VALUES (?, ?)", [("embedder_id", embedder_id), ("dim", int(dim))]
                )
            elif (bound_id, bound_dim) != (embedder_id, dim):
                raise EmbedderMismatchError(
                    f"store is bound to embedder {bound_id!r} (dim {bound_dim}); "
                    f"cannot use embedder {embedder_id!r} (dim {dim})"
                )

    @property
    def embedder_id(self) -> str | None:
        """The bound embedder's id, or ``None`` before :meth:`bind_embedder` was first called."""
        with self._read() as conn:
            return self._meta(conn, "embedder_id")

    # -- writes ------------------------------------------------------------------------------
    def add_session(self, session: Session, units: Sequence[Unit], edges: Sequence[Edge]) -> list[int]:
        """Write a session, its units and edges in one transaction; return the new unit ids in order.

        Args:
            session: the validated session (see :func:`memgas.model.make_session`).
            units: its units, each with a vector of the bound embedder's dimension.
            edges: undirected edges; an endpoint is a stored unit id of the same user, or
                ``-(i + 1)`` for the ``i``-th unit of ``units``. A pair given twice (either way
                round, or already stored) keeps the larger weight.

        Raises:
            DuplicateSessionError: the user already has a session with this id.
            InvalidInputError: an invalid session, unit or edge, or an edge endpoint that is not a
                unit of this user (nothing is written).
        """
        user_id = check_id("user_id", session.user_id)
        session_id = check_id("session_id", session.session_id)
        if not session.messages:
            raise InvalidInputError(f"session {session_id!r} is empty: it needs at least one message")
        timestamp = _iso(parse_timestamp(session.timestamp))
        try:
            metadata = json.dumps(dict(session.metadata), ensure_ascii=False)
        except (TypeError, ValueError) as exc:
            raise InvalidInputError(f"session {session_id!r}: metadata is not JSON-serialisable: {exc}") from None
        edge_rows = _edge_rows(edges, len(units))
        with self._write() as conn:
            unit_rows = _unit_rows(session, units, self._meta(conn, "dim"))
            if conn.execute(
                "SELECT 1 FROM sessions WHERE user_id = ? AND session_id = ?", (user_id, session_id)
            ).fetchone():
                raise DuplicateSessionError(f"user {user_id!r} already has a session {session_id!r}")
            self._check_endpoints(conn, user_id, {n for row in edge_rows for n in row[:2] if n > 0})
            session_pk = conn.execute(
                "INSERT INTO sessions (user_id, session_id, timestamp, metadata, n_messages, n_turns, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (user_id, session_id, timestamp, metadata, len(session.messages), len(session.turns),
                 datetime.now(timezone.utc).isoformat()),
            ).lastrowid
            conn.executemany(
                "INSERT INTO messages (session_pk, position, role, name, content) VALUES (?, ?, ?, ?, ?)",
                [(session_pk, i, m.role, m.name, m.content) for i, m in enumerate(session.messages)],
            )
            # One execute per unit: lastrowid is the only portable way to learn each new id.
            ids = [
                conn.execute(
                    "INSERT INTO units (session_pk, user_id, granularity, turn_start, turn_end, chunk, text, vector)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (session_pk, user_id, *row),
                ).lastrowid
                for row in unit_rows
            ]

            def resolve(n: int) -> int:
                return n if n > 0 else ids[-n - 1]

            conn.executemany(
                "INSERT INTO edges (src, dst, weight, user_id) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (src, dst) DO UPDATE SET weight = max(weight, excluded.weight)",
                [(*sorted((resolve(src), resolve(dst))), weight, user_id) for src, dst, weight in edge_rows],
            )
            self._touch(conn, user_id)
        return ids

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

    @staticmethod
    def _touch(conn: sqlite3.Connection, user_id: str) -> None:
        """Give the user a new version after a write, or drop the user once no session is left.

        Versions come from one store-wide counter, so a user deleted and re-created never sees
        an old version number again (a cache keyed on it cannot go stale); a user without
        sessions has version 0, like one never seen.
        """
        if conn.execute("SELECT 1 FROM sessions WHERE user_id = ? LIMIT 1", (user_id,)).fetchone():
            conn.execute("UPDATE meta SET value = value + 1 WHERE key = 'version_seq'")
            conn.execute(
                "INSERT INTO users (user_id, version) SELECT ?, value FROM meta WHERE key = 'version_seq'"
                " ON CONFLICT (user_id) DO UPDATE SET version = excluded.version",
                (user_id,),
            )
        else:
            conn.execute("DELETE FROM users WHERE user_id = ?", (user_id,))

    def delete_session(self, user_id: str, session_id: str) -> None:
        """Delete a session with its messages, units and every edge touching them, and forget them.

        ``secure_delete`` zeroes the freed space in the database pages, and once the write transaction
        commits (at the end of this call, or of the :meth:`writing` block around it) the write-ahead log
        is checkpointed and truncated, so the text is in no file of the store. Limits: a read
        transaction of another connection that stays open longer than a couple of seconds keeps the
        log from being truncated (the next write or :meth:`close` retries); copies outside SQLite's
        files (backups, the file system's or the disk's own remapping of freed blocks) are out of reach.

        Raises:
            NotFoundError: the user has no such session.
        """
        with self._write() as conn:
            if not conn.execute(
                "DELETE FROM sessions WHERE user_id = ? AND session_id = ?", (user_id, session_id)
            ).rowcount:
                raise NotFoundError(f"user {user_id!r} has no session {session_id!r}")
            self._touch(conn, user_id)
            self._state.deleted = True

    def delete_user(self, user_id: str) -> int:
        """Delete all of a user's sessions, messages, units and edges, forgotten as by
        :meth:`delete_session`; return the number of sessions.

        Raises:
            NotFoundError: the user has no stored session.
        """
        with self._write() as conn:
            n = conn.execute("DELETE FROM sessions WHERE user_id = ?", (user_id,)).rowcount
            if not n:
                raise NotFoundError(f"no user {user_id!r}")
            self._touch(conn, user_id)
            self._state.deleted = True
        return n

    # -- reads -------------------------------------------------------------------------------
    def has_user(self, user_id: str) -> bool:
        """Whether the user has any stored session."""
        with self._read() as conn:
            return conn.execute("SELECT 1 FROM users WHERE user_id = ?", (user_id,)).fetchone() is not None

    def list_users(self) -> list[str]:
        """All user ids with at least one session, sorted."""
        with self._read() as conn:
            return [row[0] for row in conn.execute("SELECT user_id FROM users ORDER BY user_id")]

    def list_sessions(self, user_id: str) -> list[SessionInfo]:
        """The user's session headers, oldest first: by timestamp, sessions without one last, then insertion."""
        with self._read() as conn:
            rows = conn.execute(
                "SELECT session_id, timestamp, n_messages, n_turns, created_at FROM sessions WHERE user_id = ?"
                " ORDER BY timestamp IS NULL, timestamp, pk",
                (user_id,),
            ).fetchall()
        return [
            SessionInfo(session_id=sid, timestamp=_datetime(ts), n_messages=n_msg, n_turns=n_turns,
                        created_at=datetime.fromisoformat(created))
            for sid, ts, n_msg, n_turns, created in rows
        ]

    def get_session(self, user_id: str, session_id: str) -> Session:
        """The stored session with its messages, timestamp and metadata.

        Raises:
            NotFoundError: the user has no such session.
        """
        with self._read() as conn:
            row = conn.execute(
                "SELECT pk, timestamp, metadata FROM sessions WHERE user_id = ? AND session_id = ?",
                (user_id, session_id),
            ).fetchone()
            if row is None:
                raise NotFoundError(f"user {user_id!r} has no session {session_id!r}")
            messages = conn.execute(
                "SELECT role, content, name FROM messages WHERE session_pk = ? ORDER BY position", (row[0],)
            ).fetchall()
        return Session(
            user_id=user_id,
            session_id=session_id,
            messages=tuple(Message(role, content, name) for role, content, name in messages),
            timestamp=_datetime(row[1]),
            metadata=json.loads(row[2]),
        )

    _UNIT_COLUMNS = ("SELECT u.id, s.session_id, u.granularity, u.turn_start, u.turn_end, u.chunk, u.text, u.vector"
                     " FROM units u JOIN sessions s ON s.pk = u.session_pk")

    @staticmethod
    def _unit_table(rows: list[Any], dim: int) -> UnitTable:
        if not rows:
            return UnitTable.empty(dim)
        ids, session_ids, granularity, turn_start, turn_end, chunk, texts, blobs = zip(*rows)
        vectors = np.frombuffer(b"".join(blobs), dtype=_VEC_DTYPE).reshape(len(rows), dim)
        return UnitTable(
            ids=np.array(ids, dtype=np.int64),
            session_ids=session_ids,
            granularity=np.array(granularity, dtype=np.int8),
            turn_start=np.array(turn_start, dtype=np.int32),
            turn_end=np.array(turn_end, dtype=np.int32),
            chunk=np.array(chunk, dtype=np.int32),
            texts=texts,
            vectors=vectors.astype(np.float32, copy=False),
        )

    def load_units(self, user_id: str) -> UnitTable:
        """All units of a user, by ascending id; an empty table for an unknown user.

        The vectors matrix is read-only: it is one view over the rows' joined bytes, and tables
        are meant to be shared snapshots.
        """
        with self._read() as conn:
            dim = self._meta(conn, "dim") or 0
            rows = conn.execute(self._UNIT_COLUMNS + " WHERE u.user_id = ? ORDER BY u.id", (user_id,)).fetchall()
        return self._unit_table(rows, dim)

    def load_units_after(self, user_id: str, after_id: int) -> tuple[int, UnitTable]:
        """The count of the user's units with ids ``<= after_id`` and the units added after, in one
        transaction (ids come from AUTOINCREMENT and are never reused)."""
        with self._read() as conn:
            dim = self._meta(conn, "dim") or 0
            kept = conn.execute("SELECT COUNT(*) FROM units WHERE user_id = ? AND id <= ?",
                                (user_id, after_id)).fetchone()[0]
            rows = conn.execute(self._UNIT_COLUMNS + " WHERE u.user_id = ? AND u.id > ? ORDER BY u.id",
                                (user_id, after_id)).fetchall()
        return int(kept), self._unit_table(rows, dim)

    def load_edges(self, user_id: str) -> EdgeTable:
        """All edges among a user's units, each undirected edge once with ``src < dst``, sorted."""
        with self._read() as conn:
            rows = conn.execute(
                "SELECT src, dst, weight FROM edges WHERE user_id = ? ORDER BY src, dst", (user_id,)
            ).fetchall()
        return self._edge_table(rows)

    def load_edges_after(self, user_id: str, after_id: int) -> EdgeTable:
        """The user's edges with ``dst > after_id`` (those touching a unit newer than ``after_id``), sorted.

        Read through the ``dst`` index, so the cost follows the edges written since ``after_id`` (of
        every user: ids are store-wide), not the user's whole graph.
        """
        with self._read() as conn:
            rows = conn.execute(
                "SELECT src, dst, weight FROM edges INDEXED BY edges_dst WHERE dst > ? AND user_id = ?"
                " ORDER BY src, dst",
                (int(after_id), user_id),
            ).fetchall()
        return self._edge_table(rows)

    @staticmethod
    def _edge_table(rows: list[Any]) -> EdgeTable:
        src, dst, weight = zip(*rows) if rows else ((), (), ())
        return EdgeTable(
            src=np.array(src, dtype=np.int64), dst=np.array(dst, dtype=np.int64),
            weight=np.array(weight, dtype=np.float32),
        )

    def version(self, user_id: str) -> int:
        """A number that changes with every write to the user's memory (0 for a user without sessions)."""
        with self._read() as conn:
            row = conn.execute("SELECT version FROM users WHERE user_id = ?", (user_id,)).fetchone()
        return 0 if row is None else int(row[0])

    def stats(self, user_id: str | None = None) -> dict[str, Any]:
        """Counts for one user, or for the whole store when ``user_id`` is ``None``.

        Returns:
            ``users``, ``sessions``, ``turns``, ``messages``, ``units`` (a dict by granularity
            name), ``edges``, ``embedder_id``, ``dim``, ``path`` and ``file_bytes`` (database
            plus write-ahead log on disk; ``None`` in memory).
        """
        where, args = ("WHERE user_id = ?", (user_id,)) if user_id is not None else ("", ())
        with self._read() as conn:
            n_users = conn.execute(f"SELECT count(*) FROM users {where}", args).fetchone()[0]
            n_sessions, n_turns, n_messages = conn.execute(
                f"SELECT count(*), coalesce(sum(n_turns), 0), coalesce(sum(n_messages), 0) FROM sessions {where}", args
            ).fetchone()
            per_granularity = dict(
                conn.execute(f"SELECT granularity, count(*) FROM units {where} GROUP BY granularity", args).fetchall()
            )
            n_edges = conn.execute(f"SELECT count(*) FROM edges {where}", args).fetchone()[0]
            embedder_id, dim = self._meta(conn, "embedder_id"), self._meta(conn, "dim")
        file_bytes = None
        if self._path is not None:
            files = (self._path, self._path.with_name(self._path.name + "-wal"))
            file_bytes = sum(f.stat().st_size for f in files if f.exists())
        return {
            "users": n_users,
            "sessions": n_sessions,
            "turns": n_turns,
            "messages": n_messages,
            "units": {g: per_granularity.get(i, 0) for i, g in enumerate(GRANULARITIES)},
            "edges": n_edges,
            "embedder_id": embedder_id,
            "dim": dim,
            "path": None if self._path is None else str(self._path),
            "file_bytes": file_bytes,
        }

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
