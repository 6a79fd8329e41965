"""How the stores of this folder were made: by the code of an earlier schema version, not by today's.

For each version, a checkout of the commit named below (``git worktree add /tmp/vN COMMIT``), then
``PYTHONPATH=/tmp/vN/src python make.py vN.db vN.json`` and ``gzip -9 vN.db``:

    v1 00186da   v2 2ca7f91   v3 d9abdbc   v4 3aa257b   v6 645c374   v7 690ef6a   v8 4b230ef   v9 79b2391
    (SQLite skipped 5)

and for PostgreSQL, into an empty database of a throwaway cluster, ``make.py postgresql://... pgN.json`` then
``pg_dump --format=custom --file=pgN.dump postgresql://...``:

    pg1 00186da   pg2 2ca7f91   pg3 d9abdbc   pg4 3aa257b   pg5 a515e2b   pg6 645c374   pg7 3482d31   pg8 0497668
    pg9 4b230ef   pg10 79b2391

``vN.json`` is what that code read back from its store: the messages of every session, the units per user, an API
key (from version 2). ``tests/store/test_upgrades.py`` opens each store with today's code and finds all of it.
Written for every version's API (the oldest ``Memory.get`` returned a dict).
"""

from __future__ import annotations

import json
import sqlite3
import sys
from typing import Any

from memgas import Memory

SESSIONS = [
    ("trip", "2024-05-01T10:00:00", [("user", "I booked a ferry to Naxos for June 3, from the café by the port."),
                                     ("assistant", "Nice! Naxos has great beaches.")]),
    ("work", "2024-05-02T09:00:00", [("user", "My manager moved the quarterly review to Friday."),
                                     ("assistant", "Good to know: Friday it is.")]),
    ("pets", "2024-05-03T08:30:00", [("user", "Always answer me in metric units. My dog Biscuit weighs 14 kg."),
                                     ("assistant", "Noted, metric it is."),
                                     ("user", "He is a corgi, five years old."),
                                     ("assistant", "Corgis love short walks.")]),
]


def messages_of(got: Any) -> list[list[str]]:
    listed = got["messages"] if isinstance(got, dict) else got.messages
    return [[m["role"], m["content"]] if isinstance(m, dict) else [m.role, m.content] for m in listed]


def main(path: str, manifest: str) -> None:
    out: dict[str, Any] = {"users": {}, "units": {}}
    with Memory(path) as mem:
        for sid, ts, msgs in SESSIONS:
            mem.add([{"role": r, "content": c} for r, c in msgs], user_id="ana", session_id=sid, timestamp=ts)
        mem.add([{"role": "user", "content": "I started learning the cello."}], user_id="ben", session_id="music",
                timestamp="2024-06-01T12:00:00")
        for user in mem.store.list_users():
            sids = sorted(s.session_id for s in mem.store.list_sessions(user))
            out["users"][user] = {sid: messages_of(mem.get(sid, user_id=user)) for sid in sids}
            out["units"][user] = int(len(mem.store.load_units(user)))
    out["api_key"] = None
    try:
        from memgas.service.keys import create_key
        from memgas.store import open_store
    except ImportError:  # before version 2: no keys
        pass
    else:
        with open_store(path) as store:
            out["api_key"] = create_key(store, "admin", name="fixture")[0]
    if path.startswith("postgresql://"):  # dumped by the caller: pg_dump --format=custom
        import psycopg

        with psycopg.connect(path) as pg:
            out["schema_version"] = pg.execute("SELECT max(version) FROM schema_version").fetchone()[0]
    else:
        conn = sqlite3.connect(path)  # one self-contained file: the write-ahead log folded in
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.execute("PRAGMA journal_mode = DELETE")
        conn.execute("VACUUM")
        out["schema_version"] = conn.execute("PRAGMA user_version").fetchone()[0]
        conn.close()
    with open(manifest, "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1, ensure_ascii=False)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
