"""One long thread appended one message at a time (issue 61): an append derives only the session's end, and what it
derives is what a whole add derives (but the summary and keywords, which read the schedule's turns); the index follows the appends in place (a continued turn's old BM25 document
retired, not the index rebuilt) and scores as a fresh one; a ``kill -9`` mid-append leaves the acknowledged messages
and units whole.

Real parts: the shipped MiniLM, SQLite files, and for the crash a child process killed with SIGKILL.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from memgas import Memory
from memgas.core.types import Message, Session, group_turns
from memgas.embed.base import Embedder
from memgas.methods.units import build_units, summary_turns

from .test_live import TOPICS, fresh, rankings, session_state


def thread(turns: int, seed: int) -> list[dict[str, str]]:
    """A thread of ``turns`` user messages, each answered by one reply or, every fifth, by two."""
    rnd = random.Random(seed)
    out = []
    for i in range(turns):
        topic = rnd.choice(TOPICS)
        out.append({"role": "user", "content": f"Message {i}: about {topic}, item {rnd.randint(0, 999)}."})
        out += [{"role": "assistant", "content": f"Noted {topic} ({j})."} for j in range(1 + (i % 5 == 4))]
    return out


def test_a_long_thread_appended_message_by_message_equals_one_whole_add(tmp_path: Path, embedder: Embedder) -> None:
    messages = thread(45, 3)  # 45 turns: past the summary's schedule points 32 and 40
    with Memory(tmp_path / "live.db", embedder=embedder) as live, Memory(tmp_path / "whole.db",
                                                                           embedder=embedder) as whole:
        for mem in (live, whole):
            mem.add(thread(6, 9), user_id="u", session_id="before", timestamp="2024-01-01")
        whole.add(messages, user_id="u", session_id="t", timestamp="2024-02-01")
        live.search("cello lessons", user_id="u")  # the index is cached, then followed through every append
        builds = live.method._indexes.builds
        for i, message in enumerate(messages):
            if i == len(messages) - 1:  # what the last append reads of the stored session: its end
                session = live.get("t", user_id="u")
                stored = session.extended([Message(message["role"], message["content"])])
                known, part, before = live.method.known(live.store, stored, len(session.messages), append=True)
                assert known is not None and known.summary is not None and before == []
                # from the chunk holding the last turn on: a chunk's few turns, its chunk, the summary and keywords
                first = known.start
                assert first > 30 and len(part) == (45 - first) + 1 + 2
                assert sorted(known.turn_vectors) == list(range(first, 44))
            live.append([message], user_id="u", session_id="t", timestamp="2024-02-01")
        units_l, vectors_l, edges_l = session_state(live, "u", "t")
        units_w, vectors_w, edges_w = session_state(whole, "u", "t")
        # chunks and turns (granularity 0 and 1) and their edges as one whole add's
        chunks_and_turns = [k for k in units_w if k[1] < 2]
        assert [k for k in units_l if k[1] < 2] == chunks_and_turns
        assert all(np.array_equal(vectors_l[k], vectors_w[k]) for k in chunks_and_turns)
        lasting = [[e for e in edges if e[0][1] < 2 and e[1][1] < 2] for edges in (edges_l, edges_w)]
        assert [e[:2] for e in lasting[0]] == [e[:2] for e in lasting[1]] and lasting[0]
        np.testing.assert_allclose([e[2] for e in lasting[0]], [e[2] for e in lasting[1]], rtol=0, atol=1e-6)
        # the summary and keywords: the whole add read all 45 turns, the appends the first summary_turns(45) = 40, as
        # an add of those turns' summary would
        assert {k[3] for k in units_w if k[1] >= 2} == {45}
        assert {k[3] for k in units_l if k[1] >= 2} == {summary_turns(45)} == {40}
        reference = [u for u in build_units(live.get("t", user_id="u"), embedder, summary_reach=40)
                     if u.granularity in ("summary", "keyword")]
        assert [k[5] for k in units_l if k[1] >= 2] == [u.text for u in reference]
        assert all(np.array_equal(vectors_l[k], u.vector) for k, u in zip([k for k in units_l if k[1] >= 2], reference))
        # followed in place: a rebuild only when retired documents outnumber the live ones (not once per reply)
        assert live.method._indexes.builds - builds <= 1
        index = live.method._indexes.get(live.store, "u")
        assert index.turn_documents is not None and index.retired() > 0
        assert rankings(live, "u") == rankings(fresh(live, embedder), "u")
        # BM25 over the live documents scores as an index that never held the retired ones, bit for bit
        other = Memory(live.store, embedder=embedder, snapshots=False)  # built from the store's units
        q = "Noted the tomato garden, item 17"
        a, b = (m.method.scored(m.store, "u", q) for m in (live, other))
        assert a.channels is not None and b.channels is not None and a.channels["lexical"].max() > 0
        np.testing.assert_array_equal(a.channels["lexical"], b.channels["lexical"])


def test_an_append_to_a_whole_added_session_keeps_its_whole_summary_until_the_next_point(embedder: Embedder) -> None:
    messages = thread(50, 5)
    cut = next(i for i, m in enumerate(messages) if m["content"].startswith("Message 45:"))
    with Memory(embedder=embedder) as mem:
        mem.add(messages[:cut], user_id="u", session_id="t")  # 45 turns, the summary over all of them

        def summary_ends() -> set[int]:
            units = mem.store.session_units("u", "t", texts=False)
            return {int(units.turn_end[r]) for r in range(len(units)) if units.granularity[r] >= 2}

        assert summary_ends() == {45}
        for message in messages[cut:]:  # turns 46 to 49: summary_turns gives 40, less than what is kept
            if message["content"].startswith("Message 49:"):
                assert summary_ends() == {45}
            mem.append([message], user_id="u", session_id="t")
        assert summary_ends() == {summary_turns(50)} == {50}  # the next point of the schedule: read again


def test_an_edit_after_appends_rebuilds_the_index_and_forgets_the_old_words(embedder: Embedder) -> None:
    with Memory(embedder=embedder) as mem:
        for message in thread(8, 4):
            mem.append([message], user_id="u", session_id="t")
        mem.search("anything", user_id="u")
        assert mem.method._indexes.get(mem.store, "u").turn_documents is not None  # replies retired documents
        mem.update_message("t", 2, "Message 1: about zanzibar spices.", user_id="u")
        index = mem.method._indexes.get(mem.store, "u")
        assert index.turn_documents is None  # built again: no retired document keeps the old text
        hits = mem.search("zanzibar", user_id="u")
        assert hits and 1 in [t.index for t in hits[0].turns]


_CHILD = """
import os, sys
from memgas import Memory
from memgas.core.types import Message, Session, group_turns
path, log, start = sys.argv[1], sys.argv[2], int(sys.argv[3])
fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
with Memory(path) as mem:
    for i in range(start, 10_000):
        role = "user" if i % 3 != 2 else "assistant"
        os.write(fd, f"intent {i}\\n".encode())
        mem.append([{"role": role, "content": f"message {i} about the garden, row {i * 7 % 31}"}],
                   user_id="u", session_id="thread")
        os.write(fd, f"ack {i}\\n".encode())
"""


def test_kill_9_mid_append_loses_no_acknowledged_message_and_leaves_no_half_derived_unit(
        tmp_path: Path, embedder: Embedder) -> None:
    path, log = tmp_path / "thread.db", tmp_path / "acks.log"
    log.touch()
    rng = random.Random(61)
    acked = 0
    for kill in range(4):
        child = subprocess.Popen([sys.executable, "-c", _CHILD, str(path), str(log), str(acked)],
                                 env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 120
        while log.read_text().count("ack") < acked + 8 + kill * 4 and child.poll() is None:
            assert time.monotonic() < deadline, "the child appends nothing"
            time.sleep(0.01)
        time.sleep(rng.uniform(0, 0.05))
        assert child.poll() is None, child.stderr.read().decode() if child.stderr else ""
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        child.stderr.close()  # type: ignore[union-attr]
        # The highest acknowledged index, not the count of acks: a message committed in flight before an earlier
        # kill has no ack line.
        lines = log.read_text().splitlines()
        acked = max((int(line.split()[1]) + 1 for line in lines if line.startswith("ack ")), default=0)
        with Memory(path, embedder=embedder) as mem:
            session = mem.get("thread", user_id="u")
            assert len(session.messages) in (acked, acked + 1)  # every acknowledged one; the one in flight all or not
            acked = len(session.messages)
            assert [m.content.split()[1] for m in session.messages] == [str(i) for i in range(acked)]
            stored = mem.store.session_units("u", "thread")
            whole = build_units(session, mem.method.embedder, summary_reach=summary_turns(len(session.turns)))
            assert sorted((int(stored.granularity[r]), int(stored.turn_start[r]), int(stored.turn_end[r]),
                           int(stored.chunk[r]), stored.texts[r]) for r in range(len(stored))) == sorted(
                (["session", "turn", "summary", "keyword"].index(u.granularity), u.turn_start, u.turn_end, u.chunk,
                 u.text) for u in whole)
        with log.open("a") as f:
            f.write(f"restart {acked}\n")


def test_extending_a_session_cuts_the_same_turns_as_cutting_it_whole() -> None:
    rnd = random.Random(5)
    for _ in range(200):
        roles = [rnd.choice(["user", "assistant", "assistant", "tool"]) for _ in range(rnd.randint(1, 12))]
        messages = tuple(Message(r, f"m{i}") for i, r in enumerate(roles))
        cut = rnd.randint(1, len(messages))
        first = Session("u", "s", messages[:cut])
        assert first.turns == group_turns(messages[:cut])  # cut once, then extended
        grown = first.extended(messages[cut:], metadata={"k": 1})
        assert grown.turns == group_turns(messages) and grown.metadata == {"k": 1}
