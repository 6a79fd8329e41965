"""``hmem``: a four-level memory hierarchy searched top down, after H-MEM.

Sun & Zeng, "Hierarchical Memory for High-Efficiency Long-Term Reasoning in LLM Agents" (H-MEM),
arXiv:2507.22925 (2025). Memory is stored in four levels: domain, category, memory trace and episode.
Each entry holds its semantic vector and a *positional index*: the positions of its children in the
next level. Retrieval descends level by level: the query picks the best domains, then the best
categories among *their* children only, then traces among those categories' children, and finally
the episodes under the chosen traces; nothing outside the chosen branches is compared at the lower levels.

Here an episode is one stored turn (its stored vector). With an LLM, one call per session (JSON
``{"memories": [{"domain", "category", "trace", "turns"}]}``) files the session: each memory's trace is
one sentence, under a category under a domain (names merged case-insensitively across sessions), and
points to the turns cited. A turn cited by no memory goes under the session's memory sharing most words
with it (a session whose call failed gets one ``general / conversation`` memory). A domain's or
category's vector is its name's vector plus the mean of its episodes' vectors, re-normalised; a trace's
likewise with its sentence. Simplified: the paper's per-interaction filing and its user-feedback
weighting of memories are not built.

``hmem-clusters`` (no LLM): the levels are clusters of the turn vectors: traces are spherical k-means
clusters of about ``fanout`` turns, categories clusters of about ``fanout`` traces, domains of about
``fanout`` categories (deterministic seeding), each node the normalised mean of its episodes.
It is labelled as such in every table.

Ranking, for the benchmarks: the episodes reached by the descent first (by their own cosine), then every
other turn by cosine (so the ranking is complete); a session ranks as its best turn.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Sequence

import numpy as np

from memgas.core.errors import InvalidInputError
from memgas.core.types import Session
from memgas.methods.derived import (
    DerivedMethod,
    TurnCorpus,
    as_matrix,
    best_match,
    normalised,
    numbered_turns,
    valid_turns,
)
from memgas.methods.ranking import Scored
from memgas.methods.units import embed_texts

__all__ = ["HMem", "Level", "Hierarchy", "FILE_SCHEMA", "file_messages", "spherical_kmeans", "descend"]

FILE_SCHEMA: dict[str, Any] = {
    "type": "object", "required": ["memories"],
    "properties": {"memories": {"type": "array", "maxItems": 6, "items": {
        "type": "object", "required": ["domain", "category", "trace", "turns"],
        "properties": {"domain": {"type": "string", "minLength": 1}, "category": {"type": "string", "minLength": 1},
                       "trace": {"type": "string", "minLength": 1},
                       "turns": {"type": "array", "items": {"type": "integer"}}}}}},
}
_FILE_SYSTEM = (
    "You file a conversation session into a hierarchical memory. Write its memories: for each, a broad "
    "domain (e.g. Health, Work, Travel, Family, Hobbies), a narrower category within it, a trace (one "
    "sentence saying what was said or done, naming the speaker), and the numbers [i] of the lines it comes "
    "from. Reply with JSON only: "
    '{"memories": [{"domain": "...", "category": "...", "trace": "...", "turns": [i, ...]}]}.'
)
LEVELS = ("domain", "category", "trace")


@dataclass(frozen=True, slots=True)
class Level:
    """One level's entries: their labels, vectors and positional index (children's positions in the next
    level; for traces, unit rows of their episodes)."""

    labels: tuple[str, ...]
    vectors: np.ndarray
    children: tuple[np.ndarray, ...]


@dataclass(frozen=True, slots=True)
class Hierarchy:
    """Domains, categories and traces; the traces' children are episode unit rows."""

    domains: Level
    categories: Level
    traces: Level


def file_messages(session: Session, max_chars: int) -> list[dict[str, str]]:
    """The chat messages of one session's filing call."""
    return [{"role": "system", "content": _FILE_SYSTEM},
            {"role": "user", "content": f"SESSION:\n{numbered_turns(session, max_chars)}"}]


def spherical_kmeans(vectors: np.ndarray, k: int, iterations: int = 10) -> np.ndarray:
    """Cluster labels of unit ``vectors`` into at most ``k`` non-empty clusters by cosine (farthest-point
    seeding from the first row, so the result is deterministic); labels are 0..m-1 with no gap."""
    n = len(vectors)
    k = max(1, min(k, n))
    centres = [0]
    nearest = vectors @ vectors[0]
    for _ in range(1, k):
        nxt = int(np.argmin(nearest))
        centres.append(nxt)
        nearest = np.maximum(nearest, vectors @ vectors[nxt])
    c = vectors[centres]
    labels = np.zeros(n, dtype=np.int64)
    for _ in range(iterations):
        labels = np.argmax(vectors @ c.T, axis=1)
        sums = np.zeros_like(c)
        np.add.at(sums, labels, vectors)
        filled = np.bincount(labels, minlength=len(c)) > 0
        c = np.where(filled[:, None], normalised(sums), c)
    _, labels = np.unique(labels, return_inverse=True)
    return labels.ravel()


def descend(h: Hierarchy, q: np.ndarray, beams: Sequence[int]) -> np.ndarray:
    """Episode unit rows reached from the query: at each level the ``beams[i]`` best entries among the
    children of the entries chosen above (all domains at the top)."""
    chosen = np.arange(len(h.domains.labels))
    levels = (h.domains, h.categories, h.traces)
    for i, level in enumerate(levels):
        if not len(chosen):
            return chosen
        sims = level.vectors[chosen] @ q
        picked = chosen[np.argsort(-sims, kind="stable")[: beams[i]]]
        chosen = np.unique(np.concatenate([level.children[p] for p in picked]))
    return chosen


def _group(keys: Sequence[Any]) -> tuple[list[Any], np.ndarray]:
    """Distinct keys in first-seen order and each item's position among them."""
    distinct: dict[Any, int] = {}
    pos = np.fromiter((distinct.setdefault(k, len(distinct)) for k in keys), np.int64, len(keys))
    return list(distinct), pos


def _level(labels: Sequence[str], parent_of_child: np.ndarray, vectors: np.ndarray) -> Level:
    children = tuple(np.flatnonzero(parent_of_child == p) for p in range(len(labels)))
    return Level(tuple(labels), vectors, children)


@dataclass(frozen=True, slots=True)
class _View:
    corpus: TurnCorpus
    hierarchy: Hierarchy
    episodes: np.ndarray  # every turn's unit row


class HMem(DerivedMethod[_View]):
    """The H-MEM hierarchy (see the module notes).

    Args:
        embedder: embeds labels, traces and queries.
        beams: entries kept at the domain, category and trace levels.
        fanout: ``hmem-clusters``: children per entry the clustering aims at.
        max_chars: characters of each message shown to the filing LLM.
        **kwargs: ``llm``, ``llm_cache``, ``use_llm`` (see :class:`~memgas.methods.derived.DerivedMethod`).
    """

    name = "hmem"
    no_llm_note = "'hmem-clusters' builds the levels by clustering the turn vectors"

    def __init__(self, embedder: Any, *, beams: Sequence[int] = (2, 3, 5), fanout: int = 4, max_chars: int = 400,
                 **kwargs: Any) -> None:
        super().__init__(embedder, **kwargs)
        if len(beams) != 3 or min(beams) < 1 or fanout < 2 or max_chars < 1:
            raise InvalidInputError("beams must be 3 positive integers (domain, category, trace); fanout >= 2; "
                                    "max_chars >= 1")
        self.beams = tuple(int(b) for b in beams)
        self.fanout = fanout
        self.max_chars = max_chars

    def derive(self, corpus: TurnCorpus) -> _View:
        episodes = np.asarray(list(corpus.row_of.values()), dtype=np.int64)
        build = self._filed if self.use_llm else self._clustered
        return _View(corpus, build(corpus), episodes)

    # ------------------------------------------------------------------ no LLM: clusters

    def _clustered(self, corpus: TurnCorpus) -> Hierarchy:
        rows = np.asarray(list(corpus.row_of.values()), dtype=np.int64)
        vectors = corpus.vectors[rows] if len(rows) else as_matrix([], self.embedder.dim)
        members = [rows[i : i + 1] for i in range(len(rows))]  # each node's episode rows
        levels: list[Level] = []
        child_members, child_vectors = members, vectors
        for name in reversed(LEVELS):  # traces first: each level clusters the one below
            labels = spherical_kmeans(child_vectors, -(-len(child_vectors) // self.fanout)) if len(child_vectors) \
                else np.zeros(0, np.int64)
            m = int(labels.max()) + 1 if len(labels) else 0
            node_members = [np.concatenate([child_members[c] for c in np.flatnonzero(labels == p)]) for p in range(m)]
            node_vectors = as_matrix([normalised(corpus.vectors[r].mean(axis=0)) for r in node_members],
                                     self.embedder.dim)
            children = [rows[np.flatnonzero(labels == p)] for p in range(m)] if name == "trace" else \
                [np.flatnonzero(labels == p) for p in range(m)]
            levels.append(Level(tuple(f"{name} {p}" for p in range(m)), node_vectors, tuple(children)))
            child_members, child_vectors = node_members, node_vectors
        traces, categories, domains = levels
        return Hierarchy(domains, categories, traces)

    # ------------------------------------------------------------------ with an LLM: filed per session

    def _file(self, session: Session) -> list[tuple[str, str, str, list[int]]]:
        """The session's memories (domain, category, trace, turns), every turn under one at least."""
        reply = self.ask(file_messages(session, self.max_chars), FILE_SCHEMA, user_id=session.user_id,
                         sessions=[session.session_id], max_tokens=700)
        memories = [] if reply is None else [
            (" ".join(m["domain"].split()), " ".join(m["category"].split()), " ".join(m["trace"].split()),
             valid_turns(m["turns"], session)) for m in reply["memories"]]
        if not memories:
            first = " ".join(session.turns[0].text.split())[:200]
            memories = [("general", "conversation", first, [])]
        cited = {t for *_, turns in memories for t in turns}
        traces = [trace for _, _, trace, _ in memories]
        for turn in session.turns:
            if turn.index not in cited:
                memories[best_match(turn.text, traces)][3].append(turn.index)
        return [m for m in memories if m[3]]  # a memory citing no valid turn and given none has no episode

    def _filed(self, corpus: TurnCorpus) -> Hierarchy:
        traces: list[tuple[str, str, str, str, list[int]]] = []  # domain, category, trace, session, turns
        for session in corpus.sessions:
            if session.turns:
                traces += [(d, c, t, session.session_id, turns) for d, c, t, turns in self._file(session)]
        dim = self.embedder.dim
        if not traces:
            empty = Level((), as_matrix([], dim), ())
            return Hierarchy(empty, empty, empty)
        trace_rows = [np.asarray([corpus.row_of[(s, i)] for i in turns], dtype=np.int64) for *_, s, turns in traces]
        domains, domain_of = _group([d.lower() for d, *_ in traces])
        categories, category_of = _group([(d.lower(), c.lower()) for d, c, *_ in traces])
        domain_of_category = np.asarray([domains.index(d) for d, _ in categories], dtype=np.int64)
        names = [d for d in domains] + [c for _, c in categories] + [t for _, _, t, *_ in traces]
        name_vectors = embed_texts(self.embedder, names)

        def vectors(groups: list[np.ndarray], offset: int) -> np.ndarray:
            means = [corpus.vectors[r].mean(axis=0) for r in groups]
            return normalised(np.stack(means) + name_vectors[offset : offset + len(groups)])

        category_rows = [np.concatenate([trace_rows[t] for t in np.flatnonzero(category_of == c)])
                         for c in range(len(categories))]
        domain_rows = [np.concatenate([category_rows[c] for c in np.flatnonzero(domain_of_category == d)])
                       for d in range(len(domains))]
        return Hierarchy(
            _level(domains, domain_of_category, vectors(domain_rows, 0)),
            _level([f"{d} / {c}" for d, c in categories], category_of, vectors(category_rows, len(domains))),
            Level(tuple(t for _, _, t, *_ in traces), vectors(trace_rows, len(domains) + len(categories)),
                  tuple(trace_rows)),
        )

    # ------------------------------------------------------------------ retrieval

    def score_view(self, view: _View, query: str, query_time: datetime | None) -> Scored:
        scores = np.full(len(view.corpus.index.table), -np.inf)
        if not len(view.episodes):
            return Scored(view.corpus.index, scores)
        q = self.embed_query(query)
        scores[view.episodes] = view.corpus.vectors[view.episodes] @ q  # the rest, by cosine in [-1, 1]
        reached = descend(view.hierarchy, q, self.beams)
        scores[reached] += 4.0  # episodes reached by the descent rank first
        return Scored(view.corpus.index, scores)

    def hierarchy(self, store: Any, user_id: str) -> Hierarchy:
        """The user's hierarchy."""
        return self._indexes.get(store, user_id).hierarchy

    def config(self) -> dict[str, Any]:
        return {**super().config(), "beams": list(self.beams), "fanout": self.fanout, "max_chars": self.max_chars}

