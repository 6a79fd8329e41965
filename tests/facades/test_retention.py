"""Retention: a session past the retention period is never read again, and expiring it deletes it as a delete
does, its bytes out of every file; the command and the service's schedule do the same."""

from __future__ import annotations

import json
import sqlite3
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

from memgas import InvalidInputError, Memory, NotFoundError
from memgas.cli.commands import main
from memgas.dump import import_dump
from support.hash_embedder import HashEmbedder
from support.live_server import make_key, start_server

EMBEDDER = HashEmbedder(64)
SECRET = "zanzibar-walrus-417"  # only in the old session
NOW = datetime.now(timezone.utc)


pytestmark = pytest.mark.usefixtures("no_secure_delete")  # the scan sees what memgas itself leaves


def fill(db: Path, embedder: Any = EMBEDDER) -> None:
    with Memory(str(db), embedder=embedder) as mem:
        mem.add([{"role": "user", "content": f"My old gate code was {SECRET}. Always call me Captain."}],
                user_id="u", session_id="old", timestamp=(NOW - timedelta(days=400)).isoformat())
        mem.add("I moved to Porto this spring.", user_id="u", session_id="new",
                timestamp=(NOW - timedelta(days=10)).isoformat())
        mem.add("Kept for ever: my sister's birthday is May 3.", user_id="v", session_id="far",
                timestamp=(NOW - timedelta(days=30)).isoformat())


def files_holding(root: Path, needle: bytes) -> list[str]:
    return [p.name for p in sorted(root.rglob("*")) if p.is_file() and needle in p.read_bytes()]


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Path]:
    (tmp_path / "store").mkdir()
    path = tmp_path / "store" / "m.db"
    fill(path)
    yield path


def test_a_session_past_the_retention_period_is_never_read(db: Path) -> None:
    with Memory(str(db), embedder=EMBEDDER, retention_days=365) as mem:
        assert [h.session_id for h in mem.search("gate code", user_id="u", min_score=0.0)] == ["new"]
        assert SECRET not in mem.context(f"What was my gate code {SECRET}?", user_id="u", min_score=0.0)
        assert mem.profile(user_id="u") == []  # "Always call me Captain" went with its session
        assert [h.session_id for h in mem.list(user_id="u")] == ["new"]
        assert [d.session_id for d in mem.timeline(user_id="u")] == ["new"]
        with pytest.raises(NotFoundError, match="retention period"):
            mem.get("old", user_id="u")
    with Memory(str(db), embedder=EMBEDDER) as forever:  # without a retention period it is all still there
        assert {h.session_id for h in forever.list(user_id="u")} == {"old", "new"}
        assert forever.profile(user_id="u")[0].text == "Always call me Captain."


def test_expiring_deletes_it_from_every_file(db: Path) -> None:
    assert files_holding(db.parent, SECRET.encode())  # stored
    with Memory(str(db), embedder=EMBEDDER, retention_days=365) as mem:
        assert mem.expire() == 1
        assert mem.expire() == 0
        assert {u.user_id: u.sessions for u in mem.users()} == {"u": 1, "v": 1}
    assert files_holding(db.parent, SECRET.encode()) == []  # the store and its log
    with Memory(str(db), embedder=EMBEDDER) as mem:
        assert mem.expire(before=NOW - timedelta(days=20), user_id="v") == 1
        assert mem.expire(before=(NOW - timedelta(days=20)).isoformat(), user_id="nobody") == 0
        assert [h.session_id for h in mem.list(user_id="u")] == ["new"]
        assert mem.expire() == 0  # no period and no session past its own expiry: nothing to do
        with pytest.raises(InvalidInputError):
            mem.expire(before="last week")
    for bad in (0, -1, True, "30", 40_000, float("nan")):
        with pytest.raises(InvalidInputError, match="retention_days"):
            Memory(None, embedder=EMBEDDER, retention_days=bad)  # type: ignore[arg-type]


def test_the_expire_command(tmp_path: Path, embedder: Any, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "m.db"
    fill(db, embedder)  # the command opens the store with the default embedder
    assert main(["expire", "--db", str(db), "--older-than", "365"]) == 0
    assert capsys.readouterr().out.strip() == '{"expired_sessions": 1}'
    assert main(["expire", "--db", str(db), "--before", (NOW - timedelta(days=20)).isoformat(), "--user", "u"]) == 0
    assert capsys.readouterr().out.strip() == '{"expired_sessions": 0}'
    assert main(["expire", "--db", str(db)]) == 0  # the sessions' own expiries only: none here
    assert capsys.readouterr().out.strip() == '{"expired_sessions": 0}'
    assert main(["expire", "--db", str(db), "--older-than", "1", "--before", "2026-01-01"]) == 2
    assert "not both" in capsys.readouterr().err
    assert main(["expire", "--db", str(db), "--retention", "user:v=20"]) == 0  # v's 30-day-old session: past 20
    assert capsys.readouterr().out.strip() == '{"expired_sessions": 1}'
    for bad in ("user:v", "user:v=soon", "nobody=3"):
        assert main(["expire", "--db", str(db), "--retention", bad]) == 2
        err = capsys.readouterr().err
        assert "retention" in err and err.count("\n") == 1
    for bad in ("user:v", "nobody=3"):  # refused before anything starts or is made
        assert main(["serve", "--db", str(tmp_path / "new.db"), "--retention", bad]) == 2
        assert "retention" in capsys.readouterr().err and not (tmp_path / "new.db").exists()


def test_a_user_or_a_tenant_can_have_a_period_of_its_own(tmp_path: Path) -> None:
    db = str(tmp_path / "m.db")
    aged = {"d60": 60, "d120": 120, "d500": 500}  # session id -> days old
    users = ("carl", "bob", "acme::ann", "acme::boss", "other::eve")
    with Memory(db, embedder=EMBEDDER) as mem:
        for user in users:
            for sid, days in aged.items():
                mem.add(f"{user} said something {days} days ago.", user_id=user, session_id=sid,
                        timestamp=(NOW - timedelta(days=days)).isoformat())
    rules = {"user:bob": 30, "tenant:acme": 90, "user:acme::boss": 1000}
    kept = {"carl": {"d60", "d120"}, "bob": set(), "acme::ann": {"d60"}, "acme::boss": {"d60", "d120", "d500"},
            "other::eve": {"d60", "d120"}}  # the store's 365 days for those without their own
    with Memory(db, embedder=EMBEDDER, retention_days=365, retention=rules) as mem:
        assert {u: {h.session_id for h in mem.list(user_id=u)} for u in users} == kept
        assert {h.session_id for h in mem.search("said something", user_id="acme::ann", k=10,
                                                 min_score=0.0)} == {"d60"}
        with pytest.raises(NotFoundError, match="expired"):
            mem.get("d120", user_id="acme::ann")
        assert mem.expire() == 15 - sum(len(v) for v in kept.values())
    with Memory(db, embedder=EMBEDDER) as mem:  # what expire() left: exactly what was readable
        assert {u.user_id: {h.session_id for h in mem.list(user_id=u.user_id)} for u in mem.users()} == \
            {u: v for u, v in kept.items() if v}
    for bad in ({"bob": 30}, {"user:": 30}, {"tenant:Acme Corp": 30}, {"user:bob": 0}, {"tenant:acme": "90"},
                ["user:bob"]):
        with pytest.raises(InvalidInputError, match="retention"):
            Memory(None, embedder=EMBEDDER, retention=bad)  # type: ignore[arg-type]


BRIEF = "quokka-lantern-902"  # only in the session that carries its own expiry


def test_a_session_past_its_own_expiry_is_never_read_and_expiring_deletes_it(db: Path) -> None:
    past, future = (NOW - timedelta(minutes=1)).isoformat(), (NOW + timedelta(days=30)).isoformat()
    with Memory(str(db), embedder=EMBEDDER) as mem:  # no retention period: only the sessions' own expiries
        mem.add(f"The wifi password this week is {BRIEF}.", user_id="w", session_id="brief",
                metadata={"expires_at": future})
        mem.add("I keep a quokka plush on my desk.", user_id="w", session_id="kept")
        assert {h.session_id for h in mem.search(BRIEF, user_id="w", min_score=0.0)} == {"brief", "kept"}
        assert mem.expire() == 0  # not yet
        mem.append([{"role": "user", "content": "Forget that password soon."}], user_id="w", session_id="brief",
                   metadata={"expires_at": past})  # an append sets (or moves) the expiry
        assert [h.session_id for h in mem.search(BRIEF, user_id="w", min_score=0.0)] == ["kept"]
        assert BRIEF not in mem.context(f"What is the wifi password {BRIEF}?", user_id="w", min_score=0.0)
        assert [h.session_id for h in mem.list(user_id="w")] == ["kept"]
        assert [d.session_id for d in mem.timeline(user_id="w")] == ["kept"]
        with pytest.raises(NotFoundError, match="expired"):
            mem.get("brief", user_id="w")
        assert files_holding(db.parent, BRIEF.encode())
        assert mem.expire(user_id="u") == 0  # another user's: nothing
        assert mem.expire() == 1 and mem.expire() == 0
        assert [h.session_id for h in mem.list(user_id="w")] == ["kept"]
    assert files_holding(db.parent, BRIEF.encode()) == []
    with Memory(None, embedder=EMBEDDER) as mem:
        for bad in ("next week", 5, "2026-13-40", {"at": 1}):
            with pytest.raises(InvalidInputError, match="expires_at"):
                mem.add("x", user_id="w", metadata={"expires_at": bad})
        assert mem.users() == []


@pytest.mark.slow
def test_the_service_expires_on_a_schedule_and_never_serves_what_expired(tmp_path: Path, embedder: Any) -> None:
    db = tmp_path / "served.db"
    fill(db, embedder)
    key = make_key(db)
    server = start_server(db, "--retention-days", "365", "--expire-every", "0.5", "--no-mcp", tmp=tmp_path)
    try:
        auth = {"Authorization": f"Bearer {key}"}
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # the first round runs at start-up; give it its moment
            with sqlite3.connect(db) as conn:
                if conn.execute("SELECT count(*) FROM sessions WHERE session_id = 'old'").fetchone()[0] == 0:
                    break
            time.sleep(0.2)
        assert httpx.get(f"{server.url}/v1/sessions/old", headers=auth, params={"user_id": "u"}).status_code == 404
        listed = httpx.get(f"{server.url}/v1/sessions", headers=auth, params={"user_id": "u"}).json()["sessions"]
        assert [s["session_id"] for s in listed] == ["new"]
        # a session that arrives already past the period is never served, then deleted at the next round
        httpx.post(f"{server.url}/v1/sessions", headers=auth, json={
            "user_id": "u", "session_id": "late", "messages": f"Another {SECRET}",
            "timestamp": (NOW - timedelta(days=500)).isoformat()}).raise_for_status()
        hits = httpx.post(f"{server.url}/v1/search", headers=auth,
                          json={"user_id": "u", "query": SECRET, "min_score": 0.0}).json()["hits"]
        assert [h["session_id"] for h in hits] == ["new"]
        # a session that carries its own expiry, already past, likewise
        httpx.post(f"{server.url}/v1/sessions", headers=auth, json={
            "user_id": "u", "session_id": "brief", "messages": f"The wifi password is {BRIEF}",
            "metadata": {"expires_at": (NOW - timedelta(minutes=1)).isoformat()}}).raise_for_status()
        hits = httpx.post(f"{server.url}/v1/search", headers=auth,
                          json={"user_id": "u", "query": BRIEF, "min_score": 0.0}).json()["hits"]
        assert [h["session_id"] for h in hits] == ["new"]
        time.sleep(1.5)
        with sqlite3.connect(db) as conn:
            assert conn.execute("SELECT count(*) FROM sessions WHERE session_id IN ('old', 'late', 'brief')"
                                ).fetchone()[0] == 0
    finally:
        server.stop()
    # Without a retention period the schedule still runs: the sessions' own expiries are kept too.
    server = start_server(db, "--expire-every", "0.5", "--no-mcp", tmp=tmp_path)
    try:
        httpx.post(f"{server.url}/v1/sessions", headers={"Authorization": f"Bearer {key}"}, json={
            "user_id": "u", "session_id": "brief2", "messages": f"The wifi password is {BRIEF}",
            "metadata": {"expires_at": (NOW - timedelta(minutes=1)).isoformat()}}).raise_for_status()
        time.sleep(1.5)
        with sqlite3.connect(db) as conn:
            assert conn.execute("SELECT count(*) FROM sessions WHERE session_id = 'brief2'").fetchone()[0] == 0
            assert conn.execute("SELECT count(*) FROM sessions WHERE session_id = 'new'").fetchone()[0] == 1
    finally:
        server.stop()


def test_no_read_path_shows_an_expired_session_not_yet_deleted(db: Path) -> None:
    with Memory(str(db), embedder=EMBEDDER, retention_days=365) as mem:
        with pytest.raises(NotFoundError, match="expired"):
            mem.units("old", user_id="u")
        graph = mem.graph(user_id="u")
        assert [n["session_id"] for n in graph["sessions"]] == ["new"] and graph["total_sessions"] == 1
        assert SECRET not in str(graph) and graph["links"] == []
        assert {link["session_id"] for link in mem.units("new", user_id="u")["links"]} <= {"new"}
        assert {u.user_id: u.sessions for u in mem.users()} == {"u": 1, "v": 1}
    with Memory(str(db), embedder=EMBEDDER) as forever:  # each of them shows it without the period
        assert SECRET in str(forever.units("old", user_id="u"))
        assert forever.graph(user_id="u")["total_sessions"] == 2
        assert {u.user_id: u.sessions for u in forever.users()} == {"u": 2, "v": 1}


def test_an_append_to_an_expired_session_starts_it_anew_and_the_old_text_is_gone(db: Path) -> None:
    with Memory(str(db), embedder=EMBEDDER, retention_days=365) as mem:
        done = mem.append("Now I live in Faro.", user_id="u", session_id="old", timestamp=NOW.isoformat())
        assert done.created and done.messages == 1
        assert [m.content for m in mem.get("old", user_id="u").messages] == ["Now I live in Faro."]
        assert SECRET not in mem.context(f"my gate code {SECRET}", user_id="u", min_score=0.0)
        assert SECRET not in str(mem.units("old", user_id="u"))
        mem.add("Another start.", user_id="u", session_id="older", timestamp=(NOW - timedelta(days=900)).isoformat())
        mem.add("And again.", user_id="u", session_id="older", timestamp=NOW.isoformat())  # no duplicate: it expired
        assert [m.content for m in mem.get("older", user_id="u").messages] == ["And again."]
    assert files_holding(db.parent, SECRET.encode()) == []


def test_an_export_leaves_out_sessions_past_their_own_expiry(db: Path, tmp_path: Path) -> None:
    with Memory(str(db), embedder=EMBEDDER) as mem:
        mem.add(f"The wifi password is {BRIEF}.", user_id="u", session_id="brief",
                metadata={"expires_at": (NOW - timedelta(minutes=1)).isoformat()})
        assert mem.stats("u")["edges"] > 0  # the expired session is linked to the others: the dump must drop those
    out = tmp_path / "dump.jsonl"
    assert main(["export", "--db", str(db), "--out", str(out)]) == 0
    text = out.read_text()
    assert BRIEF not in text and SECRET in text  # no period given: only the session's own expiry holds
    with Memory(str(tmp_path / "back.db"), embedder=EMBEDDER) as back:  # the dump's embedder: lossless, edges checked
        assert import_dump(out, back)["mode"] == "lossless"
        assert {h.session_id for h in back.list(user_id="u")} == {"old", "new"}
        assert back.stats("u")["edges"] > 0


def test_expire_and_delete_without_an_llm_clean_the_llm_cache_a_served_memory_wrote(
        tmp_path: Path, embedder: Any, stub: Any, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "store" / "m.db"
    db.parent.mkdir()
    fill(db, embedder)  # the commands open the store with the default embedder
    def summary(body: dict[str, Any]) -> str:  # the stub LLM repeats the secret its prompt holds
        prompt = " ".join(str(m.get("content", "")) for m in body["messages"])
        said = [word for word in (SECRET, BRIEF) if word in prompt]
        return json.dumps({"summary": f"The user said {' '.join(said)}.", "keywords": said or ["none"]})

    stub.responder = summary
    cache = tmp_path / "llm-cache.sqlite"  # the default path every Memory of this test uses (conftest)
    with Memory(str(db), embedder=embedder, llm=f"openai:tiny@{stub.base_url}") as served:
        served.update_message("old", 0, f"My old gate code was {SECRET}, said again.", user_id="u")
        served.add(f"Note {BRIEF} for later.", user_id="v", session_id="note")
    assert cache.name in files_holding(tmp_path, SECRET.encode()) and cache.name in files_holding(
        tmp_path, BRIEF.encode())  # else this proves nothing
    assert main(["expire", "--db", str(db), "--older-than", "365"]) == 0
    assert capsys.readouterr().out.strip() == '{"expired_sessions": 1}'
    assert files_holding(tmp_path, SECRET.encode()) == []
    assert main(["delete", "note", "--db", str(db), "--user", "v"]) == 0
    assert files_holding(tmp_path, BRIEF.encode()) == []


@pytest.mark.slow
def test_the_inspector_routes_never_show_an_expired_session_not_yet_deleted(tmp_path: Path, embedder: Any) -> None:
    db = tmp_path / "served.db"
    fill(db, embedder)
    key = make_key(db)
    server = start_server(db, "--retention-days", "365", "--expire-every", "3600", "--no-mcp", tmp=tmp_path)
    try:
        auth = {"Authorization": f"Bearer {key}"}
        httpx.post(f"{server.url}/v1/sessions", headers=auth, json={  # past the period, deleted in an hour
            "user_id": "u", "session_id": "late", "messages": f"Another {SECRET}",
            "timestamp": (NOW - timedelta(days=500)).isoformat()}).raise_for_status()
        with sqlite3.connect(db) as conn:  # stored, not yet deleted
            assert conn.execute("SELECT count(*) FROM sessions WHERE session_id = 'late'").fetchone()[0] == 1
        inspected = httpx.get(f"{server.url}/v1/inspect/units", headers=auth,
                              params={"user_id": "u", "session_id": "late"})
        assert inspected.status_code == 404 and SECRET not in inspected.text
        graph = httpx.get(f"{server.url}/v1/inspect/graph", headers=auth, params={"user_id": "u"})
        assert [n["session_id"] for n in graph.json()["sessions"]] == ["new"] and SECRET not in graph.text
        assert graph.json()["total_sessions"] == 1
        users = httpx.get(f"{server.url}/v1/users", headers=auth).json()["users"]
        assert {u["user_id"]: u["sessions"] for u in users} == {"u": 1, "v": 1}
    finally:
        server.stop()
