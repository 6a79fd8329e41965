"""``/v1/sessions``: add (one or a batch), list, get and delete sessions."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request, status

from memgas.service.deps import SessionPath, UserQuery, scoped
from memgas.service.schemas import (
    AddManyRequest,
    AddManyResponse,
    AddResult,
    AddSessionRequest,
    DeleteResult,
    SessionList,
    SessionOut,
    messages_payload,
)
from memgas.service.scoped import ScopedMemory

router = APIRouter(prefix="/v1/sessions", tags=["sessions"])


@router.post("", status_code=status.HTTP_201_CREATED, response_model=AddResult)
def add_session(body: AddSessionRequest, request: Request, mem: ScopedMemory = Depends(scoped)) -> AddResult:
    """Store one session and associate it with the user's history (409 if the id exists)."""
    result = mem.add(body.user_id, messages_payload(body.messages),
                     session_id=body.session_id, timestamp=body.timestamp, metadata=body.metadata)
    request.app.state.memgas.metrics.inc("adds")
    return AddResult(**result)


@router.post("/batch", status_code=status.HTTP_201_CREATED, response_model=AddManyResponse)
def add_sessions(body: AddManyRequest, request: Request, mem: ScopedMemory = Depends(scoped)) -> AddManyResponse:
    """Store several sessions of one user in one transaction: all of them or none."""
    sessions = [{**s.model_dump(exclude_none=True), "messages": messages_payload(s.messages)} for s in body.sessions]
    results = mem.add_many(body.user_id, sessions, skip_existing=body.skip_existing)
    request.app.state.memgas.metrics.inc("adds", sum(not r.get("skipped") for r in results))
    return AddManyResponse(results=[AddResult(**r) for r in results])


@router.get("", response_model=SessionList)
def list_sessions(user_id: UserQuery, mem: ScopedMemory = Depends(scoped)) -> SessionList:
    """The user's session headers, oldest first."""
    return SessionList(sessions=mem.sessions(user_id))


@router.get("/{session_id:path}", response_model=SessionOut)
def get_session(session_id: SessionPath, user_id: UserQuery, mem: ScopedMemory = Depends(scoped)) -> SessionOut:
    """One stored session with its messages."""
    return SessionOut(**mem.get(user_id, session_id))


@router.delete("/{session_id:path}", response_model=DeleteResult)
def delete_session(session_id: SessionPath, user_id: UserQuery, mem: ScopedMemory = Depends(scoped)) -> DeleteResult:
    """Delete one session with its units and edges, and the cache rows only it produced."""
    return DeleteResult(**mem.delete(user_id, session_id))
