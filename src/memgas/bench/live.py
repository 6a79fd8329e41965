"""Memory used as an agent uses it: add the last session, then search for the next message, turn after turn.

One user receives real LongMemEval-S sessions one by one (many haystacks concatenated, deduplicated by
session id, in time order); after each ``add`` comes one ``search`` with a real question of the dataset
(*search right after add*: whatever the add left for the index to do is paid here). At each checkpoint
the last ``window`` adds also get a second search with another question and no add between (*warm
search*), and the time to embed the same text once with the bare model (no cache): the session's
embedded text beside ``add``, the query beside each search. Every query text is new to the embedding
cache (a counter is appended), as a user's next message would be. The store is a SQLite file under the
output folder; after the run, fresh processes time ``memgas --help`` and ``memgas search`` on it.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from memgas.core.errors import InvalidInputError

__all__ = ["DEFAULT_CHECKPOINTS", "LIVE_USER", "checkpoint_plan", "run_live", "live_markdown", "rss_mb"]

#: Stored-session counts reported by default.
DEFAULT_CHECKPOINTS: tuple[int, ...] = (50, 500, 2000, 5000)
#: The one user whose memory grows.
LIVE_USER = "live"
#: Fresh processes timed per cold command.
COLD_RUNS = 3


def checkpoint_plan(checkpoints: Sequence[int], n_sessions: int | None) -> list[int]:
    """The checkpoints to report: those up to ``n_sessions`` (default: the largest checkpoint), plus
    ``n_sessions`` itself, so the run always ends on a reported row.

    Raises:
        InvalidInputError: a checkpoint or ``n_sessions`` is below 1.
    """
    if not checkpoints or min(checkpoints) < 1 or (n_sessions is not None and n_sessions < 1):
        raise InvalidInputError("checkpoints and --sessions must be positive integers")
    n = max(checkpoints) if n_sessions is None else n_sessions
    return sorted({c for c in checkpoints if c <= n} | {n})


def rss_mb() -> float:
    """This process's resident memory now (Linux ``/proc``), else its peak (``getrusage``), in MiB."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _percentiles(values: Sequence[float]) -> dict[str, float]:
    return {"p50": float(np.percentile(values, 50)), "p95": float(np.percentile(values, 95))}


def _memgas_command() -> list[str]:
    """The ``memgas`` console script beside this interpreter, else ``python -m memgas.cli``."""
    script = Path(sys.executable).with_name("memgas")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "memgas.cli"]


def _cold_seconds(args: list[str], env: dict[str, str]) -> float:
    """Wall time of one fresh ``memgas`` process (its output discarded).

    Raises:
        InvalidInputError: the command failed (its last error line is quoted).
    """
    t0 = time.perf_counter()
    done = subprocess.run(_memgas_command() + args, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise InvalidInputError(f"cold `memgas {args[0]}` failed with status {done.returncode}: {last}")
    return seconds


def _cold_process(db: Path, questions: list[str], cache_dir: Path) -> dict[str, list[float]]:
    """``COLD_RUNS`` fresh processes each of ``memgas --help`` and ``memgas search`` (k = 10, a new question
    each, a private embedding cache) on the finished store, in seconds."""
    env = {**os.environ, "MEMGAS_CACHE_DIR": str(cache_dir), "OMP_WAIT_POLICY": "PASSIVE"}
    help_s = [_cold_seconds(["--help"], env) for _ in range(COLD_RUNS)]
    search_s = [_cold_seconds(["search", "--db", str(db), "--user", LIVE_USER, "-k", "10",
                               f"{questions[i % len(questions)]} (cold {i})"], env) for i in range(COLD_RUNS)]
    return {"help_s": help_s, "search_s": search_s}


def run_live(
    path: Path,
    out_dir: Path,
    *,
    checkpoints: Sequence[int] = DEFAULT_CHECKPOINTS,
    n_sessions: int | None = None,
    window: int = 50,
    progress: bool = True,
) -> dict[str, Any]:
    """Add sessions one by one with a search after each; measure at the checkpoints (see the module docstring).

    Args:
        path: a LongMemEval file (S: its haystacks hold enough distinct sessions).
        out_dir: the store ``live.sqlite`` is (re)created here.
        checkpoints: stored-session counts to report at.
        n_sessions: sessions to add (default: the largest checkpoint); checkpoints beyond it are dropped.
        window: adds before a checkpoint whose timings it reports (at most half the checkpoint).
        progress: show a progress bar on stderr.

    Returns:
        A JSON-ready dict: ``config``, one row per checkpoint (``rows``), per-add series (``per_add``:
        add seconds and search-right-after-add milliseconds) and the cold-process wall times (``cold``).

    Raises:
        InvalidInputError: bad checkpoints or window, or the file holds fewer than 2 distinct sessions.
    """
    from tqdm import tqdm

    from memgas.bench.cost import distinct_sessions, embed_once_seconds
    from memgas.embed.factory import get_embedder
    from memgas.memory import Memory

    if window < 1:
        raise InvalidInputError("--window must be a positive integer")
    plan = checkpoint_plan(checkpoints, n_sessions)
    sessions, questions = distinct_sessions(path, plan[-1], user_id=LIVE_USER)
    notes: list[str] = []
    if len(sessions) < plan[-1]:
        notes.append(f"the file holds only {len(sessions)} distinct sessions; later checkpoints dropped")
        plan = sorted({c for c in plan if c <= len(sessions)} | {len(sessions)})
    if len(sessions) < 2 or not questions:
        raise InvalidInputError(f"{path} holds fewer than 2 distinct sessions")
    # the adds each checkpoint reports: the `window` before it, at most half of it (the store's size varies
    # little across a window)
    windows = {c: range(c - max(1, min(window, c // 2)) + 1, c + 1) for c in plan}
    in_window = set().union(*windows.values())

    out_dir.mkdir(parents=True, exist_ok=True)
    db = out_dir / "live.sqlite"
    for f in (db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")):
        f.unlink(missing_ok=True)
    plain = get_embedder()  # the process's model without a cache: the baseline, loaded before timing anything
    plain.embed(["warm up"])
    asked = 0

    def next_query() -> str:
        nonlocal asked
        asked += 1
        return f"{questions[asked % len(questions)]} ({asked})"  # new text each time: no query-cache hit

    add_s: list[float] = []
    after_ms: list[float] = []
    sample: dict[str, dict[int, float]] = {"warm_ms": {}, "embed_add_ms": {}, "embed_query_ms": {}}
    rows: list[dict[str, Any]] = []
    with Memory(db, embedding_cache=None) as mem:  # in-memory embedding cache: every session is embedded here
        for i, s in enumerate(tqdm(sessions, desc="live", disable=not progress, file=sys.stderr), 1):
            messages = [{"role": m.role, "content": m.content} for m in s.messages]
            t0 = time.perf_counter()
            mem.add(messages, user_id=LIVE_USER, session_id=s.session_id, timestamp=s.timestamp)
            add_s.append(time.perf_counter() - t0)
            query = next_query()
            t0 = time.perf_counter()
            mem.search(query, user_id=LIVE_USER, k=10)
            after_ms.append((time.perf_counter() - t0) * 1000)
            if i in in_window:
                warm = next_query()
                t0 = time.perf_counter()
                mem.search(warm, user_id=LIVE_USER, k=10)
                sample["warm_ms"][i] = (time.perf_counter() - t0) * 1000
                sample["embed_add_ms"][i] = embed_once_seconds([s], plain) * 1000
                t0 = time.perf_counter()
                plain.embed([warm])
                sample["embed_query_ms"][i] = (time.perf_counter() - t0) * 1000
            if i in windows:
                idx = windows[i]
                stats = mem.stats(LIVE_USER)
                rows.append({
                    "sessions": i,
                    "window": len(idx),
                    "units": int(sum(stats["units"].values())),
                    "edges": int(stats["edges"]),
                    "add_ms": _percentiles([add_s[j - 1] * 1000 for j in idx]),
                    "embed_add_ms": _percentiles([sample["embed_add_ms"][j] for j in idx]),
                    "search_after_add_ms": _percentiles([after_ms[j - 1] for j in idx]),
                    "warm_search_ms": _percentiles([sample["warm_ms"][j] for j in idx]),
                    "embed_query_ms": _percentiles([sample["embed_query_ms"][j] for j in idx]),
                    "rss_mb": rss_mb(),
                    "store_mb": (stats.get("file_bytes") or 0) / 2**20,
                })
    with tempfile.TemporaryDirectory(dir=out_dir) as cache_dir:
        cold = _cold_process(db, questions, Path(cache_dir))
    return {
        "config": {"data": str(path), "sessions": len(sessions), "checkpoints": plan, "window": window, "k": 10,
                   "questions": len(questions), "store": str(db), "cpu_count": os.cpu_count()},
        "notes": notes,
        "rows": rows,
        "per_add": {"add_s": add_s, "search_after_add_ms": after_ms},
        "cold": cold,
    }


def live_markdown(r: dict[str, Any]) -> str:
    """The checkpoints and the cold-process times as Markdown tables."""
    def cell(d: dict[str, float]) -> str:
        return f"{d['p50']:.0f} / {d['p95']:.0f}"

    cfg = r["config"]
    lines = [f"### live memory: {cfg['sessions']:,} LongMemEval-S sessions added one by one to one user, "
             f"a search (k = {cfg['k']}) after each", "",
             "Times in ms, p50 / p95 over the last adds before each row (`window`); *embed once* is the bare "
             "model on the same text, without the cache.", "",
             "| sessions | window | units | add | embed session once | search right after add | warm search "
             "| embed query once | after ÷ warm (p50) | add ÷ embed (p50) | RSS (MiB) | store (MiB) |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row in r["rows"]:
        after, warm = row["search_after_add_ms"]["p50"], row["warm_search_ms"]["p50"]
        add, emb = row["add_ms"]["p50"], row["embed_add_ms"]["p50"]
        lines.append(
            f"| {row['sessions']:,} | {row['window']} | {row['units']:,} | {cell(row['add_ms'])} "
            f"| {cell(row['embed_add_ms'])} | {cell(row['search_after_add_ms'])} | {cell(row['warm_search_ms'])} "
            f"| {cell(row['embed_query_ms'])} | {after / warm:.2f} | {add / emb:.2f} | {row['rss_mb']:.0f} "
            f"| {row['store_mb']:.1f} |")
    cold = r["cold"]
    lines += ["", f"Cold process ({len(cold['help_s'])} fresh processes each; seconds):", "",
              "| command | median | min |", "|---|---:|---:|",
              f"| `memgas --help` | {np.median(cold['help_s']):.2f} | {min(cold['help_s']):.2f} |",
              f"| `memgas search -k 10` on the {cfg['sessions']:,}-session store | {np.median(cold['search_s']):.2f} "
              f"| {min(cold['search_s']):.2f} |"]
    lines += [f"Note: {n}" for n in r["notes"]]
    return "\n".join(lines) + "\n"
