"""``memgas bench live --one-session N``: one long chat, as an agent that keeps one thread per user writes it.

Real messages (LongMemEval-S sessions' turns, the distinct sessions in time order, user and assistant as they were
said) are appended one at a time to one session with :meth:`memgas.Memory.append`; the first message is a fact the
last one asks about (:data:`EARLY_FACT`, :data:`QUESTION`), so the run also tells whether
``append(..., return_context=True)`` brings back what was said at the start of the thread once it left the prompt's
window. Reported: append p50 / p95 per stretch of :data:`STRETCH` messages, the store's bytes, and that answer.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from memgas.core.errors import InvalidInputError

__all__ = ["EARLY_FACT", "QUESTION", "STRETCH", "EARLY", "LATE", "thread_messages", "run_one_session", "one_session_markdown"]

#: Appends per reported stretch.
STRETCH = 100
#: The messages (1-based, inclusive) whose append p50 the last ones' is compared with: past the first appends, which
#: load the model and meet a cold embedding cache.
EARLY = (51, 100)
#: How many of the last appends that comparison takes.
LATE = 50
#: The thread's first message: a fact no later message repeats.
EARLY_FACT = "Quick note before we start: my gym locker code is 4721."
#: The message appended last, with ``return_context=True``: its context should hold :data:`EARLY_FACT`.
QUESTION = "What was my gym locker code again?"
#: The user and session the thread is kept under.
USER, SESSION = "thread", "one-thread"


def thread_messages(path: Path, n: int) -> list[dict[str, str]]:
    """The first ``n`` messages of the LongMemEval file's distinct sessions, in time order, as ``role`` /
    ``content`` dicts (fewer when the file holds fewer)."""
    from memgas.bench.cost import distinct_sessions

    wanted = max(1, n // 8)  # a LongMemEval-S session holds ~10-20 messages
    while True:
        sessions, _ = distinct_sessions(path, wanted, user_id=USER)
        out = [{"role": m.role, "content": m.content} for s in sessions for m in s.messages][:n]
        if len(out) >= n or len(sessions) < wanted:
            return out
        wanted *= 2


def run_one_session(path: Path, out_dir: Path, n: int, *, window: int = 20, progress: bool = True) -> dict[str, Any]:
    """Append ``n`` messages one at a time to one session of a new SQLite store under ``out_dir`` (see the module
    docstring) and measure each append.

    Args:
        path: a LongMemEval file (S: its haystacks hold enough messages).
        out_dir: the store ``one-session.sqlite`` is (re)created here.
        n: messages in the thread, :data:`EARLY_FACT` the first of them (>= 2).
        window: the messages the prompt holds when the last append asks for its context.
        progress: show a progress bar on stderr.

    Returns:
        A JSON-ready dict: ``config``, ``append_ms`` (each append), ``stretches`` (``first``, ``last``, ``p50_ms``,
        ``p95_ms``), ``growth`` (the p50 of the last :data:`LATE` appends against that of messages :data:`EARLY`, and
        their ratio; ``None`` for a thread too short to have both), ``store_bytes``, ``early_fact_found`` and the
        ``context`` the last append brought back.

    Raises:
        InvalidInputError: ``n`` below 2, or the file holds fewer than ``n - 1`` messages.
    """
    from tqdm import tqdm

    from memgas.memory import Memory

    if n < 2:
        raise InvalidInputError("--one-session needs at least 2 messages")
    said = thread_messages(path, n - 1)
    if len(said) < n - 1:
        raise InvalidInputError(f"{path} holds only {len(said)} messages; --one-session needs {n - 1}")
    out_dir.mkdir(parents=True, exist_ok=True)
    db = out_dir / "one-session.sqlite"
    for old in (db, Path(f"{db}-wal"), Path(f"{db}-shm")):
        old.unlink(missing_ok=True)
    thread = [{"role": "user", "content": EARLY_FACT}, *said]
    seconds: list[float] = []
    with Memory(db) as mem:
        for message in tqdm(thread, desc="one session", unit="msg", disable=not progress):
            t0 = time.perf_counter()
            mem.append([message], user_id=USER, session_id=SESSION)
            seconds.append(time.perf_counter() - t0)
        asked = mem.append([{"role": "user", "content": QUESTION}], user_id=USER, session_id=SESSION,
                           return_context=True, window=window)
    ms = np.array(seconds) * 1000
    stretches = [{"first": a + 1, "last": min(a + STRETCH, n),
                  "p50_ms": round(float(np.percentile(ms[a:a + STRETCH], 50)), 1),
                  "p95_ms": round(float(np.percentile(ms[a:a + STRETCH], 95)), 1)} for a in range(0, n, STRETCH)]
    size = sum(p.stat().st_size for p in (db, Path(f"{db}-wal")) if p.exists())
    growth = None
    if n >= EARLY[1] + LATE:
        early, late = (float(np.percentile(ms[a:b], 50)) for a, b in ((EARLY[0] - 1, EARLY[1]), (n - LATE, n)))
        growth = {"early": list(EARLY), "late": [n - LATE + 1, n], "early_p50_ms": round(early, 1),
                  "late_p50_ms": round(late, 1), "ratio": round(late / max(early, 1e-9), 2)}
    context = asked.context or ""
    return {"config": {"messages": n, "stretch": STRETCH, "window": window, "data": str(path)},
            "append_ms": [round(float(x), 2) for x in ms], "stretches": stretches, "growth": growth, "store_bytes": size,
            "early_fact_found": "4721" in context, "context": context}


def one_session_markdown(r: dict[str, Any]) -> str:
    """The run as a Markdown table (append p50 / p95 per stretch) and the lines after it."""
    lines = ["| messages | append p50 ms | append p95 ms |", "|---|---:|---:|"]
    lines += [f"| {s['first']:,}–{s['last']:,} | {s['p50_ms']:.1f} | {s['p95_ms']:.1f} |" for s in r["stretches"]]
    first, last = r["stretches"][0], r["stretches"][-1]
    lines += ["", f"Last stretch ÷ first, p50: {last['p50_ms'] / max(first['p50_ms'], 1e-9):.2f}×. "
              f"Store: {r['store_bytes'] / 2**20:.1f} MiB. The first message's fact in the last append's context "
              f"(window {r['config']['window']}): {'yes' if r['early_fact_found'] else 'no'}."]
    g = r.get("growth")
    if g is not None:
        lines += ["", f"Append p50 at messages {g['late'][0]:,}–{g['late'][1]:,}: {g['late_p50_ms']:.1f} ms; at "
                  f"{g['early'][0]:,}–{g['early'][1]:,}: {g['early_p50_ms']:.1f} ms; ratio **{g['ratio']:.2f}×**."]
    return "\n".join(lines) + "\n"
