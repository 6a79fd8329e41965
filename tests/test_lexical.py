"""BM25 tokens and scores on a small corpus."""

from __future__ import annotations

import numpy as np

from memgas.lexical import LexicalIndex, tokenize

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


def test_index_scores_rare_names_highest() -> None:
    index = LexicalIndex(TEXTS)
    scores = index.scores("What did the vet say about Biscuit?")
    assert scores.shape == (len(TEXTS),) and int(np.argmax(scores)) == 2
    assert not index.scores("the and of").any()  # stop words only: nothing scores
    assert LexicalIndex([]).scores("anything").shape == (0,)
