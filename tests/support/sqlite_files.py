"""What SQLite leaves beside a database while a connection holds it open."""

from __future__ import annotations

from pathlib import Path


def open_files(root: Path) -> list[str]:
    """The WAL and shared-memory files under ``root``: SQLite removes them when the last connection to their database
    closes, so each one left names a database that something still holds open."""
    return sorted(p.name for p in root.rglob("*") if p.name.endswith(("-wal", "-shm")))
