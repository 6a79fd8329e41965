"""What an agent reads: a context built from a method's scored turns and the stored messages.

:func:`build_context` chooses by the evidence each turn carries, not by session: the method scores every unit
(:meth:`memgas.methods.base.MemoryMethod.scored`); turns below the relevance floor stay out (unless they hold most
of the query's words: :func:`_relevant`); of the others, best first, each user message is a candidate (its best part
when long) and each reply one after the user messages of a few better turns, cut to the part that holds the query's
words (and left out when it holds none). In a conversation between people (:func:`memgas.kernels.people.people_of`)
every person's words are taken as the user's; a question that names one of them takes their words first. A message
that only asks (:func:`memgas.kernels.people.only_asks`) is no evidence of its answer: it reads after every other
(:func:`memgas.context.assemble.order_excerpts`). A question that
asks across the conversation (:func:`memgas.kernels.tense.asks_across_time`) takes the best turns of every session
in turn, shorter, and reads them in time order. The user's standing instructions and preferences
(:class:`memgas.context.profile.Profiles`) head the block, the most relevant first. See :mod:`memgas.context.assemble`
for the order and the format.
"""

from __future__ import annotations

import heapq
from dataclasses import replace
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
    order_excerpts,
    render,
    take,
)
from memgas.context.profile import Profiles
from memgas.context.question import Question, context_mode
from memgas.core.types import Message, Turn
from memgas.kernels.excerpt import excerpt
from memgas.kernels.lexical import token_sets
from memgas.kernels.people import known_from, named_in, only_asks, people_of
from memgas.kernels.subjects import SUBJECTS, bearing
from memgas.kernels.text import context_tokens as count_tokens
from memgas.methods.base import MemoryMethod
from memgas.methods.index import UserIndex
from memgas.methods.ranking import Scored
from memgas.store import QuoteStore, Store, UnitTable, part, texts_of

__all__ = ["build_context", "context_mode"]


def _seconds(when: datetime | None) -> float:
    return when.timestamp() if when is not None else float("-inf")


def _profile(profiles: Profiles, store: Store, user_id: str, query_vector: np.ndarray, budget: int,
             options: ContextOptions, within: Collection[str] | None, excluded: Collection[str],
             hidden: Collection[tuple[str, int]]) -> list[Excerpt]:
    """The standing statements shown: the most relevant first, within ``budget``: those above the profile floor, and
    those about a subject the request bears on (:func:`memgas.kernels.subjects.bearing`: "Find a restaurant near me"
    takes where the user lives, though the two share no word and hardly any meaning for the embedder)."""
    statements = [s for s in profiles.statements(store, user_id, within=within, excluded=excluded)
                  if (s.session_id, s.message) not in hidden]
    if not statements or budget <= 0:
        return []
    cosine = profiles.vectors(statements) @ query_vector
    asked = profiles.detector.subject_probabilities(query_vector) if profiles.detector is not None else None
    bears = np.zeros(len(statements))
    if asked is not None:
        on = bearing(asked[0])
        bears = np.array([float(asked[0, SUBJECTS.index(s.subject)]) if s.subject in on else 0.0
                          for s in statements])
    # an instruction without a condition holds for every request: first, whatever the query
    relevance = np.where([s.always for s in statements], 2.0, 0.0) + cosine + bears
    candidates = []
    for rank, i in enumerate(np.argsort(-relevance, kind="stable")):
        s = statements[int(i)]
        if cosine[i] < options.profile_floor and not bears[i] and not s.always:
            continue
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
    """
    options = options or ContextOptions()
    question = Question.read(query, query_time)
    mode = question.mode
    if (mode == "time" and not options.timelines) or (mode in ("now", "relevance") and not options.current_first):
        mode = "past"  # read most relevant first, nothing moved
    excluded, hidden = set(excluded), set(hidden)
    budget = max_tokens
    scored = method.scored(store, user_id, query, query_time=query_time, within=within)
    profile: list[Excerpt] = []
    if profiles is not None and options.profile:
        share = int(budget * options.profile_share) - count_tokens(PROFILE_HEADER) - 1
        profile = _profile(profiles, store, user_id, method.embed_query(query), share, options, within, excluded,
                           hidden)
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
        taken = take(_excerpts(scored, rows, after, store, user_id, question, mode, options, shown), budget)
        # the question's words each shown part holds, in one batch
        taken = [replace(e, words=question.terms & held) for e, held in zip(taken, token_sets([e.text for e in taken]))]
        if profiles is not None and options.profile:  # what the user model knows of each line's statements
            marks = profiles.marks(store, user_id, within=within, excluded=excluded)
            taken = [replace(e, subjects=marks[key][0], replaced=marks[key][1]) if key in marks else e
                     for e, key in ((e, (e.session_id, e.message)) for e in taken)]
        memories = order_excerpts(taken, mode, options.same_subject, question.words_needed, options.now_margin)
    return render(profile, memories, mode)


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
            keep[below] = [len(terms & words) >= need for words in token_sets(texts)]
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
              mode: str, options: ContextOptions, shown: set[tuple[str, int]]) -> Iterator[Pending]:
    """The excerpts of the messages of ``rows`` (turns, best first) in the order :func:`take` tries them: by
    priority, equals in the order of their turns and of the messages in them. Each is cut only when it is reached,
    and each turn's messages read (by their key, not their whole session) only when they may be next, so the work
    follows what the block shows, not how many turns pass the floor or how long their sessions are.

    A user message (a person's words) has its turn's rank as its priority (a quarter more where the question names
    another person); a reply, cut to the part that holds the question's words and left out where it holds none, comes
    after the user messages of ``reply_lag`` better turns; the turns of ``after`` come after every other. Nothing of
    a turn not yet read can come before ``rank`` of its turn (``+ len(rows)`` for those of ``after``), so an excerpt
    is given once no unread turn can precede it.
    """
    index = scored.index
    relevance = scored.relevance if scored.relevance is not None else np.zeros(len(scored.scores))
    table = index.table
    spread = mode == "time"
    # a reply follows its own user message where the question asks what the assistant said
    lag = 0 if question.replies else options.reply_lag
    summary = question.summary or question.replies  # a timeline of both sides
    n = len(rows)
    # the least priority any message of rows[i:] may have
    least = np.minimum.accumulate([float(i + (n if int(r) in after else 0)) for i, r in enumerate(rows)][::-1])[::-1]
    people: dict[str, tuple[frozenset[str], frozenset[str]]] = {}  # per session: who speaks, whom the question names
    waiting: list[tuple[float, int, int, Message, bool, int]] = []  # priority, order, row rank, message, said, at
    order = count()
    read, chunk = 0, 8
    while waiting or read < n:
        if read < n and (not waiting or waiting[0][0] > least[read]):
            end, chunk = min(n, read + chunk), 2 * chunk
            quoted = _quoted(store, user_id, table, rows[read:end])
            fresh: dict[str, list[Message]] = {}
            for r in rows[read:end]:
                if table.session_ids[r] not in people and int(table.ids[r]) in quoted:
                    fresh.setdefault(table.session_ids[r], []).extend(quoted[int(table.ids[r])][1])
            for sid, who in _people(store, user_id, fresh).items():
                people[sid] = (who, named_in(question.text, who))
            for rank in range(read, end):
                r = rows[rank]
                sid = table.session_ids[r]
                if int(table.ids[r]) not in quoted or sid not in people:  # gone since the index was read
                    continue
                start, messages = quoted[int(table.ids[r])]
                who, named = people[sid]
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
                    priority += n if int(r) in after else 0
                    heapq.heappush(waiting, (priority, next(order), rank, m, said, start + offset))
            read = end
            continue
        priority, _, rank, m, said, at = heapq.heappop(waiting)
        r = rows[rank]
        sid = table.session_ids[r]
        when = index.timestamps.get(sid)
        cap = options.timeline_chars if spread else options.user_chars if said else options.reply_chars
        bare = Excerpt(sid, at, m.name or m.role, "", when, priority, (_seconds(when), at),
                        np.asarray(table.vectors[r], np.float32), int(table.turn_start[r]), frozenset(), False,
                        float(relevance[r]))
        yield Pending(least_cost(bare, m.content, cap), partial(_cut, bare, m.content, question.terms, cap, said))


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
