"""``memgas export`` / ``memgas import`` (memgas.portability): a dump moves memory between stores without loss.

Round trips run through the command in-process with the real model, from a real SQLite file into a ``target``
that is a new SQLite file or a fresh database of the throwaway PostgreSQL cluster (and back again), and compare
the stores through the abstract ``Store`` interface (sessions, messages, metadata, timestamps, units, vector
bytes, edges after id remapping) and ``Memory.search`` before and after. The source store interleaves two
users' sessions, so the imported unit ids differ from the source's and a wrong id remapping shows.
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pytest

from memgas.cli.commands import main
from memgas.core.errors import InvalidInputError
from memgas.dump import export_dump, import_dump
from memgas.memory import Memory
from memgas.store import SQLiteStore, Store, open_store
from support.hash_embedder import HashEmbedder

QUERY_TIME = "2024-07-01T12:00:00"

ALICE = [
    {"session_id": "a-run", "timestamp": "2024-03-02T19:15:00", "metadata": {"source": "chat", "tags": ["été", "10 km"]},
     "messages": [
         {"role": "user", "content": "I signed up for the Bridge City half marathon on June 16. Slightly terrified."},
         {"role": "assistant", "content": "Congratulations! Fifteen weeks is a comfortable runway for a half marathon."},
         {"role": "user", "content": "My long run this Sunday is 10 km along the river path."},
         {"role": "assistant", "content": "Keep it easy: a conversational pace builds the base."}]},
    {"session_id": "a-café", "timestamp": "2024-03-09T08:30:00+01:00", "metadata": {"lieu": "Zürich", "n": 3},
     "messages": [
         {"role": "user", "content": "Ich habe ein neues Café in Zürich gefunden, der Flat White ist großartig.", "name": "Alice"},
         {"role": "assistant", "content": "Schön! Welches Café ist es?"}]},
    {"session_id": "a-ankle", "timestamp": "2024-04-13T08:00:00",
     "metadata": {"nested": {"list": [1, 2.5, None, True], "emoji": "🏃‍♀️"}},
     "messages": [
         {"role": "user", "content": "I twisted my ankle on the river path during my long run for the half marathon."},
         {"role": "assistant", "content": "Ouch. Rest, ice it, and skip running for a week or two."},
         {"role": "user", "content": "Will I still make the race on June 16?"},
         {"role": "assistant", "content": "Likely, if you rebuild your mileage gradually."}]},
    {"session_id": "a-ferry", "timestamp": None,  # undated on purpose (a session given none is dated now)
     "messages": [
         {"role": "system", "content": "Travel planning mode."},
         {"role": "user", "content": "Book me a ferry from Piraeus to Naxos; I want a table at the café by the port."},
         {"role": "assistant", "content": "The morning ferry to Naxos leaves at 7:30."}]},
    {"session_id": "a-back", "timestamp": "2024-03-02T19:15:00",  # the same time as a-run: insertion order decides
     "messages": [
         {"role": "user", "content": "Back to running after the ankle injury: 5 km easy on the river path today."},
         {"role": "assistant", "content": "Great, no pain is the sign to keep building towards the half marathon."}]},
]
BOB = [
    {"session_id": "b-garden", "timestamp": "2024-05-01T10:00:00",
     "messages": [
         {"role": "user", "content": "The tomatoes in my garden are finally ripe, and the basil is growing fast."},
         {"role": "assistant", "content": "Perfect timing for a caprese salad."}]},
    {"session_id": "b-work", "timestamp": "2024-05-02T09:00:00", "metadata": {"team": "платформа"},
     "agent_id": "assistant-1", "run_id": "week-18",  # the scope and a message's own metadata travel too
     "messages": [
         {"role": "user", "content": "My manager moved the quarterly review to Friday; I need the slides by Thursday.",
          "metadata": {"raw": {"type": "message", "id": "msg_1"}}},
         {"role": "assistant", "content": "Block Wednesday afternoon for the slides."}]},
    {"session_id": "b-sauce", "timestamp": "2024-06-11T18:00:00",
     "messages": [
         {"role": "user", "content": "I made tomato sauce from the garden tomatoes with fresh basil."},
         {"role": "assistant", "content": "Homemade sauce freezes well for the winter."},
         {"role": "user", "content": "The slides for the review went fine, by the way."},
         {"role": "assistant", "content": "Glad the quarterly review went well."}]},
]
QUERIES = {
    "alice": ["When is the half marathon?", "How is my ankle?", "Which café did I find in Zürich?",
              "ferry to Naxos", "long run along the river"],
    "bob": ["What grows in my garden?", "When is the quarterly review?", "tomato sauce recipe"],
}


def _ingest(mem: Memory) -> None:
    """Alice's and Bob's sessions, interleaved (so each user's unit ids have gaps)."""
    for i in range(max(len(ALICE), len(BOB))):
        for user, sessions in (("alice", ALICE), ("bob", BOB)):
            if i < len(sessions):
                s = sessions[i]
                mem.add_many([s], user_id=user)  # as add() does, and a "timestamp": None stays undated


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Path:
    """A store with users alice (5 sessions) and bob (3), made with the real model."""
    db = tmp_path_factory.mktemp("src") / "source.db"
    with Memory(db, embedder=embedder) as mem:
        _ingest(mem)
    return db


@pytest.fixture(scope="module")
def dump(source: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``memgas export`` of the whole source store."""
    out = tmp_path_factory.mktemp("dump") / "dump.jsonl"
    assert main(["export", "--db", str(source), "--out", str(out)]) == 0
    return out


@pytest.fixture(params=["sqlite", "postgres"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where an import writes: a SQLite file in a folder not made yet, or a fresh PostgreSQL database."""
    return str(tmp_path / "new" / "target.db") if request.param == "sqlite" else request.getfixturevalue("pg_url")


def _fingerprint(target: str) -> Any:
    """What shows any write to a store: a SQLite file's bytes; on PostgreSQL every user's version (which
    changes with every write), sessions, units and edges."""
    if not target.startswith("postgresql://"):
        return Path(target).read_bytes()
    with open_store(target) as store:
        return [(u, store.version(u), [i.session_id for i in store.list_sessions(u)], store.load_units(u).ids.tolist(),
                 store.load_edges(u).src.tolist()) for u in store.list_users()]


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _assert_same_memory(a: Store, b: Store, users: Sequence[str]) -> None:
    """Two stores hold the same memory of ``users``: sessions (in order), messages, metadata, timestamps,
    units (in order, vectors byte for byte) and edges, unit ids mapped by position."""
    for user in users:
        infos = [(i.session_id, i.timestamp, i.n_messages, i.n_turns) for i in a.list_sessions(user)]
        assert infos == [(i.session_id, i.timestamp, i.n_messages, i.n_turns) for i in b.list_sessions(user)]
        for sid, *_ in infos:
            assert a.get_session(user, sid) == b.get_session(user, sid)
        ua, ub = a.load_units(user), b.load_units(user)
        assert ua.session_ids == ub.session_ids and ua.texts == ub.texts
        for column in ("granularity", "turn_start", "turn_end", "chunk"):
            assert np.array_equal(getattr(ua, column), getattr(ub, column)), column
        assert ua.vectors.tobytes() == ub.vectors.tobytes()
        remap = dict(zip(ua.ids.tolist(), ub.ids.tolist()))
        ea, eb = a.load_edges(user), b.load_edges(user)
        mapped = sorted((*sorted((remap[s], remap[d])), w) for s, d, w in zip(ea.src.tolist(), ea.dst.tolist(),
                                                                                ea.weight.tolist()))
        assert mapped == list(zip(eb.src.tolist(), eb.dst.tolist(), eb.weight.tolist()))


def _searches(db: Path | str, embedder: Any, user: str) -> list[list[tuple[str, float]]]:
    with Memory(db, embedder=embedder) as mem:
        return [[(h.session_id, h.score) for h in mem.search(q, user_id=user, k=4, query_time=QUERY_TIME)]
                for q in QUERIES[user]]


def _assert_same_searches(a: Path | str, b: Path | str, embedder: Any, user: str) -> None:
    before, after = _searches(a, embedder, user), _searches(b, embedder, user)
    for hits_a, hits_b in zip(before, after, strict=True):
        assert [sid for sid, _ in hits_a] == [sid for sid, _ in hits_b]
        assert np.allclose([s for _, s in hits_a], [s for _, s in hits_b], rtol=0, atol=1e-9)


def test_round_trip_keeps_everything(source: Path, dump: Path, target: str, embedder: Any,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _cli(capsys, "import", str(dump), "--db", target)
    assert code == 0 and err.splitlines() == ["memgas: 5/8 sessions", "memgas: 8/8 sessions"], err  # per user
    result = json.loads(out)
    assert result["mode"] == "lossless" and (result["users"], result["sessions"]) == (2, 8)
    with SQLiteStore(source) as a, open_store(target) as b:
        assert a.list_users() == b.list_users() == ["alice", "bob"]
        assert result["edges"] == len(a.load_edges("alice")) + len(a.load_edges("bob"))
        _assert_same_memory(a, b, ["alice", "bob"])
        # The remapping is exercised: bob's units got other ids, and edges cross sessions.
        assert not np.array_equal(a.load_units("bob").ids, b.load_units("bob").ids)
        for user in ("alice", "bob"):
            units, edges = a.load_units(user), a.load_edges(user)
            sessions = np.array(units.session_ids)[np.searchsorted(units.ids, np.stack([edges.src, edges.dst]))]
            assert (sessions[0] != sessions[1]).any(), user
    for user in ("alice", "bob"):
        _assert_same_searches(source, target, embedder, user)


def test_the_dump_is_json_lines_with_portable_vectors(dump: Path, embedder: Any) -> None:
    lines = [json.loads(line) for line in dump.read_text("utf-8").splitlines()]
    head, end = lines[0], lines[-1]
    assert (head["format"], head["version"], head["embedder_id"], head["dim"], head["vector_format"]) == (
        "memgas-dump", 2, embedder.id, embedder.dim, "float16")
    assert {len(base64.b64decode(u["vector"])) for line in lines[1:-1] for u in line["units"]} == {2 * embedder.dim}
    assert end == {"type": "end", "users": 2, "sessions": 8}
    assert [line["user_id"] for line in lines[1:-1]] == ["alice"] * 5 + ["bob"] * 3  # one user at a time
    assert "a-café" in dump.read_text("utf-8")  # non-ASCII kept readable


def test_export_of_one_user(source: Path, target: str, tmp_path: Path, embedder: Any,
                            capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "bob.jsonl"
    code, printed, _ = _cli(capsys, "export", "--db", str(source), "--out", str(out), "--user", "bob")
    assert code == 0 and json.loads(printed)["sessions"] == 3
    assert {json.loads(line).get("user_id") for line in out.read_text("utf-8").splitlines()[1:-1]} == {"bob"}
    assert main(["import", str(out), "--db", target]) == 0
    with SQLiteStore(source) as a, open_store(target) as b:
        assert b.list_users() == ["bob"]
        _assert_same_memory(a, b, ["bob"])
    _assert_same_searches(source, target, embedder, "bob")
    code, _, err = _cli(capsys, "export", "--db", str(source), "--out", str(tmp_path / "x.jsonl"), "--user", "zoe")
    assert code == 2 and "unknown user 'zoe'" in err and not (tmp_path / "x.jsonl").exists()


def _corrupt(lines: list[str], how: str) -> list[str]:
    """The dump's lines with one defect, always in its last user's lines or after them."""
    last = json.loads(lines[-2])
    if how == "cut mid-line":
        return lines[:-2] + [lines[-2][: len(lines[-2]) // 2]]
    if how == "no end line":
        return lines[:-1]
    if how == "after end":
        return lines + ["{}\n"]
    if how == "end count":
        return lines[:-1] + [json.dumps({"type": "end", "users": 2, "sessions": 9}) + "\n"]
    if how == "version":
        return [json.dumps({**json.loads(lines[0]), "version": 3}) + "\n"] + lines[1:]
    if how == "vector format":
        return [json.dumps({**json.loads(lines[0]), "vector_format": "bfloat16"}) + "\n"] + lines[1:]
    if how == "vector":
        last["units"][0]["vector"] = last["units"][0]["vector"][:-8]
    elif how == "edge ahead":
        last["edges"].append([0, 10_000, 0.5])
    elif how == "edge behind":  # both ends in earlier lines: no session of the dump writes it
        last["edges"].append([0, 1, 0.5])
    elif how == "bad json":
        return lines[:-2] + [lines[-2].replace('"units"', '"units', 1)] + lines[-1:]
    return lines[:-2] + [json.dumps(last, ensure_ascii=False) + "\n"] + lines[-1:]


@pytest.mark.parametrize("how, message", [
    ("cut mid-line", "is truncated"), ("no end line", "without its end line"),
    ("after end", "after the end line"), ("end count", "the end line counts"),
    ("version", "of version 3"), ("vector format", "unknown vector_format 'bfloat16'"), ("vector", "vector of"), ("edge ahead", "must link a unit of this session"),
    ("edge behind", "must link a unit of this session"), ("bad json", "not valid JSON"),
])
def test_a_corrupt_dump_writes_nothing(dump: Path, target: str, tmp_path: Path, embedder: Any, how: str,
                                       message: str, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(_corrupt(dump.read_text("utf-8").splitlines(keepends=True), how)), "utf-8")
    code, out, err = _cli(capsys, "import", str(bad), "--db", target)
    assert code == 2 and out == "" and len(err.splitlines()) == 1 and message in err, err
    if target.startswith("postgresql://"):  # a database is not dropped: it is left empty
        with open_store(target) as store:
            assert store.list_users() == [] and store.stats()["sessions"] == 0
    else:
        assert not Path(target).parent.exists()  # the store (and its folder) made for the import are gone
    with Memory(tmp_path / "m.db", embedder=embedder) as mem:  # through the API: an open store stays empty
        with pytest.raises(InvalidInputError, match=re.escape(message)):
            import_dump(bad, mem)
        assert mem.store.list_users() == []


def test_a_store_whose_memory_was_all_deleted_round_trips(tmp_path: Path, embedder: Any) -> None:
    # its embedder is bound but no unit gives the width: the header says dim null, and the dump still reads
    with Memory(tmp_path / "emptied.db", embedder=embedder) as mem:
        mem.add("Soon gone.", user_id="u", session_id="s")
        mem.delete(user_id="u")
        with (tmp_path / "empty.jsonl").open("w", encoding="utf-8") as out:
            assert export_dump(mem.store, out)["sessions"] == 0
    head = json.loads((tmp_path / "empty.jsonl").read_text("utf-8").splitlines()[0])
    assert head["embedder_id"] == embedder.id and head["dim"] is None
    with Memory(tmp_path / "new.db", embedder=embedder) as mem:
        assert import_dump(tmp_path / "empty.jsonl", mem)["sessions"] == 0 and mem.users() == []


def test_skip_existing_joins_edges_to_the_sessions_already_there(source: Path, dump: Path, target: str,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["import", str(dump), "--db", target]) == 0
    before = _fingerprint(target)
    code, _, err = _cli(capsys, "import", str(dump), "--db", target)
    assert code == 2 and "already has sessions" in err and _fingerprint(target) == before
    with open_store(target) as store:  # alice loses her last three sessions, whose edges reach the first two
        for sid in ("a-ferry", "a-back", "a-ankle"):
            store.delete_session("alice", sid)
    code, out, _ = _cli(capsys, "import", str(dump), "--db", target, "--skip-existing")
    result = json.loads(out)
    assert code == 0 and (result["sessions"], result["skipped"], result["edges_dropped"]) == (3, 5, 0)
    with SQLiteStore(source) as a, open_store(target) as b:
        _assert_same_memory(a, b, ["alice", "bob"])


def test_another_embedder_re_derives(dump: Path, target: str, tmp_path: Path) -> None:
    hashing = HashEmbedder(32)
    with Memory(target, embedder=hashing) as mem:
        result = import_dump(dump, mem)
        assert result["mode"] == "re-derived" and result["sessions"] == 8 and result["edges"] > 0
        assert mem.store.embedder_id == hashing.id
        hits = mem.search("a ferry from Piraeus to Naxos", user_id="alice", k=1, query_time=QUERY_TIME)
        assert hits[0].session_id == "a-ferry"
    # Re-derived = ingested afresh in the dump's order: the same store as adding the sessions one by one.
    with Memory(tmp_path / "ref.db", embedder=hashing) as ref:
        for user, sessions in (("alice", ALICE), ("bob", BOB)):
            ref.add_many(sessions, user_id=user)
    with SQLiteStore(tmp_path / "ref.db") as a, open_store(target) as b:
        _assert_same_memory(a, b, ["alice", "bob"])


def test_cli_re_derives_a_dump_of_another_embedder(target: str, tmp_path: Path, embedder: Any,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    with Memory(tmp_path / "hash.db", embedder=HashEmbedder(32)) as mem:
        mem.add_many(BOB, user_id="bob")
    out = tmp_path / "hash.jsonl"
    assert _cli(capsys, "export", "--db", str(tmp_path / "hash.db"), "--out", str(out))[0] == 0  # reads the store, no Memory
    code, printed, err = _cli(capsys, "import", str(out), "--db", target)
    assert code == 0 and "re-embedded and re-associated" in err and json.loads(printed)["mode"] == "re-derived"
    with Memory(target, embedder=embedder) as mem:
        assert mem.store.embedder_id == embedder.id
        assert mem.search("What grows in my garden?", user_id="bob", k=1)[0].session_id == "b-garden"


def test_sqlite_to_postgresql_to_sqlite_keeps_memory_and_searches(source: Path, dump: Path, pg_url: str,
                                                                  tmp_path: Path, embedder: Any) -> None:
    """SQLite → PostgreSQL → SQLite: the dump read back from PostgreSQL is the dump written from SQLite (but
    for its creation time), and the three stores hold the same memory and answer every query alike."""
    assert main(["import", str(dump), "--db", pg_url]) == 0
    again = tmp_path / "again.jsonl"
    assert main(["export", "--db", pg_url, "--out", str(again)]) == 0
    assert again.read_text("utf-8").splitlines()[1:] == dump.read_text("utf-8").splitlines()[1:]
    back = tmp_path / "back.db"
    assert main(["import", str(again), "--db", str(back)]) == 0
    with SQLiteStore(source) as a, open_store(pg_url) as b, SQLiteStore(back) as c:
        _assert_same_memory(a, b, ["alice", "bob"])
        _assert_same_memory(b, c, ["alice", "bob"])
    for user in ("alice", "bob"):
        _assert_same_searches(source, pg_url, embedder, user)
        _assert_same_searches(pg_url, back, embedder, user)


def test_a_version_1_dump_of_float32_vectors_still_imports(source: Path, dump: Path, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """Dumps written before stores kept float16 (version 1, float32 vectors, no vector_format) import as they did:
    each vector is rounded to the float16 a store keeps, the same memory as importing the version 2 dump."""
    lines = [json.loads(line) for line in dump.read_text("utf-8").splitlines()]
    head = {k: v for k, v in lines[0].items() if k != "vector_format"} | {"version": 1}
    for line in lines[1:-1]:
        for u in line["units"]:
            halves = np.frombuffer(base64.b64decode(u["vector"]), dtype="<f2")
            u["vector"] = base64.b64encode(halves.astype("<f4").tobytes()).decode("ascii")
    old = tmp_path / "v1.jsonl"
    old.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in [head, *lines[1:]]), "utf-8")
    code, _, err = _cli(capsys, "import", str(old), "--db", str(tmp_path / "v1.db"))
    assert code == 0, err
    with SQLiteStore(source) as a, SQLiteStore(tmp_path / "v1.db") as b:
        _assert_same_memory(a, b, ["alice", "bob"])
    head["vector_format"] = "float16"  # a version 1 dump that names a format is read as it says
    old.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in [head, *lines[1:]]), "utf-8")
    code, _, err = _cli(capsys, "import", str(old), "--db", str(tmp_path / "v1b.db"))
    assert code == 2 and "vector of 1536 bytes; 384 components in float16 take 768" in err, err
