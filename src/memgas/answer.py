"""Answering from memories: MemGAS's redundancy filter, answers that cite sessions, and an LLM judge.

Prompt building and output parsing are pure functions (``*_prompt``, ``parse_*``); the functions
that call a model (:func:`filter_memories`, :func:`answer_question`, :func:`judge_answer`) only
glue them to :meth:`memgas.llm.wrapper.LLM.complete_json`.

The filter can only remove: the model marks each numbered memory true (keep) or false, anything
else is ignored, and when the call fails or keeps nothing the unfiltered list is used.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, Mapping, Sequence

from memgas.core.errors import LLMError
from memgas.core.types import MemoryItem
from memgas.core.validate import naive_utc
from memgas.kernels.text import fit_texts
from memgas.llm.base import Usage, track_usage
from memgas.llm.structured import strip_think
from memgas.llm.wrapper import LLM

__all__ = [
    "Answer", "fit_items", "render_items", "filter_prompt", "filter_schema", "parse_filter", "answer_prompt",
    "answer_schema", "parse_answer", "filter_memories", "answer_question",
]

log = logging.getLogger("memgas.llm")

Messages = list[dict[str, str]]
CountFn = Callable[[str], int]


@dataclass(slots=True)
class Answer:
    """An answer with its evidence.

    ``sources`` are the session ids the model cited (only ids it was shown); ``memories`` what it was
    shown after the filter; ``removed`` the session ids the filter dropped; ``usage`` the LLM use of
    the filter and the answer together.
    """

    answer: str
    sources: list[str]
    memories: list[MemoryItem]
    removed: list[str] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable view."""
        return {
            "answer": self.answer,
            "sources": list(self.sources),
            "memories": [{"session_id": m.session_id, "timestamp": m.timestamp.isoformat() if m.timestamp else None,
                          "text": m.text} for m in self.memories],
            "removed": list(self.removed),
            "llm": self.usage.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Answer:
        """The answer of a :meth:`to_dict` view (as the REST API returns it).

        JSON may carry the integer counters of ``llm`` as floats; each is cast back to its field's type.
        """
        zero = Usage()
        counters = {name: type(getattr(zero, name))(value) for name, value in (data.get("llm") or {}).items()
                    if name in Usage.__dataclass_fields__}
        return cls(answer=str(data["answer"]), sources=[str(s) for s in data["sources"]],
                   memories=[MemoryItem.from_dict(m) for m in data["memories"]],
                   removed=[str(s) for s in data.get("removed", [])], usage=Usage(**counters))


# ----------------------------------------------------------------------------- items


def _instant(t: datetime | None) -> datetime:
    """A sort key for a memory's time: naive UTC (stored times may be aware or naive); none sorts first."""
    return datetime.min if t is None else naive_utc(t)


def _date(ts: datetime | None) -> str:
    return f"{ts:%Y-%m-%d (%a) %H:%M}" if ts else "date unknown"


def render_items(items: Sequence[MemoryItem]) -> str:
    """The items as the model sees them: ``[n] date`` then the text, numbered from 1."""
    return "\n\n".join(f"[{i}] {_date(m.timestamp)}\n{m.text}" for i, m in enumerate(items, start=1))


def _tail(text: str, n: int) -> str:
    """The last ``n`` characters of ``text``, starting at a word when the cut falls inside one."""
    if n <= 0:
        return ""
    if len(text) <= n:
        return text
    tail = text[-n:]
    cut = tail.find(" ")
    return tail[cut + 1 :] if 0 <= cut < n // 2 else tail


def fit_items(items: Sequence[MemoryItem], budget_tokens: int, count_tokens: CountFn, *,
              keep_newest: bool = False) -> list[MemoryItem]:
    """Cut items to fit ``budget_tokens`` of rendered text.

    Default: every item keeps a fair share, its head (:func:`memgas.kernels.text.fit_texts`), for
    retrieved lists where each item was chosen for a reason. ``keep_newest``: items are dropped from
    the oldest end and the oldest item kept may lose its beginning, for a whole history
    (the ``full-history`` baseline).
    """
    if not items:
        return []
    header = count_tokens(render_items(items[:1])) - count_tokens(items[0].text)  # "[1] date" + separator
    if not keep_newest:
        texts = fit_texts([m.text for m in items], budget_tokens - header * len(items), count_tokens)
        return [MemoryItem(m.session_id, t, m.timestamp) for m, t in zip(items, texts) if t]
    ordered = sorted(items, key=lambda m: (m.timestamp is not None, _instant(m.timestamp)))
    kept: list[MemoryItem] = []
    left = budget_tokens
    for m in reversed(ordered):
        need = count_tokens(m.text) + header
        if need <= left:
            kept.append(m)
            left -= need
            continue
        room = left - header
        if room > 16:  # a few words are worth keeping, a fragment is not
            text = _tail(m.text, int(len(m.text) * room / max(need - header, 1) * 0.9))
            if text:
                kept.append(MemoryItem(m.session_id, text, m.timestamp))
        break
    return kept[::-1]


def _chronological(items: Sequence[MemoryItem]) -> list[MemoryItem]:
    return sorted(items, key=lambda m: (m.timestamp is None, _instant(m.timestamp)))


# ----------------------------------------------------------------------------- filter


def filter_schema(n: int) -> dict[str, Any]:
    """The filter's JSON: one boolean per memory number, ``{"1": true, "2": false, ...}``."""
    keys = [str(i) for i in range(1, n + 1)]
    return {"type": "object", "required": keys, "additionalProperties": False,
            "properties": {k: {"type": "boolean"} for k in keys}}


def filter_prompt(question: str, items: Sequence[MemoryItem], question_date: datetime | None = None) -> Messages:
    """Messages asking, memory by memory, whether it helps answer ``question`` (items numbered from 1).

    A verdict per memory rather than a list of numbers to keep: asked for a list, both local Qwen
    models listed every number 1..n on every LoCoMo question tried; asked memory by memory, the 1.5B
    kept the evidence session 3 of 3 times and dropped 9 of the 12 others (the benchmark log, "QA (issue 4)").
    """
    when = f"\nThe question is asked on {_date(question_date)}." if question_date else ""
    user = (f"Question: {question}{when}\n\nMemories:\n{render_items(items)}\n\n"
            "For each memory, decide whether it contains information that answers the question. "
            "Return a JSON object mapping each memory number to true (it helps answer) or false (it does not, "
            "or it only repeats another memory marked true).")
    return [{"role": "system", "content": "You judge which memories answer a question. Reply with JSON only."},
            {"role": "user", "content": user}]


def parse_filter(value: Any, n: int) -> list[int]:
    """The 0-based positions marked ``true``, ascending; other keys and values are ignored (it can only remove)."""
    if not isinstance(value, dict):
        return []
    return [i for i in range(n) if value.get(str(i + 1)) is True]


def filter_memories(llm: LLM, question: str, items: Sequence[MemoryItem], *,
                    question_date: datetime | None = None, max_tokens: int | None = None) -> list[MemoryItem]:
    """MemGAS's redundancy filter: the items the model marks as helpful, in their order.

    Returns ``items`` unchanged when there are fewer than two, when the call fails (logged), or when
    the model keeps none of them. ``max_tokens`` defaults to 16 + 8 per memory.
    """
    if len(items) < 2:
        return list(items)
    try:
        value = llm.complete_json(filter_prompt(question, items, question_date), filter_schema(len(items)),
                                  max_tokens=max_tokens or 16 + 8 * len(items))
    except LLMError as e:
        log.warning("memory filter failed, keeping all %d memories: %s", len(items), e)
        return list(items)
    keep = parse_filter(value, len(items))
    return [items[i] for i in keep] if keep else list(items)


# ----------------------------------------------------------------------------- answer


def answer_schema(n: int) -> dict[str, Any]:
    """The answer's JSON: ``{"answer": str, "sources": [numbers]}``."""
    return {"type": "object", "required": ["answer", "sources"], "additionalProperties": False,
            "properties": {"answer": {"type": "string", "minLength": 1},
                           "sources": {"type": "array", "items": {"type": "integer"}, "maxItems": max(n, 1)}}}


def answer_prompt(question: str, items: Sequence[MemoryItem], question_date: datetime | None = None) -> Messages:
    """Messages asking for a short answer from the memories, citing them by number (items numbered from 1)."""
    when = f"\nThe question is asked on {_date(question_date)}." if question_date else ""
    memories = render_items(items) if items else "(none)"
    user = (f"Memories of past conversations, oldest first:\n\n{memories}\n\nQuestion: {question}{when}\n\n"
            'Return a JSON object {"answer": "...", "sources": [numbers of the memories the answer comes from]}. '
            "The answer is short: a few words or one sentence, with exact names, dates and numbers. "
            "When a fact changed over time, give the latest. "
            "If the memories do not contain the answer, answer \"I don't know\" with no sources.")
    return [{"role": "system", "content": "You answer questions about past conversations using only the memories "
                                          "given. Reply with JSON only."},
            {"role": "user", "content": user}]


def parse_answer(value: Any, items: Sequence[MemoryItem]) -> tuple[str, list[str]]:
    """The answer text and the cited session ids (numbers outside 1..len(items) ignored, each id once)."""
    answer = " ".join(str(value.get("answer", "")).split()) if isinstance(value, dict) else ""
    sources = value.get("sources", []) if isinstance(value, dict) else []
    cited: list[str] = []
    for k in sources:
        if isinstance(k, int) and not isinstance(k, bool) and 1 <= k <= len(items):
            sid = items[k - 1].session_id
            if sid not in cited:
                cited.append(sid)
    return answer, cited


# Prompt tokens besides the memories (instructions, question, template), with margin.
_ANSWER_OVERHEAD = 300


def answer_question(
    llm: LLM,
    question: str,
    items: Sequence[MemoryItem],
    *,
    question_date: datetime | None = None,
    use_filter: bool = True,
    keep_newest: bool = False,
    max_tokens: int = 200,
) -> Answer:
    """Answer ``question`` from ``items``: fit them to the window, filter (optional), answer with citations.

    Items are cut to fit the model's window (:func:`fit_items`), put oldest first, filtered by
    :func:`filter_memories`, and answered as JSON. If the answer's JSON stays
    invalid, the model's raw text (reasoning blocks removed) is the answer, with no sources.

    Raises:
        LLMError: the model could not be called.
    """
    with track_usage() as usage:
        budget = llm.context_tokens - max_tokens - llm.count_tokens(question) - _ANSWER_OVERHEAD
        shown = _chronological(fit_items(items, budget, llm.count_tokens, keep_newest=keep_newest))
        kept = filter_memories(llm, question, shown, question_date=question_date) if use_filter else shown
        try:
            value = llm.complete_json(answer_prompt(question, kept, question_date), answer_schema(len(kept)),
                                      max_tokens=max_tokens)
            text, cited = parse_answer(value, kept)
        except LLMError as e:
            if e.raw is None:
                raise
            text, cited = " ".join(strip_think(e.raw).split())[:1000], []
    kept_ids = {m.session_id for m in kept}
    removed = [m.session_id for m in shown if m.session_id not in kept_ids]
    return Answer(text, cited, kept, removed, usage)
