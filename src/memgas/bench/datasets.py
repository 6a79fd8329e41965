"""Loaders for the two retrieval benchmarks: LongMemEval (S/oracle) and LoCoMo.

Both turn the upstream JSON into memgas :class:`~memgas.core.types.Session` objects plus
:class:`BenchQuestion` records that carry the gold evidence at three levels:
session ids, memgas turns ``(session_id, turn index)`` (see :func:`memgas.core.types.group_turns`)
and the dataset's own turn ids (for reports). Gold labels never enter message content.

References:
    Wu et al., "LongMemEval: Benchmarking Chat Assistants on Long-Term Interactive Memory",
    ICLR 2025 (github.com/xiaowu0162/LongMemEval, ``src/retrieval/run_retrieval.py``).
    Maharana et al., "Evaluating Very Long-Term Conversational Memory of LLM Agents",
    ACL 2024 (github.com/snap-research/LoCoMo, ``task_eval/evaluation.py``).
"""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from itertools import islice
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

from memgas.core.errors import InvalidInputError
from memgas.core.types import Message, Session, group_turns
from memgas.core.validate import check_id, make_session, parse_timestamp

__all__ = [
    "LOCOMO_CATEGORIES",
    "evidence_speakers",
    "BenchQuestion",
    "BenchConversation",
    "LoadReport",
    "load_longmemeval",
    "load_locomo",
    "locomo_dia_ids",
]

#: LoCoMo's integer ``category`` → the name most papers use.
LOCOMO_CATEGORIES: dict[int, str] = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}

_CHUNK_CHARS = 1 << 22  # characters read per step when streaming a JSON array (~4 MiB)
_ID_BAD_CHARS = re.compile(r"[^\w.:@/+-]")
_DIA_ID = re.compile(r"D(\d+):(\d+)")
_LOCOMO_SESSION_KEY = re.compile(r"session_(\d+)")
_LOCOMO_DATE_KEY = re.compile(r"session_(\d+)_date_time")


@dataclass(slots=True)
class BenchQuestion:
    """One benchmark question with its haystack and gold evidence.

    ``gold_turns`` holds ``(session_id, memgas turn index)`` pairs; ``gold_turn_ids`` the dataset's own
    turn ids (LongMemEval ``<session_id>_<1-based message position>``, LoCoMo ``D<n>:<t>``).
    ``scorable`` is false for questions the official retrieval average skips; ``skip_reason`` says why.
    """

    qid: str
    question: str
    answer: str
    qtype: str
    question_date: datetime | None
    sessions: list[Session]
    gold_sessions: set[str]
    gold_turns: set[tuple[str, int]]
    gold_turn_ids: set[str]
    scorable: bool
    skip_reason: str | None
    conv_id: str
    #: the gold evidence messages' texts by group (``"all"``, or BEAM's ``original_info``/``updated_info`` ...), for
    #: the context measures (:mod:`memgas.bench.context`); empty where the dataset names no messages
    gold_messages: dict[str, list[str]] = field(default_factory=dict)
    #: each gold message's place: (session id, message position), in the order of ``gold_messages``
    gold_places: dict[str, list[tuple[str, int]]] = field(default_factory=dict)


@dataclass(slots=True)
class BenchConversation:
    """One LoCoMo conversation: its sessions (ids ``S<n>``) and the questions asked about it."""

    conv_id: str
    speakers: tuple[str, str]
    sessions: list[Session]
    questions: list[BenchQuestion]


@dataclass(slots=True)
class LoadReport:
    """Data defects met while loading LoCoMo, each kept so that a run can print what it left out.

    Attributes:
        dropped_evidence: ``(conv_id, qa index, raw id)`` of evidence ids that name no existing turn.
        normalized_evidence: ``(conv_id, qa index, raw id, id used)`` for ids written with leading
            zeros (``D30:05`` → ``D30:5``).
        malformed_evidence: ``(conv_id, qa index, raw string)`` of evidence strings that are not one
            clean ``D<n>:<t>`` id (several ids in one string, stray characters, no id at all).
        orphan_dates: ``(conv_id, key)`` of ``session_<n>_date_time`` keys with no (or an empty) session.
    """

    dropped_evidence: list[tuple[str, int, str]] = field(default_factory=list)
    normalized_evidence: list[tuple[str, int, str, str]] = field(default_factory=list)
    malformed_evidence: list[tuple[str, int, str]] = field(default_factory=list)
    orphan_dates: list[tuple[str, str]] = field(default_factory=list)


def _sanitize_id(raw: object) -> str:
    """A dataset id made into a valid memgas user id (bad characters → ``_``, at most 256)."""
    return _ID_BAD_CHARS.sub("_", str(raw))[:256] or "_"


def _check_file(path: Path, name: str) -> Path:
    path = Path(path)
    if not path.is_file():
        raise InvalidInputError(f"{name} data not found at {path}; pass --data PATH")
    return path


def _check_limit(limit: int | None) -> int | None:
    if limit is not None and (not isinstance(limit, int) or limit < 0):
        raise InvalidInputError(f"invalid limit {limit!r}: expected a non-negative integer or None")
    return limit


def _iter_json_array(path: Path) -> Iterator[Any]:
    """Yield the elements of a top-level JSON array (``.json`` or ``.json.gz``) one at a time.

    Streaming keeps the peak memory at one element plus one read chunk instead of the whole parsed
    file (the LongMemEval-S dev file is 129 MB of JSON), and lets ``limit`` stop early.

    Raises:
        InvalidInputError: the file is not a JSON array, or it is truncated or malformed.
    """
    decoder = json.JSONDecoder()
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as fh:
        buf, pos, eof, started = "", 0, False, False
        while True:
            while pos < len(buf) and buf[pos] in " \t\r\n,":
                pos += 1
            if pos == len(buf):
                if eof:
                    raise InvalidInputError(f"{path}: truncated JSON, the top-level array is not closed")
                buf, pos = fh.read(_CHUNK_CHARS), 0
                eof = not buf
                continue
            if not started:
                if buf[pos] != "[":
                    raise InvalidInputError(f"{path}: expected a JSON array of records")
                started, pos = True, pos + 1
                continue
            if buf[pos] == "]":
                return
            try:
                item, pos = decoder.raw_decode(buf, pos)
            except json.JSONDecodeError as exc:
                # Most failures only mean the element runs past the buffer: read more and retry.
                more = "" if eof else fh.read(_CHUNK_CHARS)
                if not more:
                    raise InvalidInputError(f"{path}: invalid JSON ({exc})") from exc
                buf, pos = buf[pos:] + more, 0
                continue
            yield item


def _record_error(path: Path, index: int, record: object, exc: Exception) -> InvalidInputError:
    rid = record.get("question_id", record.get("sample_id")) if isinstance(record, Mapping) else None
    what = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
    return InvalidInputError(f"{path.name}: record {index} ({rid}): {what}")


# ---------------------------------------------------------------- LongMemEval


def _is_blank(content: object) -> bool:
    return isinstance(content, str) and not content.strip()


class _LmeSessionCache:
    """Validated message tuples per session id, shared by every question that holds the session.

    Filler sessions recur across questions with the same content (but not always the same date);
    sharing the tuple of :class:`Message` saves memory and lets later code cache per-session work
    by session id. Parsed timestamps are cached by their string.
    """

    def __init__(self) -> None:
        self.messages: dict[str, tuple[tuple[Message, ...], int]] = {}
        self.times: dict[str | None, datetime | None] = {}

    def session(self, user_id: str, session_id: str, raw: list[Mapping[str, Any]], date: str | None) -> Session:
        if date not in self.times:
            self.times[date] = parse_timestamp(date)
        cached = self.messages.get(session_id)
        if cached is None:
            kept = [{"role": m["role"], "content": m["content"]} for m in raw if not _is_blank(m["content"])]
            msgs = make_session(kept, user_id=user_id, session_id=session_id).messages
            self.messages[session_id] = (msgs, len(raw))
        else:
            msgs, n_raw = cached
            if n_raw != len(raw):  # cheap guard on the "same id, same content" guarantee
                raise InvalidInputError(f"session {session_id!r} appears with different contents")
        return Session(user_id=user_id, session_id=session_id, messages=msgs, timestamp=self.times[date])


def _lme_gold_turns(session: Session, raw: list[Mapping[str, Any]]) -> tuple[list[int], list[int]]:
    """Gold memgas turn indexes and official 1-based positions (in ``raw``) of the user ``has_answer`` messages."""
    positions = [
        p
        for p, m in enumerate(raw)
        if m["role"] == "user" and m.get("has_answer") is True and not _is_blank(m["content"])
    ]
    if not positions:
        return [], []
    kept = [p for p, m in enumerate(raw) if not _is_blank(m["content"])]
    kept_at = {p: i for i, p in enumerate(kept)}
    turn_of = [t.index for t in group_turns(session.messages) for _ in range(t.msg_start, t.msg_end)]
    return [turn_of[kept_at[p]] for p in positions], [p + 1 for p in positions]


def _lme_question(record: Mapping[str, Any], cache: _LmeSessionCache) -> BenchQuestion:
    qid = str(record["question_id"])
    user_id = check_id("user_id", _sanitize_id(qid))
    answer_ids = set(record["answer_session_ids"])
    sids, dates, haystack = record["haystack_session_ids"], record["haystack_dates"], record["haystack_sessions"]
    if not len(sids) == len(dates) == len(haystack):
        raise InvalidInputError("haystack_session_ids, haystack_dates and haystack_sessions differ in length")
    sessions: list[Session] = []
    gold_sessions: set[str] = set()
    gold_turns: set[tuple[str, int]] = set()
    gold_turn_ids: set[str] = set()
    gold_texts: list[str] = []
    seen: set[str] = set()
    for sid, date, raw in zip(sids, dates, haystack):
        if sid in seen:  # 5 dev haystacks repeat a filler session; a store holds it once
            continue
        seen.add(sid)
        session = cache.session(user_id, sid, raw, date)
        sessions.append(session)
        if sid in answer_ids:
            turns, positions = _lme_gold_turns(session, raw)
            if turns:  # officially an answer session without a user has_answer turn becomes noans_*
                gold_sessions.add(sid)
                gold_turns.update((sid, t) for t in turns)
                gold_turn_ids.update(f"{sid}_{p}" for p in positions)
                gold_texts += [str(raw[p - 1]["content"]) for p in positions]
    skip = "abstention" if qid.endswith("_abs") else None if gold_sessions else "no user-side has_answer turn"
    return BenchQuestion(
        qid=qid,
        question=str(record["question"]),
        answer=str(record["answer"]),
        qtype=str(record["question_type"]),
        question_date=parse_timestamp(record.get("question_date")),
        sessions=sessions,
        gold_sessions=gold_sessions,
        gold_turns=gold_turns,
        gold_turn_ids=gold_turn_ids,
        scorable=skip is None,
        skip_reason=skip,
        conv_id=qid,
        gold_messages={"all": gold_texts} if gold_texts else {},
    )


def load_longmemeval(path: Path, limit: int | None = None) -> list[BenchQuestion]:
    """Load LongMemEval (S, M or oracle; ``.json`` or ``.json.gz``) as benchmark questions.

    Each question's haystack becomes memgas sessions (``user_id`` = the question id, ``session_id``
    = the dataset's, all messages of both roles, ``has_answer`` flags dropped). Gold follows the
    official retrieval code: gold sessions are the ``answer_session_ids`` that hold at least one
    user message with ``has_answer: true``; gold turns are the memgas turns holding such a message;
    ``gold_turn_ids`` are the official turn ids ``<session_id>_<1-based message position>``.
    A question is scorable unless it is an abstention question (``_abs``) or has no gold session.

    Notes:
        Messages with blank content (6 in the dev file) are dropped; a session id repeated inside one
        haystack is kept once. Sessions with the same id share one ``messages`` tuple across
        questions (``a.messages is b.messages``), so per-session work can be cached by session id;
        the :class:`Session` objects themselves are per question, since their ``user_id`` and
        (for ~10% of filler sessions) ``timestamp`` differ.

    Args:
        path: the dataset file.
        limit: load only the first ``limit`` questions (the file is read only that far).

    Returns:
        The questions, in file order.

    Raises:
        InvalidInputError: the file is missing, is not valid JSON, a record is malformed, or
            ``limit`` is negative.
    """
    path = _check_file(path, "LongMemEval")
    cache = _LmeSessionCache()
    questions: list[BenchQuestion] = []
    for i, record in enumerate(islice(_iter_json_array(path), _check_limit(limit))):
        try:
            questions.append(_lme_question(record, cache))
        except (KeyError, TypeError, ValueError) as exc:
            raise _record_error(path, i, record, exc) from exc
    return questions


# ---------------------------------------------------------------- LoCoMo


def _locomo_content(m: Mapping[str, Any]) -> str:
    """The message text, with an image shared in it appended as ``[image: <blip_caption>]``."""
    text = str(m["text"]).strip()
    caption = str(m.get("blip_caption") or "").strip()
    if not caption:
        return text
    return f"{text} [image: {caption}]" if text else f"[image: {caption}]"


def _dia_id(match: re.Match[str]) -> str:
    """``D<n>:<t>`` with the numbers as integers (``D30:05`` → ``D30:5``)."""
    return f"D{int(match.group(1))}:{int(match.group(2))}"


def _locomo_sessions(
    conv_id: str, conv: Mapping[str, Any], report: LoadReport
) -> tuple[list[Session], dict[str, tuple[str, int]]]:
    """The conversation's sessions, and each dialogue id → ``(session id, memgas turn index)``."""
    speaker_a, speaker_b = conv["speaker_a"], conv["speaker_b"]
    roles = {speaker_a: "user", speaker_b: "assistant"}
    numbers = sorted(int(m.group(1)) for k in conv if (m := _LOCOMO_SESSION_KEY.fullmatch(k)))
    for key in conv:
        if (m := _LOCOMO_DATE_KEY.fullmatch(key)) and not conv.get(f"session_{m.group(1)}"):
            report.orphan_dates.append((conv_id, key))
    user_id = check_id("user_id", _sanitize_id(conv_id))
    sessions: list[Session] = []
    turn_of_dia: dict[str, tuple[str, int]] = {}
    for n in numbers:
        raw = conv[f"session_{n}"]
        if not raw:
            continue
        unknown = {m["speaker"] for m in raw} - roles.keys()
        if unknown:
            raise InvalidInputError(f"session_{n}: speaker(s) {sorted(unknown)} are neither speaker_a nor speaker_b")
        sid = f"S{n}"
        dia_ids = tuple(_dia_id(m) if (m := _DIA_ID.fullmatch(str(d["dia_id"]))) else str(d["dia_id"]) for d in raw)
        session = make_session(
            [{"role": roles[m["speaker"]], "content": _locomo_content(m), "name": m["speaker"]} for m in raw],
            user_id=user_id,
            session_id=sid,
            timestamp=conv.get(f"session_{n}_date_time"),
            metadata={"dia_ids": dia_ids},
        )
        sessions.append(session)
        for turn in session.turns:
            for p in range(turn.msg_start, turn.msg_end):
                turn_of_dia[dia_ids[p]] = (sid, turn.index)
    return sessions, turn_of_dia


def _locomo_question(
    conv_id: str,
    index: int,
    qa: Mapping[str, Any],
    sessions: list[Session],
    turn_of_dia: Mapping[str, tuple[str, int]],
    report: LoadReport,
) -> BenchQuestion:
    category = int(qa["category"])
    if category not in LOCOMO_CATEGORIES:
        raise InvalidInputError(f"qa {index}: unknown category {category}")
    gold_sessions: set[str] = set()
    gold_turns: set[tuple[str, int]] = set()
    gold_turn_ids: set[str] = set()
    for text in qa.get("evidence") or []:
        text = str(text)
        if not _DIA_ID.fullmatch(text.strip()):
            report.malformed_evidence.append((conv_id, index, text))
        for match in _DIA_ID.finditer(text):
            dia = _dia_id(match)
            if dia != match.group(0):
                report.normalized_evidence.append((conv_id, index, match.group(0), dia))
            if dia not in turn_of_dia:
                report.dropped_evidence.append((conv_id, index, match.group(0)))
                continue
            sid, turn = turn_of_dia[dia]
            gold_sessions.add(sid)
            gold_turns.add((sid, turn))
            gold_turn_ids.add(dia)
    answer = qa.get("adversarial_answer", qa.get("answer")) if category == 5 else qa.get("answer")
    skip = "adversarial" if category == 5 else None if gold_turn_ids else "no valid evidence"
    by_id = {s.session_id: s for s in sessions}
    places = [(sid, list(by_id[sid].metadata["dia_ids"]).index(dia))
              for dia in sorted(gold_turn_ids) for sid in [turn_of_dia[dia][0]]]
    return BenchQuestion(
        qid=f"{conv_id}_q{index}",
        question=str(qa["question"]),
        answer="" if answer is None else str(answer),
        qtype=LOCOMO_CATEGORIES[category],
        question_date=max((s.timestamp for s in sessions if s.timestamp is not None), default=None),
        sessions=sessions,
        gold_sessions=gold_sessions,
        gold_turns=gold_turns,
        gold_turn_ids=gold_turn_ids,
        scorable=skip is None,
        skip_reason=skip,
        conv_id=conv_id,
        gold_messages=_by_side([by_id[sid].messages[p] for sid, p in places]),
        gold_places={"all": places} if places else {},
    )


def load_locomo(path: Path, limit: int | None = None) -> tuple[list[BenchConversation], LoadReport]:
    """Load LoCoMo (``locomo10.json``) as conversations with their questions.

    Sessions get the official ids ``S<n>``, ``user_id`` = the sample id, and the timestamp of
    ``session_<n>_date_time``. LoCoMo gives questions no date; they are asked after the conversation,
    so each question's ``question_date`` is its latest session's time (a question that names a date
    or month, "on 7 July, 2023", "in May 2023", then gets a time window; see :mod:`memgas.kernels.temporal`).
    ``speaker_a`` speaks as ``user`` and ``speaker_b`` as ``assistant``, each with ``name`` set; so a
    memgas turn is a ``speaker_a`` message with the reply after it (a session that ``speaker_b`` opens
    starts with a turn of its own). An image shared in a message
    is appended to its text as ``[image: <blip_caption>]``. ``session.metadata["dia_ids"]`` lists
    each message's dialogue id, for dialogue-level recall.

    Evidence ids are found with the regex ``D(\\d+):(\\d+)`` in every evidence string, which recovers
    malformed strings; ids that name no existing turn are dropped. Questions of category 5
    (adversarial) and questions left without evidence are not scorable. The answer of a category 5
    question is its ``adversarial_answer``. Every defect met is listed in the :class:`LoadReport`.

    Args:
        path: the dataset file.
        limit: load only the first ``limit`` conversations.

    Returns:
        The conversations in file order, and the report of data defects.

    Raises:
        InvalidInputError: the file is missing, is not valid JSON, a record is malformed, or
            ``limit`` is negative.
    """
    path = _check_file(path, "LoCoMo")
    report = LoadReport()
    conversations: list[BenchConversation] = []
    for i, sample in enumerate(islice(_iter_json_array(path), _check_limit(limit))):
        try:
            conv_id = str(sample["sample_id"])
            conv = sample["conversation"]
            sessions, turn_of_dia = _locomo_sessions(conv_id, conv, report)
            questions = [
                _locomo_question(conv_id, j, qa, sessions, turn_of_dia, report) for j, qa in enumerate(sample["qa"])
            ]
        except (KeyError, TypeError, ValueError) as exc:
            raise _record_error(path, i, sample, exc) from exc
        speakers = (str(conv["speaker_a"]), str(conv["speaker_b"]))
        conversations.append(BenchConversation(conv_id, speakers, sessions, questions))
    return conversations, report


def _by_side(said: Sequence[Message]) -> dict[str, list[str]]:
    """LoCoMo's gold messages grouped by who said them: ``speaker_a`` (stored as the user) and ``speaker_b`` (as the
    assistant), so the context measures can be read per side (:func:`memgas.bench.context.context_metrics`)."""
    out: dict[str, list[str]] = {}
    for m in said:
        out.setdefault("speaker_a" if m.role == "user" else "speaker_b", []).append(m.content)
    return out


def evidence_speakers(question: BenchQuestion) -> set[str]:
    """Who said the question's evidence: the speaker names of the messages its dataset turn ids name, where the
    sessions record their messages' ids (LoCoMo's ``dia_ids`` in each session's metadata); else empty."""
    said: dict[str, str] = {}
    for session in question.sessions:
        ids = session.metadata.get("dia_ids") or ()
        said.update((str(dia), m.name or m.role) for dia, m in zip(ids, session.messages))
    return {said[dia] for dia in question.gold_turn_ids if dia in said}


def locomo_dia_ids(sessions: Sequence[Session], turns: Iterable[tuple[str, int]]) -> list[str]:
    """The LoCoMo dialogue ids (``D<n>:<t>``) of the messages in the given memgas turns, in order.

    Use it to score a turn ranking with the official dialogue-level recall:
    ``locomo_recall(locomo_dia_ids(q.sessions, ranked_turns[:k]), q.gold_turn_ids)``.

    Raises:
        InvalidInputError: a turn names a session or turn index the conversation does not have.
    """
    by_id = {s.session_id: s for s in sessions}
    out: list[str] = []
    for sid, index in turns:
        session = by_id.get(sid)
        turn_list = session.turns if session is not None else ()
        if session is None or not 0 <= index < len(turn_list):
            raise InvalidInputError(f"no turn {index} in LoCoMo session {sid!r}")
        turn = turn_list[index]
        out.extend(session.metadata["dia_ids"][turn.msg_start : turn.msg_end])
    return out
