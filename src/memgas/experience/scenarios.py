"""The PRINCIPLES scenario set shipped with memgas (``data/principles_scenarios.json``).

Written for the project: three proactive domains (emotional support, persuasion, negotiation), five
principle *families* per domain (e.g. ``validate-feelings``, ``small-first-ask``, ``justify-anchor``), per
family four training seeds and two held-out (``test``) seeds, each with the user's situation, the goal,
hidden traits and opening message; plus two hand-written reference principles per family (a labelled
set for retrieval measurements that does not depend on a model's extraction).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from memgas.core.errors import InvalidInputError
from memgas.experience.principles import Scenario

__all__ = ["ReferencePrinciple", "ScenarioSet", "load_scenarios"]


@dataclass(frozen=True, slots=True)
class ReferencePrinciple:
    """A hand-written principle labelled with its family."""

    family: str
    domain: str
    situation: str
    action: str
    avoid: str
    reason: str


@dataclass(frozen=True, slots=True)
class ScenarioSet:
    """Seeds and reference principles; ``split("train")`` / ``split("test")`` select seeds."""

    scenarios: tuple[Scenario, ...]
    references: tuple[ReferencePrinciple, ...]

    def split(self, name: str) -> list[Scenario]:
        """The seeds of one split, in file order."""
        return [s for s in self.scenarios if s.split == name]

    def get(self, scenario_id: str) -> Scenario:
        """One seed by id.

        Raises:
            InvalidInputError: no such seed.
        """
        for s in self.scenarios:
            if s.id == scenario_id:
                return s
        raise InvalidInputError(f"no scenario {scenario_id!r} in the scenario set")

    @property
    def families(self) -> list[str]:
        """The principle families, in file order."""
        return list(dict.fromkeys(s.family for s in self.scenarios))


def _scenario(item: Any) -> Scenario:
    if not isinstance(item, dict) or not isinstance(item.get("traits", []), list):
        raise InvalidInputError(f"a scenario must be an object with a list of traits, got {str(item)[:80]}")
    try:
        return Scenario(str(item["id"]), str(item["domain"]), str(item["family"]), str(item["situation"]),
                        str(item["goal"]), tuple(str(t) for t in item.get("traits", [])), str(item["opening"]),
                        str(item.get("split", "train")))
    except KeyError as e:
        raise InvalidInputError(f"scenario {item.get('id')!r} lacks {e}") from None


def load_scenarios(path: str | Path | None = None) -> ScenarioSet:
    """The shipped scenario set, or one in the same format at ``path``.

    Raises:
        InvalidInputError: the file is not valid JSON of that format (ids must be unique, splits train/test).
    """
    try:
        text = (Path(path).read_text("utf-8") if path is not None
                else resources.files("memgas").joinpath("data/principles_scenarios.json").read_text("utf-8"))
        data = json.loads(text)
        scenarios = tuple(_scenario(item) for item in data["scenarios"])
        references = tuple(ReferencePrinciple(**{k: str(r[k]) for k in ReferencePrinciple.__slots__})
                           for r in data.get("reference_principles", []))
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise InvalidInputError(f"cannot read the scenario set {path or '(shipped)'}: {e}") from None
    ids = [s.id for s in scenarios]
    if len(set(ids)) != len(ids) or any(s.split not in ("train", "test") for s in scenarios):
        raise InvalidInputError("scenario ids must be unique and splits 'train' or 'test'")
    return ScenarioSet(scenarios, references)
