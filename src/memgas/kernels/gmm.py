"""Two-component 1-D Gaussian mixture that decides which candidate similarities are "associated".

MemGAS (Xu et al., 2025) links a new memory unit to the stored units whose similarities fall in
the high-similarity cluster of a two-component Gaussian mixture fitted to the candidates'
similarities. :func:`fit_gmm_1d` is the EM fit; :func:`accept_mask` turns it into an accept set.

The accept set is always an *upper set*: if a value is accepted, every larger value is too (ties
cut by a top-k cap are broken by position). Every accepted value is strictly greater than the
returned ``threshold``.

Decision rules of :func:`accept_mask` (``AcceptResult.method``):

``"empty"``
    No candidates: empty mask, ``threshold = +inf``.
``"fallback-few"``
    Fewer than ``min_candidates`` values: a mixture over two or three points is noise, so accept
    the values strictly above the fixed floor ``few_floor`` (raised to ``min_high_sim`` if that is
    higher), at most ``fallback_top`` of them (the largest).
``"fallback-unimodal"``
    The mixture does not show two separated modes. This is the case when any of these holds:

    * Ashman's D = √2·|μ₂ − μ₁| / √(σ₁² + σ₂²) is below ``min_separation``. D > 2 is the usual
      criterion for a clean separation of two Gaussians; the default 2.5 is stricter because EM
      always finds *some* split of a sample. In simulation (with the BIC check below), spurious
      splits of the top-50 tail of a 2000-value normal pool, which is what MemGAS feeds in when
      nothing is related, passed ~40 % of the time at D ≥ 2 and ~20 % at D ≥ 2.5, while samples
      with a well-separated high mode passed at either. D = 0 for a constant sample;
    * the Bayesian information criterion does not prefer two components over one Gaussian:
      2·(LL₂ − LL₁) ≤ 3·ln n (the mixture has three more free parameters). This rejects most
      splits of a plain normal sample, whose D alone often exceeds 2;
    * the high component does not own a stretch between the means, i.e. its posterior is not
      below ½ at the low mean and above ½ at the high mean (one broad component swallows the
      other, or a component has almost no weight);
    * the "high" cluster is not a minority: it would accept more than ``max_accept_fraction`` of
      the candidates (for instance EM collapsing one component onto a single low outlier, which
      leaves everything else "high").

    Then only the largest values strictly above mean + std of the sample (and above
    ``min_high_sim``) are accepted, at most ``fallback_top`` of them. A constant sample has
    std = 0 and accepts nothing. The unimodal fallback thus never links to more than
    ``fallback_top`` units.
``"gmm"``
    Two separated modes: accept the values strictly above the decision boundary, the point
    between the two means where the posterior of the high component crosses ½ (and above
    ``min_high_sim`` when given).

Non-finite input (NaN, ±inf) raises :class:`~memgas.core.errors.InvalidInputError` in both functions.

Reference: Y. Xu et al., "Towards Multi-Granularity Memory Association and Selection for
Long-Term Conversational Agents", 2025. K. M. Ashman, C. M. Bird, S. E. Zepf, "Detecting
bimodality in astronomical datasets", AJ 108, 1994 (the D statistic).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from memgas.core.errors import InvalidInputError

__all__ = ["GMM1D", "AcceptResult", "fit_gmm_1d", "accept_mask", "accept_masks"]

_LOG_2PI = math.log(2.0 * math.pi)
_MIN_VAR = 1e-6


@dataclass(frozen=True, slots=True)
class GMM1D:
    """A fitted two-component 1-D Gaussian mixture.

    Attributes:
        means, variances, weights: shape ``(2,)`` each, sorted by mean: index 1 is the HIGH component.
        log_likelihood: total log-likelihood of the sample under the returned parameters.
        n_iter: EM iterations run.
        converged: whether the per-sample log-likelihood changed by less than ``tol`` before
            ``max_iter`` iterations.
    """

    means: np.ndarray
    variances: np.ndarray
    weights: np.ndarray
    log_likelihood: float
    n_iter: int
    converged: bool

    def log_joint(self, x: np.ndarray) -> np.ndarray:
        """``log(w_k · N(x | μ_k, σ_k²))`` for each value and component, shape ``(len(x), 2)``."""
        x = np.asarray(x, dtype=np.float64)
        rows = _log_joint_rows(x[None, :], self.means[None, :], self.variances[None, :], self.weights[None, :])
        first: np.ndarray = rows[0]
        return first

    def posterior_high(self, x: np.ndarray) -> np.ndarray:
        """Posterior probability that each value belongs to the high component (index 1)."""
        lj = self.log_joint(x)
        high: np.ndarray = np.exp(lj[:, 1] - np.logaddexp(lj[:, 0], lj[:, 1]))
        return high

    @property
    def ashman_d(self) -> float:
        """Ashman's D, the mean separation in units of the pooled standard deviation."""
        return float(math.sqrt(2.0) * abs(self.means[1] - self.means[0]) / math.sqrt(self.variances.sum()))


@dataclass(frozen=True, slots=True)
class AcceptResult:
    """Which candidates :func:`accept_mask` accepts, and why.

    Attributes:
        mask: boolean array, same length as the input; ``True`` = accepted.
        method: ``"gmm"``, ``"empty"``, ``"fallback-few"`` or ``"fallback-unimodal"`` (module docstring).
        threshold: accepted values are strictly above it (``+inf`` when nothing could be accepted).
        gmm: the fitted mixture, or ``None`` when none was fitted (empty or too few candidates).
    """

    mask: np.ndarray
    method: str
    threshold: float
    gmm: GMM1D | None


def _as_finite(x: np.ndarray, what: str, ndim: int = 1) -> np.ndarray:
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim != ndim:
        raise InvalidInputError(f"{what} must be a {ndim}-D array, got shape {arr.shape}")
    if not np.isfinite(arr).all():
        raise InvalidInputError(f"{what} contains NaN or infinite values")
    return arr


def _split_init(x: np.ndarray, min_var: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Initial parameters per row from the exact 1-D two-means split (Otsu's threshold) of the sorted row.

    ``x`` is ``(m, n)``; returns means, variances and weights of shape ``(m, 2)``.
    """
    xs = np.sort(x, axis=1)
    m, n = xs.shape
    k = np.arange(1, n)  # size of the low group
    csum = np.cumsum(xs, axis=1)[:, :-1]
    mean_lo = csum / k
    mean_hi = (xs.sum(axis=1, keepdims=True) - csum) / (n - k)
    # Between-group variance; ties resolve to the first (lowest) best split.
    k_best = k[np.argmax(k * (n - k) * (mean_hi - mean_lo) ** 2, axis=1)]
    low = np.arange(n)[None, :] < k_best[:, None]
    n_lo, n_hi = k_best.astype(np.float64), (n - k_best).astype(np.float64)
    mu_lo = np.where(low, xs, 0.0).sum(axis=1) / n_lo
    mu_hi = np.where(low, 0.0, xs).sum(axis=1) / n_hi
    var_lo = np.where(low, (xs - mu_lo[:, None]) ** 2, 0.0).sum(axis=1) / n_lo
    var_hi = np.where(low, 0.0, (xs - mu_hi[:, None]) ** 2).sum(axis=1) / n_hi
    means = np.stack([mu_lo, mu_hi], axis=1)
    variances = np.maximum(np.stack([var_lo, var_hi], axis=1), min_var)
    weights = np.stack([n_lo, n_hi], axis=1) / n
    return means, variances, weights


def _log_joint_rows(x: np.ndarray, means: np.ndarray, variances: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """``log(w_k · N(x | μ_k, σ_k²))`` for ``(m, n)`` values and ``(m, 2)`` parameters: shape ``(m, n, 2)``."""
    diff = x[:, :, None] - means[:, None, :]
    log_norm = np.log(weights) - 0.5 * (_LOG_2PI + np.log(variances))
    joint: np.ndarray = log_norm[:, None, :] - 0.5 * diff * diff / variances[:, None, :]
    return joint


def _fit_rows(x: np.ndarray, max_iter: int, tol: float, min_var: float) -> list[GMM1D]:
    """EM on every row of ``x`` (``(m, n)``, n >= 2) at once; each row stops when its own fit converges.

    Rows are independent: a row's iterations, and so its result, are those of fitting it alone.
    """
    m = x.shape[0]
    means, variances, weights = _split_init(x, min_var)
    # Keeps a component that lost every point from dividing by zero (as sklearn does).
    tiny = 10.0 * np.finfo(np.float64).eps
    prev = np.full(m, -np.inf)
    n_iter = np.zeros(m, dtype=np.int64)
    converged = np.zeros(m, dtype=bool)
    active = np.arange(m)
    for it in range(1, max_iter + 1):
        xa = x[active]
        lj = _log_joint_rows(xa, means[active], variances[active], weights[active])
        norm = np.logaddexp(lj[..., 0], lj[..., 1])
        ll = norm.mean(axis=1)
        resp = np.exp(lj - norm[..., None])
        nk = resp.sum(axis=1) + tiny
        weights[active] = nk / nk.sum(axis=1, keepdims=True)
        mu = np.einsum("rnk,rn->rk", resp, xa) / nk
        means[active] = mu
        diff = xa[:, :, None] - mu[:, None, :]
        variances[active] = np.maximum((resp * diff * diff).sum(axis=1) / nk, min_var)
        n_iter[active] = it
        done = np.abs(ll - prev[active]) < tol
        converged[active[done]] = True
        prev[active] = ll
        active = active[~done]
        if active.size == 0:
            break
    order = np.argsort(means, axis=1, kind="stable")
    means, variances, weights = (np.take_along_axis(a, order, axis=1) for a in (means, variances, weights))
    lj = _log_joint_rows(x, means, variances, weights)
    totals = np.logaddexp(lj[..., 0], lj[..., 1]).sum(axis=1)
    return [GMM1D(means=means[r], variances=variances[r], weights=weights[r], log_likelihood=float(totals[r]),
                  n_iter=int(n_iter[r]), converged=bool(converged[r])) for r in range(m)]


def fit_gmm_1d(
    x: np.ndarray,
    *,
    max_iter: int = 100,
    tol: float = 1e-6,
    min_var: float = _MIN_VAR,
) -> GMM1D:
    """Fit a two-component Gaussian mixture to 1-D data by expectation-maximisation.

    Parameters:
        x: the sample, 1-D, at least two finite values.
        max_iter: most EM iterations (≥ 1).
        tol: convergence threshold on the change of the per-sample log-likelihood (> 0).
        min_var: floor on each component's variance; keeps EM away from the degenerate
            zero-variance solutions (a component collapsed on one point, or a constant sample).

    Returns:
        A :class:`GMM1D`, components sorted so that index 1 has the higher mean. Not converging
        within ``max_iter`` is reported by ``converged=False``, not raised: every EM iterate is a
        valid mixture with a likelihood at least that of the previous one.

    Raises:
        InvalidInputError: fewer than two values, non-finite values, or bad parameters.

    Notes:
        Initialisation is deterministic: the exact two-means split of the sorted sample (each
        group's mean, variance and share). Each iteration is one vectorised E step
        (responsibilities via log-sum-exp) and one M step (closed-form weighted means and
        variances, the latter floored at ``min_var``). The log-likelihood is non-decreasing.
        :func:`accept_masks` runs the same EM on many samples at once.

    References:
        A. P. Dempster, N. M. Laird, D. B. Rubin, "Maximum likelihood from incomplete data via the
        EM algorithm", JRSS B 39, 1977. C. M. Bishop, "Pattern Recognition and Machine Learning",
        §9.2, 2006.
    """
    x = _as_finite(x, "x")
    if x.size < 2:
        raise InvalidInputError(f"a two-component mixture needs at least 2 values, got {x.size}")
    if max_iter < 1:
        raise InvalidInputError(f"max_iter must be at least 1, got {max_iter}")
    if not tol > 0:
        raise InvalidInputError(f"tol must be positive, got {tol}")
    if not min_var > 0:
        raise InvalidInputError(f"min_var must be positive, got {min_var}")
    return _fit_rows(x[None, :], max_iter, tol, min_var)[0]


def _boundary(gmm: GMM1D) -> float | None:
    """Where the high component's posterior crosses ½ between the two means, or ``None`` if it doesn't."""

    def log_ratio(t: float) -> float:  # log p(high | t) − log p(low | t)
        lj = gmm.log_joint(np.array([t]))[0]
        return float(lj[1] - lj[0])

    from scipy.optimize import brentq  # here, not at import: scipy.optimize alone costs ~0.2 s of start-up

    lo, hi = float(gmm.means[0]), float(gmm.means[1])
    if not (hi > lo and log_ratio(lo) < 0.0 < log_ratio(hi)):
        return None
    return float(brentq(log_ratio, lo, hi, xtol=1e-12))


def _bic_prefers_two(x: np.ndarray, gmm: GMM1D) -> bool:
    """Whether BIC prefers the two-component fit over a single Gaussian (same variance floor)."""
    var1 = max(float(x.var()), _MIN_VAR)
    ll1 = -0.5 * x.size * (_LOG_2PI + math.log(var1) + 1.0)
    return 2.0 * (gmm.log_likelihood - ll1) > 3.0 * math.log(x.size)


def _top_above(x: np.ndarray, threshold: float, k: int) -> np.ndarray:
    """Mask of the ``k`` largest values strictly above ``threshold`` (ties broken by position)."""
    mask = np.zeros(x.size, dtype=bool)
    idx = np.flatnonzero(x > threshold)
    if idx.size > k:
        idx = idx[np.argsort(-x[idx], kind="stable")[:k]]
    mask[idx] = True
    return mask


def _decide(x: np.ndarray, gmm: GMM1D, min_separation: float, floor: float, fallback_top: int,
            max_accept_fraction: float) -> AcceptResult:
    """The accept set of one sample from its fitted mixture (the ``"gmm"`` or ``"fallback-unimodal"`` rule)."""
    boundary = _boundary(gmm) if gmm.ashman_d >= min_separation and _bic_prefers_two(x, gmm) else None
    if boundary is not None and np.count_nonzero(x > boundary) <= max_accept_fraction * x.size:
        threshold = max(boundary, floor)
        return AcceptResult(x > threshold, "gmm", threshold, gmm)
    threshold = max(float(x.mean() + x.std()), floor)
    return AcceptResult(_top_above(x, threshold, fallback_top), "fallback-unimodal", threshold, gmm)


def accept_masks(
    x: np.ndarray,
    *,
    min_candidates: int = 4,
    min_separation: float = 2.5,
    min_high_sim: float | None = None,
    fallback_top: int = 2,
    few_floor: float = 0.5,
    max_accept_fraction: float = 0.5,
) -> list[AcceptResult]:
    """:func:`accept_mask` for every row of ``x`` (``(m, n)``), the mixtures fitted together.

    Each row's result is the one :func:`accept_mask` gives for that row alone; fitting the rows in
    one vectorised EM makes associating a new session's units one pass instead of one fit per unit.

    Raises:
        InvalidInputError: ``x`` is not 2-D or holds NaN/inf, or a parameter is out of range.
    """
    arr = _as_finite(x, "similarities", ndim=2)
    if min_candidates < 2:
        raise InvalidInputError(f"min_candidates must be at least 2, got {min_candidates}")
    if fallback_top < 0:
        raise InvalidInputError(f"fallback_top must be non-negative, got {fallback_top}")
    if not 0.0 < max_accept_fraction <= 1.0:
        raise InvalidInputError(f"max_accept_fraction must be in (0, 1], got {max_accept_fraction}")
    floor = -math.inf if min_high_sim is None else float(min_high_sim)
    m, n = arr.shape
    if n == 0:
        return [AcceptResult(np.zeros(0, dtype=bool), "empty", math.inf, None) for _ in range(m)]
    if n < min_candidates:
        threshold = max(few_floor, floor)
        return [AcceptResult(_top_above(row, threshold, fallback_top), "fallback-few", threshold, None) for row in arr]
    if m == 0:
        return []
    gmms = _fit_rows(arr, 100, 1e-6, _MIN_VAR)
    return [_decide(row, g, min_separation, floor, fallback_top, max_accept_fraction) for row, g in zip(arr, gmms)]


def accept_mask(
    x: np.ndarray,
    *,
    min_candidates: int = 4,
    min_separation: float = 2.5,
    min_high_sim: float | None = None,
    fallback_top: int = 2,
    few_floor: float = 0.5,
    max_accept_fraction: float = 0.5,
) -> AcceptResult:
    """Pick the candidates whose similarity belongs to the high cluster of a two-Gaussian mixture.

    Parameters:
        x: candidate similarities, 1-D (any order).
        min_candidates: below this many values no mixture is fitted (``"fallback-few"``); ≥ 2.
        min_separation: least Ashman's D for the two components to count as separate modes
            (BIC must also prefer two components).
        min_high_sim: optional absolute floor; no value at or below it is ever accepted.
        fallback_top: most values a fallback accepts (≥ 0).
        few_floor: fixed floor of the ``"fallback-few"`` rule, in similarity units (the default
            suits cosine similarities).
        max_accept_fraction: most of the sample the ``"gmm"`` rule may accept, in (0, 1]; a
            larger "high" cluster counts as unimodal.

    Returns:
        An :class:`AcceptResult` (see the module docstring for the rules behind ``method``).

    Raises:
        InvalidInputError: ``x`` is not 1-D or holds NaN/inf, or a parameter is out of range.
    """
    x = _as_finite(x, "similarities")
    return accept_masks(x[None, :], min_candidates=min_candidates, min_separation=min_separation,
                        min_high_sim=min_high_sim, fallback_top=fallback_top, few_floor=few_floor,
                        max_accept_fraction=max_accept_fraction)[0]
