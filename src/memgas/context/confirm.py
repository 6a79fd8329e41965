"""An optional LLM check of the user model's supersessions: before an earlier statement leaves the profile because
a later one replaces it (:meth:`memgas.context.profile.Profiles.statements`), a language model is asked whether it
does. It only confirms: a pair the learned models did not call a replacement is never asked about, and a pair the
model answers "no" for stays in the profile. Off by default; the default never needs it.

Each pair is asked once: the LLM's response cache (``Memory``'s ``llm_cache``) answers it again, in this process and
the next; at most ``max_pairs`` pairs are asked each time a user's profile is recomputed (after a write), the rest
keep the models' decision. A call that fails keeps the models' decision too:
an endpoint that is down makes the profile what it is without the check, never emptier.

Use: ``Memory(..., supersession_check="llm:local")`` (or ``"llm:openai:<model>@<url>"``), ``memgas serve
--supersession-check SPEC``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from memgas.core.errors import LLMError

if TYPE_CHECKING:
    from memgas.llm.wrapper import LLM

__all__ = ["SupersessionCheck", "supersession_check"]

log = logging.getLogger("memgas")

#: What the model answers.
SCHEMA = {"type": "object", "required": ["replaces"], "properties": {"replaces": {"type": "boolean"}}}
_SYSTEM = ("You keep a record of what holds now about a person: their instructions to an assistant, preferences and "
           "lasting facts. Reply with JSON only.")


def _said(statement: Any) -> str:
    when = f" on {statement.timestamp:%Y-%m-%d}" if statement.timestamp is not None else ""
    return f"said by {statement.who or 'the user'}{when}: \"{statement.text}\""


class SupersessionCheck:
    """Asks ``llm`` whether a later statement replaces an earlier one (see the module notes).

    Args:
        llm: an :class:`memgas.llm.wrapper.LLM` (each pair asked once where it has a response cache).
        max_pairs: the most pairs asked about each time a profile is recomputed.
    """

    def __init__(self, llm: LLM, *, max_pairs: int = 32) -> None:
        self.llm = llm
        self.max_pairs = max_pairs
        self.id = f"llm-supersession:{llm.id}"

    def replaces(self, older: Any, newer: Any) -> bool:
        """Whether ``newer`` replaces ``older`` (two :class:`~memgas.context.profile.StandingStatement`), as the
        model answers.

        Raises:
            memgas.core.errors.LLMError: the call failed or the reply stayed invalid.
        """
        messages = [
            {"role": "system", "content": _SYSTEM},
            {"role": "user", "content": f"Earlier, {_said(older)}\nLater, {_said(newer)}\n\nDoes the later statement "
                                        "replace the earlier one, so that the earlier one no longer holds (a new "
                                        "value of the same thing about the same person, or a retraction)? Two "
                                        "statements that can both be true do not replace each other. Answer "
                                        '{"replaces": true} or {"replaces": false}.'},
        ]
        return bool(self.llm.complete_json(messages, SCHEMA, max_tokens=32)["replaces"])

    def confirm(self, statements: Sequence[Any], replaces: np.ndarray) -> np.ndarray:
        """``replaces`` (``[i, j]``: statement ``j`` replaces ``i``, of ``statements``) less the pairs the model
        says are no replacement: the first :attr:`max_pairs` pairs, newest replacement first, are asked; a pair not
        asked is kept, and so is every pair from the first call that fails on (an endpoint that is down is not
        asked again and again while the profile waits)."""
        out = np.array(replaces, dtype=bool, copy=True)
        pairs = sorted(zip(*np.nonzero(out)), key=lambda p: (-int(p[1]), -int(p[0])))
        for i, j in pairs[: self.max_pairs]:
            try:
                out[i, j] = self.replaces(statements[i], statements[j])
            except LLMError as e:
                log.warning("the supersession check failed, keeping the models' decisions: %s", e)
                break
        return out


def supersession_check(spec: str, *, llm_cache: Any = None, max_pairs: int = 32) -> SupersessionCheck:
    """A :class:`SupersessionCheck` from a spec: ``"llm:<LLM spec>"`` (see :func:`memgas.llm.factory.get_llm`), e.g.
    ``"llm:local"`` or ``"llm:openai:gpt-4o-mini@http://localhost:8080/v1"``.

    Raises:
        InvalidInputError: an unknown spec.
    """
    from memgas.llm.factory import stage_llm

    llm = stage_llm(spec, stage="supersession check", hint="only a language model can judge a replacement",
                    cache=llm_cache)
    return SupersessionCheck(llm, max_pairs=max_pairs)
