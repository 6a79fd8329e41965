"""The edges a user of the ``memgas`` command touches, each run as the real command in a subprocess: one-line
errors with exit 2 (bad input) or 1 (environment), Ctrl-C, read commands that never write, a store that is not
made by a typo, progress and batches, ``-`` for stdin and stdout, ``--version``, ``answer``, help on every flag."""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memgas import Memory
from memgas.cli.commands import build_parser
from memgas.core.version import __version__
from memgas.embed.base import Embedder

ENV = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}


def memgas(*argv: str, stdin: bytes | None = None, cwd: Path | None = None, timeout: float = 120,
           env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "memgas.cli", *argv], input=None if stdin is None else stdin.decode(),
                          capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env or ENV)


def one_line(done: subprocess.CompletedProcess[str], code: int, needle: str) -> None:
    lines = done.stderr.strip().splitlines()
    assert done.returncode == code, done.stderr
    assert len(lines) == 1 and lines[0].startswith("memgas: error: ") and needle in lines[0], done.stderr
    assert "Traceback" not in done.stderr


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, embedder: Embedder) -> Path:
    db = tmp_path_factory.mktemp("edges") / "m.db"
    with Memory(db, embedder=embedder) as mem:
        mem.add([{"role": "user", "content": "I took the ferry to Naxos."}], user_id="ana", session_id="trip",
                timestamp="2024-05-01T10:00:00")
    return db


def test_bad_files_are_one_line_errors_and_make_no_store(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    big.write_text('{"messages": [{"role": "user", "content": "hi"}], "metadata": {"n": ' + "9" * 5000 + "}}")
    binary = tmp_path / "bin.jsonl"
    binary.write_bytes(bytes(range(256)) * 4)
    one_line(memgas("add", str(big), "--db", str(tmp_path / "a.db"), "--user", "u"), 2, "a number too long")
    one_line(memgas("import", str(binary), "--db", str(tmp_path / "b.db")), 2, "is not UTF-8 text")
    assert not (tmp_path / "a.db").exists() and not (tmp_path / "b.db").exists()


@pytest.mark.parametrize("option,value", [("--rate-limit", "nan"), ("--rate-limit", "inf"), ("--rate-limit", "-1"),
                                          ("--rate-limit", "0"), ("--max-body", "-5"), ("--port", "70000"),
                                          ("--workers", "0")])
def test_serve_refuses_bad_limits_in_one_line(store: Path, option: str, value: str) -> None:
    done = memgas("serve", "--db", str(store), option, value)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("memgas: error: argument " + option), done.stderr


def test_a_busy_port_is_one_line_and_exit_1(store: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        one_line(memgas("serve", "--db", str(store), "--port", str(port)), 1, f"cannot listen on 127.0.0.1:{port}")


@pytest.mark.slow
def test_ctrl_c_during_an_add_is_one_line_exit_130_and_writes_nothing(tmp_path: Path) -> None:
    sessions = [{"session_id": f"s{i}", "messages": [{"role": "user", "content": f"fact {i}: " + "word " * 200}]}
                for i in range(300)]
    data = tmp_path / "many.json"
    data.write_text(json.dumps(sessions))
    db = tmp_path / "m.db"
    # The child gets Ctrl-C's default disposition: a suite started in the background of a shell without job control
    # has SIGINT ignored (POSIX), which every child would inherit, and Python then never turns it into an interrupt.
    # An embedding cache of its own, so that no earlier run's vectors make the add short.
    proc = subprocess.Popen([sys.executable, "-m", "memgas.cli", "add", str(data), "--db", str(db), "--user", "u"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**ENV, "MEMGAS_CACHE_DIR": str(tmp_path / "cache")},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 60
    while not db.exists() and time.monotonic() < deadline:  # the store is open: the add is under way
        time.sleep(0.05)
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and err.strip().splitlines() == ["memgas: interrupted"], err
    assert out == "" and not db.exists()  # one transaction: nothing half-written, the new store removed


@pytest.mark.parametrize("content", [b"", b"x"])
def test_read_commands_never_write_a_file_that_is_no_store(tmp_path: Path, content: bytes) -> None:
    tiny = tmp_path / "tiny.db"
    tiny.write_bytes(content)
    for argv in (["search", "hi", "--user", "u"], ["list"], ["stats"], ["get", "s", "--user", "u"], ["export", "--out",
                                                                                                    str(tmp_path / "o")]):
        one_line(memgas(*argv, "--db", str(tiny)), 2, "is not a memgas store")
        assert tiny.read_bytes() == content


@pytest.mark.slow
def test_serve_mcp_and_keys_refuse_a_missing_store_unless_told_to_create(tmp_path: Path) -> None:
    missing = tmp_path / "typo.db"
    one_line(memgas("serve", "--db", str(missing)), 2, "no store at")
    one_line(memgas("mcp", "--db", str(missing)), 2, "no store at")
    one_line(memgas("keys", "create", "--db", str(missing), "--scope", "admin"), 2, "no store at")
    assert not missing.exists()
    made = memgas("keys", "create", "--db", str(missing), "--scope", "admin", "--create")
    assert made.returncode == 0 and json.loads(made.stdout)["key"].startswith("mgs_") and missing.exists()
    listed = memgas("keys", "list", "--db", str(missing))
    assert [k["scope"] for k in json.loads(listed.stdout)] == ["admin"]  # one JSON document


@pytest.mark.slow
def test_add_in_batches_shows_progress_streams_results_and_resumes(tmp_path: Path) -> None:
    sessions = [{"session_id": f"s{i}", "messages": [{"role": "user", "content": f"I own {i} kayaks"}]}
                for i in range(10)]
    broken = [*sessions[:6], {"session_id": "bad", "messages": []}, *sessions[6:]]
    data = tmp_path / "s.json"
    data.write_text(json.dumps(broken))
    db = tmp_path / "m.db"
    first = memgas("add", str(data), "--db", str(db), "--user", "u", "--batch", "3")
    assert first.returncode == 2 and "session 0: session 'bad' is empty" in first.stderr
    assert [json.loads(line)["session_id"] for line in first.stdout.splitlines()] == ["s0", "s1", "s2", "s3", "s4",
                                                                                      "s5"]  # two batches committed
    assert "memgas: 3/11 sessions" in first.stderr  # progress on stderr, a line per tenth
    data.write_text(json.dumps(sessions))
    again = memgas("add", str(data), "--db", str(db), "--user", "u", "--batch", "3", "--skip-existing")
    rows = [json.loads(line) for line in again.stdout.splitlines()]
    assert again.returncode == 0 and sum(r.get("skipped", False) for r in rows) == 6 and len(rows) == 10
    listed = json.loads(memgas("list", "--db", str(db), "--user", "u").stdout)
    assert sorted(s["session_id"] for s in listed) == sorted(f"s{i}" for i in range(10))
    one_line(memgas("add", str(data), "--db", str(db), "--user", "u", "--batch", "0"), 2, "--batch")


@pytest.mark.slow
def test_stdin_stdout_version_query_time_and_compact_stats(store: Path, tmp_path: Path) -> None:
    db = tmp_path / "in.db"
    added = memgas("add", "-", "--db", str(db), "--user", "u",
                   stdin=json.dumps({"messages": [{"role": "user", "content": "I paint on Sundays."}]}).encode())
    assert added.returncode == 0 and json.loads(added.stdout)["units"] > 0
    exported = memgas("export", "--db", str(db), "--out", "-")
    lines = exported.stdout.splitlines()
    assert exported.returncode == 0 and json.loads(lines[0])["format"] == "memgas-dump" and json.loads(lines[-1])[
        "type"] == "end" and json.loads(exported.stderr)["sessions"] == 1
    assert memgas("--version").stdout.strip() == f"memgas {__version__}"
    when = memgas("search", "where did I go last week?", "--db", str(store), "--user", "ana", "--json",
                  "--query-time", "2024-05-06T10:00:00")
    assert when.returncode == 0 and json.loads(when.stdout)[0]["session_id"] == "trip"
    one_line(memgas("search", "x", "--db", str(store), "--user", "ana", "--query-time", "someday"), 2, "timestamp")
    stats = json.loads(memgas("stats", "--db", str(store)).stdout)
    assert "calls" not in stats and stats["method"] == "memgas" and stats["sessions"] == 1
    assert isinstance(json.loads(memgas("stats", "--db", str(store), "--full").stdout)["method"], dict)


def test_answer_needs_an_llm_and_answers_with_one(store: Path, stub) -> None:  # type: ignore[no-untyped-def]
    one_line(memgas("answer", "Where did I go?", "--db", str(store), "--user", "ana"), 2, "needs an LLM")
    stub.responder = lambda body: (json.dumps({"1": True}) if "which memories" in body["messages"][0]["content"]
                                   else json.dumps({"answer": "Naxos", "sources": [1]}))
    env = {**ENV, "NO_PROXY": "127.0.0.1", "MEMGAS_CACHE_DIR": str(store.parent / "cache")}
    done = memgas("answer", "Where did I go?", "--db", str(store), "--user", "ana", "--llm",
                  f"openai:tiny@{stub.base_url}", env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["answer"] == "Naxos" and json.loads(done.stdout)["sources"] == ["trip"]


def test_every_flag_and_argument_has_help() -> None:
    missing = []

    def walk(parser: argparse.ArgumentParser, path: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, f"{path} {name}")
            elif not isinstance(action, argparse._HelpAction) and not action.help:
                missing.append(f"{path} {'/'.join(action.option_strings) or action.dest}")

    walk(build_parser(), "memgas")
    assert missing == []


def test_add_many_of_none_is_invalid_input(embedder: Embedder) -> None:
    from memgas.core.errors import InvalidInputError

    with Memory(embedder=embedder) as mem, pytest.raises(InvalidInputError, match="list of session objects"):
        mem.add_many(None, user_id="u")  # type: ignore[arg-type]


def test_an_error_naming_many_ids_stays_short(tmp_path: Path, embedder: Embedder) -> None:
    from memgas.core.errors import DuplicateSessionError

    sessions = [{"session_id": f"s{i}", "messages": [{"role": "user", "content": f"fact {i}"}]} for i in range(300)]
    with Memory(embedder=embedder) as mem:
        mem.add_many(sessions[:300:10], user_id="u")  # 30 of them stored
        with pytest.raises(DuplicateSessionError) as caught:
            mem.add_many(sessions, user_id="u")
    message = str(caught.value)
    assert "and 25 more (30 in all)" in message and len(message) < 200


@pytest.mark.slow
def test_the_store_records_its_method_and_zep_with_its_llm_down_says_so_and_falls_back(tmp_path: Path, stub,  # type: ignore[no-untyped-def]
                                                                                     embedder: Embedder) -> None:
    db = tmp_path / "zep.db"
    stub.responder = lambda body: json.dumps({"facts": []})
    stub.script = [{"status": 503}] * 50  # the LLM is down for every call of the add
    spec = f"openai:tiny@{stub.base_url}?timeout=2&retries=0"
    with Memory(db, method="zep", embedder=embedder, llm=spec) as mem:
        mem.add([{"role": "user", "content": "I live in Lisbon near the river."}], user_id="u", session_id="home")
    env = {**ENV, "NO_PROXY": "127.0.0.1", "MEMGAS_CACHE_DIR": str(tmp_path / "cache")}
    stub.script = [{"status": 503}] * 200  # still down in the new process
    found = memgas("search", "where do I live?", "--db", str(db), "--user", "u", "--llm", spec, "--json", env=env)
    assert found.returncode == 0, found.stderr
    hits = json.loads(found.stdout)
    assert [h["session_id"] for h in hits] == ["home"] and hits[0]["method"] == "memgas"  # the fallback's hit
    warning = [line for line in found.stderr.splitlines() if "warning" in line]
    assert warning and "zep" in warning[0] and "wait for fact extraction" in warning[0] and "memgas" in warning[0]
    stats = json.loads(memgas("stats", "--db", str(db), "--user", "u", "--llm", spec, env=env).stdout)
    assert stats["method"] == "zep"  # recorded by the store, used without --method
    full = json.loads(memgas("stats", "--db", str(db), "--user", "u", "--llm", spec, "--full", env=env).stdout)
    assert full["method"]["pending_extractions"] >= 1  # counted in this new process too


@pytest.mark.slow
def test_errors_speak_the_command_lines_words(tmp_path: Path) -> None:
    """Each slip a new user met, answered in flags, not the library's parameter names."""
    db = str(tmp_path / "m.db")
    session = tmp_path / "s.json"
    session.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}), encoding="utf-8")
    assert memgas("add", str(session), "--user", "a", "--session", "s1", "--db", db).returncode == 0
    one_line(memgas("add", "-", "--user", "a", "--session", "s1", "--db", db, stdin=session.read_bytes()), 2,
             "(--skip-existing leaves them out)")
    one_line(memgas("templates", "list", "--db", db), 2, "give exactly one of --agent, --user")
    one_line(memgas("export", "--db", db, "--out", str(tmp_path / "missing" / "x.jsonl")), 2,
             f"the folder {tmp_path / 'missing'} does not exist")
    assert not (tmp_path / "missing").exists()
    one_line(memgas("export", "--db", db, "--out", str(tmp_path)), 2, "is a folder")
    one_line(memgas("serve", "--db", str(tmp_path / "typo.db")), 2, "pass --create to make a new one there")
    one_line(memgas("keys", "create", "--scope", "admin", "--db", str(tmp_path / "typo.db")), 2, "pass --create")
    one_line(memgas("search", "x", "--user", "a", "--db", str(tmp_path / "typo.db")), 2, "such as 'memgas add'")
