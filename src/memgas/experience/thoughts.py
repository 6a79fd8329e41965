"""Buffer of Thoughts (Yang et al. 2024): thought templates distilled from solved problems, found again by a
distilled description of a new problem and instantiated for it.

The steps, each one prompt with a JSON schema through :meth:`memgas.llm.wrapper.LLM.complete_json` (cached, counted):

1. *Problem distiller* (:meth:`BufferOfThoughts.distill`): the problem → its key information, constraints,
   task type and a general description without the particular values. It runs before retrieval.
2. *Retrieval* (:meth:`BufferOfThoughts.recall`): the distilled description (not the raw problem) is
   embedded and matched against the stored templates' descriptions; the best match at or above
   ``retrieve_threshold`` is used.
3. *Instantiation* (:meth:`BufferOfThoughts.solve`): the template's steps and the distilled information go
   into the solving prompt; without a match the problem is solved by the plain prompt.
4. *Template writer* (:meth:`BufferOfThoughts.learn`): a solved problem → a general template (a
   description of the kind of problem and the reasoning steps, no particular numbers). It is dropped as a
   duplicate when its description's cosine with a stored template's description is ``>= dedup_threshold``.

Templates are kept value-free (:func:`source_values`, :func:`leaked_values`): small models copy the source
problem's numbers, dates, words and even its answer into a template, and the solver then copies them from the
template into new answers. The values of a source are its numbers and dates (anywhere in problem, solution or
answer) and the words of its answer outside a small stop list: the answer is the one part that is values by
definition, while the problem's other words state the task, which the template must name ("sort the words").
A reply that holds any is sent back once naming them, asking for placeholders (``<number>``, ``<date>``,
``<word>``); if the second reply still holds some (or fails), the leaked values are replaced by those
placeholders deterministically (:func:`scrub`) and listed in the template's ``scrubbed`` field. The source
problem, solution and answer stay in the template's ``source``: nothing is lost.

Nothing is lost when the LLM fails (or none is configured) while learning: the raw problem and solution
are kept as a ``pending`` item (stored, never matched) and :meth:`BufferOfThoughts.distill_pending` turns
them into templates later. Items live in an :class:`~memgas.experience.bank.ExperienceBank` (kind
``template`` keyed by the description, kind ``pending`` keyed by the problem).
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any, Sequence

from memgas.core.errors import InvalidInputError, LLMError, NotFoundError
from memgas.experience.bank import ExperienceBank
from memgas.llm.base import track_usage
from memgas.llm.wrapper import LLM
from memgas.store import ExperienceRecord

__all__ = ["BufferOfThoughts", "DISTILL_SCHEMA", "TEMPLATE_SCHEMA", "SOLVE_SCHEMA", "distill_prompt",
           "template_prompt", "solve_prompt", "source_values", "leaked_values", "scrub"]

log = logging.getLogger("memgas.llm")

TEMPLATE, PENDING = "template", "pending"

_TEXT = {"type": "string", "minLength": 1}
_TEXTS = {"type": "array", "items": _TEXT, "maxItems": 8}  # maxItems stops small models' list loops

#: The problem distiller's output.
DISTILL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"key_information": _TEXTS, "constraints": _TEXTS, "task_type": _TEXT, "description": _TEXT},
    "required": ["key_information", "constraints", "task_type", "description"],
    "additionalProperties": False,
}
#: The template writer's output.
TEMPLATE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"task_type": _TEXT, "description": _TEXT, "steps": {**_TEXTS, "minItems": 1}},
    "required": ["task_type", "description", "steps"],
    "additionalProperties": False,
}
#: The solver's output (reasoning first, so the answer follows from it).
SOLVE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"reasoning": {"type": "string"}, "answer": _TEXT},
    "required": ["reasoning", "answer"],
    "additionalProperties": False,
}

# Both the distiller and the template writer describe the kind of problem the same way, so that the two
# descriptions meet in embedding space.
# No worked example: a small model (0.5B) copies an example's text into its answer.
_DESCRIPTION = ('"description": one sentence naming the general kind of task and what it asks for; do not copy the '
                "problem: leave out its particular numbers, words and dates")
_JSON_ONLY = " Reply with JSON only."


def _block(tag: str, text: str) -> str:
    return f"<{tag}>\n{text.strip()}\n</{tag}>"


def distill_prompt(problem: str) -> list[dict[str, str]]:
    """The problem distiller's messages."""
    user = (f"Problem:\n{_block('problem', problem)}\n\nDistill the problem into a JSON object:\n"
            '- "key_information": the given values and variables, each as a short item\n'
            '- "constraints": the rules a solution must respect\n'
            '- "task_type": a short name for the kind of task\n'
            f"- {_DESCRIPTION}.")
    return [{"role": "system", "content": "You extract the essentials of problems." + _JSON_ONLY},
            {"role": "user", "content": user}]


def template_prompt(problem: str, solution: str, answer: str | None = None) -> list[dict[str, str]]:
    """The template writer's messages: a reusable template from one solved problem."""
    solved = _block("solution", solution) + (f"\nFinal answer: {answer}" if answer else "")
    user = (f"Problem:\n{_block('problem', problem)}\n\nSolution:\n{solved}\n\n"
            "Write a reusable thought template for every problem of this kind as a JSON object:\n"
            '- "task_type": a short name for the kind of task\n'
            f"- {_DESCRIPTION}\n"
            '- "steps": 2 to 6 general reasoning steps that solve any problem of this kind; leave out this '
            "problem's particular numbers, words and dates.")
    return [{"role": "system", "content": "You turn solved problems into general, reusable reasoning templates."
             + _JSON_ONLY}, {"role": "user", "content": user}]


# A number with its separators (a date, a time, a decimal) is one value; its parts are values too.
_NUMBER = re.compile(r"\d+(?:[./:-]\d+)*")
_WORD = re.compile(r"[^\W\d_]+")
#: Words of an answer that are not values of it (answers such as "The result is 5.").
STOP_WORDS = frozenset(
    "a an the and or of to in on at by for with from is are was were be it its this that these those as so "
    "then than answer result final date number numbers word words sorted order days day".split())


def _numbers(text: str) -> set[str]:
    """The numbers of ``text``, each whole (``2024-01-04``) and by parts (``2024``, ``01``, ``04``), with and
    without leading zeros."""
    out: set[str] = set()
    for match in _NUMBER.finditer(text):
        parts = re.findall(r"\d+", match.group())
        out.update([match.group(), *parts, *(part.lstrip("0") or "0" for part in parts)])
    return out


def source_values(problem: str, solution: str, answer: str | None = None) -> set[str]:
    """The particular values of a solved problem, lower-case: every number and date of the problem, solution
    and answer, and the answer's words outside :data:`STOP_WORDS` (see the module notes for why only the
    answer's words)."""
    words = {w.lower() for w in _WORD.findall(answer or "")} - STOP_WORDS
    return _numbers(" ".join((problem, solution, answer or ""))) | words


def _template_text(template: dict[str, Any]) -> str:
    return "\n".join([template["task_type"], template["description"], *template["steps"]])


def leaked_values(template: dict[str, Any], values: set[str]) -> list[str]:
    """The ``values`` (of :func:`source_values`) found in the template's task type, description or steps, in
    order of appearance, each once (compared case-insensitively, whole numbers and words only)."""
    text = _template_text(template)
    found = [m.group() for m in _NUMBER.finditer(text)
             if m.group() in values or _numbers(m.group()) & values]
    found += [m.group() for m in _WORD.finditer(text) if m.group().lower() in values]
    return list(dict.fromkeys(found))


def _placeholder(match: re.Match[str], values: set[str]) -> str:
    token = match.group()
    if token[0].isdigit():
        if token not in values and not _numbers(token) & values:
            return token
        return "<date>" if len(re.findall(r"\d+", token)) >= 3 else "<number>"
    return "<word>" if token.lower() in values else token


def scrub(template: dict[str, Any], values: set[str]) -> dict[str, Any]:
    """``template`` with every leaked value replaced by a placeholder: a number by ``<number>``, a number of
    three or more parts (``2024-01-04``, ``1/2/2024``) by ``<date>``, a word by ``<word>``."""
    pattern = re.compile(f"{_NUMBER.pattern}|{_WORD.pattern}")

    def fix(text: str) -> str:
        return pattern.sub(lambda m: _placeholder(m, values), text)

    return {"task_type": fix(template["task_type"]), "description": fix(template["description"]),
            "steps": [fix(step) for step in template["steps"]]}


def _leak_feedback(leaked: Sequence[str]) -> str:
    return ("The template still holds values of this particular problem: " + ", ".join(leaked[:12])
            + ". A template must fit every problem of this kind: replace each such value by a placeholder "
            "(<number>, <date> or <word>) and reply with the whole template again." + _JSON_ONLY)


def solve_prompt(problem: str, template: dict[str, Any] | None = None,
                 distilled: dict[str, Any] | None = None) -> list[dict[str, str]]:
    """The solver's messages: the problem alone, or instantiating ``template`` with the distilled information."""
    parts = [f"Problem:\n{_block('problem', problem)}"]
    if template is not None:
        if distilled is not None:
            parts.append("Key information: " + "; ".join(distilled["key_information"])
                         + "\nConstraints: " + "; ".join(distilled["constraints"]))
        steps = "\n".join(f"{i}. {step}" for i, step in enumerate(template["steps"], 1))
        # Small models copy whatever values a prompt shows: say where this problem's values are.
        parts.append(f"Thought template for {template['description']}\n{steps}\n\n"
                     "The template is a general pattern for this kind of problem, not a solution: follow its steps "
                     "with the values of THIS problem (its key information above); placeholders such as <number> "
                     "stand for them.")
    parts.append('Write a JSON object: "reasoning": your steps for this problem, briefly; "answer": only the final '
                 "answer, in the form the problem asks for.")
    return [{"role": "system", "content": "You solve problems carefully, step by step." + _JSON_ONLY},
            {"role": "user", "content": "\n\n".join(parts)}]


def _text(value: str, name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInputError(f"{name} must be a non-empty string")
    return value.strip()


def _clean(items: Sequence[str]) -> list[str]:
    return [" ".join(item.split()) for item in items if item.strip()]


def _template(value: dict[str, Any]) -> dict[str, Any]:
    """A template writer's reply, whitespace normalised.

    Raises:
        LLMError: the reply has no steps.
    """
    steps = _clean(value["steps"])
    if not steps:
        raise LLMError("the template writer wrote no steps")
    return {"task_type": " ".join(value["task_type"].split()), "description": " ".join(value["description"].split()),
            "steps": steps}


class BufferOfThoughts:
    """Buffer of Thoughts over one scope's experience bank (see the module notes).

    Args:
        bank: the scope's items.
        llm: the model of every step; without one, :meth:`learn` keeps problems pending and :meth:`recall`,
            :meth:`solve` and :meth:`distill_pending` refuse (the distiller is what retrieval matches on).
        retrieve_threshold: least cosine between a problem's distilled description and a template's
            description for the template to be used. Measured (``memgas bench bot``, 4 families, local
            0.5B model): the nearest template was of the right family for every test problem, with cosines
            0.56-0.92; 0.5 uses a template whenever the buffer knows the family.
        dedup_threshold: a new template whose description has at least this cosine with a stored one is
            dropped as a duplicate. Measured likewise: template descriptions of one family had cosines down
            to 0.49, of different families at most 0.62 while templates still held values. Value-free templates
            (the leak check) bring two families closer (0.72-0.76): 0.7 kept 4 of 20 templates but only 3 of the
            4 families (0.5B model), 0.75 kept 5 templates of all 4 (0.5B) and 7 of all 4 (1.5B), so 0.75.
        max_tokens: most tokens of one step's reply.
    """

    def __init__(self, bank: ExperienceBank, llm: LLM | None = None, *, retrieve_threshold: float = 0.5,
                 dedup_threshold: float = 0.75, max_tokens: int = 400) -> None:
        if not -1.0 <= retrieve_threshold <= 1.0 or not -1.0 <= dedup_threshold <= 1.0:
            raise InvalidInputError("retrieve_threshold and dedup_threshold are cosines, between -1 and 1")
        if max_tokens < 32:
            raise InvalidInputError(f"max_tokens must be at least 32, got {max_tokens}")
        self.bank = bank
        self.llm = llm
        self.retrieve_threshold = retrieve_threshold
        self.dedup_threshold = dedup_threshold
        self.max_tokens = max_tokens

    def _need_llm(self, what: str) -> LLM:
        if self.llm is None:
            raise InvalidInputError(f"Buffer of Thoughts needs an LLM to {what}: configure one (--llm)")
        return self.llm

    # -- the LLM steps -----------------------------------------------------------------------------

    def distill(self, problem: str) -> dict[str, Any]:
        """The problem distiller's JSON (key_information, constraints, task_type, description).

        Raises:
            InvalidInputError: an empty problem, or no LLM.
            LLMError: the call failed or its output stayed invalid.
        """
        value = self._need_llm("distill a problem").complete_json(
            distill_prompt(_text(problem, "problem")), DISTILL_SCHEMA, max_tokens=self.max_tokens)
        return {"key_information": _clean(value["key_information"]), "constraints": _clean(value["constraints"]),
                "task_type": " ".join(value["task_type"].split()), "description": " ".join(value["description"].split())}

    def _write_template(self, problem: str, solution: str, answer: str | None) -> dict[str, Any]:
        """The template writer's template, free of the source's values (see the module notes).

        Raises:
            InvalidInputError: no LLM.
            LLMError: the first call failed or its output stayed invalid.
        """
        llm = self._need_llm("write a template")
        messages = template_prompt(problem, solution, answer)
        template = _template(llm.complete_json(messages, TEMPLATE_SCHEMA, max_tokens=self.max_tokens))
        values = source_values(problem, solution, answer)
        leaked = leaked_values(template, values)
        if not leaked:
            return template
        retry = [*messages, {"role": "assistant", "content": json.dumps(template)},
                 {"role": "user", "content": _leak_feedback(leaked)}]
        try:
            second = _template(llm.complete_json(retry, TEMPLATE_SCHEMA, max_tokens=self.max_tokens))
        except LLMError as e:  # the first reply is a template: scrub it rather than lose it
            log.warning("BoT template retry failed, scrubbing the first reply: %s", e)
            second = template
        leaked = leaked_values(second, values)
        return {**scrub(second, values), "scrubbed": leaked} if leaked else second

    # -- learning ----------------------------------------------------------------------------------

    def learn(self, problem: str, solution: str, *, answer: str | None = None) -> dict[str, Any]:
        """Distil a template from a solved problem and keep it unless the buffer has a near-duplicate.

        Returns:
            ``{"status": "added", "id", "template"}``; ``{"status": "duplicate", "duplicate_of", "score",
            "template"}`` (nothing stored); or ``{"status": "pending", "id", "error"}`` when the template could
            not be written (no LLM, a failed call): the raw problem and solution are stored for
            :meth:`distill_pending`.

        Raises:
            InvalidInputError: an empty problem or solution.
        """
        problem, solution = _text(problem, "problem"), _text(solution, "solution")
        source = {"problem": problem, "solution": solution, "answer": None if answer is None else str(answer)}
        try:
            template = self._write_template(problem, solution, source["answer"])
        except (LLMError, InvalidInputError) as e:
            log.warning("BoT template writing failed, kept the solution as pending: %s", e)
            item = self.bank.add(PENDING, problem, {**source, "error": str(e)}, matchable=False)
            return {"status": "pending", "id": item, "error": str(e)}
        return self._keep(template, source)

    def _keep(self, template: dict[str, Any], source: dict[str, Any], pending_id: int | None = None) -> dict[str, Any]:
        """Store ``template`` (or turn pending item ``pending_id`` into it) unless a stored one is too similar."""
        vector = self.bank.embed([template["description"]])[0]
        best = self.bank.nearest(TEMPLATE, vector, 1)
        if best and best[0][1] >= self.dedup_threshold:
            if pending_id is not None:
                self.bank.delete([pending_id])
            return {"status": "duplicate", "duplicate_of": best[0][0].id, "score": round(best[0][1], 4),
                    "template": template}
        payload = {**template, "source": source}
        if pending_id is None:
            item = self.bank.add(TEMPLATE, template["description"], payload, vector=vector)
        else:
            item = self.bank.update(pending_id, kind=TEMPLATE, key=template["description"], payload=payload,
                                    vector=vector).id
        return {"status": "added", "id": item, "template": template}

    def distill_pending(self) -> list[dict[str, Any]]:
        """Retry the template writer on every pending item, oldest first; one result per item, as
        :meth:`learn` gives (a pending item that fails again stays pending, with the new error).

        Raises:
            InvalidInputError: no LLM.
        """
        self._need_llm("distill pending solutions")
        results = []
        for item in self.bank.items(PENDING):
            source = {name: item.payload.get(name) for name in ("problem", "solution", "answer")}
            try:
                template = self._write_template(str(source["problem"]), str(source["solution"]), source["answer"])
            except LLMError as e:
                self.bank.update(item.id, payload={**source, "error": str(e)})
                results.append({"status": "pending", "id": item.id, "error": str(e)})
                continue
            results.append({"pending_id": item.id, **self._keep(template, source, pending_id=item.id)})
        return results

    # -- using the buffer --------------------------------------------------------------------------

    def match(self, description: str, k: int = 1, threshold: float | None = None) -> list[tuple[dict[str, Any], float]]:
        """The ``k`` templates whose descriptions are nearest to an already distilled ``description``, best
        first, with their cosine; only those at or above ``threshold`` (default ``retrieve_threshold``)."""
        threshold = self.retrieve_threshold if threshold is None else threshold
        return [(self._view(record), round(score, 4)) for record, score in self.bank.nearest(TEMPLATE, description, k)
                if score >= threshold]

    def answer(self, problem: str, template: dict[str, Any] | None = None,
               distilled: dict[str, Any] | None = None) -> dict[str, str]:
        """The solver's ``{"reasoning", "answer"}``: the problem alone, or ``template`` instantiated with the
        distilled information (the solving step of :meth:`solve`).

        Raises:
            InvalidInputError: an empty problem or no LLM.
            LLMError: the call failed or its output stayed invalid.
        """
        value = self._need_llm("solve a problem").complete_json(
            solve_prompt(_text(problem, "problem"), template, distilled), SOLVE_SCHEMA, max_tokens=self.max_tokens)
        return {"reasoning": value["reasoning"].strip(), "answer": value["answer"].strip()}

    def recall(self, problem: str, k: int = 1, *, threshold: float | None = None) -> list[tuple[dict[str, Any], float]]:
        """The templates whose descriptions best match the problem's *distilled* description, best first, with
        their cosine; only those at or above ``threshold`` (default ``retrieve_threshold``; ``-1`` for all).

        Raises:
            InvalidInputError: an empty problem, ``k`` < 1, or no LLM (the distiller is needed).
            LLMError: the distiller failed.
        """
        if k < 1:
            raise InvalidInputError(f"k must be at least 1, got {k}")
        return self.match(self.distill(problem)["description"], k, threshold)

    def solve(self, problem: str, *, learn: bool = False) -> dict[str, Any]:
        """Solve ``problem`` with the best matching template, or without one.

        The distiller runs first; if it fails the problem is solved without a template (``distill_error``
        says why). With ``learn``, the solution is then given to :meth:`learn` (``learned`` holds its result).

        Returns:
            ``{"answer", "reasoning", "template": {...template, "score"} | None, "distilled": {...} | None,
            "learned": {...} | None, "llm": usage}`` (plus ``distill_error`` when distillation failed).

        Raises:
            InvalidInputError: an empty problem or no LLM.
            LLMError: the solving call failed (nothing is stored).
        """
        problem = _text(problem, "problem")
        self._need_llm("solve a problem")
        out: dict[str, Any] = {"template": None, "distilled": None, "learned": None}
        with track_usage() as usage:
            try:
                out["distilled"] = self.distill(problem)
            except LLMError as e:
                out["distill_error"] = str(e)
            best = self.match(out["distilled"]["description"]) if out["distilled"] else []
            if best:
                out["template"] = {**best[0][0], "score": best[0][1]}
            out.update(self.answer(problem, out["template"], out["distilled"]))
            if learn:
                solution = f"{out['reasoning']}\nAnswer: {out['answer']}" if out["reasoning"] else out["answer"]
                out["learned"] = self.learn(problem, solution, answer=out["answer"])
        out["llm"] = usage.to_dict()
        return out

    # -- inspection --------------------------------------------------------------------------------

    @staticmethod
    def _view(record: ExperienceRecord) -> dict[str, Any]:
        """An item as JSON-ready data: a template's description and steps, or a pending item's raw solution."""
        return {"id": record.id, "kind": record.kind, **record.payload, "created_at": record.created_at.isoformat()}

    def list(self, kind: str | None = None) -> list[dict[str, Any]]:
        """Templates and pending items (or those of ``kind``), oldest first."""
        if kind not in (None, TEMPLATE, PENDING):
            raise InvalidInputError(f"kind must be {TEMPLATE!r} or {PENDING!r}, got {kind!r}")
        return [self._view(r) for r in self.bank.items() if r.kind in ((kind,) if kind else (TEMPLATE, PENDING))]

    def get(self, item_id: int) -> dict[str, Any]:
        """One template or pending item.

        Raises:
            NotFoundError: the scope has no such item.
        """
        for record in self.bank.items():
            if record.id == item_id and record.kind in (TEMPLATE, PENDING):
                return self._view(record)
        raise NotFoundError(f"no template or pending item {item_id} in {self.bank.scope}")

    def delete(self, ids: Sequence[int] | None = None) -> int:
        """Delete templates and pending items by id (all of them when ``ids`` is None); return how many.

        Raises:
            NotFoundError: an id that is not one of this scope's templates or pending items (nothing deleted).
        """
        if ids is None:
            return self.bank.delete(kind=TEMPLATE) + self.bank.delete(kind=PENDING)
        for item_id in ids:
            self.get(item_id)
        return self.bank.delete(list(ids))
