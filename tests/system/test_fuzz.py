"""Fuzzing the public surface with hypothesis: ``Memory.add``, ``search``, ``get``, ``delete``, ``list``,
``stats``, the knowledge graph's calls (``Memory(method="zep").kg``) and the ``memgas`` command
(``memgas.cli.commands`` in process).

For every generated call: a refusal is an :class:`InvalidInputError` (or subclass) with a one-line message
(:class:`NotFoundError` only when every id given is well-formed), never another exception; after a refusal,
or any read, the store is byte-for-byte what it was (SHA-256 of the database file and its write-ahead log:
a committed write changes one of them, and nothing else does). ``test_fuzz_add`` deletes what it added at
the end of each example, so that histories, and the cost of associating with them, stay small.

Each hypothesis example is a batch of calls (the engine's own cost per example is then shared), and each
call has every argument good but one, or all good, or all wild (:func:`calls`). A tiny hashing embedder
stands in for the real model (this test is about input handling, not retrieval); ``derandomize=True`` makes
every run try the same inputs. Each test asserts how many calls it tried: 12,500 in all (``FUZZ_SHARE``).
Run with ``-s`` to see the counts of accepted, refused and not-found calls.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import json
import sqlite3
import string
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memgas import Memory
from memgas.cli.commands import build_parser
from memgas.cli.commands import main as cli_main
from memgas.core.errors import InvalidInputError, NotFoundError
from memgas.core.validate import MAX_K, MAX_QUERY_CHARS, check_id
from support.hash_embedder import HashEmbedder

#: Calls each test tries; 12,500 in all.
FUZZ_SHARE = {"add": 2_500, "search": 3_500, "reads": 3_000, "cli": 1_000, "live": 1_500, "kg": 1_000}
#: Calls per hypothesis example.
BATCH = 10
COUNTS: dict[str, Counter[str]] = {name: Counter() for name in FUZZ_SHARE}
USER = "u"  # the user every store starts with, holding session "s0"


EMBEDDER = HashEmbedder(64)


def fuzz(name: str) -> settings:
    """Settings for one test: enough batches for its share of calls, reproducible, no time limits."""
    return settings(max_examples=-(-FUZZ_SHARE[name] // BATCH), derandomize=True, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# -- strategies: each call has every argument good but one (or none, or all) drawn wild --------------

SURROGATES = st.sampled_from(["\ud800", "caf\udce9", "\udfff x", "a\udc80b"])
any_text = st.text(st.characters(exclude_categories=()), max_size=30)  # surrogates included
plain_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=40)
words = st.lists(st.sampled_from(["hiking", "dog", "Paris", "sister", "coffee", "weekend", "May", "3", "!", "café"]),
                 min_size=1, max_size=8).map(" ".join)
texts = st.one_of(words, plain_text, any_text, SURROGATES, st.sampled_from(["", "  ", "\n", "\x00", "x" * 2_000_001]))

valid_ids = st.one_of(st.sampled_from([USER, "v", "s0", "a" * 256, "alice@example.com"]),
                      st.text(string.ascii_letters + string.digits + "._:@/+-éß名٣", min_size=1, max_size=12))
wild_ids = st.one_of(
    valid_ids, st.sampled_from(["", "a\n", "\na", "a b", "a" * 257, "x\x00", "-"]),
    any_text, SURROGATES, st.integers(-2, 5), st.booleans(), st.none(), st.binary(max_size=4),
)

zones = st.builds(timezone, st.timedeltas(min_value=timedelta(hours=-23, minutes=-59),
                                          max_value=timedelta(hours=23, minutes=59)))
in_range = st.one_of(st.datetimes(datetime(1000, 1, 2), datetime(8999, 12, 30)),
                     st.datetimes(datetime(1000, 1, 2), datetime(8999, 12, 30), timezones=zones))
good_times = st.one_of(st.none(), in_range, in_range.map(datetime.isoformat),
                       st.sampled_from(["2023-05-20T10:00:00Z", "2023/05/20 (Sat) 07:47", "1:56 pm on 8 May, 2023"]))
wild_datetimes = st.one_of(
    st.datetimes(), st.datetimes(timezones=zones),
    st.sampled_from([datetime(1, 1, 1), datetime.max, datetime(999, 12, 31, 23, 59), datetime(1000, 1, 1),
                     datetime(8999, 12, 31, 23, 59), datetime(9000, 1, 1)]),
)
wild_times = st.one_of(
    good_times, wild_datetimes, wild_datetimes.map(datetime.isoformat), texts, st.integers(), st.floats(),
    st.sampled_from(["0001-01-01T00:00:00+05:00", "9999-12-31T23:59:59-05:00", "2023-02-30", "T", "+05:00"]),
)

good_scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1),
                         st.floats(allow_nan=False, allow_infinity=False), plain_text)
good_json = st.recursive(good_scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                               st.dictionaries(plain_text, inner, max_size=3)),
                         max_leaves=6)
good_metadata = st.one_of(st.none(), st.dictionaries(plain_text, good_json, max_size=4))
wild_scalars = st.one_of(
    good_scalars, st.integers(-(2**64), 2**64), st.floats(), texts,
    st.sampled_from([float("nan"), float("inf"), 2**63, -(2**63) - 1, b"x", {1, 2}, 1j, datetime(2023, 1, 1)]),
)
wild_json = st.recursive(
    wild_scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.tuples(inner),
                            st.dictionaries(st.one_of(texts, st.integers(0, 3)), inner, max_size=3)),
    max_leaves=8,
)


def _deep(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth - 1):
        value = {"d": value}
    return value


wild_metadata = st.one_of(
    good_metadata, st.dictionaries(texts, wild_json, max_size=4), wild_json,
    st.sampled_from([_deep(32), _deep(33), _deep(5_000), {"big": "x" * 70_000}, [("a", 1)], "ab", {"a", "b"}]),
)

good_message = st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant", "system"]), "content": words},
                                     optional={"name": plain_text})
good_messages = st.lists(good_message, min_size=1, max_size=3)
#: Messages as agents send them: an OpenAI tool call (its function anything), Anthropic content parts.
tool_messages = st.fixed_dictionaries({
    "role": st.just("assistant"), "content": st.one_of(st.none(), words),
    "tool_calls": st.one_of(
        st.lists(st.fixed_dictionaries({"function": st.one_of(
            st.fixed_dictionaries({"name": st.one_of(words, st.none(), st.integers())},
                                  optional={"arguments": st.one_of(words, good_json)}),
            wild_json, st.just(None))}), max_size=2),
        wild_json)})
part_messages = st.fixed_dictionaries({
    "role": st.sampled_from(["user", "assistant"]),
    "content": st.lists(st.one_of(st.fixed_dictionaries({"type": st.just("text"), "text": st.one_of(words, texts)}),
                                  st.fixed_dictionaries({"type": st.sampled_from(["image", "tool_use", "tool_result",
                                                                                  "thinking", "x"])}),
                                  # what a tool's part may hold: anything, JSON or not (an object, a set, NaN)
                                  st.fixed_dictionaries({"type": st.just("tool_result"), "content": st.one_of(
                                      wild_json, st.builds(object))}),
                                  st.fixed_dictionaries({"type": st.just("tool_use"), "name": words,
                                                         "input": st.one_of(wild_json, st.builds(object))}),
                                  wild_json), max_size=3)})
wild_message = st.one_of(
    good_message, tool_messages, part_messages,
    st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant", "wizard", "", None, 3, ("user",)]),
                           "content": st.one_of(texts, st.integers(), st.none())},
                          optional={"name": st.one_of(texts, st.integers()), "speaker": texts, "extra": texts}),
    texts, st.integers(), st.none(), st.lists(texts, max_size=2),
)
wild_messages = st.one_of(st.lists(wild_message, min_size=0, max_size=4), texts,
                          st.dictionaries(texts, texts, max_size=2), st.integers(), st.none())

good_queries = st.one_of(words, st.sampled_from(["what did I do last weekend?", "this week", "last month",
                                                 "999 years ago", "since 2022", "the 3rd of May", "in April or may not",
                                                 "q" * MAX_QUERY_CHARS]))
wild_queries = st.one_of(good_queries, texts, st.integers(), st.none(), st.just("q" * (MAX_QUERY_CHARS + 1)))
good_ks = st.integers(1, 10)
#: Filters (:mod:`memgas.core.filters`): good ones, and paths that only look like list indexes, deep nesting, junk.
good_filters = st.one_of(st.none(), st.sampled_from([{"agent_id": "a"}, {"k.0": 1}, {"k": {"$in": [[1, 2]]}},
                                                     {"$or": [{"run_id": "r"}, {"k.1": {"$gte": 2}}]},
                                                     {"$not": {"agent_id": {"$exists": True}}}]))


def _nested(op: str, depth: int) -> object:
    spec: object = {"agent_id": "a"}
    for _ in range(depth):
        spec = {op: spec} if op == "$not" else {op: [spec]}
    return spec


wild_filters = st.one_of(
    good_filters, wild_json, st.dictionaries(st.one_of(texts, st.sampled_from(["k.²", "k." + "1" * 5000, "k.-1",
                                                                              "k.٣", "$and", "$nope", ""])),
                                             wild_json, max_size=2),
    st.sampled_from([_nested("$and", 33), _nested("$not", 400), _nested("$or", 32), {"$and": []}, {"$in": 1}]),
)
good_exclusions = st.one_of(st.just(()), st.just(["s1"]))
wild_exclusions = st.one_of(good_exclusions, wild_json, st.lists(wild_ids, max_size=2), st.just("s0"))
wild_scores = st.one_of(st.floats(-0.5, 1.5), st.floats(), st.sampled_from([True, 1, "0.5", None, float("nan")]))
wild_ks = st.one_of(st.integers(-3, MAX_K + 3), st.sampled_from([True, False, 2.0, "3", None, MAX_K, MAX_K + 1]))


def calls(**fields: tuple[st.SearchStrategy[Any], st.SearchStrategy[Any]]) -> st.SearchStrategy[dict[str, Any]]:
    """Keyword arguments for one call, from ``(good, wild)`` strategies per argument: all good but one
    wild (twice as likely), all good, or all wild. A wild value may still be valid."""
    names = sorted(fields)

    @st.composite
    def draw(draw_: st.DrawFn) -> dict[str, Any]:
        broken = draw_(st.sampled_from([*names, *names, "none", "all"]))
        return {n: draw_(fields[n][1] if broken in (n, "all") else fields[n][0]) for n in names}

    return draw()


def batches(**fields: tuple[st.SearchStrategy[Any], st.SearchStrategy[Any]]) -> st.SearchStrategy[list[dict[str, Any]]]:
    """:data:`BATCH` calls' arguments (see :func:`calls`)."""
    return st.lists(calls(**fields), min_size=BATCH, max_size=BATCH)


# -- the oracle ------------------------------------------------------------------------------------


def digest(db: Path) -> str:
    """SHA-256 of every row the store holds but its index snapshots (derived data that a search may write in the
    background, never memory: a snapshot only saves the next process a rebuild), read as SQL."""
    h = hashlib.sha256()
    with contextlib.closing(sqlite3.connect(db)) as conn:
        for line in conn.iterdump():
            if '"snapshots"' not in line and "TABLE snapshots" not in line:
                h.update(line.encode())
    return h.hexdigest()


def well_formed(*values: object) -> bool:
    """Whether every value is a valid user or session id."""
    try:
        for v in values:
            check_id("id", v)
    except InvalidInputError:
        return False
    return True


class Checker:
    """Counts one test's calls and holds the store's digest as of the last call allowed to change it."""

    def __init__(self, name: str, db: Path) -> None:
        self.counts, self.db = COUNTS[name], db
        self.digest = digest(db)

    def changed(self) -> None:
        """The store was written on purpose (an accepted add or delete, or a test's own repair)."""
        self.digest = digest(self.db)

    def unchanged(self, what: str) -> None:
        assert digest(self.db) == self.digest, f"{what} changed the store"

    @contextlib.contextmanager
    def call(self, ids: Sequence[object], *, writes: bool = False) -> Iterator[None]:
        """Run one call: if it raised, require a one-line InvalidInputError (NotFoundError only for
        well-formed ``ids``) and the store unchanged; if it returned, the store unchanged unless ``writes``."""
        self.counts["tried"] += 1
        try:
            yield
        except NotFoundError as e:
            self.counts["not found"] += 1
            assert well_formed(*ids), f"NotFoundError for a malformed id among {ids!r}: {e}"
            assert "\n" not in str(e)
        except InvalidInputError as e:
            self.counts["refused"] += 1
            assert "\n" not in str(e), f"a multi-line message: {str(e)!r}"
        except Exception:
            self.counts["other errors"] += 1
            raise
        else:
            self.counts["accepted"] += 1
            if writes:
                self.changed()
                return
        self.unchanged("a refused call or a read")

    def report(self, name: str) -> None:
        print(f"fuzz {name}: {dict(self.counts)}")
        assert self.counts["tried"] >= FUZZ_SHARE[name] and self.counts["other errors"] == 0


def seed(mem: Memory) -> None:
    """Give the user ``USER`` session ``s0`` (again)."""
    mem.add([{"role": "user", "content": "I went hiking with my dog last weekend."}], user_id=USER, session_id="s0",
            timestamp="2023-05-20T10:00:00Z", metadata={"k": [1, 2]})


@pytest.fixture()
def store(tmp_path: Path) -> Iterator[tuple[Memory, Path]]:
    db = tmp_path / "fuzz.db"
    with Memory(str(db), embedder=EMBEDDER) as mem:
        seed(mem)
        yield mem, db


# -- the tests -------------------------------------------------------------------------------------


@pytest.mark.slow
def test_fuzz_add(store: tuple[Memory, Path]) -> None:
    mem, db = store
    check = Checker("add", db)

    @fuzz("add")
    @given(batches(messages=(good_messages, wild_messages), user_id=(valid_ids, wild_ids),
                   session_id=(st.one_of(st.none(), valid_ids), wild_ids), timestamp=(good_times, wild_times),
                   metadata=(good_metadata, wild_metadata)))
    def run(batch: list[dict[str, Any]]) -> None:
        added: list[tuple[str, str]] = []
        for kwargs in batch:
            sid, uid = kwargs["session_id"], kwargs["user_id"]
            with check.call([uid] + ([] if sid is None else [sid]), writes=True):
                r = mem.add(kwargs.pop("messages"), **kwargs)
                added.append((uid, r.session_id))
                stored = mem.get(r.session_id, user_id=uid).to_dict()
                assert json.loads(json.dumps(stored, allow_nan=False, ensure_ascii=False)) == stored
        assert mem.get("s0", user_id=USER).metadata == {"k": [1, 2]}  # a duplicate id never replaced it
        for uid in {u for u, _ in added if u != USER}:
            mem.delete(user_id=uid)
        for sid in [s for u, s in added if u == USER]:
            mem.delete(sid, user_id=USER)
        if added:
            check.changed()

    run()
    check.report("add")


@pytest.mark.slow
def test_fuzz_search(store: tuple[Memory, Path]) -> None:
    mem, db = store
    check = Checker("search", db)

    @fuzz("search")
    @given(batches(query=(good_queries, wild_queries), user_id=(st.just(USER), wild_ids), k=(good_ks, wild_ks),
                   query_time=(good_times, wild_times), min_score=(st.just(0.0), wild_scores)))
    def run(batch: list[dict[str, Any]]) -> None:
        for kwargs in batch:
            with check.call([kwargs["user_id"]]):
                hits = mem.search(kwargs.pop("query"), **kwargs)
                stored = kwargs["user_id"] == USER  # any other well-formed user has no memory yet: no hits
                assert [h.session_id for h in hits] == ([] if not stored or kwargs["min_score"] > 0 and not hits
                                                        else ["s0"])

    run()
    check.report("search")


@pytest.mark.slow
def test_fuzz_get_delete_list(store: tuple[Memory, Path]) -> None:
    mem, db = store
    check = Checker("reads", db)
    methods: dict[str, Callable[[Any, Any], Any]] = {
        "get": lambda s, u: mem.get(s, user_id=u),
        "delete": lambda s, u: mem.delete(s, user_id=u),
        "list": lambda s, u: mem.list(user_id=u),
        "stats": lambda s, u: mem.stats(u),
    }

    @fuzz("reads")
    @given(batches(method=(st.sampled_from(sorted(methods)),) * 2,
                   session_id=(st.sampled_from(["s0", "s1"]), wild_ids), user_id=(st.sampled_from([USER, "v"]), wild_ids)))
    def run(batch: list[dict[str, Any]]) -> None:
        for kwargs in batch:
            method, sid, uid = kwargs["method"], kwargs["session_id"], kwargs["user_id"]
            named = [uid] + ([sid] if method in ("get", "delete") and sid is not None else [])
            if method in ("list", "stats") and uid is None:
                named = []  # None means every user
            with check.call(named, writes=method == "delete"):
                methods[method](sid, uid)
            if not mem.store.has_user(USER):  # put the fixture session back
                seed(mem)
                check.changed()

    run()
    check.report("reads")


@pytest.mark.slow
def test_fuzz_live(store: tuple[Memory, Path]) -> None:
    """The calls of a live conversation and what an agent reads: append, update_message, delete_message, context,
    profile and search with filters and exclusions (the probe's odd filters, tool calls and exclusions included), and
    the rest of the declared API: add_many, units, graph, users and answer (refused: no LLM here)."""
    mem, db = store
    check = Checker("live", db)
    mem.append(talk_twice := [{"role": "user", "content": "I moved to Lisbon."},
                              {"role": "assistant", "content": "Nice!"}], user_id=USER, session_id="live")
    check.changed()
    methods: dict[str, Callable[[dict[str, Any]], Any]] = {
        "append": lambda a: mem.append(a["messages"], user_id=a["user_id"], session_id=a["session_id"]),
        "update": lambda a: mem.update_message(a["session_id"], a["index"], a["content"], user_id=a["user_id"]),
        "drop": lambda a: mem.delete_message(a["session_id"], a["index"], user_id=a["user_id"]),
        "context": lambda a: mem.context(a["query"], user_id=a["user_id"], max_tokens=a["k"],
                                         exclude_sessions=a["exclude"], filters=a["filters"]),
        "profile": lambda a: mem.profile(user_id=a["user_id"], exclude_sessions=a["exclude"], filters=a["filters"]),
        "search": lambda a: mem.search(a["query"], user_id=a["user_id"], exclude_sessions=a["exclude"],
                                       filters=a["filters"]),
        "batch": lambda a: mem.add_many(a["sessions"], user_id=a["user_id"], skip_existing=a["index"] == 1),
        "units": lambda a: mem.units(a["session_id"], user_id=a["user_id"]),
        "graph": lambda a: mem.graph(user_id=a["user_id"], limit=a["k"]),
        "users": lambda a: mem.users(),
        "answer": lambda a: mem.answer(a["query"], user_id=a["user_id"]),  # no LLM here: always refused
    }

    @fuzz("live")
    @given(batches(method=(st.sampled_from(sorted(methods)),) * 2, messages=(good_messages, wild_messages),
                   user_id=(st.just(USER), wild_ids), session_id=(st.sampled_from(["live", "s0"]), wild_ids),
                   index=(st.integers(0, 1), st.one_of(st.integers(-2, 9), wild_scalars)),
                   content=(words, st.one_of(texts, wild_scalars)), query=(good_queries, wild_queries),
                   k=(st.integers(50, 500), wild_ks), exclude=(good_exclusions, wild_exclusions),
                   filters=(good_filters, wild_filters),
                   sessions=(st.lists(st.fixed_dictionaries({"messages": good_messages}), min_size=1, max_size=2),
                             st.one_of(wild_json, st.lists(st.fixed_dictionaries(
                                 {"messages": wild_messages}, optional={"session_id": wild_ids,
                                                                       "timestamp": wild_times,
                                                                       "metadata": wild_metadata}), max_size=2)))))
    def run(batch: list[dict[str, Any]]) -> None:
        for args in batch:
            writes = args["method"] in ("append", "update", "drop", "batch")
            named = ([] if args["method"] == "users" else [args["user_id"]]) + (
                [args["session_id"]] if args["method"] in ("update", "drop", "units") else [])
            with check.call(named, writes=writes):
                methods[args["method"]](args)
            for info in mem.store.list_sessions(USER) if args["method"] == "batch" else ():  # a batch's sessions go
                if info.session_id not in ("live", "s0"):
                    mem.delete(info.session_id, user_id=USER)
                    check.changed()
            for sid in ("live", "s0"):  # put the fixture sessions back, whole
                try:
                    held = len(mem.get(sid, user_id=USER).messages)
                except NotFoundError:
                    held = 0
                if held != (2 if sid == "live" else 1):
                    with contextlib.suppress(NotFoundError):
                        mem.delete(sid, user_id=USER)
                    if sid == "live":
                        mem.append(talk_twice, user_id=USER, session_id="live")
                    else:
                        seed(mem)
                    check.changed()

    run()
    check.report("live")


@pytest.mark.slow
def test_fuzz_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "cli.db"
    with Memory(str(db), embedder=EMBEDDER) as mem:  # the command opens the store itself, once per call
        seed(mem)
    monkeypatch.setattr("memgas.memory.get_embedder", lambda spec=None, **_: EMBEDDER)
    monkeypatch.setattr("memgas.cli.commands.build_parser", functools.cache(build_parser))  # 17 ms a call otherwise
    check = Checker("cli", db)
    good_arg = st.sampled_from([USER, "s0", "v"])
    wild_arg = st.one_of(valid_ids, st.sampled_from(["", "a b", "-x", "--all", "a\n"]), plain_text, SURROGATES)
    good_file = st.one_of(good_messages, st.fixed_dictionaries({"messages": good_messages},
                                                               optional={"timestamp": good_times.map(str)}))
    wild_file = st.one_of(
        wild_messages, st.binary(max_size=20),
        st.fixed_dictionaries({"messages": wild_messages}, optional={"session_id": wild_ids, "timestamp": wild_times,
                                                                     "metadata": wild_metadata}),
        st.lists(st.fixed_dictionaries({"messages": wild_messages}, optional={"session_id": wild_ids}), max_size=3),
    )

    def argv_for(kw: dict[str, Any]) -> list[str]:
        command, user, value, k, extra = kw["command"], kw["user"], kw["value"], kw["k"], kw["extra"]
        argv = [command, "--db", str(db), "--user", user]
        if command == "add":
            try:
                raw = kw["data"] if isinstance(kw["data"], bytes) else json.dumps(kw["data"]).encode()
            except (TypeError, ValueError):  # not JSON-serialisable as generated (sets, bytes, ...)
                raw = b"{not json"
            (tmp_path / "in.json").write_bytes(raw)
            return argv + [str(tmp_path / "in.json")] + (["--session", extra] if extra is not None else [])
        if command == "search":
            return argv + [value] + (["-k", k] if k is not None else [])
        if command == "get":
            return argv + [value]
        if command == "delete":
            return argv + ([value] if extra is None else ["--all"])
        return argv

    @fuzz("cli")
    @given(batches(command=(st.sampled_from(["add", "search", "get", "delete", "list", "stats"]),) * 2,
                   data=(good_file, wild_file), user=(good_arg, wild_arg),
                   value=(st.one_of(good_arg, good_queries), st.one_of(wild_arg, wild_queries.filter(
                       lambda q: isinstance(q, str)))),
                   k=(st.one_of(st.none(), good_ks.map(str)), st.one_of(wild_ks.map(str), wild_arg)),
                   extra=(st.none(), st.one_of(st.none(), wild_arg))))
    def run(batch: list[dict[str, Any]]) -> None:
        for kw in batch:
            argv = argv_for(kw)
            err, out = io.StringIO(), io.StringIO()
            check.counts["tried"] += 1
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
                try:
                    rc = cli_main(argv)
                except SystemExit as e:  # argparse's own refusal (usage and one error line)
                    rc = -2 if e.code == 2 else e.code
                except Exception:
                    check.counts["other errors"] += 1
                    raise
            if rc == 0:
                check.counts["accepted"] += 1
                if kw["command"] in ("add", "delete"):
                    with Memory(str(db), embedder=EMBEDDER) as m:
                        if not m.store.has_user(USER):  # give it back its one session
                            seed(m)
                    check.changed()
                else:
                    check.unchanged(f"{argv!r}")
                continue
            check.counts["refused"] += 1
            assert rc in (2, -2), f"exit {rc} for {argv!r}: {err.getvalue()[-500:]}"
            if rc == 2:
                assert len(err.getvalue().strip().splitlines()) == 1, f"not one line for {argv!r}: {err.getvalue()!r}"
            check.unchanged(f"the refused command {argv!r}")

    run()
    check.report("cli")


@pytest.mark.slow
def test_fuzz_knowledge_graph(tmp_path: Path) -> None:
    """``kg.facts``, ``kg.history``, ``kg.communities`` and ``kg.retry_pending`` of a ``zep`` memory with one fact:
    every argument wild in turn (the probe's ``history("0")``, ``facts(entity=5)`` among them)."""
    from support.openai_stub import OpenAIStub

    def responder(body: dict[str, Any]) -> str:
        system = body["messages"][0]["content"]
        if system.startswith("You extract facts"):
            return json.dumps({"facts": [{"subject": "user", "relation": "lives in", "object": "Lisbon"}]})
        return json.dumps({"verdict": "new", "ids": []})

    db = tmp_path / "kg.db"
    with OpenAIStub(responder) as stub, Memory(str(db), embedder=EMBEDDER, method="zep", llm_units=False,
                                              llm=f"openai:tiny@{stub.base_url}") as mem:
        seed(mem)
        assert [f.object for f in mem.kg.facts(user_id=USER)] == ["Lisbon"]
        check = Checker("kg", db)
        calls_of: dict[str, Callable[[dict[str, Any]], Any]] = {
            "facts": lambda a: mem.kg.facts(user_id=a["user_id"], entity=a["entity"], as_of=a["as_of"],
                                            include_invalid=a["include_invalid"]),
            "history": lambda a: mem.kg.history(a["fact_id"], user_id=a["user_id"]),
            "communities": lambda a: mem.kg.communities(user_id=a["user_id"]),
            "retry_pending": lambda a: mem.kg.retry_pending(user_id=a["user_id"]),
        }

        @fuzz("kg")
        @given(batches(call=(st.sampled_from(sorted(calls_of)),) * 2, user_id=(st.sampled_from([USER, "v"]), wild_ids),
                       entity=(st.sampled_from([None, "user", "Lisbon", "nobody"]), st.one_of(texts, wild_scalars)),
                       as_of=(st.none(), wild_times), include_invalid=(st.booleans(), wild_scalars),
                       fact_id=(st.integers(0, 3), st.one_of(wild_scalars, st.integers(-5, 2**70)))))
        def run(batch: list[dict[str, Any]]) -> None:
            for kwargs in batch:
                with check.call([kwargs["user_id"]]):
                    calls_of[kwargs["call"]](kwargs)

        run()
    check.report("kg")
