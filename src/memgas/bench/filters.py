"""What a filter costs a search: ``memgas bench filters``.

One user holds ``n_sessions`` distinct LongMemEval-S sessions, each with ``metadata={"bucket": i % 10}`` by its
position in time order (so a bucket is a tenth of the sessions, spread over the whole history). Every query is
searched unfiltered, with a filter keeping 10% (``{"bucket": 0}``) and one keeping 50%
(``{"bucket": {"$lt": 5}}``), in rotating order so the three share the machine's state; all warm (the index
built). Then, for each of ``n_adds`` held-back sessions (a third of a file too small for both): the session is added, a
filtered search runs at once
(the index and the header catalogue are brought up to date by it) and the same search again (warm). Ratios are
of p50s measured in this one run.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from memgas.bench.cost import distinct_sessions
from memgas.memory import Memory

__all__ = ["run_filters", "filters_markdown", "FILTERS"]

#: The filters measured, by the share of sessions they keep.
FILTERS: dict[str, dict[str, Any] | None] = {"none": None, "10%": {"bucket": 0}, "50%": {"bucket": {"$lt": 5}}}
_USER = "filters"


def _message_dicts(session: Any) -> list[dict[str, Any]]:
    return [m.to_dict() for m in session.messages]


def run_filters(path: Path, *, n_sessions: int = 2000, n_queries: int = 60, n_adds: int = 30, k: int = 10,
                method: str = "memgas", embedding_cache: str | Path | None = None,
                progress: Any = None) -> dict[str, Any]:
    """Measure filtered against unfiltered search (see the module docstring); milliseconds per search."""
    sessions, questions = distinct_sessions(path, n_sessions + n_adds, user_id=_USER)
    held_back = min(n_adds, max(len(sessions) - n_sessions, len(sessions) // 3))  # a small file: a third
    stored, held = sessions[:len(sessions) - held_back], sessions[len(sessions) - held_back:]
    queries = (questions * (n_queries // max(len(questions), 1) + 1))[:n_queries]
    with Memory(None, method=method, embedding_cache=embedding_cache) as mem:
        batch = [{"session_id": s.session_id, "timestamp": s.timestamp, "metadata": {"bucket": i % 10},
                  "messages": _message_dicts(s)} for i, s in enumerate(stored)]
        for start in range(0, len(batch), 100):
            mem.add_many(batch[start:start + 100], user_id=_USER)
            if progress is not None:
                progress(min(start + 100, len(batch)), len(batch))
        names = list(FILTERS)
        for name in names:  # warm: the index and the header catalogue built
            mem.search(queries[0], user_id=_USER, k=k, filters=FILTERS[name])
        times: dict[str, list[float]] = {name: [] for name in names}
        ranking: dict[str, list[float]] = {name: [] for name in names}
        counts: dict[str, list[int]] = {name: [] for name in names}
        for i, query in enumerate(queries):
            for name in names[i % 3:] + names[:i % 3]:
                text = f"{query} ({i} {name})"  # a new text: the search embeds it, as a user's call does
                t0 = time.perf_counter()
                hits = mem.search(text, user_id=_USER, k=k, filters=FILTERS[name])
                times[name].append((time.perf_counter() - t0) * 1000)
                t0 = time.perf_counter()  # the same text again: its vector is remembered, the rest is ranking
                mem.search(text, user_id=_USER, k=k, filters=FILTERS[name])
                ranking[name].append((time.perf_counter() - t0) * 1000)
                counts[name].append(len(hits))
        after_add: list[float] = []
        warm_again: list[float] = []
        for j, s in enumerate(held):
            mem.add(_message_dicts(s), user_id=_USER, session_id=s.session_id, timestamp=s.timestamp,
                    metadata={"bucket": (n_sessions + j) % 10})
            for bucket, again in ((after_add, ""), (warm_again, " (again)")):
                t0 = time.perf_counter()
                mem.search(f"{queries[j % len(queries)]} ({j}{again})", user_id=_USER, k=k, filters=FILTERS["10%"])
                bucket.append((time.perf_counter() - t0) * 1000)
    p50 = {name: float(np.percentile(t, 50)) for name, t in times.items()}
    return {
        "sessions": len(stored), "queries": len(queries), "adds": len(held), "k": k, "method": method,
        "p50_ms": p50, "p95_ms": {name: float(np.percentile(t, 95)) for name, t in times.items()},
        "ranking_p50_ms": {name: float(np.percentile(t, 50)) for name, t in ranking.items()},
        "mean_hits": {name: float(np.mean(c)) for name, c in counts.items()},
        "after_add_p50_ms": float(np.percentile(after_add, 50)) if after_add else None,
        "after_add_warm_p50_ms": float(np.percentile(warm_again, 50)) if warm_again else None,
    }


def filters_markdown(r: dict[str, Any]) -> str:
    """The measurements as a Markdown table, with the ratios the goals name."""
    base = r["p50_ms"]["none"]
    lines = [f"### Filtered search: {r['sessions']:,} LongMemEval-S sessions of one user, `{r['method']}`, k = {r['k']}",
             "", "| search | p50 (ms) | p95 (ms) | p50 / unfiltered | ranking only p50 (ms) | ranking only / unfiltered "
             "| hits (mean) |", "|---|---:|---:|---:|---:|---:|---:|"]
    rank_base = r["ranking_p50_ms"]["none"]
    for name in FILTERS:
        label = "unfiltered" if name == "none" else f"filter keeping {name}"
        lines.append(f"| {label} | {r['p50_ms'][name]:.1f} | {r['p95_ms'][name]:.1f} | "
                     f"{r['p50_ms'][name] / base:.2f} | {r['ranking_p50_ms'][name]:.1f} | "
                     f"{r['ranking_p50_ms'][name] / rank_base:.2f} | {r['mean_hits'][name]:.1f} |")
    lines += ["", "A search embeds its query (a new text each time); 'ranking only' repeats the same text, whose "
                  "vector is remembered, so it times the rest: filter, seeds, PageRank, hits."]
    if r["after_add_p50_ms"] is not None:
        ratio = r["after_add_p50_ms"] / r["after_add_warm_p50_ms"]
        lines += ["", f"Filtered (10%) search right after an add (a new text): p50 {r['after_add_p50_ms']:.1f} ms against "
                      f"{r['after_add_warm_p50_ms']:.1f} ms for the same search warm ({ratio:.2f}x), over "
                      f"{r['adds']} adds."]
    return "\n".join(lines) + "\n"
