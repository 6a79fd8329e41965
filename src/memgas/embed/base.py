"""The embedder protocol and what every embedder shares: L2 normalisation, mean pooling, input checks and
splitting a text to the model's window (:class:`WindowMixin`).
"""

from __future__ import annotations

import re
from typing import Callable, Protocol, Sequence

import numpy as np

from memgas.core.errors import InvalidInputError

__all__ = ["Embedder", "CountFn", "WindowMixin", "l2_normalise", "mean_pool", "check_texts"]


class Embedder(Protocol):
    """What memgas needs from an embedding model.

    ``id`` is a stable identity stored next to the vectors; ``max_tokens`` is the model's window in
    its own tokens, special tokens included.
    """

    @property
    def id(self) -> str: ...

    @property
    def dim(self) -> int: ...

    @property
    def max_tokens(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """``(len(texts), dim)`` float32 L2-normalised rows; ``(0, dim)`` for no texts."""
        ...

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Tokens per text, without special tokens."""
        ...

    def split_to_window(self, text: str, max_tokens: int | None = None) -> list[str]:
        """Contiguous pieces of ``text`` that each fit the window; ``"".join(pieces) == text``."""
        ...


# ----------------------------------------------------------------------------- numeric kernels


def l2_normalise(x: np.ndarray) -> np.ndarray:
    """Rows of ``x`` scaled to unit L2 norm, as float32 (all-zero rows stay zero)."""
    x = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=-1, keepdims=True)
    return x / np.maximum(norms, np.float32(1e-12))


def mean_pool(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Mean of the token vectors ``hidden`` (b, t, d) over the positions where ``mask`` (b, t) is 1."""
    m = mask.astype(np.float32)[:, :, None]
    return (hidden * m).sum(axis=1) / np.maximum(m.sum(axis=1), np.float32(1e-9))


# ----------------------------------------------------------------------------- window splitting

# Boundaries from coarse to fine. Each separator stays with the text before it, so pieces
# concatenate back to the input exactly and a cut never drops whitespace.
_BOUNDARIES = (
    re.compile(r"\n[ \t\r\f\v]*\n\s*"),  # paragraph
    re.compile(r"\n\s*"),  # line
    re.compile(r"(?<=[.!?\u2026])[\"'\u201d\u2019)\]]*\s+"),  # sentence
    re.compile(r"\s+"),  # word
)

CountFn = Callable[[Sequence[str]], list[int]]


def _cut_after(text: str, pattern: re.Pattern[str]) -> list[str]:
    """``text`` cut after every match of ``pattern`` (empty parts dropped)."""
    parts, start = [], 0
    for m in pattern.finditer(text):
        if m.end() > start:
            parts.append(text[start : m.end()])
            start = m.end()
    if start < len(text):
        parts.append(text[start:])
    return parts


def _atoms(text: str, n_tokens: int, count: CountFn, budget: int, level: int) -> list[tuple[str, int]]:
    """Cut ``text`` (``n_tokens`` long, over ``budget``) into parts of at most ``budget`` tokens each,
    using the coarsest boundary that works, with each part's token count."""
    while level < len(_BOUNDARIES):
        parts = _cut_after(text, _BOUNDARIES[level])
        level += 1
        if len(parts) > 1:
            out: list[tuple[str, int]] = []
            for part, n in zip(parts, count(parts)):
                out.extend([(part, n)] if n <= budget else _atoms(part, n, count, budget, level))
            return out
    # One word longer than the window: cut by characters, sized by its token density, and
    # re-cut any slice that is still too long (slices strictly shrink, so this ends).
    size = max(1, min(len(text) // 2, len(text) * budget // max(n_tokens, 1)))
    slices = [text[i : i + size] for i in range(0, len(text), size)]
    out = []
    for part, n in zip(slices, count(slices)):
        out.extend([(part, n)] if n <= budget or len(part) == 1 else _atoms(part, n, count, budget, level))
    return out


def _split_text(text: str, count: CountFn, budget: int) -> list[str]:
    """Cut ``text`` into contiguous pieces of at most ``budget`` tokens (as ``count`` measures them).

    Parts from :func:`_atoms` are packed greedily, assuming counts add up across a boundary (exact for
    WordPiece at whitespace, an overestimate for most BPEs). A packed piece that still measures over
    the budget is re-split with a smaller budget, which ends because the budget strictly shrinks; a
    single character over the budget is kept as it is.
    """
    n_total = count([text])[0]
    if n_total <= budget:
        return [text]
    pieces: list[str] = []
    buf: list[str] = []
    used = 0
    for part, n in _atoms(text, n_total, count, budget, 0):
        if buf and used + n > budget:
            pieces.append("".join(buf))
            buf, used = [], 0
        buf.append(part)
        used += n
    if buf:
        pieces.append("".join(buf))
    out: list[str] = []
    for piece, n in zip(pieces, count(pieces)):
        if n <= budget or len(piece) == 1 or budget == 1:
            out.append(piece)
        else:
            out.extend(_split_text(piece, count, max(1, min(budget - 1, budget * budget // n))))
    return out


class WindowMixin:
    """``split_to_window`` for embedders that define ``count_tokens``, ``max_tokens`` and ``_special``
    (special tokens the model adds around each text)."""

    max_tokens: int
    _special: int = 0

    def count_tokens(self, texts: Sequence[str]) -> list[int]:  # pragma: no cover - overridden
        raise NotImplementedError

    def split_to_window(self, text: str, max_tokens: int | None = None) -> list[str]:
        """Split ``text`` into contiguous pieces that each fit a window of ``max_tokens`` tokens.

        Cuts fall at paragraph, line, sentence or word boundaries where possible, else inside a word.
        Separators stay with the piece before them, so ``"".join(pieces) == text``: nothing is lost
        or repeated. A text that fits (the empty string too) comes back as ``[text]``.

        Args:
            text: the text to split.
            max_tokens: the window, special tokens included; defaults to (and may not exceed) the
                model's ``max_tokens``.

        Returns:
            The pieces, in order.

        Raises:
            InvalidInputError: ``text`` is not a string, or ``max_tokens`` leaves no room for text
                or exceeds the model's window.
        """
        if not isinstance(text, str):
            raise InvalidInputError(f"split_to_window expects a string, got {type(text).__name__}")
        window = self.max_tokens if max_tokens is None else int(max_tokens)
        if not self._special < window <= self.max_tokens:
            raise InvalidInputError(
                f"max_tokens={window} must be in ({self._special}, {self.max_tokens}] for this embedder"
            )
        return _split_text(text, self.count_tokens, window - self._special)


def check_texts(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, str):
        raise InvalidInputError("embed expects a sequence of strings, got a single string; wrap it in a list")
    texts = list(texts)
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise InvalidInputError(f"text {i}: expected a string, got {type(t).__name__}")
    return texts
