"""What the framework adapters add to a direct call, and AsyncMemory's throughput: ``memgas bench adapters``.

One store holds ``n_sessions`` distinct LongMemEval-S sessions of one user (and, for LangGraph, the same sessions'
user text put as items of a second user through ``MemgasStore.put``). For each adapter whose framework is installed,
its retrieval call and
the direct ``Memory`` call it makes are timed alternately, each with a new query text (so both embed their query),
and their p50s compared: the overhead is what the adapter's mapping, its framework's machinery and (for async
adapters) the event loop and worker thread cost. Async adapter calls run on one event loop kept for the run.
Then ``AsyncMemory`` from ``tasks`` concurrent tasks on one event loop is set against ``Memory`` from as many
threads, the same searches each way: searches per second.
"""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

import numpy as np

from memgas.async_memory import AsyncMemory
from memgas.bench.cost import distinct_sessions
from memgas.memory import Memory

__all__ = ["run_adapters", "adapters_markdown"]

_USER, _ITEMS_USER, K = "adapters", "graph-items", 4


def _pairs(mem: Memory, loop: asyncio.AbstractEventLoop) -> tuple[dict[str, tuple[Callable[[str], Any],
                                                                                   Callable[[str], Any]]], list[str]]:
    """Per adapter: (its call, the direct call it makes), each taking a query text; and the frameworks missing."""
    pairs: dict[str, tuple[Callable[[str], Any], Callable[[str], Any]]] = {}
    missing = []
    search = lambda q: mem.search(q, user_id=_USER, k=K)
    try:
        from memgas.integrations.langchain import MemgasRetriever

        retriever = MemgasRetriever(memory=mem, user_id=_USER, k=K)
        pairs["LangChain MemgasRetriever.invoke"] = (retriever.invoke, search)
    except ImportError:
        missing.append("langchain-core")
    try:
        from memgas.integrations.langgraph import MemgasStore

        store = MemgasStore(mem)
        pairs["LangGraph MemgasStore.search"] = (lambda q: store.search((_ITEMS_USER,), query=q, limit=K),
                                                 lambda q: mem.search(q, user_id=_ITEMS_USER, k=K))
    except ImportError:
        missing.append("langgraph")
    try:
        from llama_index.core.llms import ChatMessage

        from memgas.integrations.llamaindex import MemgasMemoryBlock

        block = MemgasMemoryBlock(memory=mem, user_id=_USER, session_id="chat", k=K)
        pairs["LlamaIndex MemgasMemoryBlock.aget"] = (
            lambda q: loop.run_until_complete(block._aget([ChatMessage(role="user", content=q)])),
            lambda q: mem.context(q, user_id=_USER, k=K, max_tokens=block.max_tokens, exclude_sessions=["chat"]))
    except ImportError:
        missing.append("llama-index-core")
    try:
        from memgas.integrations.autogen import MemgasMemory

        memory = MemgasMemory(mem, user_id=_USER, k=K)
        pairs["AutoGen MemgasMemory.query"] = (lambda q: loop.run_until_complete(memory.query(q)), search)
    except ImportError:
        missing.append("autogen-core")
    try:
        from memgas.integrations.openai_agents import MemgasSession

        session = MemgasSession("chat", mem, user_id=_USER)
        pairs["OpenAI Agents MemgasSession.get_items"] = (lambda q: loop.run_until_complete(session.get_items()),
                                                          lambda q: mem.get("chat", user_id=_USER))
    except ImportError:
        missing.append("openai-agents")
    return pairs, missing


def run_adapters(path: Path, *, n_sessions: int = 200, n_calls: int = 40, tasks: int = 8, per_task: int = 10,
                 embedding_cache: str | Path | None = None) -> dict[str, Any]:
    """Measure adapter overheads and AsyncMemory throughput (see the module docstring); milliseconds per call."""
    sessions, questions = distinct_sessions(path, n_sessions, user_id=_USER)
    queries = (questions * (n_calls // max(len(questions), 1) + 1))[:max(n_calls, tasks * per_task)]
    loop = asyncio.new_event_loop()
    with Memory(None, embedding_cache=embedding_cache) as mem:
        mem.add_many([{"session_id": s.session_id, "timestamp": s.timestamp,
                       "messages": [m.to_dict() for m in s.messages]} for s in sessions], user_id=_USER)
        items = [("\n".join(t.user_text for t in s.turns).strip() or s.text)[:4000] for s in sessions]
        try:
            from memgas.integrations.langgraph import MemgasStore

            graph_store = MemgasStore(mem)
            for s, text in zip(sessions, items):  # LangGraph's items, put as a graph would
                graph_store.put((_ITEMS_USER, "memories"), s.session_id, {"text": text})
        except ImportError:
            pass  # not measured: _pairs names it
        mem.append([{"role": "user", "content": "Hello again."}], user_id=_USER, session_id="chat")
        pairs, missing = _pairs(mem, loop)
        rows = {}
        for name, (adapter, direct) in pairs.items():
            adapter(queries[0])  # warm: the index built, the framework's first-call work done
            direct(queries[0])
            a_ms: list[float] = []
            d_ms: list[float] = []
            for i, q in enumerate(queries[:n_calls]):
                order = ((adapter, a_ms), (direct, d_ms)) if i % 2 else ((direct, d_ms), (adapter, a_ms))
                for fn, out in order:
                    t0 = time.perf_counter()
                    fn(f"{q} ({i} {len(out)} {fn is adapter})")
                    out.append((time.perf_counter() - t0) * 1000)
            rows[name] = {"adapter_p50_ms": float(np.percentile(a_ms, 50)),
                          "direct_p50_ms": float(np.percentile(d_ms, 50))}
        work = [f"{q} [{i}]" for i, q in enumerate(queries[:tasks * per_task])]
        async_memory = AsyncMemory(mem)

        async def concurrently(texts: list[str]) -> None:
            async def task(part: list[str]) -> None:
                for text in part:
                    await async_memory.search(text, user_id=_USER, k=K)
            await asyncio.gather(*(task(texts[t::tasks]) for t in range(tasks)))

        def threaded(texts: list[str]) -> None:
            with ThreadPoolExecutor(tasks) as pool:
                list(pool.map(lambda part: [mem.search(text, user_id=_USER, k=K) for text in part],
                              [texts[t::tasks] for t in range(tasks)]))

        rates: dict[str, list[float]] = {"async": [], "threads": []}
        for rnd in range(3):  # alternating, each over new texts
            for kind in (("async", "threads") if rnd % 2 == 0 else ("threads", "async")):
                texts = [f"{w} ({rnd} {kind})" for w in work]
                t0 = time.perf_counter()
                loop.run_until_complete(concurrently(texts)) if kind == "async" else threaded(texts)
                rates[kind].append(len(texts) / (time.perf_counter() - t0))
    loop.close()
    return {"sessions": len(sessions), "calls": n_calls, "k": K, "adapters": rows, "missing": missing,
            "tasks": tasks, "searches": tasks * per_task,
            "async_per_s": float(np.median(rates["async"])), "threads_per_s": float(np.median(rates["threads"]))}


def adapters_markdown(r: dict[str, Any]) -> str:
    """The measurements as Markdown tables."""
    lines = [f"### Adapters: {r['sessions']} LongMemEval-S sessions of one user, {r['calls']} calls each, k = {r['k']}",
             "", "| adapter call | p50 (ms) | direct `Memory` call p50 (ms) | overhead (ms) | ratio |",
             "|---|---:|---:|---:|---:|"]
    for name, row in r["adapters"].items():
        a, d = row["adapter_p50_ms"], row["direct_p50_ms"]
        lines.append(f"| {name} | {a:.2f} | {d:.2f} | {a - d:+.2f} | {a / d:.2f} |")
    if r["missing"]:
        lines += ["", f"Not installed, not measured: {', '.join(r['missing'])}."]
    lines += ["", f"`AsyncMemory` from {r['tasks']} tasks on one event loop: {r['async_per_s']:.1f} searches/s; "
                  f"`Memory` from {r['tasks']} threads: {r['threads_per_s']:.1f} searches/s "
                  f"({r['async_per_s'] / r['threads_per_s']:.2f}x; {r['searches']} searches each way, median of 3 "
                  "alternating rounds)."]
    return "\n".join(lines) + "\n"
