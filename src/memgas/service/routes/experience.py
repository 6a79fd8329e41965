"""``/v1/templates`` and ``/v1/principles``: experience memory shared by an agent's users (or kept by one user).

Whose experience is given as ``agent_id`` or ``user_id``, exactly one (400 otherwise), scoped as
:class:`~memgas.service.scoped_experience.ScopedExperience` says. Reading, matching and recalling need no
LLM; solving with templates and learning one (``/v1/templates/solve``, ``/v1/templates/learn``) use the
server's LLM and answer 503 ``unavailable`` on a server without one, as ``/v1/answer`` does. Learning
principles stays in Python and the CLI.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Request, Response, status

from memgas.service.deps import principal
from memgas.service.keys import Principal
from memgas.service.schemas import (
    ID_PATTERN,
    ItemDeleted,
    PrincipleAdded,
    PrincipleIn,
    PrincipleList,
    PrincipleMatches,
    PrincipleOut,
    PrincipleRecallRequest,
    TemplateLearned,
    TemplateLearnRequest,
    TemplateList,
    TemplateMatches,
    TemplateMatchRequest,
    TemplateOut,
    TemplateSolved,
    TemplateSolveRequest,
)
from memgas.service.scoped_experience import ScopedExperience

router = APIRouter(tags=["experience"])

AgentQuery = Annotated[str | None, Query(min_length=1, max_length=256, pattern=ID_PATTERN,
                                         description="an agent's experience, shared by its users")]
UserQuery = Annotated[str | None, Query(min_length=1, max_length=256, pattern=ID_PATTERN,
                                        description="or one user's experience (give exactly one)")]
#: An experience item's id: a store row id, 64-bit.
ItemPath = Annotated[int, Path(ge=1, le=2**63 - 1, description="the item's id")]


def _query_scope(request: Request, agent_id: AgentQuery = None, user_id: UserQuery = None,
                 who: Principal = Depends(principal)) -> ScopedExperience:
    """The caller's experience in the scope named by ``?agent_id=`` or ``?user_id=``."""
    return ScopedExperience(request.app.state.memgas.memory, who, agent_id=agent_id, user_id=user_id)


def _body_scope(request: Request, who: Principal,
                body: PrincipleIn | PrincipleRecallRequest | TemplateMatchRequest | TemplateSolveRequest
                | TemplateLearnRequest) -> ScopedExperience:
    """The caller's experience in the scope a request body names."""
    return ScopedExperience(request.app.state.memgas.memory, who, agent_id=body.agent_id, user_id=body.user_id)


in_query = Depends(_query_scope)


@router.get("/v1/templates", response_model=TemplateList)
def list_templates(exp: ScopedExperience = in_query) -> TemplateList:
    """The scope's Buffer-of-Thoughts thought templates, oldest first (an empty list for a new scope)."""
    return TemplateList(templates=exp.templates())


@router.post("/v1/templates/match", response_model=TemplateMatches)
def match_templates(body: TemplateMatchRequest, request: Request,
                    who: Principal = Depends(principal)) -> TemplateMatches:
    """The ``k`` templates whose descriptions are nearest ``description``, best first, with their cosine similarity.

    No LLM runs: ``description`` must already be distilled (the general kind of problem, without its
    particular values), as Buffer of Thoughts' distiller writes it; ``/v1/templates/solve`` distils and
    solves on a server with an LLM.
    """
    matches = _body_scope(request, who, body).match_templates(body.description, k=body.k,
                                                               min_similarity=body.min_similarity)
    return TemplateMatches(matches=matches)


@router.post("/v1/templates/solve", response_model=TemplateSolved)
def solve_with_template(body: TemplateSolveRequest, request: Request,
                        who: Principal = Depends(principal)) -> TemplateSolved:
    """Solve ``problem`` with Buffer of Thoughts and the server's LLM: the problem is distilled, its description
    matched against the scope's templates, and the best one (cosine at least 0.5) instantiated; without one the
    problem is solved plainly. With ``learn``, a template is then learned from the solution (``learned``).

    503 ``unavailable`` on a server without an LLM, 503 ``llm_unavailable`` when the solving call fails
    (nothing is stored); a failed distiller only means no template (``distill_error``).
    """
    solved = _body_scope(request, who, body).solve_template(body.problem, learn=body.learn)
    return TemplateSolved(**solved)


@router.post("/v1/templates/learn", status_code=status.HTTP_201_CREATED, response_model=TemplateLearned,
             responses={status.HTTP_200_OK: {"model": TemplateLearned,
                                             "description": "a duplicate of a stored template: nothing stored"}})


def learn_template(body: TemplateLearnRequest, request: Request, response: Response,
                   who: Principal = Depends(principal)) -> TemplateLearned:
    """Write a thought template from a solved problem with the server's LLM: 201 with ``added`` (stored), or
    ``pending`` when the LLM failed (the raw problem and solution are kept for ``distill_pending``); 200 with
    ``duplicate`` when a stored template's description has cosine at least 0.75 with the new one (nothing
    stored). 503 ``unavailable`` on a server without an LLM (nothing stored)."""
    learned = _body_scope(request, who, body).learn_template(body.problem, body.solution, answer=body.answer)
    if learned["status"] == "duplicate":
        response.status_code = status.HTTP_200_OK
    return TemplateLearned(**learned)


@router.get("/v1/templates/{item_id}", response_model=TemplateOut)
def get_template(item_id: ItemPath, exp: ScopedExperience = in_query) -> TemplateOut:
    """One thought template of the scope (404 for an id of another scope)."""
    return TemplateOut(**exp.template(item_id))


@router.delete("/v1/templates/{item_id}", response_model=ItemDeleted)
def delete_template(item_id: ItemPath, exp: ScopedExperience = in_query) -> ItemDeleted:
    """Delete one thought template of the scope."""
    return ItemDeleted(**exp.delete_template(item_id))


@router.get("/v1/principles", response_model=PrincipleList)
def list_principles(exp: ScopedExperience = in_query) -> PrincipleList:
    """The scope's PRINCIPLES strategy principles, oldest first (an empty list for a new scope)."""
    return PrincipleList(principles=exp.principles())


@router.post("/v1/principles", status_code=status.HTTP_201_CREATED, response_model=PrincipleAdded)
def add_principle(body: PrincipleIn, request: Request, who: Principal = Depends(principal)) -> PrincipleAdded:
    """Store a principle written by hand (no LLM); a near-duplicate of a stored one (cosine of the situations at
    least 0.8) is not stored, and the stored one's ``support`` grows instead (``added`` false)."""
    added = _body_scope(request, who, body).add_principle(body.situation, body.action, body.avoid, body.reason)
    return PrincipleAdded(**added)


@router.post("/v1/principles/recall", response_model=PrincipleMatches)
def recall_principles(body: PrincipleRecallRequest, request: Request,
                      who: Principal = Depends(principal)) -> PrincipleMatches:
    """The ``k`` principles whose situations are nearest the conversation's ``context``, best first, with their
    cosine similarity. No LLM runs: the principles come as stored, not rewritten for the conversation."""
    matches = _body_scope(request, who, body).recall_principles(body.context, k=body.k,
                                                                 min_similarity=body.min_similarity)
    return PrincipleMatches(matches=matches)


@router.get("/v1/principles/{item_id}", response_model=PrincipleOut)
def get_principle(item_id: ItemPath, exp: ScopedExperience = in_query) -> PrincipleOut:
    """One principle of the scope (404 for an id of another scope)."""
    return PrincipleOut(**exp.principle(item_id))


@router.delete("/v1/principles/{item_id}", response_model=ItemDeleted)
def delete_principle(item_id: ItemPath, exp: ScopedExperience = in_query) -> ItemDeleted:
    """Delete one principle of the scope."""
    return ItemDeleted(**exp.delete_principle(item_id))
