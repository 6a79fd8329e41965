"""Compact vectors: float16 rounding is bounded, idempotent (what a store returns rounds to itself) and what the
byte encoding keeps."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from memgas.kernels.quantize import code_size, decode_rows, encode_rows, from_half, to_half


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 40), st.integers(1, 400), st.integers(0, 2**31 - 1))
def test_rounding_is_bounded_and_idempotent(n: int, dim: int, seed: int) -> None:
    v = np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    stored = from_half(to_half(v))
    assert stored.dtype == np.float32 and stored.shape == v.shape
    assert np.abs(stored - v).max() <= 2**-12  # 11 significant bits for components of at most 1
    np.testing.assert_array_equal(from_half(to_half(stored)), stored)  # rounding again changes nothing
    cosines = (stored * v).sum(axis=1)
    assert np.all(np.abs(cosines - 1) < 1e-3)


def test_the_encoding_is_two_bytes_a_component_little_endian() -> None:
    v = np.array([[0.5, -0.25, 1.0], [0.0, 0.1, -1.0]], dtype=np.float32)
    blobs = encode_rows(v)
    assert [len(b) for b in blobs] == [code_size(3)] * 2 == [6, 6]
    assert blobs[0] == np.array([0.5, -0.25, 1.0], dtype="<f2").tobytes()
    back = decode_rows(b"".join(blobs), 2, 3)
    np.testing.assert_array_equal(back, from_half(to_half(v)))
    assert back[0].tolist() == [0.5, -0.25, 1.0]  # exactly representable values come back exactly
