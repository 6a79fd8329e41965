"""A store moved to another embedder while it serves: :func:`reembed`.

The store's sessions are replayed, in the order they were first written, into a *work store* (a SQLite file) through
the store's memory method with the new embedder: the units, their vectors and their associations come out as a store
built with that embedder from the start would have them. Meanwhile the store keeps serving with its old vectors.
Sessions written during the replay are caught up in further passes (each reads only what changed since the last,
:meth:`~memgas.store.Store.sessions_since`). The switch is one write transaction
(:meth:`~memgas.store.binding.StoreBinding.switching_embedder`): holding every user's write lock, it catches up the
last writes, writes every session's units and edges again from the work store, re-embeds the experience items'
keys, binds the new embedder and checks that nothing of the old one is left; then the work file is deleted.

A crash (or ``kill -9``) at any point loses nothing: before the switch commits, the store is untouched and the work
file holds every session replayed so far; run the same call again and it goes on from there, comparing each stored
session with the work store's copy (what changed since is replayed again, nothing else is embedded twice). Writes
made with the old embedder after the switch are refused in their transaction; a :class:`~memgas.memory.Memory`
opened without an ``embedder`` follows the switch on its next call.
"""

from __future__ import annotations

import os
import time
from collections import OrderedDict
from contextlib import ExitStack, closing
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from memgas.core.errors import EmbedderMismatchError, InvalidInputError
from memgas.core.types import GRANULARITIES, Edge, Session, Unit
from memgas.embed.base import Embedder
from memgas.embed.cache import EmbeddingCache
from memgas.embed.factory import get_embedder
from memgas.memory import Memory
from memgas.store import Store, StoreBinding, open_store, part
from memgas.store.experience import ExperienceStore

__all__ = ["Reembedded", "reembed", "default_work_path", "write_order"]

#: Catch-up passes before the switch at most; the switch itself catches up whatever is left, under the locks.
MAX_PASSES = 5


@dataclass(frozen=True, slots=True)
class Reembedded:
    """What :func:`reembed` did.

    ``replayed`` counts the sessions embedded by this call (a resumed call skips those its work store holds);
    ``passes`` the catch-up passes before the switch (1 when nothing was written meanwhile); ``seconds`` the whole
    call, ``switch_seconds`` the switch's write transaction (what writers waited for).
    """

    embedder_id: str
    previous_id: str
    users: int
    sessions: int
    replayed: int
    experiences: int
    passes: int
    seconds: float
    switch_seconds: float
    work: str

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable view."""
        return asdict(self)


def default_work_path(store: Store) -> Path:
    """Where :func:`reembed` keeps its work store by default: beside a SQLite file (``<file>.reembed``), else
    ``memgas-reembed.db`` in the current directory."""
    path = getattr(store, "path", None)
    return Path(f"{path}.reembed") if path is not None else Path("memgas-reembed.db")


def reembed(store: str | Path | Store, embedder: str | Embedder, *, work: str | Path | None = None,
            method: str | None = None, embedding_cache: str | Path | None = None,
            progress: Callable[[str], None] | None = None) -> Reembedded:
    """Re-embed every unit and experience item of ``store`` with ``embedder``, while the store goes on serving.

    Args:
        store: the store (a path, a URL or an open :class:`~memgas.store.Store`).
        embedder: the new embedder (a spec for :func:`~memgas.embed.factory.get_embedder`, or an instance).
        work: the work store's SQLite file (see :func:`default_work_path`); run again with the same file to resume.
        method: the memory method to replay with; default the one the store records (else ``memgas``).
        embedding_cache: an embedding cache file for the new embedder (default: in memory).
        progress: called with a line of text after each pass and at the switch.

    Returns:
        What was done (:class:`Reembedded`).

    Raises:
        InvalidInputError: the store holds no vectors yet, or its vectors already come from ``embedder``.
        EmbedderMismatchError: the work file holds a re-embedding with another embedder.

    Examples
    --------
    >>> import tempfile
    >>> from memgas import Memory
    >>> from memgas.reembed import reembed
    >>> work_file = tempfile.mkdtemp() + "/work.db"
    >>> with Memory(":memory:") as memory:
    ...     _ = memory.add([{"role": "user", "content": "I keep bees on the roof."}], user_id="ann")
    ...     done = reembed(memory.store, "e5", work=work_file)
    ...     print(done.sessions, done.embedder_id == memory.store.stats()["embedder_id"])
    ...     print(memory.search("hobby", user_id="ann")[0].session_id == memory.list(user_id="ann")[0].session_id)
    1 True
    True
    """
    t0 = time.perf_counter()
    say = progress or (lambda line: None)
    live = open_store(store)
    with ExitStack() as opened:
        if live is not store:
            opened.enter_context(closing(live))
        previous = part(live, StoreBinding).embedder_id
        cache = opened.enter_context(closing(EmbeddingCache(embedding_cache)))
        new = get_embedder(embedder, cache=cache)
        if previous is None:
            raise InvalidInputError("the store holds no vectors yet: there is nothing to re-embed")
        if previous == new.id:
            raise InvalidInputError(f"the store's vectors already come from embedder {new.id!r}")
        name = method or part(live, StoreBinding).method or "memgas"
        work_path = Path(work) if work is not None else default_work_path(live)
        try:
            shadow = opened.enter_context(Memory(work_path, method=name, embedder=new, index_cache_mb=None))
        except EmbedderMismatchError:
            raise EmbedderMismatchError(f"the work file {work_path} holds a re-embedding with another embedder: "
                                        "delete it or name another work file") from None
        replay = _Replay(live, shadow)
        passes = 0
        while True:  # replay, then catch up what was written meanwhile, until a pass finds nothing new
            passes += 1
            changed = replay.pass_over(live.list_users())
            say(f"pass {passes}: {changed} sessions embedded ({replay.sessions} in all, "
                f"{time.perf_counter() - t0:.1f} s)")
            if not changed or passes >= MAX_PASSES:
                break
        keys = _experience_keys(live)
        new.embed(list(keys.values()))  # outside the switch: inside, the cache answers
        t1 = time.perf_counter()
        with part(live, StoreBinding).switching_embedder(new.id, new.dim) as switch, ExitStack() as locks:
            users = live.list_users()
            for user in users:  # users who appeared since the switch began are locked too (a nested block joins)
                locks.enter_context(live.writing(user))
            caught = replay.pass_over(users)
            held = {user: _units_by_session(live, user) for user in users}  # read before the binding changes
            switch.bind()
            for user in users:
                replay.move(user, new.id, held[user])
            keys = _experience_keys(live)
            vectors = new.embed(list(keys.values())) if keys else np.zeros((0, new.dim), dtype=np.float32)
            for item_id, vector in zip(keys, vectors):
                switch.set_experience_vector(item_id, vector)
        switch_seconds = time.perf_counter() - t1
        say(f"switched to {new.id} ({caught} sessions caught up under the lock, {switch_seconds:.1f} s)")
        shadow.close()
        for suffix in ("", "-wal", "-shm"):
            Path(f"{work_path}{suffix}").unlink(missing_ok=True)
        return Reembedded(new.id, previous, len(users), replay.sessions, replay.embedded, len(keys), passes,
                          round(time.perf_counter() - t0, 3), round(switch_seconds, 3), os.fspath(work_path))


def _experience_keys(store: Store) -> dict[int, str]:
    """The key text of every experience item that has a vector, by id."""
    items = part(store, ExperienceStore)
    return {item.id: item.key for scope in items.experience_scopes()
            for item in items.list_experiences(scope) if item.vector is not None}


class _Replay:
    """The work store kept in step with the live one, user by user; then moved into it."""

    def __init__(self, live: Store, shadow: Memory) -> None:
        self.live, self.shadow, self.work = live, shadow, shadow.store
        self.synced: dict[str, int] = {}  # user -> the live version the work store holds
        self.embedded = 0
        self.sessions = 0

    def pass_over(self, users: list[str]) -> int:
        """Bring the work store to the live one for ``users`` (and drop the users the live one no longer has);
        return how many sessions were embedded."""
        for gone in sorted(set(self.work.list_users()) - set(users)):
            self.work.delete_user(gone)
            self.synced.pop(gone, None)
        changed = sum(self._user(user) for user in users)
        self.sessions = sum(self.work.stats(user)["sessions"] for user in users)
        self.embedded += changed
        return changed

    def _user(self, user: str) -> int:
        """Replay the user's sessions that the work store lacks or holds otherwise; delete those gone."""
        with self.live.reading(user):
            version = self.live.version(user)
            order = write_order(self.live, user)
            since = self.synced.get(user)
            wanted = order if since is None else [i.session_id for i in self.live.sessions_since(user, since)[0]]
            sessions = {sid: self.live.get_session(user, sid) for sid in wanted}
        held = {info.session_id for info in self.work.list_sessions(user)}
        for gone in sorted(held - set(order)):
            self.work.delete_session(user, gone)
        n = 0
        for sid in order:
            session = sessions.get(sid)
            if session is None:
                continue
            if sid in held:
                if _same(self.work.get_session(user, sid), session):
                    continue
                self.work.delete_session(user, sid)
            self.shadow.method.ingest(self.work, session)
            n += 1
        self.synced[user] = version
        return n

    def move(self, user: str, embedder_id: str, old: dict[str, list[int]]) -> None:
        """Write the user's units and edges from the work store into the live one, session by session in the work
        store's order, each session's ``old`` units dropped (inside the switch's transaction)."""
        table = self.work.load_units(user)
        edges = self.work.load_edges(user)
        rows: OrderedDict[str, list[int]] = OrderedDict()
        for row, sid in enumerate(table.session_ids):
            rows.setdefault(sid, []).append(row)
        owner = {int(table.ids[r]): sid for sid, rs in rows.items() for r in rs}
        by_session: dict[str, list[tuple[int, int, float]]] = {}
        for src, dst, weight in zip(edges.src.tolist(), edges.dst.tolist(), edges.weight.tolist()):
            by_session.setdefault(owner[dst], []).append((src, dst, weight))  # an edge goes with its newer unit
        moved: dict[int, int] = {}
        for sid, rs in rows.items():
            session = self.live.get_session(user, sid)
            local = {int(table.ids[r]): -(k + 1) for k, r in enumerate(rs)}
            units = [Unit(sid, GRANULARITIES[int(table.granularity[r])], table.texts[r], int(table.turn_start[r]),
                          int(table.turn_end[r]), int(table.chunk[r]), table.vectors[r]) for r in rs]
            links = [Edge(local.get(s) or moved[s], local.get(d) or moved[d], w) for s, d, w in by_session.get(sid, [])]
            ids = self.live.rewrite_session(session, keep_messages=len(session.messages), drop_units=old.get(sid, []),
                                            units=units, edges=links, embedder_id=embedder_id)
            moved.update(zip(local, ids))


def _units_by_session(store: Store, user: str) -> dict[str, list[int]]:
    """The ids of the user's units, by session."""
    table = store.load_units(user, texts=False)
    out: dict[str, list[int]] = {}
    for unit_id, sid in zip(table.ids.tolist(), table.session_ids):
        out.setdefault(sid, []).append(unit_id)
    return out


def write_order(store: Store, user: str) -> list[str]:
    """The user's session ids in the order they were first written (by their first unit), sessions without units
    last in listing order."""
    table = store.load_units(user, texts=False)
    first: dict[str, int] = {}
    for sid in table.session_ids:
        first.setdefault(sid, len(first))
    rest = [info.session_id for info in store.list_sessions(user) if info.session_id not in first]
    return sorted(first, key=first.__getitem__) + rest


def _same(a: Session, b: Session) -> bool:
    """Whether two copies of a session hold the same conversation (what units are made from)."""
    return (a.messages, a.timestamp, a.metadata, a.agent_id, a.run_id) == \
        (b.messages, b.timestamp, b.metadata, b.agent_id, b.run_id)
