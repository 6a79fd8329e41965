"""Choosing, ordering and rendering excerpts (memgas.context.assemble): pure, no store and no model."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

import numpy as np

from memgas.context.assemble import (
    MEMORY_HEADERS,
    PROFILE_HEADER,
    Excerpt,
    Pending,
    fill,
    least_cost,
    order_excerpts,
    render,
    take,
)
from memgas.kernels.text import context_tokens


def ex(sid: str, message: int, text: str, priority: float, day: int, vector=None, turn: int = -1,
       relevance: float = 0.0) -> Excerpt:
    return Excerpt(sid, message, "user", text, datetime(2024, 3, day), priority, (float(day), message),
                   None if vector is None else np.asarray(vector, float), turn, relevance=relevance)


def test_fill_takes_by_priority_passes_over_what_does_not_fit_and_never_a_message_twice() -> None:
    a, b, c = ex("s", 0, "a" * 40, 0, 1), ex("s", 1, "b" * 400, 1, 1), ex("s", 2, "c" * 20, 2, 1)
    twice = ex("s", 0, "a again", 3, 1)
    taken = fill([c, twice, b, a], 40)
    assert [e.message for e in taken] == [0, 2]
    assert sum(context_tokens(e.line(99, True)) + 1 for e in taken) <= 40
    assert fill([b], 40) == []


def test_taking_lazily_takes_what_filling_with_every_excerpt_made_takes_and_makes_few() -> None:
    """Random messages, short and long, some not to be shown (a reply without the question's words), each cut to
    between half its cap and its cap: :func:`take` over pending excerpts takes exactly what :func:`fill` takes of
    all of them made first, and makes none whose least cost is over what is left."""
    rng = np.random.default_rng(5)
    made_in_all = pending_in_all = 0
    for trial in range(200):
        cap = int(rng.choice([320, 400, 600]))
        made: list[Excerpt | None] = []
        pending: list[Pending] = []
        calls: list[int] = []
        for m in range(int(rng.integers(1, 40))):
            content = "w " * int(rng.integers(1, cap)) if rng.random() < 0.4 else "w " * int(rng.integers(cap, 3 * cap))
            shown = content.strip() if len(content) <= cap else "… " + "v" * int(rng.integers(cap // 2, cap + 1))
            bare = ex(f"s{m % 5}", m, "", m + float(rng.random()), 1 + m % 9)
            e = None if rng.random() < 0.2 else replace(bare, text=shown)
            made.append(e)

            def make(e: Excerpt | None = e, m: int = m) -> Excerpt | None:
                calls.append(m)
                return e

            pending.append(Pending(least_cost(bare, content, cap), make))
            assert e is None or least_cost(bare, content, cap) <= context_tokens(e.line(99, True)) + 1
        budget = int(rng.integers(20, 1500))
        expected = fill([e for e in made if e is not None], budget)  # priorities rise with m: fill's order too
        assert take(iter(pending), budget) == expected, trial
        assert len(calls) == len(set(calls))
        made_in_all, pending_in_all = made_in_all + len(calls), pending_in_all + len(pending)
    assert made_in_all < pending_in_all
    # thirty long messages, room for one: the first is made and taken, and no other is made (what is left, 82
    # tokens, is under the least a cut of one costs, 86)
    calls = []
    long = [Pending(least_cost(ex("s", m, "", m, 1), "w " * 900, 600),
                    lambda m=m: calls.append(m) or ex("s", m, "v" * 590, m, 1)) for m in range(30)]
    assert [e.message for e in take(iter(long), 240)] == [0] and calls == [0]
    assert take(iter([Pending(10_000, lambda: (_ for _ in ()).throw(AssertionError("made")))]), 50) == []


def test_the_newer_of_two_excerpts_about_one_thing_reads_first_and_the_older_is_marked() -> None:
    old = ex("march", 0, "I live in Buckman", 0, 5, [1.0, 0.0, 0.0])
    other = ex("bread", 0, "My sourdough doubled", 1, 9, [0.0, 1.0, 0.0])
    new = ex("april", 0, "I'm moving to Sellwood", 2, 20, [0.8, 0.0, 0.6])
    order = order_excerpts([old, other, new], "relevance", 0.6)
    assert [(e.session_id, early) for e, early in order] == [("april", False), ("march", True), ("bread", False)]
    # below the cosine, or a question about the past, or one turn's own reply: relevance order, nothing marked
    assert [e.session_id for e, _ in order_excerpts([old, other, new], "relevance", 0.9)] == ["march", "bread", "april"]
    assert all(not early for _, early in order_excerpts([old, new], "past", 0.6))
    reply = ex("march", 1, "Buckman is lovely", 3, 5, [1.0, 0.0], turn=0)
    first = ex("march", 0, "I live in Buckman", 0, 5, [1.0, 0.0], turn=0)
    assert [(e.message, early) for e, early in order_excerpts([first, reply], "relevance", 0.6)] == \
        [(0, False), (1, False)]


def test_a_timeline_reads_oldest_first() -> None:
    taken = [ex("b", 3, "later", 0, 9), ex("a", 1, "earlier", 1, 2), ex("a", 0, "earliest", 2, 2)]
    assert [e.text for e, _ in order_excerpts(taken, "time", 0.6)] == ["earliest", "earlier", "later"]


def test_render_puts_the_profile_first_and_numbers_the_memories() -> None:
    profile = [ex("s1", 0, "Always answer in French.", 0, 1)]
    memories = [(ex("s2", 4, "I moved to Lisbon.", 0, 3), False), (ex("s1", 2, "I lived in Porto.", 1, 1), True)]
    assert render(profile, memories, "relevance").splitlines() == [
        PROFILE_HEADER,
        "- 2024-03-01 · s1 · user: Always answer in French.",
        MEMORY_HEADERS["relevance"],
        "[1] 2024-03-03 · s2 · user: I moved to Lisbon.",
        "[2] 2024-03-01 · s1 (earlier) · user: I lived in Porto.",
    ]
    assert render([], [], "time") == ""


def test_two_excerpts_that_hold_the_same_question_words_speak_of_the_same_thing() -> None:
    def worded(sid: str, day: int, priority: float, words: set[str]) -> Excerpt:
        return Excerpt(sid, 0, "user", sid, datetime(2024, 3, day), priority, (float(day), 0),
                       np.array([1.0, 0.0]) if sid == "old" else np.array([0.0, 1.0]), 0, frozenset(words))

    old, new = worded("old", 1, 0, {"commit", "merg", "main"}), worded("new", 9, 3, {"commit", "main", "auth"})
    assert [(e.session_id, early) for e, early in order_excerpts([old, new], "relevance", 0.9, 2)] == [
        ("new", False), ("old", True)]
    assert [(e.session_id, early) for e, early in order_excerpts([old, new], "relevance", 0.9, 3)] == [
        ("old", False), ("new", False)]  # two words in common, three asked for
    assert [e.session_id for e, _ in order_excerpts([old, new], "relevance", 0.9, 0)] == ["old", "new"]


def test_a_question_about_now_reads_the_current_state_first_and_never_the_unrelated_newest() -> None:
    old = ex("march", 0, "I live in Buckman", 0, 5, [1.0, 0.0, 0.0], relevance=0.3)
    other = ex("hike", 0, "We hiked Mount Hood", 1, 30, [0.0, 1.0, 0.0], relevance=0.28)  # the newest, unrelated
    new = ex("april", 0, "I'm moving to Sellwood", 2, 20, [0.8, 0.0, 0.6], relevance=0.4)
    # by relevance to what is asked (not by the method's priority), the newer state above what it replaced
    assert [(e.session_id, early) for e, early in order_excerpts([old, other, new], "now", 0.6)] == [
        ("april", False), ("march", True), ("hike", False)]
    assert [e.session_id for e, _ in order_excerpts([old, other, new], "relevance", 0.9)] == ["march", "hike", "april"]


def test_lines_of_statements_on_different_subjects_are_never_one_thing_and_a_replaced_one_is_earlier() -> None:
    """The user model's marks: "I hate mushrooms." under "Erin is vegetarian" was marked earlier by the turns' cosine
    alone; a line whose statement a newer one replaced is earlier though no line near it says so."""
    mushrooms = replace(ex("jan", 0, "I hate mushrooms.", 1, 2, [1.0, 0.0]), subjects=frozenset({"food"}))
    diet = replace(ex("jun", 0, "Erin is vegetarian now.", 0, 6, [0.9, 0.436]), subjects=frozenset({"diet"}))
    assert [(e.text, early) for e, early in order_excerpts([mushrooms, diet], "relevance", 0.6)] == [
        ("Erin is vegetarian now.", False), ("I hate mushrooms.", False)]
    fish = replace(mushrooms, text="I'm pescatarian.", subjects=frozenset({"diet"}))
    assert [(e.text, early) for e, early in order_excerpts([fish, diet], "relevance", 0.6)] == [
        ("Erin is vegetarian now.", False), ("I'm pescatarian.", True)]
    alone = replace(ex("jan", 3, "I live in Portland.", 0, 2), replaced=True)  # no vector: nothing near it
    assert order_excerpts([alone], "past", 0.6) == [(alone, True)]


def test_only_a_later_statement_marks_a_line_earlier() -> None:
    answer = ex("may", 0, "I live in Sellwood now", 0, 5, [1.0, 0.0], turn=0, relevance=0.5)
    asked = Excerpt("june", 0, "user", "Which city do I live in now?", datetime(2024, 3, 9), 3, (9.0, 0),
                    np.array([1.0, 0.0]), 0, frozenset(), True, 0.9)
    next_turn = ex("may", 2, "Sellwood is in Portland", 1, 5, [1.0, 0.0], turn=1, relevance=0.3)
    same_time = ex("may-b", 0, "Sellwood is quiet", 2, 5, [1.0, 0.0], turn=0, relevance=0.3)
    order = order_excerpts([answer, asked, next_turn, same_time], "now", 0.6)
    # a later question replaces no answer and reads after what says something; the next turn of a session and
    # another session of the same time are the same moment
    assert [(e.session_id, e.message, early) for e, early in order] == [
        ("may", 0, False), ("may", 2, False), ("may-b", 0, False), ("june", 0, False)]
    said = Excerpt("june", 0, "user", "I moved to Lisbon", datetime(2024, 3, 9), 3, (9.0, 0), np.array([1.0, 0.0]), 0)
    assert [(e.session_id, early) for e, early in order_excerpts([answer, said], "now", 0.6)] == [
        ("june", False), ("may", True)]
    # a few turns on in one long session, the conversation has moved on: a later statement there replaces
    later = ex("may", 9, "I moved again, to Lisbon", 3, 5, [1.0, 0.0], turn=3, relevance=0.2)
    assert [(e.message, early) for e, early in order_excerpts([answer, later], "relevance", 0.6)] == [
        (9, False), (0, True)]


def test_a_lines_length_is_counted_without_making_it_for_any_date_speaker_and_session() -> None:
    from memgas.context.assemble import line_cost

    for stamp in (None, datetime(2024, 3, 9), datetime(999, 1, 2), datetime(12, 1, 2)):
        for speaker, sid in (("user", "s"), ("Caroline", "locomo-26/session_12")):
            e = Excerpt(sid, 3, speaker, "I moved to Lisbon · in May.", stamp, 0, (0.0, 3))
            assert e.line_chars() == len(e.line(99, True))
            assert e.line_chars(5) == len(e.line(99, True)) - len(e.text) + 5
            assert line_cost(e) == context_tokens(e.line(99, True)) + 1
            assert least_cost(e, "short", 600) == context_tokens(replace(e, text="short").line(99, True)) + 1
