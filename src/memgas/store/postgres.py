"""PostgreSQL storage backend: many processes and many users on one shared database.

Schema (version :data:`SCHEMA_VERSION`, one row per applied migration in ``schema_version``): the tables
and columns of :mod:`memgas.store.sqlite`, so the two backends stay one design, with keys that lead with
``user_id`` so that the schema can be distributed by ``user_id`` (Citus) unchanged:

* ``schema_version(version, applied_at)``, ``meta(key, value)`` (``embedder_id``, ``dim``) and
  ``api_keys`` (the service's keys, as in SQLite): store-wide; ``experiences`` (experience memory, as in
  SQLite), keyed by its ``scope``.
* sequences ``version_seq`` (user versions) and ``unit_ids`` (unit ids): drawn numbers are never
  handed out again, not even after a rollback.
* ``users(user_id, version)``; ``sessions(user_id, pk, session_id, timestamp, metadata, n_messages,
  n_turns, created_at, agent_id, run_id)``; ``messages(user_id, session_pk, position, role, name, content,
  metadata)``;
  ``units(user_id, id, session_pk, granularity, turn_start, turn_end, chunk, text, vector, msg_start, msg_end)``;
  ``edges(user_id, src, dst, weight)``; ``snapshots(user_id, kind, version, data)``. ``vector`` is ``bytea`` encoded
  as in SQLite (little-endian float16 since schema 6); timestamps are
  ISO 8601 text and ids use the ``"C"`` collation, so sessions and users sort exactly as in SQLite.

Every table but ``schema_version``, ``meta`` and ``api_keys`` carries ``user_id``, and every statement on them is
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

import threading
from contextlib import contextmanager
from typing import Any, Iterator, Sequence
from urllib.parse import urlsplit, urlunsplit

from memgas.core.errors import InvalidInputError, MemgasError
from memgas.core.types import GRANULARITIES, Session, Unit
from memgas.core.validate import check_id
from memgas.store.limits import RateLimitStore
from memgas.store.sql import (
    API_KEYS_TABLE,
    JOINED_MIGRATION,
    SCOPES_MIGRATION,
    SNAPSHOTS_TABLE,
    SQLStore,
    compact_unit_vectors,
)

__all__ = ["PostgresStore", "SCHEMA_VERSION", "MIGRATIONS", "CROSS_USER_STATEMENTS"]

#: Migrations, in order: ``MIGRATIONS[i]`` upgrades a database from schema version ``i`` to ``i + 1``.
MIGRATIONS: tuple[tuple[Any, ...], ...] = (
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
    # 2: the service's API keys (memgas.service.keys), only hashes of their secrets.
    (API_KEYS_TABLE.format(collate=' COLLATE "C"'),),
    # 3: experience memory (memgas.experience), keyed by scope first like every per-user table.
    ("""CREATE TABLE experiences (
        scope TEXT COLLATE "C" NOT NULL,
        id BIGINT GENERATED ALWAYS AS IDENTITY,
        kind TEXT NOT NULL,
        key TEXT NOT NULL,
        payload TEXT NOT NULL,
        vector BYTEA,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        PRIMARY KEY (scope, id))""",
        "CREATE INDEX experiences_kind ON experiences (scope, kind, id)",),
    # 4: sessions' agent and run ids, messages' own metadata.
    tuple(statement.format(collate=' COLLATE "C"') for statement in SCOPES_MIGRATION),
    # 5: the service's rate-limit buckets, shared by every worker and server on the database (take_token).
    ("""CREATE TABLE rate_limits (
        bucket TEXT COLLATE "C" PRIMARY KEY,
        tokens DOUBLE PRECISION NOT NULL,
        allowed BOOLEAN NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL)""",),
    # 6: per-user index snapshots; unit vectors re-encoded as float16 (memgas.kernels.quantize).
    (SNAPSHOTS_TABLE.format(collate=' COLLATE "C"', blob="BYTEA"), lambda conn: compact_unit_vectors(conn, "%s")),
    # 7: a unit whose text is its turns' texts joined (a turn's, a session chunk's) stores its messages' range instead.
    JOINED_MIGRATION,
)

#: One token-bucket step in one statement, on the database's clock (the same for every worker): refill the
#: bucket for the time since its last step, take a token if there is one, and say whether it was taken.
_TAKE_TOKEN = """INSERT INTO rate_limits AS b (bucket, tokens, allowed, updated_at)
    VALUES (%(bucket)s, %(burst)s - 1, true, extract(epoch FROM clock_timestamp()))
    ON CONFLICT (bucket) DO UPDATE SET
        allowed = least(%(burst)s, b.tokens + (excluded.updated_at - b.updated_at) * %(rate)s) >= 1,
        tokens = least(%(burst)s, b.tokens + (excluded.updated_at - b.updated_at) * %(rate)s)
                 - CASE WHEN least(%(burst)s, b.tokens + (excluded.updated_at - b.updated_at) * %(rate)s) >= 1
                        THEN 1 ELSE 0 END,
        updated_at = excluded.updated_at
    RETURNING allowed, tokens"""
#: Buckets that have refilled are forgotten (a flood of client addresses leaves no rows behind).
_FORGET_FULL_BUCKETS = ("DELETE FROM rate_limits WHERE updated_at < extract(epoch FROM clock_timestamp()) - %s")

#: Version of the schema this code reads and writes.
SCHEMA_VERSION = len(MIGRATIONS)

#: The statements that read across users on purpose (everything else is scoped by ``user_id``).
CROSS_USER_STATEMENTS = frozenset({
    "SELECT user_id FROM users ORDER BY user_id",
    "SELECT count(*) FROM users ",
    "SELECT count(*), coalesce(sum(n_turns), 0), coalesce(sum(n_messages), 0) FROM sessions ",
    "SELECT granularity, count(*) FROM units  GROUP BY granularity",
    "SELECT count(*) FROM edges ",
})  # (the rate-limit statements touch no user's data: their buckets are keyed by API key or client address)

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


class PostgresStore(SQLStore, RateLimitStore):
    """A :class:`~memgas.store.sql.SQLStore` in a PostgreSQL database (psycopg 3, a connection pool).

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
        self._takes = 0  # rate-limit takes by this object (every 1000th forgets the buckets that refilled)
        self._pool = None
        try:
            with psycopg.connect(url, autocommit=True, connect_timeout=max(1, int(timeout)),
                                 prepare_threshold=None) as conn:
                self.schema_upgrade = self._migrate(conn)
        except psycopg.Error as exc:
            raise MemgasError(f"cannot open PostgreSQL store {_redact(url)}: {' '.join(str(exc).split())}") from exc
        # No server-side prepared statements (psycopg prepares a query after 5 runs on a connection): behind a
        # pooler in transaction mode (PgBouncer) the next transaction may run on another server connection, where the
        # statement does not exist. memgas keeps no other session state: its advisory locks are transaction-scoped.
        self._pool = ConnectionPool(url, min_size=1, max_size=max_connections, timeout=timeout,
                                    kwargs={"autocommit": True, "prepare_threshold": None}, open=True, name="memgas")

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
                    statement(conn) if callable(statement) else conn.execute(statement)
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

    # -- what differs from SQLite --------------------------------------------------------------
    _UNIT_COLUMNS = ("SELECT u.id, s.session_id, u.granularity, u.turn_start, u.turn_end, u.chunk, u.text, u.msg_start,"
                     " u.msg_end, u.session_pk, u.vector"
                     " FROM units u JOIN sessions s ON s.user_id = u.user_id AND s.pk = u.session_pk")
    _DIM_VALUE = str
    _MESSAGES_OF = "m.user_id = s.user_id AND m.session_pk = s.pk"
    _MESSAGES_USER = "user_id = ? AND "
    _MESSAGES_OF_UNIT = "m.user_id = ? AND m.session_pk = u.session_pk"

    @staticmethod
    def _q(sql: str) -> str:
        return sql.replace("?", "%s")

    def _lock_meta(self, conn: Any) -> None:
        conn.execute(_META_LOCK)

    def _messages(self, conn: Any, user_id: str, session_pk: int) -> list[Any]:
        return conn.execute(
            "SELECT role, content, name, metadata FROM messages WHERE user_id = %s AND session_pk = %s"
            " ORDER BY position",
            (user_id, session_pk),
        ).fetchall()

    def _new_version(self, conn: Any, user_id: str) -> None:
        conn.execute(
            "INSERT INTO users (user_id, version) VALUES (%s, nextval('version_seq'))"
            " ON CONFLICT (user_id) DO UPDATE SET version = excluded.version",
            (user_id,),
        )

    def take_token(self, bucket: str, rate: float, burst: float) -> float:
        """Take a token from the rate-limit bucket ``bucket`` (``rate`` tokens a second, ``burst`` at most), for
        every process on this database at once: 0.0 when taken, else the seconds until one is due."""
        with self._write(None) as conn:
            allowed, tokens = conn.execute(_TAKE_TOKEN, {"bucket": bucket, "rate": rate, "burst": burst}).fetchone()
            with self._generation_lock:
                self._takes += 1
                prune = self._takes % 1000 == 0
            if prune:
                conn.execute(_FORGET_FULL_BUCKETS, (2.0 * max(burst / rate, 1.0),))
        return 0.0 if allowed else (1.0 - float(tokens)) / rate

    def _storage(self, conn: Any) -> dict[str, Any]:
        file_bytes = conn.execute(
            "SELECT sum(pg_total_relation_size(to_regclass(t))) FROM unnest(%s::text[]) AS t",
            (["meta", "users", "sessions", "messages", "units", "edges", "schema_version", "api_keys", "experiences",
              "rate_limits", "snapshots"],)).fetchone()[0]
        return {"path": None, "url": _redact(self._url), "file_bytes": int(file_bytes)}

    # -- writes ------------------------------------------------------------------------------
    def _insert_session(self, conn: Any, row: tuple[Any, ...]) -> int:
        return int(conn.execute(
            "INSERT INTO sessions (user_id, session_id, timestamp, metadata, n_messages, n_turns, created_at,"
            " agent_id, run_id) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING pk", row).fetchone()[0])

    def _insert_messages(self, conn: Any, user_id: str, session_pk: int, start: int,
                         rows: list[tuple[Any, ...]]) -> None:
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO messages (user_id, session_pk, position, role, name, content, metadata)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s)",
                [(user_id, session_pk, start + i, *row) for i, row in enumerate(rows)],
            )

    def _insert_units_and_edges(self, conn: Any, user_id: str, session_pk: int, unit_rows: list[tuple[Any, ...]],
                                edge_rows: list[tuple[int, int, float]]) -> list[int]:
        with conn.cursor() as cur:
            # Drawn under the user's lock, so the user's ids grow in commit order (load_units_after).
            ids = sorted(row[0] for row in conn.execute(
                "SELECT nextval('unit_ids') FROM generate_series(1, %s)", (len(unit_rows),)).fetchall())
            cur.executemany(
                "INSERT INTO units (user_id, id, session_pk, granularity, turn_start, turn_end, chunk, text,"
                " msg_start, msg_end, vector) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                [(user_id, i, session_pk, *row) for i, row in zip(ids, unit_rows)],
            )

            def resolve(n: int) -> int:
                return n if n > 0 else ids[-n - 1]

            cur.executemany(
                "INSERT INTO edges (user_id, src, dst, weight) VALUES (%s, %s, %s, %s)"
                " ON CONFLICT (user_id, src, dst) DO UPDATE SET weight = greatest(edges.weight, excluded.weight)",
                [(user_id, *sorted((resolve(src), resolve(dst))), weight) for src, dst, weight in edge_rows],
            )
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

    def close(self) -> None:
        """Close the pool (idempotent). Any later call raises :class:`MemgasError`."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()
