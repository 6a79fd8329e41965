"""How long a store keeps sessions: one period for every user, and periods of their own for some users or tenants.

A user's own period comes first, then their tenant's (a tenant's user ``alice`` is stored as ``acme::alice``), then
the store's; a session's own expiry (its metadata's ``expires_at``, :func:`memgas.core.validate.session_expiry`)
holds whatever the period.

>>> rule = Retention(365, {"tenant:acme": 90, "user:acme::boss": 730})
>>> [rule.days_of(user) for user in ("carl", "acme::ann", "acme::boss")]
[365, 90, 730]
>>> Retention(None, {"user:bob": 30}).days_of("carl") is None
True
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Mapping

from memgas.core.errors import InvalidInputError
from memgas.core.validate import TENANT_NAME, TENANT_SEPARATOR, check_id

__all__ = ["Retention", "MAX_RETENTION_DAYS", "check_days"]

#: The longest retention period a store takes (a hundred years).
MAX_RETENTION_DAYS = 36_525


def check_days(value: Any, name: str) -> float:
    """A number of days above 0 and at most :data:`MAX_RETENTION_DAYS`.

    Raises:
        InvalidInputError: anything else, naming ``name``.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= MAX_RETENTION_DAYS:
        raise InvalidInputError(f"{name} must be a number of days above 0 and at most {MAX_RETENTION_DAYS:,}, "
                                f"got {value!r}")
    return value


class Retention:
    """The store's period (``days``, ``None``: keep for ever) and ``periods`` of some users or tenants, by
    ``"user:ID"`` or ``"tenant:NAME"``.

    Raises:
        InvalidInputError: a key that names no user or tenant, or a period out of range.
    """

    def __init__(self, days: float | None = None, periods: Mapping[str, float] | None = None) -> None:
        self.days = None if days is None else check_days(days, "retention_days")
        if periods is not None and not isinstance(periods, Mapping):
            raise InvalidInputError(f"retention must map 'user:ID' or 'tenant:NAME' to days, got "
                                    f"{type(periods).__name__}")
        self.periods: dict[str, float] = {}
        for key, value in (periods or {}).items():
            kind, _, name = str(key).partition(":")
            if kind == "user" and name:
                check_id("user_id", name)
            elif kind != "tenant" or not TENANT_NAME.fullmatch(name):
                raise InvalidInputError(f"retention key {key!r}: use 'user:ID' or 'tenant:NAME' (NAME: 1-64 of "
                                        "a-z 0-9 _ -)")
            self.periods[f"{kind}:{name}"] = check_days(value, f"retention[{key!r}]")

    def days_of(self, user_id: str) -> float | None:
        """The period that holds for ``user_id``, in days (``None``: kept for ever)."""
        own = self.periods.get(f"user:{user_id}")
        if own is not None:
            return own
        tenant, sep, _ = user_id.partition(TENANT_SEPARATOR)
        if sep and f"tenant:{tenant}" in self.periods:
            return self.periods[f"tenant:{tenant}"]
        return self.days

    def period_of(self, user_id: str) -> timedelta | None:
        """:meth:`days_of` as a time span."""
        days = self.days_of(user_id)
        return None if days is None else timedelta(days=days)

