"""``memgas bench usermodel``: the user model's detector (:mod:`memgas.kernels.lasting`) trained on the development
data, reported on a part it was not trained on, beside today's rules (:mod:`memgas.kernels.standing`).

The examples are sentences people said, labelled from the data sets' own gold evidence:

* BEAM: the user messages a preference-following question names (``preference``), an instruction-following one
  (``instruction``), a knowledge-update or contradiction one (``fact``); of each such message the sentence closest
  in meaning to what the question tests (its ``preference_being_tested``, ``instruction_being_tested``, the answer
  and the references) is the example, the message's other sentences are left out (neither kind for sure);
* LongMemEval (the development half): the user turns marked ``has_answer`` of single-session-preference questions
  (``preference``) and knowledge-update ones (``fact``), the sentence closest to the question with its answer;
* LoCoMo: each per-speaker observation (a fact with the dialogue id it came from, ``fact``), the sentence of that
  turn closest to it;
* ``passing``: sentences of the same conversations' user messages that no question or observation names, a
  deterministic sample;
* the phrasings of ``memgas/data/user_model_phrasings.json``, written for the kinds of lasting statement the data sets
  have few of (diets, allergies, dislikes, family, names), all in the training part.

Conversations are split by a hash of their name: a quarter held out, the rest trained on. The report gives, on the
held-out part and per data set, the precision and recall of "lasts" (any kind but passing) for the rules and for
the model, and how often the model names the right kind of a lasting sentence.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from memgas.bench.beam import gold_ids, strip_marker
from memgas.embed.base import Embedder
from memgas.kernels.excerpt import sentence_spans
from memgas.kernels.lasting import CLASSES, WORD_FEATURES, LastingModel, word_features
from memgas.kernels.standing import standing_statements

__all__ = ["Example", "examples", "features", "train", "run_usermodel", "usermodel_markdown", "HELD_OUT"]

#: One conversation in this many is held out (by the hash of its name).
HELD_OUT = 4
#: At most this many passing sentences of one conversation.
PASSING_PER_CONVERSATION = 60
_KIND = {name: i for i, name in enumerate(CLASSES)}


@dataclass(frozen=True, slots=True)
class Example:
    """One labelled sentence: what was said, its kind (an index of :data:`CLASSES`), the data set and conversation
    it comes from (the split is by conversation)."""

    text: str
    label: int
    dataset: str
    conversation: str

    @property
    def held_out(self) -> bool:
        """Whether the conversation is in the held-out part."""
        return int(hashlib.sha256(self.conversation.encode()).hexdigest(), 16) % HELD_OUT == 0


def _sentences(text: str) -> list[str]:
    """The sentences of a message worth reading: 3 to 80 words."""
    out = []
    for a, b in sentence_spans(text):
        s = " ".join(text[a:b].split())
        if 3 <= len(s.split()) <= 80:
            out.append(s)
    return out


def _closest(embed: Callable[[list[str]], np.ndarray], sentences: list[str], description: str) -> str | None:
    """The sentence of ``sentences`` closest in meaning to ``description``."""
    if not sentences:
        return None
    vectors = embed(sentences + [description])
    return sentences[int(np.argmax(vectors[:-1] @ vectors[-1]))]


def _sample(items: list[str], n: int, seed: str) -> list[str]:
    """A deterministic sample of at most ``n`` of ``items`` (by the hash of each with ``seed``)."""
    return sorted(items, key=lambda s: hashlib.sha256((seed + s).encode()).digest())[:n]


def _beam(root: Path, embed: Callable[[list[str]], np.ndarray]) -> Iterator[Example]:
    """BEAM's examples (see the module docstring)."""
    abilities = {"preference_following": ("preference", "preference_being_tested"),
                 "instruction_following": ("instruction", "instruction_being_tested"),
                 "knowledge_update": ("fact", "answer"), "contradiction_resolution": ("fact", "ideal_answer")}
    for chat in sorted(root.glob("*/*/chat.json.gz")):
        name = f"beam/{chat.parent.parent.name}/{chat.parent.name}"
        batches = json.loads(gzip.open(chat).read())
        users = {m["id"]: strip_marker(m["content"]) for b in batches for turn in b["turns"] for m in turn
                 if m.get("role") == "user"}
        questions = json.loads((chat.parent / "probing_questions.json").read_text(encoding="utf-8"))
        named: set[int] = set()
        for ability, items in questions.items():
            for item in items:
                named.update(gold_ids(ability, item.get("source_chat_ids") or []))
        for ability, (kind, field) in abilities.items():
            for item in questions.get(ability, []):
                description = " ".join([str(item.get(field) or ""), *map(str, item.get("conversation_references") or [])])
                for i in gold_ids(ability, item.get("source_chat_ids") or []):
                    best = _closest(embed, _sentences(users.get(i, "")), description) if i in users else None
                    if best is not None:
                        yield Example(best, _KIND[kind], "BEAM", name)
        passing = [s for i, text in users.items() if i not in named for s in _sentences(text)]
        for s in _sample(passing, PASSING_PER_CONVERSATION, name):
            yield Example(s, _KIND["passing"], "BEAM", name)


def _longmemeval(path: Path, embed: Callable[[list[str]], np.ndarray]) -> Iterator[Example]:
    """LongMemEval's examples (see the module docstring)."""
    kinds = {"single-session-preference": "preference", "knowledge-update": "fact"}
    for record in json.loads(gzip.open(path).read()):
        name = f"longmemeval/{record['question_id']}"
        kind = kinds.get(record["question_type"])
        passing: list[str] = []
        for session in record["haystack_sessions"]:
            for turn in session:
                if turn.get("role") != "user":
                    continue
                if turn.get("has_answer") and kind is not None:
                    best = _closest(embed, _sentences(turn["content"]), f"{record['question']} {record['answer']}")
                    if best is not None:
                        yield Example(best, _KIND[kind], "LongMemEval", name)
                elif not turn.get("has_answer"):
                    passing += _sentences(turn["content"])
        if kind is not None:  # the passing sentences of the questions that have lasting ones, so both are there
            for s in _sample(passing, PASSING_PER_CONVERSATION // 4, name):
                yield Example(s, _KIND["passing"], "LongMemEval", name)


def _locomo(path: Path, embed: Callable[[list[str]], np.ndarray]) -> Iterator[Example]:
    """LoCoMo's examples (see the module docstring)."""
    for sample in json.loads(path.read_text(encoding="utf-8")):
        name = f"locomo/{sample['sample_id']}"
        turns = {t["dia_id"]: t["text"] for key, value in sample["conversation"].items()
                 if key.startswith("session_") and isinstance(value, list) for t in value}
        named: set[str] = set()
        for observations in sample["observation"].values():
            for facts in observations.values():
                for fact, dia in facts:
                    for one in re.findall(r"D\d+:\d+", str(dia)):
                        named.add(one)
                        best = _closest(embed, _sentences(turns.get(one, "")), fact)
                        if best is not None:
                            yield Example(best, _KIND["fact"], "LoCoMo", name)
        passing = [s for dia, text in turns.items() if dia not in named for s in _sentences(text)]
        for s in _sample(passing, PASSING_PER_CONVERSATION * 4, name):
            yield Example(s, _KIND["passing"], "LoCoMo", name)


def _phrasings() -> Iterator[Example]:
    """The shipped phrasings (all trained on: the held-out report is of the data sets only)."""
    data = json.loads(resources.files("memgas").joinpath("data/user_model_phrasings.json").read_text("utf-8"))
    for kind, texts in data["examples"].items():
        for text in texts:
            yield Example(text, _KIND[kind], "phrasings", "phrasings")


def examples(data: Path, embedder: Embedder) -> list[Example]:
    """Every labelled sentence of the development data under ``data`` (``beam/``, ``longmemeval/``, ``locomo/``)
    and the shipped phrasings, duplicates (the same text twice in one data set) once.

    Raises:
        FileNotFoundError: a data set is missing under ``data``.
    """
    embed = lambda texts: np.asarray(embedder.embed(texts), np.float32)
    lme = data / "longmemeval" / "longmemeval_s_cleaned.dev.json.gz"
    locomo = data / "locomo" / "locomo10.json"
    for needed in (data / "beam", lme, locomo):
        if not needed.exists():
            raise FileNotFoundError(f"no {needed}: --data names the folder holding beam/, longmemeval/ and locomo/")
    seen: set[tuple[str, str]] = set()
    out = []
    for ex in (*_beam(data / "beam", embed), *_longmemeval(lme, embed), *_locomo(locomo, embed), *_phrasings()):
        key = (ex.dataset, ex.text)
        if key not in seen:
            seen.add(key)
            out.append(ex)
    return out


def features(texts: Sequence[str], embedder: Embedder) -> np.ndarray:
    """The model's input rows: each sentence's unit vector, then its :func:`word_features`."""
    vectors = np.asarray(embedder.embed(list(texts)), np.float32).reshape(len(texts), -1)
    words = np.stack([word_features(t) for t in texts]) if texts else np.zeros((0, len(WORD_FEATURES)), np.float32)
    return np.hstack([vectors, words])


def _rules(text: str) -> int:
    """The kind today's rules give a sentence: instruction or preference when they match, else passing."""
    found = standing_statements(text)
    return 0 if not found else _KIND[found[0].kind]


def _scores(truth: np.ndarray, said: np.ndarray) -> dict[str, float]:
    """Precision and recall of "lasts" (any kind but passing), and the share of lasting sentences given their kind."""
    lasting, called = truth != 0, said != 0
    hits = int((lasting & called).sum())
    return {"n": int(len(truth)), "lasting": int(lasting.sum()),
            "precision": round(hits / max(int(called.sum()), 1), 3), "recall": round(hits / max(int(lasting.sum()), 1), 3),
            "kind": round(float((said[lasting] == truth[lasting]).mean()) if lasting.any() else 0.0, 3)}


def train(rows: np.ndarray, labels: np.ndarray, *, l2: float = 1.0) -> LastingModel:
    """The detector fitted on ``rows`` (:func:`features`) and ``labels``."""
    return LastingModel(l2=l2).fit(rows, labels, n_classes=len(CLASSES))


def choose_threshold(lasting: np.ndarray, truth: np.ndarray, *, beta: float = 0.5) -> float:
    """The probability of lasting above which a sentence is called lasting that gives the best F-beta on
    ``lasting`` (each sentence's probability) against ``truth`` (lasting or not); ``beta`` < 1 weighs precision
    more, since what is called lasting is shown to the agent in every context.

    >>> choose_threshold(np.array([0.9, 0.8, 0.4, 0.3]), np.array([True, True, False, False]))
    0.8
    """
    best, chosen = -1.0, 0.5
    for t in np.unique(lasting):
        called = lasting >= t
        hits = float((called & truth).sum())
        p, r = hits / max(float(called.sum()), 1.0), hits / max(float(truth.sum()), 1.0)
        f = (1 + beta**2) * p * r / max(beta**2 * p + r, 1e-12)
        if f > best:
            best, chosen = f, float(t)
    return round(chosen, 4)


def run_usermodel(data: Path, embedder: Embedder, *, l2: float = 1.0) -> tuple[LastingModel, dict[str, Any]]:
    """Train on the development data's training part and report on its held-out part (see the module docstring);
    the fitted model and the report (``counts``, ``held_out`` per data set: ``rules`` and ``model`` scores)."""
    found = examples(data, embedder)
    rows = features([e.text for e in found], embedder)
    labels = np.array([e.label for e in found])
    test = np.array([e.held_out and e.dataset != "phrasings" for e in found])
    # the threshold is chosen on a part of the training conversations the model is fitted without, then the model
    # is fitted on all of them; the held-out part is read once, at the end
    tune = np.array([int(hashlib.sha256(("tune" + e.conversation).encode()).hexdigest(), 16) % HELD_OUT == 0
                     and e.dataset != "phrasings" for e in found]) & ~test
    probe = train(rows[~test & ~tune], labels[~test & ~tune], l2=l2)
    threshold = choose_threshold(1.0 - probe.predict_proba(rows[tune])[:, 0], labels[tune] != 0)
    model = train(rows[~test], labels[~test], l2=l2)
    model.threshold = threshold
    said = model.predict(rows[test])
    rules = np.array([_rules(e.text) for e in np.array(found, dtype=object)[test]])
    report: dict[str, Any] = {"counts": {}, "held_out": {}, "l2": l2, "embedder": embedder.id,
                              "threshold": threshold}
    sets = sorted({e.dataset for e in found})
    for name in sets:
        mine = np.array([e.dataset == name for e in found])
        report["counts"][name] = {"train": int((mine & ~test).sum()), "held_out": int((mine & test).sum()),
                                  **{k: int(((labels == i) & mine).sum()) for i, k in enumerate(CLASSES)}}
        part = mine[test]
        if part.any():
            report["held_out"][name] = {"rules": _scores(labels[test][part], rules[part]),
                                        "model": _scores(labels[test][part], said[part])}
    report["held_out"]["all"] = {"rules": _scores(labels[test], rules), "model": _scores(labels[test], said)}
    return model, report


def usermodel_markdown(report: dict[str, Any]) -> str:
    """The report as a Markdown table: per data set, held-out sentences, rules against the model."""
    lines = ["| held-out part | sentences (lasting) | rules: precision / recall | model: precision / recall | "
             "model: right kind |", "|---|---:|---:|---:|---:|"]
    for name, both in report["held_out"].items():
        r, m = both["rules"], both["model"]
        lines.append(f"| {name} | {m['n']:,} ({m['lasting']:,}) | {r['precision']:.3f} / {r['recall']:.3f} | "
                     f"**{m['precision']:.3f} / {m['recall']:.3f}** | {m['kind']:.3f} |")
    counts = ", ".join(f"{name} {c['train']:,} trained / {c['held_out']:,} held out" for name, c in report["counts"].items())
    return "\n".join(lines) + (f"\n\nExamples: {counts}. A sentence lasts when its probability of a lasting kind is at "
                               f"least {report['threshold']} (chosen on a part of the training conversations).\n")


def write_weights(model: LastingModel, path: Path, report: dict[str, Any]) -> None:
    """Keep the model's weights at ``path`` (``numpy.savez``), with the embedder they were fitted over."""
    arrays = {**model.to_arrays(), "embedder": np.array(report["embedder"]), "classes": np.array(CLASSES)}
    np.savez(path, **arrays)  # type: ignore[arg-type]  # numpy's stub types the keywords as its own flags
