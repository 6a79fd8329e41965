"""API keys for the service: creation, verification, scopes, and the tenant namespace of user ids.

A key looks like ``mgs_<key id>_<secret>``. The store keeps the key id, the scope and the SHA-256 of
the secret, never the key: whoever reads the store (or a backup) cannot call the service with it. The
secret is 256 random bits, so a fast hash is enough (a slow password hash protects guessable secrets;
these are not guessable), and it is compared in constant time.

Scopes:

* ``admin``: every user, the store-wide statistics and metrics.
* ``tenant:NAME``: only the users of tenant ``NAME``, optionally only those listed (``--users``). A
  tenant's user ``alice`` is stored as ``NAME::alice``, so two tenants may both have an ``alice`` and
  neither can name the other's: another tenant's user simply does not exist for a tenant key (404).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import math
import re
import secrets
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Sequence

from memgas.core.errors import AuthError, ForbiddenError, InvalidInputError, NotFoundError
from memgas.core.validate import TENANT_NAME, TENANT_SEPARATOR, check_id
from memgas.store import ApiKeyRecord, KeyStore

__all__ = ["KnownKeyIds",
    "Principal", "ANONYMOUS", "AuthError", "ForbiddenError", "create_key", "verify_key", "revoke_key",
    "parse_scope", "TENANT_SEPARATOR", "is_loopback",
]

_KEY_RE = re.compile(r"mgs_([0-9a-f]{16})_([A-Za-z0-9_-]{43})")


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: what a verified key allows.

    ``tenant`` is ``None`` for an admin key; ``users`` is ``None`` when the key may touch every user of
    its scope.
    """

    key_id: str
    tenant: str | None = None
    users: frozenset[str] | None = None

    @property
    def is_admin(self) -> bool:
        """Whether this is an admin key (every user, store-wide reads)."""
        return self.tenant is None

    def stored_user(self, user_id: str) -> str:
        """The stored id of the caller's user ``user_id``.

        Raises:
            InvalidInputError: a malformed user id (or one too long once namespaced).
            ForbiddenError: the key is limited to other users.
        """
        check_id("user_id", user_id)
        if self.users is not None and user_id not in self.users:
            raise ForbiddenError(f"this API key may not access user {user_id!r}")
        if self.tenant is None:
            return user_id
        return check_id("user_id", f"{self.tenant}{TENANT_SEPARATOR}{user_id}")

    def visible_user(self, stored: str) -> str | None:
        """The id under which the caller sees a stored user, or ``None`` if the caller may not see it."""
        if self.tenant is not None:
            prefix = f"{self.tenant}{TENANT_SEPARATOR}"
            if not stored.startswith(prefix):
                return None
            stored = stored[len(prefix):]
        return stored if self.users is None or stored in self.users else None

    def unscoped(self, message: str) -> str:
        """``message`` (an error naming stored user ids) as this caller may read it: one line, without the
        caller's own tenant prefix, which the caller never wrote."""
        message = " ".join(message.split())
        return message if self.tenant is None else message.replace(f"'{self.tenant}{TENANT_SEPARATOR}", "'")

    def require_admin(self) -> None:
        """Raise :class:`ForbiddenError` unless this is an admin key."""
        if not self.is_admin:
            raise ForbiddenError("this call needs an admin API key")


#: The principal of a server started with ``--no-auth`` (loopback only): every user, like admin.
ANONYMOUS = Principal(key_id="anonymous")


def parse_scope(scope: str) -> tuple[str, str | None]:
    """``"admin"`` → ``("admin", None)``; ``"tenant:NAME"`` → ``("tenant", NAME)``.

    Raises:
        InvalidInputError: anything else, or a tenant name that is not 1-64 of ``a-z 0-9 _ -``
            starting with a letter or digit.
    """
    if scope == "admin":
        return "admin", None
    kind, _, tenant = scope.partition(":")
    if kind != "tenant" or not TENANT_NAME.fullmatch(tenant):
        raise InvalidInputError(f"invalid scope {scope!r}: use 'admin' or 'tenant:NAME' (NAME: 1-64 of a-z 0-9 _ -)")
    return "tenant", tenant


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode("ascii")).hexdigest()


def create_key(store: KeyStore, scope: str, *, users: Sequence[str] | None = None, name: str = "") -> tuple[str, ApiKeyRecord]:
    """Create a key with ``scope`` (``admin`` or ``tenant:NAME``), optionally limited to ``users``.

    Returns:
        ``(key, record)``: the key, shown only this once, and what the store keeps of it.

    Raises:
        InvalidInputError: a bad scope, a malformed user id, an empty ``users`` list, or ``users``
            with an admin scope (an admin key is not limited).
    """
    kind, tenant = parse_scope(scope)
    if users is not None:
        if kind == "admin":
            raise InvalidInputError("an admin key cannot be limited to users; use a tenant scope")
        users = tuple(sorted({check_id("user_id", u) for u in users}))
        if not users:
            raise InvalidInputError("--users needs at least one user id")
    if not isinstance(name, str) or len(name) > 200:
        raise InvalidInputError("a key name is a string of at most 200 characters")
    key_id, secret = secrets.token_hex(8), secrets.token_urlsafe(32)
    record = ApiKeyRecord(key_id=key_id, secret_hash=_hash(secret), scope=kind, tenant=tenant, users=users,
                          name=name, created_at=datetime.now(timezone.utc))
    store.add_api_key(record)
    return f"mgs_{key_id}_{secret}", record


def verify_key(store: KeyStore, key: str | None) -> Principal:
    """The principal of a presented key.

    Raises:
        AuthError: no key, a malformed one, an unknown id, a wrong secret or a revoked key (one message
            for all, so a caller learns nothing about which key ids exist).
    """
    match = _KEY_RE.fullmatch(key or "")
    if match is None:
        raise refusal(key)
    key_id, secret = match.groups()
    record = store.get_api_key(key_id)
    # Compare against a hash even for an unknown id, so timing does not tell ids apart.
    expected = record.secret_hash if record is not None else _hash("")
    if not hmac.compare_digest(expected, _hash(secret)) or record is None or record.revoked_at is not None:
        raise refusal(key)
    return Principal(key_id=key_id, tenant=record.tenant,
                     users=None if record.users is None else frozenset(record.users))


def refusal(key: str | None) -> AuthError:
    """The error for a key that does not open the service: one message for every well-formed key (unknown id, wrong
    secret, revoked), so that a caller learns nothing about which exist."""
    if _KEY_RE.fullmatch(key or "") is None:
        return AuthError("missing or malformed API key: send 'Authorization: Bearer mgs_...'")
    return AuthError("invalid or revoked API key")


class KnownKeyIds:
    """The key ids a store holds, read again at most once per ``refresh_s`` seconds when asked about one it does not
    hold: what lets the service tell a key it must look up (and never refuse unlooked) from a guess, without asking
    the store for each guess. A key created by ``memgas keys create`` in another process is known within
    ``refresh_s``; a revoked one stays known (its lookup then refuses it)."""

    def __init__(self, store: KeyStore, refresh_s: float = 1.0) -> None:
        self._store = store
        self._refresh_s = refresh_s
        self._ids: frozenset[str] = frozenset()
        self._read_at = -math.inf
        self._lock = threading.Lock()

    def holds(self, key: str | None) -> bool:
        """Whether ``key`` is well formed and names a key id the store holds."""
        match = _KEY_RE.fullmatch(key or "")
        if match is None:
            return False
        key_id = match.group(1)
        if key_id in self._ids:
            return True
        with self._lock:
            if time.monotonic() - self._read_at >= self._refresh_s:
                self._ids = frozenset(r.key_id for r in self._store.list_api_keys())
                self._read_at = time.monotonic()
        return key_id in self._ids


def revoke_key(store: KeyStore, key_id: str) -> ApiKeyRecord:
    """Revoke a key by id (idempotent).

    Raises:
        NotFoundError: no key has this id.
    """
    if not re.fullmatch(r"[0-9a-f]{16}", key_id or ""):
        raise NotFoundError(f"no API key with id {key_id!r}")
    return store.revoke_api_key(key_id)


def is_loopback(host: str) -> bool:
    """Whether ``host`` names only this machine (``localhost``, 127.0.0.0/8, ``::1``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
