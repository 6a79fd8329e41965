"""Live conversations in the benchmarks (``memgas bench locomo|longmemeval --ingest stream|both``).

*Stream ingest* (:func:`stream_ingest`): each session is fed one exchange (turn: a user message and the
replies to it) at a time, as an agent's conversation grows: the first exchange adds the session, every
later one rewrites it (:meth:`~memgas.methods.base.MemoryMethod.rewrite`, what ``Memory.append`` runs). The
questions are asked at the end, so a stream run and a whole-session run of the same data compare the two
ways memory is built.

*Append cost* (:func:`append_costs`): sessions of a given number of exchanges, made from the data's own
turns, beside ``history_sessions`` other sessions of the same user (the data's last ones), then single-exchange
appends through :meth:`Memory.append <memgas.memory.Memory.append>` on a fresh in-memory store and embedding
cache: the median append, the embedding model's own time within it (the new messages' turn, the session's new
summary and keywords: what missed the cache), and a search right after an append beside the same search again
(warm).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import replace
from typing import Any, Sequence

from memgas.core.errors import InvalidInputError
from memgas.core.types import Session
from memgas.embed.base import Embedder
from memgas.methods.base import MemoryMethod
from memgas.store import Store

__all__ = ["stream_ingest", "append_costs", "stream_markdown"]


def stream_ingest(method: MemoryMethod, store: Store, session: Session) -> tuple[dict[str, float], list[float]]:
    """Add ``session`` one exchange at a time; return the summed stage seconds and each append's seconds."""
    parts: dict[str, float] = {}
    seconds: list[float] = []
    ends = [turn.msg_end for turn in session.turns]
    start = 0
    for end in ends:
        part = replace(session, messages=session.messages[:end])
        t0 = time.perf_counter()
        stats = method.ingest(store, part) if start == 0 else method.rewrite(store, part, keep_messages=start, append=True)
        seconds.append(time.perf_counter() - t0)
        for name, sec in stats.seconds.items():
            parts[name] = parts.get(name, 0.0) + sec
        start = end
    return parts, seconds


def _exchanges(sessions: Sequence[Session]) -> list[list[dict[str, str]]]:
    """Every turn of ``sessions`` that starts with a user message, as messages ``Memory.append`` takes."""
    out = []
    for session in sessions:
        for turn in session.turns:
            if turn.messages and turn.messages[0].role == "user":
                out.append([{"role": m.role, "content": m.content} for m in turn.messages])
    return out


def append_costs(sessions: Sequence[Session], embedder: Embedder, *, lengths: Sequence[int] = (10, 200),
                 appends: int = 20, history_sessions: int = 20) -> dict[str, Any]:
    """The cost of appending one exchange to sessions of ``lengths`` exchanges (see the module docstring).

    Raises:
        InvalidInputError: the data holds fewer exchanges than the longest session and its appends need, or
            ``appends`` is below 1.
    """
    from memgas.memory import Memory

    if appends < 1:
        raise InvalidInputError("append costs need at least one append per length")
    pool = _exchanges(sessions)
    need = max(lengths) + appends + 1
    if len(pool) < need:
        raise InvalidInputError(f"append costs need {need} exchanges of data, found {len(pool)}")
    inner = getattr(embedder, "inner", embedder)
    history = [s for s in sessions[-history_sessions:]] if history_sessions else []
    out: dict[str, Any] = {}
    for n in lengths:
        with Memory(embedder=inner) as mem:  # a fresh in-memory cache: new messages are embedded for real
            cached = mem.embedder  # the model's own seconds are counted there (CachedEmbedder.seconds)
            for i, s in enumerate(history):
                mem.add([{"role": m.role, "content": m.content} for m in s.messages], user_id="u",
                        session_id=f"history-{i}", timestamp=s.timestamp)
            mem.append([m for exchange in pool[:n] for m in exchange], user_id="u", session_id="live")
            query = pool[-1][0]["content"][:500]
            mem.search(query, user_id="u")
            append_s, embed_s, after_s, warm_s = [], [], [], []
            for exchange in pool[n:n + appends]:
                model = getattr(cached, "seconds", 0.0)
                t0 = time.perf_counter()
                mem.append(exchange, user_id="u", session_id="live")
                append_s.append(time.perf_counter() - t0)
                embed_s.append(getattr(cached, "seconds", 0.0) - model)  # the model's share of this append
                t0 = time.perf_counter()
                mem.search(query, user_id="u")
                after_s.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                mem.search(query, user_id="u")
                warm_s.append(time.perf_counter() - t0)
        out[str(n)] = {"append_ms": 1000 * statistics.median(append_s), "embed_ms": 1000 * statistics.median(embed_s),
                       "search_after_append_ms": 1000 * statistics.median(after_s),
                       "warm_search_ms": 1000 * statistics.median(warm_s), "appends": appends,
                       "history_sessions": len(history)}
    return out


def stream_markdown(costs: dict[str, Any]) -> str:
    """The append-cost table, with the ratios the goals are stated in."""
    lines = ["| exchanges in the session | append (ms, p50) | the model's time in it (ms) | append / model | "
             "search after an append (ms) | warm search (ms) | after / warm |", "|---:|---:|---:|---:|---:|---:|---:|"]
    for n, c in costs.items():
        lines.append(f"| {n} | {c['append_ms']:.1f} | {c['embed_ms']:.1f} | {c['append_ms'] / c['embed_ms']:.2f} | "
                     f"{c['search_after_append_ms']:.1f} | {c['warm_search_ms']:.1f} | "
                     f"{c['search_after_append_ms'] / c['warm_search_ms']:.2f} |")
    sizes = list(costs)
    if len(sizes) >= 2:
        lines.append("")
        lines.append(f"Append at {sizes[-1]} exchanges / at {sizes[0]}: "
                     f"{costs[sizes[-1]]['append_ms'] / costs[sizes[0]]['append_ms']:.2f}")
    return "\n".join(lines)
