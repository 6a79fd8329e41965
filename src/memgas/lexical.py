"""Lexical evidence: BM25 over short texts (turns), in an index that grows document by document.

Dense retrieval with a small embedder misses names and specifics ("Biscuit", "SUMIFS", "$18,500")
that a user later asks about word for word; BM25 catches them. Texts are lower-cased, English stop
words are removed and words are Snowball-stemmed (bm25s's tokenizer, so tokens are bm25s's own).

The index keeps raw statistics (postings of term frequencies per term, document lengths), not
precomputed scores, so that adding a document changes nothing already stored: document frequencies,
the collection size and the mean length are read off at query time. Scores equal ``bm25s.BM25``'s
defaults (``method="lucene"``, k1 = 1.5, b = 0.75), checked in ``tests/test_lexical.py``.
"""

from __future__ import annotations

import threading
from functools import cache
from typing import Any, Sequence

import numpy as np

__all__ = ["tokenize", "LexicalIndex"]


@cache
def _tokenizer() -> tuple[Any, Any]:
    """bm25s and its English stemmer, imported on first use (a process that never searches skips them)."""
    import bm25s
    import Stemmer

    return bm25s, Stemmer.Stemmer("english")


def tokenize(texts: Sequence[str]) -> list[list[str]]:
    """Tokens of ``texts`` for BM25: lower-cased words, English stop words removed, Snowball-stemmed."""
    bm25s, stemmer = _tokenizer()
    return bm25s.tokenize(list(texts), stopwords="en", stemmer=stemmer, return_ids=False, show_progress=False)


class _Chunks:
    """An append-only array kept as a list of pieces, joined on first read (and kept joined)."""

    __slots__ = ("pieces",)

    def __init__(self) -> None:
        self.pieces: list[np.ndarray] = []

    def joined(self) -> np.ndarray:
        """All pieces as one array (the caller holds the index's lock)."""
        if len(self.pieces) > 1:
            self.pieces = [np.concatenate(self.pieces)]
        return self.pieces[0]


class LexicalIndex:
    """An Okapi BM25 index (bm25s's Lucene variant) over a list of documents that only grows.

    For a query with tokens q₁ … q_m (repeats count again, as in bm25s) and a document d of length
    |d| tokens, among N documents of mean length avgdl::

        score(d) = Σ_i idf(q_i) · tf(q_i, d) / (tf(q_i, d) + k1 · (1 − b + b · |d| / avgdl))
        idf(t)   = ln(1 + (N − df(t) + 0.5) / (df(t) + 0.5))

    (bm25s leaves out Lucene's constant factor k1 + 1, which changes no ranking.) ``add`` appends
    documents without touching earlier ones; :meth:`scores` with ``n`` scores as the index of the
    first ``n`` documents, so a reader holding an older snapshot is unaffected by later adds.
    Thread-safe.

    Args:
        texts: the first documents (none: an empty index).
        k1, b: the BM25 parameters (bm25s's defaults).

    References:
        S. Robertson, H. Zaragoza, "The probabilistic relevance framework: BM25 and beyond", 2009.
        C. Kamphuis et al., "Which BM25 do you mean? A large-scale reproducibility study of scoring
        variants", ECIR 2020 (the Lucene variant). X. H. Lù, "BM25S", 2024.
    """

    def __init__(self, texts: Sequence[str] = (), *, k1: float = 1.5, b: float = 0.75) -> None:
        self.k1 = k1
        self.b = b
        self._vocab: dict[str, int] = {}
        self._docs: list[_Chunks] = []  # per term id: ascending document numbers
        self._tfs: list[_Chunks] = []  # per term id: the term's frequency in each of those documents
        self._lengths = _Chunks()
        self._n = 0
        self._lock = threading.Lock()
        if len(texts):
            self.add(texts)

    def __len__(self) -> int:
        return self._n

    def add(self, texts: Sequence[str]) -> None:
        """Append documents (tokenized here); their numbers continue from ``len(self)``."""
        tokens = tokenize(texts)
        if not tokens:
            return
        lengths = np.fromiter(map(len, tokens), np.int64, len(tokens))
        with self._lock:
            vocab = self._vocab
            terms = np.fromiter((vocab.setdefault(t, len(vocab)) for doc in tokens for t in doc), np.int64,
                                int(lengths.sum()))
            while len(self._docs) < len(vocab):
                self._docs.append(_Chunks())
                self._tfs.append(_Chunks())
            # One sort gives every (term, document) pair with its count, grouped by term, documents ascending.
            width = self._n + len(tokens)
            pairs, counts = np.unique(terms * width + np.repeat(np.arange(self._n, width), lengths),
                                      return_counts=True)
            term_of, doc_of = np.divmod(pairs, width)
            tf = counts.astype(np.float64)
            bounds = np.flatnonzero(np.diff(term_of)) + 1
            for start, end in zip(np.r_[0, bounds], np.r_[bounds, pairs.size]):
                if end > start:
                    t = int(term_of[start])
                    self._docs[t].pieces.append(doc_of[start:end])
                    self._tfs[t].pieces.append(tf[start:end])
            self._lengths.pieces.append(lengths.astype(np.float64))
            self._n = width

    def coverage(self, query: str, n: int | None = None) -> np.ndarray:
        """Share of the query's distinct tokens that occur in each of the first ``n`` documents, in [0, 1]:
        a lexical match of one document alone, whatever the rest of the index holds (0 for a query
        with no tokens)."""
        n = self._n if n is None else n
        out = np.zeros(n, dtype=np.float64)
        tokens = set(tokenize([query])[0]) if n else set()
        with self._lock:
            present = [self._docs[t].joined() for t in (self._vocab.get(tok) for tok in tokens) if t is not None]
        for docs in present:
            out[docs[: int(np.searchsorted(docs, n))]] += 1.0
        return out / len(tokens) if tokens else out

    def scores(self, query: str, n: int | None = None) -> np.ndarray:
        """BM25 score of each of the first ``n`` documents (default: all) for ``query``, as float64.

        All zero when no query token occurs in those documents.
        """
        n = self._n if n is None else n
        out = np.zeros(n, dtype=np.float64)
        tokens = tokenize([query])[0] if n else []
        with self._lock:
            postings = [(self._docs[t].joined(), self._tfs[t].joined())
                        for t in (self._vocab.get(tok) for tok in tokens) if t is not None]
            lengths = self._lengths.joined()[:n] if postings else None
        if lengths is None or not lengths.sum():
            return out
        norm = self.k1 * (1.0 - self.b + self.b * lengths / lengths.mean())
        for docs, tfs in postings:
            df = int(np.searchsorted(docs, n))  # documents numbered >= n were added after this snapshot
            if df:
                d, tf = docs[:df], tfs[:df]
                out[d] += np.log(1.0 + (n - df + 0.5) / (df + 0.5)) * tf / (tf + norm[d])
        return out
