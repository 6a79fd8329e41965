"""A fast deterministic embedder for tests that need thousands of adds (fuzzing, load, re-deriving).

It follows the :class:`memgas.embed.base.Embedder` protocol: each token adds ±1 to a hashed coordinate and
coordinate 0 is a constant bias, so no vector is zero. Microseconds a text instead of the real model's
milliseconds. Encoding a lone surrogate raises, as the real tokenizer does.
"""

from __future__ import annotations

import re
import zlib
from typing import Sequence

import numpy as np

from memgas.embed.base import l2_normalise

_TOKEN = re.compile(r"\w+|[^\w\s]")


class HashEmbedder:
    """Bag-of-tokens vectors of ``dim`` floats; ``id`` names the width, so stores of two widths differ."""

    max_tokens = 64

    def __init__(self, dim: int = 64) -> None:
        self.dim = dim
        self.id = f"test:hash-{dim}"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        out[:, 0] = 0.5
        for row, text in enumerate(texts):
            for token in _TOKEN.findall(text.lower()):
                h = zlib.crc32(token.encode("utf-8"))
                out[row, 1 + h % (self.dim - 1)] += 1.0 if h & 1 << 20 else -1.0
        return l2_normalise(out)

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return [len(_TOKEN.findall(t)) for t in texts]

    def split_to_window(self, text: str, max_tokens: int | None = None) -> list[str]:
        n = max_tokens or self.max_tokens
        starts = [m.start() for m in _TOKEN.finditer(text)][n::n]
        cuts = [0, *starts, len(text)]
        return [text[a:b] for a, b in zip(cuts, cuts[1:])]
