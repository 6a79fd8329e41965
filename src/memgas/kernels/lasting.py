"""Whether a sentence someone says lasts: a small softmax regression over the embedder's sentence vector and a few
features of its words, fitted on the development data (``memgas bench usermodel``) and shipped as data.

A sentence is one of :data:`CLASSES`: ``passing`` (a request, a question, something said in passing), an
``instruction`` to the assistant that holds from then on ("Always answer in French."), a ``preference`` or
constraint ("I hate mushrooms.", "My daughter is allergic to shellfish.") or a lasting ``fact`` about a person
(home, work, family, diet, plans: "I moved to Lisbon last month."). The model reads the sentence's meaning (its unit
vector) beside what its words show (:func:`word_features`: the rules of :mod:`memgas.kernels.standing`, a question
mark, who it speaks of), so the phrase list is one feature among others, not the gate.

Pure numpy, an estimator in the manner of scikit-learn: :meth:`LastingModel.fit` and
:meth:`LastingModel.predict_proba`, its weights plain arrays (:meth:`LastingModel.to_arrays`).

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> X = np.vstack([rng.normal(-1, 0.3, (20, 2)), rng.normal(1, 0.3, (20, 2))])
>>> model = LastingModel(l2=0.1).fit(X, np.repeat([0, 1], 20), n_classes=2)
>>> model.predict(np.array([[-1.0, -1.0], [1.0, 1.0]])).tolist()
[0, 1]
"""

from __future__ import annotations

import re
from typing import Mapping

import numpy as np
from scipy.optimize import minimize

from memgas.kernels.standing import INSTRUCTION_RULE, PREFERENCE_RULE

__all__ = ["CLASSES", "PASSING", "LastingModel", "word_features", "WORD_FEATURES"]

#: The kinds a sentence is read as, in the model's order; the first passes, the others last.
CLASSES = ("passing", "instruction", "preference", "fact")
PASSING = 0

_FIRST_PERSON = re.compile(r"\b(?:I|I'm|I've|I'd|I'll|me|my|mine|myself)\b")
_RELATIVE = re.compile(r"\bmy (?:wife|husband|partner|daughter|son|kids?|children|mother|mom|mum|father|dad|"
                       r"sister|brother|friend|boss|dog|cat|family|girlfriend|boyfriend|fianc[ée]e?)\b", re.I)
_NAMED = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-Z][a-z]+\b")
_YOU = re.compile(r"\b(?:you|your)\b", re.I)
_REQUEST = re.compile(r"^(?:(?:ok(?:ay)?|so|and|also|now|hey|hi|please)[,!]?\s+)*(?:please\s+)?(?:can|could|would|will) you\b"
                      r"|^(?:(?:ok(?:ay)?|so|and|also|now|hey|hi|please)[,!]?\s+)*(?:please\s+)?(?:find|suggest|recommend|give|"
                      r"tell|show|write|help|make|list|explain|plan|book|draft|summari[sz]e|translate|check|create|"
                      r"describe|compare|search|look)\b", re.I)
_PAST_EVENT = re.compile(r"\b(?:yesterday|today|tonight|this morning|last (?:night|week(?:end)?)|just now)\b", re.I)

#: What :func:`word_features` reads, in its order.
WORD_FEATURES = ("instruction rule", "preference rule", "question", "a request", "first person", "a relative",
                 "a name", "you", "today or yesterday", "words / 40")


def word_features(sentence: str) -> np.ndarray:
    """What the words of one sentence show (:data:`WORD_FEATURES`), as numbers from 0 to 1.

    >>> word_features("Always answer in French.").tolist()[:3]
    [1.0, 0.0, 0.0]
    """
    text = sentence.strip()
    words = len(text.split())
    return np.array([
        INSTRUCTION_RULE.search(text) is not None, PREFERENCE_RULE.search(text) is not None, text.endswith("?"),
        _REQUEST.search(text) is not None, _FIRST_PERSON.search(text) is not None, _RELATIVE.search(text) is not None,
        _NAMED.search(text) is not None, _YOU.search(text) is not None, _PAST_EVENT.search(text) is not None,
        min(words, 120) / 40.0], dtype=np.float32)


class LastingModel:
    """A multinomial logistic regression (softmax over classes) with an L2 penalty, fitted by L-BFGS.

    Args:
        l2: the penalty on the weights (not the biases), times the number of examples' mean loss.
        class_weight: ``"balanced"`` weighs each class by the inverse of its share, so rare kinds count; ``None``
            weighs every example alike.
    """

    def __init__(self, l2: float = 1.0, class_weight: str | None = "balanced", threshold: float = 0.5) -> None:
        self.l2 = l2
        self.class_weight = class_weight
        #: the probability of a lasting kind (any class but the first) from which :meth:`predict` calls a row lasting
        self.threshold = threshold
        self.coef_: np.ndarray | None = None  # (n_classes, n_features)
        self.intercept_: np.ndarray | None = None  # (n_classes,)

    def fit(self, X: np.ndarray, y: np.ndarray, *, n_classes: int | None = None) -> LastingModel:
        """Fit on rows ``X`` with class numbers ``y``; returns the model.

        Raises:
            ValueError: ``X`` and ``y`` of different lengths, or no rows.
        """
        X = np.asarray(X, np.float64)
        y = np.asarray(y, np.int64)
        if len(X) != len(y) or not len(X):
            raise ValueError("fit needs as many labels as rows, and at least one row")
        k = int(n_classes if n_classes is not None else y.max() + 1)
        counts = np.bincount(y, minlength=k).astype(np.float64)
        weights = (len(y) / (k * np.maximum(counts, 1)))[y] if self.class_weight == "balanced" else np.ones(len(y))
        weights /= weights.sum()
        onehot = np.eye(k)[y]
        d = X.shape[1]

        def loss(theta: np.ndarray) -> tuple[float, np.ndarray]:
            W, b = theta[: k * d].reshape(k, d), theta[k * d:]
            logits = X @ W.T + b
            logits -= logits.max(axis=1, keepdims=True)
            logp = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
            value = -(weights * (onehot * logp).sum(axis=1)).sum() + 0.5 * self.l2 * (W * W).sum() / len(y)
            residual = (np.exp(logp) - onehot) * weights[:, None]
            grad_w = residual.T @ X + self.l2 * W / len(y)
            return float(value), np.concatenate([grad_w.ravel(), residual.sum(axis=0)])

        done = minimize(loss, np.zeros(k * d + k), jac=True, method="L-BFGS-B", options={"maxiter": 500})
        self.coef_ = done.x[: k * d].reshape(k, d).astype(np.float32)
        self.intercept_ = done.x[k * d:].astype(np.float32)
        return self

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        """Each row's probability of each class, ``(n, n_classes)``.

        Raises:
            ValueError: the model is not fitted, or ``X`` has another number of features.
        """
        if self.coef_ is None or self.intercept_ is None:
            raise ValueError("the model is not fitted")
        X = np.asarray(X, np.float32).reshape(-1, self.coef_.shape[1])
        logits = X @ self.coef_.T + self.intercept_
        logits -= logits.max(axis=1, keepdims=True)
        p = np.exp(logits)
        probabilities: np.ndarray = p / p.sum(axis=1, keepdims=True)
        return probabilities

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Each row's class: the first (passing) unless the other classes together reach :attr:`threshold`, then the
        most probable of those."""
        p = self.predict_proba(X)
        lasting = 1.0 - p[:, 0] >= self.threshold
        return np.where(lasting, 1 + p[:, 1:].argmax(axis=1), 0)

    def to_arrays(self) -> dict[str, np.ndarray]:
        """The weights as arrays (what ``numpy.savez`` keeps)."""
        if self.coef_ is None or self.intercept_ is None:
            raise ValueError("the model is not fitted")
        return {"coef": self.coef_, "intercept": self.intercept_, "threshold": np.array(self.threshold, np.float32)}

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray]) -> LastingModel:
        """A model with the weights of :meth:`to_arrays`.

        Raises:
            ValueError: the arrays are not a model's (missing, or of shapes that do not fit).
        """
        try:
            coef, intercept = np.asarray(arrays["coef"], np.float32), np.asarray(arrays["intercept"], np.float32)
        except KeyError as exc:
            raise ValueError(f"not a model's weights: no {exc}") from None
        if coef.ndim != 2 or intercept.shape != (coef.shape[0],):
            raise ValueError(f"not a model's weights: coef {coef.shape}, intercept {intercept.shape}")
        model = cls(threshold=float(arrays["threshold"]) if "threshold" in arrays else 0.5)
        model.coef_, model.intercept_ = coef, intercept
        return model
