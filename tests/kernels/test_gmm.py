from __future__ import annotations

import numpy as np
import pytest

from memgas.core.errors import InvalidInputError
from memgas.kernels.gmm import GMM1D, AcceptResult, accept_mask, accept_masks, fit_gmm_1d


def _two_modes(n_low: int, n_high: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """N(0.2, 0.05) and N(0.8, 0.05) values, shuffled; returns the sample and the high-mode labels."""
    rng = np.random.default_rng(seed)
    x = np.r_[rng.normal(0.2, 0.05, n_low), rng.normal(0.8, 0.05, n_high)]
    high = np.r_[np.zeros(n_low, bool), np.ones(n_high, bool)]
    order = rng.permutation(x.size)
    return x[order], high[order]


def _assert_upper_set(x: np.ndarray, result: AcceptResult) -> None:
    if result.mask.any():
        assert (x[result.mask] > result.threshold).all()
        if (~result.mask).any():
            assert x[result.mask].min() >= x[~result.mask].max()


# -- fit_gmm_1d ------------------------------------------------------------------------------


def test_fit_recovers_separated_modes() -> None:
    x, _ = _two_modes(60, 40)
    g = fit_gmm_1d(x)
    assert isinstance(g, GMM1D)
    assert g.converged
    np.testing.assert_allclose(g.means, [0.2, 0.8], atol=0.02)
    np.testing.assert_allclose(np.sqrt(g.variances), [0.05, 0.05], atol=0.015)
    np.testing.assert_allclose(g.weights, [0.6, 0.4], atol=1e-6)
    assert g.means[1] > g.means[0]  # index 1 is the high component


def test_fit_matches_sklearn() -> None:
    mixture = pytest.importorskip("sklearn.mixture")
    rng = np.random.default_rng(3)
    # Overlapping modes, so EM needs many iterations and the comparison is not trivial.
    x = np.r_[rng.normal(0.30, 0.08, 300), rng.normal(0.55, 0.10, 200)]
    ours = fit_gmm_1d(x, tol=1e-12, max_iter=5000)
    ref = mixture.GaussianMixture(2, tol=1e-12, max_iter=5000, reg_covar=1e-12, random_state=0).fit(x[:, None])
    order = np.argsort(ref.means_.ravel())
    assert ours.converged and ref.converged_
    np.testing.assert_allclose(ours.means, ref.means_.ravel()[order], atol=1e-4)
    np.testing.assert_allclose(ours.variances, ref.covariances_.ravel()[order], atol=1e-4)
    np.testing.assert_allclose(ours.weights, ref.weights_[order], atol=1e-4)
    assert ours.log_likelihood == pytest.approx(ref.score(x[:, None]) * x.size, abs=1e-3)


def test_em_log_likelihood_never_decreases() -> None:
    x = np.random.default_rng(5).normal(0.3, 0.1, 80)
    lls = [fit_gmm_1d(x, max_iter=k, tol=1e-300).log_likelihood for k in range(1, 30)]
    assert all(b >= a - 1e-9 for a, b in zip(lls, lls[1:]))
    assert not fit_gmm_1d(x, max_iter=2, tol=1e-300).converged


def test_fit_constant_sample_floors_variance() -> None:
    g = fit_gmm_1d(np.full(10, 0.4), min_var=1e-4)
    np.testing.assert_allclose(g.means, [0.4, 0.4])
    np.testing.assert_allclose(g.variances, [1e-4, 1e-4])
    assert np.isfinite(g.log_likelihood)


@pytest.mark.parametrize(
    ("x", "kwargs"),
    [
        (np.array([0.5]), {}),
        (np.array([0.1, np.nan, 0.3]), {}),
        (np.ones((3, 2)), {}),
        (np.array([0.1, 0.2]), {"max_iter": 0}),
        (np.array([0.1, 0.2]), {"min_var": 0.0}),
    ],
)
def test_fit_rejects_bad_input(x: np.ndarray, kwargs: dict) -> None:
    with pytest.raises(InvalidInputError):
        fit_gmm_1d(x, **kwargs)


# -- accept_mask: the GMM rule ---------------------------------------------------------------


def test_separable_sample_accepts_exactly_the_high_mode() -> None:
    x, high = _two_modes(50, 50)
    r = accept_mask(x)
    assert r.method == "gmm"
    np.testing.assert_array_equal(r.mask, high)
    assert 0.35 < r.threshold < 0.65
    np.testing.assert_array_equal(r.mask, r.gmm.posterior_high(x) > 0.5)


@pytest.mark.parametrize("n_high", [1, 2, 3, 5, 10])
def test_few_related_among_many(n_high: int) -> None:
    x, high = _two_modes(50 - n_high, n_high, seed=n_high)
    r = accept_mask(x)
    assert r.method == "gmm"
    np.testing.assert_array_equal(r.mask, high)


def test_min_high_sim_cuts_the_high_cluster() -> None:
    x, high = _two_modes(30, 20)
    r = accept_mask(x, min_high_sim=0.8)
    assert r.method == "gmm"
    assert r.threshold == 0.8
    np.testing.assert_array_equal(r.mask, high & (x > 0.8))
    assert 0 < r.mask.sum() < high.sum()


# -- accept_mask: fallbacks ------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("n", [50, 200])
def test_unimodal_sample_accepts_a_small_fraction(seed: int, n: int) -> None:
    x = np.random.default_rng(seed).normal(0.3, 0.08, n)
    r = accept_mask(x)
    assert r.method == "fallback-unimodal"
    assert 0 < r.mask.sum() <= 2
    assert r.threshold == pytest.approx(x.mean() + x.std())
    np.testing.assert_array_equal(np.flatnonzero(r.mask), np.sort(np.argsort(-x)[: r.mask.sum()]))


def test_unimodal_fallback_top_is_configurable() -> None:
    x = np.random.default_rng(0).normal(0.3, 0.08, 50)
    assert accept_mask(x, fallback_top=1).mask.sum() == 1
    assert accept_mask(x, fallback_top=0).mask.sum() == 0


def test_high_majority_counts_as_unimodal() -> None:
    # One low outlier: EM isolates it, leaving a "high" cluster of everything else.
    x = np.r_[0.0, np.random.default_rng(2).normal(0.5, 0.05, 30)]
    r = accept_mask(x)
    assert r.gmm is not None and r.gmm.ashman_d > 5  # the split itself is sharp
    assert r.method == "fallback-unimodal"
    assert r.mask.sum() <= 2


@pytest.mark.parametrize("n", [4, 20])
def test_constant_values_accept_nothing(n: int) -> None:
    r = accept_mask(np.full(n, 0.7))
    assert r.method == "fallback-unimodal"
    assert not r.mask.any()


def test_empty_input() -> None:
    r = accept_mask(np.zeros(0))
    assert r.method == "empty"
    assert r.mask.shape == (0,) and r.mask.dtype == bool
    assert r.gmm is None


@pytest.mark.parametrize(
    ("x", "expected"),
    [
        ([0.9], [True]),
        ([0.2], [False]),
        ([0.9, 0.1], [True, False]),
        ([0.8, 0.9], [True, True]),
        ([0.8, 0.95, 0.9], [False, True, True]),  # at most fallback_top = 2, the largest
        ([0.1, 0.2, 0.3], [False, False, False]),
        ([0.5, 0.5, 0.5], [False, False, False]),  # strictly above the floor
    ],
)
def test_too_few_candidates_use_the_floor(x: list[float], expected: list[bool]) -> None:
    r = accept_mask(np.array(x))
    assert r.method == "fallback-few"
    assert r.gmm is None
    assert r.threshold == 0.5
    assert r.mask.tolist() == expected


def test_too_few_candidates_respect_min_high_sim() -> None:
    r = accept_mask(np.array([0.6, 0.9]), min_high_sim=0.7)
    assert r.threshold == 0.7
    assert r.mask.tolist() == [False, True]


# -- accept_mask: invariants and errors ------------------------------------------------------


@pytest.mark.parametrize("seed", range(6))
def test_accept_set_is_an_upper_set(seed: int) -> None:
    rng = np.random.default_rng(seed)
    samples = [rng.uniform(0, 1, 40), rng.beta(2, 8, 30), _two_modes(25, 5, seed)[0], rng.normal(0.4, 0.1, 3)]
    for x in samples:
        _assert_upper_set(x, accept_mask(x))


def test_deterministic_and_order_independent() -> None:
    x, _ = _two_modes(40, 8, seed=9)
    a, b = accept_mask(x), accept_mask(x.copy())
    np.testing.assert_array_equal(a.mask, b.mask)
    assert a.threshold == b.threshold
    np.testing.assert_array_equal(a.gmm.means, b.gmm.means)
    perm = np.random.default_rng(1).permutation(x.size)
    np.testing.assert_array_equal(accept_mask(x[perm]).mask, a.mask[perm])


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_values_raise(bad: float) -> None:
    with pytest.raises(InvalidInputError, match="NaN or infinite"):
        accept_mask(np.array([0.1, 0.5, bad, 0.7, 0.2]))


@pytest.mark.parametrize(
    "kwargs", [{"min_candidates": 1}, {"fallback_top": -1}, {"max_accept_fraction": 0.0}, {"max_accept_fraction": 1.5}]
)
def test_bad_parameters_raise(kwargs: dict) -> None:
    with pytest.raises(InvalidInputError):
        accept_mask(np.array([0.1, 0.2, 0.3, 0.4]), **kwargs)


def test_two_dimensional_input_raises() -> None:
    with pytest.raises(InvalidInputError, match="1-D"):
        accept_mask(np.ones((4, 4)))


def _reference_em(x: np.ndarray, max_iter: int = 100, tol: float = 1e-6, min_var: float = 1e-6):
    """A plain one-sample EM written out loop by loop (the textbook algorithm, same start and stop rule)."""
    xs = np.sort(x)
    n = xs.size
    best, k_best = -1.0, 1
    for k in range(1, n):
        lo, hi = xs[:k].mean(), xs[k:].mean()
        score = k * (n - k) * (hi - lo) ** 2
        if score > best:
            best, k_best = score, k
    lo, hi = xs[:k_best], xs[k_best:]
    mu = [lo.mean(), hi.mean()]
    var = [max(lo.var(), min_var), max(hi.var(), min_var)]
    w = [lo.size / n, hi.size / n]
    prev, it = -np.inf, 0
    for it in range(1, max_iter + 1):  # noqa: B007 - the count of iterations run is returned
        dens = np.array([[w[c] / np.sqrt(2 * np.pi * var[c]) * np.exp(-(v - mu[c]) ** 2 / (2 * var[c]))
                          for c in (0, 1)] for v in x])
        ll = float(np.log(dens.sum(axis=1)).mean())
        resp = dens / dens.sum(axis=1, keepdims=True)
        nk = resp.sum(axis=0)
        w = list(nk / n)
        mu = list((resp * x[:, None]).sum(axis=0) / nk)
        var = [max(float((resp[:, c] * (x - mu[c]) ** 2).sum() / nk[c]), min_var) for c in (0, 1)]
        if abs(ll - prev) < tol:
            break
        prev = ll
    order = np.argsort(mu)
    return np.array(mu)[order], np.array(var)[order], np.array(w)[order], it


def test_batched_fits_match_a_reference_em_row_by_row() -> None:
    rng = np.random.default_rng(7)
    rows = [np.concatenate([rng.normal(0.2, 0.05, 40), rng.normal(0.6, 0.04, 10)]),  # two modes
            rng.normal(0.3, 0.08, 50),                                                # one mode
            np.concatenate([rng.normal(0.1, 0.02, 25), rng.normal(0.5, 0.2, 25)]),
            np.full(50, 0.4)]                                                         # constant
    x = np.stack(rows)
    results = accept_masks(x)
    for row, got in zip(rows, results):
        assert got.gmm is not None
        alone = accept_mask(row)
        assert alone.method == got.method and np.array_equal(alone.mask, got.mask)
        if np.ptp(row) == 0:  # both means equal up to rounding: which one is "high" is arbitrary
            continue
        mu, var, w, it = _reference_em(row)
        np.testing.assert_allclose(got.gmm.means, mu, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(got.gmm.variances, var, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(got.gmm.weights, w, rtol=1e-9, atol=1e-12)
        assert got.gmm.n_iter == it  # each row stops at its own iteration, unaffected by the others
    assert len({r.gmm.n_iter for r in results}) > 1  # the rows did converge at different iterations


def test_batched_accept_masks_edge_cases() -> None:
    assert accept_masks(np.zeros((3, 0)))[0].method == "empty"
    few = accept_masks(np.array([[0.9, 0.1], [0.2, 0.3]]))
    assert [r.method for r in few] == ["fallback-few"] * 2 and few[0].mask.tolist() == [True, False]
    assert accept_masks(np.zeros((0, 10))) == []
    with pytest.raises(InvalidInputError, match="2-D"):
        accept_masks(np.zeros(5))
    with pytest.raises(InvalidInputError, match="NaN"):
        accept_masks(np.array([[0.1, np.nan, 0.2, 0.3]]))


@pytest.mark.slow
def test_bic_check_matches_sklearn_near_its_boundary() -> None:
    """Two components are kept only where BIC prefers them: -2 ll2 + 5 log n < BIC of one Gaussian (sklearn's,
    2 parameters). Checked on samples whose decision sits within log n of the boundary, where a wrong
    penalty (e.g. 2 log n instead of 3 log n) flips it."""
    from memgas.kernels.gmm import _bic_prefers_two

    mixture = pytest.importorskip("sklearn.mixture")
    rng = np.random.default_rng(11)
    near = 0
    for _ in range(600):
        n = int(rng.integers(20, 60))
        x = np.r_[rng.normal(0.3, 0.08, n - n // 4), rng.normal(0.3 + rng.uniform(0.0, 0.3), 0.08, n // 4)]
        g = fit_gmm_1d(x)
        bic1 = mixture.GaussianMixture(1, reg_covar=0.0).fit(x[:, None]).bic(x[:, None])
        margin = bic1 - (-2.0 * g.log_likelihood + 5.0 * np.log(n))
        if abs(margin) < np.log(n):
            near += 1
            assert _bic_prefers_two(x, g) == (margin > 0), (n, margin)
    assert near >= 20  # enough samples close to the boundary for the check to bite
