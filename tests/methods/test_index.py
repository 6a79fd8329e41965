"""Incremental search indexes: after random adds and deletes (from this store object, another connection
or a rolled-back write), the index a cached method extends ranks and scores exactly as a fresh build."""

from __future__ import annotations

import random
import zlib
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest

from memgas.core.validate import make_session
from memgas.kernels.excerpt import query_terms
from memgas.kernels.lexical import terms_held
from memgas.kernels.quantize import to_half
from memgas.methods import MemGAS
from memgas.methods.baselines import DenseMethod
from memgas.store import open_store, texts_of

LINES = [
    "I hiked the Timberline Trail on Mount Hood last weekend.", "The wildflowers near Ramona Falls were amazing.",
    "I'm vegetarian and I can't stand cilantro.", "Lentil curry is my go-to weeknight dinner.",
    "My SUMIFS formula in Google Sheets keeps returning zero.", "The date column was stored as text.",
    "My corgi Biscuit is four pounds overweight.", "The vet suggested less kibble and longer walks.",
    "We booked a flight to Lisbon for the conference in May.", "My sister's wedding is in Porto next June.",
    "I started learning the cello; scales are hard.", "My landlord raised the rent by 8 percent.",
]
QUERIES = ["What did the vet say about Biscuit?", "which trail did I hike?", "spreadsheet formula returns zero",
           "what happened last weekend?"]
WHEN = datetime(2024, 3, 12, 9, 0)


#: A reply longer than the BM25 view reads (300 characters): its words past that are in the tail's index.
LONG_REPLY = ("Here is a longer answer with some background first, so that the words which matter come late. " * 3
              + "The vet said Biscuit should walk the trail daily; your spreadsheet formula needs dates as dates.")


def _session(rng: random.Random, sid: str, user: str = "u") -> object:
    msgs = []
    for line in rng.sample(LINES, rng.randint(1, 3)):
        reply = LONG_REPLY if line.startswith("My") else f"Noted ({sid})."
        msgs += [{"role": "user", "content": line}, {"role": "assistant", "content": reply}]
    return make_session(msgs, user_id=user, session_id=sid, timestamp=f"2024-03-{rng.randint(1, 14):02d}T10:00:00")


def _assert_words_are_the_texts(scored: object) -> None:
    """What the index says each turn's text holds of a question's words is what the texts hold."""
    turns = scored.index.masks["turn"]
    texts = texts_of(scored.index.table.texts, turns.tolist())
    for q in QUERIES + ["Did the vet say to walk the trail?", "dates as dates in the formula"]:
        terms = query_terms(q)
        assert scored.turn_words(terms).tolist() == [len(held) for held in terms_held(texts, terms)], q


def _assert_same_as_fresh(cached: MemGAS, store: object, embedder: object, user: str = "u") -> None:
    """Every query scores every unit as a new MemGAS (that builds its index from scratch) does."""
    fresh = MemGAS(embedder, snapshots=False)
    for q in QUERIES:
        a = cached.score(store, user, q, query_time=WHEN)
        _assert_words_are_the_texts(a)
        b = fresh.score(store, user, q, query_time=WHEN)
        assert a.index.table.ids.tolist() == b.index.table.ids.tolist()
        assert a.index.sessions == b.index.sessions and a.index.timestamps == b.index.timestamps
        np.testing.assert_allclose(a.scores, b.scores, rtol=0, atol=1e-9)
        assert cached.rank(store, user, q, query_time=WHEN) == fresh.rank(store, user, q, query_time=WHEN)
        hits = [cached.search(store, user, q, k=3, query_time=WHEN), fresh.search(store, user, q, k=3, query_time=WHEN)]
        assert [h.session_id for h in hits[0]] == [h.session_id for h in hits[1]]
        np.testing.assert_allclose([(h.score, h.relevance) for h in hits[0]],
                                   [(h.score, h.relevance) for h in hits[1]], rtol=0, atol=1e-9)


def test_random_adds_and_deletes_match_a_fresh_build(embedder, tmp_path: Path) -> None:
    rng = random.Random(7)
    store = open_store(tmp_path / "mem.db")
    method = MemGAS(embedder)
    stored: list[str] = []
    for step in range(14):
        cache = method._indexes
        before = (cache.builds, cache.updates, cache.appends)
        if len(stored) > 2 and rng.random() < 0.3:
            victim = stored.pop(rng.randrange(len(stored)))
            store.delete_session("u", victim)
            expected = "build"
        else:
            stored.append(f"s{step}")
            method.ingest(store, _session(rng, f"s{step}"))
            expected = "append" if step else "build"
            if step:  # filed under the state it holds: the version the write committed, this generation
                assert cache._stores[store]["u"][0] == (store.version("u"), store.generation)
        _assert_same_as_fresh(method, store, embedder)
        # An add extends the cached index from what it wrote, without reading it back (at once, for the next
        # search); a delete (and the first search) builds it whole.
        assert (cache.builds - before[0], cache.updates - before[1], cache.appends - before[2]) == (
            (1, 0, 0) if expected == "build" else (0, 0, 1))
    assert method._indexes.appends >= 6


def test_another_connection_is_picked_up_incrementally(embedder, tmp_path: Path) -> None:
    rng = random.Random(3)
    path = tmp_path / "mem.db"
    mine, theirs = open_store(path), open_store(path)
    method, other = MemGAS(embedder), DenseMethod(embedder, "turn")
    for i in range(3):
        method.ingest(mine, _session(rng, f"a{i}"))
    method.search(mine, "u", QUERIES[0])
    other.search(mine, "u", QUERIES[0])
    # one build (at the second add, whose association reads the index), then extended by each later add from what
    # it wrote
    assert (method._indexes.builds, method._indexes.updates, method._indexes.appends) == (1, 0, 2)
    MemGAS(embedder).ingest(theirs, _session(rng, "b0"))  # another writer, on its own connection
    hits = method.search(mine, "u", "Noted (b0).", k=4)
    assert "b0" in [h.session_id for h in hits]
    assert (method._indexes.builds, method._indexes.updates, method._indexes.appends) == (1, 1, 2)  # read theirs
    _assert_same_as_fresh(method, mine, embedder)
    # The dense baseline extends its unit index the same way.
    fresh = DenseMethod(embedder, "turn")
    assert other.rank(mine, "u", QUERIES[1]) == fresh.rank(mine, "u", QUERIES[1])
    assert (other._indexes.builds, other._indexes.updates) == (1, 1)
    mine.close()
    theirs.close()


def test_a_rolled_back_write_is_never_served_from_the_cache(embedder, tmp_path: Path) -> None:
    """Inside a write that rolls back, a search sees (and caches) the uncommitted session; its version
    number is drawn again by the next write, so only the store's generation tells the two states apart."""
    rng = random.Random(5)
    store = open_store(tmp_path / "mem.db")
    method = MemGAS(embedder)
    method.ingest(store, _session(rng, "kept"))
    with pytest.raises(RuntimeError), store.writing("u"):
        method.ingest(store, _session(rng, "ghost"))
        assert "ghost" in method.rank(store, "u", QUERIES[0]).sessions
        raise RuntimeError("roll back")
    method.ingest(store, _session(rng, "real"))
    assert sorted(method.rank(store, "u", QUERIES[0]).sessions) == ["kept", "real"]
    _assert_same_as_fresh(method, store, embedder)


def test_nbytes_counts_arrays_texts_and_shared_buffers_once() -> None:
    from memgas.methods.index import RowBuffer, nbytes

    rows = RowBuffer(np.zeros((10, 4), dtype=np.float32), capacity=100)
    view_a, view_b = rows.view(5), rows.view(10)  # two views of one buffer: the buffer counts once
    assert nbytes([view_a, view_b]) == 100 * 4 * 4 + 2 * 8
    assert nbytes(("ab", "cde")) == 2 * 8 + 5 and nbytes({"k": np.zeros(3)}) == 64 + 1 + 24
    shared = np.ones(1000)
    assert nbytes([shared, shared, (shared,)]) < 2 * shared.nbytes  # one object, once


def test_a_cache_sized_by_memory_drops_the_least_recently_used_users(embedder, tmp_path: Path) -> None:
    from memgas.methods.index import nbytes

    rng = random.Random(11)
    store = open_store(tmp_path / "mem.db")
    method = DenseMethod(embedder, "turn")  # its index has no part made later, on first use: sizes stay put
    for user in ("a", "b", "c"):
        for i in range(3):
            method.ingest(store, _session(rng, f"{user}{i}", user=user))
        method.search(store, user, QUERIES[0])
    sizes = {u: nbytes(method._indexes.get(store, u)) for u in ("a", "b", "c")}
    assert method._indexes.held(store) == (3, 0)  # counted by users so far
    room = sum(sorted(sizes.values())[1:])  # any two users' indexes fit, not three: "a" goes at once
    method.limit_caches(room)
    assert method._indexes.held(store) == (2, sizes["b"] + sizes["c"])
    assert method.cache_usage(store) == {"users": 2, "bytes": sizes["b"] + sizes["c"], "builds": 3, "snapshot_loads": 0}
    builds = method._indexes.builds
    got = method.rank(store, "a", QUERIES[1])  # rebuilt from the store, exactly, and "b" makes room
    assert method._indexes.builds == builds + 1 and got == DenseMethod(embedder, "turn").rank(store, "a", QUERIES[1])
    assert method._indexes.held(store) == (2, sizes["c"] + sizes["a"])
    store.close()


def _appended(rng: random.Random, store: object, sid: str) -> tuple[object, int]:
    """The stored session ``sid`` with one more exchange, and how many of its messages are stored."""
    old = store.get_session("u", sid)
    line = rng.choice(LINES)
    msgs = [m.to_dict() for m in old.messages] + [{"role": "user", "content": f"Also: {line}"},
                                                   {"role": "assistant", "content": f"Noted again ({sid})."}]
    return make_session(msgs, user_id="u", session_id=sid, timestamp=old.timestamp.isoformat()), len(old.messages)


def _assert_cold_is_exact(store: object, embedder: object) -> MemGAS:
    """A MemGAS that holds nothing (a new process, or a user evicted) scores exactly as one that builds from scratch."""
    cold, fresh = MemGAS(embedder), MemGAS(embedder, snapshots=False)
    for q in QUERIES:
        a, b = cold.score(store, "u", q, query_time=WHEN), fresh.score(store, "u", q, query_time=WHEN)
        _assert_words_are_the_texts(a)
        assert a.index.table.ids.tolist() == b.index.table.ids.tolist() and a.index.sessions == b.index.sessions
        assert a.index.timestamps == b.index.timestamps and list(a.index.table.texts) == list(b.index.table.texts)
        np.testing.assert_array_equal(a.index.table.vectors, b.index.table.vectors)
        np.testing.assert_array_equal(a.scores, b.scores)  # bit for bit: the same arrays, the same arithmetic
        hits = cold.search(store, "u", q, k=3, query_time=WHEN), fresh.search(store, "u", q, k=3, query_time=WHEN)
        assert [(h.session_id, h.score, [t.text for t in h.turns]) for h in hits[0]] == [
            (h.session_id, h.score, [t.text for t in h.turns]) for h in hits[1]]
    return cold


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_cold_load_from_a_snapshot_matches_a_fresh_build(backend: str, embedder, tmp_path: Path,
                                                            request: pytest.FixtureRequest) -> None:
    """Random adds, deletes and appends, from this store object and from another one (another process): after
    each, a cold MemGAS loads the snapshot (brought up to date by what was added since) and is exact."""
    url = request.getfixturevalue("pg_url") if backend == "postgres" else str(tmp_path / "mem.db")
    rng = random.Random(13)
    mine, theirs = open_store(url), open_store(url)
    writers = {"mine": MemGAS(embedder), "theirs": MemGAS(embedder)}
    stored: list[str] = []
    kinds = {"load": 0, "build": 0}
    for step in range(16):
        who = rng.choice(["mine", "theirs"])
        store, writer = (mine, writers[who]) if who == "mine" else (theirs, writers[who])
        roll = rng.random()
        if len(stored) > 3 and roll < 0.2:
            store.delete_session("u", stored.pop(rng.randrange(len(stored))))
            assert store.load_snapshot("u", writer._indexes._snapshots.kind) is None  # a delete leaves no copy
        elif len(stored) > 1 and roll < 0.45:
            session, n = _appended(rng, store, rng.choice(stored))
            writer.rewrite(store, session, keep_messages=n)
        else:
            stored.append(f"s{step}")
            writer.ingest(store, _session(rng, f"s{step}"))
        for w in writers.values():
            assert w.flush(timeout=30)  # the snapshots the writers' indexes are being written in the background
        cold = _assert_cold_is_exact(mine, embedder)
        assert cold.flush(timeout=30)
        loaded = cold._indexes.loads > 0
        kinds["load" if loaded else "build"] += 1
        assert cold._indexes.builds == (0 if loaded else 1)
    assert kinds["load"] >= 8  # most states are read from a snapshot, not rebuilt
    mine.close()
    theirs.close()


def test_snapshots_are_only_kept_for_the_current_state_and_unreadable_ones_are_rebuilt(embedder, tmp_path: Path
                                                                                      ) -> None:
    rng = random.Random(17)
    store = open_store(tmp_path / "mem.db")
    method = MemGAS(embedder)
    for i in range(3):
        method.ingest(store, _session(rng, f"s{i}"))
    assert method.flush(timeout=30)
    kind = method._indexes._snapshots.kind
    version, data = store.load_snapshot("u", kind)
    key = (store.version("u"), store.generation)
    assert version <= key[0] and store.save_snapshot("u", kind, key, data)
    assert not store.save_snapshot("u", kind, (key[0] - 1, key[1]), data)  # a state that is not the user's now
    assert not store.save_snapshot("u", kind, (key[0], key[1] + 1), data)  # read inside a rolled-back write
    assert store.load_snapshot("u", kind) == (key[0], data)
    inner = zlib.decompress(data)  # deflated; it names the units by id and holds none of their vectors
    assert inner.startswith(b"MGPK1\n") and len(data) < len(inner)
    units = store.load_units("u", texts=False)
    assert not any(to_half(v).tobytes()[:32] in inner for v in units.vectors)
    assert store.save_snapshot("u", kind, key, b"MGPK1\n garbage")
    cold = MemGAS(embedder)
    assert cold.rank(store, "u", QUERIES[0]) == MemGAS(embedder, snapshots=False).rank(store, "u", QUERIES[0])
    assert cold.flush(timeout=30)
    assert (cold._indexes.loads, cold._indexes.builds, cold._indexes.saves) == (0, 1, 1)  # rebuilt, and kept anew
    assert store.load_snapshot("u", kind)[1] != b"MGPK1\n garbage"
    other = MemGAS(embedder, assoc_scale=0.5)  # another derivation of the graph: another kind, never mixed up
    assert other._indexes._snapshots.kind != kind
    other.rank(store, "u", QUERIES[0])
    assert other._indexes.loads == 0 and other._indexes.builds == 1
    store.delete_user("u")
    assert store.load_snapshot("u", kind) is None and store.load_snapshot("u", other._indexes._snapshots.kind) is None
    store.close()


def test_an_upgraded_store_drops_the_snapshots_of_the_old_format(embedder, tmp_path: Path) -> None:
    store = open_store(tmp_path / "mem.db")
    method = MemGAS(embedder)
    method.ingest(store, _session(random.Random(2), "s0"))
    kind, fmt = method._indexes._snapshots.kind, method._indexes._snapshots.FORMAT
    assert kind.startswith(f"memgas/{fmt}/") and fmt >= 3
    olds = [kind.replace(f"memgas/{fmt}/", f"memgas/{n}/") for n in (1, fmt - 1)]
    for old in olds:
        assert store.save_snapshot("u", old, (store.version("u"), store.generation), b"an index of an older format")
    cold = MemGAS(embedder)  # a process of the new code: builds, and keeps its snapshot
    cold.search(store, "u", QUERIES[0], k=3)
    assert cold.flush(timeout=30)
    assert store.load_snapshot("u", kind) is not None
    assert all(store.load_snapshot("u", old) is None for old in olds)
    store.close()
