"""BEAM (Tavakoli et al., ICLR 2026): long single conversations, ten abilities, gold evidence as message ids.

Each conversation is one user; each of its batches is one dated session (the batch's time anchor), in order.
The generation markers at the end of user messages (`` ->-> 1,25``) are stripped before anything is stored: they
are an artefact of how the data was made. A question's gold evidence is the messages its ``source_chat_ids``
name; knowledge_update questions name the original and the updated evidence apart, and so does
:class:`BeamQuestion` (``groups``). Abstention questions have no evidence and are not scored.
"""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

from memgas.bench.datasets import BenchQuestion
from memgas.context import ContextOptions
from memgas.core.errors import InvalidInputError
from memgas.core.types import Message, Session, group_turns
from memgas.embed.base import Embedder
from memgas.methods.ranking import Ranking

if TYPE_CHECKING:
    from memgas.bench.runner import BenchResult

__all__ = ["BeamConversation", "BEAM_ABILITIES", "load_beam", "strip_marker", "gold_ids", "beam_dirs", "DEFAULT_BEAM", "one_user",
           "ONE_USER"]

#: The user who said everything (``bench beam --one-user``).
ONE_USER = "beam-one-user"

#: The data folder the command reads by default (relative to the project root).
DEFAULT_BEAM = Path("../shared/data/beam")

BEAM_ABILITIES = ("abstention", "contradiction_resolution", "event_ordering", "information_extraction",
                  "instruction_following", "knowledge_update", "multi_session_reasoning", "preference_following",
                  "summarization", "temporal_reasoning")

_MARKER = re.compile(r"\s*->->\s*[\d,\s]+$")
_ANCHOR_FORMATS = ("%B-%d-%Y", "%b-%d-%Y")


def strip_marker(text: str) -> str:
    """``text`` without BEAM's trailing generation marker.

    >>> strip_marker("Always use type hints. ->-> 1,25")
    'Always use type hints.'
    >>> strip_marker("no marker here")
    'no marker here'
    """
    return _MARKER.sub("", text)


def _anchor(text: str | None) -> datetime | None:
    """A batch's time anchor (``"March-15-2024"``) as a date, ``None`` when absent or unreadable."""
    if not text:
        return None
    for fmt in _ANCHOR_FORMATS:
        try:
            return datetime.strptime(text.strip(), fmt)
        except ValueError:
            continue
    return None


@dataclass(slots=True)
class BeamConversation:
    """One BEAM conversation: its sessions (one per batch), its scored questions, and where each message is."""

    conv_id: str
    scale: str
    sessions: list[Session]
    questions: list[BenchQuestion]
    #: the message id → ``(session id, message position in that session)``
    where: dict[int, tuple[str, int]] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)


def _flat(ids: Iterable[Any]) -> list[int]:
    """Message ids of a gold list, nested lists flattened (some event_ordering items name several messages)."""
    return [j for i in ids for j in (_flat(i) if isinstance(i, list) else [int(i)])]


def gold_ids(ability: str, ids: Any) -> list[int]:
    """Every gold message id of one question, its groups together (see :func:`_gold_groups`)."""
    return [i for group in _gold_groups(ability, ids).values() for i in group]


def _gold_groups(ability: str, ids: Any) -> dict[str, list[int]]:
    """The gold ids of one question by group: ``{"all": [...]}``, or the dataset's own two groups."""
    if isinstance(ids, Mapping):
        return {str(k): _flat(v) for k, v in ids.items()}
    if isinstance(ids, list):
        return {"all": _flat(ids)}
    raise InvalidInputError(f"{ability}: source_chat_ids must be a list or an object, got {type(ids).__name__}")


def _conversation(folder: Path, scale: str) -> BeamConversation:
    """Read one conversation folder (``chat.json.gz`` or ``chat.json``, ``probing_questions.json``)."""
    chat_path = folder / "chat.json.gz"
    opener: Any = gzip.open if chat_path.exists() else open
    if not chat_path.exists():
        chat_path = folder / "chat.json"
    try:
        with opener(chat_path, "rt", encoding="utf-8") as f:
            chat = json.load(f)
        with open(folder / "probing_questions.json", encoding="utf-8") as f:
            probing = json.load(f)
    except (OSError, json.JSONDecodeError) as exc:
        raise InvalidInputError(f"BEAM conversation {folder}: {exc}") from None
    conv_id = f"beam-{scale}-{folder.name}"
    user_id = conv_id
    sessions: list[Session] = []
    where: dict[int, tuple[str, int]] = {}
    text_of: dict[int, str] = {}
    for batch in chat:
        sid = f"b{int(batch['batch_number'])}"
        msgs: list[Message] = []
        anchor = batch.get("time_anchor")
        for exchange in batch["turns"]:
            for m in exchange:
                anchor = anchor or m.get("time_anchor")
                content = strip_marker(str(m["content"])).strip()
                if not content:
                    continue
                where[int(m["id"])] = (sid, len(msgs))
                text_of[int(m["id"])] = content
                msgs.append(Message(role=str(m["role"]), content=content))
        if msgs:
            sessions.append(Session(user_id=user_id, session_id=sid, messages=tuple(msgs),
                                    timestamp=_anchor(anchor)))
    turn_of = {s.session_id: [t.index for t in group_turns(s.messages) for _ in range(t.msg_start, t.msg_end)]
               for s in sessions}
    questions: list[BenchQuestion] = []
    skipped: dict[str, int] = {}
    for ability in BEAM_ABILITIES:
        for n, raw in enumerate(probing.get(ability, [])):
            if "source_chat_ids" not in raw:
                reason = f"{ability}: no gold evidence"
                skipped[reason] = skipped.get(reason, 0) + 1
                continue
            named = _gold_groups(ability, raw["source_chat_ids"])
            groups = {g: [i for i in ids if i in where] for g, ids in named.items()}
            ids = sorted({i for g in groups.values() for i in g})
            if not ids:
                reason = f"{ability}: evidence names no message"
                skipped[reason] = skipped.get(reason, 0) + 1
                continue
            q = BenchQuestion(
                qid=f"{conv_id}/{ability}/{n}", question=str(raw["question"]),
                answer=str(raw.get("answer") or raw.get("ideal_response") or ""), qtype=ability,
                question_date=None, sessions=sessions,
                gold_sessions={where[i][0] for i in ids},
                gold_turns={(where[i][0], turn_of[where[i][0]][where[i][1]]) for i in ids},
                gold_turn_ids={str(i) for i in ids}, scorable=True, skip_reason=None, conv_id=conv_id,
                gold_messages={g: [text_of[i] for i in dict.fromkeys(v)] for g, v in groups.items()},
                gold_places={g: [where[i] for i in dict.fromkeys(v)] for g, v in groups.items()})
            questions.append(q)
    return BeamConversation(conv_id, scale, sessions, questions, where, skipped)


def _folder_order(p: Path) -> tuple[bool, int, str]:
    """Numbered folders first, by number; any other after them, by name."""
    return (not p.name.isdigit(), int(p.name) if p.name.isdigit() else 0, p.name)


def beam_dirs(root: Path, scales: Sequence[str]) -> list[tuple[str, Path]]:
    """The conversation folders of ``scales`` under ``root``, numerically ordered."""
    out: list[tuple[str, Path]] = []
    for scale in scales:
        base = Path(root) / scale
        if not base.is_dir():
            raise InvalidInputError(f"BEAM scale {scale!r} not found at {base.resolve()}; pass --data FOLDER")
        folders = [p for p in base.iterdir() if (p / "probing_questions.json").is_file()]
        out += [(scale, p) for p in sorted(folders, key=_folder_order)]
    return out


def load_beam(root: Path, scales: Iterable[str] = ("100K",), limit: int | None = None) -> list[BeamConversation]:
    """The conversations of ``scales`` under ``root`` (``limit``: the first N of each scale).

    Raises:
        InvalidInputError: a missing scale folder or an unreadable conversation.
    """
    scales = list(scales)
    out: list[BeamConversation] = []
    for scale in scales:
        dirs = beam_dirs(root, [scale])
        out += [_conversation(p, s) for s, p in dirs[: limit if limit is not None else None]]
    return out


def one_user(conversations: Sequence[BeamConversation]) -> list[BeamConversation]:
    """The conversations as one user's memory (:data:`ONE_USER`): each keeps its questions (their ids and
    ``conv_id`` unchanged, so they compare with the per-conversation run) and its batches, named
    ``<conversation>/<batch>`` so that the ids stay apart; every question is asked against all the sessions."""
    named = [{s.session_id: f"{c.conv_id}/{s.session_id}" for s in c.sessions} for c in conversations]
    renamed = [[replace(s, user_id=ONE_USER, session_id=name[s.session_id]) for s in c.sessions]
               for c, name in zip(conversations, named)]
    everything = [s for sessions in renamed for s in sessions]
    return [BeamConversation(
        c.conv_id, c.scale, sessions,
        [replace(q, sessions=everything, gold_sessions={name[sid] for sid in q.gold_sessions},
                 gold_turns={(name[sid], t) for sid, t in q.gold_turns},
                 gold_places={g: [(name[sid], p) for sid, p in v] for g, v in q.gold_places.items()})
         for q in c.questions],
        {i: (name[sid], p) for i, (sid, p) in c.where.items()}, c.skipped)
        for c, name, sessions in zip(conversations, named, renamed)]


def beam_scores(conversations: Sequence[BeamConversation], ks: Sequence[int]
                ) -> Callable[[BenchQuestion, Ranking], dict[str, float]]:
    """The BEAM measures of a ranking: ``turn_msg_recall@k`` (the share of gold messages whose turn is in the best
    ``k`` turns: a turn counts for the messages it holds) and, where the question names original and updated
    evidence that share no message, ``turn_current_first`` (the best-ranked updated turn above every original one)."""
    turn_at: dict[tuple[str, str, int], int] = {}
    for c in conversations:
        for s in c.sessions:
            for t in s.turns:
                turn_at.update({(c.conv_id, s.session_id, i): t.index for i in range(t.msg_start, t.msg_end)})

    def score(q: BenchQuestion, ranking: Ranking) -> dict[str, float]:
        rank = {key: i for i, key in enumerate(ranking.turns)}
        places = {g: [rank.get((sid, turn_at[(q.conv_id, sid, pos)]), len(rank)) for sid, pos in v]
                  for g, v in q.gold_places.items()}
        every = [r for v in places.values() for r in v]
        out = {f"turn_msg_recall@{k}": sum(r < k for r in every) / max(len(every), 1) for k in ks}
        named = q.gold_places
        if "updated_info" in places and "original_info" in places and places["updated_info"] \
                and not set(named["updated_info"]) & set(named["original_info"]):
            out["turn_current_first"] = float(min(places["updated_info"]) < min(places["original_info"] or [len(rank)]))
        return out

    return score


def run_beam(
    root: Path,
    method_names: Sequence[str],
    embedder: Embedder,
    *,
    scales: Sequence[str] = ("100K", "500K"),
    limit: int | None = None,
    ks: Sequence[int] = (5, 10, 20),
    contexts: Sequence[int] = (1000, 4000),
    progress: bool = True,
    store_dir: Path | None = None,
    overrides: dict[str, Any] | None = None,
    stages: Mapping[str, Any] | None = None,
    context_options: ContextOptions | None = None,
    single_user: bool = False,
    backend: str | None = None,
) -> BenchResult:
    """Retrieval and context measures on BEAM: each conversation one user, its batches dated sessions (with
    ``single_user``, every conversation in one user's memory: :func:`one_user`), in memory, kept in ``store_dir`` or
    in the store ``backend`` (a URL, ingested afresh).

    Every method ranks the turns (``turn_msg_recall@k``, ``turn_current_first``, and the harness's session and turn
    metrics over the gold messages' turns); each question's context at each budget in ``contexts`` is measured by
    :func:`memgas.bench.context.context_metrics` (``ctx<budget>_recall``, ``_any``, ``_all``, ``_current_first``;
    the memgas methods' contexts built with ``context_options``).
    ``limit``: the first N conversations of each scale.
    """
    from memgas.bench.runner import run_groups

    conversations = load_beam(root, scales, limit)
    skipped: dict[str, int] = {}
    for c in conversations:
        for reason, n in c.skipped.items():
            skipped[reason] = skipped.get(reason, 0) + n
    config = {"dataset": "beam", "data": str(root), "scales": list(scales), "limit": limit, "ks": list(ks),
              "embedder": embedder.id}
    groups = [(c.conv_id, c.sessions, c.questions) for c in conversations]
    if single_user:
        conversations = one_user(conversations)
        groups = [(ONE_USER, [s for c in conversations for s in c.sessions],
                   [q for c in conversations for q in c.questions])]
        config["single_user"] = True
    result = run_groups("beam", groups, method_names, embedder,
                  ks, config, beam_scores(conversations, ks), progress, store_dir, overrides, backend=backend,
                  stages=stages, contexts=contexts, context_options=context_options)
    result.skipped = skipped
    return result
