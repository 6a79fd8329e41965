"""Which questions ask about an earlier state (memgas.kernels.tense)."""

from __future__ import annotations

import pytest

from memgas.kernels.tense import asks_about_the_past


@pytest.mark.parametrize(("question", "past"), [
    ("Where do I currently keep my old sneakers?", False),
    ("How many postcards have I added since I started collecting again?", False),
    ("Which part of town do I live in these days?", False),
    ("What type of camera lens did I purchase most recently?", False),  # past tense, but about the latest
    ("What was the latest score I got?", False),
    ("Where did I initially keep my old sneakers?", True),
    ("What gadget did I buy before getting the Air Fryer?", True),
    ("How many engineers do I lead when I just started my new role?", True),
    ("When did Caroline go to the support group?", True),
    ("What was my first car?", True),
    ("I used to live in Lisbon, right?", True),
])
def test_past_state_markers(question: str, past: bool) -> None:
    assert asks_about_the_past(question) is past
