"""``memgas bench usermodel`` on hand-made data in the three data sets' formats (never the shared data): the
examples it labels from each set's gold evidence, the split by conversation, and the command end to end."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from memgas.bench.usermodel import HELD_OUT, Example, examples
from memgas.cli.commands import main
from memgas.kernels.lasting import CLASSES, LastingModel


def _beam(root: Path, n: int) -> None:
    place = "in the morning" if n == 1 else f"at {n} o'clock"  # each conversation its own texts: none deduplicated
    turns = [[{"role": "user", "id": 0, "content": f"I prefer tea over coffee {place}. The weather is odd. ->-> 1,0"},
              {"role": "assistant", "id": 1, "content": "Noted."}],
             [{"role": "user", "id": 2, "content": "Always cite your sources. Can you check this?"},
              {"role": "assistant", "id": 3, "content": "Sure."}],
             [{"role": "user", "id": 4, "content": "Write me a short poem about rivers please."},
              {"role": "assistant", "id": 5, "content": "Here it is."}]]
    folder = root / "beam" / "100K" / str(n)
    folder.mkdir(parents=True)
    with gzip.open(folder / "chat.json.gz", "wt", encoding="utf-8") as f:
        json.dump([{"batch_number": 1, "turns": turns}], f)
    (folder / "probing_questions.json").write_text(json.dumps({
        "preference_following": [{"question": "What to drink?", "source_chat_ids": [0],
                                  "preference_being_tested": "The user prefers tea to coffee."}],
        "instruction_following": [{"question": "Tell me about Rome.", "source_chat_ids": [2],
                                   "instruction_being_tested": "Always cite sources."}]}))


def data_folder(root: Path) -> Path:
    for n in range(1, 9):
        _beam(root, n)
    lme = [{"question_id": f"q{n}", "question_type": "single-session-preference", "question": "Which camera?",
            "answer": "The user uses a Sony camera.", "haystack_sessions": [[
                {"role": "user", "content": "I shoot with my Sony camera every weekend.", "has_answer": True},
                {"role": "user", "content": "Tell me a fun fact about the moon."}]]} for n in range(8)]
    (root / "longmemeval").mkdir()
    with gzip.open(root / "longmemeval" / "longmemeval_s_cleaned.dev.json.gz", "wt", encoding="utf-8") as f:
        json.dump(lme, f)
    locomo = [{"sample_id": f"conv-{n}", "conversation": {"speaker_a": "Ann", "speaker_b": "Bob", "session_1": [
        {"speaker": "Ann", "dia_id": "D1:1", "text": "I work as a nurse in Leeds. Nice to see you!"},
        {"speaker": "Bob", "dia_id": "D1:2", "text": "Did you see the game last night?"}]},
        "observation": {"session_1_observation": {"Ann": [["Ann works as a nurse in Leeds.", "D1:1"]]}}}
        for n in range(8)]
    (root / "locomo").mkdir()
    (root / "locomo" / "locomo10.json").write_text(json.dumps(locomo))
    return root


def test_the_examples_are_the_sentences_the_gold_evidence_names(tmp_path: Path, embedder) -> None:
    found = examples(data_folder(tmp_path), embedder)
    kinds = {(e.dataset, e.text): CLASSES[e.label] for e in found}
    assert kinds[("BEAM", "I prefer tea over coffee in the morning.")] == "preference"  # its message's closest
    assert ("BEAM", "The weather is odd.") not in kinds  # the gold message's other sentence: neither kind for sure
    assert kinds[("BEAM", "Always cite your sources.")] == "instruction"
    assert kinds[("BEAM", "Write me a short poem about rivers please.")] == "passing"  # named by no question
    assert kinds[("LongMemEval", "I shoot with my Sony camera every weekend.")] == "preference"
    assert kinds[("LongMemEval", "Tell me a fun fact about the moon.")] == "passing"
    assert kinds[("LoCoMo", "I work as a nurse in Leeds.")] == "fact"
    assert kinds[("LoCoMo", "Did you see the game last night?")] == "passing"
    assert any(e.dataset == "phrasings" for e in found)
    parts = {e.conversation: e.held_out for e in found if e.dataset == "BEAM"}
    assert 0 < sum(parts.values()) < len(parts)  # some conversations held out, by their names
    assert Example("x", 0, "BEAM", "beam/100K/1").held_out == Example("y", 1, "BEAM", "beam/100K/1").held_out
    with pytest.raises(FileNotFoundError, match="--data"):
        examples(tmp_path / "nothing", embedder)


def test_the_command_trains_reports_and_keeps_the_weights(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert main(["bench", "usermodel", "--data", str(data_folder(tmp_path / "data")), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "| all |" in printed and "rules: precision / recall" in printed and "weights:" in printed
    report = json.loads((out / "results.json").read_text())["report"]
    assert report["embedder"] == "onnx:all-MiniLM-L6-v2-int8" and 0.0 < report["threshold"] < 1.0
    assert set(report["held_out"]["all"]) == {"rules", "model"} and HELD_OUT == 4
    weights = dict(np.load(out / "lasting.npz"))
    model = LastingModel.from_arrays(weights)
    assert model.coef_ is not None and model.coef_.shape == (len(CLASSES), 384 + 10)
    pair = LastingModel.from_arrays({k[5:]: v for k, v in weights.items() if k.startswith("pair_")})
    assert pair.coef_ is not None and pair.coef_.shape == (2, 384 + 4)
    assert set(report["supersession"]["held_out"]["all"]) == {"rules", "model"}
    assert str(weights["embedder"]) == report["embedder"] and float(weights["threshold"]) == pytest.approx(
        report["threshold"], abs=1e-4)


def test_an_update_s_original_and_updated_statements_are_a_replacing_pair() -> None:
    from memgas.bench.usermodel import pairs

    said = [Example("I live in Leeds.", 3, "BEAM", "c", 1, "0:original"), Example("I hate olives.", 2, "BEAM", "c", 2),
            Example("I moved to York.", 3, "BEAM", "c", 5, "0:updated"), Example("Thanks.", 0, "BEAM", "c", 6)]
    made = [p for p in pairs(said) if p.dataset == "BEAM"]
    assert {(p.older, p.newer, p.replaces) for p in made} == {
        ("I live in Leeds.", "I moved to York.", True), ("I live in Leeds.", "I hate olives.", False),
        ("I hate olives.", "I moved to York.", False)}  # passing sentences make no pair
    assert any(p.dataset == "phrasings" and p.replaces for p in pairs([]))
