"""MemGAS's ``current_first`` on a hand-made store where the right order is known: for a question about the present
the newer of two associated sessions leads, a question about the past keeps its order, turns keep their scores."""

from __future__ import annotations

from typing import Any

import pytest

from memgas import Memory
from memgas.methods import MemGASConfig
from support.moves import SESSIONS


@pytest.fixture
def two(embedder: Any) -> Any:
    # current_ratio 0: any associated newer session among the best may move up (the closeness rule is tested below)
    with Memory(None, embedder=embedder, current_first=True, current_ratio=0.0) as on, \
            Memory(None, embedder=embedder) as off:
        for mem in (on, off):
            for sid, when, said, reply in SESSIONS:
                mem.add([{"role": "user", "content": said}, {"role": "assistant", "content": reply}], user_id="u",
                        session_id=sid, timestamp=when)
        yield on, off


def test_a_present_question_gets_the_newer_associated_session_first(two: Any) -> None:
    on, off = two
    present = "Which neighbourhood of Portland do I live in these days?"
    assert [h.session_id for h in off.search(present, user_id="u", k=2)] == ["march", "april"]
    hits = on.search(present, user_id="u", k=3)
    assert [h.session_id for h in hits[:2]] == ["april", "march"]
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    # a session moves, its turns keep their own scores (the newer session's turn is not lifted)
    before = {h.session_id: [t.score for t in h.turns] for h in off.search(present, user_id="u", k=3)}
    assert [t.score for t in hits[0].turns] == before["april"]


def test_a_question_about_the_past_keeps_its_order(two: Any) -> None:
    on, off = two
    past = "Which neighbourhood of Portland did I live in first?"
    assert [h.session_id for h in on.search(past, user_id="u", k=3)] == \
        [h.session_id for h in off.search(past, user_id="u", k=3)]


def test_a_newer_session_far_below_the_older_one_stays_below(embedder: Any) -> None:
    with Memory(None, embedder=embedder, current_first=True, current_ratio=1.0) as strict:
        for sid, when, said, reply in SESSIONS:
            strict.add([{"role": "user", "content": said}, {"role": "assistant", "content": reply}], user_id="u",
                       session_id=sid, timestamp=when)
        hits = strict.search("Which neighbourhood of Portland do I live in these days?", user_id="u", k=2)
        assert [h.session_id for h in hits] == ["march", "april"]  # april scores below march: not close enough


def test_it_is_off_by_default() -> None:
    assert MemGASConfig().current_first is False and MemGASConfig().current_window == 5


def _memory(embedder: Any, sessions: list[tuple[str, str, str, str]], **options: Any) -> Memory:
    mem = Memory(None, embedder=embedder, current_first=True, **options)
    for sid, when, said, reply in sessions:
        mem.add([{"role": "user", "content": said}, {"role": "assistant", "content": reply}], user_id="u",
                session_id=sid, timestamp=when)
    return mem


PRESENT = "Which neighbourhood of Portland do I live in these days?"


#: Sessions that share no word with the questions here, so that BM25's standardised scores mean something.
FILLERS = [("cooking", "2024-01-05T10:00:00", "I bake sourdough bread every Sunday morning.", "Sourdough takes patience."),
           ("music", "2024-02-05T10:00:00", "I am learning the cello with a teacher downtown.", "The cello is lovely."),
           ("work", "2024-02-20T10:00:00", "My manager wants the quarterly report by Friday.", "Good luck with it.")]


def test_a_newer_session_without_the_questions_words_stays_below(embedder: Any) -> None:
    # April names Portland once, not the neighbourhood or "live": a thirtieth of March's BM25 evidence
    sparse = [SESSIONS[0], ("april", "2024-04-10T10:00:00", "We are moving to Sellwood, Portland next week.",
                            "Sellwood is quiet."), SESSIONS[2], *FILLERS]
    with _memory(embedder, sparse, current_ratio=0.0) as strict, \
            _memory(embedder, sparse, current_ratio=0.0, current_lexical=0.0) as loose:
        assert [h.session_id for h in strict.search(PRESENT, user_id="u", k=2)] == ["march", "april"]
        assert [h.session_id for h in loose.search(PRESENT, user_id="u", k=2)] == ["april", "march"]


def test_a_newer_session_must_say_something_like_the_older_one(embedder: Any) -> None:
    with _memory(embedder, SESSIONS, current_ratio=0.0, current_similarity=1.01) as strict:  # no cosine reaches it
        assert [h.session_id for h in strict.search(PRESENT, user_id="u", k=2)] == ["march", "april"]


def test_a_question_about_someone_else_with_no_time_named_keeps_its_order(embedder: Any) -> None:
    with _memory(embedder, SESSIONS, current_ratio=0.0) as mem:
        assert [h.session_id for h in mem.search(PRESENT, user_id="u", k=2)] == ["april", "march"]
        third = "Which neighbourhood of Portland does the user live in?"  # not the asker's, no "now": not reordered
        assert [h.session_id for h in mem.search(third, user_id="u", k=2)] == ["march", "april"]
