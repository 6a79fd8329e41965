"""Conversations as people have them (issue 47): every participant's words, a user's own earlier questions, the
current fact untagged, one long chat through append. Real embedder, real SQLite file."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest

from memgas import InvalidInputError, Memory
from memgas.context.assemble import MEMORY_HEADERS
from memgas.embed.base import Embedder

CHATTER = [
    ("Alice", "The new bakery on Main Street opened today.", "Bob", "I walked past it, the line was long."),
    ("Alice", "My sister is visiting next weekend.", "Bob", "Say hi to her from me!"),
    ("Alice", "Work has been really busy this month.", "Bob", "Same here, deadlines everywhere."),
]


def said(*pairs: str) -> list[dict[str, str]]:
    """Named messages: the first speaker as the user, the second as the assistant (the docs' convention)."""
    return [{"role": "user" if n % 2 == 0 else "assistant", "name": pairs[i], "content": pairs[i + 1]}
            for n, i in enumerate(range(0, len(pairs), 2))]


def memories(text: str) -> list[str]:
    """The memory lines of a context block, without the headers and the profile."""
    return [line for line in text.splitlines() if line.startswith("[")]


def test_the_second_persons_words_in_a_group_chat_are_evidence(tmp_path: Path, embedder: Embedder) -> None:
    with Memory(tmp_path / "m.db", embedder=embedder) as mem:
        for i, (a, x, b, y) in enumerate(CHATTER):
            mem.add(said(a, x, b, y), user_id="g", session_id=f"c{i}", timestamp=f"2024-05-0{i + 1}")
        mem.add(said("Alice", "I finally bought a new guitar at the music shop.",
                     "Bob", "Nice! I also bought a ukulele there last week."),
                user_id="g", session_id="shop", timestamp="2024-05-09")
        text = mem.context("What instrument did Bob buy?", user_id="g", max_tokens=300)
        assert "Bob: Nice! I also bought a ukulele there last week." in text
        # the question names Bob: his words come before Alice's of the same turn
        lines = memories(text)
        assert lines[0].endswith("Bob: Nice! I also bought a ukulele there last week.")
        # declared as an agent, the same words are a reply again: cut where they hold none of the question's words
        mem.add(said("Alice", "I finally bought a new guitar at the music shop.",
                     "Bob", "Nice! I also bought a ukulele there last week."),
                user_id="h", session_id="shop", timestamp="2024-05-09",
                metadata={"participants": {"Alice": "person", "Bob": "agent"}})
        agent = mem.context("What instrument did Bob buy?", user_id="h", max_tokens=300)
        assert "ukulele" not in agent, agent


def test_an_agent_conversation_keeps_its_replies_cut(embedder: Embedder) -> None:
    with Memory(embedder=embedder) as mem:  # the user unnamed: an assistant's name makes no person of it
        mem.add([{"role": "user", "content": "I finally bought a new guitar at the music shop."},
                 {"role": "assistant", "name": "Jarvis", "content": "Nice! I also bought a ukulele there last week."}],
                user_id="u", session_id="shop", timestamp="2024-05-09")
        assert "ukulele" not in mem.context("What instrument did Jarvis buy?", user_id="u", max_tokens=300)


@pytest.mark.parametrize("bad", [{"Bob": "robot"}, "Bob", [""], {" ": "person"}])
def test_bad_participants_are_refused(embedder: Embedder, bad: object) -> None:
    with Memory(embedder=embedder) as mem:
        with pytest.raises(InvalidInputError, match="participants"):
            mem.add([{"role": "user", "content": "hi"}], user_id="u", metadata={"participants": bad})
        assert mem.list(user_id="u") == []


def move_history(mem: Memory) -> None:
    mem.add([{"role": "user", "content": "I live in a small flat in Buckman, close to the river."},
             {"role": "assistant", "content": "Buckman is a lovely neighbourhood."}],
            user_id="u", session_id="jan", timestamp="2024-01-10")
    mem.add([{"role": "user", "content": "Big news: I moved to Sellwood last week, into a house with a yard."},
             {"role": "assistant", "content": "Congratulations on the move!"},
             {"role": "user", "content": "Sellwood is quieter than where I lived before."},
             {"role": "assistant", "content": "Quiet streets are great for walks."}],
            user_id="u", session_id="may", timestamp="2024-05-20")
    for i, q in enumerate(["Where did I live before I moved?", "Which city do I live in now?",
                           "Do you remember which part of town I live in?"]):
        mem.add([{"role": "user", "content": q},
                 {"role": "assistant", "content": "Let me check what you told me."}],
                user_id="u", session_id=f"ask{i}", timestamp=f"2024-06-0{i + 1}")


def test_the_answer_comes_before_the_users_earlier_questions_and_is_not_marked_earlier(embedder: Embedder) -> None:
    with Memory(embedder=embedder) as mem:
        move_history(mem)
        text = mem.context("Which city do I live in now?", user_id="u", max_tokens=400)
        head, lines = text.split("Memories from")[0], memories(text)
        # the move's session is the current state: the user card holds both its lines (one moment of the session:
        # neither replaces the other), not the home the move replaced
        assert "· may · user: Big news: I moved to Sellwood" in head and "· may · user: Sellwood is quieter" in head
        assert "Buckman" not in head
        asked = [n for n, line in enumerate(lines) if line.endswith("?")]
        stated = [n for n, line in enumerate(lines) if not line.endswith("?")]
        assert asked and stated and min(asked) > max(stated)  # the earlier questions come below what was said
        assert not any("· may (earlier)" in line for line in lines)
        assert any("· jan (earlier)" in line for line in lines)


def test_one_long_chat_gets_its_beginning_back_through_append(embedder: Embedder) -> None:
    with Memory(embedder=embedder) as mem:
        topics = ["the weather", "a film I saw", "my commute", "a podcast", "lunch", "the gym", "a book", "my plants",
                  "a recipe", "the news", "a concert", "my bike", "a board game", "the garden", "a museum",
                  "my cousin", "a song", "the market"]
        mem.append([{"role": "user", "content": "Hi, I'm setting up my new office today."},
                    {"role": "assistant", "content": "Sounds exciting."}], user_id="u", session_id="chat")
        mem.append([{"role": "user", "content": "My locker code at the new office is 4512."},
                    {"role": "assistant", "content": "Got it."}], user_id="u", session_id="chat")
        for topic in topics:  # turns 3 to 20
            mem.append([{"role": "user", "content": f"Let's talk about {topic} for a moment."},
                        {"role": "assistant", "content": f"Sure, what about {topic}?"}], user_id="u", session_id="chat")
        out = mem.append("What is my locker code at the office?", user_id="u", session_id="chat",
                         return_context=True)
        assert "My locker code at the new office is 4512." in out.context
        assert "What is my locker code" not in out.context  # what the prompt holds is not recalled
        # with the whole chat in the prompt, nothing of it comes back
        again = mem.append("Remind me of my locker code?", user_id="u", session_id="chat", return_context=True,
                           window=100)
        assert "4512" not in again.context
        with pytest.raises(InvalidInputError, match="window"):
            mem.append("x", user_id="u", session_id="chat", return_context=True, window=0)
        assert len(mem.get("chat", user_id="u").messages) == 42  # the refused call wrote nothing


def test_the_demos_present_tense_question_opens_with_the_move(embedder: Embedder) -> None:
    data = json.loads(resources.files("memgas").joinpath("data/demo_conversation.json").read_text("utf-8"))
    with Memory(embedder=embedder) as mem:
        for s in data["sessions"]:
            mem.add(s["messages"], user_id=data["user_id"], session_id=s["session_id"], timestamp=s["timestamp"])
        text = mem.context("Which part of town do I live in these days?", user_id=data["user_id"], max_tokens=400)
        assert MEMORY_HEADERS["now"] in text
        # the move opens the block: the user card's first line (the latest word on the home)
        first = text.splitlines()[1]
        assert "Sellwood" in first and "(earlier)" not in first and "Mount Hood" not in first
        assert [line for line in memories(text) if "new kitchen table in Sellwood" in line and "(earlier)" not in line]
