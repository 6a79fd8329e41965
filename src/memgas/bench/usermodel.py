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

It trains a third model too, of what a statement is about and what a request bears on (:mod:`memgas.kernels.subjects`),
on ``memgas/data/user_model_subjects.json`` (statements and requests written per subject; one text in four held out
by its hash) and on sentences of the development data that name none of the subjects' words (:data:`_SUBJECT_WORDS`),
as ``other`` (a deterministic sample, held out by conversation as above): what keeps the model from reading a
subject into everything a real conversation says.
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
from memgas.kernels.lasting import (
    CLASSES,
    INSTRUCTION_CLASS,
    PAIR_FEATURES,
    WORD_FEATURES,
    LastingModel,
    pair_features,
    word_features,
)
from memgas.kernels.standing import standing_statements
from memgas.kernels.subjects import BEARING, OTHER, SUBJECTS

__all__ = ["Example", "examples", "features", "train", "run_usermodel", "usermodel_markdown", "HELD_OUT",
           "subject_examples"]

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
    #: where it was said in its conversation (a larger number: later)
    order: int = 0
    #: the update it is a part of, ``"QUESTION:original"`` or ``"QUESTION:updated"`` (a knowledge-update question's
    #: evidence), else ""
    update: str = ""

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
            for q, item in enumerate(questions.get(ability, [])):
                description = " ".join([str(item.get(field) or ""), *map(str, item.get("conversation_references") or [])])
                ids = item.get("source_chat_ids") or []
                groups = ids.items() if ability == "knowledge_update" and isinstance(ids, dict) else [("", ids)]
                for group, part in groups:
                    role = {"original_info": "original", "updated_info": "updated"}.get(group)
                    for i in gold_ids(ability, part):
                        best = _closest(embed, _sentences(users.get(i, "")), description) if i in users else None
                        if best is not None:
                            yield Example(best, _KIND[kind], "BEAM", name, i, f"{q}:{role}" if role else "")
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
        said: list[tuple[str, int, str]] = []  # the evidence: (date, place, sentence)
        for number, (date, session) in enumerate(zip(record.get("haystack_dates") or [""] * len(record["haystack_sessions"]),
                                                record["haystack_sessions"])):
            for t, turn in enumerate(session):
                if turn.get("role") != "user":
                    continue
                if turn.get("has_answer") and kind is not None:
                    best = _closest(embed, _sentences(turn["content"]), f"{record['question']} {record['answer']}")
                    if best is not None:
                        said.append((str(date), 1000 * number + t, best))
                elif not turn.get("has_answer"):
                    passing += _sentences(turn["content"])
        said.sort()
        for rank, (_, _, sentence) in enumerate(said):  # an update's first evidence: the original; its last: the update
            role = "" if kind != "fact" or len(said) < 2 else "0:original" if rank == 0 else \
                "0:updated" if rank == len(said) - 1 else ""
            yield Example(sentence, _KIND[str(kind)], "LongMemEval", name, rank, role)
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
                    for one in re.findall(r"D(\d+):(\d+)", str(dia)):
                        named.add(f"D{one[0]}:{one[1]}")
                        best = _closest(embed, _sentences(turns.get(f"D{one[0]}:{one[1]}", "")), fact)
                        if best is not None:
                            yield Example(best, _KIND["fact"], "LoCoMo", name, 1000 * int(one[0]) + int(one[1]))
        passing = [s for dia, text in turns.items() if dia not in named for s in _sentences(text)]
        for s in _sample(passing, PASSING_PER_CONVERSATION * 4, name):
            yield Example(s, _KIND["passing"], "LoCoMo", name)


def _phrasings() -> Iterator[Example]:
    """The shipped phrasings (all trained on: the held-out report is of the data sets only)."""
    data = json.loads(resources.files("memgas").joinpath("data/user_model_phrasings.json").read_text("utf-8"))
    for kind, texts in data["examples"].items():
        for text in texts:
            yield Example(text, _KIND[kind], "phrasings", "phrasings")


@dataclass(frozen=True, slots=True)
class Pair:
    """Two lasting statements of one conversation, the ``older`` said first, and whether the newer ``replaces`` it
    (a knowledge update's evidence: the updated value after the original) or both hold (two other statements)."""

    older: str
    newer: str
    same_kind: bool
    replaces: bool
    dataset: str
    conversation: str

    @property
    def held_out(self) -> bool:
        """Whether the conversation is in the held-out part (as :attr:`Example.held_out`)."""
        return Example(self.older, 0, self.dataset, self.conversation).held_out


def _same_kind(a: Example, b: Example) -> bool:
    """Whether two statements are of one kind for the supersession model: both instructions, or neither."""
    return (a.label == INSTRUCTION_CLASS) == (b.label == INSTRUCTION_CLASS)


#: At most this many pairs of statements that both hold, of one conversation.
BOTH_HOLD_PER_CONVERSATION = 40


def pairs(found: Sequence[Example]) -> list[Pair]:
    """The supersession examples: in each conversation, each knowledge update's original and updated statements
    (replaces), and a deterministic sample of its other pairs of lasting statements, in the order said (both hold);
    then the shipped phrasings' pairs."""
    by_conversation: dict[tuple[str, str], list[Example]] = {}
    for e in found:
        if e.label != 0 and e.dataset != "phrasings":
            by_conversation.setdefault((e.dataset, e.conversation), []).append(e)
    out: list[Pair] = []
    for (dataset, name), said in by_conversation.items():
        said.sort(key=lambda e: e.order)
        replacing, holding = [], []
        for i, a in enumerate(said):
            for b in said[i + 1:]:
                if a.order == b.order:
                    continue
                qa, _, ra = a.update.partition(":")
                qb, _, rb = b.update.partition(":")
                if qa and qa == qb:  # the same update: the original then the updated value replaces it
                    if (ra, rb) == ("original", "updated"):
                        replacing.append(Pair(a.text, b.text, _same_kind(a, b), True, dataset, name))
                    continue
                holding.append(Pair(a.text, b.text, _same_kind(a, b), False, dataset, name))
        kept = sorted(holding, key=lambda p: hashlib.sha256((p.older + p.newer).encode()).digest())
        out += replacing + kept[:BOTH_HOLD_PER_CONVERSATION]
    data = json.loads(resources.files("memgas").joinpath("data/user_model_phrasings.json").read_text("utf-8"))
    for key, replaces in (("replaces", True), ("both_hold", False)):
        out += [Pair(a, b, True, replaces, "phrasings", "phrasings") for a, b in data["supersession"][key]]
    return out


def pair_rows(found: Sequence[Pair], embedder: Embedder) -> np.ndarray:
    """The supersession model's input rows (:func:`memgas.kernels.lasting.pair_features`)."""
    texts = sorted({t for p in found for t in (p.older, p.newer)})
    vectors = dict(zip(texts, np.asarray(embedder.embed(texts), np.float32))) if texts else {}
    return np.stack([pair_features(vectors[p.older], vectors[p.newer], p.older, p.newer, p.same_kind)
                     for p in found]) if found else np.zeros((0, 0), np.float32)


def _supersession(truth: np.ndarray, said: np.ndarray) -> dict[str, float]:
    """False supersession (of pairs that both hold, the share called replacing) and missed supersession (of the
    updates, the share not called)."""
    holding, replacing = ~truth, truth
    return {"both_hold": int(holding.sum()), "updates": int(replacing.sum()),
            "false": round(float(said[holding].mean()) if holding.any() else 0.0, 3),
            "missed": round(float((~said[replacing]).mean()) if replacing.any() else 0.0, 3)}


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


def run_usermodel(data: Path, embedder: Embedder, *, l2: float = 1.0
                  ) -> tuple[tuple[LastingModel, LastingModel, LastingModel], dict[str, Any]]:
    """Train on the development data's training part and report on its held-out part (see the module docstring);
    the fitted detector, supersession model and subject model, and the report (``counts``, ``held_out`` per data
    set: ``rules`` and ``model`` scores; ``supersession`` the same of the pairs; ``subjects``)."""
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
    replacer, report["supersession"] = _train_supersession(found, embedder, l2)
    subjects, report["subjects"] = _train_subjects(found, embedder)
    return (model, replacer, subjects), report


#: A development sentence with none of these words is an example of :data:`~memgas.kernels.subjects.OTHER` (one with
#: any of them may be about a subject: it is left out, never labelled by a word).
_SUBJECT_WORDS = re.compile(
    r"\b(?:liv(?:e|es|ed|ing)|mov(?:e|ed|ing)|relocat\w*|home|house|apartment|flat|city|town|neighbou?rhood|"
    r"vegetarian|vegan|pescatarian|keto|diet\w*|meat|fish|eat\w*|ate|food\w*|allerg\w*|intoleran\w*|cook\w*|"
    r"recipe\w*|dinner|lunch|breakfast|restaurant\w*|partner|wife|husband|girlfriend|boyfriend|married|fianc\w*|"
    r"spouse|dating|date|daughter|son|kids?|child|children|mother|father|mom|dad|mum|sister|brother|parents?|"
    r"family|baby|job|work\w*|career|office|company|boss|manager|hired|employ\w*|dog|cat|pets?|pupp\w*|kitten|"
    r"language|french|spanish|english|german|italian|reply|respond|answer)\b", re.I)
#: At most this many development sentences as ``other``.
OTHER_FROM_DATA = 600
#: The subject model's penalty (a few hundred written examples: a light one).
SUBJECT_L2 = 0.3


@dataclass(frozen=True, slots=True)
class SubjectExample:
    """One sentence and a subject (an index of :data:`~memgas.kernels.subjects.SUBJECTS`) it is about or bears on;
    ``request``: a request rather than a statement; ``held_out``: in the part reported on."""

    text: str
    label: int
    request: bool
    source: str
    held_out: bool


def _text_held_out(text: str) -> bool:
    return int(hashlib.sha256(text.encode()).hexdigest(), 16) % HELD_OUT == 0


def subject_examples(found: Sequence[Example]) -> list[SubjectExample]:
    """The subject model's examples: the written statements and requests (a request that bears on several subjects
    is one example per subject), then up to :data:`OTHER_FROM_DATA` development sentences of ``found`` without a
    subject's word, as ``other``."""
    data = json.loads(resources.files("memgas").joinpath("data/user_model_subjects.json").read_text("utf-8"))
    out = [SubjectExample(text, SUBJECTS.index(subject), part == "requests", "written", _text_held_out(text))
           for part in ("statements", "requests") for subject, texts in data[part].items() for text in texts]
    plain = [e for e in found if e.dataset != "phrasings" and not _SUBJECT_WORDS.search(e.text)]
    plain.sort(key=lambda e: hashlib.sha256(e.text.encode()).digest())
    out += [SubjectExample(e.text, SUBJECTS.index(OTHER), e.label == 0, e.dataset, e.held_out)
            for e in plain[:OTHER_FROM_DATA]]
    return out


def _train_subjects(found: Sequence[Example], embedder: Embedder) -> tuple[LastingModel, dict[str, Any]]:
    """The subject model (softmax over the sentence vector alone), fitted on the training part and reported on the
    held-out one: the statements' accuracy, the development sentences read as ``other``, and of the requests, the
    share of their subjects found (probability at least :data:`~memgas.kernels.subjects.BEARING`) and the share of
    the subjects found that are theirs."""
    made = subject_examples(found)
    texts = sorted({e.text for e in made})
    vectors = dict(zip(texts, np.asarray(embedder.embed(texts), np.float32)))
    rows = np.stack([vectors[e.text] for e in made])
    labels = np.array([e.label for e in made])
    test = np.array([e.held_out for e in made])
    model = LastingModel(l2=SUBJECT_L2).fit(rows[~test], labels[~test], n_classes=len(SUBJECTS))
    model.threshold = 0.0  # a subject is the most probable one (predict's "lasting" gate is not used here)
    held = [e for e in made if e.held_out]
    p = model.predict_proba(rows[test])
    statements = np.array([e.source == "written" and not e.request for e in held])
    plain = np.array([e.source != "written" for e in held])
    best = p.argmax(axis=1)
    # a request's subjects: every label its text has among the held-out examples
    wanted: dict[str, set[int]] = {}
    for e in held:
        if e.request and e.source == "written":
            wanted.setdefault(e.text, set()).add(e.label)
    first = {e.text: i for i, e in reversed(list(enumerate(held)))}
    found_right = found_all = labelled = 0
    for text, labels_of in wanted.items():
        found_here = {j for j in range(len(SUBJECTS)) if p[first[text], j] >= BEARING and j != 0}
        found_right += len(found_here & labels_of)
        found_all += len(found_here)
        labelled += len(labels_of - {0})
    report = {"l2": SUBJECT_L2, "bearing": BEARING,
              "train": int((~test).sum()), "held_out": int(test.sum()),
              "statements": {"n": int(statements.sum()),
                             "accuracy": round(float((best[statements] == labels[test][statements]).mean()), 3)},
              "data_other": {"n": int(plain.sum()), "read_as_other": round(float((best[plain] == 0).mean()), 3)},
              "requests": {"n": len(wanted), "recall": round(found_right / max(labelled, 1), 3),
                           "precision": round(found_right / max(found_all, 1), 3)}}
    # the shipped model learns from every example
    shipped = LastingModel(l2=SUBJECT_L2).fit(rows, labels, n_classes=len(SUBJECTS))
    shipped.threshold = 0.0
    return shipped, report


def _train_supersession(found: Sequence[Example], embedder: Embedder, l2: float
                        ) -> tuple[LastingModel, dict[str, Any]]:
    """The supersession model, trained and reported as the detector is (the same split, a threshold chosen on a
    part of the training conversations, best F1), beside today's rule (the same kind, cosine >= 0.8)."""
    from memgas.context.profile import SUPERSEDE_COSINE

    made = pairs(found)
    rows = pair_rows(made, embedder)
    truth = np.array([p.replaces for p in made])
    test = np.array([p.held_out and p.dataset != "phrasings" for p in made])
    tune = np.array([int(hashlib.sha256(("tune" + p.conversation).encode()).hexdigest(), 16) % HELD_OUT == 0
                     and p.dataset != "phrasings" for p in made]) & ~test
    probe = LastingModel(l2=l2).fit(rows[~test & ~tune], truth[~test & ~tune].astype(int), n_classes=2)
    threshold = choose_threshold(probe.predict_proba(rows[tune])[:, 1], truth[tune], beta=1.0)
    model = LastingModel(l2=l2, threshold=threshold).fit(rows[~test], truth[~test].astype(int), n_classes=2)
    cosine = rows[:, -len(PAIR_FEATURES)]
    rule = (cosine >= SUPERSEDE_COSINE) & (rows[:, -1] > 0)
    said = model.predict(rows[test]) == 1
    report: dict[str, Any] = {"threshold": threshold, "counts": {}, "held_out": {}}
    for name in sorted({p.dataset for p in made}):
        mine = np.array([p.dataset == name for p in made])
        report["counts"][name] = {"train": int((mine & ~test).sum()), "held_out": int((mine & test).sum()),
                                  "updates": int((mine & truth).sum())}
        part = mine[test]
        if part.any():
            report["held_out"][name] = {"rules": _supersession(truth[test][part], rule[test][part]),
                                        "model": _supersession(truth[test][part], said[part])}
    report["held_out"]["all"] = {"rules": _supersession(truth[test], rule[test]),
                                 "model": _supersession(truth[test], said)}
    return model, report


def usermodel_markdown(report: dict[str, Any]) -> str:
    """The report as Markdown tables: per data set, held-out sentences, rules against the model; then the pairs."""
    lines = ["| held-out part | sentences (lasting) | rules: precision / recall | model: precision / recall | "
             "model: right kind |", "|---|---:|---:|---:|---:|"]
    for name, both in report["held_out"].items():
        r, m = both["rules"], both["model"]
        lines.append(f"| {name} | {m['n']:,} ({m['lasting']:,}) | {r['precision']:.3f} / {r['recall']:.3f} | "
                     f"**{m['precision']:.3f} / {m['recall']:.3f}** | {m['kind']:.3f} |")
    counts = ", ".join(f"{name} {c['train']:,} trained / {c['held_out']:,} held out" for name, c in report["counts"].items())
    return "\n".join(lines) + (f"\n\nExamples: {counts}. A sentence lasts when its probability of a lasting kind is at "
                               f"least {report['threshold']} (chosen on a part of the training conversations).\n"
                               + _supersession_markdown(report["supersession"])
                               + (_subjects_markdown(report["subjects"]) if "subjects" in report else ""))


def _supersession_markdown(report: dict[str, Any]) -> str:
    lines = ["\n| held-out pairs | both hold / updates | rule: false / missed supersession | "
             "model: false / missed supersession |", "|---|---:|---:|---:|"]
    for name, both in report["held_out"].items():
        r, m = both["rules"], both["model"]
        lines.append(f"| {name} | {m['both_hold']:,} / {m['updates']:,} | {r['false']:.3f} / {r['missed']:.3f} | "
                     f"**{m['false']:.3f} / {m['missed']:.3f}** |")
    return "\n".join(lines) + (f"\n\nA newer statement replaces an older one when the model's probability is at least "
                               f"{report['threshold']}; the rule: the same kind and a cosine of at least 0.8.\n")


def _subjects_markdown(report: dict[str, Any]) -> str:
    s, d, r = report["statements"], report["data_other"], report["requests"]
    return (f"\n| subject model, held out | n | |\n|---|---:|---:|\n"
            f"| written statements: subject right | {s['n']} | **{s['accuracy']:.3f}** |\n"
            f"| development sentences without a subject's word: read as other | {d['n']} | "
            f"**{d['read_as_other']:.3f}** |\n"
            f"| written requests: their subjects found / what is found that is right | {r['n']} | "
            f"**{r['recall']:.3f} / {r['precision']:.3f}** |\n\n"
            f"{report['train']:,} examples trained on, {report['held_out']:,} held out; a request bears on a subject "
            f"of probability at least {report['bearing']}. The shipped weights are fitted on every example.\n")


def write_weights(models: tuple[LastingModel, LastingModel, LastingModel], path: Path, report: dict[str, Any]) -> None:
    """Keep the detector's, the supersession model's and the subject model's weights at ``path`` (``numpy.savez``;
    the latter two's keys prefixed ``pair_`` and ``subject_``), with the embedder they were fitted over."""
    detector, replacer, subjects = models
    arrays = {**detector.to_arrays(), **{f"pair_{k}": v for k, v in replacer.to_arrays().items()},
              **{f"subject_{k}": v for k, v in subjects.to_arrays().items()},
              "embedder": np.array(report["embedder"]), "classes": np.array(CLASSES),
              "subjects": np.array(SUBJECTS)}
    np.savez(path, **arrays)  # type: ignore[arg-type]  # numpy's stub types the keywords as its own flags
