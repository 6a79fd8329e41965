"""What an agent reads: a context built from a method's scored turns and the stored messages.

:func:`build_context` chooses by the evidence each turn carries, not by session: the method scores every unit
(:meth:`memgas.methods.base.MemoryMethod.scored`). By default a learned selection (:mod:`memgas.context.select`)
chooses among the messages of the best turns (:func:`_best_turns`, :func:`_learned`): each message's probability of
being evidence per token orders the taking. The hand-set priorities (``ContextOptions(learned=False)``, and what
fills the budget the learned turns leave): turns below the relevance floor stay out (unless they hold most
of the query's words: :func:`_relevant`); of the others, best first, each user message is a candidate (its best part
when long) and each reply one after the user messages of a few better turns, cut to the part that holds the query's
words (and left out when it holds none). In a conversation between people (:func:`memgas.kernels.people.people_of`)
every person's words are taken as the user's; a question that names one of them takes their words first. A message
that only asks (:func:`memgas.kernels.people.only_asks`) is no evidence of its answer: it reads after every other
(:func:`memgas.context.assemble.order_excerpts`). A question that
asks across the conversation (:func:`memgas.kernels.tense.asks_across_time`) takes the best turns of every session
near the best one in relevance (``timeline_margin``; the best ``timeline_sessions`` of them) in turn, then the others', shorter, and reads them in time order. The user's standing instructions and preferences
(:class:`memgas.context.profile.Profiles`) head the block, the most relevant first. See :mod:`memgas.context.assemble`
for the order and the format.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_right
from dataclasses import dataclass, replace
from datetime import datetime
from functools import partial
from itertools import count
from typing import Collection, Iterator

import numpy as np

from memgas.context.assemble import (
    MEMORY_HEADERS,
    PROFILE_HEADER,
    ContextOptions,
    Excerpt,
    Pending,
    fill,
    least_cost,
    line_cost,
    order_excerpts,
    render,
    take,
)
from memgas.context.card import CARD_FEATURES, card_features, shipped_card
from memgas.context.profile import Profiles, StandingStatement
from memgas.context.question import Question, context_mode
from memgas.context.select import FEATURES, Selection, rank_feature, shipped
from memgas.core.types import Message, Turn
from memgas.kernels.excerpt import excerpt
from memgas.kernels.lexical import terms_held
from memgas.kernels.people import known_from, named_in, only_asks, people_of
from memgas.kernels.subjects import SUBJECTS, bearing
from memgas.kernels.text import context_tokens as count_tokens
from memgas.methods.base import MemoryMethod
from memgas.methods.index import UserIndex
from memgas.methods.ranking import Scored, session_scores
from memgas.store import QuoteStore, Store, UnitTable, part, texts_of

__all__ = ["build_context", "card_candidates", "context_mode", "evidence_candidates"]


def _seconds(when: datetime | None) -> float:
    return when.timestamp() if when is not None else float("-inf")


@dataclass(frozen=True, slots=True)
class _Card:
    """The statements a card may show for a request, with what is reckoned of each: its relevance (the greater of
    its text's and its condition's cosine), the subject's probability where the request bears on it (``bears``) and
    where it is among the subject's nearest (``lead``), its excerpt's tokens, and its :data:`CARD_FEATURES`."""

    statements: list[StandingStatement]
    cosine: np.ndarray
    bears: np.ndarray
    lead: np.ndarray
    tokens: list[int]
    features: np.ndarray


def _card(profiles: Profiles, statements: list[StandingStatement], query_vector: np.ndarray, options: ContextOptions,
          scored: Scored, mode: str) -> _Card:
    """What is reckoned of ``statements`` for a request (:class:`_Card`): the method's ``scored`` sessions rank
    theirs, ``mode`` is how the request reads."""
    cosine = profiles.relevance(statements, query_vector)
    asked = profiles.detector.subject_probabilities(query_vector) if profiles.detector is not None else None
    bears = np.zeros(len(statements))
    lead = np.zeros(len(statements))
    if asked is not None:
        on = bearing(asked[0])
        bears = np.array([float(asked[0, SUBJECTS.index(s.subject)]) if s.subject in on else 0.0
                          for s in statements])
        for subject in on:  # the subject's nearest statements lead; its others come in by their cosine
            of = np.flatnonzero([s.subject == subject for s in statements])
            nearest = of[np.argsort(-cosine[of], kind="stable")[:options.bearing_lead]]
            lead[nearest] = bears[nearest]
    tokens = [count_tokens(s.excerpt) for s in statements]
    sessions = session_scores(scored.index, scored.scores)
    place = {scored.index.sessions[int(i)]: rank
             for rank, i in enumerate(np.argsort(-sessions, kind="stable")) if np.isfinite(sessions[i])}
    X = card_features(cosine, bears, lead, [s.kind for s in statements], tokens,
                      [place.get(s.session_id, math.inf) for s in statements], mode)
    return _Card(statements, cosine, bears, lead, tokens, X)


def _profile(profiles: Profiles, store: Store, user_id: str, query_vector: np.ndarray, budget: int,
             options: ContextOptions, within: Collection[str] | None, excluded: Collection[str],
             hidden: Collection[tuple[str, int]], scored: Scored, mode: str, card: Selection | None,
             instructions_only: bool = False) -> list[Excerpt]:
    """The standing statements shown, of those above the profile floor or of a subject the request bears on
    (:func:`memgas.kernels.subjects.bearing`: "Find a restaurant near me" takes where the user lives, though the two
    share no word and hardly any meaning for the embedder): the most relevant per token first, within ``budget``.
    With a ``card`` model (:mod:`memgas.context.card`), relevant as it reckons each from its features (the method's
    ``scored`` sessions among them); without, by their cosine with the request, plus the subject's probability for
    the nearest statements of a subject the request bears on. An instruction without a condition holds for every
    request: first, either way. With ``instructions_only`` (a timeline's card), the instructions alone."""
    statements = [s for s in profiles.statements(store, user_id, within=within, excluded=excluded)
                  if (s.session_id, s.message) not in hidden and (not instructions_only or s.kind == "instruction")]
    if not statements or budget <= 0:
        return []
    read = _card(profiles, statements, query_vector, options, scored, mode)
    always = np.array([s.always for s in statements])
    if card is not None:
        relevance = np.where(always, 1.0, 0.0) + card.values(read.features)
    else:
        relevance = np.where(always, 2.0, 0.0) + read.cosine + read.lead
    admitted = (read.cosine >= options.profile_floor) | (read.bears > 0) | always
    if options.card_cost:  # by relevance per token (the line's date, session and speaker: some 12 tokens)
        relevance = relevance / (np.array(read.tokens, float) + 12) ** options.card_cost
    candidates = []
    for rank, i in enumerate(np.argsort(-relevance, kind="stable")):
        s = statements[int(i)]
        if admitted[i]:
            candidates.append(Excerpt(s.session_id, s.message, s.who or "user", s.excerpt, s.timestamp, rank,
                                      (_seconds(s.timestamp), s.message)))
    return fill(candidates, budget)


def _turn_order(index: UserIndex, rows: np.ndarray, spread: bool) -> np.ndarray:
    """``rows`` (turns, already best first) in the order they are taken: as they are, or, with ``spread``, spread
    over the sessions: the best turn of every session (the best session first), then the second best of each, and
    so on, so that what each sitting brought up is read, not only the sitting where the question's words are said
    most (BENCHMARKS.md: stretches of equal turn counts across sessions read less of the course)."""
    if not spread or len(rows) == 0:
        return rows
    sids = index.table.session_ids
    nth: dict[str, int] = {}
    place = np.empty(len(rows), np.int64)
    for p, r in enumerate(rows):  # rows are best first: the n-th seen of a session is its n-th best
        place[p] = nth.get(sids[r], 0)
        nth[sids[r]] = int(place[p]) + 1
    return rows[np.argsort(place, kind="stable")]


def build_context(
    method: MemoryMethod,
    store: Store,
    user_id: str,
    query: str,
    *,
    max_tokens: int,
    query_time: datetime | None = None,
    within: Collection[str] | None = None,
    excluded: Collection[str] = (),
    hidden: Collection[tuple[str, int]] = (),
    max_sessions: int | None = None,
    profiles: Profiles | None = None,
    options: ContextOptions | None = None,
    selection: Selection | None = None,
    card: Selection | None = None,
) -> str:
    """The context block for ``query`` from ``user_id``'s memories, within ``max_tokens``: ``""`` when nothing
    stored is relevant and no standing statement applies.

    Args:
        method: the method that scores the turns (its store must be ``store``).
        store: where the messages are.
        user_id: whose memories.
        query: what the agent is about to answer.
        max_tokens: the budget (:func:`memgas.kernels.text.context_tokens`).
        query_time: when the query is asked (for time words and for the past/present reading).
        within: only these sessions (``None``: all).
        excluded: never these sessions (e.g. the conversation under way).
        hidden: never these messages, as ``(session_id, index)`` (what the prompt already holds of a session).
        max_sessions: evidence from at most this many sessions, the best first (``None``: any).
        profiles: where standing statements come from (``None``: none shown).
        options: the thresholds and sizes (:class:`memgas.context.assemble.ContextOptions`; ``None``: the defaults).
        selection: the learned choice of the evidence (:mod:`memgas.context.select`; ``None``: the shipped one),
            unless :attr:`ContextOptions.learned` is off (the hand-set priorities then). A question across the
            conversation reads its timeline either way.
        card: the learned choice of the user card's statements (:mod:`memgas.context.card`; ``None``: the shipped
            one), unless :attr:`ContextOptions.learned_card` is off (by their cosine then).
    """
    options = options or ContextOptions()
    question = Question.read(query, query_time)
    mode = _mode(question, options)
    excluded, hidden = set(excluded), set(hidden)
    budget = max_tokens
    scored = _words_once(method.scored(store, user_id, query, query_time=query_time, within=within))
    profile: list[Excerpt] = []
    if profiles is not None and options.profile:
        share = int(budget * options.profile_share) - count_tokens(PROFILE_HEADER) - 1
        profile = _profile(profiles, store, user_id, method.embed_query(query), share, options, within, excluded,
                           hidden, scored, question.mode, (card or shipped_card()) if options.learned_card else None,
                           instructions_only=mode == "time" and options.timeline_card_instructions)
        if profile:
            budget -= count_tokens(PROFILE_HEADER) + 1 + sum(count_tokens(e.line(99)) + 1 for e in profile)
    budget -= count_tokens(MEMORY_HEADERS[mode]) + 1
    memories: list[tuple[Excerpt, bool]] = []
    if len(scored.scores) and budget > 12:
        rows, after = _rows(scored, question, mode, excluded, max_sessions, options)
        # a message the card shows whole is not shown again; one it shows a sentence of may show its best part for
        # the question below ("I'm looking for ideas to socialize with colleagues. I work from home and ...": the
        # card's first sentence alone left the rest, the evidence, out of the block)
        shown = {(e.session_id, e.message) for e in profile if not _partial(e.text)} | set(hidden)
        if options.learned and mode != "time":
            first, rest = _learned(scored, rows, after, store, user_id, question, options, excluded, shown,
                                   selection or shipped(), max_sessions is not None and not options.beyond_k,
                                   max_tokens)
            taken = take(first, budget)
            left = budget - sum(line_cost(e) for e in taken)
            if left >= options.learned_fill * budget:  # the other turns fill what the learned ones leave
                taken += take(_excerpts(scored, rest, after, store, user_id, question, mode, options, shown,
                                        float(len(first))), left)
        else:
            taken = take(_excerpts(scored, rows, after, store, user_id, question, mode, options, shown), budget)
        # the question's words each shown part holds, in one batch
        taken = [replace(e, words=held) for e, held in zip(taken, terms_held([e.text for e in taken], question.terms))]
        if profiles is not None and options.profile:  # what the user model knows of each line's statements
            marks = profiles.marks(store, user_id, within=within, excluded=excluded)
            taken = [replace(e, subjects=marks[key][0], replaced=marks[key][1]) if key in marks else e
                     for e, key in ((e, (e.session_id, e.message)) for e in taken)]
        memories = order_excerpts(taken, mode, options.same_subject, question.words_needed, options.now_margin)
    return render(profile, memories, mode)


def evidence_candidates(method: MemoryMethod, store: Store, user_id: str, query: str, *,
                        query_time: datetime | None = None, max_sessions: int | None = None,
                        options: ContextOptions | None = None) -> tuple[list[tuple[str, int]], np.ndarray]:
    """What a learned selection chooses from for ``query``, as :func:`build_context` reads it (no card, nothing
    excluded): each candidate message as ``(session_id, index)`` and its :data:`memgas.context.select.FEATURES`
    (one row each). For fitting a selection (``memgas bench selection``); a question across the conversation has
    none (it reads its timeline)."""
    options = options or ContextOptions()
    question = Question.read(query, query_time)
    mode = _mode(question, options)
    scored = _words_once(method.scored(store, user_id, query, query_time=query_time))
    if mode == "time" or not len(scored.scores):
        return [], np.zeros((0, len(FEATURES)), np.float32)
    rows, after = _rows(scored, question, mode, set(), max_sessions, options)
    found, X = _candidates(scored, _best_turns(scored, question, set(), options), rows, after, store, user_id, question,
                           options, set())
    return [(scored.index.table.session_ids[m.row], m.at) for m in found], X


def card_candidates(method: MemoryMethod, store: Store, user_id: str, query: str, profiles: Profiles, *,
                    query_time: datetime | None = None, options: ContextOptions | None = None
                    ) -> tuple[list[StandingStatement], np.ndarray]:
    """What the user card chooses from for ``query``, as :func:`build_context` reads it (nothing excluded): the
    standing statements and their :data:`memgas.context.card.CARD_FEATURES` (one row each). For fitting the card's
    model (``memgas bench card``)."""
    options = options or ContextOptions()
    question = Question.read(query, query_time)
    statements = profiles.statements(store, user_id)
    if _mode(question, options) == "time" and options.timeline_card_instructions:
        statements = [s for s in statements if s.kind == "instruction"]
    if not statements:
        return [], np.zeros((0, len(CARD_FEATURES)), np.float32)
    scored = method.scored(store, user_id, query, query_time=query_time)
    read = _card(profiles, statements, method.embed_query(query), options, scored, question.mode)
    return statements, read.features


def _words_once(scored: Scored) -> Scored:
    """``scored`` whose :attr:`~memgas.methods.ranking.Scored.turn_words` are worked out once per set of terms: a
    context asks them for the hand-set turns and for the learned ones, with the question's terms both times (a pass
    over the postings of every turn: 1.3 ms at 12.5M tokens)."""
    words = scored.turn_words
    if words is None:
        return scored
    held: dict[frozenset[str], np.ndarray] = {}

    def once(terms: Collection[str]) -> np.ndarray:
        key = frozenset(terms)
        if key not in held:
            held[key] = words(key)
        return held[key]

    return replace(scored, turn_words=once)


def _mode(question: Question, options: ContextOptions) -> str:
    """How the block reads (:func:`memgas.context.question.context_mode`), as far as ``options`` allow."""
    mode = question.mode
    if (mode == "time" and not options.timelines) or (mode in ("now", "relevance") and not options.current_first):
        mode = "past"  # read most relevant first, nothing moved
    return mode


def _partial(text: str) -> bool:
    """Whether a shown ``text`` is part of its message (:func:`memgas.kernels.excerpt.excerpt` marks a cut with
    ``…``)."""
    return text.startswith("…") or text.endswith("…")


def _relevant(scored: Scored, rows: np.ndarray, relevance: np.ndarray, question: Question,
              floor: float) -> np.ndarray:
    """Which of ``rows`` (turns) pass the floor: by meaning (their cosine with the query at least ``floor``) or by
    words (at least half the query's words, and two, in the turn's text: what a turn's vector does not see, such as
    the depths of a long reply, still counts). The words are counted by the method's index where it holds them
    (:attr:`memgas.methods.ranking.Scored.turn_words`), else in the turns' texts."""
    keep = relevance[rows] >= floor
    below = np.flatnonzero(~keep)
    terms, need = question.terms, question.words_needed
    if len(below) and len(terms) >= need:
        index = scored.index
        if scored.turn_words is not None:
            keep[below] = scored.turn_words(terms)[np.searchsorted(index.masks["turn"], rows[below])] >= need
        else:
            texts = texts_of(index.table.texts, [int(r) for r in rows[below]])
            keep[below] = [len(held) >= need for held in terms_held(texts, terms)]
    return keep


def _rows(scored: Scored, question: Question, mode: str, excluded: set[str], max_sessions: int | None,
          options: ContextOptions) -> tuple[np.ndarray, set[int]]:
    """The turns whose messages the evidence part may take, best first, and those of them taken only after every
    other (see the module docstring)."""
    index, scores = scored.index, scored.scores
    relevance = scored.relevance if scored.relevance is not None else np.zeros(len(scores))
    rows = index.masks["turn"]
    rows = rows[np.isfinite(scores[rows])]
    rows = rows[np.argsort(-scores[rows], kind="stable")][: 4 * options.turns]
    # across the conversation the subject is broad: a turn less relevant than the floor may still say where it went,
    # so a timeline takes such turns too (above its own, lower floor), after the relevant ones
    rows = rows[_relevant(scored, rows, relevance, question,
                          options.timeline_floor if mode == "time" else options.floor)]
    # turns taken only after every other: a timeline's below the floor, and those beyond the k best sessions
    after = set(rows[relevance[rows] < options.floor].tolist()) if mode == "time" else set()
    if mode == "time" and len(rows):  # ... and a timeline's of the sessions far below the best (other subjects)
        sessions = index.session_of[rows]
        best = np.full(int(sessions.max()) + 1, -np.inf)
        np.maximum.at(best, sessions, relevance[rows])
        far = best[sessions] < best.max() - options.timeline_margin
        # ... and of the near ones, those past the best few by their turns' scores (rows are best first)
        far |= ~np.isin(sessions, list(dict.fromkeys(sessions[~far].tolist()))[: options.timeline_sessions])
        after |= set(rows[far].tolist())
    if excluded:
        rows = rows[[index.sessions[index.session_of[r]] not in excluded for r in rows]]
    if max_sessions is not None and mode != "time":  # a timeline spans the conversation: every session may add to it
        first: dict[int, None] = {}
        for r in rows:
            first.setdefault(int(index.session_of[r]), None)
        keep = set(list(first)[:max_sessions])
        inside = np.array([int(index.session_of[r]) in keep for r in rows], bool)
        if options.beyond_k:  # what budget the k sessions leave, the others' relevant turns fill, after them
            after = set(rows[~inside].tolist())
            rows = np.concatenate([rows[inside], rows[~inside]])
        else:
            rows = rows[inside]
    return _turn_order(index, rows, mode == "time")[: options.turns], after


def _excerpts(scored: Scored, rows: np.ndarray, after: set[int], store: Store, user_id: str, question: Question,
              mode: str, options: ContextOptions, shown: set[tuple[str, int]], start: float = 0.0
              ) -> Iterator[Pending]:
    """The excerpts of the messages of ``rows`` (turns, best first) in the order :func:`take` tries them: by
    priority, equals in the order of their turns and of the messages in them. Each is cut only when it is reached,
    and each turn's messages read (by their key, not their whole session) only when they may be next, so the work
    follows what the block shows, not how many turns pass the floor or how long their sessions are.

    A user message (a person's words) has its turn's rank as its priority (a quarter more where the question names
    another person); a reply, cut to the part that holds the question's words and left out where it holds none, comes
    after the user messages of ``reply_lag`` better turns; the turns of ``after`` come after every other. Nothing of
    a turn not yet read can come before ``rank`` of its turn (``+ len(rows)`` for those of ``after``), so an excerpt
    is given once no unread turn can precede it. Every priority is ``start`` more (what reads before these).
    """
    table = scored.index.table
    spread = mode == "time"
    # a reply follows its own user message where the question asks what the assistant said
    lag = 0 if question.replies else options.reply_lag
    n = len(rows)
    # the least priority any message of rows[i:] may have
    least = np.minimum.accumulate([float(i + (n if int(r) in after else 0)) for i, r in enumerate(rows)][::-1])[::-1]
    people: dict[str, tuple[frozenset[str], frozenset[str]]] = {}  # per session: who speaks, whom the question names
    waiting: list[tuple[float, int, _Message]] = []  # priority, order, the message
    order = count()
    read, chunk = 0, 8
    while waiting or read < n:
        if read < n and (not waiting or waiting[0][0] > least[read]):
            end, chunk = min(n, read + chunk), 2 * chunk
            quoted = _read_turns(store, user_id, table, rows[read:end], people, question)
            for rank in range(read, end):
                late = n if int(rows[rank]) in after else 0
                for m in _turn_messages(table, rank, rows[rank], quoted, people, shown, spread, question, lag, late):
                    heapq.heappush(waiting, (m.priority, next(order), m))
            read = end
            continue
        _, _, m = heapq.heappop(waiting)
        yield _pending(scored, m, question, spread, options, m.priority + start)


@dataclass(frozen=True, slots=True)
class _Message:
    """A message of a chosen turn: its turn's rank and row, its place in its session, whether it is a person's
    words, whether the question names its speaker, and its hand-set priority (lower first)."""

    rank: int
    row: int
    at: int
    message: Message
    said: bool
    named: bool
    priority: float


def _read_turns(store: Store, user_id: str, table: UnitTable, rows: np.ndarray,
                people: dict[str, tuple[frozenset[str], frozenset[str]]], question: Question
                ) -> dict[int, tuple[int, tuple[Message, ...]]]:
    """The messages of the turns ``rows`` (:func:`_quoted`); who speaks in each of their sessions not in ``people``
    yet, and whom the question names of them, is added to it."""
    quoted = _quoted(store, user_id, table, rows)
    fresh: dict[str, list[Message]] = {}
    for r in rows:
        if table.session_ids[r] not in people and int(table.ids[r]) in quoted:
            fresh.setdefault(table.session_ids[r], []).extend(quoted[int(table.ids[r])][1])
    for sid, who in _people(store, user_id, fresh).items():
        people[sid] = (who, named_in(question.text, who))
    return quoted


def _turn_messages(table: UnitTable, rank: int, r: int, quoted: dict[int, tuple[int, tuple[Message, ...]]],
                   people: dict[str, tuple[frozenset[str], frozenset[str]]], shown: set[tuple[str, int]],
                   spread: bool, question: Question, lag: int, late: float) -> Iterator[_Message]:
    """The messages of turn ``r`` (of rank ``rank``) that may be shown, with their hand-set priorities (see
    :func:`_excerpts`; ``late`` more for a turn read after every other); none for a turn gone since the index was
    read."""
    sid = table.session_ids[r]
    if int(table.ids[r]) not in quoted or sid not in people:
        return
    start, messages = quoted[int(table.ids[r])]
    who, named = people[sid]
    summary = question.summary or question.replies  # a timeline of both sides
    for offset, m in enumerate(messages):
        if (sid, start + offset) in shown:
            continue
        author = (m.name or "").casefold()
        said = m.role == "user" or (m.role == "assistant" and author in who)  # a person's words
        if spread and not said and not summary:  # a timeline of what the people brought up
            continue
        if said:  # the words of the person a question names first, then the others'
            priority = rank + (0.25 if named and author not in named else 0.0)
        else:  # a reply, after the user messages of a few better turns
            priority = rank + lag + 0.5
        yield _Message(rank, int(r), start + offset, m, said, bool(named) and author in named, priority + late)


def _pending(scored: Scored, m: _Message, question: Question, spread: bool, options: ContextOptions,
             priority: float) -> Pending:
    """``m`` as an excerpt to cut when it is reached, of ``priority``."""
    index = scored.index
    table, r = index.table, m.row
    relevance = float(scored.relevance[r]) if scored.relevance is not None else 0.0
    sid = table.session_ids[r]
    when = index.timestamps.get(sid)
    cap = options.timeline_chars if spread else options.user_chars if m.said else options.reply_chars
    bare = Excerpt(sid, m.at, m.message.name or m.message.role, "", when, priority, (_seconds(when), m.at),
                   np.asarray(table.vectors[r], np.float32), int(table.turn_start[r]), frozenset(), False, relevance)
    return Pending(least_cost(bare, m.message.content, cap),
                   partial(_cut, bare, m.message.content, question.terms, cap, m.said))


def _best_turns(scored: Scored, question: Question, excluded: set[str], options: ContextOptions,
                budget: int | None = None, only: set[str] | None = None) -> np.ndarray:
    """The learned selection's turns: the best :attr:`ContextOptions.learned_turns` for ``budget`` tokens
    (``None``: :attr:`ContextOptions.learned_turns_max`; never more than :attr:`ContextOptions.turns`) by the
    method's score, of the
    sessions not excluded, that pass :attr:`ContextOptions.learned_floor` (:func:`_relevant`: by meaning or by the
    question's words; lower than the hand-set floor: the relevance and the ``k`` best sessions are the model's
    features, not its gates; ``only``: of these sessions alone)."""
    index, scores = scored.index, scored.scores
    relevance = scored.relevance if scored.relevance is not None else np.zeros(len(scores))
    rows = index.masks["turn"]
    rows = rows[np.isfinite(scores[rows])]
    if excluded or only is not None:
        allowed = np.array([sid not in excluded and (only is None or sid in only) for sid in index.sessions], bool)
        rows = rows[allowed[index.session_of[rows]]]
    want = options.learned_turns_max if budget is None else min(
        options.learned_turns_max, options.learned_turns + max(0, budget - 1000) // 50)
    want = min(want, options.turns)
    rows = rows[np.argsort(-scores[rows], kind="stable")][: 4 * want]
    return rows[_relevant(scored, rows, relevance, question, options.learned_floor)][:want]


def _candidates(scored: Scored, top: np.ndarray, hand: np.ndarray, after: set[int], store: Store, user_id: str,
                question: Question, options: ContextOptions, shown: set[tuple[str, int]]
                ) -> tuple[list[_Message], np.ndarray]:
    """The messages of the turns ``top`` (best first) that may be shown, and their
    :data:`memgas.context.select.FEATURES` (one row each); ``hand`` (with ``after``) is the order the hand-set rules
    take the turns in (:func:`_rows`), a feature."""
    index, table = scored.index, scored.index.table
    lag = 0 if question.replies else options.reply_lag
    people: dict[str, tuple[frozenset[str], frozenset[str]]] = {}
    quoted = _read_turns(store, user_id, table, top, people, question)
    found = [m for rank, r in enumerate(top)
             for m in _turn_messages(table, rank, r, quoted, people, shown, False, question, lag, 0.0)]
    if not found:
        return [], np.zeros((0, len(FEATURES)), np.float32)
    relevance = scored.relevance if scored.relevance is not None else np.zeros(len(scored.scores))
    # each message's place in the hand-set order (its turn's place there, as _turn_messages reckons it; 0: left out)
    placed = {int(r): rank + (len(hand) if int(r) in after else 0) for rank, r in enumerate(hand)}
    sessions: dict[str, int] = {}
    for r in top:
        sessions.setdefault(table.session_ids[r], len(sessions))
    # the age of a session: its place among all the user's sessions in time, the newest 1
    stamps = sorted(_seconds(t) for t in index.timestamps.values())
    terms = question.terms
    held = terms_held([m.message.content for m in found], terms)
    past, now = float(question.mode == "past"), float(question.mode == "now")
    X = np.array([
        (rank_feature(m.rank), float(relevance[m.row]), rank_feature(sessions[table.session_ids[m.row]]),
         rank_feature(m.priority - m.rank + placed[m.row]) if m.row in placed else 0.0, float(m.said),
         float(m.said and only_asks(m.message.content)),
         math.log1p(min(len(m.message.content), options.user_chars if m.said else options.reply_chars) / 4) / 8,
         len(words) / max(len(terms), 1), age, past, now, float(question.replies), float(m.named),
         age * now, age * past)
        for m, words, age in zip(found, held, (
            bisect_right(stamps, _seconds(index.timestamps.get(table.session_ids[m.row]))) / max(len(stamps), 1)
            for m in found))], np.float32)
    return found, X


def _learned(scored: Scored, rows: np.ndarray, after: set[int], store: Store, user_id: str, question: Question,
             options: ContextOptions, excluded: set[str], shown: set[tuple[str, int]], selection: Selection,
             limited: bool, budget: int) -> tuple[list[Pending], np.ndarray]:
    """The learned selection's excerpts in the order :func:`take` tries them, chosen by ``selection``
    (:mod:`memgas.context.select`): the messages of the best turns for ``budget`` (:func:`_best_turns`) by their
    probability of being evidence per token, each of priority its place by that probability (how the block then
    reads); and the other turns of ``rows``, whose messages may fill what they leave (in the hand-set order,
    :func:`_excerpts`)."""
    # the k sessions alone where the caller asked for them alone (not beyond them)
    only = {scored.index.table.session_ids[r] for r in rows} if limited else None
    top = _best_turns(scored, question, excluded, options, budget, only)
    found, X = _candidates(scored, top, rows, after, store, user_id, question, options, shown)
    rest = rows[~np.isin(rows, top)]
    if not found:
        return [], rest
    value = selection.values(X)
    place = np.empty(len(found), np.int64)
    place[np.argsort(-value, kind="stable")] = np.arange(len(found))
    pending = [_pending(scored, m, question, False, options, float(p)) for m, p in zip(found, place)]
    order = np.argsort(-value / np.array([p.least for p in pending], np.float64), kind="stable")
    return [pending[int(i)] for i in order], rest


def _quoted(store: Store, user_id: str, table: UnitTable, rows: np.ndarray
            ) -> dict[int, tuple[int, tuple[Message, ...]]]:
    """The messages of the turns ``rows``, by unit id: each turn's, read by the messages' key
    (:meth:`memgas.store.Store.unit_messages`); a turn whose text is kept as it is (no message range: another
    method's units) is cut from its session, read whole. A unit gone since the index was read is left out."""
    quoted = part(store, QuoteStore).unit_messages(user_id, [int(table.ids[r]) for r in rows])
    whole: dict[str, tuple[Turn, ...]] = {}
    for r in rows:
        uid, sid, t = int(table.ids[r]), table.session_ids[r], int(table.turn_start[r])
        if uid in quoted and quoted[uid][0] < 0:
            turns = whole[sid] if sid in whole else whole.setdefault(sid, store.get_session(user_id, sid).turns)
            quoted[uid] = (turns[t].msg_start, turns[t].messages) if t < len(turns) else (0, ())
    return quoted


def _people(store: Store, user_id: str, quoted: dict[str, list[Message]]) -> dict[str, frozenset[str]]:
    """Who speaks in each session of ``quoted`` (:func:`memgas.kernels.people.people_of`), given some of its
    messages: from its metadata and those messages where they settle it (:func:`memgas.kernels.people.known_from`),
    else from every message's speaker, read without the messages' text (a conversation of named speakers)."""
    quotes = part(store, QuoteStore)
    metadata = quotes.session_metadata(user_id, list(quoted))
    some = {sid: [(m.role, m.name) for m in quoted[sid]] for sid in metadata}
    out = {sid: people_of(meta, some[sid]) for sid, meta in metadata.items() if known_from(meta, some[sid])}
    rest = [sid for sid in metadata if sid not in out]
    if rest:
        out.update((sid, people_of(meta, speakers)) for sid, (meta, speakers) in
                   quotes.session_speakers(user_id, rest).items())
    return out


def _cut(bare: Excerpt, content: str, terms: frozenset[str], cap: int, said: bool) -> Excerpt | None:
    """``bare`` with its text, ``content``'s part that matters (:func:`memgas.kernels.excerpt.excerpt`), and whether
    it only asks; ``None`` for a reply that holds none of the question's words."""
    text, hits = excerpt(content, terms, cap)
    return replace(bare, text=text, asks=said and only_asks(content)) if said or hits else None
