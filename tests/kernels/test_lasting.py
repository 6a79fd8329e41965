"""The user model's detector kernel: the softmax regression against scikit-learn's, its threshold, its weights as
data, and the word features it reads beside the vector."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from memgas.kernels.lasting import CLASSES, WORD_FEATURES, LastingModel, word_features


def _data(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    centres = rng.normal(0, 1.5, (4, 6))
    y = rng.integers(0, 4, 400)
    return centres[y] + rng.normal(0, 1.0, (400, 6)), y


@pytest.mark.parametrize("l2", [0.1, 1.0, 10.0])
def test_the_fit_is_scikit_learns_multinomial_logistic_regression(l2: float) -> None:
    X, y = _data()
    ours = LastingModel(l2=l2, class_weight=None).fit(X, y)
    theirs = LogisticRegression(C=1.0 / l2, max_iter=5000, tol=1e-10).fit(X, y)  # the same loss: C = 1 / l2
    np.testing.assert_allclose(ours.predict_proba(X), theirs.predict_proba(X), atol=2e-3)


def test_balanced_weights_are_scikit_learns_too() -> None:
    X, y = _data(1)
    keep = (y != 3) | (np.arange(len(y)) % 5 == 0)  # a rare class
    ours = LastingModel(l2=1.0).fit(X[keep], y[keep])
    # scikit-learn sums the weighted losses, ours averages them: C is the number of rows over the weights' sum
    weights = (keep.sum() / (4 * np.bincount(y[keep], minlength=4)))[y[keep]]
    theirs = LogisticRegression(C=1.0 * keep.sum() / weights.sum(), class_weight="balanced", max_iter=5000,
                                tol=1e-10).fit(X[keep], y[keep])
    np.testing.assert_allclose(ours.predict_proba(X), theirs.predict_proba(X), atol=2e-3)


def test_predict_calls_a_row_lasting_only_from_the_threshold() -> None:
    model = LastingModel.from_arrays({"coef": np.zeros((4, 1), np.float32),
                                      "intercept": np.log(np.array([0.4, 0.1, 0.3, 0.2], np.float32)),
                                      "threshold": np.array(0.7, np.float32)})
    assert model.predict(np.zeros((1, 1))).tolist() == [0]  # 0.6 of lasting kinds, under 0.7
    model.threshold = 0.6
    assert model.predict(np.zeros((1, 1))).tolist() == [CLASSES.index("preference")]  # the likeliest lasting kind


def test_the_weights_round_trip_as_arrays_and_bad_ones_are_refused() -> None:
    X, y = _data(2)
    model = LastingModel(threshold=0.65).fit(X, y)
    back = LastingModel.from_arrays(model.to_arrays())
    np.testing.assert_array_equal(back.predict_proba(X), model.predict_proba(X))
    assert back.threshold == pytest.approx(0.65)
    for bad in ({"coef": np.zeros((4, 3))}, {"coef": np.zeros(3), "intercept": np.zeros(3)},
                {"coef": np.zeros((4, 3)), "intercept": np.zeros(5)}):
        with pytest.raises(ValueError, match="not a model's weights"):
            LastingModel.from_arrays(bad)
    with pytest.raises(ValueError, match="not fitted"):
        LastingModel().predict_proba(X)
    with pytest.raises(ValueError, match="as many labels"):
        LastingModel().fit(X, y[:-1])


def test_the_word_features_read_what_the_rules_and_the_words_show() -> None:
    read = lambda s: dict(zip(WORD_FEATURES, word_features(s).tolist()))
    assert read("Always answer in Spanish.")["instruction rule"] == 1.0
    assert read("I prefer window seats.")["preference rule"] == 1.0
    assert read("Where is it?")["question"] == 1.0 and read("Where is it.")["question"] == 0.0
    assert read("Could you find me a hotel?")["a request"] == 1.0 and read("Please suggest a film.")["a request"] == 1.0
    assert read("I could find no hotel.")["a request"] == 0.0
    assert read("My wife is a nurse.")["a relative"] == 1.0 and read("My car is red.")["a relative"] == 0.0
    assert read("We met Tomasz at the fair.")["a name"] == 1.0 and read("We met at the fair.")["a name"] == 0.0
    assert read("I ran a marathon yesterday.")["today or yesterday"] == 1.0
    assert read(" ".join(["word"] * 20))["words / 40"] == 0.5


def test_replacements_read_every_pair_as_pair_features_and_the_model_would() -> None:
    """The all-pairs form (the product part as (V * w) @ V.T, shared words by a bag of words) equals the pair model
    read on each pair's own features."""
    from memgas.kernels.lasting import PAIR_FEATURES, pair_features, replacements

    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(7, 5)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    texts = ["I live in Leeds.", "I moved to York now.", "I love Leeds and York.", "Always answer in Welsh.",
             "I no longer eat fish.", "Fish is my favourite.", "Answer in English from now on."]
    kinds = ["fact", "fact", "preference", "instruction", "preference", "preference", "instruction"]
    model = LastingModel.from_arrays({"coef": rng.normal(size=(2, 5 + len(PAIR_FEATURES))).astype(np.float32),
                                      "intercept": np.array([0.0, -0.3], np.float32),
                                      "threshold": np.array(0.5, np.float32)})
    matrix = replacements(model, vectors, texts, kinds)
    told = [k == "instruction" for k in kinds]
    for i in range(7):
        for j in range(7):
            row = pair_features(vectors[i], vectors[j], texts[i], texts[j], told[i] == told[j])
            expected = j > i and model.predict_proba(row[None])[0, 1] >= 0.5
            assert matrix[i, j] == expected, (i, j)
    assert matrix.any() and not matrix[np.tril_indices(7)].any()  # only a later statement replaces
    assert replacements(model, vectors[:1], texts[:1], kinds[:1]).shape == (1, 1)
