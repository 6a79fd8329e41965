"""Question answering on LongMemEval and LoCoMo: QA metrics and the ``bench --qa`` runner.

Metrics (pure functions, hand-checkable):

* :func:`exact_match` and :func:`token_f1` on SQuAD-normalised answers (lower case, punctuation and
  the articles a/an/the removed, whitespace collapsed; Rajpurkar et al., 2016, ``evaluate-v2.0.py``);
* :func:`bleu`: sentence BLEU-n (Papineni et al., 2002) with uniform weights, brevity penalty and
  Chen & Cherry's (2014) smoothing 1 (an n-gram order with no match counts ``epsilon`` matches), as
  ``nltk.translate.bleu_score.sentence_bleu(..., smoothing_function=SmoothingFunction().method1)``;
* :func:`rouge_l`: the F1 of the longest common token subsequence (Lin, 2004), as ``rouge-score``;
* judge accuracy: the LongMemEval yes/no judge (:func:`memgas.bench.judge.judge_answer`);
* optional BERTScore F1 (Zhang et al., 2020) through the ``bert-score`` package, if installed.

BLEU and ROUGE-L read lower-cased tokens without punctuation (articles kept).

Systems compared per question, all answered by the same model with the same answer prompt:
``memgas`` (MemGAS top-k sessions' best turns, the LLM redundancy filter, then the answer),
``memgas-nofilter`` (the same without the filter), ``topk-sessions`` (the whole text of the top-k
sessions by dense session retrieval) and ``full-history`` (every session, oldest dropped first until
it fits the model's window). Any other method of :data:`memgas.methods.METHODS` is a system too: one that
keeps its own memory (:class:`memgas.methods.qa_memory.MemoryFromMethod`: ``full-history``, ``recursum``,
``comedy``) answers from it, any other from the whole text of its top-k sessions; each builds its memory
from the same store after ingestion (the LLM use of that build is reported per system).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import string
import sys
import time
from collections import Counter
from datetime import datetime
from importlib import metadata
from pathlib import Path
from typing import Any, Sequence

from tqdm import tqdm

from memgas.answer import Answer, answer_question
from memgas.bench.datasets import BenchQuestion, load_locomo, load_longmemeval
from memgas.bench.judge import judge_answer
from memgas.bench.metrics import aggregate
from memgas.bench.runner import BenchResult, summarize, versions
from memgas.core.errors import InvalidInputError, LLMError, MissingDependencyError
from memgas.core.types import items_from_hits, items_from_sessions
from memgas.embed.base import Embedder
from memgas.llm.base import Usage, track_usage
from memgas.llm.wrapper import LLM
from memgas.methods import METHODS, NEEDS_LLM, MemGAS, MemoryMethod, get_method
from memgas.methods.llm_units import LLMUnitWriter
from memgas.methods.qa_memory import MemoryFromMethod
from memgas.store import open_store

__all__ = [
    "QA_SYSTEMS",
    "normalize_answer",
    "exact_match",
    "token_f1",
    "bleu",
    "rouge_l",
    "qa_scores",
    "bertscore_f1",
    "run_qa",
    "qa_markdown",
    "write_qa_outputs",
    "cmd_qa",
]

#: The QA systems run by default, in report order (any method name is a system too, see the module notes).
QA_SYSTEMS: tuple[str, ...] = ("memgas", "memgas-nofilter", "topk-sessions", "full-history")
#: The systems answered here rather than by a method of their name.
_BUILTIN = ("memgas", "memgas-nofilter", "topk-sessions")

_PUNCT = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


# ----------------------------------------------------------------------------- metrics


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lower case, punctuation removed, articles removed, whitespace collapsed."""
    text = "".join(ch for ch in str(text).lower() if ch not in _PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


def _words(text: str) -> list[str]:
    """Lower-cased tokens without punctuation, articles kept (for BLEU and ROUGE-L)."""
    return "".join(" " if ch in _PUNCT else ch for ch in str(text).lower()).split()


def exact_match(prediction: str, gold: str) -> float:
    """1.0 when the normalised answers are equal, else 0.0."""
    return float(normalize_answer(prediction) == normalize_answer(gold))


def token_f1(prediction: str, gold: str) -> float:
    """SQuAD token F1 of the normalised answers (when either is empty: 1.0 if both are, else 0.0)."""
    pred, ref = normalize_answer(prediction).split(), normalize_answer(gold).split()
    if not pred or not ref:
        return float(pred == ref)
    same = sum((Counter(pred) & Counter(ref)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(ref)
    return 2 * precision * recall / (precision + recall)


def bleu(prediction: str, reference: str, max_n: int = 4, epsilon: float = 0.1) -> float:
    """Sentence BLEU-``max_n`` with smoothing 1 (see the module notes); 0.0 when no unigram matches.

    ``BLEU = BP * exp(mean_n log p_n)``, ``p_n`` the clipped n-gram precision (``epsilon`` matches
    when none), ``BP = exp(1 - |ref| / |hyp|)`` when the prediction is shorter than the reference.
    """
    if max_n < 1:
        raise InvalidInputError("bleu needs max_n >= 1")
    hyp, ref = _words(prediction), _words(reference)
    if not hyp or not ref:
        return float(hyp == ref)
    log_p = 0.0
    for n in range(1, max_n + 1):
        h = Counter(tuple(hyp[i : i + n]) for i in range(len(hyp) - n + 1))
        r = Counter(tuple(ref[i : i + n]) for i in range(len(ref) - n + 1))
        match = sum((h & r).values())
        if n == 1 and match == 0:
            return 0.0
        log_p += math.log((match or epsilon) / max(sum(h.values()), 1)) / max_n
    brevity = 1.0 if len(hyp) > len(ref) else math.exp(1 - len(ref) / len(hyp))
    return brevity * math.exp(log_p)


def rouge_l(prediction: str, reference: str) -> float:
    """ROUGE-L F1: ``2PR / (P + R)`` with ``P = LCS / |hyp|`` and ``R = LCS / |ref|`` over tokens."""
    hyp, ref = _words(prediction), _words(reference)
    if not hyp or not ref:
        return float(hyp == ref)
    row = [0] * (len(ref) + 1)  # one DP row of LCS lengths
    for h in hyp:
        prev_diag = 0
        for j, r in enumerate(ref, start=1):
            prev_diag, row[j] = row[j], prev_diag + 1 if h == r else max(row[j], row[j - 1])
    lcs = row[-1]
    if lcs == 0:
        return 0.0
    precision, recall = lcs / len(hyp), lcs / len(ref)
    return 2 * precision * recall / (precision + recall)


def qa_scores(prediction: str, gold: str) -> dict[str, float]:
    """Every string metric of one prediction: ``em``, ``f1``, ``bleu1``, ``bleu4``, ``rougeL``."""
    return {"em": exact_match(prediction, gold), "f1": token_f1(prediction, gold), "bleu1": bleu(prediction, gold, 1),
            "bleu4": bleu(prediction, gold, 4), "rougeL": rouge_l(prediction, gold)}


def bertscore_f1(predictions: Sequence[str], references: Sequence[str]) -> list[float]:
    """BERTScore F1 per pair with ``bert-score``'s English default model (it must be in the local cache).

    Raises:
        MissingDependencyError: ``bert-score`` is not installed.
    """
    try:
        from bert_score import score
    except ImportError as e:
        raise MissingDependencyError(f"BERTScore needs the bert-score package: pip install bert-score ({e})") from e
    _, _, f1 = score(list(predictions), list(references), lang="en", verbose=False)
    return [float(x) for x in f1]


# ----------------------------------------------------------------------------- runner


def _groups(dataset: str, path: Path, limit: int | None, max_questions: int | None,
            skipped: dict[str, int]) -> list[tuple[str, list[Any], list[BenchQuestion]]]:
    """(user id, sessions, questions) per haystack; LoCoMo adversarial questions (category 5) are skipped."""
    groups = []
    if dataset == "longmemeval":
        for q in load_longmemeval(path, limit=limit):
            groups.append((q.sessions[0].user_id, q.sessions, [q]))
    else:
        convs, _ = load_locomo(path, limit=limit)
        for c in convs:
            qs = [q for q in c.questions if q.qtype != "adversarial"]
            skipped["adversarial"] = skipped.get("adversarial", 0) + len(c.questions) - len(qs)
            groups.append((c.sessions[0].user_id, c.sessions, qs))
    if max_questions is not None:
        out, left = [], max_questions
        for user, sessions, qs in groups:
            if left <= 0:
                break
            out.append((user, sessions, qs[:left]))
            left -= len(qs[:left])
        groups = out
    return groups


def run_qa(
    dataset: str,
    path: Path,
    llm: LLM,
    embedder: Embedder,
    *,
    judge: LLM | None = None,
    systems: Sequence[str] = QA_SYSTEMS,
    k: int = 5,
    limit: int | None = None,
    max_questions: int | None = None,
    llm_units: bool = False,
    bertscore: bool = False,
    progress: bool = True,
) -> BenchResult:
    """Answer every question with each system, score the answers, and count the LLM's work.

    Per haystack, sessions are ingested once by MemGAS (with LLM-made summary/keyword units when
    ``llm_units``); each system then answers from the same store. Each question record holds, per
    system, the prediction, the cited and filtered-out sessions, the metrics (``em``, ``f1``,
    ``bleu1``, ``bleu4``, ``rougeL``, ``judge``, optionally ``bertscore``) and the LLM use of the
    answer (``llm``) and of the judge (``judge_llm``).

    Args:
        dataset: ``"longmemeval"`` or ``"locomo"``.
        path: the dataset file.
        llm: the model that writes units (optional), filters and answers.
        embedder: the embedder for retrieval.
        judge: the judge model; default ``llm``.
        systems: names from :data:`QA_SYSTEMS` or :data:`memgas.methods.METHODS`.
        k: sessions retrieved by ``memgas`` and ``topk-sessions``.
        limit: first questions (LongMemEval) or conversations (LoCoMo) of the file.
        max_questions: most questions in all.
        llm_units: ingest with :class:`memgas.methods.llm_units.LLMUnitWriter`.
        bertscore: add BERTScore F1 (needs ``bert-score``).
        progress: show a progress bar.

    Raises:
        InvalidInputError: an unknown system or dataset, or k < 1.
    """
    unknown = [s for s in systems if s not in QA_SYSTEMS and s not in METHODS]
    if unknown or dataset not in ("longmemeval", "locomo") or k < 1:
        raise InvalidInputError(f"unknown QA system(s) {unknown} (choose from {', '.join(QA_SYSTEMS)} or a method "
                                f"name), dataset {dataset!r} or k={k}")
    judge = judge or llm
    skipped: dict[str, int] = {}
    groups = _groups(dataset, path, limit, max_questions, skipped)
    writer = LLMUnitWriter(llm) if llm_units else None
    ingester = MemGAS(embedder, summarizer=writer, keyworder=writer)
    dense = get_method("dense-session", embedder)
    methods: dict[str, MemoryMethod] = {s: get_method(s, embedder, llm=llm if s in NEEDS_LLM else None)
                                        for s in systems if s not in _BUILTIN}
    built: dict[str, Usage] = {s: Usage() for s in methods}
    config = {"dataset": dataset, "data": str(path), "limit": limit, "max_questions": max_questions, "k": k,
              "systems": list(systems), "llm": llm.id, "judge": judge.id, "context_tokens": llm.context_tokens,
              "llm_units": llm_units, "embedder": embedder.id}
    result = BenchResult(dataset, config, skipped=skipped)
    result.timing = {"ingest": {"total_s": [], "sessions": []}}
    ingest_usage = Usage()
    bar = tqdm(total=sum(len(g[2]) for g in groups), desc=f"{dataset} QA", unit="q", disable=not progress,
               file=sys.stderr)
    for user_id, sessions, questions in groups:
        t0 = time.perf_counter()
        store = open_store(None)
        with track_usage() as usage:
            for session in sorted(sessions, key=lambda s: s.timestamp or datetime.min):  # stable: file order on ties
                ingester.ingest(store, session)
        ingest_usage.add(usage)
        result.timing["ingest"]["total_s"].append(time.perf_counter() - t0)
        result.timing["ingest"]["sessions"].append(len(sessions))
        for s, method in methods.items():
            with track_usage() as usage:
                method.prepare(store, user_id)
            built[s].add(usage)
        for q in questions:
            items = {}
            if {"memgas", "memgas-nofilter"} & set(systems):
                items["memgas"] = items_from_hits(ingester.search(store, user_id, q.question, k=k,
                                                                  query_time=q.question_date))
            if "topk-sessions" in systems:
                by_id = {s.session_id: s for s in sessions}
                hits = dense.search(store, user_id, q.question, k=k, query_time=q.question_date)
                items["topk-sessions"] = items_from_sessions(by_id[h.session_id] for h in hits)
            for s, method in methods.items():
                items[s] = _method_items(method, store, user_id, q, k, sessions)
            record: dict[str, Any] = {"qid": q.qid, "type": q.qtype, "conv": q.conv_id, "question": q.question,
                                      "gold": q.answer, "gold_sessions": sorted(q.gold_sessions), "methods": {}}
            for system in systems:
                record["methods"][system] = _answer_and_score(
                    llm, judge, q, system, items, getattr(methods.get(system), "keep_newest", False))
            result.questions.append(record)
            bar.update(1)
        store.close()
    bar.close()
    if bertscore and result.questions:
        pairs = [(r["methods"][s]["prediction"], r["gold"]) for r in result.questions for s in systems]
        scores = iter(bertscore_f1([p for p, _ in pairs], [g for _, g in pairs]))
        for r in result.questions:
            for s in systems:
                r["methods"][s]["metrics"]["bertscore"] = next(scores)
    n_sessions = sum(result.timing["ingest"]["sessions"])
    result.config["ingest_llm"] = {"sessions": n_sessions, "total": ingest_usage.to_dict(),
                                   "units_written": writer.written if writer else 0,
                                   "units_fallbacks": writer.fallbacks if writer else 0}
    result.config["memory_llm"] = {s: u.to_dict() for s, u in built.items() if s in NEEDS_LLM}
    return result


def _method_items(method: MemoryMethod, store: Any, user_id: str, q: BenchQuestion, k: int,
                  sessions: Sequence[Any]) -> list[Any]:
    """What a method system shows the reader: its own memory, or the whole text of its top-k sessions."""
    if isinstance(method, MemoryFromMethod):
        return method.memory_items(store, user_id, q.question, k=k, query_time=q.question_date)
    by_id = {s.session_id: s for s in sessions}
    return items_from_sessions(by_id[h.session_id]
                               for h in method.search(store, user_id, q.question, k=k, query_time=q.question_date))


def _answer_and_score(llm: LLM, judge: LLM, q: BenchQuestion, system: str, items: dict[str, Any],
                      keep_newest: bool) -> dict[str, Any]:
    """One system's answer to one question, its metrics and its LLM use (a failed call answers "")."""
    source = items["memgas"] if system in ("memgas", "memgas-nofilter") else items[system]
    error = None
    try:
        answer = answer_question(llm, q.question, source, question_date=q.question_date,
                                 use_filter=system == "memgas", keep_newest=keep_newest)
    except LLMError as e:
        answer, error = Answer("", [], [], usage=Usage(failures=1)), str(e)
    metrics = qa_scores(answer.answer, q.answer)
    with track_usage() as judged:
        try:
            metrics["judge"] = float(judge_answer(judge, q.question, q.answer, answer.answer, qtype=q.qtype,
                                                  abstention=q.qid.endswith("_abs")))
        except LLMError as e:
            metrics["judge"], error = 0.0, error or f"judge: {e}"
    out = {"prediction": answer.answer, "sources": answer.sources, "removed": answer.removed,
           "shown": [m.session_id for m in answer.memories], "metrics": metrics,
           "llm": answer.usage.to_dict(), "judge_llm": judged.to_dict()}
    if error:
        out["error"] = error
    return out


# ----------------------------------------------------------------------------- report

_COLUMNS = ("judge", "f1", "em", "bleu1", "rougeL", "bertscore")


def qa_markdown(result: BenchResult) -> str:
    """The systems x metrics table, judge accuracy and F1 per question type, and the LLM cost per query."""
    means = summarize(result)
    systems = list(means)
    cols = [c for c in _COLUMNS if any(c in means[s] for s in systems)]
    cfg = result.config
    lines = [f"### {result.dataset} QA: {len(result.questions)} questions, answer model `{cfg['llm']}`, "
             f"judge `{cfg['judge']}`, k = {cfg['k']}", ""]
    lines.append("| system | " + " | ".join(cols) + " |")
    lines.append("|---|" + "---:|" * len(cols))
    for s in systems:
        lines.append(f"| {s} | " + " | ".join(f"{means[s].get(c, 0.0):.3f}" for c in cols) + " |")
    for metric in ("judge", "f1"):
        rows = {s: aggregate([{"type": q["type"], metric: q["methods"][s]["metrics"][metric]}
                              for q in result.questions], by="type") for s in systems}
        types = list(rows[systems[0]]["groups"]) if systems else []
        lines += ["", f"Per question type, {metric} (n = questions):", ""]
        lines.append("| system | " + " | ".join(f"{t} (n={rows[systems[0]]['groups'][t]['n']})" for t in types) + " |")
        lines.append("|---|" + "---:|" * len(types))
        for s in systems:
            lines.append(f"| {s} | " + " | ".join(f"{rows[s]['groups'][t][metric]:.3f}" for t in types) + " |")
    n = max(len(result.questions), 1)
    lines += ["", "LLM use per query (answer, with the filter for memgas; the judge apart):", "",
              "| system | calls | cached | failures | prompt tokens | completion tokens | seconds | judge calls |",
              "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for s in systems:
        tot, judged = Usage(), Usage()
        for q in result.questions:
            tot.add(Usage(**q["methods"][s]["llm"]))
            judged.add(Usage(**q["methods"][s]["judge_llm"]))
        lines.append(f"| {s} | {tot.calls / n:.2f} | {tot.cached / n:.2f} | {tot.failures / n:.2f} | "
                     f"{tot.prompt_tokens / n:.0f} | {tot.completion_tokens / n:.0f} | {tot.seconds / n:.2f} | "
                     f"{(judged.calls + judged.cached) / n:.2f} |")
    ing = cfg.get("ingest_llm", {})
    per = max(ing.get("sessions", 0), 1)
    tot = ing.get("total", {})
    if cfg.get("llm_units"):
        lines.append(f"\nLLM use per add (LLM-made units, {ing.get('sessions', 0)} sessions): "
                     f"{tot.get('calls', 0) / per:.2f} calls, {tot.get('cached', 0) / per:.2f} cached, "
                     f"{tot.get('prompt_tokens', 0) / per:.0f} prompt + {tot.get('completion_tokens', 0) / per:.0f} "
                     f"completion tokens, {tot.get('seconds', 0) / per:.2f} s; "
                     f"{ing.get('units_fallbacks', 0)} sessions fell back to extractive units.")
    else:
        lines.append("\nUnits were extractive (no LLM call per add); pass --llm-units for LLM-made units.")
    for s, use in cfg.get("memory_llm", {}).items():
        lines.append(f"LLM use building the memory of {s} per haystack session: {use['calls'] / per:.2f} calls, "
                     f"{use['cached'] / per:.2f} cached, {use['failures'] / per:.2f} failures, "
                     f"{use['prompt_tokens'] / per:.0f} prompt + {use['completion_tokens'] / per:.0f} completion "
                     f"tokens, {use['seconds'] / per:.2f} s.")
    if result.skipped:
        lines.append("Skipped: " + ", ".join(f"{v} {k}" for k, v in sorted(result.skipped.items())))
    errors = sum("error" in r for q in result.questions for r in q["methods"].values())
    if errors:
        lines.append(f"Failed LLM calls (answer scored as empty): {errors}")
    return "\n".join(lines) + "\n"


def write_qa_outputs(result: BenchResult, out_dir: Path, command: str) -> dict[str, Path]:
    """Write ``qa_results.json`` and ``qa_report.md`` into ``out_dir``; return their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"results": out_dir / "qa_results.json", "report": out_dir / "qa_report.md"}
    vers = versions()
    try:
        vers["llama-cpp-python"] = metadata.version("llama-cpp-python")
    except metadata.PackageNotFoundError:
        vers["llama-cpp-python"] = "absent"
    payload = {"command": command, "config": result.config, "versions": vers, "skipped": result.skipped,
               "summary": summarize(result), "questions": result.questions}
    paths["results"].write_text(json.dumps(payload, indent=1, default=str), encoding="utf-8")
    paths["report"].write_text(f"# memgas bench --qa: {result.dataset}\n\nCommand: `{command}`\n\n"
                               f"{qa_markdown(result)}", encoding="utf-8")
    return paths


# ----------------------------------------------------------------------------- command line


def llm_from_args(args: argparse.Namespace, spec: str | None = None) -> LLM:
    """The model of ``--llm`` (or ``spec``), with the response cache of ``--llm-cache`` unless ``--no-llm-cache``."""
    from memgas.core.paths import default_llm_cache_path
    from memgas.llm.cache import ResponseCache
    from memgas.llm.factory import get_llm

    cache = None if args.no_llm_cache else ResponseCache(args.llm_cache or default_llm_cache_path())
    return get_llm(spec or args.llm, cache=cache)


def cmd_qa(args: argparse.Namespace, path: Path, embedder: Embedder) -> int:
    """Run ``bench --qa`` with the parsed arguments; write the outputs and print the table."""
    from memgas.bench.report import command_line

    if args.max_questions is not None and args.max_questions < 1:
        raise InvalidInputError("--max-questions must be a positive integer")
    llm = llm_from_args(args)
    judge = llm_from_args(args, args.judge_llm) if args.judge_llm else llm
    systems = [s.strip() for s in args.qa_systems.split(",") if s.strip()] if args.qa_systems else list(QA_SYSTEMS)
    result = run_qa(args.dataset, path, llm, embedder, judge=judge, systems=systems, k=args.qa_k, limit=args.limit,
                    max_questions=args.max_questions, llm_units=args.llm_units, bertscore=args.bertscore,
                    progress=not args.no_progress)
    out = args.out or Path("bench-out") / args.dataset
    paths = write_qa_outputs(result, out, command_line())
    print(qa_markdown(result))
    print("wrote " + ", ".join(str(p) for p in paths.values()))
    return 0
