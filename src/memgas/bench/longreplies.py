"""``memgas bench longreplies``: can a fact be found when an assistant said it deep inside a long reply?

``memgas/data/long_replies.json`` (written for this project) holds four topics, each a user's request and eight
paragraphs of an assistant's answer to it, and eight facts, each said only by the assistant, with a question that
asks for it. For every fact and every depth of the sample's ``depths`` (characters), one user gets five sessions:

* the *fact* session: the topic's request, then one reply of the topic's paragraphs with the fact put in at the
  paragraph break nearest to that depth (about 1,900 characters in all);
* a *twin*: the same request and the same paragraphs in another order, without the fact (a hard negative: only the
  fact tells the two apart);
* one session of each other topic, without facts.

Every method ranks the user's sessions for the fact's question; reported per method and depth: recall@1 (the fact
session first) and MRR over the eight facts. MemGAS reads a reply's first 300 characters into a turn's vector and
its BM25 view (:func:`memgas.methods.units.embedding_view`), so a fact deeper than that is invisible to both
unless another unit carries it; this measures how much that costs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from importlib import resources
from pathlib import Path
from typing import Any, Sequence

from memgas.core.types import Session
from memgas.core.validate import make_session
from memgas.embed.base import Embedder
from memgas.methods import MemGAS, get_method
from memgas.store import open_store

__all__ = ["LongReplyCase", "long_reply_cases", "run_longreplies", "longreplies_markdown"]


@dataclass(frozen=True, slots=True)
class LongReplyCase:
    """One fact at one depth: the user's sessions, the question, the fact session's id and where the fact starts."""

    user_id: str
    sessions: list[Session]
    question: str
    gold: str
    depth: int  # the depth asked for (characters into the reply)
    offset: int  # where the fact starts in the reply, at the paragraph break nearest to ``depth``


def _reply(paragraphs: Sequence[str], fact: str | None, depth: int) -> tuple[str, int]:
    """The paragraphs as one reply, with ``fact`` (a paragraph of its own) at the break nearest to ``depth``."""
    if fact is None:
        return "\n\n".join(paragraphs), -1
    starts = [0]
    for p in paragraphs:
        starts.append(starts[-1] + len(p) + 2)
    at = min(range(len(paragraphs) + 1), key=lambda i: (abs(starts[i] - depth), i))
    parts = [*paragraphs[:at], fact, *paragraphs[at:]]
    return "\n\n".join(parts), starts[at]


def long_reply_cases(path: str | Path | None = None, depths: Sequence[int] | None = None) -> list[LongReplyCase]:
    """The sample's cases (see the module notes), for its depths or ``depths``."""
    text = (Path(path).read_text(encoding="utf-8") if path is not None else
            resources.files("memgas").joinpath("data/long_replies.json").read_text(encoding="utf-8"))
    data = json.loads(text)
    topics = data["topics"]
    start = datetime(2024, 5, 1, 9, 0)
    cases = []
    for f, fact in enumerate(data["facts"]):
        for depth in depths if depths is not None else data["depths"]:
            user = f"lr-{f}-{depth}"
            own = topics[fact["topic"]]
            reply, offset = _reply(own["filler"], fact["fact"], depth)
            twin, _ = _reply(own["filler"][1::2] + own["filler"][::2], None, 0)
            made = [("fact", own["user"], reply), ("twin", own["user"], twin)]
            made += [(f"topic{t}", other["user"], _reply(other["filler"], None, 0)[0])
                     for t, other in enumerate(topics) if t != fact["topic"]]
            sessions = [make_session([{"role": "user", "content": ask}, {"role": "assistant", "content": answer}],
                                     user_id=user, session_id=sid, timestamp=(start + timedelta(days=i)).isoformat())
                        for i, (sid, ask, answer) in enumerate(made)]
            cases.append(LongReplyCase(user, sessions, fact["question"], "fact", int(depth), offset))
    return cases


def run_longreplies(embedder: Embedder, methods: Sequence[str], *, path: str | Path | None = None,
                    depths: Sequence[int] | None = None, method_options: dict[str, Any] | None = None
                    ) -> list[dict[str, Any]]:
    """Recall@1 and MRR of each method at each depth (see the module notes): rows ``{method, depth, questions,
    recall_1, mrr, mean_offset}``. The sessions are ingested once, by MemGAS, into one in-memory store."""
    cases = long_reply_cases(path, depths)
    store = open_store(None)
    ingester = MemGAS(embedder, **(method_options or {}))
    for case in cases:
        for session in case.sessions:
            ingester.ingest(store, session)
    rows = []
    for name in methods:
        method = ingester if name == "memgas" else get_method(name, embedder)
        by_depth: dict[int, list[tuple[float, float, int]]] = {}
        for case in cases:
            order = method.rank(store, case.user_id, case.question).sessions
            place = order.index(case.gold) if case.gold in order else len(order)
            by_depth.setdefault(case.depth, []).append((float(place == 0), 1.0 / (1 + place), case.offset))
        for depth, got in sorted(by_depth.items()):
            rows.append({"method": name, "depth": depth, "questions": len(got),
                         "recall_1": sum(g[0] for g in got) / len(got), "mrr": sum(g[1] for g in got) / len(got),
                         "mean_offset": sum(g[2] for g in got) / len(got)})
    store.close()
    return rows


def longreplies_markdown(rows: Sequence[dict[str, Any]]) -> str:
    """The rows as a table: one line per method, recall@1 / MRR per depth."""
    depths = sorted({r["depth"] for r in rows})
    cells = {(r["method"], r["depth"]): r for r in rows}
    offsets = {d: next(r["mean_offset"] for r in rows if r["depth"] == d) for d in depths}
    lines = ["| method | " + " | ".join(f"fact at ~{offsets[d]:.0f} chars: R@1 / MRR" for d in depths) + " |",
             "|---|" + "---:|" * len(depths)]
    for method in dict.fromkeys(r["method"] for r in rows):
        lines.append(f"| {method} | " + " | ".join(
            f"{cells[(method, d)]['recall_1']:.2f} / {cells[(method, d)]['mrr']:.2f}" for d in depths) + " |")
    return "\n".join(lines)
