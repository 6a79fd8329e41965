"""BM25 tokens and scores on a small corpus."""

from __future__ import annotations

import numpy as np
import pytest

from memgas.kernels.lexical import LexicalIndex, tokenize

TEXTS = [
    "My SUMIFS formula in Google Sheets keeps returning zero!",
    "I'm vegetarian and I can't stand cilantro; lentil curry is my go-to.",
    "Biscuit (my corgi) is 4 pounds overweight — the vet said 3.5 km walks.",
    "Café crème at 7:30am, naïve résumé, ÆSIR 2023-05-20, e-mail: a_b@c.de",
    "",
    "a I x 1 2",  # single characters and stop words only
    "Running runners ran; studies studying studied.",
]


def test_tokens_by_hand() -> None:
    assert tokenize(["The runners were running"]) == [["runner", "were", "run"]]  # "were" is not a stop word here
    expected = [["my", "sumif", "formula", "keep", "return", "zero"]]
    assert tokenize(["My SUMIFS formula keeps returning zero!"]) == expected
    assert tokenize(["", "a I x 1 2"]) == [[], []]  # single characters and stop words go


#: Texts where a batch tokenizer could go wrong: the batch separator's own word, case-sensitive lower-casing
#: (final sigma, dotted İ, the Kelvin sign), underscores and digits (word characters), upper-case stop words,
#: words that share a stem, non-Latin scripts and text with no words at all.
TRICKY = ["DOC doc \x00DOC\x00 Doc", "ΟΔΥΣΣΕΥΣ ΣΑΣ σοφοσ", "İstanbul KELVIN 5\u212a", "snake_case __x__ a_ 42 4",
          "THE Of AND the-end", "connect connected connecting connection", "", " \n\t ",
          "don't won't it's", "ﬁnance Straße STRASSE", "x"]


def test_tokens_equal_bm25s_in_any_batch() -> None:
    import bm25s
    import Stemmer

    texts = TRICKY + TEXTS
    expected = bm25s.tokenize(texts, stopwords="en", stemmer=Stemmer.Stemmer("english"), return_ids=False,
                              show_progress=False)
    assert tokenize(texts) == expected
    assert [tokenize([t])[0] for t in texts] == expected  # a batch of one: no separator involved
    assert tokenize(texts[::-1]) == expected[::-1] and tokenize([]) == []
    # CJK text (bigrams, where bm25s keeps whole runs) in the batch changes no other text's tokens.
    assert tokenize([*texts, "東京で 寿司 食べた"]) == [*expected, ["東京", "京で", "寿司", "食べ", "べた"]]


def _postings(index: LexicalIndex) -> dict[str, tuple[list[int], list[float]]]:
    """Each term's documents and frequencies in them, keyed by the term (ids depend on arrival order)."""
    return {term: (np.concatenate(index._docs[t]).tolist(), np.concatenate(index._tfs[t]).tolist())
            for term, t in index._vocab.items()}


def test_an_index_grown_in_batches_equals_one_built_at_once() -> None:
    corpus = TRICKY + _corpus()
    whole = LexicalIndex(corpus)
    grown = LexicalIndex()
    grown.add([])
    for start, end in [(0, 1), (1, 2), (2, 7), (7, 9), (9, 11), (11, 12), (12, 60), (60, 61), (61, len(corpus))]:
        grown.add(corpus[start:end])  # (7, 9) and (11, 12): batches without a single token
    assert len(grown) == len(whole) == len(corpus)
    assert _postings(grown) == _postings(whole) and len(_postings(whole)) > 30
    lengths = [float(len(t)) for t in tokenize(corpus)]
    assert np.concatenate(grown._lengths).tolist() == np.concatenate(whole._lengths).tolist() == lengths


def test_index_scores_rare_names_highest() -> None:
    index = LexicalIndex(TEXTS)
    scores = index.scores("What did the vet say about Biscuit?")
    assert scores.shape == (len(TEXTS),) and int(np.argmax(scores)) == 2
    assert not index.scores("the and of").any()  # stop words only: nothing scores
    assert LexicalIndex([]).scores("anything").shape == (0,)


def _corpus() -> list[str]:
    """A fixed corpus with varied document frequencies and lengths (and the hand-written texts above)."""
    rng = np.random.default_rng(11)
    words = ["trail", "hike", "mountain", "curry", "lentil", "vet", "corgi", "formula", "sheet", "zero", "rent",
             "flight", "lisbon", "cello", "wedding", "porto", "kibble", "walk", "dinner", "falls"]
    p = 1.0 / np.arange(1, len(words) + 1)  # Zipf-like: some words in most documents, some in few
    docs = [" ".join(rng.choice(words, size=rng.integers(0, 25), p=p / p.sum())) for _ in range(300)]
    return TEXTS + docs


QUERIES = ["What did the vet say about Biscuit?", "trail hike mountain", "corgi corgi kibble", "lentil curry dinner",
           "porto wedding flight to lisbon", "formula returns zero in the sheet", "unknownword", "cello"]


def test_scores_equal_bm25s_built_at_once_and_in_batches() -> None:
    import bm25s

    corpus = _corpus()
    reference = bm25s.BM25()  # bm25s's defaults: method="lucene", k1=1.5, b=0.75
    reference.index(tokenize(corpus), show_progress=False)
    whole = LexicalIndex(corpus)
    grown = LexicalIndex(corpus[:5])
    for start, end in [(5, 6), (6, 90), (90, 91), (91, 250), (250, len(corpus))]:
        grown.add(corpus[start:end])
    assert len(whole) == len(grown) == len(corpus)
    for q in QUERIES:
        tokens = tokenize([q])[0]
        expected = np.asarray(reference.get_scores(tokens), dtype=np.float64) if tokens else np.zeros(len(corpus))
        np.testing.assert_allclose(whole.scores(q), expected, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(grown.scores(q), whole.scores(q), rtol=1e-12, atol=0)


def test_a_snapshot_scores_as_the_index_of_its_documents() -> None:
    corpus = _corpus()
    index = LexicalIndex(corpus[:100])
    index.add(corpus[100:])
    for q in QUERIES:  # the first 100 documents score as an index of only those (df, N and mean length)
        np.testing.assert_allclose(index.scores(q, 100), LexicalIndex(corpus[:100]).scores(q), rtol=1e-12)


def test_bm25_value_by_hand() -> None:
    # tokens: [appl, banana], [appl, appl, cherri], [banana]; N = 3, avgdl = 2
    index = LexicalIndex(["apple banana", "apple apple cherry", "banana"])
    k1, b = 1.5, 0.75

    def tf_part(tf: float, length: float) -> float:
        return tf / (tf + k1 * (1 - b + b * length / 2.0))

    idf_apple, idf_cherry = np.log(1 + (3 - 2 + 0.5) / (2 + 0.5)), np.log(1 + (3 - 1 + 0.5) / (1 + 0.5))
    np.testing.assert_allclose(index.scores("apple"), [idf_apple * tf_part(1, 2), idf_apple * tf_part(2, 3), 0.0])
    np.testing.assert_allclose(index.scores("cherry apple"),
                               [idf_apple * tf_part(1, 2), idf_apple * tf_part(2, 3) + idf_cherry * tf_part(1, 3), 0])
    assert index.scores("cherry")[1] == pytest.approx(np.log(8 / 3) / 3.0625)


def test_coverage_is_the_share_of_query_tokens_in_each_document() -> None:
    index = LexicalIndex(["apple banana", "apple apple cherry", "banana", "kiwi"])
    np.testing.assert_allclose(index.coverage("apple cherry apple"), [0.5, 1.0, 0.0, 0.0])
    np.testing.assert_allclose(index.coverage("apple cherry", 1), [0.5])
    assert not index.coverage("the of").any()


def test_cjk_runs_become_character_bigrams() -> None:
    # Chinese and Japanese have no spaces: without bigrams the whole clause would be one token.
    assert tokenize(["我喜欢北京烤鸭", "私は東京に行った", "猫", "서울에 갔어요"]) == [
        ["我喜", "喜欢", "欢北", "北京", "京烤", "烤鸭"],
        ["私は", "は東", "東京", "京に", "に行", "行っ", "った"],
        ["猫"],
        ["서울", "울에", "갔어", "어요"],
    ]


def test_cjk_beside_english_keeps_the_english_tokens() -> None:
    # The same English words tokenize alike in a batch with CJK text and in one without.
    english = "Running dogs visited Tokyo twice"
    mixed = tokenize([english, "東京tower的dogs"])
    assert mixed[0] == tokenize([english])[0] == ["run", "dog", "visit", "tokyo", "twice"]
    assert mixed[1] == ["東京", "tower", "的", "dog"]


def test_a_chinese_query_finds_the_document_with_its_words() -> None:
    docs = ["我上周去北京出差了三天", "她的猫叫小白，很喜欢睡觉", "我们周末去上海看展览"]
    index = LexicalIndex(docs)
    scores = index.scores("你的猫叫什么名字？")
    assert int(np.argmax(scores)) == 1 and scores[0] == scores[2] == 0.0
    assert index.coverage("北京出差")[0] == 1.0


def test_the_index_counts_the_bytes_it_holds_as_it_grows() -> None:
    from memgas.kernels.lexical import LexicalIndex
    from memgas.methods.index import nbytes

    index = LexicalIndex(["the cat sat on the mat", "a dog barked"])
    first = index.memory_bytes()
    index.add(["the cat chased the dog across the garden"] * 50)
    assert index.memory_bytes() > first > 0
    walked = sum(a.nbytes for lists in (index._docs, index._tfs) for pieces in lists.values() for a in pieces)
    assert walked <= index.memory_bytes() <= 4 * walked + 10_000  # the postings' buffers, not far off
    assert nbytes({"lexical": index}) >= index.memory_bytes()  # what a cache charges for it


def test_an_index_from_its_arrays_scores_and_grows_as_the_original() -> None:
    from memgas.kernels.lexical import LexicalIndex

    rng = np.random.default_rng(7)
    words = ["cat", "dog", "mat", "garden", "Sellwood", "Buckman", "bike", "sushi", "jazz", "the", "of"]

    def docs(n: int) -> list[str]:
        return [" ".join(rng.choice(words, size=rng.integers(1, 9))) for _ in range(n)]

    original = LexicalIndex(docs(30), k1=0.9, b=0.4)
    original.add(docs(10), skip={"bike", "sushi"})  # held, not scored
    vocabulary, arrays, present = original.to_arrays()
    loaded = LexicalIndex.from_arrays(vocabulary, {k: v.copy() for k, v in arrays.items()}, present, k1=0.9, b=0.4)
    assert len(loaded) == 40 and loaded.memory_bytes() > 0
    more = docs(15) + ["zebra crossing"]  # a term the loaded index has never seen
    for index in (original, loaded):
        index.add(more, skip={"jazz"})
    within = rng.random(len(original)) < 0.5
    for query in ["cat garden", "sellwood bike", "zebra", "the of", "Buckman jazz sushi"]:
        assert np.array_equal(loaded.scores(query), original.scores(query)), query
        assert np.array_equal(loaded.scores(query, 40), original.scores(query, 40)), query  # the snapshot it was
        assert np.array_equal(loaded.scores(query, within=within), original.scores(query, within=within))
        assert np.array_equal(loaded.coverage(query), original.coverage(query))
    for n in (40, None):
        stems = {w for s in tokenize(words) for w in s} | {"zebra", "cello"}
        held, kept = loaded.holding(stems, n), original.holding(stems, n)
        assert held.keys() == kept.keys() and {"bike", "jazz"} <= held.keys()
        assert all(np.array_equal(held[t], kept[t]) for t in held)
    assert loaded.to_arrays()[0] == original.to_arrays()[0] and loaded.to_arrays()[2] == original.to_arrays()[2]


def test_holding_names_every_document_holding_a_word_scored_or_skipped() -> None:
    """Against the token sets of the texts themselves: an index holding some words only as present."""
    corpus = _corpus()
    index = LexicalIndex(corpus[:50])
    index.add(corpus[50:], skip={"corgi", "trail", "lentil"})
    sets = [frozenset(w) for w in tokenize(corpus)]
    words = sorted({w for s in sets for w in s})
    held = index.holding(words + ["unknownword"])
    assert "unknownword" not in held and {"corgi", "trail", "lentil"} <= held.keys()
    for word in words:
        assert held[word].tolist() == [d for d, s in enumerate(sets) if word in s], word
    assert index.holding(["corgi"], 50)["corgi"].tolist() == [d for d, s in enumerate(sets[:50]) if "corgi" in s]


def test_absent_names_the_query_tokens_no_document_scored_holds() -> None:
    index = LexicalIndex(["the corgi sleeps", "a lentil curry", "corgi walks"])
    index.add(["the vet visit"])  # a later document: not among the first 3
    assert index.absent("corgi vet cello", 3) == {"vet", "cello"}
    assert index.absent("corgi vet cello") == {"cello"}
    assert index.absent("corgi curry", 3, within=np.array([False, True, False])) == {"corgi"}  # outside the scope
    assert index.absent("the a of") == set()  # stop words are no tokens


def test_scores_of_only_some_tokens_leave_the_others_out() -> None:
    corpus = _corpus()
    index = LexicalIndex(corpus)
    both = index.scores("corgi lentil")
    np.testing.assert_allclose(index.scores("corgi lentil", only={"corgi"}) + index.scores("corgi lentil",
                               only={"lentil"}), both, rtol=1e-12)
    np.testing.assert_array_equal(index.scores("corgi lentil", only={"corgi"}), index.scores("corgi"))
    assert not index.scores("corgi lentil", only=set()).any()


def test_skipped_tokens_get_no_postings_and_the_others_score_as_without_skip() -> None:
    corpus = _corpus()
    full = LexicalIndex(corpus)
    lean = LexicalIndex()
    lean.add(corpus[:70], skip={"corgi", "trail"})
    lean.add(corpus[70:], skip={"corgi", "trail"})
    for q in ["lentil curry dinner", "formula returns zero in the sheet", "hike mountain"]:
        np.testing.assert_array_equal(lean.scores(q), full.scores(q))  # lengths still count the skipped tokens
    assert not lean.scores("corgi trail").any() and lean.absent("corgi trail vet") == {"corgi", "trail"}
    assert "corgi" not in lean.to_arrays()[0] and lean.memory_bytes() < full.memory_bytes()
    assert lean.holding({"corgi"})["corgi"].tolist() == full.holding({"corgi"})["corgi"].tolist()  # held, unscored


def test_terms_held_are_the_terms_among_each_texts_tokens_kept_for_the_latest_texts() -> None:
    from memgas.kernels.lexical import _TermsHeld

    held = _TermsHeld(max_texts=2, max_chars=40)
    texts = ["My locker code is 4512.", "The gym moved to Lisbon.", "Sunny by the river.", "long words " * 10]
    terms = frozenset({"locker", "code", "gym", "move", "word", "sunni", "river", "lisbon"})
    assert held(texts, terms) == [terms & frozenset(w) for w in tokenize(texts)]
    kept = dict(held._held)
    assert list(kept) == texts[1:3]  # the two latest of up to 40 characters
    held(texts[1:2], terms)
    assert list(held._held) == [texts[2], texts[1]]  # read again: the latest
    held(texts[:1], terms)
    assert list(held._held) == [texts[1], texts[0]]  # the oldest went: two are kept
    assert texts[3] not in held._held  # over max_chars: never kept

    weighed = _TermsHeld(max_texts=10, max_chars=40, max_held_chars=50)  # the held texts' length bounds them too
    weighed(texts[:3], terms)  # 23 + 24 + 19 characters: the oldest goes
    assert list(weighed._held) == texts[1:3]


@pytest.mark.parametrize("scan_chars", [1_000, 0])  # 0: every text searched for the terms' words, not tokenized
def test_terms_held_equal_the_tokens_of_tricky_texts_and_keep_no_set(scan_chars: int) -> None:
    import gc

    from memgas.kernels.lexical import _TermsHeld

    irregular = "The dying fire, lying cats and tying knots: happiness, skies, early news, x4512abc a4 _under"
    texts = TRICKY + TEXTS + [irregular, "東京で 寿司 食べた", "mixed 東京 text and Straße"]
    every = frozenset().union(*map(frozenset, tokenize(texts)))
    assert {"die", "lie", "tie", "happi", "sky"} <= every  # the stemmer's exceptions and its y -> i are asked for
    held = _TermsHeld(scan_chars=scan_chars)
    english = texts[:-2]  # terms with CJK characters are found in tokens, never searched for
    assert held(english, frozenset().union(*map(frozenset, tokenize(english)))) == [
        frozenset(w) for w in tokenize(english)]
    assert held(texts, every) == [frozenset(w) for w in tokenize(texts)]
    assert held(texts, every) == [frozenset(w) for w in tokenize(texts)]  # read back from what is kept
    assert held(texts, every) == [frozenset(w) for w in tokenize(texts)]
    assert held(texts, {"run", "studi", "nothing"})[-4] == {"run", "studi"}
    assert held([irregular], {"die", "lie", "tie", "dy"}) == [{"die", "lie", "tie"}]
    assert held(["two bobcats", "a cat_flap"], {"cat", "bobcat"}) == [{"bobcat"}, set()]  # words, not their insides
    gc.collect()
    assert not any(gc.is_tracked(tokens) for tokens in held._held.values())  # no work for the garbage collector


def test_a_long_text_is_searched_the_first_time_and_held_once_read_again() -> None:
    from memgas.kernels.lexical import _TermsHeld

    held = _TermsHeld(scan_chars=20)
    long, short = "The runners kept running past the lake.", "Running late."
    assert held([long, short], {"run", "lake"}) == [{"run", "lake"}, {"run"}]
    assert list(held._held) == [short]  # the long one was searched, not kept
    assert held([long], {"kept"}) == [{"kept"}] and list(held._held) == [short, long]  # read again: kept
