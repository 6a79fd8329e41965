"""How fast an existing store answers: ``search`` and ``context`` p50 / p95, and the ratio of the two; beside them
``timeline`` with the question as its topic (the course of one subject, read from every session's digest).

Anyone can time their own deployment with it (``memgas bench latency --backend <store>``): the questions are the
beginnings of the store's own user messages (a fixed draw, so two runs ask the same), each asked of its own user as
a search (``k`` 5) and as a context (``max_tokens`` 1,000), after one warm-up call per user so that index builds are
not counted. Each question is embedded first and timed on its own (as the benchmark runner does): both calls then
find its vector, and each timing is that call's own work; a second ratio counts the embedding in both, as a caller
who calls either one pays it. Both timings of a question are taken one after the other in one process, so their
ratio holds on shared cores.
"""

from __future__ import annotations

import random
import time
from typing import Any

import numpy as np

from memgas.memory import Memory

__all__ = ["run_latency", "latency_markdown", "questions_of"]


def questions_of(mem: Memory, n: int, seed: int = 0) -> list[tuple[str, str]]:
    """``n`` questions ``(user_id, text)``, round robin over the store's users: each the first twelve words of one
    of that user's messages, drawn at random (``seed``) from its sessions."""
    users = [u.user_id for u in mem.users()]
    draw = random.Random(seed)
    pools: dict[str, list[str]] = {}
    for user in users:
        sessions = [h.session_id for h in mem.list(user_id=user)]
        chosen = draw.sample(sessions, min(len(sessions), max(1, n // max(len(users), 1) + 1)))
        pools[user] = [" ".join(m.content.split()[:12]) for sid in chosen
                       for m in mem.get(sid, user_id=user).messages if m.role == "user" and m.content.strip()]
        draw.shuffle(pools[user])
    out: list[tuple[str, str]] = []
    while len(out) < n and any(pools.values()):
        for user in users:
            if pools[user] and len(out) < n:
                out.append((user, pools[user].pop()))
    return out


def run_latency(mem: Memory, n: int = 20, *, k: int = 5, max_tokens: int = 1000) -> dict[str, Any]:
    """Time ``search`` and ``context`` on ``n`` questions of the store's own (:func:`questions_of`); the result has
    each call's milliseconds, their p50 / p95 and the ratios context ÷ search."""
    questions = questions_of(mem, n)
    for user in dict.fromkeys(u for u, _ in questions):  # warm: each user's index built once, not timed
        mem.context("warm up", user_id=user, k=k, max_tokens=max_tokens)
    embed_ms, search_ms, context_ms, timeline_ms = [], [], [], []
    for user, text in questions:
        t = time.perf_counter()
        mem.method.embed_query(text)
        embed_ms.append(1000 * (time.perf_counter() - t))
        t0 = time.perf_counter()
        mem.search(text, user_id=user, k=k)
        t1 = time.perf_counter()
        mem.context(text, user_id=user, k=k, max_tokens=max_tokens)
        t2 = time.perf_counter()
        mem.timeline(user_id=user, topic=text)
        t3 = time.perf_counter()
        search_ms.append(1000 * (t1 - t0))
        context_ms.append(1000 * (t2 - t1))
        timeline_ms.append(1000 * (t3 - t2))
    out: dict[str, Any] = {"questions": len(questions), "users": len({u for u, _ in questions}), "k": k,
                           "max_tokens": max_tokens, "embed_ms": embed_ms, "search_ms": search_ms,
                           "context_ms": context_ms, "timeline_ms": timeline_ms}
    for name, values in (("embed", embed_ms), ("search", search_ms), ("context", context_ms),
                         ("timeline", timeline_ms)):
        for p in (50, 95):
            out[f"{name}_p{p}_ms"] = float(np.percentile(values, p)) if values else 0.0
    for p in (50, 95):
        out[f"ratio_p{p}"] = out[f"context_p{p}_ms"] / out[f"search_p{p}_ms"] if out[f"search_p{p}_ms"] else 0.0
        # as a caller sees the two calls: each embeds its question first
        searched = np.percentile(np.add(search_ms, embed_ms), p) if search_ms else 0.0
        out[f"ratio_embedded_p{p}"] = float(np.percentile(np.add(context_ms, embed_ms), p) / searched) if searched else 0.0
    return out


def latency_markdown(result: dict[str, Any]) -> str:
    """The result as a Markdown table."""
    return "\n".join([
        f"{result['questions']} questions of {result['users']} users; search k={result['k']}, context "
        f"{result['max_tokens']} tokens; the question's embedding, made once before both: "
        f"{result['embed_p50_ms']:.1f} ms p50",
        "",
        "| | search (ms) | context (ms) | context ÷ search | ÷ with the embedding in both | timeline of the question's "
        "topic (ms) |",
        "|---|---:|---:|---:|---:|---:|",
        *(f"| p{p} | {result[f'search_p{p}_ms']:.1f} | {result[f'context_p{p}_ms']:.1f} | "
          f"{result[f'ratio_p{p}']:.1f}× | {result[f'ratio_embedded_p{p}']:.1f}× | {result[f'timeline_p{p}_ms']:.1f} |"
          for p in (50, 95)),
    ])
