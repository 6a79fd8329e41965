"""SGMem: sentence-graph memory over chunks of turns.

Wu et al., 2025, "SGMem: Sentence Graph Memory for Long-Term Conversational Agents"
(arXiv:2509.21212). The history is cut into chunks of ``chunk_turns`` consecutive turns (never across
sessions); every message is split into sentences (segtok's rule-based segmenter, which knows
abbreviations, decimals and initials); sentences are the graph's nodes, linked to the chunk they
belong to and to their ``edge_k`` most similar sentences whose cosine reaches ``edge_threshold``.

Query: the query is split into sentences; each finds its ``seed_k`` most similar sentence nodes;
their 1-hop sentence neighbours are added; the chunks of all these sentences are collected and
ranked by the chunk's similarity to the whole query; the ``top_chunks`` best are the retrieved
set. Every turn of a retrieved chunk ranks above every other turn; the rest follow by their
chunk's similarity (a complete ranking for the benchmarks); ties inside a chunk are broken by the
turn's own similarity (see :func:`memgas.kernels.segment.structure_scores`).

Cost and what is embedded: sentences come from each turn's *embedding view*
(:func:`memgas.methods.units.embedding_view`: the user's words whole, each reply's first 300 characters),
so the graph covers every user sentence but only the opening sentences of long assistant replies;
embedding every sentence of the whole turns would embed 3.3x more text (484k vs 145k characters on a
LongMemEval-S haystack, most of it assistant replies), on 2 CPU cores about 3x the build time.
A sentence keeps its speaker ("Caroline: ..."), like the views. A chunk's vector is the mean of its
turns' stored vectors (nothing re-embedded). The paper's generated memory (summaries, facts,
insights as extra nodes) is not built. The graph is rebuilt from the store whenever the user's
memory changes (cached per store version); sentence vectors come from the embedder's cache when
they have been seen before.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
import scipy.sparse as sp
from segtok.segmenter import split_single

from memgas.core.errors import InvalidInputError
from memgas.core.types import Turn
from memgas.kernels.knn import knn_graph
from memgas.kernels.segment import chronological_rows, fixed_chunks, pooled, structure_scores
from memgas.methods.base import ConfiguredMethod
from memgas.methods.index import IndexCache, UserIndex, build_user_index
from memgas.methods.ranking import Scored
from memgas.methods.units import embed_texts, embedding_view
from memgas.store import Store

__all__ = ["SGMemConfig", "split_sentences", "turn_sentences", "SentenceGraph", "SGMem"]


@dataclass(frozen=True, slots=True)
class SGMemConfig:
    """Parameters of SGMem.

    Attributes:
        chunk_turns: turns per chunk (N).
        edge_k: most similar sentences each sentence is linked to.
        edge_threshold: least cosine for a sentence-sentence edge.
        seed_k: sentence nodes each query sentence starts from.
        top_chunks: chunks retrieved (ranked by similarity to the query among those collected).
        reply_chars: how much of each reply is split into sentences (as the turn vectors read it).
    """

    chunk_turns: int = 2
    edge_k: int = 3
    edge_threshold: float = 0.6
    seed_k: int = 10
    top_chunks: int = 10
    reply_chars: int = 300

    def __post_init__(self) -> None:
        if min(self.chunk_turns, self.edge_k, self.seed_k, self.top_chunks) < 1:
            raise InvalidInputError("SGMem needs chunk_turns, edge_k, seed_k and top_chunks >= 1")


def split_sentences(text: str) -> list[str]:
    """The sentences of ``text`` (segtok; every line break also ends a sentence), stripped, none empty."""
    return [s.strip() for s in split_single(text) if s.strip()]


def turn_sentences(turn: Turn, reply_chars: int = 300) -> list[str]:
    """The sentences of a turn's embedding view, each prefixed with its speaker (``"name: sentence"``)."""
    out = []
    for m in turn.messages:
        view = embedding_view(Turn(turn.index, (m,), 0, 1), reply_chars)
        speaker = f"{m.name or m.role}: "
        body = view[len(speaker):]
        out += [speaker + s for s in split_sentences(body)]
    return out


@dataclass(slots=True)
class SentenceGraph:
    """A user's sentence graph.

    Attributes:
        units: the user's units (the turn rows carry the scores).
        rows: turn position (stream order) → unit row.
        chunk_of_turn: turn position → chunk.
        chunk_vectors: ``(n_chunks, dim)`` pooled turn vectors.
        sentences: the sentence nodes' texts.
        sentence_turn: sentence → turn position.
        sentence_vectors: ``(n_sentences, dim)``.
        edges: sentence-sentence similarity edges (symmetric CSR).
    """

    units: UserIndex
    rows: np.ndarray
    chunk_of_turn: np.ndarray
    chunk_vectors: np.ndarray
    sentences: tuple[str, ...]
    sentence_turn: np.ndarray
    sentence_vectors: np.ndarray
    edges: sp.csr_matrix

    @property
    def sentence_chunk(self) -> np.ndarray:
        """Sentence → its chunk (each sentence belongs to exactly one)."""
        return self.chunk_of_turn[self.sentence_turn]


class SGMem(ConfiguredMethod[SGMemConfig]):
    """SGMem over the user's turns (see the module docstring).

    Args:
        embedder: the embedder.
        config: parameters (:class:`SGMemConfig`); keyword overrides are applied on top.

    Raises:
        InvalidInputError: a parameter out of range.
    """

    name = "sgmem"
    config_class = SGMemConfig

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._indexes: IndexCache[SentenceGraph] = IndexCache(self.build_graph)

    def build_graph(self, store: Store, user_id: str) -> SentenceGraph:
        """Build the user's sentence graph from the stored sessions (what :meth:`prepare` caches)."""
        units = build_user_index(store, user_id)
        table = units.table
        rows = chronological_rows(units.masks["turn"], table.session_ids, table.turn_start,
                                  [s.session_id for s in store.list_sessions(user_id)] if len(table) else [])
        chunk_of_turn = fixed_chunks(np.array([table.session_ids[r] for r in rows], dtype=object), self.cfg.chunk_turns)
        sessions = {sid: store.get_session(user_id, sid).turns for sid in units.sessions}
        sentences: list[str] = []
        owner: list[int] = []
        for pos, r in enumerate(rows):
            found = turn_sentences(sessions[table.session_ids[r]][table.turn_start[r]], self.cfg.reply_chars)
            sentences += found
            owner += [pos] * len(found)
        dim = self.embedder.dim
        vectors = embed_texts(self.embedder, sentences) if sentences else np.zeros((0, dim), dtype=np.float32)
        chunk_vectors = (pooled(table.vectors[rows], chunk_of_turn) if rows.size
                         else np.zeros((0, dim), dtype=np.float32))
        return SentenceGraph(units, rows, chunk_of_turn, chunk_vectors, tuple(sentences),
                             np.asarray(owner, dtype=np.int64), vectors,
                             knn_graph(vectors, self.cfg.edge_k, self.cfg.edge_threshold))

    def collect_chunks(self, graph: SentenceGraph, query: str) -> np.ndarray:
        """The chunks reached from the query's sentences: seed sentences, plus their 1-hop neighbours."""
        if not graph.sentences:
            return np.zeros(0, dtype=np.int64)
        q = embed_texts(self.embedder, split_sentences(query) or [query])
        sims = q @ graph.sentence_vectors.T
        k = min(self.cfg.seed_k, sims.shape[1])
        seeds = np.unique(np.argpartition(-sims, k - 1, axis=1)[:, :k])
        reached = np.union1d(seeds, graph.edges[seeds].indices)
        return np.unique(graph.sentence_chunk[reached])

    def score(self, store: Store, user_id: str, query: str, *, query_time: datetime | None = None) -> Scored:
        """Score the user's turns: retrieved chunks first, each turn as its chunk (see the module notes)."""
        graph = self._indexes.get(store, user_id)
        scores = np.full(len(graph.units.table), -np.inf)
        if not graph.rows.size:
            return Scored(graph.units, scores)
        qv = self.embed_query(query)
        chunk_sims = graph.chunk_vectors @ qv
        collected = self.collect_chunks(graph, query)
        selected = np.zeros(chunk_sims.size, dtype=bool)
        selected[collected[np.argsort(-chunk_sims[collected], kind="stable")[: self.cfg.top_chunks]]] = True
        n = graph.rows.size
        scores[graph.rows] = structure_scores(chunk_sims, graph.chunk_of_turn, np.arange(n), n, selected=selected,
                                              own=graph.units.table.vectors[graph.rows] @ qv)
        return Scored(graph.units, scores)
