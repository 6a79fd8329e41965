"""``memgas bench principles``: PRINCIPLES on the shipped scenario set (:mod:`memgas.experience.scenarios`).

1. **Learning**: ``dialogues`` training seeds (round-robin over domains and families) are role-played,
   judged and learned from; per dialogue: contrasts (failed turns with a successful retry), principles
   extracted, duplicates dropped, extractions left pending, LLM calls.
2. **Retrieval** (no LLM): every held-out seed's opening message is matched against the situations of
   (a) the learned principles (labelled with the family of the seed they came from) and (b) the
   hand-written reference principles (two per family); precision@1, hit@k and precision@2 (two relevant
   principles per family in the reference set).
3. **Sweeps** (no LLM) for the defaults: ``min_similarity`` (held-out coverage and precision@1 against
   off-topic contexts that should get nothing) and ``dedup_threshold`` (same-family vs cross-family pairs
   of reference situations that a threshold would merge).
4. **With vs without principles**: ``heldout`` held-out seeds, one assistant turn each, judged by the
   critic (first try, no retry), without principles and with the top-``k`` rewritten principles of the
   learned set and of the reference set.
"""

from __future__ import annotations

import itertools
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from memgas.core.errors import LLMError
from memgas.embed.base import Embedder
from memgas.experience.bank import ExperienceBank
from memgas.experience.principles import Principle, Principles, Scenario
from memgas.experience.scenarios import ScenarioSet, load_scenarios
from memgas.llm.base import track_usage
from memgas.llm.wrapper import LLM
from memgas.store import open_store

__all__ = ["run_principles", "principles_markdown", "OFF_TOPIC"]

#: Contexts no principle should answer (for the ``min_similarity`` sweep).
OFF_TOPIC = ("What's the weather in Lisbon tomorrow?", "Convert 3 miles to kilometres.",
             "Write a Python function that reverses a list.", "Who won the 1998 World Cup?",
             "How many teaspoons are in a tablespoon?", "Summarise the plot of Hamlet.")
SIMILARITY_GRID = (0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4)
DEDUP_GRID = (0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95)


def spread(seeds: Sequence[Scenario], n: int) -> list[Scenario]:
    """``n`` seeds taken round-robin over domains, and within a domain over families (file order)."""
    by_domain: dict[str, dict[str, list[Scenario]]] = {}
    for s in seeds:
        by_domain.setdefault(s.domain, {}).setdefault(s.family, []).append(s)
    per_domain = [[s for group in itertools.zip_longest(*families.values()) for s in group if s is not None]
                  for families in by_domain.values()]
    ordered = [s for group in itertools.zip_longest(*per_domain) for s in group if s is not None]
    return ordered[:n]


def _retrieval(principles: Principles, family_of: Callable[[Principle], str], tests: Sequence[Scenario],
               k: int) -> dict[str, Any]:
    """Precision@1, hit@k and precision@2 of the held-out openings against the bank (no threshold)."""
    rows = []
    for s in tests:
        ranked = [family_of(p) for p, _ in principles.recall(s.opening, k=max(k, 2))]
        rows.append((s, ranked))
    present = {family_of(p) for p in principles.list()}
    covered = [(s, r) for s, r in rows if s.family in present]

    def score(subset: list[tuple[Scenario, list[str]]]) -> dict[str, Any]:
        n = len(subset)
        if not n:
            return {"n": 0}
        return {"n": n, "p_at_1": sum(r[:1] == [s.family] for s, r in subset) / n,
                f"hit_at_{k}": sum(s.family in r[:k] for s, r in subset) / n,
                "p_at_2": sum(r[:2].count(s.family) for s, r in subset) / (2 * n)}

    return {"principles": len(principles.list()), "families": len(present), "all": score(rows),
            "covered": score(covered)}


def _similarity_sweep(principles: Principles, family_of: Callable[[Principle], str],
                      tests: Sequence[Scenario]) -> list[dict[str, Any]]:
    """Per ``min_similarity``: held-out coverage, precision@1 of what is returned, off-topic false alarms."""
    best = [(s.family, principles.recall(s.opening, k=1)) for s in tests]
    noise = [principles.recall(text, k=1) for text in OFF_TOPIC]
    rows = []
    for t in SIMILARITY_GRID:
        returned = [(fam, hits[0]) for fam, hits in best if hits and hits[0][1] >= t]
        rows.append({"min_similarity": t, "coverage": len(returned) / len(best),
                     "p_at_1_returned": (sum(family_of(p) == fam for fam, (p, _) in returned) / len(returned)
                                         if returned else None),
                     "off_topic_answered": sum(bool(h) and h[0][1] >= t for h in noise) / len(noise)})
    return rows


def _dedup_sweep(embedder: Embedder, scenarios: ScenarioSet) -> list[dict[str, Any]]:
    """Per ``dedup_threshold``: reference pairs of one family (paraphrases) and of two families it would merge."""
    refs = scenarios.references
    vectors = embedder.embed([r.situation for r in refs])
    sims = vectors @ vectors.T
    same: list[float] = []
    cross: list[float] = []
    for i, j in itertools.combinations(range(len(refs)), 2):
        (same if refs[i].family == refs[j].family else cross).append(float(sims[i, j]))
    return [{"dedup_threshold": t, "same_family_merged": f"{sum(s >= t for s in same)}/{len(same)}",
             "cross_family_merged": f"{sum(s >= t for s in cross)}/{len(cross)}"} for t in DEDUP_GRID] + \
        [{"max_cross_family_cosine": round(max(cross), 4), "max_same_family_cosine": round(max(same), 4)}]


def _one_turn(principles: Principles, scenario: Scenario, use: bool, k: int) -> dict[str, Any]:
    """One judged assistant turn (first try) with or without principles; ``None`` verdict when a call failed."""
    with track_usage() as usage:
        try:
            dialogue = principles.simulate(scenario, use_principles=use, k=k, turns=1)
            helped: bool | None = dialogue.judgements[0].helped
            guidance = len(dialogue.guidance)
        except LLMError:
            helped, guidance = None, 0
    return {"scenario": scenario.id, "helped": helped, "guidance": guidance, "calls": usage.calls + usage.cached}


def run_principles(llm: LLM, embedder: Embedder, db: Path, *, dialogues: int = 6, heldout: int = 6, k: int = 2,
                   progress: bool = True) -> dict[str, Any]:
    """Run the four parts (see the module notes) on a fresh SQLite file ``db``; return JSON-ready results."""
    scenarios = load_scenarios()
    db.unlink(missing_ok=True)
    store = open_store(db)
    learned = Principles(ExperienceBank(store, embedder, "agent:bench-learned"), llm)
    reference = Principles(ExperienceBank(store, embedder, "agent:bench-reference"), llm, dedup_threshold=1.0)
    for r in scenarios.references:
        reference.add(r.situation, r.action, r.avoid, r.reason, origin={"family": r.family, "domain": r.domain})
    family_of: Callable[[Principle], str] = lambda p: str(p.origin.get("family", ""))

    rows = []
    t0 = time.perf_counter()
    for i, seed in enumerate(spread(scenarios.split("train"), dialogues), 1):
        with track_usage() as usage:
            try:
                dialogue = learned.simulate(seed)
                result = learned.learn_from_dialogue(dialogue)
                row = {"scenario": seed.id, "success": dialogue.success, **result.to_dict()}
            except LLMError as e:
                row = {"scenario": seed.id, "error": str(e)[:200]}
        row.update(calls=usage.calls, cached=usage.cached, seconds=round(usage.seconds, 1))
        rows.append(row)
        if progress:
            print(f"[learn {i}/{dialogues}] {row}", flush=True)

    tests = scenarios.split("test")
    wide = lambda p: Principles(p.bank, llm, min_similarity=-1.0, dedup_threshold=p.dedup_threshold)
    retrieval = {"learned": _retrieval(wide(learned), family_of, tests, k),
                 "reference": _retrieval(wide(reference), family_of, tests, k)}
    sweeps = {"min_similarity": _similarity_sweep(wide(reference), family_of, tests),
              "dedup": _dedup_sweep(embedder, scenarios)}

    evaluated = spread(tests, heldout)
    conditions: dict[str, list[dict[str, Any]]] = {}
    for name, bank, use in (("without", learned, False), ("with learned", learned, True),
                            ("with reference", reference, True)):
        judge = Principles(bank.bank, llm, max_retries=0, min_similarity=bank.min_similarity)
        conditions[name] = [_one_turn(judge, s, use, k) for s in evaluated]
        if progress:
            print(f"[{name}] {conditions[name]}", flush=True)
    store.close()
    ok = [r for r in rows if "error" not in r]
    return {
        "model": llm.id, "dialogues": len(rows), "failed_dialogues": len(rows) - len(ok), "k": k,
        "learning": {"rows": rows,
                     "contrasts": sum(r["contrasts"] for r in ok), "extracted": sum(len(r["added"]) for r in ok),
                     "duplicates": sum(r["duplicates"] for r in ok), "pending": sum(len(r["pending"]) for r in ok),
                     "first_try_success": float(np.mean([r["success"] for r in ok])) if ok else None},
        "retrieval": retrieval, "sweeps": sweeps,
        "with_without": {name: {"n": sum(r["helped"] is not None for r in rs),
                                "helped": sum(bool(r["helped"]) for r in rs),
                                "mean_guidance": float(np.mean([r["guidance"] for r in rs])), "rows": rs}
                         for name, rs in conditions.items()},
        "wall_seconds": round(time.perf_counter() - t0, 1),
    }


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.0f}%"


def principles_markdown(result: dict[str, Any]) -> str:
    """The report's tables."""
    learn = result["learning"]
    n = max(1, result["dialogues"] - result["failed_dialogues"])
    k = result["k"]
    lines = [f"Model: `{result['model']}`; {result['dialogues']} dialogues ({result['failed_dialogues']} failed); "
             f"wall {result['wall_seconds']} s.", "",
             "| learning | per dialogue | total |", "|---|---|---|"]
    for label, key in (("contrasts (failed turn, successful retry)", "contrasts"), ("principles extracted", "extracted"),
                       ("duplicates dropped", "duplicates"), ("extractions pending", "pending")):
        lines.append(f"| {label} | {learn[key] / n:.2f} | {learn[key]} |")
    lines.append(f"| first-try success (critic) | {_pct(learn['first_try_success'])} | |")
    lines += ["", f"| retrieval on held-out openings | principles | families | P@1 | hit@{k} | P@2 | P@1 (covered families) |",
              "|---|---|---|---|---|---|---|"]
    for name, r in result["retrieval"].items():
        a, c = r["all"], r["covered"]
        lines.append(f"| {name} | {r['principles']} | {r['families']} | {_pct(a.get('p_at_1'))} | "
                     f"{_pct(a.get(f'hit_at_{k}'))} | {_pct(a.get('p_at_2'))} | {_pct(c.get('p_at_1'))} (n={c['n']}) |")
    lines += ["", "| min_similarity | held-out covered | P@1 of returned | off-topic answered |", "|---|---|---|---|"]
    for r in result["sweeps"]["min_similarity"]:
        lines.append(f"| {r['min_similarity']} | {_pct(r['coverage'])} | {_pct(r['p_at_1_returned'])} | "
                     f"{_pct(r['off_topic_answered'])} |")
    *dedup, extremes = result["sweeps"]["dedup"]
    lines += ["", "| dedup_threshold | same-family pairs merged | cross-family pairs merged |", "|---|---|---|"]
    lines += [f"| {r['dedup_threshold']} | {r['same_family_merged']} | {r['cross_family_merged']} |" for r in dedup]
    lines += [f"(highest cross-family cosine {extremes['max_cross_family_cosine']}, "
              f"highest same-family {extremes['max_same_family_cosine']})", "",
              "| one judged turn per held-out seed | helped (critic) | guidance lines per turn |", "|---|---|---|"]
    for name, r in result["with_without"].items():
        lines.append(f"| {name} | {r['helped']}/{r['n']} | {r['mean_guidance']:.1f} |")
    return "\n".join(lines)
