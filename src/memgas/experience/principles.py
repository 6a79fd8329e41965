"""PRINCIPLES (Kim et al., 2025): strategy principles learned from simulated dialogues, recalled by situation.

Learning (:meth:`Principles.simulate`, then :meth:`Principles.learn_from_dialogue`):

1. A *strategy model* (the assistant) and a *simulated user* (who knows the scenario's hidden traits)
   hold a role-play dialogue in a proactive task (emotional support, persuasion, negotiation).
2. After each assistant turn and the user's reaction, a *critic* judges whether the turn moved the
   conversation toward the scenario's goal. A failed turn is retried (up to ``max_retries`` times) with
   the critic's reason as feedback; the dialogue goes on with the first retry that succeeds.
3. Each failed turn whose retry succeeded is a contrast (failed path vs successful path); the LLM writes
   a principle from it: ``situation`` ("When ..."), ``action``, ``avoid``, ``reason``. Turns that
   helped at once, and failures no retry fixed, yield none (nothing to contrast).

Storage: kind ``principle``, key = the situation only (that alone is embedded and matched), payload =
action, avoid, reason, ``support`` (how many contrasts produced it) and ``origin``. A new principle
whose situation has cosine >= ``dedup_threshold`` with a stored one is dropped and counted as support
of the stored one (a *merge* of the count only: the stored wording stays, so recall stays stable). A
failed extraction keeps the contrast as kind ``principle_pending`` (no vector: never matched) for
:meth:`Principles.distill_pending`.

Use: :meth:`Principles.recall` embeds the current context and returns the principles whose situations
are nearest (cosine >= ``min_similarity``); :meth:`Principles.principles` rewrites each of them for the
conversation (one LLM call per principle; a failed rewrite gives the stored text).

Simplifications of the paper, on purpose: one critic call per turn with a yes/no verdict (the paper
scores progress on a task-specific scale); at most ``max_retries`` revisions per failed turn; no
principle-level merging by the LLM (dedup keeps the first wording); the same LLM plays every role.
"""

from __future__ import annotations

import builtins
import logging
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping, Sequence

from memgas.core.errors import InvalidInputError, LLMError, NotFoundError
from memgas.experience.bank import ExperienceBank
from memgas.llm.wrapper import LLM
from memgas.store import ExperienceRecord

__all__ = ["Principles", "Principle", "Guidance", "Judgement", "Dialogue", "LearnResult", "Scenario",
           "PRINCIPLE", "PENDING", "DOMAINS"]

log = logging.getLogger("memgas.llm")

PRINCIPLE = "principle"
PENDING = "principle_pending"  # not "pending": Buffer of Thoughts keeps its own pending items in the same scope
#: The proactive tasks and the assistant's role in each.
DOMAINS: dict[str, str] = {
    "emotional-support": "You are an emotional-support companion talking with someone who is struggling.",
    "persuasion": "You are trying, honestly and politely, to persuade the person you are talking with.",
    "negotiation": "You are negotiating for your own side with the person you are talking with.",
}
# maxLength bounds every free text: small models otherwise write lists until the token budget cuts the JSON.
_REPLY_SCHEMA: dict[str, Any] = {
    "type": "object", "properties": {"reply": {"type": "string", "minLength": 1, "maxLength": 300}},
    "required": ["reply"], "additionalProperties": False,
}
# The verdict first and a bounded reason: the 0.5B model, asked for its reason first, rambled past any
# token budget and contradicted itself (measured); maxLength 160 stays within llama.cpp's grammar limits.
_CRITIC_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"helped": {"type": "boolean"}, "reason": {"type": "string", "minLength": 1, "maxLength": 160}},
    "required": ["helped", "reason"], "additionalProperties": False,
}
_FIELDS = ("situation", "action", "avoid", "reason")
_PRINCIPLE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {name: {"type": "string", "minLength": 3, "maxLength": 200} for name in _FIELDS},
    "required": list(_FIELDS), "additionalProperties": False,
}
_REWRITE_SCHEMA: dict[str, Any] = {
    "type": "object", "properties": {"guidance": {"type": "string", "minLength": 3, "maxLength": 300}},
    "required": ["guidance"], "additionalProperties": False,
}

Messages = list[dict[str, str]]


@dataclass(frozen=True, slots=True)
class Scenario:
    """A role-play seed: who the user is (``situation``, ``traits`` the assistant is not told), what success
    means (``goal``), the user's first message (``opening``) and the principle ``family`` it exercises."""

    id: str
    domain: str
    family: str
    situation: str
    goal: str
    traits: tuple[str, ...]
    opening: str
    split: str = "train"

    def __post_init__(self) -> None:
        if self.domain not in DOMAINS:
            raise InvalidInputError(f"scenario {self.id!r}: unknown domain {self.domain!r}; use one of {', '.join(DOMAINS)}")
        for name in ("id", "family", "situation", "goal", "opening"):
            if not str(getattr(self, name)).strip():
                raise InvalidInputError(f"scenario {self.id!r}: {name} is empty")


@dataclass(frozen=True, slots=True)
class Principle:
    """A stored principle (see the module notes)."""

    id: int
    situation: str
    action: str
    avoid: str
    reason: str
    support: int = 1
    origin: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_record(cls, record: ExperienceRecord) -> Principle:
        """The principle of a store item of kind :data:`PRINCIPLE`."""
        p = record.payload
        return cls(record.id, record.key, str(p.get("action", "")), str(p.get("avoid", "")), str(p.get("reason", "")),
                   int(p.get("support", 1)), dict(p.get("origin", {})))

    def text(self) -> str:
        """The principle as one instruction (what a prompt shows when no rewrite is made)."""
        return f"{self.situation.rstrip('.')}: {self.action.rstrip('.')}. Avoid: {self.avoid.rstrip('.')}. " \
               f"Why: {self.reason.rstrip('.')}."

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view."""
        return asdict(self)


@dataclass(frozen=True, slots=True)
class Guidance:
    """A recalled principle fitted to the conversation: ``text`` is the rewrite, or the stored text when
    ``rewritten`` is false (the rewrite failed)."""

    principle: Principle
    similarity: float
    text: str
    rewritten: bool

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view."""
        return {"principle": self.principle.to_dict(), "similarity": round(self.similarity, 4), "text": self.text,
                "rewritten": self.rewritten}


@dataclass(frozen=True, slots=True)
class Judgement:
    """The critic's verdict on the assistant turn ``messages[turn]`` (and on its retry, if it failed)."""

    turn: int
    reply: str
    reaction: str
    helped: bool
    reason: str
    retry: str | None = None
    retry_reaction: str | None = None
    retry_helped: bool | None = None
    retry_reason: str | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Judgement:
        """A judgement from :meth:`to_dict`'s shape.

        Raises:
            InvalidInputError: a missing or mistyped field.
        """
        try:
            fields: dict[str, Any] = {name: data[name] for name in ("turn", "reply", "reaction", "helped", "reason")}
            optional: dict[str, Any] = {name: data.get(name) for name in ("retry", "retry_reaction", "retry_helped", "retry_reason")}
        except (KeyError, TypeError) as e:
            raise InvalidInputError(f"a judgement needs turn, reply, reaction, helped, reason: {e}") from None
        if not isinstance(fields["turn"], int) or not isinstance(fields["helped"], bool):
            raise InvalidInputError("a judgement's turn is an integer and helped a boolean")
        return cls(**fields, **optional)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view."""
        return asdict(self)


@dataclass(slots=True)
class Dialogue:
    """A simulated dialogue: its messages (the successful path), the critic's judgements, the guidance used."""

    scenario: Scenario
    messages: Messages
    judgements: list[Judgement]
    guidance: list[str] = field(default_factory=list)

    @property
    def success(self) -> float:
        """The share of assistant turns the critic judged helpful at the first try."""
        return sum(j.helped for j in self.judgements) / len(self.judgements) if self.judgements else 0.0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view (what ``memgas principles learn --file`` reads)."""
        return {"scenario": asdict(self.scenario), "messages": self.messages,
                "judgements": [j.to_dict() for j in self.judgements], "guidance": self.guidance}


@dataclass(slots=True)
class LearnResult:
    """What one :meth:`Principles.learn_from_dialogue` did: ids added, duplicates dropped, ids kept pending,
    and the contrasts (failed turns with a successful retry) it read."""

    added: list[int] = field(default_factory=list)
    duplicates: int = 0
    pending: list[int] = field(default_factory=list)
    contrasts: int = 0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view."""
        return asdict(self)


def _transcript(messages: Sequence[Mapping[str, str]]) -> str:
    return "\n".join(f"{m['role']}: {m['content']}" for m in messages) or "(nothing yet)"


class Principles:
    """PRINCIPLES over one experience bank (see the module notes).

    Args:
        bank: the scope's experience items.
        llm: the model of every role (strategy, user, critic, writer, rewriter); ``None`` allows only lookups.
        dedup_threshold: a new principle whose situation has at least this cosine with a stored one is dropped
            (0.8, measured with the shipped MiniLM on the reference set: no two families' situations reach 0.6).
        min_similarity: :meth:`recall` leaves out principles whose situation is less similar to the context
            (0.25, measured: the lowest threshold at which no off-topic context gets a principle).
        turns: assistant turns in a simulated dialogue.
        max_retries: retries of a failed assistant turn.
        context_messages: the latest messages used as the retrieval context and shown in prompts.
        max_tokens: the completion budget of one LLM call.

    Raises:
        InvalidInputError: a threshold outside [-1, 1] or a count below its minimum.
    """

    def __init__(self, bank: ExperienceBank, llm: LLM | None = None, *, dedup_threshold: float = 0.8,
                 min_similarity: float = 0.25, turns: int = 2, max_retries: int = 1, context_messages: int = 4,
                 max_tokens: int = 200) -> None:
        if not (-1.0 <= dedup_threshold <= 1.0 and -1.0 <= min_similarity <= 1.0):
            raise InvalidInputError("dedup_threshold and min_similarity are cosines in [-1, 1]")
        if turns < 1 or max_retries < 0 or context_messages < 1 or max_tokens < 16:
            raise InvalidInputError("turns >= 1, max_retries >= 0, context_messages >= 1, max_tokens >= 16")
        self.bank = bank
        self.llm = llm
        self.dedup_threshold = dedup_threshold
        self.min_similarity = min_similarity
        self.turns = turns
        self.max_retries = max_retries
        self.context_messages = context_messages
        self.max_tokens = max_tokens

    # ------------------------------------------------------------------ the bank

    def list(self) -> list[Principle]:
        """Every stored principle, oldest first."""
        return [Principle.from_record(r) for r in self.bank.items(PRINCIPLE)]

    def pending(self) -> builtins.list[ExperienceRecord]:
        """Contrasts whose extraction failed, waiting for :meth:`distill_pending`."""
        return self.bank.items(PENDING)

    def get(self, principle_id: int) -> Principle:
        """One principle by id.

        Raises:
            NotFoundError: no principle has this id in the scope.
        """
        for record in self.bank.items(PRINCIPLE):
            if record.id == principle_id:
                return Principle.from_record(record)
        raise NotFoundError(f"no principle {principle_id} in {self.bank.scope}")

    def delete(self, ids: Sequence[int] | None = None) -> int:
        """Delete principles by id (every principle and pending contrast when ``ids`` is None); return how many.

        Raises:
            NotFoundError: an id that is not a principle of the scope (nothing is deleted).
        """
        if ids is None:
            return self.bank.delete(kind=PRINCIPLE) + self.bank.delete(kind=PENDING)
        known = {r.id for r in self.bank.items(PRINCIPLE)}
        missing = sorted(set(ids) - known)
        if missing:
            raise NotFoundError(f"no principle {', '.join(map(str, missing))} in {self.bank.scope}")
        return self.bank.delete(list(ids))

    def add(self, situation: str, action: str, avoid: str, reason: str, *,
            origin: Mapping[str, Any] | None = None) -> int | None:
        """Store a principle unless a stored one has a situation at least ``dedup_threshold`` similar (that
        one's ``support`` grows instead); return the new id, or ``None`` for a duplicate.

        Raises:
            InvalidInputError: an empty field.
        """
        fields = {"situation": situation, "action": action, "avoid": avoid, "reason": reason}
        empty = [name for name, value in fields.items() if not isinstance(value, str) or not value.strip()]
        if empty:
            raise InvalidInputError(f"a principle needs a non-empty {', '.join(empty)}")
        situation = situation.strip()
        vector = self.bank.embed([situation])[0]
        nearest = self.bank.nearest(PRINCIPLE, vector, 1)
        if nearest and nearest[0][1] >= self.dedup_threshold:
            record = nearest[0][0]
            self.bank.update(record.id, payload={**record.payload, "support": int(record.payload.get("support", 1)) + 1})
            return None
        payload = {"action": action.strip(), "avoid": avoid.strip(), "reason": reason.strip(), "support": 1,
                   "origin": dict(origin or {})}
        return self.bank.add(PRINCIPLE, situation, payload, vector=vector)

    # ------------------------------------------------------------------ use

    def _context_text(self, context: str | Sequence[Mapping[str, str]]) -> str:
        if isinstance(context, str):
            text = context
        else:
            text = "\n".join(str(m.get("content", "")) for m in list(context)[-self.context_messages:])
        if not text.strip():
            raise InvalidInputError("the context is empty")
        return text

    def recall(self, context: str | Sequence[Mapping[str, str]], k: int = 3) -> builtins.list[tuple[Principle, float]]:
        """The ``k`` principles whose situations are nearest the context (a text, or messages of which the
        latest ``context_messages`` count), with cosine >= ``min_similarity``, best first. No LLM call."""
        hits = self.bank.nearest(PRINCIPLE, self._context_text(context), k)
        return [(Principle.from_record(r), sim) for r, sim in hits if sim >= self.min_similarity]

    def principles(self, context: str | Sequence[Mapping[str, str]], k: int = 3) -> builtins.list[Guidance]:
        """:meth:`recall`, then each principle rewritten by the LLM for this conversation (one call each; a
        failed call gives the stored text, ``rewritten`` false).

        Raises:
            InvalidInputError: no LLM, or an empty context.
        """
        llm = self._need_llm()
        text = self._context_text(context)
        out = []
        for principle, sim in self.recall(text, k):
            messages = [
                {"role": "system", "content": "You adapt conversation strategy principles to a specific conversation. "
                                              "Reply with JSON only."},
                {"role": "user", "content": f"Conversation so far:\n{text}\n\nPrinciple:\n{principle.text()}\n\n"
                                            'Write {"guidance": ...}: one or two sentences telling the assistant what '
                                            "to do next in THIS conversation and what to avoid, following the principle."},
            ]
            try:
                value = llm.complete_json(messages, _REWRITE_SCHEMA, max_tokens=self.max_tokens)
                out.append(Guidance(principle, sim, value["guidance"].strip(), True))
            except LLMError as e:
                log.warning("principle rewrite failed, the stored text is used: %s", e)
                out.append(Guidance(principle, sim, principle.text(), False))
        return out

    # ------------------------------------------------------------------ role-play

    def _need_llm(self) -> LLM:
        if self.llm is None:
            raise InvalidInputError("this step needs an LLM: pass llm= (e.g. 'local')")
        return self.llm

    def respond(self, scenario: Scenario, messages: Messages, guidance: Sequence[str] = (),
                feedback: str | None = None) -> str:
        """The strategy model's next reply in ``messages`` (with principles' ``guidance`` and, for a retry,
        the critic's ``feedback`` on the failed attempt).

        Raises:
            LLMError: the call failed.
        """
        system = DOMAINS[scenario.domain] + f" Your goal: {scenario.goal}. Reply in one to three plain sentences (no lists, no line breaks), as JSON " \
                                            '{"reply": ...}.'
        if guidance:
            system += "\nStrategy principles for this moment:\n" + "\n".join(f"- {g}" for g in guidance)
        if feedback:
            system += f"\nYour previous attempt at this reply failed: {feedback} Write a better reply."
        shown = messages[-self.context_messages:]
        value = self._need_llm().complete_json([{"role": "system", "content": system}, *shown], _REPLY_SCHEMA,
                                               max_tokens=self.max_tokens)
        return value["reply"].strip()

    def react(self, scenario: Scenario, messages: Messages) -> str:
        """The simulated user's answer to the last assistant message.

        Raises:
            LLMError: the call failed.
        """
        prompt = (f"You play a person in a role-play. Your situation: {scenario.situation}\n"
                  f"Your hidden traits (act on them, never name them): {'; '.join(scenario.traits) or 'none'}\n\n"
                  f"Conversation so far:\n{_transcript(messages[-self.context_messages:])}\n\n"
                  "Answer the assistant's last message as this person, in one or two plain sentences. React honestly: if it "
                  "ignores your feelings or traits, or pushes you, show it; if it helps, show that. "
                  'Reply as JSON {"reply": ...}.')
        value = self._need_llm().complete_json([{"role": "user", "content": prompt}], _REPLY_SCHEMA,
                                               max_tokens=self.max_tokens)
        return value["reply"].strip()

    def judge(self, scenario: Scenario, before: Messages, reply: str, reaction: str) -> tuple[bool, str]:
        """The critic's verdict: did ``reply`` (after ``before``, answered by ``reaction``) move the
        conversation toward the goal? Returns (helped, reason).

        Raises:
            LLMError: the call failed.
        """
        prompt = (f"You judge one turn of a {scenario.domain} conversation.\nGoal of the assistant: {scenario.goal}\n"
                  f"The user's hidden traits: {'; '.join(scenario.traits) or 'none'}\n\n"
                  f"Conversation before the turn:\n{_transcript(before[-self.context_messages:])}\n\n"
                  f"The assistant said: {reply}\nThe user answered: {reaction}\n\n"
                  "Did the assistant's turn move the conversation toward the goal, judging by the user's answer? "
                  'Reply as JSON {"helped": true or false, "reason": one short sentence}.')
        value = self._need_llm().complete_json([{"role": "user", "content": prompt}], _CRITIC_SCHEMA,
                                               max_tokens=self.max_tokens)
        return bool(value["helped"]), value["reason"].strip()

    def simulate(self, scenario: Scenario, *, use_principles: bool = False, k: int = 2,
                 turns: int | None = None) -> Dialogue:
        """Role-play ``scenario``: the user opens, then ``turns`` assistant turns, each answered by the
        simulated user and judged by the critic; a failed turn is retried with the critic's reason (at most
        ``max_retries`` times) and the dialogue continues with the first successful retry. With
        ``use_principles``, each assistant turn gets the rewritten top-``k`` principles for the context.

        Raises:
            InvalidInputError: no LLM.
            LLMError: a call of the role-play failed (nothing is stored by a simulation).
        """
        messages: Messages = [{"role": "user", "content": scenario.opening}]
        judgements: list[Judgement] = []
        used: list[str] = []
        for _ in range(self.turns if turns is None else turns):
            guidance = [g.text for g in self.principles(messages, k)] if use_principles else []
            used += guidance
            before = list(messages)
            reply = self.respond(scenario, before, guidance)
            reaction = self.react(scenario, [*before, {"role": "assistant", "content": reply}])
            helped, reason = self.judge(scenario, before, reply, reaction)
            judgement = Judgement(len(before), reply, reaction, helped, reason)
            final, final_reaction = reply, reaction
            for _ in range(0 if helped else self.max_retries):
                retry = self.respond(scenario, before, guidance, feedback=reason)
                retry_reaction = self.react(scenario, [*before, {"role": "assistant", "content": retry}])
                retry_helped, retry_reason = self.judge(scenario, before, retry, retry_reaction)
                judgement = Judgement(len(before), reply, reaction, helped, reason, retry, retry_reaction,
                                      retry_helped, retry_reason)
                if retry_helped:
                    final, final_reaction = retry, retry_reaction
                    break
            judgements.append(judgement)
            messages += [{"role": "assistant", "content": final}, {"role": "user", "content": final_reaction}]
        return Dialogue(scenario, messages, judgements, used)

    # ------------------------------------------------------------------ learning

    def learn_from_dialogue(self, dialogue: Messages | Dialogue, judgements: Sequence[Judgement] | None = None, *,
                            origin: Mapping[str, Any] | None = None) -> LearnResult:
        """Write a principle from every judged turn that failed and whose retry succeeded (the critic's
        verdicts decide; other turns yield nothing); duplicates are dropped (see :meth:`add`). A failed
        extraction keeps the contrast as a pending item.

        Args:
            dialogue: the messages (or a :class:`Dialogue`, whose judgements and scenario are then used).
            judgements: the critic's verdicts, each naming its assistant turn by index in the messages.
            origin: stored with each principle (e.g. the scenario's domain and family).

        Raises:
            InvalidInputError: no LLM, or a judgement whose turn is not an assistant message of the dialogue.
        """
        if isinstance(dialogue, Dialogue):
            messages, judgements = dialogue.messages, dialogue.judgements if judgements is None else judgements
            origin = {"scenario": dialogue.scenario.id, "domain": dialogue.scenario.domain,
                      "family": dialogue.scenario.family, **(origin or {})}
        else:
            messages = list(dialogue)
        self._need_llm()
        result = LearnResult()
        for j in judgements or ():
            if not 0 <= j.turn < len(messages) or messages[j.turn].get("role") != "assistant":
                raise InvalidInputError(f"judgement turn {j.turn} is not an assistant message of the dialogue")
            if j.helped or not j.retry or not j.retry_helped:
                continue
            result.contrasts += 1
            contrast = {"context": _transcript(messages[max(0, j.turn - self.context_messages): j.turn]),
                        "failed": j.reply, "failed_reaction": j.reaction, "critique": j.reason,
                        "succeeded": j.retry, "succeeded_reaction": j.retry_reaction or ""}
            self._distill(contrast, dict(origin or {}), result)
        return result

    def _distill(self, contrast: dict[str, Any], origin: dict[str, Any], result: LearnResult,
                 pending_id: int | None = None) -> None:
        """Write and store the principle of one contrast; on failure keep (or leave) it pending."""
        prompt = (f"Conversation before the assistant's turn:\n{contrast['context']}\n\n"
                  f"FAILED reply: {contrast['failed']}\nUser's reaction: {contrast['failed_reaction']}\n"
                  f"Why it failed: {contrast['critique']}\n\n"
                  f"SUCCESSFUL reply: {contrast['succeeded']}\nUser's reaction: {contrast['succeeded_reaction']}\n\n"
                  "Write the general strategy principle this contrast teaches, as JSON with four fields: "
                  '"situation" (starts with "When", describes the user\'s state in general terms, no names), '
                  '"action" (what the assistant should do), "avoid" (what the failed reply did wrong), '
                  '"reason" (why the action works).')
        try:
            value = self._need_llm().complete_json(
                [{"role": "system", "content": "You distil conversation strategy principles. Reply with JSON only."},
                 {"role": "user", "content": prompt}], _PRINCIPLE_SCHEMA, max_tokens=self.max_tokens)
        except LLMError as e:
            log.warning("principle extraction failed, the contrast is kept pending: %s", e)
            if pending_id is None:
                pending_id = self.bank.add(PENDING, contrast["context"][-500:] or "(empty)",
                                           {"contrast": contrast, "origin": origin}, matchable=False)
            result.pending.append(pending_id)
            return
        new_id = self.add(value["situation"], value["action"], value["avoid"], value["reason"], origin=origin)
        if new_id is None:
            result.duplicates += 1
        else:
            result.added.append(new_id)
        if pending_id is not None:
            self.bank.delete([pending_id])

    def distill_pending(self) -> LearnResult:
        """Retry the extraction of every pending contrast; those that succeed leave the pending list."""
        self._need_llm()
        result = LearnResult()
        for record in self.pending():
            result.contrasts += 1
            self._distill(dict(record.payload["contrast"]), dict(record.payload.get("origin", {})), result, record.id)
        return result
