"""``hmem`` and ``hmem-clusters``: the four-level hierarchy and its top-down descent, over a real SQLite store,
the real embedder and a scripted LLM on loopback HTTP."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memgas.core.validate import make_session
from memgas.llm.cache import ResponseCache
from memgas.llm.openai import OpenAIChat
from memgas.llm.wrapper import LLM
from memgas.methods import get_method
from memgas.methods.hmem import Hierarchy, HMem, Level, descend, spherical_kmeans
from memgas.store import open_store
from support.openai_stub import OpenAIStub

SESSIONS = {
    "s1": ["I ran 10 km this morning before work.", "My knee hurts a bit after the run.",
           "The knee hurts when I climb stairs, too."],
    "s2": ["My manager moved the product launch to June.", "I also started a half-marathon training plan."],
}
#: The scripted filing: a session's first user line → its memories (turn 2 of s1 is cited by none).
FILED = {
    "I ran 10 km": [{"domain": "Health", "category": "Running", "trace": "The user ran 10 km.", "turns": [0]},
                    {"domain": "Health", "category": "Injuries", "trace": "The user's knee hurts.", "turns": [1]}],
    "My manager moved": [
        {"domain": "Work", "category": "Projects", "trace": "The launch moved to June.", "turns": [0]},
        {"domain": "health", "category": "running", "trace": "Half-marathon training started.", "turns": [1, 7]}],
}


def respond(body: dict[str, Any]) -> str:
    user = body["messages"][1]["content"]
    return json.dumps({"memories": next(v for k, v in FILED.items() if k in user)})


def _fill(method: HMem, store: Any) -> None:
    for day, (sid, lines) in enumerate(SESSIONS.items(), 1):
        msgs = [m for line in lines for m in ({"role": "user", "content": line}, {"role": "assistant", "content": "OK."})]
        method.ingest(store, make_session(msgs, user_id="u", session_id=sid, timestamp=f"2024-05-0{day}T10:00:00"))


@pytest.fixture()
def store(tmp_path: Path) -> Any:
    s = open_store(tmp_path / "m.db")
    yield s
    s.close()


def _unit(*xs: float) -> np.ndarray:
    v = np.asarray(xs, dtype=np.float32)
    return v / np.linalg.norm(v)


def test_the_descent_only_visits_children_of_the_chosen_parents() -> None:
    q = _unit(1, 0, 0)
    # domain 0 is nearer the query, but the episode nearest the query (row 11) lies under domain 1
    level = lambda vs, kids: Level(tuple(str(i) for i in range(len(vs))), np.stack(vs), tuple(map(np.asarray, kids)))
    h = Hierarchy(
        domains=level([_unit(1, 0.2, 0), _unit(0.2, 1, 0)], [[0, 1], [2]]),
        categories=level([_unit(1, 0.5, 0), _unit(1, 0, 0.6), _unit(1, 0, 0)], [[0], [1], [2]]),
        traces=level([_unit(1, 0.4, 0), _unit(1, 0, 0.7), _unit(1, 0, 0)], [[1, 2], [3], [11]]),
    )
    assert descend(h, q, (1, 1, 1)).tolist() == [1, 2]  # domain 0 → category 0 (nearer than 1) → trace 0
    assert descend(h, q, (1, 2, 2)).tolist() == [1, 2, 3]  # both categories of domain 0, never domain 1's
    assert descend(h, q, (2, 3, 3)).tolist() == [1, 2, 3, 11]


def test_llm_filing_builds_four_levels_with_positional_pointers(embedder, stub: OpenAIStub, store: Any) -> None:
    stub.responder = respond
    llm = LLM(OpenAIChat("tiny", base_url=stub.base_url, max_retries=0, timeout=10), ResponseCache())
    hmem: HMem = get_method("hmem", embedder, llm=llm)  # type: ignore[assignment]
    _fill(hmem, store)
    h = hmem.hierarchy(store, "u")
    assert h.domains.labels == ("health", "work")  # merged case-insensitively across sessions
    assert h.categories.labels == ("health / running", "health / injuries", "work / projects")
    assert [c.tolist() for c in h.domains.children] == [[0, 1], [2]]
    assert [c.tolist() for c in h.categories.children] == [[0, 3], [1], [2]]
    view = hmem._indexes.get(store, "u")
    row = view.corpus.row_of
    # the uncited "stairs" turn joins the memory sharing most words with it; the invalid turn 7 is dropped
    assert h.traces.children[1].tolist() == [row[("s1", 1)], row[("s1", 2)]]
    assert h.traces.children[3].tolist() == [row[("s2", 1)]]
    assert sorted(np.concatenate(h.traces.children).tolist()) == sorted(row.values())
    assert len(stub.requests) == 2  # one call per session
    ranking = hmem.rank(store, "u", "How is my marathon training going?")
    assert ranking.turns[0] in (("s2", 1), ("s1", 0)) and len(ranking.turns) == 5


def test_clusters_variant_is_deterministic_and_covers_every_turn(embedder, store: Any) -> None:
    hmem: HMem = get_method("hmem-clusters", embedder, fanout=2)  # type: ignore[assignment]
    _fill(hmem, store)
    h = hmem.hierarchy(store, "u")
    rows = sorted(hmem._indexes.get(store, "u").corpus.row_of.values())
    assert sorted(np.concatenate(h.traces.children).tolist()) == rows  # every turn under exactly one trace
    assert sorted(np.concatenate(h.categories.children).tolist()) == list(range(len(h.traces.labels)))
    assert sorted(np.concatenate(h.domains.children).tolist()) == list(range(len(h.categories.labels)))
    assert len(h.traces.labels) <= 3 and len(h.domains.labels) <= len(h.categories.labels) <= len(h.traces.labels)
    vectors = embedder.embed([line for lines in SESSIONS.values() for line in lines])
    labels = spherical_kmeans(vectors, 3)
    np.testing.assert_array_equal(labels, spherical_kmeans(vectors, 3))
    assert sorted(set(labels.tolist())) == list(range(labels.max() + 1))
    assert hmem.llm is None and hmem.rank(store, "u", "product launch date").turns[0] == ("s2", 0)


def test_reached_episodes_rank_before_nearer_ones_outside_the_branch(embedder, store: Any) -> None:
    hmem: HMem = get_method("hmem-clusters", embedder, fanout=2, beams=(1, 1, 1))  # type: ignore[assignment]
    _fill(hmem, store)
    view = hmem._indexes.get(store, "u")
    q = hmem.embed_query("knee pain after running")
    reached = descend(view.hierarchy, q, hmem.beams)
    scores = hmem.score(store, "u", "knee pain after running").scores
    others = np.setdiff1d(view.episodes, reached)
    assert len(reached) and len(others) and scores[reached].min() > scores[others].max()
