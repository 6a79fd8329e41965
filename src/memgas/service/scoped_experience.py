"""What a caller may do with experience memory (:class:`~memgas.experience.facade.Experience`), in its own namespace.

The experience counterpart of :class:`~memgas.service.scoped.ScopedMemory`, called by the REST routes and
the MCP tools alike. A scope is an agent's (shared by its users) or one user's, exactly one of the two:

* ``user_id`` maps as for sessions (:meth:`Principal.stored_user`): a tenant key's ``alice`` is stored as
  ``tenant::alice``, and a key limited to some users (``--users``) may name only those (403 otherwise).
* ``agent_id`` is namespaced the same way (``tenant::solver``), so two tenants' ``solver`` never meet. A key
  limited to some users may use every agent of its tenant: an agent's experience is what the agent learned
  across users, not any user's memory.

Listing, reading, deleting, matching, recalling and adding a principle by hand need no LLM. Solving with
templates and learning one (:meth:`ScopedExperience.solve_template`, :meth:`ScopedExperience.learn_template`)
run Buffer of Thoughts with the server's own LLM (``memory.llm``), and are refused before anything is written
when the server has none. An item of another scope (or of another kind) is reported missing with the caller's
ids, never the stored ones, so nothing tells that it exists. Nothing here knows HTTP; errors are memgas's exceptions.
"""

from __future__ import annotations

from typing import Any

from memgas.core.errors import NotFoundError, UnavailableError
from memgas.core.validate import check_id
from memgas.experience.bank import scope_of
from memgas.experience.facade import Experience
from memgas.llm.base import track_usage
from memgas.memory import Memory
from memgas.service.keys import TENANT_SEPARATOR, Principal

__all__ = ["ScopedExperience"]


class ScopedExperience:
    """One scope's experience memory as one principal sees it (see the module docstring).

    Raises:
        InvalidInputError: neither or both of ``agent_id`` and ``user_id``, or a malformed id.
        ForbiddenError: a ``user_id`` the key is not allowed.
    """

    def __init__(self, memory: Memory, principal: Principal, *, agent_id: str | None = None,
                 user_id: str | None = None) -> None:
        scope_of(agent_id, user_id)  # exactly one, before either is read
        self.memory = memory
        if agent_id is not None:
            self._scope: dict[str, Any] = {"agent_id": self._stored_agent(principal, agent_id)}
            self._shown = f"agent {agent_id!r}"
        else:
            self._scope = {"user_id": principal.stored_user(str(user_id))}
            self._shown = f"user {user_id!r}"

    @staticmethod
    def _stored_agent(principal: Principal, agent_id: str) -> str:
        """The stored id of the caller's agent: namespaced by the tenant like a user, but open to every key of it."""
        check_id("agent_id", agent_id)
        if principal.tenant is None:
            return agent_id
        return check_id("agent_id", f"{principal.tenant}{TENANT_SEPARATOR}{agent_id}")

    def _open(self, **options: Any) -> Experience:
        """The facade over the server's store and embedder, in this scope, without an LLM."""
        return Experience(self.memory.store, embedder=self.memory.embedder, **self._scope, **options)

    def _open_with_llm(self, what: str) -> Experience:
        """The facade with the server's LLM, lent (closing the facade leaves it open for the server).

        Raises:
            UnavailableError: the server has no LLM, checked before anything is written (Buffer of
                Thoughts itself would keep a solution pending without one: a server without an LLM
                never turns it into a template, so the caller is told instead).
        """
        if self.memory.llm is None:
            raise UnavailableError(f"this server has no LLM: start it with --llm to {what}")
        return Experience(self.memory.store, embedder=self.memory.embedder, llm=self.memory.llm, **self._scope)

    def _missing(self, what: str, item_id: int) -> NotFoundError:
        return NotFoundError(f"no {what} {item_id} for {self._shown}")

    # -- Buffer of Thoughts templates --------------------------------------------------------------

    def templates(self) -> list[dict[str, Any]]:
        """The scope's thought templates, oldest first (pending solutions are not shown: learning is offline)."""
        with self._open() as exp:
            return exp.templates.list("template")

    def template(self, item_id: int) -> dict[str, Any]:
        """One thought template.

        Raises:
            NotFoundError: the scope has no template with this id.
        """
        with self._open() as exp:
            return self._template(exp, item_id)

    def _template(self, exp: Experience, item_id: int) -> dict[str, Any]:
        try:
            view = exp.templates.get(item_id)
        except NotFoundError:
            raise self._missing("template", item_id) from None
        if view["kind"] != "template":
            raise self._missing("template", item_id)
        return view

    def delete_template(self, item_id: int) -> dict[str, Any]:
        """Delete one thought template.

        Raises:
            NotFoundError: the scope has no template with this id (nothing is deleted).
        """
        with self._open() as exp:
            self._template(exp, item_id)
            return {"id": item_id, "deleted": exp.templates.delete([item_id]) == 1}

    def match_templates(self, description: str, *, k: int = 1,
                        min_similarity: float | None = None) -> list[dict[str, Any]]:
        """The ``k`` templates whose descriptions are nearest an already distilled ``description``, best first,
        with their cosine similarity (:meth:`BufferOfThoughts.match`; no LLM, so no distiller runs)."""
        with self._open() as exp:
            return [{"template": view, "similarity": score}
                    for view, score in exp.templates.match(description, k, min_similarity)]

    def solve_template(self, problem: str, *, learn: bool = False) -> dict[str, Any]:
        """Solve ``problem`` with the scope's best matching template, or without one
        (:meth:`BufferOfThoughts.solve`: distil, match, instantiate; with ``learn``, learn from the solution).

        Returns:
            BoT's result with the template used split as ``{"template", "similarity"}`` (``None`` without one).

        Raises:
            InvalidInputError: an empty problem.
            UnavailableError: the server has no LLM.
            LLMError: the solving call failed (nothing is stored).
        """
        with self._open_with_llm("solve problems with templates") as exp:
            out = exp.templates.solve(problem, learn=learn)
        used = out["template"]
        if used is not None:  # as a match is served: the template, and apart its similarity
            out["template"] = {"template": {k: v for k, v in used.items() if k != "score"}, "similarity": used["score"]}
        return out

    def learn_template(self, problem: str, solution: str, *, answer: str | None = None) -> dict[str, Any]:
        """Write a template from a solved problem (:meth:`BufferOfThoughts.learn`), with the LLM use.

        Returns:
            ``{"status": "added" | "duplicate" | "pending", ...}`` as BoT gives it, plus ``llm``; ``pending``
            when the LLM failed: the raw problem and solution are kept for ``distill_pending``.

        Raises:
            InvalidInputError: an empty problem or solution (nothing is written).
            UnavailableError: the server has no LLM (nothing is written).
        """
        with self._open_with_llm("learn templates") as exp, track_usage() as usage:
            out = exp.templates.learn(problem, solution, answer=answer)
        return {**out, "llm": usage.to_dict()}

    # -- PRINCIPLES ----------------------------------------------------------------------------------

    def principles(self) -> list[dict[str, Any]]:
        """The scope's principles, oldest first."""
        with self._open() as exp:
            return [p.to_dict() for p in exp.principles.list()]

    def principle(self, item_id: int) -> dict[str, Any]:
        """One principle.

        Raises:
            NotFoundError: the scope has no principle with this id.
        """
        with self._open() as exp:
            try:
                return exp.principles.get(item_id).to_dict()
            except NotFoundError:
                raise self._missing("principle", item_id) from None

    def delete_principle(self, item_id: int) -> dict[str, Any]:
        """Delete one principle.

        Raises:
            NotFoundError: the scope has no principle with this id (nothing is deleted).
        """
        with self._open() as exp:
            try:
                return {"id": item_id, "deleted": exp.principles.delete([item_id]) == 1}
            except NotFoundError:
                raise self._missing("principle", item_id) from None

    def add_principle(self, situation: str, action: str, avoid: str, reason: str) -> dict[str, Any]:
        """Store a principle written by hand (:meth:`Principles.add`): ``{"added", "principle"}``, where a
        near-duplicate is not stored and ``principle`` is the stored one whose ``support`` grew.

        Raises:
            InvalidInputError: an empty field (nothing is written).
        """
        with self._open() as exp:
            item_id = exp.principles.add(situation, action, avoid, reason)
            if item_id is not None:
                return {"added": True, "principle": exp.principles.get(item_id).to_dict()}
            nearest = exp.principles.recall(situation.strip(), 1)
            if not nearest:  # deleted between the two calls
                raise UnavailableError("the principle this one duplicates was deleted meanwhile; send it again")
            return {"added": False, "principle": nearest[0][0].to_dict()}

    def recall_principles(self, context: str, *, k: int = 3,
                          min_similarity: float | None = None) -> list[dict[str, Any]]:
        """The ``k`` principles whose situations are nearest ``context``, best first, with their cosine
        similarity (:meth:`Principles.recall`; no LLM, the principles are not rewritten)."""
        options = {} if min_similarity is None else {"principles": {"min_similarity": min_similarity}}
        with self._open(**options) as exp:
            return [{"principle": p.to_dict(), "similarity": round(sim, 4)}
                    for p, sim in exp.principles.recall(context, k)]
