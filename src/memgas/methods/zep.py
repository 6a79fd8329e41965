"""``zep``: a temporal knowledge-graph memory in the style of Zep/Graphiti, over the shared store.

Every stored message is an episode (event time = its session's timestamp). An LLM extracts
(subject, relation, object) facts from each message in the context of the few before it; each fact is
checked against the facts of its entities and the most similar facts: exact and near-exact duplicates
without an LLM call, the rest by an LLM judge (duplicate / contradiction / new). Contradicted facts are
closed (``invalid_at``), never deleted (see :mod:`memgas.kernels.temporal_graph`).

Communities: the entities are clustered by Louvain in batches (every ``refresh_every`` new facts, see
:class:`memgas.kernels.temporal_graph.TemporalGraph`); after a batch, each community of at least
``min_community`` entities whose membership changed gets a summary written by the LLM from its facts (an
extractive description when the call fails), embedded for retrieval. Unchanged communities keep theirs: no call per add.

Retrieval fuses (RRF) dense and BM25 rankings of the facts with a breadth-first expansion from the
entities that best match the query (by embedding and BM25 over entity names) and with the facts of the
communities whose summaries best match it (by embedding and BM25), reranks the head by MMR, and
maps each fact's score to the turns of its source episodes, so the benchmark harness ranks sessions
and turns as for every other method. Facts not valid at the query time still count, at
``history_weight`` of their score (the evidence of an update is in the old session too).

The graph of a user is built from the store on first use and extended incrementally with new sessions
(rebuilt when a session was deleted); LLM answers go through the response cache of :mod:`memgas.llm`,
so a rebuild repeats no call. Every call made for a session runs inside
:func:`memgas.core.provenance.source` of that session, and a community summary's call inside that of every
session behind the community's facts, so deleting a session forgets the cached answers it fed.

Failures: ``add`` never raises once the session is committed. A failed LLM call never loses an
episode: the episode stays and the failure is counted (``stats``); a fact whose judge call failed is
written as new. An extraction whose call failed (unreachable, past its deadline, malformed answer) is
*pending*: it is retried at the next build of the user's graph (the next ``add``, or a search after
another process wrote), on demand with :meth:`Zep.retry_pending`, and in a new process by the rebuild
(failed calls are not cached). Once a call of a build has failed, the build's other extractions wait
as pending without a call, so a dead endpoint costs one deadline per build, not one per message. An
extraction that stays invalid (the model's JSON is wrong: the cache would replay it) is not retried.
"""

from __future__ import annotations

import threading
import weakref
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from memgas.core import provenance
from memgas.core.errors import InvalidInputError, LLMError, MemgasError
from memgas.core.types import Session
from memgas.core.validate import naive_utc
from memgas.embed.base import Embedder
from memgas.kernels.fusion import reciprocal_rank_fusion
from memgas.kernels.lexical import LexicalIndex
from memgas.kernels.temporal_graph import (
    COMMUNITY_SCHEMA,
    EXTRACT_SCHEMA,
    JUDGE_SCHEMA,
    Episode,
    Fact,
    TemporalGraph,
    Triple,
    Verdict,
    bfs_distances,
    community_messages,
    extraction_messages,
    extractive_community_summary,
    judge_messages,
    mmr,
    normalise_name,
    parse_community_summary,
    parse_triples,
    parse_verdict,
)
from memgas.llm.base import ChatModel
from memgas.llm.cache import ResponseCache
from memgas.llm.factory import get_llm
from memgas.llm.wrapper import LLM
from memgas.methods.base import IngestStats, MemoryMethod
from memgas.methods.index import IndexCache, UserIndex, turn_docs
from memgas.methods.ranking import Scored
from memgas.store import Store

__all__ = ["Zep", "FactHit", "CommunitySummary"]

#: The counters of :meth:`Zep.stats` that the build keeps.
_COUNTS = ("episodes", "triples", "new", "duplicate", "duplicate_free", "contradiction", "invalidated",
           "extraction_failures", "judge_failures", "community_summaries", "community_failures")
_NO_LLM = ("the 'zep' method needs an LLM to extract facts: pass llm='openai:<model>@<base_url>' or llm='local' "
           "(e.g. get_method('zep', embedder, llm=...))")


@dataclass(frozen=True, slots=True)
class FactHit:
    """A retrieved fact with its fused score and its source episodes."""

    fact: Fact
    score: float
    episodes: tuple[Episode, ...]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable view."""
        return {**self.fact.to_dict(), "score": round(self.score, 6),
                "sources": [{"id": e.id, "session_id": e.session_id, "turn": e.turn, "speaker": e.speaker,
                             "content": e.content} for e in self.episodes]}


@dataclass(frozen=True, slots=True)
class CommunitySummary:
    """A community of entities (keys) with its description; ``by_llm`` is false for the extractive fallback."""

    members: tuple[str, ...]
    summary: str
    by_llm: bool
    vector: np.ndarray | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable view (no vector)."""
        return {"members": list(self.members), "summary": self.summary, "by_llm": self.by_llm}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CommunitySummary:
        """The community of a :meth:`to_dict` view (as the REST API returns it; no vector)."""
        return cls(tuple(map(str, data["members"])), str(data["summary"]), bool(data["by_llm"]))


@dataclass(slots=True)
class _UserGraph:
    """A user's graph and what was folded into it (kept across store versions)."""

    graph: TemporalGraph
    sessions: set[str] = field(default_factory=set)
    stats: Counter[str] = field(default_factory=Counter)
    name_vectors: dict[str, np.ndarray] = field(default_factory=dict)
    summaries: dict[frozenset[str], CommunitySummary] = field(default_factory=dict)
    #: Extractions to retry: session id → (the session, its message indexes), oldest first.
    pending: dict[str, tuple[Session, list[int]]] = field(default_factory=dict)

    def pending_count(self) -> int:
        """Messages whose extraction is pending."""
        return sum(len(indexes) for _, indexes in self.pending.values())


@dataclass(slots=True)
class _Index:
    """The retrieval view of a user's graph at one store version."""

    state: _UserGraph
    docs: UserIndex  # one row per turn
    row_of: dict[tuple[str, int], int]
    fact_vectors: np.ndarray
    fact_lexical: LexicalIndex
    entity_keys: list[str]
    entity_vectors: np.ndarray
    entity_lexical: LexicalIndex
    communities: list[CommunitySummary]
    community_lexical: LexicalIndex


@dataclass(slots=True)
class _Live:
    """The cached value of a user: the current view, replaced whole when the graph changes between store
    versions (a retried extraction), so a reader holding the old view keeps a consistent one."""

    view: _Index


class _Breaker:
    """Open after the first failed call of a build: the build's other extractions wait without calling."""

    def __init__(self) -> None:
        self.open = False


class Zep(MemoryMethod):
    """The temporal knowledge-graph method (see the module notes).

    Args:
        embedder: embeds facts, entity names and queries.
        llm: an :func:`memgas.llm.factory.get_llm` spec or instance; required at first use (ingest or search).
        llm_cache: the response cache for a spec (a :class:`ResponseCache` or a path); default in memory.
        context_messages: previous messages of the session shown with each message to extract from.
        roles: the roles whose messages are extracted from (all are kept as episodes).
        max_chars: characters of a message shown to the extractor (a pasted file is cut; the episode is whole).
        seed_entities: entities matched to the query (per ranking) that start the breadth-first search.
        bfs_depth: hops of the breadth-first expansion.
        candidates: head of each ranking fused, and of the fusion reranked by MMR.
        mmr_lambda: MMR's relevance weight (1 = no diversity).
        history_weight: score factor of facts not valid at the query time.
        refresh_every: new facts between two Louvain community refreshes (a batch).
        min_community: least entities of a community that gets a summary.
        community_facts: most facts (newest first) shown to the LLM for one community summary.
        seed_communities: communities matched to the query (per ranking) whose facts join the fusion
            (0 = no community channel).
    """

    name = "zep"

    def __init__(
        self,
        embedder: Embedder,
        *,
        llm: str | LLM | ChatModel | None = None,
        llm_cache: ResponseCache | str | Path | None = None,
        context_messages: int = 3,
        roles: Sequence[str] = ("user", "assistant"),
        max_chars: int = 4000,
        seed_entities: int = 3,
        bfs_depth: int = 1,
        candidates: int = 50,
        mmr_lambda: float = 0.7,
        history_weight: float = 0.5,
        refresh_every: int = 50,
        min_community: int = 3,
        community_facts: int = 20,
        seed_communities: int = 2,
        **kwargs: Any,
    ) -> None:
        super().__init__(embedder, **kwargs)
        if context_messages < 0 or max_chars < 1 or seed_entities < 1 or bfs_depth < 0 or candidates < 1:
            raise InvalidInputError("context_messages >= 0, max_chars >= 1, seed_entities >= 1, bfs_depth >= 0 and "
                                    "candidates >= 1")
        if not 0 <= mmr_lambda <= 1 or not 0 <= history_weight <= 1:
            raise InvalidInputError("mmr_lambda and history_weight must be in [0, 1]")
        if min_community < 2 or community_facts < 1 or seed_communities < 0:
            raise InvalidInputError("min_community >= 2, community_facts >= 1 and seed_communities >= 0")
        self.llm = None if llm is None else get_llm(llm, cache=llm_cache if llm_cache is not None else ResponseCache())
        self.context_messages = context_messages
        self.roles = tuple(roles)
        self.max_chars = max_chars
        self.seed_entities = seed_entities
        self.bfs_depth = bfs_depth
        self.candidates = candidates
        self.mmr_lambda = mmr_lambda
        self.history_weight = history_weight
        self.refresh_every = refresh_every
        self.min_community = min_community
        self.community_facts = community_facts
        self.seed_communities = seed_communities
        self._graphs: weakref.WeakKeyDictionary[Store, dict[str, _UserGraph]] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()
        self._indexes: IndexCache[_Live] = IndexCache(self._build)

    # ------------------------------------------------------------------ building

    def _require_llm(self) -> LLM:
        if self.llm is None:
            raise InvalidInputError(_NO_LLM)
        return self.llm

    def ingest(self, store: Store, session: Session) -> IngestStats:
        """Store the session (as every method does), then fold its messages into the user's graph.

        Once the session is committed nothing raises: failed extractions are pending (see the module
        notes), and a graph that could not be built now is built at the next search, which reports why.
        """
        self._require_llm()
        stats = super().ingest(store, session)
        try:
            self.prepare(store, session.user_id)
        except MemgasError:
            pass  # committed: telling the caller "failed" would make a retry a DuplicateSessionError
        return stats

    def _index(self, store: Store, user_id: str) -> _Index:
        return self._indexes.get(store, user_id).view

    def _build(self, store: Store, user_id: str) -> _Live:
        llm = self._require_llm()
        with self._lock:
            infos = store.list_sessions(user_id)
            ids = {i.session_id for i in infos}
            users = self._graphs.setdefault(store, {})
            state = users.get(user_id)
            if state is None or not state.sessions <= ids:  # first use, or a session was deleted: rebuild
                state = users[user_id] = _UserGraph(TemporalGraph(refresh_every=self.refresh_every))
            fresh = [i for i in infos if i.session_id not in state.sessions]
            fresh.sort(key=lambda i: (i.timestamp is None, naive_utc(i.timestamp) if i.timestamp else datetime.min,
                                      i.session_id))  # oldest first; aware times are UTC
            sessions = [store.get_session(user_id, info.session_id) for info in fresh]
            breaker = _Breaker()
            self._retry(llm, state, breaker)  # older sessions' facts first
            for session in sessions:
                state.sessions.add(session.session_id)  # first: a failure below leaves pending messages, no half fold
                self._fold(llm, state, session, breaker)
            self._summarize(llm, state, user_id)
            return _Live(self._view(store, user_id, state))

    def _fold(self, llm: LLM, state: _UserGraph, session: Session, breaker: _Breaker) -> None:
        """Add a session's messages as episodes and their extracted facts to the graph."""
        turn_of = {m: t.index for t in session.turns for m in range(t.msg_start, t.msg_end)}
        for i, msg in enumerate(session.messages):
            state.graph.add_episode(Episode(f"{session.session_id}#{i}", session.session_id, turn_of[i],
                                            msg.name or msg.role, msg.content, session.timestamp))
            state.stats["episodes"] += 1
        todo = [i for i, msg in enumerate(session.messages) if msg.role in self.roles]
        if todo:
            state.pending[session.session_id] = (session, todo)
            self._extract_pending(llm, state, session.session_id, breaker)

    def _retry(self, llm: LLM, state: _UserGraph, breaker: _Breaker) -> bool:
        """Retry the pending extractions, oldest session first; whether any succeeded."""
        before = state.pending_count()
        for session_id in list(state.pending):
            self._extract_pending(llm, state, session_id, breaker)
        return state.pending_count() < before

    def _extract_pending(self, llm: LLM, state: _UserGraph, session_id: str, breaker: _Breaker) -> None:
        """Extract the facts of a session's pending messages; those whose call fails stay pending."""
        session, indexes = state.pending[session_id]
        left = []
        with provenance.source(session.user_id, session_id):  # cached answers are forgotten with the session
            for i in indexes:
                if not breaker.open and self._extract(llm, state, session, i):
                    continue
                breaker.open = True
                left.append(i)
        if left:
            state.pending[session_id] = (session, left)
        else:
            del state.pending[session_id]

    def _extract(self, llm: LLM, state: _UserGraph, session: Session, i: int) -> bool:
        """Extract message ``i``'s facts into the graph; ``False`` when a call failed (worth a retry)."""
        msg = session.messages[i]
        episode = state.graph.episodes[f"{session.session_id}#{i}"]
        lines = [f"{m.name or m.role}: {m.content}" for m in session.messages[max(0, i - self.context_messages) : i]]
        context = [line[: self.max_chars // 4] for line in lines]
        prompt = extraction_messages(msg.content[: self.max_chars], episode.speaker, context, session.timestamp)
        try:
            triples = parse_triples(llm.complete_json(prompt, EXTRACT_SCHEMA, max_tokens=600))
            vectors = self.embedder.embed([t.text for t in triples]) if triples else np.zeros((0, self.embedder.dim))
        except (LLMError, InvalidInputError) as e:
            state.stats["extraction_failures"] += 1
            if isinstance(e, LLMError) and e.raw is None:  # the call failed, not the model's output
                return False
            return True  # invalid output: the cache would replay it, so a retry cannot help
        except MemgasError:  # the embedder failed: the answer is cached, a retry costs no LLM call
            state.stats["extraction_failures"] += 1
            return False
        state.stats["triples"] += len(triples)
        for triple, vector in zip(triples, vectors):
            self._add(llm, state, triple, episode, np.asarray(vector, dtype=np.float32))
        return True

    def _add(self, llm: LLM, state: _UserGraph, triple: Triple, episode: Episode, vector: np.ndarray) -> None:
        def judge(t: Triple, candidates: Sequence[Fact]) -> Verdict:
            return parse_verdict(llm.complete_json(judge_messages(t, candidates), JUDGE_SCHEMA, max_tokens=100),
                                 candidates)

        kwargs: dict[str, Any] = {"episode_id": episode.id, "valid_at": episode.event_time, "embedding": vector}
        try:
            decision = state.graph.add_fact(triple, judge=judge, **kwargs)
        except (LLMError, InvalidInputError):
            state.stats["judge_failures"] += 1
            decision = state.graph.add_fact(triple, **kwargs)  # never drop a fact on a failed judge call
        state.stats[decision.kind + ("" if decision.by_llm or decision.kind != "duplicate" else "_free")] += 1
        state.stats["invalidated"] += len(decision.invalidated)

    def _summarize(self, llm: LLM, state: _UserGraph, user_id: str) -> None:
        """Describe the communities of the last Louvain refresh that have no summary yet; drop stale ones.

        Membership changes only at a refresh (a batch of ``refresh_every`` facts), so this calls the LLM
        once per new or changed community per batch, never per add. Each call (and the summary's
        embedding) runs inside :func:`memgas.core.provenance.source` of the sessions whose facts touch the
        community's members, valid or not: they hold the facts shown and the members' names, so deleting
        any of them forgets the cached summary, whether it was made during an add or a search.
        """
        graph = state.graph
        groups = {frozenset(g): g for g in graph.communities.values() if len(g) >= self.min_community}
        state.summaries = {k: v for k, v in state.summaries.items() if k in groups}
        todo = [(k, g) for k, g in groups.items() if k not in state.summaries]
        for key, members in todo:
            ids = graph.fact_ids_of(members)
            sessions = dict.fromkeys(graph.episodes[e].session_id for i in ids for e in graph.facts[i].episodes)
            facts = [graph.facts[i] for i in reversed(ids) if graph.facts[i].invalid_at is None][: self.community_facts]
            names = [graph.entities[n].name for n in members]
            with provenance.source(user_id, *sessions):
                try:
                    text = parse_community_summary(
                        llm.complete_json(community_messages(names, facts), COMMUNITY_SCHEMA, max_tokens=250))
                    by_llm = True
                except (LLMError, InvalidInputError):
                    state.stats["community_failures"] += 1
                    text, by_llm = extractive_community_summary(names, facts), False
                vector = self.embedder.embed([text])[0]  # one call per summary: each has its own sessions
            state.stats["community_summaries"] += 1
            state.summaries[key] = CommunitySummary(tuple(members), text, by_llm, np.asarray(vector, dtype=np.float32))

    def _view(self, store: Store, user_id: str, state: _UserGraph) -> _Index:
        docs = turn_docs(store, user_id, "all")
        row_of = {(s, int(t)): r for r, (s, t) in enumerate(zip(docs.table.session_ids, docs.table.turn_start))}
        facts = state.graph.facts
        dim = self.embedder.dim
        empty = np.zeros((0, dim), np.float32)
        fact_vectors = np.stack([f.embedding for f in facts]) if facts else empty  # type: ignore[misc]
        keys = list(state.graph.entities)
        missing = [k for k in keys if k not in state.name_vectors]
        if missing:
            names = [state.graph.entities[k].name for k in missing]
            state.name_vectors.update(zip(missing, self.embedder.embed(names)))
        entity_vectors = np.stack([state.name_vectors[k] for k in keys]) if keys else empty
        communities = sorted(state.summaries.values(), key=lambda c: c.members)
        return _Index(state, docs, row_of, fact_vectors, LexicalIndex([f.text for f in facts]), keys, entity_vectors,
                      LexicalIndex([state.graph.entities[k].name for k in keys]), communities,
                      LexicalIndex([c.summary for c in communities]))

    # ------------------------------------------------------------------ retrieval

    def _fact_scores(self, index: _Index, query: str, as_of: datetime | None) -> np.ndarray:
        """Fused, MMR-reranked score of every fact for ``query`` (0 = not retrieved)."""
        n = len(index.fact_vectors)
        facts = index.state.graph.facts[:n]  # the graph may have grown since this view (a retried extraction)
        if n == 0:
            return np.zeros(0)
        q = self.embed_query(query)
        c = self.candidates
        dense = index.fact_vectors @ q
        lexical = index.fact_lexical.scores(query)
        rankings = [np.argsort(-dense, kind="stable")[:c], _positive_order(lexical)[:c]]
        if index.entity_keys:
            ent_dense = np.argsort(-(index.entity_vectors @ q), kind="stable")[: self.seed_entities]
            ent_lex = _positive_order(index.entity_lexical.scores(query))[: self.seed_entities]
            seeds = [index.entity_keys[i] for i in dict.fromkeys([*ent_lex.tolist(), *ent_dense.tolist()])]
            dist = bfs_distances(index.state.graph.graph, seeds, self.bfs_depth)
            hops = [min(dist.get(normalise_name(f.subject), 99), dist.get(normalise_name(f.object), 99)) for f in facts]
            near = sorted((h, -dense[i], i) for i, h in enumerate(hops) if h < 99)  # closest, then most similar
            rankings.append(np.array([i for _, _, i in near[:c]], dtype=np.int64))
        if index.communities and self.seed_communities:
            rankings.append(self._community_ranking(index, query, q, dense)[:c])
        fused = reciprocal_rank_fusion(rankings, n)
        valid = np.fromiter((f.valid(as_of) for f in facts), bool, n)
        fused[~valid] *= self.history_weight
        head = _positive_order(fused)[:c]
        order = mmr(index.fact_vectors.astype(np.float64), fused, head, lam=self.mmr_lambda)
        fused[order] = np.sort(fused[head])[::-1]  # the same scores, in MMR's order
        return fused

    def _community_ranking(self, index: _Index, query: str, q: np.ndarray, dense: np.ndarray) -> np.ndarray:
        """Facts of the communities whose summaries best match the query: best community first, then by
        the fact's own similarity."""
        vectors = np.stack([c.vector for c in index.communities if c.vector is not None])
        k = self.seed_communities
        picked = dict.fromkeys([*np.argsort(-(vectors @ q), kind="stable")[:k].tolist(),
                                *_positive_order(index.community_lexical.scores(query))[:k].tolist()])
        graph = index.state.graph
        order: list[int] = []
        for c in picked:
            ids = set(graph.fact_ids_of(index.communities[c].members)) - set(order)
            order += sorted(ids, key=lambda i: (-dense[i], i))
        return np.array(order, dtype=np.int64)

    def score(self, store: Store, user_id: str, query: str, *, query_time: datetime | None = None) -> Scored:
        """Score every turn by its best fact (a fact scores the turns of its source episodes)."""
        index = self._index(store, user_id)
        fact_scores = self._fact_scores(index, query, query_time)
        scores = np.full(len(index.docs.table), -np.inf)
        episodes = index.state.graph.episodes
        for i in np.flatnonzero(fact_scores > 0):
            for ep_id in index.state.graph.facts[i].episodes:
                ep = episodes[ep_id]
                row = index.row_of.get((ep.session_id, ep.turn))
                if row is not None:
                    scores[row] = max(scores[row], fact_scores[i])
        return Scored(index.docs, scores)

    def search_facts(self, store: Store, user_id: str, query: str, *, k: int = 10, as_of: datetime | None = None,
                     include_invalid: bool = False) -> list[FactHit]:
        """The ``k`` best facts for ``query``: valid at ``as_of`` (default now), or any with ``include_invalid``."""
        index = self._index(store, user_id)
        graph = index.state.graph
        scores = self._fact_scores(index, query, as_of)
        keep = [i for i in _positive_order(scores) if include_invalid or graph.facts[i].valid(as_of)][:k]
        return [FactHit(graph.facts[i], float(scores[i]), tuple(graph.episodes[e] for e in graph.facts[i].episodes))
                for i in keep]

    # ------------------------------------------------------------------ reading the graph

    def graph(self, store: Store, user_id: str) -> TemporalGraph:
        """The user's temporal graph, up to date with the store."""
        return self._index(store, user_id).state.graph

    def facts(self, store: Store, user_id: str, *, entity: str | None = None, as_of: datetime | None = None,
              include_invalid: bool = False) -> list[Fact]:
        """The user's facts (see :meth:`memgas.kernels.temporal_graph.TemporalGraph.facts_of`)."""
        return self.graph(store, user_id).facts_of(entity, as_of=as_of, include_invalid=include_invalid)

    def history(self, store: Store, user_id: str, fact_id: int) -> list[Fact]:
        """How a fact changed, oldest version first (see :meth:`memgas.kernels.temporal_graph.TemporalGraph.history`)."""
        return self.graph(store, user_id).history(fact_id)

    def communities(self, store: Store, user_id: str) -> list[CommunitySummary]:
        """The user's summarised communities (those of at least ``min_community`` entities), as of the last batch."""
        return list(self._index(store, user_id).communities)

    def stats(self, store: Store, user_id: str) -> dict[str, int]:
        """Counts for the user: episodes, triples, new, duplicate (by the judge), duplicate_free (without an
        LLM call), contradiction, invalidated, extraction_failures (failed attempts, retries included),
        judge_failures, community_summaries (written, by the LLM or extractive), community_failures (fell
        back to extractive), judge_calls, facts, entities, and pending_sessions / pending_extractions
        (sessions and messages whose extraction waits for a retry)."""
        state = self._index(store, user_id).state
        return {**{name: state.stats[name] for name in _COUNTS}, "judge_calls": state.graph.judge_calls,
                "facts": len(state.graph.facts), "entities": len(state.graph.entities),
                "pending_sessions": len(state.pending), "pending_extractions": state.pending_count()}

    def pending(self, store: Store, user_id: str | None = None) -> dict[str, int]:
        """Sessions and messages whose extraction waits for a retry, for one user or every user of the store: a
        graph this process has not built yet is built first (retrying what failed in another process), so the
        counts are right in any process."""
        for user in ([user_id] if user_id is not None else store.list_users()):
            with self._lock:
                built = user in self._graphs.get(store, {})
            if not built and store.has_user(user):
                self.prepare(store, user)
        with self._lock:
            states = [s for u, s in self._graphs.get(store, {}).items() if user_id is None or u == user_id]
            return {"pending_sessions": sum(len(s.pending) for s in states),
                    "pending_extractions": sum(s.pending_count() for s in states)}

    def degraded(self, store: Store, user_id: str) -> str | None:
        """How many of the user's messages wait for fact extraction (their LLM call failed), or ``None``."""
        waiting = self.pending(store, user_id)["pending_extractions"]
        if not waiting:
            return None
        return (f"{waiting} message{'s' if waiting != 1 else ''} of user {user_id!r} wait for fact extraction "
                "(the LLM could not be reached)")

    def retry_pending(self, store: Store, user_id: str) -> int:
        """Retry the user's pending extractions now; return how many messages are still pending.

        Raises:
            InvalidInputError: no LLM.
        """
        llm = self._require_llm()
        live = self._indexes.get(store, user_id)  # a build retries too; then nothing may be left
        with store.reading(), self._lock:  # the store's lock first, as in a build
            state = live.view.state
            if state.pending and self._retry(llm, state, _Breaker()):
                self._summarize(llm, state, user_id)
                live.view = self._view(store, user_id, state)
            return state.pending_count()

    def config(self) -> dict[str, Any]:
        return {**super().config(), "llm": None if self.llm is None else self.llm.id,
                "context_messages": self.context_messages, "roles": list(self.roles), "max_chars": self.max_chars,
                "seed_entities": self.seed_entities, "bfs_depth": self.bfs_depth, "candidates": self.candidates,
                "mmr_lambda": self.mmr_lambda, "history_weight": self.history_weight,
                "refresh_every": self.refresh_every, "min_community": self.min_community,
                "community_facts": self.community_facts, "seed_communities": self.seed_communities}


def _positive_order(scores: np.ndarray) -> np.ndarray:
    """Indexes of the positive scores, best first."""
    pos = np.flatnonzero(scores > 0)
    return pos[np.argsort(-scores[pos], kind="stable")]
