"""A consistent copy of a SQLite store taken while writes go on, and putting one back.

:func:`backup` reads the store through SQLite's online backup API (``sqlite3.Connection.backup``) in one step, that
is one read transaction: the copy is the store as of one moment, every transaction committed before that moment in
it and none after, however many writers are at work (in WAL mode a reader never blocks them; a copy made in several
steps would start again at every write that lands between two of them, and might never end under steady writes). The copy is
written beside its destination, checked (``PRAGMA integrity_check``, a memgas store's tables) and only then renamed
into place, so a backup file is either whole or absent. An existing file is replaced only when asked, and never one
of the store's own files (the store, its write-ahead log, its shared-memory index, its rollback journal).
:func:`restore` copies a checked backup into a store's place the same way, refusing to replace an existing store
unless told to.

PostgreSQL stores are backed up with PostgreSQL's own tools (``pg_dump`` / ``pg_restore``, or a base backup with its
WAL in a cluster): the docs' "running memgas for years" guide gives the procedure, and the tests run it.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from pathlib import Path
from typing import Any

from memgas.core.errors import InvalidInputError, NotFoundError

__all__ = ["backup", "restore", "check_copy", "store_files"]

def _connect(path: Path, *, uri_mode: str | None = None) -> sqlite3.Connection:
    if uri_mode is None:
        return sqlite3.connect(path, timeout=30, isolation_level=None)
    return sqlite3.connect(f"file:{path}?mode={uri_mode}", uri=True, timeout=30, isolation_level=None)


def check_copy(path: Path) -> dict[str, Any]:
    """What a store file holds (users, sessions, messages, units and bytes), after checking that it is whole (SQLite's
    ``integrity_check``) and a memgas store.

    Raises:
        InvalidInputError: the file is damaged, not SQLite, or not a memgas store.
    """
    try:
        with contextlib.closing(_connect(path, uri_mode="ro")) as conn:
            verdict = conn.execute("PRAGMA integrity_check").fetchone()[0]
            if verdict != "ok":
                raise InvalidInputError(f"{path} is damaged: {str(verdict).splitlines()[0]}")
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if not {"meta", "sessions", "messages", "units"} <= tables:
                raise InvalidInputError(f"{path} is not a memgas store")
            counts = {name: int(conn.execute(f"SELECT count(*) FROM {name}").fetchone()[0])
                      for name in ("users", "sessions", "messages", "units")}
    except sqlite3.DatabaseError as exc:
        raise InvalidInputError(f"{path} is not a readable SQLite store: {exc}") from None
    return {**counts, "bytes": path.stat().st_size}


def _copy(source: sqlite3.Connection, target_path: Path) -> None:
    """``source`` copied, page by page, into a new file at ``target_path`` (made fresh)."""
    target_path.unlink(missing_ok=True)
    with contextlib.closing(_connect(target_path)) as target:
        source.backup(target, pages=-1)  # every page in one step: one read transaction, one moment
        target.execute("PRAGMA journal_mode = DELETE")  # one self-contained file, no -wal beside it


def store_files(store: Path) -> tuple[Path, ...]:
    """Every file SQLite keeps for the store at ``store``: the database, its write-ahead log, its shared-memory index
    and its rollback journal (those present or not), resolved."""
    store = Path(store).expanduser().resolve()
    return (store, *(store.with_name(store.name + suffix) for suffix in ("-wal", "-shm", "-journal")))


def backup(store: Path, to: Path, *, replace: bool = False) -> dict[str, Any]:
    """Copy the SQLite store at ``store`` to ``to`` as of one moment, while writes go on (see the module docstring);
    what the copy holds.

    Raises:
        NotFoundError: no store at ``store``.
        InvalidInputError: ``to`` is one of the store's own files (see :func:`store_files`), a folder or in a missing
            folder; a file is at ``to`` and ``replace`` is false; the store is not a memgas store; or the copy does
            not check.
    """
    store, to = Path(store).expanduser(), Path(to).expanduser()
    if not store.is_file():
        raise NotFoundError(f"no store at {store}")
    if to.is_dir() or not to.parent.is_dir():
        raise InvalidInputError(f"cannot write the backup to {to}: name a file in an existing folder")
    if to.resolve() in store_files(store):
        raise InvalidInputError(f"the backup must go to another file than the store's own ({to.name} is one of them)")
    if to.exists() and not replace:
        raise InvalidInputError(f"{to} exists: pass --force to replace it with the backup")
    partial = to.with_name(to.name + ".partial")
    try:
        with contextlib.closing(_connect(store, uri_mode="ro")) as source:
            _copy(source, partial)
        counts = check_copy(partial)
        os.replace(partial, to)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return {"backup": str(to), **counts}


def restore(backup_file: Path, store: Path, *, replace: bool = False) -> dict[str, Any]:
    """Put the backup at ``backup_file`` in the place of the SQLite store at ``store`` (checked first, then copied
    beside it and renamed over it); what the restored store holds. Stop the store's writers first: a process that
    keeps the old file open keeps writing to it.

    Raises:
        NotFoundError: no backup at ``backup_file``.
        InvalidInputError: the backup does not check, or a store is at ``store`` and ``replace`` is false.
    """
    backup_file, store = Path(backup_file).expanduser(), Path(store).expanduser()
    if not backup_file.is_file():
        raise NotFoundError(f"no backup at {backup_file}")
    check_copy(backup_file)
    if store.exists() and not replace:
        raise InvalidInputError(f"{store} exists: pass --force to replace it with the backup")
    if not store.parent.is_dir():
        raise InvalidInputError(f"cannot restore to {store}: the folder {store.parent} does not exist")
    partial = store.with_name(store.name + ".restoring")
    try:
        with contextlib.closing(_connect(backup_file, uri_mode="ro")) as source:
            _copy(source, partial)
        counts = check_copy(partial)
        for stale in (Path(f"{store}-wal"), Path(f"{store}-shm")):  # the old store's log must not replay onto it
            stale.unlink(missing_ok=True)
        os.replace(partial, store)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return {"restored": str(store), **counts}
