"""Tests of memgas.answer (filter, answer, judge) and Memory.answer, over real HTTP on loopback."""

from __future__ import annotations

import json
import os
import re
from datetime import datetime, timedelta, timezone
from typing import Any

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import pytest

from memgas import Memory
from memgas.answer import (
    answer_prompt,
    answer_question,
    filter_memories,
    filter_prompt,
    filter_schema,
    fit_items,
    parse_answer,
    parse_filter,
    render_items,
)
from memgas.bench.judge import judge_answer, judge_prompt, parse_judgement
from memgas.core.errors import InvalidInputError
from memgas.core.types import Hit, MemoryItem, TurnHit, items_from_hits
from memgas.llm.openai import OpenAIChat
from memgas.llm.wrapper import LLM
from support.openai_stub import OpenAIStub

ITEMS = [
    MemoryItem("s-lisbon", "user: I moved to Lisbon in May.", datetime(2023, 5, 20, 10, 0)),
    MemoryItem("s-dog", "user: My dog Rex is three.", datetime(2023, 4, 2, 9, 30)),
    MemoryItem("s-lisbon-again", "user: Lisbon is where I live now.", datetime(2023, 6, 1, 8, 0)),
]
Q = "Where does the user live?"


def llm_for(stub: OpenAIStub, context_tokens: int = 8192) -> LLM:
    return LLM(OpenAIChat("tiny", base_url=stub.base_url, backoff=0.01, max_backoff=0.02, max_retries=1,
                          context_tokens=context_tokens))


def kind(body: dict[str, Any]) -> str:
    """Which prompt a request is: units, filter, answer or judge."""
    first = body["messages"][0]["content"]
    return ("units" if "memory notes" in first else "filter" if "which memories answer" in first
            else "answer" if "answer questions" in first else "judge")


# ----------------------------------------------------------------------------- pure functions


def test_prompts_number_the_memories_and_carry_dates() -> None:
    text = render_items(ITEMS[:2])
    assert text.startswith("[1] 2023-05-20 (Sat) 10:00\nuser: I moved to Lisbon") and "\n\n[2] 2023-04-02 (Sun)" in text
    assert render_items([MemoryItem("x", "t")]) == "[1] date unknown\nt"
    f = filter_prompt(Q, ITEMS, datetime(2023, 7, 1, 12, 0))[1]["content"]
    assert f.startswith(f"Question: {Q}\nThe question is asked on 2023-07-01 (Sat) 12:00.") and "[3] 2023-06-01" in f
    assert filter_schema(2) == {"type": "object", "required": ["1", "2"], "additionalProperties": False,
                                "properties": {"1": {"type": "boolean"}, "2": {"type": "boolean"}}}
    a = answer_prompt(Q, ITEMS)[1]["content"]
    assert "[1] 2023-05-20" in a and f"Question: {Q}\n\n" in a and '"sources"' in a


def test_parse_filter_can_only_remove() -> None:
    assert parse_filter({"3": True, "1": True, "2": False, "4": True, "0": True}, 3) == [0, 2]
    assert parse_filter({"1": "true", "2": 1, "3": None}, 3) == []  # only a real true keeps
    assert parse_filter({}, 3) == [] and parse_filter([1], 3) == []


def test_parse_answer_maps_numbers_to_cited_sessions() -> None:
    assert parse_answer({"answer": " Lisbon\n ", "sources": [3, 1, 3, 9, 0]}, ITEMS) == (
        "Lisbon", ["s-lisbon-again", "s-lisbon"])
    assert parse_answer({"answer": "I don't know", "sources": []}, ITEMS) == ("I don't know", [])
    assert parse_answer("nonsense", ITEMS) == ("", [])


def test_judge_prompts_follow_longmemeval() -> None:
    default = judge_prompt("Q?", "GOLD", "RESP", "multi-session")[0]["content"]
    assert default.startswith("I will give you a question, a correct answer, and a response from a model.")
    assert default.endswith("Question: Q?\n\nCorrect Answer: GOLD\n\nModel Response: RESP\n\n"
                            "Is the model response correct? Answer yes or no only.")
    assert "answer no. \n\nQuestion" in default
    assert judge_prompt("Q?", "g", "r", "single-hop")[0]["content"] == default.replace("GOLD", "g").replace("RESP", "r")
    assert "off-by-one errors" in judge_prompt("Q?", "g", "r", "temporal-reasoning")[0]["content"]
    assert "updated answer" in judge_prompt("Q?", "g", "r", "knowledge-update")[0]["content"]
    assert "Rubric: g" in judge_prompt("Q?", "g", "r", "single-session-preference")[0]["content"]
    abstain = judge_prompt("Q?", "g", "r", "multi-session", abstention=True)[0]["content"]
    assert "unanswerable" in abstain and "Explanation: g" in abstain
    assert parse_judgement("Yes.") and parse_judgement("yes, it is") and not parse_judgement("No.")
    assert not parse_judgement("<think>yes? the user said yes</think>\nNo")


def test_fit_items_fair_heads_and_oldest_end_truncation() -> None:
    count = lambda text: len(text.split())
    long = [MemoryItem(f"s{i}", " ".join(f"w{i}_{j}" for j in range(100)), datetime(2023, 1, i + 1)) for i in range(5)]
    assert fit_items(long, 10_000, count) == long
    fair = fit_items(long, 200, count)
    assert [m.session_id for m in fair] == [m.session_id for m in long]
    assert all(m.text.startswith(f"w{i}_0 ") for i, m in enumerate(fair)) and count(render_items(fair)) <= 200
    newest = fit_items(long[::-1], 250, count, keep_newest=True)
    assert [m.session_id for m in newest] == ["s2", "s3", "s4"]  # chronological, oldest dropped
    assert newest[1:] == long[3:] and newest[0].text.endswith("w2_99") and not newest[0].text.startswith("w2_0 ")
    assert count(render_items(newest)) <= 250


def test_fit_items_orders_aware_and_naive_times_as_instants() -> None:
    count = lambda text: len(text.split())
    # 09:00 at UTC-5 is 14:00 UTC: after the naive (UTC) 12:00 item, before 13:00 would be wrong.
    items = [MemoryItem("late", "b", datetime(2023, 1, 1, 9, tzinfo=timezone(timedelta(hours=-5)))),
             MemoryItem("noon", "a", datetime(2023, 1, 1, 12)), MemoryItem("none", "c", None)]
    kept = fit_items(items, 100, count, keep_newest=True)
    assert [m.session_id for m in kept] == ["none", "noon", "late"]


def test_items_from_hits_keep_turn_order() -> None:
    hit = Hit("s1", 0.9, None, [TurnHit(4, "late turn", 0.9), TurnHit(1, "early turn", 0.5)], {})
    assert items_from_hits([hit]) == [MemoryItem("s1", "early turn\nlate turn", None)]


# ----------------------------------------------------------------------------- calls over HTTP


def test_filter_removes_and_falls_back(stub: OpenAIStub) -> None:
    llm = llm_for(stub)
    stub.script = [{"text": '{"1": true, "2": false, "3": true}'}]
    assert filter_memories(llm, Q, ITEMS) == [ITEMS[0], ITEMS[2]]
    assert stub.requests[0]["max_tokens"] == 40 and "Reply with JSON only" in stub.requests[0]["messages"][0]["content"]
    stub.script = [{"text": '{"1": false, "2": false, "3": false}'}]
    assert filter_memories(llm, Q, ITEMS) == ITEMS
    stub.script = [{"text": '{"1": false, "2": false, "3": false, "7": true}'}] * 2  # invalid twice: extra key
    assert filter_memories(llm, Q, ITEMS) == ITEMS
    stub.script = [{"status": 500}, {"status": 500}]
    assert filter_memories(llm, Q, ITEMS) == ITEMS
    n = len(stub.requests)
    assert filter_memories(llm, Q, ITEMS[:1]) == ITEMS[:1] and len(stub.requests) == n  # nothing to remove


def test_answer_question_filters_cites_and_counts(stub: OpenAIStub) -> None:
    llm = llm_for(stub)
    stub.script = [{"text": '{"1": false, "2": true, "3": true}'}, {"text": '{"answer": "Lisbon", "sources": [2, 5]}'}]
    result = answer_question(llm, Q, ITEMS, question_date=datetime(2023, 7, 1))
    assert result.answer == "Lisbon" and result.sources == ["s-lisbon-again"]
    assert [m.session_id for m in result.memories] == ["s-lisbon", "s-lisbon-again"]  # chronological
    assert result.removed == ["s-dog"] and result.usage.calls == 2 and result.usage.prompt_tokens == 22
    shown = stub.requests[1]["messages"][1]["content"]
    assert "Rex" not in shown and "[1] 2023-05-20" in shown and "[2] 2023-06-01" in shown
    assert result.to_dict()["llm"]["calls"] == 2


def test_answer_falls_back_to_raw_text_when_json_stays_invalid(stub: OpenAIStub) -> None:
    stub.script = [{"text": "<think>hmm</think>She lives in Lisbon."}, {"text": "Lisbon, as I said."}]
    result = answer_question(llm_for(stub), Q, ITEMS, use_filter=False)
    assert (result.answer, result.sources, result.usage.failures) == ("Lisbon, as I said.", [], 1)


def test_judge_uses_a_short_plain_completion(stub: OpenAIStub) -> None:
    stub.script = [{"text": "Yes."}, {"text": "<think>yes?</think> no"}]
    llm = llm_for(stub)
    assert judge_answer(llm, Q, "Lisbon", "In Lisbon", qtype="single-session-user")
    assert not judge_answer(llm, Q, "Lisbon", "Porto")
    body = stub.requests[0]
    assert body["max_tokens"] == 10 and "response_format" not in body and kind(body) == "judge"


def test_small_context_still_fits(stub: OpenAIStub) -> None:
    stub.responder = lambda body: '{"answer": "Lisbon", "sources": [1]}'
    big = [MemoryItem(f"s{i}", "word " * 3000, datetime(2023, 1, 1 + i)) for i in range(4)]
    llm = llm_for(stub, context_tokens=2048)
    answer_question(llm, Q, big, use_filter=False)
    prompt = "".join(m["content"] for m in stub.requests[-1]["messages"])
    assert llm.count_tokens(prompt) + 200 <= 2048


# ----------------------------------------------------------------------------- Memory.answer


def responder(body: dict[str, Any]) -> str:
    k = kind(body)
    if k == "units":
        text = body["messages"][1]["content"]
        place = "Lisbon" if "Lisbon" in text else "Rex"
        return json.dumps({"summary": f"A conversation about {place}.", "keywords": [place]})
    blocks = re.findall(r"^\[(\d+)\] [^\n]*\n(.*?)(?=\n\n|$)", body["messages"][1]["content"], re.S | re.M)
    lisbon = [int(n) for n, text in blocks if "Lisbon" in text]
    if k == "filter":
        return json.dumps({n: int(n) in lisbon for n, _ in blocks})
    return json.dumps({"answer": "Lisbon", "sources": lisbon})


def test_memory_answer_end_to_end(stub: OpenAIStub, tmp_path) -> None:
    stub.responder = responder
    with pytest.raises(InvalidInputError, match="needs an LLM"):
        Memory(":memory:").answer(Q, user_id="u")
    with Memory(tmp_path / "m.db", llm=llm_for(stub)) as mem:
        mem.add([{"role": "user", "content": "I moved to Lisbon in May, near the river."}], user_id="u",
                session_id="lisbon", timestamp="2023-05-20T10:00:00")
        mem.add([{"role": "user", "content": "My dog Rex turned three today."}], user_id="u",
                session_id="dog", timestamp="2023-04-02T09:30:00")
        assert mem.search("Rex", user_id="u", k=1)[0].session_id == "dog"
        result = mem.answer("Which city did I move to?", user_id="u", question_date="2023-07-01T12:00:00", k=2)
        stats = mem.stats("u")
    assert result.answer == "Lisbon" and result.sources == ["lisbon"] and result.removed == ["dog"]
    assert [kind(b) for b in stub.requests] == ["units", "units", "filter", "answer"]
    assert "2023-07-01" in stub.requests[-1]["messages"][1]["content"]
    llm = stats["llm"]
    assert llm["model"].endswith(":tiny") and llm["units"] == {"written": 2, "fallbacks": 0}
    assert llm["add"]["count"] == 2 and llm["add"]["total"]["calls"] == 2 and llm["add"]["per_call"]["calls"] == 1
    assert llm["answer"]["total"]["prompt_tokens"] == 22 and llm["answer"]["per_call"]["completion_tokens"] == 14
    assert stats["calls"]["answer"]["count"] == 1


def test_memory_llm_without_llm_units_keeps_adds_free(stub: OpenAIStub) -> None:
    stub.responder = responder
    with Memory(":memory:", llm=llm_for(stub), llm_units=False) as mem:
        mem.add([{"role": "user", "content": "I moved to Lisbon."}], user_id="u", session_id="a")
        assert mem.stats()["llm"]["add"]["total"]["calls"] == 0 and "units" not in mem.stats()["llm"]
        assert mem.answer(Q, user_id="u").answer == "Lisbon"
    assert [kind(b) for b in stub.requests] == ["answer"]  # one memory: nothing to filter


def test_context_shows_the_newest_state_first_for_a_question_about_the_present(embedder) -> None:
    """The demo's case: the March session (Buckman) and the April one (moving to Sellwood) both answer "where do I
    live these days?"; the context shows April first and marks March as earlier, leaves the bread session out (below
    the relevance floor), and keeps relevance order, unmarked, for a question about the past."""
    from memgas.context.assemble import MEMORY_HEADERS, PROFILE_HEADER
    from memgas.memory import Memory

    with Memory(embedder=embedder) as mem:
        mem.add([{"role": "user", "content": "I live in the Buckman neighborhood of Portland, near Laurelhurst Park."},
                 {"role": "assistant", "content": "Buckman is a lovely part of town."}],
                user_id="u", session_id="march", timestamp="2024-03-05T10:00:00")
        mem.add([{"role": "user", "content": "Big news: I'm moving to Sellwood next week, part of town by the river."},
                 {"role": "assistant", "content": "Sellwood is quiet and green."}],
                user_id="u", session_id="april", timestamp="2024-04-20T10:00:00")
        mem.add([{"role": "user", "content": "My sourdough starter finally doubled overnight."}],
                user_id="u", session_id="bread", timestamp="2024-04-01T10:00:00")
        now = mem.context("Which part of town do I live in these days?", user_id="u", k=3, max_tokens=400).splitlines()
        # the move is the latest word on the user's home: the card holds it, and the home it replaced is earlier
        assert now[0] == PROFILE_HEADER
        assert now[1].startswith("- 2024-04-20 · april · user: Big news: I'm moving to Sellwood")
        assert now[2] == MEMORY_HEADERS["now"]
        assert now[3].startswith("[1] 2024-03-05 · march (earlier) · user: I live in the Buckman")
        assert not any("bread" in line for line in now)
        past = mem.context("Where did I live before I moved?", user_id="u", k=3).splitlines()
        assert MEMORY_HEADERS["past"] in past
        # in relevance order; "(earlier)" only on the home the move replaced, whatever the question asks
        assert [line for line in past if "(earlier)" in line] == [line for line in past if "user: I live in the Buckman" in line]
        hits = mem.search("Where did I live before I moved?", user_id="u", k=3)
        carded = {line.split(" · ")[1] for line in past if line.startswith("- ")}
        assert [line.split(" · ")[1].removesuffix(" (earlier)") for line in past
                if line.startswith("[") and " · user: " in line] == \
            [h.session_id for h in hits if h.session_id != "bread" and h.session_id not in carded]
