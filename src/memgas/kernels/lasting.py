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

from memgas.kernels.standing import INSTRUCTION_RULE, PREFERENCE_RULE
from memgas.kernels.subjects import RELATIVES

__all__ = ["CLASSES", "PASSING", "LastingModel", "word_features", "WORD_FEATURES", "pair_features", "PAIR_FEATURES",
           "replacements", "states_a_change", "changes_an_instruction", "speaks_of_a_person"]

#: The kinds a sentence is read as, in the model's order; the first passes, the others last.
CLASSES = ("passing", "instruction", "preference", "fact")
PASSING = 0

_FIRST_PERSON = re.compile(r"\b(?:I|I'm|I've|I'd|I'll|me|my|mine|myself)\b")
_RELATIVE = re.compile(rf"\bmy (?:{'|'.join(RELATIVES)})\b", re.I)
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


_PERSON = re.compile(r"\b(?:I|I'm|I've|I'd|I'll|me|my|mine|myself|we|we're|we've|our|ours|us)\b", re.I)
# a sentence whose subject is a person by name: "Erin is vegetarian.", "Tom (my husband) hates flying."
_NAME_SUBJECT = re.compile(r"^\W*[A-Z][a-z]+(?:\s+\([^)]*\))?\s+(?:is|was|has|had|loves|likes|hates|prefers|enjoys|"
                           r"works|lives|can't|cannot|won't|doesn't|does not|never|always|eats|drinks|avoids|needs)\b")


def speaks_of_a_person(sentence: str) -> bool:
    """Whether ``sentence`` is about a person: its speaker ("I", "my", "we"), a relative, or someone it names. A
    preference or a lasting fact always is; a line of a pasted text is mostly not ("Enzymes are made up of
    proteins.", a subtitle's "the people you love"), however much it sounds like one to the detector.

    >>> [speaks_of_a_person(s) for s in ("Peppers make me gag.", "Erin is vegetarian.", "the people you love",
    ...                                  "Add cheese crumbles as garnishes.", "Our bodies need enzymes.")]
    [True, True, False, False, True]
    """
    return bool(_PERSON.search(sentence) or _RELATIVE.search(sentence) or _NAMED.search(sentence)
                or _NAME_SUBJECT.search(sentence))


_RETRACTION = re.compile(r"\b(?:not|no longer|n't)\b[^.!?]*\b(?:anymore|any more|again)\b|\bno longer\b|\b(?:stopped|quit|"
                         r"gave up|moved|moving|switched|switching|changed|instead|now|these days|from now on|new)\b",
                         re.I)
_CONTENT = re.compile(r"[a-z][a-z']{2,}")
_STOP = frozenset("the and for you your with that this from have has had are was were not but all any can will "
                  "would should could just also very really about into than then them they their there what when "
                  "where which who why how its it's i'm i've i'd i'll my me".split())

#: What :func:`pair_features` reads beside the two vectors' product, in its order.
PAIR_FEATURES = ("cosine", "shared words", "the newer one changes or retracts", "the same kind")
#: The kind a pair's "same kind" reads: an instruction to the assistant, or something about the person (a preference
#: and a fact are one here: the detector tells them apart least well, and a fact replaces a preference as well).
INSTRUCTION_CLASS = CLASSES.index("instruction")


def pair_features(older: np.ndarray, newer: np.ndarray, older_text: str, newer_text: str,
                  same_kind: bool) -> np.ndarray:
    """What says whether ``newer`` (a later lasting statement) replaces ``older``: the two unit vectors' elementwise
    product (which dimensions they agree on: what they are about), then :data:`PAIR_FEATURES`.

    >>> v = np.array([0.6, 0.8], np.float32)
    >>> [round(x, 2) for x in pair_features(v, v, "I live in Leeds.", "I moved to York.", True).tolist()]
    [0.36, 0.64, 1.0, 0.0, 1.0, 1.0]
    """
    words = [set(_CONTENT.findall(t.lower())) - _STOP for t in (older_text, newer_text)]
    shared = len(words[0] & words[1]) / max(len(words[0] | words[1]), 1)
    extra = [float(older @ newer), shared, states_a_change(newer_text), same_kind]
    return np.concatenate([older * newer, np.array(extra, np.float32)]).astype(np.float32)


def states_a_change(text: str) -> bool:
    """Whether ``text`` says that something changes or no longer holds (the supersession model's
    "the newer one changes or retracts" feature).

    >>> states_a_change("Always answer in English from now on."), states_a_change("Always answer in English.")
    (True, False)
    >>> states_a_change("I'm not vegetarian anymore.")
    True
    """
    return _RETRACTION.search(text) is not None


#: :data:`_RETRACTION` less the words that mark a change of the person's life but, in an instruction, name what it is
#: about ("new", "moved": "Always confirm start dates when I ask about new job roles." changes no instruction).
_INSTRUCTION_CHANGE = re.compile(r"\b(?:not|no longer|n't)\b[^.!?]*\b(?:anymore|any more|again)\b|\bno longer\b|"
                                 r"\b(?:stopped|stop|quit|gave up|switched|switching|changed|instead|now|these days|"
                                 r"from now on|going forward)\b", re.I)


def changes_an_instruction(text: str) -> bool:
    """Whether an instruction says it changes how the assistant is to answer, so that it may replace an earlier one.

    >>> changes_an_instruction("Always answer in Spanish from now on."), changes_an_instruction("Use tabs instead.")
    (True, True)
    >>> changes_an_instruction("Always confirm exact start dates when I ask about new job roles.")
    False
    """
    return _INSTRUCTION_CHANGE.search(text) is not None


def replacements(model: LastingModel, vectors: np.ndarray, texts: list[str], kinds: list[str]) -> np.ndarray:
    """Which of ``texts`` (lasting statements, oldest first, with their unit ``vectors`` and ``kinds``) a later one
    replaces, as a matrix (``[i, j]``: the later ``j`` replaces ``i``), by the supersession ``model`` (a pair is of
    the same kind when both or neither are instructions, :data:`INSTRUCTION_CLASS`) (two classes over :func:`pair_features`): the pair model read for every
    pair at once, its product part as ``(V * w) @ V.T``.

    >>> v = np.eye(3, dtype=np.float32)
    >>> m = LastingModel.from_arrays({"coef": np.zeros((2, 3 + len(PAIR_FEATURES)), np.float32),
    ...                               "intercept": np.array([0.0, -5.0], np.float32)})
    >>> m.coef_[1, 3] = 10.0  # the cosine: the same statement said again replaces it
    >>> replacements(m, np.stack([v[0], v[1], v[0]]), ["a", "b", "a"], ["fact"] * 3).astype(int).tolist()
    [[0, 0, 1], [0, 0, 0], [0, 0, 0]]
    """
    n = len(texts)
    if n < 2 or model.coef_ is None or model.intercept_ is None:
        return np.zeros((n, n), bool)
    w = model.coef_[1] - model.coef_[0]
    dim = vectors.shape[1]
    wp, (w_cos, w_shared, w_change, w_kind) = w[:dim], w[dim:]
    cos = vectors @ vectors.T
    logit = (vectors * wp) @ vectors.T + w_cos * cos + (model.intercept_[1] - model.intercept_[0])
    words = [set(_CONTENT.findall(t.lower())) - _STOP for t in texts]
    vocabulary = {word: i for i, word in enumerate(sorted(set().union(*words)))}
    bag = np.zeros((n, max(len(vocabulary), 1)), np.float32)
    for row, found in enumerate(words):
        bag[row, [vocabulary[x] for x in found]] = 1.0
    shared = bag @ bag.T
    sizes = bag.sum(axis=1)
    logit += w_shared * shared / np.maximum(sizes[:, None] + sizes[None, :] - shared, 1.0)
    logit += w_change * np.array([states_a_change(t) for t in texts], np.float32)[None, :]
    told = np.array([k == CLASSES[INSTRUCTION_CLASS] for k in kinds])
    logit += w_kind * (told[:, None] == told[None, :])
    later = np.triu(np.ones((n, n), bool), 1)
    probability = 1.0 / (1.0 + np.exp(-logit))
    chosen: np.ndarray = (probability >= model.threshold) & later
    return chosen


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
        from scipy.optimize import minimize  # only training needs it: a memory reading weights starts without it

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
