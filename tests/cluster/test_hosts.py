"""The cluster's hosts leave nothing behind: a run that ends removes its namespaces at exit, and one killed outright
is cleaned up by the next run (``memgas.bench.hosts``), while a run still alive keeps its own."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from memgas.bench.hosts import Hosts, remove_leftovers

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("ip") is None,
                                reason="network namespaces need root and iproute2")


def namespaces(tag: str) -> list[str]:
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout.split()
    return [n for n in listed if n.startswith(f"mg{tag}-")]


def run(body: str) -> tuple[str, int]:
    """Run a child that makes two hosts, starts a sleeper on one and prints its tag and the sleeper's pid, then ends
    as ``body`` says; the tag and the pid."""
    script = textwrap.dedent(f"""
        import os, signal, sys, tempfile
        from pathlib import Path
        from memgas.bench.hosts import Hosts
        hosts = Hosts(["a", "b"])
        assert hosts.mode == "network namespaces", hosts.mode
        sleeper = hosts.spawn("a", ["sleep", "600"], Path(tempfile.mkdtemp()) / "a.log")
        print(hosts.tag, sleeper.pid, flush=True)
        {body}
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    tag, pid = done.stdout.split()
    return tag, int(pid)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().split()[2] != "Z"


def test_a_run_killed_outright_is_cleaned_up_by_the_next() -> None:
    tag, sleeper = run("os.kill(os.getpid(), signal.SIGKILL)")
    assert len(namespaces(tag)) == 2 and alive(sleeper)  # left behind, as a kill -9 leaves them
    assert tag in remove_leftovers()
    assert namespaces(tag) == [] and not alive(sleeper)
    assert tag not in remove_leftovers()


def test_a_run_that_ends_without_closing_removes_its_namespaces_at_exit() -> None:
    tag, sleeper = run("sys.exit(3)")
    assert namespaces(tag) == [] and not alive(sleeper)


def test_a_live_run_keeps_its_namespaces_until_it_closes() -> None:
    hosts = Hosts(["a"])
    try:
        assert remove_leftovers() == [] or hosts.tag not in remove_leftovers()
        assert namespaces(hosts.tag) == [f"mg{hosts.tag}-a"]
    finally:
        hosts.close()
    assert namespaces(hosts.tag) == []


def test_a_tag_that_starts_as_the_bridge_prefix_does_is_removed_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    # the bridge is "mgb" + tag and a namespace "mg" + tag + "-host": tag b0a1 makes namespaces that start "mgb"
    monkeypatch.setattr("memgas.bench.hosts.secrets.token_hex", lambda n: "b0a1")
    hosts = Hosts(["a"])
    assert namespaces("b0a1") == ["mgb0a1-a"]
    hosts.close()
    assert namespaces("b0a1") == []


def test_a_namespace_of_the_harness_without_a_living_owner_is_a_leftover() -> None:
    # a run's close that failed half-way took its owner file with it: its namespaces are still the harness's
    subprocess.run(["ip", "netns", "add", "mgc0de-x"], check=True)
    assert "c0de" in remove_leftovers() and namespaces("c0de") == []
