"""What the SQL backends share: row validation, and the reads, deletes and bookkeeping of
:class:`SQLStore`, written once for :class:`~memgas.store.sqlite.SQLiteStore` and
:class:`~memgas.store.postgres.PostgresStore` (the two keep one schema design).

Statements here are written with ``?`` placeholders; :meth:`SQLStore._q` turns them into the
backend's (``%s`` for psycopg). Each backend keeps its own transaction machinery and SQL dialect
where they differ: schema, migrations, ``add_session`` and the hooks :class:`SQLStore` names.
"""

from __future__ import annotations

import itertools
import json
import operator
import re
from abc import abstractmethod
from contextlib import AbstractContextManager, ExitStack, closing, contextmanager
from datetime import datetime, timezone
from typing import Any, Callable, ClassVar, Iterator, Sequence

import numpy as np

from memgas.core.errors import DuplicateSessionError, EmbedderMismatchError, InvalidInputError, NotFoundError
from memgas.core.packing import pack_links, pack_text, unpack_links, unpack_text
from memgas.core.types import GRANULARITIES, Edge, Message, Session, Unit, speaker_line
from memgas.core.validate import ID_CHAR, check_id, check_unicode, parse_timestamp
from memgas.kernels.quantize import decode_rows, encode_rows, stored_halves
from memgas.store.base import PREVIEW_CHARS, EdgeTable, SessionInfo, Store, StoredTexts, UnitTable
from memgas.store.binding import EmbedderSwitch, StoreBinding
from memgas.store.experience import ExperienceRecord, ExperienceStore, scope_of
from memgas.store.keys import ApiKeyRecord, KeyStore
from memgas.store.quotes import QuoteStore
from memgas.store.snapshots import SnapshotStore

__all__ = ["SQLStore"]

#: The service's API keys (schema version 2 of both backends); ``{collate}`` is the key column's collation.
API_KEYS_TABLE = """CREATE TABLE api_keys (
        key_id TEXT{collate} PRIMARY KEY,
        secret_hash TEXT NOT NULL,
        scope TEXT NOT NULL CHECK (scope IN ('admin', 'tenant')),
        tenant TEXT,
        users TEXT,
        name TEXT NOT NULL,
        created_at TEXT NOT NULL,
        revoked_at TEXT,
        CHECK ((scope = 'tenant') = (tenant IS NOT NULL)))"""

#: Schema version 4 of both backends: a session's scope (agent and run ids, indexed with the user), the user
#: version of its last write (what :meth:`SQLStore.sessions_since` reads; 0 for sessions written before) and a
#: message's own metadata (JSON, ``NULL`` for none); ``{collate}`` is the id columns' collation.
SCOPES_MIGRATION = (
    "ALTER TABLE sessions ADD COLUMN agent_id TEXT{collate}",
    "ALTER TABLE sessions ADD COLUMN version BIGINT NOT NULL DEFAULT 0",
    "ALTER TABLE sessions ADD COLUMN run_id TEXT{collate}",
    "ALTER TABLE messages ADD COLUMN metadata TEXT",
    "CREATE INDEX sessions_agent ON sessions (user_id, agent_id)",
    "CREATE INDEX sessions_run ON sessions (user_id, run_id)",
)

#: Experience vectors are stored as little-endian float32 so files move between machines; unit vectors (most of a
#: store) as float16 since schema 6 (:mod:`memgas.kernels.quantize`).
_VEC_DTYPE = np.dtype("<f4")
#: How many unit rows the schema-6 migration re-encodes per statement batch.
_MIGRATION_BATCH = 2000

#: Schema version 7 of both backends: a unit whose text is its turns' texts joined is stored without it, as the range
#: of the messages that make it (``msg_start``, ``msg_end``; -1 for a text stored as it is).
#: Stores migrated to version 4 before migration 4 added ``sessions.version`` lack the column (the test stores of
#: ``tests/store/old_stores`` found it): one more migration adds it where it is missing, on both backends.
SESSION_VERSION_COLUMN = "ALTER TABLE sessions ADD COLUMN version BIGINT NOT NULL DEFAULT 0"


def add_session_versions(conn: Any) -> None:
    """SQLite's step of that migration: the column, unless the store has it (SQLite has no ``IF NOT EXISTS`` here)."""
    if "version" not in {row[1] for row in conn.execute("PRAGMA table_info(sessions)")}:
        conn.execute(SESSION_VERSION_COLUMN)


JOINED_MIGRATION = ("ALTER TABLE units ADD COLUMN msg_start INTEGER NOT NULL DEFAULT -1",
                    "ALTER TABLE units ADD COLUMN msg_end INTEGER NOT NULL DEFAULT -1")
#: Message ranges one statement of :meth:`SQLStore._joined_texts` reads.
_RANGES_PER_QUERY = 200

#: Schema version 6 of both backends: per-user index snapshots (:meth:`SQLStore.save_snapshot`); ``{collate}``
#: and ``{blob}`` are the id columns' collation and the backend's byte type. The same migration re-encodes every
#: unit vector (:func:`compact_unit_vectors`).
SNAPSHOTS_TABLE = """CREATE TABLE snapshots (
        user_id TEXT{collate} NOT NULL,
        kind TEXT{collate} NOT NULL,
        version BIGINT NOT NULL,
        data {blob} NOT NULL,
        PRIMARY KEY (user_id, kind))"""

#: SQLite's schema 10 and PostgreSQL's 11: a session's units by granularity and where their turns end (``{user}``: the
#: leading user column PostgreSQL's keys carry), so that reading a session's tail (:meth:`SQLStore.session_units`
#: with ``after``, what an append rewrites) seeks it rather than scanning every unit of the session: 9.8 ms at 10,000
#: messages of one session, 0.09 ms with it. (``IF NOT EXISTS``: a store put back to an earlier version keeps it.)
TAIL_INDEX = "CREATE INDEX IF NOT EXISTS units_tail ON units ({user}session_pk, granularity, turn_end)"


def compact_unit_vectors(conn: Any, placeholder: str) -> int:
    """Re-encode every float32 unit vector of a store opened at schema 5 as float16 (schema 6), in batches of
    rows, inside the migration's transaction; return how many were re-encoded. Rows already encoded are left."""
    row = conn.execute(f"SELECT value FROM meta WHERE key = {placeholder}", ("dim",)).fetchone()
    if row is None:
        return 0  # no embedder bound: no unit stored yet
    dim, done, after = int(row[0]), 0, 0
    while True:
        rows = conn.execute(f"SELECT id, vector FROM units WHERE id > {placeholder} ORDER BY id LIMIT {_MIGRATION_BATCH}",
                            (after,)).fetchall()
        if not rows:
            return done
        after = int(rows[-1][0])
        old = [(int(i), bytes(v)) for i, v in rows if len(v) == 4 * dim]
        if old:
            vectors = np.frombuffer(b"".join(v for _, v in old), dtype=_VEC_DTYPE).reshape(len(old), dim)
            conn.cursor().executemany(f"UPDATE units SET vector = {placeholder} WHERE id = {placeholder}",
                                      [(code, i) for code, (i, _) in zip(encode_rows(vectors), old)])
            done += len(old)


def pack_message_texts(conn: Any, placeholder: str, key: tuple[str, ...]) -> int:
    """Pack every message's content (:func:`memgas.core.packing.pack_text`) of a store opened before schema 9
    (SQLite) or 10 (PostgreSQL), in batches of rows by the table's primary key ``key``, inside the migration's
    transaction; return how many were packed. A row already packed is left (PostgreSQL's step first turns the
    column into ``bytea``, each text tagged as kept as it is)."""
    columns, done, after = ", ".join(key), 0, None
    while True:
        where = "" if after is None else f" WHERE ({columns}) > ({', '.join([placeholder] * len(key))})"
        rows = conn.execute(f"SELECT {columns}, content FROM messages{where} ORDER BY {columns}"
                            f" LIMIT {_MIGRATION_BATCH}", after or ()).fetchall()
        if not rows:
            return done
        after = tuple(rows[-1][:-1])
        changed = []
        for row in rows:
            content = row[-1]
            packed = pack_text(content if isinstance(content, str) else unpack_text(content))
            if isinstance(content, str) or packed != bytes(content):
                changed.append((packed, *row[:-1]))
        if changed:
            match = " AND ".join(f"{c} = {placeholder}" for c in key)
            conn.cursor().executemany(f"UPDATE messages SET content = {placeholder} WHERE {match}", changed)
            done += len(changed)


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _datetime(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


def session_unit_rows(session: Session, units: Sequence[Unit], dim: int | None) -> list[tuple[Any, ...]]:
    """Validate a call's units; return ``(granularity, turn_start, turn_end, chunk, text, msg_start, msg_end, vector
    bytes)`` rows, the vectors encoded as the store keeps them (:func:`memgas.kernels.quantize.encode_rows`), and a text
    that is the unit's turns' texts joined left out (``''``), named by its messages' range instead
    (:meth:`SQLStore._joined_texts`; ``-1, -1`` for a text stored as it is).

    Raises:
        InvalidInputError: a unit of another session, an unknown granularity, a turn range outside
            the session, or a missing, mis-sized or non-finite vector (or no embedder bound yet).
    """
    if units and dim is None:
        raise InvalidInputError("the store has no embedder yet: call bind_embedder before adding units")
    turns = session.turns
    n_turns = len(turns)
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
        # A text that is its turns' texts joined (a turn's own, a session chunk's) is not stored twice: the messages
        # hold it, and reads join the messages in [msg_start, msg_end) again (text ''; -1 for a text stored as is).
        if u.text == "\n".join(turns[k].text for k in range(start, end)):
            text, msg_start, msg_end = "", turns[start].msg_start, turns[end - 1].msg_end
        else:
            text, msg_start, msg_end = u.text, -1, -1
        rows.append((GRANULARITIES.index(u.granularity), start, end, chunk, text, msg_start, msg_end, vec))
    encoded = encode_rows(np.stack([r[-1] for r in rows])) if rows else []
    return [(*r[:-1], blob) for r, blob in zip(rows, encoded)]


def _unit_links(ids: Sequence[int], edge_rows: Sequence[tuple[int, int, float]]) -> list[bytes | None]:
    """Per new unit ``ids[i]``, its links to older units (:func:`memgas.core.packing.pack_links`), or ``None``: each
    edge is kept once, on its newer end, which is always a unit of this call (edges between two stored units are
    refused); an edge given twice keeps its larger weight. Weights are kept in float32, as the edges are read
    (:class:`~memgas.store.base.EdgeTable`)."""
    def resolve(n: int) -> int:
        return n if n > 0 else ids[-n - 1]

    row_of = {uid: i for i, uid in enumerate(ids)}
    links: list[dict[int, float]] = [{} for _ in ids]
    for src, dst, weight in edge_rows:
        older, newer = sorted((resolve(src), resolve(dst)))
        held = links[row_of[newer]]
        held[older] = max(held.get(older, 0.0), weight)
    out: list[bytes | None] = []
    for uid, held in zip(ids, links):
        ends = sorted(held)
        out.append(pack_links(uid, np.array(ends, dtype=np.int64), np.array([held[e] for e in ends], dtype=np.float32))
                   if ends else None)
    return out


def _edge_table(rows: Sequence[tuple[Any, Any]]) -> EdgeTable:
    """The edges of units' ``(id, links)`` rows, each once with ``src < dst``, sorted by ``(src, dst)``."""
    parts = [(unpack_links(int(uid), blob), int(uid)) for uid, blob in rows]
    if not parts:
        return EdgeTable(src=np.zeros(0, np.int64), dst=np.zeros(0, np.int64), weight=np.zeros(0, np.float32))
    src = np.concatenate([p[0][0] for p in parts])
    dst = np.concatenate([np.full(p[0][0].size, p[1], np.int64) for p in parts])
    weight = np.concatenate([p[0][1] for p in parts]).astype(np.float32)
    order = np.lexsort((dst, src))
    return EdgeTable(src=src[order], dst=dst[order], weight=weight[order])


#: How many links a unit's ``links`` holds, in SQL over its first two bytes (:func:`~memgas.core.packing.pack_links`:
#: the widths of a distance and a weight) given as lowercase hex by the backend's ``{head}`` expression.
LINKS_COUNT = ("(length(links) - 2) / CASE {head} "
               + " ".join(f"WHEN '{o:02x}{w:02x}' THEN {o + w}" for o in (1, 2, 4, 8) for w in (4, 8)) + " END")


def links_from_edges(conn: Any, placeholder: str, edges: Any) -> int:
    """Schema 9 of SQLite, 10 of PostgreSQL: the ``edges`` table's rows packed on their newer unit (``links``), read
    from ``edges``, a cursor over ``(user_id, dst, src, weight)`` ordered by ``dst, src``; return how many units got
    links. Runs inside the migration's transaction, a batch of units per statement."""
    batch: list[tuple[Any, ...]] = []
    done = 0

    def flush() -> None:
        nonlocal done
        conn.cursor().executemany(f"UPDATE units SET links = {placeholder} WHERE user_id = {placeholder}"
                                  f" AND id = {placeholder}", batch)
        done += len(batch)
        batch.clear()

    unit, user, ends, weights = None, None, [], []
    with closing(edges):  # PostgreSQL drops the table next, which a cursor left open on it would block
        for row_user, dst, src, weight in itertools.chain(edges, [(None, None, None, None)]):
            if dst != unit and unit is not None:
                batch.append((pack_links(unit, np.array(ends, np.int64), np.array(weights, np.float32)), user, unit))
                ends, weights = [], []
                if len(batch) >= _MIGRATION_BATCH:
                    flush()
            unit, user = dst, row_user
            if dst is not None:
                ends.append(int(src))
                weights.append(float(weight))
    if batch:
        flush()
    return done


def _message_rows(messages: Sequence[Message]) -> list[tuple[Any, ...]]:
    """``(role, name, content, metadata JSON or None)`` per message, as the ``messages`` table holds them: the
    content packed (:func:`memgas.core.packing.pack_text`, schema 9 of SQLite, 10 of PostgreSQL)."""
    return [(m.role, m.name, pack_text(m.content), None if not m.metadata else json.dumps(dict(m.metadata), ensure_ascii=False))
            for m in messages]


_SCOPE_RE = re.compile(f"(agent|user):{ID_CHAR}{{1,256}}")
_KIND_RE = re.compile(r"[a-z][a-z0-9_]{0,31}")


def _experience_fields(scope: str, kind: str | None, key: str | None, payload: dict[str, Any] | None,
                       vector: np.ndarray | None, dim: int | None) -> tuple[str | None, bytes | None]:
    """Validate an experience item's fields; return ``(payload JSON, vector bytes)`` (``None`` where not given).

    Raises:
        InvalidInputError: see :meth:`Store.add_experience`.
    """
    if not isinstance(scope, str) or not _SCOPE_RE.fullmatch(scope):
        raise InvalidInputError(f"invalid experience scope {scope!r}: use 'agent:NAME' or 'user:ID'")
    if kind is not None and (not isinstance(kind, str) or not _KIND_RE.fullmatch(kind)):
        raise InvalidInputError(f"invalid experience kind {kind!r}: 1-32 of a-z 0-9 _, starting with a letter")
    if key is not None:
        if not isinstance(key, str) or "\x00" in key:
            raise InvalidInputError("an experience key must be a string without NUL characters")
        check_unicode("experience key", key)
    text = None
    if payload is not None:
        if not isinstance(payload, dict):
            raise InvalidInputError(f"an experience payload must be a JSON object, got {type(payload).__name__}")
        try:
            text = json.dumps(payload, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise InvalidInputError(f"experience payload is not JSON: {exc}") from None
        check_unicode("experience payload", text)
    blob = None
    if vector is not None:
        vec = np.asarray(vector)
        if dim is None or vec.shape != (dim,) or not np.isfinite(vec).all():
            raise InvalidInputError(f"an experience vector must be {dim} finite floats (the store's embedder), "
                                    f"got shape {vec.shape}")
        blob = vec.astype(_VEC_DTYPE).tobytes()
    return text, blob


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


class _Switch(EmbedderSwitch):
    """The binding and experience vectors a switch of embedder writes (:meth:`SQLStore.switching_embedder`)."""

    def __init__(self, store: "SQLStore", conn: Any, embedder_id: str, dim: int) -> None:
        self._store, self._conn, self._embedder_id, self._dim = store, conn, embedder_id, dim
        self.bound = False
        self.set: set[int] = set()

    def bind(self) -> None:
        """Bind the new embedder (in the switch's transaction)."""
        q = self._store._q
        self._conn.execute(q("UPDATE meta SET value = ? WHERE key = 'embedder_id'"), (self._embedder_id,))
        self._conn.execute(q("UPDATE meta SET value = ? WHERE key = 'dim'"), (type(self._store)._DIM_VALUE(self._dim),))
        self.bound = True

    def set_experience_vector(self, item_id: int, vector: np.ndarray) -> None:
        """Write one item's vector of the new embedder (``updated_at`` stays: the item did not change)."""
        vec = np.asarray(vector, dtype=np.float64)
        if vec.shape != (self._dim,) or not np.isfinite(vec).all():
            raise InvalidInputError(f"an experience vector must be {self._dim} finite floats (the new embedder's)")
        done = self._conn.execute(self._store._q("UPDATE experiences SET vector = ? WHERE id = ? AND vector IS NOT NULL"),
                                  (vec.astype(_VEC_DTYPE).tobytes(), int(item_id))).rowcount
        if not done:
            raise InvalidInputError(f"no experience item {item_id} with a vector")
        self.set.add(int(item_id))


class SQLStore(Store, StoreBinding, SnapshotStore, KeyStore, ExperienceStore, QuoteStore):
    """A :class:`~memgas.store.base.Store` over a SQL database, with the other concerns a SQL database holds beside
    it (binding, snapshots, keys, experience, each its own interface): the methods whose SQL both backends share.

    A subclass provides ``_read()`` (a connection inside one read snapshot) and ``_write(user_id)``
    (a connection inside one write transaction holding what serialises ``user_id``'s writes), and
    overrides the hooks where its SQL differs: :meth:`_q`, :attr:`_UNIT_COLUMNS`,
    :attr:`_LINKS_HEAD`, :attr:`_MESSAGES_OF`, :attr:`_DIM_VALUE`, :meth:`_lock_meta`, :meth:`_messages`,
    :meth:`_new_unit_ids`, :meth:`_new_version`, :meth:`_deleted` and :meth:`_storage`.
    """

    #: The unit columns read by load_units(_after), with the session id joined on the backend's key.
    _UNIT_COLUMNS: ClassVar[str]
    #: Which units :meth:`session_units` reads (parameters: the user twice, the session id). Naming the session's user
    #: lets the planner find the session by its key, then its units; without it SQLite took the user's index and read
    #: every unit row of the user for each session (a timeline of 262 sessions and 20,471 units: 3.8 s, now 0.7).
    _UNITS_OF_SESSION: ClassVar[str] = "u.user_id = ? AND s.user_id = ? AND s.session_id = ?"
    #: The first two bytes of a unit's ``links`` as lowercase hex, in the backend's SQL (:data:`LINKS_COUNT`).
    _LINKS_HEAD: ClassVar[str]
    #: How a subquery on ``messages m`` names the messages of session ``s`` (on the backend's key).
    _MESSAGES_OF: ClassVar[str] = "m.session_pk = s.pk"
    #: How a statement on ``messages`` alone names the user first (PostgreSQL keys them by user; SQLite's rows have
    #: no user column, their session key is the store's own).
    _MESSAGES_USER: ClassVar[str] = ""
    #: How a join of ``messages m`` to ``units u`` names the unit's session (and the user where messages carry it).
    _MESSAGES_OF_UNIT: ClassVar[str] = "m.session_pk = u.session_pk"
    #: How the dimension is written in ``meta.value`` (an integer in SQLite, text in PostgreSQL).
    _DIM_VALUE: ClassVar[Callable[[int], Any]] = int

    @staticmethod
    def _q(sql: str) -> str:
        """A statement written with ``?`` placeholders in the backend's placeholder style."""
        return sql

    @abstractmethod
    def _read(self, user_id: str | None = None) -> AbstractContextManager[Any]:
        """A connection inside one read snapshot (joining this thread's open transaction, if any); ``user_id``: whose
        data the reads are for (a backend with replicas may serve them from one that has that user's writes)."""

    @abstractmethod
    def _write(self, user_id: str | None) -> AbstractContextManager[Any]:
        """A connection inside one write transaction that serialises ``user_id``'s writes (``None``: meta only)."""

    def _lock_meta(self, conn: Any) -> None:
        """Serialise writes of ``meta`` across processes (the write transaction does so by itself here)."""

    @abstractmethod
    def _messages(self, conn: Any, user_id: str, session_pk: int) -> list[Any]:
        """The ``(role, content, name)`` rows of the session with key ``session_pk``, in order."""

    @abstractmethod
    def _new_version(self, conn: Any, user_id: str) -> None:
        """Set the user's row in ``users`` (inserted if missing) to a new number of the store-wide counter."""

    def _deleted(self) -> None:
        """Note that the open write transaction deleted rows (a backend that erases them acts on commit)."""

    @abstractmethod
    def _storage(self, conn: Any) -> dict[str, Any]:
        """The keys of :meth:`stats` that say where the store lives and what it takes (``path``, ``file_bytes``, ...)."""

    # -- embedder binding -------------------------------------------------------------------
    def _meta(self, conn: Any, key: str) -> Any:
        row = conn.execute(self._q("SELECT value FROM meta WHERE key = ?"), (key,)).fetchone()
        return None if row is None else row[0]

    def _dim(self, conn: Any) -> int | None:
        dim = self._meta(conn, "dim")
        return None if dim is None else int(dim)

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
        with self._read() as conn:  # bound already (every call but the first): no lock, so writers never queue here
            if (self._meta(conn, "embedder_id"), self._dim(conn)) == (embedder_id, dim):
                return
        with self._write(None) as conn:
            self._lock_meta(conn)
            bound_id, bound_dim = self._meta(conn, "embedder_id"), self._dim(conn)
            if bound_id is None:
                conn.execute(self._q("INSERT INTO meta (key, value) VALUES ('embedder_id', ?), ('dim', ?)"),
                             (embedder_id, type(self)._DIM_VALUE(int(dim))))
            elif (bound_id, bound_dim) != (embedder_id, dim):
                raise EmbedderMismatchError(
                    f"store is bound to embedder {bound_id!r} (dim {bound_dim}); "
                    f"cannot use embedder {embedder_id!r} (dim {dim})"
                )

    def _share_meta(self, conn: Any) -> None:
        """Hold the binding against a switch (:meth:`switching_embedder`) to the end of the write; writes that hold it
        do not wait for each other (the write transaction serialises everything here)."""

    def _check_vectors_of(self, conn: Any, embedder_id: str | None) -> None:
        """Refuse, in the open write, vectors of ``embedder_id`` unless the store is bound to it (``None``: any)."""
        if embedder_id is None:
            return
        self._share_meta(conn)
        bound = self._meta(conn, "embedder_id")
        if bound is not None and bound != embedder_id:
            raise EmbedderMismatchError(f"the store's vectors now come from embedder {bound!r}, not {embedder_id!r} "
                                        f"(it was re-embedded): open it with embedder {bound!r}")

    @contextmanager
    def switching_embedder(self, embedder_id: str, dim: int) -> Iterator[EmbedderSwitch]:
        """Move the store to another embedder in one write transaction (see :meth:`StoreBinding.switching_embedder`).
        """
        if not isinstance(embedder_id, str) or not embedder_id:
            raise InvalidInputError(f"invalid embedder id {embedder_id!r}")
        if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or dim <= 0:
            raise InvalidInputError(f"invalid embedding dimension {dim!r}")
        with ExitStack() as held:
            conn = held.enter_context(self._write(None))
            for user in self.list_users():  # users first, the binding last: a writer takes them in that order too
                held.enter_context(self._write(user))
            self._lock_meta(conn)
            if self._meta(conn, "embedder_id") is None:
                raise InvalidInputError("the store holds no embedder yet: there is nothing to re-embed")
            last = conn.execute("SELECT coalesce(max(id), 0) FROM units").fetchone()[0]
            switch = _Switch(self, conn, embedder_id, int(dim))
            yield switch
            if not switch.bound:
                raise InvalidInputError("the switch was left without binding the new embedder: rolled back")
            left = conn.execute(self._q("SELECT count(*) FROM units WHERE id <= ?"), (int(last),)).fetchone()[0]
            vectors = conn.execute("SELECT count(*) FROM experiences WHERE vector IS NOT NULL").fetchone()[0]
            if left or vectors != len(switch.set):
                raise InvalidInputError(f"{left} units and {vectors - len(switch.set)} experience vectors were not "
                                        "re-embedded: the switch is rolled back")
            conn.execute("DELETE FROM snapshots")
            self._deleted()  # the old vectors' pages are overwritten as a delete's are

    @property
    def embedder_id(self) -> str | None:
        """The bound embedder's id, or ``None`` before :meth:`bind_embedder` was first called."""
        with self._read() as conn:
            return self._meta(conn, "embedder_id")

    def record_method(self, name: str) -> None:
        """Record the memory method that first wrote this store (kept; a later call changes nothing)."""
        check_id("method", name)
        with self._write(None) as conn:
            self._lock_meta(conn)
            if self._meta(conn, "method") is None:
                conn.execute(self._q("INSERT INTO meta (key, value) VALUES ('method', ?)"), (name,))

    @property
    def method(self) -> str | None:
        """The memory method that first wrote this store (:meth:`record_method`), or ``None``."""
        with self._read() as conn:
            return self._meta(conn, "method")

    # -- writes ------------------------------------------------------------------------------
    @staticmethod
    def _session_row(session: Session, units: Sequence[Unit],
                     edges: Sequence[Edge]) -> tuple[str, str, str | None, str, list[tuple[int, int, float]]]:
        """Validate what :meth:`add_session` can check before reading the store (the scope ids included).

        Returns:
            ``(user_id, session_id, timestamp, metadata JSON, edge rows)``.

        Raises:
            InvalidInputError: an invalid id, an empty session, a bad timestamp, metadata that is not
                JSON-serialisable, or an invalid edge.
        """
        user_id = check_id("user_id", session.user_id)
        session_id = check_id("session_id", session.session_id)
        for kind in ("agent_id", "run_id"):
            if getattr(session, kind) is not None:
                check_id(kind, getattr(session, kind))
        if not session.messages:
            raise InvalidInputError(f"session {session_id!r} is empty: it needs at least one message")
        timestamp = _iso(parse_timestamp(session.timestamp))
        try:
            metadata = json.dumps(dict(session.metadata), ensure_ascii=False)
        except (TypeError, ValueError) as exc:
            raise InvalidInputError(f"session {session_id!r}: metadata is not JSON-serialisable: {exc}") from None
        return user_id, session_id, timestamp, metadata, _edge_rows(edges, len(units))

    @abstractmethod
    def _insert_session(self, conn: Any, row: tuple[Any, ...]) -> int:
        """Insert a ``sessions`` row (user_id, session_id, timestamp, metadata, n_messages, n_turns,
        created_at, agent_id, run_id); return its primary key."""

    @abstractmethod
    def _insert_messages(self, conn: Any, user_id: str, session_pk: int, start: int,
                         rows: list[tuple[Any, ...]]) -> None:
        """Insert message ``rows`` (:func:`_message_rows`) at positions ``start, start + 1, ...`` of the session."""

    @abstractmethod
    def _new_unit_ids(self, conn: Any, n: int) -> list[int]:
        """``n`` ids for new units, ascending, larger than every unit id the store ever handed out."""

    def _insert_units_and_edges(self, conn: Any, user_id: str, session_pk: int, unit_rows: list[tuple[Any, ...]],
                                edge_rows: list[tuple[int, int, float]]) -> list[int]:
        """Insert a session's unit rows, each with its links (the edges, refs ``-(i + 1)`` resolved to the new ids,
        kept on their newer end: :func:`_unit_links`); return the ids."""
        ids = self._new_unit_ids(conn, len(unit_rows))
        conn.cursor().executemany(self._q(
            "INSERT INTO units (user_id, id, session_pk, granularity, turn_start, turn_end, chunk, text, msg_start,"
            " msg_end, vector, links) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"),
            [(user_id, i, session_pk, *row, links) for i, row, links in zip(ids, unit_rows, _unit_links(ids, edge_rows))])
        return ids

    def _unlink(self, conn: Any, user_id: str, gone: Sequence[int]) -> None:
        """Take the links to the units ``gone`` (deleted by the caller's transaction) off the user's other units:
        only units newer than the oldest of them can hold one."""
        if not gone:
            return
        doomed = np.array(sorted(gone), dtype=np.int64)
        changed = []
        for uid, blob in conn.execute(self._q("SELECT id, links FROM units WHERE user_id = ? AND id > ?"
                                              " AND links IS NOT NULL"), (user_id, int(doomed[0]))).fetchall():
            src, weight = unpack_links(int(uid), blob)
            keep = ~np.isin(src, doomed)
            if not keep.all():
                changed.append((pack_links(int(uid), src[keep], weight[keep]) if keep.any() else None, user_id, uid))
        if changed:
            conn.cursor().executemany(self._q("UPDATE units SET links = ? WHERE user_id = ? AND id = ?"), changed)

    @staticmethod
    @abstractmethod
    def _check_endpoints(conn: Any, user_id: str, unit_ids: set[int]) -> None:
        """Raise :class:`InvalidInputError` unless every id is a stored unit of ``user_id``."""

    def add_session(self, session: Session, units: Sequence[Unit], edges: Sequence[Edge], *,
                    embedder_id: str | None = None) -> list[int]:
        """Write a session, its units and edges in one transaction; return the new unit ids in order.

        Args:
            session: the validated session (see :func:`memgas.core.validate.make_session`).
            units: its units, each with a vector of the bound embedder's dimension.
            edges: undirected edges; an endpoint is a stored unit id of the same user, or
                ``-(i + 1)`` for the ``i``-th unit of ``units``. A pair given twice (either way
                round, or already stored) keeps the larger weight.
            embedder_id: the embedder of the vectors, checked against the store's binding in the write.

        Raises:
            EmbedderMismatchError: ``embedder_id`` is not the store's embedder.
            DuplicateSessionError: the user already has a session with this id.
            InvalidInputError: an invalid session, unit or edge, or an edge endpoint that is not a
                unit of this user (nothing is written).
        """
        user_id, session_id, timestamp, metadata, edge_rows = self._session_row(session, units, edges)
        with self._write(user_id) as conn:
            self._check_vectors_of(conn, embedder_id)
            unit_rows = session_unit_rows(session, units, self._dim(conn))
            if conn.execute(self._q("SELECT 1 FROM sessions WHERE user_id = ? AND session_id = ?"),
                            (user_id, session_id)).fetchone():
                raise DuplicateSessionError(f"user {user_id!r} already has a session {session_id!r}")
            self._check_endpoints(conn, user_id, {n for row in edge_rows for n in row[:2] if n > 0})
            session_pk = self._insert_session(conn, (user_id, session_id, timestamp, metadata, len(session.messages),
                                                     len(session.turns), datetime.now(timezone.utc).isoformat(),
                                                     session.agent_id, session.run_id))
            self._insert_messages(conn, user_id, session_pk, 0, _message_rows(session.messages))
            ids = self._insert_units_and_edges(conn, user_id, session_pk, unit_rows, edge_rows)
            self._touch(conn, user_id)
            self._stamp(conn, user_id, session_pk)
        return ids

    def rewrite_session(self, session: Session, *, keep_messages: int, drop_units: Sequence[int],
                        units: Sequence[Unit], edges: Sequence[Edge], embedder_id: str | None = None) -> list[int]:
        """Bring a stored session to ``session`` in one transaction: its messages from position ``keep_messages``
        on are replaced by those of ``session`` (its first ``keep_messages`` are the stored ones), its timestamp
        and metadata become ``session``'s, the units ``drop_units`` of the session go with every edge touching
        them, and ``units`` and ``edges`` are written as :meth:`add_session` writes them; return the new ids.

        Replaced messages and units are forgotten as by :meth:`delete_session`.

        Raises:
            NotFoundError: the user has no such session.
            EmbedderMismatchError: ``embedder_id`` is not the store's embedder.
            InvalidInputError: ``keep_messages`` outside the stored messages, a dropped id that is not a unit of
                this session, an edge to a dropped unit, or anything :meth:`add_session` refuses (nothing is written).
        """
        user_id, session_id, timestamp, metadata, edge_rows = self._session_row(session, units, edges)
        drop = sorted({int(i) for i in drop_units})
        with self._write(user_id) as conn:
            self._check_vectors_of(conn, embedder_id)
            unit_rows = session_unit_rows(session, units, self._dim(conn))
            row = conn.execute(self._q("SELECT pk, n_messages FROM sessions WHERE user_id = ? AND session_id = ?"),
                               (user_id, session_id)).fetchone()
            if row is None:
                raise NotFoundError(f"user {user_id!r} has no session {session_id!r}")
            session_pk, n_stored = int(row[0]), int(row[1])
            if not 0 <= keep_messages <= min(n_stored, len(session.messages)):
                raise InvalidInputError(f"keep_messages {keep_messages} is outside the session's {n_stored} messages")
            own: set[int] = set()
            for chunk in range(0, len(drop), 500):
                part = drop[chunk:chunk + 500]
                own.update(int(r[0]) for r in conn.execute(self._q(
                    f"SELECT id FROM units WHERE session_pk = ? AND id IN ({', '.join('?' * len(part))})"),
                    (session_pk, *part)))
            stranger = next((i for i in drop if i not in own), None)
            if stranger is not None:
                raise InvalidInputError(f"unit {stranger} is not a unit of session {session_id!r}")
            ends = {n for r in edge_rows for n in r[:2] if n > 0}
            if ends & set(drop):
                raise InvalidInputError(f"an edge links unit {min(ends & set(drop))}, which is dropped")
            self._check_endpoints(conn, user_id, ends)
            # The texts kept as message ranges, read before the messages change: a kept unit's range is moved to
            # where its turns now are (or its text stored, were they ever to differ).
            # Only units reaching past ``keep_messages`` can move (those before cover the same messages as before), so
            # an append to a long session reads its end alone.
            # Such a unit ends at or past the turn holding message keep_messages - 1, which is that turn of the stored
            # session too (turns are cut from the start: its messages before are the stored ones), so it is sought
            # by where its turns end (the units_tail index) among the only units kept as ranges, chunks and turns.
            last = next((t.index for t in session.turns if t.msg_end >= keep_messages), len(session.turns)) \
                if keep_messages > 0 else -1
            ranged = self._joined_texts(conn, user_id, conn.execute(self._q(
                self._UNIT_COLUMNS + " WHERE u.user_id = ? AND u.session_pk = ? AND u.granularity IN"
                f" ({GRANULARITIES.index('session')}, {GRANULARITIES.index('turn')}) AND u.turn_end > ?"
                " AND u.msg_start >= 0 AND u.msg_end > ?"), (user_id, session_pk, last, keep_messages)).fetchall())
            conn.execute(self._q("DELETE FROM messages WHERE session_pk = ? AND position >= ?"),
                         (session_pk, keep_messages))
            self._insert_messages(conn, user_id, session_pk, keep_messages,
                                  _message_rows(session.messages[keep_messages:]))
            self._unlink(conn, user_id, drop)
            for chunk in range(0, len(drop), 500):
                part = drop[chunk:chunk + 500]
                conn.execute(self._q(f"DELETE FROM units WHERE id IN ({', '.join('?' * len(part))})"), part)
            turns, dropped = session.turns, set(drop)
            for r in ranged:
                if int(r[0]) in dropped:
                    continue
                start, end = int(r[3]), int(r[4])
                if end <= len(turns) and "\n".join(t.text for t in turns[start:end]) == r[6]:
                    moved = ("", turns[start].msg_start, turns[end - 1].msg_end)
                else:
                    moved = (r[6], -1, -1)
                conn.execute(self._q("UPDATE units SET text = ?, msg_start = ?, msg_end = ? WHERE user_id = ? AND id = ?"),
                             (*moved, user_id, int(r[0])))
            conn.execute(self._q("UPDATE sessions SET timestamp = ?, metadata = ?, n_messages = ?, n_turns = ?,"
                                 " agent_id = ?, run_id = ? WHERE pk = ?"),
                         (timestamp, metadata, len(session.messages), len(session.turns), session.agent_id,
                          session.run_id, session_pk))
            ids = self._insert_units_and_edges(conn, user_id, session_pk, unit_rows, edge_rows)
            self._touch(conn, user_id)
            self._stamp(conn, user_id, session_pk)
            if keep_messages < n_stored:  # messages left the session: no snapshot may keep their words
                self._forget_snapshots(conn, user_id)
            if drop or keep_messages < n_stored:
                self._deleted()
        return ids

    def _forget_snapshots(self, conn: Any, user_id: str) -> None:
        """Drop the user's index snapshots in the open write transaction: what it deletes must not live on in them."""
        conn.execute(self._q("DELETE FROM snapshots WHERE user_id = ?"), (user_id,))

    def save_snapshot(self, user_id: str, kind: str, key: tuple[int, int], data: bytes, *,
                      replaces: Sequence[str] = ()) -> bool:
        """Keep ``data``, an index of the user's state at ``key`` (``(version(user_id), generation)`` when it was
        read), as the user's snapshot of ``kind``, replacing the one before and the user's snapshots whose kind begins
        with one of ``replaces`` (a method's older formats); return whether it was kept.

        It is kept only while ``key`` is still the user's state (no write of this user committed since and no
        rollback in this store object), so a snapshot is always of a committed state that no later delete removed
        content from: deletes, and rewrites that drop messages, drop the user's snapshots in their transaction.
        """
        with self._write(user_id) as conn:
            if key[1] != self.generation:
                return False
            row = conn.execute(self._q("SELECT version FROM users WHERE user_id = ?"), (user_id,)).fetchone()
            if row is None or int(row[0]) != key[0]:
                return False
            conn.execute(self._q("INSERT INTO snapshots (user_id, kind, version, data) VALUES (?, ?, ?, ?)"
                                 " ON CONFLICT (user_id, kind) DO UPDATE SET version = excluded.version,"
                                 " data = excluded.data"), (user_id, kind, key[0], data))
            for old in replaces:
                if not kind.startswith(old):
                    conn.execute(self._q("DELETE FROM snapshots WHERE user_id = ? AND substr(kind, 1, ?) = ?"),
                                 (user_id, len(old), old))
        return True

    def load_snapshot(self, user_id: str, kind: str) -> tuple[int, bytes] | None:
        """The user's snapshot of ``kind`` as ``(version it is of, data)``, or ``None`` (see :meth:`save_snapshot`)."""
        with self._read(user_id) as conn:
            row = conn.execute(self._q("SELECT version, data FROM snapshots WHERE user_id = ? AND kind = ?"),
                               (user_id, kind)).fetchone()
        return None if row is None else (int(row[0]), bytes(row[1]))

    def unit_vectors(self, user_id: str, ids: np.ndarray) -> np.ndarray:
        """The stored float16 vectors of the user's units ``ids`` (ascending), zeros for an id no longer stored: one
        statement over the user's units between the first and the last id (a snapshot names most of them)."""
        ids = np.asarray(ids, dtype=np.int64)
        with self._read(user_id) as conn:
            dim = self._dim(conn) or 0
            rows = [] if ids.size == 0 else conn.execute(self._q(
                "SELECT id, vector FROM units WHERE user_id = ? AND id BETWEEN ? AND ? ORDER BY id"),
                (user_id, int(ids[0]), int(ids[-1]))).fetchall()
        out = np.zeros((ids.size, dim), dtype=np.float16)
        if rows:
            stored = np.fromiter((r[0] for r in rows), np.int64, len(rows))
            at = np.searchsorted(ids, stored)
            hit = (at < ids.size) & (ids[np.minimum(at, ids.size - 1)] == stored)
            out[at[hit]] = stored_halves(b"".join(bytes(r[1]) for r in rows), len(rows), dim)[hit]
        return out

    def _stamp(self, conn: Any, user_id: str, session_pk: int) -> None:
        """Mark a session written by this transaction with the user's new version (for :meth:`sessions_since`)."""
        conn.execute(self._q("UPDATE sessions SET version = (SELECT version FROM users WHERE user_id = ?)"
                             " WHERE user_id = ? AND pk = ?"), (user_id, user_id, session_pk))

    def _touch(self, conn: Any, user_id: str) -> None:
        """Give the user a new version after a write, or drop the user once no session is left.

        Versions come from one store-wide counter, so a user deleted and re-created never sees
        an old version number again (a cache keyed on it cannot go stale); a user without
        sessions has version 0, like one never seen.
        """
        if conn.execute(self._q("SELECT 1 FROM sessions WHERE user_id = ? LIMIT 1"), (user_id,)).fetchone():
            self._new_version(conn, user_id)
        else:
            conn.execute(self._q("DELETE FROM users WHERE user_id = ?"), (user_id,))

    def delete_session(self, user_id: str, session_id: str) -> None:
        """Delete a session with its messages, units and every edge touching them.

        What is left of their bytes depends on the backend (see the module of each):
        :class:`~memgas.store.sqlite.SQLiteStore` zeroes the freed pages (``secure_delete``) and
        empties the write-ahead log once the write transaction commits (a read transaction of another
        connection open for more than a couple of seconds defers that to the next write or ``close()``);
        in PostgreSQL the rows leave every query at once but their bytes stay in the table files until
        later writes reuse the space (or ``VACUUM FULL``), and in the write-ahead log until it is recycled.
        Copies outside the database's files (backups, the disk's remapping of freed blocks) are out of reach.

        Raises:
            NotFoundError: the user has no such session.
        """
        with self._write(user_id) as conn:
            self._unlink(conn, user_id, [int(r[0]) for r in conn.execute(self._q(
                f"SELECT u.id FROM units u JOIN sessions s ON s.pk = u.session_pk WHERE {self._UNITS_OF_SESSION}"),
                (user_id, user_id, session_id)).fetchall()])
            if not conn.execute(self._q("DELETE FROM sessions WHERE user_id = ? AND session_id = ?"),
                                (user_id, session_id)).rowcount:
                raise NotFoundError(f"user {user_id!r} has no session {session_id!r}")
            self._forget_snapshots(conn, user_id)
            self._touch(conn, user_id)
            self._deleted()

    def delete_user(self, user_id: str) -> int:
        """Delete all of a user's sessions, messages, units and edges, and the user's own experience items
        (scope ``user:ID``), in one transaction (forgotten as by :meth:`delete_session`); return the number
        of sessions.

        Raises:
            NotFoundError: the user has no stored session and no experience item.
        """
        with self._write(user_id) as conn:
            n = conn.execute(self._q("DELETE FROM sessions WHERE user_id = ?"), (user_id,)).rowcount
            items = conn.execute(self._q("DELETE FROM experiences WHERE scope = ?"),
                                 (scope_of(user_id=user_id),)).rowcount
            if not n and not items:
                raise NotFoundError(f"no user {user_id!r}")
            self._forget_snapshots(conn, user_id)
            self._touch(conn, user_id)
            self._deleted()
        return n

    # -- reads -------------------------------------------------------------------------------
    def has_user(self, user_id: str) -> bool:
        """Whether the user has any stored session."""
        with self._read(user_id) as conn:
            return conn.execute(self._q("SELECT 1 FROM users WHERE user_id = ?"), (user_id,)).fetchone() is not None

    def list_users(self) -> list[str]:
        """All user ids with at least one session, sorted (a cross-user read)."""
        with self._read() as conn:
            return [row[0] for row in conn.execute("SELECT user_id FROM users ORDER BY user_id")]

    def list_sessions(self, user_id: str, *, previews: bool = False) -> list[SessionInfo]:
        """The user's session headers (scope and metadata included; with ``previews``, the start of each one's
        first user message too, which costs a read of it), oldest first: by timestamp, sessions without one last,
        then insertion."""
        return self._headers("s.user_id = ?", (user_id,), previews)

    def sessions_since(self, user_id: str, version: int) -> tuple[list[SessionInfo], int]:
        """The headers of the user's sessions written (added or rewritten) after the user's ``version``, and how
        many sessions the user has now (so a caller holding the headers of ``version`` can tell a delete)."""
        with self._read(user_id) as conn:
            count = conn.execute(self._q("SELECT count(*) FROM sessions WHERE user_id = ?"), (user_id,)).fetchone()[0]
        return self._headers("s.user_id = ? AND s.version > ?", (user_id, version), False), int(count)

    def session_infos(self, user_id: str, session_ids: Sequence[str], *,
                      previews: bool = False) -> dict[str, SessionInfo]:
        """The headers of the given sessions of the user (previews as in :meth:`list_sessions`), by id (ids the user
        does not have are left out)."""
        out: dict[str, SessionInfo] = {}
        ids = list(dict.fromkeys(session_ids))
        for start in range(0, len(ids), 500):
            part = ids[start:start + 500]
            for info in self._headers(f"s.user_id = ? AND s.session_id IN ({', '.join('?' * len(part))})",
                                      (user_id, *part), previews):
                out[info.session_id] = info
        return out

    def _headers(self, where: str, args: tuple[Any, ...], previews: bool) -> list[SessionInfo]:
        """The headers of the sessions ``s`` that ``where`` selects (``args[0]`` is their user), in
        :meth:`list_sessions`'s order."""
        # The preview is the first user message (by the primary key's order), else the first message; packed, it is
        # cut once unpacked.
        preview = ("coalesce("
                   f"(SELECT m.content FROM messages m WHERE {self._MESSAGES_OF}"
                   " AND m.role = 'user' ORDER BY m.position LIMIT 1),"
                   f" (SELECT m.content FROM messages m WHERE {self._MESSAGES_OF}"
                   " ORDER BY m.position LIMIT 1))") if previews else "NULL"
        with self._read(args[0]) as conn:
            rows = conn.execute(
                self._q("SELECT s.session_id, s.timestamp, s.n_messages, s.n_turns, s.created_at, s.agent_id,"
                        f" s.run_id, s.metadata, {preview} FROM sessions s WHERE {where}"
                        " ORDER BY s.timestamp IS NULL, s.timestamp, s.pk"),
                args,
            ).fetchall()
        return [
            SessionInfo(session_id=sid, timestamp=_datetime(ts), n_messages=n_msg, n_turns=n_turns,
                        created_at=datetime.fromisoformat(created), agent_id=agent, run_id=run,
                        metadata=json.loads(meta), preview="" if preview is None else unpack_text(preview)[:PREVIEW_CHARS])
            for sid, ts, n_msg, n_turns, created, agent, run, meta, preview in rows
        ]

    def get_session(self, user_id: str, session_id: str) -> Session:
        """The stored session with its messages, timestamp and metadata.

        Raises:
            NotFoundError: the user has no such session.
        """
        with self._read(user_id) as conn:
            row = conn.execute(
                self._q("SELECT pk, timestamp, metadata, agent_id, run_id FROM sessions"
                        " WHERE user_id = ? AND session_id = ?"),
                (user_id, session_id),
            ).fetchone()
            if row is None:
                raise NotFoundError(f"user {user_id!r} has no session {session_id!r}")
            messages = self._messages(conn, user_id, row[0])
        return Session(
            user_id=user_id,
            session_id=session_id,
            messages=tuple(Message(role, unpack_text(content), name, None if meta is None else json.loads(meta))
                           for role, content, name, meta in messages),
            timestamp=_datetime(row[1]),
            metadata=json.loads(row[2]),
            agent_id=row[3],
            run_id=row[4],
        )

    def _unit_table(self, rows: list[Any], dim: int, stored_texts: str | None = None) -> UnitTable:
        """The table of unit ``rows``; with ``stored_texts`` (the user id), texts left in the store (not read)."""
        if not rows:
            return UnitTable.empty(dim)
        ids, session_ids, granularity, turn_start, turn_end, chunk, texts, _, _, _, blobs = zip(*rows)
        vectors = decode_rows(b"".join(blobs), len(rows), dim)
        unit_ids = np.array(ids, dtype=np.int64)
        if stored_texts is not None:
            texts = StoredTexts(self, stored_texts, unit_ids)  # type: ignore[assignment]  # a lazy Sequence[str]
        return UnitTable(
            ids=unit_ids,
            session_ids=session_ids,
            granularity=np.array(granularity, dtype=np.int8),
            turn_start=np.array(turn_start, dtype=np.int32),
            turn_end=np.array(turn_end, dtype=np.int32),
            chunk=np.array(chunk, dtype=np.int32),
            texts=texts,
            vectors=vectors,
        )

    def load_units(self, user_id: str, *, texts: bool = True) -> UnitTable:
        """All units of a user, by ascending id; an empty table for an unknown user. With ``texts=False`` the texts
        are not read: the table's are :class:`~memgas.store.base.StoredTexts`, read when asked for.

        The vectors matrix is read-only: it is one view over the rows' joined bytes, and tables
        are meant to be shared snapshots.
        """
        return self.load_units_after(user_id, 0, texts=texts)[1]

    def unit_texts(self, user_id: str, ids: Sequence[int]) -> dict[int, str]:
        """The texts of the user's units ``ids`` that exist, by id: one statement per 500 ids, which joins each text
        kept as a message range to its messages (a search reads its hits' turns so, in one round trip)."""
        lines: dict[int, list[str]] = {}
        for uid, text, msg_start, role, content, name, _ in self._unit_ranges(user_id, ids):
            got = lines.setdefault(uid, [])
            if msg_start < 0:
                got.append(text)
            elif role is not None:
                got.append(speaker_line(role, name, content))
        return {uid: "\n".join(got) for uid, got in lines.items()}

    def unit_messages(self, user_id: str, ids: Sequence[int]) -> dict[int, tuple[int, tuple[Message, ...]]]:
        """For each of the user's units ``ids`` that exists, by id: the position of the first message its text is made
        of and those messages, ``(-1, ())`` for a text kept as it is: one statement per 500 ids, by the messages' key
        (a context quotes a few turns of sessions that may hold tens of thousands of words)."""
        out: dict[int, tuple[int, list[Message]]] = {}
        for uid, _, msg_start, role, content, name, meta in self._unit_ranges(user_id, ids):
            got = out.setdefault(uid, (msg_start, []))[1]
            if role is not None:
                got.append(Message(role, content, name, None if meta is None else json.loads(meta)))
        return {uid: (start, tuple(got)) for uid, (start, got) in out.items()}

    def _unit_ranges(self, user_id: str, ids: Sequence[int]) -> list[tuple[int, str, int, Any, Any, Any, Any]]:
        """Per unit of ``ids`` the user has, by ascending id: ``(id, text, msg_start, role, content, name, metadata)``
        for each message of its range in order, or one row of ``None`` message columns for a text kept as it is."""
        wanted = sorted({int(i) for i in ids})
        rows: list[tuple[int, str, int, Any, Any, Any, Any]] = []
        with self._read(user_id) as conn:
            for start in range(0, len(wanted), 500):
                part = wanted[start:start + 500]
                statement = ("SELECT u.id, u.text, u.msg_start, m.role, m.content, m.name, m.metadata FROM units u"
                             f" LEFT JOIN messages m ON {self._MESSAGES_OF_UNIT} AND m.position >= u.msg_start"
                             f" AND m.position < u.msg_end WHERE u.user_id = ? AND u.id IN ({', '.join('?' * len(part))})"
                             " ORDER BY u.id, m.position")
                params = (user_id,) * self._MESSAGES_OF_UNIT.count("?") + (user_id, *part)
                rows += [(int(uid), text, int(msg_start), role, None if content is None else unpack_text(content), name,
                          meta) for uid, text, msg_start, role, content, name, meta in
                         conn.execute(self._q(statement), params).fetchall()]
        return rows

    def session_metadata(self, user_id: str, session_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The metadata of each of the user's sessions ``session_ids`` that exists, by id: one statement per 500."""
        wanted = sorted(set(session_ids))
        out: dict[str, dict[str, Any]] = {}
        with self._read(user_id) as conn:
            for start in range(0, len(wanted), 500):
                part = wanted[start:start + 500]
                statement = (f"SELECT session_id, metadata FROM sessions WHERE user_id = ? AND session_id IN"
                             f" ({', '.join('?' * len(part))})")
                out.update((sid, json.loads(meta)) for sid, meta in conn.execute(self._q(statement), (user_id, *part)))
        return out

    def session_speakers(self, user_id: str, session_ids: Sequence[str]
                         ) -> dict[str, tuple[dict[str, Any], tuple[tuple[str, str | None], ...]]]:
        """For each of the user's sessions ``session_ids`` that exists, by id: its metadata and each message's
        ``(role, name)`` in order, without the messages' text: one statement per 500 sessions."""
        wanted = sorted(set(session_ids))
        out: dict[str, tuple[dict[str, Any], list[tuple[str, str | None]]]] = {}
        with self._read(user_id) as conn:
            for start in range(0, len(wanted), 500):
                part = wanted[start:start + 500]
                statement = (f"SELECT s.session_id, s.metadata, m.role, m.name FROM sessions s LEFT JOIN messages m ON"
                             f" {self._MESSAGES_OF} WHERE s.user_id = ? AND s.session_id IN ({', '.join('?' * len(part))})"
                             " ORDER BY s.pk, m.position")
                for sid, meta, role, name in conn.execute(self._q(statement), (user_id, *part)).fetchall():
                    got = out.setdefault(sid, (json.loads(meta), []))[1]
                    if role is not None:
                        got.append((role, name))
        return {sid: (meta, tuple(got)) for sid, (meta, got) in out.items()}

    def _joined_texts(self, conn: Any, user_id: str, rows: list[Any]) -> list[Any]:
        """Unit ``rows`` (as :attr:`_UNIT_COLUMNS` reads them) with each text stored as a message range made again:
        its messages' ``speaker: content`` lines joined by newlines (what its turns' texts joined are). The ranges are
        read by the messages' key (session, position), all in one statement per :data:`_RANGES_PER_QUERY`."""
        wanted = sorted({(r[9], r[7], r[8]) for r in rows if r[7] >= 0})
        if not wanted:
            return rows
        lines: dict[int, dict[int, str]] = {}
        for start in range(0, len(wanted), _RANGES_PER_QUERY):
            part = wanted[start:start + _RANGES_PER_QUERY]
            where = " OR ".join(["(session_pk = ? AND position >= ? AND position < ?)"] * len(part))
            params = ((user_id,) if self._MESSAGES_USER else ()) + tuple(x for w in part for x in w)
            for pk, position, role, content, name in conn.execute(self._q(
                    f"SELECT session_pk, position, role, content, name FROM messages WHERE {self._MESSAGES_USER}"
                    f"({where})"), params).fetchall():
                lines.setdefault(int(pk), {})[int(position)] = speaker_line(role, name, unpack_text(content))
        return [(*r[:6], "\n".join(lines.get(int(r[9]), {}).get(p, "") for p in range(r[7], r[8])), *r[7:])
                if r[7] >= 0 else r for r in rows]

    def load_units_after(self, user_id: str, after_id: int, *, texts: bool = True) -> tuple[int, UnitTable]:
        """The count of the user's units with ids ``<= after_id`` and the units added after, in one
        snapshot (ids are positive and never reused: AUTOINCREMENT in SQLite, a sequence in PostgreSQL); texts
        as for :meth:`load_units`."""
        with self._read(user_id) as conn:
            dim = self._dim(conn) or 0
            kept = 0 if after_id <= 0 else conn.execute(
                self._q("SELECT count(*) FROM units WHERE user_id = ? AND id <= ?"), (user_id, int(after_id))
            ).fetchone()[0]
            columns = self._UNIT_COLUMNS if texts else self._UNIT_COLUMNS.replace(" u.text,", " NULL,")
            rows = conn.execute(self._q(columns + " WHERE u.user_id = ? AND u.id > ? ORDER BY u.id"),
                                (user_id, int(after_id))).fetchall()
            if texts:
                rows = self._joined_texts(conn, user_id, rows)
        return int(kept), self._unit_table(rows, dim, None if texts else user_id)

    def session_units(self, user_id: str, session_id: str, *, texts: bool = True, after: int | None = None) -> UnitTable:
        """The units of one session, in id order (empty when there is no such session); with ``texts=False`` their
        texts are not read (:class:`~memgas.store.base.StoredTexts`); with ``after``, only those whose turn range ends
        past turn ``after``, and the summary and keyword units (see :meth:`memgas.store.Store.session_units`)."""
        with self._read(user_id) as conn:
            dim = self._dim(conn) or 0
            columns = self._UNIT_COLUMNS if texts else self._UNIT_COLUMNS.replace(" u.text,", " NULL,")
            where = columns + f" WHERE {self._UNITS_OF_SESSION}"
            of_session: tuple[Any, ...] = (user_id, user_id, session_id)
            if after is None:
                query, args = where + " ORDER BY u.id", of_session
            else:  # the tail of each granularity the turns bound, and the summary and keywords: each an index seek
                bounded = [GRANULARITIES.index(g) for g in ("session", "turn")]
                query = " UNION ALL ".join([*(f"{where} AND u.granularity = {g} AND u.turn_end > ?" for g in bounded),
                                            f"{where} AND u.granularity >= {GRANULARITIES.index('summary')}"])
                query += " ORDER BY 1"
                args = (*of_session, int(after)) * len(bounded) + of_session
            rows = conn.execute(self._q(query), args).fetchall()
            if texts:
                rows = self._joined_texts(conn, user_id, rows)
        return self._unit_table(rows, dim, None if texts else user_id)

    def unit_ids(self, user_id: str) -> np.ndarray:
        """The ids of the user's units, ascending (int64): what an index compares its rows with after a rewrite."""
        with self._read(user_id) as conn:
            rows = conn.execute(self._q("SELECT id FROM units WHERE user_id = ? ORDER BY id"), (user_id,)).fetchall()
        return np.fromiter((r[0] for r in rows), np.int64, len(rows))

    def load_edges(self, user_id: str) -> EdgeTable:
        """All edges among a user's units, each undirected edge once with ``src < dst``, sorted."""
        return self.load_edges_after(user_id, 0)

    def session_links(self, user_id: str, session_id: str | None = None) -> list[tuple[str, str, int, float, float]]:
        """The association between the user's sessions (of ``session_id`` only, when given): ``(session a,
        session b, edges, summed weight, largest weight)`` per linked pair, ``a`` holding an edge's ``src`` unit,
        sorted by ``(a, b)``; weights as the edges are read (float32)."""
        with self._read(user_id) as conn:
            rows = conn.execute(self._q("SELECT u.id, s.session_id, u.links FROM units u JOIN sessions s ON"
                                        " s.pk = u.session_pk WHERE u.user_id = ? AND s.user_id = ?"),
                                (user_id, user_id)).fetchall()
        session_of = {int(uid): sid for uid, sid, _ in rows}
        pairs: dict[tuple[str, str], list[float]] = {}
        for uid, b, blob in rows:
            if blob is None:
                continue
            src, weight = unpack_links(int(uid), blob)
            for end, w in zip(src.tolist(), weight.astype(np.float32).tolist()):
                a = session_of[end]
                if a != b and (session_id is None or session_id in (a, b)):
                    pairs.setdefault((a, b), []).append(w)
        return [(a, b, len(ws), float(sum(ws)), float(max(ws))) for (a, b), ws in sorted(pairs.items())]

    def load_edges_after(self, user_id: str, after_id: int) -> EdgeTable:
        """The user's edges with ``dst > after_id`` (those touching a unit newer than ``after_id``), sorted.

        Each edge is kept on its newer unit (``links``), so these are the links of the units after ``after_id``,
        read by the units' key: the cost follows what was written since, not the user's whole graph.
        """
        with self._read(user_id) as conn:
            rows = conn.execute(self._q("SELECT id, links FROM units WHERE user_id = ? AND id > ?"
                                        " AND links IS NOT NULL ORDER BY id"), (user_id, int(after_id))).fetchall()
        return _edge_table(rows)

    def version(self, user_id: str) -> int:
        """A number that changes with every write to the user's memory (0 for a user without sessions)."""
        with self._read(user_id) as conn:
            row = conn.execute(self._q("SELECT version FROM users WHERE user_id = ?"), (user_id,)).fetchone()
        return 0 if row is None else int(row[0])

    # -- service API keys ----------------------------------------------------------------------
    _KEY_COLUMNS: ClassVar[str] = "key_id, secret_hash, scope, tenant, users, name, created_at, revoked_at"

    @staticmethod
    def _key_record(row: Any) -> ApiKeyRecord:
        users = None if row[4] is None else tuple(json.loads(row[4]))
        return ApiKeyRecord(row[0], row[1], row[2], row[3], users, row[5], datetime.fromisoformat(row[6]),
                            _datetime(row[7]))

    def add_api_key(self, record: ApiKeyRecord) -> None:
        """Store a new key record (see :meth:`Store.add_api_key`)."""
        users = None if record.users is None else json.dumps(list(record.users))
        with self._write(None) as conn:
            self._lock_meta(conn)
            if conn.execute(self._q("SELECT 1 FROM api_keys WHERE key_id = ?"), (record.key_id,)).fetchone():
                raise InvalidInputError(f"an API key with id {record.key_id!r} exists already")
            conn.execute(self._q(f"INSERT INTO api_keys ({self._KEY_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"),
                         (record.key_id, record.secret_hash, record.scope, record.tenant, users, record.name,
                          record.created_at.isoformat(), _iso(record.revoked_at)))

    def get_api_key(self, key_id: str) -> ApiKeyRecord | None:
        """One key record by id, or ``None``."""
        with self._read() as conn:
            row = conn.execute(self._q(f"SELECT {self._KEY_COLUMNS} FROM api_keys WHERE key_id = ?"),
                               (key_id,)).fetchone()
        return None if row is None else self._key_record(row)

    def list_api_keys(self) -> list[ApiKeyRecord]:
        """Every key record, oldest first."""
        with self._read() as conn:
            rows = conn.execute(f"SELECT {self._KEY_COLUMNS} FROM api_keys ORDER BY created_at, key_id").fetchall()
        return [self._key_record(r) for r in rows]

    def revoke_api_key(self, key_id: str) -> ApiKeyRecord:
        """Mark a key revoked, keeping the first revocation time (see :meth:`Store.revoke_api_key`)."""
        with self._write(None) as conn:
            self._lock_meta(conn)
            conn.execute(self._q("UPDATE api_keys SET revoked_at = coalesce(revoked_at, ?) WHERE key_id = ?"),
                         (_iso(datetime.now(timezone.utc)), key_id))
            row = conn.execute(self._q(f"SELECT {self._KEY_COLUMNS} FROM api_keys WHERE key_id = ?"),
                               (key_id,)).fetchone()
        if row is None:
            raise NotFoundError(f"no API key with id {key_id!r}")
        return self._key_record(row)

    # -- experience memory -----------------------------------------------------------------------
    _EXPERIENCE_COLUMNS: ClassVar[str] = "id, scope, kind, key, payload, vector, created_at, updated_at"

    @staticmethod
    def _experience_record(row: Any) -> ExperienceRecord:
        vector = None if row[5] is None else np.frombuffer(bytes(row[5]), dtype=_VEC_DTYPE).astype(np.float32)
        return ExperienceRecord(int(row[0]), row[1], row[2], row[3], json.loads(row[4]), vector,
                                datetime.fromisoformat(row[6]), datetime.fromisoformat(row[7]))

    def add_experience(self, scope: str, kind: str, key: str, payload: dict[str, Any],
                       vector: np.ndarray | None) -> int:
        """Store one experience item (see :meth:`Store.add_experience`)."""
        if kind is None or key is None or payload is None:
            raise InvalidInputError("an experience item needs a kind, a key and a payload")
        with self._write(scope) as conn:
            text, blob = _experience_fields(scope, kind, key, payload, vector, self._dim(conn))
            now = datetime.now(timezone.utc).isoformat()
            return int(conn.execute(
                self._q("INSERT INTO experiences (scope, kind, key, payload, vector, created_at, updated_at)"
                        " VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id"),
                (scope, kind, key, text, blob, now, now)).fetchone()[0])

    def list_experiences(self, scope: str, kind: str | None = None) -> list[ExperienceRecord]:
        """The scope's items, oldest first (see :meth:`Store.list_experiences`)."""
        _experience_fields(scope, kind, None, None, None, None)
        where, args = ("AND kind = ?", (scope, kind)) if kind is not None else ("", (scope,))
        with self._read() as conn:
            rows = conn.execute(self._q(f"SELECT {self._EXPERIENCE_COLUMNS} FROM experiences WHERE scope = ? {where}"
                                        " ORDER BY id"), args).fetchall()
        return [self._experience_record(r) for r in rows]

    def experience_scopes(self) -> list[str]:
        """Every scope that holds an item, sorted."""
        with self._read() as conn:
            return [r[0] for r in conn.execute("SELECT DISTINCT scope FROM experiences ORDER BY scope").fetchall()]

    def update_experience(self, scope: str, item_id: int, *, kind: str | None = None, key: str | None = None,
                          payload: dict[str, Any] | None = None, vector: np.ndarray | None = None) -> ExperienceRecord:
        """Change some fields of one item (see :meth:`Store.update_experience`)."""
        with self._write(scope) as conn:
            text, blob = _experience_fields(scope, kind, key, payload, vector, self._dim(conn))
            changes = {name: value for name, value in (("kind", kind), ("key", key), ("payload", text),
                                                        ("vector", blob)) if value is not None}
            changes["updated_at"] = datetime.now(timezone.utc).isoformat()
            assignments = ", ".join(f"{name} = ?" for name in changes)
            row = conn.execute(
                self._q(f"UPDATE experiences SET {assignments} WHERE scope = ? AND id = ?"
                        f" RETURNING {self._EXPERIENCE_COLUMNS}"),
                (*changes.values(), scope, int(item_id))).fetchone()
        if row is None:
            raise NotFoundError(f"{scope} has no experience item {item_id}")
        return self._experience_record(row)

    def delete_experiences(self, scope: str, ids: Sequence[int] | None = None, *, kind: str | None = None) -> int:
        """Delete some or all of the scope's items (see :meth:`Store.delete_experiences`)."""
        _experience_fields(scope, kind, None, None, None, None)
        with self._write(scope) as conn:
            if ids is None:
                where, args = ("AND kind = ?", (scope, kind)) if kind is not None else ("", (scope,))
                n = conn.execute(self._q(f"DELETE FROM experiences WHERE scope = ? {where}"), args).rowcount
            else:
                wanted = sorted({int(i) for i in ids})
                found = {int(r[0]) for r in conn.execute(
                    self._q("SELECT id FROM experiences WHERE scope = ?"), (scope,)).fetchall()}
                missing = [i for i in wanted if i not in found]
                if missing:
                    raise NotFoundError(f"{scope} has no experience items {missing}: nothing was deleted")
                n = 0
                for i in wanted:
                    n += conn.execute(self._q("DELETE FROM experiences WHERE scope = ? AND id = ?"), (scope, i)).rowcount
            if n:
                self._deleted()
        return n

    def stats(self, user_id: str | None = None) -> dict[str, Any]:
        """Counts for one user, or for the whole store when ``user_id`` is ``None`` (a cross-user read).

        Returns:
            ``users``, ``sessions``, ``turns``, ``messages``, ``units`` (a dict by granularity
            name), ``edges``, ``embedder_id``, ``dim``, ``path`` (the SQLite file; ``None`` in memory
            or in PostgreSQL), for PostgreSQL ``url`` (without password), and ``file_bytes``: in
            SQLite the database plus write-ahead log on disk (``None`` in memory), in PostgreSQL the
            store's tables with their indexes and TOAST, for every user.
        """
        where, args = (self._q("WHERE user_id = ?"), (user_id,)) if user_id is not None else ("", ())
        with self._read() as conn:
            n_users = conn.execute(f"SELECT count(*) FROM users {where}", args).fetchone()[0]
            n_sessions, n_turns, n_messages = conn.execute(
                f"SELECT count(*), coalesce(sum(n_turns), 0), coalesce(sum(n_messages), 0) FROM sessions {where}", args
            ).fetchone()
            per_granularity = dict(
                conn.execute(f"SELECT granularity, count(*) FROM units {where} GROUP BY granularity", args).fetchall()
            )
            n_edges = conn.execute(f"SELECT coalesce(sum({LINKS_COUNT.format(head=self._LINKS_HEAD)}), 0) FROM units"
                                   f" {where}", args).fetchone()[0]
            embedder_id, dim = self._meta(conn, "embedder_id"), self._dim(conn)
            storage = self._storage(conn)
        return {
            "users": n_users,
            "sessions": n_sessions,
            "turns": int(n_turns),
            "messages": int(n_messages),
            "units": {g: per_granularity.get(i, 0) for i, g in enumerate(GRANULARITIES)},
            "edges": n_edges,
            "embedder_id": embedder_id,
            "dim": dim,
            **storage,
        }
