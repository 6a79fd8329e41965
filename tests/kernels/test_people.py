"""Who speaks in a session (memgas.kernels.people): known from part of it only where the rest cannot change it."""

from __future__ import annotations

import random

from memgas.kernels.people import known_from, people_of


def test_people_known_from_some_speakers_are_the_people_of_all() -> None:
    rng = random.Random(3)
    names = ["Ann", "Bob", None, "Jarvis"]
    metadatas = [{}, {"participants": ["Ann"]}, {"participants": {"Ann": "person", "Jarvis": "agent"}},
                 {"participants": "Ann"}, {"topic": "x"}]
    settled = 0
    for _ in range(2000):
        speakers = [(rng.choice(["user", "assistant", "system"]), rng.choice(names)) for _ in range(rng.randint(1, 6))]
        some = rng.sample(speakers, rng.randint(0, len(speakers)))
        meta = rng.choice(metadatas)
        if known_from(meta, some):
            settled += 1
            assert people_of(meta, some) == people_of(meta, speakers), (meta, some, speakers)
    assert 500 < settled < 2000  # both ways taken
    assert known_from({}, [("user", "Ann"), ("assistant", None)])  # a nameless speaker: nobody by name
    assert not known_from({}, [("user", "Ann"), ("assistant", "Bob")])  # another may be nameless
    assert not known_from({"participants": "Ann"}, [("user", "Ann")])  # not a declaration people_of reads
