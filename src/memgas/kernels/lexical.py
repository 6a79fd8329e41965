"""Lexical evidence: BM25 over short texts (turns), in an index that grows document by document.

Dense retrieval with a small embedder misses names and specifics ("Biscuit", "SUMIFS", "$18,500")
that a user later asks about word for word; BM25 catches them. Texts are lower-cased, English stop
words are removed and words are Snowball-stemmed: bm25s's tokens exactly (checked in the tests), found
for a whole batch with one regular-expression pass, each distinct word stemmed once.

Chinese and Japanese put no spaces between words, so a whole clause would be one "word" and match
nothing. In a batch that holds CJK characters (Han, kana, Hangul), each run of them becomes its
overlapping character bigrams, or the character itself when the run is one character long (Lucene's
CJK bigram analysis): a two-character word of the query is then a term of every text that holds it.
Texts without CJK characters are tokenized exactly as before.

The index keeps raw statistics (postings of term frequencies per term, document lengths), not
precomputed scores, so that adding a document changes nothing already stored: document frequencies,
the collection size and the mean length are read off at query time. Scores equal ``bm25s.BM25``'s
defaults (``method="lucene"``, k1 = 1.5, b = 0.75), checked in ``tests/test_lexical.py``.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict, defaultdict
from functools import cache
from itertools import count
from typing import Any, Collection, Container, Sequence

import numpy as np

__all__ = ["tokenize", "terms_held", "word_forms", "LexicalIndex"]


#: Words as bm25s finds them (``(?u)\b\w\w+\b``): runs of two or more word characters. Without the
#: ``\b`` anchors findall returns the same runs (a run is always matched whole from its first character)
#: about a fifth faster.
_WORDS = re.compile(r"\w\w+")
#: CJK characters: Han (with extension A and compatibility ideographs), hiragana, katakana, Hangul.
_CJK_CLASS = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_CJK_RUN = re.compile(f"[{_CJK_CLASS}]+")
#: Words in a batch whose CJK runs were cut into bigrams: as :data:`_WORDS`, plus lone CJK characters.
_WORDS_CJK = re.compile(f"\\w\\w+|[{_CJK_CLASS}]")
#: Put between lower-cased texts so that one findall covers a whole batch: no word runs across the spaces,
#: and no lower-cased text holds the upper-case word, so each match of it marks a text boundary.
_MARK = "DOC"
_SEPARATOR = f" {_MARK} "


@cache
def _analyser() -> tuple[frozenset[str], Any]:
    """bm25s's English stop words and the English Snowball stemmer, imported on first use (a process
    that never searches skips them). The stemmer keeps no cache: each batch stems its distinct words
    once, and PyStemmer's cache (10,000 words by default) made that three times slower."""
    import Stemmer
    from bm25s.stopwords import STOPWORDS_EN

    return frozenset(STOPWORDS_EN), Stemmer.Stemmer("english", 0)


def _bigrams(run: re.Match[str]) -> str:
    """A CJK run as its character bigrams (the character alone for a run of one), spaced apart."""
    text = run.group()
    if len(text) == 1:
        return f" {text} "
    return " " + " ".join(text[i:i + 2] for i in range(len(text) - 1)) + " "


def _words(joined: str) -> list[str]:
    """The words of the lower-cased, joined batch (see the module notes for CJK text)."""
    if joined.isascii() or _CJK_RUN.search(joined) is None:  # isascii: no second pass over most texts
        return _WORDS.findall(joined)
    return _WORDS_CJK.findall(_CJK_RUN.sub(_bigrams, joined))


def _analyse(texts: Sequence[str]) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Tokens of ``texts`` exactly as ``bm25s.tokenize(texts, stopwords="en", stemmer=Stemmer("english"))``
    gives them, as numbers: the batch's distinct stems, each token's index into them (all texts' tokens
    in order) and each text's token count (int64).

    Only the regular expression and one dictionary look-up (both in C) run per word of the text; stop
    words and stems are worked out once per distinct word (as bm25s does), and the rest is numpy.
    """
    stop, stemmer = _analyser()
    distinct: defaultdict[str, int] = defaultdict(count().__next__)  # a new word gets the next number
    words = _words(_SEPARATOR.join([t.lower() for t in texts]))
    index = np.fromiter(map(distinct.__getitem__, words), np.int64, len(words))
    kept = [w for w in distinct if w not in stop and w != _MARK]
    stems = stemmer.stemWords(kept)
    numbers: defaultdict[str, int] = defaultdict(count().__next__)
    stem_of = np.full(len(distinct), -1, np.int64)  # -1: a stop word or the separator
    stem_of[np.fromiter(map(distinct.__getitem__, kept), np.int64, len(kept))] = np.fromiter(
        map(numbers.__getitem__, stems), np.int64, len(stems))
    tokens = stem_of[index]
    keep = tokens >= 0
    text_of = np.cumsum(index == distinct.get(_MARK, -1))  # the separators before each word
    return list(numbers), tokens[keep], np.bincount(text_of[keep], minlength=len(texts))


def _token_keys(texts: Sequence[str]) -> list[dict[str, None]]:
    """Each text's distinct tokens (:func:`tokenize`'s) as the keys of a dict, made without the tokens' order: each
    text's distinct words found by the regular expression, the batch's distinct words stemmed once (a third faster
    than :func:`tokenize` on long messages, which a context reads by the hundred)."""
    stop, stemmer = _analyser()
    words = [set(_words(t.lower())) - stop for t in texts]
    distinct = list(set().union(*words))
    stem = dict(zip(distinct, stemmer.stemWords(distinct)))
    return [dict.fromkeys(map(stem.__getitem__, w)) for w in words]


def word_forms(lowered: str) -> dict[str, str] | None:
    """The words of a lower-cased text that :func:`tokenize` keeps, by their stem (stop words left out; the words of
    one stem spaced apart, kept as one string: a dict of strings is no work for Python's garbage collector, and a
    long message's forms are kept for every long message a context cuts); ``None`` for a text that holds CJK
    characters (its tokens are character bigrams, not words).

    >>> forms = word_forms("running runs, and the runner ran")
    >>> sorted(forms), sorted(forms["run"].split(" "))
    (['ran', 'run', 'runner'], ['running', 'runs'])
    """
    if not lowered.isascii() and _CJK_RUN.search(lowered) is not None:
        return None
    stop, stemmer = _analyser()
    words = list(set(_WORDS.findall(lowered)) - stop)
    forms: dict[str, str] = {}
    for word, stem in zip(words, stemmer.stemWords(words)):
        forms[stem] = f"{forms[stem]} {word}" if stem in forms else word
    return forms


def tokenize(texts: Sequence[str]) -> list[list[str]]:
    """Tokens of ``texts`` for BM25: lower-cased words, English stop words removed, Snowball-stemmed
    (``bm25s.tokenize(texts, stopwords="en", stemmer=Stemmer.Stemmer("english"))``); runs of CJK
    characters as their character bigrams."""
    if not len(texts):
        return []
    stems, tokens, lengths = _analyse(texts)
    words = list(map(stems.__getitem__, tokens.tolist()))
    ends = np.cumsum(lengths).tolist()
    return [words[start:end] for start, end in zip([0, *ends], ends)]


#: A run of word characters from where it starts, and one word character (:func:`_held_by_prefix`).
_RUN = re.compile(r"\w+")
_WORD_CHARACTER = re.compile(r"\w")
#: The words the Snowball English stemmer maps to a stem that does not start as they do (its exception list: "dying"
#: is "die"); every other word starts with its stem less the stem's last letter ("happy", "happiness": "happi").
_IRREGULAR_STEMS = frozenset({"die", "lie", "tie"})


def _held_by_prefix(texts: Sequence[str], terms: Collection[str]) -> list[frozenset[str]]:
    """Which of ``terms`` (stems) each text holds among :func:`tokenize`'s tokens, found without tokenizing the
    texts: every word a stem comes from starts with the stem less its last letter (:data:`_IRREGULAR_STEMS` aside),
    so only the words that start so are stemmed. For long texts a question asks of: the whole of each is not
    worked through in Python (English only: a text or term with CJK characters goes through :func:`_token_keys`)."""
    stop, stemmer = _analyser()
    starts = {t[:1] if t in _IRREGULAR_STEMS else t[:-1] or t for t in terms}
    found: list[set[str]] = []
    for text in texts:
        lowered, words = text.lower(), set()
        for start in starts:
            i = lowered.find(start)
            while i >= 0:
                if i == 0 or _WORD_CHARACTER.match(lowered, i - 1) is None:  # a word starts here
                    words.add(_RUN.match(lowered, i).group())  # type: ignore[union-attr]  # i holds a letter
                i = lowered.find(start, i + 1)
        found.append({w for w in words if len(w) > 1} - stop)
    distinct = list(set().union(*found))
    stem = dict(zip(distinct, stemmer.stemWords(distinct)))
    return [frozenset(map(stem.__getitem__, words)).intersection(terms) for words in found]


def _cjk(text: str) -> bool:
    """Whether ``text`` holds CJK characters (tokenized as character bigrams)."""
    return not text.isascii() and _CJK_RUN.search(text) is not None


class _TermsHeld:
    """Which of some terms (stemmed query words, :func:`tokenize`'s tokens) each text holds; each text's tokens kept
    for the texts read most recently: a context reads the same turns and messages question after question, and
    their words do not change.

    A context reads messages by their sentences, so one 500K-token memory's contexts touch tens of thousands of
    texts: 8,192 of them thrashed (a context at 118 ms p50 on BEAM 500K conversation 1, 42 ms with room for 65,536;
    the process's peak memory the same, 386 MB). ``max_held_chars`` bounds what the held texts weigh in all. A
    text's tokens are held as the keys of a dict, not as a set: a dict of strings is no work for Python's garbage
    collector, whose full passes went through every held set (8.6 ms for 1,876 texts, some 300 ms once 65,536 are
    held), and its keys meet a question's terms as fast.

    A text longer than ``scan_chars`` (a whole message a learned selection weighs, most of them read once) is not
    tokenized the first time it is read: the words that may be the terms' are found where the terms' stems start in
    it (:func:`_held_by_prefix`: the same terms, half the work). Read again (a timeline goes through every turn on
    every call), it is tokenized and held as the others are."""

    def __init__(self, max_texts: int = 65_536, max_chars: int = 20_000, max_held_chars: int = 64_000_000,
                 scan_chars: int = 1_000) -> None:
        self._held: OrderedDict[str, dict[str, None]] = OrderedDict()
        self._max_texts, self._max_chars, self._max_held_chars = max_texts, max_chars, max_held_chars
        self._scan_chars = scan_chars
        #: the hashes of the long texts read once (scanned, not held), the least recently read first
        self._seen: OrderedDict[int, None] = OrderedDict()
        self._chars = 0
        self._lock = threading.Lock()

    def __call__(self, texts: Sequence[str], terms: Collection[str]) -> list[frozenset[str]]:
        """The terms of ``terms`` that each of ``texts`` holds (among its tokens)."""
        with self._lock:
            found = [self._held.get(t) for t in texts]
            for t, f in zip(texts, found):
                if f is not None:
                    self._held.move_to_end(t)
        missing = list(dict.fromkeys(t for t, f in zip(texts, found) if f is None))
        # a long text read for the first time is searched for the terms' words, not tokenized (twice the work)
        scanned = [] if any(_cjk(t) for t in terms) else [t for t in missing if len(t) > self._scan_chars and not _cjk(t)]
        with self._lock:
            scanned = [t for t in scanned if hash(t) not in self._seen]
            self._seen.update(dict.fromkeys(map(hash, scanned)))
            while len(self._seen) > self._max_texts:
                self._seen.popitem(last=False)
        searched = dict(zip(scanned, _held_by_prefix(scanned, terms)))
        short = [t for t in missing if t not in searched]
        made = dict(zip(short, _token_keys(short)))
        with self._lock:
            for t, tokens in made.items():
                if len(t) <= self._max_chars and t not in self._held:
                    self._held[t] = tokens
                    self._chars += len(t)
            while len(self._held) > self._max_texts or self._chars > self._max_held_chars:
                self._chars -= len(self._held.popitem(last=False)[0])
        return [searched[t] if t in searched else frozenset((f if f is not None else made[t]).keys() & terms)
                for t, f in zip(texts, found)]


#: Which of some terms each text holds (:class:`_TermsHeld`), the most recently read texts' tokens kept in memory.
terms_held = _TermsHeld()


def _joined(pieces: list[np.ndarray]) -> np.ndarray:
    """An append-only array kept as a list of pieces, as one array: joined on first read, and kept joined
    (the caller holds the index's lock). Plain lists, not objects, because a batch adds one per new term."""
    if len(pieces) > 1:
        pieces[:] = [np.concatenate(pieces)]
    return pieces[0]


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
        # Per term id, its postings in pieces: ascending document numbers and the term's frequency in each. A
        # term's lists are made when first read or extended, from the packed postings an index loaded with
        # (from_arrays: one array each for all terms, sliced by ``_starts``), so a load makes no per-term object.
        self._docs: dict[int, list[np.ndarray]] = {}
        self._tfs: dict[int, list[np.ndarray]] = {}
        self._packed: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None  # starts, documents, frequencies
        # Per stem that ``add`` was told to skip, the documents that hold it (int32 pieces): never scored, only read
        # by ``holding`` (which documents hold a word at all).
        self._present: dict[str, list[np.ndarray]] = {}
        self._lengths: list[np.ndarray] = []
        self._n = 0
        self._bytes = 0  # what the postings, lengths and vocabulary hold, kept as they grow (memory_bytes)
        self._lock = threading.Lock()
        if len(texts):
            self.add(texts)

    def _pieces(self, t: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Term ``t``'s lists of posting pieces (made on first use; the caller holds the lock)."""
        found = self._docs.get(t)
        if found is None:
            docs: list[np.ndarray] = []
            tfs: list[np.ndarray] = []
            self._docs[t], self._tfs[t] = docs, tfs
            if self._packed is not None and t + 1 < self._packed[0].size:
                starts, all_docs, all_tfs = self._packed
                a, b = int(starts[t]), int(starts[t + 1])
                docs.append(all_docs[a:b])
                tfs.append(all_tfs[a:b])
            return docs, tfs
        return found, self._tfs[t]

    def to_arrays(self, n: int | None = None) -> tuple[list[str], dict[str, np.ndarray], list[str]]:
        """The index of the first ``n`` documents (default: all) as its vocabulary (stems by term id), arrays
        (``starts`` of each term's postings in ``docs``/``tfs``, and each document's ``lengths``; ``present_starts``
        and ``present_docs`` for the skipped stems) and the skipped stems, for :meth:`from_arrays`. Terms that only
        later documents hold stay in the vocabulary, with no postings."""
        with self._lock:
            n = self._n if n is None else n
            pieces = [self._pieces(t) for t in range(len(self._vocab))]
            docs = [_joined(d) if d else np.zeros(0, np.int64) for d, _ in pieces]
            tfs = [_joined(f) if f else np.zeros(0, np.float64) for _, f in pieces]
            present = list(self._present)
            held = [_joined(self._present[stem]) for stem in present]
            if n < self._n:
                ends = [int(np.searchsorted(d, n)) for d in docs]
                docs = [d[:e] for d, e in zip(docs, ends)]
                tfs = [f[:e] for f, e in zip(tfs, ends)]
                held = [d[: int(np.searchsorted(d, n))] for d in held]
            starts = np.concatenate([[0], np.cumsum([d.size for d in docs])]).astype(np.int64)
            lengths = (_joined(self._lengths) if self._lengths else np.zeros(0, np.float64))[:n]
            return list(self._vocab), {
                "starts": starts, "docs": np.concatenate(docs) if docs else np.zeros(0, np.int64),
                "tfs": np.concatenate(tfs) if tfs else np.zeros(0, np.float64), "lengths": lengths,
                "present_starts": np.concatenate([[0], np.cumsum([d.size for d in held])]).astype(np.int64),
                "present_docs": np.concatenate(held) if held else np.zeros(0, np.int32)}, present

    @classmethod
    def from_arrays(cls, vocabulary: Sequence[str], arrays: dict[str, np.ndarray], present: Sequence[str] = (), *,
                    k1: float = 1.5, b: float = 0.75) -> "LexicalIndex":
        """The index that :meth:`to_arrays` gave (its arrays are used as they are, not copied): it scores, holds and
        grows exactly as the original does."""
        index = cls(k1=k1, b=b)
        index._vocab = dict(zip(vocabulary, range(len(vocabulary))))
        docs, tfs = arrays["docs"].astype(np.int64, copy=False), arrays["tfs"].astype(np.float64, copy=False)
        index._packed = (arrays["starts"], docs, tfs)
        lengths = arrays["lengths"].astype(np.float64, copy=False)
        index._lengths = [lengths] if lengths.size else []
        index._n = int(lengths.size)
        held = arrays.get("present_docs", np.zeros(0, np.int32))  # document numbers, of any integer type
        bounds = arrays.get("present_starts", np.zeros(1, np.int64)).tolist()
        index._present = {stem: [held[a:z]] for stem, a, z in zip(present, bounds, bounds[1:])}
        index._bytes = docs.nbytes + tfs.nbytes + 8 * index._n + 72 * len(vocabulary) + held.nbytes + 72 * len(present)
        return index

    def __len__(self) -> int:
        return self._n

    def memory_bytes(self) -> int:
        """About how many bytes the index holds (postings, lengths, vocabulary), kept as documents are added, so
        that a cache can charge it without walking every posting."""
        return self._bytes

    def add(self, texts: Sequence[str], *, skip: Container[str] | None = None) -> None:
        """Append documents (tokenized here); their numbers continue from ``len(self)``.

        With ``skip``, the tokens whose stem it holds get no postings (and no place in the vocabulary), though
        they still count in their document's length: the index then scores every other token exactly as one
        built without ``skip``, and keeps for those only which documents hold them (:meth:`holding`; a quarter of
        what a posting takes), for a second index asked only for what a first one lacks.
        """
        if not len(texts):
            return
        stems, tokens, lengths = _analyse(texts)
        width = self._n + len(texts)
        doc = np.repeat(np.arange(self._n, width), lengths)
        present: list[tuple[str, np.ndarray]] = []
        if skip is not None:
            kept = np.fromiter((s not in skip for s in stems), bool, len(stems))[tokens]
            pairs = np.unique(tokens[~kept] * width + doc[~kept])
            stem_of, held = np.divmod(pairs, width)
            starts = np.flatnonzero(np.diff(stem_of, prepend=-1))
            present = [(stems[int(stem_of[a])], held[a:z].astype(np.int32))
                       for a, z in zip(starts.tolist(), [*starts[1:].tolist(), pairs.size])]
            tokens, doc = tokens[kept], doc[kept]
        with self._lock:
            for stem, held in present:
                if stem not in self._present:
                    self._present[stem] = []
                    self._bytes += 72
                self._present[stem].append(held)
                self._bytes += held.nbytes
            vocab = self._vocab
            before = len(vocab)
            used = np.zeros(len(stems), bool)
            used[tokens] = True  # the stems that keep a token (all of them without skip)
            ids = np.full(len(stems), -1, np.int64)
            ids[used] = np.fromiter((vocab.setdefault(s, len(vocab)) for s, u in zip(stems, used) if u), np.int64,
                                    int(used.sum()))
            terms = ids[tokens]
            new = len(vocab) - before
            # One sort gives every (term, document) pair with its count, grouped by term, documents ascending.
            pairs, counts = np.unique(terms * width + doc, return_counts=True)
            term_of, doc_of = np.divmod(pairs, width)
            tf = counts.astype(np.float64)
            starts = np.flatnonzero(np.diff(term_of, prepend=-1))  # where each term's documents begin
            for t, start, end in zip(term_of[starts].tolist(), starts.tolist(), [*starts[1:].tolist(), pairs.size]):
                docs, tfs = self._pieces(t)
                docs.append(doc_of[start:end])
                tfs.append(tf[start:end])
            self._lengths.append(lengths.astype(np.float64))
            self._n = width
            # the arrays the postings slice (kept alive by them), the lengths, and about 72 bytes a new term
            self._bytes += doc_of.nbytes + tf.nbytes + 8 * len(texts) + 72 * new

    def coverage(self, query: str, n: int | None = None) -> np.ndarray:
        """Share of the query's distinct tokens that occur in each of the first ``n`` documents, in [0, 1]:
        a lexical match of one document alone, whatever the rest of the index holds (0 for a query
        with no tokens)."""
        n = self._n if n is None else n
        out = np.zeros(n, dtype=np.float64)
        tokens = set(tokenize([query])[0]) if n else set()
        with self._lock:
            present = [_joined(self._pieces(t)[0]) for t in (self._vocab.get(tok) for tok in tokens) if t is not None]
        for docs in present:
            out[docs[: int(np.searchsorted(docs, n))]] += 1.0
        return out / len(tokens) if tokens else out

    def holding(self, terms: Collection[str], n: int | None = None) -> dict[str, np.ndarray]:
        """For each of ``terms`` (stems) any of the first ``n`` documents holds, those documents (ascending), whether
        the index scores the term or ``add`` skipped it: which documents hold a word at all.

        >>> index = LexicalIndex(["my dog barks", "a cat"])
        >>> index.add(["the dog sleeps"], skip={"dog"})
        >>> {t: d.tolist() for t, d in index.holding({"dog", "cat", "fish"}).items()}
        {'cat': [1], 'dog': [0, 2]}
        """
        n = self._n if n is None else n
        out: dict[str, np.ndarray] = {}
        with self._lock:
            for term in sorted(terms):
                t = self._vocab.get(term)
                scored = self._pieces(t)[0] if t is not None else []
                skipped = self._present.get(term, [])
                found = [_joined(pieces) for pieces in (scored, skipped) if pieces]
                if found:
                    docs = np.union1d(*found) if len(found) > 1 else found[0]
                    docs = docs[: int(np.searchsorted(docs, n))]
                    if docs.size:
                        out[term] = docs
        return out

    def terms(self) -> Container[str]:
        """The stems the index has postings for (a live view: it grows with the index)."""
        return self._vocab.keys()

    def absent(self, query: str, n: int | None = None, *, within: np.ndarray | None = None) -> set[str]:
        """The tokens of ``query`` that none of the first ``n`` documents (those ``within`` marks) holds."""
        n = self._n if n is None else n
        tokens = set(tokenize([query])[0])
        with self._lock:
            held = {tok: _joined(self._pieces(t)[0]) for tok, t in ((tok, self._vocab.get(tok)) for tok in tokens)
                    if t is not None}
        out = set()
        for tok in tokens:
            docs = held.get(tok)
            docs = None if docs is None else docs[: int(np.searchsorted(docs, n))]
            if docs is None or not docs.size or (within is not None and not within[docs].any()):
                out.add(tok)
        return out

    def scores(self, query: str, n: int | None = None, *, within: np.ndarray | None = None,
               only: set[str] | None = None) -> np.ndarray:
        """BM25 score of each of the first ``n`` documents (default: all) for ``query``, as float64.

        With ``within`` (a boolean per document of those ``n``), only the documents it marks are scored, the
        others 0, and the statistics (N, document frequencies, mean length) are theirs alone: the scores of an
        index that held only them. With ``only`` (tokens, e.g. another index's :meth:`absent`), the query's other
        tokens are left out. All zero when no query token occurs in the documents scored.
        """
        n = self._n if n is None else n
        out = np.zeros(n, dtype=np.float64)
        tokens = tokenize([query])[0] if n else []
        if only is not None:
            tokens = [tok for tok in tokens if tok in only]
        with self._lock:
            postings = [(_joined(docs), _joined(tfs)) for docs, tfs in
                        (self._pieces(t) for t in (self._vocab.get(tok) for tok in tokens) if t is not None)]
            lengths = _joined(self._lengths)[:n] if postings else None
        if lengths is None:
            return out
        counted = lengths if within is None else lengths[within]
        if not counted.sum():
            return out
        size = counted.size
        norm = self.k1 * (1.0 - self.b + self.b * lengths / counted.mean())
        for docs, tfs in postings:
            end = int(np.searchsorted(docs, n))  # documents numbered >= n were added after this snapshot
            d, tf = docs[:end], tfs[:end]
            if within is not None:
                keep = within[d]
                d, tf = d[keep], tf[keep]
            df = d.size
            if df:
                out[d] += np.log(1.0 + (size - df + 0.5) / (df + 0.5)) * tf / (tf + norm[d])
        return out
