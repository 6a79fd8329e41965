"""What every ``memgas`` command shares: the default store, JSON output, and the rules for store files
(read commands need an existing one; a refused command removes the file it created).
"""

from __future__ import annotations

import json
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from memgas.core.errors import NotFoundError  # noqa: E402

__all__ = []

DEFAULT_DB = "memgas.db"


def print_json(value: Any, *, indent: int | None = 2) -> None:
    print(json.dumps(value, indent=indent, ensure_ascii=False, default=str))


def store_file(db: str) -> Path | None:
    """The file a ``--db`` value names (a path or a ``sqlite:///`` URL), or ``None`` for an in-memory store or
    another URL (which :func:`memgas.store.open_store` judges)."""
    if db in (":memory:", "sqlite://"):
        return None
    scheme, sep, rest = db.partition("://")
    if sep and scheme != "sqlite":
        return None
    return Path(rest[1:] if sep else db).expanduser()


def require_store(db: str) -> None:
    """Raise :class:`NotFoundError` when ``db`` names a store file that does not exist."""
    path = store_file(db)
    if path is not None and not path.exists():
        raise NotFoundError(f"no store at {db}: the file does not exist "
                            "(commands that write, such as 'memgas add', create it)")


@contextmanager
def undo_created(db: str) -> Iterator[None]:
    """A refused command leaves no trace: the store file (and folders) of ``db`` made inside the block are
    removed again when it fails."""
    path = store_file(db)
    made = None if path is None or path.exists() else next(
        (p for p in reversed((path, *path.parents)) if not p.exists()), path)
    try:
        yield
    except BaseException:
        if made is not None and made.exists():
            _remove(made)
        raise


def _remove(path: Path) -> None:
    """Delete a store file with its -wal/-shm, or a folder this command created for it."""
    if path.is_dir():
        shutil.rmtree(path)
        return
    for f in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        f.unlink(missing_ok=True)
