"""Synthetic embeddings with known structure: topic streams whose boundaries the segmenters must find."""

from __future__ import annotations

import numpy as np


def topic_stream(lengths: list[int], dim: int = 24, noise: float = 0.3, seed: int = 0) -> np.ndarray:
    """Unit vectors in runs: run i has ``lengths[i]`` vectors around its own random centre (also used by test_secom)."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(len(lengths), dim))
    v = np.concatenate([c + noise * rng.normal(size=(n, dim)) for c, n in zip(centres, lengths)])
    return v / np.linalg.norm(v, axis=1, keepdims=True)
