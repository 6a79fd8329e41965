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
