"""Named numpy arrays and a JSON header in one byte string, read back without copying: the format of index
snapshots (:meth:`memgas.store.Store.save_snapshot`); and how a store keeps a message's text (:func:`pack_text`).

Layout: the magic ``b"MGPK1\\n"``, the header's length (8 bytes, little-endian), the header (UTF-8 JSON: ``meta``
and, per array, its name, dtype, shape and offset), then each array's bytes at an offset that is a multiple of 8.
:func:`unpack` hands out read-only views into the byte string it was given, so loading costs one pass over the
header, whatever the arrays hold.
"""

from __future__ import annotations

import json
import zlib
from typing import Any, Mapping

import numpy as np

from memgas.core.errors import InvalidInputError

__all__ = ["pack", "unpack", "narrowed", "pack_text", "unpack_text"]

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
            return zlib.decompress(body, -15).decode("utf-8")
    except (zlib.error, UnicodeDecodeError) as exc:
        raise InvalidInputError(f"a packed text is damaged: {exc}") from None
    raise InvalidInputError(f"not a packed text (tag {tag!r})")
