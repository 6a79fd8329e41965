"""Storage backends: the abstract :class:`Store`, its SQLite implementation and (with the ``postgres``
extra) its PostgreSQL one, imported only when a ``postgresql://`` URL is opened."""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

from memgas.core.errors import InvalidInputError
from memgas.store.base import EdgeTable, SessionInfo, Store, StoredTexts, UnitTable, texts_of
from memgas.store.binding import StoreBinding
from memgas.store.experience import ExperienceRecord, ExperienceStore, scope_of
from memgas.store.keys import ApiKeyRecord, KeyStore
from memgas.store.limits import RateLimitStore
from memgas.store.quotes import QuoteStore
from memgas.store.snapshots import SnapshotStore
from memgas.store.sqlite import SQLiteStore

__all__ = [
    "Store", "UnitTable", "EdgeTable", "SessionInfo", "StoreBinding", "SnapshotStore", "KeyStore", "ApiKeyRecord",
    "ExperienceStore", "ExperienceRecord", "scope_of", "RateLimitStore", "QuoteStore",
    "StoredTexts", "texts_of",
    "SQLiteStore", "open_store", "migrate", "part",
]


P = TypeVar("P")


def part(store: Store, interface: type[P]) -> P:
    """``store`` as the interface of one of its other concerns (:class:`KeyStore`, :class:`ExperienceStore`, ...),
    for the layer that needs it.

    Raises:
        InvalidInputError: the store does not keep that concern.
    """
    if not isinstance(store, interface):
        raise InvalidInputError(f"{type(store).__name__} has no {interface.__name__} part")
    return store


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
