"""RAPTOR: the Gaussian mixture (against scikit-learn), clustering, the tree's reachability, and retrieval."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.mixture import GaussianMixture as SkGaussianMixture

from memgas.core.errors import InvalidInputError
from memgas.core.validate import make_session
from memgas.methods import Raptor, get_method
from memgas.methods.raptor import (
    RaptorConfig,
    bic_gaussian_mixture,
    build_raptor_tree,
    fit_gaussian_mixture,
    raptor_clusters,
)
from memgas.methods.trees import ExtractiveGroupSummarizer
from memgas.store import open_store


def _blobs(n_per: int, centres: np.ndarray, scale: float, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    labels = np.repeat(np.arange(len(centres)), n_per)
    return centres[labels] + scale * rng.normal(size=(labels.size, centres.shape[1])), labels


def test_mixture_fit_matches_scikit_learn() -> None:
    x, _ = _blobs(60, np.array([[0.0, 0.0, 0.0], [5.0, 5.0, 0.0], [0.0, 6.0, 4.0]]), 1.0)
    ours = fit_gaussian_mixture(x, 3, seed=1)
    sk = SkGaussianMixture(3, covariance_type="full", random_state=1).fit(x)
    assert ours.converged
    assert ours.log_likelihood / len(x) == pytest.approx(sk.score(x), abs=1e-3)
    np.testing.assert_allclose(sorted(ours.means[:, 0]), sorted(sk.means_[:, 0]), atol=1e-2)
    np.testing.assert_allclose(ours.posterior(x).sum(axis=1), 1.0)
    # BIC prefers the true number of components
    bics = {k: bic_gaussian_mixture(fit_gaussian_mixture(x, k, seed=1), len(x)) for k in range(1, 7)}
    assert min(bics, key=bics.get) == 3
    assert bics[3] == pytest.approx(sk.bic(x), rel=1e-4)
    with pytest.raises(InvalidInputError):
        fit_gaussian_mixture(x[:2], 3)


def _clustered_unit_vectors(n_per: int = 30, topics: int = 5, dim: int = 32, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x, _ = _blobs(n_per, rng.normal(size=(topics, dim)), 0.25, seed)
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def test_clusters_cover_every_row_and_respect_the_size_limit() -> None:
    v = _clustered_unit_vectors()
    clusters = raptor_clusters(v, dim=5)
    assert set(np.concatenate(clusters).tolist()) == set(range(len(v)))
    assert 3 <= len(clusters) < len(v)
    lengths = np.full(len(v), 100)
    limited = raptor_clusters(v, lengths, dim=5, max_cluster_tokens=1000)
    assert set(np.concatenate(limited).tolist()) == set(range(len(v)))
    assert len(limited) > len(clusters)
    for c in limited:  # a cluster over the limit is one that clustering cannot split
        if lengths[c].sum() > 1000:
            assert [p.size for p in raptor_clusters(v[c], dim=5)] == [c.size]


def test_every_leaf_is_reachable_from_the_top_layer() -> None:
    v = _clustered_unit_vectors(n_per=40, topics=6)
    texts = [f"leaf {i}" for i in range(len(v))]
    tree = build_raptor_tree(v, texts, RaptorConfig(dim=3), ExtractiveGroupSummarizer())
    n = tree.n_leaves
    assert tree.level.max() >= 2 and len(tree.texts) == len(tree.vectors) == len(tree.children)
    top = np.flatnonzero(tree.level == tree.level.max())
    reached, todo = set(), list(top)
    while todo:
        node = todo.pop()
        if node < n:
            reached.add(node)
        todo += tree.children[node].tolist()
    assert reached == set(range(n))
    for node in range(n, len(tree.texts)):
        kids = tree.children[node]
        assert kids.size >= 1 and (tree.level[kids] == tree.level[node] - 1).all()
        # a node covers exactly the leaves below it
        below = set(np.flatnonzero(tree.cover[kids].toarray().any(axis=0)).tolist())
        assert set(tree.cover[node].indices.tolist()) == below
        mean = v[tree.cover[node].indices].mean(axis=0) if tree.level[node] == 1 else None
        if mean is not None:
            np.testing.assert_allclose(tree.vectors[node], mean / np.linalg.norm(mean), atol=1e-5)


def test_extractive_summary_quotes_the_most_typical_members_first() -> None:
    v = np.array([[1.0, 0.0], [0.8, 0.6], [0.0, 1.0]], dtype=np.float32)
    text = ExtractiveGroupSummarizer(max_members=2, max_chars=60).summarize_group(
        ["first one", "the middle member is the most typical", "last one"], v)
    lines = text.split("\n")
    assert lines[0].startswith("the middle") and len(lines) == 2 and len(text) <= 60


SESSIONS = {
    "piano": ["I started piano lessons with Mrs. Novak.", "I practise Chopin's nocturne every evening.",
              "My piano teacher says my left hand is too heavy."],
    "move": ["We are moving to Leeds in June.", "The removal van is booked for the 14th.",
             "I still need to pack the kitchen."],
    "health": ["I sprained my ankle playing football.", "The physio gave me balance exercises."],
}



@pytest.fixture(scope="module")
def store(embedder, tmp_path_factory):
    s = open_store(tmp_path_factory.mktemp("raptor") / "m.db")
    method = Raptor(embedder)
    for i, (sid, lines) in enumerate(SESSIONS.items()):
        msgs = []
        for line in lines:
            msgs += [{"role": "user", "content": line}, {"role": "assistant", "content": "Understood."}]
        method.ingest(s, make_session(msgs, user_id="u", session_id=sid, timestamp=f"2024-02-0{i + 1}T08:00:00"))
    yield s
    s.close()


def test_retrieval_over_the_collapsed_tree(embedder, store) -> None:
    method = get_method("raptor", embedder, dim=2)  # eight leaves: a small dim lets the tree grow a layer
    index = method._indexes.get(store, "u")
    assert index.tree.level.max() >= 1
    ranking = method.rank(store, "u", "When is the removal van coming?")
    assert ranking.sessions[0] == "move" and ranking.turns[0] == ("move", 1)
    hits = method.retrieve(store, "u", "When is the removal van coming?", k=4)
    assert hits and ("move", 1) in hits[0].turns and all(h.score > 0 for h in hits)
    assert any(not h.leaf and len(h.turns) > 1 for h in method.retrieve(store, "u", "piano", k=20))
