"""``memgas bench`` end to end on tiny fixtures the test writes (never the shared data)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from memgas.cli.commands import main
from support.datasets import lme_records, locomo_sample


def lme_file(folder: Path) -> Path:
    """The shipped LongMemEval-format sample (tests/support/datasets.py) as a file in ``folder``."""
    data = folder / "lme.json"
    data.write_text(json.dumps(lme_records()))
    return data


def _report_row(report: str, method: str) -> dict[str, str]:
    """The main table's row of ``method`` in a bench report, column heading → cell (bold marks dropped)."""
    lines = report.splitlines()
    head = next(line for line in lines if line.startswith("| method | S "))
    row = next(line for line in lines if line.startswith(f"| {method} | "))
    cells = [c.strip() for c in row.replace("**", "").strip("|").split("|")]
    return dict(zip((c.strip() for c in head.strip("|").split("|")), cells))


def test_longmemeval_bench_writes_three_outputs_and_prints_the_table(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("MEMGAS_CACHE_DIR", str(tmp_path / "cache"))
    records = lme_records()
    # A question BM25 answers knowably: its words are "pasta", "recip", "recommend" (all three in
    # filler_1's one user turn) and "adopt", "cat" (both in answer_c1 turn 1), each in one turn only.
    records[2]["question"] = "Which pasta recipe did you recommend, and did I adopt a cat?"
    data = tmp_path / "lme.json"
    data.write_text(json.dumps(records))
    out = tmp_path / "out"
    argv = ["bench", "longmemeval", "--data", str(data), "--out", str(out), "--method", "memgas,bm25,dense-turn",
            "--k", "1,3,5,10", "--no-progress", "--stores", str(tmp_path / "stores")]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "| memgas |" in printed and "| bm25 |" in printed and "S recall_all@5" in printed
    for name in ("results.json", "report.md", "recall_at_k.png"):
        assert (out / name).stat().st_size > 0
    assert (out / "recall_at_k.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    results = json.loads((out / "results.json").read_text())
    assert results["versions"]["memgas"] and results["config"]["ks"] == [1, 3, 5, 10]
    assert results["skipped"] == {"abstention": 1, "no user-side has_answer turn": 1}
    scored = results["questions"]
    assert [q["qid"] for q in scored] == ["q3 multi"] and set(scored[0]["methods"]) == {"memgas", "bm25", "dense-turn"}

    # BM25 (user side) on q3: filler_1's turn matches 3 query words in 3 tokens, answer_c1 turn 1 matches 2 in 4
    # (every matched word in one turn, so one idf), no other turn matches any. filler_2 is listed twice in the
    # haystack but stored once, and like answer_c2 it scores 0, so it ranks after the gold session either way.
    # Unmatched turns follow by their session's score, then turn index: answer_c1's 0, 2, 3 come next.
    bm25 = scored[0]["methods"]["bm25"]
    assert bm25["sessions"][:2] == ["filler_1", "answer_c1"]
    assert bm25["turns"][:5] == ["filler_1#0", "answer_c1#1", "answer_c1#0", "answer_c1#2", "answer_c1#3"]
    # Gold session: answer_c1 alone (answer_c2's evidence is assistant-side), at rank 2. DCG does not discount
    # ranks 1 and 2 (1/log2(2) = 1) and the ideal DCG of one gold session is 1, so ndcg@k = 1 for k >= 2.
    # Gold turns: answer_c1 #1 and #3, at ranks 2 and 5. ndcg@3 = (1/log2 2) / (1 + 1/log2 2) = 0.5;
    # ndcg@5 = (1/log2 2 + 1/log2 5) / 2 = 0.7153; recall_any@3 = 1 but recall_all@3 = 0 (#3 is 5th).
    want = {"session_recall_any@1": 0.0, "session_recall_all@1": 0.0, "session_ndcg_any@1": 0.0}
    for k in (3, 5, 10):
        want |= {f"session_recall_any@{k}": 1.0, f"session_recall_all@{k}": 1.0, f"session_ndcg_any@{k}": 1.0}
    want |= {"turn_recall_any@1": 0.0, "turn_recall_all@1": 0.0, "turn_ndcg_any@1": 0.0,
             "turn_recall_any@3": 1.0, "turn_recall_all@3": 0.0, "turn_ndcg_any@3": 0.5}
    for k in (5, 10):
        want |= {f"turn_recall_any@{k}": 1.0, f"turn_recall_all@{k}": 1.0,
                 f"turn_ndcg_any@{k}": pytest.approx((1 + 1 / math.log2(5)) / 2)}
    assert bm25["metrics"] == want
    assert results["summary"]["bm25"] == want  # the mean over the one scored question
    row = _report_row((out / "report.md").read_text(), "bm25")
    assert {c: row[c] for c in ("S recall_any@5", "S ndcg_any@5", "T recall_all@10", "T ndcg_any@10")} == {
        "S recall_any@5": "1.000", "S ndcg_any@5": "1.000", "T recall_all@10": "1.000", "T ndcg_any@10": "0.715"}
    assert "T recall_all@50" not in row  # a headline column whose cut-off was not run (--k) is left out, not 0
    m = scored[0]["methods"]["memgas"]["metrics"]
    assert 0.0 <= m["session_recall_all@5"] <= m["session_recall_any@5"] <= 1.0

    # a second run reuses the kept stores and gives the same rankings
    assert main(argv) == 0
    again = json.loads((out / "results.json").read_text())
    assert [q["methods"]["memgas"]["sessions"] for q in again["questions"]] == [
        q["methods"]["memgas"]["sessions"] for q in scored]
    assert again["timing"]["ingest_reused"]["stores"] == len(scored)


def test_locomo_bench_scores_each_question_against_its_evidence(tmp_path: Path, capsys, monkeypatch) -> None:
    from datetime import datetime

    from memgas.methods import MemGAS

    monkeypatch.setenv("MEMGAS_CACHE_DIR", str(tmp_path / "cache"))
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps([locomo_sample()]))
    out = tmp_path / "out"
    asked_at = []
    rank = MemGAS.rank

    def recording_rank(self, store, user_id, query, *, query_time=None):
        asked_at.append(query_time)
        return rank(self, store, user_id, query, query_time=query_time)

    monkeypatch.setattr(MemGAS, "rank", recording_rank)
    assert main(["bench", "locomo", "--data", str(data), "--out", str(out), "--method", "memgas,bm25",
                 "--no-progress"]) == 0
    # each scored question reaches the method with its date: the conversation's latest session (S2)
    assert asked_at == [datetime(2023, 6, 20, 10, 4)] * 3
    results = json.loads((out / "results.json").read_text())
    assert results["config"]["ks"] == [1, 3, 5, 10]
    assert results["skipped"] == {"adversarial": 1, "no valid evidence": 2}
    q0, q1, q5 = results["questions"]
    assert [q0["qid"], q1["qid"], q5["qid"]] == ["conv-x_q0", "conv-x_q1", "conv-x_q5"]
    assert [q["n_gold_sessions"] for q in (q0, q1, q5)] == [1, 2, 1]
    # evidence in two sessions: oldest first, and whether the question asks about an earlier state (newest first)
    assert (q1["gold_by_time"], q1["asks_about_the_past"]) == (["S1", "S2"], False) and "gold_by_time" not in q0

    # BM25 (user side; a turn Ann does not open, S1#0, is indexed as "Bob: Hi Ann!"). Turns: S1#0 = [D1:1],
    # S1#1 = [D1:2, D1:3], S1#2 = [D1:4], S2#0 = [D2:1, D2:2].
    # q0 "What did Bob say about the pet?": only S1#1 holds "pet" (and "bob" too): the gold S1 and the gold
    # turn (D1:3) rank first. q5 "Painting when?": only S2#0 holds "paint": the gold S2 ranks first.
    for q, gold, turn in ((q0, "S1", "S1#1"), (q5, "S2", "S2#0")):
        r = q["methods"]["bm25"]
        assert r["sessions"][0] == gold and r["turns"][0] == turn
        assert all(v == 1.0 for v in r["metrics"].values()), q["qid"]
    # q1 "Pet and hobby?", evidence D1:1 (S1#0) and D2:2 (S2#0): S1#1 holds "pet", nothing holds "hobbi",
    # so S1 then S2, and S1#1, S1#0, S1#2, S2#0 (unmatched turns by session score, then turn index).
    r = q1["methods"]["bm25"]
    assert r["sessions"] == ["S1", "S2"] and r["turns"] == ["S1#1", "S1#0", "S1#2", "S2#0"]
    # S1 holds one of the two evidence turns: at k=1 recall_any = 1, recall_all = 0 and LoCoMo's recall = 1/2;
    # both gold sessions lead, so ndcg = 1 at every k. Turns: the gold ones are 2nd and 4th, so
    # ndcg@3 = (1/log2 2) / (1 + 1/log2 2) = 0.5 and ndcg@5 = (1 + 1/log2 4) / 2 = 0.75; the top 3 turns hold
    # D1:2, D1:3, D1:1, D1:4, so LoCoMo's turn recall@3 = 1/2 (D2:2 missing) and @1 = 0.
    want = {"session_recall_any@1": 1.0, "session_recall_all@1": 0.0, "session_locomo_recall@1": 0.5,
            "turn_recall_any@1": 0.0, "turn_recall_all@1": 0.0, "turn_ndcg_any@1": 0.0, "turn_locomo_recall@1": 0.0,
            "turn_recall_any@3": 1.0, "turn_recall_all@3": 0.0, "turn_ndcg_any@3": 0.5, "turn_locomo_recall@3": 0.5}
    for k in (1, 3, 5, 10):
        want[f"session_ndcg_any@{k}"] = 1.0
    for k in (3, 5, 10):
        want |= {f"session_recall_any@{k}": 1.0, f"session_recall_all@{k}": 1.0, f"session_locomo_recall@{k}": 1.0}
    for k in (5, 10):
        want |= {f"turn_recall_any@{k}": 1.0, f"turn_recall_all@{k}": 1.0, f"turn_ndcg_any@{k}": 0.75,
                 f"turn_locomo_recall@{k}": 1.0}
    assert r["metrics"] == want

    # the report averages the three questions: S lrecall@1 = (1 + 0.5 + 1) / 3, T ndcg_any@10 = (1 + 0.75 + 1) / 3
    report = (out / "report.md").read_text()
    assert _report_row(report, "bm25") == {
        "method": "bm25", "S lrecall@1": "0.833", "S lrecall@3": "1.000", "S lrecall@5": "1.000",
        "S recall_all@5": "1.000", "S ndcg_any@5": "1.000", "T lrecall@5": "1.000", "T lrecall@10": "1.000",
        "T recall_all@10": "1.000", "T ndcg_any@10": "0.917"}
    assert "| method | multi-hop (n=1) | single-hop (n=1) | temporal (n=1) |" in report
    assert "Skipped (as in the official scoring): 1 adversarial, 2 no valid evidence" in report


def test_missing_data_is_one_clear_line(tmp_path: Path, capsys) -> None:
    assert main(["bench", "locomo", "--data", str(tmp_path / "nope.json"), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not found" in err[0] and "--data" in err[0]


def test_unknown_method_is_refused(capsys) -> None:
    assert main(["bench", "locomo", "--method", "nope", "--no-progress"]) == 2
    assert "unknown method" in capsys.readouterr().err


def test_cost_bench_compares_add_with_embedding_once(tmp_path: Path, capsys) -> None:
    data = lme_file(tmp_path)
    out = tmp_path / "cost"
    assert main(["bench", "cost", "--data", str(data), "--sessions", "4", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "embed the same text once" in printed and "Memory.search" in printed
    result = json.loads((out / "cost.json").read_text())
    assert result["sessions"] >= 2 and result["add_first_s"] > 0 and result["embed_first_s"] > 0
    assert result["search_p50_ms"] > 0 and result["query_embed_p50_ms"] > 0


def test_locomo_first_sessions_with_an_llm_method_reports_llm_use(tmp_path: Path, capsys, monkeypatch) -> None:
    from support.openai_stub import OpenAIStub
    from support.scripted import zep_responder

    monkeypatch.setenv("MEMGAS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps([locomo_sample()]))
    out = tmp_path / "out"
    with OpenAIStub(zep_responder) as stub:
        assert main(["bench", "locomo", "--data", str(data), "--out", str(out), "--method", "zep,bm25-all",
                     "--max-sessions", "1", "--llm", f"openai:tiny@{stub.base_url}", "--llm-cache",
                     str(tmp_path / "llm.sqlite"), "--stores", str(tmp_path / "stores"), "--no-progress"]) == 0
        calls = len(stub.requests)
    report = (out / "report.md").read_text()
    assert "### locomo: 1 questions" in report  # only the question whose evidence is in session 1
    assert "2 evidence beyond the first 1 sessions" in report
    row = next(line for line in report.splitlines() if line.startswith("| zep | 4 |"))  # 4 messages in session 1
    assert row.split(" | ")[2] == f"{calls / 4:.2f}"  # one extraction call per message, no fact to judge
    results = json.loads((out / "results.json").read_text())
    assert results["config"]["max_sessions"] == 1 and results["llm_usage"]["zep"]["calls"] == calls == 4
    assert (tmp_path / "stores" / "first-1-sessions" / "locomo").is_dir()  # apart from full-conversation stores
    assert main(["bench", "longmemeval", "--max-sessions", "1", "--data", str(data), "--no-progress"]) == 2


@pytest.mark.slow
def test_one_session_bench_appends_one_message_at_a_time_and_asks_for_the_first(tmp_path: Path, capsys,
                                                                                monkeypatch) -> None:
    import numpy as np

    from memgas.bench.onesession import EARLY_FACT, QUESTION, SESSION, USER, thread_messages
    from memgas.store import open_store

    monkeypatch.setattr("memgas.bench.onesession.STRETCH", 4)
    monkeypatch.setattr("memgas.bench.onesession.EARLY", (3, 5))
    monkeypatch.setattr("memgas.bench.onesession.LATE", 4)
    data = lme_file(tmp_path)
    out = tmp_path / "one"
    assert main(["bench", "live", "--data", str(data), "--one-session", "10", "--window", "3", "--out", str(out),
                 "--no-progress"]) == 0
    printed = capsys.readouterr().out
    rows = [line for line in printed.splitlines() if line.startswith("| ") and "–" in line]
    assert [r.split(" | ")[0] for r in rows] == ["| 1–4", "| 5–8", "| 9–10"]
    result = json.loads((out / "results.json").read_text())
    ms = result["append_ms"]
    assert len(ms) == 10 and min(ms) > 0
    # append_ms is rounded to 0.01 ms and the figures were taken from the times themselves: one rounding apart
    near = pytest.approx
    assert result["stretches"][1]["p50_ms"] == near(float(np.percentile(ms[4:8], 50)), abs=0.06)
    assert result["stretches"][2]["p95_ms"] == near(float(np.percentile(ms[8:10], 95)), abs=0.06)
    growth = result["growth"]  # the last 4 appends' p50 against messages 3-5's
    assert growth["late"] == [7, 10] and growth["early_p50_ms"] == near(float(np.percentile(ms[2:5], 50)), abs=0.06)
    assert growth["late_p50_ms"] == near(float(np.percentile(ms[6:10], 50)), abs=0.06)
    assert f"Append p50 at messages 7–10: {growth['late_p50_ms']:.1f} ms; at 3–5:" in printed
    assert result["early_fact_found"] and "4721" in result["context"]  # said first, 10 messages back
    assert result["store_bytes"] > 0 and "The first message's fact in the last append's context (window 3): yes" in printed
    store = open_store(out / "one-session.sqlite")
    try:
        stored = [m.content for m in store.get_session(USER, SESSION).messages]
    finally:
        store.close()
    # one session: the fact, the data's first 9 messages in order, the question
    assert stored == [EARLY_FACT, *[m["content"] for m in thread_messages(data, 9)], QUESTION]
    assert main(["bench", "live", "--data", str(data), "--one-session", "1", "--out", str(out)]) == 2


@pytest.mark.slow
def test_live_bench_reports_each_checkpoint_from_one_add_and_search_per_session(tmp_path: Path, capsys,
                                                                                monkeypatch) -> None:
    import numpy as np

    from memgas.store import open_store

    monkeypatch.setattr("memgas.bench.live.COLD_RUNS", 1)  # each fresh process costs ~1.5 s
    data = lme_file(tmp_path)  # 6 distinct sessions over 3 haystacks (filler_1 shared)
    out = tmp_path / "live"
    assert main(["bench", "live", "--data", str(data), "--sessions", "5", "--checkpoints", "2,4,50",
                 "--window", "3", "--out", str(out), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    table = [line for line in printed.splitlines() if line.startswith("| ")]
    assert table[0].startswith("| sessions | window | units | add | embed session once | search right after add "
                               "| warm search | embed query once |")
    # 50 is beyond --sessions and dropped; the run ends on a row of its own (5)
    assert [line.split(" | ")[0] for line in table[1:4]] == ["| 2", "| 4", "| 5"]
    assert "`memgas --help`" in printed and "`memgas search -k 10` on the 5-session store" in printed

    result = json.loads((out / "results.json").read_text())
    assert result["command"].startswith("memgas bench live") and result["config"]["checkpoints"] == [2, 4, 5]
    add_s, after_ms = result["per_add"]["add_s"], result["per_add"]["search_after_add_ms"]
    assert len(add_s) == len(after_ms) == 5 and min(add_s) > 0 and min(after_ms) > 0
    rows = result["rows"]
    assert [r["sessions"] for r in rows] == [2, 4, 5] and [r["window"] for r in rows] == [1, 2, 2]
    for r in rows:  # a checkpoint's figures are those of the adds just before it
        window = slice(r["sessions"] - r["window"], r["sessions"])
        assert r["add_ms"]["p50"] == np.percentile(np.array(add_s[window]) * 1000, 50)
        assert r["search_after_add_ms"]["p95"] == np.percentile(after_ms[window], 95)
        for key in ("embed_add_ms", "warm_search_ms", "embed_query_ms"):
            assert 0 < r[key]["p50"] <= r[key]["p95"]
        assert r["rss_mb"] > 0 and r["store_mb"] > 0
    assert rows[0]["units"] < rows[1]["units"] < rows[2]["units"]
    store = open_store(out / "live.sqlite")
    try:
        stats = store.stats("live")
    finally:
        store.close()
    assert stats["sessions"] == 5 and sum(stats["units"].values()) == rows[-1]["units"]
    assert len(result["cold"]["help_s"]) == len(result["cold"]["search_s"]) == 1
    assert 0 < result["cold"]["help_s"][0] < result["cold"]["search_s"][0]


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_backend_puts_every_haystack_in_one_store_as_its_own_user_with_the_same_rankings(
        tmp_path: Path, monkeypatch, backend: str) -> None:
    from memgas.store import open_store

    monkeypatch.setenv("MEMGAS_CACHE_DIR", str(tmp_path / "cache"))
    data = lme_file(tmp_path)
    base = ["bench", "longmemeval", "--data", str(data), "--method", "memgas,bm25-all", "--no-progress"]
    assert main([*base, "--out", str(tmp_path / "mem")]) == 0
    shared = tmp_path / "shared.db"
    if backend == "postgresql":
        from support.pg import unavailable

        if unavailable():
            pytest.skip(unavailable())
        assert main([*base, "--out", str(tmp_path / "shared"), "--pg-temp"]) == 0  # a throwaway cluster
    else:
        for _ in range(2):  # the second run replaces the users the first left
            assert main([*base, "--out", str(tmp_path / "shared"), "--backend", str(shared)]) == 0
    alone, together = (json.loads((tmp_path / d / "results.json").read_text()) for d in ("mem", "shared"))
    assert together["config"]["backend"] == backend
    assert [q["methods"] for q in together["questions"]] == [q["methods"] for q in alone["questions"]]
    if backend == "sqlite":
        with open_store(shared) as store:
            users = store.list_users()
            assert len(users) == len(alone["questions"])  # every haystack once, after two runs
            assert all(len(store.list_sessions(u)) >= 2 for u in users)
        assert main([*base, "--backend", str(shared), "--stores", str(tmp_path / "s")]) == 2


@pytest.mark.slow
def test_store_bench_runs_clients_on_their_own_users_and_sessions(tmp_path: Path, capsys) -> None:
    from memgas.store import open_store

    data = lme_file(tmp_path)  # 6 distinct sessions
    out = tmp_path / "store"
    assert main(["bench", "store", "--data", str(data), "--clients", "2", "--sessions", "3", "--searches", "2",
                 "--out", str(out)]) == 0
    assert "| SQLite | 2 |" in capsys.readouterr().out
    run = json.loads((out / "results.json").read_text())["runs"][0]
    assert run["clients"] == 2 and run["add"]["n"] == 6 and run["search"]["n"] == 4
    for phase in ("add", "search"):
        assert run[phase]["per_s"] == run[phase]["n"] / run[phase]["wall_s"] > 0
    with open_store(out / "store.db") as store:
        users = store.list_users()
        sessions = [s.session_id for u in users for s in store.list_sessions(u)]
    assert len(users) == 2 and all(u.endswith(("-n2-c0", "-n2-c1")) for u in users)
    assert len(sessions) == len(set(sessions)) == 6  # each client adds sessions of its own


@pytest.mark.slow
def test_scale_replays_template_ingests_exactly(tmp_path: Path, embedder) -> None:
    from memgas.bench.backends import run_scale, template_users
    from memgas.methods import MemGAS
    from memgas.store import open_store

    data = lme_file(tmp_path)
    target = str(tmp_path / "scale.db")
    rows = run_scale(target, data, [2, 4], embedder, per_user=2, n_templates=3, probes=2)
    assert [(r["users"], r["sessions"]) for r in rows] == [(2, 4), (4, 8)]
    for r in rows:
        assert r["size_bytes"] > 0 and r["write_sessions_per_s"] > 0 and r["cached_user_bytes"] > 0
        assert 0 < r["cold"]["p50_ms"] <= r["cold"]["p95_ms"] and 0 < r["warm"]["p50_ms"]
    templates, _ = template_users(data, 3, 2, embedder)
    with open_store(target) as store, open_store(None) as fresh:
        assert store.list_users() == ["u000000", "u000001", "u000002", "u000003"]
        for session, *_ in templates[0]:  # what a real ingest of template 0's sessions writes
            MemGAS(embedder).ingest(fresh, session)
        want = _edges_by_unit(fresh, "template")
        assert want
        for user in ("u000000", "u000003"):  # users 0 and 3 replay template 0
            assert _edges_by_unit(store, user) == want


def _edges_by_unit(store, user_id: str) -> set[tuple[tuple, tuple, float]]:
    """A user's edges named by their units' (session, granularity, turns, chunk, text), not by store ids."""
    units = store.load_units(user_id)
    edges = store.load_edges(user_id)
    name = {int(i): (units.session_ids[r], int(units.granularity[r]), int(units.turn_start[r]),
                     int(units.chunk[r]), units.texts[r]) for r, i in enumerate(units.ids)}
    return {(name[int(s)], name[int(d)], round(float(w), 6)) for s, d, w in zip(edges.src, edges.dst, edges.weight)}


def test_qa_only_methods_are_refused_for_retrieval_before_any_data_is_read(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    from memgas.cli.commands import main

    assert main(["bench", "locomo", "--method", "memgas,comedy,full-history", "--data", str(tmp_path / "none.json"),
                 "--out", str(tmp_path / "out")]) == 2
    assert "comedy, full-history: QA only" in capsys.readouterr().err and not (tmp_path / "out").exists()


def test_a_stream_run_ranks_as_the_whole_run_and_reports_append_costs(tmp_path: Path, capsys, monkeypatch) -> None:
    """``--ingest both``: the same questions after each session was fed one exchange at a time through the append
    path; by the definition of an appended session the rankings are the whole run's, question by question."""
    monkeypatch.setenv("MEMGAS_CACHE_DIR", str(tmp_path / "cache"))
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps([locomo_sample()]))
    out = tmp_path / "out"
    assert main(["bench", "locomo", "--data", str(data), "--out", str(out), "--method", "memgas,bm25",
                 "--ingest", "both", "--no-progress"]) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["config"]["ingest"] == "both"
    for q in results["questions"]:
        assert set(q["methods"]) == {"memgas", "bm25", "memgas [stream]", "bm25 [stream]"}
        for m in ("memgas", "bm25"):
            whole, stream = q["methods"][m], q["methods"][m + " [stream]"]
            assert (stream["sessions"], stream["turns"], stream["metrics"]) == (
                whole["sessions"], whole["turns"], whole["metrics"])
    stream = results["timing"]["ingest [stream]"]
    from memgas.bench.datasets import load_locomo

    exchanges = sum(len(s.turns) for c in load_locomo(data)[0] for s in c.sessions)
    assert stream["appends"] == exchanges > len(load_locomo(data)[0][0].sessions)  # one append per exchange
    report = (out / "report.md").read_text()
    assert "| memgas [stream] |" in report and "Stream ingest (one exchange at a time" in report
    assert "Append costs not measured: append costs need 221 exchanges" in report  # the sample is too small
    assert main(["bench", "locomo", "--data", str(data), "--out", str(out), "--ingest", "sideways"]) == 2


def test_append_costs_time_one_exchange_appended_to_sessions_of_each_length(embedder) -> None:
    from memgas.bench.stream import append_costs, stream_markdown
    from memgas.core.errors import InvalidInputError
    from memgas.core.validate import make_session

    turns = [m for i in range(14) for m in ({"role": "user", "content": f"fact number {i}: I own {i} kayaks"},
                                             {"role": "assistant", "content": f"noted, {i} kayaks"})]
    sessions = [make_session(turns[:14], user_id="u", session_id="a"), make_session(turns[14:], user_id="u",
                                                                                   session_id="b")]
    costs = append_costs(sessions, embedder, lengths=(2, 8), appends=3, history_sessions=1)
    assert set(costs) == {"2", "8"}
    for c in costs.values():
        assert c["append_ms"] > 0 and c["embed_ms"] > 0 and c["warm_search_ms"] > 0 and c["appends"] == 3
        assert c["embed_ms"] < c["append_ms"]  # the model's share of an append, not more
    table = stream_markdown(costs)
    assert table.count("\n") == 5 and "Append at 8 exchanges / at 2:" in table
    with pytest.raises(InvalidInputError, match="need 15 exchanges of data, found 14"):
        append_costs(sessions, embedder, lengths=(2, 12), appends=2)
    with pytest.raises(InvalidInputError, match="at least one append"):
        append_costs(sessions, embedder, lengths=(2,), appends=0)


@pytest.mark.slow
def test_filters_bench_times_filtered_against_unfiltered_search(tmp_path: Path, capsys) -> None:
    data = lme_file(tmp_path)
    out = tmp_path / "filters"
    assert main(["bench", "filters", "--data", str(data), "--sessions", "4", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "filter keeping 10%" in printed and "right after an add" in printed
    result = json.loads((out / "filters.json").read_text())
    assert result["sessions"] == 4 and result["adds"] == 2 and result["method"] == "memgas"
    assert set(result["p50_ms"]) == {"none", "10%", "50%"} and all(v > 0 for v in result["p50_ms"].values())
    # 4 sessions in buckets 0-3: the 10% filter keeps one session, the 50% filter all four
    assert result["mean_hits"]["10%"] <= 1 and result["mean_hits"]["none"] >= result["mean_hits"]["50%"]
    assert result["after_add_p50_ms"] > 0 and result["after_add_warm_p50_ms"] > 0


def test_adapters_bench_times_each_adapter_beside_its_direct_call(tmp_path: Path, capsys) -> None:
    pytest.importorskip("langchain_core", reason="langchain-core is not installed")
    data = lme_file(tmp_path)
    out = tmp_path / "adapters"
    assert main(["bench", "adapters", "--data", str(data), "--sessions", "4", "--limit", "4", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "LangChain MemgasRetriever.invoke" in printed and "AsyncMemory" in printed
    result = json.loads((out / "adapters.json").read_text())
    assert result["sessions"] == 4 and result["adapters"]
    assert all(r["adapter_p50_ms"] > 0 and r["direct_p50_ms"] > 0 for r in result["adapters"].values())
    assert result["async_per_s"] > 0 and result["threads_per_s"] > 0 and result["searches"] == 8


@pytest.mark.slow
def test_ratelimit_bench_counts_what_one_key_gets_through(tmp_path: Path, capsys) -> None:
    out = tmp_path / "rl"
    assert main(["bench", "ratelimit", "--out", str(out)]) == 0  # a fresh SQLite file: one worker
    result = json.loads((out / "results.json").read_text())
    (row,) = result["rows"]
    assert row["workers"] == 1 and row["requests"] == row["allowed"] + row["refused"] + row["other"]
    assert row["refused"] > 0 and 0.75 <= row["ratio"] <= 1.25  # the burst and 5 a second, not more


@pytest.mark.slow
def test_users_bench_compares_round_robin_with_a_warm_user(tmp_path: Path, capsys, monkeypatch) -> None:
    data = lme_file(tmp_path)
    out = tmp_path / "users"
    assert main(["bench", "users", "--data", str(data), "--users", "3", "--sessions", "2", "--index-cache-mb",
                 "64,none,0.001,0.001:rebuild", "--http-workers", "1", "--out", str(out)]) == 0
    result = json.loads((out / "results.json").read_text())
    big, counted, tiny, rebuilt = result["rows"]
    # every index built once (its snapshot written) and kept; the warm user was built (and saved) before the round robin
    assert big["held_users"] == 3 and (big["builds"], big["loads"]) == (2, 1)
    assert counted["cache_mb"] is None and (counted["builds"], counted["loads"]) == (0, 3)  # read from the snapshots
    assert tiny["held_users"] == 1 and (tiny["builds"], tiny["loads"]) == (0, 3 * 4)  # nothing fits: a load a search
    assert not rebuilt["snapshots"] and (rebuilt["builds"], rebuilt["loads"]) == (3 * 4, 0)  # a build a search
    # the file with the snapshots, not less: six sessions' snapshots (hundreds of bytes, deflated) may fit in its pages
    assert 0 < result["store_bytes_per_session"] <= result["store_bytes_per_session_with_snapshots"]
    assert "snapshots off" in capsys.readouterr().out
    (http,) = result["http"]  # a real server answered every search
    assert http["workers"] == 1 and http["round_robin"]["p50_ms"] > 0 and http["warm"]["p50_ms"] > 0
    monkeypatch.chdir(tmp_path)
    for bad in ("lots", "1:sometimes"):
        assert main(["bench", "users", "--data", str(data), "--index-cache-mb", bad]) == 2
    assert not (tmp_path / "bench-out").exists()  # a refused command leaves no folder behind
    capsys.readouterr()
    assert main(["bench", "users", "--data", str(data), "--http-workers", "2", "--out", str(out)]) == 2
    assert "needs a PostgreSQL store" in capsys.readouterr().err


@pytest.mark.slow
def test_longreplies_bench_reports_recall_by_the_depth_of_the_fact(tmp_path: Path, capsys) -> None:
    out = tmp_path / "lr"
    assert main(["bench", "longreplies", "--method", "memgas,bm25", "--out", str(out)]) == 0
    rows = json.loads((out / "results.json").read_text())["rows"]
    assert [(r["method"], r["depth"]) for r in rows] == [(m, d) for m in ("memgas", "bm25")
                                                         for d in (0, 300, 700, 1100, 1500)]
    assert all(r["questions"] == 8 for r in rows)
    memgas = {r["depth"]: r for r in rows if r["method"] == "memgas"}
    assert memgas[0]["recall_1"] == 1.0 and memgas[1500]["mean_offset"] > 1000  # facts past the 300-char view
    assert "fact at ~0 chars: R@1 / MRR" in capsys.readouterr().out
    assert memgas[1500]["recall_1"] == 1.0  # the words only the tail of a reply holds are read there
    views = tmp_path / "views"
    assert main(["bench", "longreplies", "--method", "memgas", "--set", "reply_tail_weight=0", "--out",
                 str(views)]) == 0
    deep = [r for r in json.loads((views / "results.json").read_text())["rows"] if r["depth"] == 1500]
    assert deep[0]["recall_1"] < memgas[1500]["recall_1"]  # the views alone miss what the cut hid


def test_llm_units_write_a_retrieval_runs_summaries_and_keywords_into_stores_of_their_own(
        tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from memgas.store import open_store
    from support.openai_stub import OpenAIStub

    monkeypatch.setenv("MEMGAS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    stores = tmp_path / "stores"
    with OpenAIStub(lambda body: '{"summary": "Zorblax the marmot sleeps in the attic.", '
                                 '"keywords": ["zorblax", "marmot", "Marmot"]}') as stub:
        argv = ["bench", "longmemeval", "--data", str(lme_file(tmp_path)), "--method", "dense-summary",
                "--no-progress", "--no-llm-cache", "--stores", str(stores), "--out", str(tmp_path / "out"),
                "--llm", f"openai:tiny@{stub.base_url}", "--llm-units"]
        assert main(argv) == 0
        config = json.loads((tmp_path / "out" / "results.json").read_text())["config"]
        calls = len(stub.requests)
        assert config["llm_units"] == {"writer": f"llm:openai:{stub.base_url}:tiny", "written": calls, "fallbacks": 0}
        assert calls > 0
        assert f"units written by llm:openai:{stub.base_url}:tiny: {calls} sessions in this run, 0 fell back" in (
            tmp_path / "out" / "report.md").read_text()
        (key,) = [d.name for d in (stores / "longmemeval").iterdir()]
        for db in (stores / "longmemeval" / key).glob("*.db"):
            store = open_store(db)
            units = store.load_units(store.list_users()[0])
            summaries = [units.texts[i] for i in np.flatnonzero(units.mask("summary"))]
            keywords = [units.texts[i] for i in np.flatnonzero(units.mask("keyword"))]
            store.close()
            assert summaries and set(summaries) == {"Zorblax the marmot sleeps in the attic."}
            assert set(keywords) == {"zorblax, marmot"}  # one "Marmot" too many: deduplicated
        assert main(argv) == 0  # the kept stores: no call
        assert len(stub.requests) == calls
        assert json.loads((tmp_path / "out" / "results.json").read_text())["config"]["llm_units"]["written"] == 0
    assert main(argv[:-3]) == 0  # extractive units: stores of another key, beside these
    assert len({d.name for d in (stores / "longmemeval").iterdir()} - {key}) == 1


@pytest.mark.parametrize("argv, says", [
    (["--drills", "-1"], "--drills must be >= 0"),
    (["--seconds", "0"], "--seconds must be > 0"),
    (["--index-cache-mb", "lots"], "--index-cache-mb: expected one size"),
])
def test_cluster_bench_refuses_bad_options_in_one_line(tmp_path: Path, capsys, argv: list[str], says: str) -> None:
    """Before any cluster starts: nothing is made (no output folder)."""
    out = tmp_path / "cluster"
    assert main(["bench", "cluster", "--data", str(lme_file(tmp_path)), "--out", str(out), *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0] and not out.exists()


def test_locomo_contexts_are_read_by_who_said_the_evidence_with_the_message_anchors_beside(
        tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("MEMGAS_CACHE_DIR", str(tmp_path / "cache"))
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps([locomo_sample()]))
    out = tmp_path / "out"
    assert main(["bench", "locomo", "--data", str(data), "--out", str(out), "--contexts", "1000",
                 "--method", "memgas,vector-messages,hybrid-messages", "--no-progress"]) == 0
    q0, _, q5 = json.loads((out / "results.json").read_text())["questions"]
    for method in ("memgas", "vector-messages", "hybrid-messages"):
        said_by_bob, said_by_ann = q0["methods"][method]["metrics"], q5["methods"][method]["metrics"]
        # D1:3 is Bob's (speaker_b), D2:1 Ann's (speaker_a): a tiny conversation fits whole in 1,000 tokens
        assert said_by_bob["ctx1000_recall_speaker_b"] == 1.0 and "ctx1000_recall_speaker_a" not in said_by_bob
        assert said_by_ann["ctx1000_recall_speaker_a"] == 1.0 and "ctx1000_recall_speaker_b" not in said_by_ann
    report = (out / "report.md").read_text()
    assert "by who said them" in report and "| hybrid-messages | " in report


def test_latency_times_search_and_context_on_an_existing_store(tmp_path: Path, capsys, embedder) -> None:
    from memgas import Memory

    db = tmp_path / "m.db"
    with Memory(db, embedder=embedder) as mem:
        for i, topic in enumerate(("hiking in the alps", "baking sourdough bread", "learning the cello")):
            mem.add([{"role": "user", "content": f"Tell me more about {topic}, please."},
                     {"role": "assistant", "content": "Sure."}], user_id=f"u{i % 2}", session_id=f"s{i}")
    out = tmp_path / "out"
    assert main(["bench", "latency", "--backend", str(db), "--requests", "4", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("3 questions of 2 users") and "| p50 |" in printed  # every user message there is
    result = json.loads((out / "results.json").read_text())
    assert len(result["search_ms"]) == len(result["context_ms"]) == len(result["timeline_ms"]) == 3
    assert result["timeline_p95_ms"] >= result["timeline_p50_ms"] > 0 and "timeline of the question" in printed
    assert result["ratio_p50"] == pytest.approx(result["context_p50_ms"] / result["search_p50_ms"])
    embedded = [np.percentile(np.add(result[f"{call}_ms"], result["embed_ms"]), 50) for call in ("context", "search")]
    assert result["ratio_embedded_p50"] == pytest.approx(embedded[0] / embedded[1])
    assert f"{result['ratio_embedded_p95']:.1f}×" in printed and "with the embedding in both" in printed
    assert main(["bench", "latency", "--out", str(out)]) == 2  # no store named: one line
    assert "pass --backend" in capsys.readouterr().err
    assert main(["bench", "latency", "--backend", str(db), "--requests", "2", "--contexts", "4000",
                 "--out", str(out)]) == 0
    assert json.loads((out / "results.json").read_text())["max_tokens"] == 4000
    assert "context 4000 tokens" in capsys.readouterr().out
    assert main(["bench", "latency", "--backend", str(db), "--contexts", "1000,4000"]) == 2
    assert "one value" in capsys.readouterr().err


def test_longmemeval_bench_runs_the_question_types_asked_for(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("MEMGAS_CACHE_DIR", str(tmp_path / "cache"))
    data = lme_file(tmp_path)
    base = ["bench", "longmemeval", "--data", str(data), "--method", "bm25", "--no-progress"]
    out = tmp_path / "out"
    assert main([*base, "--types", "multi-session,single-session-user", "--out", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())
    assert [q["qid"] for q in results["questions"]] == ["q3 multi"] and results["skipped"] == {"abstention": 1}
    assert results["config"]["types"] == ["multi-session", "single-session-user"]
    capsys.readouterr()
    assert main([*base, "--types", "knowledge-update"]) == 2
    assert "no LongMemEval question is of type knowledge-update" in capsys.readouterr().err
    assert main([*base, "--types", "single-session-assistant"]) == 2  # its one question has no user-side evidence
    assert "can be scored" in capsys.readouterr().err
    assert main(["bench", "locomo", "--types", "multi-session", "--no-progress"]) == 2
