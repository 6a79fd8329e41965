"""Named numpy arrays and a JSON header in one byte string, read back without copying: the format of index
snapshots (:meth:`memgas.store.Store.save_snapshot`), and :class:`PackedTexts`, texts kept as one UTF-8 buffer.

Layout: the magic ``b"MGPK1\\n"``, the header's length (8 bytes, little-endian), the header (UTF-8 JSON: ``meta``
and, per array, its name, dtype, shape and offset), then each array's bytes at an offset that is a multiple of 8.
:func:`unpack` hands out read-only views into the byte string it was given, so loading costs one pass over the
header, whatever the arrays hold.
"""

from __future__ import annotations

import json
from typing import Any, Iterator, Mapping, Sequence, overload

import numpy as np

from memgas.core.errors import InvalidInputError

__all__ = ["pack", "unpack", "PackedTexts"]

_MAGIC = b"MGPK1\n"
_LENGTH = 8
_ALIGN = 8


def _padded(n: int) -> int:
    return -(-n // _ALIGN) * _ALIGN


def pack(arrays: Mapping[str, np.ndarray], meta: Mapping[str, Any] | None = None) -> bytes:
    """``arrays`` (numeric numpy arrays, any shape) and ``meta`` (JSON values) as one byte string.

    Examples
    --------
    >>> arrays, meta = unpack(pack({"x": np.arange(3, dtype=np.int32)}, {"n": 3}))
    >>> arrays["x"].tolist(), meta
    ([0, 1, 2], {'n': 3})
    """
    entries, offset = [], 0
    contiguous = {name: np.ascontiguousarray(a) for name, a in arrays.items()}
    for name, a in contiguous.items():
        if a.dtype.hasobject:
            raise InvalidInputError(f"array {name!r} holds Python objects; pack takes numeric arrays")
        entries.append([name, a.dtype.str, list(a.shape), offset])
        offset = _padded(offset + a.nbytes)
    header = json.dumps({"meta": dict(meta or {}), "arrays": entries}, ensure_ascii=False).encode()
    start = _padded(len(_MAGIC) + _LENGTH + len(header))
    out = bytearray(start + offset)
    out[: len(_MAGIC)] = _MAGIC
    out[len(_MAGIC): len(_MAGIC) + _LENGTH] = len(header).to_bytes(_LENGTH, "little")
    out[len(_MAGIC) + _LENGTH: len(_MAGIC) + _LENGTH + len(header)] = header
    for (_, _, _, at), a in zip(entries, contiguous.values()):
        out[start + at: start + at + a.nbytes] = a.tobytes()
    return bytes(out)


def unpack(data: bytes) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The arrays (read-only views into ``data``) and the meta of a :func:`pack` result.

    Raises:
        InvalidInputError: ``data`` is not a packed byte string, or is cut short.
    """
    head = len(_MAGIC) + _LENGTH
    if data[: len(_MAGIC)] != _MAGIC or len(data) < head:
        raise InvalidInputError("not a packed array file (bad magic)")
    size = int.from_bytes(data[len(_MAGIC): head], "little")
    try:
        header = json.loads(data[head: head + size].decode())
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise InvalidInputError("a packed array file with a corrupt header") from None
    start = _padded(head + size)
    arrays = {}
    for name, dtype, shape, offset in header["arrays"]:
        dt = np.dtype(dtype)
        count = int(np.prod(shape, dtype=np.int64))
        if start + offset + count * dt.itemsize > len(data):
            raise InvalidInputError(f"a packed array file cut short (array {name!r})")
        arrays[name] = np.frombuffer(data, dtype=dt, count=count, offset=start + offset).reshape(shape)
    return arrays, header["meta"]


class PackedTexts(Sequence[str]):
    r"""Texts kept as spans of one UTF-8 buffer, each decoded when it is read.

    Holding thousands of long texts as Python strings costs a decode of all of them on load and up to four bytes
    a character; an index reads a few of them per search (the turns of its hits), so it keeps them packed. Spans
    may overlap: a text that is other texts joined by newlines can be the span that covers them, when the buffer
    holds them in order with a newline after each (:func:`memgas.methods.index.user_index_arrays`). Equal to any
    sequence of the same strings; ``+`` with another sequence of texts gives a packed one.

    Examples
    --------
    >>> texts = PackedTexts.of(["a", "bé", ""])
    >>> len(texts), texts[1], list(texts[1:]), texts == ("a", "bé", "")
    (3, 'bé', ['bé', ''], True)
    >>> PackedTexts(b"one\ntwo\n", np.array([0, 4, 0]), np.array([3, 7, 7]))[2]  # the span of both
    'one\ntwo'
    """

    __slots__ = ("_buffer", "_starts", "_ends")

    def __init__(self, buffer: bytes, starts: np.ndarray, ends: np.ndarray) -> None:
        self._buffer = buffer
        self._starts = np.asarray(starts, dtype=np.int64)  # byte offset where each text starts
        self._ends = np.asarray(ends, dtype=np.int64)  # and where it ends

    @classmethod
    def of(cls, texts: Sequence[str]) -> "PackedTexts":
        """``texts`` packed, one after the other."""
        if isinstance(texts, PackedTexts):
            return texts
        encoded = [t.encode() for t in texts]
        ends = np.cumsum([len(e) for e in encoded], dtype=np.int64)
        return cls(b"".join(encoded), ends - [len(e) for e in encoded], ends)

    def memory_bytes(self) -> int:
        """The bytes the buffer and offsets take (what an index cache charges for them)."""
        return len(self._buffer) + self._starts.nbytes + self._ends.nbytes

    def __len__(self) -> int:
        return int(self._ends.size)

    @overload
    def __getitem__(self, i: int) -> str: ...

    @overload
    def __getitem__(self, i: slice) -> "PackedTexts": ...

    def __getitem__(self, i: int | slice) -> "str | PackedTexts":
        if isinstance(i, slice):
            return PackedTexts.of([self[j] for j in range(*i.indices(len(self)))])
        n = len(self)
        if not -n <= i < n:
            raise IndexError("text index out of range")
        i = int(i) % n
        return self._buffer[int(self._starts[i]): int(self._ends[i])].decode()

    def __iter__(self) -> Iterator[str]:
        for i in range(len(self)):
            yield self[i]

    def __add__(self, other: Sequence[str]) -> "PackedTexts":
        more = PackedTexts.of(other)
        shift = len(self._buffer)
        return PackedTexts(self._buffer + more._buffer, np.concatenate([self._starts, shift + more._starts]),
                           np.concatenate([self._ends, shift + more._ends]))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str) or len(other) != len(self):
            return False
        return all(a == b for a, b in zip(self, other))

    __hash__ = None  # type: ignore[assignment]  # compared by content, like a list

    def __repr__(self) -> str:
        return f"PackedTexts({len(self)} texts, {len(self._buffer)} bytes)"
