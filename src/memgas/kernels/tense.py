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

A question about how things stand now (:func:`asks_about_now`) is one about the present that names the present or
is asked in the first person: the memory is the asker's, so "where do I keep..." asks about a state that changes,
while a present-tense question about someone else with no time named ("what instruments does Melanie play?") mostly
asks about something said once.

>>> asks_about_now("Where do I keep my old sneakers?"), asks_about_now("What instruments does Melanie play?")
(True, False)
>>> asks_about_now("What book is Jon currently reading?")
True
"""

from __future__ import annotations

import re

__all__ = ["asks_about_the_past", "asks_about_now"]

#: Words that name an earlier time or state: the question is about the past whatever else it says.
_EARLIER = re.compile(
    r"\b(?:used to|initially|originally|at first|first|in the beginning|before|previously|formerly|back then|"
    r"earlier|prior to|when i (?:first |just )?(?:started|began|joined|moved|got))\b", re.IGNORECASE)
#: Past auxiliaries: the question is about the past unless it also names the present (what did I buy most recently).
_PAST_TENSE = re.compile(r"\b(?:did|was|were|had)\b", re.IGNORECASE)
#: The asker speaking of themselves (or of a "we" they belong to).
_FIRST_PERSON = re.compile(r"\b(?:i|me|my|mine|we|us|our|ours)\b", re.IGNORECASE)
_NOW = re.compile(r"\b(?:now|currently|current|these days|still|latest|most recent(?:ly)?|anymore|at the moment|"
                  r"so far|today)\b", re.IGNORECASE)


def asks_about_the_past(question: str) -> bool:
    """Whether ``question`` asks about an earlier state (see the module docstring): it names an earlier time, or it
    is in the past tense and names no present one."""
    if _EARLIER.search(question):
        return True
    return _PAST_TENSE.search(question) is not None and _NOW.search(question) is None


def asks_about_now(question: str) -> bool:
    """Whether ``question`` asks how things stand now (see the module docstring): not about the past, and it names
    the present or is asked in the first person."""
    if asks_about_the_past(question):
        return False
    return _NOW.search(question) is not None or _FIRST_PERSON.search(question) is not None
