"""Which messages an agent should read, learned and measured on conversations it was not fitted on (issue 60, the
measurement before the design): ``memgas bench selection``, on LoCoMo's conversations and BEAM's 100K ones.

For each question, the candidates are the messages that any channel brings up: the best messages by their own
vector's cosine with the question (a vector store over messages), the best by BM25 over the messages, and the
messages of MemGAS's best turns (its scores: association, the router, PPR). Each candidate is described by
:data:`FEATURES` (what each channel says of it, its neighbours, who said it, its age, the question's reading), and a
logistic regression (:class:`memgas.kernels.lasting.LastingModel`, two classes) is fitted on whether it is a gold
evidence message. The conversations of each dataset are cut in two folds (alternating); each fold's questions are
answered by the model fitted on the other fold of every dataset, so every figure is out of fold. A context is then
filled by the model's probability per token (each message one dated line, a long one its best part, as MemGAS's
context cuts it: :func:`memgas.kernels.excerpt.excerpt`), and scored as every context is
(:func:`memgas.bench.context.context_metrics`), beside MemGAS's context (:func:`memgas.context.build_context`,
today's hand-set priorities) and the two anchors a user would pick instead (``vector-messages``,
``hybrid-messages``), on the same questions.

The message vectors are computed here from the embedder's cache (the store keeps no vector per message yet): this
command measures what a learned selection over them would give before the store is changed to keep them, and what
one without them gives ("learned without message vectors": the candidates BM25 and MemGAS's turns bring, the
features of :data:`MESSAGE_VECTOR_FEATURES` left out), and one over MemGAS's turns alone ("learned over MemGAS's
turns": the messages of its best turns, what a context reads today).

"memgas, learned selection" is what MemGAS's context ships (:mod:`memgas.context.select`): its candidates and
features as :func:`memgas.context.build.evidence_candidates` gives them, fitted in the same two folds and measured
through :func:`memgas.context.build_context` itself (user card, timelines and all); "memgas" beside it is the
context as its hand-set priorities choose (``ContextOptions(learned=False)``). Fitted then on every question, its
weights are what ``memgas/data/selection.npz`` ships.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from memgas.bench.beam import load_beam
from memgas.bench.context import context_metrics
from memgas.bench.datasets import BenchQuestion, load_locomo
from memgas.bench.runner import ingest_group
from memgas.context import ContextOptions, Profiles, build_context
from memgas.context.build import evidence_candidates
from memgas.context.question import Question
from memgas.context.select import Selection
from memgas.core.types import Session
from memgas.embed.base import Embedder
from memgas.kernels.excerpt import excerpt
from memgas.kernels.lasting import LastingModel
from memgas.kernels.people import only_asks
from memgas.kernels.text import context_tokens, lines_within
from memgas.methods import get_method
from memgas.methods.base import MemoryMethod
from memgas.methods.memgas import MemGAS
from memgas.methods.messages import HEADER, MessageMethod

__all__ = ["FEATURES", "MESSAGE_VECTOR_FEATURES", "Candidate", "candidates", "packed", "run_selection",
           "selection_markdown"]

#: What describes a candidate message, in the model's order.
FEATURES = ("cosine", "cosine rank", "bm25 share of the best", "bm25 rank", "memgas turn rank", "memgas turn relevance",
            "memgas session rank", "neighbour cosine", "turn partner cosine", "only asks", "tokens (log)",
            "question words held", "age (newest 1)", "asks across time", "asks about the past", "asks about now")
#: The features a vector per message gives (left out by the selection measured without one).
MESSAGE_VECTOR_FEATURES = ("cosine", "cosine rank", "neighbour cosine", "turn partner cosine")
#: How many of each channel's best a question's candidates take.
PER_CHANNEL = 60
#: How many of MemGAS's best turns give their messages.
TURNS = 40
BUDGETS = (1000, 4000)
#: MemGAS's context with no evidence turns: the user card alone.
_CARD_ONLY = ContextOptions(turns=0, learned=False)
#: MemGAS's context as its hand-set priorities choose (before the learned selection)
_HAND_SET = ContextOptions(learned=False)
#: A message longer than this shows its best part (MemGAS's context's allowance for a person's message).
_CHARS = ContextOptions().user_chars


@dataclass(slots=True)
class Candidate:
    """One message a channel brought up for a question: where it is, its line, its features and whether it is gold."""

    session_id: str
    position: int
    line: str
    tokens: int
    features: np.ndarray
    gold: bool
    #: the channels that brought it up: ``"vectors"`` (a vector per message), ``"words"`` (BM25 over the messages),
    #: ``"turns"`` (MemGAS's best turns)
    channels: frozenset[str] = frozenset()


def _rank_feature(order: np.ndarray, n: int) -> np.ndarray:
    """Each row's rank in ``order`` (best first) as ``1 / log2(2 + rank)``; 0 for rows not in it."""
    out = np.zeros(n, np.float32)
    out[order] = 1.0 / np.log2(2.0 + np.arange(len(order)))
    return out


def candidates(question: BenchQuestion, memgas: MemoryMethod, messages: MessageMethod, store: Any,
               user_id: str) -> list[Candidate]:
    """The question's candidate messages with their features (see the module notes)."""
    built = messages.message_index(store, user_id)
    table, stamps = built.index.table, built.index.timestamps
    n = len(table)
    query_vector = messages.embed_query(question.question)
    cosine = np.asarray(table.vectors @ query_vector, np.float32)
    lexical = np.asarray(built.lexical.scores(question.question), np.float32)
    by_cosine = np.argsort(-cosine, kind="stable")
    by_words = np.argsort(-lexical, kind="stable")[: int(np.count_nonzero(lexical > 0))]
    # MemGAS's scores of turns, and of sessions by their best turn
    scored = memgas.scored(store, user_id, question.question, query_time=question.question_date)
    index, scores = scored.index, scored.scores
    relevance = scored.relevance if scored.relevance is not None else np.zeros(len(scores))
    rows = index.masks["turn"]
    rows = rows[np.isfinite(scores[rows])]
    rows = rows[np.argsort(-scores[rows], kind="stable")]
    turn_rank: dict[tuple[str, int], float] = {}
    turn_relevance: dict[tuple[str, int], float] = {}
    session_rank: dict[str, float] = {}
    for rank, r in enumerate(rows):
        key = (index.table.session_ids[r], int(index.table.turn_start[r]))
        turn_rank.setdefault(key, 1.0 / math.log2(2 + rank))
        turn_relevance.setdefault(key, float(relevance[r]))
        session_rank.setdefault(key[0], 1.0 / math.log2(2 + len(session_rank)))
    top_turns = {(index.table.session_ids[r], int(index.table.turn_start[r])) for r in rows[:TURNS]}
    brought = {"vectors": set(by_cosine[:PER_CHANNEL].tolist()), "words": set(by_words[:PER_CHANNEL].tolist()),
               "turns": {i for i in range(n) if (table.session_ids[i], int(table.turn_start[i])) in top_turns}}
    chosen = set().union(*brought.values())
    cos_rank, word_rank = _rank_feature(by_cosine, n), _rank_feature(by_words, n)
    best_words = float(lexical.max()) if n and lexical.max() > 0 else 1.0
    reading = Question.read(question.question, question.question_date)
    order = sorted({s for s in table.session_ids}, key=lambda s: (stamps.get(s) or datetime.min, s))
    age = {s: (i + 1) / len(order) for i, s in enumerate(order)}
    terms = reading.terms
    out: list[Candidate] = []
    for i in sorted(chosen):
        sid, turn, position = table.session_ids[i], int(table.turn_start[i]), int(table.chunk[i])
        text = table.texts[i]
        before = cosine[i - 1] if i > 0 and table.session_ids[i - 1] == sid else 0.0
        after = cosine[i + 1] if i + 1 < n and table.session_ids[i + 1] == sid else 0.0
        partner = [cosine[j] for j in (i - 1, i + 1) if 0 <= j < n and table.session_ids[j] == sid
                   and int(table.turn_start[j]) == turn]
        speaker, _, content = text.partition(": ")
        words = {w for w in content.lower().split()}
        held = len([t for t in terms if any(w.startswith(t) for w in words)]) / max(len(terms), 1)
        stamp = stamps.get(sid)
        shown = excerpt(content, terms, _CHARS)[0] if len(content) > _CHARS else content
        line = f"[{len(out) + 1}] {f'{stamp:%Y-%m-%d}' if stamp else 'undated'} · {sid} · {speaker}: {shown}"
        features = np.array([
            cosine[i], cos_rank[i], lexical[i] / best_words, word_rank[i], turn_rank.get((sid, turn), 0.0),
            turn_relevance.get((sid, turn), 0.0), session_rank.get(sid, 0.0), max(before, after),
            max(partner, default=0.0), float(only_asks(content)), math.log1p(context_tokens(line)) / 8.0, held,
            age[sid], float(reading.mode == "time"), float(reading.mode == "past"), float(reading.mode == "now"),
        ], np.float32)
        out.append(Candidate(sid, position, line, context_tokens(line) + 1, features,
                             (sid, position) in _gold_places(question),
                             frozenset(name for name, rows in brought.items() if i in rows)))
    return out


def _gold_places(question: BenchQuestion) -> set[tuple[str, int]]:
    return {p for places in question.gold_places.values() for p in places}


def _weights(model: LastingModel) -> list[float]:
    """A two-class model's weight of each feature towards gold (the difference of the classes' weights)."""
    assert model.coef_ is not None
    return [round(float(w), 3) for w in model.coef_[1] - model.coef_[0]]


def packed(found: Sequence[Candidate], value: np.ndarray, budget: int) -> str:
    """A context of ``found``'s lines, the best value per token first, while they fit ``budget`` (the anchors'
    header and line form, so that only the choice differs)."""
    order = np.argsort(-(value / np.array([c.tokens for c in found], np.float64)), kind="stable")
    return lines_within(HEADER, (f"[{n}] " + found[i].line.split("] ", 1)[1] for n, i in enumerate(order, start=1)),
                        budget)


def _conversations(dataset: str, data: Path, limit: int | None) -> list[tuple[list[Session], list[BenchQuestion]]]:
    """A dataset's conversations, each its sessions and its scorable questions with gold messages."""
    if dataset == "locomo":
        convs: Sequence[Any] = load_locomo(data / "locomo" / "locomo10.json", limit=limit)[0]
    else:
        convs = load_beam(data / "beam", ["100K"], limit=limit)
    return [(c.sessions, [q for q in c.questions if q.scorable and q.gold_places]) for c in convs]


def run_selection(data: Path, embedder: Embedder, *, datasets: Sequence[str] = ("locomo", "beam"),
                  store_dir: Path | None = None, l2: float = 1.0, limit: int | None = None,
                  weights_out: Path | None = None) -> dict[str, Any]:
    """Fit and measure the learned selection on ``datasets`` (``"locomo"``, ``"beam"``: BEAM's 100K conversations)
    under ``data``, in two folds (see the module notes): the share of gold messages in the context at each of
    :data:`BUDGETS`, per system, out of fold. ``limit``: the first conversations of each dataset. The selection
    MemGAS's context ships (:mod:`memgas.context.select`) is measured the same way, then fitted on every question
    and, with ``weights_out``, its weights written there (what ``memgas/data/selection.npz`` ships)."""
    memgas = get_method("memgas", embedder)
    vector = MessageMethod(embedder)
    hybrid = MessageMethod(embedder, hybrid=True)
    ingester = MemGAS(embedder)
    profiles = Profiles(embedder)
    per_question: list[dict[str, Any]] = []
    rows: list[tuple[int, list[Candidate]]] = []
    shipped: list[tuple[np.ndarray, np.ndarray]] = []  # per question: the shipped selection's candidates, gold
    stores: list[Any] = []
    for dataset in datasets:
        for k, (sessions, questions) in enumerate(_conversations(dataset, data, limit)):
            user = sessions[0].user_id
            store, _ = ingest_group(ingester, user, sessions, None if store_dir is None else store_dir / dataset)
            stores.append(store)
            for method in (memgas, vector, hybrid):
                method.prepare(store, user)
            for q in questions:
                found = candidates(q, memgas, vector, store, user)
                record: dict[str, Any] = {"qid": q.qid, "dataset": dataset, "fold": k % 2, "type": q.qtype,
                                          "gold": q.gold_messages, "places": _gold_places(q), "systems": {},
                                          "mode": Question.read(q.question, q.question_date).mode,
                                          "store": store, "user": user, "question": q}
                places, X = evidence_candidates(memgas, store, user, q.question, query_time=q.question_date,
                                                max_sessions=5)
                shipped.append((X, np.array([place in record["places"] for place in places], np.int64)))
                for budget in BUDGETS:
                    blocks = {
                        "memgas": build_context(memgas, store, user, q.question, max_tokens=budget,
                                                query_time=q.question_date, max_sessions=5, profiles=profiles,
                                                options=_HAND_SET),
                        "vector-messages": vector.context(store, user, q.question, max_tokens=budget),
                        "hybrid-messages": hybrid.context(store, user, q.question, max_tokens=budget),
                    }
                    for name, block in blocks.items():
                        record["systems"].setdefault(name, {})[budget] = context_metrics(q.gold_messages, block, "")
                    # the user card as MemGAS's context heads it (no evidence turns), for the learned evidence below
                    record.setdefault("cards", {})[budget] = build_context(
                        memgas, store, user, q.question, max_tokens=budget, query_time=q.question_date,
                        max_sessions=5, profiles=profiles, options=_CARD_ONLY)
                per_question.append(record)
                rows.append((len(per_question) - 1, found))
    weights: dict[int, LastingModel] = {}
    vectorless = np.array([name not in MESSAGE_VECTOR_FEATURES for name in FEATURES])
    for fold in (0, 1):
        for name, keep, columns in (
                ("learned", lambda c: True, slice(None)),
                ("learned without message vectors", lambda c: bool(c.channels - {"vectors"}), vectorless),
                ("learned over MemGAS's turns", lambda c: "turns" in c.channels, vectorless)):
            train = [c for i, found in rows if per_question[i]["fold"] != fold for c in found if keep(c)]
            model = LastingModel(l2=l2, class_weight=None).fit(np.stack([c.features[columns] for c in train]),
                                                               np.array([c.gold for c in train], np.int64), n_classes=2)
            if name == "learned":
                weights[fold] = model
            for i, found in rows:
                record = per_question[i]
                kept = [c for c in found if keep(c)]
                if record["fold"] != fold:
                    continue
                p = model.predict_proba(np.stack([c.features[columns] for c in kept]))[:, 1] if kept else np.zeros(0)
                for budget in BUDGETS:
                    block = packed(kept, p, budget)
                    record["systems"].setdefault(name, {})[budget] = context_metrics(record["gold"], block, "")
                    if name == "learned":  # under the user card, in what budget it leaves
                        card = record["cards"][budget]
                        block = "\n".join(filter(None, [card, packed(kept, p, budget - context_tokens(card) - 1)]))
                        record["systems"].setdefault("user card + learned", {})[budget] = context_metrics(
                            record["gold"], block, "")
                        # a question across the conversation read as MemGAS's timeline (every session in time order)
                        record["systems"].setdefault("user card + learned, timelines as MemGAS", {})[budget] = (
                            record["systems"]["memgas"][budget] if record["mode"] == "time"
                            else record["systems"]["user card + learned"][budget])
    # the selection MemGAS's context ships (memgas.context.select): fitted on one fold, measured on the other through
    # build_context itself; then fitted on both, the weights shipped
    for fold in (0, 1):
        others = [i for i, record in enumerate(per_question) if record["fold"] != fold]
        held_out = Selection.fit(np.concatenate([shipped[i][0] for i in others]),
                                 np.concatenate([shipped[i][1] for i in others]), l2=l2)
        for record in per_question:
            if record["fold"] == fold:
                q = record["question"]
                for budget in BUDGETS:
                    block = build_context(memgas, record["store"], record["user"], q.question, max_tokens=budget,
                                          query_time=q.question_date, max_sessions=5, profiles=profiles,
                                          selection=held_out)
                    record["systems"].setdefault("memgas, learned selection", {})[budget] = context_metrics(
                        record["gold"], block, "")
    selection = Selection.fit(np.concatenate([X for X, _ in shipped]), np.concatenate([y for _, y in shipped]),
                              l2=l2)
    if weights_out is not None:
        selection.save(weights_out)
    for store in stores:
        store.close()
    recall: dict[str, dict[str, dict[str, list[float]]]] = {}
    for record in per_question:
        for name, by_budget in record["systems"].items():
            for budget, metrics in by_budget.items():
                for part in (str(record["fold"]), "all"):
                    recall.setdefault(record["dataset"], {}).setdefault(name, {}).setdefault(
                        f"{part}@{budget}", []).append(metrics["recall"])
    table = {dataset: {name: {key: round(float(np.mean(v)), 3) for key, v in cells.items()}
                       for name, cells in systems.items()} for dataset, systems in recall.items()}
    by_type: dict[str, dict[str, dict[str, list[float]]]] = {}
    for record in per_question:
        for name, by_budget in record["systems"].items():
            for budget, metrics in by_budget.items():
                by_type.setdefault(f"{record['dataset']}@{budget}", {}).setdefault(name, {}).setdefault(
                    record["type"], []).append(metrics["recall"])
    types = {key: {name: {t: round(float(np.mean(v)), 3) for t, v in sorted(cells.items())}
                   for name, cells in systems.items()} for key, systems in by_type.items()}
    coefficients = {str(f): dict(zip(FEATURES, _weights(m))) for f, m in weights.items()}
    coefficients["shipped"] = selection.weights()
    return {"questions": {d: sum(r["dataset"] == d for r in per_question) for d in datasets},
            "candidates": sum(len(f) for _, f in rows),
            "gold_among_candidates": round(sum(c.gold for _, f in rows for c in f) / max(
                sum(len(per_question[i]["places"]) for i, _ in rows), 1), 3),
            "recall": table, "by_type": types, "coefficients": coefficients}


def selection_markdown(report: dict[str, Any]) -> str:
    """The report's tables: per dataset, the share of gold messages in the context per system, each fold held out
    and both."""
    keys = [f"{fold}@{b}" for b in BUDGETS for fold in ("all", 0, 1)]
    lines = [f"{report['candidates']} candidates; they hold {report['gold_among_candidates']} of the gold messages"]
    for dataset, systems in report["recall"].items():
        lines += ["", f"**{dataset}** ({report['questions'][dataset]} questions)", "",
                  "| system | " + " | ".join(f"{int(b):,}: {'both folds' if f == 'all' else f'fold {f}'}"
                                             for k in keys for f, b in [k.split("@")]) + " |",
                  "|---|" + "---:|" * len(keys)]
        for name, cells in systems.items():
            lines.append(f"| {name} | " + " | ".join(f"{cells.get(k, float('nan')):.3f}" for k in keys) + " |")
    for key, systems in report["by_type"].items():
        dataset, budget = key.split("@")
        kinds = sorted({t for cells in systems.values() for t in cells})
        lines += ["", f"**{dataset}, {int(budget):,} tokens, by question type** (both folds)", "",
                  "| system | " + " | ".join(kinds) + " |", "|---|" + "---:|" * len(kinds)]
        lines += [f"| {name} | " + " | ".join(f"{cells.get(t, float('nan')):.3f}" for t in kinds) + " |"
                  for name, cells in systems.items()]
    return "\n".join(lines)
