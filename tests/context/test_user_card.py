"""The user card (issue 59): what holds now about the person, read by subject with the real embedder. The new user's
scenario of the issue, whose first hour got the old city, the old diet and the old partner under "the current
state first": sessions months apart, requests that depend on a fact without naming it. None of these phrasings is
in the subject model's or the detector's training phrasings (``memgas/data/user_model_*.json``)."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from memgas import InvalidInputError, Memory
from memgas.context import ContextOptions, build_context
from memgas.context.assemble import PROFILE_HEADER
from memgas.context.profile import SENTENCES_PER_MESSAGE, STATEMENTS_PER_MESSAGE, Detector
from memgas.embed.base import Embedder

SAID = [
    ("jan", "2026-01-10", ["Hi, I'm Erin. I live in Portland.", "I'm pescatarian, just so you know.",
                           "Always answer in French.", "My partner Sam loves jazz."]),
    ("mar", "2026-03-02", ["btw I can't stand cilantro", "I hate mushrooms.", "My daughter is allergic to shellfish."]),
    ("jun", "2026-06-20", ["I moved to Lisbon last month.", "Erin (that's me) is vegetarian now.",
                           "Always answer in English from now on.", "These days my partner is Jordan."]),
]
REQUESTS = ["Find a nice restaurant near me for a date night.", "What's the weather like where I live?",
            "What should I get my partner for their birthday?", "Suggest a dinner recipe for me."]


def test_none_of_these_phrasings_was_trained_on() -> None:
    data = resources.files("memgas").joinpath("data")
    subjects = json.loads(data.joinpath("user_model_subjects.json").read_text("utf-8"))
    detector = json.loads(data.joinpath("user_model_phrasings.json").read_text("utf-8"))
    trained = {t.lower() for part in ("statements", "requests") for texts in subjects[part].values() for t in texts}
    trained |= {t.lower() for texts in detector["examples"].values() for t in texts}
    said = {t.lower() for _, _, texts in SAID for t in texts} | {r.lower() for r in REQUESTS}
    assert not said & trained


@pytest.fixture(scope="module")
def erin(embedder: Embedder) -> Memory:
    mem = Memory(None, embedder=embedder)
    for session, date, texts in SAID:
        messages = [m for t in texts for m in ({"role": "user", "content": t}, {"role": "assistant", "content": "Noted."})]
        mem.add(messages, user_id="erin", session_id=session, timestamp=date)
    return mem


def card(mem: Memory, request: str) -> tuple[str, list[str]]:
    text = mem.context(request, user_id="erin", max_tokens=1000)
    head, _, rest = text.partition("Memories from")
    assert head.startswith(PROFILE_HEADER)
    return head, [line for line in rest.splitlines()[1:]]


def test_the_profile_holds_the_latest_word_on_each_subject(erin: Memory) -> None:
    profile = {s.text: (s.kind, s.subject) for s in erin.profile(user_id="erin")}
    assert profile["I moved to Lisbon last month."] == ("fact", "home")
    assert profile["These days my partner is Jordan."] == ("fact", "partner")
    assert profile["Erin (that's me) is vegetarian now."][1] == "diet"
    assert profile["Always answer in English from now on."] == ("instruction", "language")
    for kept in ("btw I can't stand cilantro", "I hate mushrooms.", "My daughter is allergic to shellfish."):
        assert profile[kept] == ("preference", "food")  # dislikes and allergies add up: none replaces another
    said = " ".join(profile)
    for gone in ("Portland", "pescatarian", "French", "Sam"):
        assert gone not in said


@pytest.mark.parametrize("request_, wanted, stale", [
    (REQUESTS[0], ["I moved to Lisbon last month."], ["Portland"]),
    (REQUESTS[1], ["I moved to Lisbon last month."], ["Portland"]),
    (REQUESTS[2], ["These days my partner is Jordan."], ["Sam"]),
    (REQUESTS[3], ["btw I can't stand cilantro", "I hate mushrooms.", "My daughter is allergic to shellfish.",
                   "Erin (that's me) is vegetarian now."], ["pescatarian"]),
])
def test_a_request_gets_the_current_statements_it_bears_on_in_the_card(erin: Memory, request_: str,
                                                                     wanted: list[str], stale: list[str]) -> None:
    head, memories = card(erin, request_)
    for text in wanted:
        assert f"user: {text}" in head, head
    for word in stale:
        assert word not in head, head
        # where a replaced statement comes back as a memory, its line says it is earlier
        assert all("(earlier)" in line for line in memories if word in line), memories


def test_earlier_marks_only_a_line_a_newer_statement_on_its_subject_replaced(erin: Memory) -> None:
    _, memories = card(erin, "Do I like mushrooms, and what do I eat these days?")
    mushrooms = [line for line in memories if "I hate mushrooms." in line]
    assert all("(earlier)" not in line for line in mushrooms)
    assert all("(earlier)" in line for line in memories if "pescatarian" in line or "Portland" in line)


def test_statements_on_different_subjects_or_that_say_no_change_all_hold(embedder: Embedder) -> None:
    said = ["I hate mushrooms.", "My wife is a doctor.", "I moved to Lisbon last month.", "Peppers make me gag.",
            "My wife loves gardening.", "I'm learning to paint with watercolours."]
    with Memory(None, embedder=embedder) as mem:
        for i, text in enumerate(said):
            mem.add(text, user_id="u", session_id=f"s{i}", timestamp=f"2024-0{i + 1}-01T10:00:00")
        kept = [s.text for s in mem.profile(user_id="u")]
        assert [t for t in said[:5] if t not in kept] == []  # none replaced another (the last need not last)


def test_the_pair_model_never_replaces_a_statement_on_another_subject(embedder: Embedder) -> None:
    """The supersession model alone calls these replacements (a home replacing a job, a home replacing a taste, a
    job replacing a home); their subjects differ, so the older holds."""
    pairs = [("I work at a bakery.", "I moved to a flat above the bakery."), ("I love Italian food.", "I moved to Italy."),
             ("I live near the beach.", "I now work near the beach.")]
    with Memory(None, embedder=embedder) as mem:
        for i, (older, newer) in enumerate(pairs):
            mem.add(older, user_id=f"u{i}", session_id="a", timestamp="2024-01-01T10:00:00")
            mem.add(newer, user_id=f"u{i}", session_id="b", timestamp="2024-02-01T10:00:00")
            assert older in [s.text for s in mem.profile(user_id=f"u{i}")]


def test_a_tight_card_leads_with_what_the_request_bears_on(erin: Memory) -> None:
    """At 375 tokens the card holds three lines: the instruction that always holds, then the statements of the
    subjects the request bears on, though other statements are nearer it by the embedder's cosine."""
    for request, first in [(REQUESTS[1], "I moved to Lisbon last month."),
                           (REQUESTS[2], "These days my partner is Jordan.")]:
        lines = erin.context(request, user_id="erin", max_tokens=375).partition("Memories from")[0].splitlines()
        assert lines[1].endswith("user: Always answer in English from now on.")
        assert lines[2].endswith(f"user: {first}"), lines


def test_a_long_paste_is_read_only_so_far_and_bad_input_changes_nothing(embedder: Embedder) -> None:
    """A 900 KB message of 50,000 sentences took minutes to read and then a profile's pairs no memory holds (the
    process died): the detector reads its first sentences only, and it gives a bounded number of statements."""
    read: list[int] = []

    class Counting:
        def __init__(self) -> None:
            self.id, self.dim = embedder.id, embedder.dim

        def embed(self, texts: list[str]):  # type: ignore[no-untyped-def]
            read.append(len(texts))
            return embedder.embed(texts)

    paste = " ".join(f"I hate mushrooms number {i}." for i in range(50_000))
    found = Detector(Counting()).statements([paste], [[]])  # type: ignore[arg-type]
    assert read == [SENTENCES_PER_MESSAGE] and 1 <= len(found[0]) <= SENTENCES_PER_MESSAGE
    with Memory(None, embedder=embedder) as mem:
        mem.add(paste, user_id="u", session_id="paste")
        assert 1 <= len(mem.profile(user_id="u")) <= STATEMENTS_PER_MESSAGE
        for bad in ([{"role": "user", "content": "I hate olives.", "name": ""}],):
            with pytest.raises(InvalidInputError, match="'name' is empty"):
                mem.add(bad, user_id="u", session_id="named")
        with pytest.raises(InvalidInputError, match="participants must be a list"):
            mem.add("I hate olives.", user_id="u", session_id="group", metadata={"participants": "Alice"})
        assert [s.session_id for s in mem.list(user_id="u")] == ["paste"]  # nothing stored by either


def test_what_is_said_of_a_relative_never_replaces_the_speakers_own(embedder: Embedder) -> None:
    """"My brother just moved to Oslo." is a change of home, but the brother's: the speaker still lives in Berlin, and
    the speaker's move does not take the sister's home away either. A partner is the speaker's own subject."""
    said = {"u": ["I live in Portland.", "My sister lives in Berlin.", "I live in Berlin now.",
                  "My brother just moved to Oslo."],
            "v": ["My boyfriend Sam loves jazz.", "I'm dating Jordan now."]}
    with Memory(None, embedder=embedder) as mem:
        for user, texts in said.items():
            for i, text in enumerate(texts):
                mem.add(text, user_id=user, session_id=f"s{i}", timestamp=f"2024-0{i + 1}-01T10:00:00")
        kept = [s.text for s in mem.profile(user_id="u")]
        partner = [s.text for s in mem.profile(user_id="v")]
    assert "I live in Berlin now." in kept and "My sister lives in Berlin." in kept, kept
    assert "I live in Portland." not in kept
    assert partner == ["I'm dating Jordan now."]


def test_a_message_the_card_shows_a_sentence_of_still_gives_its_evidence(embedder: Embedder) -> None:
    """The card shows a statement with its neighbours (320 characters at most); the rest of its message, the
    evidence of another question, may still come among the memories (it was left out: the message counted as shown)."""
    told = ("I'm vegetarian and I work from home these days. The move to remote work happened in the spring, after "
            "the office in the old mill building closed for renovation and the team was split across three cities. "
            "We kept the weekly planning call, though it never felt the same as the whiteboard sessions we used to "
            "have. What I miss most is chatting by the coffee machine with Priya and Tom from accounting.")
    with Memory(None, embedder=embedder) as mem:
        mem.add([{"role": "user", "content": told}, {"role": "assistant", "content": "That sounds hard."}],
                user_id="u", session_id="a")
        for i in range(3):
            mem.add([{"role": "user", "content": f"Let's plan my garden beds, part {i}."},
                     {"role": "assistant", "content": "Sure."}], user_id="u", session_id=f"g{i}")
        assert all(len(s.excerpt) < len(told) for s in mem.profile(user_id="u"))
        block = mem.context("What happened to the office in the old mill building?", user_id="u", max_tokens=600)
    assert "closed for renovation" in block.partition("Memories from")[2], block


def test_a_pasted_text_says_nothing_about_the_person(embedder: Embedder) -> None:
    """An article a user pastes to be summarised reads, sentence by sentence, like diets and tastes to the detector
    ("This week offers a ... mix of vegetarian and vegan low-carb dishes."); none speaks of a person, so none is a
    statement about the user. What the user says of themselves still is."""
    paste = ("Can you summarize this article for me?\n\nEnzymes are made up of proteins and react sensitively to "
             "external environments such as temperature and pH. Food that has been heat-treated and enzymes destroyed "
             "also slows digestion. In addition, enzymes are contained in various foods such as kiwis, pineapples and "
             "ginger. This week offers a delicious, colorful, and nutritious mix of vegetarian and vegan low-carb "
             "dishes. Add cheese crumbles, chopped nuts or baby greens as garnishes.")
    with Memory(None, embedder=embedder) as mem:
        mem.add([{"role": "user", "content": paste}, {"role": "assistant", "content": "Sure."}], user_id="u",
                session_id="a")
        mem.add("I can't stand cilantro.", user_id="u", session_id="b")
        assert [s.text for s in mem.profile(user_id="u")] == ["I can't stand cilantro."]


def test_a_statement_said_twice_in_one_message_leaves_the_message_current(embedder: Embedder) -> None:
    told = ("I'm vegetarian. Honestly the bus to work is slow. I'm vegetarian, remember that. "
            "Anyway, what should I cook tonight?")
    with Memory(None, embedder=embedder) as mem:
        mem.add([{"role": "user", "content": told}, {"role": "assistant", "content": "Lentil curry."}],
                user_id="u", session_id="a")
        assert len(mem.profile(user_id="u")) == 1  # one statement, said twice
        block = mem.context("What did I say about the bus to work?", user_id="u", max_tokens=400)
    lines = [line for line in block.splitlines() if "bus to work" in line]
    assert lines and all("(earlier)" not in line for line in lines), block


def test_a_subject_of_many_statements_leads_with_its_nearest_not_all(embedder: Embedder) -> None:
    """A request about work bears on the work subject: of many statements on it, only the nearest lead the card, so
    a preference of another subject, the nearest the request of all, still has a line (BEAM's conversations as one
    user: dozens of statements on work headed every card about a working day)."""
    work = ["I work as a night-shift nurse at the city hospital.", "I prefer to take all my work meetings in the afternoon.",
            "I'm a freelance graphic designer on the side.", "I got promoted to team lead last spring.",
            "I commute to the office by train every day."]
    nearest = "I prefer editing in short bursts of half an hour rather than long marathon sessions."
    request = "I'm planning my editing schedule for the week. How should I break up my work sessions?"
    with Memory(None, embedder=embedder) as mem:
        for i, text in enumerate(work + [nearest]):
            mem.add(text, user_id="u", session_id=f"s{i}", timestamp=f"2024-01-{i + 1:02d}T10:00:00")
        assert {s.text: s.subject for s in mem.profile(user_id="u")} == {**dict.fromkeys(work, "work"),
                                                                        nearest: "other"}

        def card(**changes: int) -> list[str]:  # the hand-set card (the learned one reads the lead as a feature)
            block = build_context(mem.method, mem.store, "u", request, max_tokens=600, profiles=mem._profiles,
                                  options=ContextOptions(learned_card=False, **changes))  # type: ignore[arg-type]
            return [line.split(" · user: ")[1] for line in block.partition("Memories from")[0].splitlines()[1:]]

        led = card()
        assert led[2] == nearest and set(led[:2]) <= set(work), led  # the two nearest work statements, then it
        assert nearest not in card(bearing_lead=len(work))  # every work statement first: no room for it


def test_a_card_weighs_each_statement_by_what_its_line_costs(embedder: Embedder) -> None:
    """A long preference a little nearer the request than a short instruction: where the card has room for the
    nearest instruction and one of the two, it takes the short one (``card_cost``), as the evidence is taken by value
    per token; with ``card_cost=0`` by relevance alone, the long one."""
    from memgas.context.assemble import line_cost
    from memgas.context.build import _profile

    long = ("I prefer working out in the mornings before my day starts because it gives me energy, and I usually have "
            "about forty minutes, so I like routines that fit in that window and need little equipment.")
    said = [long, "Always include rest days when I ask about workout plans.",
            "Always mention warm-up stretches when I ask about exercise."]
    with Memory(None, embedder=embedder) as mem:
        for i, text in enumerate(said):
            mem.add(text, user_id="u", session_id=f"s{i}", timestamp=f"2024-01-0{i + 1}T10:00:00")
        asked = "Can you suggest a workout plan for this week?"
        request, scored = embedder.embed([asked])[0], mem.method.scored(mem.store, "u", asked)

        def card(budget: int, cost: float) -> list[str]:  # the hand-set card: by cosine
            shown = _profile(mem._profiles, mem.store, "u", request, budget,  # type: ignore[arg-type]
                             ContextOptions(card_cost=cost), None, (), (), scored, "relevance", None)
            return [e.text for e in shown]

        every = _profile(mem._profiles, mem.store, "u", request, 1000, ContextOptions(card_cost=0.0),  # type: ignore[arg-type]
                         None, (), (), scored, "relevance", None)
        assert [e.text for e in every] == [said[1], long, said[2]]  # by relevance: the long one second
        cost = {e.text: line_cost(e) for e in every}
        room = cost[said[1]] + cost[long]
        assert card(room, 0.0) == [said[1], long]
        assert card(room, ContextOptions().card_cost) == [said[1], said[2]]
