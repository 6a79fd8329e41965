"""Lexical evidence: BM25 over short texts (turns), with the bm25s library.

Dense retrieval with a small embedder misses names and specifics ("Biscuit", "SUMIFS", "$18,500")
that a user later asks about word for word; BM25 catches them. Texts are lower-cased, English stop
words are removed and words are Snowball-stemmed.
"""

from __future__ import annotations

from typing import Sequence

import bm25s
import numpy as np
import Stemmer

__all__ = ["tokenize", "LexicalIndex"]

_STEMMER = Stemmer.Stemmer("english")


def tokenize(texts: Sequence[str]) -> list[list[str]]:
    """Tokens of ``texts`` for BM25: lower-cased words, English stop words removed, Snowball-stemmed."""
    return bm25s.tokenize(list(texts), stopwords="en", stemmer=_STEMMER, return_ids=False, show_progress=False)


class LexicalIndex:
    """A BM25 index (Okapi, k1 = 1.5, b = 0.75) over a fixed list of documents.

    Args:
        texts: the documents; an empty list gives an index that scores nothing.
    """

    def __init__(self, texts: Sequence[str]) -> None:
        self.n = len(texts)
        self._bm25: bm25s.BM25 | None = None
        if self.n:
            self._bm25 = bm25s.BM25(k1=1.5, b=0.75)
            self._bm25.index(tokenize(texts), show_progress=False)

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every document for ``query`` (all zero when no query term is indexed)."""
        tokens = tokenize([query])[0] if self._bm25 is not None else []
        if not tokens:
            return np.zeros(self.n, dtype=np.float64)
        return np.asarray(self._bm25.get_scores(tokens), dtype=np.float64)  # type: ignore[union-attr]
