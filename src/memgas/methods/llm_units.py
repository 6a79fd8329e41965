"""LLM-made summary and keyword units: one call per session, the extractive units as the fallback.

:class:`LLMUnitWriter` is both a :class:`memgas.methods.units.Summarizer` and a :class:`memgas.methods.units.Keyworder`.
:func:`memgas.methods.units.build_units` calls ``summarize`` and then ``keywords`` on the same session; the
writer answers both from one ``{"summary", "keywords"}`` JSON call. If the call fails or its output
stays invalid, the session is still stored: the extractive summarizer and YAKE keyworder write the
units, the failure is logged (logger ``memgas.llm``) and counted in ``fallbacks``.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable

import numpy as np

from memgas.core.errors import InvalidInputError, LLMError
from memgas.core.types import Session
from memgas.kernels.text import fit_texts
from memgas.llm.wrapper import LLM
from memgas.methods.units import ExtractiveSummarizer, Keyworder, Summarizer, YakeKeyworder, embedding_view

__all__ = ["LLMUnitWriter", "UNITS_SCHEMA", "unit_prompt", "parse_units"]

log = logging.getLogger("memgas.llm")

#: The JSON the model must return. ``maxItems`` stops small models' list repetition loops; string
#: lengths are bounded by ``max_tokens`` instead of ``maxLength``, which llama.cpp's grammar
#: converter unrolls into one rule per character (it refuses a few hundred).
UNITS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "summary": {"type": "string", "minLength": 1},
        "keywords": {"type": "array", "items": {"type": "string", "minLength": 1}, "maxItems": 10},
    },
    "required": ["summary", "keywords"],
    "additionalProperties": False,
}

_SYSTEM = ("You write memory notes about conversations for a personal assistant's long-term memory. "
           "Reply with JSON only.")
_INSTRUCTIONS = (
    "Write a JSON object with two fields:\n"
    '- "summary": 2 to 4 sentences stating the facts in this conversation: who did what, when and where, '
    "plans, preferences, names, places, dates and numbers. Use the speakers' names when they are given.\n"
    '- "keywords": up to 10 short key phrases (people, places, things, events, topics) from the conversation, '
    "most important first."
)
# Prompt tokens besides the conversation (instructions, template), with margin.
_OVERHEAD_TOKENS = 250


def unit_prompt(
    session: Session, budget_tokens: int, count_tokens: Callable[[str], int], reply_chars: int = 600
) -> list[dict[str, str]]:
    """The chat messages asking for a session's summary and keywords, the conversation cut to fit.

    Each turn is shown as :func:`memgas.methods.units.embedding_view` shows it (user messages whole, each
    reply's first ``reply_chars`` characters); if that is still over ``budget_tokens``, every turn keeps
    a fair share of the characters (the head of each), so the whole session is represented.

    Args:
        session: the session.
        budget_tokens: most tokens the conversation may take.
        count_tokens: ``str -> int``, the model's token count.
        reply_chars: characters of each reply shown.
    """
    text = "\n".join(fit_texts([embedding_view(t, reply_chars) for t in session.turns], budget_tokens, count_tokens))
    when = f" on {session.timestamp:%Y-%m-%d (%A)}" if session.timestamp else ""
    user = f"Conversation{when}:\n<conversation>\n{text}\n</conversation>\n\n{_INSTRUCTIONS}"
    return [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": user}]


def parse_units(value: dict[str, Any], max_keywords: int = 10) -> tuple[str, list[str]]:
    """The summary and the keywords (stripped, deduplicated case-insensitively, at most ``max_keywords``).

    Raises:
        InvalidInputError: the summary is empty.
    """
    summary = " ".join(str(value.get("summary", "")).split())
    if not summary:
        raise InvalidInputError("the model wrote an empty summary")
    seen: set[str] = set()
    keywords = []
    for k in value.get("keywords", []):
        k = " ".join(str(k).split())
        if k and k.lower() not in seen:
            seen.add(k.lower())
            keywords.append(k)
    return summary, keywords[:max_keywords]


class LLMUnitWriter:
    """Summary and keywords of a session from one LLM call, extractive units when it fails.

    Args:
        llm: the language model.
        summarizer: the fallback summarizer; default :class:`memgas.methods.units.ExtractiveSummarizer`.
        keyworder: the fallback keyworder; default :class:`memgas.methods.units.YakeKeyworder`.
        max_keywords: most keywords kept.
        max_tokens: most tokens the model may write.

    Attributes:
        id: ``"llm:<model id>"``, what names these units (e.g. the key of a benchmark's kept stores).
        written: sessions whose units the LLM wrote.
        fallbacks: sessions that fell back to the extractive units.
    """

    def __init__(
        self,
        llm: LLM,
        *,
        summarizer: Summarizer | None = None,
        keyworder: Keyworder | None = None,
        max_keywords: int = 10,
        max_tokens: int = 400,
    ) -> None:
        if max_keywords < 1 or max_tokens < 16:
            raise InvalidInputError("LLMUnitWriter needs max_keywords >= 1 and max_tokens >= 16")
        self.llm = llm
        self.id = f"llm:{llm.id}"
        self.summarizer = summarizer if summarizer is not None else ExtractiveSummarizer()
        self.keyworder = keyworder if keyworder is not None else YakeKeyworder()
        self.max_keywords = max_keywords
        self.max_tokens = max_tokens
        self.written = 0
        self.fallbacks = 0
        self._last = threading.local()  # the session last summarised in this thread, with its LLM result

    def write(self, session: Session) -> tuple[str, list[str]] | None:
        """The LLM's ``(summary, keywords)`` for ``session``, or ``None`` after a logged, counted failure."""
        budget = self.llm.context_tokens - self.max_tokens - _OVERHEAD_TOKENS
        try:
            messages = unit_prompt(session, max(budget, 64), self.llm.count_tokens)
            value = self.llm.complete_json(messages, UNITS_SCHEMA, max_tokens=self.max_tokens)
            result = parse_units(value, self.max_keywords)
        except (LLMError, InvalidInputError) as e:
            self.fallbacks += 1
            log.warning("LLM units failed for session %r, using extractive units: %s", session.session_id, e)
            return None
        self.written += 1
        return result

    def summarize(self, session: Session, turn_vectors: np.ndarray) -> str:
        """The LLM's summary (the call also yields the keywords, kept for :meth:`keywords`)."""
        result = self.write(session)
        self._last.value = (session, result)
        return result[0] if result else self.summarizer.summarize(session, turn_vectors)

    def keywords(self, session: Session) -> list[str]:
        """The keywords of the call :meth:`summarize` made for this session (one call made here otherwise)."""
        last = getattr(self._last, "value", None)
        self._last.value = None
        result = last[1] if last is not None and last[0] is session else self.write(session)
        return result[1] if result else self.keyworder.keywords(session)
