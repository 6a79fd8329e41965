"""The user card's learned choice, fitted and measured on conversations it was not fitted on (issue 61):
``memgas bench card``, on BEAM's development conversations.

Each question's candidates are the standing statements of the memory it is asked of, with their
:data:`memgas.context.card.CARD_FEATURES` as :func:`memgas.context.build.card_candidates` gives them; a statement is
gold where its excerpt shows a gold evidence message (:func:`memgas.bench.context.shown_at`). Every question is
asked twice: of its own conversation as the user's memory ("per conversation"), and of all the conversations as one
user's memory ("one user": :func:`memgas.bench.beam.one_user`, the memory of one person who said everything, where
dozens of statements sit near each request). The conversations are cut in two folds (alternating); each fold's
questions are answered, in both settings, by the model fitted on the other fold's questions in both, so every
figure is out of fold. The share of gold messages in MemGAS's whole context (:func:`memgas.context.build_context`,
evidence and all) is measured at each budget with the learned card and with the hand-set one
(``ContextOptions(learned_card=False)``: by cosine and the subject the request bears on) on the same questions.
Fitted then on every question, the weights are what ``memgas/data/card.npz`` ships.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from memgas.bench.beam import ONE_USER, BeamConversation, load_beam, one_user
from memgas.bench.context import context_metrics, shown_at
from memgas.bench.runner import ingest_group, store_key
from memgas.context import ContextOptions, Profiles, build_context
from memgas.context.build import card_candidates
from memgas.context.card import CARD_FEATURES
from memgas.context.select import Selection
from memgas.embed.base import Embedder
from memgas.methods import get_method
from memgas.methods.memgas import MemGAS

__all__ = ["BUDGETS", "card_markdown", "run_card"]

BUDGETS = (1000, 4000)
SETTINGS = ("per conversation", "one user")


def _memories(conversations: Sequence[BeamConversation]) -> dict[str, list[tuple[str, Any, list[Any]]]]:
    """Per setting, its memories: each a user id, its sessions and the questions asked of it."""
    together = one_user(conversations)
    return {"per conversation": [(c.conv_id, c.sessions, c.questions) for c in conversations],
            "one user": [(ONE_USER, [s for c in together for s in c.sessions],
                          [q for c in together for q in c.questions])]}


def run_card(data: Path, embedder: Embedder, *, scales: Sequence[str] = ("100K", "500K"),
             store_dir: Path | None = None, limit: int | None = None, l2: float = 1.0,
             weights_out: Path | None = None, options: ContextOptions | None = None) -> dict[str, Any]:
    """Fit and measure the card's model on BEAM's conversations of ``scales`` under ``data`` (the folder of
    ``beam/``) in two folds (see the module notes): the share of gold messages in the context at each of
    :data:`BUDGETS`, per setting and system, out of fold. ``store_dir``: keep the ingested stores there (as
    ``memgas bench beam --stores`` does; its stores are reused). ``limit``: the first conversations of each scale.
    With ``weights_out``, the model fitted on every question is written there; ``options``: the learned card's
    context's (its :attr:`~memgas.context.assemble.ContextOptions.profile_share`, ...; the hand-set card's are
    these with ``learned_card=False``)."""
    conversations = load_beam(data / "beam", scales, limit)
    fold = {c.conv_id: k % 2 for k, c in enumerate(conversations)}
    learned = options or ContextOptions()
    hand_set = replace(learned, learned_card=False)
    memgas = get_method("memgas", embedder)
    ingester = MemGAS(embedder)
    profiles = Profiles(embedder)
    where = None if store_dir is None else store_dir / "beam" / store_key(ingester)
    records: list[dict[str, Any]] = []
    opened = []
    for setting, memories in _memories(conversations).items():
        for user, sessions, questions in memories:
            store, _ = ingest_group(ingester, user, sessions, where)
            opened.append(store)
            memgas.prepare(store, user)
            for q in questions:
                if not q.gold_messages:
                    continue
                statements, X = card_candidates(memgas, store, user, q.question, profiles,
                                                query_time=q.question_date)
                gold = [g for texts in q.gold_messages.values() for g in texts]
                y = np.array([any(shown_at(g, s.excerpt) is not None for g in gold) for s in statements], np.int64)
                records.append({"setting": setting, "fold": fold[q.conv_id], "type": q.qtype, "question": q,
                                "store": store, "user": user, "X": X, "y": y, "systems": {}})
    for k in (0, 1):
        train = [r for r in records if r["fold"] != k]
        held_out = Selection.fit(np.concatenate([r["X"] for r in train]), np.concatenate([r["y"] for r in train]),
                                 l2=l2, features=CARD_FEATURES)
        for r in records:
            if r["fold"] != k:
                continue
            q = r["question"]
            for budget in BUDGETS:
                for name, chosen, card in (("learned card", learned, held_out), ("hand-set card", hand_set, None)):
                    block = build_context(memgas, r["store"], r["user"], q.question, max_tokens=budget,
                                          query_time=q.question_date, max_sessions=5, profiles=profiles,
                                          options=chosen, card=card)
                    r["systems"].setdefault(name, {})[budget] = context_metrics(q.gold_messages, block, "")["recall"]
    model = Selection.fit(np.concatenate([r["X"] for r in records]), np.concatenate([r["y"] for r in records]),
                          l2=l2, features=CARD_FEATURES)
    if weights_out is not None:
        model.save(weights_out)
    for store in opened:
        store.close()
    share: dict[str, dict[str, dict[str, list[float]]]] = {}
    for r in records:
        for name, by_budget in r["systems"].items():
            for budget, recall in by_budget.items():
                for key in (f"all@{budget}", f"{r['fold']}@{budget}", f"{r['type']}@{budget}"):
                    share.setdefault(r["setting"], {}).setdefault(name, {}).setdefault(key, []).append(recall)
    return {"questions": {s: sum(r["setting"] == s for r in records) for s in SETTINGS},
            "statements": {s: round(float(np.mean([len(r["y"]) for r in records if r["setting"] == s])), 1)
                           for s in SETTINGS},
            "gold_statements": round(float(np.mean([r["y"].any() for r in records])), 3),
            "share": {setting: {name: {key: round(float(np.mean(v)), 3) for key, v in cells.items()}
                                for name, cells in systems.items()} for setting, systems in share.items()},
            "weights": model.weights()}


def card_markdown(report: dict[str, Any]) -> str:
    """The report's tables: per setting, the share of gold messages in the context per system, out of fold (both
    folds, each fold), then by ability; the shipped weights."""
    keys = [f"{part}@{b}" for b in BUDGETS for part in ("all", "0", "1")]
    lines = [f"Questions: {report['questions']}; statements per question: {report['statements']}; questions with a "
             f"gold statement: {report['gold_statements']}"]
    for setting, systems in report["share"].items():
        lines += ["", f"**{setting}**", "",
                  "| system | " + " | ".join(f"{int(b):,}: {'both folds' if p == 'all' else f'fold {p}'}"
                                             for k in keys for p, b in [k.split("@")]) + " |",
                  "|---|" + "---:|" * len(keys)]
        lines += [f"| {name} | " + " | ".join(f"{cells.get(k, float('nan')):.3f}" for k in keys) + " |"
                  for name, cells in systems.items()]
        types = sorted({k.split("@")[0] for cells in systems.values() for k in cells} - {"all", "0", "1"})
        for budget in BUDGETS:
            lines += ["", f"{setting}, {budget:,} tokens, by ability (both folds)", "",
                      "| system | " + " | ".join(types) + " |", "|---|" + "---:|" * len(types)]
            lines += [f"| {name} | " + " | ".join(f"{cells.get(f'{t}@{budget}', float('nan')):.3f}" for t in types)
                      + " |" for name, cells in systems.items()]
    lines += ["", "Weights (log-odds per unit, fitted on every question): "
              + ", ".join(f"{name} {w}" for name, w in report["weights"].items())]
    return "\n".join(lines)
