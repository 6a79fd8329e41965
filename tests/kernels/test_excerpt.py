"""The part of a long message that matters for a query (memgas.kernels.excerpt)."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from memgas.kernels.excerpt import around, best_sentences, best_window, excerpt, query_terms, sentence_spans

FILLER = "The weather was mild and we talked about nothing much at all. " * 40


def test_sentences_split_at_ends_and_lines_and_keep_positions() -> None:
    text = "First one. Second? Third!\n- a list item\n\n  Last"
    spans = sentence_spans(text)
    assert [text[a:b] for a, b in spans] == ["First one.", "Second?", "Third!", "- a list item", "Last"]
    assert sentence_spans("   \n ") == []


def test_the_window_holds_the_sentences_with_the_query_words_deep_in_a_long_text() -> None:
    text = FILLER + "My locker code at the gym is 4512, by the sauna. " + FILLER
    start, end, hits = best_window(text, query_terms("What is my gym locker code?"), 120)
    assert "locker code at the gym is 4512" in text[start:end] and end - start <= 120
    assert hits == 4  # my, gym, locker, code ("what" is not in it)
    shown, n = excerpt(text, query_terms("What is my gym locker code?"), 120)
    assert shown.startswith("… ") and shown.endswith(" …") and "4512" in shown and n == 4


def test_more_distinct_query_words_win_over_an_earlier_window() -> None:
    text = "Locker rooms are loud. " + FILLER + "The locker code is 4512. " + FILLER
    start, end, hits = best_window(text, query_terms("locker code"), 60)
    assert "The locker code is 4512." in text[start:end] and hits == 2


def test_a_text_that_fits_is_whole_and_one_without_query_words_starts_at_its_head() -> None:
    assert excerpt("short text", query_terms("locker"), 100) == ("short text", 0)
    start, end, hits = best_window(FILLER, query_terms("locker"), 80)
    assert start == 0 and hits == 0 and end <= 80


def test_a_sentence_longer_than_the_window_is_cut_at_spaces_around_its_first_query_word() -> None:
    text = "word " * 200 + "locker 4512 " + "word " * 200
    start, end, _ = best_window(text, query_terms("locker"), 60)
    assert "locker 4512" in text[start:end] and end - start <= 60
    assert text[start - 1] == " " and text[end] == " "  # no word cut in half


def test_around_grows_a_sentence_by_its_neighbours_within_the_limit() -> None:
    text = "Hello there. Always answer in French. Thanks. " + FILLER
    start = text.index("Always")
    shown, a, b = around(text, start, start + len("Always answer in French."), 60)
    assert shown == "Hello there. Always answer in French. Thanks. …" and b - a <= 60
    long = "x" * 30 + " " + "Always use metric units " * 20
    assert len(around(long, 31, len(long), 50)[0]) <= 50 + 4


def _reference_sentences(spans: list[tuple[int, int]], have: list[set[str]], max_chars: int) -> tuple[int, int, int]:
    """The run search as first written: every start sentence grown as far as it fits, its terms gathered anew (the
    kernel's two pointers must choose the same run)."""
    best = (-1, 0, 0)
    for i in range(len(spans)):
        seen: set[str] = set()
        j = i
        while j < len(spans) and spans[j][1] - spans[i][0] <= max_chars:
            seen |= have[j]
            j += 1
        if j == i:
            j, seen = i + 1, have[i]
        if len(seen) > best[0]:
            best = (len(seen), i, j)
    return best


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 120), st.sets(st.sampled_from("abcdef"), max_size=4)), min_size=1,
                max_size=30), st.integers(1, 300))
def test_the_two_pointer_run_search_chooses_what_growing_every_start_chooses(
        sentences: list[tuple[int, set[str]]], max_chars: int) -> None:
    spans, at = [], 0
    for length, _ in sentences:
        spans.append((at, at + length))
        at += length + 1
    have = [terms for _, terms in sentences]
    assert best_sentences(spans, have, max_chars) == _reference_sentences(spans, have, max_chars)


def _reference_spans(text: str) -> list[tuple[int, int]]:
    """The sentences as cut before one regular expression matched them: at each end (an end mark and white space,
    or line breaks), each piece stripped on the left, the last on the right too, blank ones left out."""
    import re

    spans, start = [], 0
    for m in [*re.finditer(r"(?<=[.!?])\s+|\n+", text), None]:
        end = len(text.rstrip()) if m is None else m.start()
        piece = text[start:end]
        if piece.strip():
            spans.append((start + len(piece) - len(piece.lstrip()), end))
        if m is not None:
            start = m.end()
    return spans


#: Pieces of text where the sentence matcher and the word finder could go wrong: end marks in runs, before and
#: after white space of several kinds (a non-breaking space, a vertical tab, a line separator, a carriage return);
#: words that share a stem, a stop word, word characters beside words (``_``, digits), and characters whose
#: lower case is longer (``İ``) or depends on what follows (final sigma), or that hold CJK text.
PIECES = ["a", "bc", " ", "  ", ".", "!", "?", "...", "\n", "\r\n", "\t", "\u00a0", "\x0b", "\u2028", "x.", "run",
          "running", "Runs", "the", "locker_code", "4512", "ΟΔΟΣ", "Σ", "İ", "Straße", "東京", "寿司"]


@settings(max_examples=600, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=30))
def test_sentences_are_the_pieces_between_the_ends(pieces: list[str]) -> None:
    text = "".join(pieces)
    assert sentence_spans(text) == _reference_spans(text)


@settings(max_examples=600, deadline=None)
@given(st.lists(st.sampled_from(PIECES), min_size=1, max_size=40), st.lists(st.sampled_from(PIECES), max_size=4))
@example(["run", "_", " ", "run", "4512", " ", "ran", ". ", "run"], ["run"])  # "run_" and "run4512" are words
def test_the_terms_each_sentence_holds_are_its_tokens_found_where_the_words_stand(pieces: list[str],
                                                                                query: list[str]) -> None:
    from memgas.kernels.excerpt import _held, _split
    from memgas.kernels.lexical import tokenize

    text, terms = "".join(pieces), query_terms(" ".join(query) + " run locker_code")
    read = _split(text)
    expected = [set(tokens) & terms for tokens in tokenize([text[a:b] for a, b in read.spans])]
    assert _held(text, read, terms) == expected
    assert _held(text, read, terms) == expected  # the words' places, remembered, read back


def test_a_text_whose_words_cannot_be_found_in_place_is_read_by_its_sentences() -> None:
    from memgas.kernels.excerpt import _held, _split

    terms = query_terms("İstanbul sushi 東京")
    moved = "İstanbul is lovely. We went to İstanbul!"  # "İ" lower-cases to two characters
    city = set(query_terms("İstanbul"))
    assert _split(moved).forms is None and _held(moved, _split(moved), terms) == [city, city]
    cjk = "I ate sushi. 東京で寿司"
    assert _split(cjk).forms is None and _held(cjk, _split(cjk), terms) == [{"sushi"}, {"東京"}]
    plain = "I ate sushi. Then Tokyo."
    assert _split(plain).forms == {"ate": "ate", "sushi": "sushi", "tokyo": "tokyo"}
