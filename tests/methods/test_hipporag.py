"""``hipporag`` and ``hipporag-rules``: the phrase/passage graph, recognition memory and PPR, over a real
SQLite store, the real embedder and a scripted LLM on loopback HTTP."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memgas.core.validate import make_session
from memgas.kernels.temporal_graph import normalise_name
from memgas.llm.cache import ResponseCache
from memgas.llm.openai import OpenAIChat
from memgas.llm.wrapper import LLM
from memgas.methods import get_method
from memgas.methods.hipporag import HippoRAG, rule_triples
from memgas.store import open_store
from support.openai_stub import OpenAIStub

#: One passage (a one-turn session) each, with the triples the scripted extractor finds in it.
PASSAGES = {
    "adopt": ("Caroline adopted a rescue dog named Biscuit.", [("Caroline", "adopted", "Biscuit")]),
    "prize": ("Biscuit won first prize at the agility contest in Denver.", [("Biscuit", "won", "agility contest")]),
    "parrot": ("Melanie's pet parrot learned a new trick.", [("Melanie", "has pet", "parrot")]),
    "hike": ("Melanie hiked up Mount Hood with her kids.", [("Melanie", "hiked", "Mount Hood")]),
}
QUERY = "What did Caroline's pet achieve?"


def respond(body: dict[str, Any], recognise: bool = True) -> str:
    """Extraction from :data:`PASSAGES`; the filter keeps the adoption fact (or nothing)."""
    system, user = body["messages"][0]["content"], body["messages"][1]["content"]
    if system.startswith("You extract knowledge triples"):
        text = user.split("PASSAGE:\nuser: ", 1)[1].split("\n", 1)[0]
        triples = next(t for p, t in PASSAGES.values() if p == text)
        return json.dumps({"triples": [{"subject": s, "relation": r, "object": o} for s, r, o in triples]})
    facts = user.split("FACTS:\n", 1)[1].splitlines()
    keep = [int(line.split(".", 1)[0]) for line in facts if "adopted" in line] if recognise else []
    return json.dumps({"relevant": keep})


def _fill(method: HippoRAG, store: Any) -> None:
    for day, (sid, (text, _)) in enumerate(PASSAGES.items(), 1):
        msgs = [{"role": "user", "content": text}, {"role": "assistant", "content": "Nice."}]
        method.ingest(store, make_session(msgs, user_id="u", session_id=sid, timestamp=f"2024-05-0{day}T10:00:00"))


def _hipporag(embedder: Any, stub: OpenAIStub, **options: Any) -> HippoRAG:
    llm = LLM(OpenAIChat("tiny", base_url=stub.base_url, max_retries=0, timeout=10), ResponseCache())
    return get_method("hipporag", embedder, llm=llm, **options)  # type: ignore[return-value]


@pytest.fixture()
def store(tmp_path: Path) -> Any:
    s = open_store(tmp_path / "m.db")
    yield s
    s.close()


def test_seeds_from_recognised_triples_change_the_ranking(embedder, stub: OpenAIStub, store: Any) -> None:
    stub.responder = respond
    method = _hipporag(embedder, stub)
    _fill(method, store)
    linked = method.rank(store, "u", QUERY).sessions
    stub.responder = lambda body: respond(body, recognise=False)
    dense = _hipporag(embedder, stub).rank(store, "u", QUERY).sessions  # nothing recognised: dense retrieval
    # dense retrieval puts the other pet above the prize; from the recognised fact (Caroline adopted
    # Biscuit) PageRank reaches the prize through the phrase "Biscuit"
    assert dense.index("prize") > dense.index("parrot")
    assert linked[:2] == ["adopt", "prize"]


def test_graph_has_relation_context_and_synonym_edges(embedder, stub: OpenAIStub, store: Any) -> None:
    stub.responder = respond
    method = _hipporag(embedder, stub, synonym_threshold=-1.0)
    _fill(method, store)
    view = method._indexes.get(store, "u")
    ph = view.phrase_index
    n_ph = len(view.phrases)
    a = view.adjacency.toarray()
    assert (a == a.T).all()
    assert a[ph["caroline"], ph["biscuit"]] >= 1  # the relation edge (plus its synonym weight)
    adopt = view.passage_sessions.index("adopt")
    assert a[ph["caroline"], n_ph + adopt] == 1 and a[ph["biscuit"], n_ph + adopt] == 1  # context edges
    assert a[ph["agility contest"], n_ph + adopt] == 0
    assert view.phrase_passages[ph["biscuit"]] == 2
    strict = _hipporag(embedder, stub, synonym_threshold=1.01)._indexes.get(store, "u").adjacency.toarray()
    assert a[ph["parrot"], ph["agility contest"]] > 0 == strict[ph["parrot"], ph["agility contest"]]
    assert set(view.phrases) == {normalise_name(x) for _, t in PASSAGES.values() for s, _, o in t for x in (s, o)}


def test_one_recognition_call_per_query_cached(embedder, stub: OpenAIStub, store: Any) -> None:
    stub.responder = respond
    method = _hipporag(embedder, stub)
    _fill(method, store)
    method.prepare(store, "u")
    before = len(stub.requests)
    assert before == len(PASSAGES)  # one extraction per passage
    method.rank(store, "u", QUERY)
    method.rank(store, "u", QUERY)
    assert len(stub.requests) == before + 1
    shown = stub.requests[-1]["messages"][1]["content"].split("FACTS:\n", 1)[1].splitlines()
    assert len(shown) == min(method.fact_k, 4)  # the best facts of the 4 stored


def test_rules_variant_uses_keyphrase_cooccurrence(embedder, store: Any) -> None:
    import yake

    triples = rule_triples("Caroline adopted a rescue dog named Biscuit in Denver.", yake.KeywordExtractor(n=2, top=10))
    assert triples and all(t.relation == "co-occurs with" for t in triples)
    assert all(a.object == b.subject for a, b in zip(triples, triples[1:]))  # consecutive pairs, reading order
    method = get_method("hipporag-rules", embedder)
    _fill(method, store)  # type: ignore[arg-type]
    assert method.llm is None and method.triples(store, "u")  # type: ignore[attr-defined]
    assert method.rank(store, "u", "agility contest in Denver").sessions[0] == "prize"
