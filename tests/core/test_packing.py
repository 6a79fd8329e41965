"""Packed arrays: what goes in comes out, as views without copies, and bad bytes are refused clearly."""

from __future__ import annotations

import numpy as np
import pytest

from memgas.core.errors import InvalidInputError
from memgas.core.packing import links_count, pack, pack_links, pack_text, unpack, unpack_links, unpack_text


def test_arrays_and_meta_come_back_with_their_dtypes_and_shapes() -> None:
    arrays = {"f16": np.arange(6, dtype="<f2").reshape(2, 3), "i64": np.array([-1, 2**40]), "empty": np.zeros((0, 4)),
              "u8": np.frombuffer("héllo".encode(), dtype=np.uint8), "odd": np.arange(3, dtype=np.int8)}
    data = pack(arrays, {"names": ["a", "é"], "n": 3})
    back, meta = unpack(data)
    assert meta == {"names": ["a", "é"], "n": 3} and list(back) == list(arrays)
    for name, a in arrays.items():
        assert back[name].dtype == a.dtype and back[name].shape == a.shape
        np.testing.assert_array_equal(back[name], a)
    assert not back["i64"].flags.writeable  # a view into the bytes, not a copy
    assert all(np.shares_memory(back[n], np.frombuffer(data, np.uint8)) for n in ("f16", "i64"))
    assert unpack(pack({}))[0] == {}


def test_bad_bytes_are_refused() -> None:
    data = pack({"x": np.arange(100)})
    with pytest.raises(InvalidInputError, match="bad magic"):
        unpack(b"PK\x03\x04" + data[4:])
    with pytest.raises(InvalidInputError, match="cut short"):
        unpack(data[:-8])
    with pytest.raises(InvalidInputError, match="corrupt header"):
        unpack(data[:14] + b"\xff" + data[15:])
    with pytest.raises(InvalidInputError, match="Python objects"):
        pack({"o": np.array(["a", None], dtype=object)})


def test_packed_texts_come_back_and_only_shorter_packing_is_kept() -> None:
    rng = np.random.default_rng(5)
    words = ["the", "garden", "ferry", "Naxos", "café", "東京", "review", "\n", "😀"]
    for n in (0, 1, 3, 30, 300):
        text = " ".join(rng.choice(words, n))
        packed = pack_text(text)
        assert unpack_text(packed) == text and len(packed) <= len(text.encode()) + 1
        assert packed[:1] == (b"\x01" if len(packed) <= len(text.encode()) else b"\x00")
    with pytest.raises(InvalidInputError, match="damaged"):
        unpack_text(b"\x01not deflate")


def test_packed_links_come_back_in_the_narrowest_widths() -> None:
    rng = np.random.default_rng(7)
    for span, weights, widths in ((200, np.float32, (1, 4)), (60_000, np.float32, (2, 4)),
                                  (3_000_000_000, np.float32, (4, 4)), (2**40, np.float64, (8, 8))):
        unit = 2**41
        src = np.unique(unit - rng.integers(1, span + 1, 25))
        weight = rng.random(src.size).astype(weights).astype(np.float64)
        blob = pack_links(unit, src, weight)
        assert (blob[0], blob[1]) == widths and links_count(blob) == src.size
        back_src, back_weight = unpack_links(unit, blob)
        assert back_src.tolist() == src.tolist() and back_weight.tolist() == weight.tolist()
    for bad in (b"", b"\x03\x04", b"\x01\x04\x01"):
        with pytest.raises(InvalidInputError, match="links"):
            unpack_links(10, bad)
