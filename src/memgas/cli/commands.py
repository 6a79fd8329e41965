"""The ``memgas`` command: demo, add, search, answer, list, get, delete, stats, facts, export, import, migrate,
serve, keys, mcp, templates, principles, bench.

Every error ends the command with one line on stderr, ``memgas: error: ...``, and exit status 2 for bad
input (a bad option, file, id or timestamp, an unknown user or session, a missing store) or 1 for other
failures (an LLM that cannot be reached, a store of another embedder, a locked or unwritable file, a
PostgreSQL server lost mid-command); only a bug prints a traceback. When the reader of stdout goes away
(``memgas stats | head -1``) the command stops quietly with status 141, as a program killed by SIGPIPE does.
JSON output is UTF-8 and keeps non-ASCII text.

Only ``add``, ``import`` and ``demo`` create a store; the other commands refuse a ``--db`` file that does not exist.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
import time
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, Sequence

from memgas.cli.bench import add_bench_parser
from memgas.cli.principles import add_parsers as add_principles_parsers
from memgas.cli.service import add_service_parsers
from memgas.cli.templates import add_parsers as add_templates_parsers
from memgas.core.errors import DuplicateSessionError, InvalidInputError, MemgasError, NotFoundError
from memgas.core.validate import check_id, check_query
from memgas.core.version import __version__

if TYPE_CHECKING:
    from memgas.memory import Memory
from memgas.cli.common import (
    DEFAULT_DB,
    Progress,
    memgas_options,
    print_json,
    require_store,
    retention_periods,
    store_file,
    undo_created,
)

__all__ = ["main", "build_parser", "EXIT_BROKEN_PIPE", "EXIT_INTERRUPTED"]

# onnxruntime/OpenMP threads must not busy-wait on small machines; set before any runtime loads.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

#: The exit status of a command whose stdout was closed early: 128 + SIGPIPE, as a shell reports it.
EXIT_BROKEN_PIPE = 141
#: The exit status of a command stopped by Ctrl-C: 128 + SIGINT, as a shell reports it.
EXIT_INTERRUPTED = 130


def _demo_data() -> dict[str, Any]:
    return json.loads(resources.files("memgas").joinpath("data/demo_conversation.json").read_text("utf-8"))


def _print_hits(hits: list[Any], *, explain: bool = False, width: int = 110) -> None:
    """Print hits as text; ``explain`` adds the router's granularity weights, each hit's seed score and its
    evidence by channel."""
    if not hits:
        print("  (no hits)")
        return
    weights = hits[0].weights
    if explain and weights:
        print("  router weights: " + "  ".join(f"{g}={w:.2f}" for g, w in weights.items()))
    for rank, h in enumerate(hits, 1):
        when = h.timestamp.date().isoformat() if h.timestamp else "undated"
        seed = f"  seed={h.seed_score:.4f}" if explain else ""
        assoc = "  [via association]" if h.via_association else ""
        print(f"  {rank}. {h.session_id}  ({when})  relevance={h.relevance:.2f}  score={h.score:.4f}{seed}{assoc}")
        if explain and h.channels:
            print("       evidence: " + "  ".join(f"{c}={v:.2f}" for c, v in h.channels.items()))
        for t in h.turns[:2]:
            line = " ".join(t.text.split())
            print(f"       turn {t.index}: {line[:width]}{'…' if len(line) > width else ''}")


def _memory(args: argparse.Namespace, *, create: bool = False) -> Memory:
    """The ``Memory`` of ``--db``; unless ``create``, a store file that does not exist is an error (nothing
    is created, not even its directory)."""
    from memgas.memory import Memory

    if not create:
        require_store(args.db)
    method = getattr(args, "method", None) or getattr(args, "method_default", None)
    return Memory(args.db, method=method, llm=getattr(args, "llm", None), **memgas_options(getattr(args, "set", [])))


def _require_user(mem: Memory, user_id: str) -> None:
    """Raise the unknown-user error every command gives. The library answers a user with no memory with no
    hits (an agent's first search); on the command line a user id is typed, so an unknown one is an error."""
    check_id("user_id", user_id)
    if not mem.store.has_user(user_id):
        raise NotFoundError(f"unknown user {user_id!r}: no memory stored for this user")


def _is_demo_store(db: str, data: dict[str, Any]) -> bool:
    """Whether ``db`` is a memgas store holding nothing but (part of) the demo conversation."""
    from memgas.store import open_store

    try:
        store = open_store(db)
    except InvalidInputError:  # not a memgas store: someone else's file
        return False
    with store:
        users = store.list_users()
        demo_sessions = {s["session_id"] for s in data["sessions"]}
        return not users or (users == [data["user_id"]]
                             and {i.session_id for i in store.list_sessions(users[0])} <= demo_sessions)


#: What each channel of a hit's evidence is, in words (the demo's explanation of why a session was found).
CHANNEL_WORDS = {"lexical": "the question's words", "session": "the whole session", "turn": "one turn",
                 "summary": "its summary", "keyword": "its keywords"}
DEMO_LEGEND = """How to read it: each question lists the sessions memgas found in the order of their "score" (the
session's rank score over the best one's: every view of the session and its association with the others, weighed
together). "relevance" is something else: the question's best cosine with any one part of the session (0-1,
comparable across questions), so a session can rank above one of higher relevance, when more of its views match.
"why" is how much each view of the session counted towards its score (the question's words by BM25, the whole
session, one turn, its summary, its keywords); "linked" marks a session that ranks by its association with better
ones. "The agent reads first" are
the first lines of the context an agent would be given: for a question about now, the newest state first.
The router weighs those views equally: made to favour the sharpest, it lost on LoCoMo (BENCHMARKS.md)."""


def _why(hit: Any) -> str:
    """Why a hit ranks where it does, in words: its channels' shares of the evidence, largest first."""
    parts = [f"{CHANNEL_WORDS.get(c, c)} {v:.0%}" for c, v in sorted(hit.channels.items(), key=lambda cv: -cv[1])
             if v >= 0.05]
    if hit.via_association:
        parts.append("linked to a better session")
    return ", ".join(parts) or "the best of the rest"


def _print_demo_question(mem: Any, user: str, q: dict[str, Any], k: int, width: int = 110) -> bool:
    """One demo question: what was found and why, and what the agent reads first; whether an expected session was
    among the hits."""
    from memgas.context import context_mode

    hits = mem.search(q["query"], user_id=user, k=k)
    ok = any(h.session_id in q["expected_sessions"] for h in hits)
    print(f"Q: {q['query']}   [{'found' if ok else 'missed'}: expected {', '.join(q['expected_sessions'])}]")
    best = max((h.score for h in hits), default=0.0) or 1.0
    for rank, h in enumerate(hits, 1):
        when = h.timestamp.date().isoformat() if h.timestamp else "undated"
        print(f"  {rank}. {h.session_id}  ({when})  score {h.score / best:.2f}  relevance {h.relevance:.2f}  "
              f"why: {_why(h)}")
        line = " ".join(h.turns[0].text.split()) if h.turns else ""
        print(f"       best turn: {line[:width]}{'…' if len(line) > width else ''}")
    block = mem.context(q["query"], user_id=user, max_tokens=300).splitlines()
    # the user card's first two lines (what holds now about the user), then the first three memories
    lines = [line for line in block if line.startswith("- ")][:2] + [
        line for line in block if line[:1] == "[" and line[1:2].isdigit()][:3]
    now = " (a question about now: the newest state first, what it replaced marked earlier)" \
        if context_mode(q["query"]) == "now" else ""
    print(f"  the agent reads first{now}:")
    for line in lines:
        print(f"       {line[:width + 30]}{'…' if len(line) > width + 30 else ''}")
    return ok


def cmd_demo(args: argparse.Namespace) -> int:
    """Ingest the shipped demo conversation into a fresh store and run its queries."""
    from memgas.memory import Memory

    data = _demo_data()
    user = data["user_id"]
    db = args.db
    path = store_file(db)
    if path is not None and path.is_dir():
        raise InvalidInputError(f"--db {db} is a directory")
    if path is not None and path.exists():
        if not args.force and not _is_demo_store(db, data):
            raise InvalidInputError(f"{db} exists and is not a memgas demo store: pass --force to replace it, "
                                    "or choose another --db")
        for file in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
            file.unlink(missing_ok=True)
    print(f"memgas demo: {len(data['sessions'])} sessions of user {user!r} → {db}")
    with Memory(db, method=args.method) as mem:
        t0 = time.perf_counter()
        for s in data["sessions"]:
            r = mem.add(s["messages"], user_id=user, session_id=s["session_id"], timestamp=s["timestamp"])
            print(f"  added {r.session_id:<28} {r.units:>3} units {r.edges:>4} edges  {r.seconds:.2f}s")
        print(f"ingested in {time.perf_counter() - t0:.2f}s: each session cut into units (the session, its turns, a "
              "summary, keywords), linked to related sessions by association edges\n")
        print(DEMO_LEGEND + "\n")
        found = 0
        for q in data["queries"]:
            found += _print_demo_question(mem, user, q, args.k)
            print()
        asked = data["queries"][-1]["query"]
        print(f"What an agent reads for {asked!r} (memgas context, 400 tokens):")
        print(mem.context(asked, user_id=user, max_tokens=400) or "(nothing relevant stored)")
        print()
        stats = mem.stats(user)
    print(f"{found}/{len(data['queries'])} queries found an expected session in the top {args.k}.")
    print(f"store: {stats['sessions']} sessions, {stats['units']} units, {stats['edges']} edges")
    return 0


def _read_json(file: str) -> Any:
    """The parsed content of a JSON file (``-``: standard input); any reason it cannot be read is an
    :class:`InvalidInputError`."""
    try:
        return json.loads(sys.stdin.buffer.read().decode("utf-8") if file == "-" else Path(file).read_text("utf-8"))
    except FileNotFoundError:
        raise InvalidInputError(f"no such file: {file}") from None
    except OSError as e:  # a directory, no permission, ...
        raise InvalidInputError(f"cannot read {file}: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise InvalidInputError(f"{file} is not UTF-8 text: {e.reason} at byte {e.start}") from None
    except json.JSONDecodeError as e:
        raise InvalidInputError(f"{file} is not valid JSON: {e}") from None
    except ValueError as e:  # Python refuses integers of more than 4,300 digits
        raise InvalidInputError(f"{file} holds a number too long to read ({str(e).split(';')[0]})") from None
    except RecursionError:
        raise InvalidInputError(f"{file} is nested too deeply to read") from None


def _file_sessions(data: Any, args: argparse.Namespace) -> list[Any]:
    """The sessions of an ``add`` file: ``{"sessions": [...]}``, a list of session objects, or one session (an
    object with ``messages``, or a bare list of messages). ``--session``/``--timestamp`` name a single
    session's id and time; they may not contradict the file, nor apply to a file of several sessions."""
    if isinstance(data, dict) and "sessions" in data:
        sessions = data["sessions"]
        if not isinstance(sessions, list):
            raise InvalidInputError(f"{args.file}: 'sessions' must be a list of session objects")
    elif isinstance(data, list) and data and isinstance(data[0], dict) and "messages" in data[0]:
        sessions = data
    else:
        sessions = [data if isinstance(data, dict) else {"messages": data}]
    if not sessions:
        raise InvalidInputError(f"{args.file} holds no sessions")
    given = {"session_id": args.session, "timestamp": args.timestamp}
    given = {key: value for key, value in given.items() if value is not None}
    if given and len(sessions) > 1:
        raise InvalidInputError(f"--session and --timestamp name one session, and {args.file} holds {len(sessions)}; "
                                "put each session's id and timestamp in the file")
    if given and isinstance(sessions[0], dict):
        for key, value in given.items():
            if sessions[0].get(key) not in (None, value):
                raise InvalidInputError(f"{key} {value!r} from the command line contradicts the file's "
                                        f"{sessions[0][key]!r}")
        sessions = [{**sessions[0], **given}]
    scope = {key: value for key, value in (("agent_id", args.agent_id), ("run_id", args.run_id)) if value is not None}
    for i, session in enumerate(sessions):  # the scope options apply to every session, as defaults
        if scope and isinstance(session, dict):
            clash = next((k for k, v in scope.items() if session.get(k) not in (None, v)), None)
            if clash is not None:
                raise InvalidInputError(f"--{clash.replace('_', '-')} {scope[clash]!r} contradicts session {i}'s "
                                        f"{session[clash]!r}")
            sessions[i] = {**session, **scope}
    return sessions


def _filters(args: argparse.Namespace) -> Any:
    """The ``--filters`` JSON of a command (``None`` without the option)."""
    if args.filters is None:
        return None
    try:
        return json.loads(args.filters)
    except ValueError as exc:
        raise InvalidInputError(f"--filters is not valid JSON: {exc}") from None


def cmd_add(args: argparse.Namespace) -> int:
    """Add the sessions of a JSON file: all in one transaction (or none of them), or with ``--batch N`` one
    transaction per N sessions, each batch's results printed as it commits (an interrupted file then resumes
    with ``--skip-existing``). Progress goes to stderr."""
    if args.batch is not None and args.batch < 1:
        raise InvalidInputError("--batch must be a positive number of sessions")
    sessions = _file_sessions(_read_json(args.file), args)
    size = args.batch or len(sessions)
    progress = Progress(len(sessions), "sessions")
    try:
        with undo_created(args.db) as made, _memory(args, create=True) as mem:
            for start in range(0, len(sessions), size):
                try:
                    results = mem.add_many(sessions[start:start + size], user_id=args.user,
                                           skip_existing=args.skip_existing)
                except DuplicateSessionError as exc:  # the library names its argument; the command line, its flag
                    raise DuplicateSessionError(str(exc).replace("skip_existing=True", "--skip-existing")) from None
                if size < len(sessions):
                    made.keep()  # a committed batch is never undone
                for r in results:
                    print_json(r.to_dict(), indent=None)
                sys.stdout.flush()
                progress.update(len(results))
    finally:
        progress.close()
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    """Search the user's memory and print the hits (or JSON with --json)."""
    with _memory(args) as mem:
        check_query(args.query)
        _require_user(mem, args.user)
        hits = mem.search(args.query, user_id=args.user, k=args.k, min_score=args.min_score,
                          query_time=args.query_time, filters=_filters(args))
    if args.json:
        print_json([h.to_dict() for h in hits])
    else:
        _print_hits(hits, explain=args.explain)
    return 0


def cmd_context(args: argparse.Namespace) -> int:
    """Print the context an agent would read for the query (Memory.context)."""
    with _memory(args) as mem:
        check_query(args.query)
        _require_user(mem, args.user)
        text = mem.context(args.query, user_id=args.user, k=args.k, max_tokens=args.max_tokens,
                           min_score=args.min_score, query_time=args.query_time, filters=_filters(args),
                           exclude_sessions=args.exclude or ())
    print(text or "(nothing relevant stored)")
    return 0


def cmd_profile(args: argparse.Namespace) -> int:
    """Print the user's standing instructions and preferences (Memory.profile)."""
    with _memory(args) as mem:
        _require_user(mem, args.user)
        statements = mem.profile(user_id=args.user, filters=_filters(args))
    if args.json:
        print_json([s.to_dict() for s in statements])
    elif not statements:
        print("  (no standing instructions or preferences)")
    for s in [] if args.json else statements:
        when = s.timestamp.date().isoformat() if s.timestamp else "undated"
        who = f"{s.who}: " if s.who else ""
        about = f" ({s.subject})" if s.subject not in (None, "other") else ""
        print(f"  {s.kind}{' (always)' if s.always else ''}{about}: {who}{s.text}  [{s.session_id} #{s.message}, {when}]")
    return 0


def cmd_timeline(args: argparse.Namespace) -> int:
    """Print the course of a user's conversations: what each session brought up, in order (Memory.timeline)."""
    with _memory(args) as mem:
        _require_user(mem, args.user)
        digests = mem.timeline(user_id=args.user, topic=args.topic, since=args.since, until=args.until,
                               filters=_filters(args))
    if args.json:
        print_json([d.to_dict() for d in digests])
    elif not digests:
        print("  (nothing about this topic)")
    for d in [] if args.json else digests:
        print(f"{d.session_id} · {d.timestamp.date().isoformat() if d.timestamp else 'undated'}")
        for item in d.items:
            print(f"  - #{item.message} {item.speaker}: {item.text}")
    return 0


def cmd_answer(args: argparse.Namespace) -> int:
    """Answer a question from the user's memory with the LLM of --llm, citing the sessions used."""
    if args.llm is None:
        raise InvalidInputError("memgas answer needs an LLM: --llm openai:<model>[@<base_url>] or --llm local")
    with _memory(args) as mem:
        check_query(args.question)
        _require_user(mem, args.user)
        result = mem.answer(args.question, user_id=args.user, k=args.k, question_date=args.question_date)
    print_json(result.to_dict())
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    """List users, or one user's sessions (a page with --limit/--cursor, narrowed by --filters)."""
    with _memory(args) as mem:
        if args.user is None:
            if args.filters is not None or args.limit is not None or args.cursor is not None:
                raise InvalidInputError("--filters, --limit and --cursor page one user's sessions: give --user")
            print_json([u.to_dict() for u in mem.users()])
            return 0
        _require_user(mem, args.user)
        page = mem.list(user_id=args.user, filters=_filters(args), limit=args.limit, cursor=args.cursor,
                        order=args.order)
        print_json([h.to_dict() for h in page])
    return 0


def cmd_get(args: argparse.Namespace) -> int:
    """Print one stored session as JSON."""
    with _memory(args) as mem:
        _require_user(mem, args.user)
        print_json(mem.get(args.session_id, user_id=args.user).to_dict())
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    """Delete a session, the sessions that pass --filters, or (with --all) all of a user's memory."""
    if sum((args.session_id is not None, args.all, args.filters is not None)) != 1:
        raise InvalidInputError("name a session id, or pass --filters JSON, or --all to delete all of the user's "
                                "memory (one of them)")
    with _memory(args) as mem:
        _require_user(mem, args.user)
        print_json(mem.delete(None if args.all else args.session_id, user_id=args.user,
                              filters=_filters(args)).to_dict(), indent=None)
    return 0


def cmd_facts(args: argparse.Namespace) -> int:
    """Print the user's facts from the temporal knowledge graph (valid now, at --as-of, or all with --all)."""
    with _memory(args) as mem:
        if mem.kg is None:
            raise InvalidInputError(f"the store's method {mem.method.name!r} keeps no facts: "
                                    "use --method zep with an --llm")
        facts = mem.kg.facts(user_id=args.user, entity=args.entity, as_of=args.as_of, include_invalid=args.all)
        if args.json:
            print_json([f.to_dict() for f in facts])
        for f in [] if args.json else facts:
            until = f"until {f.invalid_at.date().isoformat()}" if f.invalid_at else "still valid"
            since = f.valid_at.date().isoformat() if f.valid_at else "undated"
            sources = ", ".join(f.episodes)
            print(f"  #{f.id} {f.subject} | {f.relation} | {f.object}   ({since}, {until}; from {sources})")
        if not facts and not args.json:
            print("  (no facts)")
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    """Print the store's counts (a user's with --user); ``--full`` adds the method's configuration. The call
    timings of ``Memory.stats`` are left out: this process made no call."""
    with _memory(args) as mem:
        if args.user is not None:
            _require_user(mem, args.user)
        stats = mem.stats(args.user)
    stats.pop("calls", None)
    if not args.full:
        method = stats.get("method")
        if isinstance(method, dict):
            stats["method"] = method.get("name", method)
    print_json(stats)
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    """Write the store's memory (or one user's) to a JSON Lines dump; the file appears only when complete."""
    from memgas.dump import export_dump
    from memgas.store import open_store

    require_store(args.db)
    if args.out == "-":  # standard output: the dump only, its counts on stderr
        with open_store(args.db) as store:
            counts = export_dump(store, sys.stdout, user_ids=None if args.user is None else [args.user])
        print(json.dumps({"out": "-", **counts}), file=sys.stderr)
        return 0
    out = Path(args.out).expanduser()
    if out.is_dir():
        raise InvalidInputError(f"--out {args.out} is a folder: name the dump file to write")
    if not out.parent.is_dir():
        raise InvalidInputError(f"--out {args.out}: the folder {out.parent} does not exist (make it first)")
    partial = out.with_name(out.name + ".partial")
    with open_store(args.db) as store:
        try:
            with partial.open("w", encoding="utf-8", newline="\n") as f:
                counts = export_dump(store, f, user_ids=None if args.user is None else [args.user])
            os.replace(partial, out)
        except BaseException:
            partial.unlink(missing_ok=True)
            raise
    print_json({"out": str(out), **counts}, indent=None)
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    """Import a dump: lossless with the dump's embedder, re-embedded and re-associated with another."""
    from memgas.dump import import_dump

    bar: list[Progress] = []
    try:
        with undo_created(args.db) as made, _memory(args, create=True) as mem:

            def committed(done: int, total: int) -> None:
                made.keep()  # a committed user is never undone: import again with --skip-existing to resume
                if not bar:
                    bar.append(Progress(total, "sessions"))
                bar[0].update(done - bar[0].done)

            result = import_dump(args.file, mem, skip_existing=args.skip_existing, progress=committed)
    finally:
        for b in bar:
            b.close()
    if result["mode"] == "re-derived":
        print(f"memgas: note: the dump's vectors come from embedder {result['dump_embedder_id']!r} and this store "
              f"uses {result['embedder_id']!r}: its sessions were re-embedded and re-associated", file=sys.stderr)
    print_json(result, indent=None)
    return 0


def cmd_migrate(args: argparse.Namespace) -> int:
    """Create or upgrade the store's schema (a SQLite file must exist; a PostgreSQL database may be empty)."""
    from memgas.store import migrate

    require_store(args.db)
    found, now = migrate(args.db)
    print_json({"schema_version_before": found, "schema_version": now}, indent=None)
    return 0


def _sqlite_file(db: str, command: str) -> Path:
    """The SQLite file of ``--db``; a PostgreSQL store is backed up with PostgreSQL's own tools."""
    path = store_file(db)
    if path is None:
        raise InvalidInputError(f"memgas {command} copies a SQLite store; back a PostgreSQL store up with pg_dump "
                                "and put it back with pg_restore (the docs' guide 'Running memgas for years')")
    return path


def cmd_expire(args: argparse.Namespace) -> int:
    """Delete the sessions past their own expiry and those past a retention period (or older than a time), as a delete
    does."""
    from memgas.memory import Memory

    require_store(args.db)
    if args.older_than is not None and args.before is not None:
        raise InvalidInputError("give --older-than DAYS or --before TIME, not both")
    with Memory(args.db, method=None, retention_days=args.older_than,
                retention=retention_periods(args.retention)) as mem:
        gone = mem.expire(user_id=args.user, before=args.before)
    print_json({"expired_sessions": gone}, indent=None)
    return 0


def cmd_reembed(args: argparse.Namespace) -> int:
    """Re-embed every unit with another embedder while the store serves; one switch at the end (resumable)."""
    from memgas.reembed import reembed

    require_store(args.db)
    done = reembed(args.db, args.embedder, work=args.work, embedding_cache=args.embedding_cache,
                   progress=None if args.quiet else lambda line: print(f"memgas reembed: {line}", file=sys.stderr))
    print_json(done.to_dict(), indent=None)
    return 0


def cmd_backup(args: argparse.Namespace) -> int:
    """Copy a SQLite store as of one moment, while writes go on, into a checked backup file."""
    from memgas.store.backup import backup

    require_store(args.db)
    print_json(backup(_sqlite_file(args.db, "backup"), Path(args.out), replace=args.force), indent=None)
    return 0


def cmd_restore(args: argparse.Namespace) -> int:
    """Put a checked backup in a SQLite store's place (stop its writers first)."""
    from memgas.store.backup import restore

    print_json(restore(Path(args.backup), _sqlite_file(args.db, "restore"), replace=args.force), indent=None)
    return 0


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line, like every other error of the command, and name a mistyped
    flag (``--usr``) rather than the required one it left out (argparse checks what is required first)."""

    _given: Sequence[str] = ()

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
        self._given = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        if message.startswith("the following arguments are required"):
            unknown = [a for a in self._given if a.startswith("-") and a != "-" and not a[1:2].isdigit()
                       and a.split("=", 1)[0] not in self._option_string_actions]
            if unknown:
                message = f"unrecognized arguments: {' '.join(unknown)}"
        self.exit(2, f"memgas: error: {message} (see '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``memgas`` command."""
    p = _Parser(prog="memgas", description="Long-term memory for LLM agents (MemGAS), offline.")
    p.add_argument("--version", action="version", version=f"memgas {__version__}", help="print the version and exit")
    sub = p.add_subparsers(dest="command", required=True)

    def common(sp: argparse.ArgumentParser, user: bool = True, user_required: bool = False,
               method: str = "memgas") -> None:
        sp.add_argument("--db", default=DEFAULT_DB,
                        help=f"SQLite file or postgresql:// URL (default {DEFAULT_DB}; ':memory:' for none)")
        sp.add_argument("--method", default=None, help=f"memory method (default: the one the store was made with, "
                                                       f"else {method})")
        if method != "memgas":
            sp.set_defaults(method_default=method)
        sp.add_argument("--llm", default=None, help="LLM spec: openai:<model>[@<base_url>] or local "
                                                     "(needed by --method zep; default none)")
        sp.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a MemGAS parameter, repeatable, e.g. --set current_first=true --set "
                             "reply_tail_weight=0.25 (keys: the fields of MemGASConfig)")
        if user:
            sp.add_argument("--user", required=user_required, help="user id")

    sp = sub.add_parser("demo", help="ingest the shipped demo conversation and run example queries")
    sp.add_argument("--db", default="memgas-demo.db", help="SQLite file to (re)create (default memgas-demo.db)")
    sp.add_argument("--force", action="store_true", help="replace --db even if it is not a demo store")
    sp.add_argument("--method", default="memgas", help="memory method (default memgas)")
    sp.add_argument("-k", type=int, default=3, help="hits shown per question (default 3)")
    sp.set_defaults(func=cmd_demo)

    sp = sub.add_parser("add", help="add sessions from a JSON file")
    common(sp, user_required=True)
    sp.add_argument("file", help="a JSON file of sessions, or - for standard input: one session {\"messages\": [...], \"session_id\"?, \"timestamp\"?, \"metadata\"?}, a list of them, or {\"sessions\": [...]}")
    sp.add_argument("--session", help="session id (for a file holding one session)")
    sp.add_argument("--timestamp", help="session time, ISO 8601 (for a file holding one session)")
    sp.add_argument("--skip-existing", action="store_true",
                    help="skip the file's sessions the user already has (default: refuse the whole file)")
    sp.add_argument("--batch", type=int, default=None, metavar="N",
                    help="commit every N sessions (default: the whole file in one transaction); an interrupted "
                         "file resumes with --skip-existing")
    sp.add_argument("--agent-id", help="the agent of the file's sessions (those that name none)")
    sp.add_argument("--run-id", help="the run of the file's sessions (those that name none)")
    sp.set_defaults(func=cmd_add)

    sp = sub.add_parser("search", help="search a user's memory")
    common(sp, user_required=True)
    sp.add_argument("query", help="what to look for, in natural language")
    sp.add_argument("-k", type=int, default=5, help="how many sessions to return (default 5)")
    sp.add_argument("--query-time", help="when the question is asked, ISO 8601: anchors 'last week' (default now)")
    sp.add_argument("--json", action="store_true", help="print hits as JSON")
    sp.add_argument("--min-score", type=float, default=0.0,
                    help="leave out hits whose relevance (0-1, the query's best cosine with the session) is lower")
    sp.add_argument("--explain", action="store_true", help="show the router's granularity weights and seed scores")
    sp.add_argument("--filters", metavar="JSON", help="only the sessions that pass this filter, JSON (the docs' guide 'Scopes, filters and scores')")
    sp.set_defaults(func=cmd_search)

    sp = sub.add_parser("context", help="print what an agent would read for a question: standing instructions, then "
                                        "the evidence, within a budget")
    common(sp, user_required=True)
    sp.add_argument("query", help="the question or message the agent is about to answer")
    sp.add_argument("-k", type=int, default=5, help="evidence from at most this many sessions (default 5)")
    sp.add_argument("--max-tokens", type=int, default=1000, help="the budget, 4 characters a token (default 1000)")
    sp.add_argument("--min-score", type=float, default=None,
                    help="leave out turns less relevant than this, 0-1 (default: the calibrated floor, 0.2)")
    sp.add_argument("--query-time", help="when the question is asked, ISO 8601: anchors 'last week' (default now)")
    sp.add_argument("--exclude", action="append", metavar="SESSION_ID",
                    help="leave this session out (the conversation under way); repeatable")
    sp.add_argument("--filters", metavar="JSON", help="only the sessions that pass this filter, JSON (the docs' guide 'Scopes, filters and scores')")
    sp.set_defaults(func=cmd_context)

    sp = sub.add_parser("profile", help="a user's standing instructions and preferences")
    common(sp, user_required=True)
    sp.add_argument("--filters", metavar="JSON", help="only the sessions that pass this filter, JSON (the docs' guide 'Scopes, filters and scores')")
    sp.add_argument("--json", action="store_true", help="print them as JSON")
    sp.set_defaults(func=cmd_profile)

    sp = sub.add_parser("timeline", help="the course of a user's conversations: what each session brought up")
    common(sp, user_required=True)
    sp.add_argument("--topic", help="only what was said about this, across sessions, oldest first")
    sp.add_argument("--since", metavar="TIME", help="only sessions dated at or after this (ISO 8601)")
    sp.add_argument("--until", metavar="TIME", help="only sessions dated before this (ISO 8601)")
    sp.add_argument("--filters", metavar="JSON", help="only the sessions that pass this filter, JSON (the docs' guide 'Scopes, filters and scores')")
    sp.add_argument("--json", action="store_true", help="print the digests as JSON")
    sp.set_defaults(func=cmd_timeline)

    sp = sub.add_parser("answer", help="answer a question from a user's memory (needs --llm)")
    common(sp, user_required=True)
    sp.add_argument("question", help="the question, in natural language")
    sp.add_argument("-k", type=int, default=5, help="sessions retrieved for the answer (default 5)")
    sp.add_argument("--question-date", help="when the question is asked, ISO 8601 (default now)")
    sp.set_defaults(func=cmd_answer)

    sp = sub.add_parser("list", help="list users, or a user's sessions")
    common(sp)
    sp.add_argument("--filters", metavar="JSON", help="only the sessions that pass this filter, JSON (the docs' guide 'Scopes, filters and scores')")
    sp.add_argument("--limit", type=int, help="at most this many sessions (a page)")
    sp.add_argument("--cursor", help="the sessions after this one: a listed session's cursor")
    sp.add_argument("--order", choices=("oldest", "newest"), default="oldest", help="listing order (default oldest)")
    sp.set_defaults(func=cmd_list)

    sp = sub.add_parser("get", help="print a stored session")
    common(sp, user_required=True)
    sp.add_argument("session_id", help="the session to print")
    sp.set_defaults(func=cmd_get)

    sp = sub.add_parser("delete", help="delete a session or all of a user's memory")
    common(sp, user_required=True)
    sp.add_argument("session_id", nargs="?", help="the session to delete (or --all)")
    sp.add_argument("--all", action="store_true", help="delete all of the user's memory")
    sp.add_argument("--filters", metavar="JSON", help="delete the sessions that pass this filter, JSON")
    sp.set_defaults(func=cmd_delete)

    sp = sub.add_parser("facts", help="a user's facts from the temporal knowledge graph (method zep, needs --llm)")
    common(sp, user_required=True, method="zep")
    sp.add_argument("--entity", help="only the facts of this entity")
    sp.add_argument("--as-of", help="the facts valid at this time (ISO 8601; default now)")
    sp.add_argument("--all", action="store_true", help="include invalidated facts (the history)")
    sp.add_argument("--json", action="store_true", help="print facts as JSON")
    sp.set_defaults(func=cmd_facts)

    sp = sub.add_parser("stats", help="store statistics")
    common(sp)
    sp.add_argument("--full", action="store_true", help="also print the method's whole configuration")
    sp.set_defaults(func=cmd_stats)

    sp = sub.add_parser("export", help="write memory to a JSON Lines dump (all users, or --user)")
    sp.add_argument("--db", default=DEFAULT_DB, help=f"SQLite file or postgresql:// URL (default {DEFAULT_DB})")
    sp.add_argument("--out", required=True, help="the dump file to write, or - for standard output")
    sp.add_argument("--user", help="export only this user (default: every user)")
    sp.set_defaults(func=cmd_export)

    sp = sub.add_parser("import", help="read a dump made by 'memgas export' into a store")
    common(sp, user=False)
    sp.add_argument("file", help="a dump made by 'memgas export'")
    sp.add_argument("--skip-existing", action="store_true",
                    help="skip the dump's sessions a user already has (default: refuse the whole dump)")
    sp.set_defaults(func=cmd_import)

    sp = sub.add_parser("migrate", help="create or upgrade the store's schema (before new workers start)")
    sp.add_argument("--db", default=DEFAULT_DB, help=f"SQLite file or postgresql:// URL (default {DEFAULT_DB})")
    sp.set_defaults(func=cmd_migrate)

    sp = sub.add_parser("expire", help="delete the sessions past their expires_at, and with --older-than or --before "
                                       "those past a retention period, as a delete does (run it daily)")
    sp.add_argument("--db", default=DEFAULT_DB, help=f"SQLite file or postgresql:// URL (default {DEFAULT_DB})")
    sp.add_argument("--older-than", type=float, metavar="DAYS",
                    help="delete sessions older than this many days (by their time, else by when they were stored)")
    sp.add_argument("--before", metavar="TIME", help="delete sessions older than this time (ISO 8601) instead")
    sp.add_argument("--retention", action="append", default=[], metavar="user:ID=DAYS|tenant:NAME=DAYS",
                    help="a user's or a tenant's own period, before --older-than (repeatable)")
    sp.add_argument("--user", help="only this user's sessions (default: every user's)")
    sp.set_defaults(func=cmd_expire)

    sp = sub.add_parser("reembed", help="re-embed every unit with another embedder while the store serves "
                                        "(resumable; one switch at the end)")
    sp.add_argument("--db", default=DEFAULT_DB, help=f"SQLite file or postgresql:// URL (default {DEFAULT_DB})")
    sp.add_argument("--embedder", required=True, help="the new embedder: default, e5, st:<model>, openai:<model>[@url]")
    sp.add_argument("--work", help="the work store (SQLite) to build in and resume from (default: <db>.reembed "
                                   "beside a SQLite file, else memgas-reembed.db here)")
    sp.add_argument("--embedding-cache", help="an embedding cache file for the new embedder (default: in memory)")
    sp.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    sp.set_defaults(func=cmd_reembed)

    sp = sub.add_parser("backup", help="copy a SQLite store as of one moment, while writes go on (checked)")
    sp.add_argument("--db", default=DEFAULT_DB, help=f"the SQLite store to copy (default {DEFAULT_DB})")
    sp.add_argument("--out", required=True, help="the backup file to write (it appears only when whole and checked)")
    sp.add_argument("--force", action="store_true", help="replace a file already at --out (never one of the store's)")
    sp.set_defaults(func=cmd_backup)

    sp = sub.add_parser("restore", help="put a backup made by 'memgas backup' in a SQLite store's place")
    sp.add_argument("backup", help="the backup file")
    sp.add_argument("--db", default=DEFAULT_DB, help=f"the SQLite store to restore (default {DEFAULT_DB})")
    sp.add_argument("--force", action="store_true", help="replace the store there (stop its writers first)")
    sp.set_defaults(func=cmd_restore)

    add_service_parsers(sub, common)
    add_templates_parsers(sub, common)  # Buffer of Thoughts
    add_principles_parsers(sub, common)
    add_bench_parser(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status (see the module docstring)."""
    try:
        status = _run(argv)
        sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
        return status
    except KeyboardInterrupt:  # Ctrl-C: every write is one transaction, so nothing is half-written
        print("memgas: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # Nothing can be written any more: point stdout at /dev/null so Python's final flush stays quiet.
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):  # stdout is not a file descriptor (captured in-process)
            pass
        return EXIT_BROKEN_PIPE
    except Exception as e:
        if not _caused_by_interrupt(e):
            raise
        # Ctrl-C inside the lazy import of a C extension (scipy's, at the first association) surfaces as the
        # ImportError it left behind, with the KeyboardInterrupt in its chain: it is an interrupt all the same.
        print("memgas: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def _caused_by_interrupt(error: BaseException) -> bool:
    """Whether a ``KeyboardInterrupt`` is in ``error``'s chain of causes and contexts."""
    seen: set[int] = set()
    link: BaseException | None = error
    while link is not None and id(link) not in seen:
        if isinstance(link, KeyboardInterrupt):
            return True
        seen.add(id(link))
        link = link.__cause__ or link.__context__
    return False


def _run(argv: Sequence[str] | None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as e:  # --help, or a usage error already printed
        return e.code if isinstance(e.code, int) else 2
    try:
        return int(args.func(args) or 0)
    except BrokenPipeError:  # an OSError, but no error of the command: main() ends quietly
        raise
    except (InvalidInputError, NotFoundError) as e:
        return _error(e, 2)
    except Exception as e:  # the drivers' error classes are known only once a driver is loaded
        if isinstance(e, (MemgasError, OSError, *_backend_errors())):
            return _error(e, 1)
        raise


def _backend_errors() -> tuple[type[BaseException], ...]:
    """The database drivers' error classes: SQLite's, and psycopg's once a PostgreSQL store loaded it.

    Called only while an exception propagates, so the command line never imports psycopg itself: an error
    of psycopg can only come from a process that has imported it.
    """
    psycopg = sys.modules.get("psycopg")
    return (sqlite3.Error,) if psycopg is None else (sqlite3.Error, psycopg.Error)


def _error(error: Exception, status: int) -> int:
    """Print ``error`` as one line on stderr; return ``status``."""
    print(f"memgas: error: {' '.join(str(error).split())}", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
