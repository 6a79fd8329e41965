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
  metadata)`` (``content`` is ``bytea`` since schema 10: the text packed, :func:`memgas.core.packing.pack_text`);
  ``units(user_id, id, session_pk, granularity, turn_start, turn_end, chunk, text, vector, msg_start, msg_end,
  links)`` (``links``, since schema 10: the unit's edges to older units, packed as in SQLite; before, a table
  ``edges(user_id, src, dst, weight)``); ``snapshots(user_id, kind, version, data)``. ``vector`` is ``bytea`` encoded
  as in SQLite (little-endian float16 since schema 6); timestamps are
  ISO 8601 text and ids use the ``"C"`` collation, so sessions and users sort exactly as in SQLite.

Every table but ``schema_version``, ``meta`` and ``api_keys`` carries ``user_id``, and every statement on them is
scoped by it, except the two cross-user reads :meth:`PostgresStore.list_users` and
:meth:`PostgresStore.stats` without a user (multi-shard queries on a distributed cluster).

Concurrency: a connection pool shared by the store's threads. :meth:`PostgresStore.reading` is one
``REPEATABLE READ READ ONLY`` transaction per outermost block and thread; :meth:`PostgresStore.writing`
is one transaction holding ``pg_advisory_xact_lock`` on each user it writes, so the writes of one user
are serialised across every process and those of different users run in parallel.

Replicas and read-your-writes: with ``read_url`` (a keyword, or a ``read_url=`` parameter of the URL, e.g. a PgBouncer
alias of a load balancer's replica port) a read block for one user (``reading(user_id)``, every read of a user's
data) may run on a replica. It does only when that replica's snapshot shows the user's last write this store knows of:
the transaction id of each write this store committed for the user (recorded after ``COMMIT`` returns), or, for a
user it has not written, the ``users.xid`` its first read of the user found on the primary. The check is
``pg_visible_in_snapshot`` inside the replica's read transaction, so it holds through a transaction-mode pooler that
spreads transactions over replicas. A replica that does not show it yet is asked again (2 ms, doubling to 50 ms) until
``read_wait`` seconds (default 0.5) have passed; then, or when no replica answers, the primary serves the read. So a
client never misses a write this store acknowledged to it. A write acknowledged by another store (another worker) is
seen by replicas that applied it before it was acknowledged (synchronous standbys with ``synchronous_commit =
remote_apply``, the only replicas the cluster of :mod:`memgas.bench.hacluster` reads from); with asynchronous
replicas it may be missed for as long as they lag.

Connection loss (a failover, a restarted pooler): a block that cannot begin on a pooled connection checks the pool and
tries once more on a fresh one; a block that loses its connection raises :class:`UnavailableError` (HTTP 503 in the
service), and a write that loses it at ``COMMIT`` may or may not have committed, whole or not at all.

Forgetting: PostgreSQL has no secure delete. A delete removes the rows from every query at once, but
measured on PostgreSQL 15 (a deleted secret grepped in the data folder after ``CHECKPOINT``): the text
stays in the table files after the delete and after a plain ``VACUUM`` (pruning frees the space without
zeroing it; later rows overwrite it), and leaves them only with ``VACUUM FULL`` (which rewrites the tables
under an exclusive lock); the write-ahead log, its archives and replicas keep it until they are recycled.
So a delete does not vacuum (it would not help); an operator who must erase runs ``VACUUM FULL``.
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from typing import Any, Iterator, Sequence
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from memgas.core.errors import InvalidInputError, MemgasError, UnavailableError
from memgas.core.types import GRANULARITIES, Session, Unit
from memgas.core.validate import check_id
from memgas.store.limits import RateLimitStore
from memgas.store.sql import (
    API_KEYS_TABLE,
    JOINED_MIGRATION,
    LINKS_COUNT,
    SCOPES_MIGRATION,
    SESSION_VERSION_COLUMN,
    SNAPSHOTS_TABLE,
    TAIL_INDEX,
    SQLStore,
    compact_unit_vectors,
    links_from_edges,
    pack_message_texts,
)

__all__ = ["PostgresStore", "SCHEMA_VERSION", "MIGRATIONS", "CROSS_USER_STATEMENTS", "split_read_options"]

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
    # 8: the transaction id of each user's last write, which a replica must show before it serves the user's reads.
    ("ALTER TABLE users ADD COLUMN xid xid8",),
    # 9: sessions' version column, where a store reached version 4 before migration 4 made it.
    (SESSION_VERSION_COLUMN.replace("ADD COLUMN", "ADD COLUMN IF NOT EXISTS"),),
    # 10: messages' content packed (memgas.core.packing.pack_text), in a bytea column; the edges kept on their newer
    # unit (units.links, memgas.core.packing.pack_links) instead of a table of their own.
    ("ALTER TABLE messages ALTER COLUMN content TYPE bytea USING '\\x00'::bytea || convert_to(content, 'UTF8')",
     lambda conn: pack_message_texts(conn, "%s", ("user_id", "session_pk", "position")),
     "ALTER TABLE units ADD COLUMN links bytea",
     lambda conn: links_from_edges(conn, "%s", conn.cursor(name="memgas_edges").execute(
         "SELECT user_id, dst, src, weight FROM edges ORDER BY dst, src")),
     "DROP TABLE edges"),
    # 11: a session's units by granularity and where their turns end, so an append reads the session's tail alone.
    (TAIL_INDEX.format(user="user_id, "),),
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
#: The first two bytes of a unit's ``links`` as lowercase hex (:data:`memgas.store.sql.LINKS_COUNT`).
_LINKS_HEAD = "encode(substring(links from 1 for 2), 'hex')"
CROSS_USER_STATEMENTS = frozenset({
    "SELECT user_id FROM users ORDER BY user_id",
    "SELECT count(*) FROM users ",
    "SELECT count(*), coalesce(sum(n_turns), 0), coalesce(sum(n_messages), 0) FROM sessions ",
    "SELECT granularity, count(*) FROM units  GROUP BY granularity",
    f"SELECT coalesce(sum({LINKS_COUNT.format(head=_LINKS_HEAD)}), 0) FROM units ",
})  # (the rate-limit statements touch no user's data: their buckets are keyed by API key or client address)

#: Advisory-lock key (two-int form, a key space apart from the per-user bigint keys) of schema and meta writes.
_META_LOCK = "SELECT pg_advisory_xact_lock(1835363687, 1)"  # 'memg'
_META_SHARED = "SELECT pg_advisory_xact_lock_shared(1835363687, 1)"  # writers of vectors, against a switch
_USER_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))"


def _redact(url: str) -> str:
    """The URL without its password, for messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def split_read_options(url: str) -> tuple[str, str | None, float | None]:
    """Take memgas's own parameters out of a PostgreSQL URL: ``(the URL libpq gets, read_url, read_wait)``.

    ``read_url`` (a URL, its ``&`` and ``#`` percent-encoded) names where reads may go; ``read_wait`` is in seconds.

    Raises:
        InvalidInputError: ``read_wait`` is not a number of seconds in [0, 60].
    """
    parts = urlsplit(url)
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    ours = {k: v for k, v in pairs if k in ("read_url", "read_wait")}
    if not ours:
        return url, None, None
    rest = urlunsplit(parts._replace(query=urlencode([(k, v) for k, v in pairs if k not in ours])))
    wait = None
    if "read_wait" in ours:
        try:
            wait = float(ours["read_wait"])
        except ValueError:
            wait = -1.0
        if not 0.0 <= wait <= 60.0:
            raise InvalidInputError(f"read_wait={ours['read_wait']!r}: expected seconds between 0 and 60")
    return rest, ours.get("read_url") or None, wait


def _unreachable(exc: Exception) -> bool:
    """Whether a driver error means the server is gone or not the primary any more (worth a retry elsewhere), rather
    than a problem of the statement (a deadlock and a serialisation failure are the statement's)."""
    import psycopg

    if isinstance(exc, psycopg.errors.ReadOnlySqlTransaction):
        return True  # a write reached a server demoted to replica
    return isinstance(exc, psycopg.OperationalError) and not isinstance(exc, psycopg.errors.TransactionRollback)


def _translated(exc: Exception) -> Exception:
    """A driver error as memgas raises it: :class:`UnavailableError` where the server is out of reach (see
    :func:`_unreachable`), else the error itself."""
    if _unreachable(exc):
        return UnavailableError(f"the PostgreSQL server is unreachable: {' '.join(str(exc).split()) or type(exc).__name__}")
    return exc


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
        url: a ``postgresql://user[:password]@host[:port]/dbname[?options]`` connection URL; it may carry
            ``read_url=`` and ``read_wait=`` (see :func:`split_read_options`), which the keywords override.
        max_connections: the pool's size (each pool's, with replicas); each thread inside a block holds one connection.
        timeout: seconds to wait for a connection (and the first connect) before failing.
        read_url: where reads of one user may go (replicas, e.g. through a load balancer); see the module docstring.
        read_wait: seconds a read waits for a replica to show the user's last write before the primary serves it.

    Raises:
        MemgasError: the server cannot be reached, or psycopg is not installed (``pip install -e '.[postgres]'``).
        InvalidInputError: the database holds other tables than a memgas store's, or a newer schema.
    """

    #: Users whose last write a store remembers; past it the older half is forgotten (their next read learns it again
    #: from the primary), so a worker that meets millions of users keeps a bounded map.
    REMEMBERED_USERS = 100_000

    def __init__(self, url: str, *, max_connections: int = 16, timeout: float = 30.0, read_url: str | None = None,
                 read_wait: float | None = None) -> None:
        try:
            import psycopg
            from psycopg_pool import ConnectionPool
        except ImportError:
            raise MemgasError("the PostgreSQL store needs psycopg: pip install -e '.[postgres]' in the memgas checkout") from None
        url, url_read, url_wait = split_read_options(url)
        read_url = read_url or url_read
        wait = read_wait if read_wait is not None else url_wait
        self._read_wait: float = 0.5 if wait is None else wait
        self._url = url
        self._state = _ThreadState()
        self._generation = 0
        self._generation_lock = threading.Lock()
        self._takes = 0  # rate-limit takes by this object (every 1000th forgets the buckets that refilled)
        self._pool = self._replicas = None
        #: user -> transaction id (xid8, as an int) of the user's last write known here; see the module docstring.
        self._last_write: dict[str, int] = {}
        #: Where read blocks for a user ran: on a replica, on the primary after waiting for one, on the primary at once.
        self.reads = {"replica": 0, "primary_after_wait": 0, "primary": 0}
        try:
            with psycopg.connect(url, autocommit=True, connect_timeout=max(1, int(timeout)),
                                 prepare_threshold=None) as conn:
                self.schema_upgrade = self._migrate(conn)
        except psycopg.Error as exc:
            raise MemgasError(f"cannot open PostgreSQL store {_redact(url)}: {' '.join(str(exc).split())}") from exc
        # No server-side prepared statements (psycopg prepares a query after 5 runs on a connection): behind a
        # pooler in transaction mode (PgBouncer) the next transaction may run on another server connection, where the
        # statement does not exist. memgas keeps no other session state: its advisory locks are transaction-scoped.
        options = {"autocommit": True, "prepare_threshold": None}
        self._pool = ConnectionPool(url, min_size=1, max_size=max_connections, timeout=timeout, kwargs=options,
                                    open=True, name="memgas")
        if read_url:
            # Opened lazily (min_size 0) and with a short wait: a replica that cannot be had sends reads to the primary.
            self._replicas = ConnectionPool(read_url, min_size=0, max_size=max_connections,
                                            timeout=max(self._read_wait, 0.05), kwargs=options, open=True,
                                            name="memgas-replicas")

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
                    if not callable(statement):
                        conn.execute(statement)
                    elif found:  # a step in Python re-encodes rows: a schema just created has none
                        statement(conn)
                conn.execute("INSERT INTO schema_version (version) VALUES (%s)", (version,))
        return found, SCHEMA_VERSION

    # -- transactions ------------------------------------------------------------------------
    def _getconn(self) -> Any:
        if self._pool is None:
            raise MemgasError("the store is closed")
        return self._pool.getconn()

    def _begin(self, statement: str) -> Any:
        """A primary connection on which ``statement`` (a ``BEGIN``) ran. A pooled connection that a failover or a
        restarted pooler broke fails at once: the pool is then checked and the block begins once more on a fresh one."""
        import psycopg

        for attempt in (1, 2):
            conn = self._getconn()
            try:
                conn.execute(statement)
                return conn
            except psycopg.Error as exc:
                self._pool.putconn(conn)  # type: ignore[union-attr]  # a broken connection is dropped, not kept
                if attempt == 2 or not _unreachable(exc):
                    raise _translated(exc) from exc
                self._pool.check()  # type: ignore[union-attr]
        raise AssertionError("unreachable")

    def _rolled_back(self) -> None:
        with self._generation_lock:
            self._generation += 1

    def _remember(self, user_id: str, xid: int, *, learned: bool) -> None:
        """Record the user's last write (``learned``: read on the primary, kept only if no write of ours is known)."""
        with self._generation_lock:
            known = self._last_write
            if learned and user_id in known:
                return
            known.pop(user_id, None)  # re-inserted last: the oldest entries are the first forgotten
            known[user_id] = xid
            if len(known) > self.REMEMBERED_USERS:
                for old in list(known)[: len(known) // 2]:
                    del known[old]

    def _count(self, where: str) -> None:
        with self._generation_lock:  # the store's threads share the counts
            self.reads[where] += 1

    def _on_replica(self, user_id: str) -> Any:
        """A replica connection inside a read-only snapshot that shows the user's last known write, or ``None`` (the
        user's last write is unknown here, no replica answered, or none showed it within ``read_wait``)."""
        import psycopg
        from psycopg_pool import PoolTimeout

        xid = self._last_write.get(user_id)
        if xid is None or self._replicas is None:
            return None
        deadline = time.monotonic() + self._read_wait
        delay = 0.002
        while True:
            try:
                conn = self._replicas.getconn()
            except PoolTimeout:
                return None
            try:
                conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                shown = conn.execute("SELECT pg_visible_in_snapshot(%s::xid8, pg_current_snapshot())",
                                     (str(xid),)).fetchone()
                if shown and shown[0]:
                    return conn
                conn.execute("ROLLBACK")
            except psycopg.Error:
                self._replicas.putconn(conn)
                self._replicas.check()
                return None
            self._replicas.putconn(conn)
            if time.monotonic() + delay > deadline:
                self._count("primary_after_wait")
                return None
            time.sleep(delay)
            delay = min(2 * delay, 0.05)

    @contextmanager
    def _read(self, user_id: str | None = None) -> Iterator[Any]:
        """A connection inside one snapshot: the thread's open transaction if any (joined), else a new
        ``REPEATABLE READ READ ONLY`` transaction ended on exit, on a replica where one may serve ``user_id``."""
        import psycopg

        state = self._state
        if state.write_depth or state.read_depth:
            state.read_depth += 1
            try:
                yield state.conn
            finally:
                state.read_depth -= 1
            return
        routed = self._replicas is not None and user_id is not None
        conn = self._on_replica(user_id) if routed else None  # type: ignore[arg-type]
        pool = self._replicas
        if conn is not None:
            self._count("replica")
        else:
            conn, pool = self._begin("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"), self._pool
            if routed:
                self._count("primary")
                row = conn.execute("SELECT xid::text FROM users WHERE user_id = %s", (user_id,)).fetchone()
                self._remember(user_id, int(row[0]) if row and row[0] else 0, learned=True)  # type: ignore[arg-type]
        try:
            state.conn, state.read_depth = conn, 1
            try:
                yield conn
            except psycopg.Error as exc:
                raise _translated(exc) from exc
            finally:
                state.conn, state.read_depth = None, 0
                if not conn.closed:
                    conn.execute("ROLLBACK")  # read only: ending it is all there is to do
        finally:
            pool.putconn(conn)  # type: ignore[union-attr]

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
        import psycopg

        conn = self._begin("BEGIN")
        try:
            state.conn, state.write_depth, state.locked = conn, 1, [set()]
            try:
                self._lock_user(conn, user_id)
                yield conn
                written = state.locked[0] if self._replicas is not None else set()
                xid = int(conn.execute("SELECT pg_current_xact_id()::text").fetchone()[0]) if written else 0
                conn.execute("COMMIT")
            except BaseException as exc:
                if not conn.closed:
                    conn.execute("ROLLBACK")
                self._rolled_back()
                if isinstance(exc, psycopg.Error):
                    raise _translated(exc) from exc
                raise
            finally:
                state.conn, state.write_depth, state.locked = None, 0, []
            for user in written:  # acknowledged: from now on a replica must show it to serve these users
                self._remember(user, xid, learned=False)
        finally:
            self._pool.putconn(conn)  # type: ignore[union-attr]

    @contextmanager
    def reading(self, user_id: str | None = None) -> Iterator[None]:
        """Every read of this thread inside sees one snapshot (a ``REPEATABLE READ READ ONLY`` transaction
        on one pooled connection; with ``user_id`` and replicas, on a replica that shows the user's last write, as
        the module docstring says). Reentrant; inside :meth:`writing` it joins the write transaction. A
        write started inside it (outside ``writing()``) raises :class:`MemgasError`."""
        with self._read(user_id):
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
    _LINKS_HEAD = _LINKS_HEAD
    _MESSAGES_OF = "m.user_id = s.user_id AND m.session_pk = s.pk"
    _MESSAGES_USER = "user_id = ? AND "
    _MESSAGES_OF_UNIT = "m.user_id = ? AND m.session_pk = u.session_pk"

    @staticmethod
    def _q(sql: str) -> str:
        return sql.replace("?", "%s")

    def _lock_meta(self, conn: Any) -> None:
        conn.execute(_META_LOCK)

    def _share_meta(self, conn: Any) -> None:
        conn.execute(_META_SHARED)

    def _messages(self, conn: Any, user_id: str, session_pk: int) -> list[Any]:
        return conn.execute(
            "SELECT role, content, name, metadata FROM messages WHERE user_id = %s AND session_pk = %s"
            " ORDER BY position",
            (user_id, session_pk),
        ).fetchall()

    def _new_version(self, conn: Any, user_id: str) -> None:
        conn.execute(
            "INSERT INTO users (user_id, version, xid) VALUES (%s, nextval('version_seq'), pg_current_xact_id())"
            " ON CONFLICT (user_id) DO UPDATE SET version = excluded.version, xid = excluded.xid",
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
            (["meta", "users", "sessions", "messages", "units", "schema_version", "api_keys", "experiences",
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

    def _new_unit_ids(self, conn: Any, n: int) -> list[int]:
        # Drawn under the user's lock, so the user's ids grow in commit order (load_units_after).
        return sorted(row[0] for row in conn.execute(
            "SELECT nextval('unit_ids') FROM generate_series(1, %s)", (n,)).fetchall())

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
        """Close the pools (idempotent). Any later call raises :class:`MemgasError`."""
        pools, self._pool, self._replicas = (self._pool, self._replicas), None, None
        for pool in pools:
            if pool is not None:
                pool.close()
