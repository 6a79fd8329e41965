"""A child process adding and deleting sessions in a store file, killed with SIGKILL at random points.

The child writes an intent line before each call and an acknowledgement line after it returns (unbuffered
writes: a killed process loses nothing it wrote to the file). After each kill the store must hold every
acknowledged add, none of the acknowledged deletes, the in-flight call all or nothing, and pass SQLite's
integrity and foreign-key checks. The figures are printed (``pytest -s``) for the README's RELIABILITY section.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from memgas.store import SQLiteStore

KILLS = 30
UNITS = 12  # per session: enough rows that a kill often lands inside a write

_CHILD = """
import os, random, sys
import numpy as np
from memgas.model import Edge, Unit, make_session
from memgas.store import SQLiteStore

db, log, start, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rng = random.Random(seed)
fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
store = SQLiteStore(db)
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


def test_sigkill_at_random_points_loses_no_acknowledged_write(tmp_path: Path) -> None:
    db, log = tmp_path / "crash.db", tmp_path / "acks.log"
    SQLiteStore(db).close()
    log.touch()
    rng = random.Random(20240611)
    model: set[tuple[str, str]] = set()
    figures = {"kills": 0, "acked_adds": 0, "acked_deletes": 0, "in_flight": 0, "in_flight_committed": 0,
               "lost_writes": 0, "resurrected_deletes": 0}
    seen, start, t0 = 0, 0, time.perf_counter()
    for kill in range(KILLS):
        child = subprocess.Popen([sys.executable, "-c", _CHILD, str(db), str(log), str(start), str(kill)],
                                 stderr=subprocess.PIPE)
        # Wait until the child is writing, then kill it a random moment later.
        deadline = time.monotonic() + 60
        while log.read_text().count("\n") <= seen + 1 and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        time.sleep(rng.uniform(0, 0.15))
        assert child.poll() is None, child.stderr.read().decode() if child.stderr else ""
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        child.stderr.close()  # type: ignore[union-attr]
        figures["kills"] += 1
        lines = log.read_text().splitlines()
        adds, deletes, pending, kind = _replay(lines[seen:], model)
        seen, start = len(lines), start + 10_000
        figures["acked_adds"] += adds
        figures["acked_deletes"] += deletes
        with SQLiteStore(db) as store:
            conn = store._conn
            assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
            assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
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
    print(f"\ncrash: {figures}, {time.perf_counter() - t0:.1f} s")
    assert figures["acked_adds"] >= KILLS and figures["acked_deletes"] >= KILLS // 3
