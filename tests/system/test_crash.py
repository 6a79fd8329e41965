"""A child process adding and deleting sessions in a store (a SQLite file, or a PostgreSQL database), killed
with SIGKILL at random points.

The child writes an intent line before each call and an acknowledgement line after it returns (unbuffered
writes: a killed process loses nothing it wrote to the file). After each kill the store must hold every
acknowledged add, none of the acknowledged deletes, the in-flight call all or nothing, every stored session
whole, and pass SQLite's integrity and foreign-key checks (on PostgreSQL: no user row without sessions or the
other way round, every session's messages all there, no advisory lock left held). The figures are printed
(``pytest -s``) for the README's RELIABILITY section.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memgas.store import SQLiteStore, Store, open_store

KILLS = 30
UNITS = 12  # per session: enough rows that a kill often lands inside a write

_CHILD = """
import os, random, sys
import numpy as np
from memgas.core.types import Edge, Unit
from memgas.core.validate import make_session
from memgas.store import open_store

target, log, start, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rng = random.Random(seed)
fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
store = open_store(target)
store.bind_embedder("crash", 8)
users = ("alice", "bob")
alive = {(u, i.session_id) for u in users for i in store.list_sessions(u)}

def note(line):
    os.write(fd, (line + "\\n").encode())

def add(user, sid):
    messages = [{"role": "user", "content": f"{sid} turn {t}"} for t in range(UNITS)]
    session = make_session(messages, user_id=user, session_id=sid)
    vectors = np.random.default_rng(rng.randrange(2**32)).standard_normal((UNITS, 8)).astype(np.float32)
    units = [Unit(sid, "turn", f"{sid}/{t}", t, t + 1, vector=v) for t, v in enumerate(vectors)]
    with store.writing(user):
        history = store.load_units(user).ids.tolist()
        edges = [Edge(-1, o, 0.5) for o in rng.sample(history, min(4, len(history)))]
        store.add_session(session, units, edges + [Edge(-1, -2, 0.5)])

n = start
while True:
    n += 1
    user = rng.choice(users)
    op = rng.random()
    if op < 0.3 and alive:
        victim = rng.choice(sorted(alive))
        note(f"T del {victim[0]} {victim[1]}")
        store.delete_session(*victim)
        alive.discard(victim)
        note(f"A del {victim[0]} {victim[1]}")
    elif op < 0.45:  # two sessions in one transaction: both or neither
        pair = [f"c{n}a", f"c{n}b"]
        note(f"T batch {user} {pair[0]} {pair[1]}")
        with store.writing(user):
            for sid in pair:
                add(user, sid)
        alive.update((user, sid) for sid in pair)
        note(f"A batch {user} {pair[0]} {pair[1]}")
    else:
        note(f"T add {user} c{n}")
        add(user, f"c{n}")
        alive.add((user, f"c{n}"))
        note(f"A add {user} c{n}")
""".replace("UNITS", str(UNITS))


def _replay(lines: list[str], model: set[tuple[str, str]]) -> tuple[int, int, list[tuple[str, str]] | None, str]:
    """Apply the acknowledged calls in ``lines`` to ``model``; return the counts of acknowledged adds
    (sessions) and deletes, the sessions of the call in flight at the kill (``None`` if none) and its kind."""
    adds = deletes = 0
    pending: list[tuple[str, str]] | None = None
    kind = ""
    for line in lines:
        mark, op, user, *sids = line.split()
        sessions = [(user, sid) for sid in sids]
        if mark == "T":
            pending, kind = sessions, op
            continue
        assert sessions == pending, f"acknowledgement {line!r} without its intent"
        if op == "del":
            model.difference_update(sessions)
            deletes += 1
        else:
            model.update(sessions)
            adds += len(sessions)
        pending = None
    return adds, deletes, pending, kind


#: On PostgreSQL: what a consistent store has none of (each query counts violations).
_PG_VIOLATIONS = {
    "user rows without sessions": "SELECT count(*) FROM users u"
                                  " WHERE NOT EXISTS (SELECT 1 FROM sessions s WHERE s.user_id = u.user_id)",
    "users with sessions and no user row": "SELECT count(DISTINCT user_id) FROM sessions s"
                                           " WHERE NOT EXISTS (SELECT 1 FROM users u WHERE u.user_id = s.user_id)",
    "sessions missing messages": "SELECT count(*) FROM sessions s WHERE n_messages <> (SELECT count(*)"
                                 " FROM messages m WHERE m.user_id = s.user_id AND m.session_pk = s.pk)",
    "advisory locks held": "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'",
}


class _PgWatch:
    """A connection to the cluster's maintenance database watching the store database's connections."""

    def __init__(self, url: str) -> None:
        import psycopg

        self.conn = psycopg.connect(url, dbname="postgres", autocommit=True)
        self.database = url.rsplit("/", 1)[1]

    def connections(self) -> tuple[int, int]:
        """How many connections the store database has, and how many of them are inside a transaction."""
        return self.conn.execute("SELECT count(*), count(xact_start) FROM pg_stat_activity WHERE datname = %s",
                                 (self.database,)).fetchone()

    def settle(self) -> None:
        """Wait until the server has ended the killed child's connections (rolling back the transaction it
        left open, or committing a COMMIT it sent before dying), so that what is read next is final."""
        deadline = time.monotonic() + 30
        while self.connections()[0]:
            assert time.monotonic() < deadline, "the killed child's connections stay open"
            time.sleep(0.005)


def _check_consistent(store: Store) -> None:
    """The backend's own checks of a store after a crash."""
    if isinstance(store, SQLiteStore):
        conn = store._conn
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        return
    import psycopg

    with psycopg.connect(store._url, autocommit=True) as conn:  # type: ignore[attr-defined]
        found = {name: conn.execute(q).fetchone()[0] for name, q in _PG_VIOLATIONS.items()}
    assert found == dict.fromkeys(_PG_VIOLATIONS, 0)


@pytest.fixture(params=["sqlite", "postgres"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The store under test: a SQLite file, or a fresh PostgreSQL database of the throwaway cluster."""
    return str(tmp_path / "crash.db") if request.param == "sqlite" else request.getfixturevalue("pg_url")


@pytest.mark.slow
def test_sigkill_at_random_points_loses_no_acknowledged_write(target: str, tmp_path: Path) -> None:
    log = tmp_path / "acks.log"
    watch = _PgWatch(target) if target.startswith("postgresql://") else None
    open_store(target).close()
    log.touch()
    rng = random.Random(20240611)
    model: set[tuple[str, str]] = set()
    figures = {"kills": 0, "acked_adds": 0, "acked_deletes": 0, "in_flight": 0, "in_flight_committed": 0,
               "lost_writes": 0, "resurrected_deletes": 0}
    if watch is not None:
        figures["killed_in_open_transaction"] = 0  # sampled just before the kill
    seen, start, t0 = 0, 0, time.perf_counter()
    for kill in range(KILLS):
        child = subprocess.Popen([sys.executable, "-c", _CHILD, target, str(log), str(start), str(kill)],
                                 stderr=subprocess.PIPE)
        # Wait until the child is writing, then kill it a random moment later.
        deadline = time.monotonic() + 60
        while log.read_text().count("\n") <= seen + 1 and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        time.sleep(rng.uniform(0, 0.15))
        assert child.poll() is None, child.stderr.read().decode() if child.stderr else ""
        if watch is not None:
            figures["killed_in_open_transaction"] += watch.connections()[1] > 0
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        child.stderr.close()  # type: ignore[union-attr]
        figures["kills"] += 1
        lines = log.read_text().splitlines()
        adds, deletes, pending, kind = _replay(lines[seen:], model)
        seen, start = len(lines), start + 10_000
        figures["acked_adds"] += adds
        figures["acked_deletes"] += deletes
        if watch is not None:
            watch.settle()
        with open_store(target) as store:
            _check_consistent(store)
            stored = {(u, i.session_id) for u in ("alice", "bob") for i in store.list_sessions(u)}
            for user in ("alice", "bob"):  # every stored session is whole
                table, infos = store.load_units(user), store.list_sessions(user)
                assert all(table.session_ids.count(i.session_id) == UNITS and i.n_messages == UNITS for i in infos)
        if pending is not None:  # the call in flight: all or nothing, and the model follows the store
            figures["in_flight"] += 1
            present = [s in stored for s in pending]
            assert all(present) or not any(present), f"{kind} {pending} half-done: {present}"
            done = all(present) != (kind == "del")
            figures["in_flight_committed"] += done
            (model.update if all(present) else model.difference_update)(pending)
        figures["lost_writes"] += len(model - stored)
        figures["resurrected_deletes"] += len(stored - model)
        assert model == stored, f"after kill {kill}: lost {model - stored}, unexpected {stored - model}"
    print(f"\ncrash ({'SQLite' if watch is None else 'PostgreSQL'}): {figures}, {time.perf_counter() - t0:.1f} s")
    assert figures["acked_adds"] >= KILLS and figures["acked_deletes"] >= KILLS // 3
    if watch is not None:  # the kills do land inside transactions the server has to roll back
        watch.conn.close()
        assert figures["killed_in_open_transaction"] >= KILLS // 3
