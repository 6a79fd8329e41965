"""The optional LLM check of the user model's supersessions (issue 59), against a scripted OpenAI-compatible server on
loopback (real HTTP; a strong LLM cannot run here) and the real embedder: the LLM may keep a statement the learned
models would take out, never takes one out itself, is asked each pair once, and a failing endpoint changes nothing."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import httpx
import pytest

from memgas import InvalidInputError, Memory
from memgas.embed.base import Embedder
from support.live_server import make_key, start_server
from support.openai_stub import OpenAIStub

#: The first is replaced by the learned models (a new home); the other two are the speaker's and both hold.
SAID = ["I live in Portland.", "I hate olives.", "I moved to Lisbon last month."]


def _fill(mem: Memory, user: str = "u") -> None:
    for i, text in enumerate(SAID):
        mem.add(text, user_id=user, session_id=f"s{i}", timestamp=f"2024-0{i + 1}-01T10:00:00")


def _asked(body: dict[str, Any]) -> str:
    return body["messages"][-1]["content"]


def _kept(mem: Memory, user: str = "u") -> list[str]:
    return [s.text for s in mem.profile(user_id=user)]


@pytest.fixture()
def stub() -> Any:
    with OpenAIStub() as server:
        yield server


def test_without_the_check_the_models_replace_the_old_home(embedder: Embedder) -> None:
    with Memory(None, embedder=embedder) as mem:
        _fill(mem)
        assert _kept(mem) == ["I hate olives.", "I moved to Lisbon last month."]


@pytest.mark.parametrize("answer, kept", [
    (True, ["I hate olives.", "I moved to Lisbon last month."]),
    (False, ["I live in Portland.", "I hate olives.", "I moved to Lisbon last month."]),
])
def test_the_llm_confirms_or_keeps_a_replacement_and_is_asked_each_pair_once(
        embedder: Embedder, stub: OpenAIStub, tmp_path: Path, answer: bool, kept: list[str]) -> None:
    stub.responder = lambda body: json.dumps({"replaces": answer})
    spec = f"llm:openai:judge@{stub.base_url}"
    with Memory(None, embedder=embedder, supersession_check=spec, llm_cache=tmp_path / "llm.sqlite") as mem:
        _fill(mem)
        assert _kept(mem) == kept
        (asked,) = [_asked(b) for b in stub.requests]  # one pair: the models proposed one replacement
        assert asked.index('"I live in Portland."') < asked.index('"I moved to Lisbon last month."')
        assert "2024-01-01" in asked and "2024-03-01" in asked
        mem.add("I prefer window seats on flights.", user_id="u", session_id="s9", timestamp="2024-09-01T10:00:00")
        assert "I prefer window seats on flights." in _kept(mem) and len(stub.requests) == 1  # the pair's answer is remembered
    with Memory(None, embedder=embedder, supersession_check=spec, llm_cache=tmp_path / "llm.sqlite") as mem:
        _fill(mem, "v")
        assert _kept(mem, "v") == kept and len(stub.requests) == 1  # another process: the response cache answers


def test_the_llm_never_takes_out_what_the_models_keep(embedder: Embedder, stub: OpenAIStub, tmp_path: Path) -> None:
    stub.responder = lambda body: json.dumps({"replaces": True})
    with Memory(None, embedder=embedder, supersession_check=f"llm:openai:judge@{stub.base_url}",
                llm_cache=tmp_path / "llm.sqlite") as mem:
        mem.add("I hate olives.", user_id="u", session_id="a", timestamp="2024-01-01T10:00:00")
        mem.add("I can't stand cilantro.", user_id="u", session_id="b", timestamp="2024-02-01T10:00:00")
        assert _kept(mem) == ["I hate olives.", "I can't stand cilantro."] and stub.requests == []


def test_a_failing_endpoint_leaves_the_models_decision(embedder: Embedder, stub: OpenAIStub, caplog,
                                                        tmp_path: Path) -> None:
    """Two replacements proposed, the first call fails: the second pair is not asked (an endpoint that is down is not
    asked again and again while the context waits), and both replacements stand as the models made them."""
    stub.responder = lambda body: "I am not sure."  # never JSON: the call fails after its retry
    with Memory(None, embedder=embedder, supersession_check=f"llm:openai:judge@{stub.base_url}",
                llm_cache=tmp_path / "llm.sqlite") as mem:
        _fill(mem)
        mem.add("Always answer in French.", user_id="u", session_id="f", timestamp="2024-05-01T10:00:00")
        mem.add("Always answer in English from now on.", user_id="u", session_id="e", timestamp="2024-06-01T10:00:00")
        with caplog.at_level(logging.WARNING, logger="memgas"):
            assert _kept(mem) == ["I hate olives.", "I moved to Lisbon last month.",
                                  "Always answer in English from now on."]
        assert "supersession check failed" in caplog.text
        assert len(stub.requests) == 2  # one pair's call and its retry


def test_a_bad_spec_is_refused_in_one_line(embedder: Embedder) -> None:
    with pytest.raises(InvalidInputError, match="unknown supersession check 'judge'"):
        Memory(None, embedder=embedder, supersession_check="judge")


@pytest.mark.slow
def test_the_server_takes_the_check(stub: OpenAIStub, tmp_path: Path) -> None:
    stub.responder = lambda body: json.dumps({"replaces": False})
    db = tmp_path / "m.db"
    with Memory(db) as mem:
        _fill(mem)
    key = make_key(db)
    srv = start_server(db, "--supersession-check", f"llm:openai:judge@{stub.base_url}", "--no-mcp", tmp=tmp_path)
    try:
        got = httpx.get(f"{srv.url}/v1/profile", params={"user_id": "u"}, headers={"Authorization": f"Bearer {key}"},
                        timeout=60).json()
    finally:
        srv.stop()
    assert [s["text"] for s in got["statements"]] == SAID and len(stub.requests) == 1
