"""``/v1/inspect``: what memgas made of the memory, for the inspector (``/ui``): a session's units and its
association with other sessions, and a user's sessions as a graph. Ids travel as query parameters."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query

from memgas.service.deps import UserQuery, scoped
from memgas.service.schemas import ID_PATTERN
from memgas.service.scoped import ScopedMemory

router = APIRouter(prefix="/v1/inspect", tags=["inspect"])


@router.get("/units", response_model=dict[str, Any])
def session_units(user_id: UserQuery,
                  session_id: str = Query(min_length=1, max_length=256, pattern=ID_PATTERN),
                  mem: ScopedMemory = Depends(scoped)) -> dict[str, Any]:
    """A session's units by granularity and the sessions it is associated with, strongest first."""
    return mem.units(session_id, user_id=user_id)


@router.get("/graph", response_model=dict[str, Any])
def session_graph(user_id: UserQuery, limit: int = Query(default=300, ge=1, le=2000),
                  mem: ScopedMemory = Depends(scoped)) -> dict[str, Any]:
    """The user's ``limit`` newest sessions and the association links among them, strongest first."""
    return mem.graph(user_id=user_id, limit=limit)
