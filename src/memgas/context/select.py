"""Which messages of the best turns enter a context: a learned choice, not hand-set priorities (issue 60).

For a question the candidates are the messages of the method's :attr:`ContextOptions.learned_turns
<memgas.context.assemble.ContextOptions.learned_turns>` best turns. Each is described by :data:`FEATURES`: what the
method says of its turn (rank, relevance, its session's rank), the place today's hand-set rules gave it, who said it
and whether it only asks, its length, the question's words it holds, its session's age, and how the question reads.
A logistic regression (:class:`memgas.kernels.lasting.LastingModel`, two classes) gives each its probability of
being evidence, and the block takes them by probability per token: a short message that surely answers before a long
one that may. The messages of the turns after those follow in the hand-set order, so a large budget still fills.

The weights are data (``memgas/data/selection.npz``), fitted by ``memgas bench selection`` on the gold evidence of
LoCoMo's and BEAM's development conversations; that command reports them out of fold (BENCHMARKS.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from memgas.kernels.lasting import LastingModel

__all__ = ["FEATURES", "Selection", "rank_feature", "shipped"]

#: What describes a candidate message, in the model's order.
FEATURES = ("turn rank", "turn relevance", "session rank", "hand-set order", "a person's words", "only asks",
            "tokens (log)", "question words held", "age (newest 1)", "asks about the past", "asks about now",
            "asks what was replied", "said by whom the question names", "age, asking about now",
            "age, asking about the past")


def rank_feature(rank: float) -> float:
    """A rank (0 best) as a feature: ``1 / log2(2 + rank)``, 1 for the best, falling slowly.

    >>> rank_feature(0), round(rank_feature(2), 3)
    (1.0, 0.5)
    """
    return 1.0 / math.log2(2.0 + rank)


@dataclass(frozen=True, slots=True)
class Selection:
    """A learned choice's model: each candidate's probability of being evidence from its ``features`` (the evidence
    selection's :data:`FEATURES`; the user card's :data:`memgas.context.card.CARD_FEATURES`).

    >>> X = np.array([[1.0] + [0.0] * 14, [0.0] * 15] * 20, np.float32)
    >>> y = np.array([1, 0] * 20)
    >>> s = Selection.fit(X, y)
    >>> p = s.values(X[:2])
    >>> bool(p[0] > 0.5 > p[1])
    True
    """

    model: LastingModel
    #: what describes a candidate, in the model's order
    features: tuple[str, ...] = FEATURES

    @classmethod
    def fit(cls, X: np.ndarray, y: np.ndarray, l2: float = 1.0, features: tuple[str, ...] = FEATURES) -> Selection:
        """A selection fitted on candidates ``X`` (rows of ``features``) and whether each is evidence (``y``).

        Raises:
            ValueError: ``X`` not of ``features``' width, or ``X`` and ``y`` of different lengths.
        """
        X = np.asarray(X, np.float32)
        if X.ndim != 2 or X.shape[1] != len(features):
            raise ValueError(f"a selection is fitted on rows of {len(features)} features, not {X.shape}")
        return cls(LastingModel(l2=l2, class_weight=None).fit(X, np.asarray(y, np.int64), n_classes=2), features)

    def values(self, X: np.ndarray) -> np.ndarray:
        """Each candidate's probability of being evidence."""
        p: np.ndarray = self.model.predict_proba(X)[:, 1]
        return p

    def weights(self) -> dict[str, float]:
        """Each feature's weight towards evidence (log-odds per unit), by name."""
        assert self.model.coef_ is not None
        return {name: round(float(w), 3) for name, w in zip(self.features, self.model.coef_[1] - self.model.coef_[0])}

    def save(self, path: Path) -> None:
        """Write the weights (``numpy.savez``) with the feature names they are for."""
        arrays = {"features": np.array(self.features), **self.model.to_arrays()}
        np.savez(path, **arrays)  # type: ignore[arg-type]  # numpy's stub types the keywords as its own flags

    @classmethod
    def load(cls, source: Any = None, features: tuple[str, ...] = FEATURES, shipped: str = "selection.npz"
             ) -> Selection:
        """The weights of :meth:`save` from ``source`` (a path; ``None``: the file ``memgas/data/<shipped>``), for
        ``features``.

        Raises:
            ValueError: the file's weights are not for ``features`` (a model of another version).
        """
        from importlib import resources

        where = source if source is not None else resources.files("memgas").joinpath(f"data/{shipped}")
        with where.open("rb") as f:
            arrays = dict(np.load(f))
        names = tuple(str(n) for n in arrays.get("features", ()))
        if names != features:
            raise ValueError(f"the selection's weights are for the features {names}, not {features}")
        model = LastingModel.from_arrays(arrays)
        if model.coef_ is None or model.coef_.shape != (2, len(features)):
            raise ValueError("the selection's weights are not of two classes over its features")
        return cls(model, features)


@lru_cache(maxsize=1)
def shipped() -> Selection:
    """The selection ``memgas/data/selection.npz`` ships, read once."""
    return Selection.load()
