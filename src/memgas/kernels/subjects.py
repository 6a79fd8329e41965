"""What a lasting statement is about, and what a request bears on: one of :data:`SUBJECTS`, read from the embedder's
sentence vector by a small softmax regression (:class:`~memgas.kernels.lasting.LastingModel`) that
``memgas bench usermodel`` fits and ships beside the detector (``subject_*`` in ``memgas/data/lasting.npz``).

The same model reads both: "I moved to Lisbon last month." is about ``home``, and "Find a nice restaurant near me."
bears on ``home`` (and on ``diet`` and ``food``), though the two sentences share no word and MiniLM puts them at a
cosine of 0.09. A user card takes the statements whose subject the request bears on (:func:`bearing`); on a subject
of :data:`ONE_VALUE` a person holds one value at a time (one home, one diet, one answer language), so the newer of two
statements that says it changes something replaces the older (:func:`same_subject`).

>>> probabilities = np.array([[0.1, 0.8, 0.1], [0.5, 0.3, 0.2]])
>>> subjects_of(probabilities, ("other", "home", "diet")).tolist()
['home', 'other']
"""

from __future__ import annotations

import re
from typing import Sequence

import numpy as np

__all__ = ["SUBJECTS", "OTHER", "ONE_VALUE", "BEARING", "RELATIVES", "subjects_of", "bearing", "same_subject",
           "concerns"]

#: The subjects, in the model's order; the first is none of the others.
SUBJECTS = ("other", "home", "diet", "food", "partner", "family", "work", "pets", "language", "name")
OTHER = SUBJECTS[0]
#: The subjects on which a person holds one value at a time: the newer statement that says it changes something
#: replaces the older ("I moved to Lisbon." after "I live in Portland."; "I'm with Jordan now." after "My partner
#: Sam loves jazz."). Not ``food`` (dislikes and allergies add up), ``family`` or ``pets`` (many members).
ONE_VALUE = frozenset({"home", "diet", "partner", "work", "language", "name"})
#: A request bears on a subject when the model gives it at least this probability (``memgas bench usermodel``
#: reports the share of held-out requests' subjects found at it and of what it finds that is right).
BEARING = 0.2
#: The people a speaker names by their relation to them ("my sister", "our dog"): a statement that opens with one is
#: about that person, not the speaker (:func:`concerns`).
RELATIVES = ("wife", "husband", "partner", "daughter", "son", "kid", "kids", "children", "mother", "mom", "mum",
             "father", "dad", "sister", "brother", "friend", "boss", "dog", "cat", "family", "girlfriend", "boyfriend",
             "fiance", "fiancé", "fiancee", "fiancée")
_OPENS_WITH_RELATIVE = re.compile(r"^\W*(?:(?:ok(?:ay)?|so|and|also|oh|btw|well|by the way)\b[,!]?\s+)*(?:my|our)\s+"
                                  rf"({'|'.join(sorted(RELATIVES, key=len, reverse=True))})\b", re.I)


def subjects_of(probabilities: np.ndarray, names: Sequence[str] = SUBJECTS) -> np.ndarray:
    """Each row's most probable subject's name (``probabilities``: one row per sentence, one column per subject)."""
    chosen: np.ndarray = np.asarray(names, dtype=object)[np.asarray(probabilities).argmax(axis=1)]
    return chosen


def bearing(probabilities: np.ndarray, names: Sequence[str] = SUBJECTS, floor: float = BEARING) -> frozenset[str]:
    """The subjects a request bears on: those of its ``probabilities`` (one row) at least ``floor``, but
    :data:`OTHER`.

    >>> sorted(bearing(np.array([0.05, 0.4, 0.3, 0.25]), ("other", "home", "diet", "food")))
    ['diet', 'food', 'home']
    """
    p = np.asarray(probabilities).ravel()
    return frozenset(n for n, x in zip(names, p.tolist()) if x >= floor and n != OTHER)


def same_subject(subjects: Sequence[str | None]) -> tuple[np.ndarray, np.ndarray]:
    """For statements with these ``subjects`` (``None``: unknown), whether each pair may speak of one thing (the same
    subject, or one unknown), and whether each pair holds one value between them (the same subject, of
    :data:`ONE_VALUE`).

    >>> may, one = same_subject(["home", "food", "home", None])
    >>> may.astype(int).tolist()
    [[1, 0, 1, 1], [0, 1, 0, 1], [1, 0, 1, 1], [1, 1, 1, 1]]
    >>> one.astype(int)[0].tolist()
    [1, 0, 1, 0]
    """
    s = np.asarray([x if x is not None else "" for x in subjects], dtype=object)
    known = s != ""
    equal = s[:, None] == s[None, :]
    may = equal | ~known[:, None] | ~known[None, :]
    one = equal & np.isin(s, list(ONE_VALUE))[:, None]
    return may, one


def concerns(sentence: str) -> str:
    """Whom a statement is about: ``""`` for its speaker, else the relation it opens with ("my sister", "btw our
    dog"), casefolded. "My sister lives in Berlin." says where the sister lives, not the speaker, so it never
    replaces the speaker's home, nor the speaker's it; "I moved in with my sister." is the speaker's.

    >>> [concerns(s) for s in ("My sister lives in Berlin.", "btw our Dog is called Rex", "I moved in with my sister.")]
    ['sister', 'dog', '']
    """
    found = _OPENS_WITH_RELATIVE.match(sentence)
    return found.group(1).casefold() if found else ""
