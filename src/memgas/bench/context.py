"""What an agent reads, measured: whether each gold evidence message is in a context block, and in which order.

A gold message counts as shown when a contiguous part of it of ``min(300, half its length)`` characters is in the
block, whitespace collapsed on both sides: the part of a long reply that matters counts, a list of first words
does not. Where a question names original and updated evidence (BEAM knowledge_update), "current first" asks that
the updated evidence be shown and above every shown original.

The baselines' context (:func:`turns_context`) is what a plain retriever gives an agent: its best turns whole, in
rank order, until the budget.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Mapping, Sequence

from memgas.core.types import Session
from memgas.kernels.text import context_tokens as count_tokens
from memgas.kernels.text import lines_within

__all__ = ["collapse", "shown_at", "context_metrics", "turns_context", "MATCH_CHARS"]

#: The longest part of a gold message that must be shown for it to count.
MATCH_CHARS = 300
_SPACE = re.compile(r"\s+")


def collapse(text: str) -> str:
    """``text`` with every run of white space made one space, stripped.

    >>> collapse("  a \\n\\t b ")
    'a b'
    """
    return _SPACE.sub(" ", text).strip()


def shown_at(message: str, block: str) -> int | None:
    """Where in ``block`` (both collapsed) a part of ``message`` of ``min(300, half its length)`` characters is, the
    earliest such place; ``None`` when none is.

    >>> shown_at("My locker code is 4512", "Memories: ... code is 4512 ...")
    13
    >>> shown_at("My locker code is 4512", "Memories: locker") is None
    True
    """
    m, b = collapse(message), collapse(block)
    need = max(1, min(MATCH_CHARS, len(m) // 2))
    if len(m) < need or len(b) < need:
        return None
    pieces = _pieces(b, need)
    found = [pieces[m[i:i + need]] for i in range(len(m) - need + 1) if m[i:i + need] in pieces]
    return min(found) if found else None


@lru_cache(maxsize=16)
def _pieces(block: str, need: int) -> dict[str, int]:
    """Every part of ``block`` of ``need`` characters, at its first place (kept for the next message of a block)."""
    pieces: dict[str, int] = {}
    for j in range(len(block) - need + 1):
        pieces.setdefault(block[j:j + need], j)
    return pieces


def context_metrics(gold: Mapping[str, Sequence[str]], block: str, prefix: str) -> dict[str, float]:
    """The context measures of one question: ``recall`` (share of the gold messages shown), ``any`` (at least one),
    ``all`` (every one), ``tokens`` (the block's size), with ``updated_info`` and ``original_info`` groups that
    share no message, ``current_first`` (updated shown, above every shown original), and with ``speaker_a`` or
    ``speaker_b`` groups, ``recall_speaker_a`` / ``recall_speaker_b`` (the share of that side's gold messages).

    >>> m = context_metrics({"original_info": ["I live in Buckman"], "updated_info": ["I moved to Sellwood"]},
    ...                     "I moved to Sellwood. I live in Buckman", "ctx_")
    >>> m["ctx_recall"], m["ctx_current_first"]
    (1.0, 1.0)
    """
    at = {g: [shown_at(t, block) for t in texts] for g, texts in gold.items()}
    flat = [p for ps in at.values() for p in ps]
    out = {f"{prefix}recall": sum(p is not None for p in flat) / max(len(flat), 1),
           f"{prefix}any": float(any(p is not None for p in flat)),
           f"{prefix}all": float(bool(flat) and all(p is not None for p in flat)),
           f"{prefix}tokens": float(count_tokens(block))}
    for side in ("speaker_a", "speaker_b"):  # LoCoMo's evidence by who said it
        if at.get(side):
            out[f"{prefix}recall_{side}"] = sum(p is not None for p in at[side]) / len(at[side])
    # a question whose original and updated evidence share a message (a dataset slip) has no order to measure
    if "updated_info" in at and "original_info" in at and not set(gold["updated_info"]) & set(gold["original_info"]):
        new = [p for p in at["updated_info"] if p is not None]
        old = [p for p in at["original_info"] if p is not None]
        out[f"{prefix}current_first"] = float(bool(new) and (not old or min(new) < min(old)))
    return out


def turns_context(sessions: Mapping[str, Session], ranked: Sequence[tuple[str, int]], max_tokens: int) -> str:
    """A plain retriever's context: its ranked turns whole (``speaker: text`` lines, dated) until the budget; the
    first turn that does not fit is cut at a word to what is left (its user message comes first) and ends it."""
    def dated(session: Session) -> str:
        return f"{session.timestamp:%Y-%m-%d}" if session.timestamp else "undated"

    return lines_within("Memories from earlier conversations (most relevant first):",
                        (f"[{n}] {dated(sessions[sid])} · {sid}\n" + sessions[sid].turns[t].text
                         for n, (sid, t) in enumerate(ranked, start=1)), max_tokens)
