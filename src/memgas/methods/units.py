"""Build a session's memory units at the four MemGAS granularities: session, turn, summary, keyword.

Each conversation session becomes (Xu et al., 2025, "From Single to Multi-Granularity: Toward
Long-Term Memory Association and Selection of Conversational Agents", MemGAS):

* ``session`` units: the whole session text, cut into chunks that fit the embedder's window, at
  turn boundaries where possible, so every chunk maps to a turn range and nothing is truncated
  (a chunk's vector pools its turns' vectors);
* ``turn`` units: one per turn (a user message with the replies to it, see
  :func:`memgas.core.types.group_turns`);
* one ``summary`` unit, written by a :class:`Summarizer` (default: :class:`ExtractiveSummarizer`);
* one ``keyword`` unit, the comma-joined output of a :class:`Keyworder` (default: :class:`YakeKeyworder`).

The summarizer and keyworder are the seam for LLM-made units: any object with the right method fits.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Mapping, Protocol, Sequence

import numpy as np
from segtok.segmenter import split_multi

from memgas.core.errors import InvalidInputError, MemgasError
from memgas.core.types import Session, Turn, Unit, speaker_line
from memgas.core.validate import INDEXED_MESSAGE_CHARS

if TYPE_CHECKING:
    from memgas.embed.base import Embedder
from memgas.kernels.quantize import from_half, to_half
from memgas.kernels.text import fair_heads, word_head

__all__ = [
    "Summarizer", "Keyworder", "ExtractiveSummarizer", "YakeKeyworder", "build_units", "embed_texts",
    "embedding_view", "turn_tail", "summary_turns", "Known",
]


class Summarizer(Protocol):
    """Writes a session's summary unit text."""

    def summarize(self, session: Session, turn_vectors: np.ndarray) -> str:
        """Return a non-empty summary of ``session``.

        ``turn_vectors`` is the ``(n_turns, dim)`` matrix of the session's turn-unit vectors (rows in
        turn order, L2-normalised), already computed, so a summarizer can rank turns for free.
        """
        ...


class Keyworder(Protocol):
    """Writes a session's keyword unit."""

    def keywords(self, session: Session) -> list[str]:
        """Return the session's keywords, most important first (may be empty)."""
        ...


# Function words that make a sentence long without making it informative (summary sentence choice).
_STOPWORDS = frozenset(
    """about above after again against all also and any are because been before being below between both
    but can could did does doing down during each few for from further had has have having her here hers
    herself him himself his how into its itself just let like more most much must myself nor not now off
    once only other our ours ourselves out over own really same she should some such than that the their
    theirs them themselves then there these they this those through too under until very was were what
    when where which while who whom why will with would you your yours yourself yourselves yes okay sure
    thanks thank please hello great good well know think get got going want one maybe""".split()
)
_WORD_RE = re.compile(r"[^\W\d_]{3,}")


def _informativeness(sentence: str) -> int:
    """Number of distinct content words (3+ letters, not function words) in a sentence."""
    return len({w for w in map(str.lower, _WORD_RE.findall(sentence)) if w not in _STOPWORDS})


def _contents(turn: Turn) -> str:
    """A turn's message contents without speaker names."""
    return "\n".join(m.content for m in turn.messages)


class ExtractiveSummarizer:
    """A summary made of the session's own sentences, picked without an LLM and without extra embedding.

    Approach (a centroid-based extractive summary, cf. Radev et al., 2004, MEAD, with turns as the
    scored units so that the cost stays at one matrix-vector product over vectors already computed):

    1. the session centroid is the mean of the turn vectors; turns are ranked by cosine to it, so the
       top turns are the ones most typical of what the session is about;
    2. only user-side text is used (what the user said is what memory questions ask about); a session
       with no user message uses all its messages;
    3. the ``max_sentences`` top turns are split into sentences (segtok) and each turn's sentences are
       ranked by informativeness, the number of distinct content words, so fillers such as "Hi!" or
       "Thanks, that helps." lose to the sentence carrying the facts;
    4. sentences are taken round-robin over the top turns (best sentence of each turn first, then the
       second best, ...) until ``max_sentences`` are chosen; a sentence that would push the summary
       over ``max_chars`` is skipped; the chosen sentences are output in chronological order.

    If no sentence fits at all, the best one is cut at a word boundary to ``max_chars``.

    Args:
        max_sentences: most sentences in a summary (>= 1).
        max_chars: most characters in a summary (>= 1); the default keeps a summary well inside
            MiniLM's 256-token window, so it is embedded as one piece.

    Raises:
        InvalidInputError: a limit is below 1.
    """

    def __init__(self, max_sentences: int = 3, max_chars: int = 600) -> None:
        if max_sentences < 1 or max_chars < 1:
            raise InvalidInputError("ExtractiveSummarizer needs max_sentences >= 1 and max_chars >= 1")
        self.max_sentences = max_sentences
        self.max_chars = max_chars

    def summarize(self, session: Session, turn_vectors: np.ndarray) -> str:
        """Return the extractive summary of ``session`` (see the class notes).

        Raises:
            InvalidInputError: ``turn_vectors`` does not have one row per turn.
        """
        turns = session.turns
        vectors = np.asarray(turn_vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[0] != len(turns):
            raise InvalidInputError(
                f"turn_vectors has shape {vectors.shape}; expected one row per turn ({len(turns)} turns)"
            )
        texts = [t.user_text for t in turns]
        candidates = np.flatnonzero([bool(t.strip()) for t in texts])
        if candidates.size == 0:
            texts = [_contents(t) for t in turns]
            candidates = np.arange(len(turns))
        scores = vectors[candidates] @ vectors.mean(axis=0)
        top = candidates[np.argsort(-scores, kind="stable")[: self.max_sentences]]

        # Per top turn, its sentences as (turn, position, text), most informative first.
        ranked: list[list[tuple[int, int, str]]] = []
        for turn in top:
            sentences = [s.strip() for s in split_multi(texts[turn]) if s.strip()] or [texts[turn].strip()]
            order = sorted(range(len(sentences)), key=lambda j: -_informativeness(sentences[j]))
            ranked.append([(int(turn), j, sentences[j]) for j in order])

        chosen: list[tuple[int, int, str]] = []
        used = 0
        for depth in range(max(map(len, ranked))):
            for sentences in ranked:
                if depth >= len(sentences) or len(chosen) == self.max_sentences:
                    continue
                cost = len(sentences[depth][2]) + (1 if chosen else 0)
                if used + cost <= self.max_chars:
                    chosen.append(sentences[depth])
                    used += cost
        if not chosen:  # every sentence is longer than max_chars
            return word_head(ranked[0][0][2], self.max_chars)
        return " ".join(s for _, _, s in sorted(chosen))


class YakeKeyworder:
    """Keywords by YAKE (Campos et al., 2020), an unsupervised statistical extractor, over the user side.

    YAKE weights case, position, frequency and context spread, so proper names ("Caroline",
    "Mount Rainier") rank high, which is what memory questions ask about. Input is the user-side
    message contents (all contents when the session has no user message), one sentence-ended line
    per message (YAKE turns newlines into spaces, so an unpunctuated message would merge with the
    next one).

    Cost: YAKE is pure Python and linear in its input: measured 30-45 ms per 1,000 words on one CPU
    core, 75-90 ms for 2,000 words of prose. To keep :func:`build_units` close to the cost of
    embedding, its input is capped at ``max_chars`` characters (default 6,000, about 1,000 words,
    at most ~50 ms), shared fairly among messages: short messages keep all their text, long ones
    (pasted documents) are cut to their share, keeping their head, so every message still counts.
    Sessions of chat-sized messages (LoCoMo: ~20 turns of ~25 words) are never cut.

    Keywords are deduplicated case-insensitively; a keyword whose words all appear in a keyword
    already kept ("Rainier" after "Mount Rainier") is dropped, freeing its place for another.

    Args:
        top: most keywords returned (>= 1).
        max_ngram: longest keyword, in words (>= 1).
        max_chars: most input characters given to YAKE (>= 1).

    Raises:
        InvalidInputError: a limit is below 1.
    """

    def __init__(self, top: int = 10, max_ngram: int = 2, max_chars: int = 6000) -> None:
        if top < 1 or max_ngram < 1 or max_chars < 1:
            raise InvalidInputError("YakeKeyworder needs top, max_ngram and max_chars >= 1")
        self.top = top
        self.max_chars = max_chars
        import yake  # here, not at import: yake pulls networkx and is needed only to write units

        # Ask for more candidates than needed: the subset rule below drops some.
        self._extractor = yake.KeywordExtractor(lan="en", n=max_ngram, top=3 * top)

    def keywords(self, session: Session) -> list[str]:
        """Return up to ``top`` keywords of the session, most important first (empty when YAKE finds none)."""
        texts = [m.content for m in session.messages if m.role == "user"] or [m.content for m in session.messages]
        lines = [t.strip() for t in fair_heads(texts, self.max_chars)]
        text = "\n".join(t if t[-1:] in ".!?" else t + "." for t in lines if t)
        kept: list[str] = []
        kept_words: list[set[str]] = []
        for keyword, _ in self._extractor.extract_keywords(text):
            words = set(keyword.lower().split())
            if any(words <= w for w in kept_words):
                continue
            kept.append(keyword)
            kept_words.append(words)
            if len(kept) == self.top:
                break
        return kept


def embed_texts(embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
    """Embed texts of any length with one ``embedder.embed`` call, truncating nothing.

    A text over the embedder's window is split with ``embedder.split_to_window`` and its vector is the
    re-normalised mean of its pieces' vectors (the pieces cover the text exactly once, so every word
    counts; the embedder alone decides what fits). Identical texts and pieces are embedded once.

    Args:
        embedder: the embedder.
        texts: the texts (non-empty strings).

    Returns:
        A ``(len(texts), embedder.dim)`` float32 matrix of L2-normalised rows.

    Raises:
        MemgasError: the embedder returned a matrix of the wrong shape or with non-finite values.
    """
    pieces: list[str] = []
    owner: list[int] = []
    for i, text in enumerate(texts):
        parts = embedder.split_to_window(text)
        pieces.extend(parts)
        owner.extend([i] * len(parts))
    unique, inverse = np.unique(np.array(pieces, dtype=object), return_inverse=True)
    vectors = np.asarray(embedder.embed(list(unique)))
    if vectors.shape != (len(unique), embedder.dim):
        raise MemgasError(
            f"embedder {embedder.id!r} returned an array of shape {vectors.shape} for {len(unique)} texts; "
            f"expected ({len(unique)}, {embedder.dim})"
        )
    if not np.isfinite(vectors).all():
        raise MemgasError(f"embedder {embedder.id!r} returned non-finite values")
    out = np.zeros((len(texts), embedder.dim), dtype=np.float64)
    np.add.at(out, np.asarray(owner, dtype=np.intp), vectors[inverse.ravel()])
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    if (norms <= 0).any():
        raise MemgasError(f"embedder {embedder.id!r} returned a zero vector")
    return (out / norms).astype(np.float32)


#: Special tokens an embedder adds around a text ([CLS] and [SEP] for MiniLM and most BERT-like models);
#: the :class:`~memgas.embed.base.Embedder` protocol does not say, and only session grouping needs it.
_SPECIAL_TOKENS = 2


def embedding_view(turn: Turn, reply_chars: int = 300) -> str:
    """The text a turn's vector is computed from: its user messages whole (up to
    :data:`~memgas.core.validate.INDEXED_MESSAGE_CHARS`, the bound on an add's work), each reply's first
    ``reply_chars``.

    Replies (in chat logs, mostly an assistant's long answers) are most of a conversation's text but
    rarely what a user later asks about; the start of a reply says what it is about. Keeping the
    dense view short makes ``add`` cost about one embedding pass over the user's words, while the
    stored text (and any lexical index over it) keeps every word. A turn of two human speakers with
    short messages (LoCoMo-style) is embedded whole.
    """
    lines = []
    for m in turn.messages:
        text = m.content[:INDEXED_MESSAGE_CHARS]
        if m.role != "user" and len(text) > reply_chars:
            text = text[: _reply_cut(text, reply_chars)] + " …"
        lines.append(speaker_line(m.role, m.name, text))
    return "\n".join(lines)


def turn_tail(turn: Turn, reply_chars: int = 300) -> str:
    """What :func:`embedding_view` leaves out of a turn: each reply's text past its first ``reply_chars``, and a
    user message's past :data:`~memgas.core.validate.INDEXED_MESSAGE_CHARS`, one message a line ("" when nothing
    was left out). The two together hold every word of the turn: a word at the end of a 1 MB message is found.

    >>> from memgas.core.types import Message, Turn
    >>> turn_tail(Turn(0, (Message("user", "x" * 200_000 + " zebra"), Message("assistant", "Short.")), 0, 2))
    ' zebra'
    """
    return "\n".join(m.content[_reply_cut(m.content, reply_chars):] if m.role != "user"
                     else m.content[INDEXED_MESSAGE_CHARS:] for m in turn.messages
                     if len(m.content) > (reply_chars if m.role != "user" else INDEXED_MESSAGE_CHARS))


def _reply_cut(text: str, reply_chars: int) -> int:
    """Where a reply longer than ``reply_chars`` is cut: at the last space before it, unless that leaves under
    half of it (one long word), then at ``reply_chars`` itself."""
    cut = text.rfind(" ", 0, reply_chars)
    return cut if cut > reply_chars // 2 else reply_chars


def _pack_turns(counts: Sequence[int], budget: int) -> list[tuple[int, int]]:
    """Group consecutive turns greedily into ``(start, end)`` ranges whose token counts fit ``budget``.

    A turn over the budget on its own gets a range of its own; every turn is in exactly one range.
    """
    ranges: list[tuple[int, int]] = []
    start, used = 0, 0
    for i, count in enumerate(counts):
        if i > start and used + count > budget:
            ranges.append((start, i))
            start, used = i, 0
        used += count
    if counts:
        ranges.append((start, len(counts)))
    return ranges


#: An appended session's summary and keyword units read all its turns up to this many (:func:`summary_turns`).
SUMMARY_TURNS = 32
#: Past :data:`SUMMARY_TURNS`, they are written again each time the session grew by this factor.
SUMMARY_GROWTH = 1.25


def summary_turns(n: int) -> int:
    """How many of a session's first turns its summary and keyword units read once an append made it ``n`` turns
    long: all of them up to :data:`SUMMARY_TURNS`, then the largest point of the schedule 32, 40, 50, 62, 77, ...
    (each :data:`SUMMARY_GROWTH` times the one before) that is at most ``n``. A whole add reads every turn.

    So a session that grows one message at a time has them written again only when it passes a point of the schedule
    (O(log n) times over its life) rather than on every message: writing them reads the whole session (a summary,
    YAKE's keywords, an LLM's call), the one part of an append whose cost would grow with the session. Past 32 turns
    they leave out at most the last fifth of the session, and a session's chunks and turns keep every word.

    >>> [summary_turns(n) for n in (1, 32, 39, 40, 49, 50, 1000)]
    [1, 32, 32, 40, 40, 50, 883]
    """
    reach = min(n, SUMMARY_TURNS)
    while n > SUMMARY_TURNS and int(reach * SUMMARY_GROWTH) <= n:
        reach = int(reach * SUMMARY_GROWTH)
    return reach


@dataclass(frozen=True, slots=True)
class Known:
    """What a session's stored units already hold, for :func:`build_units` to derive again only what a change at its
    end touches (an append: the turn it extends or starts, the chunk that holds it).

    Attributes:
        start: the first turn derived again; a boundary between two of the stored session chunks (or 0).
        chunk: the index of the stored session chunk that begins at ``start``.
        turn_vectors: the stored vectors of turns that did not change, by turn index: at least those from
            ``start`` to the first changed turn, and every unchanged turn when ``summary`` is ``None``.
        summary: the stored summary and keyword units, when the session's change leaves them as they are (the
            turns they read, :func:`summary_turns`, did not change), else ``None``.
    """

    start: int
    chunk: int
    turn_vectors: Mapping[int, np.ndarray]
    summary: tuple[Unit, Unit] | None = None


def build_units(
    session: Session,
    embedder: Embedder,
    *,
    summarizer: Summarizer | None = None,
    keyworder: Keyworder | None = None,
    reply_chars: int = 300,
    known: Known | None = None,
    summary_reach: int | None = None,
) -> list[Unit]:
    """Build a session's memory units, with their vectors, at the four granularities.

    Units come in the order: session chunks, turns, summary, keywords.

    * Turns: one unit per turn, its text the whole exchange with speaker names (``name: content``
      lines). Its vector is embedded from :func:`embedding_view` (user messages whole, replies cut to
      ``reply_chars``); a view over the embedder's window is split and its pieces' vectors averaged
      (:func:`embed_texts`), so no user word is lost.
    * Session chunks: consecutive turns grouped greedily, whole turns at a time, as many as one
      window of the embedder reads (by their embedding views' token counts; a turn over the window
      is a chunk of its own). Each chunk records its turn range and holds its turns' whole text, so
      nothing is truncated. A chunk's vector is the re-normalised mean of its turns' vectors: the
      session granularity costs no second embedding pass over the same words.
    * Summary: ``summarizer.summarize(first, turn_vectors)`` over the session's first ``summary_reach`` turns (all
      of them by default; an append to a long session reads :func:`summary_turns`), turn range = those turns.
    * Keywords: ``", ".join(keyworder.keywords(first))`` over the same turns; when the keyworder finds none (a
      short session of small talk) the unit falls back to the summary text, so every session has one.

    The embedder is called twice: turns first (the summarizer needs their vectors), then summary and
    keywords. ``summarize`` is called before ``keywords``, each once per session, so one object
    implementing both (an LLM) can answer both from a single call.

    With ``known`` (a session whose units are stored, changed at its end), only the chunks and turns from
    ``known.start`` on are returned, the unchanged turns' stored vectors are used rather than embedded again, and
    the summary and keyword units are ``known.summary`` when given: the units returned are exactly those a build
    without ``known`` returns from ``known.start`` on (greedy chunking is decided turn by turn from the session's
    start, so the chunks before ``known.start`` are the stored ones).

    Args:
        session: the validated session.
        embedder: the embedder (see :mod:`memgas.embed`).
        summarizer: writes the summary; default :class:`ExtractiveSummarizer`.
        keyworder: writes the keywords; default :class:`YakeKeyworder`.
        reply_chars: how much of each reply the turn vectors read (the stored text keeps all).
        known: what the stored units already hold (see :class:`Known`).
        summary_reach: how many of the session's first turns the summary and keyword units read (``None``: all).

    Returns:
        The units, with ``vector`` set and ``id`` unset.

    Raises:
        MemgasError: the embedder returned vectors of the wrong shape, or the summarizer an empty text.
        InvalidInputError: ``known`` lacks the vector of an unchanged turn the build needs.
    """
    sid = session.session_id
    turns = session.turns
    n = len(turns)
    start, first_chunk = (0, 0) if known is None else (known.start, known.chunk)
    stored = {} if known is None else known.turn_vectors
    reach = n if summary_reach is None else max(1, min(summary_reach, n))
    kept_summary = None if known is None else known.summary
    needed = range(start if kept_summary is not None else 0, n)
    views = {i: embedding_view(turns[i], reply_chars) for i in range(start, n)}
    todo = [i for i in needed if i not in stored]
    if known is not None and any(i < start for i in todo):
        raise InvalidInputError(f"the vector of unchanged turn {min(todo)} of session {sid!r} is not known")
    # Stores keep vectors in float16 (memgas.kernels.quantize): rounded as they are made, a unit in memory is the unit
    # a store gives back, and a similarity is the same whichever of two units was the new one (association is
    # symmetric).
    made = from_half(to_half(embed_texts(embedder, [views[i] for i in todo]))) if todo else None
    vectors = dict(stored) if known is not None else {}
    vectors.update({i: made[k] for k, i in enumerate(todo)} if made is not None else {})

    units = []
    budget = embedder.max_tokens - _SPECIAL_TOKENS
    counts = embedder.count_tokens([views[i] for i in range(start, n)])
    for k, (a, b) in enumerate(_pack_turns(counts, budget)):
        a, b = a + start, b + start
        pooled = np.mean([vectors[i] for i in range(a, b)], axis=0)
        units.append(Unit(sid, "session", "\n".join(turns[i].text for i in range(a, b)), a, b, chunk=first_chunk + k,
                          vector=from_half(to_half(pooled / np.linalg.norm(pooled)))))
    units += [Unit(sid, "turn", turns[i].text, i, i + 1, vector=vectors[i]) for i in range(start, n)]
    if kept_summary is not None:
        return units + list(kept_summary)

    summarizer = summarizer if summarizer is not None else ExtractiveSummarizer()
    keyworder = keyworder if keyworder is not None else YakeKeyworder()
    first = session if reach == n else replace(session, messages=session.messages[: turns[reach - 1].msg_end])
    summary = summarizer.summarize(first, np.stack([vectors[i] for i in range(reach)]))
    if not isinstance(summary, str) or not summary.strip():
        raise MemgasError(f"summarizer {type(summarizer).__name__} returned no summary for session {sid!r}")
    keywords = [k.strip() for k in keyworder.keywords(first) if k and k.strip()]
    keyword_text = ", ".join(keywords) or summary
    last = from_half(to_half(embed_texts(embedder, [summary, keyword_text])))
    units.append(Unit(sid, "summary", summary, 0, reach, vector=last[0]))
    units.append(Unit(sid, "keyword", keyword_text, 0, reach, vector=last[1]))
    return units
