"""``/v1/search``, ``/v1/context`` and ``/v1/profile``, and with an LLM ``/v1/answer``; ``/v1/facts`` for the temporal
knowledge graph."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Query, Request

from memgas.core.errors import UnavailableError
from memgas.service.deps import UserQuery, scoped
from memgas.service.routes.sessions import query_filters
from memgas.service.schemas import (
    AnswerOut,
    AnswerRequest,
    ContextOut,
    ContextRequest,
    FactList,
    ProfileOut,
    SearchRequest,
    SearchResponse,
)
from memgas.service.scoped import ScopedMemory

router = APIRouter(tags=["search"])


@router.post("/v1/search", response_model=SearchResponse)
def search(body: SearchRequest, request: Request, mem: ScopedMemory = Depends(scoped)) -> SearchResponse:
    """The ``k`` sessions most relevant to the query, best first, with their best turns; with ``filters``, of the
    sessions that pass them (ranked inside that set: ``k`` hits whenever ``k`` pass)."""
    hits = mem.search(body.user_id, body.query, k=body.k, query_time=body.query_time, min_score=body.min_score,
                      exclude_sessions=body.exclude_sessions, filters=body.filters)
    request.app.state.memgas.metrics.inc("searches")
    return SearchResponse(hits=hits)


@router.post("/v1/context", response_model=ContextOut)
def context(body: ContextRequest, request: Request, mem: ScopedMemory = Depends(scoped)) -> ContextOut:
    """Prompt-ready text of what matters for the query: dated, session-cited excerpts within ``max_tokens``."""
    text = mem.context(body.user_id, body.query, k=body.k, max_tokens=body.max_tokens,
                       exclude_sessions=body.exclude_sessions, query_time=body.query_time, min_score=body.min_score,
                       filters=body.filters)
    request.app.state.memgas.metrics.inc("searches")
    return ContextOut(context=text)


@router.post("/v1/answer", response_model=AnswerOut)
def answer(body: AnswerRequest, request: Request, mem: ScopedMemory = Depends(scoped)) -> AnswerOut:
    """Answer a question from the user's memories, citing sessions (503 without an LLM)."""
    if mem.memory.llm is None:
        raise UnavailableError("this server has no LLM: start it with --llm to answer questions")
    result = mem.answer(body.user_id, body.question, question_date=body.question_date, k=body.k,
                        use_filter=body.use_filter)
    request.app.state.memgas.metrics.inc("answers")
    return AnswerOut(**result)


@router.get("/v1/profile", response_model=ProfileOut)
def profile(user_id: UserQuery,
            exclude_sessions: list[str] = Query(default=[], max_length=100, description="sessions to leave out"),
            filters: str | None = Query(default=None, max_length=1024, description="a session filter as JSON"),
            mem: ScopedMemory = Depends(scoped)) -> ProfileOut:
    """The user's standing instructions and preferences ("always…", "never…", "I prefer…"), oldest first, each with
    its session, message and time: what every context is headed by, of the sessions that pass ``filters`` less
    ``exclude_sessions``. Read from the stored messages: deleting or editing a message changes it at once."""
    return ProfileOut(statements=mem.profile(user_id, exclude_sessions=exclude_sessions,
                                             filters=query_filters(filters)))


@router.get("/v1/facts", response_model=FactList)
def facts(user_id: UserQuery, entity: str | None = Query(default=None, min_length=1, max_length=1000),
          as_of: str | None = Query(default=None, max_length=64), include_invalid: bool = False,
          mem: ScopedMemory = Depends(scoped)) -> FactList:
    """The user's facts (a server with ``--method zep``); by default only those valid now or at ``as_of``."""
    return FactList(facts=mem.facts(user_id, entity=entity, as_of=as_of, include_invalid=include_invalid))
