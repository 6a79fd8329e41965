"""The service's API keys as a store keeps them: the :class:`KeyStore` interface, used only by
:mod:`memgas.service.keys`. Store-wide, not scoped by user; a backend implements it beside :class:`~memgas.store.Store`
on the same database."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from datetime import datetime

__all__ = ["ApiKeyRecord", "KeyStore"]


@dataclass(frozen=True, slots=True)
class ApiKeyRecord:
    """A service API key as stored: never the key itself, only the SHA-256 of its secret part.

    ``scope`` is ``"admin"`` (every user) or ``"tenant"`` (the users of ``tenant``, all of them or only
    ``users``); ``revoked_at`` is set once the key is revoked (the row stays, so logs keep their meaning).
    """

    key_id: str
    secret_hash: str
    scope: str
    tenant: str | None
    users: tuple[str, ...] | None
    name: str
    created_at: datetime
    revoked_at: datetime | None = None


class KeyStore(ABC):
    """Where API key records live (never a key itself: the SHA-256 of its secret part)."""

    @abstractmethod
    def add_api_key(self, record: ApiKeyRecord) -> None:
        """Store a new API key record.

        Raises:
            InvalidInputError: a key with this id exists already (nothing is written).
        """

    @abstractmethod
    def get_api_key(self, key_id: str) -> ApiKeyRecord | None:
        """The record of one key id (revoked or not), or ``None``."""

    @abstractmethod
    def list_api_keys(self) -> list[ApiKeyRecord]:
        """Every key record, oldest first."""

    @abstractmethod
    def revoke_api_key(self, key_id: str) -> ApiKeyRecord:
        """Mark a key revoked (idempotent: a revoked key keeps its first revocation time); return its record.

        Raises:
            NotFoundError: no key has this id.
        """
