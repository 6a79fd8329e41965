"""The optional query-decomposition stage: the LLM decomposer, the fusion of the parts' rankings, and the hook every
method shares (on a hand-made store where each part of the question is answered by one session)."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any, Mapping, Sequence

import pytest

from memgas.core.errors import InvalidInputError, LLMError
from memgas.core.types import Message, Session
from memgas.embed.base import Embedder
from memgas.llm.base import Completion
from memgas.llm.wrapper import LLM
from memgas.methods import get_method
from memgas.methods.decompose import DecomposeStage, LLMDecomposer, decompose_stage
from memgas.store import open_store


class ScriptedChat:
    """A chat model that replies ``reply`` whatever it is asked, and keeps what it was asked."""

    id = "scripted"
    context_tokens = 4096

    def __init__(self, reply: str) -> None:
        self.reply = reply
        self.calls: list[tuple[str, Mapping[str, Any] | None]] = []

    def complete(self, messages: Sequence[Mapping[str, str]], *, schema: Mapping[str, Any] | None = None,
                 max_tokens: int = 512, temperature: float = 0.0) -> Completion:
        self.calls.append((messages[-1]["content"], schema))
        return Completion(self.reply, 10, 5, 0.0)

    def count_tokens(self, text: str) -> int:
        return len(text.split())


class Fixed:
    """A decomposer that names the same parts for every question (and counts the questions it was asked)."""

    id = "fixed"

    def __init__(self, *parts: str) -> None:
        self.given = list(parts)
        self.asked: list[str] = []

    def parts(self, query: str) -> list[str]:
        self.asked.append(query)
        return list(self.given)


QUESTION = "Which pets and which cars do we own?"
#: Two sessions each answer one part of QUESTION in their own words; two others repeat its words and answer nothing.
SESSIONS = {
    "talk-pets": "Which pets are good for a family that owns two cars and travels a lot? Just wondering about pets.",
    "dog": "Our dog Biscuit, a golden retriever, chewed the sofa again this morning.",
    "talk-cars": "Which cars are safest for pets? We own nothing yet but want to know which cars people like.",
    "volvo": "Our car, a red Volvo estate, passed its inspection at the garage on Monday.",
    "bread": "I baked sourdough bread with rye flour on Sunday.",
}
PARTS = ("our dog", "our car")


def _store(tmp_path: Path, embedder: Embedder, method_name: str) -> Any:
    store = open_store(tmp_path / "m.db")
    method = get_method(method_name, embedder)
    for i, (sid, text) in enumerate(SESSIONS.items()):
        method.ingest(store, Session("u", sid, (Message("user", text), Message("assistant", "I see.")),
                                     datetime(2024, 1, i + 1)))
    return store, method


def test_llm_decomposer_asks_under_a_schema_and_cleans_the_parts() -> None:
    chat = ScriptedChat(json.dumps({"searches": ["our  dog", "", "Our dog", QUESTION, "our car"]}))
    parts = LLMDecomposer(LLM(chat), max_parts=5).parts(QUESTION)
    assert parts == ["our dog", "our car"]  # blank, repeated (any case) and the question itself dropped
    prompt, schema = chat.calls[0]
    assert QUESTION in prompt
    searches = schema["properties"]["searches"]  # type: ignore[index]
    assert searches["maxItems"] == 5 and searches["items"]["type"] == "string"


def test_llm_decomposer_refuses_a_reply_outside_the_schema() -> None:
    with pytest.raises(LLMError):
        LLMDecomposer(LLM(ScriptedChat('{"searches": "our dog"}'))).parts(QUESTION)
    with pytest.raises(InvalidInputError):
        LLMDecomposer(LLM(ScriptedChat("{}")), max_parts=1)


@pytest.mark.parametrize("method_name", ["dense-turn", "bm25", "memgas"])
def test_every_method_takes_the_stage_and_finds_each_part(tmp_path: Path, embedder: Embedder,
                                                          method_name: str) -> None:
    store, method = _store(tmp_path, embedder, method_name)
    before = method.rank(store, "u", QUESTION)
    assert not {"dog", "volvo"} <= set(before.sessions[:2])  # the question's own words find the talk first
    method.decomposer = DecomposeStage(Fixed(*PARTS))
    after = method.rank(store, "u", QUESTION)
    # the whole question's best session, then each part's best, in turn; what answers nothing stays last
    assert after.sessions[:3] == [before.sessions[0], "dog", "volvo"] and after.sessions[-1] == "bread"
    hits = method.search(store, "u", QUESTION, k=3)
    assert [h.session_id for h in hits] == after.sessions[:3]
    method.decomposer = None
    assert method.rank(store, "u", QUESTION) == before
    store.close()


def test_a_question_with_fewer_than_two_parts_keeps_its_ranking(tmp_path: Path, embedder: Embedder) -> None:
    store, method = _store(tmp_path, embedder, "memgas")
    before = method.rank(store, "u", QUESTION)
    for parts in ((), ("our dog",)):
        method.decomposer = DecomposeStage(Fixed(*parts))
        assert method.rank(store, "u", QUESTION) == before
    store.close()


def test_a_failed_decomposition_searches_with_the_question_alone(tmp_path: Path, embedder: Embedder,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    store, method = _store(tmp_path, embedder, "memgas")
    before = method.rank(store, "u", QUESTION)
    method.decomposer = DecomposeStage(LLMDecomposer(LLM(ScriptedChat("no JSON here"))))
    assert method.rank(store, "u", QUESTION) == before
    assert "decomposition failed" in caplog.text
    store.close()


def test_the_whole_question_weighs_more_when_asked(tmp_path: Path, embedder: Embedder) -> None:
    store, method = _store(tmp_path, embedder, "memgas")
    before = method.rank(store, "u", QUESTION)
    # 50 places a round: the whole question's first 50 units (all this store holds) come before any part's best
    method.decomposer = DecomposeStage(Fixed(*PARTS), whole_weight=50.0)
    assert method.rank(store, "u", QUESTION).sessions == before.sessions
    store.close()


def test_a_filtered_search_fuses_within_its_sessions(tmp_path: Path, embedder: Embedder) -> None:
    store, method = _store(tmp_path, embedder, "memgas")
    decomposer = Fixed(*PARTS)
    method.decomposer = DecomposeStage(decomposer)
    within = {"talk-pets", "talk-cars", "dog", "bread"}  # not the car part's answer
    hits = method.search(store, "u", QUESTION, k=5, within=within)
    assert [h.session_id for h in hits] == ["talk-cars", "dog", "talk-pets", "bread"]
    method.decomposer = None
    assert [h.session_id for h in method.search(store, "u", QUESTION, k=5, within=within)][-1] == "dog"
    assert decomposer.asked == [QUESTION]  # one decomposition per search; the parts are not decomposed again
    store.close()


def test_bad_stage_settings_are_refused() -> None:
    with pytest.raises(InvalidInputError, match="unknown decomposer"):
        decompose_stage("rules")
    with pytest.raises(InvalidInputError):
        DecomposeStage(Fixed(), whole_weight=-1.0)
    with pytest.raises(InvalidInputError):
        DecomposeStage(Fixed(), whole_weight=0.0)


def test_memory_and_the_bench_reach_the_stage(  # type: ignore[no-untyped-def]
        stub, tmp_path, embedder, monkeypatch) -> None:
    from memgas import Memory
    from memgas.cli.commands import main
    from support.datasets import lme_records

    stub.responder = lambda body: '{"searches": ["bees on the roof", "lavender honey"]}'
    with Memory(None, embedder=embedder, decompose=f"llm:openai:tiny@{stub.base_url}") as mem:
        mem.add([{"role": "user", "content": "I keep bees on the roof."}], user_id="u", session_id="bees")
        mem.add([{"role": "user", "content": "My bees make lavender honey."}], user_id="u", session_id="honey")
        assert mem.method.decomposer is not None
        hits = mem.search("what do my bees make, and where?", user_id="u", k=2)
        assert {h.session_id for h in hits} == {"bees", "honey"}
        assert stub.requests, "the decomposer was not asked"
    with pytest.raises(InvalidInputError, match="unknown decomposer"):
        Memory(None, embedder=embedder, decompose="rules")

    monkeypatch.setenv("MEMGAS_CACHE_DIR", str(tmp_path / "cache"))
    data = tmp_path / "lme.json"
    data.write_text(json.dumps(lme_records()))
    asked = len(stub.requests)
    argv = ["bench", "longmemeval", "--data", str(data), "--method", "bm25", "--no-progress", "--no-llm-cache",
            "--out", str(tmp_path / "out"), "--decompose", f"llm:openai:tiny@{stub.base_url}"]
    assert main(argv) == 0
    config = json.loads((tmp_path / "out" / "results.json").read_text())["config"]
    assert config["decomposer"]["decomposer"] == f"llm-decompose:openai:{stub.base_url}:tiny"
    assert len(stub.requests) > asked
    assert main([*argv[:-1], "rules"]) == 2
