"""Benchmark loaders on tiny LongMemEval- and LoCoMo-shaped files written in tmp_path."""


from __future__ import annotations

import gzip
import json
from datetime import datetime
from pathlib import Path

import pytest

import memgas.bench.datasets as datasets
from memgas.bench.datasets import BenchQuestion, load_locomo, load_longmemeval
from memgas.core.errors import InvalidInputError
from support.datasets import lme_records, locomo_sample


def _write_json(path: Path, data: object) -> Path:
    text = json.dumps(data, indent=1)
    if path.name.endswith(".gz"):
        with gzip.open(path, "wt", encoding="utf-8") as fh:
            fh.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def lme_questions(tmp_path: Path) -> list[BenchQuestion]:
    return load_longmemeval(_write_json(tmp_path / "lme.json.gz", lme_records()))


def test_lme_abstention_is_not_scorable(lme_questions: list[BenchQuestion]) -> None:
    q = lme_questions[0]
    assert (q.qid, q.scorable, q.skip_reason) == ("q1_abs", False, "abstention")
    assert q.gold_sessions == {"answer_a1"}  # gold is still labelled, only the average skips it
    assert q.question_date == datetime(2023, 5, 30, 23, 40)


def test_lme_assistant_side_evidence_is_not_gold(lme_questions: list[BenchQuestion]) -> None:
    q = lme_questions[1]
    assert (q.scorable, q.skip_reason) == (False, "no user-side has_answer turn")
    assert q.gold_sessions == set() and q.gold_turns == set() and q.gold_turn_ids == set()
    assert q.answer == "7"
    assert q.qtype == "single-session-assistant"


def test_lme_gold_turns_map_to_memgas_turns(lme_questions: list[BenchQuestion]) -> None:
    q = lme_questions[2]
    assert q.scorable and q.skip_reason is None
    assert q.gold_sessions == {"answer_c1"}  # answer_c2 has only assistant-side has_answer: noans
    assert q.gold_turns == {("answer_c1", 1), ("answer_c1", 3)}
    assert q.gold_turn_ids == {"answer_c1_2", "answer_c1_6"}
    session = next(s for s in q.sessions if s.session_id == "answer_c1")
    assert session.turns[1].messages[0].content == "I adopted a cat named Tom."
    assert session.turns[3].messages[0].content == "I moved to Oslo."


def test_lme_sessions(lme_questions: list[BenchQuestion]) -> None:
    q = lme_questions[2]
    assert q.conv_id == "q3 multi"
    # a repeated session id in one haystack is kept once
    assert [s.session_id for s in q.sessions] == ["filler_2", "answer_c1", "filler_1", "answer_c2"]
    assert all(s.user_id == "q3_multi" for s in q.sessions)  # sanitised id
    filler_2 = q.sessions[0]
    assert [(m.role, m.content) for m in filler_2.messages] == [("user", "What is 2+2?"), ("assistant", "It is 4.")]
    assert filler_2.timestamp == datetime(2023, 5, 1, 10, 0)
    # both roles are stored and no has_answer label leaks into the content
    c1 = q.sessions[1]
    assert [m.role for m in c1.messages] == ["assistant", "user", "assistant", "user", "assistant", "user"]
    assert all("has_answer" not in m.content and "True" not in m.content for s in q.sessions for m in s.messages)


def test_lme_shared_sessions_share_messages(lme_questions: list[BenchQuestion]) -> None:
    f1 = [next(s for s in q.sessions if s.session_id == "filler_1") for q in lme_questions]
    assert f1[0].messages is f1[1].messages is f1[2].messages
    # same content, but each question keeps its own user and date
    assert [s.user_id for s in f1] == ["q1_abs", "q2", "q3_multi"]
    assert f1[0].timestamp == datetime(2023, 5, 21, 10, 0) and f1[1].timestamp == datetime(2023, 5, 23, 12, 30)


def test_lme_limit_and_plain_json(tmp_path: Path) -> None:
    path = _write_json(tmp_path / "lme.json", lme_records())
    assert [q.qid for q in load_longmemeval(path, limit=2)] == ["q1_abs", "q2"]
    assert load_longmemeval(path, limit=0) == []
    with pytest.raises(InvalidInputError, match="limit"):
        load_longmemeval(path, limit=-1)


def test_lme_streaming_across_tiny_chunks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _write_json(tmp_path / "lme.json.gz", lme_records())
    expected = load_longmemeval(path)
    monkeypatch.setattr(datasets, "_CHUNK_CHARS", 7)  # every record straddles many reads
    streamed = load_longmemeval(path)
    assert [(q.qid, q.gold_turns, [s.messages for s in q.sessions]) for q in streamed] == [
        (q.qid, q.gold_turns, [s.messages for s in q.sessions]) for q in expected
    ]


def test_lme_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="not found at .*pass --data PATH"):
        load_longmemeval(tmp_path / "nope.json.gz")


def test_lme_bad_files(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="JSON array"):
        load_longmemeval(_write_json(tmp_path / "obj.json", {"question_id": "x"}))
    truncated = tmp_path / "cut.json"
    truncated.write_text(json.dumps(lme_records())[:-40], encoding="utf-8")
    with pytest.raises(InvalidInputError, match="invalid JSON|truncated"):
        load_longmemeval(truncated)
    record = lme_records()[2]
    del record["haystack_dates"]
    with pytest.raises(InvalidInputError, match=r"record 0 \(q3 multi\): missing field 'haystack_dates'"):
        load_longmemeval(_write_json(tmp_path / "bad.json", [record]))


@pytest.fixture
def locomo(tmp_path: Path) -> tuple[list[datasets.BenchConversation], datasets.LoadReport]:
    return load_locomo(_write_json(tmp_path / "locomo.json", [locomo_sample()]))


def test_locomo_sessions(locomo: tuple[list[datasets.BenchConversation], datasets.LoadReport]) -> None:
    (conv,), _ = locomo
    assert conv.conv_id == "conv-x" and conv.speakers == ("Ann", "Bob")
    assert [s.session_id for s in conv.sessions] == ["S1", "S2"]
    s1 = conv.sessions[0]
    assert s1.user_id == "conv-x"
    assert s1.timestamp == datetime(2023, 5, 8, 13, 56)
    assert conv.sessions[1].timestamp == datetime(2023, 6, 20, 10, 4)
    assert [(m.role, m.name) for m in s1.messages] == [
        ("assistant", "Bob"),
        ("user", "Ann"),
        ("assistant", "Bob"),
        ("user", "Ann"),
    ]
    assert s1.messages[2].content == "So cute! [image: a photo of a cat]"
    assert s1.metadata["dia_ids"] == ("D1:1", "D1:2", "D1:3", "D1:4")
    assert [len(t.messages) for t in s1.turns] == [1, 2, 1]


def test_locomo_questions(locomo: tuple[list[datasets.BenchConversation], datasets.LoadReport]) -> None:
    (conv,), _ = locomo
    q = conv.questions
    assert [x.qtype for x in q] == ["single-hop", "multi-hop", "temporal", "adversarial", "open-domain", "temporal"]
    assert all(x.sessions is conv.sessions and x.conv_id == "conv-x" for x in q)
    # asked after the conversation: at its latest session's time (S2), not at an orphan date (session_3)
    assert q[0].qid == "conv-x_q0" and all(x.question_date == datetime(2023, 6, 20, 10, 4) for x in q)
    assert (q[0].gold_sessions, q[0].gold_turns, q[0].gold_turn_ids) == ({"S1"}, {("S1", 1)}, {"D1:3"})
    # the malformed "D1:1; D2:2" yields both ids
    assert q[1].gold_turns == {("S1", 0), ("S2", 0)} and q[1].gold_sessions == {"S1", "S2"}
    assert q[5].gold_turn_ids == {"D2:1"}  # D2:01 read as D2:1
    assert [(x.scorable, x.skip_reason) for x in q] == [
        (True, None),
        (True, None),
        (False, "no valid evidence"),
        (False, "adversarial"),
        (False, "no valid evidence"),
        (True, None),
    ]
    assert q[3].answer == "Luna" and q[3].gold_turns == {("S2", 0)}
    assert q[4].answer == "7"


def test_locomo_report(locomo: tuple[list[datasets.BenchConversation], datasets.LoadReport]) -> None:
    _, report = locomo
    assert report.dropped_evidence == [("conv-x", 2, "D2:9")]
    assert report.malformed_evidence == [("conv-x", 1, "D1:1; D2:2")]
    assert report.normalized_evidence == [("conv-x", 5, "D2:01", "D2:1")]
    assert report.orphan_dates == [("conv-x", "session_3_date_time")]


def test_locomo_limit_and_errors(tmp_path: Path) -> None:
    second = {**locomo_sample(), "sample_id": "conv-y"}
    path = _write_json(tmp_path / "locomo.json", [locomo_sample(), second])
    assert [c.conv_id for c in load_locomo(path)[0]] == ["conv-x", "conv-y"]
    assert [c.conv_id for c in load_locomo(path, limit=1)[0]] == ["conv-x"]
    with pytest.raises(InvalidInputError, match="LoCoMo data not found"):
        load_locomo(tmp_path / "missing.json")
    stranger = locomo_sample()
    stranger["conversation"]["session_2"][0]["speaker"] = "Eve"
    with pytest.raises(InvalidInputError, match="Eve"):
        load_locomo(_write_json(tmp_path / "eve.json", [stranger]))
    bad_category = locomo_sample()
    bad_category["qa"][0]["category"] = 9
    with pytest.raises(InvalidInputError, match="unknown category 9"):
        load_locomo(_write_json(tmp_path / "cat.json", [bad_category]))


def test_locomo_dia_ids_of_turns(locomo: tuple[list[datasets.BenchConversation], datasets.LoadReport]) -> None:
    (conv,), _ = locomo
    assert datasets.locomo_dia_ids(conv.sessions, [("S1", 1), ("S2", 0), ("S1", 0)]) == [
        "D1:2",
        "D1:3",
        "D2:1",
        "D2:2",
        "D1:1",
    ]
    with pytest.raises(InvalidInputError, match="no turn 3"):
        datasets.locomo_dia_ids(conv.sessions, [("S1", 3)])
    with pytest.raises(InvalidInputError, match="S9"):
        datasets.locomo_dia_ids(conv.sessions, [("S9", 0)])
