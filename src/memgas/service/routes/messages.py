"""``/v1/sessions/{session_id}/messages``: append to a live conversation, edit or delete one message.

Registered before the session routes: a session id may hold ``/``, and ``.../messages`` (or
``.../messages/{index}``) at its end is read as this resource, not as part of the id.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Request, Response, status

from memgas.service.deps import SessionPath, UserQuery, scoped
from memgas.service.schemas import AppendRequest, AppendResult, MessageChange, MessageUpdate, messages_payload
from memgas.service.scoped import ScopedMemory

router = APIRouter(prefix="/v1/sessions", tags=["messages"])

MessageIndex = Annotated[int, Path(ge=0, le=10_000_000, description="the message's position in the session, from 0")]


@router.post("/{session_id:path}/messages", response_model=AppendResult, status_code=status.HTTP_200_OK,
             responses={201: {"model": AppendResult, "description": "the session was created"}})
def append_messages(session_id: SessionPath, body: AppendRequest, request: Request, response: Response,
                    mem: ScopedMemory = Depends(scoped)) -> AppendResult:
    """Add messages to the end of a session: 201 when it created the session, 200 when it extended it."""
    result = mem.append(messages_payload(body.messages), user_id=body.user_id, session_id=session_id,
                        timestamp=body.timestamp, metadata=body.metadata, agent_id=body.agent_id, run_id=body.run_id,
                        return_context=body.return_context, context_tokens=body.context_tokens)
    if result.created:
        response.status_code = status.HTTP_201_CREATED
        request.app.state.memgas.metrics.inc("adds")
    return AppendResult(**result.to_dict())


@router.patch("/{session_id:path}/messages/{index}", response_model=MessageChange)
def update_message(session_id: SessionPath, index: MessageIndex, body: MessageUpdate, user_id: UserQuery,
                   mem: ScopedMemory = Depends(scoped)) -> MessageChange:
    """Replace one message's content; everything made from it follows, and the old text is forgotten."""
    return MessageChange(**mem.update_message(session_id, index, body.content, user_id=user_id).to_dict())


@router.delete("/{session_id:path}/messages/{index}", response_model=MessageChange)
def delete_message(session_id: SessionPath, index: MessageIndex, user_id: UserQuery,
                   mem: ScopedMemory = Depends(scoped)) -> MessageChange:
    """Delete one message (the last one left deletes the session); its text is forgotten."""
    return MessageChange(**mem.delete_message(session_id, index, user_id=user_id).to_dict())
