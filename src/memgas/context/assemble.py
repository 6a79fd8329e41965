"""A context block from chosen excerpts: what fits the budget, in which order, and how it reads.

Pure functions over :class:`Excerpt` values (no store, no model). The block has up to two parts:

* **What holds now about the user**: their instructions, preferences and lasting facts, the most relevant first,
  within :attr:`ContextOptions.profile_share` of the budget;
* **Memories**: one line per excerpt, ``[n] date · session · speaker: text``, taken by priority until the budget is
  spent, then ordered as the question asks (:func:`order_excerpts`): most relevant first, the newer of two
  excerpts about the same thing above the older (marked ``(earlier)``), or in time order for questions that ask
  across the conversation.

Tokens are counted by :func:`memgas.kernels.text.context_tokens` (one per four characters, rounded up).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Callable, Iterable, Sequence

import numpy as np

from memgas.kernels.text import chars_tokens

__all__ = ["Excerpt", "ContextOptions", "fill", "take", "line_cost", "Pending", "least_cost", "order_excerpts", "render", "PROFILE_HEADER", "MEMORY_HEADERS"]

PROFILE_HEADER = "What holds now about the user (their latest word on each subject):"
MEMORY_HEADERS = {
    "now": "Memories from earlier conversations (the current state first; a newer one above what it updates):",
    "relevance": "Memories from earlier conversations (most relevant first; a newer one above what it updates):",
    "time": "Memories from earlier conversations (in time order):",
    "past": "Memories from earlier conversations (most relevant first):",
}


@dataclass(frozen=True, slots=True)
class ContextOptions:
    """How a context is chosen; the defaults are the measured ones (BENCHMARKS.md, "context").

    Attributes:
        profile: head the block with the standing instructions and preferences that apply.
        current_first: of two excerpts about the same thing, the newer first (:func:`order_excerpts`).
        timelines: answer a question across the conversation with a timeline (else as any other question).
        floor: a turn whose relevance (cosine with the query) is below this stays out, so that unrelated
            sessions do not fill the block.
        user_chars: a user message longer than this shows its best part (:func:`memgas.kernels.excerpt.excerpt`).
        reply_chars: the most of a reply shown; a reply is shown only where it holds a query term.
        reply_lag: a reply is taken after the user messages of this many better turns.
        timeline_chars: the most of each message shown when the question asks across the conversation.
        profile_share: the share of the budget the standing statements may take.
        profile_floor: a standing statement less relevant than this (cosine with the query) is not shown, unless
            the request bears on its subject.
        bearing_lead: of each subject a request bears on (:func:`memgas.kernels.subjects.bearing`), this many of its
            statements, the nearest the request, lead the card (without the learned card; with it, a feature); the subject's others are shown by their cosine (every
            one may be, whatever its cosine). A memory of thousands of statements holds dozens on work or food: all
            of them first left no room for the statement nearest the request.
        card_cost: the card takes its statements by relevance over their line's tokens to this power: a short
            instruction a little less relevant than a long preference is shown before it where the card has room
            for one of the two (``0``: by relevance alone).
        learned_card: choose the card's statements by the learned card model (:mod:`memgas.context.card`: each
            statement's probability of being what the request needs, from its relevance, its subject, its kind,
            its length and its session's rank among the method's); else by their cosine and the subject the request
            bears on (``profile_floor``, ``bearing_lead``).
        same_subject: two excerpts (both relevant to the query) whose turns' vectors have at least this cosine speak
            of the same thing.
        now_margin: a question about how things stand now reads first, newest first, the excerpts whose turns' cosine
            with it is within this of the best one's.
        turns: the most turns read for one context.
        beyond_k: where the ``k`` most relevant sessions leave budget, the relevant turns of other sessions fill it,
            after every turn of those ``k`` (``False``: only the ``k`` sessions).
        timeline_floor: the floor of a question across the conversation: its subject is the conversation itself,
            and its evidence (where each part of it went) is often unlike the question's words.
        timeline_margin: a timeline spreads over the sessions whose best turn is at most this much less relevant
            than the best of all; the others' turns come after (``inf``: every session).
        timeline_sessions: of those sessions, a timeline spreads over this many, the best by their turns' scores
            (reading each through as far as the budget allows); the others' turns come after. A memory of many
            people or subjects has dozens of sessions near the best, and one line of each left none for the
            course of the subject asked about.
        timeline_card_instructions: the card of a question across the conversation holds the standing instructions
            only (how to answer); the preferences and facts said along the way are lines of the timeline, in their
            place, where they are relevant to it.
        learned: choose the evidence by the learned selection (:mod:`memgas.context.select`; else by the hand-set
            priorities: a person's words by their turn's rank, a reply ``reply_lag`` turns later).
        learned_turns: with a learned selection (:mod:`memgas.context.select`), the messages of this many of the
            best turns (by the method's score) are its candidates at a budget of 1,000 tokens or less, one turn more
            per 50 tokens beyond, at most ``learned_turns_max``; those of the others follow in the hand-set order.
        learned_turns_max: the most turns a learned selection reads (its weights were fitted on this many).
        learned_fill: where the learned selection's candidates leave at least this share of the budget, the other
            turns' messages fill it in the hand-set order (less is left as it is: reading more turns for a line or
            two costs more than it brings).
        learned_floor: the learned selection's candidates are turns of at least this relevance, or that hold half
            the question's words (its features weigh the relevance; a floor set by the caller holds for both).
    """

    profile: bool = True
    current_first: bool = True
    timelines: bool = True
    floor: float = 0.2
    user_chars: int = 600
    reply_chars: int = 400
    reply_lag: int = 3
    timeline_chars: int = 320
    profile_share: float = 0.2
    profile_floor: float = 0.1
    bearing_lead: int = 2
    card_cost: float = 0.3
    learned_card: bool = True
    same_subject: float = 0.45
    now_margin: float = 0.1
    timeline_floor: float = 0.1
    timeline_margin: float = 0.2
    timeline_sessions: int = 8
    timeline_card_instructions: bool = True
    turns: int = 150
    beyond_k: bool = True
    learned: bool = True
    learned_turns: int = 40
    learned_turns_max: int = 60
    learned_fill: float = 0.1
    learned_floor: float = 0.15


@dataclass(frozen=True, slots=True)
class Excerpt:
    """One message, or its best part, as a context shows it.

    ``priority`` orders the taking (lower first); ``when`` orders in time (session time as seconds, then message
    position); ``vector`` is its turn's unit vector (for "the same thing"), ``None`` where unknown; ``turn`` is the
    turn's index in its session (-1: unknown); ``words`` are the query's words the shown text holds; ``asks``:
    the message only asks (:func:`memgas.kernels.people.only_asks`), so it replaces nothing said before it;
    ``relevance`` is its turn's cosine with the question (how a question about now orders).
    """

    session_id: str
    message: int
    speaker: str
    text: str
    timestamp: datetime | None
    priority: float
    when: tuple[float, int]
    vector: np.ndarray | None = None
    turn: int = -1
    words: frozenset[str] = frozenset()
    asks: bool = False
    relevance: float = 0.0
    #: the subjects of the lasting statements the message holds (:meth:`memgas.context.profile.Profiles.marks`):
    #: two lines of disjoint subjects never speak of one thing
    subjects: frozenset[str] = frozenset()
    #: the message holds a lasting statement that a newer one replaced: its line is marked ``(earlier)``
    replaced: bool = False

    def line(self, n: int, earlier: bool = False) -> str:
        """The excerpt as one numbered line of the block."""
        date = f"{self.timestamp:%Y-%m-%d}" if self.timestamp else "undated"
        mark = " (earlier)" if earlier else ""
        return f"[{n}] {date} · {self.session_id}{mark} · {self.speaker}: {self.text}"

    def line_chars(self, text_chars: int | None = None) -> int:
        """How long :meth:`line` is, numbered ``[99]`` and marked ``(earlier)`` (the most a budget counts for it),
        with a text of ``text_chars`` characters (``None``: its own), worked out without making the line: a
        context counts some hundred lines for every one it shows.

        >>> e = Excerpt("s1", 0, "user", "I moved.", None, 0, (0, 0))
        >>> e.line_chars() == len(e.line(99, True)), e.line_chars(0) == len(e.line(99, True)) - 8
        (True, True)
        """
        stamp = self.timestamp
        date = 7 if not stamp else 10 if 1000 <= stamp.year else len(f"{stamp:%Y-%m-%d}")  # "undated", 2023-05-20
        return (23 + date + len(self.session_id) + len(self.speaker)
                + (len(self.text) if text_chars is None else text_chars))


def fill(candidates: Sequence[Excerpt], budget: int) -> list[Excerpt]:
    """The candidates taken by priority (then given order) while their lines fit ``budget`` tokens (:func:`take`).

    >>> a = Excerpt("s", 0, "user", "x" * 40, None, 0, (0, 0))
    >>> b = Excerpt("s", 1, "user", "y" * 400, None, 1, (0, 1))
    >>> c = Excerpt("s", 2, "user", "z" * 20, None, 2, (0, 2))
    >>> [e.message for e in fill([c, b, a], 40)]
    [0, 2]
    """
    ordered: list[Excerpt] = sorted(candidates, key=lambda e: e.priority)
    return take(ordered, budget)


@dataclass(frozen=True, slots=True)
class Pending:
    """An excerpt not cut yet: the least its line may cost (tokens, with its line break) and how to make it
    (``make()``: the excerpt, or ``None`` where it is not to be shown)."""

    least: int
    make: Callable[[], Excerpt | None]


def least_cost(shown: Excerpt, content: str, cap: int) -> int:
    """The least that ``shown``'s line (with its line break) costs once its text is ``content`` cut to at most ``cap``
    characters (:func:`memgas.kernels.excerpt.excerpt`): exact for a message that fits whole; for a longer one, its
    cut taken as at least half of ``cap`` (a cut grows its window of sentences to about ``cap`` at word boundaries,
    and is shorter only where most of it is white space).

    >>> e = Excerpt("s", 0, "user", "", None, 0, (0, 0))
    >>> least_cost(e, "short", 600), least_cost(e, "x" * 900, 600)
    (11, 85)
    """
    shown_chars = len(content.strip()) if len(content) <= cap else cap // 2
    return chars_tokens(shown.line_chars(shown_chars)) + 1


def line_cost(e: Excerpt) -> int:
    """What ``e``'s line costs in a block, in tokens, with its line break (numbered and marked at the most)."""
    return chars_tokens(e.line_chars()) + 1


def take(ordered: Iterable[Excerpt | Pending], budget: int) -> list[Excerpt]:
    """The excerpts taken in the order given while their lines fit ``budget`` tokens; one that does not fit is passed
    over for smaller ones after it. No message twice. Reads ``ordered`` only until the budget is spent (less than
    12 tokens left), and makes a :class:`Pending` excerpt only where its least cost fits what is left, so the work
    follows what the block shows.

    >>> lazy = iter([Excerpt("s", m, "user", "x" * 20, None, m, (0, m)) for m in range(9)])
    >>> [e.message for e in take(lazy, 40)], next(lazy).message  # the third is left unread
    ([0, 1], 2)
    """
    taken: list[Excerpt] = []
    seen: set[tuple[str, int]] = set()
    left = budget
    for e in ordered:
        if isinstance(e, Pending):
            made = e.make() if e.least <= left else None
            if made is None:
                continue
            e = made
        if (e.session_id, e.message) in seen:
            continue
        cost = line_cost(e)
        if cost <= left:
            taken.append(e)
            seen.add((e.session_id, e.message))
            left -= cost
        if left < 12:
            break
    return taken


def order_excerpts(taken: Sequence[Excerpt], mode: str, same_subject: float, shared_words: int = 0,
                   margin: float = 0.1) -> list[tuple[Excerpt, bool]]:
    """The taken excerpts in reading order, each with whether it is marked ``(earlier)``.

    ``mode`` ``"time"``: oldest first. ``"past"``: by priority. ``"relevance"``: by priority, except that an excerpt
    moves up to just above the best older excerpt about the same thing, which is then marked ``(earlier)``: the
    current state is read before what it replaced. ``"now"`` (a question about how things stand now): as
    ``"relevance"``, but the excerpts as relevant as the best one (their turns' cosine with the question within
    ``margin`` of it) and those that replace them lead, newest first (a turn's messages in their order): an
    unrelated newer excerpt does not. Only a line said later replaces one (:func:`_later`: of a later session, or a
    few turns on in the same one; the lines of sessions of one time are one state), and never a message that only
    asks: such messages read after every other (a question is no evidence of its answer). Two excerpts (both chosen for the question) speak of the
    same thing by meaning (their turns' vectors at cosine ≥ ``same_subject``) or by the question's words (at least
    ``shared_words`` of them in both; 0: not by words): "the commits merged into main" said in a message about
    authentication updates what a message about releases said.

    >>> old = Excerpt("s1", 0, "user", "I live in Buckman", None, 0, (1.0, 0), np.array([1.0, 0.0]))
    >>> new = Excerpt("s2", 0, "user", "I moved to Sellwood", None, 5, (2.0, 0), np.array([0.8, 0.6]))
    >>> [(e.text, early) for e, early in order_excerpts([old, new], "relevance", 0.6)]
    [('I moved to Sellwood', False), ('I live in Buckman', True)]
    """
    if mode == "time":
        return [(e, False) for e in sorted(taken, key=lambda e: e.when)]
    ranked = sorted(taken, key=lambda e: e.priority)
    earlier = [False] * len(ranked)
    replaced_by: dict[int, list[int]] = {}
    order = list(range(len(ranked)))
    if mode in ("relevance", "now"):
        key = [float(i) for i in order]
        for i, a in enumerate(ranked):
            for j, b in enumerate(ranked):
                if b.asks or not _later(b, a):  # b must say something, later than a
                    continue
                if a.subjects and b.subjects and a.subjects.isdisjoint(b.subjects):
                    continue  # statements about different subjects ("I hate mushrooms", "I moved to Lisbon")
                by_meaning = (a.vector is not None and b.vector is not None
                              and float(a.vector @ b.vector) >= same_subject)
                if by_meaning or 0 < shared_words <= len(a.words & b.words):  # b: newer, about the same thing as a
                    earlier[i] = True
                    replaced_by.setdefault(i, []).append(j)
                    key[j] = min(key[j], key[i] - 0.5)
        order.sort(key=lambda i: (key[i], -ranked[i].when[0], -ranked[i].when[1]))
    if mode == "now":  # the newest first of what is as relevant as the best and of what replaced it
        top = max((e.relevance for e in ranked if not e.asks), default=0.0)
        lead = {i for i in order if not ranked[i].asks and ranked[i].relevance >= top - margin}
        grown = list(lead)
        while grown:
            for j in replaced_by.get(grown.pop(), []):
                if j not in lead:
                    lead.add(j)
                    grown.append(j)
        first = sorted(lead, key=lambda i: (-ranked[i].when[0], -ranked[i].turn, ranked[i].when[1]))
        order = first + [i for i in order if i not in lead]
    order = [i for i in order if not ranked[i].asks] + [i for i in order if ranked[i].asks]
    return [(ranked[i], earlier[i] or ranked[i].replaced) for i in order]


#: In one session, a statement this many turns after another is later than it (the conversation moved on); nearer,
#: the two are one moment of it.
LATER_TURNS = 3


def _later(b: Excerpt, a: Excerpt) -> bool:
    """Whether ``b`` was said later than ``a``: in a session of a later time, or in the same session at least
    :data:`LATER_TURNS` turns after it (one long session may span days)."""
    if b.session_id == a.session_id:
        return a.turn >= 0 and b.turn - a.turn >= LATER_TURNS
    return b.when[0] > a.when[0]


def render(profile: Sequence[Excerpt], memories: Sequence[tuple[Excerpt, bool]], mode: str) -> str:
    """The block's text: the profile part (when any) and the memories part (when any); ``""`` for neither."""
    out: list[str] = []
    if profile:
        out.append(PROFILE_HEADER)
        out += [f"- {e.line(n)[len(f'[{n}] '):]}" for n, e in enumerate(profile, start=1)]
    if memories:
        out.append(MEMORY_HEADERS[mode])
        out += [e.line(n, early) for n, (e, early) in enumerate(memories, start=1)]
    return "\n".join(out)
