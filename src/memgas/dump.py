"""Portable dumps: a store's sessions, units, vectors and edges as JSON Lines, and back into any store.

The dump is written and read through the abstract :class:`~memgas.store.Store` only, so it moves memory
between backends (SQLite, PostgreSQL) and between files. Format version :data:`DUMP_VERSION`, one JSON
object per line, UTF-8:

* a header ``{"format": "memgas-dump", "version": 2, "embedder_id", "dim", "vector_format", "created_at"}``;
* one line per session, ``{"type": "session", "user_id", "session_id", "timestamp", "metadata", "agent_id"?,
  "run_id"?, "messages", "units", "edges"}`` (a message ``{"role", "content", "name"?, "metadata"?}``; the scope
  ids and a message's metadata only when set, so a dump without them reads as before). A user's sessions are on
  consecutive lines, in the order their units were written.
  ``units`` are ``{"granularity", "turn_start", "turn_end", "chunk", "text", "vector"}``, ``vector`` being
  base64 of the vector as the header's ``vector_format`` says: ``"float16"`` (what stores keep since their schema 6
  and dumps of version 2 carry: ``dim`` little-endian float16 values, see :mod:`memgas.kernels.quantize`) or
  ``"float32"`` (``dim`` little-endian float32 values; version 1 dumps,
  which have no ``vector_format``, are read so). ``edges`` are ``[i, j, weight]``: ``i`` and ``j`` number the
  user's units in dump order from 0, at least one of them is a unit of this line and the other one of this
  line or of an earlier one, so sessions written in dump order always find both ends of their edges (the
  store's rule that an edge is written with its newer unit);
* a trailer ``{"type": "end", "users", "sessions"}``, so a dump cut at a line boundary is refused too.

Import checks the whole dump before it writes anything, then writes one transaction per user. When the
target uses the dump's embedder it writes units, vectors and edges as they are (lossless); otherwise it
re-derives them: the sessions are ingested again (re-embedded, re-associated) by the memory's method.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from dataclasses import dataclass
from datetime import datetime, timezone
from itertools import groupby
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence, TextIO, TypeGuard

import numpy as np

from memgas.core.errors import DuplicateSessionError, InvalidInputError, NotFoundError
from memgas.core.types import GRANULARITIES, Edge, Session, Unit
from memgas.core.validate import make_session
from memgas.kernels.quantize import code_size, decode_rows, encode_rows
from memgas.sessions.listing import SessionCatalog
from memgas.store import Store, StoreBinding, UnitTable, part

if TYPE_CHECKING:
    from memgas.memory import Memory

__all__ = ["DUMP_FORMAT", "DUMP_VERSION", "export_dump", "import_dump"]

DUMP_FORMAT = "memgas-dump"
#: The dump format version this code writes and reads.
DUMP_VERSION = 2
#: Versions this code reads: 1 had float32 vectors and no ``vector_format``.
_READS = (1, 2)
#: The vector formats a dump may name, with the bytes one vector of ``dim`` components takes in each.
_VECTOR_BYTES: dict[str, Callable[[int], int]] = {"float16": code_size, "float32": lambda dim: 4 * dim}

_VEC_DTYPE = np.dtype("<f4")


def _line(obj: dict[str, Any]) -> str:
    # ensure_ascii=False keeps text readable; json escapes every newline inside strings, so one object is one line.
    return json.dumps(obj, ensure_ascii=False, allow_nan=False) + "\n"


def _header(embedder_id: str | None, dim: int | None) -> dict[str, Any]:
    return {"format": DUMP_FORMAT, "version": DUMP_VERSION, "embedder_id": embedder_id, "dim": dim,
            "vector_format": "float16", "created_at": datetime.now(timezone.utc).isoformat()}


def export_dump(store: Store, out: TextIO, *, user_ids: Sequence[str] | None = None) -> dict[str, int]:
    """Write the memory of ``user_ids`` (default: every user) to ``out`` as a dump (see the module docstring),
    without the sessions past their own expiry (metadata ``expires_at``): an expired session is never read.

    Each user is read from one snapshot (:meth:`Store.reading`) and written one session at a time, so memory
    holds one user's unit table and one session's messages.

    Args:
        store: the store to read.
        out: a text stream opened for writing (UTF-8).
        user_ids: the users to export, in this order.

    Returns:
        ``{"users", "sessions", "units", "edges"}`` written.

    Raises:
        NotFoundError: a user of ``user_ids`` has no memory in the store.
    """
    users = store.list_users() if user_ids is None else list(user_ids)
    for user in users:
        if not store.has_user(user):
            raise NotFoundError(f"unknown user {user!r}: no memory stored for this user")
    counts = {"users": 0, "sessions": 0, "units": 0, "edges": 0}
    header = None
    catalog, now = SessionCatalog(), datetime.now(timezone.utc)
    for user in users:
        with store.reading():
            hidden = catalog.past(store, user, now=now)
            table = store.load_units(user)
            if header is None:  # the interface has no dim of its own: a unit table's width is the dim
                embedder_id = part(store, StoreBinding).embedder_id
                header = _header(embedder_id, None if embedder_id is None else int(table.vectors.shape[1]))
                out.write(_line(header))
            for obj in _user_lines(store, user, table, hidden):
                out.write(_line(obj))
                counts["sessions"] += 1
                counts["units"] += len(obj["units"])
                counts["edges"] += len(obj["edges"])
        counts["users"] += 1
    if header is None:  # no user: the header still names the store's embedder
        out.write(_line(_header(part(store, StoreBinding).embedder_id, None)))
    out.write(_line({"type": "end", "users": counts["users"], "sessions": counts["sessions"]}))
    return counts


def _user_lines(store: Store, user_id: str, table: UnitTable, hidden: set[str]) -> Iterator[dict[str, Any]]:
    """The session lines of one user but those of ``hidden`` and the edges to their units (inside the caller's
    ``store.reading()``)."""
    rows_of: dict[str, list[int]] = {}
    for row, sid in enumerate(table.session_ids):  # ascending ids: first seen = smallest unit id
        rows_of.setdefault(sid, []).append(row)
    order = [sid for sid in rows_of if sid not in hidden] + [
        i.session_id for i in store.list_sessions(user_id) if i.session_id not in rows_of and i.session_id not in hidden]
    number = np.full(len(table), -1, dtype=np.int64)  # each unit's number in the dump (-1: left out)
    position = np.full(len(table), -1, dtype=np.int64)  # the dump position of each unit's session
    n = 0
    for pos, sid in enumerate(order):
        rows = rows_of.get(sid, [])
        number[rows] = np.arange(n, n + len(rows))
        position[rows] = pos
        n += len(rows)
    edges = store.load_edges(user_id)
    src, dst = np.searchsorted(table.ids, edges.src), np.searchsorted(table.ids, edges.dst)
    kept = (number[src] >= 0) & (number[dst] >= 0)
    src, dst, weights = src[kept], dst[kept], edges.weight[kept]
    # An edge goes with the later of its two sessions: by then the other end is written.
    owner = np.maximum(position[src], position[dst]) if len(src) else np.zeros(0, dtype=np.int64)
    by_owner = np.argsort(owner, kind="stable")
    bounds = np.searchsorted(owner[by_owner], np.arange(len(order) + 1))
    encoded = encode_rows(table.vectors) if len(table) else []  # the store's own bytes again (rounding is idempotent)
    for pos, sid in enumerate(order):
        session = store.get_session(user_id, sid)
        mine = by_owner[bounds[pos]:bounds[pos + 1]]
        yield {
            "type": "session", "user_id": user_id, "session_id": sid,
            "timestamp": session.timestamp.isoformat() if session.timestamp else None,
            "metadata": dict(session.metadata),
            **({"agent_id": session.agent_id} if session.agent_id else {}),
            **({"run_id": session.run_id} if session.run_id else {}),
            "messages": [m.to_dict() for m in session.messages],
            "units": [{"granularity": GRANULARITIES[table.granularity[r]], "turn_start": int(table.turn_start[r]),
                       "turn_end": int(table.turn_end[r]), "chunk": int(table.chunk[r]), "text": table.texts[r],
                       "vector": base64.b64encode(encoded[r]).decode("ascii")}
                      for r in rows_of.get(sid, [])],
            "edges": [[i, j, w] for i, j, w in zip(number[src[mine]].tolist(), number[dst[mine]].tolist(),
                                                   weights[mine].astype(np.float64).tolist())],
        }


# -- reading -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Record:
    """One session line, validated. ``edges`` hold dump unit numbers; ``first`` is this line's first unit's."""

    session: Session
    units: list[Unit]
    edges: list[tuple[int, int, float]]
    first: int


class _Dump:
    """A dump file, read line by line; every defect is an :class:`InvalidInputError` naming its line."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        with self._open() as f:
            try:
                first = f.readline()
            except UnicodeDecodeError as e:  # a binary file
                raise InvalidInputError(f"{self.path} is not UTF-8 text: {e.reason} at byte {e.start}") from None
            self.embedder_id, self.dim, self.vector_format = self._read_header(first)

    def _open(self) -> TextIO:
        try:
            return self.path.open("r", encoding="utf-8", newline="\n")
        except FileNotFoundError:
            raise InvalidInputError(f"no such file: {self.path}") from None
        except OSError as e:
            raise InvalidInputError(f"cannot read {self.path}: {e.strerror or e}") from None

    def _parse(self, line: str, n: int) -> Any:
        if not line.endswith("\n"):
            raise InvalidInputError(f"{self.path} line {n} is truncated (no end of line): the dump is incomplete")
        try:
            return json.loads(line)
        except (json.JSONDecodeError, RecursionError):
            raise InvalidInputError(f"{self.path} line {n} is not valid JSON: the dump is corrupt") from None

    def _read_header(self, line: str) -> tuple[str | None, int | None, str]:
        if not line:
            raise InvalidInputError(f"{self.path} is empty: not a memgas dump")
        head = self._parse(line, 1)
        if not isinstance(head, dict) or head.get("format") != DUMP_FORMAT:
            raise InvalidInputError(f"{self.path} is not a memgas dump (its first line has no format {DUMP_FORMAT!r})")
        if head.get("version") not in _READS:
            raise InvalidInputError(f"{self.path} is a memgas dump of version {head.get('version')!r}; "
                                    f"this memgas reads versions {', '.join(map(str, _READS))}")
        vector_format = head.get("vector_format", "float32" if head["version"] == 1 else None)
        if vector_format not in _VECTOR_BYTES:
            raise InvalidInputError(f"{self.path} line 1: unknown vector_format {vector_format!r}; expected one of "
                                    f"{', '.join(_VECTOR_BYTES)}")
        embedder_id, dim = head.get("embedder_id"), head.get("dim")
        # a store with an embedder but no unit (everything deleted, or expired) has no width to give: dim null,
        # and a unit in such a dump is refused where it is read
        if embedder_id is not None and (not isinstance(embedder_id, str) or not embedder_id
                                        or (dim is not None and (not _is_int(dim) or dim <= 0))):
            raise InvalidInputError(f"{self.path} line 1: invalid embedder_id {embedder_id!r} or dim {dim!r}")
        return embedder_id, dim if embedder_id is not None else None, vector_format

    def __iter__(self) -> Iterator[_Record]:
        """The session records, checked: contiguous users, unique session ids, edges to written units, the trailer."""
        users: set[str] = set()
        seen: set[str] = set()
        user, n_units, n_sessions = None, 0, 0
        try:
            with self._open() as f:
                f.readline()
                n = 1
                for n, line in enumerate(f, 2):
                    obj = self._parse(line, n)
                    if isinstance(obj, dict) and obj.get("type") == "end":
                        if f.read(1):
                            raise InvalidInputError(f"{self.path} line {n}: lines after the end line")
                        if obj.get("sessions") != n_sessions or obj.get("users") != len(users):
                            raise InvalidInputError(f"{self.path} line {n}: the end line counts {obj.get('users')!r} "
                                                    f"users and {obj.get('sessions')!r} sessions, the dump holds "
                                                    f"{len(users)} and {n_sessions}")
                        return
                    try:
                        uid = obj.get("user_id") if isinstance(obj, dict) else None
                        if uid != user:  # a user's lines are consecutive: each user is one transaction
                            if uid in users:
                                raise InvalidInputError(f"user {uid!r} appears on lines apart")
                            user, n_units, seen = uid, 0, set()
                        record = self._record(obj, n_units)
                        sid = record.session.session_id
                        if sid in seen:
                            raise InvalidInputError(f"session {sid!r} appears twice")
                    except InvalidInputError as e:
                        raise InvalidInputError(f"{self.path} line {n}: {e}") from None
                    users.add(record.session.user_id)
                    seen.add(sid)
                    n_units += len(record.units)
                    n_sessions += 1
                    yield record
        except UnicodeDecodeError as e:
            raise InvalidInputError(f"{self.path} is not UTF-8 text: {e.reason} at byte {e.start}") from None
        raise InvalidInputError(f"{self.path} ends at line {n} without its end line: the dump is truncated")

    def _record(self, obj: Any, first: int) -> _Record:
        """Validate one session line whose first unit is the user's ``first`` unit of the dump."""
        if not isinstance(obj, dict) or obj.get("type") != "session":
            raise InvalidInputError("expected a session line")
        units, edges = obj.get("units"), obj.get("edges")
        if not isinstance(units, list) or not isinstance(edges, list):
            raise InvalidInputError("'units' and 'edges' must be lists")
        session = make_session(obj.get("messages"), user_id=obj.get("user_id"),  # type: ignore[arg-type]
                               session_id=obj.get("session_id"), timestamp=obj.get("timestamp"),  # type: ignore[arg-type]
                               metadata=obj.get("metadata"), agent_id=obj.get("agent_id"),
                               run_id=obj.get("run_id"))
        n_turns = len(session.turns)
        parsed = [self._unit(i, u, session.session_id, n_turns) for i, u in enumerate(units)]
        end = first + len(parsed)
        checked = []
        for k, e in enumerate(edges):
            if not (isinstance(e, list) and len(e) == 3 and _is_int(e[0]) and _is_int(e[1])
                    and isinstance(e[2], (int, float)) and not isinstance(e[2], bool)):
                raise InvalidInputError(f"edge {k}: expected [unit, unit, weight]")
            i, j, w = e
            if not (0 <= i < end and 0 <= j < end and max(i, j) >= first and i != j):
                raise InvalidInputError(f"edge {k}: [{i}, {j}] must link a unit of this session (numbers "
                                        f"{first}..{end - 1}) to a distinct one already in the dump")
            if not (math.isfinite(w) and w > 0):
                raise InvalidInputError(f"edge {k}: weight {w!r} is not a positive finite number")
            checked.append((i, j, float(w)))
        return _Record(session, parsed, checked, first)

    def _unit(self, i: int, u: Any, session_id: str, n_turns: int) -> Unit:
        if not isinstance(u, dict):
            raise InvalidInputError(f"unit {i}: expected an object")
        start, end, chunk, text = u.get("turn_start"), u.get("turn_end"), u.get("chunk"), u.get("text")
        if u.get("granularity") not in GRANULARITIES:
            raise InvalidInputError(f"unit {i}: unknown granularity {u.get('granularity')!r}")
        if not (_is_int(start) and _is_int(end) and _is_int(chunk) and 0 <= start < end <= n_turns and chunk >= 0):
            raise InvalidInputError(f"unit {i}: turns {start!r}..{end!r} chunk {chunk!r} do not fit a session "
                                    f"of {n_turns} turns")
        if not isinstance(text, str):
            raise InvalidInputError(f"unit {i}: text must be a string")
        if self.dim is None:
            raise InvalidInputError(f"unit {i}: the dump's header names no embedder for its vectors")
        try:
            raw = base64.b64decode(u.get("vector"), validate=True)  # type: ignore[arg-type]
        except (binascii.Error, TypeError, ValueError):
            raise InvalidInputError(f"unit {i}: vector is not base64") from None
        size = _VECTOR_BYTES[self.vector_format](self.dim)
        if len(raw) != size:
            raise InvalidInputError(f"unit {i}: vector of {len(raw)} bytes; {self.dim} components in "
                                    f"{self.vector_format} take {size}")
        if self.vector_format == "float16":
            vector = decode_rows(raw, 1, self.dim)[0]
        else:
            vector = np.frombuffer(raw, dtype=_VEC_DTYPE).astype(np.float32)
        if not np.isfinite(vector).all():
            raise InvalidInputError(f"unit {i}: vector has NaN or infinite values")
        return Unit(session_id, u["granularity"], text, start, end, chunk, vector)

    def sessions_by_user(self) -> dict[str, list[str]]:
        """Check the whole dump; return each user's session ids in dump order."""
        out: dict[str, list[str]] = {}
        for record in self:
            out.setdefault(record.session.user_id, []).append(record.session.session_id)
        return out


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


# -- importing -----------------------------------------------------------------------------------


def import_dump(path: str | Path, memory: Memory, *, skip_existing: bool = False,
                progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Import a dump (see the module docstring) into ``memory``'s store.

    The whole dump is checked first, and so are the session ids the store already has, so a corrupt
    dump or a clash writes nothing; each user is then written in one transaction. When the store's
    embedder (or, for an empty store, the memory's) is the dump's, the units, vectors and edges are
    written as they are; otherwise the sessions are ingested again by ``memory`` (re-embedded and
    re-associated by its method, in dump order).

    Args:
        path: the dump file.
        memory: the target; its store receives the sessions.
        skip_existing: leave out the sessions a user already has instead of refusing the dump. Edges of
            imported sessions to a skipped one join its stored units when these match the dump's.
        progress: called with ``(sessions done, sessions in the dump)`` once each user is committed (users
            already committed stay when a later one fails: import again with ``skip_existing`` to resume).

    Returns:
        ``{"mode": "lossless" | "re-derived", "embedder_id", "dump_embedder_id", "users", "sessions",
        "skipped", "units", "edges", "edges_dropped"}`` (``edges_dropped``: edges to a skipped session
        whose stored units differ from the dump's).

    Raises:
        InvalidInputError: the file is no dump, of an unknown version, truncated or corrupt (its line named).
        DuplicateSessionError: without ``skip_existing``, a session the target user already has.
        EmbedderMismatchError: a lossless import into a store bound to the same embedder id with another dimension.
    """
    dump = _Dump(path)
    plan = dump.sessions_by_user()
    total = sum(len(ids) for ids in plan.values())
    store = memory.store
    target = part(store, StoreBinding).embedder_id or memory.embedder.id
    lossless = dump.embedder_id is None or dump.embedder_id == target
    if not skip_existing:
        for user, ids in plan.items():
            clash = sorted(set(ids) & {i.session_id for i in store.list_sessions(user)})
            if clash:
                shown = f"{clash[:5]} and {len(clash) - 5} more ({len(clash)} in all)" if len(clash) > 5 else f"{clash}"
                raise DuplicateSessionError(f"user {user!r} already has sessions {shown}: nothing was imported "
                                            "(--skip-existing leaves them out)")
    result: dict[str, Any] = {"mode": "lossless" if lossless else "re-derived", "embedder_id": target,
                              "dump_embedder_id": dump.embedder_id, "users": 0, "sessions": 0, "skipped": 0,
                              "units": 0, "edges": 0, "edges_dropped": 0}
    if lossless and dump.embedder_id is not None and any(plan.values()):
        store.bind_embedder(dump.embedder_id, dump.dim)  # type: ignore[arg-type]
    for user, records in groupby(dump, key=lambda r: r.session.user_id):
        if lossless:
            counts = _write_user(store, user, records, skip_existing)
        else:
            done = memory.add_many((_session_input(r.session) for r in records), user_id=user,
                                   skip_existing=skip_existing)
            skipped = sum(r.skipped for r in done)
            counts = {"sessions": len(done) - skipped, "skipped": skipped,
                      "units": sum(r.units for r in done), "edges": sum(r.edges for r in done)}
        result["users"] += 1
        for key, value in counts.items():
            result[key] += value
        if progress is not None:
            progress(result["sessions"] + result["skipped"], total)
    return result


def _write_user(store: Store, user_id: str, records: Iterator[_Record], skip_existing: bool) -> dict[str, int]:
    """Write one user's records as they are, in one transaction; return what was written."""
    counts = {"sessions": 0, "skipped": 0, "units": 0, "edges": 0, "edges_dropped": 0}
    with store.writing(user_id):
        existing = {i.session_id for i in store.list_sessions(user_id)}
        stored: UnitTable | None = None
        ids: list[int | None] = []  # the store id of each of the user's dump units (None: not there)
        for record in records:
            if record.session.session_id in existing:  # only with skip_existing: import_dump checked the rest
                stored = store.load_units(user_id) if stored is None else stored
                ids.extend(_stored_ids(stored, record))
                counts["skipped"] += 1
                continue
            edges = []
            for i, j, w in record.edges:
                a, b = (-(x - record.first + 1) if x >= record.first else ids[x] for x in (i, j))
                if a is None or b is None:
                    counts["edges_dropped"] += 1
                    continue
                edges.append(Edge(a, b, w))
            ids.extend(store.add_session(record.session, record.units, edges))
            counts["sessions"] += 1
            counts["units"] += len(record.units)
            counts["edges"] += len(edges)
    return counts


def _stored_ids(stored: UnitTable, record: _Record) -> list[int | None]:
    """The ids of a skipped session's stored units, when they are the dump's (same granularities, turns,
    chunks and texts in the same order); otherwise none, and the edges to them are dropped."""
    rows = [r for r, sid in enumerate(stored.session_ids) if sid == record.session.session_id]
    have = [(GRANULARITIES[stored.granularity[r]], int(stored.turn_start[r]), int(stored.turn_end[r]),
             int(stored.chunk[r]), stored.texts[r]) for r in rows]
    want = [(u.granularity, u.turn_start, u.turn_end, u.chunk, u.text) for u in record.units]
    return [int(stored.ids[r]) for r in rows] if have == want else [None] * len(want)


def _session_input(session: Session) -> dict[str, Any]:
    """A stored session as :meth:`Memory.add_many` takes it."""
    return {"session_id": session.session_id, "timestamp": session.timestamp, "metadata": dict(session.metadata),
            "agent_id": session.agent_id, "run_id": session.run_id,
            "messages": [m.to_dict() for m in session.messages]}
