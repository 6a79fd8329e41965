"""What a store was made with, read back: the embedder its vectors come from and the method that first wrote it.
The :class:`StoreBinding` interface, used by the facades when they open a store and by a dump (the binding itself is
written with the first vectors: :meth:`memgas.store.Store.bind_embedder`)."""

from __future__ import annotations

from abc import ABC, abstractmethod

__all__ = ["StoreBinding"]


class StoreBinding(ABC):
    """The embedder and method a store is bound to (set on first use)."""

    @property
    @abstractmethod
    def embedder_id(self) -> str | None:
        """The embedder this store's vectors come from, or ``None`` while it is empty."""

    @abstractmethod
    def record_method(self, name: str) -> None:
        """Record the memory method that first wrote this store; a later call changes nothing."""

    @property
    @abstractmethod
    def method(self) -> str | None:
        """The memory method that first wrote this store, or ``None`` (what the CLI opens it with by default)."""
