"""Who speaks in a conversation, who a question names, and which messages only ask.

A conversation between people (two friends on a messaging app, a group chat) stores the second person's words as
replies (``role="assistant"`` with their ``name``): memgas's convention for any speaker that is not the user.
Such words are evidence as much as the user's, unlike an assistant's long replies, so the context gives them the
same allowance. A session says who takes part in its metadata (``{"participants": {"Bob": "person", "Jarvis":
"agent"}}``, or a list of the people's names); without that, a session where every user and assistant message
carries a name is read as a conversation between the named people (an agent framework names its agents, not its
user). Pure functions of strings; no model.
"""

from __future__ import annotations

import re
from typing import Any, Collection, Mapping, Sequence

__all__ = ["people_of", "known_from", "named_in", "only_asks"]


def people_of(metadata: Mapping[str, Any], speakers: Sequence[tuple[str, str | None]]) -> frozenset[str]:
    """The names of the people who speak in a session, folded to lower case: those its ``participants`` declare
    as persons (a mapping name → ``"person"``/``"agent"``, or a list of people's names), else, where every
    ``user`` and ``assistant`` message of ``speakers`` (``(role, name)`` pairs) has a name, every such name.

    >>> sorted(people_of({}, [("user", "Caroline"), ("assistant", "Melanie")]))
    ['caroline', 'melanie']
    >>> sorted(people_of({}, [("user", None), ("assistant", "Jarvis")]))
    []
    >>> sorted(people_of({"participants": {"Alice": "person", "Jarvis": "agent"}}, [("assistant", "Jarvis")]))
    ['alice']
    """
    declared = metadata.get("participants")
    if isinstance(declared, Mapping):
        return frozenset(str(n).casefold() for n, kind in declared.items() if kind == "person")
    if isinstance(declared, (list, tuple)):
        return frozenset(str(n).casefold() for n in declared)
    talk = [name for role, name in speakers if role in ("user", "assistant")]
    if not talk or any(not name for name in talk):
        return frozenset()
    return frozenset(str(name).casefold() for name in talk)


def known_from(metadata: Mapping[str, Any], some: Sequence[tuple[str, str | None]]) -> bool:
    """Whether :func:`people_of` of a session is known from its ``metadata`` and ``some`` of its speakers, whatever
    the others: where the metadata declares the participants, or one of ``some`` speaking as user or assistant has
    no name (then nobody is a person by name).

    >>> known_from({"participants": ["Ann"]}, []), known_from({}, [("assistant", None)]), known_from({}, [("user", "Ann")])
    (True, True, False)
    """
    return isinstance(metadata.get("participants"), (Mapping, list, tuple)) or any(
        role in ("user", "assistant") and not name for role, name in some)


_CAPITALISED = re.compile(r"\b[A-Z][\w'’-]*")


def _close(a: str, b: str) -> bool:
    """Whether two names are one with a small spelling difference: equal, or (both of 5 letters or more) one
    letter added, dropped or changed, or two neighbours swapped."""
    if a == b:
        return True
    if min(len(a), len(b)) < 5 or abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        differ = [i for i, (x, y) in enumerate(zip(a, b)) if x != y]
        return len(differ) == 1 or (len(differ) == 2 and differ[1] == differ[0] + 1
                                    and a[differ[0]] == b[differ[1]] and a[differ[1]] == b[differ[0]])
    short, long_ = sorted((a, b), key=len)
    return any(long_[:i] + long_[i + 1:] == short for i in range(len(long_)))


def named_in(question: str, names: Collection[str]) -> frozenset[str]:
    """Which of ``names`` (folded to lower case) ``question`` names: a capitalised word of it (a possessive's
    ``'s`` dropped) equal to a name's first word, case and a small spelling difference aside.

    >>> sorted(named_in("What are Elise's hobbies?", {"elise", "bob"}))
    ['elise']
    >>> sorted(named_in("What did Melanei paint?", {"melanie smith"})), sorted(named_in("What did I buy?", {"i"}))
    (['melanie smith'], [])
    """
    words = {w.casefold().removesuffix("'s").removesuffix("’s") for w in _CAPITALISED.findall(question)}
    words.discard("i")
    return frozenset(n for n in names if n.split() and any(_close(w, n.split()[0]) for w in words))


_SENTENCE = re.compile(r"[^.!?\n]+[.!?]*")
#: How a question opens: an interrogative word or an auxiliary, after any filler ("and", "so", "ok", ...).
_ASKS = re.compile(r"^(?:(?:and|so|but|also|ok(?:ay)?|hey|hi|oh|wait|then|um+|hmm+)\W+)*(?:what|which|where|when|who|"
                   r"whom|whose|why|how|do|does|did|is|are|was|were|am|can|could|would|will|should|shall|may|might|"
                   r"have|has|had)\b", re.IGNORECASE)


def only_asks(text: str) -> bool:
    """Whether a message only asks: short (80 characters at most: a longer question carries what it is about, "what's
    the best way to adjust my schedule since the sessions got extended to July 16?"), and every sentence of it a
    question that opens as one ("Where did I live before?", not "I moved last month, where should I shop?"). A
    question is not evidence of its answer, so such a message reads after the messages that say something.

    >>> only_asks("Where did I live before I moved?"), only_asks("I moved to Sellwood. Any good cafes nearby?")
    (True, False)
    >>> only_asks("Which city do I live in now? And where did I live before?")
    True
    >>> only_asks("I'm worried I'll miss the deadline, how can I plan for it?")
    False
    """
    if len(text.strip()) > 80:
        return False
    sentences = [s.strip() for s in _SENTENCE.findall(text.strip()) if s.strip()]
    return bool(sentences) and all(s.endswith("?") and _ASKS.match(s) for s in sentences)
