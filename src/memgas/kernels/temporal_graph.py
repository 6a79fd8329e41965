"""A temporal knowledge graph in the style of Zep/Graphiti: episodes, bi-temporal facts, communities.

The pure core of the ``zep`` memory method (:mod:`memgas.methods.zep`): no I/O and no LLM calls here.
The LLM that judges a new fact against existing ones is injected as a callable, and the prompts and
the parsing/validation of the LLM's JSON are plain functions, so every decision rule is testable.

Layers:
    * :class:`Episode`: a raw message with its event time (the session timestamp); never altered.
    * :class:`Fact`: a (subject, relation, object) triple between two :class:`Entity` nodes, valid
      from ``valid_at`` (inclusive) to ``invalid_at`` (exclusive; ``None`` = still valid), with the
      ids of the episodes it came from. A contradicted fact is closed, never deleted.
    * Communities: Louvain clusters of the entity graph, refreshed in batches; a new entity inherits
      its neighbours' most common label in between.

References:
    Rasmussen et al., "Zep: A Temporal Knowledge Graph Architecture for Agent Memory", arXiv:2501.13956 (2025).
    Cormack et al., "Reciprocal Rank Fusion outperforms Condorcet...", SIGIR 2009 (RRF, k = 60).
    Carbonell & Goldstein, "The use of MMR, diversity-based reranking...", SIGIR 1998.
"""

from __future__ import annotations

import json
import re
from collections import Counter, deque
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Callable, Iterable, Literal, Mapping, Sequence

import numpy as np

if TYPE_CHECKING:
    import networkx as nx

from memgas.core.errors import InvalidInputError, NotFoundError
from memgas.core.validate import naive_utc

__all__ = [
    "Episode",
    "Entity",
    "Fact",
    "Triple",
    "Verdict",
    "Decision",
    "Judge",
    "TemporalGraph",
    "normalise_name",
    "fact_tokens",
    "jaccard",
    "EXTRACT_SCHEMA",
    "JUDGE_SCHEMA",
    "COMMUNITY_SCHEMA",
    "community_messages",
    "parse_community_summary",
    "extractive_community_summary",
    "extraction_messages",
    "parse_triples",
    "judge_messages",
    "parse_verdict",
    "mmr",
    "bfs_distances",
]

_WORD = re.compile(r"[^\w\s'-]+")


def _utc_naive(t: datetime | None) -> datetime | None:
    """Aware times as naive UTC, so the benchmarks' naive times and aware ones compare."""
    return None if t is None else naive_utc(t)


def _now() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


def normalise_name(name: str) -> str:
    """An entity's key: lower case, punctuation dropped (but ``'`` and ``-``), whitespace collapsed."""
    return " ".join(_WORD.sub(" ", name.lower()).split())


def fact_tokens(text: str) -> frozenset[str]:
    """The set of normalised words of a fact's text (for near-duplicate detection)."""
    return frozenset(normalise_name(text).split())


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """Jaccard similarity of two token sets (1.0 for two empty sets)."""
    return 1.0 if not a and not b else len(a & b) / len(a | b)


@dataclass(slots=True)
class Episode:
    """One raw message: ``id`` is ``"<session>#<message index>"``; ``turn`` is its turn index in the session."""

    id: str
    session_id: str
    turn: int
    speaker: str
    content: str
    event_time: datetime | None
    created_at: datetime = field(default_factory=_now)


@dataclass(slots=True)
class Entity:
    """A graph node: ``key`` is the normalised name, ``name`` the first spelling seen."""

    key: str
    name: str
    community: int | None = None


@dataclass(slots=True)
class Fact:
    """A (subject, relation, object) edge with its validity interval and source episodes.

    ``valid_at`` is inclusive and ``invalid_at`` exclusive (event time; ``None`` = open); ``created_at``
    is when it was written; ``invalidated_by`` the id of the fact that closed it.
    """

    id: int
    subject: str
    relation: str
    object: str
    valid_at: datetime | None
    invalid_at: datetime | None = None
    created_at: datetime = field(default_factory=_now)
    episodes: list[str] = field(default_factory=list)
    embedding: np.ndarray | None = None
    invalidated_by: int | None = None

    @property
    def text(self) -> str:
        """The fact as one sentence-like line, ``subject relation object``."""
        return f"{self.subject} {self.relation} {self.object}"

    def valid(self, as_of: datetime | None = None) -> bool:
        """Whether the fact holds at ``as_of`` (``None``: now, i.e. not invalidated)."""
        if as_of is None:
            return self.invalid_at is None
        t = _utc_naive(as_of)
        start, end = _utc_naive(self.valid_at), _utc_naive(self.invalid_at)
        return (start is None or start <= t) and (end is None or t < end)  # type: ignore[operator]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable view (no embedding)."""
        def iso(t: datetime | None) -> str | None:
            return t.isoformat() if t else None

        return {"id": self.id, "subject": self.subject, "relation": self.relation, "object": self.object,
                "valid_at": iso(self.valid_at), "invalid_at": iso(self.invalid_at),
                "created_at": iso(self.created_at), "episodes": list(self.episodes),
                "invalidated_by": self.invalidated_by}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Fact:
        """The fact of a :meth:`to_dict` view (as the REST API returns it; no embedding)."""
        def when(key: str) -> datetime | None:
            return datetime.fromisoformat(data[key]) if data.get(key) else None

        by = data.get("invalidated_by")
        return cls(id=int(data["id"]), subject=str(data["subject"]), relation=str(data["relation"]),
                   object=str(data["object"]), valid_at=when("valid_at"), invalid_at=when("invalid_at"),
                   created_at=when("created_at") or _now(), episodes=[str(e) for e in data.get("episodes", [])],
                   invalidated_by=None if by is None else int(by))


@dataclass(frozen=True, slots=True)
class Triple:
    """An extracted (subject, relation, object), stripped; not yet a fact."""

    subject: str
    relation: str
    object: str

    @property
    def text(self) -> str:
        """``subject relation object``."""
        return f"{self.subject} {self.relation} {self.object}"


@dataclass(frozen=True, slots=True)
class Verdict:
    """The judge's answer for a new fact: ``ids`` are existing fact ids (the duplicate, or the contradicted)."""

    kind: Literal["duplicate", "contradiction", "new"]
    ids: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Decision:
    """What :meth:`TemporalGraph.add_fact` did: ``kind`` with ``fact`` (written or matched) and
    ``invalidated`` (ids closed); ``by_llm`` tells whether the judge was asked."""

    kind: Literal["duplicate", "contradiction", "new"]
    fact: Fact
    invalidated: tuple[int, ...] = ()
    by_llm: bool = False


#: ``judge(new fact text, candidate facts) -> Verdict`` (an LLM call in :mod:`memgas.methods.zep`).
Judge = Callable[[Triple, Sequence[Fact]], Verdict]


class TemporalGraph:
    """Entities, facts and episodes of one user, with the dedup / contradiction / new rule.

    Args:
        near_duplicate: token-set Jaccard at or above which a fact between the same two entities is a
            duplicate without asking the judge (exact normalised text always is).
        max_candidates: most existing facts shown to the judge.
        refresh_every: recompute the Louvain communities after this many new facts (a batch).
        seed: Louvain's random seed (communities are reproducible).
    """

    def __init__(self, *, near_duplicate: float = 0.85, max_candidates: int = 8, refresh_every: int = 50,
                 seed: int = 0) -> None:
        if not 0 < near_duplicate <= 1 or max_candidates < 1 or refresh_every < 1:
            raise InvalidInputError("0 < near_duplicate <= 1, max_candidates >= 1 and refresh_every >= 1")
        self.near_duplicate = near_duplicate
        self.max_candidates = max_candidates
        self.refresh_every = refresh_every
        self.seed = seed
        self.episodes: dict[str, Episode] = {}
        self.entities: dict[str, Entity] = {}
        self.facts: list[Fact] = []
        import networkx as nx  # here, not at module level: a process that only searches other methods needs none

        self.graph = nx.MultiGraph()  # entity key → entity key, one edge per fact (key = fact id)
        self.judge_calls = 0
        #: label → entity keys, as of the last Louvain refresh (empty before the first).
        self.communities: dict[int, list[str]] = {}
        self._since_refresh = 0
        self._next_label = 0

    # ------------------------------------------------------------------ writing

    def add_episode(self, episode: Episode) -> None:
        """Store a raw message (first, before anything is derived from it, so it is never lost)."""
        self.episodes[episode.id] = episode

    def _entity(self, name: str) -> Entity:
        key = normalise_name(name)
        if key not in self.entities:
            self.entities[key] = Entity(key, name.strip())
            self.graph.add_node(key)
        return self.entities[key]

    def fact_ids_of(self, keys: Iterable[str]) -> list[int]:
        """Ids of the facts (valid or not) that have one of the entity ``keys`` as subject or object, ascending."""
        return sorted({k for n in keys if n in self.graph for _, _, k in self.graph.edges(n, keys=True)})

    def candidates(self, triple: Triple, embedding: np.ndarray | None = None) -> list[Fact]:
        """Currently valid facts to judge ``triple`` against: its entities' facts, then the most similar ones."""
        ids = self.fact_ids_of({normalise_name(triple.subject), normalise_name(triple.object)})
        found = [self.facts[i] for i in ids if self.facts[i].invalid_at is None]
        if embedding is not None:
            known = set(ids)
            pool = [f for f in self.facts if f.invalid_at is None and f.embedding is not None and f.id not in known]
            if pool:
                sims = np.stack([f.embedding for f in pool]) @ embedding  # type: ignore[misc]
                found += [pool[i] for i in np.argsort(-sims, kind="stable")[: self.max_candidates]]
        return found[: self.max_candidates]

    def near_duplicate_of(self, triple: Triple) -> Fact | None:
        """A valid fact between the same entities whose text equals or nearly equals ``triple``'s (no LLM)."""
        s, o = normalise_name(triple.subject), normalise_name(triple.object)
        tokens = fact_tokens(triple.text)
        between = self.graph.get_edge_data(s, o) if self.graph.has_edge(s, o) else {}
        for i in sorted(between):  # the facts between the two entities (either way round), oldest first
            fact: Fact = self.facts[i]
            if fact.invalid_at is None and jaccard(tokens, fact_tokens(fact.text)) >= self.near_duplicate:
                return fact
        return None

    def add_fact(
        self,
        triple: Triple,
        *,
        episode_id: str,
        valid_at: datetime | None,
        embedding: np.ndarray | None = None,
        judge: Judge | None = None,
    ) -> Decision:
        """Add an extracted triple: a duplicate gains the episode; a contradiction closes old facts; else new.

        Exact and near-exact duplicates (see :meth:`near_duplicate_of`) are caught without the judge.
        Otherwise the judge (when given and there are candidates) decides. A contradicted fact gets
        ``invalid_at = valid_at`` of the new one, unless the new fact is older than it (a late-arriving
        memory), in which case the new fact is written already closed at the old fact's ``valid_at``.
        A message does not contradict itself: facts from the same episode are never closed by one
        another (a small model's judge otherwise closes sibling facts, e.g. two brands in one list, at
        once). Nothing changes if the judge raises.

        Raises:
            InvalidInputError: an empty subject, relation or object.
        """
        if not all(normalise_name(x) for x in (triple.subject, triple.relation, triple.object)):
            raise InvalidInputError(f"a fact needs a subject, a relation and an object: {triple!r}")
        same = self.near_duplicate_of(triple)
        verdict, by_llm = (Verdict("duplicate", (same.id,)), False) if same is not None else (Verdict("new"), False)
        if same is None and judge is not None:
            cands = self.candidates(triple, embedding)
            if cands:
                verdict, by_llm = judge(triple, cands), True
                self.judge_calls += 1
        if verdict.kind == "contradiction":
            kept = tuple(i for i in verdict.ids if episode_id not in self.facts[i].episodes)
            verdict = Verdict("contradiction", kept) if kept else Verdict("new")
        if verdict.kind == "duplicate" and verdict.ids:
            old = self.facts[verdict.ids[0]]
            if episode_id not in old.episodes:
                old.episodes.append(episode_id)
            return Decision("duplicate", old, by_llm=by_llm)
        fact = Fact(len(self.facts), triple.subject, triple.relation, triple.object, valid_at,
                    episodes=[episode_id], embedding=embedding)
        closed: list[int] = []
        if verdict.kind == "contradiction":
            start = _utc_naive(valid_at)
            for i in verdict.ids:
                old = self.facts[i]
                old_start = _utc_naive(old.valid_at)
                if start is not None and old_start is not None and start < old_start:
                    fact.invalid_at, fact.invalidated_by = old.valid_at, old.id  # the new fact is history
                else:
                    old.invalid_at, old.invalidated_by = valid_at if valid_at is not None else fact.created_at, fact.id
                    closed.append(i)
        self._write(fact)
        return Decision("contradiction" if verdict.kind == "contradiction" else "new", fact, tuple(closed), by_llm)

    def _write(self, fact: Fact) -> None:
        subject, obj = self._entity(fact.subject), self._entity(fact.object)
        self.facts.append(fact)
        self.graph.add_edge(subject.key, obj.key, key=fact.id)
        for entity in (subject, obj):
            if entity.community is None:
                self._inherit(entity)
        self._since_refresh += 1
        if self._since_refresh >= self.refresh_every:
            self.refresh_communities()

    def _inherit(self, entity: Entity) -> None:
        labels = Counter(self.entities[n].community for n in self.graph.neighbors(entity.key)
                         if self.entities[n].community is not None)
        if labels:
            entity.community = min(labels, key=lambda c: (-labels[c], c))  # most common, then lowest label
        else:
            entity.community, self._next_label = self._next_label, self._next_label + 1

    def refresh_communities(self) -> dict[int, list[str]]:
        """Recompute every entity's community with Louvain over the graph of currently valid facts.

        Labels are numbered by community size, largest first. Returns label → entity keys.
        """
        import networkx as nx

        simple = nx.Graph()
        simple.add_nodes_from(self.graph.nodes)
        for u, v, k in self.graph.edges(keys=True):
            if self.facts[k].invalid_at is None and u != v:
                w = simple.get_edge_data(u, v, {"weight": 0})["weight"]
                simple.add_edge(u, v, weight=w + 1)
        groups = nx.community.louvain_communities(simple, weight="weight", seed=self.seed) if len(simple) else []
        groups = sorted((sorted(g) for g in groups), key=lambda g: (-len(g), g[0]))
        for label, group in enumerate(groups):
            for key in group:
                self.entities[key].community = label
        self._next_label = len(groups)
        self._since_refresh = 0
        self.communities = {label: group for label, group in enumerate(groups)}
        return dict(self.communities)

    # ------------------------------------------------------------------ reading

    def facts_of(self, entity: str | None = None, *, as_of: datetime | None = None,
                 include_invalid: bool = False) -> list[Fact]:
        """Facts (of ``entity`` if given), valid at ``as_of`` (default: now), or all with ``include_invalid``.

        Raises:
            InvalidInputError: ``include_invalid`` together with ``as_of``.
        """
        if include_invalid and as_of is not None:
            raise InvalidInputError("as_of selects the facts valid at a time; do not combine it with include_invalid")
        pool = self.facts
        if entity is not None:
            pool = [self.facts[i] for i in self.fact_ids_of([normalise_name(entity)])]
        return [f for f in pool if include_invalid or f.valid(as_of)]

    def history(self, fact_id: int) -> list[Fact]:
        """Every version of a fact: the chain of facts linked by ``invalidated_by``, oldest first.

        Raises:
            NotFoundError: no fact has this id.
        """
        if not 0 <= fact_id < len(self.facts):
            raise NotFoundError(f"no fact {fact_id}")
        links: dict[int, set[int]] = {}
        for f in self.facts:
            if f.invalidated_by is not None:
                links.setdefault(f.id, set()).add(f.invalidated_by)
                links.setdefault(f.invalidated_by, set()).add(f.id)
        seen, todo = {fact_id}, [fact_id]
        while todo:
            for j in links.get(todo.pop(), ()):
                if j not in seen:
                    seen.add(j)
                    todo.append(j)
        return sorted((self.facts[i] for i in seen),
                      key=lambda f: (_utc_naive(f.valid_at) or datetime.min, f.id))


# ----------------------------------------------------------------------------- prompts and parsing

_NAME = {"type": "string", "minLength": 1, "maxLength": 200}
#: The JSON the extraction call must return.
EXTRACT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"facts": {"type": "array", "maxItems": 20, "items": {
        "type": "object", "properties": {"subject": _NAME, "relation": _NAME, "object": _NAME},
        "required": ["subject", "relation", "object"]}}},
    "required": ["facts"],
}
#: The JSON the judge call must return; ``ids`` index the candidates as numbered in the prompt.
JUDGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"verdict": {"type": "string", "enum": ["duplicate", "contradiction", "new"]},
                   "ids": {"type": "array", "items": {"type": "integer"}}},
    "required": ["verdict"],
}

_EXTRACT_SYSTEM = (
    "You extract facts for a long-term memory. From the CURRENT MESSAGE only (the previous messages are "
    "context), list the facts it states as (subject, relation, object) triples. Use full, canonical entity "
    "names (the speaker's name, or 'user' for the user; resolve pronouns from the context). Relations are "
    "short lower-case verb phrases such as 'lives in', 'works at', 'owns'. Skip greetings, questions and "
    'opinions about nothing specific. Reply with JSON only: {"facts": [{"subject": ..., "relation": ..., '
    '"object": ...}]}; an empty list if there is no fact.'
)
_JUDGE_SYSTEM = (
    "You maintain a memory of facts. Compare the NEW FACT with the EXISTING FACTS. Answer 'duplicate' if an "
    "existing fact states the same thing (ids: that one), 'contradiction' if the new fact makes existing "
    "facts no longer true, e.g. a new address or job (ids: those facts), else 'new'. Reply with JSON only: "
    '{"verdict": "duplicate" | "contradiction" | "new", "ids": [numbers]}.'
)


def extraction_messages(message: str, speaker: str, context: Sequence[str],
                        event_time: datetime | None) -> list[dict[str, str]]:
    """The chat messages of one extraction call: ``context`` lines (``speaker: text``) then the current message."""
    when = f"Time of the conversation: {event_time.isoformat()}\n" if event_time else ""
    previous = "\n".join(context) or "(none)"
    user = f"{when}PREVIOUS MESSAGES:\n{previous}\n\nCURRENT MESSAGE:\n{speaker}: {message}"
    return [{"role": "system", "content": _EXTRACT_SYSTEM}, {"role": "user", "content": user}]


def parse_triples(value: Any) -> list[Triple]:
    """The triples of an extraction reply, validated: stripped, none empty, no self-loop, no repeat.

    Malformed items (missing or non-string parts) are dropped, not fatal: one bad triple should not
    lose the others.

    Raises:
        InvalidInputError: the reply is not an object with a ``facts`` list.
    """
    if not isinstance(value, Mapping) or not isinstance(value.get("facts"), list):
        raise InvalidInputError(f"an extraction reply must be {{'facts': [...]}}, got {json.dumps(value)[:120]}")
    out: list[Triple] = []
    seen: set[tuple[str, str, str]] = set()
    for item in value["facts"]:
        if not isinstance(item, Mapping):
            continue
        parts = [item.get(k) for k in ("subject", "relation", "object")]
        if not all(isinstance(p, str) and normalise_name(p) for p in parts):
            continue
        s, r, o = (" ".join(p.split()) for p in parts)  # type: ignore[union-attr]
        key = (normalise_name(s), normalise_name(r), normalise_name(o))
        if key[0] == key[2] or key in seen:
            continue
        seen.add(key)
        out.append(Triple(s, r, o))
    return out


def judge_messages(triple: Triple, candidates: Sequence[Fact]) -> list[dict[str, str]]:
    """The chat messages of one judge call; candidates are numbered from 0 (the ids of the reply)."""
    listed = "\n".join(f"{i}. {f.text}" for i, f in enumerate(candidates))
    user = f"EXISTING FACTS:\n{listed}\n\nNEW FACT:\n{triple.text}"
    return [{"role": "system", "content": _JUDGE_SYSTEM}, {"role": "user", "content": user}]


def parse_verdict(value: Any, candidates: Sequence[Fact]) -> Verdict:
    """A judge reply as a :class:`Verdict` over fact ids.

    Out-of-range and repeated indexes are dropped; a duplicate or contradiction left with no valid index
    becomes ``new`` (a fact is written rather than dropped on a bad reply).

    Raises:
        InvalidInputError: the reply is not an object with a known ``verdict``.
    """
    kind = value.get("verdict") if isinstance(value, Mapping) else None
    if kind not in ("duplicate", "contradiction", "new"):
        raise InvalidInputError(f"a judge verdict must be duplicate|contradiction|new, got {json.dumps(value)[:120]}")
    raw = value.get("ids") or []
    idx = [i for i in dict.fromkeys(raw if isinstance(raw, list) else [])
           if isinstance(i, int) and not isinstance(i, bool) and 0 <= i < len(candidates)]
    if kind == "new" or not idx:
        return Verdict("new")
    return Verdict(kind, tuple(candidates[i].id for i in (idx[:1] if kind == "duplicate" else idx)))


COMMUNITY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"summary": {"type": "string"}},
    "required": ["summary"],
}
_COMMUNITY_SYSTEM = (
    "You summarise one group of related entities from a user's long-term memory, so that the group can be "
    "found by a question about any of them. From the FACTS only, write 2 to 4 plain sentences naming the "
    "entities and what links them; invent nothing. Reply with JSON only: {\"summary\": \"...\"}."
)


def community_messages(names: Sequence[str], facts: Sequence[Fact]) -> list[dict[str, str]]:
    """The chat messages of one community-summary call: the members' names and their facts."""
    listed = "\n".join(f"- {f.text}" for f in facts) or "(none)"
    user = f"ENTITIES: {', '.join(names)}\n\nFACTS:\n{listed}"
    return [{"role": "system", "content": _COMMUNITY_SYSTEM}, {"role": "user", "content": user}]


def parse_community_summary(value: Any, max_chars: int = 1200) -> str:
    """The summary text of a community-summary reply, whitespace collapsed and cut to ``max_chars``.

    Raises:
        InvalidInputError: the reply is not an object with a non-empty ``summary`` string.
    """
    text = value.get("summary") if isinstance(value, Mapping) else None
    if not isinstance(text, str) or not text.strip():
        raise InvalidInputError(f"a community summary must be {{'summary': '...'}}, got {json.dumps(value)[:120]}")
    return " ".join(text.split())[:max_chars]


def extractive_community_summary(names: Sequence[str], facts: Sequence[Fact], max_facts: int = 8) -> str:
    """A community described without an LLM: its members' names, then its first ``max_facts`` facts."""
    lines = "; ".join(f.text for f in facts[:max_facts])
    return f"{', '.join(names)}: {lines}." if lines else f"{', '.join(names)}."


# ----------------------------------------------------------------------------- retrieval kernels


def mmr(vectors: np.ndarray, relevance: np.ndarray, candidates: np.ndarray, *, lam: float = 0.7,
        top: int | None = None) -> np.ndarray:
    """Maximal marginal relevance order of ``candidates``: each pick maximises
    ``lam * relevance - (1 - lam) * max cosine to the picks so far``.

    ``relevance`` is rescaled to [0, 1] over the candidates so it is on the cosine's scale. Rows of
    ``vectors`` are unit vectors. Returns up to ``top`` candidate indexes, in pick order.
    """
    cand = np.asarray(candidates, dtype=np.int64)
    top = len(cand) if top is None else min(top, len(cand))
    if top == 0:
        return cand[:0]
    rel = relevance[cand].astype(np.float64)
    span = rel.max() - rel.min()
    rel = (rel - rel.min()) / span if span > 0 else np.ones_like(rel)
    sims = vectors[cand] @ vectors[cand].T
    picked: list[int] = []
    redundancy = np.zeros(len(cand))
    free = np.ones(len(cand), dtype=bool)
    for _ in range(top):
        gain = np.where(free, lam * rel - (1 - lam) * redundancy, -np.inf)
        j = int(np.argmax(gain))
        picked.append(j)
        free[j] = False
        redundancy = np.maximum(redundancy, sims[j])
    return cand[picked]


def bfs_distances(graph: nx.Graph, seeds: Sequence[str], depth: int) -> dict[str, int]:
    """Hop distance from the nearest seed of every node within ``depth`` hops (seeds at 0)."""
    dist = {s: 0 for s in seeds if s in graph}
    queue = deque(dist)
    while queue:
        node = queue.popleft()
        if dist[node] >= depth:
            continue
        for nb in graph.neighbors(node):
            if nb not in dist:
                dist[nb] = dist[node] + 1
                queue.append(nb)
    return dist
