"""The ``memgas`` command end to end, as a user runs it (a real process, the real model)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ENV = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "memgas.cli", *args], cwd=cwd, env=ENV,
                          capture_output=True, text=True, timeout=600)


def test_demo_end_to_end(tmp_path: Path) -> None:
    r = run("demo", "--db", str(tmp_path / "demo.db"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "router weights: session=" in out
    assert out.count("Q: ") == 8
    found = int(out.strip().splitlines()[-2].split("/")[0])
    assert found >= 7, out
    # the demo store is a normal store: search it from the CLI
    r = run("search", "What is my dog called?", "--db", str(tmp_path / "demo.db"), "--user", "maya", "--json",
            cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    hits = json.loads(r.stdout)
    assert hits[0]["session_id"] == "2024-04-27-biscuit-move"
    assert set(hits[0]["weights"]) == {"session", "turn", "summary", "keyword", "lexical"}


def test_add_list_get_delete(tmp_path: Path) -> None:
    db = str(tmp_path / "m.db")
    f = tmp_path / "s.json"
    f.write_text(json.dumps({"session_id": "trip", "timestamp": "2024-05-01T10:00:00", "messages": [
        {"role": "user", "content": "I booked a ferry to Naxos for June 3."},
        {"role": "assistant", "content": "Nice! Naxos has great beaches."}]}))
    r = run("add", str(f), "--db", db, "--user", "ana", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["session_id"] == "trip"
    r = run("list", "--db", db, "--user", "ana", cwd=tmp_path)
    assert json.loads(r.stdout)[0]["session_id"] == "trip"
    r = run("get", "trip", "--db", db, "--user", "ana", cwd=tmp_path)
    assert "Naxos" in r.stdout
    r = run("delete", "trip", "--db", db, "--user", "ana", cwd=tmp_path)
    assert r.returncode == 0 and json.loads(r.stdout)["deleted_sessions"] == 1


@pytest.mark.parametrize(
    "content,needle",
    [
        ("not json", "not valid JSON"),
        (json.dumps([{"role": "user", "content": ""}]), "empty"),
        (json.dumps([{"role": "robot", "content": "hi"}]), "unknown role"),
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path: Path, content: str, needle: str) -> None:
    f = tmp_path / "bad.json"
    f.write_text(content)
    r = run("add", str(f), "--db", str(tmp_path / "x.db"), "--user", "ana", cwd=tmp_path)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("memgas: error:") and needle in lines[0]


def test_unknown_user_and_missing_file(tmp_path: Path) -> None:
    r = run("search", "hi", "--db", str(tmp_path / "y.db"), "--user", "ghost", cwd=tmp_path)
    assert r.returncode == 2 and "unknown user" in r.stderr
    r = run("add", str(tmp_path / "nope.json"), "--db", str(tmp_path / "y.db"), "--user", "ghost", cwd=tmp_path)
    assert r.returncode == 2 and "no such file" in r.stderr
