"""RAPTOR: a tree of recursive cluster summaries, searched as a collapsed tree.

Sarthi et al., 2024, "RAPTOR: Recursive Abstractive Processing for Tree-Organized Retrieval"
(ICLR 2024), a MemGAS baseline. Built bottom-up from a user's turns (the leaves):

1. the current layer's vectors are reduced to ``dim`` dimensions and clustered by a Gaussian
   mixture whose number of components minimises the BIC; membership is soft (a node joins every
   cluster whose posterior exceeds ``membership``, and at least its most likely one), so a node may
   have several parents;
2. clustering is two-stage, as in the reference code: a global clustering, then a local one inside
   each global cluster; a cluster whose members' texts exceed ``max_cluster_tokens`` is clustered
   again;
3. each cluster becomes a node of the next layer holding a summary of its members
   (:class:`GroupSummarizer`); layers are added until a layer has at most ``dim + 1`` nodes, a
   clustering no longer reduces the layer, or ``max_levels`` is reached.

Retrieval is over the collapsed tree: the query is compared with every node at once; a turn scores
as the best node that covers it (its own leaf or any summary above it), ties broken by its own
similarity (see :func:`memgas.kernels.segment.structure_scores`); :meth:`Raptor.retrieve` returns the top-k
nodes above a threshold, the context an LLM would read.

Deviations from the paper, all stated: UMAP is replaced by PCA (no extra dependency, deterministic);
the BIC is compared over a geometric grid of at most 12 component counts up to ``max_clusters``
(the reference code fits every count, most of the build time);
without an LLM a summary is extractive (:class:`ExtractiveGroupSummarizer`) and its node vector is the
normalised centroid of its members (what an extractive selection stands for; no embedding pass);
with an LLM summarizer (any object with ``summarize_group``) the summary text is embedded, as in the
paper. Leaves are turns, not 100-token chunks. The tree is rebuilt from the store whenever the
user's memory changes (cached per store version).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable, Sequence

import numpy as np
import scipy.sparse as sp

from memgas.core.errors import InvalidInputError
from memgas.embed.base import Embedder
from memgas.kernels.segment import chronological_rows, structure_scores
from memgas.methods.base import ConfiguredMethod
from memgas.methods.index import IndexCache, UserIndex, build_user_index
from memgas.methods.ranking import Scored
from memgas.methods.trees import ExtractiveGroupSummarizer, GroupSummarizer, TreeHit, tree_hits
from memgas.methods.units import embed_texts
from memgas.store import Store

__all__ = [
    "GaussianMixture", "fit_gaussian_mixture", "bic_gaussian_mixture", "raptor_clusters", "RaptorConfig",
    "RaptorTree", "build_raptor_tree", "Raptor",
]

_LOG_2PI = math.log(2.0 * math.pi)


# ----------------------------------------------------------------------------- Gaussian mixture


@dataclass(frozen=True, slots=True)
class GaussianMixture:
    """A fitted full-covariance Gaussian mixture.

    Attributes:
        weights: ``(k,)`` mixing weights.
        means: ``(k, d)`` component means.
        prec_chol: ``(k, d, d)`` Cholesky factors of the precision matrices (upper triangular,
            ``precision = prec_chol @ prec_chol.T``), as scikit-learn stores them.
        log_likelihood: total log-likelihood of the fitted sample.
        n_iter: EM iterations run.
        converged: whether the per-sample log-likelihood gain fell below ``tol``.
    """

    weights: np.ndarray
    means: np.ndarray
    prec_chol: np.ndarray
    log_likelihood: float
    n_iter: int
    converged: bool

    def log_joint(self, x: np.ndarray) -> np.ndarray:
        """``log(w_k · N(x_i | μ_k, Σ_k))``, shape ``(n, k)``."""
        return _log_joint(np.asarray(x, dtype=np.float64), self.weights, self.means, self.prec_chol)

    def posterior(self, x: np.ndarray) -> np.ndarray:
        """Per row of ``x``, the posterior probability of each component, shape ``(n, k)``."""
        lj = self.log_joint(x)
        return np.exp(lj - np.logaddexp.reduce(lj, axis=1, keepdims=True))


def _log_joint(x: np.ndarray, weights: np.ndarray, means: np.ndarray, prec_chol: np.ndarray) -> np.ndarray:
    y = np.einsum("nd,kde->kne", x, prec_chol) - np.einsum("kd,kde->ke", means, prec_chol)[:, None]
    log_det = np.log(np.diagonal(prec_chol, axis1=1, axis2=2)).sum(axis=1)
    return (-0.5 * (x.shape[1] * _LOG_2PI + (y * y).sum(axis=2)) + log_det[:, None]).T + np.log(weights)


def _kmeans_pp(x: np.ndarray, k: int, rng: np.random.Generator, iters: int = 10) -> np.ndarray:
    """Hard labels from k-means++ seeding and a few Lloyd iterations (the mixture's initialisation)."""
    centers = [x[rng.integers(x.shape[0])]]
    d2 = ((x - centers[0]) ** 2).sum(axis=1)
    for _ in range(1, k):
        p = d2 / d2.sum() if d2.sum() > 0 else np.full(x.shape[0], 1.0 / x.shape[0])
        centers.append(x[rng.choice(x.shape[0], p=p)])
        d2 = np.minimum(d2, ((x - centers[-1]) ** 2).sum(axis=1))
    c = np.stack(centers)
    labels = np.zeros(x.shape[0], dtype=np.int64)
    for _ in range(iters):
        labels = ((x[:, None, :] - c[None]) ** 2).sum(axis=2).argmin(axis=1)
        counts = np.bincount(labels, minlength=k)
        sums = np.zeros_like(c)
        np.add.at(sums, labels, x)
        c = np.where(counts[:, None] > 0, sums / np.maximum(counts, 1)[:, None], c)
    return labels


def _m_step(x: np.ndarray, resp: np.ndarray, reg: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    nk = resp.sum(axis=0) + 10 * np.finfo(np.float64).eps
    means = resp.T @ x / nk[:, None]
    diff = x[None] - means[:, None]  # (k, n, d)
    cov = np.einsum("nk,knd,kne->kde", resp, diff, diff) / nk[:, None, None] + reg * np.eye(x.shape[1])
    chol = np.linalg.cholesky(cov)
    prec_chol = np.transpose(np.linalg.inv(chol), (0, 2, 1))
    return nk / nk.sum(), means, prec_chol


def fit_gaussian_mixture(
    x: np.ndarray,
    k: int,
    *,
    seed: int = 0,
    max_iter: int = 100,
    tol: float = 1e-3,
    reg: float = 1e-6,
) -> GaussianMixture:
    """Fit a ``k``-component full-covariance Gaussian mixture by expectation-maximisation.

    Args:
        x: ``(n, d)`` sample, ``n >= k``.
        k: components (>= 1).
        seed: seeds the k-means++ initialisation (the fit is deterministic given it).
        max_iter: most EM iterations.
        tol: stop when the per-sample log-likelihood gains less than this.
        reg: added to every covariance diagonal (keeps them invertible), as scikit-learn's ``reg_covar``.

    Returns:
        A :class:`GaussianMixture`.

    Raises:
        InvalidInputError: bad shape, ``k`` out of range, or non-finite input.

    Notes:
        Initialised from k-means++ hard labels (scikit-learn initialises from k-means too). Every
        E and M step is vectorised over samples and components.

    References:
        A. P. Dempster, N. M. Laird, D. B. Rubin, JRSS B 39, 1977; C. M. Bishop, "Pattern
        Recognition and Machine Learning", §9.2, 2006.
    """
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or not np.isfinite(x).all():
        raise InvalidInputError("fit_gaussian_mixture needs a finite (n, d) matrix")
    if not 1 <= k <= x.shape[0]:
        raise InvalidInputError(f"k must be in [1, n={x.shape[0]}], got {k}")
    rng = np.random.default_rng(seed)
    resp = np.eye(k)[_kmeans_pp(x, k, rng)]
    weights, means, prec_chol = _m_step(x, resp, reg)
    prev, converged, n_iter = -np.inf, False, 0
    while True:
        lj = _log_joint(x, weights, means, prec_chol)
        norm = np.logaddexp.reduce(lj, axis=1)
        ll = float(norm.sum())
        if abs(ll - prev) < tol * x.shape[0]:
            converged = True
        if converged or n_iter == max_iter:
            return GaussianMixture(weights, means, prec_chol, ll, n_iter, converged)
        prev = ll
        weights, means, prec_chol = _m_step(x, np.exp(lj - norm[:, None]), reg)
        n_iter += 1


def bic_gaussian_mixture(gmm: GaussianMixture, n: int) -> float:
    """Bayesian information criterion of a full-covariance mixture fitted to ``n`` samples (lower is better)."""
    k, d = gmm.means.shape
    params = k * d + k * d * (d + 1) // 2 + k - 1
    return -2.0 * gmm.log_likelihood + params * math.log(n)


def _reduce(x: np.ndarray, dim: int) -> np.ndarray:
    """PCA of the rows of ``x`` to at most ``dim`` components (and at most ``n - 2``, as RAPTOR caps UMAP)."""
    d = max(1, min(dim, x.shape[0] - 2, x.shape[1]))
    centred = x - x.mean(axis=0)
    u, s, _ = np.linalg.svd(centred, full_matrices=False)
    return u[:, :d] * s[:d]


def _soft_clusters(z: np.ndarray, max_clusters: int, membership: float, seed: int) -> list[np.ndarray]:
    """Clusters of the rows of ``z``: the BIC-best mixture, soft membership (every row in >= 1 cluster)."""
    n = z.shape[0]
    kmax = max(1, min(max_clusters, n - 1))
    # A geometric grid of component counts: the BIC curve is smooth, and fitting every k up to 50
    # on every layer is most of the build time.
    candidates = np.unique(np.round(np.geomspace(1, kmax, num=min(kmax, 12))).astype(int))
    fits = [fit_gaussian_mixture(z, int(k), seed=seed) for k in candidates]
    best = min(fits, key=lambda g: bic_gaussian_mixture(g, n))
    post = best.posterior(z)
    member = post > membership
    member[np.arange(n), post.argmax(axis=1)] = True
    return [np.flatnonzero(col) for col in member.T if col.any()]


def _two_stage(vectors: np.ndarray, dim: int, max_clusters: int, membership: float, seed: int) -> list[np.ndarray]:
    """RAPTOR's global clustering, then a local clustering inside each global cluster of more than ``dim + 1`` rows."""
    if vectors.shape[0] <= dim + 1:
        return [np.arange(vectors.shape[0])]
    out: list[np.ndarray] = []
    for members in _soft_clusters(_reduce(vectors, dim), max_clusters, membership, seed):
        if members.size <= dim + 1:
            out.append(members)
        else:
            local = _soft_clusters(_reduce(vectors[members], dim), max_clusters, membership, seed)
            out.extend(members[c] for c in local)
    return out


def raptor_clusters(
    vectors: np.ndarray,
    lengths: np.ndarray | None = None,
    *,
    dim: int = 10,
    max_clusters: int = 50,
    membership: float = 0.1,
    max_cluster_tokens: int = 3500,
    seed: int = 224,
) -> list[np.ndarray]:
    """RAPTOR's clustering of the rows of ``vectors``: global, then local inside each global cluster.

    Each stage reduces the rows to ``dim`` dimensions (PCA) and fits the BIC-best Gaussian mixture;
    a global cluster of at most ``dim + 1`` rows is kept whole. As in the reference code, a cluster
    whose texts are longer than ``max_cluster_tokens`` in all (by ``lengths``, tokens per row) is
    clustered again; a cluster that clustering returns whole (it cannot be split) is kept as it is.

    Returns:
        The clusters as arrays of row indexes; every row is in at least one cluster.
    """
    done: list[np.ndarray] = []
    todo = [np.arange(vectors.shape[0])]
    while todo:
        rows = todo.pop()
        for members in _two_stage(vectors[rows], dim, max_clusters, membership, seed):
            # Only a strict subset is clustered again, so the loop ends.
            too_long = lengths is not None and lengths[rows[members]].sum() > max_cluster_tokens
            (todo if too_long and 1 < members.size < rows.size else done).append(rows[members])
        if lengths is None:
            break
    return sorted(done, key=lambda c: int(c[0]))


# ----------------------------------------------------------------------------- the tree


@dataclass(frozen=True, slots=True)
class RaptorConfig:
    """Parameters of RAPTOR (defaults from the paper's reference code where it has one).

    Attributes:
        dim: dimensions the vectors are reduced to before clustering (paper: 10).
        max_clusters: most mixture components tried per clustering (paper: 50).
        membership: posterior above which a node joins a cluster (paper: 0.1).
        max_cluster_tokens: a cluster whose members' texts are longer is clustered again (paper: 3500;
            tokens as the embedder counts them).
        max_levels: most summary layers (paper: 5).
        seed: seeds the mixtures' initialisation (paper: 224).
        top_k, threshold: what :meth:`Raptor.retrieve` returns (at most ``top_k`` nodes with a
            similarity above ``threshold``).
        embed_summaries: embed each summary's text for its vector; ``None`` = only when a group
            summarizer was passed (an LLM), else the members' centroid is the vector.
    """

    dim: int = 10
    max_clusters: int = 50
    membership: float = 0.1
    max_cluster_tokens: int = 3500
    max_levels: int = 5
    seed: int = 224
    top_k: int = 5
    threshold: float = 0.0
    embed_summaries: bool | None = None


@dataclass(slots=True)
class RaptorTree:
    """A RAPTOR tree over ``n_leaves`` leaves: nodes ``0 .. n_leaves - 1`` are the leaves, then each layer.

    Attributes:
        vectors: ``(n_nodes, dim)`` node vectors.
        texts: node texts (a leaf's own text, a summary's description).
        level: per node, 0 for leaves, ``l`` for the ``l``-th summary layer.
        children: per node, its children (empty for leaves).
        cover: ``(n_nodes, n_leaves)`` sparse 0/1 matrix, the leaves each node covers.
    """

    vectors: np.ndarray
    texts: list[str]
    level: np.ndarray
    children: list[np.ndarray]
    cover: sp.csr_matrix

    @property
    def n_leaves(self) -> int:
        return int(self.cover.shape[1])


def build_raptor_tree(
    vectors: np.ndarray,
    texts: Sequence[str],
    cfg: RaptorConfig,
    summarizer: GroupSummarizer,
    count_tokens: Callable[[Sequence[str]], Sequence[int]] | None = None,
    embed: Embedder | None = None,
) -> RaptorTree:
    """Build the RAPTOR tree over leaves with these vectors and texts (see the module notes).

    Args:
        vectors: ``(n, dim)`` L2-normalised leaf vectors.
        texts: the leaves' texts.
        cfg: the parameters.
        summarizer: writes each cluster's description.
        count_tokens: token counts of texts (for ``cfg.max_cluster_tokens``); ``None`` = no size limit.
        embed: when given, each description is embedded (one call per layer) for its node's vector;
            otherwise the vector is the members' normalised centroid.

    Returns:
        The tree.
    """
    n = vectors.shape[0]
    all_vectors = [np.asarray(vectors, dtype=np.float32)]
    all_texts = list(texts)
    level = [np.zeros(n, dtype=np.int64)]
    children: list[np.ndarray] = [np.zeros(0, dtype=np.int64)] * n
    covers = [sp.identity(n, dtype=np.int8, format="csr")]
    current = np.arange(n)
    cur_vectors, cur_cover = all_vectors[0], covers[0]
    cur_lengths = np.asarray(count_tokens(all_texts), dtype=np.int64) if count_tokens and n else None
    for depth in range(1, cfg.max_levels + 1):
        if current.size <= cfg.dim + 1:
            break
        clusters = raptor_clusters(cur_vectors, cur_lengths, dim=cfg.dim, max_clusters=cfg.max_clusters,
                                   membership=cfg.membership, max_cluster_tokens=cfg.max_cluster_tokens,
                                   seed=cfg.seed)
        if len(clusters) >= current.size:  # no reduction: another layer would repeat this one
            break
        base = len(all_texts)
        descriptions = [summarizer.summarize_group([all_texts[current[i]] for i in c], cur_vectors[c])
                        for c in clusters]
        if embed is not None:
            new_vectors = embed_texts(embed, descriptions)
        else:
            centroids = np.stack([cur_vectors[c].mean(axis=0) for c in clusters])
            new_vectors = (centroids / np.linalg.norm(centroids, axis=1, keepdims=True)).astype(np.float32)
        rows = np.repeat(np.arange(len(clusters)), [c.size for c in clusters])
        member = sp.csr_matrix((np.ones(rows.size, dtype=np.int8), (rows, np.concatenate(clusters))),
                               shape=(len(clusters), current.size))
        cur_cover = (member @ cur_cover).astype(bool).astype(np.int8).tocsr()
        children += [current[c] for c in clusters]
        all_texts += descriptions
        all_vectors.append(new_vectors)
        level.append(np.full(len(clusters), depth, dtype=np.int64))
        covers.append(cur_cover)
        current = np.arange(base, base + len(clusters))
        cur_vectors = new_vectors
        cur_lengths = np.asarray(count_tokens(descriptions), dtype=np.int64) if count_tokens else None
    return RaptorTree(np.concatenate(all_vectors), all_texts, np.concatenate(level), children,
                      sp.vstack(covers, format="csr"))


@dataclass(slots=True)
class _Index:
    units: UserIndex
    rows: np.ndarray  # leaf position → unit row (turns in stream order)
    tree: RaptorTree
    member_node: np.ndarray  # membership pairs (node, leaf position) of the collapsed tree
    member_leaf: np.ndarray


class Raptor(ConfiguredMethod[RaptorConfig]):
    """RAPTOR over the user's turns (see the module docstring).

    Args:
        embedder: the embedder.
        config: parameters (:class:`RaptorConfig`); keyword overrides are applied on top.
        group_summarizer: writes cluster descriptions (default :class:`ExtractiveGroupSummarizer`).
    """

    name = "raptor"
    config_class = RaptorConfig

    def __init__(self, embedder: Embedder, config: RaptorConfig | None = None, *,
                 group_summarizer: GroupSummarizer | None = None, **kwargs: Any) -> None:
        super().__init__(embedder, config, **kwargs)
        self.group_summarizer = group_summarizer or ExtractiveGroupSummarizer()
        embed = self.cfg.embed_summaries if self.cfg.embed_summaries is not None else group_summarizer is not None
        self._embed_summaries = embed
        self._indexes: IndexCache[_Index] = IndexCache(self._build)

    def config(self) -> dict[str, Any]:
        return {**super().config(), "embed_summaries": self._embed_summaries,
                "group_summarizer": type(self.group_summarizer).__name__}

    def _build(self, store: Store, user_id: str) -> _Index:
        units = build_user_index(store, user_id)
        rows = chronological_rows(units.masks["turn"], units.table.session_ids, units.table.turn_start,
                                  [s.session_id for s in store.list_sessions(user_id)] if len(units.table) else [])
        tree = build_raptor_tree(units.table.vectors[rows], [units.table.texts[r] for r in rows], self.cfg,
                                 self.group_summarizer, self.embedder.count_tokens,
                                 self.embedder if self._embed_summaries else None)
        cover = tree.cover.tocoo()
        return _Index(units, rows, tree, cover.row.astype(np.int64), cover.col.astype(np.int64))

    def score(self, store: Store, user_id: str, query: str, *, query_time: datetime | None = None) -> Scored:
        """Score the user's turns: each as the best tree node covering it (collapsed tree)."""
        index = self._indexes.get(store, user_id)
        scores = np.full(len(index.units.table), -np.inf)
        if index.rows.size:
            sims = index.tree.vectors @ self.embed_query(query)
            n = index.tree.n_leaves
            scores[index.rows] = structure_scores(sims, index.member_node, index.member_leaf, n, own=sims[:n])
        return Scored(index.units, scores)

    def retrieve(self, store: Store, user_id: str, query: str, *, k: int | None = None,
                 threshold: float | None = None) -> list[TreeHit]:
        """Collapsed-tree retrieval: the ``k`` nodes (leaves or summaries) most similar to ``query``."""
        index = self._indexes.get(store, user_id)
        if not index.rows.size:
            return []
        t = index.tree
        return tree_hits(index.units, index.rows, t.texts, lambda node: t.cover[node].indices, t.level == 0,
                         t.vectors @ self.embed_query(query), self.cfg.top_k if k is None else k,
                         self.cfg.threshold if threshold is None else threshold)
