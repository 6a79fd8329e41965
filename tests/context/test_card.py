"""The user card's learned choice (memgas.context.card, build_context's card) with the real embedder, a real SQLite
store and the shipped weights: what it takes for a request, what its floor leaves to the evidence, what its
features and weights are."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from memgas import Memory
from memgas.context import ContextOptions, build_context
from memgas.context.build import card_candidates
from memgas.context.card import CARD_FEATURES, card_features, shipped_card
from memgas.context.select import Selection
from memgas.embed.base import Embedder

RUNNING = "I prefer running in the mornings before work, when the streets along the river are still quiet."
SAID = [("food", ["I hate mushrooms.", "The market had lovely tomatoes today."]),
        ("run", [RUNNING, "My knees felt fine after the long run on Sunday."]),
        ("music", ["I can't stand jazz.", "We went to a concert in the park last weekend."])]
REQUEST = "Can you plan my running schedule for next week?"


@pytest.fixture(scope="module")
def mem(tmp_path_factory: pytest.TempPathFactory, embedder: Embedder):
    with Memory(tmp_path_factory.mktemp("card") / "m.db", embedder=embedder) as m:
        for day, (sid, said) in enumerate(SAID):
            m.add([{"role": role, "content": text} for user in said for role, text in (("user", user),
                                                                                    ("assistant", "Noted."))],
                  user_id="u", session_id=sid, timestamp=f"2024-03-{10 + day}T10:00:00")
        yield m


def _card(mem: Memory, budget: int, **kw) -> list[str]:
    block = build_context(mem.method, mem.store, "u", REQUEST, max_tokens=budget, profiles=mem._profiles, **kw)
    head = block.partition("Memories from")[0]
    return [line.split(" · user: ", 1)[1] for line in head.splitlines()[1:] if " · user: " in line]


def _zeroed() -> Selection:
    model = shipped_card().model
    assert model.coef_ is not None and model.intercept_ is not None
    cleared = type(model)(class_weight=None)
    cleared.coef_, cleared.intercept_ = np.zeros_like(model.coef_), np.zeros_like(model.intercept_)
    return Selection(cleared, CARD_FEATURES)


def test_the_learned_card_takes_what_the_request_needs_first(mem: Memory) -> None:
    """A card with room for the longest line or two short ones: the shipped model takes the statement the request
    needs, though it is the longest; with its weights zeroed every statement is as likely and the shortest take the
    room (every statement admitted: the others are below the profile floor for this request)."""
    assert len(mem.profile(user_id="u")) == 3
    every = ContextOptions(profile_floor=-1.0)
    assert _card(mem, 300) == _card(mem, 300, options=every) == [RUNNING]
    assert _card(mem, 300, card=_zeroed(), options=every) == ["I hate mushrooms.", "I can't stand jazz."]
    assert _card(mem, 2000, options=every)[0] == RUNNING and len(_card(mem, 2000, options=every)) == 3


def test_the_model_reckons_the_needed_statement_likeliest_and_the_floor_still_holds(mem: Memory) -> None:
    """The shipped model gives the statement the request needs the highest probability; a statement below the
    profile floor is shown only where the request bears on its subject, by the learned card as by the hand-set."""
    statements, X = card_candidates(mem.method, mem.store, "u", REQUEST, mem._profiles)
    likely = dict(zip((s.text for s in statements), shipped_card().values(X)))
    assert max(likely, key=likely.__getitem__) == RUNNING
    bears = {s.text for s, row in zip(statements, X) if row[CARD_FEATURES.index("subject bearing")] > 0}
    assert bears < set(likely)  # the request bears on some of them, not all
    for learned in (True, False):
        shown = _card(mem, 2000, options=ContextOptions(profile_floor=1.0, learned_card=learned))
        assert set(shown) == bears


def test_the_features_say_what_the_card_reads(mem: Memory) -> None:
    """One row of :data:`CARD_FEATURES` per statement: the nearest statement has the best relevance rank, a statement
    of a session the method did not score has no session rank, and the request's reading is the same on every row."""
    statements, X = card_candidates(mem.method, mem.store, "u", REQUEST, mem._profiles)
    assert X.shape == (3, len(CARD_FEATURES))
    column = {name: i for i, name in enumerate(CARD_FEATURES)}
    by_text = {s.text: row for s, row in zip(statements, X)}
    assert by_text[RUNNING][column["relevance rank"]] == 1.0
    assert by_text[RUNNING][column["session rank"]] == 1.0  # its session is the method's best for the request
    assert by_text[RUNNING][column["a preference"]] == 1.0
    rows = card_features(np.array([0.9, 0.1]), np.zeros(2), np.zeros(2), ["instruction", "preference"], [8, 80],
                         [3, math.inf], "past")
    assert rows[1, column["session rank"]] == 0.0 and rows[0, column["session rank"]] == 0.4306765580177307
    assert rows[0, column["an instruction"]] == 1.0 and rows[1, column["tokens (log)"]] > rows[0, column["tokens (log)"]]
    assert (rows[:, column["asks about the past"]] == 1.0).all() and (rows[:, column["asks about now"]] == 0.0).all()


def test_the_shipped_weights_are_for_the_features_and_read_back(tmp_path: Path) -> None:
    weights = shipped_card().weights()
    assert list(weights) == list(CARD_FEATURES)
    assert weights["relevance"] > 0 and weights["session rank"] > 0 and weights["tokens (log)"] < 0
    shipped_card().save(tmp_path / "c.npz")
    again = Selection.load(tmp_path / "c.npz", features=CARD_FEATURES)
    X = np.random.default_rng(0).random((5, len(CARD_FEATURES)), dtype=np.float32)
    assert np.allclose(again.values(X), shipped_card().values(X))
    with pytest.raises(ValueError, match="features"):
        Selection.load(tmp_path / "c.npz")  # not the evidence selection's features
