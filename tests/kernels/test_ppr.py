from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp

from memgas.core.errors import ConvergenceError, InvalidInputError
from memgas.kernels.ppr import PPRResult, personalized_pagerank


def _random_graph(n: int, m: int, *, directed: bool, seed: int) -> nx.Graph:
    """A weighted graph with some dangling (sink) and isolated nodes among the ``n``."""
    rng = np.random.default_rng(seed)
    g = nx.DiGraph() if directed else nx.Graph()
    g.add_nodes_from(range(n))
    # The last 3 nodes stay isolated; in the directed case, nodes 0-2 only receive edges (sinks).
    pool = n - 3
    while g.number_of_edges() < m:
        u, v = (int(t) for t in rng.integers(0, pool, 2))
        if directed and u < 3:
            continue
        g.add_edge(u, v, weight=float(rng.uniform(0.05, 1.0)))
    return g


def _personalization(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    p = np.zeros(n)
    p[rng.choice(n, size=max(1, n // 5), replace=False)] = rng.uniform(0.1, 1.0, size=max(1, n // 5))
    return p


@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("damping", [0.5, 0.85])
def test_matches_networkx(directed: bool, seed: int, damping: float) -> None:
    n = 60
    g = _random_graph(n, 150, directed=directed, seed=seed)
    p = _personalization(n, seed + 100)
    expected = nx.pagerank(
        g, alpha=damping, personalization={i: p[i] for i in range(n)}, weight="weight", tol=1e-10, max_iter=500
    )
    a = nx.to_scipy_sparse_array(g, nodelist=range(n), weight="weight")
    got = personalized_pagerank(a, p, damping=damping, tol=1e-10, max_iter=500)
    assert got.converged
    assert got.scores.sum() == pytest.approx(1.0, abs=1e-9)
    np.testing.assert_allclose(got.scores, [expected[i] for i in range(n)], atol=1e-9)
    if directed:
        assert (a.sum(axis=1) == 0).sum() >= 3 + 3  # sinks and isolated nodes were exercised
    else:  # an undirected graph may skip the transposition: the same iterates
        same = personalized_pagerank(a, p, damping=damping, tol=1e-10, max_iter=500, symmetric=True)
        np.testing.assert_allclose(same.scores, got.scores, rtol=0, atol=1e-15)
        assert same.n_iter == got.n_iter


def test_matches_networkx_default_tolerance_and_iterations() -> None:
    n = 40
    g = _random_graph(n, 90, directed=True, seed=7)
    p = _personalization(n, 8)
    expected = nx.pagerank(g, alpha=0.85, personalization={i: p[i] for i in range(n)}, weight="weight")
    got = personalized_pagerank(nx.to_scipy_sparse_array(g, nodelist=range(n)), p)
    # Same start, same update, same stopping rule: identical iterates up to rounding.
    np.testing.assert_allclose(got.scores, [expected[i] for i in range(n)], atol=1e-12)


def test_isolated_nodes_get_only_restart_mass() -> None:
    # Path 0-1-2 plus isolated node 3; restart only at node 0.
    a = sp.csr_array(np.array([[0, 1, 0, 0], [1, 0, 1, 0], [0, 1, 0, 0], [0, 0, 0, 0]], dtype=float))
    res = personalized_pagerank(a, np.array([1.0, 0, 0, 0]), damping=0.85, tol=1e-12, max_iter=1000)
    assert res.scores[3] == pytest.approx(0.0, abs=1e-12)
    assert res.scores[0] > res.scores[2] > 0  # restart node above the far end of the path
    assert res.scores[:3].sum() == pytest.approx(1.0)


def test_personalization_is_normalised() -> None:
    a = sp.random_array((30, 30), density=0.2, random_state=np.random.default_rng(3), format="csr")
    p = _personalization(30, 4)
    r1 = personalized_pagerank(a, p)
    r2 = personalized_pagerank(a, 7.5 * p)
    np.testing.assert_allclose(r1.scores, r2.scores, atol=1e-15)


def test_dense_and_sparse_inputs_agree() -> None:
    a = sp.random_array((20, 20), density=0.3, random_state=np.random.default_rng(5), format="coo")
    p = np.ones(20)
    np.testing.assert_allclose(
        personalized_pagerank(a, p).scores, personalized_pagerank(a.toarray(), p).scores, atol=1e-15
    )


def test_damping_zero_returns_personalization() -> None:
    a = sp.csr_array(np.ones((3, 3)))
    res = personalized_pagerank(a, np.array([1.0, 3.0, 0.0]), damping=0.0)
    np.testing.assert_allclose(res.scores, [0.25, 0.75, 0.0])


def test_non_convergence_raises_with_details() -> None:
    g = _random_graph(50, 120, directed=False, seed=11)
    a = nx.to_scipy_sparse_array(g, nodelist=range(50))
    p = _personalization(50, 12)
    with pytest.raises(ConvergenceError, match=r"1 iterations.*L1 change"):
        personalized_pagerank(a, p, max_iter=1)
    with pytest.raises(nx.PowerIterationFailedConvergence):  # networkx agrees it has not converged
        nx.pagerank(g, personalization={i: p[i] for i in range(50)}, max_iter=1)


def test_non_convergence_flag_without_raising() -> None:
    a = nx.to_scipy_sparse_array(_random_graph(50, 120, directed=False, seed=11), nodelist=range(50))
    res = personalized_pagerank(a, _personalization(50, 12), max_iter=1, raise_on_failure=False)
    assert isinstance(res, PPRResult)
    assert not res.converged
    assert res.n_iter == 1
    assert res.err >= 50 * 1e-6
    assert res.scores.sum() == pytest.approx(1.0)


def test_empty_graph() -> None:
    res = personalized_pagerank(sp.csr_array((0, 0)), np.zeros(0))
    assert res.scores.shape == (0,)
    assert res.converged


@pytest.mark.parametrize(
    ("adjacency", "personalization", "kwargs", "match"),
    [
        (np.ones((3, 3)), np.ones(4), {}, "shape"),
        (np.ones((3, 4)), np.ones(3), {}, "square"),
        (np.ones(3), np.ones(3), {}, "square"),
        (np.array([[0, -1.0], [1, 0]]), np.ones(2), {}, "non-negative"),
        (np.array([[0, np.nan], [1, 0]]), np.ones(2), {}, "non-negative"),
        (np.ones((2, 2)), np.zeros(2), {}, "all zero"),
        (np.ones((2, 2)), np.array([1.0, -0.5]), {}, "non-negative"),
        (np.ones((2, 2)), np.array([1.0, np.inf]), {}, "non-negative"),
        (np.ones((2, 2)), np.ones(2), {"damping": 1.0}, "damping"),
        (np.ones((2, 2)), np.ones(2), {"damping": -0.1}, "damping"),
        (np.ones((2, 2)), np.ones(2), {"tol": 0.0}, "tol"),
        (np.ones((2, 2)), np.ones(2), {"max_iter": 0}, "max_iter"),
    ],
)
def test_bad_inputs(adjacency: np.ndarray, personalization: np.ndarray, kwargs: dict, match: str) -> None:
    with pytest.raises(InvalidInputError, match=match):
        personalized_pagerank(adjacency, personalization, **kwargs)


def test_large_sparse_graph() -> None:
    n, m = 100_000, 400_000
    rng = np.random.default_rng(0)
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    a = sp.coo_array((rng.uniform(0.1, 1.0, m), (src, dst)), shape=(n, n))
    a = (a + a.T).tocsr()
    p = np.zeros(n)
    p[rng.choice(n, 30, replace=False)] = 1.0
    res = personalized_pagerank(a, p, damping=0.5)
    assert res.converged
    assert res.scores.shape == (n,)
    assert res.scores.sum() == pytest.approx(1.0)
    assert (res.scores[p > 0] > 1.0 / n).all()  # the seeds hold more than their uniform share
