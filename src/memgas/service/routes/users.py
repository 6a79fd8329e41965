"""``/v1/users``, ``/v1/expire`` and ``/v1/stats``: the users a key may see, deleting a user, deleting what has
expired, counts."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query

from memgas.service.deps import UserPath, scoped
from memgas.service.schemas import ID_PATTERN, DeleteResult, ExpireOut, ExpireRequest, UserList
from memgas.service.scoped import ScopedMemory

router = APIRouter(tags=["users"])


@router.get("/v1/users", response_model=UserList)
def list_users(mem: ScopedMemory = Depends(scoped)) -> UserList:
    """The users this key may see (a tenant key: its own), with their session counts."""
    return UserList(users=[u.to_dict() for u in mem.users()])


@router.delete("/v1/users/{user_id:path}", response_model=DeleteResult)
def delete_user(user_id: UserPath, mem: ScopedMemory = Depends(scoped)) -> DeleteResult:
    """Delete all of a user's memory, and the cache rows only it produced."""
    return DeleteResult(**mem.delete(user_id=user_id).to_dict())


@router.post("/v1/expire", response_model=ExpireOut)
def expire(body: ExpireRequest, mem: ScopedMemory = Depends(scoped)) -> ExpireOut:
    """Delete the sessions past their own expiry or the server's retention period (or older than ``before``), as a
    delete does: of one user, or of every user with an admin key."""
    return ExpireOut(expired_sessions=mem.expire(user_id=body.user_id, before=body.before))


@router.get("/v1/stats", response_model=dict[str, Any])
def stats(user_id: str | None = Query(default=None, min_length=1, max_length=256, pattern=ID_PATTERN),
          mem: ScopedMemory = Depends(scoped)) -> dict[str, Any]:
    """Counts for one user; without ``user_id`` the whole store and this process's timings (admin key)."""
    return mem.stats(user_id)
