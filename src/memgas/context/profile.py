"""What holds now about a user: their standing instructions, preferences and lasting facts, read from what they said: a sentence is one when the rules of
:mod:`memgas.kernels.standing` say so, or when the learned detector does (:class:`Detector`, the shipped weights of
:mod:`memgas.kernels.lasting` over the embedder's sentence vectors), so "I hate mushrooms." or "My daughter is
allergic to shellfish." count though no phrase of the list is in them.

The profile is derived from the stored user messages, never stored beside them: deleting or editing a message
changes the profile at once, and nothing deleted can come back through it. :class:`Profiles` keeps each user's
statements per session, keyed on the store's version of the user, and re-reads only the sessions written since.

A later statement that replaces an earlier one ("I'm not vegetarian anymore." after "I'm vegetarian.") supersedes it, and the earlier one leaves the
profile: the detector's supersession model says which lasting fact replaces a preference or a fact said before it
(:func:`memgas.kernels.lasting.replacements`, trained with it); two statements that both hold ("I hate mushrooms.",
"I can't stand cilantro.") stay. Between two instructions the model decides where the newer one says it changes
something (:func:`memgas.kernels.lasting.states_a_change`: "Always answer in English from now on." after "Always
answer in French."). Otherwise (two instructions, two preferences), and without the learned models (another
embedder, ``learned=False``), a later statement of the same kind that says nearly the same thing (cosine at least
:data:`SUPERSEDE_COSINE`) supersedes: the model between every pair took BEAM's instructions for one another
(instruction following at 1,000 tokens 0.872 -> 0.743; 2 of BEAM's 255 instructions say they change something) and
its preferences too (0.724 -> 0.698 without the instructions). What one person says never replaces what another
said (a group chat's speakers, by the messages' ``name``), nor does what is said of a relative replace the
speaker's own statement ("My sister lives in Berlin.": :func:`memgas.kernels.subjects.concerns`). An optional LLM
check (:mod:`memgas.context.confirm`, ``Profiles(check=...)``) may keep a statement the models would take out.

Each statement is read for its **subject** (:mod:`memgas.kernels.subjects`: home, diet, food, partner, ..., other;
a third model shipped with the two). Statements on different subjects never replace each other; on a subject of
one value (:data:`~memgas.kernels.subjects.ONE_VALUE`) the newer that says it changes something replaces the older,
whatever their kinds ("Erin (that's me) is vegetarian now." after "I'm pescatarian."), where it was said later (in
a later session, or :data:`LATER_MESSAGES` on in the same one). A lasting fact stays in the profile where the
subject model is sure it is about one of :data:`FACT_SUBJECTS` ("I moved to Lisbon last month."), or where it
retracts a statement shown.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, Collection, Mapping

import numpy as np

from memgas.core.types import Session
from memgas.embed.base import Embedder
from memgas.kernels.excerpt import around, sentence_spans
from memgas.kernels.lasting import (
    CLASSES,
    LastingModel,
    changes_an_instruction,
    replacements,
    speaks_of_a_person,
    states_a_change,
    word_features,
)
from memgas.kernels.standing import (
    INSTRUCTION,
    PREFERENCE,
    Standing,
    condition_of,
    holds_always,
    standing_statements,
)
from memgas.kernels.subjects import ONE_VALUE, SUBJECTS, concerns, same_subject
from memgas.store import Store

if TYPE_CHECKING:  # an LLM's modules are imported only with one (a fast start without)
    from memgas.context.confirm import SupersessionCheck

__all__ = ["EXCERPT_CHARS", "SUPERSEDE_COSINE", "FACT", "FACT_SUBJECTS", "FACT_CERTAINTY", "Detector", "Profiles",
           "StandingStatement"]

#: The detector's kinds a profile takes: preferences and constraints, and lasting facts, which stay only where they
#: say they change something and replace an earlier statement the profile shows ("I'm not vegetarian anymore." after "I'm vegetarian."). Instructions are the rules'
#: (imperatives they read well: the detector's own took the place of the instructions BEAM asks about, 0.878 -> 0.848
#: of them at 1,000 tokens).
FACT = "fact"
_PROFILE_KINDS = {CLASSES.index(PREFERENCE): PREFERENCE, CLASSES.index(FACT): FACT}

#: Two statements of one kind at least this similar speak of the same thing: the later one holds.
SUPERSEDE_COSINE = 0.8


#: The most of its message a statement is shown with: its sentence and the neighbouring ones that fit.
EXCERPT_CHARS = 320


@dataclass(frozen=True, slots=True)
class StandingStatement:
    """One standing instruction or preference: what was said (``text``, one sentence), its ``kind``
    (``"instruction"``, ``"preference"``, or ``"fact"``: a lasting fact that replaced an earlier statement), and where: the session, the message's position in it and the session's
    time. ``always``: an instruction with no condition, which holds for every request. ``excerpt`` is the sentence
    with the neighbouring ones that fit :data:`EXCERPT_CHARS` (what a context shows). ``who``: the speaker's name
    where the message gives one (a group chat's ``Alice``), else ``None`` (the user)."""

    kind: str
    text: str
    session_id: str
    message: int
    timestamp: datetime | None
    always: bool = False
    excerpt: str = field(default="", repr=False, compare=False)
    #: its ``text``'s unit vector, where :class:`Profiles` has embedded it (kept in memory with the statement)
    vector: np.ndarray | None = field(default=None, repr=False, compare=False)
    #: an instruction's condition's unit vector (:func:`memgas.kernels.standing.condition_of`), where it names one and
    #: :class:`Profiles` has embedded it
    condition: np.ndarray | None = field(default=None, repr=False, compare=False)
    who: str | None = None
    #: what it is about (one of :data:`memgas.kernels.subjects.SUBJECTS`: ``"home"``, ``"diet"``, ...), where the
    #: subject model read it, else ``None``
    subject: str | None = None
    #: the subject model's probability of ``subject`` (kept in memory with the statement)
    certainty: float = field(default=0.0, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """The statement as the API returns it."""
        return {"kind": self.kind, "text": self.text, "session_id": self.session_id, "message": self.message,
                "timestamp": self.timestamp.isoformat() if self.timestamp else None, "always": self.always,
                "who": self.who, "subject": self.subject}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StandingStatement:
        """The statement of a :meth:`to_dict` view (as the REST API returns it); its ``excerpt`` is its ``text``."""
        stamp = data.get("timestamp")
        text = str(data["text"])
        return cls(str(data["kind"]), text, str(data["session_id"]), int(data["message"]),
                   datetime.fromisoformat(stamp) if stamp else None, bool(data.get("always")), text,
                   who=data.get("who") or None, subject=data.get("subject") or None)


class Detector:
    """The shipped detector of lasting sentences (``memgas/data/lasting.npz``, trained by ``memgas bench usermodel``)
    over ``embedder``; it reads nothing where the embedder is not the one its weights were fitted over (the rules
    alone decide then).

    Args:
        embedder: the memory's embedder.
        weights: the weights' file, a :class:`~pathlib.Path` (default the shipped one).
    """

    def __init__(self, embedder: Embedder, weights: Any = None) -> None:
        from importlib import resources

        self.embedder = embedder
        source = weights if weights is not None else resources.files("memgas").joinpath("data/lasting.npz")
        with source.open("rb") as f:
            arrays = dict(np.load(f))
        ours = str(arrays.get("embedder")) == getattr(embedder, "id", None)
        self.model = LastingModel.from_arrays(arrays) if ours else None
        #: whether a later statement replaces an earlier one (``None``: the cosine rule decides)
        self.replacer = LastingModel.from_arrays({k[len("pair_"):]: v for k, v in arrays.items()
                                                  if k.startswith("pair_")}) if ours and "pair_coef" in arrays else None
        #: what a statement is about and what a request bears on (``None``: no subjects)
        self.subjects = LastingModel.from_arrays({k[len("subject_"):]: v for k, v in arrays.items()
                                                  if k.startswith("subject_")}) if ours and "subject_coef" in arrays else None

    def subject_probabilities(self, vectors: np.ndarray) -> np.ndarray | None:
        """Each of the sentences' unit ``vectors``' probability of each of :data:`~memgas.kernels.subjects.SUBJECTS`
        (``None`` without the subject model)."""
        if self.subjects is None:
            return None
        return self.subjects.predict_proba(np.asarray(vectors, np.float32).reshape(-1, self.embedder.dim))

    def statements(self, texts: list[str], known: list[list[Standing]]) -> list[list[Standing]]:
        """For each of ``texts`` (user messages), the standing statements the model finds in its sentences of 3 to 80
        words that are not questions and speak of a person (:func:`memgas.kernels.lasting.speaks_of_a_person`: not a
        pasted text's lines), but those of ``known`` (what the rules found there), in order; a sentence the
        model lets pass that the subject model surely reads as about a subject of one value and that says it changes
        something ("Big news: I'm moving to Sellwood next week.") is a lasting fact."""
        if self.model is None:
            return [[] for _ in texts]
        spans = [(t, a, b) for t, (text, found) in enumerate(zip(texts, known))
                 for a, b in _readable(text, found)]
        out: list[list[Standing]] = [[] for _ in texts]
        if not spans:
            return out
        sentences = [" ".join(texts[t][a:b].split()) for t, a, b in spans]
        vectors = np.asarray(self.embedder.embed(sentences), np.float32).reshape(len(sentences), -1)
        rows = np.hstack([vectors, np.stack([word_features(s) for s in sentences])])
        kinds = self.model.predict(rows)
        about = self.subject_probabilities(vectors)
        if about is not None:  # a change of a one-value subject the detector let pass is a lasting fact
            sure = about.max(axis=1) >= FACT_CERTAINTY
            one = np.isin(np.asarray(SUBJECTS, dtype=object)[about.argmax(axis=1)], list(ONE_VALUE))
            changes = np.array([states_a_change(s) for s in sentences])
            kinds = np.where((kinds == 0) & sure & one & changes, CLASSES.index(FACT), kinds)
        for (t, a, b), sentence, kind in zip(spans, sentences, kinds.tolist()):
            if kind in _PROFILE_KINDS and speaks_of_a_person(sentence):
                name = _PROFILE_KINDS[kind]
                out[t].append(Standing(name, a, b, name == INSTRUCTION and holds_always(sentence)))
        return out


#: The most sentences of one message the detector reads, and the most statements one message gives: a long paste
#: (a 1 MB message of 60,000 sentences took 205 s to read and then a profile's pairs no memory holds) is not where
#: a person says what holds about them, and a profile's cost stays bounded by the number of messages.
SENTENCES_PER_MESSAGE = 40
STATEMENTS_PER_MESSAGE = 12


def _readable(text: str, found: list[Standing]) -> list[tuple[int, int]]:
    """The spans of ``text`` the detector reads: its first :data:`SENTENCES_PER_MESSAGE` sentences of 3 to 80 words
    that are not questions and that the rules' ``found`` statements do not hold."""
    out = []
    for a, b in sentence_spans(text):
        if 3 <= len(text[a:b].split()) <= 80 and not text[a:b].rstrip().endswith("?") \
                and not any(s.start <= a < s.end for s in found):
            out.append((a, b))
            if len(out) == SENTENCES_PER_MESSAGE:
                break
    return out


def session_statements(session: Session, detector: Detector | None = None) -> list[StandingStatement]:
    """The standing statements of one session's user messages, in order: what the rules find, and what the
    ``detector`` finds in the other sentences."""
    users = [(i, m) for i, m in enumerate(session.messages) if m.role == "user"]
    known = [standing_statements(m.content)[:STATEMENTS_PER_MESSAGE] for _, m in users]
    learned = detector.statements([m.content for _, m in users], known) if detector is not None else [[]] * len(users)
    out = []
    for (i, m), rules, model in zip(users, known, learned):
        found = sorted(rules + model, key=lambda s: s.start)[:STATEMENTS_PER_MESSAGE]
        for n, s in enumerate(found):
            out.append(StandingStatement(s.kind, m.content[s.start:s.end].strip(), session.session_id, i,
                                         session.timestamp, s.always, _excerpt(m.content, found, n), who=m.name or None))
    return out


def _excerpt(text: str, found: list[Standing], n: int) -> str:
    """The ``n``-th of the statements ``found`` in ``text`` with the neighbouring sentences that fit
    :data:`EXCERPT_CHARS`, but not past another statement: each shows, holds and is replaced on its own ("Hi, I'm
    Erin. I live in Portland." is a name and a home; the home that a move replaced is not shown with the name).

    >>> t = "Hi, I'm Erin. I live in Portland. It rains a lot."
    >>> _excerpt(t, [Standing("fact", 0, 13), Standing("fact", 14, 33)], 0)
    "Hi, I'm Erin. …"
    >>> _excerpt(t, [Standing("fact", 0, 13), Standing("fact", 14, 33)], 1)
    '… I live in Portland. It rains a lot.'
    """
    s = found[n]
    lo = max((o.end for o in found[:n]), default=0)
    hi = min((o.start for o in found[n + 1:]), default=len(text))
    lo, hi = min(lo, s.start), max(hi, s.end)
    shown = around(text[lo:hi], s.start - lo, s.end - lo, EXCERPT_CHARS)[0]
    if text[:lo].strip() and not shown.startswith("…"):
        shown = "… " + shown
    if text[hi:].strip() and not shown.endswith("…"):
        shown += " …"
    return shown


#: The subjects a lasting fact about the person may be shown on: those of one value (a home, a diet, a partner, a
#: job, a language, a name), where the newest holds. Not the others, where the detector's facts are mostly one-off
#: events ("I tried a new lasagna recipe last night.", "Took Biscuit to the vet yesterday.": LoCoMo's observations,
#: which it learned facts from, hold events as facts).
FACT_SUBJECTS = ONE_VALUE
#: ... and only where the subject model is at least this sure of the subject (an event that names a subject reads
#: as it less surely: the lasagna 0.48 diet, "My daughter started piano lessons this week." 0.54 family, "I moved to
#: Lisbon last month." 0.90 home).
FACT_CERTAINTY = 0.6


def _personal(s: StandingStatement) -> bool:
    """Whether ``s`` stays in a profile by its kind: an instruction or a preference, or a fact the subject model
    surely reads as about one of :data:`FACT_SUBJECTS`."""
    return s.kind != FACT or (s.subject in FACT_SUBJECTS and s.certainty >= FACT_CERTAINTY)


#: In one session, a statement at least this many messages after another is later than it; nearer, the two are one
#: moment of the conversation and both hold ("I moved to Sellwood last week." then "Sellwood is quieter than where I
#: lived before.").
LATER_MESSAGES = 4


def _said_later(found: list[StandingStatement]) -> np.ndarray:
    """``[i, j]``: statement ``j`` (of ``found``, oldest first) was said later than ``i``: in another session (a later
    one, by the order), or at least :data:`LATER_MESSAGES` messages on in the same one."""
    session = np.array([s.session_id for s in found], dtype=object)
    message = np.array([s.message for s in found])
    near = (session[:, None] == session[None, :]) & (message[None, :] - message[:, None] < LATER_MESSAGES)
    return np.triu(~near, 1)


def _when(s: StandingStatement) -> tuple[float, str, int]:
    """A sort key in time: the session's time (undated first), then the message position."""
    return (s.timestamp.timestamp() if s.timestamp else float("-inf"), s.session_id, s.message)


class Profiles:
    """Each user's current standing statements, cached per store and user (the ``max_users`` most recently read)
    and brought up to date incrementally."""

    def __init__(self, embedder: Embedder, max_users: int = 1024, *, learned: bool = True,
                 check: SupersessionCheck | None = None) -> None:
        self.embedder = embedder
        #: what may confirm each replacement before the earlier statement leaves (``None``: the models decide)
        self.check = check
        #: what finds the statements the rules miss (``None``: the rules alone)
        self.detector = Detector(embedder) if learned else None
        self.max_users = max_users
        self._lock = threading.Lock()
        #: (store id, user) → (version key, statements per session id), the least recently read first
        self._cache: OrderedDict[tuple[int, str], tuple[tuple[int, int], dict[str, list[StandingStatement]]]] = \
            OrderedDict()
        #: (store id, user) → (version key, sessions within, excluded, the current statements) of the last call:
        #: an agent asks with the same scope turn after turn, and superseding compares every pair of statements
        self._current: OrderedDict[tuple[int, str], tuple[Any, ...]] = OrderedDict()
        #: (store id, user) → (the scope, :meth:`marks`) of the last call: they are read on every context
        self._marks: OrderedDict[tuple[int, str], tuple[Any, dict[tuple[str, int], tuple[frozenset[str], bool]]]] = \
            OrderedDict()

    def _per_session(self, store: Store, user_id: str) -> tuple[tuple[int, int], dict[str, list[StandingStatement]]]:
        """The version key the user's statements are of, and the statements per session."""
        key = (store.version(user_id), store.generation)
        with self._lock:
            cached = self._cache.get((id(store), user_id))
            if cached is not None:
                self._cache.move_to_end((id(store), user_id))
        if cached is not None and cached[0] == key:
            return cached
        ids = {i.session_id for i in store.list_sessions(user_id)}
        if cached is None:
            changed = ids
            per: dict[str, list[StandingStatement]] = {}
        else:
            per = {sid: v for sid, v in cached[1].items() if sid in ids}
            changed = {i.session_id for i in store.sessions_since(user_id, cached[0][0])[0]} | (ids - set(per))
        fresh = {sid: session_statements(store.get_session(user_id, sid), self.detector) for sid in changed}
        texts = [st.text for v in fresh.values() for st in v]
        conditions = [condition_of(st.text) if st.kind == INSTRUCTION else None for v in fresh.values() for st in v]
        asked = [c for c in conditions if c is not None]
        # once per statement (and instruction's condition), when its session is read
        made, made_conditions = np.split(self.vectors_of(texts + asked), [len(texts)])
        probabilities = self.detector.subject_probabilities(made) if self.detector is not None else None
        read: list[tuple[str | None, float]] = [(None, 0.0)] * len(texts) if probabilities is None else [
            (SUBJECTS[i], float(p[i])) for p, i in zip(probabilities, probabilities.argmax(axis=1).tolist())]
        subjects, vectors, condition_vectors = iter(read), iter(made), iter(made_conditions)
        limits = iter(conditions)
        per.update({sid: [replace(st, vector=next(vectors), subject=subject, certainty=certainty,
                                  condition=None if next(limits) is None else next(condition_vectors))
                          for st in v for subject, certainty in [next(subjects)]] for sid, v in fresh.items()})
        with self._lock:
            self._cache[(id(store), user_id)] = (key, per)
            while len(self._cache) > self.max_users:  # a server's many users: the least recently read go first
                self._cache.popitem(last=False)
        return key, per

    def statements(self, store: Store, user_id: str, *, within: Collection[str] | None = None,
                   excluded: Collection[str] = ()) -> list[StandingStatement]:
        """The user's current standing statements, oldest first (superseded ones left out), of the sessions
        ``within`` (``None``: all) less ``excluded``.

        Raises:
            MemgasError: the store or embedder failed.
        """
        key, per = self._per_session(store, user_id)
        scope = (key, None if within is None else frozenset(within), frozenset(excluded))
        with self._lock:
            last = self._current.get((id(store), user_id))
        if last is not None and last[:3] == scope:
            return list(last[3])
        replaced: frozenset[tuple[str, int]] = frozenset()
        found = sorted((s for sid, v in per.items() if (within is None or sid in within) and sid not in excluded
                        for s in v), key=_when)
        if len(found) >= 2:
            vectors = self.vectors(found)
            kinds = np.array([s.kind for s in found])
            alike = np.triu(vectors @ vectors.T >= SUPERSEDE_COSINE, 1) & (kinds[:, None] == kinds[None, :])
            replaces = alike
            # what one person says never replaces what another said (a group chat: Alice's diet is not Bob's), nor
            # what is about another ("My sister lives in Berlin." is not the speaker's home); a partner is the
            # speaker's own subject, however it is said ("My wife is Ana." then "I'm with Jordan now.")
            who = np.array([f"{s.who or ''}\x00{'' if s.subject == 'partner' else concerns(s.text)}" for s in found])
            same_person = who[:, None] == who[None, :]
            told = kinds == INSTRUCTION
            replacer = self.detector.replacer if self.detector is not None else None
            if replacer is not None:
                texts = [s.text for s in found]
                learned = replacements(replacer, vectors, texts, [s.kind for s in found])
                # the model says which fact replaces a preference or a fact said before it, and which instruction
                # replaces one before it where the newer says it changes how to answer ("from now on", "instead";
                # not "new": "Always confirm start dates when I ask about new job roles." replaced the date format)
                changes = np.array([changes_an_instruction(t) for t in texts])
                about = (~told[:, None] & (kinds == FACT)[None, :]) | (told[:, None] & (told & changes)[None, :])
                replaces = np.where(about, learned, replaces)
            # statements on different subjects never replace each other; on a subject of one value (home, diet,
            # work, the answer language) the newer that says it changes something replaces the older, whatever
            # their kinds ("Erin (that's me) is vegetarian now." after "I'm pescatarian."), an instruction aside: it
            # is no value of the person's ("Always confirm salary figures when I ask about compensation." is not
            # replaced by "I'm stressed about my new role."), but on the answer language, which is how to answer
            may, one = same_subject([s.subject for s in found])
            changes = np.array([states_a_change(s.text) for s in found])
            valued = ~told | np.array([s.subject == "language" for s in found])
            replaces = (replaces & may) | np.triu(one & changes[None, :] & valued[:, None] & valued[None, :], 1)
            # a replacement is said later (a near repeat of a statement is one whenever it is said)
            replaces &= same_person & (_said_later(found) | alike)
            if self.check is not None:  # an LLM may say a replacement is none (memgas.context.confirm)
                replaces = self.check.confirm(found, replaces)
            shown = np.array([s.kind != FACT for s in found])
            # a fact stays where it is about one of the person's subjects (home, partner, diet...), or where it
            # replaces a statement the profile shows and says it changes something (a preference it retracts): a
            # fact of no such subject that the model merely paired with a preference was an old value as often
            # (BEAM's knowledge updates: "reduced the latency from 250ms to 210ms" above the later 180ms)
            said_change = np.array([s.kind == FACT for s in found]) & changes
            gone, replacing = replaces.any(axis=1), (replaces & shown[:, None]).any(axis=0) & said_change
            # a message is earlier where a later one replaced its statement, not where it says one twice
            place = np.array([f"{s.session_id}\x00{s.message}" for s in found])
            later = (replaces & (place[:, None] != place[None, :])).any(axis=1)
            replaced = frozenset((s.session_id, s.message) for s, out in zip(found, later) if out)
            found = [s for s, out, new in zip(found, gone, replacing) if not out and (_personal(s) or new)]
        else:  # a fact alone replaces nothing: it stays where it is about one of the person's subjects
            found = [s for s in found if _personal(s)]
        with self._lock:
            self._current[(id(store), user_id)] = (*scope, tuple(found), replaced)
            self._current.move_to_end((id(store), user_id))
            while len(self._current) > self.max_users:
                self._current.popitem(last=False)
        return list(found)

    def marks(self, store: Store, user_id: str, *, within: Collection[str] | None = None,
              excluded: Collection[str] = ()) -> dict[tuple[str, int], tuple[frozenset[str], bool]]:
        """For each user message holding a lasting statement, as ``(session_id, index)``: the subjects its statements
        are about, and whether a newer statement replaced one of them (among :meth:`statements` of the same scope):
        what a context's memories mark ``(earlier)``, and which two of its lines cannot speak of one thing. The same
        dict while the statements and the scope are the same (a context reads it on every request): read, not changed."""
        self.statements(store, user_id, within=within, excluded=excluded)
        version, per = self._per_session(store, user_id)
        scope = (version, None if within is None else frozenset(within), frozenset(excluded))
        with self._lock:
            last = self._current.get((id(store), user_id))
            made = self._marks.get((id(store), user_id))
        if made is not None and made[0] == scope:  # a context asks each turn; the marks change with the statements
            return made[1]
        replaced = last[4] if last is not None and last[:3] == scope else frozenset()
        out: dict[tuple[str, int], tuple[frozenset[str], bool]] = {}
        for v in per.values():
            for st in v:
                key = (st.session_id, st.message)
                held = out.get(key, (frozenset(), False))[0]
                out[key] = (held | ({st.subject} if st.subject else set()), key in replaced)
        with self._lock:
            self._marks[(id(store), user_id)] = (scope, out)
            self._marks.move_to_end((id(store), user_id))
            while len(self._marks) > self.max_users:
                self._marks.popitem(last=False)
        return out

    def vectors(self, statements: list[StandingStatement]) -> np.ndarray:
        """The statements' unit vectors, one row each (those :meth:`statements` gave carry theirs already)."""
        missing = [s.text for s in statements if s.vector is None]
        made = iter(self.vectors_of(missing))
        rows = [s.vector if s.vector is not None else next(made) for s in statements]
        return np.asarray(rows, np.float32).reshape(len(statements), self.embedder.dim)

    def relevance(self, statements: list[StandingStatement], query_vector: np.ndarray) -> np.ndarray:
        """Each statement's cosine with a request's unit ``query_vector``: the greater of its text's and, for an
        instruction limited to some requests, its condition's (the condition names the requests it is for)."""
        cosine = self.vectors(statements) @ query_vector
        limited = [i for i, s in enumerate(statements) if s.condition is not None]
        if limited:
            conditions = np.stack([statements[i].condition for i in limited]) @ query_vector  # type: ignore[misc]
            cosine[limited] = np.maximum(cosine[limited], conditions)
        return cosine

    def vectors_of(self, texts: list[str]) -> np.ndarray:
        """The texts' unit vectors from the embedder (``(0, dim)`` for none)."""
        if not texts:
            return np.zeros((0, self.embedder.dim), np.float32)
        return np.asarray(self.embedder.embed(texts), np.float32)
