"""Named numpy arrays and a JSON header in one byte string, read back without copying: the format of index
snapshots (:meth:`memgas.store.Store.save_snapshot`); and how a store keeps a message's text (:func:`pack_text`) and a
unit's links to older units (:func:`pack_links`).

Layout: the magic ``b"MGPK1\\n"``, the header's length (8 bytes, little-endian), the header (UTF-8 JSON: ``meta``
and, per array, its name, dtype, shape and offset), then each array's bytes at an offset that is a multiple of 8.
:func:`unpack` hands out read-only views into the byte string it was given, so loading costs one pass over the
header, whatever the arrays hold.
"""

from __future__ import annotations

import functools
import json
import zlib
from typing import Any, Mapping

import numpy as np

from memgas.core.errors import InvalidInputError

__all__ = ["pack", "unpack", "narrowed", "pack_text", "unpack_text", "pack_links", "unpack_links", "links_count"]

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
    entries: list[tuple[str, str, list[int], int]] = []
    offset = 0
    contiguous = {name: np.ascontiguousarray(a) for name, a in arrays.items()}
    for name, a in contiguous.items():
        if a.dtype.hasobject:
            raise InvalidInputError(f"array {name!r} holds Python objects; pack takes numeric arrays")
        entries.append((name, a.dtype.str, list(a.shape), offset))
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


def narrowed(a: np.ndarray) -> np.ndarray:
    """``a`` in the smallest type that holds every value of it exactly: whole numbers, none negative, in the smallest
    of ``uint8``, ``uint16`` and ``uint32``; other floats in ``float32`` where that changes none of them; else ``a``
    itself. A reader widens it back to the type it computes in: the values are the same, in fewer bytes.

    Examples
    --------
    >>> [narrowed(np.array(v)).dtype.name for v in ([3, 200], [70_000], [2.0, 7.0], [0.5, -2.0], [0.1], [-1], [2**40])]
    ['uint8', 'uint32', 'uint8', 'float32', 'float64', 'int64', 'int64']
    """
    if a.size == 0 or a.dtype.kind not in "uif":
        return a
    if a.min() >= 0:
        top = a.max()
        for dtype in (np.uint8, np.uint16, np.uint32):
            if top <= np.iinfo(dtype).max:
                small = a.astype(dtype)
                if np.array_equal(small, a):
                    return small
                break
    if a.dtype == np.float64:
        single = a.astype(np.float32)
        if np.array_equal(single, a):
            return single
    return a


#: The first byte of a packed text: what the rest is.
_AS_IS, _DEFLATED = b"\x00", b"\x01"


def pack_text(text: str) -> bytes:
    """``text`` as a store keeps a message's content: a tag byte, then its UTF-8 bytes raw-deflated (level 9, no
    header) when that is shorter, else as they are. English prose of a few hundred words packs to about half; a
    short chat line is kept as it is (deflate would only add to it). :func:`unpack_text` reads either.

    Examples
    --------
    >>> pack_text("hi there")
    b'\\x00hi there'
    >>> long = "I would like to plan a trip to Lisbon in May, and I would like it to be a quiet trip. " * 4
    >>> packed = pack_text(long)
    >>> packed[:1], len(packed) < len(long) // 2, unpack_text(packed) == long
    (b'\\x01', True, True)
    """
    raw = text.encode("utf-8")
    squeezer = zlib.compressobj(9, zlib.DEFLATED, -15)
    deflated = squeezer.compress(raw) + squeezer.flush()
    return _DEFLATED + deflated if len(deflated) < len(raw) else _AS_IS + raw


@functools.lru_cache(maxsize=4096)
def _inflated(body: bytes) -> str:
    """A deflated text, kept for the messages read again and again (a context's candidate turns, the sessions a
    timeline reads): hashing the bytes costs a tenth of inflating them."""
    return zlib.decompress(body, -15).decode("utf-8")


def unpack_text(data: bytes | memoryview) -> str:
    """The text :func:`pack_text` packed.

    Raises:
        InvalidInputError: ``data`` is not a packed text.

    Examples
    --------
    >>> unpack_text(pack_text("Grüße, 東京"))
    'Grüße, 東京'
    >>> unpack_text(b"plain")
    Traceback (most recent call last):
    ...
    memgas.core.errors.InvalidInputError: not a packed text (tag b'p')
    """
    data = bytes(data)
    tag, body = data[:1], data[1:]
    try:
        if tag == _AS_IS:
            return body.decode("utf-8")
        if tag == _DEFLATED:
            return _inflated(body)
    except (zlib.error, UnicodeDecodeError) as exc:
        raise InvalidInputError(f"a packed text is damaged: {exc}") from None
    raise InvalidInputError(f"not a packed text (tag {tag!r})")


#: How a packed unit's links read their offsets, by the width the first byte gives.
_OFFSETS: dict[int, np.dtype[Any]] = {1: np.dtype("<u1"), 2: np.dtype("<u2"), 4: np.dtype("<u4"), 8: np.dtype("<i8")}
_WEIGHTS: dict[int, np.dtype[Any]] = {4: np.dtype("<f4"), 8: np.dtype("<f8")}


def pack_links(unit: int, src: np.ndarray, weight: np.ndarray) -> bytes:
    """The links of unit ``unit`` to the older units ``src`` (ascending, all ``< unit``) with their ``weight``, as a
    store keeps them on the unit: two bytes giving the widths, then each link's distance ``unit - src`` in the smallest
    unsigned type that holds them all, then the weights in float32 where that changes none of them, else float64.
    Links within one session are a few ids apart (a byte each); across sessions four bytes.

    Examples
    --------
    >>> blob = pack_links(1000, np.array([990, 998]), np.array([0.5, 0.05]))
    >>> len(blob), links_count(blob)  # two one-byte distances, two float64 weights (0.05 is no float32)
    (20, 2)
    >>> src, weight = unpack_links(1000, blob)
    >>> src.tolist(), weight.tolist()
    ([990, 998], [0.5, 0.05])
    """
    offsets = narrowed(unit - np.asarray(src, dtype=np.int64))
    if offsets.dtype.kind == "i":
        offsets = offsets.astype("<i8")
    wide = np.asarray(weight, dtype=np.float64)
    single = wide.astype(np.float32)
    weights: np.ndarray = single if np.array_equal(single, wide) else wide
    head = bytes([offsets.dtype.itemsize, weights.dtype.itemsize])
    return head + offsets.astype(_OFFSETS[offsets.dtype.itemsize]).tobytes() + weights.astype(
        _WEIGHTS[weights.dtype.itemsize]).tobytes()


def links_count(blob: bytes | memoryview) -> int:
    """How many links :func:`pack_links` packed in ``blob``."""
    return (len(blob) - 2) // (blob[0] + blob[1])


def unpack_links(unit: int, blob: bytes | memoryview) -> tuple[np.ndarray, np.ndarray]:
    """The ``(src, weight)`` arrays (int64, float64; ``src`` ascending) of unit ``unit``'s links :func:`pack_links`
    packed.

    Raises:
        InvalidInputError: ``blob`` is not packed links.
    """
    blob = bytes(blob)
    if len(blob) < 2 or blob[0] not in _OFFSETS or blob[1] not in _WEIGHTS or (len(blob) - 2) % (blob[0] + blob[1]):
        raise InvalidInputError("not a unit's packed links")
    n = links_count(blob)
    offsets = np.frombuffer(blob, _OFFSETS[blob[0]], n, 2)
    weights = np.frombuffer(blob, _WEIGHTS[blob[1]], n, 2 + n * blob[0])
    return unit - offsets.astype(np.int64), weights.astype(np.float64)
