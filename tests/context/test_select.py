"""The learned choice of a context's evidence (memgas.context.select, build_context's learned path), with the real
embedder, a real SQLite store and the shipped weights: what it takes, what it falls back to, what its weights are."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from memgas import Memory
from memgas.context import ContextOptions, build_context
from memgas.context.assemble import MEMORY_HEADERS
from memgas.context.build import evidence_candidates
from memgas.context.select import FEATURES, Selection, shipped
from memgas.embed.base import Embedder

#: short user messages near the question's subject, none of which answers it
FILLER = ["Cats are fun.", "I like cats.", "Cats sleep a lot.", "Pets are nice.", "My cat is cute.",
          "Cats purr.", "Cat videos, ha.", "Cats again!"]
EVIDENCE = "I adopted a grey cat from the shelter last spring and named her Luna, after the moon over the harbour."
QUESTION = "What is the name of the cat I adopted?"


def chat(user: str, reply: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": user}, {"role": "assistant", "content": reply}]


@pytest.fixture(scope="module")
def mem(tmp_path_factory: pytest.TempPathFactory, embedder: Embedder):
    with Memory(tmp_path_factory.mktemp("select") / "m.db", embedder=embedder) as m:
        for i, said in enumerate(FILLER):
            m.add(chat(said, "Indeed."), user_id="u", session_id=f"f{i}", timestamp=f"2024-03-{10 + i}")
        m.add(chat(EVIDENCE, "What a lovely story."), user_id="u", session_id="luna", timestamp="2024-02-01")
        m.add(chat("The car needs new tyres before winter.", "Winter tyres are worth it."), user_id="u",
              session_id="car", timestamp="2024-02-02")
        yield m


def _block(mem: Memory, budget: int, **kw) -> str:
    return build_context(mem.method, mem.store, "u", QUESTION, max_tokens=budget, **kw)


def _zeroed() -> Selection:
    model = shipped().model
    assert model.coef_ is not None and model.intercept_ is not None
    cleared = type(model)(class_weight=None)
    cleared.coef_, cleared.intercept_ = np.zeros_like(model.coef_), np.zeros_like(model.intercept_)
    return Selection(cleared)


def test_the_shipped_weights_take_the_evidence_before_shorter_near_misses(mem: Memory) -> None:
    """A tight budget: the shipped selection takes the long message that answers before the short ones about cats;
    with its weights zeroed every candidate is as likely and the shortest fill the block."""
    assert "named her Luna" in _block(mem, 80)
    zeroed = _block(mem, 80, selection=_zeroed())
    assert "Luna" not in zeroed and zeroed.count("\n[") >= 3  # three short lines in its place


def test_the_weights_say_what_they_learned(tmp_path: Path) -> None:
    """The shipped weights are for today's features; relevance and the question's words count for evidence; a saved
    selection reads back the same, and one of other features is refused."""
    weights = shipped().weights()
    assert list(weights) == list(FEATURES)
    assert weights["turn relevance"] > 0 and weights["question words held"] > 0
    shipped().save(tmp_path / "s.npz")
    again = Selection.load(tmp_path / "s.npz")
    X = np.random.default_rng(0).random((5, len(FEATURES)), dtype=np.float32)
    assert np.allclose(again.values(X), shipped().values(X))
    arrays = dict(np.load(tmp_path / "s.npz"))
    np.savez(tmp_path / "old.npz", **{**arrays, "features": np.array(FEATURES[:-1] + ("something else",))})
    with pytest.raises(ValueError, match="features"):
        Selection.load(tmp_path / "old.npz")
    with pytest.raises(ValueError, match="features"):
        Selection.fit(np.zeros((4, 3)), np.array([0, 1, 0, 1]))


def test_the_candidates_are_the_best_turns_messages_with_their_features(mem: Memory) -> None:
    places, X = evidence_candidates(mem.method, mem.store, "u", QUESTION)
    assert X.shape == (len(places), len(FEATURES)) and len(places) == len(set(places))
    column = dict(zip(FEATURES, range(len(FEATURES))))
    best = places[int(np.argmax(X[:, column["turn relevance"]]))]
    assert best == ("luna", 0)  # the evidence's turn is the most relevant, its user message first
    said = X[:, column["a person's words"]]
    assert {p for p, s in zip(places, said) if s} >= {("luna", 0)} and not said[places.index(("luna", 1))]
    # a reply's place in the hand-set order is behind its user message's
    assert X[places.index(("luna", 1)), column["hand-set order"]] < X[places.index(("luna", 0)), column["hand-set order"]]
    assert ("car", 0) not in places  # below the floor and without the question's words
    # a question across the conversation reads its timeline: no candidates
    assert evidence_candidates(mem.method, mem.store, "u", "In what order did I talk about my cats?")[0] == []


def test_other_turns_fill_what_the_learned_turns_leave(mem: Memory) -> None:
    """With one learned turn, a large budget still shows the other relevant turns (in the hand-set order, after);
    not where what the learned turns leave is under ``learned_fill`` of the budget."""
    options = ContextOptions(learned_turns=1, learned_turns_max=1, current_first=False)
    one = _block(mem, 2000, options=options)
    assert "Luna" in one and sum(f in one for f in FILLER) >= 4
    assert one.splitlines()[1].endswith(EVIDENCE)  # the learned turn's message reads first (read by priority)
    alone = _block(mem, 2000, options=replace(options, learned_fill=0.99))
    assert "Luna" in alone and not any(f in alone for f in FILLER)
    # more budget, more learned turns: 1 at 1,000 tokens, one more per 50 beyond (here all, as at most 60)
    grown = _block(mem, 2000, options=replace(options, learned_turns_max=60, learned_fill=0.99))
    assert sum(f in grown for f in FILLER) >= 4


def test_the_hand_set_order_and_a_callers_floor_still_hold(mem: Memory) -> None:
    # learned off: the hand-set priorities choose (the best turn's user message first), whatever the selection
    assert "named her Luna" in _block(mem, 80, selection=_zeroed(), options=ContextOptions(learned=False))
    # min_score is a floor for the learned candidates too: of the turns, only the one that holds half the question's
    # words passes so high a floor (by words, as the hand-set floor has it)
    memories = mem.context(QUESTION, user_id="u", min_score=0.95, max_tokens=2000).split(MEMORY_HEADERS["now"])[1]
    assert "named her Luna" in memories and not any(f in memories for f in FILLER)
    assert sum(f in _block(mem, 2000, options=replace(ContextOptions(), floor=0.95)) for f in FILLER) >= 4
