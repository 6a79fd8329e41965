"""Packed arrays: what goes in comes out, as views without copies, and bad bytes are refused clearly."""

from __future__ import annotations

import numpy as np
import pytest

from memgas.core.errors import InvalidInputError
from memgas.core.packing import pack, unpack


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
