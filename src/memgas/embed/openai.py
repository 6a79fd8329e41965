"""Embeddings from any OpenAI-compatible HTTP server (OpenAI, Ollama, vLLM, LM Studio, llama.cpp).
"""

from __future__ import annotations

import os
from typing import Any, Sequence

import numpy as np

from memgas.core.errors import InvalidInputError, MemgasError
from memgas.embed.base import WindowMixin, check_texts, l2_normalise

__all__ = ["OpenAIEmbedder"]

# ----------------------------------------------------------------------------- OpenAI-compatible HTTP


class OpenAIEmbedder(WindowMixin):
    """An OpenAI-compatible ``/embeddings`` endpoint (OpenAI, vLLM, Ollama, llama.cpp server).

    Uses only the standard library. Returned vectors are re-normalised (not every server does).
    Transient failures (429, 5xx, timeouts, refused connections) are retried ``max_retries`` times
    with exponential backoff and jitter, honouring ``Retry-After`` up to ``max_backoff`` seconds.

    ``count_tokens`` is an estimate, ``len(text.encode("utf-8")) // 3 + 1``: it never needs the
    server or a downloaded vocabulary, and it over-counts English (~4 characters per token) and
    CJK (3 bytes, ~1 token per character) so pieces from :meth:`split_to_window` stay under the
    server's limit.

    Args:
        model: the model name the server knows.
        base_url: e.g. ``http://localhost:11434/v1``; default ``$OPENAI_BASE_URL`` or
            ``https://api.openai.com/v1``.
        api_key: default ``$MEMGAS_EMBED_API_KEY``, then ``$OPENAI_API_KEY``; none is sent if unset.
        dim: expected dimension; if ``None`` it is learnt from the first response (reading ``dim``
            before any call sends one short request).
        max_tokens: the model's input limit in tokens.
        batch_size: most texts per request.
        max_batch_tokens: most (estimated) tokens per request; OpenAI refuses over 300,000.
        timeout: seconds per request.
        max_retries: retries after the first attempt.
        backoff: first retry delay in seconds, doubled each retry.
        max_backoff: cap on one delay, seconds.
    """

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        dim: int | None = None,
        max_tokens: int = 8192,
        batch_size: int = 64,
        max_batch_tokens: int = 200_000,
        timeout: float = 30,
        max_retries: int = 3,
        backoff: float = 0.5,
        max_backoff: float = 20.0,
    ) -> None:
        if not model:
            raise InvalidInputError("OpenAIEmbedder needs a model name")
        if min(batch_size, max_tokens, max_batch_tokens) < 1 or max_retries < 0 or timeout <= 0:
            raise InvalidInputError("batch_size, max_tokens, max_batch_tokens and timeout must be positive")
        self.model = model
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1").rstrip("/")
        self.url = f"{self.base_url}/embeddings"
        self._api_key = api_key or os.environ.get("MEMGAS_EMBED_API_KEY") or os.environ.get("OPENAI_API_KEY")
        self._dim = dim
        self.id = f"openai:{self.base_url}:{model}"
        self.max_tokens = max_tokens
        self.batch_size = batch_size
        self.max_batch_tokens = max_batch_tokens
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_backoff = max_backoff

    @property
    def dim(self) -> int:
        """The vector dimension (asks the server once if it was not given)."""
        if self._dim is None:
            self._dim = int(self._post(["dimension probe"]).shape[1])
        return self._dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` in requests of at most ``batch_size`` texts and ``max_batch_tokens`` tokens.

        Raises:
            InvalidInputError: bad ``texts``.
            MemgasError: the server is unreachable, refuses the request, or answers nonsense.
        """
        texts = check_texts(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        parts: list[np.ndarray] = []
        batch: list[str] = []
        used = 0
        for text, n in zip(texts, self.count_tokens(texts)):
            if batch and (len(batch) == self.batch_size or used + n > self.max_batch_tokens):
                parts.append(self._post(batch))
                batch, used = [], 0
            batch.append(text)
            used += n
        parts.append(self._post(batch))
        return np.concatenate(parts, axis=0)

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Estimated tokens per text (see the class notes)."""
        return [len(t.encode("utf-8", "surrogatepass")) // 3 + 1 for t in check_texts(texts)]

    def _post(self, batch: list[str]) -> np.ndarray:
        from memgas.core.http import (  # http.client and urllib only for a remote model (fast start)
            json_headers,
            post_json,
        )

        payload = post_json(
            self.url, {"model": self.model, "input": batch}, json_headers(self._api_key), timeout=self.timeout,
            max_retries=self.max_retries, backoff=self.backoff, max_backoff=self.max_backoff, what="embedding server",
        )
        return self._parse(payload, len(batch))

    def _parse(self, payload: Any, n: int) -> np.ndarray:
        try:
            data = sorted(payload["data"], key=lambda d: d.get("index", 0))
            vecs = np.asarray([d["embedding"] for d in data], dtype=np.float32)
        except (KeyError, TypeError, ValueError) as e:
            raise MemgasError(f"embedding server {self.url} sent an unexpected response ({e!r})") from e
        if vecs.ndim != 2 or vecs.shape[0] != n:
            raise MemgasError(f"embedding server {self.url} returned {vecs.shape[0]} vectors for {n} texts")
        if self._dim is not None and vecs.shape[1] != self._dim:
            raise MemgasError(f"embedding server {self.url} returned dimension {vecs.shape[1]}, expected {self._dim}")
        self._dim = vecs.shape[1]
        return l2_normalise(vecs)
