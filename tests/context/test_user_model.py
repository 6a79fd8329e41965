"""The profile read by meaning: statements no phrase of the rules holds ("I hate mushrooms.", "My daughter is
allergic to shellfish.") are found by the learned detector over the real embedder, what is said in passing is not,
and a context for a request that bears on them shows them. The phrasings here are the new user's of the issue, none
of them in the detector's training phrasings (``memgas/data/user_model_phrasings.json``)."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import numpy as np
import pytest

from memgas import Memory
from memgas.context.profile import Detector, Profiles
from memgas.embed.base import Embedder

LASTING = ["I hate mushrooms.", "btw I can't stand cilantro", "My daughter is allergic to shellfish.",
           "Erin is vegetarian and allergic to peanuts.", "By the way, I'm allergic to cats"]
PASSING = ["Can you help me debug this function?", "Thanks, that was helpful.", "Find me a flight to Rome next week.",
           "What's the capital of Peru?"]


def test_none_of_these_phrasings_was_trained_on() -> None:
    shipped = json.loads(resources.files("memgas").joinpath("data/user_model_phrasings.json").read_text("utf-8"))
    trained = {t.lower() for texts in shipped["examples"].values() for t in texts}
    assert not {t.lower() for t in LASTING + PASSING} & trained


def test_the_detector_finds_what_the_rules_miss_and_leaves_what_passes(embedder: Embedder) -> None:
    with Memory(None, embedder=embedder) as mem:
        for i, text in enumerate(LASTING + PASSING):
            mem.add(text, user_id="erin", session_id=f"s{i}")
        found = {s.text: s.kind for s in mem.profile(user_id="erin")}
        assert found == {text: "preference" for text in LASTING}
        rules = Profiles(embedder, learned=False).statements(mem.store, "erin")
        assert [s.text for s in rules] == ["By the way, I'm allergic to cats"]  # the phrase list alone: one of five


def test_a_request_that_bears_on_them_gets_them_in_its_context(embedder: Embedder) -> None:
    """The AutoGen adapter's case: one memory, and a request that never names it; the context was empty."""
    with Memory(None, embedder=embedder) as mem:
        mem.add("Erin is vegetarian and allergic to peanuts.", user_id="erin", session_id="m1")
        context = mem.context("Suggest a dinner recipe for me.", user_id="erin")
        assert "Erin is vegetarian and allergic to peanuts." in context


def test_a_detector_with_zeroed_weights_or_fitted_over_another_embedder_finds_nothing(embedder: Embedder,
                                                                                    tmp_path: Path) -> None:
    shipped = dict(np.load(str(resources.files("memgas").joinpath("data/lasting.npz"))))
    assert str(shipped["embedder"]) == embedder.id  # the shipped weights are the default embedder's
    zeroed = tmp_path / "zero.npz"
    np.savez(zeroed, **{**shipped, "coef": np.zeros_like(shipped["coef"]),
                        "intercept": np.array([1.0, 0, 0, 0], np.float32)})
    other = tmp_path / "other.npz"
    np.savez(other, **{**shipped, "embedder": np.array("onnx:some-other-model")})
    texts = ["I hate mushrooms.", "My daughter is allergic to shellfish."]
    assert [len(found) for found in Detector(embedder).statements(texts, [[], []])] == [1, 1]
    for weights in (zeroed, other):
        assert Detector(embedder, weights).statements(texts, [[], []]) == [[], []]


@pytest.mark.parametrize("text", ["Sure.", "Why would I?", ""])
def test_short_sentences_and_questions_are_not_read(embedder: Embedder, text: str) -> None:
    assert Detector(embedder).statements([text], [[]]) == [[]]


def test_a_newer_statement_replaces_the_one_it_updates_and_two_that_both_hold_stay(embedder: Embedder) -> None:
    said = ["Always answer in French.", "I'm vegetarian.", "I hate mushrooms.", "btw I can't stand cilantro",
            "Always answer in English from now on.", "I'm not vegetarian anymore, I eat meat again.",
            "My daughter is allergic to shellfish.", "Can you suggest a film?"]
    with Memory(None, embedder=embedder) as mem:
        for i, text in enumerate(said):
            mem.add(text, user_id="erin", session_id=f"s{i}", timestamp=f"2024-01-0{i + 1}T10:00:00")
        profile = {s.text: s.kind for s in mem.profile(user_id="erin")}
        # an instruction that says it changes things replaces the one before it
        assert profile == {"I hate mushrooms.": "preference", "btw I can't stand cilantro": "preference",
                           "Always answer in English from now on.": "instruction",
                           "I'm not vegetarian anymore, I eat meat again.": "fact",  # a fact that retracts one
                           "My daughter is allergic to shellfish.": "preference"}
        context = mem.context("Suggest a dinner recipe for me.", user_id="erin", max_tokens=400)
        head = context.split("Memories from")[0]
        assert "I'm vegetarian." not in head and "I eat meat again" in head
        rules = {s.text for s in Profiles(embedder, learned=False).statements(mem.store, "erin")}
        assert {"I'm vegetarian.", "Always answer in French."} <= rules  # the rules alone kept the replaced ones


def test_a_one_off_event_the_detector_calls_a_fact_stays_out_and_a_home_stays_in(embedder: Embedder) -> None:
    with Memory(None, embedder=embedder) as mem:
        mem.add("I live in Portland.", user_id="u", session_id="a", timestamp="2024-01-01T10:00:00")
        mem.add("I hate mushrooms.", user_id="u", session_id="b", timestamp="2024-01-02T10:00:00")
        mem.add("Took the cat to the vet this morning, she's fine.", user_id="u", session_id="c",
                timestamp="2024-01-03T10:00:00")
        assert [(s.text, s.subject) for s in mem.profile(user_id="u")] == [("I live in Portland.", "home"),
                                                                           ("I hate mushrooms.", "food")]


def test_the_profile_with_a_fact_that_retracts_is_served_over_rest(tmp_path: Path) -> None:
    import httpx

    from support.live_server import make_key, start_server

    db = tmp_path / "served.db"
    with Memory(str(db)) as mem:  # the default embedder, the detector's own
        mem.add("I'm vegetarian.", user_id="erin", session_id="a", timestamp="2024-01-01T10:00:00")
        mem.add("I'm not vegetarian anymore, I eat meat again.", user_id="erin", session_id="b",
                timestamp="2024-02-01T10:00:00")
    key = make_key(db)
    server = start_server(db, "--no-mcp", tmp=tmp_path)
    try:
        got = httpx.get(f"{server.url}/v1/profile", params={"user_id": "erin"},
                        headers={"Authorization": f"Bearer {key}"})
        assert got.status_code == 200, got.text
        assert [(s["kind"], s["text"], s["subject"]) for s in got.json()["statements"]] == [
            ("fact", "I'm not vegetarian anymore, I eat meat again.", "diet")]
    finally:
        server.stop()


def test_a_retraction_alone_in_a_scope_holds_and_the_scope_without_it_keeps_the_old_value(embedder: Embedder) -> None:
    with Memory(None, embedder=embedder) as mem:
        mem.add("I'm vegetarian.", user_id="u", session_id="a", timestamp="2024-01-01T10:00:00")
        mem.add("I'm not vegetarian anymore, I eat meat again.", user_id="u", session_id="b",
                timestamp="2024-02-01T10:00:00")
        assert [(s.kind, s.subject) for s in mem.profile(user_id="u")] == [("fact", "diet")]
        # a scope holds what it holds: the retraction on its own, or the old value where the retraction is left out
        assert [s.session_id for s in mem.profile(user_id="u", filters={"session_id": "b"})] == ["b"]
        assert [s.session_id for s in mem.profile(user_id="u", filters={"session_id": "a"})] == ["a"]


def test_the_marks_follow_a_new_statement_and_the_scope_and_are_read_once_while_nothing_changes(
        embedder: Embedder) -> None:
    profiles = Profiles(embedder)
    with Memory(None, embedder=embedder) as mem:
        mem.add("I'm vegetarian.", user_id="u", session_id="a", timestamp="2024-01-01T10:00:00")
        first = profiles.marks(mem.store, "u")
        assert first == {("a", 0): (frozenset({"diet"}), False)}
        assert profiles.marks(mem.store, "u") is first  # nothing changed: not worked out again
        mem.add("I'm not vegetarian anymore, I eat meat again.", user_id="u", session_id="b",
                timestamp="2024-02-01T10:00:00")
        assert profiles.marks(mem.store, "u")[("a", 0)] == (frozenset({"diet"}), True)  # the new one replaced it
        assert profiles.marks(mem.store, "u", excluded={"b"})[("a", 0)] == (frozenset({"diet"}), False)
        assert profiles.marks(mem.store, "u")[("a", 0)][1]


def test_in_a_group_chat_each_line_says_whose_it_is_and_one_person_never_replaces_another(embedder: Embedder) -> None:
    """"By the way, I'm allergic to cats" (Alice) was an unnamed ``user:`` line, so "Who is allergic to cats?" could
    not be answered; and Bob's diet is not Alice's."""
    chat = [{"role": "user", "name": "Alice", "content": "By the way, I'm allergic to cats"},
            {"role": "user", "name": "Bob", "content": "Shall we book the cabin for Friday?"},
            {"role": "user", "name": "Alice", "content": "I'm vegetarian, remember that when we plan meals."},
            {"role": "user", "name": "Bob", "content": "I'm not vegetarian anymore, I eat meat again."}]
    with Memory(None, embedder=embedder) as mem:
        mem.add(chat, user_id="trip", session_id="g1", timestamp="2024-03-01T10:00:00")
        profile = mem.profile(user_id="trip")
        whose = {s.text: s.who for s in profile}
        assert whose["By the way, I'm allergic to cats"] == "Alice"
        assert whose["I'm vegetarian, remember that when we plan meals."] == "Alice"  # Bob's retraction is his own
        assert all(s.to_dict()["who"] == s.who for s in profile)
        context = mem.context("Who is allergic to cats?", user_id="trip", max_tokens=300)
        assert "· g1 · Alice: By the way, I'm allergic to cats" in context.split("Memories from")[0]
        assert "user: By the way" not in context


def test_instructions_that_state_no_change_all_hold(embedder: Embedder) -> None:
    """Only an instruction that says it changes something replaces one: BEAM's users give several at once."""
    said = ["Always use metric units when you give measurements.", "Never use emojis in your answers.",
            "Always answer with a short summary first.", "Switch to imperial units from now on, please."]
    with Memory(None, embedder=embedder) as mem:
        for i, text in enumerate(said):
            mem.add(text, user_id="u", session_id=f"s{i}", timestamp=f"2024-01-0{i + 1}T10:00:00")
        assert [s.text for s in mem.profile(user_id="u")] == said[1:]  # the units changed, the rest holds


def test_an_instruction_is_replaced_only_by_one_that_changes_how_to_answer(embedder: Embedder) -> None:
    """"new" in an instruction names what it is about, and a new job is no instruction: the date format and the
    salary figures hold (each was gone from the card of a user who said such things, BEAM's conversations held as
    one user's); the answer language is how to answer, so a preference on it replaces an instruction on it."""
    said = ["Always format dates as Month Day, Year when I ask about scheduling details.",
            "Always confirm salary figures when I ask about compensation details.",
            "Always confirm exact start dates when I ask about new job roles.",
            "I started a new job at StreamWave as a producer.",
            "Always answer in French.", "I'd rather you answer in Spanish now."]
    with Memory(None, embedder=embedder) as mem:
        for i, text in enumerate(said):
            mem.add(text, user_id="u", session_id=f"s{i}", timestamp=f"2024-01-0{i + 1}T10:00:00")
        profile = [s.text for s in mem.profile(user_id="u")]
        assert said[:3] == [t for t in profile if t.startswith("Always confirm") or t.startswith("Always format")]
        assert said[4] not in profile and said[5] in profile


def test_an_instruction_meets_the_requests_its_condition_names(embedder: Embedder) -> None:
    """"How to implement a login feature" is far from the whole instruction (a cosine of 0.13, below two preferences
    of no bearing on it) and near its condition, "when I ask about implementation details": a tight card shows it."""
    said = ["Always format all code snippets with syntax highlighting when I ask about implementation details.",
            "I prefer to keep my code simple.", "I prefer step-by-step explanations."]
    with Memory(None, embedder=embedder) as mem:
        for i, text in enumerate(said):
            mem.add(text, user_id="u", session_id=f"s{i}", timestamp=f"2024-01-0{i + 1}T10:00:00")
        head = mem.context("Could you show me how to implement a login feature?", user_id="u",
                           max_tokens=300).partition("Memories from")[0].splitlines()
        assert [line.split(" · user: ")[1] for line in head[1:]] == [said[0]]
