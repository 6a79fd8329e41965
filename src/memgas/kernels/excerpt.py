"""The part of a long message that matters for a query: sentence spans, and the best window of them.

A context budget of a thousand tokens holds a few long replies whole, or the relevant parts of many messages.
These functions choose the part: the run of consecutive sentences, at most ``max_chars`` long, that holds the
most distinct query terms (stemmed as BM25 stems them, :func:`memgas.kernels.lexical.tokenize`). Pure functions
of strings; no model.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Collection, Sequence

from memgas.kernels.lexical import token_sets, tokenize

__all__ = ["sentence_spans", "query_terms", "best_window", "best_sentences", "excerpt", "around"]

#: A sentence ends at ., ! or ? followed by white space, or at a line break (code and lists are line-shaped).
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of each sentence or line of ``text``, blank ones left out, in order.

    >>> t = "I moved. Now I live in Sellwood!\\nThe end"
    >>> [t[a:b] for a, b in sentence_spans(t)]
    ['I moved.', 'Now I live in Sellwood!', 'The end']
    """
    spans: list[tuple[int, int]] = []
    start = 0
    for m in [*_SENTENCE_END.finditer(text), None]:
        end = len(text.rstrip()) if m is None else m.start()
        piece = text[start:end]
        if piece.strip():
            spans.append((start + len(piece) - len(piece.lstrip()), end))
        if m is not None:
            start = m.end()
    return spans


def _sentences(text: str) -> tuple[tuple[tuple[int, int], ...], tuple[frozenset[str], ...]]:
    """:func:`sentence_spans` of a long text (the whole text as one where it has none) with each sentence's tokens,
    kept for the 4,096 texts of up to 20,000 characters read most recently: a context cuts the same long messages
    question after question, and one look-up then stands for every sentence's."""
    return _kept_sentences(text) if len(text) <= 20_000 else _split(text)


def _split(text: str) -> tuple[tuple[tuple[int, int], ...], tuple[frozenset[str], ...]]:
    spans = tuple(sentence_spans(text)) or ((0, len(text)),)
    return spans, tuple(token_sets([text[a:b] for a, b in spans]))


_kept_sentences = lru_cache(maxsize=4096)(_split)


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
        return 0, len(text), len(token_sets([text])[0] & set(terms)) if terms else 0
    spans, sets = _sentences(text)
    wanted = set(terms)
    have = [w & wanted for w in sets]
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
