"""What every ``memgas`` command shares: the default store, JSON output, and the rules for store files
(read commands need an existing one; a refused command removes the file it created).
"""

from __future__ import annotations

import json
import shutil
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from memgas.core.errors import InvalidInputError, NotFoundError

__all__ = ["DEFAULT_DB", "SQLITE_HEADER", "print_json", "store_file", "require_store", "undo_created", "Made",
           "Progress", "memgas_options"]

DEFAULT_DB = "memgas.db"
#: The first bytes of every SQLite database file.
SQLITE_HEADER = b"SQLite format 3\x00"


def print_json(value: Any, *, indent: int | None = 2) -> None:
    """Print ``value`` as UTF-8 JSON, one document (``indent=None``: on one line)."""
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


def require_store(db: str, *, create_flag: bool = False) -> None:
    """Raise :class:`NotFoundError` when ``db`` names a store file that does not exist, and
    :class:`InvalidInputError` when the file is not an SQLite database: a command that needs a store never
    makes one of a stranger's file (an empty or one-byte file would become a 72 KB store otherwise).
    ``create_flag``: the command has ``--create``, which the error then names."""
    path = store_file(db)
    if path is None:
        return
    if not path.exists():
        how = ("pass --create to make a new one there" if create_flag
               else "commands that write, such as 'memgas add', create it")
        raise NotFoundError(f"no store at {db}: the file does not exist ({how})")
    if path.is_file():
        with path.open("rb") as f:
            head = f.read(len(SQLITE_HEADER))
        if head != SQLITE_HEADER:
            raise InvalidInputError(f"{db} is not a memgas store (not an SQLite database); nothing was changed")


class Made:
    """What :func:`undo_created` yields: :meth:`keep` once something the user must not lose was committed."""

    def __init__(self) -> None:
        self.kept = False

    def keep(self) -> None:
        """Keep the store file whatever happens next (a batch of the file is in it)."""
        self.kept = True


@contextmanager
def undo_created(db: str) -> Iterator[Made]:
    """A refused command leaves no trace: the store file (and folders) of ``db`` made inside the block are
    removed again when it fails, unless the block said :meth:`Made.keep` (a committed batch stays)."""
    path = store_file(db)
    made = None if path is None or path.exists() else next(
        (p for p in reversed((path, *path.parents)) if not p.exists()), path)
    state = Made()
    try:
        yield state
    except BaseException:
        if made is not None and made.exists() and not state.kept:
            _remove(made)
        raise


class Progress:
    """Progress of a long command on stderr: a bar on a terminal, else a line at every tenth of the work
    (nothing for a single item). stdout keeps only the results."""

    def __init__(self, total: int, unit: str) -> None:
        self.total, self.unit, self.done = total, unit, 0
        self._next = max(1, total // 10)
        self._bar = None
        if total > 1 and sys.stderr.isatty():
            from tqdm import tqdm

            self._bar = tqdm(total=total, unit=unit, file=sys.stderr, leave=False)

    def update(self, n: int) -> None:
        """Count ``n`` more items done."""
        self.done += n
        if self._bar is not None:
            self._bar.update(n)
        elif self.total > 1 and (self.done >= self._next or self.done == self.total):
            print(f"memgas: {self.done}/{self.total} {self.unit}", file=sys.stderr, flush=True)
            self._next = (self.done // max(1, self.total // 10) + 1) * max(1, self.total // 10)

    def close(self) -> None:
        """Remove the bar (the lines stay)."""
        if self._bar is not None:
            self._bar.close()


def _remove(path: Path) -> None:
    """Delete a store file with its -wal/-shm, or a folder this command created for it."""
    if path.is_dir():
        shutil.rmtree(path)
        return
    for f in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        f.unlink(missing_ok=True)


def memgas_options(pairs: list[str]) -> dict[str, Any]:
    """``--set`` pairs as typed MemGAS parameters: ``["temperature=0.2", "use_ppr=false"]`` →
    ``{"temperature": 0.2, "use_ppr": False}`` (keys: the fields of :class:`~memgas.methods.MemGASConfig`)."""
    from dataclasses import fields

    from memgas.methods import MemGASConfig

    types = {f.name: f.type for f in fields(MemGASConfig)}
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or key not in types:
            raise InvalidInputError(f"--set {pair!r}: expected KEY=VALUE with KEY one of {', '.join(types)}")
        kind = str(types[key])
        try:
            if "bool" in kind:
                if raw.lower() not in ("true", "false", "1", "0"):
                    raise ValueError(raw)
                out[key] = raw.lower() in ("true", "1")
            elif "str" in kind:
                out[key] = raw
            else:
                out[key] = int(raw) if "int" in kind else float(raw)
        except ValueError:
            raise InvalidInputError(f"--set {pair!r}: {raw!r} is not a valid {kind}") from None
    return out


def retention_periods(pairs: list[str]) -> dict[str, float]:
    """``--retention`` pairs as periods by user or tenant: ``["tenant:acme=90", "user:bob=30"]`` →
    ``{"tenant:acme": 90.0, "user:bob": 30.0}`` (the keys and days are checked where the memory is opened,
    :class:`memgas.core.retention.Retention`)."""
    out: dict[str, float] = {}
    for pair in pairs:
        key, sep, raw = pair.rpartition("=")
        try:
            out[key] = float(raw)
        except ValueError:
            raise InvalidInputError(f"--retention {pair!r}: expected user:ID=DAYS or tenant:NAME=DAYS") from None
        if not sep:
            raise InvalidInputError(f"--retention {pair!r}: expected user:ID=DAYS or tenant:NAME=DAYS")
    return out
