"""``/v1/search``, ``/v1/context``, ``/v1/profile`` and ``/v1/timeline``, and with an LLM ``/v1/answer``; ``/v1/facts`` for the temporal
knowledge graph."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Request

from memgas.core.errors import InvalidInputError, UnavailableError
from memgas.service.deps import UserQuery, scoped
from memgas.service.routes.messages import INDEX_PATTERN
from memgas.service.routes.sessions import query_filters
from memgas.service.schemas import (
    AnswerOut,
    AnswerRequest,
    CommunityList,
    ContextOut,
    ContextRequest,
    FactList,
    ProfileOut,
    RetryOut,
    RetryRequest,
    SearchRequest,
    SearchResponse,
    TimelineOut,
)
from memgas.service.scoped import ScopedKnowledgeGraph, ScopedMemory

router = APIRouter(tags=["search"])


@router.post("/v1/search", response_model=SearchResponse)
def search(body: SearchRequest, request: Request, mem: ScopedMemory = Depends(scoped)) -> SearchResponse:
    """The ``k`` sessions most relevant to the query, best first, with their best turns; with ``filters``, of the
    sessions that pass them (ranked inside that set: ``k`` hits whenever ``k`` pass)."""
    hits = mem.search(body.query, user_id=body.user_id, k=body.k, query_time=body.query_time, min_score=body.min_score,
                      exclude_sessions=body.exclude_sessions, filters=body.filters)
    request.app.state.memgas.metrics.inc("searches")
    return SearchResponse(hits=[h.to_dict() for h in hits])


@router.post("/v1/context", response_model=ContextOut)
def context(body: ContextRequest, request: Request, mem: ScopedMemory = Depends(scoped)) -> ContextOut:
    """Prompt-ready text of what matters for the query: dated, session-cited excerpts within ``max_tokens``."""
    text = mem.context(body.query, user_id=body.user_id, k=body.k, max_tokens=body.max_tokens,
                       exclude_sessions=body.exclude_sessions, query_time=body.query_time, min_score=body.min_score,
                       filters=body.filters, in_prompt=body.in_prompt)
    request.app.state.memgas.metrics.inc("searches")
    return ContextOut(context=text)


@router.post("/v1/answer", response_model=AnswerOut)
def answer(body: AnswerRequest, request: Request, mem: ScopedMemory = Depends(scoped)) -> AnswerOut:
    """Answer a question from the user's memories, citing sessions (503 without an LLM)."""
    if mem.memory.llm is None:
        raise UnavailableError("this server has no LLM: start it with --llm to answer questions")
    result = mem.answer(body.question, user_id=body.user_id, question_date=body.question_date, k=body.k,
                        use_filter=body.use_filter)
    request.app.state.memgas.metrics.inc("answers")
    return AnswerOut(**result.to_dict())


@router.get("/v1/profile", response_model=ProfileOut)
def profile(user_id: UserQuery,
            exclude_sessions: list[str] = Query(default=[], max_length=100, description="sessions to leave out"),
            filters: str | None = Query(default=None, max_length=1024, description="a session filter as JSON"),
            mem: ScopedMemory = Depends(scoped)) -> ProfileOut:
    """The user's standing instructions and preferences ("always…", "never…", "I prefer…"), oldest first, each with
    its session, message and time: what every context is headed by, of the sessions that pass ``filters`` less
    ``exclude_sessions``. Read from the stored messages: deleting or editing a message changes it at once."""
    return ProfileOut(statements=[s.to_dict() for s in mem.profile(user_id=user_id, exclude_sessions=exclude_sessions,
                                                                   filters=query_filters(filters))])


@router.get("/v1/timeline", response_model=TimelineOut)
def timeline(user_id: UserQuery,
             topic: str | None = Query(default=None, min_length=1, max_length=2000,
                                       description="only the items about this, across sessions"),
             since: str | None = Query(default=None, max_length=64, description="sessions dated at or after this"),
             until: str | None = Query(default=None, max_length=64, description="sessions dated before this"),
             filters: str | None = Query(default=None, max_length=1024, description="a session filter as JSON"),
             mem: ScopedMemory = Depends(scoped)) -> TimelineOut:
    """The course of the user's conversations: each session's digest (what it brought up, in order, each item a line
    of the message that brought it up), oldest first; with ``topic`` only the items about it, so it reads as what
    happened with it. Read from the sessions as they are now: an edit or a delete shows at once."""
    digests = mem.timeline(user_id=user_id, topic=topic, since=since, until=until, filters=query_filters(filters))
    return TimelineOut(sessions=[d.to_dict() for d in digests])


def _kg(mem: ScopedMemory) -> ScopedKnowledgeGraph:
    if mem.kg is None:
        raise InvalidInputError(f"method {mem.memory.method.name!r} keeps no facts: start the server with "
                                "--method zep and an --llm")
    return mem.kg


@router.get("/v1/facts", response_model=FactList)
def facts(user_id: UserQuery, entity: str | None = Query(default=None, min_length=1, max_length=1000),
          as_of: str | None = Query(default=None, max_length=64), include_invalid: bool = False,
          mem: ScopedMemory = Depends(scoped)) -> FactList:
    """The user's facts (a server with ``--method zep``); by default only those valid now or at ``as_of``."""
    found = _kg(mem).facts(user_id=user_id, entity=entity, as_of=as_of, include_invalid=include_invalid)
    return FactList(facts=[f.to_dict() for f in found])


@router.get("/v1/facts/{fact_id}/history", response_model=FactList)
def fact_history(fact_id: Annotated[str, Path(pattern=INDEX_PATTERN, description=(
                     "the fact's id (decimal digits, no leading zero)"))], user_id: UserQuery,
                 mem: ScopedMemory = Depends(scoped)) -> FactList:
    """How one fact changed, oldest version first (a server with ``--method zep``)."""
    return FactList(facts=[f.to_dict() for f in _kg(mem).history(int(fact_id), user_id=user_id)])


@router.get("/v1/communities", response_model=CommunityList)
def communities(user_id: UserQuery, mem: ScopedMemory = Depends(scoped)) -> CommunityList:
    """The user's entity communities with their summaries (a server with ``--method zep``)."""
    return CommunityList(communities=[c.to_dict() for c in _kg(mem).communities(user_id=user_id)])


@router.post("/v1/facts/retry", response_model=RetryOut)
def retry_pending(body: RetryRequest, mem: ScopedMemory = Depends(scoped)) -> RetryOut:
    """Retry the user's fact extractions that failed at add; how many messages are still pending."""
    return RetryOut(pending=_kg(mem).retry_pending(user_id=body.user_id))
