"""Lexical evidence: BM25 over short texts (turns), with the bm25s library.

Dense retrieval with a small embedder misses names and specifics ("Biscuit", "SUMIFS", "$18,500")
that a user later asks about word for word; BM25 catches them. Texts are lower-cased, English stop
words are removed and words are Snowball-stemmed.
"""

from __future__ import annotations

import re
from typing import Sequence

import bm25s
import numpy as np
import Stemmer
from bm25s.stopwords import STOPWORDS_EN

__all__ = ["tokenize", "LexicalIndex"]

_STEMMER = Stemmer.Stemmer("english")
_WORDS = re.compile(r"(?u)\b\w\w+\b").findall  # bm25s's (and scikit-learn's) token pattern
_STOP = frozenset(STOPWORDS_EN)


def tokenize(texts: Sequence[str]) -> list[list[str]]:
    """Tokens of ``texts`` for BM25: lower-cased words, English stop words removed, Snowball-stemmed.

    The same tokens as ``bm25s.tokenize(texts, stopwords="en", stemmer=...)`` (a test compares them),
    without its per-call set-up, which cost ~2 ms of every search for a one-line query.
    """
    return [_STEMMER.stemWords([w for w in _WORDS(text.lower()) if w not in _STOP]) for text in texts]


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
