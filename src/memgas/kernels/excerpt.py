"""The part of a long message that matters for a query: sentence spans, and the best window of them.

A context budget of a thousand tokens holds a few long replies whole, or the relevant parts of many messages.
These functions choose the part: the run of consecutive sentences, at most ``max_chars`` long, that holds the
most distinct query terms (stemmed as BM25 stems them, :func:`memgas.kernels.lexical.tokenize`). Pure functions
of strings; no model.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from functools import lru_cache
from typing import Collection, NamedTuple, Sequence

from memgas.kernels.lexical import terms_held, tokenize, word_forms

__all__ = ["sentence_spans", "query_terms", "best_window", "best_sentences", "excerpt", "around"]

#: A sentence ends at ., ! or ? followed by white space, or at a line break (code and lists are line-shaped). Matched
#: whole, one piece a match from its first non-space character: a character other than white space or an end mark
#: (or an end mark not followed by white space), then anything but a line break up to an end mark followed by white
#: space, which it takes; or an end mark alone (one followed by white space). Three times faster than cutting at
#: each end and stripping the pieces, with the same spans (a piece keeps the white space before a line break, as
#: the cut did).
_PIECE = re.compile(r"(?:[^\s.!?]|[.!?](?!\s))[^\n.!?]*(?:[.!?](?!\s)[^\n.!?]*)*[.!?]?|[.!?]")


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of each sentence or line of ``text``, blank ones left out, in order.

    >>> t = "I moved. Now I live in Sellwood!\\nThe end"
    >>> [t[a:b] for a, b in sentence_spans(t)]
    ['I moved.', 'Now I live in Sellwood!', 'The end']
    """
    spans = [m.span() for m in _PIECE.finditer(text)]
    if spans and spans[-1][1] == len(text):  # the text's last piece ends before its trailing white space
        spans[-1] = (spans[-1][0], len(text.rstrip()))
    return spans


class _Read(NamedTuple):
    """A long text as :func:`best_window` reads it: its sentences' spans and its words by stem
    (:func:`memgas.kernels.lexical.word_forms`), so that the sentences that hold a query's terms are found where
    those words are (``forms`` ``None`` where lower-casing moves the text's characters or it holds CJK text, whose
    terms are character bigrams, not words: each sentence's tokens are then read)."""

    spans: tuple[tuple[int, int], ...]
    forms: dict[str, str] | None
    #: the sentences each word looked for stands in, found once: a word is looked for again question after question
    where: dict[str, tuple[int, ...]]


def _sentences(text: str) -> _Read:
    """:func:`sentence_spans` of a long text (the whole text as one where it has none) and its words, kept for the
    4,096 texts of up to 20,000 characters read most recently: a context cuts the same long messages question after
    question."""
    return _kept_sentences(text) if len(text) <= 20_000 else _split(text)


def _split(text: str) -> _Read:
    """:func:`_sentences` of ``text``, read anew."""
    spans = tuple(sentence_spans(text)) or ((0, len(text)),)
    lowered = text.lower()
    return _Read(spans, word_forms(lowered) if len(lowered) == len(text) else None, {})


_kept_sentences = lru_cache(maxsize=4096)(_split)


def _word_character(c: str) -> bool:
    """Whether ``c`` is a word character (the regular expressions' ``\\w``: letters, digits, ``_``)."""
    return c.isalnum() or c == "_"


def _sentences_of(lowered: str, spans: Sequence[tuple[int, int]], word: str) -> tuple[int, ...]:
    """The sentences (of ``spans``) of a text (``lowered``: lower-cased) in which ``word`` (one of its words) stands
    whole, each once, in order."""
    found: list[int] = []
    at = lowered.find(word)
    while at >= 0:
        end = at + len(word)
        if (at == 0 or not _word_character(lowered[at - 1])) and (
                end == len(lowered) or not _word_character(lowered[end])):
            found.append(bisect_right(spans, (at, len(lowered))) - 1)
        at = lowered.find(word, end)
    return tuple(dict.fromkeys(found))


def _held(text: str, read: _Read, wanted: Collection[str]) -> list[set[str]]:
    """The terms of ``wanted`` each sentence of ``text`` holds (its tokens, :func:`memgas.kernels.lexical.tokenize`,
    that are wanted): for a text read by its words, each word of a wanted stem is found where it stands whole in the
    lower-cased text (a word is a run of word characters, so it never spans two sentences), not every sentence
    tokenized."""
    if read.forms is None:
        return [set(held) for held in terms_held([text[a:b] for a, b in read.spans], wanted)]
    have: list[set[str]] = [set() for _ in read.spans]
    lowered = ""  # lower-cased when a word is first looked for
    for stem in wanted:
        for word in read.forms[stem].split(" ") if stem in read.forms else ():
            if word not in read.where:
                lowered = lowered or text.lower()
                read.where[word] = _sentences_of(lowered, read.spans, word)
            for i in read.where[word]:
                have[i].add(stem)
    return have


def query_terms(query: str) -> frozenset[str]:
    """The query's stemmed words, less BM25's English stop words.

    >>> sorted(query_terms("Where do I live these days?"))
    ['day', 'do', 'live', 'where']
    """
    return frozenset(tokenize([query])[0])


def _cut_at_words(text: str, start: int, end: int, max_chars: int, around: int) -> tuple[int, int]:
    """A window of at most ``max_chars`` inside ``text[start:end]`` around position ``around``, cut at spaces."""
    lo = max(start, min(around - max_chars // 3, end - max_chars))
    hi = min(end, lo + max_chars)
    if lo > start:
        space = text.find(" ", lo, hi)
        lo = space + 1 if 0 <= space < lo + 40 else lo
    if hi < end:
        space = text.rfind(" ", lo, hi)
        hi = space if space > hi - 40 else hi
    return lo, hi


def best_window(text: str, terms: Collection[str], max_chars: int) -> tuple[int, int, int]:
    """``(start, end, hits)``: the run of consecutive sentences of ``text`` at most ``max_chars`` long holding the
    most distinct ``terms`` (``hits``), the earliest of equals, then grown at word boundaries (the text after it
    first) to use the ``max_chars``; a text that fits is returned whole.

    A sentence longer than ``max_chars`` on its own is cut at spaces around its first query term. With no term
    in the text the window is its beginning (``hits`` 0).

    >>> t = "Intro about nothing. More filler here. My locker code is 4512. Bye now."
    >>> a, b, n = best_window(t, query_terms("what is my locker code"), 30)
    >>> t[a:b], n
    ('My locker code is 4512. Bye', 3)
    """
    if len(text) <= max_chars:
        return 0, len(text), len(terms_held([text], terms)[0]) if terms else 0
    read = _sentences(text)
    spans = read.spans
    have = _held(text, read, terms)
    hits, i, j = best_sentences(spans, have, max_chars)
    start, end = spans[i][0], spans[j - 1][1]
    if end - start > max_chars:
        lowered = text[start:end].lower()
        first = min((p for p in (lowered.find(t[:4]) for t in have[i]) if p >= 0), default=0) + start
        return (*_cut_at_words(text, start, end, max_chars, first), hits)
    return (*_filled(text, start, end, max_chars), hits)


def best_sentences(spans: Sequence[tuple[int, int]], have: Sequence[Collection[str]],
                   max_chars: int) -> tuple[int, int, int]:
    """``(hits, first, end)``: of the runs of consecutive sentences (``spans``, each holding the terms ``have``)
    at most ``max_chars`` long from the first's start to the last's end, the one with the most distinct terms, the
    earliest of equals (a sentence longer than ``max_chars`` is a run of its own); ``end`` is exclusive.

    Each start's run is grown as far as it fits; its end never moves back as the start moves on, so two pointers
    find them all, ``held`` counting per term the run's sentences that hold it; the first run that holds every term
    any sentence holds ends the search.

    >>> best_sentences([(0, 10), (11, 20), (21, 30)], [set(), {"a"}, {"b"}], 19)
    (2, 1, 3)
    """
    best = (-1, 0, 0)
    most = len(set().union(*have))  # no run holds more: the search may stop once one does
    held: dict[str, int] = {}
    j = 0
    for i in range(len(spans)):
        j = max(j, i)
        while j < len(spans) and spans[j][1] - spans[i][0] <= max_chars:
            for t in have[j]:
                held[t] = held.get(t, 0) + 1
            j += 1
        hits, end = (len(have[i]), i + 1) if j == i else (len(held), j)  # j == i: one sentence over the window
        if hits > best[0]:
            best = (hits, i, end)
            if hits == most:
                break
        if j > i:
            for t in have[i]:  # the run's first sentence leaves it
                if held[t] == 1:
                    del held[t]
                else:
                    held[t] -= 1
    return best


def _filled(text: str, start: int, end: int, max_chars: int) -> tuple[int, int]:
    """``text[start:end]`` grown at word boundaries, the text after it first, to use the ``max_chars`` it may have
    (a window of whole sentences often stops well short of it)."""
    if end < len(text):
        limit = min(len(text), start + max_chars)
        cut = limit if limit == len(text) else text.rfind(" ", end, limit + 1)
        end = max(end, cut)
    if start > 0 and end - start < max_chars:
        cut = text.find(" ", max(0, end - max_chars), start)
        start = min(start, cut + 1) if cut >= 0 else start
    return start, end


def excerpt(text: str, terms: Collection[str], max_chars: int) -> tuple[str, int]:
    """``(shown, hits)``: ``text`` whole when it fits ``max_chars``, else its :func:`best_window` with ``…``
    where something was left out.

    >>> excerpt("short", set(), 10)
    ('short', 0)
    >>> excerpt("One. Two three. Locker 4512 here. Four.", query_terms("locker"), 18)
    ('… Locker 4512 here. …', 1)
    """
    start, end, hits = best_window(text, terms, max_chars)
    shown = text[start:end].strip()
    return ("… " if start > 0 else "") + shown + (" …" if end < len(text.rstrip()) else ""), hits


def around(text: str, start: int, end: int, max_chars: int) -> tuple[str, int, int]:
    """``text[start:end]`` (one sentence) grown by whole neighbouring sentences, the next one first, while the
    whole stays within ``max_chars``; ``(shown, start, end)``, ``shown`` with ``…`` where something was left out.
    A sentence over ``max_chars`` is cut at a space.

    >>> t = "Hi there. Always use type hints. Thanks a lot. Bye."
    >>> around(t, 10, 32, 40)[0]
    '… Always use type hints. Thanks a lot. …'
    """
    if end - start > max_chars:
        start, end = _cut_at_words(text, start, end, max_chars, start)
    else:
        spans = sentence_spans(text)
        before = [s for s in spans if s[1] <= start][::-1]
        after = [s for s in spans if s[0] >= end]
        grew = True
        while grew:
            grew = False
            for side in (after, before):
                if side and max(end, side[0][1]) - min(start, side[0][0]) <= max_chars:
                    start, end = min(start, side[0][0]), max(end, side[0][1])
                    side.pop(0)
                    grew = True
    shown = text[start:end].strip()
    return ("… " if text[:start].strip() else "") + shown + (" …" if text[end:].strip() else ""), start, end
