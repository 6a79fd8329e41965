"""``memgas bench {locomo,longmemeval}``: the benchmark command."""

from __future__ import annotations

import argparse
import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from memgas.cli.common import memgas_options
from memgas.core.errors import InvalidInputError, MemgasError

__all__ = ["add_bench_parser", "cmd_bench", "context_options"]

DEFAULT_METHODS = (
    "memgas,memgas-no-assoc,memgas-no-router,memgas-no-ppr,memgas-no-lexical,memgas-no-session,"
    "bm25,bm25-all,dense-session,dense-turn,dense-summary,dense-keyword,vector-messages,hybrid-messages"
)


def _ks(text: str) -> list[int]:
    """``"1,5,10"`` → sorted distinct positive integers (argparse names the option in its error)."""
    try:
        ks = sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not ks or ks[0] < 1:
        raise argparse.ArgumentTypeError("values must be positive")
    return ks


def add_bench_parser(sub: Any) -> None:
    """Register the ``bench`` subcommand on the main parser's subparsers."""
    sp = sub.add_parser("bench", help="retrieval benchmark on LoCoMo or LongMemEval, all methods side by side")
    sp.add_argument("dataset", choices=("locomo", "longmemeval", "beam", "cost", "live", "kg", "store", "scale", "http",
                                        "bot", "principles", "multilingual", "filters", "adapters", "ratelimit", "users",
                                        "longreplies", "cluster", "latency", "reembed", "usermodel", "selection", "card"),
                    help="a retrieval benchmark; 'beam': BEAM's long conversations (--scales), every method's "
                         "ranking and the context an agent reads (--contexts), per ability; 'cost': add/search cost on "
                         "LongMemEval-S sessions; 'live': add then "
                         "search, session after session, as an agent does; 'kg': the temporal knowledge graph's "
                         "update behaviour on the LongMemEval oracle (needs --llm); 'store': adds/s and searches/s "
                         "of --clients processes on one store; 'scale': store size, cold/warm search and memory per "
                         "cached user at --users users; 'http': search and add over a `memgas serve` subprocess "
                         "beside the same calls in-process, at --clients concurrent clients; 'bot': Buffer of "
                         "Thoughts accuracy without and with a learned template buffer on generated task families "
                         "checked by code (--llm); 'principles': PRINCIPLES learned from simulated dialogues on the "
                         "shipped scenario set: principles per dialogue, retrieval precision on held-out situations, "
                         "critic-judged success with vs without principles (--llm); 'multilingual': session recall on the "
                         "shipped English/Chinese/Japanese/Spanish sample, per embedder in a comma-separated "
                         "--embedder (default default,e5) and --method (default memgas,bm25,dense-turn); 'filters': filtered "
                         "against unfiltered search at --sessions sessions of one user (default 2000); 'adapters': each "
                         "framework adapter's call against the direct Memory call, and AsyncMemory from 8 tasks "
                         "against Memory from 8 threads, at --sessions sessions (default 200); 'ratelimit': requests one key "
                         "gets through a server with --rate-limit 5 at --clients worker counts (default 1,2; several "
                         "need --backend or --pg-temp); 'users': round-robin searches over --users users (default 12) of "
                         "--sessions sessions (default 100) against a warm user, at --index-cache-mb sizes (default "
                         "1024,none,1,1:rebuild); 'longreplies': facts said deep inside long assistant replies, found "
                         "or not, by depth (the shipped sample; --method, --set for MemGAS); 'cluster': three PostgreSQL nodes under "
                         "Patroni, a router and three workers started here (Debian's patroni, etcd-server, haproxy, "
                         "pgbouncer; root for network namespaces): --users users (default 1000) of --sessions sessions "
                         "(default 10) searched round robin through the router, writes/s and searches/s with 3, 2 and 1 "
                         "workers at --clients clients (default 8), replica lag, bytes per session, and --drills failovers "
                         "(default 5); 'latency': search and context p50 / p95 and their ratio on an existing store "
                         "(--backend: a SQLite file or postgresql:// URL), --requests questions drawn from its own "
                         "user messages (default 20); 'reembed': on a copy of an existing SQLite store (--backend), "
                         "its conversations added afresh with --embedder, then the copy re-embedded with it while a "
                         "thread searches it: seconds of each, searches during (errors, p50 / p95) beside warm ones, "
                         "and rankings after against the fresh build, on --requests questions (default 20); 'usermodel': the user "
                         "model's detector of lasting statements trained on the development data (--data: the folder "
                         "of beam/, longmemeval/, locomo/), its precision and recall on the held-out part beside the "
                         "rules', and its weights written to OUT/lasting.npz (what memgas/data/lasting.npz ships); 'selection': "
                         "a learned choice of the messages a context shows (candidates from a vector store over "
                         "messages, BM25 over them and MemGAS's turns), fitted and measured out of fold on LoCoMo and "
                         "BEAM 100K (--data: the folder of locomo/ and beam/; --limit: the first conversations of each), "
                         "beside MemGAS's context and both anchors, and the selection MemGAS's context ships, measured "
                         "out of fold the same way, its weights fitted on every question written to "
                         "OUT/selection.npz (what memgas/data/selection.npz ships); 'card': the user card's learned "
                         "choice of standing statements, fitted and measured out of fold on BEAM (--data: the folder "
                         "of beam/; --scales; --limit: the first conversations of each scale), each question asked "
                         "of its conversation and of all of them as one user, MemGAS's context with it beside the "
                         "hand-set card, its weights fitted on every question written to OUT/card.npz (what "
                         "memgas/data/card.npz ships)")
    sp.add_argument("--sessions", type=int, default=None,
                    help="cost, live: sessions to add to one user (default 500; live: the last checkpoint); "
                         "store: sessions each client adds (default 10); scale: sessions per user (default 20); "
                         "http: sessions of the searched user (default 50)")
    sp.add_argument("--clients", type=_ks, default=None,
                    help="store: client-process counts to run (default 1,4,8); http: concurrent client threads "
                         "(default 1,8,32)")
    sp.add_argument("--requests", type=int, default=None,
                    help="http: searches per client (default 20); each client adds a quarter as many sessions "
                         "(at least 1)")
    sp.add_argument("--json", action="store_true", help="http: print the results as JSON instead of the table")
    sp.add_argument("--searches", type=int, default=20, help="store: searches per client (default 20)")
    sp.add_argument("--index-cache-mb", default=None, metavar="MIB[,MIB...]",
                    help="users: index cache sizes to measure, comma-separated MiB or 'none' for 8 users, ':rebuild' for MemGAS "
                         "snapshots off (default 1024,none,1,1:rebuild)")
    sp.add_argument("--http-workers", type=_ks, default=None, metavar="N[,N...]",
                    help="users: also search over HTTP, a `memgas serve --workers N` for each N (default: in-process only)")
    sp.add_argument("--users", type=_ks, default=None, help="scale: user counts to measure at (default 100,1000,10000)")
    sp.add_argument("--drills", type=int, default=5,
                    help="cluster: times the primary's host is killed under load (default 5; then once its PostgreSQL)")
    sp.add_argument("--seconds", type=float, default=8.0,
                    help="cluster: how long each load phase (appends, then searches) runs (default 8)")
    sp.add_argument("--checkpoints", type=_ks, default=None,
                    help="live: stored-session counts to report at (default 50,500,2000,5000)")
    sp.add_argument("--window", type=int, default=50,
                    help="live: adds before each checkpoint whose timings it reports; with --one-session, the "
                         "messages the prompt holds when the last append asks for its context (default 50)")
    sp.add_argument("--one-session", type=int, default=None, metavar="N",
                    help="live: append N real messages one at a time to one session instead (one long chat): "
                         "append p50 / p95 per 100 messages, the store's bytes, and whether the last append's "
                         "context brings back the fact of the first message")
    sp.add_argument("--scales", default="100K,500K",
                    help="beam: comma-separated scale folders under --data (default 100K,500K)")
    sp.add_argument("--one-user", action="store_true",
                    help="beam: every conversation of --scales in one user's memory (each conversation's batches its "
                         "sessions, ids kept apart), every question asked against the whole; the report adds ingest "
                         "seconds per 100K tokens as the memory grows, store bytes, peak memory and context ÷ search; "
                         "on SQLite (in memory, or kept with --stores) or --backend / --pg-temp")
    sp.add_argument("--contexts", type=_ks, default=None, metavar="TOKENS[,TOKENS...]",
                    help="measure each method's context at these budgets (default 1000,4000 for beam; off for locomo "
                         "and longmemeval unless given): the share of gold evidence messages it holds, and whether the "
                         "updated evidence comes first; latency: the one budget its contexts are timed at (default 1000)")
    sp.add_argument("--context-set", action="append", default=[], metavar="KEY=VALUE",
                    help="with contexts: a field of memgas.context.ContextOptions for the memgas methods' contexts, e.g. "
                         "--context-set floor=0.2 or --context-set profile=false (repeatable)")
    sp.add_argument("--method", default=DEFAULT_METHODS, help=f"comma-separated methods (default: {DEFAULT_METHODS})")
    sp.add_argument("--data", type=Path, help="dataset file, or folder for beam (default: ../shared/data/...)")
    sp.add_argument("--limit", type=int, help="only the first N questions (LongMemEval) or conversations (LoCoMo); "
                    "adapters: calls per adapter (default 40)")
    sp.add_argument("--out", type=Path, default=None, help="output folder (default bench-out/<dataset>)")
    sp.add_argument("--k", type=_ks, default=None, help="cut-offs, e.g. 1,3,5,10")
    sp.add_argument("--embedder", default=None, help="embedder spec (default: the shipped MiniLM int8 ONNX)")
    sp.add_argument("--cache", type=Path, default=None,
                    help="embedding cache file (default $MEMGAS_CACHE_DIR or ~/.cache/memgas/embeddings.sqlite)")
    sp.add_argument("--stores", type=Path, default=None,
                    help="keep each haystack's ingested store under this folder and reuse it on the next run "
                         "(keyed by embedder and ingest settings); default: ingest in memory every time")
    sp.add_argument("--backend", default=None, metavar="URL",
                    help="locomo, longmemeval: ingest every haystack into this store (e.g. postgresql://user@host/db), "
                         "each as its own user, afresh each run; store, http: the store measured (default: a SQLite "
                         "file in --out); latency: the existing store timed")
    sp.add_argument("--pg-temp", action="store_true",
                    help="run on a throwaway PostgreSQL cluster (initdb/pg_ctl on a free loopback port, removed "
                         "afterwards) instead of --backend")
    sp.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a MemGAS search parameter for the memgas* methods, e.g. --set temperature=0.2 "
                         "(repeatable; see MemGASConfig); bm25_k1 and bm25_b also set the bm25 baselines'")
    sp.add_argument("--no-progress", action="store_true", help="no progress bar")
    sp.add_argument("--rerank", metavar="SPEC", default=None,
                    help="rerank every method's top turns: 'llm:<LLM spec>', e.g. llm:local (off by default)")
    sp.add_argument("--decompose", metavar="SPEC", default=None,
                    help="search a question that needs several sessions as its parts too, every method: "
                         "'llm:<LLM spec>', e.g. llm:local (off by default)")
    sp.add_argument("--types", default=None,
                    help="LongMemEval question types to run, comma-separated: kg (default knowledge-update,"
                         "temporal-reasoning; --limit is then per type), longmemeval (default all; --limit then "
                         "counts the questions of these types)")
    sp.add_argument("--max-sessions", type=int, default=None,
                    help="locomo: keep each conversation's first N sessions and the questions whose evidence lies "
                         "in them (for costly methods such as zep with a local model)")
    sp.add_argument("--ingest", choices=("whole", "stream", "both"), default="whole",
                    help="locomo/longmemeval: add each session whole (default), one exchange at a time through "
                         "the append path ('stream', as an agent's conversation grows), or both in one run (the "
                         "stream's methods named 'M [stream]'), with the append-cost table")
    sp.add_argument("--roles", default="user", help="kg: roles whose messages facts are extracted from (default user)")
    _add_bot_arguments(sp)
    _add_principles_arguments(sp)
    _add_qa_arguments(sp)
    sp.set_defaults(func=cmd_bench)


def _add_principles_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the options of ``bench principles``."""
    g = parser.add_argument_group("principles")
    g.add_argument("--dialogues", type=int, default=6, help="principles: training dialogues simulated (default 6)")
    g.add_argument("--heldout", type=int, default=6,
                   help="principles: held-out seeds judged without and with principles (default 6)")


def _add_bot_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the options of ``bench bot``."""
    g = parser.add_argument_group("bot")
    g.add_argument("--families", default=None,
                   help="bot: comma-separated task families (default game24,word_sort,arithmetic,date)")
    g.add_argument("--train-per-family", type=int, default=5, help="bot: training problems per family (default 5)")
    g.add_argument("--test-per-family", type=int, default=8, help="bot: test problems per family (default 8)")
    g.add_argument("--bot-seed", type=int, default=0, help="bot: seed of the generated problems (default 0)")


def _add_qa_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``--qa`` options (kept here, not in ``qa``, so that building the parser imports no method)."""
    g = parser.add_argument_group("question answering (--qa)")
    g.add_argument("--qa", action="store_true", help="answer the questions with an LLM and score the answers")
    g.add_argument("--llm", default="local", help="answer model: 'local' (default), 'local:<path.gguf>', "
                   "'openai:<model>' or 'openai:<model>@<base_url>'")
    g.add_argument("--judge-llm", default=None, help="judge model spec (default: the --llm model)")
    g.add_argument("--llm-cache", type=Path, default=None,
                   help="LLM response cache (default ~/.cache/memgas/llm.sqlite or $MEMGAS_CACHE_DIR/llm.sqlite)")
    g.add_argument("--no-llm-cache", action="store_true", help="call the model even for prompts it has answered")
    g.add_argument("--qa-systems", default=None,
                   help="comma-separated: memgas, memgas-nofilter, topk-sessions, or any method name (full-history, "
                        "recursum, comedy answer from their own memory; default: memgas, memgas-nofilter, topk-sessions, "
                        "full-history)")
    g.add_argument("--qa-k", type=int, default=5, help="sessions retrieved for memgas and topk-sessions (default 5)")
    g.add_argument("--max-questions", type=int, default=None, help="answer at most N questions in all")
    g.add_argument("--llm-units", action="store_true",
                   help="write summary/keyword units with the --llm model (1 call/session), for --qa and retrieval runs")
    g.add_argument("--bertscore", action="store_true", help="add BERTScore F1 (needs the bert-score package)")


def _sessions(args: argparse.Namespace, default: int) -> int:
    """``--sessions`` (``default`` when not given), which must be at least 2."""
    sessions = default if args.sessions is None else args.sessions
    if sessions < 2:
        raise InvalidInputError("--sessions must be at least 2")
    return sessions


def _print_table(args: argparse.Namespace, name: str, result: dict[str, Any], table: str) -> int:
    """Write ``result`` as ``NAME.json`` and ``table`` as ``NAME.md`` in ``--out`` (default bench-out/NAME), print
    the table."""
    import json

    out = args.out or Path("bench-out") / name
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(result, indent=1), encoding="utf-8")
    (out / f"{name}.md").write_text(table, encoding="utf-8")
    print(table)
    return 0


def _cmd_cost(args: argparse.Namespace) -> int:
    from memgas.bench.cost import cost_markdown, run_cost

    sessions = _sessions(args, 500)
    result = run_cost(Path(_longmemeval_data(args)), n_sessions=sessions, window=min(50, sessions // 2))
    return _print_table(args, "cost", result, cost_markdown(result))


def _cmd_filters(args: argparse.Namespace) -> int:
    from memgas.bench.filters import filters_markdown, run_filters

    method = "memgas" if args.method == DEFAULT_METHODS else args.method
    result = run_filters(_longmemeval_data(args), n_sessions=_sessions(args, 2000), method=method,
                         embedding_cache=args.cache)
    return _print_table(args, "filters", result, filters_markdown(result))


def _cmd_adapters(args: argparse.Namespace) -> int:
    from memgas.bench.adapters import adapters_markdown, run_adapters

    calls = 40 if args.limit is None else args.limit
    result = run_adapters(_longmemeval_data(args), n_sessions=_sessions(args, 200), n_calls=max(calls, 2),
                          per_task=max(calls // 4, 1), embedding_cache=args.cache)
    return _print_table(args, "adapters", result, adapters_markdown(result))


def _cmd_users(args: argparse.Namespace) -> int:
    """``bench users``: on ``--backend``, ``--pg-temp`` or a fresh SQLite file in ``--out``."""
    from memgas.bench.report import command_line
    from memgas.bench.users import run_users, users_markdown
    from memgas.core.paths import default_cache_path
    from memgas.embed.cache import EmbeddingCache
    from memgas.embed.factory import get_embedder

    out = args.out or Path("bench-out") / "users"
    sizes = []
    for item in str(args.index_cache_mb or "1024,none,1,1:rebuild").split(","):
        size, _, how = item.strip().lower().partition(":")
        try:  # "none": the cache counts users (8), as before it was sized by memory; ":rebuild": snapshots off
            if how not in ("", "rebuild"):
                raise ValueError(how)
            sizes.append((None if size == "none" else float(size), how != "rebuild"))
        except ValueError:
            raise InvalidInputError(f"--index-cache-mb: expected MiB values or 'none', each optionally with "
                                    f"':rebuild', got {args.index_cache_mb!r}") from None
    out.mkdir(parents=True, exist_ok=True)  # once the options are read: a refused command leaves no folder
    embedder = get_embedder(args.embedder, cache=EmbeddingCache(args.cache or default_cache_path()))
    with _backend(args, "memgas_bench_users") as backend:
        target, label = _target(backend, out / "users.db")
        if max(args.http_workers or [1]) > 1 and label != "PostgreSQL":
            raise InvalidInputError("--http-workers above 1 needs a PostgreSQL store (--backend URL or --pg-temp): "
                                    "a SQLite file is served by one worker")
        result = run_users(target, _longmemeval_data(args), embedder, users=(args.users or [12])[0],
                           sessions=100 if args.sessions is None else args.sessions, cache_mb=sizes,
                           http_workers=args.http_workers or [])
    command = command_line("memgas bench users")
    text = f"Command: `{command}`\n\nStore: {label}; {os.cpu_count()} CPU cores. {users_markdown(result)}"
    _write_results(out, "users", command, text, {"store": label, **result})
    print(text)
    return 0


def _cmd_cluster(args: argparse.Namespace) -> int:
    """``bench cluster``: a cluster started here from Debian's packages (:mod:`memgas.bench.hacluster`)."""
    from memgas.bench.cluster import cluster_markdown, run_cluster
    from memgas.bench.hacluster import unavailable
    from memgas.bench.report import command_line
    from memgas.core.paths import default_cache_path
    from memgas.embed.cache import EmbeddingCache
    from memgas.embed.factory import get_embedder

    try:
        cache_mb = float(args.index_cache_mb or 100)
    except ValueError:
        raise InvalidInputError(f"--index-cache-mb: expected one size in MiB, got {args.index_cache_mb!r}") from None
    if args.drills < 0:
        raise InvalidInputError(f"--drills must be >= 0, got {args.drills}")
    if not args.seconds > 0:
        raise InvalidInputError(f"--seconds must be > 0, got {args.seconds:g}")
    data = _longmemeval_data(args)
    reason = unavailable()
    if reason:
        raise MemgasError(reason)
    out = args.out or Path("bench-out") / "cluster"
    out.mkdir(parents=True, exist_ok=True)
    embedder = get_embedder(args.embedder, cache=EmbeddingCache(args.cache or default_cache_path()))
    result = run_cluster(data, embedder, users=(args.users or [1000])[0],
                         sessions=10 if args.sessions is None else args.sessions, cache_mb=cache_mb,
                         clients=(args.clients or [8])[0], drills=args.drills, load_s=args.seconds,
                         progress=lambda line: None if args.no_progress else print(f"bench cluster: {line}",
                                                                                    file=sys.stderr, flush=True))
    command = command_line("memgas bench cluster")
    text = f"Command: `{command}`\n\n{os.cpu_count()} CPU cores. {cluster_markdown(result)}"
    _write_results(out, "cluster", command, text, result)
    print(text)
    return 0


def _cmd_ratelimit(args: argparse.Namespace) -> int:
    """``bench ratelimit``: on ``--backend``, ``--pg-temp`` or a fresh SQLite file in ``--out`` (one worker)."""
    from memgas.bench.ratelimit import ratelimit_markdown, run_ratelimit
    from memgas.bench.report import command_line

    out = args.out or Path("bench-out") / "ratelimit"
    out.mkdir(parents=True, exist_ok=True)
    with _backend(args, "memgas_bench_ratelimit") as backend:
        target, label = _target(backend, out / "ratelimit.db")
        workers = args.clients or ([1, 2] if label == "PostgreSQL" else [1])
        result = run_ratelimit(target, workers, log=out / "server.log")
    command = command_line("memgas bench ratelimit")
    text = f"Command: `{command}`\n\nStore: {label}; {os.cpu_count()} CPU cores.\n\n{ratelimit_markdown(result)}"
    _write_results(out, "ratelimit", command, text, {"store": label, **result})
    print(text)
    return 0


def _longmemeval_data(args: argparse.Namespace) -> Path:
    """The LongMemEval file of ``--data`` (default: the shared dev half), which must exist."""
    from memgas.bench.runner import DEFAULT_DATA

    path = Path(args.data or DEFAULT_DATA["longmemeval"])
    if not path.is_file():
        raise InvalidInputError(f"LongMemEval data not found at {path.resolve()}; pass --data PATH")
    return path


def _write_results(out: Path, name: str, command: str, text: str, results: dict[str, Any]) -> None:
    """Write ``out/results.json`` (the command, the package versions, then ``results``) and ``out/report.md``
    (``text`` under the heading of bench ``name``): what every ``memgas bench`` command leaves behind."""
    import json

    from memgas.bench.runner import versions

    (out / "results.json").write_text(json.dumps({"command": command, "versions": versions(), **results}, indent=1),
                                      encoding="utf-8")
    (out / "report.md").write_text(f"# memgas bench: {name}\n\n{text}", encoding="utf-8")


def _cmd_one_session(args: argparse.Namespace, path: Path) -> int:
    from memgas.bench.onesession import one_session_markdown, run_one_session
    from memgas.bench.report import command_line

    out = args.out or Path("bench-out") / "one-session"
    result = run_one_session(path, out, args.one_session, window=args.window, progress=not args.no_progress)
    command = command_line("memgas bench live")
    table = f"Command: `{command}`\n\n" + one_session_markdown(result)
    _write_results(out, "live --one-session", command, table, result)
    print(table)
    print(f"wrote {out / 'results.json'}, {out / 'report.md'}")
    return 0


def _cmd_live(args: argparse.Namespace) -> int:
    from memgas.bench.live import DEFAULT_CHECKPOINTS, live_markdown, run_live
    from memgas.bench.report import command_line

    path = _longmemeval_data(args)
    if args.one_session is not None:
        return _cmd_one_session(args, path)
    out = args.out or Path("bench-out") / "live"
    result = run_live(Path(path), out, checkpoints=args.checkpoints or DEFAULT_CHECKPOINTS,
                      n_sessions=args.sessions, window=args.window, progress=not args.no_progress)
    command = command_line("memgas bench live")
    table = f"Command: `{command}`\n\n" + live_markdown(result)
    _write_results(out, "live", command, table, result)
    print(table)
    print(f"wrote {out / 'results.json'}, {out / 'report.md'}")
    return 0


def _cmd_kg(args: argparse.Namespace, embedder: Any) -> int:
    import json
    from dataclasses import asdict

    from memgas.bench.kg import DEFAULT_ORACLE, kg_markdown, run_kg
    from memgas.bench.qa import llm_from_args
    from memgas.bench.report import command_line

    path = args.data or DEFAULT_ORACLE
    if not Path(path).is_file():
        raise InvalidInputError(f"LongMemEval oracle data not found at {Path(path).resolve()}; pass --data PATH")
    llm = llm_from_args(args)
    types = [t.strip() for t in (args.types or "knowledge-update,temporal-reasoning").split(",") if t.strip()]
    roles = [r.strip() for r in args.roles.split(",") if r.strip()]
    result = run_kg(Path(path), embedder, llm, types=types, per_type=args.limit, roles=roles,
                    progress=not args.no_progress)
    out = args.out or Path("bench-out") / "kg"
    out.mkdir(parents=True, exist_ok=True)
    table = f"Command: `{command_line('memgas bench kg')}`\n\n" + kg_markdown(result)
    (out / "results.json").write_text(json.dumps(asdict(result), indent=1, default=str), encoding="utf-8")
    (out / "report.md").write_text(table, encoding="utf-8")
    print(table)
    print(f"wrote {out / 'results.json'}, {out / 'report.md'}")
    return 0


@contextmanager
def _backend(args: argparse.Namespace, database: str = "memgas_bench") -> Iterator[str | None]:
    """The store URL the run uses: ``--backend``, or a database of a ``--pg-temp`` cluster stopped afterwards."""
    if not args.pg_temp:
        yield args.backend
        return
    if args.backend is not None:
        raise InvalidInputError("--backend and --pg-temp exclude each other")
    from memgas.store.pgtemp import TempCluster

    with TempCluster() as cluster:
        yield cluster.create_database(database)


def _target(backend: str | None, sqlite: Path) -> tuple[str, str]:
    """The measured store and its label: ``backend``, else ``sqlite`` removed first (a fresh file each run)."""
    if backend is not None:
        return backend, "PostgreSQL" if backend.startswith(("postgresql://", "postgres://")) else "SQLite"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{sqlite}{suffix}").unlink(missing_ok=True)
    return str(sqlite), "SQLite"


def _cmd_store(args: argparse.Namespace) -> int:
    """``bench store`` / ``bench scale``: on ``--backend``, ``--pg-temp`` or a fresh SQLite file in ``--out``."""
    import time

    from memgas.bench.backends import run_scale, run_throughput, scale_markdown, throughput_markdown
    from memgas.bench.report import command_line

    path = _longmemeval_data(args)
    out = args.out or Path("bench-out") / args.dataset
    out.mkdir(parents=True, exist_ok=True)
    with _backend(args) as backend:
        target, label = _target(backend, out / f"{args.dataset}.db")
        if args.dataset == "store":
            result: Any = run_throughput(target, Path(path), args.clients or [1, 4, 8], adds=args.sessions or 10,
                                         searches=args.searches, cache=args.cache, tag=f"tp{int(time.time())}")
            table = throughput_markdown({label: result})
        else:
            from memgas.core.paths import default_cache_path
            from memgas.embed.cache import EmbeddingCache
            from memgas.embed.factory import get_embedder

            embedder = get_embedder(args.embedder, cache=EmbeddingCache(args.cache or default_cache_path()))
            result = run_scale(target, Path(path), args.users or [100, 1000, 10000], embedder,
                               per_user=args.sessions or 20)
            table = scale_markdown({label: result})
    command = command_line(f"memgas bench {args.dataset}")
    cache_note = ("a pre-warmed embedding cache shared by the clients" if args.cache is not None
                  else "a fresh embedding cache per client (every add runs the model)")
    text = f"Command: `{command}`\n\nStore: {label}" + (f"; {cache_note}" if args.dataset == "store" else "") + \
        f"; {os.cpu_count()} CPU cores.\n\n{table}"
    _write_results(out, args.dataset, command, text, {"store": label, "runs": result})
    print(text)
    print(f"wrote {out / 'results.json'}, {out / 'report.md'}")
    return 0


def _cmd_multilingual(args: argparse.Namespace) -> int:
    """``bench multilingual``: the shipped multilingual sample (see :mod:`memgas.bench.multilingual`)."""
    from memgas.bench.multilingual import multilingual_markdown, run_multilingual
    from memgas.bench.report import command_line
    from memgas.embed.factory import get_embedder

    methods = "memgas,bm25,dense-turn" if args.method == DEFAULT_METHODS else args.method
    embedders = [get_embedder(spec.strip()) for spec in (args.embedder or "default,e5").split(",")]
    table = multilingual_markdown(run_multilingual(embedders, [m.strip() for m in methods.split(",")], args.data))
    out = args.out or Path("bench-out") / "multilingual"
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.md").write_text(f"# memgas bench: multilingual\n\nCommand: `{command_line()}`\n\n{table}\n",
                                   encoding="utf-8")
    print(table)
    return 0


def _cmd_longreplies(args: argparse.Namespace) -> int:
    """``bench longreplies``: facts at known depths of long assistant replies (see :mod:`memgas.bench.longreplies`)."""
    from memgas.bench.longreplies import longreplies_markdown, run_longreplies
    from memgas.bench.report import command_line
    from memgas.core.paths import default_cache_path
    from memgas.embed.cache import EmbeddingCache
    from memgas.embed.factory import get_embedder

    methods = "memgas,bm25,dense-turn" if args.method == DEFAULT_METHODS else args.method
    embedder = get_embedder(args.embedder, cache=EmbeddingCache(args.cache or default_cache_path()))
    rows = run_longreplies(embedder, [m.strip() for m in methods.split(",")], path=args.data,
                           method_options=memgas_options(args.set))
    table = longreplies_markdown(rows)
    out = args.out or Path("bench-out") / "longreplies"
    out.mkdir(parents=True, exist_ok=True)
    command = command_line("memgas bench longreplies")
    _write_results(out, "longreplies", command, f"Command: `{command}`\n\n{table}\n", {"rows": rows})
    print(table)
    return 0


def _cmd_usermodel(args: argparse.Namespace) -> int:
    """``bench usermodel``: train the detector of lasting statements, report it on the held-out part, keep its
    weights (see :mod:`memgas.bench.usermodel`)."""
    from memgas.bench.report import command_line
    from memgas.bench.usermodel import run_usermodel, usermodel_markdown, write_weights
    from memgas.core.paths import default_cache_path
    from memgas.embed.cache import EmbeddingCache
    from memgas.embed.factory import get_embedder

    embedder = get_embedder(args.embedder, cache=EmbeddingCache(args.cache or default_cache_path()))
    models, report = run_usermodel(args.data or Path("../shared/data"), embedder)
    out = args.out or Path("bench-out") / "usermodel"
    out.mkdir(parents=True, exist_ok=True)
    write_weights(models, out / "lasting.npz", report)
    table = usermodel_markdown(report)
    command = command_line("memgas bench usermodel")
    _write_results(out, "usermodel", command, f"Command: `{command}`\n\n{table}\n", {"report": report})
    print(table)
    print(f"weights: {out / 'lasting.npz'}")
    return 0


def _cmd_card(args: argparse.Namespace) -> int:
    """``bench card``: the user card's learned choice, measured out of fold beside the hand-set card (see
    :mod:`memgas.bench.card`)."""
    from memgas.bench.card import card_markdown, run_card
    from memgas.bench.report import command_line
    from memgas.core.paths import default_cache_path
    from memgas.embed.cache import EmbeddingCache
    from memgas.embed.factory import get_embedder

    if args.limit is not None and args.limit < 2:
        raise InvalidInputError("--limit must be at least 2 (a conversation in each fold)")
    embedder = get_embedder(args.embedder, cache=EmbeddingCache(args.cache or default_cache_path()))
    out = args.out or Path("bench-out") / "card"
    out.mkdir(parents=True, exist_ok=True)
    scales = [s.strip() for s in args.scales.split(",") if s.strip()]
    report = run_card(args.data or Path("../shared/data"), embedder, scales=scales, store_dir=args.stores,
                      limit=args.limit, weights_out=out / "card.npz", options=context_options(args.context_set))
    table = card_markdown(report)
    command = command_line("memgas bench card")
    _write_results(out, "card", command, f"Command: `{command}`\n\n{table}\n", {"report": report})
    print(table)
    print(f"weights: {out / 'card.npz'}")
    return 0


def _cmd_selection(args: argparse.Namespace) -> int:
    """``bench selection``: a learned choice of a context's messages, measured out of fold beside MemGAS's context and
    the anchors (see :mod:`memgas.bench.selection`)."""
    from memgas.bench.report import command_line
    from memgas.bench.selection import run_selection, selection_markdown
    from memgas.core.paths import default_cache_path
    from memgas.embed.cache import EmbeddingCache
    from memgas.embed.factory import get_embedder

    if args.limit is not None and args.limit < 2:
        raise InvalidInputError("--limit must be at least 2 (a conversation in each fold)")
    embedder = get_embedder(args.embedder, cache=EmbeddingCache(args.cache or default_cache_path()))
    out = args.out or Path("bench-out") / "selection"
    out.mkdir(parents=True, exist_ok=True)
    report = run_selection(args.data or Path("../shared/data"), embedder, store_dir=args.stores, limit=args.limit,
                           weights_out=out / "selection.npz")
    table = selection_markdown(report)
    command = command_line("memgas bench selection")
    _write_results(out, "selection", command, f"Command: `{command}`\n\n{table}\n", {"report": report})
    print(table)
    print(f"weights: {out / 'selection.npz'}")
    return 0


def _cmd_latency(args: argparse.Namespace) -> int:
    """``bench latency``: search and context timings of the existing store ``--backend``."""
    from memgas.bench.latency import latency_markdown, run_latency
    from memgas.bench.report import command_line
    from memgas.cli.common import require_store
    from memgas.memory import Memory

    if args.backend is None:
        raise InvalidInputError("bench latency times an existing store: pass --backend <SQLite file or URL>")
    require_store(args.backend)
    requests = 20 if args.requests is None else args.requests
    if requests < 1:
        raise InvalidInputError("--requests must be a positive integer")
    if args.contexts is not None and len(args.contexts) != 1:
        raise InvalidInputError("bench latency times one context budget: pass --contexts TOKENS once, one value")
    with Memory(args.backend) as mem:
        result = run_latency(mem, requests, max_tokens=1000 if args.contexts is None else args.contexts[0])
    if not result["questions"]:
        raise InvalidInputError(f"{args.backend} holds no user message to ask about")
    table = latency_markdown(result)
    out = args.out or Path("bench-out") / "latency"
    out.mkdir(parents=True, exist_ok=True)
    command = command_line("memgas bench latency")
    _write_results(out, "latency", command, f"Command: `{command}`\n\n{table}\n", result)
    print(table)
    return 0


def _cmd_reembed(args: argparse.Namespace) -> int:
    """``bench reembed``: re-embedding a copy of the SQLite store ``--backend`` with ``--embedder``."""
    from memgas.bench.reembedding import reembed_markdown, run_reembed
    from memgas.bench.report import command_line
    from memgas.cli.common import require_store, store_file

    if args.backend is None or args.embedder is None:
        raise InvalidInputError("bench reembed needs --backend <SQLite file> and --embedder <the new embedder>")
    require_store(args.backend)
    path = store_file(args.backend)
    if path is None:
        raise InvalidInputError("bench reembed copies a SQLite store (--backend <file>); a PostgreSQL store is "
                                "re-embedded in place by 'memgas reembed'")
    requests = 20 if args.requests is None else args.requests
    if requests < 1:
        raise InvalidInputError("--requests must be a positive integer")
    out = args.out or Path("bench-out") / "reembed"
    out.mkdir(parents=True, exist_ok=True)
    result = run_reembed(path, args.embedder, out, requests)
    table = reembed_markdown(result)
    command = command_line("memgas bench reembed")
    _write_results(out, "reembed", command, f"Command: `{command}`\n\n{table}\n", result)
    print(table)
    return 0


def _cmd_http(args: argparse.Namespace) -> int:
    """``bench http``: on ``--backend``, ``--pg-temp`` or a fresh SQLite file in ``--out``."""
    from memgas.bench.report import command_line
    from memgas.bench.serving import DEFAULT_CLIENTS, DEFAULT_REQUESTS, DEFAULT_SESSIONS, http_markdown, run_http

    path = _longmemeval_data(args)
    out = args.out or Path("bench-out") / "http"
    out.mkdir(parents=True, exist_ok=True)
    with _backend(args, "memgas_bench_http") as backend:
        target, label = _target(backend, out / "http.db")
        result = run_http(target, Path(path), args.clients or DEFAULT_CLIENTS,
                          sessions=DEFAULT_SESSIONS if args.sessions is None else args.sessions,
                          requests=DEFAULT_REQUESTS if args.requests is None else args.requests,
                          log=out / "server.log", progress=not args.no_progress)
    command = command_line("memgas bench http")
    server, config = result["server"], result["config"]
    text = (f"Command: `{command}`\n\nStore: {label}; {os.cpu_count()} CPU cores; server: `{' '.join(server['argv'])}` "
            f"({server['workers']} worker, {server['auth']}, no rate limit, embedding cache {server['embedding_cache']}); "
            f"clients: {server['clients']}; the searched user holds {config['sessions']} sessions; per client: "
            f"{config['searches_per_client']} searches (k = {config['k']}), then {config['adds_per_client']} add(s) "
            f"to a user of its own.\n\n{http_markdown(result)}")
    _write_results(out, "http", command, text, {"store": label, "cpu_cores": os.cpu_count(), **result})
    print((out / "results.json").read_text(encoding="utf-8") if args.json else text)
    if not args.json:
        print(f"wrote {out / 'results.json'}, {out / 'report.md'}, {out / 'server.log'}")
    return 0


def _cmd_bot(args: argparse.Namespace) -> int:
    """``bench bot``: Buffer of Thoughts on generated task families (see :mod:`memgas.bench.thoughts`)."""
    from memgas.bench.qa import llm_from_args
    from memgas.bench.report import command_line
    from memgas.bench.thoughts import DEFAULT_FAMILIES, bot_markdown, run_bot

    families = [f.strip() for f in args.families.split(",") if f.strip()] if args.families else list(DEFAULT_FAMILIES)
    if args.train_per_family < 0 or args.test_per_family < 1:
        raise InvalidInputError("--train-per-family must be at least 0 and --test-per-family at least 1")
    result = run_bot(llm_from_args(args), args.embedder, families=families, train=args.train_per_family,
                     test=args.test_per_family, seed=args.bot_seed, progress=not args.no_progress)
    out = args.out or Path("bench-out") / "bot"
    out.mkdir(parents=True, exist_ok=True)
    command = command_line("memgas bench bot")
    text = f"Command: `{command}`\n\n{bot_markdown(result)}"
    _write_results(out, "bot", command, text, result)
    print(text)
    print(f"wrote {out / 'results.json'}, {out / 'report.md'}")
    return 0


def _cmd_principles(args: argparse.Namespace) -> int:
    """``bench principles``: PRINCIPLES on the shipped scenario set (see :mod:`memgas.bench.principles`)."""
    from memgas.bench.principles import principles_markdown, run_principles
    from memgas.bench.qa import llm_from_args
    from memgas.bench.report import command_line
    from memgas.core.paths import default_cache_path
    from memgas.embed.cache import EmbeddingCache
    from memgas.embed.factory import get_embedder

    if args.dialogues < 1 or args.heldout < 1:
        raise InvalidInputError("--dialogues and --heldout must be positive")
    out = args.out or Path("bench-out") / "principles"
    out.mkdir(parents=True, exist_ok=True)
    embedder = get_embedder(args.embedder, cache=EmbeddingCache(args.cache or default_cache_path()))
    result = run_principles(llm_from_args(args), embedder, out / "principles.db", dialogues=args.dialogues,
                            heldout=args.heldout, progress=not args.no_progress)
    command = command_line("memgas bench principles")
    text = f"Command: `{command}`\n\n{principles_markdown(result)}"
    _write_results(out, "principles", command, text, result)
    print(text)
    print(f"wrote {out / 'results.json'}, {out / 'report.md'}")
    return 0


def _stages(args: argparse.Namespace) -> dict[str, Any]:
    """The optional stages ``--rerank`` and ``--decompose`` ask for, by the attribute each takes on a method, their
    LLM responses cached as ``--llm-cache`` says."""
    from memgas.core.paths import default_llm_cache_path

    cache = None if args.no_llm_cache else args.llm_cache or default_llm_cache_path()
    stages: dict[str, Any] = {}
    if args.decompose:
        from memgas.methods.decompose import decompose_stage

        stages["decomposer"] = decompose_stage(args.decompose, llm_cache=cache)
    if args.rerank:
        from memgas.methods.rerank import rerank_stage

        stages["reranker"] = rerank_stage(args.rerank, llm_cache=cache)
    return stages


def context_options(pairs: list[str]) -> Any:
    """``--context-set`` pairs as a :class:`memgas.context.ContextOptions` (``None`` for none), each value read as its
    field's type.

    Raises:
        InvalidInputError: a pair without ``=``, an unknown field, or a value that is not of its field's type.
    """
    from dataclasses import fields, replace

    from memgas.context import ContextOptions

    if not pairs:
        return None
    known = {f.name: type(getattr(ContextOptions(), f.name)) for f in fields(ContextOptions)}
    values: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or key not in known:
            raise InvalidInputError(f"--context-set {pair!r}: expected KEY=VALUE with KEY one of {', '.join(known)}")
        kind = known[key]
        try:
            if kind is bool:
                if text.lower() not in ("true", "false"):
                    raise ValueError(text)
                values[key] = text.lower() == "true"
            else:
                values[key] = kind(text)
        except ValueError:
            raise InvalidInputError(f"--context-set {key}: expected {kind.__name__}, got {text!r}") from None
    return replace(ContextOptions(), **values)


def _cmd_beam(args: argparse.Namespace, methods: list[str]) -> int:
    """``memgas bench beam``: rankings and contexts on BEAM, written as the other retrieval benchmarks are."""
    from memgas.bench.beam import DEFAULT_BEAM, run_beam
    from memgas.bench.report import command_line, markdown_table, write_outputs
    from memgas.core.paths import default_cache_path
    from memgas.embed.cache import EmbeddingCache
    from memgas.embed.factory import get_embedder
    from memgas.methods import NEEDS_LLM

    needs = sorted(NEEDS_LLM & set(methods))
    elsewhere = (args.backend or args.pg_temp) and not args.one_user
    if needs or args.qa or elsewhere or args.ingest != "whole" or args.llm_units:
        left_out = ", ".join(needs) if needs else "--qa, --backend and --pg-temp (but with --one-user), --ingest " \
            "and --llm-units"
        raise InvalidInputError(f"beam runs the offline methods on kept or in-memory stores: leave out {left_out}")
    root = args.data or DEFAULT_BEAM
    scales = [s.strip() for s in args.scales.split(",") if s.strip()]
    embedder = get_embedder(args.embedder, cache=EmbeddingCache(args.cache or default_cache_path()))
    with _backend(args, "memgas_bench_beam") as backend:
        result = run_beam(Path(root), methods, embedder, scales=scales, limit=args.limit, ks=args.k or (5, 10, 20),
                          contexts=args.contexts or (1000, 4000), progress=not args.no_progress, store_dir=args.stores,
                          overrides=memgas_options(args.set), stages=_stages(args),
                          context_options=context_options(args.context_set), single_user=args.one_user,
                          backend=backend)
    paths = write_outputs(result, args.out or Path("bench-out") / "beam", command_line())
    print(markdown_table(result))
    print("wrote " + ", ".join(str(p) for p in paths.values()))
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    """Run the benchmark, write results.json, report.md and recall_at_k.png, print the table."""
    from memgas.bench.qa import cmd_qa, llm_from_args
    from memgas.bench.report import command_line, markdown_table, write_outputs
    from memgas.bench.runner import DEFAULT_DATA, DEFAULT_KS, run_locomo, run_longmemeval
    from memgas.core.paths import default_cache_path
    from memgas.embed.cache import EmbeddingCache
    from memgas.embed.factory import get_embedder
    from memgas.methods import METHODS, NEEDS_LLM, QA_ONLY

    if args.limit is not None and args.limit < 1:
        raise InvalidInputError("--limit must be a positive integer")
    if args.dataset == "cost":
        return _cmd_cost(args)
    if args.dataset == "live":
        return _cmd_live(args)
    if args.dataset == "filters":
        return _cmd_filters(args)
    if args.dataset == "adapters":
        return _cmd_adapters(args)
    if args.dataset == "ratelimit":
        return _cmd_ratelimit(args)
    if args.dataset == "users":
        return _cmd_users(args)
    if args.dataset == "cluster":
        return _cmd_cluster(args)
    if args.dataset == "latency":
        return _cmd_latency(args)
    if args.dataset == "reembed":
        return _cmd_reembed(args)
    if args.dataset in ("store", "scale"):
        return _cmd_store(args)
    if args.dataset == "http":
        return _cmd_http(args)
    if args.dataset == "multilingual":
        return _cmd_multilingual(args)
    if args.dataset == "longreplies":
        return _cmd_longreplies(args)
    if args.dataset == "usermodel":
        return _cmd_usermodel(args)
    if args.dataset == "selection":
        return _cmd_selection(args)
    if args.dataset == "card":
        return _cmd_card(args)
    if args.dataset == "bot":
        return _cmd_bot(args)
    if args.dataset == "principles":
        return _cmd_principles(args)
    if args.dataset == "kg":
        return _cmd_kg(args, get_embedder(args.embedder, cache=EmbeddingCache(args.cache or default_cache_path())))
    methods = [m.strip() for m in args.method.split(",") if m.strip()]
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise InvalidInputError(f"unknown method(s) {', '.join(unknown)}; choose from {', '.join(METHODS)}")
    qa_only = [m for m in methods if m in QA_ONLY]
    if qa_only and not args.qa:  # refused before any data is read: they have no ranking to score
        raise InvalidInputError(f"{', '.join(qa_only)}: QA only, retrieval metrics are undefined; use --qa "
                                f"--qa-systems {','.join(qa_only)}")
    if args.dataset == "beam":
        return _cmd_beam(args, methods)
    path = args.data or DEFAULT_DATA[args.dataset]
    if not Path(path).is_file():
        raise InvalidInputError(f"{args.dataset} data not found at {Path(path).resolve()}; pass --data PATH")
    embedder = get_embedder(args.embedder, cache=EmbeddingCache(args.cache or default_cache_path()))
    if args.qa:
        return cmd_qa(args, Path(path), embedder)
    run = run_longmemeval if args.dataset == "longmemeval" else run_locomo
    ks = args.k or (list(DEFAULT_KS) if args.dataset == "longmemeval" else [1, 3, 5, 10])
    extra: dict[str, Any] = {"max_sessions": args.max_sessions} if args.dataset == "locomo" else {}
    if args.types is not None:
        if args.dataset != "longmemeval":
            raise InvalidInputError("--types applies to longmemeval and kg only")
        extra["types"] = [t.strip() for t in args.types.split(",") if t.strip()]
    # e.g. zep, or LLM-made units: the same --llm as the QA benchmark, responses cached
    llm = llm_from_args(args) if NEEDS_LLM & set(methods) or args.llm_units else None
    if args.llm_units:
        from memgas.methods.llm_units import LLMUnitWriter

        assert llm is not None  # made above for --llm-units
        extra["unit_writer"] = LLMUnitWriter(llm)
    if args.max_sessions is not None and args.dataset != "locomo":
        raise InvalidInputError("--max-sessions applies to locomo only")
    with _backend(args) as backend:
        result = run(Path(path), methods, embedder, limit=args.limit, ks=ks, progress=not args.no_progress,
                     store_dir=args.stores, overrides=memgas_options(args.set), llm=llm, backend=backend,
                     stages=_stages(args), ingest=args.ingest, contexts=args.contexts or (),
                     context_options=context_options(args.context_set), **extra)
    if args.ingest != "whole":  # what one append costs, beside embedding what it made and a warm search
        from memgas.bench.datasets import load_locomo, load_longmemeval
        from memgas.bench.stream import append_costs, stream_markdown

        data = ([s for q in load_longmemeval(Path(path), limit=args.limit) for s in q.sessions]
                if args.dataset == "longmemeval" else [s for c in load_locomo(Path(path), limit=args.limit)[0]
                                                       for s in c.sessions])
        try:
            costs = append_costs(data, embedder)
        except InvalidInputError as exc:  # a --limit too small for a 200-exchange session: the metrics still stand
            result.notes.append(f"Append costs not measured: {exc}")
        else:
            result.config["append_costs"] = costs
            result.notes.append("Append costs (one exchange, through Memory.append):\n\n" + stream_markdown(costs))
    out = args.out or Path("bench-out") / args.dataset
    paths = write_outputs(result, out, command_line())
    print(markdown_table(result))
    print("wrote " + ", ".join(str(p) for p in paths.values()))
    return 0
