"""The optional reranking stage: rank fusion, the listwise LLM reranker, and the hook every method shares."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pytest

from memgas.core.errors import InvalidInputError, LLMError
from memgas.core.types import Message, Session
from memgas.embed.base import Embedder
from memgas.llm.base import Completion
from memgas.llm.wrapper import LLM
from memgas.methods import get_method
from memgas.methods.rerank import LLMReranker, RerankStage, fuse, rerank_stage
from memgas.store import open_store


class ScriptedChat:
    """A chat model that lists, best first, the snippets holding ``word`` (or replies ``reply`` as it is)."""

    id = "scripted"
    context_tokens = 4096

    def __init__(self, word: str = "", reply: str | None = None) -> None:
        self.word, self.reply = word, reply
        self.calls: list[tuple[str, Mapping[str, Any] | None]] = []

    def complete(self, messages: Sequence[Mapping[str, str]], *, schema: Mapping[str, Any] | None = None,
                 max_tokens: int = 512, temperature: float = 0.0) -> Completion:
        prompt = messages[-1]["content"]
        self.calls.append((prompt, schema))
        if self.reply is not None:
            return Completion(self.reply, 10, 5, 0.0)
        lines = [ln for ln in prompt.splitlines() if ln.startswith("[")]
        hits = [int(ln[1:ln.index("]")]) for ln in lines if self.word in ln]
        return Completion(json.dumps({"ranking": hits + hits[:1]}), 10, 5, 0.0)  # a repeat: dropped by the reranker

    def count_tokens(self, text: str) -> int:
        return len(text.split())


def test_fuse_weights_the_two_orders() -> None:
    first = np.array([0.9, 0.8, 0.7, 0.1])
    assert list(np.argsort(-fuse(first, [3, 2, 1, 0], weight=1.0))) == [3, 2, 1, 0]
    assert list(np.argsort(-fuse(first, [3, 2, 1, 0], weight=0.0))) == [0, 1, 2, 3]
    # Left out by the reranker: after every listed candidate, in the first-stage order.
    assert list(np.argsort(-fuse(first, [2], weight=1.0))) == [2, 0, 1, 3]
    # Equal weights, reversed orders: 1/61 + 1/63 > 2/62, so both ends beat the middle; a tie keeps
    # the first-stage order.
    mixed = fuse(np.array([0.9, 0.8, 0.1]), [2, 1, 0], weight=0.5)
    assert list(np.argsort(-mixed)) == [0, 2, 1]
    assert mixed[1] == pytest.approx(1 / 62)


def test_llm_reranker_lists_by_number_under_a_schema() -> None:
    chat = ScriptedChat("kayak")
    order = LLMReranker(LLM(chat), top=3).order("what boat?", ["a car", "my kayak trip", "the bus", "kayak  paddles"])
    assert order == [1, 3]
    prompt, schema = chat.calls[0]
    assert "[2] my kayak trip" in prompt and "[4] kayak paddles" in prompt  # whitespace folded
    items = schema["properties"]["ranking"]  # type: ignore[index]
    assert items["items"]["enum"] == [1, 2, 3, 4] and items["maxItems"] == 3


def test_llm_reranker_refuses_a_number_it_did_not_show() -> None:
    with pytest.raises(LLMError):
        LLMReranker(LLM(ScriptedChat(reply='{"ranking": [7]}'))).order("q", ["a", "b"])


def _store(tmp_path: Path, embedder: Embedder, method_name: str) -> Any:
    store = open_store(tmp_path / "m.db")
    method = get_method(method_name, embedder)
    topics = ["We drove the car to the coast and parked by the beach.",
              "I fixed the car's brakes at the garage on Monday.",
              "Last summer I paddled a kayak down the river with my cousin.",
              "The car rental at the airport was expensive."]
    for i, text in enumerate(topics):
        method.ingest(store, Session("u", f"s{i}", (Message("user", text), Message("assistant", "Nice!")),
                                     datetime(2024, 1, i + 1)))
    return store, method


@pytest.mark.parametrize("method_name", ["dense-turn", "bm25", "memgas"])
def test_every_method_takes_the_stage(tmp_path: Path, embedder: Embedder, method_name: str) -> None:
    store, method = _store(tmp_path, embedder, method_name)
    query = "tell me about the car trip"
    before = method.rank(store, "u", query)
    assert before.sessions[0] != "s2"
    method.reranker = RerankStage(LLMReranker(LLM(ScriptedChat("kayak"))), weight=1.0)
    after = method.rank(store, "u", query)
    assert after.sessions[0] == "s2" and after.turns[0] == ("s2", 0)
    # the rest follow their best turn in the method's own turn order (the candidates here are every turn), which
    # for memgas (turns ranked by their own evidence) need not be its session order
    by_best_turn = list(dict.fromkeys(sid for sid, _ in before.turns))
    assert after.sessions[1:] == [s for s in by_best_turn if s != "s2"]
    hits = method.search(store, "u", query, k=2)
    assert [h.session_id for h in hits] == after.sessions[:2]
    assert hits[0].relevance < 1.0 and hits[0].score > hits[1].score  # relevance stays the cosine
    method.reranker = None
    assert method.rank(store, "u", query) == before
    store.close()


def test_a_failed_rerank_keeps_the_methods_order(tmp_path: Path, embedder: Embedder,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    store, method = _store(tmp_path, embedder, "memgas")
    before = method.rank(store, "u", "tell me about the car trip")
    method.reranker = RerankStage(LLMReranker(LLM(ScriptedChat(reply="not JSON"))))
    assert method.rank(store, "u", "tell me about the car trip") == before
    assert "reranking failed" in caplog.text
    store.close()


def test_bad_stage_settings_are_refused() -> None:
    with pytest.raises(InvalidInputError):
        rerank_stage("cross-encoder:ms-marco")
    with pytest.raises(InvalidInputError):
        RerankStage(LLMReranker(LLM(ScriptedChat())), candidates=1)
    with pytest.raises(InvalidInputError):
        RerankStage(LLMReranker(LLM(ScriptedChat())), weight=1.5)


def test_memory_and_the_bench_reach_the_stage(stub, tmp_path, embedder) -> None:  # type: ignore[no-untyped-def]
    from memgas import Memory

    stub.responder = lambda body: '{"ranking": [2, 1]}'
    with Memory(None, embedder=embedder, rerank=f"llm:openai:tiny@{stub.base_url}") as mem:
        mem.add([{"role": "user", "content": "I keep bees on the roof."}], user_id="u", session_id="bees")
        mem.add([{"role": "user", "content": "My bees make lavender honey."}], user_id="u", session_id="honey")
        assert mem.method.reranker is not None
        mem.search("what do my bees make?", user_id="u", k=2)
        assert stub.requests, "the reranker was not asked"
    with pytest.raises(InvalidInputError, match="unknown reranker"):
        Memory(None, embedder=embedder, rerank="cross-encoder")
