"""Whether a question asks about an earlier state of things or the present one (English).

When several sessions speak of the same thing at different times (a job, a count, where something is kept), a
question about the present wants the newest of them first; one about an earlier state ("where did I initially
keep...", "what did I use before...") wants its own order. The rule: a question that names an earlier time
(initially, before, used to, ...) asks about the past; so does one in the past tense (did, was, ...) unless it
names the present (now, currently, most recently, ...); and so does one that names a time which had ended when it
was asked ("what was Jolene currently doing in June 2023?", given the time it is asked); every other question asks
about the present. "So far" asks about everything up to now, not the latest state, so it names no present.

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
>>> from datetime import datetime
>>> asks_about_now("What is Jon currently reading in June 2023?", datetime(2023, 10, 1))
False
>>> asks_about_now("Which US cities did John mention?"), asks_about_now("Where should we go?")
(False, True)
"""

from __future__ import annotations

import re
from datetime import datetime

from memgas.core.validate import naive_utc
from memgas.kernels.temporal import parse_time_window

__all__ = ["asks_about_the_past", "asks_about_now", "asks_across_time", "asks_about_replies", "asks_for_a_summary"]

#: Words that name an earlier time or state: the question is about the past whatever else it says.
_EARLIER = re.compile(
    r"\b(?:used to|initially|originally|at first|first|in the beginning|before|previously|formerly|back then|"
    r"earlier|prior to|when i (?:first |just )?(?:started|began|joined|moved|got))\b", re.IGNORECASE)
#: Past auxiliaries: the question is about the past unless it also names the present (what did I buy most recently).
_PAST_TENSE = re.compile(r"\b(?:did|was|were|had)\b", re.IGNORECASE)
#: The asker speaking of themselves (or of a "we" they belong to); "US" in capitals is the country.
_FIRST_PERSON = re.compile(r"(?i:\b(?:i|me|my|mine|we|our|ours)\b)|\b[Uu]s\b")
_NOW = re.compile(r"\b(?:now|currently|current|these days|still|latest|most recent(?:ly)?|anymore|at the moment|"
                  r"today)\b", re.IGNORECASE)


def asks_about_the_past(question: str, now: datetime | None = None) -> bool:
    """Whether ``question`` asks about an earlier state (see the module docstring): it names an earlier time, or it
    is in the past tense and names no present one, or (given ``now``, when it is asked) it names a time that had
    ended by then."""
    if _EARLIER.search(question):
        return True
    if now is not None:
        window = parse_time_window(question, now)
        if window is not None and window.end <= naive_utc(now):
            return True
    return _PAST_TENSE.search(question) is not None and _NOW.search(question) is None


def asks_about_now(question: str, now: datetime | None = None) -> bool:
    """Whether ``question`` asks how things stand now (see the module docstring): not about the past (given ``now``,
    it names no time that had ended by then), and it names the present or is asked in the first person."""
    if asks_about_the_past(question, now):
        return False
    return _NOW.search(question) is not None or _FIRST_PERSON.search(question) is not None


#: A question that asks for the course of something over the conversation: an order, a summary, a history.
_ACROSS = re.compile(
    r"\b(?:in (?:what|which|the) order|order in which|chronolog\w*|timeline|sequence of|summar\w*|recap|overview|"
    r"(?:over the course of|throughout|across) (?:our|my|the|all|these|those|all of our|all our) "
    r"(?:conversations?|sessions?|discussions?|chats?|talks?|exchanges?|time|months|weeks|years)|"
    r"(?:has|have) (?:\w+ )?(?:progressed|evolved|developed|changed) (?:over|since|so far|throughout)|"
    r"(?:progress|history|evolution) of)\b", re.IGNORECASE)


def asks_across_time(question: str) -> bool:
    """Whether ``question`` asks for the course of something over the conversation (an order of events, a summary,
    how it developed): its evidence is spread over many sessions and is read in time order.

    >>> asks_across_time("Can you list the order in which I brought up these topics?")
    True
    >>> asks_across_time("Give me a summary of how my project progressed.")
    True
    >>> asks_across_time("What is my locker code?")
    False
    """
    return _ACROSS.search(question) is not None


#: The asker asking what the assistant said: "what did you recommend", "how did you suggest", "your advice".
_REPLIES = re.compile(
    r"\b(?:you|your)\b(?:\s+\w+){0,2}?\s+(?:recommend|suggest|advis|said|say|told|tell|explain|mention|propos|"
    r"outline|describ|walk(?:ed)? me|show(?:ed)? me|help(?:ed)? me|provid)\w*|\byour (?:advice|suggestion|"
    r"recommendation|explanation|answer)s?\b", re.IGNORECASE)


def asks_about_replies(question: str) -> bool:
    """Whether ``question`` asks what the assistant said earlier (a recommendation, an explanation), so that its
    replies are evidence as much as the user's own words.

    >>> asks_about_replies("How did you recommend managing the flow of requests?")
    True
    >>> asks_about_replies("What is my locker code?")
    False
    """
    return _REPLIES.search(question) is not None


_SUMMARY = re.compile(r"\b(?:summar\w*|recap|overview|sum up|what (?:have|did) we (?:cover|discuss)\w*)\b",
                      re.IGNORECASE)


def asks_for_a_summary(question: str) -> bool:
    """Whether ``question`` asks for a summary (of what was said on both sides), rather than for the order of what
    the asker brought up.

    >>> asks_for_a_summary("Give me a summary of how my budget tracker progressed."), asks_for_a_summary(
    ...     "In what order did I bring up these topics?")
    (True, False)
    """
    return _SUMMARY.search(question) is not None
