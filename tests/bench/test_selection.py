"""``memgas bench selection`` on hand-made conversations in LoCoMo's and BEAM's formats (never the shared data): the
candidates each channel brings, their features, and the command end to end, out of fold."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from memgas.bench import selection
from memgas.bench.datasets import load_locomo
from memgas.cli.commands import main
from memgas.context.select import FEATURES, Selection
from memgas.methods import get_method
from memgas.methods.memgas import MemGAS
from memgas.methods.messages import MessageMethod
from memgas.store import open_store

SAID = [("Ann", "I adopted a grey cat named Luna."), ("Bob", "Lovely, cats are great company."),
        ("Ann", "My sister runs a bakery in Leeds."), ("Bob", "Does she make sourdough?"),
        ("Ann", "Yes, and zucchini muffins on Fridays."), ("Bob", "I should visit the bakery then.")]


def _locomo(root: Path) -> None:
    convs = []
    for n in range(2):
        session = [{"speaker": who, "dia_id": f"D1:{i + 1}", "text": f"{text} ({n})"} for i, (who, text) in
                   enumerate(SAID)]
        qa = [{"question": "What does Ann's sister bake on Fridays?", "answer": "zucchini muffins",
               "evidence": ["D1:5"], "category": 4},
              {"question": "What is the name of Ann's cat?", "answer": "Luna", "evidence": ["D1:1"], "category": 4}]
        convs.append({"sample_id": f"conv-{n}", "conversation": {
            "speaker_a": "Ann", "speaker_b": "Bob", "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": session}, "qa": qa})
    (root / "locomo").mkdir(parents=True)
    (root / "locomo" / "locomo10.json").write_text(json.dumps(convs))


def _beam(root: Path) -> None:
    for n in (1, 2):
        turns = [[{"role": "user", "id": 2 * i, "content": f"{text} ({n})"},
                  {"role": "assistant", "id": 2 * i + 1, "content": "Noted."}] for i, (_, text) in enumerate(SAID)]
        folder = root / "beam" / "100K" / str(n)
        folder.mkdir(parents=True)
        with gzip.open(folder / "chat.json.gz", "wt", encoding="utf-8") as f:
            json.dump([{"batch_number": 1, "time_anchor": "May-08-2023", "turns": turns}], f)
        (folder / "probing_questions.json").write_text(json.dumps({"information_extraction": [
            {"question": "What is baked on Fridays?", "answer": "zucchini muffins", "source_chat_ids": [8]}]}))


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("data")
    _locomo(root)
    _beam(root)
    return root


def test_each_channel_brings_its_best_and_the_features_say_so(data: Path, embedder, monkeypatch) -> None:
    """With one candidate per channel and no turns: the message nearest by cosine and the one most matching by words
    are both candidates (a channel left out loses its message), each with its channel's features."""
    conv = load_locomo(data / "locomo" / "locomo10.json")[0][0]
    question = next(q for q in conv.questions if "Fridays" in q.question)
    store = open_store(None)
    MemGAS(embedder).ingest(store, conv.sessions[0])
    memgas, vector = get_method("memgas", embedder), MessageMethod(embedder)
    user = conv.sessions[0].user_id
    monkeypatch.setattr(selection, "PER_CHANNEL", 1)
    monkeypatch.setattr(selection, "TURNS", 0)
    found = selection.candidates(question, memgas, vector, store, user)
    column = {name: i for i, name in enumerate(selection.FEATURES)}
    by_cosine = max(found, key=lambda c: c.features[column["cosine"]])
    by_words = [c for c in found if c.features[column["bm25 share of the best"]] == 1.0]
    assert by_cosine.features[column["cosine rank"]] == 1.0 and len(by_words) == 1
    assert {c.position for c in found} == {by_cosine.position, by_words[0].position}
    assert "vectors" in by_cosine.channels and "words" in by_words[0].channels
    assert all("turns" not in c.channels for c in found)  # no turn was asked for
    assert [c.gold for c in found if c.position == 4] == [True]  # D1:5, the muffins
    assert all(c.line.split(" · ")[-1].split(": ")[0] in ("Ann", "Bob") for c in found)  # who said it, on its line


def test_the_command_fits_and_reports_every_system_out_of_fold(data: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    assert main(["bench", "selection", "--data", str(data), "--out", str(out), "--stores", str(tmp_path / "s")]) == 0
    printed = capsys.readouterr().out
    assert "**locomo** (4 questions)" in printed and "**beam** (2 questions)" in printed
    report = json.loads((out / "results.json").read_text())["report"]
    assert report["gold_among_candidates"] == 1.0  # six messages a conversation: every channel brings them all
    # one model per fold, each answering the other's questions; the shipped one fitted on both
    assert set(report["coefficients"]) == {"0", "1", "shipped"}
    shipped = Selection.load(out / "selection.npz")
    assert report["coefficients"]["shipped"] == shipped.weights() and list(shipped.weights()) == list(FEATURES)
    assert "weights: " + str(out / "selection.npz") in printed
    for dataset in ("locomo", "beam"):
        systems = report["recall"][dataset]
        assert set(systems) == {"memgas", "vector-messages", "hybrid-messages", "learned",
                                "learned without message vectors", "learned over MemGAS's turns",
                                "user card + learned", "user card + learned, timelines as MemGAS",
                                "memgas, learned selection"}
        assert systems["memgas, learned selection"]["all@4000"] == 1.0
        values = np.array([v for cells in systems.values() for v in cells.values()])
        assert ((values >= 0) & (values <= 1)).all()
        assert systems["learned"]["all@4000"] == 1.0  # 4,000 tokens hold every message of these
    assert main(["bench", "selection", "--data", str(data), "--limit", "1"]) == 2
