"""Storage backends: the abstract :class:`Store` and its SQLite implementation."""

from __future__ import annotations

from pathlib import Path

from ..model import InvalidInputError
from .base import EdgeTable, SessionInfo, Store, UnitTable
from .sqlite import SQLiteStore

__all__ = ["Store", "UnitTable", "EdgeTable", "SessionInfo", "SQLiteStore", "open_store"]


def open_store(target: str | Path | Store | None = None) -> Store:
    """Open the store a target names.

    Args:
        target: ``None`` or ``":memory:"`` for an in-memory SQLite store; a file path, or a
            ``sqlite:///relative/path`` / ``sqlite:////absolute/path`` URL (``sqlite://`` alone
            is in memory) for a SQLite file; an already open :class:`Store`, returned as is.

    Returns:
        The store.

    Raises:
        InvalidInputError: a PostgreSQL URL (not available yet), another URL scheme, or a
            target of another type; or a file that cannot be opened as a memgas store.
    """
    if isinstance(target, Store):
        return target
    if target is None:
        return SQLiteStore(":memory:")
    if isinstance(target, Path):
        return SQLiteStore(target)
    if not isinstance(target, str) or not target:
        raise InvalidInputError(f"invalid store target {target!r}: expected a path, a URL or a Store")
    scheme, sep, rest = target.partition("://")
    if not sep:
        return SQLiteStore(target)
    if scheme in ("postgresql", "postgres") or scheme.startswith("postgresql+"):
        raise InvalidInputError("PostgreSQL backend not available yet")
    if scheme != "sqlite":
        raise InvalidInputError(f"unknown store URL scheme {scheme!r}: expected sqlite:/// or a file path")
    if not rest:
        return SQLiteStore(":memory:")
    if not rest.startswith("/") or rest == "/":
        raise InvalidInputError(f"invalid SQLite URL {target!r}: expected sqlite:///path/to/file.db")
    return SQLiteStore(rest[1:])
