"""Embedders of the sentence-transformers package (extra ``st``).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from memgas.core.errors import MissingDependencyError
from memgas.embed.base import WindowMixin, check_texts, l2_normalise

__all__ = ["SentenceTransformerEmbedder"]

# ----------------------------------------------------------------------------- sentence-transformers


class SentenceTransformerEmbedder(WindowMixin):
    """A sentence-transformers model (``pip install -e '.[st]'``), normalised output.

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
                f"the 'st:' embedder needs sentence-transformers: pip install -e '.[st]' in the memgas checkout ({e})"
            ) from e
        self._model = SentenceTransformer(model_name_or_path, device=device)
        self.id = f"st:{model_name_or_path}"
        self.dim = int(self._model.get_sentence_embedding_dimension())
        self.max_tokens = int(self._model.max_seq_length or self._model.tokenizer.model_max_length)
        self._special = int(self._model.tokenizer.num_special_tokens_to_add())

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """``(len(texts), dim)`` float32 L2-normalised rows."""
        texts = check_texts(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vecs = self._model.encode(texts, batch_size=32, convert_to_numpy=True, normalize_embeddings=True)
        return l2_normalise(vecs)

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Tokens per text by the model's tokenizer, without special tokens."""
        texts = check_texts(texts)
        enc = self._model.tokenizer(texts, add_special_tokens=False, truncation=False)["input_ids"]
        return [len(ids) for ids in enc]
