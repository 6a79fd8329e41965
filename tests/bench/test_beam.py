"""``memgas bench beam`` on a hand-made BEAM-format conversation whose right answers are known (never the shared
data): the loader, the ranking and context measures, and the command end to end."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from memgas.bench.beam import ONE_USER, load_beam, one_user, strip_marker
from memgas.bench.context import context_metrics, shown_at, turns_context
from memgas.bench.runner import growth_rates
from memgas.cli.commands import main
from memgas.core.types import Message, Session

LONG_REPLY = ("Here is a long walkthrough of the deployment, step by step, with every command explained. " * 60
              + "The staging database listens on port 6543 behind the proxy. "
              + "More notes about logging, retries and dashboards follow here. " * 60)


def exchange(n: int, user: str, reply: str, anchor: str | None = None) -> list[dict]:
    u = {"role": "user", "id": 2 * n, "content": f"{user} ->-> 1,{n}", "index": f"1,{n}", "question_type": "main"}
    if anchor:
        u["time_anchor"] = anchor
    return [u, {"role": "assistant", "id": 2 * n + 1, "content": reply}]


def beam_folder(root: Path) -> Path:
    """One 100K-scale conversation of two dated batches, and its probing questions (ids are message ids)."""
    chat = [
        {"batch_number": 1, "time_anchor": None, "turns": [
            exchange(0, "I'm Ada, building a budget tracker in Flask.", "Great, let's plan it.", "March-15-2024"),
            exchange(1, "Always include version numbers when I ask about libraries.", "Noted."),
            exchange(2, "The dashboard API responds in 400ms right now.", "We can cache it."),
            exchange(3, "How do I deploy the app to staging?", LONG_REPLY),
            exchange(4, "I like hiking on weekends with my dog.", "Sounds fun."),
        ]},
        {"batch_number": 2, "time_anchor": None, "turns": [
            exchange(5, "I added the analytics page to the budget tracker.", "Nice progress.", "April-20-2024"),
            exchange(6, "After caching, the dashboard API responds in 250ms.", "A big improvement."),
            exchange(7, "My sister visited and we baked bread.", "Lovely."),
        ]},
    ]
    questions = {
        "instruction_following": [{"question": "Which libraries does my project use?", "source_chat_ids": [2]}],
        "knowledge_update": [{"question": "How fast is the dashboard API?",
                              "source_chat_ids": {"original_info": [4], "updated_info": [12]}}],
        "information_extraction": [{"question": "Which port does the staging database listen on?",
                                    "source_chat_ids": [7]}],
        "event_ordering": [{"question": "In what order did I work on the budget tracker?",
                            "source_chat_ids": [0, [10]]}],
        "abstention": [{"question": "What is my cat's name?", "ideal_response": "Not mentioned."}],
    }
    folder = root / "100K" / "1"
    folder.mkdir(parents=True)
    with gzip.open(folder / "chat.json.gz", "wt", encoding="utf-8") as f:
        json.dump(chat, f)
    (folder / "probing_questions.json").write_text(json.dumps(questions))
    return root


def test_the_loader_strips_markers_dates_batches_and_names_the_gold_messages(tmp_path: Path) -> None:
    [conv] = load_beam(beam_folder(tmp_path), ["100K"])
    assert [(s.session_id, f"{s.timestamp:%Y-%m-%d}", len(s.messages)) for s in conv.sessions] == [
        ("b1", "2024-03-15", 10), ("b2", "2024-04-20", 6)]
    assert conv.sessions[0].messages[0].content == "I'm Ada, building a budget tracker in Flask."
    assert conv.skipped == {"abstention: no gold evidence": 1}
    by_type = {q.qtype: q for q in conv.questions}
    ku = by_type["knowledge_update"]
    assert ku.gold_places == {"original_info": [("b1", 4)], "updated_info": [("b2", 2)]}
    assert ku.gold_messages["updated_info"] == ["After caching, the dashboard API responds in 250ms."]
    assert ku.gold_turns == {("b1", 2), ("b2", 1)} and ku.gold_sessions == {"b1", "b2"}
    assert by_type["event_ordering"].gold_places == {"all": [("b1", 0), ("b2", 0)]}  # a nested list, flattened
    assert strip_marker("Hi there ->-> 3,14") == "Hi there"


def test_a_gold_message_counts_by_a_contiguous_part_of_300_characters_or_half_of_it() -> None:
    long = "word " * 200
    assert shown_at(long, "x " + long[100:400] + " y") is not None  # 300 contiguous characters of a long message
    assert shown_at(long, long[:290]) is None
    assert shown_at("I live in Sellwood now", "... in Sellwood now!") is not None  # half of a short one
    assert shown_at("I live in Sellwood now", "Sellwood") is None
    assert shown_at("spaced   out\ntext here", "spaced out text here") == 0  # white space collapsed
    m = context_metrics({"original_info": ["old value 400ms"], "updated_info": ["new value 250ms"]},
                        "old value 400ms then new value 250ms", "c_")
    assert (m["c_recall"], m["c_any"], m["c_all"], m["c_current_first"]) == (1.0, 1.0, 1.0, 0.0)
    assert context_metrics({"all": ["a fact here"]}, "", "c_") == {"c_recall": 0.0, "c_any": 0.0, "c_all": 0.0,
                                                                   "c_tokens": 0.0}
    both = context_metrics({"original_info": ["one message 400ms"], "updated_info": ["one message 400ms"]},
                           "one message 400ms", "c_")
    assert "c_current_first" not in both  # the same message named as both: no order to measure


def test_a_plain_retrievers_context_is_its_best_turns_whole_then_a_cut_one() -> None:
    s = Session("u", "s", (Message("user", "first question"), Message("assistant", "a" * 400),
                           Message("user", "second question"), Message("assistant", "b" * 40)))
    text = turns_context({"s": s}, [("s", 1), ("s", 0)], 60)
    lines = text.splitlines()
    assert lines[1:4] == ["[1] undated · s", "user: second question", "assistant: " + "b" * 40]
    assert lines[4] == "[2] undated · s" and lines[5].startswith("user: first question") and text.endswith("…")
    assert turns_context({"s": s}, [], 60) == ""


@pytest.mark.slow
def test_bench_beam_measures_rankings_and_contexts_per_ability(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMGAS_CACHE_DIR", str(tmp_path / "cache"))
    root = beam_folder(tmp_path / "beam")
    shutil.copytree(root / "100K", root / "500K")  # a second scale (the same conversation), for the per-scale rows
    out = tmp_path / "out"
    assert main(["bench", "beam", "--data", str(root), "--scales", "100K,500K", "--method", "memgas,bm25",
                 "--contexts", "300,1000", "--out", str(out), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "Context at 300 tokens, share of gold messages in the context" in printed
    rows = [line for line in printed.splitlines() if line.startswith(("| 100K |", "| 500K |"))]
    assert len(rows) == 2 and all(len(row.strip("|").split("|")) == 2 + 2 * 2 for row in rows)  # scale, ingest, 2 × 2
    results = json.loads((out / "results.json").read_text())
    assert results["config"]["contexts"]["budgets"] == [300, 1000] and results["skipped"] == {
        "abstention: no gold evidence": 2}  # one per scale
    assert {q["conv"] for q in results["questions"]} == {"beam-100K-1", "beam-500K-1"}
    by_type = {q["type"]: q["methods"] for q in results["questions"] if q["conv"] == "beam-100K-1"}
    memgas = {t: m["memgas"]["metrics"] for t, m in by_type.items()}
    # the standing instruction heads the context of a later request about libraries
    assert memgas["instruction_following"]["ctx300_recall"] == 1.0
    # the updated value is shown above the original
    assert memgas["knowledge_update"]["ctx300_current_first"] == 1.0
    # the fact deep in a long reply is in the context (by any 300 characters of the reply, the rule)
    assert memgas["information_extraction"]["ctx300_recall"] == 1.0
    assert all(m["ctx1000_tokens"] <= 1000 and m["ctx300_tokens"] <= 300 for m in memgas.values())
    assert {"turn_msg_recall@5", "turn_msg_recall@20"} <= set(memgas["event_ordering"])
    assert "turn_current_first" in memgas["knowledge_update"]
    assert results["timing"]["memgas"]["context_p50_ms"] > 0 and results["timing"]["ingest"]["s_per_100k_tokens"] > 0
    assert main(["bench", "beam", "--data", str(root), "--scales", "1M", "--no-progress", "--out", str(out)]) == 2
    assert "BEAM scale '1M' not found" in capsys.readouterr().err


def test_one_user_holds_every_conversation_and_asks_each_question_of_the_whole(tmp_path: Path,
                                                                            capsys: pytest.CaptureFixture,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMGAS_CACHE_DIR", str(tmp_path / "cache"))
    root = beam_folder(tmp_path / "beam")
    shutil.copytree(root / "100K" / "1", root / "100K" / "2")  # a second conversation: the same words, other ids
    conversations = one_user(load_beam(root, ["100K"]))
    sessions = [s for c in conversations for s in c.sessions]
    assert {s.user_id for s in sessions} == {ONE_USER}
    assert sorted(s.session_id for s in sessions) == ["beam-100K-1/b1", "beam-100K-1/b2", "beam-100K-2/b1",
                                                      "beam-100K-2/b2"]
    [q] = [q for q in conversations[1].questions if q.qtype == "information_extraction"]
    assert q.conv_id == "beam-100K-2" and q.qid.startswith("beam-100K-2/") and len(q.sessions) == 4
    assert q.gold_sessions == {"beam-100K-2/b1"} and q.gold_places["all"] == [("beam-100K-2/b1", 7)]
    out = tmp_path / "out"
    shutil.copytree(root / "100K" / "1", root / "500K" / "1")  # and a second scale, for the per-scale rows
    assert main(["bench", "beam", "--data", str(root), "--scales", "100K,500K", "--method", "memgas", "--one-user",
                 "--contexts", "1000", "--out", str(out), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "One user who said everything" in printed and "context ÷ search" in printed
    assert "| 100K | one user (below) |" in printed
    results = json.loads((out / "results.json").read_text())
    ingested = results["config"]["ingest_by_group"]
    assert list(ingested) == [ONE_USER] and len(ingested[ONE_USER]["s_per_100k_by_tenth"]) == 10
    assert results["config"]["peak_rss_mb"] > 50
    assert {r["conv"] for r in results["questions"]} == {"beam-100K-1", "beam-100K-2", "beam-500K-1"}
    # each conversation's fact is found in the whole, and counted only from that conversation's own message
    found = {r["conv"]: r["methods"]["memgas"]["metrics"] for r in results["questions"]
             if r["type"] == "information_extraction"}
    assert found["beam-100K-1"]["ctx1000_recall"] == found["beam-100K-2"]["ctx1000_recall"] == 1.0


def test_one_user_runs_on_postgresql_too(tmp_path: Path, capsys: pytest.CaptureFixture, pg_url: str,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMGAS_CACHE_DIR", str(tmp_path / "cache"))
    root = beam_folder(tmp_path / "beam")
    out = tmp_path / "out"
    assert main(["bench", "beam", "--data", str(root), "--scales", "100K", "--method", "memgas", "--one-user",
                 "--backend", pg_url, "--contexts", "1000", "--out", str(out), "--no-progress"]) == 0
    results = json.loads((out / "results.json").read_text())
    stored = results["config"]["ingest_by_group"][ONE_USER]["store_bytes"]
    import psycopg
    with psycopg.connect(pg_url) as conn:
        database = conn.execute("SELECT pg_database_size(current_database())").fetchone()[0]
    # the store's own tables, not the catalogs every database carries (some 7 MB that would swamp a small store)
    assert results["config"]["backend"] == "postgresql" and 0 < stored < database - 5_000_000
    assert "password" not in json.dumps(results["config"])
    capsys.readouterr()
    assert main(["bench", "beam", "--data", str(root), "--backend", pg_url, "--out", str(out)]) == 2  # not per user
    assert "--one-user" in capsys.readouterr().err


def test_growth_rates_split_the_memory_in_equal_tokens() -> None:
    assert growth_rates([(10.0, 1.0)] * 10) == [10_000.0] * 10
    assert growth_rates([(100_000.0, 2.0), (100_000.0, 6.0)], parts=2) == [2.0, 6.0]
    assert growth_rates([]) == []


def test_context_set_reads_each_field_as_its_type() -> None:
    from memgas.cli.bench import context_options
    from memgas.core.errors import InvalidInputError

    assert context_options([]) is None
    opts = context_options(["floor=0.2", "profile=false", "turns=50"])
    assert (opts.floor, opts.profile, opts.turns, opts.timelines) == (0.2, False, 50, True)
    for bad, needle in (["floor"], "KEY=VALUE"), (["nope=1"], "KEY=VALUE"), (["turns=x"], "expected int"), \
            (["profile=yes"], "expected bool"):
        with pytest.raises(InvalidInputError, match=needle):
            context_options(bad)
