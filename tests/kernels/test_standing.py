"""Standing instructions and preferences found by rules (memgas.kernels.standing)."""

from __future__ import annotations

import pytest

from memgas.kernels.standing import INSTRUCTION, PREFERENCE, standing_statements


@pytest.mark.parametrize(("text", "kind"), [
    ("Always format dates as Month Day, Year when I ask about timelines.", INSTRUCTION),
    ("Never use emojis in your answers.", INSTRUCTION),
    ("Please always include type hints.", INSTRUCTION),
    ("From now on, answer in French.", INSTRUCTION),
    ("Call me Sam.", INSTRUCTION),
    ("Going forward, keep replies under 100 words.", INSTRUCTION),
    ("I prefer e-books for their portability.", PREFERENCE),
    ("I'd rather have short answers.", PREFERENCE),
    ("I've decided to go with server-side rendering for now.", PREFERENCE),
    ("My preference is dark mode.", PREFERENCE),
    ("I prefer Excel, can you help me set up a budget sheet?", PREFERENCE),  # a preference inside a request
    # the phrasings of a new user's loop (issue 47): a label before the instruction, a diet said as a trait
    ("Quick setup note: always answer me in metric units.", INSTRUCTION),
    ("Note: always answer me in metric units.", INSTRUCTION),
    ("I'm vegetarian.", PREFERENCE),
    ("I don't eat meat.", PREFERENCE),
    ("Sara loves spicy food.", PREFERENCE),  # someone the user cooks for
    ("I chose to update my will digitally for flexibility.", PREFERENCE),
])
def test_statements_that_hold_from_then_on(text: str, kind: str) -> None:
    found = standing_statements(text)
    assert [s.kind for s in found] == [kind] and text[found[0].start:found[0].end] == text


@pytest.mark.parametrize("text", [
    "I always forget my keys.",  # a habit, not an instruction to the assistant
    "Should I always use tabs?",  # a question
    "Can you help me plan a trip to Lisbon?",
    "It never rains here in July.",
    "We prefer to meet at noon, said my boss.",  # not the user in the first person
    "Note: I went home early.",  # a label before a sentence that asks nothing to hold
    "I don't know the answer.",
    "She loves gardens, books and good coffee.",  # a pronoun: said in passing, not a named person's preference
])
def test_other_sentences_are_not(text: str) -> None:
    assert standing_statements(text) == []


def test_a_greeting_before_a_labelled_instruction_leaves_it_an_instruction_for_every_request() -> None:
    text = "Hi! Quick setup note: always answer me in metric units."
    found = standing_statements(text)
    assert [(s.kind, text[s.start:s.end], s.always) for s in found] == [
        (INSTRUCTION, "Quick setup note: always answer me in metric units.", True)]


def test_each_sentence_of_a_message_on_its_own_with_its_place() -> None:
    text = "Thanks for the help. Always cite your sources. I prefer bullet points. See you."
    found = standing_statements(text)
    assert [(s.kind, text[s.start:s.end]) for s in found] == [
        (INSTRUCTION, "Always cite your sources."), (PREFERENCE, "I prefer bullet points.")]


@pytest.mark.parametrize(("text", "always"), [
    ("Always answer in French.", True),
    ("Never use emojis.", True),
    ("Always include version numbers when I ask about libraries.", False),
    ("Always add type hints if it is code.", False),
])
def test_an_instruction_without_a_condition_holds_for_every_request(text: str, always: bool) -> None:
    assert [s.always for s in standing_statements(text)] == [always]


@pytest.mark.parametrize(("text", "always"), [
    ("From now on, answer in French.", True),
    ("Going forward, keep replies under 100 words.", True),
    ("I'll need you to answer in French from now on.", True),  # it names the assistant
    ("With each block I paste from now on, just confirm that you've received the data.", True),
    ("I'll definitely try making my own croutons from now on.", False),  # the speaker's own plan
    ("I think I'll try using a notes app to keep track of them from now on.", False),
    ("I'll also talk about the grounding techniques that worked and how I can use them going forward.", False),
    ("It's full on from here on.", False),  # about something else
    ("In a blog post, Zhao wrote that Binance must lead by example going forward.", False),
    ("In the future, please use metric.", True),
])
def test_a_lasting_change_holds_for_every_request_only_where_it_asks_the_assistant(text: str, always: bool) -> None:
    """Most "from now on" sentences of LongMemEval's users tell their own plans; each headed every context."""
    found = standing_statements(text)
    assert [(s.kind, s.always) for s in found] == [(INSTRUCTION, always)]
