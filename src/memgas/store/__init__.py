"""Storage backends: the abstract :class:`Store`, its SQLite implementation and (with the ``postgres``
extra) its PostgreSQL one, imported only when a ``postgresql://`` URL is opened."""

from __future__ import annotations

from pathlib import Path

from memgas.core.errors import InvalidInputError
from memgas.store.base import (
    ApiKeyRecord,
    EdgeTable,
    ExperienceRecord,
    SessionInfo,
    Store,
    StoredTexts,
    UnitTable,
    scope_of,
    texts_of,
)
from memgas.store.sqlite import SQLiteStore

__all__ = [
    "Store", "UnitTable", "EdgeTable", "SessionInfo", "ApiKeyRecord", "ExperienceRecord", "scope_of",
    "StoredTexts", "texts_of",
    "SQLiteStore", "open_store", "migrate",
]


def open_store(target: str | Path | Store | None = None) -> Store:
    """Open the store a target names.

    Args:
        target: ``None`` or ``":memory:"`` for an in-memory SQLite store; a file path, or a
            ``sqlite:///relative/path`` / ``sqlite:////absolute/path`` URL (``sqlite://`` alone
            is in memory) for a SQLite file; a ``postgresql://`` (or ``postgres://``) URL for a
            :class:`~memgas.store.postgres.PostgresStore`; an already open :class:`Store`, returned as is.

    Returns:
        The store (its schema created or migrated to the current version).

    Raises:
        InvalidInputError: another URL scheme, or a target of another type; or a file or database
            that cannot be opened as a memgas store.
        MemgasError: a PostgreSQL server that cannot be reached, or psycopg missing.
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
    if scheme in ("postgresql", "postgres"):
        from memgas.store.postgres import PostgresStore

        return PostgresStore(target)
    if scheme != "sqlite":
        raise InvalidInputError(
            f"unknown store URL scheme {scheme!r}: expected a file path, sqlite:/// or postgresql://")
    if not rest:
        return SQLiteStore(":memory:")
    if not rest.startswith("/") or rest == "/":
        raise InvalidInputError(f"invalid SQLite URL {target!r}: expected sqlite:///path/to/file.db")
    return SQLiteStore(rest[1:])


def migrate(target: str | Path) -> tuple[int, int]:
    """Create or upgrade the schema of the store ``target`` names (what ``memgas migrate`` does).

    Opening a store applies pending migrations too; running this first lets a deployment upgrade a
    shared PostgreSQL database once, before new workers start.

    Args:
        target: as for :func:`open_store` (a file path or a ``sqlite:///`` / ``postgresql://`` URL).

    Returns:
        ``(version found, version now)``; 0 found means the schema was created.

    Raises:
        InvalidInputError, MemgasError: as :func:`open_store`.
    """
    with open_store(target) as store:
        return store.schema_upgrade  # type: ignore[attr-defined]
