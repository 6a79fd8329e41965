"""Upgrades lose nothing: a store written by each earlier schema version's own code (``old_stores/``, made by
``old_stores/make.py`` at the commits it names; SQLite files, and PostgreSQL databases as ``pg_dump`` wrote them)
opens with today's code, migrates, and holds every message, every unit and every API key it held, answers searches
and takes writes."""

from __future__ import annotations

import gzip
import itertools
import json
import shutil
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest

from memgas import Memory
from memgas.service.keys import verify_key
from memgas.store.sqlite import SCHEMA_VERSION

OLD = Path(__file__).parent / "old_stores"
VERSIONS = sorted(int(p.name[1:].split(".")[0]) for p in OLD.glob("v*.db.gz"))
PG_VERSIONS = sorted(int(p.name[2:].split(".")[0]) for p in OLD.glob("pg*.dump"))
_databases = itertools.count()


def everything_is_there(mem: Memory, held: dict[str, Any]) -> None:
    """The store holds what the old code read back from it, its admin key opens the door, and it takes writes."""
    for user, sessions in held["users"].items():
        assert sorted(h.session_id for h in mem.list(user_id=user)) == sorted(sessions)
        for sid, messages in sessions.items():
            assert [[m.role, m.content] for m in mem.get(sid, user_id=user).messages] == messages
        assert len(mem.store.load_units(user)) == held["units"][user]
    if held["api_key"] is not None:
        assert verify_key(mem.store, held["api_key"]).tenant is None
    assert mem.search("ferry to Naxos", user_id="ana", k=1)[0].session_id == "trip"
    assert "Always answer me in metric units" in mem.profile(user_id="ana")[0].text
    mem.add("A new session after the upgrade.", user_id="ana", session_id="after")
    assert mem.search("a new session after the upgrade", user_id="ana", k=1)[0].session_id == "after"


def test_every_earlier_schema_version_has_a_store() -> None:
    from memgas.store.postgres import SCHEMA_VERSION as PG_SCHEMA_VERSION

    assert VERSIONS == [v for v in range(1, SCHEMA_VERSION) if v != 5]  # 5 changed PostgreSQL only
    assert PG_VERSIONS == list(range(1, PG_SCHEMA_VERSION))


@pytest.mark.parametrize("version", VERSIONS)
def test_a_store_of_an_earlier_version_opens_migrated_with_everything_in_it(version: int, tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    with gzip.open(OLD / f"v{version}.db.gz") as packed, db.open("wb") as out:
        shutil.copyfileobj(packed, out)
    held = json.loads((OLD / f"v{version}.json").read_text("utf-8"))
    assert held["schema_version"] == version
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == version  # as the old code left it
    with Memory(str(db)) as mem:
        everything_is_there(mem, held)
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


@pytest.mark.parametrize("version", PG_VERSIONS)
def test_a_postgresql_store_of_an_earlier_version_opens_migrated_with_everything_in_it(version: int,
                                                                                      pg_cluster: Any) -> None:
    import psycopg

    from memgas.store.postgres import SCHEMA_VERSION as PG_SCHEMA_VERSION

    held = json.loads((OLD / f"pg{version}.json").read_text("utf-8"))
    url = pg_cluster.create_database(f"old{version}_{next(_databases)}")
    subprocess.run([str(pg_cluster.bin / "pg_restore"), "--no-owner", f"--dbname={url}", str(OLD / f"pg{version}.dump")],
                   check=True, capture_output=True, timeout=120)
    with psycopg.connect(url) as conn:  # as the old code left it
        assert conn.execute("SELECT max(version) FROM schema_version").fetchone()[0] == version == held["schema_version"]
    with Memory(url) as mem:
        everything_is_there(mem, held)
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT max(version) FROM schema_version").fetchone()[0] == PG_SCHEMA_VERSION
