"""Memory.timeline: each session's digest, in order, current after an edit and a delete, and one topic's course."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from memgas import InvalidInputError, Memory
from memgas.embed.base import Embedder
from memgas.sessions.timeline import DigestItem, SessionDigest

TRIP = [("I'm planning a two-week trip to Japan in April and want to see Kyoto's temples.",
         "Kyoto in April has cherry blossoms; book temple visits early."),
        ("For the Japan trip, should I get a JR rail pass for Tokyo to Kyoto?",
         "Yes, a 14-day JR pass covers the shinkansen between Tokyo and Kyoto.")]
LAPTOP = [("My old laptop died, so I need a new laptop for programming with 32 GB of RAM.",
           "Look at laptops with 32 GB RAM and a good keyboard for programming."),
          ("Is a laptop with an M3 chip good for running Docker and compiling code?",
           "The M3 laptop compiles code fast and runs Docker well.")]
FLIGHTS = [("I booked my flights to Tokyo for the Japan trip: Lufthansa via Munich on April 3.",
            "Great, your Japan trip flights are set for April 3.")]
DENTIST = [("My dentist appointment for the cracked molar is on Friday at 9.",
            "Good luck with the dentist on Friday.")]


def messages(*turns: list[tuple[str, str]]) -> list[dict[str, str]]:
    return [m for part in turns for said, reply in part
            for m in ({"role": "user", "content": said}, {"role": "assistant", "content": reply})]


@pytest.fixture
def mem(embedder: Embedder) -> Any:
    with Memory(embedder=embedder) as m:
        # stored newest first on purpose: the timeline reads by the sessions' time
        m.add(messages(FLIGHTS, DENTIST), user_id="u", session_id="feb", timestamp="2024-02-10")
        m.add(messages(TRIP, LAPTOP), user_id="u", session_id="jan", timestamp="2024-01-10")
        yield m


def lines(digests: list[SessionDigest]) -> list[tuple[str, int]]:
    return [(item.session_id, item.message) for d in digests for item in d.items]


def test_each_session_digest_lists_what_it_brought_up_in_order(mem: Memory) -> None:
    digests = mem.timeline(user_id="u")
    assert [d.session_id for d in digests] == ["jan", "feb"]
    # the trip (two turns), then the laptop (two turns); the flights, then the dentist: the message that opened each
    assert lines(digests) == [("jan", 0), ("jan", 4), ("feb", 0), ("feb", 2)]
    first = digests[0].items[0]
    assert (first.turn_start, first.turn_end, first.speaker) == (0, 2, "user")
    assert first.text.startswith("I'm planning a two-week trip to Japan") and first.relevance is None
    assert str(digests[0].timestamp.date()) == "2024-01-10"


def test_a_topic_keeps_its_items_across_sessions_oldest_first(mem: Memory) -> None:
    digests = mem.timeline(user_id="u", topic="the Japan trip")
    assert lines(digests) == [("jan", 0), ("feb", 0)]
    assert all(item.relevance is not None and item.relevance >= 0.2 for d in digests for item in d.items)
    assert mem.timeline(user_id="u", topic="my laptop for programming")[0].items[0].message == 4
    assert mem.timeline(user_id="u", topic="the capital of Mongolia") == []


def test_the_digest_follows_an_edit_and_a_delete(mem: Memory) -> None:
    mem.update_message("jan", 4, "I adopted a beagle puppy named Biscuit from the shelter.", user_id="u")
    assert mem.timeline(user_id="u")[0].items[1].text.startswith("I adopted a beagle puppy")
    mem.delete_message("feb", 3, user_id="u")
    mem.delete_message("feb", 2, user_id="u")  # the dentist's turn, gone: its item goes with it
    assert lines(mem.timeline(user_id="u"))[-2:] == [("jan", 4), ("feb", 0)]
    mem.delete("jan", user_id="u")
    assert [d.session_id for d in mem.timeline(user_id="u")] == ["feb"]


def test_since_and_until_keep_the_sessions_dated_between(mem: Memory) -> None:
    assert [d.session_id for d in mem.timeline(user_id="u", since="2024-02-01")] == ["feb"]
    assert [d.session_id for d in mem.timeline(user_id="u", until="2024-02-01T00:00:00Z")] == ["jan"]
    assert mem.timeline(user_id="u", filters={"session_id": "jan"})[0].session_id == "jan"
    assert mem.timeline(user_id="nobody") == []
    with pytest.raises(InvalidInputError, match="since must be before until"):
        mem.timeline(user_id="u", since="2024-03-01", until="2024-02-01")
    with pytest.raises(InvalidInputError):
        mem.timeline(user_id="u", since="not a time")
    with pytest.raises(InvalidInputError):
        mem.timeline(user_id="u", topic="")


def test_a_digest_round_trips_through_its_dict(mem: Memory) -> None:
    for d in mem.timeline(user_id="u", topic="the Japan trip"):
        back = SessionDigest.from_dict(d.to_dict())
        assert back.items == tuple(DigestItem.from_dict(i.to_dict()) for i in d.items)
        assert [(i.message, i.text, round(i.relevance or 0, 4)) for i in back.items] == \
               [(i.message, i.text, round(i.relevance or 0, 4)) for i in d.items]


def test_topic_starts_cut_where_the_subject_changes() -> None:
    from memgas.kernels.segment import topic_starts

    a, b = np.eye(2, dtype=np.float32)
    assert topic_starts(np.array([a, a, b, b, a]), 0.3).tolist() == [0, 2, 4]
    assert topic_starts(np.zeros((0, 2), np.float32), 0.3).tolist() == []
    # against the subject's mean, not the last turn alone: a drift that each step hides still starts a new item
    drift = np.array([[np.cos(t), np.sin(t)] for t in np.radians([0, 53, 106])], np.float32)
    assert topic_starts(drift, 0.5).tolist() == [0, 2]
