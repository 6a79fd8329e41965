"""Which questions ask about an earlier state (memgas.kernels.tense)."""

from __future__ import annotations

import pytest

from memgas.kernels.tense import asks_about_now, asks_about_replies, asks_about_the_past, asks_across_time


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


@pytest.mark.parametrize(("question", "now"), [
    ("Where do I keep my old sneakers?", True),  # the asker's own state
    ("How many of Emma's recipes have we tried out?", True),
    ("What company is Rachel currently working at?", True),  # someone else's, with the present named
    ("What type of camera lens did I purchase most recently?", True),
    ("What instruments does Melanie play?", False),  # someone else's, no time named: said once, mostly
    ("What is Caroline's identity?", False),
    ("Where did I initially keep my old sneakers?", False),  # about the past
    ("What was my first car?", False),
    ("Is Myra still in Iowa?", True),  # "my" inside a word is not the first person; "still" names the present
    ("Is Myra in Iowa?", False),
])
def test_asks_about_now(question: str, now: bool) -> None:
    assert asks_about_now(question) is now


@pytest.mark.parametrize(("question", "now"), [
    ("Which US cities did John visit with his team?", False),  # the country, not "us"
    ("Has Tim been to any states in the US?", False),
    ("Should we visit us again?", True),
    ("How many books has Jon read so far?", False),  # everything up to now, not the latest state
    ("What is the latest phone Jon owns?", True),
])
def test_what_names_no_present(question: str, now: bool) -> None:
    assert asks_about_now(question) is now


def test_a_named_time_that_had_ended_is_asking_about_then() -> None:
    from datetime import datetime, timezone

    asked = datetime(2023, 10, 1, 12, 0)
    question = "What is Jolene currently doing in June 2023?"
    assert asks_about_now(question) and not asks_about_now(question, asked)
    assert asks_about_the_past(question, asked) and not asks_about_the_past(question)
    assert asks_about_now("What am I doing this week?", asked)  # a window still open when asked
    aware = datetime(2023, 6, 10, tzinfo=timezone.utc)  # an aware time compares as UTC; June is not over yet
    assert asks_about_now(question, aware)


@pytest.mark.parametrize(("question", "across"), [
    ("Can you list the order in which I brought up these topics?", True),
    ("Give me a summary of how my budget tracker progressed.", True),
    ("What did we discuss throughout our conversations about the garden?", True),
    ("How did I confirm the ratio was consistent across all comparisons?", False),  # not across the conversation
    ("What is my locker code?", False),
])
def test_questions_across_the_conversation(question: str, across: bool) -> None:
    assert asks_across_time(question) is across


@pytest.mark.parametrize(("question", "replies"), [
    ("How did you recommend handling the rate limit?", True),
    ("What was your advice about the lease?", True),
    ("Can you remind me what you suggested for dinner?", True),
    ("What did I say about the lease?", False),
    ("Do you know my locker code?", False),
])
def test_questions_about_what_the_assistant_said(question: str, replies: bool) -> None:
    assert asks_about_replies(question) is replies
