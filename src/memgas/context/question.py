"""The question a context is built for, read once: its words, how it is read, what it asks for.

Every rule of the builder that looks at the question reads this one value (:class:`Question`) instead of the text,
so the question is tokenized and matched against the tense and scope rules once per context.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from memgas.kernels.excerpt import query_terms
from memgas.kernels.tense import (
    asks_about_now,
    asks_about_replies,
    asks_about_the_past,
    asks_across_time,
    asks_for_a_summary,
)

__all__ = ["Question", "context_mode"]


def context_mode(query: str, when: datetime | None = None) -> str:
    """How a context for ``query`` is read: ``"time"`` (across the conversation: in time order), ``"past"`` (about an
    earlier state: most relevant first, nothing moved), ``"now"`` (how things stand now: the current state of each
    subject above what it replaced) or ``"relevance"`` (most relevant first, the newer of two excerpts about the
    same thing above the older).

    >>> [context_mode(q) for q in ("In what order did I plan the trip?", "Where did I live before?",
    ...                            "Where do I live these days?", "What does Melanie paint?")]
    ['time', 'past', 'now', 'relevance']
    """
    if asks_across_time(query):
        return "time"
    if asks_about_the_past(query, when):
        return "past"
    return "now" if asks_about_now(query, when) else "relevance"


@dataclass(frozen=True, slots=True)
class Question:
    """A question as the context builder reads it.

    Attributes:
        text: the question as asked.
        when: when it is asked (``None``: unknown).
        terms: its stemmed words less stop words (:func:`memgas.kernels.excerpt.query_terms`).
        mode: how the context is read (:func:`context_mode`).
        replies: it asks what the assistant said (:func:`memgas.kernels.tense.asks_about_replies`).
        summary: it asks for a summary (:func:`memgas.kernels.tense.asks_for_a_summary`).
    """

    text: str
    when: datetime | None
    terms: frozenset[str]
    mode: str
    replies: bool
    summary: bool

    @classmethod
    def read(cls, text: str, when: datetime | None = None) -> Question:
        """Read ``text`` (asked at ``when``) once.

        >>> q = Question.read("How did you recommend I store my bike now?")
        >>> q.mode, q.replies, q.summary, sorted(q.terms)
        ('now', True, False, ['bike', 'did', 'how', 'my', 'now', 'recommend', 'store', 'you'])
        """
        return cls(text, when, query_terms(text), context_mode(text, when), asks_about_replies(text),
                   asks_for_a_summary(text))

    @property
    def words_needed(self) -> int:
        """How many of the question's words a text must hold to be about what it asks: half of them, and two."""
        return max(2, -(-len(self.terms) // 2))
