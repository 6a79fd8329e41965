"""Experience memory as a store keeps it: the :class:`ExperienceStore` interface, used only by
:mod:`memgas.experience`. Items are scoped by agent or user (:func:`scope_of`), not by session; a backend implements it
beside :class:`~memgas.store.Store` on the same database."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Sequence

import numpy as np

from memgas.core.errors import InvalidInputError

__all__ = ["ExperienceRecord", "ExperienceStore", "scope_of"]


def scope_of(agent_id: str | None = None, user_id: str | None = None) -> str:
    """The store scope of an agent's experience (``agent:ID``) or one user's (``user:ID``); exactly one is given.

    Raises:
        InvalidInputError: neither or both given.
    """
    if (agent_id is None) == (user_id is None):
        raise InvalidInputError("experience belongs to an agent or to a user: give exactly one of agent_id, user_id")
    return f"agent:{agent_id}" if agent_id is not None else f"user:{user_id}"


@dataclass(frozen=True, slots=True)
class ExperienceRecord:
    """One item of experience memory (a Buffer-of-Thoughts template, a PRINCIPLES principle, ...).

    ``scope`` says whose experience it is (``agent:NAME`` or ``user:ID``); ``kind`` what it is (a method's
    own name, e.g. ``template`` or ``pending``); ``key`` the text that is embedded and matched (a template's
    problem description, a principle's situation), ``vector`` its embedding (``None`` for items not to
    be matched yet); ``payload`` the rest, a JSON object.
    """

    id: int
    scope: str
    kind: str
    key: str
    payload: dict[str, Any]
    vector: np.ndarray | None
    created_at: datetime
    updated_at: datetime


class ExperienceStore(ABC):
    """Where experience items live (Buffer-of-Thoughts templates, PRINCIPLES principles, ...)."""

    @abstractmethod
    def add_experience(self, scope: str, kind: str, key: str, payload: dict[str, Any],
                       vector: np.ndarray | None) -> int:
        """Store one experience item; return its id (ids are never reused).

        Raises:
            InvalidInputError: a malformed scope or kind, key text with NUL characters, a payload that is
                not a JSON object, or a vector that is not the bound embedder's size (nothing is written).
        """

    @abstractmethod
    def list_experiences(self, scope: str, kind: str | None = None) -> list[ExperienceRecord]:
        """The scope's items (of one kind, or all), oldest first."""

    @abstractmethod
    def experience_scopes(self) -> list[str]:
        """Every scope that holds an item, sorted."""

    @abstractmethod
    def update_experience(self, scope: str, item_id: int, *, kind: str | None = None, key: str | None = None,
                          payload: dict[str, Any] | None = None, vector: np.ndarray | None = None) -> ExperienceRecord:
        """Change the given fields of one item (e.g. a pending solution once distilled); return the new record.

        Raises:
            NotFoundError: the scope has no such item.
            InvalidInputError: as for :meth:`add_experience`.
        """

    @abstractmethod
    def delete_experiences(self, scope: str, ids: Sequence[int] | None = None, *, kind: str | None = None) -> int:
        """Delete the scope's items with these ids (all of ``kind``, or every item, when ``ids`` is None);
        return how many went.

        Raises:
            NotFoundError: an id the scope does not have (nothing is deleted).
        """
