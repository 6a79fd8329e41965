"""PostgreSQL storage backend: many processes and many users on one shared database.

Schema (version :data:`SCHEMA_VERSION`, one row per applied migration in ``schema_version``): the tables
and columns of :mod:`memgas.store.sqlite`, so the two backends stay one design, with keys that lead with
``user_id`` so that the schema can be distributed by ``user_id`` (Citus) unchanged:

* ``schema_version(version, applied_at)`` and ``meta(key, value)`` (``embedder_id``, ``dim``): store-wide.
* sequences ``version_seq`` (user versions) and ``unit_ids`` (unit ids): drawn numbers are never
  handed out again, not even after a rollback.
* ``users(user_id, version)``; ``sessions(user_id, pk, session_id, timestamp, metadata, n_messages,
  n_turns, created_at)``; ``messages(user_id, session_pk, position, role, name, content)``;
  ``units(user_id, id, session_pk, granularity, turn_start, turn_end, chunk, text, vector)``;
  ``edges(user_id, src, dst, weight)``. ``vector`` is little-endian float32 ``bytea``; timestamps are
  ISO 8601 text and ids use the ``"C"`` collation, so sessions and users sort exactly as in SQLite.

Every table but ``schema_version`` and ``meta`` carries ``user_id``, and every statement on them is
scoped by it, except the two cross-user reads :meth:`PostgresStore.list_users` and
:meth:`PostgresStore.stats` without a user (multi-shard queries on a distributed cluster).

Concurrency: a connection pool shared by the store's threads. :meth:`PostgresStore.reading` is one
``REPEATABLE READ READ ONLY`` transaction per outermost block and thread; :meth:`PostgresStore.writing`
is one transaction holding ``pg_advisory_xact_lock`` on each user it writes, so the writes of one user
are serialised across every process and those of different users run in parallel.

Forgetting: PostgreSQL has no secure delete. A delete removes the rows from every query at once, but
measured on PostgreSQL 15 (a deleted secret grepped in the data folder after ``CHECKPOINT``): the text
stays in the table files after the delete and after a plain ``VACUUM`` (pruning frees the space without
zeroing it; later rows overwrite it), and leaves them only with ``VACUUM FULL`` (which rewrites the tables
under an exclusive lock); the write-ahead log, its archives and replicas keep it until they are recycled.
So a delete does not vacuum (it would not help); an operator who must erase runs ``VACUUM FULL``.
"""

from __future__ import annotations

import json
import threading
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Any, Iterator, Sequence
from urllib.parse import urlsplit, urlunsplit

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
from .sqlite import SQLiteStore, _datetime, _edge_rows, _iso, _unit_rows

__all__ = ["PostgresStore", "SCHEMA_VERSION", "MIGRATIONS", "CROSS_USER_STATEMENTS"]

#: Migrations, in order: ``MIGRATIONS[i]`` upgrades a database from schema version ``i`` to ``i + 1``.
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        "CREATE SEQUENCE version_seq",
        "CREATE SEQUENCE unit_ids",
        'CREATE TABLE users (user_id TEXT COLLATE "C" PRIMARY KEY, version BIGINT NOT NULL)',
        """CREATE TABLE sessions (
            user_id TEXT COLLATE "C" NOT NULL,
            pk BIGINT GENERATED ALWAYS AS IDENTITY,
            session_id TEXT COLLATE "C" NOT NULL,
            timestamp TEXT COLLATE "C",
            metadata TEXT NOT NULL,
            n_messages INTEGER NOT NULL,
            n_turns INTEGER NOT NULL,
            created_at TEXT NOT NULL,
            PRIMARY KEY (user_id, pk),
            UNIQUE (user_id, session_id))""",
        """CREATE TABLE messages (
            user_id TEXT COLLATE "C" NOT NULL,
            session_pk BIGINT NOT NULL,
            position INTEGER NOT NULL,
            role TEXT NOT NULL,
            name TEXT,
            content TEXT NOT NULL,
            PRIMARY KEY (user_id, session_pk, position),
            FOREIGN KEY (user_id, session_pk) REFERENCES sessions (user_id, pk) ON DELETE CASCADE)""",
        f"""CREATE TABLE units (
            user_id TEXT COLLATE "C" NOT NULL,
            id BIGINT NOT NULL,
            session_pk BIGINT NOT NULL,
            granularity SMALLINT NOT NULL CHECK (granularity BETWEEN 0 AND {len(GRANULARITIES) - 1}),
            turn_start INTEGER NOT NULL,
            turn_end INTEGER NOT NULL,
            chunk INTEGER NOT NULL,
            text TEXT NOT NULL,
            vector BYTEA NOT NULL,
            PRIMARY KEY (user_id, id),
            FOREIGN KEY (user_id, session_pk) REFERENCES sessions (user_id, pk) ON DELETE CASCADE)""",
        "CREATE INDEX units_session ON units (user_id, session_pk)",
        """CREATE TABLE edges (
            user_id TEXT COLLATE "C" NOT NULL,
            src BIGINT NOT NULL,
            dst BIGINT NOT NULL,
            weight DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (user_id, src, dst),
            FOREIGN KEY (user_id, src) REFERENCES units (user_id, id) ON DELETE CASCADE,
            FOREIGN KEY (user_id, dst) REFERENCES units (user_id, id) ON DELETE CASCADE,
            CHECK (src < dst))""",
        # The primary key serves cascades from ``src``; this index those from ``dst`` and load_edges_after.
        "CREATE INDEX edges_dst ON edges (user_id, dst)",
    ),
)

#: Version of the schema this code reads and writes.
SCHEMA_VERSION = len(MIGRATIONS)

#: The statements that read across users on purpose (everything else is scoped by ``user_id``).
CROSS_USER_STATEMENTS = frozenset({
    "SELECT user_id FROM users ORDER BY user_id",
    "SELECT count(*) FROM users ",
    "SELECT count(*), coalesce(sum(n_turns), 0), coalesce(sum(n_messages), 0) FROM sessions ",
    "SELECT granularity, count(*) FROM units  GROUP BY granularity",
    "SELECT count(*) FROM edges ",
})

#: Advisory-lock key (two-int form, a key space apart from the per-user bigint keys) of schema and meta writes.
_META_LOCK = "SELECT pg_advisory_xact_lock(1835363687, 1)"  # 'memg'
_USER_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))"


def _redact(url: str) -> str:
    """The URL without its password, for messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def _no_nul(session: Session, units: Sequence[Unit]) -> None:
    """Refuse text PostgreSQL cannot store (``text`` holds no NUL character)."""
    texts = [m.content for m in session.messages] + [m.name or "" for m in session.messages]
    if any("\x00" in t for t in texts + [u.text for u in units if isinstance(u.text, str)]):
        raise InvalidInputError(f"session {session.session_id!r}: PostgreSQL cannot store NUL characters in text")


class _ThreadState(threading.local):
    """What one thread holds in one store: its open transaction's connection and the depths of its blocks."""

    def __init__(self) -> None:
        self.conn: Any = None
        self.read_depth = 0
        self.write_depth = 0
        self.locked: list[set[str]] = []  # the users locked, per open write level

    def holds(self, user_id: str) -> bool:
        return any(user_id in level for level in self.locked)


class PostgresStore(Store):
    """A :class:`~memgas.store.base.Store` in a PostgreSQL database (psycopg 3, a connection pool).

    Any number of processes and threads may share the database; threads may share a store object.
    Opening creates the schema in an empty database and applies pending migrations (under an advisory
    lock, so concurrent openers do not race). Never use a store object in a child created by ``fork``.

    Args:
        url: a ``postgresql://user[:password]@host[:port]/dbname[?options]`` connection URL.
        max_connections: the pool's size; each thread inside a block holds one connection.
        timeout: seconds to wait for a connection (and the first connect) before failing.

    Raises:
        MemgasError: the server cannot be reached, or psycopg is not installed (``pip install memgas[postgres]``).
        InvalidInputError: the database holds other tables than a memgas store's, or a newer schema.
    """

    def __init__(self, url: str, *, max_connections: int = 16, timeout: float = 30.0) -> None:
        try:
            import psycopg
            from psycopg_pool import ConnectionPool
        except ImportError:
            raise MemgasError("the PostgreSQL store needs psycopg: pip install 'memgas[postgres]'") from None
        self._url = url
        self._state = _ThreadState()
        self._generation = 0
        self._generation_lock = threading.Lock()
        self._pool = None
        try:
            with psycopg.connect(url, autocommit=True, connect_timeout=max(1, int(timeout))) as conn:
                self.schema_upgrade = self._migrate(conn)
        except psycopg.Error as exc:
            raise MemgasError(f"cannot open PostgreSQL store {_redact(url)}: {' '.join(str(exc).split())}") from exc
        self._pool = ConnectionPool(url, min_size=1, max_size=max_connections, timeout=timeout,
                                    kwargs={"autocommit": True}, open=True, name="memgas")

    @staticmethod
    def _migrate(conn: Any) -> tuple[int, int]:
        """Create or upgrade the schema; return ``(version found, version now)`` (0 found: created).

        Raises:
            InvalidInputError: a database with foreign tables, or a newer schema.
        """
        with conn.transaction():
            conn.execute(_META_LOCK)  # one migrator at a time; the others see its result
            has_table = conn.execute("SELECT to_regclass('schema_version') IS NOT NULL").fetchone()[0]
            if has_table:
                found = conn.execute("SELECT coalesce(max(version), 0) FROM schema_version").fetchone()[0]
            else:
                foreign = conn.execute(
                    "SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()").fetchone()[0]
                if foreign:
                    raise InvalidInputError("the database is not empty and holds no memgas store")
                conn.execute("CREATE TABLE schema_version (version INTEGER PRIMARY KEY,"
                             " applied_at TIMESTAMPTZ NOT NULL DEFAULT now())")
                found = 0
            if found > SCHEMA_VERSION:
                raise InvalidInputError(f"the database has store schema version {found}, newer than this memgas "
                                        f"supports ({SCHEMA_VERSION}); upgrade memgas to open it")
            for version in range(found + 1, SCHEMA_VERSION + 1):
                for statement in MIGRATIONS[version - 1]:
                    conn.execute(statement)
                conn.execute("INSERT INTO schema_version (version) VALUES (%s)", (version,))
        return found, SCHEMA_VERSION

    # -- transactions ------------------------------------------------------------------------
    def _getconn(self) -> Any:
        if self._pool is None:
            raise MemgasError("the store is closed")
        return self._pool.getconn()

    def _rolled_back(self) -> None:
        with self._generation_lock:
            self._generation += 1

    @contextmanager
    def _read(self) -> Iterator[Any]:
        """A connection inside one snapshot: the thread's open transaction if any (joined), else a new
        ``REPEATABLE READ READ ONLY`` transaction ended on exit."""
        state = self._state
        if state.write_depth or state.read_depth:
            state.read_depth += 1
            try:
                yield state.conn
            finally:
                state.read_depth -= 1
            return
        conn = self._getconn()
        try:
            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            state.conn, state.read_depth = conn, 1
            try:
                yield conn
            finally:
                state.conn, state.read_depth = None, 0
                conn.execute("ROLLBACK")  # read only: ending it is all there is to do
        finally:
            self._pool.putconn(conn)  # type: ignore[union-attr]

    def _lock_user(self, conn: Any, user_id: str | None) -> None:
        """Take the user's advisory lock (held to the end of the transaction) unless this thread holds it."""
        state = self._state
        if user_id is None or state.holds(user_id):
            return
        conn.execute(_USER_LOCK, (user_id,))
        state.locked[-1].add(user_id)

    @contextmanager
    def _write(self, user_id: str | None) -> Iterator[Any]:
        """A connection inside one write transaction holding ``user_id``'s lock (``None``: meta only),
        committed on exit and rolled back on any exception; nested blocks are savepoints."""
        state = self._state
        if state.write_depth:
            conn = state.conn
            name = f"w{state.write_depth}"
            conn.execute(f"SAVEPOINT {name}")
            state.write_depth += 1
            state.locked.append(set())  # a lock taken in a savepoint is released when it rolls back
            try:
                self._lock_user(conn, user_id)
                yield conn
            except BaseException:
                conn.execute(f"ROLLBACK TO SAVEPOINT {name}")
                conn.execute(f"RELEASE SAVEPOINT {name}")
                state.locked.pop()
                self._rolled_back()
                raise
            else:
                conn.execute(f"RELEASE SAVEPOINT {name}")
                inner = state.locked.pop()
                state.locked[-1] |= inner  # the locks stay held to the end of the transaction
            finally:
                state.write_depth -= 1
            return
        if state.read_depth:
            raise MemgasError("cannot write inside store.reading(): its snapshot would not see the write; "
                              "use store.writing() for a block that reads and writes")
        conn = self._getconn()
        try:
            conn.execute("BEGIN")
            state.conn, state.write_depth, state.locked = conn, 1, [set()]
            try:
                self._lock_user(conn, user_id)
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                if not conn.closed:
                    conn.execute("ROLLBACK")
                self._rolled_back()
                raise
            finally:
                state.conn, state.write_depth, state.locked = None, 0, []
        finally:
            self._pool.putconn(conn)  # type: ignore[union-attr]

    @contextmanager
    def reading(self) -> Iterator[None]:
        """Every read of this thread inside sees one snapshot (a ``REPEATABLE READ READ ONLY`` transaction
        on one pooled connection). Reentrant; inside :meth:`writing` it joins the write transaction. A
        write started inside it (outside ``writing()``) raises :class:`MemgasError`."""
        with self._read():
            yield

    @contextmanager
    def writing(self, user_id: str) -> Iterator[None]:
        """Hold ``user_id``'s write lock (``pg_advisory_xact_lock``, across every process): reads and
        writes of this thread inside are one transaction, committed on exit and rolled back on an
        exception. Reentrant for any user (nested blocks are savepoints and add that user's lock).
        Other users' writes run in parallel; two threads that nest the same users in opposite orders
        may deadlock, and PostgreSQL then fails one of them.

        Raises:
            InvalidInputError: an invalid user id.
            MemgasError: called inside :meth:`reading` (outside ``writing()``), or the store is closed.
        """
        check_id("user_id", user_id)
        with self._write(user_id):
            yield

    @property
    def generation(self) -> int:
        """How many write transactions (or parts of one) this store object rolled back; see
        :attr:`Store.generation`. PostgreSQL never hands out unit ids or versions again, but what a
        rolled-back transaction read is gone."""
        return self._generation

    @property
    def path(self) -> None:
        """``None``: the store is no file."""
        return None

    def __repr__(self) -> str:
        return f"PostgresStore({_redact(self._url)!r})"

    # -- embedder binding -------------------------------------------------------------------
    @staticmethod
    def _meta(conn: Any, key: str) -> str | None:
        row = conn.execute("SELECT value FROM meta WHERE key = %s", (key,)).fetchone()
        return None if row is None else row[0]

    def _dim(self, conn: Any) -> int | None:
        dim = self._meta(conn, "dim")
        return None if dim is None else int(dim)

    def bind_embedder(self, embedder_id: str, dim: int) -> None:
        """Record the embedder of this store on first call; afterwards refuse any other.

        Raises:
            InvalidInputError: an empty id or a non-positive dimension.
            EmbedderMismatchError: the store is bound to another embedder id or dimension.
        """
        if not isinstance(embedder_id, str) or not embedder_id:
            raise InvalidInputError(f"invalid embedder id {embedder_id!r}")
        if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or dim <= 0:
            raise InvalidInputError(f"invalid embedding dimension {dim!r}")
        with self._write(None) as conn:
            conn.execute(_META_LOCK)
            bound_id, bound_dim = self._meta(conn, "embedder_id"), self._dim(conn)
            if bound_id is None:
                conn.execute("INSERT INTO meta (key, value) VALUES ('embedder_id', %s), ('dim', %s)",
                             (embedder_id, str(int(dim))))
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
        """Write a session, its units and edges in one transaction under the user's lock; return the new
        unit ids in order (drawn from a sequence: larger than every id committed before for this user).

        Raises:
            DuplicateSessionError: the user already has a session with this id.
            InvalidInputError: an invalid session, unit or edge, text with NUL characters, or an edge
                endpoint that is not a unit of this user (nothing is written).
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
        with self._write(user_id) as conn:
            unit_rows = _unit_rows(session, units, self._dim(conn))
            _no_nul(session, units)
            if conn.execute("SELECT 1 FROM sessions WHERE user_id = %s AND session_id = %s",
                            (user_id, session_id)).fetchone():
                raise DuplicateSessionError(f"user {user_id!r} already has a session {session_id!r}")
            self._check_endpoints(conn, user_id, {n for row in edge_rows for n in row[:2] if n > 0})
            session_pk = conn.execute(
                "INSERT INTO sessions (user_id, session_id, timestamp, metadata, n_messages, n_turns, created_at)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING pk",
                (user_id, session_id, timestamp, metadata, len(session.messages), len(session.turns),
                 datetime.now(timezone.utc).isoformat()),
            ).fetchone()[0]
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO messages (user_id, session_pk, position, role, name, content)"
                    " VALUES (%s, %s, %s, %s, %s, %s)",
                    [(user_id, session_pk, i, m.role, m.name, m.content) for i, m in enumerate(session.messages)],
                )
                # Drawn under the user's lock, so the user's ids grow in commit order (load_units_after).
                ids = sorted(row[0] for row in conn.execute(
                    "SELECT nextval('unit_ids') FROM generate_series(1, %s)", (len(unit_rows),)).fetchall())
                cur.executemany(
                    "INSERT INTO units (user_id, id, session_pk, granularity, turn_start, turn_end, chunk, text,"
                    " vector) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                    [(user_id, i, session_pk, *row) for i, row in zip(ids, unit_rows)],
                )

                def resolve(n: int) -> int:
                    return n if n > 0 else ids[-n - 1]

                cur.executemany(
                    "INSERT INTO edges (user_id, src, dst, weight) VALUES (%s, %s, %s, %s)"
                    " ON CONFLICT (user_id, src, dst) DO UPDATE SET weight = greatest(edges.weight, excluded.weight)",
                    [(user_id, *sorted((resolve(src), resolve(dst))), weight) for src, dst, weight in edge_rows],
                )
            self._touch(conn, user_id)
        return ids

    @staticmethod
    def _check_endpoints(conn: Any, user_id: str, unit_ids: set[int]) -> None:
        """Raise :class:`InvalidInputError` unless every id is a stored unit of ``user_id``."""
        if not unit_ids:
            return
        found = {row[0] for row in conn.execute(
            "SELECT id FROM units WHERE user_id = %s AND id = ANY(%s)", (user_id, sorted(unit_ids)))}
        missing = sorted(unit_ids - found)
        if missing:
            # Same message whether the unit is absent or another user's: tenants stay invisible.
            raise InvalidInputError(f"edge endpoint {missing[0]} is not a unit of user {user_id!r}")

    @staticmethod
    def _touch(conn: Any, user_id: str) -> None:
        """Give the user a new version (from ``version_seq``) after a write, or drop the user once no
        session is left (a user without sessions has version 0, like one never seen)."""
        if conn.execute("SELECT 1 FROM sessions WHERE user_id = %s LIMIT 1", (user_id,)).fetchone():
            conn.execute(
                "INSERT INTO users (user_id, version) VALUES (%s, nextval('version_seq'))"
                " ON CONFLICT (user_id) DO UPDATE SET version = excluded.version",
                (user_id,),
            )
        else:
            conn.execute("DELETE FROM users WHERE user_id = %s", (user_id,))

    def delete_session(self, user_id: str, session_id: str) -> None:
        """Delete a session with its messages, units and every edge touching them.

        The rows leave every query at once; their bytes stay in the table files until later writes reuse
        the space (or ``VACUUM FULL``), and in the write-ahead log until it is recycled (see the module).

        Raises:
            NotFoundError: the user has no such session.
        """
        with self._write(user_id) as conn:
            if not conn.execute("DELETE FROM sessions WHERE user_id = %s AND session_id = %s",
                                (user_id, session_id)).rowcount:
                raise NotFoundError(f"user {user_id!r} has no session {session_id!r}")
            self._touch(conn, user_id)

    def delete_user(self, user_id: str) -> int:
        """Delete all of a user's sessions, messages, units and edges (as :meth:`delete_session`);
        return the number of sessions.

        Raises:
            NotFoundError: the user has no stored session.
        """
        with self._write(user_id) as conn:
            n = conn.execute("DELETE FROM sessions WHERE user_id = %s", (user_id,)).rowcount
            if not n:
                raise NotFoundError(f"no user {user_id!r}")
            self._touch(conn, user_id)
        return n

    # -- reads -------------------------------------------------------------------------------
    def has_user(self, user_id: str) -> bool:
        """Whether the user has any stored session."""
        with self._read() as conn:
            return conn.execute("SELECT 1 FROM users WHERE user_id = %s", (user_id,)).fetchone() is not None

    def list_users(self) -> list[str]:
        """All user ids with at least one session, sorted (a cross-user read)."""
        with self._read() as conn:
            return [row[0] for row in conn.execute("SELECT user_id FROM users ORDER BY user_id")]

    def list_sessions(self, user_id: str) -> list[SessionInfo]:
        """The user's session headers, oldest first: by timestamp, sessions without one last, then insertion."""
        with self._read() as conn:
            rows = conn.execute(
                "SELECT session_id, timestamp, n_messages, n_turns, created_at FROM sessions WHERE user_id = %s"
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
                "SELECT pk, timestamp, metadata FROM sessions WHERE user_id = %s AND session_id = %s",
                (user_id, session_id),
            ).fetchone()
            if row is None:
                raise NotFoundError(f"user {user_id!r} has no session {session_id!r}")
            messages = conn.execute(
                "SELECT role, content, name FROM messages WHERE user_id = %s AND session_pk = %s ORDER BY position",
                (user_id, row[0]),
            ).fetchall()
        return Session(
            user_id=user_id,
            session_id=session_id,
            messages=tuple(Message(role, content, name) for role, content, name in messages),
            timestamp=_datetime(row[1]),
            metadata=json.loads(row[2]),
        )

    _UNIT_COLUMNS = ("SELECT u.id, s.session_id, u.granularity, u.turn_start, u.turn_end, u.chunk, u.text, u.vector"
                     " FROM units u JOIN sessions s ON s.user_id = u.user_id AND s.pk = u.session_pk")

    def load_units(self, user_id: str) -> UnitTable:
        """All units of a user, by ascending id; an empty table for an unknown user (vectors read-only)."""
        return self.load_units_after(user_id, 0)[1]

    def load_units_after(self, user_id: str, after_id: int) -> tuple[int, UnitTable]:
        """The count of the user's units with ids ``<= after_id`` and the units added after, in one snapshot
        (ids come from a sequence and are never reused)."""
        with self._read() as conn:
            dim = self._dim(conn) or 0
            kept = 0 if after_id <= 0 else conn.execute(
                "SELECT count(*) FROM units WHERE user_id = %s AND id <= %s", (user_id, after_id)).fetchone()[0]
            rows = conn.execute(self._UNIT_COLUMNS + " WHERE u.user_id = %s AND u.id > %s ORDER BY u.id",
                                (user_id, int(after_id))).fetchall()
        return int(kept), SQLiteStore._unit_table(rows, dim)

    def load_edges(self, user_id: str) -> EdgeTable:
        """All edges among a user's units, each undirected edge once with ``src < dst``, sorted."""
        return self.load_edges_after(user_id, 0)

    def load_edges_after(self, user_id: str, after_id: int) -> EdgeTable:
        """The user's edges with ``dst > after_id`` (those touching a unit newer than ``after_id``), sorted."""
        with self._read() as conn:
            rows = conn.execute(
                "SELECT src, dst, weight FROM edges WHERE user_id = %s AND dst > %s ORDER BY src, dst",
                (user_id, int(after_id)),
            ).fetchall()
        return SQLiteStore._edge_table(rows)

    def version(self, user_id: str) -> int:
        """A number that changes with every write to the user's memory (0 for a user without sessions)."""
        with self._read() as conn:
            row = conn.execute("SELECT version FROM users WHERE user_id = %s", (user_id,)).fetchone()
        return 0 if row is None else int(row[0])

    def stats(self, user_id: str | None = None) -> dict[str, Any]:
        """Counts for one user, or for the whole store when ``user_id`` is ``None`` (a cross-user read).

        Returns:
            ``users``, ``sessions``, ``turns``, ``messages``, ``units`` (a dict by granularity name),
            ``edges``, ``embedder_id``, ``dim``, ``path`` (``None``), ``url`` (without password) and
            ``file_bytes`` (the store's tables with their indexes and TOAST, for every user).
        """
        where, args = ("WHERE user_id = %s", (user_id,)) if user_id is not None else ("", ())
        with self._read() as conn:
            n_users = conn.execute(f"SELECT count(*) FROM users {where}", args).fetchone()[0]
            n_sessions, n_turns, n_messages = conn.execute(
                f"SELECT count(*), coalesce(sum(n_turns), 0), coalesce(sum(n_messages), 0) FROM sessions {where}",
                args).fetchone()
            per_granularity = dict(conn.execute(
                f"SELECT granularity, count(*) FROM units {where} GROUP BY granularity", args).fetchall())
            n_edges = conn.execute(f"SELECT count(*) FROM edges {where}", args).fetchone()[0]
            embedder_id, dim = self._meta(conn, "embedder_id"), self._dim(conn)
            file_bytes = conn.execute(
                "SELECT sum(pg_total_relation_size(to_regclass(t))) FROM unnest(%s::text[]) AS t",
                (["meta", "users", "sessions", "messages", "units", "edges", "schema_version"],)).fetchone()[0]
        return {
            "users": n_users,
            "sessions": n_sessions,
            "turns": int(n_turns),
            "messages": int(n_messages),
            "units": {g: per_granularity.get(i, 0) for i, g in enumerate(GRANULARITIES)},
            "edges": n_edges,
            "embedder_id": embedder_id,
            "dim": dim,
            "path": None,
            "url": _redact(self._url),
            "file_bytes": int(file_bytes),
        }

    def close(self) -> None:
        """Close the pool (idempotent). Any later call raises :class:`MemgasError`."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()
