"""The scenario every framework adapter passes inside its framework's own loop (issue 39).

A 40-turn conversation: a fact at turn 2 (``FACT``), 37 turns of other talk, then ``QUESTION`` at turn 40, when the
fact has left the framework's own short-term window. The prompt the scripted model receives at turn 40 holds the
fact (memgas brought it back); the question appears in it once, as the turn being asked, never again as a memory; a
second conversation of the same user recalls the fact; another user's never does.

An adapter's test drives its framework through ``turns()`` and hands each captured prompt (its text, everything the
model was sent) to the checks below.
"""

from __future__ import annotations

__all__ = ["FACT", "QUESTION", "SECRET", "turns", "filler", "check_recalled", "check_recalled_later",
           "check_window_lost_it", "check_not_recalled"]

FACT = "My locker code is 4512."
SECRET = "4512"
QUESTION = "What is my locker code?"
TURNS = 40


def filler(i: int) -> str:
    """Other talk: turn ``i``'s user message (its words share nothing with the fact or the question)."""
    return f"Tell me fact number {i} about the ocean and its tides."


def turns() -> list[str]:
    """The user's 40 messages, in order: a greeting, the fact, 37 fillers, the question."""
    return ["Hi! I just joined the gym downtown.", FACT, *(filler(i) for i in range(3, TURNS)), QUESTION]


def check_window_lost_it(window_text: str) -> None:
    """The framework's own short-term window (what it sends without memgas) no longer holds the fact."""
    assert SECRET not in window_text, "the fact is still in the framework's window: the scenario proves nothing"


def check_recalled(prompt: str) -> None:
    """The prompt holds the fact, and the question only once (the turn itself, not a memory of it)."""
    assert FACT in prompt, f"the fact did not reach the model's prompt:\n{prompt[-3000:]}"
    assert prompt.count(QUESTION) == 1, f"the question came back as memory:\n{prompt[-3000:]}"


def check_recalled_later(prompt: str) -> None:
    """A later conversation's prompt holds the fact (the earlier conversation's question may come back too: it is a
    memory there, no longer the turn being asked)."""
    assert FACT in prompt, f"the fact did not reach the later conversation's prompt:\n{prompt[-3000:]}"


def check_not_recalled(prompt: str) -> None:
    """Another user's prompt never holds the fact."""
    assert SECRET not in prompt, f"another user's fact reached this prompt:\n{prompt[-3000:]}"
