"""Statements that hold from then on: standing instructions ("always…", "never…", "from now on…", "call me…") and
preferences ("I prefer…", "I'd rather…", "my preference is…"), found by rules in a user's message.

A standing statement is one sentence of a user message, read on its own; questions are not statements. The rules
are English and deliberately narrow: a sentence that *starts* with "always"/"never" (an imperative, not "I always
forget"), names a lasting change ("from now on", "going forward", "in the future"), tells how to address the user,
or states a preference in the first person. Pure functions of strings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from memgas.kernels.excerpt import sentence_spans

__all__ = ["Standing", "standing_statements", "INSTRUCTION", "PREFERENCE", "INSTRUCTION_RULE", "PREFERENCE_RULE",
           "holds_always", "condition_of"]

INSTRUCTION = "instruction"
PREFERENCE = "preference"

#: What may come before an instruction's first word: a label ("Quick setup note:", "Reminder:"), then fillers.
_LEAD = (r"^(?:[a-z][\w' -]{0,30}:\s+)?"
         r"(?:(?:ok(?:ay)?|so|and|also|please|oh|hey|btw|by the way|one more thing|remember)[,:;!]?\s+)*")
INSTRUCTION_RULE = re.compile(
    _LEAD + r"(?:always|never|don'?t ever|do not ever|make sure (?:to|you) always|be sure to always)\b"
    r"|\b(?:from now on|going forward|from here on(?: out)?|in (?:the )?future,? (?:please|always|never|don'?t))\b"
    r"|" + _LEAD + r"(?:call me|address me as|refer to me as)\b"
    r"|\b(?:whenever|every time|each time) I ask\b[^?]*,\s*(?:please\s+)?(?:always\s+)?[a-z]+",
    re.IGNORECASE)
PREFERENCE_RULE = re.compile(
    r"\bI(?:'d| would| really| also| generally| usually| still)* (?:prefer|rather)\b"
    r"|\bmy (?:preference|preferred)\b|\b(?:a|my|strong) preference for\b"
    r"|\bI (?:really )?(?:like|love|enjoy|hate|dislike|can'?t stand) (?:it when|to|using|working|having|\w+ing)\b"
    r"|\bI (?:don'?t|do not) (?:like|want|enjoy)\b"
    r"|\bI(?:'ve| have)? (?:chose|chosen|decided|opted) (?:to|for|against)\b|\bI aim (?:for|to)\b"
    r"|\bI(?:'m| am) (?:trying|aiming|determined) to (?:keep|stick|stay|avoid|limit)\b"
    r"|\bI(?:'m| am) sticking (?:with|to)\b"
    r"|\bI want to (?:keep|stick|avoid|limit)\b|\bsticking with\b"
    # what the user is or never does, as a lasting trait: "I'm vegetarian", "I don't eat meat", "I never fly"
    r"|\bI(?:'m| am) (?:an? |strictly |mostly )?(?:vegetarian|vegan|pescatarian|teetotal|allergic|lactose[- ]"
    r"intolerant|gluten[- ]free|diabetic|colou?r[- ]?blind|left[- ]handed|(?:a )?(?:morning|night) (?:person|owl))\b"
    r"|\bI (?:don'?t|do not|never|can'?t|cannot) (?:eat|drink|fly|drive|use|wear|watch|read)\b"
    # someone the user names prefers something: "Sara loves spicy food", "Crystal, who prefers mild flavors" (not
    # "She loves gardens": said in passing, it would head every context)
    r"|(?:\bwho|\b(?!(?:She|He|It|They|We|You|This|That|Everyone|Everybody)\b)[A-Z][a-z]+) "
    r"(?:prefers|loves|enjoys|hates|dislikes|can'?t stand)\b",
    re.IGNORECASE)


#: A condition that limits an instruction to some requests ("when I ask about timelines", "if it is code").
_CONDITION = re.compile(r"\b(?:when|whenever|if|unless|each time|every time|while|in case)\b", re.IGNORECASE)
#: A sentence about the speaker's own plans or about something else, which a lasting change ("from now on") does
#: not make a request of the assistant: "I'll definitely try making my own croutons from now on.", "It's full on
#: from here on." (most of the "from now on" sentences of LongMemEval's users; each headed every context as an
#: instruction for every request). One that names the assistant ("I'll need you to ...") or says please is one.
_NOT_ASKED = re.compile(
    _LEAD + r"(?:I(?:'ll| will| shall|'m going to| am going to|'m gonna| think I'll| plan| hope|'m hoping| am hoping"
    r"|'m really hoping|'m planning| am planning| intend)|we(?:'ll| will|'re going to| are going to)"
    r"|it|it's|there|this|that|he|she|they|since|in (?:a|an)|in the (?!future))\b"
    r"(?!.*\b(?:you|your|yours|please)\b)",
    re.IGNORECASE | re.DOTALL)


@dataclass(frozen=True, slots=True)
class Standing:
    """One standing statement: its ``kind`` (:data:`INSTRUCTION` or :data:`PREFERENCE`), where its sentence is in
    the message (``text[start:end]``), and whether it holds for every request (``always``: an instruction with no
    condition, "always answer in French", rather than "always include versions when I ask about libraries")."""

    kind: str
    start: int
    end: int
    always: bool = False


def holds_always(sentence: str) -> bool:
    """Whether an instruction holds for every request: it names no condition ("when I ask about...", "if..."), and
    it asks something of the assistant rather than telling the speaker's own plans.

    >>> holds_always("From now on, answer in French."), holds_always("Always cite sources when I ask about law.")
    (True, False)
    >>> holds_always("I'll definitely try making my own croutons from now on.")
    False
    >>> holds_always("I'll need you to answer in French from now on.")
    True
    """
    return _CONDITION.search(sentence) is None and _NOT_ASKED.match(sentence.strip()) is None


def condition_of(sentence: str) -> str | None:
    """The requests an instruction is limited to, as said: from its condition's first word to the sentence's end
    (``None`` where it names none). Said alone, the condition meets a request the whole instruction does not: "how
    to implement a login feature" is far from "Always format all code snippets with syntax highlighting when I ask
    about implementation details" and near "when I ask about implementation details".

    >>> condition_of("Always format code with syntax highlighting when I ask about implementation details.")
    'when I ask about implementation details'
    >>> condition_of("Always answer in French.") is None
    True
    """
    found = _CONDITION.search(sentence)
    return sentence[found.start():].strip().rstrip(".!;") if found else None


def standing_statements(text: str) -> list[Standing]:
    """The standing statements of one user message, in order; a sentence is at most one (an instruction first).

    >>> t = "Always format dates as Month Day, Year. I always forget my keys. Can you help? I prefer short answers."
    >>> [(s.kind, t[s.start:s.end], s.always) for s in standing_statements(t)]
    [('instruction', 'Always format dates as Month Day, Year.', True), ('preference', 'I prefer short answers.', False)]
    >>> standing_statements("Should I always use tabs?")
    []
    """
    found: list[Standing] = []
    for start, end in sentence_spans(text):
        sentence = text[start:end].strip()
        if sentence.endswith("?") and not PREFERENCE_RULE.search(sentence):
            continue
        if INSTRUCTION_RULE.search(sentence):
            found.append(Standing(INSTRUCTION, start, end, holds_always(sentence)))
        elif PREFERENCE_RULE.search(sentence):
            found.append(Standing(PREFERENCE, start, end))
    return found
