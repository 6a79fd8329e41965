"""``hipporag``: HippoRAG 2's phrase/passage graph with Personalized PageRank.

Gutiérrez et al., "From RAG to Memory: Non-Parametric Continual Learning for Large Language Models"
(HippoRAG 2), arXiv:2502.14802 (ICML 2025). Offline, an LLM extracts OpenIE triples from each passage;
the triples' subjects and objects become phrase nodes, linked by their relations, to the passages they
came from (context edges), and to each other when their embeddings are close (synonym edges). Online,
the query is matched to triples by embedding; an LLM filter ("recognition memory") keeps the relevant
ones; their phrases seed a Personalized PageRank together with every passage at a small weight (its
dense similarity); passages rank by their PageRank mass.

Here a passage is one stored turn (its stored vector is the passage embedding), so passage scores are
turn scores and a session ranks as its best turn. One extraction call per turn (JSON ``{"triples":
[{"subject", "relation", "object"}]}``; the paper runs NER then triple extraction, two calls) and one
filter call per query (JSON ``{"relevant": [i]}``, over the ``fact_k`` best triples; cached like every
call). Seeds follow the paper: a phrase weighs the mean score of its kept triples divided by the number
of passages it occurs in; passages weigh their min-max-scaled cosine times ``passage_weight``; damping
0.5. Synonym edges: each phrase's ``synonym_k`` nearest phrases with cosine at least
``synonym_threshold``. When no triple is kept the ranking is dense passage retrieval, as in the paper.
Edge weights: 1 per triple between its phrases and per phrase occurrence in a passage; the cosine for a
synonym. Simplified: no separate NER, no query-to-passage reranking by the LLM, no QA step.

``hipporag-rules`` (no LLM): a turn's "triples" are co-occurrences: the YAKE keyphrases of its embedding
view (user words whole, each reply's first 300 characters, as the turn vector reads it) in reading
order, each consecutive pair one triple (relation ``co-occurs with``); there is no recognition filter
(the ``fact_k`` best triples are all kept). It is labelled as such in every table.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Sequence

import numpy as np
import scipy.sparse as sp

from memgas.core.errors import InvalidInputError
from memgas.core.types import Session, Turn
from memgas.kernels.knn import knn_graph
from memgas.kernels.ppr import personalized_pagerank
from memgas.kernels.temporal_graph import Triple, normalise_name
from memgas.methods.derived import DerivedMethod, TurnCorpus, as_matrix
from memgas.methods.ranking import Scored
from memgas.methods.units import embed_texts, embedding_view

__all__ = ["HippoRAG", "OPENIE_SCHEMA", "FILTER_SCHEMA", "openie_messages", "filter_messages", "rule_triples"]

OPENIE_SCHEMA: dict[str, Any] = {
    "type": "object", "required": ["triples"],
    "properties": {"triples": {"type": "array", "maxItems": 8, "items": {
        "type": "object", "required": ["subject", "relation", "object"],
        "properties": {"subject": {"type": "string"}, "relation": {"type": "string"}, "object": {"type": "string"}}}}},
}
FILTER_SCHEMA: dict[str, Any] = {
    "type": "object", "required": ["relevant"],
    "properties": {"relevant": {"type": "array", "maxItems": 10, "items": {"type": "integer"}}},
}
_OPENIE_SYSTEM = (
    "You extract knowledge triples for a knowledge graph. From the conversation passage, list the facts it "
    "states as (subject, relation, object), using the specific names of people, things, places and dates; "
    "resolve pronouns to the speaker's name. Reply with JSON only: "
    '{"triples": [{"subject": "...", "relation": "...", "object": "..."}]}.'
)
_FILTER_SYSTEM = (
    "You select facts. Given a QUESTION and numbered candidate FACTS, list the numbers of the facts that help "
    "answer the question; list none if none do. Reply with JSON only: {\"relevant\": [i, ...]}."
)


def openie_messages(turn: Turn, max_chars: int) -> list[dict[str, str]]:
    """The chat messages of one passage's extraction call."""
    passage = "\n".join(f"{m.name or m.role}: {' '.join(m.content.split())[:max_chars]}" for m in turn.messages)
    return [{"role": "system", "content": _OPENIE_SYSTEM}, {"role": "user", "content": f"PASSAGE:\n{passage}"}]


def filter_messages(query: str, facts: Sequence[Triple]) -> list[dict[str, str]]:
    """The chat messages of one recognition-memory call (facts numbered from 0)."""
    listed = "\n".join(f"{i}. ({t.subject}, {t.relation}, {t.object})" for i, t in enumerate(facts))
    return [{"role": "system", "content": _FILTER_SYSTEM},
            {"role": "user", "content": f"QUESTION: {query}\n\nFACTS:\n{listed}"}]


def _clean_triples(items: Sequence[Any]) -> list[Triple]:
    """Triples with both ends naming something (after normalisation), no self-loop, no repeat."""
    out: dict[tuple[str, str, str], Triple] = {}
    for item in items:
        s, r, o = (" ".join(str(item[k]).split()) for k in ("subject", "relation", "object"))
        key = (normalise_name(s), normalise_name(r), normalise_name(o))
        if key[0] and key[2] and key[0] != key[2]:
            out.setdefault(key, Triple(s, r, o))
    return list(out.values())


def rule_triples(text: str, extractor: Any, top: int = 6) -> list[Triple]:
    """Co-occurrence triples of ``text``: its ``top`` YAKE keyphrases in reading order, consecutive pairs."""
    lower = text.lower()
    phrases = [k for k, _ in extractor.extract_keywords(text)][:top]
    phrases.sort(key=lambda p: (lower.find(p.lower()), p))
    return _clean_triples([{"subject": a, "relation": "co-occurs with", "object": b}
                           for a, b in zip(phrases, phrases[1:])])


@dataclass(frozen=True, slots=True)
class _Fact:
    triple: Triple
    passage: int  # position in the view's passages


@dataclass(frozen=True, slots=True)
class _View:
    corpus: TurnCorpus
    passages: np.ndarray  # passage → unit row
    passage_sessions: tuple[str, ...]
    phrases: tuple[str, ...]  # phrase node keys; node i < len(phrases) is a phrase, then the passages
    facts: tuple[_Fact, ...]
    fact_vectors: np.ndarray
    adjacency: sp.csr_matrix
    phrase_passages: np.ndarray  # per phrase, the number of passages it occurs in
    phrase_index: dict[str, int]


class HippoRAG(DerivedMethod[_View]):
    """HippoRAG 2 over turns (see the module notes).

    Args:
        embedder: embeds triples, phrases and queries.
        fact_k: triples matched to the query (and shown to the filter).
        synonym_k: nearest phrases per phrase considered for a synonym edge.
        synonym_threshold: least cosine of a synonym edge.
        passage_weight: the passages' share of the PageRank seeds, relative to the phrases'.
        damping: PageRank's probability of following an edge.
        max_chars: characters of each message shown to the extractor.
        **kwargs: ``llm``, ``llm_cache``, ``use_llm`` (see :class:`~memgas.methods.derived.DerivedMethod`).
    """

    name = "hipporag"
    no_llm_note = "'hipporag-rules' builds the graph from keyphrase co-occurrence"

    def __init__(self, embedder: Any, *, fact_k: int = 5, synonym_k: int = 10, synonym_threshold: float = 0.8,
                 passage_weight: float = 0.05, damping: float = 0.5, max_chars: int = 500, **kwargs: Any) -> None:
        super().__init__(embedder, **kwargs)
        if fact_k < 1 or synonym_k < 1 or max_chars < 1 or passage_weight < 0 or not 0 <= damping < 1:
            raise InvalidInputError("fact_k, synonym_k, max_chars >= 1; passage_weight >= 0; damping in [0, 1)")
        self.fact_k = fact_k
        self.synonym_k = synonym_k
        self.synonym_threshold = synonym_threshold
        self.passage_weight = passage_weight
        self.damping = damping
        self.max_chars = max_chars
        self._yake: Any = None

    # ------------------------------------------------------------------ offline indexing

    def _triples(self, session: Session, turn: Turn) -> list[Triple]:
        if not self.use_llm:
            if self._yake is None:
                import yake  # only the rules variant needs it

                self._yake = yake.KeywordExtractor(lan="en", n=2, top=10)
            return rule_triples(embedding_view(turn), self._yake)  # what the turn's vector reads: YAKE is slow
        reply = self.ask(openie_messages(turn, self.max_chars), OPENIE_SCHEMA, user_id=session.user_id,
                         sessions=[session.session_id], max_tokens=400)
        return [] if reply is None else _clean_triples(reply["triples"])

    def derive(self, corpus: TurnCorpus) -> _View:
        passages: list[int] = []
        passage_sessions: list[str] = []
        facts: list[_Fact] = []
        for session in corpus.sessions:
            for turn in session.turns:
                facts += [_Fact(t, len(passages)) for t in self._triples(session, turn)]
                passages.append(corpus.row_of[(session.session_id, turn.index)])
                passage_sessions.append(session.session_id)
        names: dict[str, str] = {}
        for f in facts:
            names.setdefault(normalise_name(f.triple.subject), f.triple.subject)
            names.setdefault(normalise_name(f.triple.object), f.triple.object)
        phrases = tuple(names)
        index = {p: i for i, p in enumerate(phrases)}
        n_ph, n = len(phrases), len(phrases) + len(passages)
        edges: Counter[tuple[int, int]] = Counter()
        occurs: defaultdict[int, set[int]] = defaultdict(set)
        for f in facts:
            a, b = index[normalise_name(f.triple.subject)], index[normalise_name(f.triple.object)]
            edges[(a, b)] += 1  # relation edge
            for p in (a, b):
                occurs[p].add(f.passage)
        for p, ps in occurs.items():
            for q in ps:
                edges[(p, n_ph + q)] += 1  # context edge, once per phrase and passage
        dim = self.embedder.dim
        texts = [f.triple.text for f in facts]
        vectors = embed_texts(self.embedder, [*texts, *names.values()]) if facts else as_matrix([], dim)
        fact_vectors, phrase_vectors = vectors[: len(facts)], vectors[len(facts):]
        if not edges:
            adjacency = sp.csr_matrix((n, n))
        else:
            (src, dst), weight = zip(*edges.keys()), list(edges.values())
            a = sp.coo_matrix((np.asarray(weight, float), (np.asarray(src), np.asarray(dst))), shape=(n, n)).tocsr()
            syn = knn_graph(phrase_vectors, self.synonym_k, self.synonym_threshold).tocoo()
            adjacency = (a + a.T + sp.coo_matrix((syn.data, (syn.row, syn.col)), shape=(n, n))).tocsr()
        counts = np.array([len(occurs[p]) for p in range(n_ph)], dtype=np.float64)
        return _View(corpus, np.asarray(passages, dtype=np.int64), tuple(passage_sessions), phrases, tuple(facts),
                     fact_vectors, adjacency, counts, index)

    # ------------------------------------------------------------------ online retrieval

    def link(self, view: _View, query: str) -> list[tuple[int, float]]:
        """The query's triples: the ``fact_k`` most similar by cosine, then those the filter keeps (all of
        them without an LLM; none when the filter call fails), as (fact position, score): the cosine
        min-max scaled over all the user's facts (the best fact scores 1)."""
        if not view.facts:
            return []
        raw = view.fact_vectors @ self.embed_query(query)
        span = raw.max() - raw.min()
        sims = (raw - raw.min()) / span if span > 0 else np.ones_like(raw)  # min-max scaled, as in HippoRAG 2
        top = [int(i) for i in np.argsort(-raw, kind="stable")[: self.fact_k]]
        if not self.use_llm:
            return [(i, float(sims[i])) for i in top]
        shown = [view.facts[i] for i in top]
        sessions = dict.fromkeys(view.passage_sessions[f.passage] for f in shown)
        reply = self.ask(filter_messages(query, [f.triple for f in shown]), FILTER_SCHEMA,
                         user_id=view.corpus.sessions[0].user_id, sessions=list(sessions), max_tokens=100)
        kept = [] if reply is None else list(dict.fromkeys(k for k in reply["relevant"] if 0 <= k < len(top)))
        return [(top[k], float(sims[top[k]])) for k in kept]

    def score_view(self, view: _View, query: str, query_time: datetime | None) -> Scored:
        scores = np.full(len(view.corpus.index.table), -np.inf)
        if not len(view.passages):
            return Scored(view.corpus.index, scores)
        dense = view.corpus.vectors[view.passages] @ self.embed_query(query)
        linked = self.link(view, query)
        if not linked:  # no fact recognised: dense passage retrieval, as HippoRAG 2 falls back to
            scores[view.passages] = dense
            return Scored(view.corpus.index, scores)
        n_ph = len(view.phrases)
        seeds = np.zeros(view.adjacency.shape[0])
        total: defaultdict[int, list[float]] = defaultdict(list)
        for i, sim in linked:
            t = view.facts[i].triple
            for name in (t.subject, t.object):
                total[view.phrase_index[normalise_name(name)]].append(sim)
        for p, sims in total.items():
            seeds[p] = float(np.mean(sims)) / max(view.phrase_passages[p], 1.0)
        span = dense.max() - dense.min()
        scaled = (dense - dense.min()) / span if span > 0 else np.ones_like(dense)
        seeds[n_ph:] = scaled * self.passage_weight
        if not seeds.sum() > 0:  # only the least similar fact was kept (scaled to 0) and passage_weight is 0
            seeds[n_ph:] = scaled
        result = personalized_pagerank(view.adjacency, seeds, damping=self.damping, symmetric=True,
                                       raise_on_failure=False)
        scores[view.passages] = result.scores[n_ph:]
        return Scored(view.corpus.index, scores)

    def triples(self, store: Any, user_id: str) -> list[Triple]:
        """The user's extracted triples, oldest passage first."""
        return [f.triple for f in self._indexes.get(store, user_id).facts]

    def config(self) -> dict[str, Any]:
        return {**super().config(), "fact_k": self.fact_k, "synonym_k": self.synonym_k,
                "synonym_threshold": self.synonym_threshold, "passage_weight": self.passage_weight,
                "damping": self.damping, "max_chars": self.max_chars}
