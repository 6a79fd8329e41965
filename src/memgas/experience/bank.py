"""An experience bank: one scope's items of one store, matched by the embedding of their key text.

Both experience designs keep their items here (:mod:`.bot`'s templates, :mod:`.principles`' principles):
the store holds them (:meth:`memgas.store.ExperienceStore.add_experience`), the bank embeds keys, finds the nearest
items by cosine similarity, and tells near-duplicates apart from new items.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from memgas.core.errors import InvalidInputError
from memgas.embed.base import Embedder
from memgas.store import ExperienceRecord, ExperienceStore, Store, part, scope_of

__all__ = ["ExperienceBank", "scope_of"]


class ExperienceBank:
    """The items of ``scope`` in ``store``, with ``embedder`` for their keys (it binds the store's embedder)."""

    def __init__(self, store: Store, embedder: Embedder, scope: str) -> None:
        self.store: ExperienceStore = part(store, ExperienceStore)
        self.embedder = embedder
        self.scope = scope
        self._binding = store
        store.bind_embedder(embedder.id, embedder.dim)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """L2-normalised float32 rows, one per text."""
        return self.embedder.embed(list(texts))

    def add(self, kind: str, key: str, payload: dict[str, Any], *, vector: np.ndarray | None = None,
            matchable: bool = True) -> int:
        """Store an item; its key is embedded unless ``vector`` is given or it is not ``matchable`` (yet)."""
        if matchable and vector is None:
            vector = self.embed([key])[0]
        if vector is not None:  # the store may have been re-embedded since this bank was made: never mix vectors
            self._binding.bind_embedder(self.embedder.id, self.embedder.dim)
        return self.store.add_experience(self.scope, kind, key, payload, vector if matchable else None)

    def items(self, kind: str | None = None) -> list[ExperienceRecord]:
        """The scope's items (of one kind, or all), oldest first."""
        return self.store.list_experiences(self.scope, kind)

    def nearest(self, kind: str, query: str | np.ndarray, k: int = 1) -> list[tuple[ExperienceRecord, float]]:
        """The ``k`` matchable items of ``kind`` whose key embeddings are most similar to ``query`` (a text or
        a normalised vector), best first, with their cosine similarity; ties keep the older item first."""
        if k < 1:
            raise InvalidInputError(f"k must be at least 1, got {k}")
        items = [item for item in self.items(kind) if item.vector is not None]
        if not items:
            return []
        q = self.embed([query])[0] if isinstance(query, str) else np.asarray(query, dtype=np.float32)
        sims = np.stack([item.vector for item in items if item.vector is not None]) @ q
        order = np.argsort(-sims, kind="stable")[:k]
        return [(items[i], float(sims[i])) for i in order]

    def update(self, item_id: int, **fields: Any) -> ExperienceRecord:
        """Change fields of one item (``kind``, ``key``, ``payload``, ``vector``; see :meth:`ExperienceStore.update_experience`)."""
        if fields.get("vector") is not None:
            self._binding.bind_embedder(self.embedder.id, self.embedder.dim)
        return self.store.update_experience(self.scope, item_id, **fields)

    def delete(self, ids: Sequence[int] | None = None, *, kind: str | None = None) -> int:
        """Delete items by id, all of a kind, or all of the scope's items; return how many."""
        return self.store.delete_experiences(self.scope, ids, kind=kind)
