"""``memgas bench kg``: the temporal graph's update counts on an oracle-format fixture, with a scripted
LLM over loopback HTTP and the real embedder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import pytest

from memgas.bench.kg import answer_token_recall, kg_markdown, run_kg
from memgas.cli.commands import main
from memgas.core.errors import InvalidInputError
from memgas.llm.cache import ResponseCache
from memgas.llm.openai import OpenAIChat
from memgas.llm.wrapper import LLM
from support.openai_stub import OpenAIStub

#: What the scripted extractor reads in each user message.
FACTS = {
    "I keep my old sneakers under the bed.": [("user", "keeps old sneakers in", "under the bed")],
    "I moved my old sneakers to a shoe rack in the closet.": [
        ("user", "keeps old sneakers in", "shoe rack in the closet")],
    "I run 5 km every morning.": [("user", "runs", "5 km every morning")],
}


def responder(body: dict[str, Any]) -> str:
    """Extraction from the table; the judge calls a second place for the sneakers a contradiction."""
    system, user = body["messages"][0]["content"], body["messages"][1]["content"]
    if system.startswith("You extract facts"):
        message = user.split("CURRENT MESSAGE:\n", 1)[1].split(": ", 1)[1]
        return json.dumps({"facts": [{"subject": s, "relation": r, "object": o} for s, r, o in FACTS.get(message, [])]})
    existing, new = user.split("EXISTING FACTS:\n", 1)[1].split("\n\nNEW FACT:\n")
    places = [int(line.split(".", 1)[0]) for line in existing.splitlines() if "sneakers" in line]
    if "sneakers" in new and places:
        return json.dumps({"verdict": "contradiction", "ids": places})
    return json.dumps({"verdict": "new", "ids": []})


def _u(text: str, has_answer: bool = False) -> dict[str, Any]:
    return {"role": "user", "content": text, **({"has_answer": True} if has_answer else {})}


def _a(text: str) -> dict[str, str]:
    return {"role": "assistant", "content": text}


def write_oracle(path: Path) -> Path:
    records = [
        {"question_id": "ku1", "question_type": "knowledge-update", "question": "Where do I keep my old sneakers now?",
         "answer": "in a shoe rack in the closet", "question_date": "2023/06/02 (Fri) 10:00",
         "haystack_session_ids": ["answer_new", "answer_old"],  # listed out of time order on purpose
         "haystack_dates": ["2023/05/20 (Sat) 10:00", "2023/03/01 (Wed) 10:00"],
         "haystack_sessions": [[_u("I moved my old sneakers to a shoe rack in the closet.", True), _a("Tidy!")],
                               [_u("I keep my old sneakers under the bed.", True), _a("Fine.")]],
         "answer_session_ids": ["answer_new", "answer_old"]},
        {"question_id": "tr1", "question_type": "temporal-reasoning", "question": "How far do I run each morning?",
         "answer": "5 km", "question_date": "2023/06/02 (Fri) 10:00",
         "haystack_session_ids": ["answer_run"], "haystack_dates": ["2023/04/01 (Sat) 10:00"],
         "haystack_sessions": [[_u("I run 5 km every morning.", True), _a("Great habit.")]],
         "answer_session_ids": ["answer_run"]},
        {"question_id": "ku2_abs", "question_type": "knowledge-update", "question": "Where is my boat?",
         "answer": "You never mentioned a boat.", "question_date": "2023/06/02 (Fri) 10:00",
         "haystack_session_ids": ["x"], "haystack_dates": ["2023/04/01 (Sat) 10:00"],
         "haystack_sessions": [[_u("Hello."), _a("Hi.")]], "answer_session_ids": []},
        {"question_id": "ss1", "question_type": "single-session-user", "question": "Anything?", "answer": "no",
         "question_date": "2023/06/02 (Fri) 10:00", "haystack_session_ids": ["y"],
         "haystack_dates": ["2023/04/01 (Sat) 10:00"], "haystack_sessions": [[_u("Hello.", True), _a("Hi.")]],
         "answer_session_ids": ["y"]},
    ]
    path.write_text(json.dumps(records), encoding="utf-8")
    return path


@pytest.fixture
def stub(monkeypatch: pytest.MonkeyPatch) -> Iterator[OpenAIStub]:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    with OpenAIStub(responder) as server:
        yield server



def test_answer_token_recall() -> None:
    facts = ["user keeps old sneakers in shoe rack in the closet"]
    assert answer_token_recall("in a shoe rack in the closet", facts) == 1.0
    assert answer_token_recall("under the bed", facts) == 0.0
    assert answer_token_recall("shoe box", facts) == 0.5  # stemmed content words: shoe found, box not
    assert answer_token_recall("", facts) == 0.0


def test_run_kg_counts_current_value_and_invalidation(stub: OpenAIStub, embedder, tmp_path: Path) -> None:
    data = write_oracle(tmp_path / "oracle.json")
    llm = LLM(OpenAIChat("tiny", base_url=stub.base_url, max_retries=0, timeout=10), ResponseCache())
    result = run_kg(data, embedder, llm, progress=False)
    by_id = {r["qid"]: r for r in result.questions}
    assert set(by_id) == {"ku1", "tr1"}  # abstention and other types are left out
    ku = by_id["ku1"]
    assert ku["latest_first"] == 1.0 and ku["answer_in_facts"] == 1.0 and ku["old_invalidated"] == 1.0
    assert ku["ranking"][0] == "answer_new" and ku["gold_recall_all@k"] == 1.0
    assert [f["object"] for f in ku["facts"]] == ["shoe rack in the closet"]  # the old place is closed, not current
    assert ku["graph"]["contradiction"] == 1 and ku["graph"]["invalidated"] == 1
    assert ku["messages_extracted"] == 2 and ku["llm"]["calls"] == 3  # two extractions, one judge call
    assert by_id["tr1"]["answer_in_facts"] == 1.0 and by_id["tr1"]["old_invalidated"] == 0.0
    table = kg_markdown(result)
    assert "| knowledge-update | 1 | 1 | 1 | 1 | 1 | 1.00 |" in table and "| all | 2 |" in table
    one = run_kg(data, embedder, llm, types=["temporal-reasoning"], per_type=1, progress=False)
    assert [r["qid"] for r in one.questions] == ["tr1"]
    with pytest.raises(InvalidInputError, match="unknown LongMemEval question type"):
        run_kg(data, embedder, llm, types=["knowledge-updates"], progress=False)


def test_bench_kg_command_writes_report(stub: OpenAIStub, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    data = write_oracle(tmp_path / "oracle.json")
    out = tmp_path / "out"
    argv = ["bench", "kg", "--llm", f"openai:tiny@{stub.base_url}", "--data", str(data), "--out", str(out),
            "--no-progress", "--llm-cache", str(tmp_path / "c.sqlite"), "--cache", str(tmp_path / "emb.sqlite")]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "Temporal KG on LongMemEval oracle (2 questions" in printed and "| knowledge-update | 1 |" in printed
    saved = json.loads((out / "results.json").read_text())
    assert saved["config"]["roles"] == ["user"] and len(saved["questions"]) == 2
    assert (out / "report.md").read_text().startswith("Command: `memgas bench kg")
    calls = len(stub.requests)
    assert main(argv) == 0 and len(stub.requests) == calls  # a re-run is answered from the response cache
    assert main(["bench", "kg", "--data", str(tmp_path / "none.json"), "--llm", f"openai:tiny@{stub.base_url}"]) == 2
