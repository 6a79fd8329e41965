from __future__ import annotations

import numpy as np
import pytest

from memgas.core.errors import InvalidInputError
from memgas.kernels.router import entropy, granularity_weights, softmax

# Hand values for softmax([1, 0, 0]) at λ = 1: e / (e + 2) and 1 / (e + 2).
_E = 2.718281828459045
_P1, _P0 = _E / (_E + 2.0), 1.0 / (_E + 2.0)  # 0.576117..., 0.211941...
# H = Σ p_i (ln Z − z_i) = ln Z − E[z] = ln(e + 2) − e/(e + 2) = 1.551444 − 0.576117.
_H_100 = 0.975328


def test_softmax_values() -> None:
    np.testing.assert_allclose(softmax(np.array([1.0, 0.0, 0.0])), [_P1, _P0, _P0], rtol=1e-12)
    np.testing.assert_allclose(softmax(np.array([0.0, 0.0])), [0.5, 0.5])


def test_softmax_is_stable_for_large_scores() -> None:
    p = softmax(np.array([1000.0, 999.0]), temperature=1.0)
    np.testing.assert_allclose(p, [_E / (_E + 1.0), 1.0 / (_E + 1.0)], rtol=1e-12)
    assert np.isfinite(softmax(np.array([1.0, -1.0]), temperature=1e-6)).all()


def test_softmax_temperature_sharpens() -> None:
    x = np.array([0.5, 0.4, 0.1])
    assert softmax(x, 0.05)[0] > softmax(x, 0.5)[0] > softmax(x, 5.0)[0] > 1 / 3


def test_softmax_rejects_bad_input() -> None:
    with pytest.raises(InvalidInputError, match="temperature"):
        softmax(np.array([1.0]), 0.0)
    with pytest.raises(InvalidInputError, match="NaN"):
        softmax(np.array([1.0, np.nan]))
    with pytest.raises(InvalidInputError, match="1-D"):
        softmax(np.ones((2, 2)))
    assert softmax(np.zeros(0)).shape == (0,)


def test_entropy_hand_values() -> None:
    assert entropy(softmax(np.array([0.0, 0.0]), 1.0)) == pytest.approx(0.6931471805599453)  # ln 2
    assert entropy(softmax(np.array([1.0, 0.0, 0.0]), 1.0)) == pytest.approx(_H_100, abs=1e-6)
    assert entropy(np.array([1.0, 0.0, 0.0])) == 0.0
    assert entropy(np.full(4, 0.25)) == pytest.approx(1.3862943611198906)  # ln 4
    with pytest.raises(InvalidInputError):
        entropy(np.array([1.5, -0.5]))


def test_raw_weights_hand_computed() -> None:
    # H_a = ln 2 = 0.693147, H_b = 0.975328: w_a = (1/0.693147) / (1/0.693147 + 1/0.975328).
    w = granularity_weights({"a": np.array([0.0, 0.0]), "b": np.array([1.0, 0.0, 0.0])}, temperature=1.0, normalize=False)
    assert w["a"] == pytest.approx(1.442695 / (1.442695 + 1.025296), abs=1e-6)
    assert w["a"] + w["b"] == pytest.approx(1.0)


def test_normalised_weights_hand_computed() -> None:
    # Normalised: H_a = ln2/ln2 = 1, H_b = 0.975328 / ln 3 = 0.887782, so b is the sharper one.
    w = granularity_weights({"a": np.array([0.0, 0.0]), "b": np.array([1.0, 0.0, 0.0])}, temperature=1.0)
    assert w["b"] == pytest.approx((1 / 0.887782) / (1.0 + 1 / 0.887782), abs=1e-6)
    assert w["b"] > w["a"]


def test_sharper_distribution_gets_more_weight() -> None:
    rng = np.random.default_rng(0)
    flat = rng.uniform(0.3, 0.35, 40)
    peaked = flat.copy()
    peaked[:3] = 0.8
    w = granularity_weights({"flat": flat, "peaked": peaked, "turn": rng.uniform(0.3, 0.35, 400)})
    assert w["peaked"] > w["flat"]
    assert w["peaked"] > w["turn"]
    assert sum(w.values()) == pytest.approx(1.0)
    assert list(w) == ["flat", "peaked", "turn"]


def test_normalisation_removes_unit_count_bias() -> None:
    # Same uniform-looking similarities, 10 vs 100 units: raw entropy favours the small set.
    rng = np.random.default_rng(1)
    sims = {"session": rng.uniform(0.2, 0.3, 10), "turn": rng.uniform(0.2, 0.3, 100)}
    raw = granularity_weights(sims, normalize=False)
    norm = granularity_weights(sims)
    assert raw["session"] > 0.6
    assert norm["session"] == pytest.approx(0.5, abs=0.05)


def test_one_hot_distribution_dominates() -> None:
    # At λ = 1e-4 a 0.5 gap underflows exp(): the distribution is exactly one-hot, H = 0.
    w = granularity_weights({"sharp": np.array([0.9, 0.4, 0.4]), "flat": np.array([0.5, 0.5, 0.5])}, temperature=1e-4)
    assert w["sharp"] == pytest.approx(1.0)
    assert np.isfinite(list(w.values())).all()
    both = granularity_weights({"a": np.array([0.9, 0.4]), "b": np.array([0.2, 0.9, 0.1])}, temperature=1e-4)
    assert both["a"] == pytest.approx(0.5) and both["b"] == pytest.approx(0.5)


@pytest.mark.parametrize("normalize", [True, False])
def test_single_unit_granularity_does_not_dominate(normalize: bool) -> None:
    sims = {"session": np.array([0.9]), "turn": np.array([0.8, 0.2, 0.1, 0.1]), "keyword": np.array([0.3, 0.3, 0.31])}
    w = granularity_weights(sims, normalize=normalize)
    assert w["session"] < 0.5
    assert w["session"] <= min(w["turn"], w["keyword"]) + 1e-12  # ranks with the least confident
    assert sum(w.values()) == pytest.approx(1.0)


@pytest.mark.parametrize("normalize", [True, False])
def test_all_single_units_get_equal_weight(normalize: bool) -> None:
    w = granularity_weights({"a": np.array([0.9]), "b": np.array([0.1])}, normalize=normalize)
    assert w == pytest.approx({"a": 0.5, "b": 0.5})


def test_empty_granularity_gets_zero() -> None:
    w = granularity_weights({"session": np.array([0.5, 0.1]), "summary": np.zeros(0), "turn": np.array([0.2, 0.3])})
    assert w["summary"] == 0.0
    assert w["session"] + w["turn"] == pytest.approx(1.0)


def test_all_empty_raises() -> None:
    with pytest.raises(InvalidInputError, match="no granularity"):
        granularity_weights({"session": np.zeros(0), "turn": np.zeros(0)})
    with pytest.raises(InvalidInputError):
        granularity_weights({})


def test_temperature_effect() -> None:
    sims = {"peaked": np.array([0.7, 0.3, 0.3, 0.3]), "flat": np.array([0.4, 0.35, 0.3, 0.3])}
    hot = granularity_weights(sims, temperature=10.0)
    cold = granularity_weights(sims, temperature=0.05)
    # At high temperature every distribution is near uniform: weights near equal.
    assert hot["peaked"] == pytest.approx(0.5, abs=0.01)
    assert cold["peaked"] > 0.6
    assert cold["peaked"] > hot["peaked"]


def test_bad_similarities_raise() -> None:
    with pytest.raises(InvalidInputError, match="NaN"):
        granularity_weights({"turn": np.array([0.1, np.nan])})
    with pytest.raises(InvalidInputError, match="temperature"):
        granularity_weights({"turn": np.array([0.1, 0.2])}, temperature=-1.0)
