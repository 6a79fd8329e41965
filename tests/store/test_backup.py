"""Backups: a SQLite store copied while appends go on holds every write acknowledged before the copy began, checks
whole, and restores; a PostgreSQL store goes through pg_dump and pg_restore, the documented procedure."""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path

import pytest

from memgas import InvalidInputError, Memory, NotFoundError
from memgas.cli.commands import main
from memgas.store.backup import backup, check_copy, restore
from support.hash_embedder import HashEmbedder

EMBEDDER = HashEmbedder(64)


def say(i: int) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"Note {i}: my locker code this week is {4000 + i}."},
            {"role": "assistant", "content": f"Noted: locker {4000 + i}."}]


def test_a_backup_taken_under_appends_holds_every_write_acknowledged_before_it(tmp_path: Path) -> None:
    db, copy = tmp_path / "live.db", tmp_path / "copy.db"
    acked: list[str] = []
    stop = threading.Event()
    with Memory(str(db), embedder=EMBEDDER) as mem:
        mem.add(say(0), user_id="u", session_id="w0")
        acked.append("w0")

        def writer() -> None:  # another connection, as another worker would be
            with Memory(str(db), embedder=EMBEDDER) as other:
                i = 1
                while not stop.is_set():
                    other.append(say(i), user_id="u", session_id=f"w{i}")
                    acked.append(f"w{i}")
                    i += 1

        thread = threading.Thread(target=writer)
        thread.start()
        try:
            while len(acked) < 20:
                time.sleep(0.01)
            before = list(acked)
            result = backup(db, copy)
            during = len(acked)
            while len(acked) < during + 5:  # the writer was not stopped by the backup
                time.sleep(0.01)
        finally:
            stop.set()
            thread.join()
    assert result["sessions"] >= len(before) and check_copy(copy)["sessions"] == result["sessions"]
    with Memory(str(copy), embedder=EMBEDDER) as restored:
        held = {h.session_id for h in restored.list(user_id="u", limit=5_000)}
        assert set(before) <= held  # every acknowledged write, whole
        assert all(len(restored.get(sid, user_id="u").messages) == 2 for sid in before)
        assert restored.search("locker code 4003", user_id="u", k=1)[0].session_id == "w3"


def test_restore_puts_a_checked_backup_in_place_and_refuses_what_does_not_check(tmp_path: Path) -> None:
    db, copy = tmp_path / "m.db", tmp_path / "b.db"
    with Memory(str(db), embedder=EMBEDDER) as mem:
        mem.add(say(1), user_id="u", session_id="kept")
    backup(db, copy)
    with Memory(str(db), embedder=EMBEDDER) as mem:
        mem.add(say(2), user_id="u", session_id="after")
    with pytest.raises(InvalidInputError, match="pass --force"):
        restore(copy, db)
    assert restore(copy, db, replace=True)["sessions"] == 1
    with Memory(str(db), embedder=EMBEDDER) as mem:
        assert [h.session_id for h in mem.list(user_id="u")] == ["kept"]  # as of the backup
    damaged = tmp_path / "damaged.db"
    damaged.write_bytes(copy.read_bytes()[: len(copy.read_bytes()) // 2])
    with pytest.raises(InvalidInputError):
        restore(damaged, db, replace=True)
    stranger = tmp_path / "notes.db"
    stranger.write_bytes(b"not a database at all" * 100)
    with pytest.raises(InvalidInputError):
        restore(stranger, db, replace=True)
    with Memory(str(db), embedder=EMBEDDER) as mem:  # untouched by the refusals
        assert [h.session_id for h in mem.list(user_id="u")] == ["kept"]
    with pytest.raises(InvalidInputError, match="another file"):
        backup(db, db)
    with pytest.raises(InvalidInputError, match="existing folder"):
        backup(db, tmp_path / "missing" / "b.db")
    with pytest.raises(NotFoundError):
        backup(tmp_path / "none.db", copy)


def test_a_backup_refuses_an_existing_file_unless_forced_and_never_writes_over_the_stores_own_files(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db, notes = tmp_path / "m.db", tmp_path / "notes.txt"
    with Memory(str(db), embedder=EMBEDDER) as mem:
        mem.add(say(1), user_id="u", session_id="s")
        notes.write_text("my own notes\n")
        assert main(["backup", "--db", str(db), "--out", str(notes)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "exists" in err[0] and "--force" in err[0]
        assert notes.read_text() == "my own notes\n" and not (tmp_path / "notes.txt.partial").exists()
        # the store is open, so its write-ahead log and shared-memory index are there: neither is a backup target
        for own in (db, Path(f"{db}-wal"), Path(f"{db}-shm"), Path(f"{db}-journal"), tmp_path / "." / "m.db-wal"):
            before = own.read_bytes() if own.exists() else None
            with pytest.raises(InvalidInputError, match="store's own"):
                backup(db, own, replace=True)
            assert (own.read_bytes() if own.exists() else None) == before
        assert main(["backup", "--db", str(db), "--out", str(notes), "--force"]) == 0
        assert check_copy(notes)["sessions"] == 1
        assert [h.session_id for h in mem.list(user_id="u")] == ["s"]


def test_the_commands_back_up_and_restore_in_one_line_each(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                                           ) -> None:
    db = tmp_path / "m.db"
    with Memory(str(db), embedder=EMBEDDER) as mem:
        mem.add(say(1), user_id="u", session_id="s")
    assert main(["backup", "--db", str(db), "--out", str(tmp_path / "b.db")]) == 0
    assert '"sessions": 1' in capsys.readouterr().out
    assert main(["restore", str(tmp_path / "b.db"), "--db", str(tmp_path / "new.db")]) == 0
    assert '"restored"' in capsys.readouterr().out
    assert main(["restore", str(tmp_path / "b.db"), "--db", str(tmp_path / "new.db")]) == 2
    assert main(["backup", "--db", "postgresql://u@h/db", "--out", str(tmp_path / "x.db")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "--force" in err[0] and "pg_dump" in err[1]


def test_a_postgresql_store_round_trips_through_pg_dump_and_pg_restore(pg_url: str, pg_cluster, tmp_path: Path
                                                                       ) -> None:
    with Memory(pg_url, embedder=EMBEDDER) as mem:
        for i in range(3):
            mem.add(say(i), user_id="u", session_id=f"s{i}")
    dump = tmp_path / "memgas.dump"
    subprocess.run([str(pg_cluster.bin / "pg_dump"), "--format=custom", f"--file={dump}", pg_url],
                   check=True, capture_output=True, timeout=120)
    target = pg_cluster.create_database(f"restored_{tmp_path.name[-8:].lower().replace('-', '_')}")
    subprocess.run([str(pg_cluster.bin / "pg_restore"), "--no-owner", f"--dbname={target}", str(dump)],
                   check=True, capture_output=True, timeout=120)
    with Memory(target, embedder=EMBEDDER) as restored:
        assert sorted(h.session_id for h in restored.list(user_id="u")) == ["s0", "s1", "s2"]
        assert restored.search("locker code 4002", user_id="u", k=1)[0].session_id == "s2"
        restored.add(say(9), user_id="u", session_id="s9")  # and it takes writes: sequences restored too
