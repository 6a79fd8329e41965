"""Retrieval metrics against hand-computed values (LongMemEval and LoCoMo official definitions)."""

from __future__ import annotations

import pytest

from memgas.bench.metrics import (
    LME_KS,
    aggregate,
    dcg,
    locomo_recall,
    ndcg_any_at_k,
    recall_all_at_k,
    recall_any_at_k,
    retrieval_scores,
    session_scores_from_turns,
    sessions_from_turn_ranking,
)
from memgas.core.errors import InvalidInputError
from memgas.core.validate import make_session

# 1 / log2(3), the discount of rank 3
D3 = 0.6309297535714575


def test_dcg_first_rank_is_not_discounted() -> None:
    # 1 + 0/log2(2) + 1/log2(3)
    assert dcg([1, 0, 1], 3) == pytest.approx(1.6309297535714575)
    # 1/log2(2) = 1: ranks 1 and 2 weigh the same
    assert dcg([0, 1], 2) == pytest.approx(1.0)
    assert dcg([1, 1, 1], 1) == pytest.approx(1.0)
    assert dcg([], 3) == 0.0


def test_recall_any_and_all() -> None:
    ranked = ["x", "g1", "y", "g2", "z"]
    gold = {"g1", "g2"}
    assert recall_any_at_k(ranked, gold, 1) == 0.0
    assert recall_any_at_k(ranked, gold, 2) == 1.0
    assert recall_all_at_k(ranked, gold, 3) == 0.0
    assert recall_all_at_k(ranked, gold, 4) == 1.0


def test_ndcg_gold_at_ranks_2_and_4() -> None:
    # DCG = 1/log2(2) + 1/log2(4) = 1.5; IDCG = 1 + 1/log2(2) = 2
    assert ndcg_any_at_k(["x", "g1", "y", "g2", "z"], {"g1", "g2"}, 5) == pytest.approx(0.75)


def test_ndcg_gold_at_ranks_1_and_3() -> None:
    # DCG = 1 + 1/log2(3) = 1.63093; IDCG = 2
    assert ndcg_any_at_k(["g1", "x", "g2"], {"g1", "g2"}, 3) == pytest.approx(0.8154648767857288)


def test_ndcg_ideal_is_capped_at_k() -> None:
    # 3 gold, k = 2: IDCG = 1 + 1 = 2, DCG = 1 (a at rank 1, b at rank 3 is cut)
    assert ndcg_any_at_k(["a", "x", "b", "c"], {"a", "b", "c"}, 2) == pytest.approx(0.5)
    assert ndcg_any_at_k(["x", "a"], {"a"}, 1) == 0.0


def test_k_larger_than_the_ranking() -> None:
    ranked, gold = ["x", "g"], {"g"}
    assert recall_any_at_k(ranked, gold, 10) == 1.0
    assert recall_all_at_k(ranked, gold, 10) == 1.0
    # DCG = 1/log2(2) = 1, IDCG = 1
    assert ndcg_any_at_k(ranked, gold, 10) == pytest.approx(1.0)


def test_truncated_ranking_still_counts_missing_gold_in_the_ideal() -> None:
    # g2 was not ranked at all: IDCG still has two relevant items (= 2), DCG = 1
    assert ndcg_any_at_k(["g1", "x"], {"g1", "g2"}, 5) == pytest.approx(0.5)
    assert recall_all_at_k(["g1", "x"], {"g1", "g2"}, 5) == 0.0


def test_empty_gold_follows_the_official_code() -> None:
    assert recall_any_at_k(["a", "b"], set(), 5) == 0.0
    assert recall_all_at_k(["a", "b"], set(), 5) == 1.0  # all([]) officially
    assert ndcg_any_at_k(["a", "b"], set(), 5) == 0.0


def test_duplicated_ids() -> None:
    assert recall_any_at_k(["a", "a", "b"], {"a", "b"}, 2) == 1.0
    assert recall_all_at_k(["a", "a", "b"], {"a", "b"}, 2) == 0.0
    # each position scores: rel = [0, 1, 1], R = 2 → DCG = 1 + 1/log2(3), IDCG = 2
    assert ndcg_any_at_k(["x", "a", "a"], {"a"}, 3) == pytest.approx(0.8154648767857288)


@pytest.mark.parametrize("k", [0, -1, True, 2.0])
def test_invalid_k(k: object) -> None:
    with pytest.raises(InvalidInputError, match="invalid k"):
        recall_any_at_k(["a"], {"a"}, k)  # type: ignore[arg-type]


def test_retrieval_scores_covers_every_k() -> None:
    scores = retrieval_scores(["x", "g1", "y", "g2", "z"], {"g1", "g2"}, ks=(1, 5))
    assert scores == pytest.approx(
        {
            "recall_any@1": 0.0,
            "recall_all@1": 0.0,
            "ndcg_any@1": 0.0,
            "recall_any@5": 1.0,
            "recall_all@5": 1.0,
            "ndcg_any@5": 0.75,
        }
    )
    assert LME_KS == (1, 3, 5, 10, 30, 50)
    assert len(retrieval_scores(["a"], {"a"})) == 3 * len(LME_KS)


def test_sessions_from_turn_ranking_grows_the_cutoff() -> None:
    ranked = [("s1", 0), ("s1", 2), ("s2", 1), ("s1", 1), ("s3", 0)]
    assert sessions_from_turn_ranking(ranked, 1) == ["s1"]
    assert sessions_from_turn_ranking(ranked, 2) == ["s1", "s2"]
    assert sessions_from_turn_ranking(ranked, 3) == ["s1", "s2", "s3"]
    assert sessions_from_turn_ranking(ranked, 10) == ["s1", "s2", "s3"]
    assert sessions_from_turn_ranking([], 3) == []


def test_sessions_from_official_turn_ids_strip_the_last_part() -> None:
    ranked = ["answer_ab_3", "answer_ab_5", "sharegpt_x_0_1", "f2_2"]
    assert sessions_from_turn_ranking(ranked, 2) == ["answer_ab", "sharegpt_x_0"]
    with pytest.raises(InvalidInputError, match="invalid turn id"):
        sessions_from_turn_ranking(["nounderscore"], 1)


# Gold turns A/1, A/3, B/0. A/0 and B/2 sit in gold sessions but are not gold: officially they are
# renamed noans_*, so they count as other sessions and reach nothing.
GOLD_TURNS = {("A", 1), ("A", 3), ("B", 0)}
RANKED_TURNS = [("A", 0), ("C", 0), ("A", 1), ("B", 2), ("A", 3), ("B", 0), ("C", 1)]


def test_session_scores_from_turns_by_hand() -> None:
    s = session_scores_from_turns(RANKED_TURNS, GOLD_TURNS, ks=(1, 2, 3, 4, 5))
    # k = 1, 2: the prefix (noans A, C) holds no gold turn
    for k in (1, 2):
        assert (s[f"recall_any@{k}"], s[f"recall_all@{k}"], s[f"ndcg_any@{k}"]) == (0.0, 0.0, 0.0)
    # k = 3: cutoff 3, gold A/1 at rank 3; DCG = 1/log2(3), IDCG = 1 + 1 + 1/log2(3) (3 gold turns)
    assert (s["recall_any@3"], s["recall_all@3"]) == (1.0, 0.0)
    assert s["ndcg_any@3"] == pytest.approx(0.23981246656813146)
    # k = 4: cutoff 4 (noans B is the 4th "session"): same DCG, IDCG over min(3, 4) gold turns
    assert s["ndcg_any@4"] == pytest.approx(0.23981246656813146)
    # k = 5: cutoff 6 (A/3 adds no session; B/0 does). DCG = 1/log2(3) + 1/log2(5) + 1/log2(6)
    assert (s["recall_any@5"], s["recall_all@5"]) == (1.0, 1.0)
    assert s["ndcg_any@5"] == pytest.approx(0.5505502824289114)


def test_session_scores_from_official_string_ids_match_tuples() -> None:
    def official(turn: tuple[str, int]) -> str:
        sid = f"answer_{turn[0]}" if turn[0] in "AB" else f"f{turn[0]}"
        tid = f"{sid}_{2 * turn[1] + 1}"
        return tid if turn in GOLD_TURNS or sid.startswith("f") else tid.replace("answer", "noans")

    strings = session_scores_from_turns([official(t) for t in RANKED_TURNS], {official(t) for t in GOLD_TURNS})
    tuples = session_scores_from_turns(RANKED_TURNS, GOLD_TURNS)
    assert strings == pytest.approx(tuples)
    # with k = 1 the plain session rule would reach A; the official rule does not
    assert sessions_from_turn_ranking(RANKED_TURNS, 1) == ["A"]
    assert tuples["recall_any@1"] == 0.0


def test_locomo_recall_session_level() -> None:
    evidence = {"D1:2", "D2:5", "D3:1"}
    assert locomo_recall(["S1", "S3"], evidence) == pytest.approx(2 / 3)
    assert locomo_recall(["S2", "S1", "S3"], evidence) == 1.0
    # S1 must not cover session 10
    assert locomo_recall(["S1"], ["D10:3"]) == 0.0


def test_locomo_recall_dialogue_level_and_mixed() -> None:
    assert locomo_recall(["D1:2", "D2:4"], ["D1:2", "D2:5"]) == 0.5
    assert locomo_recall(["S2", "D1:2"], {"D1:2", "D2:5", "D3:1"}) == pytest.approx(2 / 3)
    # a repeated evidence id counts twice, as in the official list
    assert locomo_recall(["S1"], ["D1:1", "D1:1", "D2:1"]) == pytest.approx(2 / 3)


def test_locomo_recall_edge_cases() -> None:
    assert locomo_recall(["S1"], set()) == 1.0
    assert locomo_recall([], {"D1:1"}) == 0.0
    with pytest.raises(InvalidInputError, match="evidence id"):
        locomo_recall(["S1"], ["D"])


def test_aggregate_overall_and_by_group() -> None:
    rows = [
        {"qtype": "a", "r@5": 1.0, "n@5": 0.5, "scorable": True, "qid": "q1"},
        {"qtype": "a", "r@5": 0.0, "n@5": 0.25, "scorable": True, "qid": "q2"},
        {"qtype": "b", "r@5": 1, "n@5": 1.0, "scorable": True, "qid": "q3"},
    ]
    out = aggregate(rows, by="qtype")
    assert out["by"] == "qtype"
    assert out["overall"] == pytest.approx({"n": 3, "r@5": 2 / 3, "n@5": 0.5833333333333334})
    assert out["groups"] == {"a": {"n": 2, "r@5": 0.5, "n@5": 0.375}, "b": {"n": 1, "r@5": 1.0, "n@5": 1.0}}
    assert list(aggregate(rows)["groups"]) == []
    assert aggregate(rows, metrics=["n@5"])["overall"] == pytest.approx({"n": 3, "n@5": 0.5833333333333334})


def test_aggregate_skips_metrics_absent_from_some_rows() -> None:
    rows = [{"r": 1.0, "latency": 3.0}, {"r": 0.0}]
    assert aggregate(rows)["overall"] == {"n": 2, "r": 0.5}


def test_aggregate_errors_and_empty_input() -> None:
    assert aggregate([], by="qtype") == {"overall": {"n": 0}, "by": "qtype", "groups": {}}
    with pytest.raises(InvalidInputError, match="not a number"):
        aggregate([{"r": 1.0}, {"r": None}], metrics=["r"])
    with pytest.raises(InvalidInputError, match="group by"):
        aggregate([{"r": 1.0, "qtype": "a"}, {"r": 0.0}], by="qtype")


def test_newest_first_asks_whether_the_newest_evidence_leads() -> None:
    from memgas.bench.metrics import newest_first

    assert newest_first(["new", "x", "old"], ["old", "new"]) == 1.0
    assert newest_first(["old", "new"], ["old", "new"]) == 0.0
    assert newest_first(["x", "mid", "new", "old"], ["old", "mid", "new"]) == 0.0  # every older one must trail
    assert newest_first(["new"], ["old", "new"]) == 1.0  # an older one missing from the ranking trails it
    assert newest_first(["old"], ["old", "new"]) == 0.0
    with pytest.raises(InvalidInputError, match="two gold sessions"):
        newest_first(["a"], ["a"])


def test_the_report_gives_the_newest_first_rate_of_update_questions() -> None:
    from memgas.bench.report import markdown_table, project_metrics
    from memgas.bench.runner import BenchResult

    def question(qtype: str, ranked: list[str], gold: list[str] | None, past: bool = False) -> dict:
        q = {"qid": ranked[0], "type": qtype, "methods": {"m": {"sessions": ranked, "turns": [], "metrics": {
            "session_recall_any@5": 1.0, "session_recall_all@5": 1.0, "turn_locomo_recall@10": 1.0}}}}
        if gold is not None:
            q["gold_by_time"], q["asks_about_the_past"] = gold, past
        return q

    result = BenchResult("longmemeval", {"ks": [5]}, questions=[
        question("knowledge-update", ["b", "a"], ["a", "b"]), question("knowledge-update", ["a", "b"], ["a", "b"]),
        question("knowledge-update", ["c"], None), question("multi-session", ["a", "b"], ["b", "a"]),
        question("knowledge-update", ["b", "m", "a"], ["a", "m", "b"], past=True),  # wants the oldest: trails
        question("knowledge-update", ["a", "b", "m"], ["a", "m", "b"], past=True)])  # the oldest leads
    assert project_metrics(result) == {"m": {"newest_first": 0.5, "newest_first_n": 4.0,
                                             "newest_first_present": 0.5, "newest_first_present_n": 2.0,
                                             "oldest_first_past": 0.5, "oldest_first_past_n": 2.0}}
    table = markdown_table(result)
    assert "newest first (update questions, 2+ dated evidence sessions) (n=4)" in table
    assert "oldest first, questions about an earlier state (n=2)" in table
    assert project_metrics(BenchResult("locomo", {"ks": [5]}, questions=[question("single-hop", ["a"], None)])) == {}


def test_the_report_gives_recall_all_by_evidence_spread_and_speakers() -> None:
    from memgas.bench.report import markdown_table, project_metrics
    from memgas.bench.runner import BenchResult

    def question(n_gold: int, speakers: int | None, recall_all: float) -> dict:
        q = {"qid": "q", "type": "multi-hop", "n_gold_sessions": n_gold, "methods": {"m": {"sessions": [], "turns": [],
             "metrics": {"session_recall_all@5": recall_all, "session_recall_any@5": 1.0,
                         "turn_locomo_recall@10": 1.0}}}}
        if speakers is not None:
            q["gold_speakers"] = speakers
        return q

    result = BenchResult("locomo", {"ks": [5]}, questions=[question(2, 2, 0.0), question(3, 2, 1.0), question(1, 1, 1.0),
                                                          question(1, None, 0.0)])
    got = project_metrics(result)["m"]
    assert got == {"multi_session_recall_all@5": 0.5, "multi_session_recall_all@5_n": 2.0,
                   "two_speaker_recall_all@5": 0.5, "two_speaker_recall_all@5_n": 2.0,
                   "one_speaker_recall_all@5": 1.0, "one_speaker_recall_all@5_n": 1.0}
    assert "S recall_all@5, evidence from both speakers (n=2)" in markdown_table(result)


def test_evidence_speakers_reads_who_said_each_evidence_message() -> None:
    from memgas.bench.datasets import BenchQuestion, evidence_speakers

    msgs = [{"role": "user", "content": "I adopted a cat", "name": "Ann"},
            {"role": "assistant", "content": "Lovely", "name": "Bo"}, {"role": "user", "content": "Named Tom", "name": "Ann"}]
    session = make_session(msgs, user_id="u", session_id="S1", metadata={"dia_ids": ["D1:1", "D1:2", "D1:3"]})

    def ask(ids: set[str]) -> BenchQuestion:
        return BenchQuestion("q", "?", "", "single-hop", None, [session], {"S1"}, set(), ids, True, None, "c")

    assert evidence_speakers(ask({"D1:1", "D1:3"})) == {"Ann"}
    assert evidence_speakers(ask({"D1:1", "D1:2", "D9:9"})) == {"Ann", "Bo"}  # an unknown id names no one
    plain = make_session(msgs[:1], user_id="u", session_id="S2")
    assert evidence_speakers(BenchQuestion("q", "?", "", "x", None, [plain], set(), set(), {"S2_1"}, True, None, "c")) == set()
