"""QA metrics against hand-computed values, and the ``bench --qa`` runner over real HTTP on loopback."""


from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Iterator

import pytest

from memgas.bench.qa import (
    QA_SYSTEMS,
    bleu,
    exact_match,
    normalize_answer,
    qa_markdown,
    qa_scores,
    rouge_l,
    run_qa,
    token_f1,
    write_qa_outputs,
)
from memgas.cli.commands import main
from memgas.core.errors import InvalidInputError
from memgas.llm.cache import ResponseCache
from memgas.llm.openai import OpenAIChat
from memgas.llm.wrapper import LLM
from support.datasets import write_locomo
from support.openai_stub import OpenAIStub
from support.scripted import qa_responder

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# ----------------------------------------------------------------------------- metrics


def test_squad_normalisation_em_and_f1() -> None:
    assert normalize_answer("The  Cat's, a hat!") == "cats hat"
    assert exact_match("The Oslo!", "oslo") == 1.0 and exact_match("Oslo, Norway", "Oslo") == 0.0
    assert token_f1("the cat sat", "a cat sat down") == pytest.approx(0.8)  # P = 2/2, R = 2/3
    assert token_f1("cat cat cat", "cat") == pytest.approx(0.5)  # P = 1/3, R = 1: overlap is clipped
    assert token_f1("dog", "cat") == 0.0
    assert token_f1("", "") == 1.0 and token_f1("the", "cat") == 0.0  # only articles: empty after normalising


def test_bleu_by_hand() -> None:
    hyp, ref = "the cat sat on the mat", "the cat is on the mat"
    assert bleu(hyp, ref, 1) == pytest.approx(5 / 6)
    # p1 = 5/6, p2 = 3/5, p3 = 1/4, p4 = 0 -> smoothed 0.1/3; equal lengths -> BP = 1
    expected = math.exp((math.log(5 / 6) + math.log(3 / 5) + math.log(1 / 4) + math.log(0.1 / 3)) / 4)
    assert bleu(hyp, ref) == pytest.approx(expected) and expected == pytest.approx(0.2541, abs=1e-4)
    assert bleu("cat", "the cat sat", 1) == pytest.approx(math.exp(1 - 3))  # brevity penalty
    assert bleu("Cat!", "cat", 4) == pytest.approx(math.exp((3 * math.log(0.1)) / 4))  # no 2-4-grams at all
    assert bleu("dog", "cat") == 0.0 and bleu("", "") == 1.0 and bleu("", "cat") == 0.0
    with pytest.raises(InvalidInputError):
        bleu("a", "a", 0)


def test_rouge_l_by_hand() -> None:
    assert rouge_l("the cat sat on the mat", "the cat is on the mat") == pytest.approx(5 / 6)  # LCS 5 of 6 and 6
    assert rouge_l("a b c d", "b d e") == pytest.approx(2 * 0.5 * (2 / 3) / (0.5 + 2 / 3))  # LCS "b d"
    assert rouge_l("x y", "z") == 0.0 and rouge_l("Same words.", "same words") == 1.0
    scores = qa_scores("7 May 2023", "7 May, 2023")
    # 3 tokens hold no 4-gram: BLEU-4 smooths that order to 0.1 matches, as nltk's method1 does
    assert scores == {"em": 1.0, "f1": 1.0, "bleu1": 1.0, "bleu4": pytest.approx(0.1 ** 0.25), "rougeL": 1.0}


# ----------------------------------------------------------------------------- runner


def _u(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def _a(text: str) -> dict[str, str]:
    return {"role": "assistant", "content": text}


def write_longmemeval(path: Path) -> Path:
    filler = [[_u(f"Tell me about topic {i} and gardening."), _a(f"Topic {i} is nice.")] for i in range(4)]
    records = [
        {"question_id": "q1", "question_type": "single-session-user", "question": "Which city did I move to?",
         "answer": "Oslo", "question_date": "2023/06/02 (Fri) 10:00",
         "haystack_session_ids": ["f0", "answer_1", "f1", "f2"],
         "haystack_dates": ["2023/05/01 (Mon) 10:00", "2023/05/02 (Tue) 10:00", "2023/05/03 (Wed) 10:00",
                            "2023/05/04 (Thu) 10:00"],
         "haystack_sessions": [filler[0], [{**_u("I moved to Oslo last week."), "has_answer": True}, _a("Nice.")],
                               filler[1], filler[2]],
         "answer_session_ids": ["answer_1"]},
        {"question_id": "q2_abs", "question_type": "temporal-reasoning", "question": "When did I buy a boat?",
         "answer": "You never mentioned a boat.", "question_date": "2023/06/02 (Fri) 10:00",
         "haystack_session_ids": ["f0", "f3"], "haystack_dates": ["2023/05/01 (Mon) 10:00", "2023/05/05 (Fri) 10:00"],
         "haystack_sessions": [filler[0], filler[3]], "answer_session_ids": []},
    ]
    path.write_text(json.dumps(records), encoding="utf-8")
    return path


@pytest.fixture
def stub(monkeypatch: pytest.MonkeyPatch) -> Iterator[OpenAIStub]:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    with OpenAIStub(qa_responder) as server:
        yield server



def test_run_qa_longmemeval_all_systems(stub: OpenAIStub, embedder, tmp_path: Path) -> None:
    data = write_longmemeval(tmp_path / "lme.json")
    cache = ResponseCache(tmp_path / "llm.sqlite")
    llm = LLM(OpenAIChat("tiny", base_url=stub.base_url, backoff=0.01), cache)
    result = run_qa("longmemeval", data, llm, embedder, k=2, progress=False)
    assert [q["qid"] for q in result.questions] == ["q1", "q2_abs"]
    q1 = result.questions[0]["methods"]
    assert set(q1) == set(QA_SYSTEMS)
    assert q1["memgas"]["prediction"] == "Oslo" and q1["memgas"]["sources"] == ["answer_1"]
    assert q1["memgas"]["metrics"]["judge"] == 1.0 and q1["memgas"]["metrics"]["em"] == 1.0
    assert len(q1["memgas"]["removed"]) == 1 and q1["memgas"]["llm"]["calls"] == 2  # filter + answer
    assert q1["memgas-nofilter"]["llm"]["calls"] == 1 and q1["memgas-nofilter"]["removed"] == []
    assert len(q1["topk-sessions"]["shown"]) == 2 and q1["full-history"]["shown"] == ["f0", "answer_1", "f1", "f2"]
    assert [r["judge_llm"]["calls"] + r["judge_llm"]["cached"] for r in q1.values()] == [1, 1, 1, 1]
    assert sum(r["judge_llm"]["calls"] for r in q1.values()) == 1  # same verdict asked 4 times: cached
    q2 = result.questions[1]["methods"]["full-history"]
    assert q2["prediction"] == "I don't know" and q2["metrics"]["judge"] == 0.0  # the stub judge is literal
    judge_prompt = next(r for r in stub.requests if "unanswerable question" in r["messages"][0]["content"])
    assert "When did I buy a boat?" in judge_prompt["messages"][0]["content"]
    n_requests = len(stub.requests)

    again = run_qa("longmemeval", data, llm, embedder, k=2, progress=False)
    assert len(stub.requests) == n_requests  # every prompt came from the response cache
    assert again.questions[0]["methods"]["memgas"]["llm"]["cached"] == 2
    assert again.questions[0]["methods"]["memgas"]["prediction"] == "Oslo"

    report = qa_markdown(result)
    assert "| memgas | 1.000 |" in report or "| memgas | 0.500 |" in report
    assert "Per question type, judge" in report and "temporal-reasoning (n=1)" in report
    assert "| memgas | 2.00 |" in report  # LLM calls per query
    paths = write_qa_outputs(result, tmp_path / "out", "memgas bench longmemeval --qa")
    saved = json.loads(paths["results"].read_text())
    assert saved["config"]["llm"] == llm.id and saved["summary"]["memgas"]["judge"] == pytest.approx(0.5)
    assert paths["report"].read_text().startswith("# memgas bench --qa: longmemeval")


def test_run_qa_locomo_skips_adversarial_and_caps_questions(stub: OpenAIStub, embedder, tmp_path: Path) -> None:
    data = write_locomo(tmp_path / "locomo.json")
    llm = LLM(OpenAIChat("tiny", base_url=stub.base_url, backoff=0.01))
    result = run_qa("locomo", data, llm, embedder, systems=["memgas", "full-history"], k=1, progress=False)
    assert [q["type"] for q in result.questions] == ["single-hop", "multi-hop"]
    assert result.skipped == {"adversarial": 1}
    assert result.questions[0]["methods"]["memgas"]["prediction"] == "Oslo"
    assert result.questions[1]["methods"]["full-history"]["metrics"]["f1"] == 1.0
    capped = run_qa("locomo", data, llm, embedder, systems=["memgas"], max_questions=1, progress=False)
    assert len(capped.questions) == 1
    with pytest.raises(InvalidInputError, match="unknown QA system"):
        run_qa("locomo", data, llm, embedder, systems=["oracle"])


def test_run_qa_with_llm_units_counts_per_add(stub: OpenAIStub, embedder, tmp_path: Path) -> None:
    data = write_locomo(tmp_path / "locomo.json")
    base = stub.responder
    stub.responder = lambda body: (json.dumps({"summary": "Ann talks with Bob.", "keywords": ["Ann"]})
                                if "memory notes" in body["messages"][0]["content"] else base(body))
    llm = LLM(OpenAIChat("tiny", base_url=stub.base_url, backoff=0.01))
    result = run_qa("locomo", data, llm, embedder, systems=["memgas"], llm_units=True, progress=False)
    ingest = result.config["ingest_llm"]
    assert ingest["sessions"] == 2 and ingest["total"]["calls"] == 2 and ingest["units_written"] == 2
    assert "LLM use per add (LLM-made units, 2 sessions): 1.00 calls" in qa_markdown(result)


def test_failed_answers_are_scored_empty_and_reported(embedder, tmp_path: Path) -> None:
    data = write_locomo(tmp_path / "locomo.json")
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    llm = LLM(OpenAIChat("tiny", base_url=f"http://127.0.0.1:{port}/v1", max_retries=0, timeout=2))
    result = run_qa("locomo", data, llm, embedder, systems=["memgas-nofilter"], max_questions=1, progress=False)
    record = result.questions[0]["methods"]["memgas-nofilter"]
    assert record["prediction"] == "" and "cannot reach" in record["error"] and record["metrics"]["f1"] == 0.0
    assert "Failed LLM calls (answer scored as empty): 1" in qa_markdown(result)


def test_bench_command_runs_qa(stub: OpenAIStub, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    data = write_longmemeval(tmp_path / "lme.json")
    code = main(["bench", "longmemeval", "--qa", "--llm", f"openai:tiny@{stub.base_url}", "--data", str(data),
                 "--out", str(tmp_path / "out"), "--no-progress", "--llm-cache", str(tmp_path / "c.sqlite"),
                 "--qa-systems", "memgas,full-history", "--qa-k", "2", "--max-questions", "1",
                 "--cache", str(tmp_path / "emb.sqlite")])
    assert code == 0
    printed = capsys.readouterr().out
    assert "### longmemeval QA: 1 questions" in printed and "| full-history |" in printed
    saved = json.loads((tmp_path / "out" / "qa_results.json").read_text())
    assert saved["config"]["systems"] == ["memgas", "full-history"] and saved["config"]["k"] == 2
    assert main(["bench", "longmemeval", "--qa", "--llm", "nonsense", "--data", str(data),
                 "--cache", str(tmp_path / "emb.sqlite")]) == 2
