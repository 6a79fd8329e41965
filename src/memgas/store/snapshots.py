"""Index snapshots: derived data a method's index may keep in the store to load without rebuilding. The
:class:`SnapshotStore` interface, used only by :mod:`memgas.methods.index` (a store without it has every index built
from its units)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Sequence

import numpy as np

__all__ = ["SnapshotStore"]


class SnapshotStore(ABC):
    """Where a user's index snapshots live; deletes drop a user's snapshots."""

    @abstractmethod
    def save_snapshot(self, user_id: str, kind: str, key: tuple[int, int], data: bytes, *,
                      replaces: Sequence[str] = ()) -> bool:
        """Keep ``data``, an index of the user's state at ``key`` (``(version(user_id), generation)`` as read), as
        the user's snapshot of ``kind``; return whether it was kept (only while ``key`` is still the user's state).
        Keeping it drops the user's snapshots whose kind begins with one of ``replaces``. Deletes drop a user's
        snapshots."""

    @abstractmethod
    def load_snapshot(self, user_id: str, kind: str) -> tuple[int, bytes] | None:
        """The user's snapshot of ``kind`` as ``(version it is of, data)``, or ``None``."""

    @abstractmethod
    def unit_vectors(self, user_id: str, ids: np.ndarray) -> np.ndarray:
        """The stored float16 vectors of the user's units ``ids`` (ascending), one ``(len(ids), dim)`` row each, zeros
        for an id no longer stored: a snapshot keeps its units' ids, not their vectors (the store holds those once),
        and a unit a later rewrite replaced leaves the index when the snapshot is brought up to date."""
