"""Whether a question asks about an earlier state of things or the present one (English).

When several sessions speak of the same thing at different times (a job, a count, where something is kept), a
question about the present wants the newest of them first; one about an earlier state ("where did I initially
keep...", "what did I use before...") wants its own order. The rule: a question that names an earlier time
(initially, before, used to, ...) asks about the past; so does one in the past tense (did, was, ...) unless it
names the present (now, currently, most recently, ...); every other question asks about the present.

>>> asks_about_the_past("Where do I currently keep my old sneakers?")
False
>>> asks_about_the_past("Where did I initially keep my old sneakers?")
True
"""

from __future__ import annotations

import re

__all__ = ["asks_about_the_past"]

#: Words that name an earlier time or state: the question is about the past whatever else it says.
_EARLIER = re.compile(
    r"\b(?:used to|initially|originally|at first|first|in the beginning|before|previously|formerly|back then|"
    r"earlier|prior to|when i (?:first |just )?(?:started|began|joined|moved|got))\b", re.IGNORECASE)
#: Past auxiliaries: the question is about the past unless it also names the present (what did I buy most recently).
_PAST_TENSE = re.compile(r"\b(?:did|was|were|had)\b", re.IGNORECASE)
_NOW = re.compile(r"\b(?:now|currently|current|these days|still|latest|most recent(?:ly)?|anymore|at the moment|"
                  r"so far|today)\b", re.IGNORECASE)


def asks_about_the_past(question: str) -> bool:
    """Whether ``question`` asks about an earlier state (see the module docstring): it names an earlier time, or it
    is in the past tense and names no present one."""
    if _EARLIER.search(question):
        return True
    return _PAST_TENSE.search(question) is not None and _NOW.search(question) is None
