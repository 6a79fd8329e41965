"""``memgas bench bot``: Buffer of Thoughts on generated task families checked exactly by code.

For each family of :mod:`memgas.bench.tasks`, ``train`` problems and ``test`` disjoint problems
(seeded). The buffer learns from the training problems' reference solutions (written by code, so the
templates come from correct solutions), the families interleaved as a stream. Each test problem is then
answered twice by the same model:

* *no buffer*: the plain solving prompt;
* *with buffer*: the distiller, retrieval of the nearest template by the distilled description, and the
  template instantiated when its cosine is at least ``retrieve_threshold`` (else the plain prompt's answer).

Reported: accuracy of both (the checker of the family), template-retrieval precision@1 (the nearest
template was learned from a problem of the test problem's family), the buffer size after learning
``N`` training problems, and sweeps of both thresholds from the same calls (the with-template answer is
computed for every test problem, so any retrieve threshold's accuracy follows; dedup is replayed over the
written templates' descriptions). Every LLM call goes through the response cache: a rerun costs none.
"""

from __future__ import annotations

import sys
import time
from typing import Any, Sequence

import numpy as np

from memgas.bench.tasks import Problem, check, split
from memgas.core.errors import LLMError
from memgas.embed.base import Embedder
from memgas.experience.facade import Experience
from memgas.llm.base import track_usage
from memgas.llm.wrapper import LLM

__all__ = ["DEFAULT_FAMILIES", "RETRIEVE_SWEEP", "DEDUP_SWEEP", "run_bot", "bot_markdown"]

DEFAULT_FAMILIES = ("game24", "word_sort", "arithmetic", "date")
RETRIEVE_SWEEP = (0.3, 0.4, 0.5, 0.6, 0.7)
DEDUP_SWEEP = (0.7, 0.75, 0.8, 0.85, 0.9, 0.95)


def _interleave(groups: Sequence[Sequence[Problem]]) -> list[Problem]:
    """Round-robin over the families, as problems of mixed kinds reach an agent."""
    return [p for row in zip(*groups) for p in row]


def _replay_dedup(vectors: np.ndarray, threshold: float) -> list[int]:
    """The indexes of templates kept when added in order and dropped at cosine ``>= threshold`` with a kept one."""
    kept: list[int] = []
    for i, v in enumerate(vectors):
        if not kept or float(np.max(vectors[kept] @ v)) < threshold:
            kept.append(i)
    return kept


def _attempt(problem: Problem, call: Any) -> tuple[bool, str | None]:
    """Whether the answer ``call()`` gives is right (a failed call is wrong), and the answer."""
    try:
        answer = call()["answer"]
    except LLMError:
        return False, None
    return check(problem, answer), answer


def run_bot(llm: LLM, embedder: Embedder | str | None = None, *, families: Sequence[str] = DEFAULT_FAMILIES,
            train: int = 5, test: int = 8, seed: int = 0, retrieve_threshold: float | None = None,
            dedup_threshold: float | None = None, progress: bool = True) -> dict[str, Any]:
    """Run the benchmark (see the module notes) in an in-memory store; return the results as JSON-ready data."""
    options = {name: value for name, value in (("retrieve_threshold", retrieve_threshold),
                                               ("dedup_threshold", dedup_threshold)) if value is not None}
    splits = {f: split(f, train, test, seed) for f in families}
    t0 = time.perf_counter()
    with Experience(":memory:", agent_id="bench", embedder=embedder, llm=llm, templates=options) as exp, \
            track_usage() as usage:
        bot = exp.templates
        learned, family_of = [], {}
        for i, p in enumerate(_interleave([splits[f][0] for f in families]), 1):
            result = bot.learn(p.text, p.solution, answer=p.answer)
            template = result.get("template", {})
            learned.append({"family": p.family, **{k: v for k, v in result.items() if k != "template"},
                            "description": template.get("description"), "scrubbed": template.get("scrubbed", [])})
            if result["status"] == "added":
                family_of[result["id"]] = p.family
            _tick(progress, f"learn {i}")
        rows = []
        for i, p in enumerate(_interleave([splits[f][1] for f in families]), 1):
            row: dict[str, Any] = {"family": p.family, "problem": p.text}
            row["plain_ok"], row["plain_answer"] = _attempt(p, lambda: bot.answer(p.text))
            try:
                distilled = bot.distill(p.text)
            except LLMError:
                distilled = None
            best = bot.match(distilled["description"], 1, -1.0) if distilled else []
            row["top1_family"] = family_of.get(best[0][0]["id"]) if best else None
            row["top1_score"] = best[0][1] if best else None
            row["template_ok"], row["template_answer"] = (
                _attempt(p, lambda: bot.answer(p.text, best[0][0], distilled)) if best else (row["plain_ok"], None))
            rows.append(row)
            _tick(progress, f"test {i}")
        described = [x for x in learned if x["description"]]
        vectors = bot.bank.embed([x["description"] for x in described]) if described else np.zeros((0, 1), np.float32)
        settings = {"retrieve_threshold": bot.retrieve_threshold, "dedup_threshold": bot.dedup_threshold}
        buffer_size = len(bot.list("template"))
        pending = len(bot.list("pending"))
    if progress:
        print(file=sys.stderr)
    return {
        "model": llm.id, "families": list(families), "train_per_family": train, "test_per_family": test,
        "seed": seed, **settings, "learned": learned, "buffer_size": buffer_size, "pending": pending,
        "buffer_families": sorted(set(family_of.values())), "rows": rows,
        "summary": _summary(rows, families, settings["retrieve_threshold"]),
        "retrieve_sweep": [_at(rows, t) for t in RETRIEVE_SWEEP],
        "dedup_sweep": [_dedup_at(described, vectors, t) for t in DEDUP_SWEEP],
        "llm": usage.to_dict(), "seconds": round(time.perf_counter() - t0, 1),
    }


def _dedup_at(described: list[dict[str, Any]], vectors: np.ndarray, threshold: float) -> dict[str, Any]:
    """The buffer that dedup at ``threshold`` keeps of the written templates: its size and families covered."""
    kept = _replay_dedup(vectors, threshold)
    return {"dedup_threshold": threshold, "buffer_size": len(kept),
            "families": len({described[i]["family"] for i in kept})}


def _tick(progress: bool, label: str) -> None:
    if progress:
        print(f"\rbench bot: {label}   ", end="", file=sys.stderr, flush=True)


def _at(rows: list[dict[str, Any]], threshold: float) -> dict[str, Any]:
    """Coverage, precision@1 among used templates and accuracy when templates at or above ``threshold`` are used."""
    used = [r for r in rows if r["top1_score"] is not None and r["top1_score"] >= threshold]
    right = [r for r in used if r["top1_family"] == r["family"]]
    chosen = {id(r) for r in used}
    ok = sum(r["template_ok"] if id(r) in chosen else r["plain_ok"] for r in rows)
    return {"retrieve_threshold": threshold, "used": len(used), "precision_used": _share(len(right), len(used)),
            "accuracy": _share(ok, len(rows))}


def _share(n: int, d: int) -> float | None:
    return round(n / d, 3) if d else None


def _summary(rows: list[dict[str, Any]], families: Sequence[str], threshold: float) -> list[dict[str, Any]]:
    """Per family and overall: accuracy without and with the buffer, precision@1, templates used."""
    out = []
    for name in [*families, "all"]:
        group = [r for r in rows if name in ("all", r["family"])]
        at = _at(group, threshold)
        out.append({"family": name, "test": len(group), "accuracy_plain": _share(sum(r["plain_ok"] for r in group),
                                                                              len(group)),
                    "accuracy_buffer": at["accuracy"], "used": at["used"],
                    "precision_at_1": _share(sum(r["top1_family"] == r["family"] for r in group), len(group))})
    return out


def bot_markdown(result: dict[str, Any]) -> str:
    """The tables of a :func:`run_bot` result."""
    n_train = result["train_per_family"] * len(result["families"])
    lines = [f"Model: `{result['model']}`; {result['train_per_family']} training and {result['test_per_family']} test "
             f"problems per family (seed {result['seed']}); retrieve_threshold {result['retrieve_threshold']}, "
             f"dedup_threshold {result['dedup_threshold']}; {result['llm']['calls']} LLM calls "
             f"({result['llm']['cached']} from cache), {result['seconds']} s.", "",
             f"Buffer after learning {n_train} training problems: **{result['buffer_size']} templates** "
             f"({result['pending']} pending), from families {', '.join(result['buffer_families']) or 'none'}; "
             f"{sum(bool(x['scrubbed']) for x in result['learned'])} of {len(result['learned'])} written templates "
             "still held source values after the retry and were scrubbed.", "",
             "| family | test | accuracy, no buffer | accuracy, with buffer | templates used | retrieval P@1 |",
             "|---|---:|---:|---:|---:|---:|"]
    for s in result["summary"]:
        lines.append(f"| {s['family']} | {s['test']} | {_pct(s['accuracy_plain'])} | {_pct(s['accuracy_buffer'])} "
                     f"| {s['used']} | {_pct(s['precision_at_1'])} |")
    lines += ["", "| retrieve_threshold | templates used | P@1 of used | accuracy |", "|---:|---:|---:|---:|"]
    lines += [f"| {r['retrieve_threshold']} | {r['used']} | {_pct(r['precision_used'])} | {_pct(r['accuracy'])} |"
              for r in result["retrieve_sweep"]]
    lines += ["", "| dedup_threshold | " + " | ".join(str(d["dedup_threshold"]) for d in result["dedup_sweep"]) + " |",
              "|---|" + "---:|" * len(result["dedup_sweep"]),
              "| buffer size | " + " | ".join(str(d["buffer_size"]) for d in result["dedup_sweep"]) + " |",
              "| families in it | " + " | ".join(str(d["families"]) for d in result["dedup_sweep"]) + " |"]
    return "\n".join(lines)


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.0f}%"
