"""``/v1/sessions``: add (one or a batch), list, get and delete sessions."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Depends, Query, Request, status

from memgas.core.errors import InvalidInputError
from memgas.service.deps import SessionPath, UserQuery, scoped
from memgas.service.schemas import (
    ID_PATTERN,
    AddManyRequest,
    AddManyResponse,
    AddResult,
    AddSessionRequest,
    DeleteMatching,
    DeleteResult,
    Order,
    SessionList,
    SessionOut,
    SessionQuery,
    messages_payload,
)
from memgas.service.scoped import ScopedMemory

router = APIRouter(prefix="/v1/sessions", tags=["sessions"])


@router.post("", status_code=status.HTTP_201_CREATED, response_model=AddResult)
def add_session(body: AddSessionRequest, request: Request, mem: ScopedMemory = Depends(scoped)) -> AddResult:
    """Store one session and associate it with the user's history (409 if the id exists)."""
    result = mem.add(messages_payload(body.messages), user_id=body.user_id,
                     session_id=body.session_id, timestamp=body.timestamp, metadata=body.metadata,
                     agent_id=body.agent_id, run_id=body.run_id)
    request.app.state.memgas.metrics.inc("adds")
    return AddResult(**result.to_dict())


@router.post("/batch", status_code=status.HTTP_201_CREATED, response_model=AddManyResponse)
def add_sessions(body: AddManyRequest, request: Request, mem: ScopedMemory = Depends(scoped)) -> AddManyResponse:
    """Store several sessions of one user in one transaction: all of them or none."""
    sessions = [{**s.model_dump(exclude_none=True), "messages": messages_payload(s.messages)} for s in body.sessions]
    results = mem.add_many(sessions, user_id=body.user_id, skip_existing=body.skip_existing)
    request.app.state.memgas.metrics.inc("adds", sum(not r.skipped for r in results))
    return AddManyResponse(results=[AddResult(**r.to_dict()) for r in results])


@router.get("", response_model=SessionList)
def list_sessions(
    user_id: UserQuery,
    agent_id: str | None = Query(default=None, min_length=1, max_length=256, pattern=ID_PATTERN,
                                 description="only this agent's sessions"),
    run_id: str | None = Query(default=None, min_length=1, max_length=256, pattern=ID_PATTERN,
                               description="only this run's sessions"),
    # A URL travels in the request line, which the server reads up to 16 KiB: a longer filter goes in a body.
    filters: str | None = Query(default=None, max_length=1024,
                                description="a filter as JSON, up to 1,024 characters (longer: POST /v1/sessions/query)"),
    limit: int | None = Query(default=None, ge=1, le=10_000, description="sessions per page (default: all)"),
    cursor: str | None = Query(default=None, min_length=1, max_length=2048, description="a listed session's cursor"),
    order: Order = Query(default="oldest"),
    mem: ScopedMemory = Depends(scoped),
) -> SessionList:
    """A page of the user's session headers (oldest first by default), with each session's scope, metadata and
    the start of its first user message; ``agent_id``, ``run_id`` and ``filters`` narrow it."""
    return SessionList(**mem.list(user_id=user_id, filters=query_filters(filters, agent_id, run_id), limit=limit,
                                  cursor=cursor, order=order).to_dict())


@router.post("/query", response_model=SessionList)
def query_sessions(body: SessionQuery, mem: ScopedMemory = Depends(scoped)) -> SessionList:
    """A page of the user's sessions that pass ``filters`` (``GET /v1/sessions`` with the filter in a body)."""
    return SessionList(**mem.list(user_id=body.user_id, filters=body.filters, limit=body.limit, cursor=body.cursor,
                                  order=body.order).to_dict())


@router.post("/delete", response_model=DeleteResult)
def delete_matching(body: DeleteMatching, mem: ScopedMemory = Depends(scoped)) -> DeleteResult:
    """Delete the user's sessions that pass ``filters``, in one transaction, with the cache rows only they
    produced (0 when none passes)."""
    return DeleteResult(**mem.delete(user_id=body.user_id, filters=body.filters).to_dict())


def query_filters(raw: str | None, agent_id: str | None = None, run_id: str | None = None) -> dict[str, Any] | None:
    """The filter of a listing's query parameters: ``filters`` (JSON) and the scope ids, all of them to hold."""
    parts: list[Any] = []
    if raw is not None:
        try:
            parts.append(json.loads(raw))
        except ValueError:
            raise InvalidInputError("filters is not valid JSON") from None
    parts += [{name: value} for name, value in (("agent_id", agent_id), ("run_id", run_id)) if value is not None]
    return None if not parts else parts[0] if len(parts) == 1 else {"$and": parts}


@router.get("/{session_id:path}", response_model=SessionOut)
def get_session(session_id: SessionPath, user_id: UserQuery, mem: ScopedMemory = Depends(scoped)) -> SessionOut:
    """One stored session with its messages."""
    return SessionOut(**mem.get(session_id, user_id=user_id).to_dict())


@router.delete("/{session_id:path}", response_model=DeleteResult)
def delete_session(session_id: SessionPath, user_id: UserQuery, mem: ScopedMemory = Depends(scoped)) -> DeleteResult:
    """Delete one session with its units and edges, and the cache rows only it produced."""
    return DeleteResult(**mem.delete(session_id, user_id=user_id).to_dict())
