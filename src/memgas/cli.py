"""The ``memgas`` command: demo, add, search, list, get, delete, stats, facts, bench.

Errors end the command with a one-line message on stderr and exit status 2 (bad input) or 1.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from importlib import resources
from pathlib import Path
from typing import Any, Sequence

# onnxruntime/OpenMP threads must not busy-wait on small machines; set before any runtime loads.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from .bench.cli import add_bench_parser  # noqa: E402
from .model import InvalidInputError, MemgasError, NotFoundError  # noqa: E402

__all__ = ["main", "build_parser"]

DEFAULT_DB = "memgas.db"


def _demo_data() -> dict[str, Any]:
    return json.loads(resources.files("memgas").joinpath("data/demo_conversation.json").read_text("utf-8"))


def _print_hits(hits: list[Any], *, width: int = 110) -> None:
    if not hits:
        print("  (no hits)")
        return
    weights = hits[0].weights
    if weights:
        print("  router weights: " + "  ".join(f"{g}={w:.2f}" for g, w in weights.items()))
    for rank, h in enumerate(hits, 1):
        when = h.timestamp.date().isoformat() if h.timestamp else "undated"
        assoc = "  [via association]" if h.via_association else ""
        print(f"  {rank}. {h.session_id}  ({when})  score={h.score:.4f}{assoc}")
        for t in h.turns[:2]:
            line = " ".join(t.text.split())
            print(f"       turn {t.index}: {line[:width]}{'…' if len(line) > width else ''}")


def _memory(args: argparse.Namespace) -> Any:
    from .memory import Memory

    return Memory(args.db, method=getattr(args, "method", "memgas"), llm=getattr(args, "llm", None))


def cmd_demo(args: argparse.Namespace) -> int:
    """Ingest the shipped demo conversation into a fresh store and run its queries."""
    from .memory import Memory

    data = _demo_data()
    user = data["user_id"]
    db = args.db
    if db != ":memory:" and Path(db).exists():
        Path(db).unlink()
        for suffix in ("-wal", "-shm"):
            Path(db + suffix).unlink(missing_ok=True)
    print(f"memgas demo: {len(data['sessions'])} sessions of user {user!r} → {db}")
    with Memory(db, method=args.method) as mem:
        t0 = time.perf_counter()
        for s in data["sessions"]:
            r = mem.add(s["messages"], user_id=user, session_id=s["session_id"], timestamp=s["timestamp"])
            print(f"  added {r['session_id']:<28} {r['units']:>3} units {r['edges']:>4} edges  {r['seconds']:.2f}s")
        print(f"ingested in {time.perf_counter() - t0:.2f}s\n")
        found = 0
        for q in data["queries"]:
            hits = mem.search(q["query"], user_id=user, k=args.k)
            ok = any(h.session_id in q["expected_sessions"] for h in hits)
            found += ok
            print(f"Q: {q['query']}   [{'found' if ok else 'missed'}: expected {', '.join(q['expected_sessions'])}]")
            _print_hits(hits)
            print()
        stats = mem.stats(user)
    print(f"{found}/{len(data['queries'])} queries found an expected session in the top {args.k}.")
    print(f"store: {stats['sessions']} sessions, {stats['units']} units, {stats['edges']} edges")
    return 0


def cmd_add(args: argparse.Namespace) -> int:
    """Add sessions from a JSON file: one session (a list of messages or an object) or a list of sessions."""
    try:
        data = json.loads(Path(args.file).read_text("utf-8"))
    except FileNotFoundError:
        raise InvalidInputError(f"no such file: {args.file}") from None
    except json.JSONDecodeError as e:
        raise InvalidInputError(f"{args.file} is not valid JSON: {e}") from None
    if isinstance(data, dict) and "sessions" in data:
        sessions = data["sessions"]
    elif isinstance(data, list) and data and isinstance(data[0], dict) and "messages" in data[0]:
        sessions = data
    else:
        sessions = [{"messages": data.get("messages", data) if isinstance(data, dict) else data,
                     **({k: data[k] for k in ("session_id", "timestamp") if k in data} if isinstance(data, dict) else {})}]
    with _memory(args) as mem:
        for s in sessions:
            if not isinstance(s, dict):
                raise InvalidInputError("each session must be an object with 'messages'")
            r = mem.add(s.get("messages"), user_id=args.user, session_id=s.get("session_id") or args.session,
                        timestamp=s.get("timestamp") or args.timestamp)
            print(json.dumps(r))
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    """Search the user's memory and print the hits (or JSON with --json)."""
    with _memory(args) as mem:
        hits = mem.search(args.query, user_id=args.user, k=args.k)
    if args.json:
        print(json.dumps([h.to_dict() for h in hits], indent=2))
    else:
        _print_hits(hits)
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    """List users, or one user's sessions."""
    with _memory(args) as mem:
        print(json.dumps(mem.list(user_id=args.user), indent=2))
    return 0


def cmd_get(args: argparse.Namespace) -> int:
    """Print one stored session as JSON."""
    with _memory(args) as mem:
        print(json.dumps(mem.get(args.session_id, user_id=args.user), indent=2))
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    """Delete a session, or (with --all) all of a user's memory."""
    if not args.session_id and not args.all:
        raise InvalidInputError("name a session id, or pass --all to delete all of the user's memory")
    with _memory(args) as mem:
        print(json.dumps(mem.delete(None if args.all else args.session_id, user_id=args.user)))
    return 0


def cmd_facts(args: argparse.Namespace) -> int:
    """Print the user's facts from the temporal knowledge graph (valid now, at --as-of, or all with --all)."""
    with _memory(args) as mem:
        facts = mem.facts(user_id=args.user, entity=args.entity, as_of=args.as_of, include_invalid=args.all)
        if args.json:
            print(json.dumps([f.to_dict() for f in facts], indent=2))
        for f in [] if args.json else facts:
            until = f"until {f.invalid_at.date().isoformat()}" if f.invalid_at else "still valid"
            since = f.valid_at.date().isoformat() if f.valid_at else "undated"
            sources = ", ".join(f.episodes)
            print(f"  #{f.id} {f.subject} | {f.relation} | {f.object}   ({since}, {until}; from {sources})")
        if not facts and not args.json:
            print("  (no facts)")
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    """Print store statistics."""
    with _memory(args) as mem:
        print(json.dumps(mem.stats(args.user), indent=2, default=str))
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``memgas`` command."""
    p = argparse.ArgumentParser(prog="memgas", description="Long-term memory for LLM agents (MemGAS), offline.")
    sub = p.add_subparsers(dest="command", required=True)

    def common(sp: argparse.ArgumentParser, user: bool = True, user_required: bool = False,
               method: str = "memgas") -> None:
        sp.add_argument("--db", default=DEFAULT_DB, help=f"SQLite file (default {DEFAULT_DB}; ':memory:' for none)")
        sp.add_argument("--method", default=method, help=f"memory method (default {method})")
        sp.add_argument("--llm", default=None, help="LLM spec: openai:<model>[@<base_url>] or local "
                                                     "(needed by --method zep; default none)")
        if user:
            sp.add_argument("--user", required=user_required, help="user id")

    sp = sub.add_parser("demo", help="ingest the shipped demo conversation and run example queries")
    sp.add_argument("--db", default="memgas-demo.db", help="SQLite file to (re)create (default memgas-demo.db)")
    sp.add_argument("--method", default="memgas")
    sp.add_argument("-k", type=int, default=3)
    sp.set_defaults(func=cmd_demo)

    sp = sub.add_parser("add", help="add sessions from a JSON file")
    common(sp, user_required=True)
    sp.add_argument("file")
    sp.add_argument("--session", help="session id (for a file holding one session)")
    sp.add_argument("--timestamp", help="session time, ISO 8601 (for a file holding one session)")
    sp.set_defaults(func=cmd_add)

    sp = sub.add_parser("search", help="search a user's memory")
    common(sp, user_required=True)
    sp.add_argument("query")
    sp.add_argument("-k", type=int, default=5)
    sp.add_argument("--json", action="store_true", help="print hits as JSON")
    sp.set_defaults(func=cmd_search)

    sp = sub.add_parser("list", help="list users, or a user's sessions")
    common(sp)
    sp.set_defaults(func=cmd_list)

    sp = sub.add_parser("get", help="print a stored session")
    common(sp, user_required=True)
    sp.add_argument("session_id")
    sp.set_defaults(func=cmd_get)

    sp = sub.add_parser("delete", help="delete a session or all of a user's memory")
    common(sp, user_required=True)
    sp.add_argument("session_id", nargs="?")
    sp.add_argument("--all", action="store_true")
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
    sp.set_defaults(func=cmd_stats)

    add_bench_parser(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (InvalidInputError, NotFoundError) as e:
        print(f"memgas: error: {e}", file=sys.stderr)
        return 2
    except MemgasError as e:
        print(f"memgas: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
