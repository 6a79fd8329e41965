"""``memgas bench card`` on hand-made conversations in BEAM's format (never the shared data): each question asked of
its conversation and of all of them as one user, the card's model fitted and measured out of fold."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from memgas.cli.commands import main
from memgas.context.card import CARD_FEATURES
from memgas.context.select import Selection

#: what each conversation's user says: an instruction, a preference and small talk, each conversation its own
#: person (in one memory, near repeats would replace one another), then asks for what the instruction is about
PEOPLE = [
    ("Always include rest days when I ask about workout plans.", "I prefer running in the mornings before work.",
     "Can you make me a workout plan for next week?"),
    ("Always give quantities in grams when I ask for recipes.", "I can't stand coriander in anything.",
     "Could you give me a recipe for a lentil soup?"),
    ("Always answer in bullet points when I ask about travel.", "I love quiet seaside towns out of season.",
     "What should I see on a weekend trip to Lisbon?"),
    ("Always show the tests first when I ask for Python code.", "I prefer type hints on every function.",
     "Write a Python function that merges two sorted lists."),
]
CHAT = ["The weather was lovely at the lake today.", "We watched a film about sailing last night."]


def _beam(root: Path) -> None:
    for n, (instruction, preference, question) in enumerate(PEOPLE, start=1):
        said = [instruction, CHAT[0], preference, CHAT[1]]
        turns = [[{"role": "user", "id": 2 * i, "content": f"{text} ({n})"},
                  {"role": "assistant", "id": 2 * i + 1, "content": "Noted."}] for i, text in enumerate(said)]
        folder = root / "beam" / "100K" / str(n)
        folder.mkdir(parents=True)
        with gzip.open(folder / "chat.json.gz", "wt", encoding="utf-8") as f:
            json.dump([{"batch_number": 1, "time_anchor": "May-08-2023", "turns": turns}], f)
        (folder / "probing_questions.json").write_text(json.dumps({"instruction_following": [
            {"question": question, "answer": "as the instruction says", "source_chat_ids": [0]}]}))


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("data")
    _beam(root)
    return root


def test_the_command_fits_the_card_and_measures_it_out_of_fold_in_both_settings(data: Path, tmp_path: Path,
                                                                              capsys) -> None:
    out = tmp_path / "out"
    assert main(["bench", "card", "--data", str(data), "--scales", "100K", "--out", str(out),
                 "--stores", str(tmp_path / "s")]) == 0
    printed = capsys.readouterr().out
    report = json.loads((out / "results.json").read_text())["report"]
    # four conversations, one question each, asked of its own conversation and of all four as one user
    assert report["questions"] == {"per conversation": 4, "one user": 4}
    # one user holds every conversation's statements
    assert report["statements"]["one user"] == 4 * report["statements"]["per conversation"] >= 8
    assert report["gold_statements"] == 1.0  # the instruction asked about is a statement of every memory
    for setting in ("per conversation", "one user"):
        systems = report["share"][setting]
        assert set(systems) == {"learned card", "hand-set card"}
        # 4,000 tokens hold every message of a conversation
        assert systems["learned card"]["all@4000"] == systems["hand-set card"]["all@4000"] == 1.0
        assert "0@1000" in systems["learned card"] and "1@1000" in systems["learned card"]
        assert "instruction_following@1000" in systems["learned card"]
    shipped = Selection.load(out / "card.npz", features=CARD_FEATURES)
    assert report["weights"] == shipped.weights() and list(shipped.weights()) == list(CARD_FEATURES)
    assert "**one user**" in printed and "weights: " + str(out / "card.npz") in printed
    assert np.isfinite(list(report["weights"].values())).all()
    assert main(["bench", "card", "--data", str(data), "--scales", "100K", "--limit", "1"]) == 2
