"""Memory methods over a real store: MemGAS parts, ablations, baselines, and rankings."""

from __future__ import annotations

import numpy as np
import pytest

from memgas.core.errors import InvalidInputError
from memgas.core.validate import make_session
from memgas.kernels.lexical import LexicalIndex
from memgas.methods import METHODS, NEEDS_LLM, QA_ONLY, MemGAS, get_method
from memgas.methods.memgas import association_edges, session_edges
from memgas.store import open_store

TOPICS = {
    "hike": ["I hiked the Timberline Trail on Mount Hood last weekend.", "The wildflowers near Ramona Falls were amazing."],
    "cook": ["I'm vegetarian and I can't stand cilantro.", "Lentil curry is my go-to weeknight dinner."],
    "code": ["My SUMIFS formula in Google Sheets keeps returning zero.", "The date column was stored as text."],
    "dog": ["My corgi Biscuit is four pounds overweight.", "The vet suggested less kibble and longer walks."],
    "hike2": ["Next month I want to hike to Mirror Lake near Mount Hood.", "I need new trail shoes for it."],
}


def _session(sid: str, lines: list[str], user: str = "u") -> object:
    msgs = []
    for line in lines:
        msgs += [{"role": "user", "content": line}, {"role": "assistant", "content": "Got it, tell me more."}]
    return make_session(msgs, user_id=user, session_id=sid, timestamp=f"2024-03-0{len(sid) % 9 + 1}T10:00:00")



@pytest.fixture(scope="module")
def filled(embedder):
    store = open_store(None)
    method = MemGAS(embedder)
    stats = [method.ingest(store, _session(sid, lines)) for sid, lines in TOPICS.items()]
    return store, stats


def test_session_edges_link_each_session_internally(embedder) -> None:
    units = MemGAS(embedder).build(_session("hike", TOPICS["hike"]))
    edges = session_edges(units)
    chunk_refs = {-(i + 1) for i, u in enumerate(units) if u.granularity == "session"}
    turn_refs = {-(i + 1) for i, u in enumerate(units) if u.granularity == "turn"}
    # every turn hangs off exactly one chunk; summary and keywords off every chunk
    for t in turn_refs:
        assert sum(1 for e in edges if t in (e.src, e.dst) and ({e.src, e.dst} & chunk_refs)) == 1
    assert all(0.05 <= e.weight <= 1.0 for e in edges)
    assert all(e.src < 0 and e.dst < 0 for e in edges)


def test_association_preselects_candidates_and_stays_within_granularity(embedder, filled) -> None:
    store, _ = filled
    table = store.load_units("u")
    units = MemGAS(embedder).build(_session("hike3", ["Mount Hood's Timberline Trail again, this time in snow."]))
    edges, decisions = association_edges(units, table, candidates=3)
    assert edges and sum(decisions.values()) == len(units)
    by_id = dict(zip(table.ids.tolist(), range(len(table))))
    per_unit: dict[int, int] = {}
    for e in edges:
        assert e.src < 0 and e.dst > 0
        new = units[-e.src - 1]
        old_row = by_id[e.dst]
        assert table.granularity[old_row] == ["session", "turn", "summary", "keyword"].index(new.granularity)
        per_unit[e.src] = per_unit.get(e.src, 0) + 1
    assert max(per_unit.values()) <= 3  # never more than the pre-selected candidates


def test_association_links_related_sessions(filled) -> None:
    store, stats = filled
    table = store.load_units("u")
    edges = store.load_edges("u")
    session_of = dict(zip(table.ids.tolist(), table.session_ids))
    cross = {tuple(sorted((session_of[a], session_of[b]))) for a, b in zip(edges.src.tolist(), edges.dst.tolist())
             if session_of[a] != session_of[b]}
    assert ("hike", "hike2") in cross
    assert stats[0].association == {}  # the first session has no history to associate with


# zep and the other LLM methods: their own tests, with a scripted LLM; QA-only methods rank nothing;
# mpnet needs optional model packages (tests/test_methods_mpnet.py)
@pytest.mark.parametrize("name", sorted(set(METHODS) - NEEDS_LLM - QA_ONLY - {"mpnet"}))
def test_every_method_ranks_every_session_and_turn(embedder, filled, name) -> None:
    store, _ = filled
    method = get_method(name, embedder)
    ranking = method.rank(store, "u", "Which mountain trail did I hike?")
    assert sorted(ranking.sessions) == sorted(TOPICS)
    assert len(ranking.turns) == sum(len(v) for v in TOPICS.values())
    assert ranking.sessions[0] in ("hike", "hike2"), name
    hits = method.search(store, "u", "my corgi's weight", k=2)
    assert len(hits) == 2 and hits[0].session_id == "dog" and hits[0].method == name


def test_memgas_hits_carry_router_weights_and_association_flag(embedder, filled) -> None:
    store, _ = filled
    hits = MemGAS(embedder).search(store, "u", "trail shoes for Mirror Lake", k=5)
    assert hits[0].session_id == "hike2"
    w = hits[0].weights
    assert set(w) == {"session", "turn", "summary", "keyword", "lexical"} and abs(sum(w.values()) - 1) < 1e-9
    scored = MemGAS(embedder).score(store, "u", "trail shoes for Mirror Lake")
    sessions = np.array(scored.index.table.session_ids)
    for h in hits:  # a hit's seed is its best unit's personalization; zero seed = reached only through edges
        assert h.seed_score == pytest.approx(float(scored.seed[sessions == h.session_id].max()))
        assert h.via_association == (h.seed_score == 0)
    assert hits[0].seed_score > 0


def test_ablations_change_only_their_part(embedder, filled) -> None:
    store, _ = filled
    q = "vegetarian dinner ideas"
    full = get_method("memgas", embedder, turn_seed=False).score(store, "u", q)  # turns: tests/test_ranking_v2.py
    no_router = get_method("memgas-no-router", embedder).score(store, "u", q)
    no_ppr = get_method("memgas-no-ppr", embedder, session_weight=0.0).score(store, "u", q)
    assert len(set(no_router.weights.values())) == 1  # uniform over the channels
    assert full.weights != no_router.weights
    # without PPR (and without session evidence) the scores are the (normalised) seeds themselves
    np.testing.assert_allclose(no_ppr.scores, no_ppr.seed / no_ppr.seed.sum())
    # session evidence adds one bonus per session on top of the max-scaled PageRank scores, the largest being β = 1
    no_session = get_method("memgas-no-session", embedder).score(store, "u", q)
    bonus = full.scores - no_session.scores / no_session.scores.max()
    for s in range(len(full.index.sessions)):
        in_s = bonus[full.index.session_of == s]
        np.testing.assert_allclose(in_s, in_s[0], atol=1e-12)
    assert bonus.max() == pytest.approx(1.0) and bonus.min() >= 0


def test_session_evidence_adds_one_bonus_per_session(embedder, filled) -> None:
    store, _ = filled
    q = "which trail did I hike with my corgi"
    # the formula before the best sessions are ordered by their direct evidence (direct_window, tested on its own)
    full = MemGAS(embedder, session_weight=2.0, turn_seed=False, direct_window=0).score(store, "u", q)
    plain = MemGAS(embedder, session_weight=0.0, direct_window=0).score(store, "u", q)
    np.testing.assert_allclose(full.seed, plain.seed)  # evidence does not touch the seeds
    bonus = full.scores - plain.scores / plain.scores.max()
    session_of = full.index.session_of
    per_session = [bonus[session_of == s] for s in range(len(full.index.sessions))]
    assert all(np.ptp(b) < 1e-9 for b in per_session)  # the same bonus for every unit of a session
    values = np.array([b[0] for b in per_session])
    assert values.min() >= 0 and abs(values.max() - 2.0) < 1e-9  # β times evidence scaled to a maximum of 1


def test_bm25_finds_rare_names(embedder, filled) -> None:
    store, _ = filled
    hits = get_method("bm25", embedder).search(store, "u", "SUMIFS", k=1)
    assert hits[0].session_id == "code"


def test_unknown_method_is_a_clear_error(embedder) -> None:
    with pytest.raises(InvalidInputError, match="unknown method 'magic'"):
        get_method("magic", embedder)


def test_a_parameter_the_method_does_not_take_is_a_clear_error(embedder) -> None:
    with pytest.raises(InvalidInputError, match="method 'bm25' takes no parameter 'current_first'; its parameters: "
                                                ".*bm25_k1"):
        get_method("bm25", embedder, current_first=True)
    with pytest.raises(InvalidInputError, match="method 'memgas' takes no parameter 'dampin'"):
        get_method("memgas", embedder, dampin=0.5)
    # what a method and the classes it builds on take is accepted: its own, its configuration's, the base's
    assert get_method("memgas", embedder, current_first=True, summarizer=None).cfg.current_first is True
    assert get_method("memgas-no-ppr", embedder, damping=0.3).cfg.use_ppr is False  # the fixed switch still wins


def test_users_do_not_see_each_other(embedder) -> None:
    store = open_store(None)
    m = MemGAS(embedder)
    m.ingest(store, _session("a", TOPICS["hike"], user="alice"))
    m.ingest(store, _session("b", TOPICS["hike2"], user="bob"))
    assert m.rank(store, "bob", "Mount Hood").sessions == ["b"]
    table = store.load_units("bob")
    edges = store.load_edges("bob")
    assert set(edges.src.tolist()) | set(edges.dst.tolist()) <= set(table.ids.tolist())


def test_time_prior_favours_sessions_in_the_named_window(embedder) -> None:
    from datetime import datetime

    store = open_store(None)
    m = MemGAS(embedder, time_weight=1.0)
    for sid, when in (("march", "2024-03-12T10:00:00"), ("april", "2024-04-10T10:00:00")):
        m.ingest(store, make_session(
            [{"role": "user", "content": "I spent two days at a design conference downtown."},
             {"role": "assistant", "content": "Sounds like a busy week."}],
            user_id="u", session_id=sid, timestamp=when))
    asked = datetime(2024, 5, 20, 9, 0)
    assert m.rank(store, "u", "How many days did I spend at conferences in April?", query_time=asked).sessions[0] == "april"
    assert m.rank(store, "u", "How many days did I spend at conferences in March?", query_time=asked).sessions[0] == "march"
    # no time expression: the prior does nothing, both score alike
    plain = m.score(store, "u", "How many days did I spend at conferences?", query_time=asked)
    assert np.allclose(plain.seed, MemGAS(embedder).score(store, "u", "How many days did I spend at conferences?").seed)


def _edge_set(store, user: str = "u") -> set[tuple[str, str, int, int]]:
    """Edges as (session, session, granularity, granularity) of their ends: comparable across stores."""
    table, edges = store.load_units(user), store.load_edges(user)
    row = {int(i): r for r, i in enumerate(table.ids)}
    out = set()
    for a, b in zip(edges.src.tolist(), edges.dst.tolist()):
        ra, rb = row[a], row[b]
        out.add((table.session_ids[ra], table.session_ids[rb], int(table.turn_start[ra]), int(table.turn_start[rb]),
                 int(table.granularity[ra]), int(table.granularity[rb])))
    return out


def test_association_sees_every_writer_and_every_delete(embedder) -> None:
    names = list(TOPICS)
    alone = open_store(None)
    one = MemGAS(embedder)
    for sid in names:
        one.ingest(alone, _session(sid, TOPICS[sid]))
    shared = open_store(None)
    a, b = MemGAS(embedder), MemGAS(embedder)  # two writers: each one's cached table goes stale in turn
    for i, sid in enumerate(names):
        (a if i % 2 == 0 else b).ingest(shared, _session(sid, TOPICS[sid]))
    assert _edge_set(shared) == _edge_set(alone)
    # after a delete the next add associates with what is left, exactly as a store that never had it
    shared.delete_session("u", names[1])
    a.ingest(shared, _session("again", TOPICS[names[1]]))
    fresh = open_store(None)
    c = MemGAS(embedder)
    for sid in [n for n in names if n != names[1]]:
        c.ingest(fresh, _session(sid, TOPICS[sid]))
    c.ingest(fresh, _session("again", TOPICS[names[1]]))

    def of_again(store) -> set:
        return {e for e in _edge_set(store) if "again" in e[:2]}

    assert of_again(shared) == of_again(fresh) and of_again(shared)


def test_relevance_tells_found_from_nothing_relevant(embedder, tmp_path) -> None:
    """``score`` ranks (the top hit scores 2.0 whatever the query); ``relevance`` is the query's best cosine
    with the session's units, so ``min_score=0.3`` (MiniLM) drops hits about nothing stored."""
    from memgas import Memory

    store = open_store(None)
    m = MemGAS(embedder)
    for sid, lines in [*TOPICS.items(), ("gamma", ["gamma"])]:
        m.ingest(store, _session(sid, lines))
    nothing = "quantum chromodynamics lecture notes"
    hits = m.search(store, "u", nothing, k=6)
    assert hits and hits[0].score == pytest.approx(2.0) and max(h.relevance for h in hits) < 0.3
    assert m.search(store, "u", nothing, k=6, min_score=0.3) == []
    q = "What did the vet say about my dog?"
    found = m.search(store, "u", q, k=6, min_score=0.3)
    assert [h.session_id for h in found] == ["dog"]
    table = store.load_units("u")
    best = float(max(v @ embedder.embed([q])[0] for v, s in zip(table.vectors, table.session_ids) if s == "dog"))
    assert found[0].relevance == pytest.approx(best, abs=1e-6) and found[0].to_dict()["relevance"] == round(best, 6)
    # the same session's relevance does not depend on what else is stored (unlike its score)
    alone = open_store(None)
    m.ingest(alone, _session("dog", TOPICS["dog"]))
    assert m.search(alone, "u", q, k=1)[0].relevance == pytest.approx(found[0].relevance, abs=1e-6)
    with Memory(tmp_path / "mem.db", embedder=embedder, embedding_cache=tmp_path / "emb.sqlite") as mem:
        for sid in ("dog", "code"):
            mem.add([{"role": "user", "content": line} for line in TOPICS[sid]], user_id="u", session_id=sid)
        assert mem.search(nothing, user_id="u", min_score=0.3) == []
        assert [h.session_id for h in mem.search(q, user_id="u", min_score=0.3)] == ["dog"]
        with pytest.raises(InvalidInputError, match="min_score"):
            mem.search(q, user_id="u", min_score=1.5)


def test_bm25_relevance_is_the_share_of_query_words_found(embedder, filled) -> None:
    store, _ = filled
    hits = get_method("bm25-all", embedder).search(store, "u", "SUMIFS spreadsheet", k=2)
    assert hits[0].session_id == "code" and hits[0].relevance == pytest.approx(0.5)  # "sumif" found, "spreadsheet" not
    assert get_method("bm25-all", embedder).search(store, "u", "SUMIFS spreadsheet", k=2, min_score=0.6) == []


def test_memgas_bm25_parameters_reach_the_index_built_whole_and_the_copy_an_update_makes(embedder) -> None:
    store = open_store(None)
    method = MemGAS(embedder)
    assert (method.cfg.bm25_k1, method.cfg.bm25_b) == (0.9, 0.4)
    for sid in ("hike", "cook"):
        method.ingest(store, _session(sid, TOPICS[sid]))
    first = method._indexes.get(store, "u")
    assert (first.lexical.k1, first.lexical.b) == (0.9, 0.4)
    method.ingest(store, _session("code", TOPICS["code"]))  # extends first's BM25 index in place
    MemGAS(embedder).ingest(store, _session("dog", TOPICS["dog"]))  # a writer this cache did not see
    assert len(first.lexical) > first.units.masks["turn"].size
    copied = method._update_index(store, "u", first)  # a later snapshot appended: the update starts a copy
    assert copied.lexical is not first.lexical and (copied.lexical.k1, copied.lexical.b) == (0.9, 0.4)
    fresh = MemGAS(embedder)._build_index(store, "u")
    query = "my corgi's overweight kibble"
    np.testing.assert_allclose(copied.lexical.scores(query), fresh.lexical.scores(query), rtol=0, atol=1e-12)
    other = MemGAS(embedder, bm25_k1=1.5, bm25_b=0.75)._build_index(store, "u").lexical.scores(query)
    assert not np.allclose(other, fresh.lexical.scores(query))  # the parameters change the scores


def test_bm25_baseline_takes_its_parameters(embedder, filled) -> None:
    store, _ = filled
    default, tuned = get_method("bm25", embedder), get_method("bm25", embedder, bm25_k1=0.9, bm25_b=0.4)
    assert (default.config()["bm25_k1"], default.config()["bm25_b"]) == (1.5, 0.75)
    assert (tuned.config()["bm25_k1"], tuned.config()["bm25_b"]) == (0.9, 0.4)
    q = "hike the trail near Mount Hood"
    docs, _ = tuned._indexes.get(store, "u")
    np.testing.assert_allclose(tuned.score(store, "u", q).scores,
                               LexicalIndex(docs.table.texts, k1=0.9, b=0.4).scores(q), rtol=0, atol=1e-12)
    assert not np.allclose(default.score(store, "u", q).scores, tuned.score(store, "u", q).scores)


def test_the_message_anchors_rank_messages_and_read_their_best_ones_until_the_budget(embedder, filled) -> None:
    store, _ = filled
    vector, hybrid = get_method("vector-messages", embedder), get_method("hybrid-messages", embedder)
    question = "How much does my corgi weigh?"
    cosine = vector.score(store, "u", question)
    fused = hybrid.score(store, "u", question)
    n = sum(len(store.get_session("u", s).messages) for s in TOPICS)
    assert len(cosine.scores) == len(fused.scores) == n  # one row per message, not per turn
    texts = cosine.index.table.texts
    assert texts[int(np.argmax(cosine.scores))] == texts[int(np.argmax(fused.scores))]
    assert "corgi" in texts[int(np.argmax(cosine.scores))].lower()
    assert not np.array_equal(np.argsort(-cosine.scores), np.argsort(-fused.scores))  # BM25 moved something
    block = vector.context(store, "u", question, max_tokens=60)
    lines = block.splitlines()
    assert lines[0].startswith("Memories from earlier conversations") and "corgi" in lines[1].lower()
    assert sum(len(line) for line in lines) <= 4 * 60 + 4  # within the budget (one token per four characters)
    assert len(vector.context(store, "u", question, max_tokens=400).splitlines()) > len(lines)
