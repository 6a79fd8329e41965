"""A user's units as one index (vectors, masks per granularity, rows per session), how it is built from the
store and extended by what was added since, and the per-user cache that keeps it in step with the store.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass, replace
from datetime import datetime
from itertools import repeat
from typing import Any, Callable, Generic, Mapping, Protocol, TypeVar

import numpy as np

from memgas.core.errors import InvalidInputError
from memgas.core.packing import narrowed
from memgas.core.types import GRANULARITIES, Session
from memgas.store import SnapshotStore, Store, StoredTexts, UnitTable

__all__ = [
    "IndexCache", "nbytes", "UserIndex", "RowBuffer", "build_user_index", "extend_user_index", "compacted_index", "update_user_index",
    "turn_docs", "SnapshotCodec", "user_index_arrays", "user_index_from_arrays", "appended_index",
]

T = TypeVar("T")


class RowBuffer:
    """Float32 rows with spare capacity at the end, so that appending does not copy what is held (rows of another
    float type, float16 from a snapshot, are widened as they are copied in).

    :meth:`extend` writes past the end of every view handed out so far, so a reader holding an older
    (shorter) view never sees a change. Thread-safe: extending from a length that is no longer the
    buffer's end (someone extended it already) copies instead of overwriting.
    """

    def __init__(self, rows: np.ndarray, capacity: int | None = None) -> None:
        n, dim = rows.shape
        self._data = np.empty((max(capacity or 0, n), dim), dtype=np.float32)
        self._data[:n] = rows
        self._n = n
        self._lock = threading.Lock()

    def view(self, n: int | None = None) -> np.ndarray:
        """The first ``n`` rows (default: all), read-only."""
        out = self._data[: self._n if n is None else n]
        out.flags.writeable = False
        return out

    def extend(self, n: int, more: np.ndarray) -> "RowBuffer":
        """A buffer holding the first ``n`` rows of this one, then ``more``: this one when its end is at
        ``n`` and ``more`` fits, else a new one with room to double."""
        with self._lock:
            m = more.shape[0]
            if n == self._n and n + m <= self._data.shape[0]:
                self._data[n:n + m] = more
                self._n = n + m
                return self
        return RowBuffer(np.concatenate([self._data[:n], more]), capacity=2 * (n + m))


@dataclass(slots=True)
class UserIndex:
    """A user's units with the lookups every method needs: unit row → session, rows per granularity.

    ``rows`` holds ``table.vectors`` with room to grow (see :func:`extend_user_index`).
    """

    table: UnitTable
    session_of: np.ndarray  # unit row → position in ``sessions``
    sessions: tuple[str, ...]
    timestamps: dict[str, datetime | None]
    masks: dict[str, np.ndarray]  # granularity → row indexes
    rows: RowBuffer | None = None


def _with_rows(table: UnitTable, rows: RowBuffer) -> UnitTable:
    """``table`` with its vectors read from ``rows`` (same values, a buffer that can grow)."""
    return UnitTable(table.ids, table.session_ids, table.granularity, table.turn_start, table.turn_end,
                     table.chunk, table.texts, rows.view(len(table)))


def build_user_index(store: Store, user_id: str, *, texts: bool = True) -> UserIndex:
    """Load a user's units from ``store`` and derive the row lookups (call inside ``store.reading()``); with
    ``texts=False`` the texts stay in the store (:class:`~memgas.store.StoredTexts`, read for the hits)."""
    table = store.load_units(user_id, texts=texts)
    # The vectors are copied once into a growable buffer, so that extending the index later need not
    # copy them again, and a fresh build and an extended one hold their rows alike (same BLAS results).
    rows = RowBuffer(table.vectors, capacity=_spare(len(table)))
    table = _with_rows(table, rows)
    pos: dict[str, int] = {}
    session_of = np.fromiter((pos.setdefault(s, len(pos)) for s in table.session_ids), np.int64, len(table))
    timestamps = {i.session_id: i.timestamp for i in store.list_sessions(user_id)} if len(table) else {}
    masks: dict[str, np.ndarray] = {g: np.flatnonzero(table.mask(g)) for g in GRANULARITIES}
    return UserIndex(table, session_of, tuple(pos), timestamps, masks, rows)


def _spare(n: int) -> int:
    """The row capacity a fresh index gets for ``n`` rows: room for a few more, no more (most cached users are
    only searched; the first add that does not fit copies the rows once, with room to double)."""
    return n + 16


def user_index_arrays(index: UserIndex) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """``index`` as arrays and JSON values for a snapshot (:func:`memgas.core.packing.pack`): the unit columns (whole
    numbers in the smallest type that holds them, :func:`memgas.core.packing.narrowed`) and the sessions with their
    timestamps. Not the vectors or the texts: the store holds them once, and a load reads the vectors back by the
    units' ids (:meth:`~memgas.store.SnapshotStore.unit_vectors`), the texts for the hits that show them
    (StoredTexts)."""
    t = index.table
    arrays = {"ids": narrowed(t.ids), "session_of": narrowed(index.session_of), "granularity": t.granularity,
              "turn_start": narrowed(t.turn_start), "turn_end": narrowed(t.turn_end), "chunk": narrowed(t.chunk)}
    meta = {"sessions": list(index.sessions), "dim": int(t.vectors.shape[1]),
            "timestamps": {sid: None if ts is None else ts.isoformat() for sid, ts in index.timestamps.items()}}
    return arrays, meta


def user_index_from_arrays(store: Store, user_id: str, arrays: dict[str, np.ndarray], meta: dict[str, Any]
                           ) -> UserIndex:
    """The :class:`UserIndex` of the user's units that :func:`user_index_arrays` gave: equal, row for row and bit for
    bit, to the one ``build_user_index(store, user_id, texts=False)`` gives at that state. A unit the store no longer
    holds (a later rewrite replaced it) gets a zero vector: updating the index to the store's state drops its row."""
    sessions = tuple(meta["sessions"])
    session_of = arrays["session_of"].astype(np.int64)
    ids = arrays["ids"].astype(np.int64)
    assert isinstance(store, SnapshotStore)  # snapshots are read only from a store that keeps them
    halves = store.unit_vectors(user_id, ids).reshape(-1, int(meta["dim"]))
    rows = RowBuffer(halves, capacity=_spare(len(halves)))  # widened to float32 as they are copied in: exact
    table = UnitTable(ids, tuple(sessions[i] for i in session_of.tolist()), arrays["granularity"].astype(np.int8),
                      arrays["turn_start"].astype(np.int32), arrays["turn_end"].astype(np.int32),
                      arrays["chunk"].astype(np.int32), StoredTexts(store, user_id, ids), rows.view())
    timestamps = {sid: None if ts is None else datetime.fromisoformat(ts) for sid, ts in meta["timestamps"].items()}
    masks: dict[str, np.ndarray] = {g: np.flatnonzero(table.mask(g)) for g in GRANULARITIES}
    return UserIndex(table, session_of, sessions, timestamps, masks, rows)


def compacted_index(index: UserIndex, alive: np.ndarray) -> UserIndex:
    """``index`` without the rows where ``alive`` is false (units a rewrite replaced), rows renumbered in order."""
    table = index.table.select(alive)
    rows = RowBuffer(table.vectors, capacity=_spare(len(table)))
    position = np.cumsum(alive) - 1  # old row -> new row, for the rows that stay
    masks = {g: position[m[alive[m]]] for g, m in index.masks.items()}
    return UserIndex(_with_rows(table, rows), index.session_of[alive], index.sessions, dict(index.timestamps),
                     masks, rows)


def extend_user_index(store: Store, user_id: str, index: UserIndex, *, compact: bool = False,
                      known: Mapping[str, Session] | None = None, gone: np.ndarray | None = None,
                      ) -> tuple[UserIndex, dict[str, Session], np.ndarray | None, UserIndex | None] | None:
    """``index`` brought up to the store's state by reading only the units added since it was built.

    Returns the new index, the stored sessions that the added units belong to (read for their
    timestamps, unless ``known`` holds them as stored: a session its caller just wrote; callers reuse their turns;
    ``gone``: the ids its caller's write deleted, so that the ids still stored need not be read when they account for
    every unit that left)
    and, when ``compact`` let units that are gone (a rewritten
    session's replaced units) leave the index, the mask of the old rows kept and ``index`` without them (its rows
    are the first of the new index's, so a caller that keeps more per row need not compact again; else ``None``,
    ``None``). Returns
    ``None`` when some held units are gone and ``compact`` is false, or when a whole session is gone
    (then the caller rebuilds). Call inside ``store.reading()``. ``index`` itself is not changed.
    """
    old = index.table
    if len(old) == 0:
        return None
    kept, added = store.load_units_after(user_id, int(old.ids[-1]), texts=not isinstance(old.texts, StoredTexts))
    alive, compacted = None, None
    if kept != len(old):
        if not compact:
            return None
        alive = None if gone is None else ~np.isin(old.ids, gone)
        if alive is None or int(alive.sum()) != kept:
            alive = np.isin(old.ids, store.unit_ids(user_id), assume_unique=True)
        if np.unique(index.session_of[alive]).size != len(index.sessions):
            return None  # a session lost every unit: a fresh build orders the sessions differently
        index = compacted = compacted_index(index, alive)
        old = index.table
    if len(added) == 0:
        return index, {}, alive, compacted
    sessions = {sid: known[sid] if known is not None and sid in known else store.get_session(user_id, sid)
                for sid in dict.fromkeys(added.session_ids)}
    return appended_index(index, added, sessions), sessions, alive, compacted


def appended_index(index: UserIndex, added: UnitTable, sessions: dict[str, Session]) -> UserIndex:
    """``index`` followed by the rows of ``added`` (units with larger ids, of ``sessions``), the vectors appended in
    place (:class:`RowBuffer`); what :func:`extend_user_index` makes of what it read, and what an add makes of what
    it just wrote, without reading it back. ``index`` itself is not changed."""
    old = index.table
    n = len(old)
    rows = (index.rows or RowBuffer(old.vectors)).extend(n, added.vectors)
    # Extending the columns without their vectors: the buffer already holds every row, uncopied.
    none = old.vectors[:0]
    table = _with_rows(replace(old, vectors=none).extended(replace(added, vectors=none)), rows)
    pos = {sid: i for i, sid in enumerate(index.sessions)}
    for sid in dict.fromkeys(added.session_ids):
        pos.setdefault(sid, len(pos))
    session_of = np.concatenate([index.session_of, np.fromiter(map(pos.__getitem__, added.session_ids), np.int64,
                                                               len(added))])
    timestamps = {**index.timestamps, **{sid: sessions[sid].timestamp for sid in dict.fromkeys(added.session_ids)}}
    masks: dict[str, np.ndarray] = {g: np.concatenate([index.masks[g], n + np.flatnonzero(added.mask(g))])
                                    for g in GRANULARITIES}
    return UserIndex(table, session_of, tuple(pos), timestamps, masks, rows)


def update_user_index(store: Store, user_id: str, index: UserIndex) -> UserIndex | None:
    """``index`` brought up to date by what was added since and without what a rewrite replaced
    (:func:`extend_user_index`); ``None`` after a delete of a session."""
    extended = extend_user_index(store, user_id, index, compact=True)
    return None if extended is None else extended[0]


#: What :func:`nbytes` does not look into: locks and weak references (their targets are someone else's).
_OPAQUE = (type(threading.Lock()), type(threading.RLock()), weakref.ref)


def nbytes(value: object) -> int:
    """About how many bytes ``value`` holds in memory: numpy arrays (a view counts its base buffer, once), sparse
    matrices, strings, objects that count themselves (a ``memory_bytes()`` method), and the containers,
    dataclasses and objects with ``__dict__``/``__slots__`` around them, each object once. What an index cache charges
    a user's index (an estimate: interpreter overheads of small
    objects are left out)."""
    seen: set[int] = set()
    total = 0
    stack = [value]
    while stack:
        obj = stack.pop()
        if obj is None or isinstance(obj, (bool, int, float)) or id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, np.ndarray):
            base = obj
            while isinstance(base.base, np.ndarray):
                base = base.base
            if base is not obj and id(base) in seen:
                continue
            seen.add(id(base))
            total += base.nbytes
        elif isinstance(obj, (str, bytes)):
            total += len(obj)
        elif isinstance(obj, dict):
            total += 64 * len(obj)
            stack.extend(obj.keys())
            stack.extend(obj.values())
        elif isinstance(obj, (list, tuple, set, frozenset)):
            total += 8 * len(obj)
            if obj and all(map(isinstance, obj, repeat(str))):  # ids and texts: C loops rather than an object each
                total += sum(map(len, obj))
            else:
                stack.extend(obj)
        elif isinstance(obj, _OPAQUE) or callable(obj):
            continue
        elif callable(counted := getattr(obj, "memory_bytes", None)):  # keeps its own count (LexicalIndex)
            total += int(counted())
        else:
            attrs = getattr(obj, "__dict__", None)
            if attrs is not None:
                stack.extend(attrs.values())
            for cls in type(obj).__mro__:
                for name in getattr(cls, "__slots__", ()):
                    if name != "__weakref__" and hasattr(obj, name):
                        stack.append(getattr(obj, name))
    return total


class SnapshotCodec(Protocol[T]):
    """How a method's index is kept in the store between processes and evictions (:class:`IndexCache`)."""

    #: The snapshot kind: names the method, the format and every setting the index depends on.
    kind: str
    #: Beginnings of the kinds this one replaces (the method's older formats, which no reader reads again): saving a
    #: snapshot drops the user's snapshots of those, so an upgraded store does not keep them for ever.
    replaces: tuple[str, ...]

    def encode(self, index: T) -> bytes:
        """``index`` as bytes."""
        ...

    def decode(self, store: Store, user_id: str, data: bytes) -> T:
        """The index of the user's units in ``store`` that :meth:`encode` gave ``data`` for (raises on data it
        cannot read)."""
        ...

    def rows(self, index: T) -> int:
        """How many units ``index`` holds (a snapshot is written again once the index grew a quarter past it)."""
        ...


class IndexCache(Generic[T]):
    """Per-store, per-user search indexes, invalidated by the store's version counter.

    Rebuilding an index (vectors matrix, graph, BM25) costs far more than a query; a store's
    ``version(user_id)`` changes on every write, so a cached index is reused exactly while it is valid.
    Everything an index is built from is read inside one ``store.reading()`` block together with the
    version it is filed under, so an index never mixes two states of the store, whatever other threads
    and processes write meanwhile. The key is ``(version, store.generation)``: a write that rolled back
    may have shown uncommitted rows and its version number may be drawn again, so after a rollback an
    index is rebuilt, never updated from what it held.

    With ``update``, an index that went stale is brought up to date from its previous value (e.g. by
    reading only what was added) instead of being rebuilt; ``update`` must leave that value usable by
    readers still holding it, and returns ``None`` when it cannot (e.g. after a delete): then the
    index is built whole. One thread at a time builds or updates a given user's index (others
    wait for it rather than repeat the work). Stores are held weakly (a closed, dropped store takes
    its indexes with it); at most ``max_users`` users are kept per store (``None``: no count limit) and, with
    ``max_bytes``, at most that many bytes of indexes (:func:`nbytes`, measured as each is stored; the index just
    stored always stays), least recently used first out.

    With ``snapshots``, an index is also kept in the store (:meth:`SnapshotStore.save_snapshot`, where the store has
    them), so that a user not held
    here (evicted, or never loaded by this process) costs a read instead of a build: a snapshot of the current state
    is used as it is, an older one is brought up to date by ``update`` (what was added since), and only when there
    is none, it is unreadable or ``update`` cannot (deletes drop snapshots; a rewrite that replaced a turn) is the
    index built. A snapshot is written after each build, and after an update once the index holds a quarter more
    units than the snapshot last written or read, so keeping it costs about a constant share of each add; the writes
    run on a background thread (:meth:`flush` waits for them), never in the search or add that made the index.
    """

    def __init__(self, build: Callable[[Store, str], T], max_users: int | None = 8,
                 update: Callable[[Store, str, T], T | None] | None = None, *, max_bytes: int | None = None,
                 snapshots: SnapshotCodec[T] | None = None) -> None:
        self._build = build
        self._update = update
        self._snapshots = snapshots
        self._saved: weakref.WeakKeyDictionary[Store, dict[str, int]] = weakref.WeakKeyDictionary()
        # Snapshots waiting for the background writer, by (store, user); ``_saving`` while it runs.
        self._pending: dict[tuple[int, str], tuple[Store, str, tuple[int, int], T]] = {}
        self._saving = False
        self._idle = threading.Condition()
        self._max = max_users
        self.max_bytes = max_bytes
        self._bytes: weakref.WeakKeyDictionary[Store, dict[str, int]] = weakref.WeakKeyDictionary()
        self._stores: weakref.WeakKeyDictionary[Store, OrderedDict[str, tuple[tuple[int, int], T]]] = (
            weakref.WeakKeyDictionary())
        self._builders: weakref.WeakKeyDictionary[Store, dict[str, threading.Lock]] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()
        #: How many full builds and incremental updates (reading what was added) this cache ran, how many indexes
        #: writers put (appends, made from what they wrote), and how many snapshots it read (loads) and wrote
        #: (saves), for tests and benchmarks.
        self.builds = 0
        self.updates = 0
        self.appends = 0
        self.loads = 0
        self.saves = 0

    def _cached(self, store: Store, user_id: str, key: tuple[int, int]) -> tuple[tuple[int, int], T] | None:
        with self._lock:
            items = self._stores.setdefault(store, OrderedDict())
            hit = items.get(user_id)
            if hit is not None and hit[0] == key:
                items.move_to_end(user_id)
            return hit

    def put(self, store: Store, user_id: str, key: tuple[int, int], index: T) -> None:
        """File ``index`` as the user's at ``key``, made by the caller from what it just wrote (inside its write
        transaction, so that nothing else changed the user meanwhile), so that the next search needs no read. A
        rolled-back write changes the store's generation: an index put under its key is then never served."""
        with self._lock:
            builder = self._builders.setdefault(store, {}).setdefault(user_id, threading.Lock())
        with builder:
            self.appends += 1
            self._file(store, user_id, key, index)
        self._save(store, user_id, key, index, built=False)

    def _file(self, store: Store, user_id: str, key: tuple[int, int], index: T) -> None:
        """Keep ``index`` under ``key`` as the user's most recently used one, then evict what no longer fits."""
        size = nbytes(index) if self.max_bytes is not None else 0
        with self._lock:
            items = self._stores.setdefault(store, OrderedDict())
            sizes = self._bytes.setdefault(store, {})
            items[user_id] = (key, index)
            sizes[user_id] = size
            items.move_to_end(user_id)
            self._evict(items, sizes)

    def refresh(self, store: Store, user_id: str) -> None:
        """Bring the cached index of ``user_id`` up to date now (right after a write), so the next search
        finds it ready; nothing when none is cached or this cache cannot update (a rebuild waits for a
        search that needs it)."""
        if self._update is not None:
            with self._lock:
                cached = user_id in self._stores.get(store, {})
            if cached:
                self.get(store, user_id)

    def _from_snapshot(self, store: Store, user_id: str, version: int) -> T | None:
        """The index as of ``version`` from the user's snapshot, updated if it is older; ``None`` when there is no
        snapshot to use (inside the caller's ``store.reading()``)."""
        codec = self._snapshots
        found = None if codec is None or not isinstance(store, SnapshotStore) else store.load_snapshot(
            user_id, codec.kind)
        if found is None or found[0] > version:
            return None
        try:
            index: T | None = codec.decode(store, user_id, found[1])  # type: ignore[union-attr]
        except (InvalidInputError, ValueError, KeyError, TypeError, IndexError):
            return None  # an unreadable snapshot (another format): the build writes a good one
        self.loads += 1
        with self._lock:
            self._saved.setdefault(store, {})[user_id] = codec.rows(index)  # type: ignore[union-attr,arg-type]
        if found[0] < version:
            index = None if self._update is None else self._update(store, user_id, index)  # type: ignore[arg-type]
            self.updates += index is not None
        return index

    def _save(self, store: Store, user_id: str, key: tuple[int, int], index: T, built: bool) -> None:
        """Have ``index`` written as the user's snapshot after a build, or once it grew a quarter past the last one.

        The write is left to a background thread (:meth:`flush` waits for it): encoding and writing a snapshot
        would otherwise lengthen the search or add that made the index, and could wait there for another
        writer's lock. A newer state of the same user replaces one still waiting.
        """
        codec = self._snapshots
        if codec is None:
            return
        rows = codec.rows(index)
        with self._lock:
            last = self._saved.setdefault(store, {}).get(user_id)
        if not built and last is not None and rows < last + max(1, last // 4):
            return
        with self._idle:
            self._pending[(id(store), user_id)] = (store, user_id, key, index)
            if not self._saving:
                self._saving = True
                threading.Thread(target=self._write_pending, name="memgas-snapshots", daemon=True).start()

    def _write_pending(self) -> None:
        """The background writer: encode and write the waiting snapshots, newest state per user, until none wait."""
        codec = self._snapshots
        assert codec is not None
        while True:
            with self._idle:
                if not self._pending:
                    self._saving = False
                    self._idle.notify_all()
                    return
                store, user_id, key, index = self._pending.pop(next(iter(self._pending)))
            try:
                kept = isinstance(store, SnapshotStore) and store.save_snapshot(
                    user_id, codec.kind, key, codec.encode(index), replaces=codec.replaces)
            except Exception:
                kept = False   # read-only, busy past its timeout) loses nothing, and the next build tries again
            if kept:
                with self._lock:
                    self.saves += 1
                    self._saved.setdefault(store, {})[user_id] = codec.rows(index)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every snapshot handed to the background writer is written (or given up); return whether it
        finished within ``timeout`` seconds. Do not call it inside a write of the store: the writer needs its lock."""
        with self._idle:
            return self._idle.wait_for(lambda: not self._saving, timeout)

    def get(self, store: Store, user_id: str) -> T:
        """The index of ``user_id`` in ``store`` as of now, updated, loaded or rebuilt if the store changed."""
        # Store first, then this cache's locks, in every thread (a writer holding the store may call here).
        with store.reading(user_id):
            key = (store.version(user_id), store.generation)
            hit = self._cached(store, user_id, key)
            if hit is not None and hit[0] == key:
                return hit[1]
            with self._lock:
                builder = self._builders.setdefault(store, {}).setdefault(user_id, threading.Lock())
            with builder:
                hit = self._cached(store, user_id, key)  # another thread may have built it meanwhile
                if hit is not None and hit[0] == key:
                    return hit[1]
                updated = None
                if hit is not None and self._update is not None and hit[0][1] == key[1]:
                    updated = self._update(store, user_id, hit[1])
                    self.updates += updated is not None
                elif hit is None and key[0]:
                    updated = self._from_snapshot(store, user_id, key[0])
                built = updated is None
                if updated is not None:
                    index = updated
                else:
                    index = self._build(store, user_id)
                    self.builds += 1
                self._file(store, user_id, key, index)
        if key[0]:  # a user with data: keep the snapshot in step (outside the read, so that it may write)
            self._save(store, user_id, key, index, built)
        return index

    def _evict(self, items: OrderedDict[str, tuple[tuple[int, int], T]], sizes: dict[str, int]) -> None:
        """Drop least recently used indexes until the limits hold (the latest one always stays); under the lock."""
        while len(items) > 1 and ((self._max is not None and len(items) > self._max) or (
                self.max_bytes is not None and sum(sizes.values()) > self.max_bytes)):
            gone, _ = items.popitem(last=False)
            sizes.pop(gone, None)

    def limit(self, max_bytes: int) -> None:
        """Keep indexes by size from now on: at most ``max_bytes`` of them per store, whatever their count (the
        indexes held already are measured now, and the oldest dropped if they do not fit)."""
        with self._lock:
            self._max, self.max_bytes = None, int(max_bytes)
            for store, items in list(self._stores.items()):
                sizes = self._bytes.setdefault(store, {})
                for user_id, (_, index) in items.items():
                    if not sizes.get(user_id):  # stored while the cache counted users
                        sizes[user_id] = nbytes(index)
                self._evict(items, sizes)

    def held(self, store: Store) -> tuple[int, int]:
        """``(users, bytes)`` of the indexes this cache holds for ``store`` (bytes: 0 unless sized by bytes)."""
        with self._lock:
            return len(self._stores.get(store, ())), sum(self._bytes.get(store, {}).values())


def turn_docs(store: Store, user_id: str, side: str) -> UserIndex:
    """One row per stored turn, its text the turn's user side (``side="user"``) or the whole turn."""
    session_ids: list[str] = []
    starts: list[int] = []
    texts: list[str] = []
    timestamps = {}
    for info in store.list_sessions(user_id):
        timestamps[info.session_id] = info.timestamp
        for turn in store.get_session(user_id, info.session_id).turns:
            session_ids.append(info.session_id)
            starts.append(turn.index)
            texts.append((turn.user_text if side == "user" else "") or turn.text)
    n = len(texts)
    i32 = np.asarray(starts, dtype=np.int32)
    table = UnitTable(
        np.arange(n, dtype=np.int64), tuple(session_ids), np.ones(n, dtype=np.int8), i32, i32 + 1,
        np.zeros(n, dtype=np.int32), tuple(texts), np.zeros((n, 0), dtype=np.float32),
    )
    pos: dict[str, int] = {}
    session_of = np.fromiter((pos.setdefault(s, len(pos)) for s in session_ids), np.int64, n)
    return UserIndex(table, session_of, tuple(pos), timestamps, {"turn": np.arange(n)})
