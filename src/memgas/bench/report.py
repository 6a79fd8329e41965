"""Write a benchmark run's outputs: ``results.json``, ``report.md`` and ``recall_at_k.png``."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from memgas.bench.metrics import newest_first
from memgas.bench.runner import BenchResult, summarize, timing_summary, versions

__all__ = ["markdown_table", "write_outputs", "HEADLINE", "llm_usage_lines", "command_line", "project_metrics",
           "UPDATE_TYPES", "context_tables"]

#: The columns of the main table, per dataset.
HEADLINE: dict[str, list[str]] = {
    "longmemeval": [
        "session_recall_any@5", "session_recall_all@5", "session_ndcg_any@5",
        "session_recall_all@10", "session_ndcg_any@10",
        "turn_recall_any@5", "turn_recall_all@10", "turn_ndcg_any@10", "turn_recall_all@50",
    ],
    "locomo": [
        "session_locomo_recall@1", "session_locomo_recall@3", "session_locomo_recall@5",
        "session_recall_all@5", "session_ndcg_any@5",
        "turn_locomo_recall@5", "turn_locomo_recall@10", "turn_recall_all@10", "turn_ndcg_any@10",
    ],
    "beam": ["turn_msg_recall@5", "turn_msg_recall@10", "turn_msg_recall@20", "turn_recall_any@10",
             "session_recall_all@3"],
}
#: The metric shown in the per-question-type breakdown.
BREAKDOWN = {"longmemeval": "session_recall_all@5", "locomo": "turn_locomo_recall@10", "beam": "turn_msg_recall@10"}


def _short(metric: str) -> str:
    return metric.replace("session_", "S ").replace("turn_", "T ").replace("locomo_recall", "lrecall")


def command_line(fallback: str = "memgas bench") -> str:
    """The command as typed, for reports (``fallback`` when not run as ``memgas bench ...``)."""
    return "memgas " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv[1:2] == ["bench"] else fallback


def llm_usage_lines(label: str, rows: Mapping[str, Mapping[str, float]]) -> list[str]:
    """A Markdown table of LLM use per message: ``rows`` maps a row name to summed
    :class:`memgas.llm.base.Usage` counters plus ``messages``."""
    lines = [f"| {label} | messages | LLM calls | from cache | failures | prompt tokens | completion tokens "
             "| seconds |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, u in rows.items():
        n = max(u["messages"], 1.0)
        lines.append(f"| {name} | {int(u['messages'])} | {u.get('calls', 0) / n:.2f} | {u.get('cached', 0) / n:.2f} "
                     f"| {u.get('failures', 0) / n:.3f} | {u.get('prompt_tokens', 0) / n:.0f} "
                     f"| {u.get('completion_tokens', 0) / n:.0f} | {u.get('seconds', 0) / n:.1f} |")
    return lines


#: The question types whose evidence is an old and a newer state of one thing (LongMemEval's updates).
UPDATE_TYPES = ("knowledge-update",)


def project_metrics(result: BenchResult) -> dict[str, dict[str, float]]:
    """The project's own measures beside the official ones, per method, each with its question count (``..._n``):

    * ``newest_first``: the share of update questions with two or more dated evidence sessions whose newest evidence
      session ranks above the older ones (:func:`memgas.bench.metrics.newest_first`); ``newest_first_present``
      the same over those that ask about the present, and ``oldest_first_past`` the share of those that ask about
      an earlier state whose oldest evidence session ranks above the newer ones (the split is
      :func:`memgas.kernels.tense.asks_about_the_past`, which the runner records per question);
    * ``multi_session_recall_all@5``: session recall_all@5 of the questions whose evidence spans two or more sessions;
    * ``two_speaker_recall_all@5`` and ``one_speaker_recall_all@5``: the same over questions whose evidence turns
      were said by both speakers, or by one (LoCoMo, where the runner records ``gold_speakers``).

    A measure with no question to average over is left out (empty without any)."""
    groups = {
        "multi_session_recall_all@5": [q for q in result.questions if q.get("n_gold_sessions", 0) >= 2],
        "two_speaker_recall_all@5": [q for q in result.questions if q.get("gold_speakers", 0) >= 2],
        "one_speaker_recall_all@5": [q for q in result.questions if q.get("gold_speakers", 0) == 1],
    }
    updates = [q for q in result.questions if q["type"] in UPDATE_TYPES and len(q.get("gold_by_time", ())) >= 2]
    methods = list(result.questions[0]["methods"]) if result.questions else []
    out: dict[str, dict[str, float]] = {m: {} for m in methods}
    present = [q for q in updates if not q.get("asks_about_the_past", False)]
    past = [q for q in updates if q.get("asks_about_the_past", False)]
    orders = {"newest_first": (updates, False), "newest_first_present": (present, False),
              "oldest_first_past": (past, True)}
    for m in methods:
        for name, (rows, oldest) in orders.items():
            if rows:  # the oldest first is the newest first of the sessions listed newest to oldest
                out[m][name] = sum(newest_first(q["methods"][m]["sessions"],
                                                q["gold_by_time"][::-1] if oldest else q["gold_by_time"])
                                   for q in rows) / len(rows)
                out[m][f"{name}_n"] = float(len(rows))
        for name, rows in groups.items():
            values = [q["methods"][m]["metrics"]["session_recall_all@5"] for q in rows
                      if "session_recall_all@5" in q["methods"][m]["metrics"]]
            if values:
                out[m][name], out[m][f"{name}_n"] = sum(values) / len(values), float(len(values))
    return {m: v for m, v in out.items() if v}


#: How :func:`markdown_table` names each project measure.
_PROJECT_LABELS = {"newest_first": "newest first (update questions, 2+ dated evidence sessions)",
                   "newest_first_present": "newest first, questions about the present",
                   "oldest_first_past": "oldest first, questions about an earlier state",
                   "multi_session_recall_all@5": "S recall_all@5, evidence in 2+ sessions",
                   "two_speaker_recall_all@5": "S recall_all@5, evidence from both speakers",
                   "one_speaker_recall_all@5": "S recall_all@5, evidence from one speaker"}


def markdown_table(result: BenchResult) -> str:
    """The methods × metrics table (best value per column in bold), a per-type table and timings."""
    means = summarize(result)
    methods = list(means)
    # a column whose cut-off was not run (--k) is left out rather than shown as 0
    cols = [c for c in HEADLINE[result.dataset] if all(c in means[m] for m in methods)]
    lines = [f"### {result.dataset}: {len(result.questions)} questions", ""]
    lines.append("| method | " + " | ".join(_short(c) for c in cols) + " |")
    lines.append("|---|" + "---:|" * len(cols))
    best = {c: max(means[m][c] for m in methods) for c in cols}
    for m in methods:
        cells = []
        for c in cols:
            v = means[m][c]
            cells.append(f"**{v:.3f}**" if abs(v - best[c]) < 1e-12 else f"{v:.3f}")
        lines.append(f"| {m} | " + " | ".join(cells) + " |")

    metric = BREAKDOWN[result.dataset]
    types = sorted({q["type"] for q in result.questions})
    lines += ["", f"Per question type, {_short(metric)} (n = questions):", ""]
    lines.append("| method | " + " | ".join(f"{t} (n={sum(q['type'] == t for q in result.questions)})"
                                             for t in types) + " |")
    lines.append("|---|" + "---:|" * len(types))
    for m in methods:
        cells = []
        for t in types:
            vals = [q["methods"][m]["metrics"][metric] for q in result.questions if q["type"] == t]
            cells.append(f"{sum(vals) / len(vals):.3f}" if vals else "-")
        lines.append(f"| {m} | " + " | ".join(cells) + " |")

    project = project_metrics(result)
    if project:
        first = next(iter(project.values()))
        names = [k for k in _PROJECT_LABELS if k in first]
        lines += ["", "Project measures (not official; the newest-first rate is the share of update questions whose "
                  "newest evidence session ranks above the older ones, the oldest-first rate the share of those "
                  "asking about an earlier state whose oldest evidence session leads):", "",
                  "| method | " + " | ".join(f"{_PROJECT_LABELS[k]} (n={int(first[f'{k}_n'])})" for k in names) + " |",
                  "|---|" + "---:|" * len(names)]
        lines += [f"| {m} | " + " | ".join(f"{v[k]:.3f}" for k in names) + " |" for m, v in project.items()]
    lines += context_tables(result)
    timing = timing_summary(result)
    ing = timing.pop("ingest", {})
    qe = timing.pop("query_embedding", {})
    reused = int(timing.pop("ingest_reused", {}).get("stores", 0))
    if ing:
        lines += ["", "Timing (2 CPU cores): ingest is shared (MemGAS units + association) and took "
                  f"{ing.get('total_s', 0.0):.2f} s per haystack on average (units {ing.get('units_s', 0.0):.2f} s, "
                  f"association {ing.get('associate_s', 0.0):.2f} s, write {ing.get('write_s', 0.0):.2f} s; "
                  "embeddings already in the cache are not recomputed)"
                  + (f", {ing['s_per_100k_tokens']:.1f} s per 100K tokens (4 characters a token)"
                     if "s_per_100k_tokens" in ing else "")
                  + (f"; {reused} more stores were reused from an earlier run (--stores)." if reused else "."), ""]
    else:
        lines += ["", f"Timing (2 CPU cores): all {reused} stores were reused from an earlier run (--stores); "
                  "ingest time is reported by the run that built them.", ""]
    stream = timing.pop("ingest [stream]", {})
    if stream:
        lines += [f"Stream ingest (one exchange at a time, the append path): {stream.get('total_s', 0.0):.2f} s per "
                  f"haystack on average, {int(stream.get('appends', 0))} appends in all, "
                  f"{stream.get('append_p50_ms', 0.0):.1f} ms per append (p50), "
                  f"{stream.get('append_p95_ms', 0.0):.1f} ms (p95).", ""]
    lines.append(f"Embedding a query takes {qe.get('p50_ms', 0.0):.1f} ms (p50), {qe.get('p95_ms', 0.0):.1f} ms (p95), "
                 "done once per question; the query columns below are each method's search alone.")
    lines.append("")
    ctx = any("context_p50_ms" in t for t in timing.values())
    lines.append("| method | index build (s / haystack) | query p50 (ms) | query p95 (ms) |"
                 + (" context p50 (ms) | context p95 (ms) |" if ctx else ""))
    lines.append("|---|---:|---:|---:|" + ("---:|---:|" if ctx else ""))
    for m, t in timing.items():
        lines.append(f"| {m} | {t['index_s']:.3f} | {t['query_p50_ms']:.1f} | {t['query_p95_ms']:.1f} |"
                     + (f" {t.get('context_p50_ms', 0.0):.1f} | {t.get('context_p95_ms', 0.0):.1f} |" if ctx else ""))
    lines += _one_user_lines(result, timing)
    if result.llm_usage:
        lines += ["", "LLM use while building each method's index, per haystack message (calls answered from the "
                  "response cache cost no tokens or seconds):", ""]
        lines += llm_usage_lines("method", result.llm_usage)
    if result.skipped:
        lines += ["", "Skipped (as in the official scoring): "
                  + ", ".join(f"{n} {reason}" for reason, n in sorted(result.skipped.items()))]
    for note in result.notes:
        lines.append(f"Note: {note}")
    return "\n".join(lines) + "\n"


def _one_user_lines(result: BenchResult, timing: dict[str, dict[str, float]]) -> list[str]:
    """For a run whose every conversation was one user's memory (``bench beam --one-user``): how ingest moved as
    the memory grew, the store's bytes, the process's peak memory, and each method's context ÷ search."""
    if not result.config.get("single_user"):
        return []
    lines = ["", f"One user who said everything: peak resident memory of the run {result.config.get('peak_rss_mb', 0):,.0f} "
             "MiB."]
    for user, v in result.config.get("ingest_by_group", {}).items():
        rates = ", ".join(f"{r:.1f}" for r in v.get("s_per_100k_by_tenth", []))
        size = v.get("store_bytes")
        lines.append(f"{user}: {v['tokens']:,.0f} tokens ingested in {v['seconds']:.0f} s; seconds per 100K tokens in "
                     f"each tenth of the memory, in ingest order: {rates}"
                     + (f"; store {size / 2**20:,.1f} MiB" if size else "") + ".")
    lines += ["", "| method | search p50 / p95 (ms) | context p50 / p95 (ms, one budget) | context ÷ search p50 / p95 |",
              "|---|---:|---:|---:|"]
    for m, t in timing.items():
        if "context_p50_ms" in t and t["query_p50_ms"]:
            lines.append(f"| {m} | {t['query_p50_ms']:.1f} / {t['query_p95_ms']:.1f} | {t['context_p50_ms']:.1f} / "
                         f"{t['context_p95_ms']:.1f} | {t['context_p50_ms'] / t['query_p50_ms']:.1f}× / "
                         f"{t['context_p95_ms'] / t['query_p95_ms']:.1f}× |")
    return lines


def _present_mean(questions: list[dict[str, Any]], method: str, metric: str) -> tuple[float, int] | None:
    """The mean of ``metric`` over the questions that have it for ``method``, with their count (``None``: none)."""
    vals = [q["methods"][method]["metrics"][metric] for q in questions if metric in q["methods"][method]["metrics"]]
    return (sum(vals) / len(vals), len(vals)) if vals else None


def _scale_timing(result: BenchResult, methods: list[str], scales: list[str]) -> list[str]:
    """Per BEAM scale: ingest seconds per 100K tokens (conversations ingested by this run) and each method's search
    and context milliseconds (p50 / p95; the context column is the time of all the question's budgets)."""
    lines = ["", "Per scale (ingest by this run; search and contexts per question, p50 / p95 ms):", "",
             "| scale | ingest s / 100K tokens | " + " | ".join(f"{m} search | {m} contexts" for m in methods) + " |",
             "|---|---:|" + "---:|---:|" * len(methods)]
    ingested = result.config.get("ingest_by_group", {})
    for sc in scales:
        own = [v for k, v in ingested.items() if k.split("-")[1] == sc]
        rate = f"{sum(v['seconds'] for v in own) / sum(v['tokens'] for v in own) * 1e5:.1f}" if own else \
            "one user (below)" if result.config.get("single_user") else "reused"
        qs = [q for q in result.questions if str(q["conv"]).split("-")[1] == sc]
        cells = []
        for m in methods:
            for part in ("query", "contexts"):
                ms = [q["ms"][m][part] for q in qs if part in q.get("ms", {}).get(m, {})]
                cells.append(f"{np.percentile(ms, 50):.0f} / {np.percentile(ms, 95):.0f}" if ms else "-")
        lines.append(f"| {sc} | {rate} | " + " | ".join(cells) + " |")
    return lines


def context_tables(result: BenchResult) -> list[str]:
    """Markdown lines of the context measures (:mod:`memgas.bench.context`), when the run took them: per budget, the
    share of gold messages in the context by question type and over all (per scale for BEAM), then the share with
    at least one, and "current first" in the context and in the ranking where questions name updated evidence."""
    budgets = (result.config.get("contexts") or {}).get("budgets", [])
    if not budgets or not result.questions:
        return []
    methods = list(result.questions[0]["methods"])
    types = sorted({q["type"] for q in result.questions})
    groups: list[tuple[str, list[dict[str, Any]]]] = [("all", result.questions)]
    scales = sorted({str(q["conv"]).split("-")[1] for q in result.questions}) if result.dataset == "beam" else []
    if len(scales) > 1:
        groups += [(sc, [q for q in result.questions if str(q["conv"]).split("-")[1] == sc]) for sc in scales]
    groups += [(t, [q for q in result.questions if q["type"] == t]) for t in types]
    lines: list[str] = []
    for budget in budgets:
        for measure, label in (("recall", "share of gold messages in the context"),
                               ("any", "share of questions with at least one gold message in the context")):
            metric = f"ctx{budget}_{measure}"
            lines += ["", f"Context at {budget} tokens, {label} (n = questions):", "",
                      "| method | " + " | ".join(f"{g} (n={len(qs)})" for g, qs in groups) + " |",
                      "|---|" + "---:|" * len(groups)]
            for m in methods:
                cells = [_present_mean(qs, m, metric) for _, qs in groups]
                lines.append(f"| {m} | " + " | ".join("-" if c is None else f"{c[0]:.3f}" for c in cells) + " |")
    sides = [f"ctx{b}_recall_{side}" for b in budgets for side in ("speaker_a", "speaker_b")]
    by_side = {m: [_present_mean(result.questions, m, c) for c in sides] for m in methods}
    if any(v is not None for r in by_side.values() for v in r):
        lines += ["", "Context, share of gold messages in the context by who said them (LoCoMo's speaker_a, stored as "
                  "the user, and speaker_b; n = questions with such evidence):", "",
                  "| method | " + " | ".join(f"{s.removeprefix('recall_')} at {b}" for b in budgets
                                           for s in ("recall_speaker_a", "recall_speaker_b")) + " |",
                  "|---|" + "---:|" * len(sides)]
        for m, r in by_side.items():
            lines.append(f"| {m} | " + " | ".join("-" if c is None else f"{c[0]:.3f} (n={c[1]})" for c in r) + " |")
    if len(scales) > 1:
        lines += _scale_timing(result, methods, scales)
    first = [f"ctx{b}_current_first" for b in budgets] + ["turn_current_first"]
    rows = {m: [_present_mean(result.questions, m, c) for c in first] for m in methods}
    if any(v is not None for r in rows.values() for v in r):
        lines += ["", "Current first (updated evidence shown, above the original), over the questions that name both:",
                  "", "| method | " + " | ".join(f"in the context at {b}" for b in budgets) + " | in the ranking |",
                  "|---|" + "---:|" * len(first)]
        for m, r in rows.items():
            lines.append(f"| {m} | " + " | ".join("-" if c is None else f"{c[0]:.3f} (n={c[1]})" for c in r) + " |")
    return lines


def _plot(result: BenchResult, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    means = summarize(result)
    ks = result.config["ks"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for ax, kind in zip(axes, ("recall_all", "recall_any")):
        for i, (m, vals) in enumerate(means.items()):
            style = {"color": "black", "linewidth": 2.5} if m == "memgas" else {"color": plt.cm.tab20(i % 20)}
            ax.plot(ks, [vals.get(f"session_{kind}@{k}", 0.0) for k in ks], marker="o", label=m, **style)
        ax.set_xscale("log")
        ax.set_xticks(ks)
        ax.set_xticklabels([str(k) for k in ks])
        ax.set_xlabel("k (sessions)")
        ax.set_title(f"{result.dataset}: session {kind}@k")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("mean over questions")
    axes[1].legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_outputs(result: BenchResult, out_dir: Path, command: str) -> dict[str, Path]:
    """Write the three output files into ``out_dir`` and return their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    table = markdown_table(result)
    paths = {"results": out_dir / "results.json", "report": out_dir / "report.md", "plot": out_dir / "recall_at_k.png"}
    payload: dict[str, Any] = {
        "command": command,
        "config": result.config,
        "versions": versions(),
        "skipped": result.skipped,
        "notes": result.notes,
        "summary": summarize(result),
        "project": project_metrics(result),
        "timing": timing_summary(result),
        "llm_usage": result.llm_usage,
        "questions": result.questions,
    }
    paths["results"].write_text(json.dumps(payload, indent=1, default=str), encoding="utf-8")
    paths["report"].write_text(f"# memgas bench: {result.dataset}\n\nCommand: `{command}`\n\n{table}", encoding="utf-8")
    _plot(result, paths["plot"])
    return paths
