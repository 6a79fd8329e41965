"""The temporal knowledge graph's pure core: dedup, invalidation, as_of, history, communities, fusion, parsing."""

from __future__ import annotations

from datetime import datetime

import networkx as nx
import numpy as np
import pytest

from memgas.core.errors import InvalidInputError
from memgas.kernels.fusion import reciprocal_rank_fusion
from memgas.kernels.temporal_graph import (
    Episode,
    Fact,
    TemporalGraph,
    Triple,
    Verdict,
    bfs_distances,
    community_messages,
    extraction_messages,
    extractive_community_summary,
    judge_messages,
    mmr,
    parse_community_summary,
    parse_triples,
    parse_verdict,
)

JAN, MAR, JUN = datetime(2024, 1, 1), datetime(2024, 3, 1), datetime(2024, 6, 1)


class CountingJudge:
    """A judge that returns fixed verdicts and records what it was asked (the LLM's place in the core)."""

    def __init__(self, *verdicts: Verdict) -> None:
        self.verdicts = list(verdicts)
        self.asked: list[tuple[Triple, list[int]]] = []

    def __call__(self, triple: Triple, candidates: list[Fact]) -> Verdict:
        self.asked.append((triple, [f.id for f in candidates]))
        return self.verdicts.pop(0)


def test_exact_and_near_duplicates_are_caught_without_the_judge() -> None:
    g = TemporalGraph()
    judge = CountingJudge()  # would raise IndexError if asked
    first = g.add_fact(Triple("Alice", "lives in", "Paris"), episode_id="s1#0", valid_at=JAN, judge=judge)
    same = g.add_fact(Triple("alice", "Lives  in", "Paris."), episode_id="s2#0", valid_at=MAR, judge=judge)
    assert first.kind == "new" and same.kind == "duplicate" and not same.by_llm
    assert same.fact.id == first.fact.id and first.fact.episodes == ["s1#0", "s2#0"]
    assert len(g.facts) == 1 and judge.asked == [] and g.judge_calls == 0


def test_a_different_object_goes_to_the_judge_with_the_entity_facts() -> None:
    g = TemporalGraph()
    g.add_fact(Triple("Alice", "lives in", "Paris"), episode_id="s1#0", valid_at=JAN)
    judge = CountingJudge(Verdict("new"))
    d = g.add_fact(Triple("Alice", "lives in", "London"), episode_id="s2#0", valid_at=MAR, judge=judge)
    assert d.kind == "new" and d.by_llm and judge.asked[0][1] == [0]
    assert {f.object for f in g.facts_of("alice")} == {"Paris", "London"}


def test_contradiction_invalidates_and_the_old_fact_stays_readable() -> None:
    g = TemporalGraph()
    old = g.add_fact(Triple("Alice", "lives in", "Paris"), episode_id="s1#0", valid_at=JAN).fact
    d = g.add_fact(Triple("Alice", "lives in", "London"), episode_id="s2#0", valid_at=MAR,
                   judge=CountingJudge(Verdict("contradiction", (old.id,))))
    assert d.kind == "contradiction" and d.invalidated == (old.id,)
    assert old.invalid_at == MAR and old.invalidated_by == d.fact.id
    assert [f.object for f in g.facts_of("Alice")] == ["London"]
    assert [f.object for f in g.facts_of("Alice", include_invalid=True)] == ["Paris", "London"]
    assert [f.object for f in g.history(d.fact.id)] == ["Paris", "London"] == [f.object for f in g.history(old.id)]


def test_facts_of_one_message_never_close_each_other() -> None:
    g = TemporalGraph()
    teva = g.add_fact(Triple("user", "owns", "Teva sandals"), episode_id="s1#4", valid_at=JAN).fact
    d = g.add_fact(Triple("user", "owns", "Merrell boots"), episode_id="s1#4", valid_at=JAN,
                   judge=CountingJudge(Verdict("contradiction", (teva.id,))))
    assert d.kind == "new" and d.invalidated == () and teva.invalid_at is None
    later = g.add_fact(Triple("user", "owns", "Sanuk shoes"), episode_id="s2#0", valid_at=MAR,
                       judge=CountingJudge(Verdict("contradiction", (teva.id,))))
    assert later.invalidated == (teva.id,) and teva.invalid_at == MAR


def test_a_late_arriving_older_fact_is_written_already_closed() -> None:
    g = TemporalGraph()
    now = g.add_fact(Triple("Alice", "works at", "Acme"), episode_id="s2#0", valid_at=MAR).fact
    d = g.add_fact(Triple("Alice", "works at", "Initech"), episode_id="s1#0", valid_at=JAN,
                   judge=CountingJudge(Verdict("contradiction", (now.id,))))
    assert now.invalid_at is None and d.fact.invalid_at == MAR and d.invalidated == ()
    assert [f.object for f in g.facts_of("Alice", as_of=datetime(2024, 2, 1))] == ["Initech"]


def test_as_of_is_inclusive_at_valid_at_and_exclusive_at_invalid_at() -> None:
    g = TemporalGraph()
    old = g.add_fact(Triple("Bob", "owns", "a bike"), episode_id="a#0", valid_at=JAN).fact
    g.add_fact(Triple("Bob", "owns", "a car"), episode_id="b#0", valid_at=JUN,
               judge=CountingJudge(Verdict("contradiction", (old.id,))))

    def objects(t: datetime) -> list[str]:
        return [f.object for f in g.facts_of("bob", as_of=t)]

    assert objects(datetime(2023, 12, 31, 23, 59)) == []
    assert objects(JAN) == ["a bike"]
    assert objects(datetime(2024, 5, 31, 23, 59)) == ["a bike"]
    assert objects(JUN) == ["a car"]
    with pytest.raises(InvalidInputError):
        g.facts_of(as_of=JUN, include_invalid=True)


def test_a_failing_judge_changes_nothing() -> None:
    g = TemporalGraph()
    g.add_fact(Triple("Alice", "lives in", "Paris"), episode_id="s1#0", valid_at=JAN)

    def broken(triple: Triple, candidates: list[Fact]) -> Verdict:
        raise RuntimeError("endpoint down")

    with pytest.raises(RuntimeError):
        g.add_fact(Triple("Alice", "lives in", "Rome"), episode_id="s2#0", valid_at=MAR, judge=broken)
    assert len(g.facts) == 1 and g.facts[0].invalid_at is None and "rome" not in g.entities


def test_new_entities_inherit_their_neighbours_community_and_batches_refresh() -> None:
    g = TemporalGraph(refresh_every=100)
    for a, b in [("Alice", "Bob"), ("Bob", "Carol"), ("Carol", "Alice"), ("Xavier", "Yann"), ("Yann", "Zoe")]:
        g.add_fact(Triple(a, "knows", b), episode_id="s#0", valid_at=JAN)
    labels = g.refresh_communities()
    assert sorted(map(sorted, labels.values())) == [["alice", "bob", "carol"], ["xavier", "yann", "zoe"]]
    alice, xavier = g.entities["alice"].community, g.entities["xavier"].community
    assert alice != xavier
    g.add_fact(Triple("Dan", "works with", "Carol"), episode_id="s#1", valid_at=JAN)
    assert g.entities["dan"].community == alice  # inherited, no refresh
    g.add_fact(Triple("Quinn", "plays", "chess"), episode_id="s#2", valid_at=JAN)
    assert g.entities["quinn"].community not in (alice, xavier)
    g2 = TemporalGraph(refresh_every=3)
    for a, b in [("A", "B"), ("B", "C"), ("C", "A")]:
        g2.add_fact(Triple(a, "knows", b), episode_id="s#0", valid_at=JAN)
    assert {e.community for e in g2.entities.values()} == {0}  # refreshed after the batch of 3
    assert g2.communities == {0: ["a", "b", "c"]}  # what summaries are written for, kept until the next batch
    g2.add_fact(Triple("D", "knows", "A"), episode_id="s#1", valid_at=JAN)
    assert g2.communities == {0: ["a", "b", "c"]} and g2.entities["d"].community == 0


def test_community_summary_prompt_parsing_and_fallback() -> None:
    facts = [Fact(0, "Anna", "lives in", "Berlin", JAN), Fact(1, "Anna", "works at", "Siemens", JAN)]
    messages = community_messages(["Anna", "Berlin", "Siemens"], facts)
    assert "ENTITIES: Anna, Berlin, Siemens" in messages[1]["content"]
    assert "- Anna works at Siemens" in messages[1]["content"]
    assert parse_community_summary({"summary": "  Anna lives in\nBerlin.  "}) == "Anna lives in Berlin."
    assert len(parse_community_summary({"summary": "x " * 2000}, max_chars=50)) == 50
    for bad in ({"summary": "  "}, {"text": "Anna"}, ["Anna"], None):
        with pytest.raises(InvalidInputError, match="community summary"):
            parse_community_summary(bad)
    assert extractive_community_summary(["Anna", "Berlin"], facts, max_facts=1) == "Anna, Berlin: Anna lives in Berlin."
    assert extractive_community_summary(["Anna"], []) == "Anna."


def test_episodes_are_kept_raw() -> None:
    g = TemporalGraph()
    ep = Episode("s1#0", "s1", 0, "user", "I moved to London.", MAR)
    g.add_episode(ep)
    assert g.episodes["s1#0"] is ep and ep.content == "I moved to London."


def test_rrf_fuses_partial_rankings() -> None:
    fused = reciprocal_rank_fusion([np.array([2, 0, 1]), np.array([2, 3])], n=5, k=60)
    assert fused[2] == pytest.approx(2 / 61)
    assert fused[0] == pytest.approx(1 / 62) and fused[3] == pytest.approx(1 / 62)
    assert fused[4] == 0 and np.argmax(fused) == 2


def test_mmr_skips_a_near_copy_of_the_first_pick() -> None:
    v = np.array([[1.0, 0.0], [0.999, 0.045], [0.0, 1.0]])
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    order = mmr(v, np.array([1.0, 0.95, 0.6]), np.arange(3), lam=0.5)
    assert order.tolist() == [0, 2, 1]
    assert mmr(v, np.array([1.0, 0.95, 0.6]), np.arange(3), lam=1.0).tolist() == [0, 1, 2]


def test_bfs_distances_stop_at_depth() -> None:
    g = nx.path_graph(["a", "b", "c", "d"])
    assert bfs_distances(g, ["a", "zz"], depth=2) == {"a": 0, "b": 1, "c": 2}


def test_parse_triples_validates_and_keeps_the_good_items() -> None:
    value = {"facts": [
        {"subject": " Alice ", "relation": "lives   in", "object": "London"},
        {"subject": "Alice", "relation": "lives in", "object": "london"},  # repeat
        {"subject": "Alice", "relation": "is", "object": "alice"},  # self-loop
        {"subject": "", "relation": "x", "object": "y"},
        {"subject": 3, "relation": "x", "object": "y"},
        "not an object",
    ]}
    assert parse_triples(value) == [Triple("Alice", "lives in", "London")]
    for bad in ([], {"facts": "none"}, {"triples": []}, None):
        with pytest.raises(InvalidInputError):
            parse_triples(bad)


def test_parse_verdict_maps_indexes_to_fact_ids() -> None:
    cands = [Fact(7, "a", "r", "b", JAN), Fact(9, "a", "r", "c", JAN)]
    verdict = parse_verdict({"verdict": "contradiction", "ids": [1, 0, 1, 5, True]}, cands)
    assert verdict == Verdict("contradiction", (9, 7))
    assert parse_verdict({"verdict": "duplicate", "ids": [1, 0]}, cands) == Verdict("duplicate", (9,))
    assert parse_verdict({"verdict": "duplicate", "ids": [4]}, cands) == Verdict("new")
    assert parse_verdict({"verdict": "new", "ids": [0]}, cands) == Verdict("new")
    with pytest.raises(InvalidInputError):
        parse_verdict({"verdict": "maybe"}, cands)


def test_prompts_carry_the_message_context_and_numbered_candidates() -> None:
    msgs = extraction_messages("I moved to London", "user", ["user: I live in Paris"], MAR)
    assert "CURRENT MESSAGE:\nuser: I moved to London" in msgs[1]["content"]
    assert "user: I live in Paris" in msgs[1]["content"] and "2024-03-01" in msgs[1]["content"]
    j = judge_messages(Triple("user", "lives in", "London"), [Fact(4, "user", "lives in", "Paris", JAN)])
    assert "0. user lives in Paris" in j[1]["content"] and "NEW FACT:\nuser lives in London" in j[1]["content"]
