"""The ``memgas`` command, run in-process through ``main(argv)`` on real SQLite files with the real model.

Every refusal is checked the same way: exit status 2, one line on stderr, and the store byte for byte as it
was (``_state``). One test runs the command as a process, for what only a process shows (a closed pipe).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from memgas.cli.commands import EXIT_BROKEN_PIPE, main
from memgas.context.assemble import MEMORY_HEADERS, PROFILE_HEADER
from memgas.store import SQLiteStore

TRIP = {"session_id": "trip", "timestamp": "2024-05-01T10:00:00", "metadata": {"source": "chat", "tags": ["été"]},
        "messages": [{"role": "user", "content": "I booked a ferry to Naxos for June 3, from the café by the port."},
                     {"role": "assistant", "content": "Nice! Naxos has great beaches."}]}
WORK = {"session_id": "work", "timestamp": "2024-05-02T09:00:00",
        "messages": [{"role": "user", "content": "My manager moved the quarterly review to Friday."}]}
NEW = {"session_id": "garden", "messages": [{"role": "user", "content": "The tomatoes in my garden are ripe."}]}


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


#: A filter nested deeper than the filter language allows (40 $not).
DEEP_FILTER = "{\"$not\": " * 40 + "{\"agent_id\": \"a\"}" + "}" * 40


def test_a_filter_path_that_only_looks_like_an_index_is_a_key_not_a_traceback(capsys: pytest.CaptureFixture[str],
                                                                                db: Path) -> None:
    code, out, err = _cli(capsys, "search", "ferry", "--user", "ana", "--filters", '{"tags.²": "a"}', "--db", str(db))
    assert (code, err) == (0, "") and "Traceback" not in out


def _refused(result: tuple[int, str, str], needle: str) -> None:
    code, out, err = result
    lines = err.splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("memgas: error: ") and needle in lines[0], result
    assert out == ""


def _state(db: Path) -> tuple[bytes, list[str]]:
    """The store file's bytes and the names in its folder (a journal left behind, or a new file, shows)."""
    return db.read_bytes(), sorted(p.name for p in db.parent.iterdir())


def _write(path: Path, value: Any) -> Path:
    path.write_text(json.dumps(value, ensure_ascii=False), "utf-8")
    return path


@pytest.fixture(scope="module")
def base_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store in which user ana has the sessions trip and work, made by ``add`` of a list-of-sessions file."""
    folder = tmp_path_factory.mktemp("base")
    db = folder / "m.db"
    assert main(["add", str(_write(folder / "two.json", [TRIP, WORK])), "--db", str(db), "--user", "ana"]) == 0
    return db


@pytest.fixture
def db(base_store: Path, tmp_path: Path) -> Path:
    """A private copy of the base store, alone in its folder."""
    (tmp_path / "store").mkdir()
    return Path(shutil.copy(base_store, tmp_path / "store" / "m.db"))


def test_list_of_sessions_file_keeps_metadata_and_non_ascii(capsys: pytest.CaptureFixture[str], db: Path) -> None:
    code, out, _ = _cli(capsys, "list", "--db", str(db), "--user", "ana")
    assert code == 0 and [s["session_id"] for s in json.loads(out)] == ["trip", "work"]
    code, out, _ = _cli(capsys, "get", "trip", "--db", str(db), "--user", "ana")
    assert code == 0 and json.loads(out)["metadata"] == TRIP["metadata"]
    assert "café" in out and "\\u00e9" not in out  # JSON output keeps non-ASCII as it is
    for target in (str(db), f"sqlite:///{db}"):  # a path, or the URL of the same file
        code, out, _ = _cli(capsys, "list", "--db", target)
        assert code == 0 and json.loads(out) == [{"user_id": "ana", "sessions": 2}]


def test_stats(capsys: pytest.CaptureFixture[str], db: Path) -> None:
    code, out, _ = _cli(capsys, "stats", "--db", str(db), "--user", "ana")
    stats = json.loads(out)
    assert code == 0 and stats["sessions"] == 2 and stats["turns"] == 2 and stats["units"]["turn"] == 2
    code, out, _ = _cli(capsys, "stats", "--db", str(db))
    assert code == 0 and json.loads(out)["users"] == 1


def test_scopes_and_filters_from_the_command_line(capsys: pytest.CaptureFixture[str], db: Path,
                                                  tmp_path: Path) -> None:
    file = _write(tmp_path / "s.json", {"sessions": [{**NEW, "metadata": {"project": "apollo"}},
                                                     {**WORK, "session_id": "w2", "run_id": "own"}]})
    code, _, _ = _cli(capsys, "add", str(file), "--db", str(db), "--user", "ana", "--agent-id", "planner",
                      "--run-id", "r1")
    assert code == 2  # session 1 names its own run: the option may not contradict it, nothing written
    code, _, _ = _cli(capsys, "add", str(file), "--db", str(db), "--user", "ana", "--agent-id", "planner")
    assert code == 0
    code, out, _ = _cli(capsys, "list", "--db", str(db), "--user", "ana", "--filters", '{"agent_id": "planner"}',
                        "--order", "newest", "--limit", "1")
    page = json.loads(out)
    assert code == 0 and len(page) == 1 and page[0]["agent_id"] == "planner"
    code, out, _ = _cli(capsys, "list", "--db", str(db), "--user", "ana", "--filters", '{"agent_id": "planner"}',
                        "--order", "newest", "--cursor", page[0]["cursor"])
    assert {s["session_id"] for s in page + json.loads(out)} == {"garden", "w2"}
    code, out, _ = _cli(capsys, "search", "garden", "--db", str(db), "--user", "ana", "--json",
                        "--filters", '{"project": "apollo"}')
    assert code == 0 and [h["session_id"] for h in json.loads(out)] == ["garden"]
    code, out, _ = _cli(capsys, "delete", "--db", str(db), "--user", "ana", "--filters", '{"run_id": "own"}')
    assert code == 0 and json.loads(out) == {"user_id": "ana", "deleted_sessions": 1}


def test_add_file_whole_then_delete(capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path) -> None:
    wrapped = _write(tmp_path / "s.json", {"sessions": [NEW, {**WORK, "session_id": "w2"}]})
    code, out, _ = _cli(capsys, "add", str(wrapped), "--db", str(db), "--user", "ana")
    assert code == 0 and [json.loads(line)["session_id"] for line in out.splitlines()] == ["garden", "w2"]
    code, out, _ = _cli(capsys, "delete", "garden", "--db", str(db), "--user", "ana")
    assert code == 0 and json.loads(out) == {"user_id": "ana", "deleted_sessions": 1}
    code, out, _ = _cli(capsys, "delete", "--all", "--db", str(db), "--user", "ana")
    assert code == 0 and json.loads(out) == {"user_id": "ana", "deleted_sessions": 3}
    code, out, _ = _cli(capsys, "list", "--db", str(db))
    assert code == 0 and json.loads(out) == []


@pytest.mark.parametrize(
    "content,needle",
    [
        ([NEW, TRIP], "already has sessions ['trip']"),  # the second session is stored: nothing of the file is
        ([NEW, {**NEW, "messages": WORK["messages"]}], "more than once: ['garden']"),
        ([NEW, {"session_id": "x", "messages": [{"role": "user", "content": " "}]}], "session 1: message 0"),
        ([NEW, {"session_id": "x", "messages": [{"role": "robot", "content": "hi"}]}], "unknown role"),
        ([NEW, {"session_id": "x", "messages": NEW["messages"], "timestamp": "soon"}], "invalid timestamp"),
        ([NEW, {"session_id": "bad id", "messages": NEW["messages"]}], "invalid session_id"),
        ([NEW, {"session_id": "x", "messages": NEW["messages"], "metdata": {}}], "unknown keys ['metdata']"),
        ({"sessions": [NEW, "not a session"]}, "session 1: expected an object"),
        ({"sessions": {"garden": NEW}}, "'sessions' must be a list"),
        ({"sessions": []}, "holds no sessions"),
        ([{"role": "user", "content": ""}], "'content' is empty"),
        ({"messages": NEW["messages"], "metadata": ["not", "an", "object"]}, "metadata"),
        ([{"role": "user", "content": "a lone \ud800 surrogate"}], "surrogate"),
    ],
)
def test_bad_file_writes_nothing(capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path,
                                 content: Any, needle: str) -> None:
    f = tmp_path / "bad.json"
    f.write_text(json.dumps(content), "utf-8")  # ASCII JSON: a lone surrogate travels as the escape \ud800
    before = _state(db)
    _refused(_cli(capsys, "add", str(f), "--db", str(db), "--user", "ana"), needle)
    assert _state(db) == before


def test_failure_midway_writes_nothing(capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The disk fills while the second session of a file is written: the first is not kept either."""
    written = []
    real = SQLiteStore.add_session

    def add_session(self: SQLiteStore, session: Any, units: Any, edges: Any, **kw: Any) -> list[int]:
        written.append(session.session_id)
        if len(written) == 2:
            raise sqlite3.OperationalError("database or disk is full")
        return real(self, session, units, edges, **kw)

    monkeypatch.setattr(SQLiteStore, "add_session", add_session)
    before = _state(db)
    code, out, err = _cli(capsys, "add", str(_write(tmp_path / "s.json", [NEW, {**NEW, "session_id": "g2"}])),
                          "--db", str(db), "--user", "ana")
    assert (code, out, err) == (1, "", "memgas: error: database or disk is full\n") and written == ["garden", "g2"]
    assert _state(db) == before


@pytest.mark.parametrize(
    "raw,needle",
    [
        (b"not json", "is not valid JSON"),
        (b'[{"role": "user", "content": "caf\xe9"}]', "is not UTF-8 text"),
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
        (None, "cannot read"),  # a directory
        (b"", "is not valid JSON"),
    ],
)
def test_unreadable_file_is_one_line(capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path,
                                     raw: bytes | None, needle: str) -> None:
    f = tmp_path / "in"
    f.mkdir() if raw is None else f.write_bytes(raw)
    before = _state(db)
    _refused(_cli(capsys, "add", str(f), "--db", str(db), "--user", "ana"), needle)
    assert _state(db) == before


def test_skip_existing(capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path) -> None:
    changed_trip = {**TRIP, "messages": [{"role": "user", "content": "Something else entirely."}]}
    code, out, _ = _cli(capsys, "add", str(_write(tmp_path / "s.json", [changed_trip, NEW])), "--db", str(db),
                        "--user", "ana", "--skip-existing")
    results = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and results[0]["session_id"] == "trip" and results[0]["skipped"] is True
    assert results[1]["session_id"] == "garden" and results[1]["units"] > 0
    code, out, _ = _cli(capsys, "get", "trip", "--db", str(db), "--user", "ana")
    assert json.loads(out)["messages"] == TRIP["messages"]  # the stored session, not the file's
    code, out, _ = _cli(capsys, "list", "--db", str(db), "--user", "ana")
    assert [s["session_id"] for s in json.loads(out)] == ["trip", "work", "garden"]


def test_session_option(capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path) -> None:
    before = _state(db)
    two = _write(tmp_path / "two.json", [NEW, {**NEW, "session_id": "g2"}])
    _refused(_cli(capsys, "add", str(two), "--db", str(db), "--user", "ana", "--session", "x"), "holds 2")
    _refused(_cli(capsys, "add", str(two), "--db", str(db), "--user", "ana", "--timestamp", "2024-01-01"), "holds 2")
    one = _write(tmp_path / "one.json", NEW)
    _refused(_cli(capsys, "add", str(one), "--db", str(db), "--user", "ana", "--session", "x"), "contradicts")
    assert _state(db) == before
    bare = _write(tmp_path / "bare.json", NEW["messages"])
    code, out, _ = _cli(capsys, "add", str(bare), "--db", str(db), "--user", "ana", "--session", "x",
                        "--timestamp", "2024-01-01T08:00:00")
    assert code == 0 and json.loads(out)["session_id"] == "x"
    code, out, _ = _cli(capsys, "get", "x", "--db", str(db), "--user", "ana")
    assert json.loads(out)["timestamp"].startswith("2024-01-01T08:00:00")


@pytest.mark.parametrize("argv", [["search", "ferry", "--user", "ana"], ["list"], ["list", "--user", "ana"],
                                  ["stats"], ["get", "trip", "--user", "ana"], ["delete", "--all", "--user", "ana"],
                                  ["delete", "trip", "--user", "ana"], ["facts", "--user", "ana"]])
def test_read_commands_never_create_a_store(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                            argv: list[str]) -> None:
    missing = tmp_path / "sub" / "m.db"
    _refused(_cli(capsys, *argv, "--db", str(missing)), "does not exist")
    _refused(_cli(capsys, *argv, "--db", f"sqlite:///{missing}"), "does not exist")
    assert list(tmp_path.iterdir()) == []


def test_refused_add_leaves_no_new_store(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    msg = [{"role": "user", "content": "hello"}]
    twice = _write(tmp_path / "twice.json", [{"session_id": "a", "messages": msg}, {"session_id": "a", "messages": msg}])
    for target in (tmp_path / "new" / "deeper" / "m.db", tmp_path / "m.db"):
        _refused(_cli(capsys, "add", str(twice), "--user", "ana", "--db", str(target)), "'a'")
        assert sorted(p.name for p in tmp_path.iterdir()) == ["twice.json"]  # neither the file nor its folders


@pytest.mark.parametrize("argv", [["search", "ferry"], ["get", "trip"], ["delete", "trip"], ["delete", "--all"],
                                  ["list"], ["stats"]])
def test_unknown_user_is_worded_alike(capsys: pytest.CaptureFixture[str], db: Path, argv: list[str]) -> None:
    before = _state(db)
    code, out, err = _cli(capsys, *argv, "--db", str(db), "--user", "ghost")
    assert (code, out, err) == (2, "", "memgas: error: unknown user 'ghost': no memory stored for this user\n")
    assert _state(db) == before


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["search", "ferry", "--user", "ana\n"], "invalid user_id"),
        (["search", "ferry", "--user", "ana", "-k", "0"], "k must be"),
        (["search", "ferry", "--user", "ana", "-k", "many"], "invalid int value"),
        (["search", "--user", "ana"], "required: query"),
        (["search", "ferry", "--user", "ana", "--min-score", "2"], "min_score"),
        (["get", "nope", "--user", "ana"], "no session 'nope'"),
        (["delete", "--user", "ana"], "name a session id"),
        (["delete", "trip", "--all", "--user", "ana"], "one of them"),
        (["delete", "--filters", "{}", "--all", "--user", "ana"], "one of them"),
        (["delete", "--filters", "{}", "--user", "ana"], "empty filter"),
        (["search", "ferry", "--user", "ana", "--filters", "{oops"], "--filters is not valid JSON"),
        (["search", "ferry", "--user", "ana", "--filters", '{"n": {"$gt": "x"}}'], "filters.n.$gt"),
        (["list", "--user", "ana", "--cursor", "nonsense"], "cursor"),
        (["list", "--limit", "2"], "give --user"),
        (["search", "ferry", "--user", "ana", "--filters", DEEP_FILTER], "nest at most 32 deep"),
        (["frobnicate"], "invalid choice"),
    ],
)
def test_errors_are_one_line(capsys: pytest.CaptureFixture[str], db: Path, argv: list[str], needle: str) -> None:
    before = _state(db)
    _refused(_cli(capsys, *argv, "--db", str(db)), needle)
    assert _state(db) == before


def test_search_text_hides_router_weights_unless_explain(capsys: pytest.CaptureFixture[str], db: Path) -> None:
    code, out, _ = _cli(capsys, "search", "Which island am I sailing to?", "--db", str(db), "--user", "ana")
    first = out.splitlines()[0]
    assert code == 0 and "router weights" not in out and first.startswith("  1. trip  (2024-05-01)  relevance=0.")
    code, out, _ = _cli(capsys, "search", "Which island am I sailing to?", "--db", str(db), "--user", "ana",
                        "--explain")
    assert code == 0 and out.startswith("  router weights: session=") and "seed=" in out
    code, out, _ = _cli(capsys, "search", "Which island am I sailing to?", "--db", str(db), "--user", "ana",
                        "--json", "--min-score", "0.99")
    assert code == 0 and json.loads(out) == []


def test_context_and_profile_print_what_an_agent_reads(capsys: pytest.CaptureFixture[str], db: Path,
                                                       tmp_path: Path) -> None:
    code, out, _ = _cli(capsys, "context", "Which island am I sailing to?", "--db", str(db), "--user", "ana",
                        "--max-tokens", "100")
    assert code == 0 and out.splitlines()[1].startswith("[1] 2024-05-01 · trip · user: I booked a ferry to Naxos")
    code, out, _ = _cli(capsys, "context", "Which island am I sailing to?", "--db", str(db), "--user", "ana",
                        "--exclude", "trip")
    assert code == 0 and "Naxos" not in out
    code, out, _ = _cli(capsys, "profile", "--db", str(db), "--user", "ana")
    assert (code, out) == (0, "  (no standing instructions or preferences)\n")
    rules = {"session_id": "rules", "timestamp": "2024-05-03T09:00:00",
             "messages": [{"role": "user", "content": "Never book flights before noon, please."}]}
    assert main(["add", str(_write(tmp_path / "rules.json", rules)), "--db", str(db), "--user", "ana"]) == 0
    capsys.readouterr()
    code, out, _ = _cli(capsys, "profile", "--db", str(db), "--user", "ana")
    assert (code, out) == (0, "  instruction (always): Never book flights before noon, please.  [rules #0, 2024-05-03]\n")
    code, out, _ = _cli(capsys, "profile", "--db", str(db), "--user", "ana", "--json")
    assert code == 0 and json.loads(out)[0]["session_id"] == "rules" and json.loads(out)[0]["who"] is None
    group = {"session_id": "crew", "timestamp": "2024-05-04T09:00:00",
             "messages": [{"role": "user", "name": "Ben", "content": "Never book me on a red-eye flight."}]}
    assert main(["add", str(_write(tmp_path / "crew.json", group)), "--db", str(db), "--user", "ana"]) == 0
    capsys.readouterr()
    code, out, _ = _cli(capsys, "profile", "--db", str(db), "--user", "ana")
    assert code == 0 and out.splitlines()[1] == (
        "  instruction (always): Ben: Never book me on a red-eye flight.  [crew #0, 2024-05-04]")
    _refused(_cli(capsys, "context", "x", "--db", str(db), "--user", "ana", "--min-score", "2"), "min_score")
    _refused(_cli(capsys, "context", "x", "--db", str(db), "--user", "ana", "--max-tokens", "0"), "max_tokens")


def test_timeline_prints_what_each_session_brought_up(capsys: pytest.CaptureFixture[str], db: Path) -> None:
    code, out, _ = _cli(capsys, "timeline", "--db", str(db), "--user", "ana")
    assert (code, out.splitlines()) == (0, [
        "trip · 2024-05-01", "  - #0 user: I booked a ferry to Naxos for June 3, from the café by the port.",
        "work · 2024-05-02", "  - #0 user: My manager moved the quarterly review to Friday."])
    code, out, _ = _cli(capsys, "timeline", "--db", str(db), "--user", "ana", "--topic", "the ferry to the island",
                        "--json")
    assert code == 0 and [d["session_id"] for d in json.loads(out)] == ["trip"]
    code, out, _ = _cli(capsys, "timeline", "--db", str(db), "--user", "ana", "--since", "2024-05-02")
    assert code == 0 and out.splitlines()[0] == "work · 2024-05-02"
    _refused(_cli(capsys, "timeline", "--db", str(db), "--user", "ana", "--since", "May"), "timestamp")


@pytest.mark.slow
def test_demo_replaces_only_its_own_store(capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path) -> None:
    before = _state(db)  # a store of someone else's memory
    _refused(_cli(capsys, "demo", "--db", str(db)), "not a memgas demo store")
    assert _state(db) == before
    notes = _write(tmp_path / "notes.db", {"not": "a store"})
    _refused(_cli(capsys, "demo", "--db", str(notes)), "not a memgas demo store")
    assert notes.read_text() == '{"not": "a store"}'
    code, out, _ = _cli(capsys, "demo", "--db", str(notes), "--force")
    assert code == 0 and out.count("Q: ") == 8 and "router weights" not in out and "How to read it:" in out
    assert out.count("  1. ") == 8 and all("relevance 0." in line and "  why: " in line
                                           for line in out.splitlines() if line.startswith("  1. "))
    for question in out.split("Q: ")[1:]:  # listed in the order of the score it prints (what orders them, in words)
        scores = [float(s) for s in re.findall(r"^  \d\. .*  score (\d\.\d\d)  relevance", question, re.M)]
        assert len(scores) == 3 and scores[0] == 1.0 and scores == sorted(scores, reverse=True)
    assert 'in the order of their "score"' in out
    finish = out.split("Q: What finish time")[1].split("Q: ")[0].split("the agent reads first")[1].splitlines()
    assert "a question about now" in finish[0]  # the mode, said in words
    current = next(i for i, line in enumerate(finish) if "I'm going with 2:15 instead" in line)
    assert not any("(earlier)" in line for line in finish[:current])  # the new goal above the old one
    town = out.split("Q: Which part of town")[1].split("the agent reads first")[1].splitlines()
    # the current neighbourhood first: the move's sitting heads what the agent reads (at the demo's 300 tokens the
    # card has room for its short "No more carrying him up three floors of stairs to my apartment." alone, the move
    # ("we're moving!") the first memory), and the old one, Buckman, comes after it
    assert "2024-04-27-biscuit-move" in town[1] and "Buckman" not in town[1]
    said = "\n".join(town).split("\n\n")[0]
    assert "Buckman" in said and said.index("we're moving") < said.index("Buckman")
    read = out.split("What an agent reads for")[1]
    # the move is the user card's latest word on the home, then what is relevant, newest first
    assert PROFILE_HEADER == read.splitlines()[1] and "we're moving! I found a little rental house in Sellwood" in (
        read.splitlines()[2])
    assert MEMORY_HEADERS["now"] in read.splitlines()[2:5]
    sellwood = read.index("I'm writing this from my new kitchen table in Sellwood!")
    assert sellwood < read.index("from my apartment in Buckman")  # the current neighbourhood before the old one
    found = int(out.strip().splitlines()[-2].split("/")[0])
    assert found >= 7, out
    code, out, _ = _cli(capsys, "search", "What is my dog called?", "--db", str(notes), "--user", "maya", "--json")
    hits = json.loads(out)
    assert code == 0 and hits[0]["session_id"] == "2024-04-27-biscuit-move"
    assert set(hits[0]["weights"]) == {"session", "turn", "summary", "keyword", "lexical"}
    # its own store (here: only part of the demo, as an interrupted run leaves it) is replaced without --force
    assert main(["delete", "2024-04-27-biscuit-move", "--db", str(notes), "--user", "maya"]) == 0
    code, out, _ = _cli(capsys, "demo", "--db", str(notes))
    assert code == 0 and "store: 12 sessions" in out


def test_closed_stdout_exits_quietly(db: Path) -> None:
    """``memgas stats | head -1``: the reader is gone before the command writes."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        r = subprocess.run([sys.executable, "-m", "memgas.cli", "stats", "--db", str(db)], stdout=write_end,
                           stderr=subprocess.PIPE, text=True, timeout=300,
                           env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"})
    finally:
        os.close(write_end)
    assert (r.returncode, r.stderr) == (EXIT_BROKEN_PIPE, "")


def test_a_postgresql_server_lost_mid_command_is_one_line(capsys: pytest.CaptureFixture[str], pg_url: str,
                                                          tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The server ends the command's connections (as a restart or a failover does) after the store was opened. A
    connection lost before a transaction begins is replaced, and the command succeeds; one lost inside a transaction
    is one line with status 1 (the server unreachable), no traceback, and the add it broke stored nothing."""
    import psycopg

    from memgas.store.postgres import PostgresStore

    assert main(["add", str(_write(tmp_path / "trip.json", TRIP)), "--db", pg_url, "--user", "ana"]) == 0
    capsys.readouterr()

    def lose_the_server() -> None:
        with psycopg.connect(pg_url, autocommit=True) as admin:
            ended = admin.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                                  " WHERE datname = current_database() AND pid <> pg_backend_pid()").fetchone()[0]
        assert ended >= 1  # the command's pooled connection

    begun: list[str] = []

    def lost_before(self: PostgresStore, statement: str, _real: Any = PostgresStore._begin) -> Any:
        begun.append(statement)
        if len(begun) == 2:  # the pooled connection the first transaction used, ended between two transactions
            lose_the_server()
        return _real(self, statement)

    def lost_inside(self: PostgresStore, statement: str, _real: Any = PostgresStore._begin) -> Any:
        conn = _real(self, statement)
        lose_the_server()
        return conn

    work = str(_write(tmp_path / "work.json", WORK))
    for method, argv in [("add_session", ["add", work]), ("list_sessions", ["list"]),
                         ("version", ["search", "ferry"]), ("stats", ["stats"])]:
        with monkeypatch.context() as patch:
            patch.setattr(PostgresStore, "_begin", lost_inside)
            code, out, err = _cli(capsys, *argv, "--db", pg_url, "--user", "ana")
        lines = err.splitlines()
        assert code == 1 and len(lines) == 1 and lines[0].startswith("memgas: error: "), (method, err)
        assert "unreachable" in lines[0] and "terminat" in lines[0], lines[0]  # the server's reason, not a bug's
        if method != "add_session":
            begun.clear()
            with monkeypatch.context() as patch:
                patch.setattr(PostgresStore, "_begin", lost_before)
                code, out, err = _cli(capsys, *argv, "--db", pg_url, "--user", "ana")
            assert code == 0 and "error" not in err and len(begun) >= 2, (method, err)
    code, out, _ = _cli(capsys, "list", "--db", pg_url, "--user", "ana")
    assert code == 0 and [s["session_id"] for s in json.loads(out)] == ["trip"]


def test_the_command_line_imports_no_postgresql_driver_for_a_file(db: Path) -> None:
    """Catching psycopg's errors costs a SQLite command nothing: the driver is looked up, never imported."""
    probe = ("import sys\nfrom memgas.cli import main\nassert main(['stats', '--db', sys.argv[1]]) == 0\n"
             "assert main(['list', '--db', sys.argv[1], '--user', 'nobody']) == 2\n"
             "print('psycopg' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", probe, str(db)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "False"


def test_set_passes_memgas_parameters_and_a_bad_one_is_refused(capsys: pytest.CaptureFixture[str],
                                                               tmp_path: Path) -> None:
    from memgas.memory import Memory
    from support.moves import SESSIONS

    db = tmp_path / "moves.db"
    with Memory(str(db)) as mem:
        for sid, when, said, reply in SESSIONS:
            mem.add([{"role": "user", "content": said}, {"role": "assistant", "content": reply}], user_id="u",
                    session_id=sid, timestamp=when)
    query = ["search", "Which neighbourhood of Portland do I live in these days?", "--db", str(db), "--user", "u",
             "--json", "-k", "2"]
    code, out, _ = _cli(capsys, *query)
    assert code == 0 and [h["session_id"] for h in json.loads(out)] == ["march", "april"]
    code, out, _ = _cli(capsys, *query, "--set", "current_first=true", "--set", "current_ratio=0")
    assert code == 0 and [h["session_id"] for h in json.loads(out)] == ["april", "march"]  # the newer state first
    before = _state(db)
    _refused(_cli(capsys, *query, "--set", "current_first=maybe"), "'maybe' is not a valid bool")
    _refused(_cli(capsys, *query, "--set", "dampin=0.5"), "expected KEY=VALUE with KEY one of")
    _refused(_cli(capsys, *query, "--method", "bm25", "--set", "current_first=true"),
             "method 'bm25' takes no parameter 'current_first'")
    assert _state(db) == before


def _interrupted_import() -> None:
    """What a Ctrl-C inside a C extension's import leaves behind: an ImportError raised from the interrupt."""
    try:
        raise KeyboardInterrupt
    except KeyboardInterrupt as e:
        raise ImportError("scipy.optimize: initialisation interrupted") from e


def test_ctrl_c_inside_a_lazy_import_is_an_interrupt_in_one_line(capsys: pytest.CaptureFixture[str],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("memgas.cli.commands.cmd_list", lambda args: _interrupted_import())
    assert _cli(capsys, "list", "--db", "none.db", "--user", "u") == (130, "", "memgas: interrupted\n")


def test_an_import_error_without_an_interrupt_is_not_called_one(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(args: Any) -> None:
        raise ImportError("no module named 'nowhere'")

    monkeypatch.setattr("memgas.cli.commands.cmd_list", broken)
    with pytest.raises(ImportError, match="nowhere"):
        main(["list", "--db", "none.db", "--user", "u"])


def test_a_mistyped_flag_is_named_not_the_required_one_it_left_out(capsys: pytest.CaptureFixture[str],
                                                                   db: Path) -> None:
    _refused(_cli(capsys, "search", "ferry", "--usr", "ana", "--db", str(db)), "unrecognized arguments: --usr")
    _refused(_cli(capsys, "search", "ferry", "--db", str(db)), "the following arguments are required: --user")
    code, out, err = _cli(capsys, "search", "ferry", "--us", "ana", "--db", str(db))  # an abbreviation argparse takes
    assert code == 0 and err == "" and "ferry" in out.lower()
