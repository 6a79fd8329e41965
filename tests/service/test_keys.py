"""API keys: only a hash is stored, every bad key is one 401, scopes and the tenant namespace hold."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from memgas.core.errors import AuthError, ForbiddenError, InvalidInputError, NotFoundError
from memgas.service.keys import ANONYMOUS, Principal, create_key, parse_scope, revoke_key, verify_key
from memgas.store import open_store


@pytest.fixture()
def store(tmp_path: Path):  # type: ignore[no-untyped-def]
    with open_store(tmp_path / "keys.db") as s:
        yield s


def test_the_store_keeps_a_hash_of_the_secret_never_the_key(store, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    key, record = create_key(store, "tenant:acme", users=["bob", "alice", "bob"], name="ci")
    prefix, key_id, secret = key.split("_", 2)
    assert prefix == "mgs" and key_id == record.key_id and len(secret) == 43
    assert record.secret_hash == hashlib.sha256(secret.encode()).hexdigest()
    assert (record.scope, record.tenant, record.users, record.name) == ("tenant", "acme", ("alice", "bob"), "ci")
    raw = (tmp_path / "keys.db").read_bytes() + (tmp_path / "keys.db-wal").read_bytes()
    assert secret.encode() not in raw and key.encode() not in raw
    assert store.list_api_keys() == [record] and store.get_api_key(record.key_id) == record


def test_every_bad_key_is_one_auth_error_and_a_revoked_key_stops_working(store) -> None:  # type: ignore[no-untyped-def]
    key, record = create_key(store, "admin")
    assert verify_key(store, key) == Principal(key_id=record.key_id)
    other_id = "0" * 16 if record.key_id != "0" * 16 else "1" * 16
    wrong_secret = key[:-1] + ("A" if key[-1] != "A" else "B")
    for bad in (None, "", "Bearer " + key, key + "x", wrong_secret, f"mgs_{other_id}_{key.split('_', 2)[2]}"):
        with pytest.raises(AuthError, match="API key"):
            verify_key(store, bad)
    first = revoke_key(store, record.key_id).revoked_at
    assert first is not None and revoke_key(store, record.key_id).revoked_at == first  # idempotent
    with pytest.raises(AuthError, match="invalid or revoked"):
        verify_key(store, key)
    with pytest.raises(NotFoundError):
        revoke_key(store, other_id)
    with pytest.raises(NotFoundError):
        revoke_key(store, "not-an-id")


def test_scopes_are_validated_and_admin_keys_cannot_be_limited(store) -> None:  # type: ignore[no-untyped-def]
    assert parse_scope("admin") == ("admin", None) and parse_scope("tenant:a-1_b") == ("tenant", "a-1_b")
    for bad in ("", "root", "tenant:", "tenant:Acme", "tenant:a:b", "tenant:" + "a" * 65, "tenant:-a"):
        with pytest.raises(InvalidInputError, match="invalid scope"):
            parse_scope(bad)
    with pytest.raises(InvalidInputError, match="admin key cannot be limited"):
        create_key(store, "admin", users=["alice"])
    with pytest.raises(InvalidInputError, match="at least one"):
        create_key(store, "tenant:acme", users=[])
    with pytest.raises(InvalidInputError, match="invalid user_id"):
        create_key(store, "tenant:acme", users=["a b"])
    assert store.list_api_keys() == []  # a refusal writes nothing


def test_tenant_namespace_separates_users_and_hides_other_tenants() -> None:
    acme, beta = Principal("k1", tenant="acme"), Principal("k2", tenant="beta")
    assert acme.stored_user("alice") == "acme::alice" != beta.stored_user("alice")
    assert acme.visible_user("acme::alice") == "alice" and acme.visible_user("beta::alice") is None
    assert acme.visible_user("alice") is None  # an admin's un-namespaced user is no tenant's
    assert ANONYMOUS.is_admin and ANONYMOUS.stored_user("acme::alice") == "acme::alice"
    limited = Principal("k3", tenant="acme", users=frozenset({"alice"}))
    assert limited.stored_user("alice") == "acme::alice" and limited.visible_user("acme::bob") is None
    with pytest.raises(ForbiddenError, match="'bob'"):
        limited.stored_user("bob")
    with pytest.raises(ForbiddenError):
        acme.require_admin()
    with pytest.raises(InvalidInputError, match="invalid user_id"):
        acme.stored_user("a" * 251)  # fits alone, not with the tenant prefix


def test_schema_v1_files_gain_the_key_table(tmp_path: Path) -> None:
    from memgas.store.sqlite import MIGRATIONS, SCHEMA_VERSION

    db = tmp_path / "v1.db"
    with sqlite3.connect(db) as conn:
        for statement in MIGRATIONS[0]:
            conn.execute(statement)
        conn.execute("PRAGMA user_version = 1")
    with open_store(db) as store:
        create_key(store, "admin")
        assert len(store.list_api_keys()) == 1
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION >= 2
