"""What moving a store to another embedder costs: ``memgas bench reembed --backend <SQLite file> --embedder <spec>``.

On a copy of the store (taken with the online backup API; the store itself is not touched) it measures, in one run:

* **from scratch**: the store's conversations added, in the order they were first written, to an empty store with
  the new embedder (what re-embedding is compared with: the issue's goal is at most twice this);
* **re-embedding** the copy (:func:`memgas.reembed.reembed`) while a thread searches it without pause, as a serving
  worker opened without an embedder does, and for :data:`AFTER_SWITCH_S` seconds after the switch: each search's
  milliseconds, the errors (none expected) and the embedder it was answered with, beside warm searches of the copy
  before (old embedder) and after (new embedder);
* **rankings after**: each question's top 5 (sessions and scores) on the re-embedded copy against the store built
  from scratch.

Every embedding is made anew (an in-memory cache per phase), so neither phase profits from the other's work.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from memgas.bench.latency import questions_of
from memgas.embed.factory import get_embedder
from memgas.memory import Memory
from memgas.reembed import reembed, write_order
from memgas.store.backup import backup

__all__ = ["run_reembed", "reembed_markdown"]

#: Seconds the searching thread goes on after the switch (its searches then follow the new embedder).
AFTER_SWITCH_S = 2.0


def _warm(mem: Memory, questions: list[tuple[str, str]]) -> list[float]:
    for user in dict.fromkeys(u for u, _ in questions):
        mem.search("warm up", user_id=user)
    out = []
    for user, text in questions:
        t = time.perf_counter()
        mem.search(text, user_id=user)
        out.append(1000 * (time.perf_counter() - t))
    return out


def _top(mem: Memory, questions: list[tuple[str, str]]) -> list[list[tuple[str, float]]]:
    return [[(h.session_id, round(h.score, 6)) for h in mem.search(text, user_id=user, k=5)]
            for user, text in questions]


def _message(m: Any) -> dict[str, Any]:
    """A stored message as :meth:`Memory.add` takes it."""
    out = {"role": m.role, "content": m.content}
    if m.name is not None:
        out["name"] = m.name
    if m.metadata:
        out["metadata"] = dict(m.metadata)
    return out


def _pct(values: list[float], p: int) -> float:
    return float(np.percentile(values, p)) if values else 0.0


def run_reembed(store: Path, embedder: str, out: Path, n: int = 20) -> dict[str, Any]:
    """Measure re-embedding a copy of ``store`` with ``embedder`` (see the module); files go under ``out``."""
    copy, scratch = out / "reembed-copy.db", out / "reembed-scratch.db"
    for path in (copy, scratch, Path(f"{copy}.reembed")):
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
    backup(store, copy)
    with Memory(copy, method=None) as mem:
        previous = mem.embedder.id
        questions = questions_of(mem, n)
        users = [u.user_id for u in mem.users()]
        sessions = [(user, mem.get(sid, user_id=user)) for user in users for sid in write_order(mem.store, user)]
        before_ms = _warm(mem, questions)
        method = mem.method.name
    chars = sum(len(m.content) for _, s in sessions for m in s.messages)
    new = get_embedder(embedder)
    new.embed(["a first call loads the model"])  # loaded once, before either phase is timed; each caches anew
    t0 = time.perf_counter()
    with Memory(scratch, method=method, embedder=new, index_cache_mb=None) as fresh:
        for user, s in sessions:
            fresh.add([_message(m) for m in s.messages], user_id=user, session_id=s.session_id, timestamp=s.timestamp,
                      metadata=dict(s.metadata), agent_id=s.agent_id, run_id=s.run_id)
        scratch_s = time.perf_counter() - t0
        scratch_top = _top(fresh, questions)
    during: list[tuple[float, str]] = []
    errors: list[str] = []
    stop = threading.Event()

    def search() -> None:  # a serving worker: opened without an embedder, it follows the switch
        with Memory(copy) as worker:
            i = 0
            while not stop.is_set():
                user, text = questions[i % len(questions)]
                t = time.perf_counter()
                try:
                    worker.search(text, user_id=user)
                except Exception as exc:  # counted: the goal is none
                    errors.append(f"{type(exc).__name__}: {exc}")
                during.append((1000 * (time.perf_counter() - t), worker.embedder.id))
                i += 1

    thread = threading.Thread(target=search)
    thread.start()
    try:
        done = reembed(copy, new)
        stop.wait(AFTER_SWITCH_S)  # the worker goes on past the switch, now with the new embedder
    finally:
        stop.set()
        thread.join()
    with Memory(copy) as mem:
        after_ms = _warm(mem, questions)
        same = sum(a == b for a, b in zip(_top(mem, questions), scratch_top))
    ms = [m for m, _ in during]
    return {
        "store": str(store), "previous": previous, "embedder": done.embedder_id, "users": len(users),
        "sessions": len(sessions), "characters": chars, "tokens_approx": chars // 4,
        "scratch_seconds": round(scratch_s, 2), "reembed_seconds": done.seconds,
        "switch_seconds": done.switch_seconds, "passes": done.passes,
        "ratio": round(done.seconds / scratch_s, 2) if scratch_s else 0.0,
        "seconds_per_100k_tokens": round(done.seconds / max(chars / 4, 1) * 100_000, 2),
        "searches_during": len(ms), "search_errors": len(errors), "first_errors": errors[:3],
        "answered_with_new": sum(e == done.embedder_id for _, e in during),
        "during_p50_ms": round(_pct(ms, 50), 1), "during_p95_ms": round(_pct(ms, 95), 1),
        "during_max_ms": round(max(ms, default=0.0), 1),
        "warm_before_p50_ms": round(_pct(before_ms, 50), 1), "warm_before_p95_ms": round(_pct(before_ms, 95), 1),
        "warm_after_p50_ms": round(_pct(after_ms, 50), 1), "warm_after_p95_ms": round(_pct(after_ms, 95), 1),
        "questions": len(questions), "rankings_identical": same,
    }


def reembed_markdown(r: dict[str, Any]) -> str:
    """The result as Markdown."""
    return "\n".join([
        f"{r['store']}: {r['users']} users, {r['sessions']} sessions, {r['characters']:,} characters "
        f"(~{r['tokens_approx']:,} tokens at 4 characters each); {r['previous']} -> {r['embedder']}",
        "",
        "| | seconds | per 100K tokens | ÷ from scratch |",
        "|---|---:|---:|---:|",
        f"| built from scratch with the new embedder | {r['scratch_seconds']:.1f} | "
        f"{r['scratch_seconds'] / max(r['tokens_approx'], 1) * 100_000:.1f} | 1.00× |",
        f"| re-embedded while searched ({r['passes']} passes; switch {r['switch_seconds']:.2f} s) | "
        f"{r['reembed_seconds']:.1f} | {r['seconds_per_100k_tokens']:.1f} | {r['ratio']:.2f}× |",
        "",
        "| searches | count | errors | p50 (ms) | p95 (ms) | max (ms) |",
        "|---|---:|---:|---:|---:|---:|",
        f"| warm, before (old embedder) | {r['questions']} | 0 | {r['warm_before_p50_ms']} | "
        f"{r['warm_before_p95_ms']} | |",
        f"| during the re-embedding ({r['answered_with_new']} with the new embedder) | {r['searches_during']} | "
        f"{r['search_errors']} | {r['during_p50_ms']} | {r['during_p95_ms']} | {r['during_max_ms']} |",
        f"| warm, after (new embedder) | {r['questions']} | 0 | {r['warm_after_p50_ms']} | "
        f"{r['warm_after_p95_ms']} | |",
        "",
        f"Rankings after (top 5, sessions and scores) identical to the store built from scratch: "
        f"{r['rankings_identical']} of {r['questions']} questions.",
    ])
