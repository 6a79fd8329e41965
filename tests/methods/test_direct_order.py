"""MemGAS's ``direct_window``: PageRank chooses which sessions are the best few, and what each says itself orders
them (by default the best three). Checked on the shipped demo conversation against the two rankings it combines:
PageRank's (``direct_window=0``: the set) and the ranking without PageRank (``use_ppr=False``: the order)."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any, Iterator

import pytest

from memgas import Memory
from memgas.methods import MemGASConfig

DEMO = json.loads(resources.files("memgas").joinpath("data/demo_conversation.json").read_text("utf-8"))
QUESTIONS = [q["query"] if isinstance(q, dict) else q for q in DEMO["queries"]] + [
    "How is my ankle doing?", "What did I plant in the rain garden?", "When is Lena coming to visit?",
    "What did I cook for the week?", "Which trail did I hike?", "How is Biscuit settling in?"]


@pytest.fixture(scope="module")
def memories(embedder: Any) -> Iterator[dict[str, Memory]]:
    options = {"ppr": {"direct_window": 0}, "direct": {}, "no-ppr": {"use_ppr": False},
               "everything": {"direct_window": len(DEMO["sessions"])}}
    mems = {name: Memory(None, embedder=embedder, **kw) for name, kw in options.items()}
    for mem in mems.values():
        for s in DEMO["sessions"]:
            mem.add(s["messages"], user_id="maya", session_id=s["session_id"], timestamp=s["timestamp"])
    yield mems
    for mem in mems.values():
        mem.close()


def _ranked(mem: Memory, question: str, k: int = 12) -> list[str]:
    return [h.session_id for h in mem.search(question, user_id="maya", k=k)]


def test_pagerank_chooses_the_set_and_direct_evidence_orders_it(memories: dict[str, Memory]) -> None:
    reordered = 0
    for q in QUESTIONS:
        ppr, direct, alone = (_ranked(memories[m], q) for m in ("ppr", "direct", "no-ppr"))
        assert set(direct[:3]) == set(ppr[:3]) and direct[3:] == ppr[3:], q  # the set and the rest: PageRank's
        assert direct[:3] == [s for s in alone if s in ppr[:3]], q  # the order: without PageRank
        reordered += direct[:3] != ppr[:3]
    assert reordered, "no question where the two orders differ: the test would not bite"


def test_a_window_over_every_session_is_the_ranking_without_pagerank(memories: dict[str, Memory]) -> None:
    for q in QUESTIONS:
        alone = _ranked(memories["no-ppr"], q)  # a session nothing points to scores nothing and is not a hit
        assert _ranked(memories["everything"], q)[: len(alone)] == alone, q


def test_scores_stay_in_rank_order_and_turns_keep_theirs(memories: dict[str, Memory]) -> None:
    for q in QUESTIONS:
        hits = memories["direct"].search(q, user_id="maya", k=5)
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True), q
        before = {h.session_id: [t.score for t in h.turns] for h in memories["ppr"].search(q, user_id="maya", k=5)}
        for h in hits:
            if h.session_id in before:
                assert [t.score for t in h.turns] <= before[h.session_id] or \
                    [t.score for t in h.turns] == before[h.session_id], q


def test_a_filtered_search_orders_within_the_sessions_searched(memories: dict[str, Memory]) -> None:
    kept = [s["session_id"] for s in DEMO["sessions"][::2]]
    only = {"session_id": {"$in": kept}}
    for q in QUESTIONS[:4]:
        ppr = [h.session_id for h in memories["ppr"].search(q, user_id="maya", k=6, filters=only)]
        alone = [h.session_id for h in memories["no-ppr"].search(q, user_id="maya", k=6, filters=only)]
        direct = [h.session_id for h in memories["direct"].search(q, user_id="maya", k=6, filters=only)]
        assert set(direct) <= set(kept) and set(direct[:3]) == set(ppr[:3])
        assert direct[:3] == [s for s in alone if s in ppr[:3]], q


def test_it_orders_the_best_three_by_default() -> None:
    assert MemGASConfig().direct_window == 3
