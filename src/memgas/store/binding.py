"""What a store was made with, read back: the embedder its vectors come from and the method that first wrote it.
The :class:`StoreBinding` interface, used by the facades when they open a store and by a dump (the binding itself is
written with the first vectors: :meth:`memgas.store.Store.bind_embedder`)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from contextlib import AbstractContextManager

import numpy as np

__all__ = ["StoreBinding", "EmbedderSwitch"]


class EmbedderSwitch(ABC):
    """What a switch of embedder (:meth:`StoreBinding.switching_embedder`) writes besides the sessions' units."""

    @abstractmethod
    def bind(self) -> None:
        """Bind the new embedder: from here on the store reads and writes vectors of the new embedder only (the old
        units are read by id, not vector, until they are rewritten)."""

    @abstractmethod
    def set_experience_vector(self, item_id: int, vector: np.ndarray) -> None:
        """Give one experience item (one with a vector) its vector of the new embedder; its other fields stay."""


class StoreBinding(ABC):
    """The embedder and method a store is bound to (set on first use)."""

    @property
    @abstractmethod
    def embedder_id(self) -> str | None:
        """The embedder this store's vectors come from, or ``None`` while it is empty."""

    @abstractmethod
    def switching_embedder(self, embedder_id: str, dim: int) -> AbstractContextManager[EmbedderSwitch]:
        """One write transaction that moves the store to another embedder, for a re-embedding's last step.

        It holds every user's write lock and the store's binding exclusively. Inside, the caller catches up the last
        writes (further ``writing`` blocks join the transaction and add their users' locks), binds the new embedder
        (:meth:`EmbedderSwitch.bind`), writes every unit again with its vectors (:meth:`memgas.store.Store.rewrite_session`,
        each session's old units dropped) and each experience item's vector (:meth:`EmbedderSwitch.set_experience_vector`).
        On exit it checks that the new embedder is bound and no unit or experience vector of the old one is left,
        drops every index snapshot and commits; on an exception, or if anything was left, it rolls back and the store
        keeps its old embedder with nothing changed.

        Raises:
            InvalidInputError: an empty id or a non-positive dimension; the store holds no embedder yet; on exit, a
                unit or experience vector left unreplaced.
        """

    @abstractmethod
    def record_method(self, name: str) -> None:
        """Record the memory method that first wrote this store; a later call changes nothing."""

    @property
    @abstractmethod
    def method(self) -> str | None:
        """The memory method that first wrote this store, or ``None`` (what the CLI opens it with by default)."""
