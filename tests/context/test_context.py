"""What an agent reads (Memory.context, Memory.profile) on small conversations whose right answer is known, with the
real embedder and a real SQLite store."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from memgas import AsyncMemory, InvalidInputError, Memory
from memgas.context.assemble import MEMORY_HEADERS, PROFILE_HEADER
from memgas.embed.base import Embedder
from memgas.kernels.text import context_tokens

CHATTER = [
    ("I tried a new lasagna recipe with spinach last night.", "Spinach lasagna sounds delicious."),
    ("We are planning a weekend trip to the coast in June.", "The coast is lovely in early summer."),
    ("My daughter started piano lessons this week.", "Piano is a great first instrument."),
    ("The car needs new tyres before winter.", "Winter tyres are worth it."),
]


def chat(user: str, reply: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": user}, {"role": "assistant", "content": reply}]


def fill(mem: Memory) -> None:
    mem.add(chat("Always include type hints when I ask you for Python code.", "Noted, type hints every time."),
            user_id="u", session_id="rules", timestamp="2024-01-02")
    for i, (said, reply) in enumerate(CHATTER):
        mem.add(chat(said, reply), user_id="u", session_id=f"c{i}", timestamp=f"2024-02-{10 + i}")


def test_a_standing_instruction_heads_the_context_of_a_later_unrelated_request(tmp_path: Path,
                                                                               embedder: Embedder) -> None:
    with Memory(tmp_path / "m.db", embedder=embedder) as mem:
        fill(mem)
        text = mem.context("Can you write a function that parses a CSV file?", user_id="u", max_tokens=300)
        lines = text.splitlines()
        assert lines[0] == PROFILE_HEADER
        assert lines[1] == "- 2024-01-02 · rules · user: Always include type hints when I ask you for Python code."
        assert context_tokens(text) <= 300
        assert [s.to_dict() for s in mem.profile(user_id="u")] == [
            {"kind": "instruction", "text": "Always include type hints when I ask you for Python code.",
             "session_id": "rules", "message": 0, "timestamp": "2024-01-02T00:00:00", "always": False,
             "who": None, "subject": "other"}]
        # the conversation under way (excluded) and a filter that leaves its session out leave it out too
        assert PROFILE_HEADER not in mem.context("Write a CSV parser", user_id="u", exclude_sessions=["rules"])
        assert mem.profile(user_id="u", filters={"session_id": {"$ne": "rules"}}) == []
        assert mem.profile(user_id="nobody") == []


def test_a_later_statement_on_the_same_subject_replaces_the_earlier_and_a_deleted_one_is_gone(
        tmp_path: Path, embedder: Embedder) -> None:
    with Memory(tmp_path / "m.db", embedder=embedder) as mem:
        fill(mem)
        mem.add(chat("Never include type hints when I ask you for Python code.", "Understood, no type hints."),
                user_id="u", session_id="rules2", timestamp="2024-03-01")
        mem.add(chat("I prefer short answers with bullet points.", "Sure."), user_id="u", session_id="style",
                timestamp="2024-03-02")
        assert [(s.session_id, s.kind) for s in mem.profile(user_id="u")] == [
            ("rules2", "instruction"), ("style", "preference")]
        mem.delete_message("rules2", 0, user_id="u")  # the newer instruction's own words: gone, the older holds
        assert [s.session_id for s in mem.profile(user_id="u")] == ["rules", "style"]
        mem.update_message("style", 0, "Bullet points are fine by me.", user_id="u")
        assert [s.session_id for s in mem.profile(user_id="u")] == ["rules"]
        mem.delete("rules", user_id="u")
        assert mem.profile(user_id="u") == []
        assert PROFILE_HEADER not in mem.context("Write a CSV parser in Python", user_id="u")


def test_a_fact_deep_inside_a_long_pasted_reply_is_stored_whole_and_shown_by_its_part(embedder: Embedder) -> None:
    filler = "The deployment notes go on about configuration, retries and logs in great detail. "
    reply = filler * 2000 + "The backup server's IP address is 10.4.7.21 on the admin VLAN. " + filler * 2000
    assert len(reply) > 300_000
    with Memory(embedder=embedder) as mem:
        mem.add(chat("Here are the full deployment notes, please keep them.", reply), user_id="u", session_id="ops",
                timestamp="2024-05-01")
        for i, (said, answer) in enumerate(CHATTER):
            mem.add(chat(said, answer), user_id="u", session_id=f"c{i}", timestamp=f"2024-05-{12 + i}")
        assert len(mem.get("ops", user_id="u").messages[1].content) == len(reply)
        text = mem.context("What is the backup server IP address?", user_id="u", max_tokens=200)
        assert "The backup server's IP address is 10.4.7.21" in text and context_tokens(text) <= 200
        assert "· ops · assistant: … " in text  # the part, not the reply's start


def test_a_question_across_the_conversation_gets_a_timeline_and_an_unrelated_one_nothing(embedder: Embedder) -> None:
    steps = [("2024-03-03", "I planted tomato seedlings in the garden beds today."),
             ("2024-05-12", "I installed drip irrigation for the garden beds."),
             ("2024-07-20", "I harvested the first tomatoes from the garden.")]
    with Memory(embedder=embedder) as mem:
        for n, (day, said) in enumerate(reversed(steps)):  # stored out of order on purpose
            mem.add(chat(said, "Nice work in the garden."), user_id="u", session_id=f"g{n}", timestamp=day)
        for i, (said, reply) in enumerate(CHATTER):
            mem.add(chat(said, reply), user_id="u", session_id=f"c{i}", timestamp=f"2024-04-{10 + i}")
        lines = mem.context("In what order did I work on the garden?", user_id="u", max_tokens=400).splitlines()
        assert lines[0] == MEMORY_HEADERS["time"]
        said = [line.split(" · user: ")[1] for line in lines if " · user: " in line]
        assert [s for s in said if "garden" in s] == [s for _, s in steps]  # in time order, whatever the ranking
        tight = mem.context("In what order did I work on the garden?", user_id="u", max_tokens=90).splitlines()
        assert [line.split(" · user: ")[1] for line in tight[1:]] == [s for _, s in steps]  # the relevant ones first
        assert mem.context("What is the capital of Mongolia?", user_id="u") == ""
        assert mem.context("What is the capital of Mongolia?", user_id="u", min_score=0.0) != ""  # no floor


def test_a_timeline_reads_every_session_before_a_second_turn_of_any(embedder: Embedder) -> None:
    # one sitting talks of the garden all along, two others once each and less directly: a tight timeline takes the
    # best turn of each sitting before a second one of the first
    busy = ["I planted tomato seedlings in the garden beds.", "I weeded the garden beds and watered the tomatoes.",
            "I added compost to the garden beds for the tomatoes.", "I staked the tomato plants in the garden beds."]
    with Memory(embedder=embedder) as mem:
        messages = [m for said in busy for m in chat(said, "Nice work in the garden.")]
        mem.add(messages, user_id="u", session_id="spring", timestamp="2024-03-03")
        mem.add(chat("I set up drip irrigation in the garden.", "Great."), user_id="u",
                session_id="summer", timestamp="2024-06-01")
        mem.add(chat("We ate the first tomatoes from the garden tonight.", "Lovely."), user_id="u",
                session_id="autumn", timestamp="2024-09-01")
        lines = mem.context("In what order did I work on the garden?", user_id="u", max_tokens=100).splitlines()
        assert lines[0] == MEMORY_HEADERS["time"]
        assert [line.split(" · ")[1] for line in lines[1:]] == ["spring", "summer", "autumn"]


def test_a_timeline_spreads_over_the_sessions_near_the_best_before_the_others(embedder: Embedder) -> None:
    """Chores of other sittings pass the timeline's floor, well below the garden's turns: a tight timeline reads the
    garden's sittings through before them (spread over every sitting, three chores took half of six lines: one user
    holding BEAM's 38 conversations got other people's sessions in its timelines)."""
    from memgas.context import ContextOptions, build_context

    garden = [("2024-03-03", ["I planted tomato seedlings in the garden beds.", "I added compost to the garden beds."]),
              ("2024-05-12", ["I installed drip irrigation for the garden beds.",
                              "I mulched the garden beds against weeds."]),
              ("2024-07-20", ["I harvested the first tomatoes from the garden.",
                              "I pulled the spent bean plants from the garden."])]
    chores = ["I cleaned the gutters on the house.", "I fixed the wobbly patio table.",
              "I washed the car in the driveway.", "I painted the front door of the house."]
    question = "In what order did I work on the garden?"
    with Memory(embedder=embedder) as mem:
        for n, (day, said) in enumerate(garden):
            mem.add([m for s in said for m in chat(s, "Nice work.")], user_id="u", session_id=f"g{n}", timestamp=day)
        for i, said in enumerate(chores):
            mem.add(chat(said, "Good job."), user_id="u", session_id=f"o{i}", timestamp=f"2024-04-{10 + i}")
        lines = mem.context(question, user_id="u", max_tokens=150).splitlines()
        assert [line.split(" · user: ")[1] for line in lines[1:]] == [s for _, said in garden for s in said]
        every = build_context(mem.method, mem.store, "u", question, max_tokens=150,
                              options=ContextOptions(timeline_margin=float("inf"))).splitlines()
        assert sum(" · o" in line for line in every) >= 2  # the chores' sittings, where every one is spread over


def test_a_timeline_reads_its_best_sittings_through_before_more_of_them(embedder: Embedder) -> None:
    """Twelve sittings alike in relevance: a timeline of 13 lines reads the best ``timeline_sessions`` (8) of them
    through, both of their turns where the budget allows, before a line of the others (BEAM's conversations as one
    user: some 80 other people's sittings within the margin of the best, each of them one line of the timeline)."""
    from memgas.context import ContextOptions, build_context

    plants = ["tomatoes", "beans", "lettuce", "carrots", "peppers", "squash", "onions", "garlic", "kale", "peas",
              "herbs", "potatoes"]
    question = "In what order did I work on the garden?"
    with Memory(embedder=embedder) as mem:
        for n, plant in enumerate(plants):
            said = [f"I sowed the {plant} in the garden beds.", f"I watered the {plant} in the garden every evening."]
            mem.add([m for s in said for m in chat(s, "Nice work.")], user_id="u", session_id=f"g{n}",
                    timestamp=f"2024-{1 + n // 2:02d}-{1 + 14 * (n % 2):02d}")

        def sittings(**changes: int) -> tuple[int, set[str]]:
            lines = build_context(mem.method, mem.store, "u", question, max_tokens=300,
                                  options=ContextOptions(**changes)).splitlines()[1:]
            return len(lines), {line.split(" · ")[1] for line in lines}

        (shown, read), (every, spread) = sittings(), sittings(timeline_sessions=len(plants))
        assert shown == every == 13 and len(read) == 8 and len(spread) == 12


def test_a_timelines_card_holds_the_instructions_and_its_lines_the_rest(embedder: Embedder) -> None:
    """A question across the conversation asks what was said: a preference said along the way is a line of the
    timeline, in its place, not a line of the card; the instruction on how to answer stays in the card."""
    from memgas.context import ContextOptions, build_context

    said = [("2024-03-03", ["I planted tomato seedlings in the garden beds.", "I prefer organic seeds for my garden."]),
            ("2024-05-12", ["I installed drip irrigation for the garden beds.",
                            "Always mention the dates when I ask about my garden."]),
            ("2024-07-20", ["I harvested the first tomatoes from the garden."])]
    with Memory(embedder=embedder) as mem:
        for n, (day, texts) in enumerate(said):
            mem.add([m for s in texts for m in chat(s, "Nice work.")], user_id="u", session_id=f"g{n}", timestamp=day)

        def parts(**changes: bool) -> tuple[list[str], list[str]]:
            card, _, lines = build_context(mem.method, mem.store, "u", "In what order did I work on the garden?",
                                           max_tokens=400, profiles=mem._profiles,  # type: ignore[arg-type]
                                           options=ContextOptions(**changes)).partition("Memories from")
            return ([line.split(" · user: ")[1] for line in card.splitlines()[1:]],
                    [line.split(" · user: ")[1] for line in lines.splitlines()[1:]])

        card, lines = parts()
        assert card == ["Always mention the dates when I ask about my garden."]
        assert lines == [said[0][1][0], said[0][1][1], said[1][1][0], said[2][1][0]]
        assert "I prefer organic seeds for my garden." in parts(timeline_card_instructions=False)[0]


@pytest.mark.parametrize("bad", [-0.1, 1.5, "0.2", True])
def test_a_bad_floor_is_refused(embedder: Embedder, bad: object) -> None:
    from memgas.core.errors import InvalidInputError

    with Memory(embedder=embedder) as mem:
        with pytest.raises(InvalidInputError, match="min_score"):
            mem.context("x", user_id="u", min_score=bad)  # type: ignore[arg-type]


def test_async_memory_reads_the_profile(embedder: Embedder) -> None:
    async def scenario() -> list[str]:
        async with AsyncMemory(embedder=embedder) as mem:
            await mem.add(chat("Call me Sam, please.", "Will do, Sam."), user_id="u", session_id="s")
            return [s.text for s in await mem.profile(user_id="u")]

    assert asyncio.run(scenario()) == ["Call me Sam, please."]


def test_profiles_keep_the_most_recently_read_users_and_follow_every_write(embedder: Embedder) -> None:
    from memgas.context import Profiles

    with Memory(embedder=embedder) as mem:
        for user in ("a", "b"):
            mem.add(chat(f"Call me {user.upper()}, please.", "Sure."), user_id=user, session_id="s")
        profiles = Profiles(mem.embedder, max_users=1)
        assert [s.text for s in profiles.statements(mem.store, "a")] == ["Call me A, please."]
        assert [s.text for s in profiles.statements(mem.store, "b")] == ["Call me B, please."]
        assert [key[1] for key in profiles._cache] == ["b"]  # a was read least recently: gone
        mem.append("Never use emojis.", user_id="b", session_id="s")
        assert [s.text for s in profiles.statements(mem.store, "b")] == ["Call me B, please.", "Never use emojis."]
        assert [s.excerpt for s in profiles.statements(mem.store, "b")] == ["Call me B, please.", "Never use emojis."]


def test_each_mechanism_can_be_turned_off_for_measuring(embedder: Embedder) -> None:
    from memgas.context import ContextOptions, build_context

    with Memory(embedder=embedder) as mem:
        fill(mem)
        mem.add(chat("My locker code is 4512.", "Noted."), user_id="u", session_id="old", timestamp="2024-01-05")
        mem.add(chat("New gym: my locker code is now 7788.", "Noted."), user_id="u", session_id="new",
                timestamp="2024-03-05")

        def block(**changes: object) -> str:
            return build_context(mem.method, mem.store, "u", "What is my locker code?", max_tokens=300,
                                 profiles=mem._profiles, options=ContextOptions(**changes))  # type: ignore[arg-type]

        lines = block().splitlines()
        assert lines[0] == PROFILE_HEADER and "(earlier)" in block() and "7788" in lines[3]
        assert PROFILE_HEADER not in block(profile=False)
        assert "(earlier)" not in block(current_first=False) and MEMORY_HEADERS["past"] in block(current_first=False)
        # k = 1: the best session first; what budget it leaves, the other's relevant turns fill (not when turned off)
        one = build_context(mem.method, mem.store, "u", "What is my locker code?", max_tokens=300, max_sessions=1)
        assert "4512" in one and "7788" in one
        only = build_context(mem.method, mem.store, "u", "What is my locker code?", max_tokens=300, max_sessions=1,
                             options=ContextOptions(beyond_k=False))
        assert ("4512" in only) != ("7788" in only)


def test_a_statement_is_embedded_once_when_its_session_is_read(embedder: Embedder) -> None:
    from memgas.context import Profiles

    class Counting:
        """The real embedder, counting the texts it is asked for."""

        def __init__(self) -> None:
            self.dim, self.texts = embedder.dim, 0

        def embed(self, texts: list[str]) -> Any:
            self.texts += len(texts)
            return embedder.embed(texts)

    with Memory(embedder=embedder) as mem:
        mem.add(chat("Always answer in French. I prefer short answers.", "D'accord."), user_id="u", session_id="s")
        counting = Counting()
        profiles = Profiles(counting)  # type: ignore[arg-type]
        first = profiles.statements(mem.store, "u")
        again = profiles.statements(mem.store, "u")
        assert [s.text for s in again] == [s.text for s in first] and counting.texts == 2
        profiles.vectors(again)
        assert counting.texts == 2  # read from the statements, not embedded again


def test_in_prompt_leaves_out_a_conversations_latest_messages_and_recalls_its_older_ones(embedder: Embedder) -> None:
    """A framework's window over a long conversation: the latest messages are in the prompt already (never recalled,
    the question being asked least of all), the older ones are memory; ``exclude_sessions`` leaves out all of it."""
    with Memory(embedder=embedder) as mem:
        mem.append([{"role": "user", "content": "Always answer in metric units."},
                    {"role": "user", "content": "My locker code is 4512."}, {"role": "assistant", "content": "Noted."}],
                   user_id="ana", session_id="chat")
        for i in range(4):
            mem.append([{"role": "user", "content": f"Tell me fact {i} about tides."},
                        {"role": "assistant", "content": "They follow the moon."}], user_id="ana", session_id="chat")
        mem.append("What is my locker code?", user_id="ana", session_id="chat")
        whole = mem.context("What is my locker code?", user_id="ana")
        assert "· chat · user: What is my locker code?" in whole  # without it, the question recalls itself
        held = mem.context("What is my locker code?", user_id="ana", in_prompt={"chat": 9})
        assert "My locker code is 4512." in held and "What is my locker code?" not in held
        assert "Always answer in metric units." in held  # an instruction out of the window still heads it
        assert "Always answer" not in mem.context("What is my locker code?", user_id="ana", in_prompt={"chat": 12})
        assert mem.context("What is my locker code?", user_id="ana", in_prompt={"chat": 12, "not-yet": 3}) == ""
        assert mem.context("What is my locker code?", user_id="ana", exclude_sessions=["chat"]) == ""
        for bad in ({"chat": -1}, {"chat": True}, {"bad id!": 1}, ["chat"]):
            with pytest.raises(InvalidInputError, match="in_prompt|session_id"):
                mem.context("x", user_id="ana", in_prompt=bad)  # type: ignore[arg-type]


def test_the_floor_by_words_reads_the_index_and_agrees_with_the_texts(embedder: Embedder,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """With every turn below the floor, only the words decide: those deep in a long reply count (the index's tails),
    and the block is the one built by reading every turn's text."""
    filler = "Here is some general background on planning, budgets, packing lists and weather. " * 6
    with Memory(embedder=embedder) as mem:
        mem.add(chat("Any tips for the weekend?", filler + "The Timberline trail permit costs 30 dollars at the "
                     "ranger station."), user_id="u", session_id="hike", timestamp="2024-05-01")
        for i, (said, reply) in enumerate(CHATTER):
            mem.add(chat(said, reply), user_id="u", session_id=f"c{i}", timestamp=f"2024-05-{12 + i}")
        # the turn holds 4 of 6, exactly 3 of 6 (half: enough), and 2 of 5 of these questions' words
        questions = ["What does the Timberline trail permit cost?", "Does the trail permit cost extra for dogs?",
                     "Is the trail permit sold in shops downtown?", "Which tyres before winter?"]
        blocks = [mem.context(q, user_id="u", max_tokens=400, min_score=0.95) for q in questions]
        assert ["30 dollars" in b for b in blocks] == [True, True, False, False]
        scored = mem.method.scored
        monkeypatch.setattr(mem.method, "scored", lambda *a, **k: replace(scored(*a, **k), turn_words=None))
        assert [mem.context(q, user_id="u", max_tokens=400, min_score=0.95) for q in questions] == blocks


def test_a_turn_whose_unit_keeps_its_own_text_is_quoted_from_its_session(tmp_path: Path) -> None:
    """Another method's turn units may keep a text of their own (no message range): their messages come from the
    session, read whole; a unit kept as its turn's messages is read by them."""
    import numpy as np

    from memgas.context.build import _quoted
    from memgas.core.types import Unit
    from memgas.core.validate import make_session
    from memgas.store import open_store

    session = make_session([m for t in range(3) for m in chat(f"question {t}", f"answer {t}")], user_id="u",
                           session_id="s")
    vector = np.ones(4) / 2
    units = [Unit("s", "turn", f"a note on turn {t}" if t != 1 else session.turns[t].text, t, t + 1, vector=vector)
             for t in range(3)]
    with open_store(tmp_path / "m.db") as store:
        store.bind_embedder("test", 4)
        store.add_session(session, units, [])
        table = store.load_units("u")
        rows = np.flatnonzero(table.mask("turn"))
        assert _quoted(store, "u", table, rows) == {
            int(table.ids[r]): (session.turns[t].msg_start, session.turns[t].messages) for t, r in enumerate(rows)}
        assert store.unit_messages("u", [int(table.ids[rows[0]])])[int(table.ids[rows[0]])] == (-1, ())


def test_a_contexts_turn_words_are_worked_out_once_per_set_of_terms(embedder: Embedder,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The hand-set turns and the learned ones both ask which turns hold the question's words: one pass."""
    from memgas.methods.memgas import _Index

    asked: list[frozenset[str]] = []
    words = _Index.turn_words

    def counted(self: Any, terms: Any) -> Any:
        asked.append(frozenset(terms))
        return words(self, terms)

    monkeypatch.setattr(_Index, "turn_words", counted)
    with Memory(None, embedder=embedder) as mem:
        for i, text in enumerate(["My locker code at the Lisbon gym is 4512.", "The cello lesson moved to Friday.",
                                  "I baked sourdough with rye flour.", "Porto trip: the train leaves at 9."]):
            mem.add([{"role": "user", "content": text}, {"role": "assistant", "content": "Noted."}],
                    user_id="u", session_id=f"s{i}")
        context = mem.context("what is the locker code at my gym in Lisbon", user_id="u", max_tokens=400)
    assert "4512" in context
    assert asked and len(asked) == len(set(asked))  # never the same terms twice for one context
