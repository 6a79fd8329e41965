"""MemTree: a dynamic hierarchical memory tree, grown one memory at a time.

Rezazadeh et al., 2024, "From Isolated Conversations to Hierarchical Schemas: Dynamic Tree Memory
Representation for LLMs" (arXiv:2410.14052). Leaves hold memories (here: a user's turns, inserted
in chronological order); every other node but the root holds a description ``c`` of what lies below
it, with a vector ``e``.

Insert (:meth:`MemoryTree.insert`): descend from the root; at a node of depth ``d`` compare the new
memory with each child's vector and move to the most similar child if the cosine reaches the
depth-dependent threshold ``θ(d) = θ₀ · exp(λ · d)`` (deeper levels demand closer matches). If no
child qualifies, the memory becomes a new leaf of the current node. If the chosen child is a leaf,
a new inner node takes its place, holding the old and the new memory. Then each ancestor of the new
leaf (the root excepted) gets its description rewritten from its children by the
:class:`~memgas.methods.trees.GroupSummarizer` and its vector updated. An insert touches only the
nodes on its path and their children: O(depth · branching).

Without an LLM, descriptions are extractive (:class:`~memgas.methods.trees.ExtractiveGroupSummarizer`)
and a node's vector is the normalised mean of the memory vectors below it (kept as a running sum,
so the update is O(1) per ancestor); with an LLM summarizer, the description is embedded, as in the
paper (one embedding call per ancestor per insert).

Retrieval: the collapsed tree, as in the paper: the query is compared with every node at once; a
turn scores as the best node that covers it (its leaf or an ancestor), ties broken by its own
similarity; :meth:`MemTree.retrieve` returns the top-k nodes above a threshold.

The paper's MemTree is online; here the tree is rebuilt from the store's turns whenever the user's
memory changes (cached per store version), inserting every turn in order, which yields the tree the
online insertions would have built.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable

import numpy as np

from memgas.core.errors import InvalidInputError
from memgas.embed.base import Embedder
from memgas.kernels.segment import chronological_rows, structure_scores
from memgas.methods.base import ConfiguredMethod
from memgas.methods.index import IndexCache, UserIndex, build_user_index
from memgas.methods.ranking import Scored
from memgas.methods.trees import ExtractiveGroupSummarizer, GroupSummarizer, TreeHit, tree_hits
from memgas.methods.units import embed_texts
from memgas.store import Store

__all__ = ["MemTreeConfig", "InsertStats", "MemoryTree", "MemTree"]


@dataclass(frozen=True, slots=True)
class MemTreeConfig:
    """Parameters of MemTree.

    Attributes:
        base_threshold: θ₀, the similarity a memory needs to descend into a child of the root.
        threshold_rate: λ in ``θ(d) = θ₀ · exp(λ · d)``. The paper fixes this form; the values are
            chosen for MiniLM vectors: on one LoCoMo and one LongMemEval haystack, λ = 0.1 grows
            chains nine levels deep, λ = 0.5 a flat tree (nodes of 100+ children at depth 2);
            λ = 0.2 gives depth ≈ 5.
        top_k, threshold: what :meth:`MemTree.retrieve` returns (at most ``top_k`` nodes with a
            similarity above ``threshold``).
        embed_descriptions: embed each new description for its node's vector; ``None`` = only when
            a group summarizer was passed (an LLM), else the node's vector is the mean of its memories.
    """

    base_threshold: float = 0.4
    threshold_rate: float = 0.2
    top_k: int = 5
    threshold: float = 0.0
    embed_descriptions: bool | None = None


@dataclass(frozen=True, slots=True)
class InsertStats:
    """What one :meth:`MemoryTree.insert` did.

    Attributes:
        leaf: the new leaf's node id.
        path: the ancestors whose description was rewritten, deepest first (the root excluded).
        compared: how many node vectors the new memory was compared with.
        split: whether a leaf was turned into an inner node's child (a new inner node was made).
    """

    leaf: int
    path: tuple[int, ...]
    compared: int
    split: bool


class MemoryTree:
    """The MemTree data structure (see the module docstring). Node 0 is the root.

    Args:
        dim: vector dimension.
        summarizer: rewrites an inner node's description from its children.
        base_threshold, threshold_rate: θ₀ and λ of the insertion threshold.
        describe: when given, maps a new description to its vector (an embedder call); otherwise an
            inner node's vector is the normalised mean of the memories below it.

    Raises:
        InvalidInputError: ``dim`` below 1.
    """

    def __init__(
        self,
        dim: int,
        summarizer: GroupSummarizer,
        *,
        base_threshold: float = 0.4,
        threshold_rate: float = 0.2,
        describe: Callable[[str], np.ndarray] | None = None,
    ) -> None:
        if dim < 1:
            raise InvalidInputError(f"dim must be positive, got {dim}")
        self.summarizer = summarizer
        self.base_threshold = base_threshold
        self.threshold_rate = threshold_rate
        self._describe = describe
        self.parent: list[int] = [-1]
        self.children: list[list[int]] = [[]]
        self.depth: list[int] = [0]
        self.texts: list[str] = [""]
        self.memory: list[int] = [-1]  # leaf → the caller's memory id; -1 for the root and inner nodes
        self._vectors = np.zeros((16, dim), dtype=np.float32)  # description vectors (normalised)
        self._sums = np.zeros((16, dim), dtype=np.float64)  # sum of the memory vectors below each node

    def __len__(self) -> int:
        """Number of nodes, the root included."""
        return len(self.parent)

    @property
    def vectors(self) -> np.ndarray:
        """``(len(self), dim)`` node vectors (the root's is zero)."""
        return self._vectors[: len(self)]

    def threshold(self, depth: int) -> float:
        """θ(depth) = θ₀ · exp(λ · depth): the similarity needed to descend from a node of this depth."""
        return self.base_threshold * math.exp(self.threshold_rate * depth)

    def is_leaf(self, node: int) -> bool:
        """Whether ``node`` holds a memory."""
        return self.memory[node] >= 0

    def _new_node(self, parent: int, depth: int, text: str, memory: int) -> int:
        node = len(self.parent)
        if node == self._vectors.shape[0]:
            self._vectors = np.concatenate([self._vectors, np.zeros_like(self._vectors)])
            self._sums = np.concatenate([self._sums, np.zeros_like(self._sums)])
        self.parent.append(parent)
        self.children.append([])
        self.depth.append(depth)
        self.texts.append(text)
        self.memory.append(memory)
        return node

    def insert(self, vector: np.ndarray, text: str, memory: int) -> InsertStats:
        """Insert one memory (its L2-normalised vector and text) as a new leaf; see the module notes.

        Raises:
            InvalidInputError: ``memory`` is negative.
        """
        if memory < 0:
            raise InvalidInputError(f"memory ids must be non-negative, got {memory}")
        v = np.asarray(vector, dtype=np.float32)
        node, compared, split = 0, 0, False
        while self.children[node]:
            kids = self.children[node]
            sims = self._vectors[kids] @ v
            compared += len(kids)
            j = int(np.argmax(sims))
            if sims[j] < self.threshold(self.depth[node]):
                break
            child = kids[j]
            if not self.is_leaf(child):
                node = child
                continue
            # The matching leaf becomes the child of a new inner node that takes its place.
            inner = self._new_node(node, self.depth[child], "", -1)
            kids[j] = inner
            self.parent[child] = inner
            self.children[inner].append(child)
            self.depth[child] += 1
            self._sums[inner] = self._sums[child]
            node, split = inner, True
            break
        leaf = self._new_node(node, self.depth[node] + 1, text, memory)
        self.children[node].append(leaf)
        self._vectors[leaf] = v
        self._sums[leaf] = v
        path = []
        while node != 0:
            self._sums[node] += v
            kids = self.children[node]
            self.texts[node] = self.summarizer.summarize_group([self.texts[c] for c in kids], self._vectors[kids])
            if self._describe is not None:
                self._vectors[node] = self._describe(self.texts[node])
            else:
                self._vectors[node] = self._sums[node] / max(np.linalg.norm(self._sums[node]), 1e-12)
            path.append(node)
            node = self.parent[node]
        return InsertStats(leaf, tuple(path), compared, split)

    def ancestors(self, node: int) -> list[int]:
        """The nodes above ``node``, parent first, the root excluded."""
        out = []
        node = self.parent[node]
        while node > 0:
            out.append(node)
            node = self.parent[node]
        return out


@dataclass(slots=True)
class _Index:
    units: UserIndex
    rows: np.ndarray  # memory id (position in the stream) → unit row
    tree: MemoryTree
    member_node: np.ndarray  # membership pairs (node, memory) of the collapsed tree, root excluded
    member_leaf: np.ndarray
    leaf_of: np.ndarray  # memory → its leaf node
    cover_rows: list[np.ndarray]  # per node, the memories below it (for retrieve)


class MemTree(ConfiguredMethod[MemTreeConfig]):
    """MemTree over the user's turns (see the module docstring).

    Args:
        embedder: the embedder.
        config: parameters (:class:`MemTreeConfig`); keyword overrides are applied on top.
        group_summarizer: writes the descriptions (default
            :class:`~memgas.methods.trees.ExtractiveGroupSummarizer`).
    """

    name = "memtree"
    config_class = MemTreeConfig

    def __init__(self, embedder: Embedder, config: MemTreeConfig | None = None, *,
                 group_summarizer: GroupSummarizer | None = None, **kwargs: Any) -> None:
        super().__init__(embedder, config, **kwargs)
        self.group_summarizer = group_summarizer or ExtractiveGroupSummarizer()
        embed = self.cfg.embed_descriptions
        self._embed_descriptions = embed if embed is not None else group_summarizer is not None
        self._indexes: IndexCache[_Index] = IndexCache(self._build)

    def config(self) -> dict[str, Any]:
        return {**super().config(), "embed_descriptions": self._embed_descriptions,
                "group_summarizer": type(self.group_summarizer).__name__}

    def new_tree(self) -> MemoryTree:
        """An empty tree with this method's parameters."""
        describe = (lambda text: embed_texts(self.embedder, [text])[0]) if self._embed_descriptions else None
        return MemoryTree(self.embedder.dim, self.group_summarizer, base_threshold=self.cfg.base_threshold,
                          threshold_rate=self.cfg.threshold_rate, describe=describe)

    def _build(self, store: Store, user_id: str) -> _Index:
        units = build_user_index(store, user_id)
        rows = chronological_rows(units.masks["turn"], units.table.session_ids, units.table.turn_start,
                                  [s.session_id for s in store.list_sessions(user_id)] if len(units.table) else [])
        tree = self.new_tree()
        leaf_of = np.array([tree.insert(units.table.vectors[r], units.table.texts[r], i).leaf
                            for i, r in enumerate(rows)], dtype=np.int64)
        nodes, leaves = [], []
        for i, leaf in enumerate(leaf_of):
            path = [int(leaf), *tree.ancestors(int(leaf))]
            nodes += path
            leaves += [i] * len(path)
        member_node = np.asarray(nodes, dtype=np.int64)
        member_leaf = np.asarray(leaves, dtype=np.int64)
        order = np.argsort(member_node, kind="stable")
        cover_rows = np.split(member_leaf[order], np.searchsorted(member_node[order], np.arange(1, len(tree))))
        return _Index(units, rows, tree, member_node, member_leaf, leaf_of, cover_rows)

    def score(self, store: Store, user_id: str, query: str, *, query_time: datetime | None = None) -> Scored:
        """Score the user's turns: each as the best tree node covering it (collapsed tree)."""
        index = self._indexes.get(store, user_id)
        scores = np.full(len(index.units.table), -np.inf)
        if index.rows.size:
            sims = index.tree.vectors @ self.embed_query(query)
            scores[index.rows] = structure_scores(sims, index.member_node, index.member_leaf, index.rows.size,
                                                  own=sims[index.leaf_of])
        return Scored(index.units, scores)

    def retrieve(self, store: Store, user_id: str, query: str, *, k: int | None = None,
                 threshold: float | None = None) -> list[TreeHit]:
        """Collapsed-tree retrieval: the ``k`` nodes (memories or descriptions) most similar to ``query``."""
        index = self._indexes.get(store, user_id)
        if not index.rows.size:
            return []
        tree = index.tree
        sims = tree.vectors @ self.embed_query(query)
        sims[0] = -np.inf  # the root holds nothing
        return tree_hits(index.units, index.rows, tree.texts, lambda node: index.cover_rows[node],
                         np.asarray(tree.memory) >= 0, sims, self.cfg.top_k if k is None else k,
                         self.cfg.threshold if threshold is None else threshold)
