"""MemTree: the tree's invariants under insertion, its O(depth) updates, the LLM seam, and retrieval."""

from __future__ import annotations

import numpy as np
import pytest

from memgas.core.errors import InvalidInputError
from memgas.core.validate import make_session
from memgas.methods import MemTree, get_method
from memgas.methods.memtree import MemoryTree
from memgas.methods.trees import ExtractiveGroupSummarizer
from memgas.methods.units import embed_texts
from memgas.store import open_store


def _topic_vectors(n: int, topics: int, dim: int = 16, noise: float = 0.35, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(topics, dim))
    v = centres[rng.integers(topics, size=n)] + noise * rng.normal(size=(n, dim))
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def _grow(n: int = 120, **kwargs) -> tuple[MemoryTree, list]:
    tree = MemoryTree(16, ExtractiveGroupSummarizer(), **kwargs)
    stats = [tree.insert(v, f"memory {i}", i) for i, v in enumerate(_topic_vectors(n, 6))]
    return tree, stats


def test_every_memory_is_a_leaf_and_inner_nodes_have_two_children() -> None:
    tree, stats = _grow()
    leaves = {s.leaf for s in stats}
    assert len(leaves) == 120
    for node in range(1, len(tree)):
        if node in leaves:
            assert tree.is_leaf(node) and tree.children[node] == []
            assert tree.texts[node] == f"memory {tree.memory[node]}"
        else:
            assert not tree.is_leaf(node) and len(tree.children[node]) >= 2
        assert node in tree.children[tree.parent[node]]
        assert tree.depth[node] == tree.depth[tree.parent[node]] + 1
    assert sum(len(c) for c in tree.children) == len(tree) - 1  # a tree: every node but the root has one parent
    assert any(s.split for s in stats) and max(tree.depth) >= 3  # the fixture grows a real hierarchy


def test_insert_touches_only_its_path() -> None:
    tree, _ = _grow(80)
    n_before = len(tree)
    before_texts, before_vectors = list(tree.texts), tree.vectors.copy()
    near = _topic_vectors(80, 6)[5] + 0.01  # close to a stored memory: descends deep
    stats = tree.insert(near / np.linalg.norm(near), "the new one", 999)
    path = tree.ancestors(stats.leaf)
    assert list(stats.path) == path and len(path) == tree.depth[stats.leaf] - 1 >= 2
    # compared with at most the children of the nodes it passed through
    assert stats.compared <= sum(len(tree.children[n]) for n in [0, *path])
    changed = {n for n in range(n_before)
               if tree.texts[n] != before_texts[n] or not np.allclose(tree.vectors[n], before_vectors[n])}
    assert changed <= set(path)
    assert set(range(n_before, len(tree))) == ({stats.leaf, stats.path[0]} if stats.split else {stats.leaf})


def test_inner_vector_is_the_mean_of_the_memories_below() -> None:
    tree, stats = _grow(60)
    vectors = _topic_vectors(60, 6)
    leaf_memory = {s.leaf: i for i, s in enumerate(stats)}
    for node in range(1, len(tree)):
        if tree.is_leaf(node):
            continue
        below, todo = [], [node]
        while todo:
            n = todo.pop()
            below += [leaf_memory[n]] if tree.is_leaf(n) else []
            todo += tree.children[n]
        mean = vectors[below].mean(axis=0)
        np.testing.assert_allclose(tree.vectors[node], mean / np.linalg.norm(mean), atol=1e-5)


def test_threshold_grows_with_depth_and_shapes_the_tree() -> None:
    tree = MemoryTree(4, ExtractiveGroupSummarizer(), base_threshold=0.4, threshold_rate=0.2)
    assert tree.threshold(0) == pytest.approx(0.4) and tree.threshold(2) == pytest.approx(0.4 * np.exp(0.4))
    flat, _ = _grow(60, base_threshold=1.1)  # nothing ever matches: every memory is a child of the root
    assert len(flat) == 61 and len(flat.children[0]) == 60
    with pytest.raises(InvalidInputError):
        flat.insert(np.ones(16, dtype=np.float32) / 4, "bad id", -1)


class _ShortSummarizer:
    """A stand-in for an LLM summarizer: any object with ``summarize_group`` plugs in."""

    def __init__(self) -> None:
        self.calls = 0

    def summarize_group(self, texts, vectors) -> str:
        self.calls += 1
        return "Topic: " + " / ".join(t[:30] for t in texts[:2])


SESSIONS = {
    "garden": ["My tomatoes got blight this summer.", "I planted basil next to the tomatoes.",
               "The zucchini plants are huge."],
    "car": ["My Honda Civic needs new brake pads.", "The mechanic quoted 240 dollars for the brakes."],
    "travel": ["I booked a trip to Lisbon for October.", "I want to try pastel de nata in Belem.",
               "The flight to Lisbon leaves at 6 am."],
}



@pytest.fixture(scope="module")
def store(embedder, tmp_path_factory):
    s = open_store(tmp_path_factory.mktemp("memtree") / "m.db")
    method = MemTree(embedder)
    for i, (sid, lines) in enumerate(SESSIONS.items()):
        msgs = []
        for line in lines:
            msgs += [{"role": "user", "content": line}, {"role": "assistant", "content": "I see."}]
        method.ingest(s, make_session(msgs, user_id="u", session_id=sid, timestamp=f"2024-05-0{i + 1}T09:00:00"))
    yield s
    s.close()


def test_a_group_summarizer_makes_embedded_descriptions(embedder, store) -> None:
    summarizer = _ShortSummarizer()
    method = MemTree(embedder, group_summarizer=summarizer)
    assert method.config()["embed_descriptions"] is True
    method.prepare(store, "u")
    tree = method._indexes.get(store, "u").tree
    inner = [n for n in range(1, len(tree)) if not tree.is_leaf(n)]
    assert inner and summarizer.calls >= len(inner)
    for n in inner:
        assert tree.texts[n].startswith("Topic: ")
        np.testing.assert_allclose(tree.vectors[n], embed_texts(embedder, [tree.texts[n]])[0], atol=1e-5)


def test_retrieval_finds_the_memory(embedder, store) -> None:
    method = get_method("memtree", embedder)
    ranking = method.rank(store, "u", "How much will the brake repair cost?")
    assert ranking.sessions[0] == "car" and ranking.turns[0] == ("car", 1)
    hits = method.retrieve(store, "u", "How much will the brake repair cost?", k=3, threshold=0.1)
    assert 1 <= len(hits) <= 3 and hits[0].score >= hits[-1].score > 0.1
    assert ("car", 1) in hits[0].turns
    assert all(h.leaf == (len(h.turns) == 1) for h in hits)
    assert method.search(store, "u", "Lisbon trip", k=1)[0].session_id == "travel"


def test_an_llm_writes_the_descriptions_through_real_http(embedder, store) -> None:
    import json

    from memgas.llm.cache import ResponseCache
    from memgas.llm.openai import OpenAIChat
    from memgas.llm.wrapper import LLM
    from memgas.methods.trees import LLMGroupSummarizer
    from support.openai_stub import OpenAIStub

    with OpenAIStub(lambda body: json.dumps({"description": "Notes about errands and plans."})) as stub:
        writer = LLMGroupSummarizer(LLM(OpenAIChat("tiny", base_url=stub.base_url, max_retries=0, timeout=10),
                                        ResponseCache()))
        method = MemTree(embedder, group_summarizer=writer)
        method.prepare(store, "u")
        tree = method._indexes.get(store, "u").tree
        inner = [n for n in range(1, len(tree)) if not tree.is_leaf(n)]
        assert inner and all(tree.texts[n] == "Notes about errands and plans." for n in inner)
        assert writer.written >= len(inner) and writer.fallbacks == 0 and len(stub.requests) >= 1
    # the endpoint is gone: every description falls back to the extractive one, and is counted
    fallback = LLMGroupSummarizer(LLM(OpenAIChat("tiny", base_url=stub.base_url, max_retries=0, timeout=2)))
    tree = MemTree(embedder, group_summarizer=fallback)
    tree.prepare(store, "u")
    assert fallback.fallbacks >= 1 and fallback.written == 0
