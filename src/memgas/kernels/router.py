"""The entropy router: how much each granularity's similarities should count for a query.

MemGAS (Xu et al., 2025) turns a query's similarities to the units of granularity g into a
distribution p_g = softmax(s_g / λ), measures its Shannon entropy H_g, and weights granularity g
by w_g = (1/H_g) / Σ_g' (1/H_g'): a granularity whose similarities single out a few units
(low entropy) is more trusted than one that finds everything about equally similar.

Raw entropy is biased by unit counts: the uniform distribution over n units has entropy ln n,
and the turn granularity has roughly ten times more units than the session granularity, so raw
entropy favours the coarse granularities whatever the query. :func:`granularity_weights`
therefore divides by ln n_g by default (``normalize=True``), giving an entropy in [0, 1] that
measures *relative* concentration; ``normalize=False`` is the paper's formula as written.

Rules for the degenerate cases (both modes):

* A granularity with **one unit** gives no information about which unit is best, so it must not
  dominate (its raw entropy is 0, i.e. 1/H = ∞). It is treated as maximally uncertain: its
  normalised entropy is 1; in raw mode its entropy is the largest raw entropy among the other
  granularities (it ranks with the least confident one). If every granularity has a single unit,
  all get equal weight.
* A **one-hot** distribution over several units (softmax underflow at low temperature) is a
  genuinely confident granularity: its entropy is clamped at ``eps``, so it takes essentially
  all the weight; several such granularities share it equally.
* A granularity with **no units** gets weight 0 and takes no part in the normalisation. If all
  are empty, :class:`~memgas.core.errors.InvalidInputError` is raised.

Reference: Y. Xu et al., "Towards Multi-Granularity Memory Association and Selection for
Long-Term Conversational Agents", 2025.
"""

from __future__ import annotations

import math
from typing import Mapping

import numpy as np

from memgas.core.errors import InvalidInputError

__all__ = ["softmax", "entropy", "granularity_weights"]


def softmax(x: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    """Numerically stable softmax of ``x / temperature``.

    Parameters:
        x: scores, 1-D; may be empty (an empty array is returned).
        temperature: λ > 0; smaller is sharper.

    Returns:
        Probabilities, same shape as ``x``, summing to 1 (when not empty).

    Raises:
        InvalidInputError: ``x`` is not 1-D or not finite, or ``temperature`` is not positive and finite.
    """
    if not (temperature > 0 and math.isfinite(temperature)):
        raise InvalidInputError(f"temperature must be a positive finite number, got {temperature}")
    z = np.asarray(x, dtype=np.float64)
    if z.ndim != 1:
        raise InvalidInputError(f"scores must be a 1-D array, got shape {z.shape}")
    if not np.isfinite(z).all():
        raise InvalidInputError("scores contain NaN or infinite values")
    if z.size == 0:
        return z.copy()
    # Subtracting the max keeps exp() from overflowing; the result is unchanged.
    e = np.exp((z - z.max()) / temperature)
    weights: np.ndarray = e / e.sum()
    return weights


def entropy(p: np.ndarray) -> float:
    """Shannon entropy H = −Σ p ln p, in nats, with 0 · ln 0 = 0.

    Parameters:
        p: a probability vector (non-negative, summing to 1; not renormalised here).

    Returns:
        The entropy; 0 for an empty or one-hot vector, ln n for the uniform one.

    Raises:
        InvalidInputError: ``p`` has negative or non-finite entries.
    """
    q = np.asarray(p, dtype=np.float64)
    if not np.isfinite(q).all() or (q < 0).any():
        raise InvalidInputError("probabilities must be finite and non-negative")
    nz = q[q > 0]  # 0 · ln 0 = 0; numpy rather than scipy.special.entr, whose import costs ~0.1 s of start-up
    return float(-(nz * np.log(nz)).sum())


def granularity_weights(
    sims: Mapping[str, np.ndarray],
    *,
    temperature: float = 0.1,
    normalize: bool = True,
    eps: float = 1e-12,
) -> dict[str, float]:
    """Inverse-entropy weights of the granularities for one query.

    Parameters:
        sims: granularity name → the query's similarities to that granularity's units (1-D).
        temperature: softmax temperature λ applied to the similarities (the default suits
            cosine similarities, whose useful differences are a few tenths).
        normalize: divide each entropy by ln n_g (default), so granularities with very different
            unit counts are compared fairly; ``False`` uses the raw entropy, as in the paper.
        eps: floor on the entropy, so a one-hot distribution gets a finite (dominant) weight.

    Returns:
        Granularity → weight, in the order of ``sims``: non-negative, summing to 1. Empty
        granularities are present with weight 0. See the module docstring for the rules on
        single-unit, one-hot and empty granularities.

    Raises:
        InvalidInputError: every granularity is empty; a similarity vector is not 1-D or not
            finite; ``temperature`` or ``eps`` is not positive.
    """
    if not eps > 0:
        raise InvalidInputError(f"eps must be positive, got {eps}")
    entropies: dict[str, float] = {}
    single: list[str] = []
    for g, s in sims.items():
        p = softmax(s, temperature)
        if p.size == 0:
            continue
        if p.size == 1:
            single.append(g)
            continue
        h = entropy(p)
        entropies[g] = h / math.log(p.size) if normalize else h
    if not entropies and not single:
        raise InvalidInputError("no granularity has any unit to weight")
    # A single unit carries no ranking information: as uncertain as the least confident option.
    h_single = 1.0 if normalize or not entropies else max(entropies.values())
    entropies.update({g: h_single for g in single})
    inv = {g: 1.0 / max(h, eps) for g, h in entropies.items()}
    total = sum(inv.values())
    return {g: inv[g] / total if g in inv else 0.0 for g in sims}
