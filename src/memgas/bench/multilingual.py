"""``memgas bench multilingual``: session retrieval on the shipped multilingual sample.

``memgas/data/multilingual_sample.json`` holds thirty short conversations and thirty-four questions, written
for this project in English, Chinese, Japanese and Spanish (the same content in each; each question
paraphrases one session). Each language is one user: its sessions are ingested (MemGAS's units, so the
lexical and dense channels are those of a real store) and every method ranks that user's sessions for
each question. Reported per embedder, method and language: session recall@1, recall@3 and MRR.

The first ten sessions and questions are easy: they separate an embedder that reads a language from one
that does not, and BM25 with CJK tokens from BM25 without. Sessions s10-s29 add hard negatives (a session
sharing a gold session's topic words, not its fact), facts said only by the assistant, numbers and
questions that share no word with their session, so that close embedders and methods no longer all score 1.00.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import Any, Sequence

from memgas.bench.metrics import recall_any_at_k
from memgas.core.types import Message, Session
from memgas.embed.base import Embedder
from memgas.methods import MemGAS, get_method
from memgas.store import open_store

__all__ = ["MultilingualRow", "load_sample", "run_multilingual", "multilingual_markdown"]


@dataclass(frozen=True, slots=True)
class MultilingualRow:
    """One embedder x method x language cell: session recall@1, recall@3 and MRR over its questions."""

    embedder: str
    method: str
    language: str
    questions: int
    recall_1: float
    recall_3: float
    mrr: float


def load_sample(path: str | Path | None = None) -> dict[str, tuple[list[Session], list[tuple[str, list[str]]]]]:
    """Per language: its sessions (user ``ml-<language>``) and its (question, gold session ids)."""
    text = (Path(path).read_text(encoding="utf-8") if path is not None else
            resources.files("memgas").joinpath("data/multilingual_sample.json").read_text(encoding="utf-8"))
    out: dict[str, tuple[list[Session], list[tuple[str, list[str]]]]] = {}
    for lang, data in json.loads(text)["languages"].items():
        sessions = [Session(f"ml-{lang}", s["session_id"], tuple(Message(m["role"], m["content"]) for m in s["messages"]),
                            datetime.fromisoformat(s["date"])) for s in data["sessions"]]
        out[lang] = (sessions, [(q["question"], list(q["gold"])) for q in data["questions"]])
    return out


def run_multilingual(embedders: Sequence[Embedder], methods: Sequence[str], path: str | Path | None = None,
                     ) -> list[MultilingualRow]:
    """Rank each language's sessions for its questions with every embedder and method (see the module notes)."""
    sample = load_sample(path)
    rows = []
    for embedder in embedders:
        ranked = {m: get_method(m, embedder) for m in methods}
        for lang, (sessions, questions) in sample.items():
            store = open_store(None)
            ingester = MemGAS(embedder)
            for session in sessions:
                ingester.ingest(store, session)
            for name, method in ranked.items():
                r1 = r3 = rr = 0.0
                for question, gold in questions:
                    order = method.rank(store, f"ml-{lang}", question).sessions
                    r1 += recall_any_at_k(order, gold, 1)
                    r3 += recall_any_at_k(order, gold, 3)
                    rr += 1.0 / (1 + min(order.index(g) for g in gold))
                n = len(questions)
                rows.append(MultilingualRow(embedder.id, name, lang, n, r1 / n, r3 / n, rr / n))
            store.close()
    return rows


def multilingual_markdown(rows: Sequence[MultilingualRow]) -> str:
    """The rows as a markdown table: one line per embedder and method, recall@1 / MRR per language."""
    langs = list(dict.fromkeys(r.language for r in rows))
    cells: dict[tuple[str, str], dict[str, Any]] = {}
    for r in rows:
        cells.setdefault((r.embedder, r.method), {})[r.language] = r
    lines = ["| embedder | method | " + " | ".join(f"{lang} R@1 / R@3 / MRR" for lang in langs) + " |",
             "|---|---|" + "---|" * len(langs)]
    for (embedder, method), by_lang in cells.items():
        values = [f"{by_lang[lang].recall_1:.2f} / {by_lang[lang].recall_3:.2f} / {by_lang[lang].mrr:.2f}"
                  for lang in langs]
        lines.append(f"| {embedder} | {method} | " + " | ".join(values) + " |")
    return "\n".join(lines)
