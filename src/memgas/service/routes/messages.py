"""Append to a live conversation (``POST /v1/sessions/{session_id}/messages``), edit or delete one message
(``PATCH``/``DELETE /v1/messages/{index}?session_id=``).

A session id may hold ``/``, so no route puts anything after a session id but the one ``POST .../messages``: its
path is read with the id as long as it can be (``/v1/sessions/a/messages/messages`` appends to ``a/messages``), and
no ``GET`` or ``DELETE`` has that form, so ``DELETE /v1/sessions/chat/messages/0`` deletes the session
``chat/messages/0`` and nothing else. A message is named by its session in the query and its index in the path,
which takes decimal digits only, as a number is written (``1.0``, ``+1`` and ``01`` are no index).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Request, Response, status

from memgas.service.deps import SessionPath, UserQuery, scoped
from memgas.service.schemas import (
    ID_PATTERN,
    AppendRequest,
    AppendResult,
    MessageChange,
    MessageUpdate,
    messages_payload,
)
from memgas.service.scoped import ScopedMemory

router = APIRouter(tags=["messages"])

#: A position or an id in a path: decimal digits as a number is written (``0``, ``12``), nothing else (``+1``,
#: `` 1``, ``00`` and ``1.0`` name nothing): one text, one item.
INDEX_PATTERN = r"^(?:0|[1-9][0-9]{0,8})$"
MessageIndex = Annotated[str, Path(pattern=INDEX_PATTERN, description="the message's position in the session, "
                                                                       "from 0 (decimal digits, no leading zero)")]
SessionQuery = Annotated[str, Query(min_length=1, max_length=256, pattern=ID_PATTERN, description="the session id")]


@router.post("/v1/sessions/{session_id:path}/messages", response_model=AppendResult, status_code=status.HTTP_200_OK,
             responses={201: {"model": AppendResult, "description": "the session was created"}})
def append_messages(session_id: SessionPath, body: AppendRequest, request: Request, response: Response,
                    mem: ScopedMemory = Depends(scoped)) -> AppendResult:
    """Add messages to the end of a session: 201 when it created the session, 200 when it extended it."""
    result = mem.append(messages_payload(body.messages), user_id=body.user_id, session_id=session_id,
                        timestamp=body.timestamp, metadata=body.metadata, agent_id=body.agent_id, run_id=body.run_id,
                        return_context=body.return_context, context_tokens=body.context_tokens, window=body.window)
    if result.created:
        response.status_code = status.HTTP_201_CREATED
        request.app.state.memgas.metrics.inc("adds")
    return AppendResult(**result.to_dict())


@router.patch("/v1/messages/{index}", response_model=MessageChange)
def update_message(index: MessageIndex, body: MessageUpdate, user_id: UserQuery, session_id: SessionQuery,
                   mem: ScopedMemory = Depends(scoped)) -> MessageChange:
    """Replace one message's content; everything made from it follows, and the old text is forgotten."""
    return MessageChange(**mem.update_message(session_id, int(index), body.content, user_id=user_id).to_dict())


@router.delete("/v1/messages/{index}", response_model=MessageChange)
def delete_message(index: MessageIndex, user_id: UserQuery, session_id: SessionQuery,
                   mem: ScopedMemory = Depends(scoped)) -> MessageChange:
    """Delete one message (the last one left deletes the session); its text is forgotten."""
    return MessageChange(**mem.delete_message(session_id, int(index), user_id=user_id).to_dict())
