"""Update behaviour of the temporal knowledge graph (``zep``) on LongMemEval's oracle haystacks.

LongMemEval's oracle file holds, per question, only its evidence sessions (1–6), small enough for a
local model. For ``knowledge-update`` questions the evidence is an old value and a later one ("I moved
to London"); the answer is the later one. Each question gets a fresh store; its sessions are added in
time order through :class:`memgas.methods.zep.Zep`; then the question is asked at its own date.

Per question, counted (no LLM judge, so the counts are reproducible from the saved responses):

* ``latest_first``: the first session ranked is the newest evidence session (where the current
  value is said), the one an answer should trust.
* ``answer_in_facts``: every content word of the gold answer appears in the ``k`` best facts valid at
  the question date (a strict lexical check: "Chicago" is found in "user lives in Chicago").
* ``answer_recall``: the share of the answer's content words found there.
* ``old_invalidated``: at least one fact from an older evidence session was closed by a fact from a
  newer one: the old value is marked invalid, not deleted.
* ``gold_recall_all@k``: all evidence sessions among the ``k`` first (sessions ranked by their facts).

Besides these, the graph's own counts (facts, contradictions, duplicates caught with and without an
LLM call, failures) and the LLM's calls, tokens and seconds per extracted message.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Sequence

from tqdm import tqdm

from memgas.bench.datasets import BenchQuestion, load_longmemeval
from memgas.bench.metrics import recall_all_at_k
from memgas.bench.report import llm_usage_lines
from memgas.core.errors import InvalidInputError
from memgas.embed.base import Embedder
from memgas.kernels.lexical import tokenize
from memgas.kernels.temporal_graph import fact_tokens
from memgas.llm.base import track_usage
from memgas.llm.wrapper import LLM
from memgas.methods.zep import Zep
from memgas.store import open_store

__all__ = ["KG_TYPES", "DEFAULT_ORACLE", "KGResult", "run_kg", "kg_markdown", "answer_token_recall"]

#: The question types whose evidence changes or dates facts.
KG_TYPES: tuple[str, ...] = ("knowledge-update", "temporal-reasoning")
#: The oracle file, relative to the project root.
DEFAULT_ORACLE = Path("../shared/data/longmemeval/longmemeval_oracle.dev.json")

_LME_TYPES = frozenset({"knowledge-update", "temporal-reasoning", "multi-session", "single-session-user",
                        "single-session-assistant", "single-session-preference"})
_RATES = ("latest_first", "answer_in_facts", "old_invalidated", "gold_recall_all@k")


@dataclass(slots=True)
class KGResult:
    """One run: its configuration and a record per question."""

    config: dict[str, Any]
    questions: list[dict[str, Any]] = field(default_factory=list)


def answer_token_recall(answer: str, texts: Sequence[str]) -> float:
    """Share of the answer's content words (BM25's tokens: stemmed, no stop words) found in ``texts``.

    An answer with no content word (e.g. "no") counts as found only if its normalised words are.
    """
    wanted = set(tokenize([answer])[0]) or set(fact_tokens(answer))
    if not wanted:
        return 0.0
    have = set(tokenize([" ".join(texts)])[0]) | set(fact_tokens(" ".join(texts)))
    return len(wanted & have) / len(wanted)


def _select(questions: list[BenchQuestion], types: Sequence[str], per_type: int | None) -> list[BenchQuestion]:
    chosen: list[BenchQuestion] = []
    count: dict[str, int] = {}
    for q in questions:
        if q.qtype not in types or q.qid.endswith("_abs"):  # abstention questions have no value to find
            continue
        if per_type is not None and count.get(q.qtype, 0) >= per_type:
            continue
        count[q.qtype] = count.get(q.qtype, 0) + 1
        chosen.append(q)
    return chosen


def _question(q: BenchQuestion, embedder: Embedder, llm: LLM, roles: Sequence[str], k: int) -> dict[str, Any]:
    """Fill a fresh store with the question's sessions through Zep, ask it, and count."""
    store = open_store(None)
    zep = Zep(embedder, llm=llm, roles=roles)
    sessions = sorted(q.sessions, key=lambda s: (s.timestamp or datetime.min, s.session_id))
    user = sessions[0].user_id
    t0 = time.perf_counter()
    with track_usage() as usage:
        for s in sessions:
            zep.ingest(store, s)
    seconds = time.perf_counter() - t0
    stats = zep.stats(store, user)
    ranking = zep.rank(store, user, q.question, query_time=q.question_date)
    hits = zep.search_facts(store, user, q.question, k=k, as_of=q.question_date)
    gold = [s.session_id for s in sessions if s.session_id in q.gold_sessions] or [s.session_id for s in sessions]
    order = {s.session_id: i for i, s in enumerate(sessions)}
    graph = zep.graph(store, user)

    def session_of(fact_episodes: list[str]) -> int:
        return max(order[graph.episodes[e].session_id] for e in fact_episodes)

    old_invalidated = any(
        f.invalidated_by is not None and session_of(graph.facts[f.invalidated_by].episodes) > session_of(f.episodes)
        for f in graph.facts
    )
    extracted = sum(1 for s in sessions for m in s.messages if m.role in roles)
    recall = answer_token_recall(q.answer, [h.fact.text for h in hits])
    store.close()
    return {
        "qid": q.qid, "type": q.qtype, "question": q.question, "answer": q.answer,
        "sessions": len(sessions), "messages_extracted": extracted,
        "graph": stats,
        "llm": usage.to_dict(), "ingest_s": round(seconds, 3),
        "ranking": ranking.sessions,
        "facts": [{**h.fact.to_dict(), "score": round(h.score, 6)} for h in hits],
        "latest_first": float(bool(ranking.sessions) and ranking.sessions[0] == gold[-1]),
        "answer_recall": recall,
        "answer_in_facts": float(recall == 1.0),
        "old_invalidated": float(old_invalidated),
        "gold_recall_all@k": recall_all_at_k(ranking.sessions, set(gold), k),
    }


def run_kg(
    path: Path,
    embedder: Embedder,
    llm: LLM,
    *,
    types: Sequence[str] = KG_TYPES,
    per_type: int | None = None,
    roles: Sequence[str] = ("user",),
    k: int = 5,
    progress: bool = True,
) -> KGResult:
    """Run the update benchmark over the oracle questions of ``types`` (the first ``per_type`` of each).

    Raises:
        InvalidInputError: an unknown question type, or no question selected.
    """
    unknown = sorted(set(types) - _LME_TYPES)
    if unknown:
        raise InvalidInputError(f"unknown LongMemEval question type(s): {', '.join(unknown)}")
    if per_type is not None and per_type < 1:
        raise InvalidInputError("--limit must be a positive integer")
    chosen = _select(load_longmemeval(path), types, per_type)
    if not chosen:
        raise InvalidInputError(f"no question of type {', '.join(types)} in {path}")
    result = KGResult({"data": str(path), "types": list(types), "per_type": per_type, "roles": list(roles), "k": k,
                       "embedder": embedder.id, "llm": llm.id})
    for q in tqdm(chosen, desc="kg", unit="q", disable=not progress):
        result.questions.append(_question(q, embedder, llm, roles, k))
    return result


def _summary(records: list[dict[str, Any]]) -> dict[str, float]:
    n = len(records)
    msgs = sum(r["messages_extracted"] for r in records)
    out = {"questions": float(n)}
    for name in _RATES:
        out[name] = sum(r[name] for r in records)
    out["answer_recall"] = sum(r["answer_recall"] for r in records) / max(1, n)
    for name in ("facts", "contradiction", "invalidated", "duplicate", "duplicate_free", "extraction_failures",
                 "judge_failures"):
        out[name] = float(sum(r["graph"][name] for r in records))
    for name in ("calls", "cached", "failures", "prompt_tokens", "completion_tokens", "seconds"):
        out[name] = float(sum(r["llm"][name] for r in records))
    out["messages"] = float(msgs)
    return out


def kg_markdown(result: KGResult) -> str:
    """The report: a row per question type (counts out of the questions run), then cost per message."""
    types = [t for t in result.config["types"] if any(r["type"] == t for r in result.questions)]
    rows = {t: _summary([r for r in result.questions if r["type"] == t]) for t in types}
    rows["all"] = _summary(result.questions)
    k = result.config["k"]
    lines = [
        f"### Temporal KG on LongMemEval oracle ({len(result.questions)} questions, LLM `{result.config['llm']}`)",
        "",
        f"| type | questions | newest evidence session first | answer in top-{k} valid facts | old fact invalidated "
        f"| all evidence sessions in top {k} | answer word recall | facts | contradictions | facts closed "
        "| duplicates (judge / no LLM) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for t, s in rows.items():
        n = int(s["questions"])
        lines.append(
            f"| {t} | {n} | {int(s['latest_first'])} | {int(s['answer_in_facts'])} | {int(s['old_invalidated'])} "
            f"| {int(s['gold_recall_all@k'])} | {s['answer_recall']:.2f} | {int(s['facts'])} "
            f"| {int(s['contradiction'])} "
            f"| {int(s['invalidated'])} | {int(s['duplicate'])} / {int(s['duplicate_free'])} |")
    a = rows["all"]
    lines += ["", "LLM use per extracted message:", ""]
    lines += llm_usage_lines("type", rows)
    lines += [
        "",
        f"Extraction failures: {int(a['extraction_failures'])}; judge failures: {int(a['judge_failures'])} "
        "(the episode is kept either way). Tokens and seconds count calls that reached the model; a call answered "
        "from the response cache costs none.",
    ]
    return "\n".join(lines) + "\n"
