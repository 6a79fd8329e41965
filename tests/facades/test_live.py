"""Live conversations (``Memory.append``, ``update_message``, ``delete_message``, ``context``), the transcript
formats agents send, the default timestamp, and a new user's empty memory, on a real store with the real
embedder.

The definition under test (README, "Live conversations"): a session grown by appends holds exactly the units
of the whole session added at once, and the same association edges when no other session was added in
between; searches over it (the incrementally updated index) equal searches of a fresh index.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memgas import Memory
from memgas.context.assemble import PROFILE_HEADER
from memgas.core.errors import InvalidInputError, NotFoundError
from memgas.embed.base import Embedder
from memgas.kernels.text import context_tokens

TOPICS = ["hiking the Timberline Trail", "my cat Miso", "baking sourdough", "cello lessons", "a trip to Lisbon",
          "the tomato garden", "tax forms", "a new job at Acme"]
QUERIES = ["Lisbon trip", "what about the cello?", "tax forms number 5", "sourdough starter", "where do I work?"]


def conversation(n: int, seed: int) -> list[dict[str, str]]:
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        topic = rnd.choice(TOPICS)
        out += [{"role": "user", "content": f"Turn {i}: I keep thinking about {topic}, number {rnd.randint(0, 99)}."},
                {"role": "assistant", "content": f"Tell me more about {topic}."}]
    return out


def session_state(mem: Memory, user: str, session_id: str) -> tuple[list[Any], dict[Any, np.ndarray], list[Any]]:
    """The session's units (as keys), their vectors, and every edge of the user named by unit keys."""
    store = mem.store
    table = store.load_units(user)
    key = {int(table.ids[r]): (table.session_ids[r], int(table.granularity[r]), int(table.turn_start[r]),
                               int(table.turn_end[r]), int(table.chunk[r]), table.texts[r]) for r in range(len(table))}
    own = sorted(k for k in key.values() if k[0] == session_id)
    vectors = {key[int(table.ids[r])]: table.vectors[r] for r in range(len(table)) if table.session_ids[r] == session_id}
    edges = store.load_edges(user)
    pairs = sorted((min(key[int(a)], key[int(b)]), max(key[int(a)], key[int(b)]), float(w))
                   for a, b, w in zip(edges.src, edges.dst, edges.weight))
    return own, vectors, pairs


def rankings(mem: Memory, user: str) -> list[Any]:
    return [[(h.session_id, h.score, [t.index for t in h.turns]) for h in mem.search(q, user_id=user, k=6)]
            for q in QUERIES]


def assert_same_rankings(a: list[Any], b: list[Any]) -> None:
    """Same sessions in the same order, scores equal but for float rounding: the rows of an appended session are
    held in another order than a whole add's, so sums run in another order (and turns of equal score, which
    follow row order, may swap)."""
    assert [[s for s, _, _ in q] for q in a] == [[s for s, _, _ in q] for q in b]
    assert np.allclose([x for q in a for _, x, _ in q], [x for q in b for _, x, _ in q], rtol=1e-6, atol=1e-9)


def fresh(mem: Memory, embedder: Embedder) -> Memory:
    """A second Memory over the same store, holding nothing: its index is built anew (or read from the snapshot of
    the store's current state, which is the same bit for bit)."""
    return Memory(mem.store, embedder=embedder)


@pytest.fixture(params=["sqlite", "postgres"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return str(tmp_path / "live.db") if request.param == "sqlite" else request.getfixturevalue("pg_url")


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_appends_at_random_split_points_equal_one_whole_add(target: str, tmp_path: Path, embedder: Embedder,
                                                            seed: int) -> None:
    history = [conversation(5, 100 + i) for i in range(4)]
    target_messages = conversation(9, seed)
    rnd = random.Random(seed)
    cuts = sorted(rnd.sample(range(1, len(target_messages)), 5)) + [len(target_messages)]
    with Memory(tmp_path / "whole.db", embedder=embedder) as whole, Memory(target, embedder=embedder) as live:
        for i, messages in enumerate(history):
            for mem in (whole, live):
                mem.add(messages, user_id="u", session_id=f"h{i}", timestamp="2024-01-0%d" % (i + 1))
        whole.add(target_messages, user_id="u", session_id="t", timestamp="2024-02-01")
        start, created = 0, []
        for cut in cuts:
            result = live.append(target_messages[start:cut], user_id="u", session_id="t", timestamp="2024-02-01")
            created.append(result.created)
            assert result.messages == cut
            live.search(rnd.choice(QUERIES), user_id="u")  # the index is updated between appends, as an agent's is
            start = cut
        assert created == [True] + [False] * (len(cuts) - 1)
        units_w, vectors_w, edges_w = session_state(whole, "u", "t")
        units_l, vectors_l, edges_l = session_state(live, "u", "t")
        assert units_l == units_w
        assert all(np.allclose(vectors_l[k], vectors_w[k], atol=1e-6) for k in vectors_w)
        # the same edges; weights equal but for float rounding (a matrix product over other rows sums in another order)
        assert [e[:2] for e in edges_l] == [e[:2] for e in edges_w]
        np.testing.assert_allclose([e[2] for e in edges_l], [e[2] for e in edges_w], rtol=0, atol=1e-6)
        assert live.get("t", user_id="u") == whole.get("t", user_id="u")
        assert rankings(live, "u") == rankings(fresh(live, embedder), "u")  # the updated index is the fresh one
        assert live.method._indexes.updates > 0  # ... and it was updated, not only rebuilt
        assert_same_rankings(rankings(live, "u"), rankings(whole, "u"))


def test_an_append_that_continues_the_last_turn_replaces_it(embedder: Embedder) -> None:
    with Memory(embedder=embedder) as live, Memory(embedder=embedder) as whole:
        messages = conversation(3, 7) + [{"role": "assistant", "content": "And did the tax forms get filed?"}]
        live.add(conversation(4, 8), user_id="u", session_id="old")
        whole.add(conversation(4, 8), user_id="u", session_id="old")
        live.append(messages[:-1], user_id="u", session_id="t", timestamp="2024-02-01")
        live.search("tax forms", user_id="u")
        live.append(messages[-1:], user_id="u", session_id="t")
        whole.add(messages, user_id="u", session_id="t", timestamp="2024-02-01")
        assert session_state(live, "u", "t")[0] == session_state(whole, "u", "t")[0]
        assert live.get("t", user_id="u").messages[-2].role == "assistant"  # one turn: user + two replies
        assert rankings(live, "u") == rankings(fresh(live, embedder), "u")
        assert_same_rankings(rankings(live, "u"), rankings(whole, "u"))


def test_edit_and_delete_a_message_reach_units_and_index(embedder: Embedder) -> None:
    with Memory(embedder=embedder) as mem, Memory(embedder=embedder) as whole:
        base = conversation(6, 3)
        for m in (mem, whole):
            m.add(conversation(4, 4), user_id="u", session_id="other", timestamp="2024-01-01")
        mem.add(base, user_id="u", session_id="t", timestamp="2024-02-01")
        mem.search("anything", user_id="u")
        out = mem.update_message("t", 2, "I moved to Reykjavik last spring.", user_id="u")
        assert out.messages == len(base) and out.units > 0
        assert [h.session_id for h in mem.search("Reykjavik", user_id="u", k=1)] == ["t"]
        mem.delete_message("t", 5, user_id="u")
        edited = [dict(m) for m in base]
        edited[2]["content"] = "I moved to Reykjavik last spring."
        del edited[5]
        whole.add(edited, user_id="u", session_id="t", timestamp="2024-02-01")
        assert mem.get("t", user_id="u").messages == whole.get("t", user_id="u").messages
        assert session_state(mem, "u", "t")[0] == session_state(whole, "u", "t")[0]
        assert rankings(mem, "u") == rankings(fresh(mem, embedder), "u")
        assert_same_rankings(rankings(mem, "u"), rankings(whole, "u"))
        with pytest.raises(InvalidInputError, match="no message 99"):
            mem.update_message("t", 99, "x", user_id="u")
        with pytest.raises(InvalidInputError, match="empty"):
            mem.update_message("t", 0, "  ", user_id="u")
        for bad in (None, 5, ["x"]):  # never a delete in disguise, never a crash
            with pytest.raises(InvalidInputError, match="content must be a string"):
                mem.update_message("t", 0, bad, user_id="u")  # type: ignore[arg-type]
        assert len(mem.get("t", user_id="u").messages) == len(base) - 1
        with pytest.raises(NotFoundError):
            mem.delete_message("nope", 0, user_id="u")
        mem.add([{"role": "user", "content": "from the CRM", "name": "Ana", "metadata": {"source": "crm", "id": 7}}],
                user_id="u", session_id="crm")
        mem.update_message("crm", 0, "from the CRM, corrected", user_id="u")
        assert mem.get("crm", user_id="u").to_dict()["messages"] == [{"role": "user", "content": "from the CRM, corrected",
                                                             "name": "Ana", "metadata": {"source": "crm", "id": 7}}]
        mem.add([{"role": "user", "content": "only one"}], user_id="u", session_id="single")
        assert mem.delete_message("single", 0, user_id="u").deleted_session is True
        with pytest.raises(NotFoundError):
            mem.get("single", user_id="u")


def test_a_refused_append_writes_nothing(embedder: Embedder) -> None:
    with Memory(embedder=embedder) as mem:
        mem.append(conversation(2, 1), user_id="u", session_id="t")
        before = mem.get("t", user_id="u"), mem.store.version("u")
        for bad in ([{"role": "wizard", "content": "hi"}], [{"role": "user", "content": ""}], []):
            with pytest.raises(InvalidInputError):
                mem.append(bad, user_id="u", session_id="t")
        with pytest.raises(InvalidInputError):
            mem.append("hi", user_id="u", session_id="bad id")
        with pytest.raises(InvalidInputError, match="max_tokens"):  # refused before the exchange is stored
            mem.append("hi", user_id="u", session_id="t", return_context=True, context_tokens=0)
        assert (mem.get("t", user_id="u"), mem.store.version("u")) == before


def test_a_new_user_has_an_empty_memory_not_an_error(embedder: Embedder) -> None:
    with Memory(embedder=embedder) as mem:
        assert mem.search("where do I live?", user_id="new") == []
        assert mem.list(user_id="new") == []
        assert mem.context("where do I live?", user_id="new") == ""
        with pytest.raises(NotFoundError):
            mem.get("s1", user_id="new")
        with pytest.raises(InvalidInputError):
            mem.search("x", user_id="not valid")


def test_the_formats_agents_send_are_stored_as_documented(embedder: Embedder) -> None:
    openai = [
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "What's the weather in Lisbon?"},
                                     {"type": "image_url", "image_url": {"url": "data:..."}}], "name": "ana"},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Lisbon"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "22C and sunny"},
        {"role": "assistant", "content": [{"type": "text", "text": "It is 22C and sunny."}]},
    ]
    anthropic = [
        {"role": "user", "content": [{"type": "text", "text": "Book a table at Zuma."}]},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "secret scratch"},
                                          {"type": "tool_use", "id": "t1", "name": "book", "input": {"venue": "Zuma"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "booked 8pm"}]},
                                     {"type": "text", "text": "Thanks!"}]},
    ]
    with Memory(embedder=embedder) as mem:
        mem.add(openai, user_id="u", session_id="oa")
        mem.add(anthropic, user_id="u", session_id="an")
        mem.add("I adopted a greyhound called Pixel.", user_id="u", session_id="plain")
        assert mem.get("oa", user_id="u").to_dict()["messages"] == [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "What's the weather in Lisbon?\n[image]", "name": "ana"},
            {"role": "assistant", "content": '[tool call] weather({"city": "Lisbon"})'},
            {"role": "tool", "content": "22C and sunny"},
            {"role": "assistant", "content": "It is 22C and sunny."},
        ]
        assert mem.get("an", user_id="u").to_dict()["messages"] == [
            {"role": "user", "content": "Book a table at Zuma."},
            {"role": "assistant", "content": '[tool call] book({"venue": "Zuma"})'},
            {"role": "tool", "content": "booked 8pm"},
            {"role": "user", "content": "Thanks!"},
        ]
        assert mem.get("plain", user_id="u").to_dict()["messages"] == [{"role": "user", "content": "I adopted a greyhound called Pixel."}]
        session = mem.store.get_session("u", "oa")
        assert session.turns[1].user_text == "What's the weather in Lisbon?\n[image]"  # tool output is no user word
        assert "secret scratch" not in str(mem.get("an", user_id="u"))
        assert [h.session_id for h in mem.search("greyhound Pixel", user_id="u", k=1)] == ["plain"]


@pytest.mark.parametrize("content", [[{"type": "tool_result", "content": object()}],
                                     [{"type": "tool_use", "name": "book", "input": {"when": {1, 2}}}],
                                     [{"type": "tool_result", "content": float("nan")}]])
def test_a_content_part_json_cannot_hold_is_a_one_line_error_and_nothing_is_stored(embedder: Embedder,
                                                                                   content: list[Any]) -> None:
    with Memory(embedder=embedder) as mem:
        for write in (lambda: mem.add([{"role": "user", "content": content}], user_id="u", session_id="s"),
                      lambda: mem.append([{"role": "user", "content": content}], user_id="u", session_id="s")):
            with pytest.raises(InvalidInputError, match="must hold JSON values") as raised:
                write()
            assert "\n" not in str(raised.value)
        assert mem.list(user_id="u") == []


def test_a_session_without_a_timestamp_gets_the_time_of_the_add(embedder: Embedder) -> None:
    with Memory(embedder=embedder) as mem:
        before = datetime.now(timezone.utc)
        mem.add([{"role": "user", "content": "I started pottery classes"}], user_id="u", session_id="s")
        mem.append("I bought a kiln", user_id="u", session_id="live")
        after = datetime.now(timezone.utc)
        for sid in ("s", "live"):
            stamp = mem.get(sid, user_id="u").timestamp
            assert before - timedelta(seconds=1) <= stamp <= after + timedelta(seconds=1)
        hit = mem.search("pottery", user_id="u", k=1)[0]
        assert hit.timestamp is not None and hit.timestamp >= before - timedelta(seconds=1)
        assert mem.add_many([{"messages": ["x"] and [{"role": "user", "content": "undated on purpose"}],
                              "timestamp": None, "session_id": "d"}], user_id="u")[0].session_id == "d"
        assert mem.get("d", user_id="u").timestamp is None


def test_context_is_dated_cited_within_budget_and_leaves_out_the_current_conversation(embedder: Embedder) -> None:
    with Memory(embedder=embedder) as mem:
        mem.add([{"role": "user", "content": "I moved to Lisbon in March."},
                 {"role": "assistant", "content": "Lisbon is lovely in spring."}],
                user_id="u", session_id="move", timestamp="2024-03-10T09:00:00")
        for i in range(6):
            mem.add(conversation(4, 20 + i), user_id="u", session_id=f"c{i}", timestamp="2024-04-01")
        text = mem.context("Where did I move?", user_id="u", k=3, max_tokens=200)
        lines = text.splitlines()
        # the move is a lasting fact about the home: the user card holds it, dated and cited
        assert lines[0] == PROFILE_HEADER
        assert lines[1] == "- 2024-03-10 · move · user: I moved to Lisbon in March."
        assert context_tokens(text) <= 200
        small = mem.context("Where did I move?", user_id="u", k=3, max_tokens=40)
        assert context_tokens(small) <= 40 and "· move · user: I moved to Lisbon" in small
        assert "· move ·" not in mem.context("Where did I move?", user_id="u", exclude_sessions=["move"])
        hits = mem.search("Where did I move?", user_id="u", k=3, exclude_sessions=["move"])
        assert len(hits) == 3 and "move" not in [h.session_id for h in hits]
        out = mem.append([{"role": "user", "content": "Remind me where I moved?"}], user_id="u", session_id="now",
                         return_context=True)
        assert "user: I moved to Lisbon in March." in out.context and "· now ·" not in out.context
        with pytest.raises(InvalidInputError, match="max_tokens"):
            mem.context("x", user_id="u", max_tokens=0)
        with pytest.raises(InvalidInputError, match="list of session ids"):
            mem.search("x", user_id="u", exclude_sessions="move")
