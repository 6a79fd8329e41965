"""What ``add`` and ``search`` cost, measured on real LongMemEval haystacks.

``add`` is compared with embedding the same text once (the turns' embedding views, plus summary
and keywords, with a fresh embedder and no cache): the overhead of units, association and the
SQLite transaction. ``search`` latency is compared with embedding the query alone. Growth is
measured by adding the sessions of several haystacks to one user, from the first 50 sessions to
the last 50 of ``n_sessions``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from memgas.bench.datasets import load_longmemeval
from memgas.core.types import Session
from memgas.core.validate import make_session
from memgas.embed.base import Embedder
from memgas.embed.factory import get_embedder
from memgas.memory import Memory
from memgas.methods.units import ExtractiveSummarizer, YakeKeyworder, embed_texts, embedding_view

__all__ = ["run_cost", "cost_markdown", "distinct_sessions", "embed_once_seconds"]


def distinct_sessions(path: Path, n_sessions: int, user_id: str = "cost") -> tuple[list[Session], list[str]]:
    """The first ``n_sessions`` distinct sessions of the file's haystacks (deduplicated by session id; fewer when
    the file holds fewer), re-owned by ``user_id`` and in time order, and the questions of the haystacks used."""
    seen: set[str] = set()
    sessions: list[Session] = []
    questions: list[str] = []
    for q in load_longmemeval(path):
        if len(sessions) >= n_sessions:
            break
        questions.append(q.question)
        for s in q.sessions:
            if s.session_id in seen or len(sessions) >= n_sessions:
                continue
            seen.add(s.session_id)
            sessions.append(make_session(
                [{"role": m.role, "content": m.content} for m in s.messages],
                user_id=user_id, session_id=s.session_id, timestamp=s.timestamp,
            ))
    sessions.sort(key=lambda s: (s.timestamp is None, s.timestamp))
    return sessions, questions


def embed_once_seconds(sessions: list[Session], embedder: Embedder) -> float:
    """Seconds to embed what ``add`` embeds (turn views, summary, keywords), once, with ``embedder`` (give one
    without a cache)."""
    summarizer, keyworder = ExtractiveSummarizer(), YakeKeyworder()
    total = 0.0
    for s in sessions:
        views = [embedding_view(t) for t in s.turns]
        t0 = time.perf_counter()
        vectors = embed_texts(embedder, views)
        total += time.perf_counter() - t0
        extra = [summarizer.summarize(s, vectors), ", ".join(keyworder.keywords(s)) or "-"]
        t0 = time.perf_counter()
        embed_texts(embedder, extra)
        total += time.perf_counter() - t0
    return total


def run_cost(path: Path, n_sessions: int = 500, window: int = 50, n_queries: int = 50) -> dict[str, Any]:
    """Measure add and search costs; see the module docstring.

    Returns:
        A dict of the measurements (seconds and milliseconds), ready for :func:`cost_markdown`.
    """
    sessions, questions = distinct_sessions(path, n_sessions)
    first = sessions[:window]
    plain = get_embedder()  # the process's model without a cache, loaded before timing anything
    embed_first = embed_once_seconds(first, plain)

    per_add: list[float] = []
    tokens: list[int] = []
    with Memory(embedding_cache=None) as mem:  # a fresh in-memory cache: every text is embedded here
        counter = mem.embedder
        for s in sessions:
            t0 = time.perf_counter()
            mem.add([{"role": m.role, "content": m.content} for m in s.messages],
                    user_id="cost", session_id=s.session_id, timestamp=s.timestamp)
            per_add.append(time.perf_counter() - t0)
            tokens.append(sum(counter.count_tokens([embedding_view(t) for t in s.turns])))
        last = per_add[-window:]
        embed_last = embed_once_seconds(sessions[-window:], plain)

        queries = (questions * (n_queries // max(len(questions), 1) + 1))[:n_queries]
        search_ms, embed_ms = [], []
        for q in queries:
            t0 = time.perf_counter()
            plain.embed([q])
            embed_ms.append((time.perf_counter() - t0) * 1000)
        mem.search(queries[0], user_id="cost", k=10)  # build the search index once (as after any add)
        for i, q in enumerate(queries):
            t0 = time.perf_counter()
            mem.search(q + f" ({i})", user_id="cost", k=10)  # a new text each time: no query-cache hit
            search_ms.append((time.perf_counter() - t0) * 1000)
        stats = mem.stats("cost")
    return {
        "sessions": len(sessions),
        "window": window,
        "add_first_s": float(sum(per_add[:window])),
        "embed_first_s": embed_first,
        "add_last_s": float(sum(last)),
        "embed_last_s": embed_last,
        "tokens_first": int(sum(tokens[:window])),
        "tokens_last": int(sum(tokens[-window:])),
        "add_total_s": float(sum(per_add)),
        "search_p50_ms": float(np.percentile(search_ms, 50)),
        "search_p95_ms": float(np.percentile(search_ms, 95)),
        "query_embed_p50_ms": float(np.percentile(embed_ms, 50)),
        "query_embed_p95_ms": float(np.percentile(embed_ms, 95)),
        "units": stats["units"],
        "edges": stats["edges"],
    }


def cost_markdown(r: dict[str, Any]) -> str:
    """The measurements as a Markdown table."""
    w = r["window"]
    rows = [
        ("add, first sessions", r["add_first_s"], r["embed_first_s"], r["tokens_first"]),
        ("add, last sessions", r["add_last_s"], r["embed_last_s"], r["tokens_last"]),
    ]
    lines = [f"### add and search cost: {r['sessions']} LongMemEval-S sessions, one user", "",
             f"| {w} sessions | add (s) | embed the same text once (s) | ratio | embedded word pieces |",
             "|---|---:|---:|---:|---:|"]
    for name, add, emb, tok in rows:
        lines.append(f"| {name} | {add:.2f} | {emb:.2f} | {add / emb:.2f} | {tok:,} |")
    lines += [
        "",
        f"All {r['sessions']} sessions: {r['add_total_s']:.1f} s to add; {sum(r['units'].values()):,} units, "
        f"{r['edges']:,} edges.",
        "",
        "| search (k = 10) | p50 (ms) | p95 (ms) |",
        "|---|---:|---:|",
        f"| embed the query alone | {r['query_embed_p50_ms']:.1f} | {r['query_embed_p95_ms']:.1f} |",
        f"| `Memory.search` (embedding included) | {r['search_p50_ms']:.1f} | {r['search_p95_ms']:.1f} |",
    ]
    return "\n".join(lines) + "\n"
