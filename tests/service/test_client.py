"""memgas.Client and AsyncClient against real ``memgas serve`` processes on loopback (SQLite files in tmp).

Each scenario is written once as a coroutine that awaits every call through :func:`done`, and runs with
either client: the sync one returns values, the async one coroutines.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
import threading
import uuid
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator

import httpx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import memgas
from memgas import AsyncClient, Client, Hit, TurnHit
from memgas.answer import Answer
from memgas.client import DEFAULT_RETRIES, MAX_RETRY_WAIT
from memgas.context import StandingStatement
from memgas.context.assemble import PROFILE_HEADER
from memgas.core.errors import (
    AuthError,
    DuplicateSessionError,
    ForbiddenError,
    InvalidInputError,
    LLMError,
    MemgasError,
    NotFoundError,
    RateLimitedError,
    UnavailableError,
)
from memgas.core.results import Added, Deleted, Edited, SessionPage, UserSessions
from memgas.core.types import Message, Session
from memgas.sessions.timeline import SessionDigest
from support.live_server import LiveServer, free_port, make_key, start_server
from support.openai_stub import OpenAIStub

Mem = Client | AsyncClient


async def done(result: Any) -> Any:
    """A call's value, whichever client made it."""
    return await result if inspect.isawaitable(result) else result


def run(scenario: Any, kind: str, url: str, key: str | None, **options: Any) -> Any:
    """Run ``scenario(mem)`` with a ``kind`` ("sync"/"async") client, closing it after (by ``async with``/``with``)."""
    async def main() -> Any:
        if kind == "async":
            async with AsyncClient(url, key, **options) as mem:
                return await scenario(mem)
        with Client(url, key, **options) as mem:
            return await scenario(mem)

    return asyncio.run(main())


def talk(text: str, reply: str = "Noted.") -> list[dict[str, str]]:
    return [{"role": "user", "content": text}, {"role": "assistant", "content": reply}]


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Servers keep their embedding and LLM caches in tmp, and reach the LLM stub directly."""
    return {"MEMGAS_CACHE_DIR": str(tmp_path_factory.mktemp("cache")), "NO_PROXY": "127.0.0.1"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, env: dict[str, str]) -> Iterator[LiveServer]:
    """The main server (no LLM), with an admin key and a tenant key limited to the user ``alice``."""
    tmp = tmp_path_factory.mktemp("main")
    db = tmp / "memory.db"
    keys = {"admin": make_key(db), "alice": make_key(db, "tenant:acme", users=["alice"])}
    live = start_server(db, tmp=tmp, env=env)
    live.keys.update(keys)
    yield live
    live.stop()


KINDS = ["sync", "async"]


@pytest.mark.parametrize("kind", KINDS)
def test_every_method_round_trips_with_memorys_types(server: LiveServer, kind: str) -> None:
    user = f"round/{kind}"
    when = datetime(2024, 5, 20, 10, 0, tzinfo=timezone.utc)

    async def scenario(mem: Mem) -> None:
        assert await done(mem.health()) == {"status": "ok", "detail": None}
        assert await done(mem.ready()) is True
        added = await done(mem.add([{"role": "user", "content": "I hiked Mount Hood with Ann.", "name": "Bo"},
                                    {"role": "assistant", "content": "Great climb!"}],
                                   user_id=user, session_id="hike", timestamp=when, metadata={"tags": ["trip"]}))
        assert isinstance(added, Added) and added.session_id == "hike" and added.units > 0 and not added.skipped
        batch = await done(mem.add_many(iter([{"messages": talk("My dog Rex likes the beach."), "session_id": "dog",
                                               "timestamp": datetime(2024, 6, 1)},
                                              {"messages": talk("I bake sourdough bread on Sundays.")}]),
                                        user_id=user))
        assert [r.session_id for r in batch][0] == "dog" and len(batch) == 2 and not batch[0].skipped
        again = await done(mem.add_many([{"messages": talk("I hiked again."), "session_id": "hike"}], user_id=user,
                                        skip_existing=True))
        assert again == [Added("hike", skipped=True)]

        hits = await done(mem.search("which mountain did I hike?", user_id=user, k=2, query_time=when))
        raw = httpx.post(f"{server.url}/v1/search", headers={"Authorization": f"Bearer {server.keys['admin']}"},
                         json={"user_id": user, "query": "which mountain did I hike?", "k": 2,
                               "query_time": when.isoformat()}).json()["hits"]
        assert [h.to_dict() for h in hits] == raw and len(hits) == 2 and hits[0].session_id == "hike"
        assert all(isinstance(h, Hit) and all(isinstance(t, TurnHit) for t in h.turns) for h in hits)
        assert hits[0].timestamp == when and isinstance(hits[0].timestamp, datetime)
        assert await done(mem.search("which mountain did I hike?", user_id=user, min_score=1.0)) == []

        assert await done(mem.get("hike", user_id=user)) == Session(
            user, "hike", (Message("user", "I hiked Mount Hood with Ann.", "Bo"), Message("assistant", "Great climb!")),
            when, {"tags": ["trip"]})
        sessions = await done(mem.list(user_id=user))
        assert [s.session_id for s in sessions][:2] == ["hike", "dog"] and len(sessions) == 3
        assert isinstance(sessions, SessionPage) and sessions.next_cursor is None
        head = {k: v for k, v in sessions[0].to_dict().items() if k not in ("created_at", "cursor")}
        assert head == {"session_id": "hike", "timestamp": when.isoformat(), "messages": 2, "turns": 1,
                        "agent_id": None, "run_id": None, "metadata": {"tags": ["trip"]},
                        "preview": "I hiked Mount Hood with Ann."}
        assert isinstance(sessions[0].cursor, str) and isinstance(sessions[0].created_at, datetime)
        assert UserSessions(user, 3) in await done(mem.users())
        assert (await done(mem.stats(user)))["sessions"] == 3
        assert "calls" in await done(mem.stats())  # store-wide, with the server's timings (admin key)

        assert await done(mem.delete("dog", user_id=user)) == Deleted(user, 1)
        with pytest.raises(NotFoundError, match="dog"):
            await done(mem.get("dog", user_id=user))
        assert await done(mem.delete(user_id=user)) == Deleted(user, 2)
        assert await done(mem.list(user_id=user)) == [] and await done(mem.search("hike", user_id=user)) == []

        # A live conversation: append every turn, edit or delete one message, the context for the next turn.
        first = await done(mem.append(talk("I moved to Lisbon in March."), user_id=user, session_id="live/chat",
                                      timestamp=when))
        assert first.created is True and first.messages == 2 and first.context is None
        more = await done(mem.append("My new flat is near the river.", user_id=user, session_id="live/chat",
                                     return_context=True))
        assert (more.created, more.messages, more.context) == (False, 3, "")  # no other session yet
        await done(mem.add(talk("I work at Acme as a nurse."), user_id=user, session_id="work"))
        edited = await done(mem.update_message("live/chat", 2, "My new flat is near the castle.", user_id=user))
        assert (edited.session_id, edited.messages) == ("live/chat", 3) and edited.units > 0
        changed = await done(mem.delete_message("live/chat", 1, user_id=user))
        assert changed.messages == 2 and isinstance(changed, Edited) and not changed.deleted_session
        assert [m.content for m in (await done(mem.get("live/chat", user_id=user))).messages] == [
            "I moved to Lisbon in March.", "My new flat is near the castle."]
        context = await done(mem.context("where do I live?", user_id=user, max_tokens=100, min_score=0.0))
        assert " · live/chat · user: My new flat is near the castle." in context
        assert " · live/chat · " not in await done(mem.context("where do I live?", user_id=user,
                                                               exclude_sessions=["live/chat"]))
        await done(mem.append("From now on, always answer in French.", user_id=user, session_id="live/chat"))
        profile = await done(mem.profile(user_id=user))
        # the move is a lasting fact about the user's home, the instruction holds from then on
        assert [s.to_dict() for s in profile if s.kind == "instruction"] == [
            {"kind": "instruction", "session_id": "live/chat", "message": 2, "subject": "language",
             "text": "From now on, always answer in French.", "timestamp": when.isoformat(), "always": True,
             "who": None}]
        assert ("I moved to Lisbon in March.", "home") in [(s.text, s.subject) for s in profile]
        assert all(isinstance(s, StandingStatement) for s in profile)
        assert [s.timestamp for s in profile if s.kind == "instruction"] == [when]
        assert "live/chat" not in {s.session_id for s in await done(mem.profile(user_id=user,
                                                                                 exclude_sessions=["live/chat"]))}
        assert [(s.text, s.subject) for s in await done(mem.profile(user_id=user, filters={"session_id": "work"}))] == [
            ("I work at Acme as a nurse.", "work")]  # a lasting fact about the user's job
        assert PROFILE_HEADER in await done(mem.context("Tell me a joke", user_id=user, min_score=0.9))
        course = await done(mem.timeline(user_id=user, topic="where I live", since=when))
        assert [(d.session_id, [i.message for i in d.items]) for d in course] == [("live/chat", [0])]
        assert isinstance(course[0], SessionDigest) and course[0].timestamp == when
        assert course[0].items[0].text == "I moved to Lisbon in March." and course[0].items[0].relevance > 0.2
        raw = httpx.get(f"{server.url}/v1/timeline", headers={"Authorization": f"Bearer {server.keys['admin']}"},
                        params={"user_id": user}).json()["sessions"]
        assert [d.to_dict() for d in await done(mem.timeline(user_id=user))] == raw and len(raw) == 2
        assert await done(mem.timeline(user_id=user, until=when)) == []
        assert [h.session_id for h in await done(mem.search("where do I live?", user_id=user,
                                                            exclude_sessions=["live/chat"]))] == ["work"]
        # one long chat: only its latest `window` messages are the prompt's, the older ones come back as memory
        older = await done(mem.append("Which city did I move to?", user_id=user, session_id="live/chat",
                                      return_context=True, window=2))
        assert " · live/chat · user: I moved to Lisbon in March." in older.context
        assert "French" not in older.context.split("Memories")[-1]  # the latest two are the prompt's
        with pytest.raises(InvalidInputError, match="index"):
            await done(mem.delete_message("live/chat", -1, user_id=user))
        with pytest.raises(InvalidInputError, match="no message 9"):
            await done(mem.update_message("live/chat", 9, "x", user_id=user))
        with pytest.raises(NotFoundError):
            await done(mem.delete_message("nope", 0, user_id=user))
        last = await done(mem.delete_message("work", 0, user_id=user))
        assert last.messages == 1
        # what has expired is deleted on request: a session past its own expiry, then those older than a time
        await done(mem.add("The door code is 7781.", user_id=user, session_id="brief",
                           metadata={"expires_at": "2020-01-01T00:00:00"}))
        assert await done(mem.expire(user_id=user)) == 1
        assert [s.session_id for s in await done(mem.list(user_id=user))] == ["live/chat", "work"]
        assert await done(mem.expire(user_id=user, before=when)) == 0  # both are newer
        assert await done(mem.expire(user_id=user, before=datetime.now(timezone.utc))) == 2
        assert await done(mem.list(user_id=user)) == []

    run(scenario, kind, server.url, server.keys["admin"])


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_ids_with_slashes_dots_and_signs_reach_their_own_session(server: LiveServer, kind: str) -> None:
    ids = ["a/b", ".", "..", "x@y:z", "../v1/users", "a+b", "..."]

    async def scenario(mem: Mem) -> None:
        for uid in ids:
            user = f"{uid}" if kind == "sync" else f"{uid}-async"
            for sid in ids:
                await done(mem.add(talk(f"session {sid} of {user}"), user_id=user, session_id=sid))
            assert [s.session_id for s in await done(mem.list(user_id=user))] == ids
            for sid in ids:
                got = await done(mem.get(sid, user_id=user))
                assert (got.session_id, got.user_id) == (sid, user)
                assert got.messages[0].content == f"session {sid} of {user}"
            assert (await done(mem.delete("..", user_id=user))).to_dict() == {"user_id": user, "deleted_sessions": 1}
            assert [s.session_id for s in await done(mem.list(user_id=user))] == [i for i in ids if i != ".."]
            appended = await done(mem.append("one more", user_id=user, session_id=ids[0]))
            assert appended.session_id == ids[0] and appended.messages == 3  # the route finds a/b/messages
            assert (await done(mem.delete_message(ids[0], 2, user_id=user))).messages == 2
            assert await done(mem.delete(user_id=user)) == Deleted(user, len(ids) - 1)
            assert await done(mem.list(user_id=user)) == []

    run(scenario, kind, server.url, server.keys["admin"])


#: Id pieces that look like the API's own paths: a session id made of them may name another resource.
ROUTE_LIKE = ["chat", "messages", "0", "1", "batch", "query", "delete", "..", ".", "v1", "sessions", "users", "a", "x:y", "@"]


@pytest.mark.slow
@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(parts=st.lists(st.lists(st.sampled_from(ROUTE_LIKE), min_size=1, max_size=4), min_size=2, max_size=4,
                      unique_by=lambda p: "/".join(p)))
@example(parts=[["chat", "messages", "0"], ["chat"]])  # the probe's case: once the delete of chat's message 0
@example(parts=[["a", "messages"], ["a"], ["batch"]])
def test_every_route_acts_on_exactly_the_id_it_was_given(server: LiveServer, parts: list[list[str]]) -> None:
    """Ids built from route-like pieces (``chat/messages/0`` beside ``chat``, ``a/messages``, ``batch``, ``..``):
    each get, edit, message delete and session delete acts on that id alone, over both clients (issue 41: a session
    ``chat/messages/0`` once lost ``chat``'s message 0 to its delete)."""
    ids = ["/".join(p) for p in parts]
    user = "route-" + uuid.uuid4().hex[:8]
    with Client(server.url, server.keys["admin"]) as mem:
        for sid in ids:
            mem.add([{"role": "user", "content": f"first of {sid}"}, {"role": "user", "content": f"second of {sid}"}],
                    user_id=user, session_id=sid)
        for sid in ids:
            assert [m.content for m in mem.get(sid, user_id=user).messages] == [f"first of {sid}", f"second of {sid}"]
        target, *others = ids
        assert mem.update_message(target, 1, "edited", user_id=user).session_id == target
        assert mem.delete_message(target, 0, user_id=user).messages == 1
        for sid in others:  # untouched
            assert [m.content for m in mem.get(sid, user_id=user).messages] == [f"first of {sid}", f"second of {sid}"]
        assert mem.delete(target, user_id=user) == Deleted(user, 1)
        assert sorted(s.session_id for s in mem.list(user_id=user)) == sorted(others)

    async def rest() -> None:
        async with AsyncClient(server.url, server.keys["admin"]) as amem:
            for sid in others:
                assert (await amem.get(sid, user_id=user)).session_id == sid
                assert await amem.delete(sid, user_id=user) == Deleted(user, 1)

    asyncio.run(rest())
    with Client(server.url, server.keys["admin"]) as mem:
        assert list(mem.list(user_id=user)) == []


def test_a_message_index_is_decimal_digits_and_nothing_else(server: LiveServer) -> None:
    admin = {"Authorization": f"Bearer {server.keys['admin']}"}
    with Client(server.url, server.keys["admin"]) as mem:
        mem.add(talk("I keep bees."), user_id="idx", session_id="s")
    for index in ("1.0", "+1", "1e0", "٣", "-1", "0x1"):
        r = httpx.delete(f"{server.url}/v1/messages/{index}", params={"user_id": "idx", "session_id": "s"},
                         headers=admin)
        assert r.status_code == 422, (index, r.text)
    with Client(server.url, server.keys["admin"]) as mem:
        assert len(mem.get("s", user_id="idx").messages) == 2  # nothing was deleted


def test_a_batch_with_one_bad_session_adds_nothing(server: LiveServer) -> None:
    with Client(server.url, server.keys["admin"]) as mem:
        mem.add(talk("I live in Lisbon."), user_id="batcher", session_id="home")
        with pytest.raises(InvalidInputError, match="session"):
            mem.add_many([{"messages": talk("ok"), "session_id": "new1"}, {"messages": [], "session_id": "bad"}],
                         user_id="batcher")
        with pytest.raises(InvalidInputError, match="timestamp"):  # refused by the server, not the schema
            mem.add_many([{"messages": talk("ok"), "session_id": "new2"},
                          {"messages": talk("ok"), "timestamp": "not a date"}], user_id="batcher")
        with pytest.raises(DuplicateSessionError, match="home"):
            mem.add_many([{"messages": talk("ok"), "session_id": "new3"}, {"messages": talk("again"),
                                                                           "session_id": "home"}], user_id="batcher")
        assert [s.session_id for s in mem.list(user_id="batcher")] == ["home"]


def test_errors_map_to_memgas_exceptions_with_the_servers_message(server: LiveServer) -> None:
    with Client(server.url, server.keys["admin"]) as mem:
        mem.add(talk("I play chess."), user_id="alice", session_id="s1")
        mem.add(talk("I play go."), user_id="bob", session_id="s1")
        with pytest.raises(InvalidInputError, match="k"):
            mem.search("chess", user_id="alice", k=0)
        with pytest.raises(InvalidInputError, match="min_score"):
            mem.search("chess", user_id="alice", min_score=2)
        with pytest.raises(InvalidInputError, match="cannot send"):  # not JSON: nothing is sent
            mem.add(talk("x"), user_id="alice", metadata={"when": datetime(2024, 1, 1)})
        with pytest.raises(InvalidInputError, match="user_id"):  # a path id is checked before it is sent
            mem.get("s1", user_id="")
        with pytest.raises(InvalidInputError):
            mem.get("", user_id="alice")
        with pytest.raises(DuplicateSessionError, match="s1"):
            mem.add(talk("again"), user_id="alice", session_id="s1")
        assert mem.search("chess", user_id="nobody") == []  # a new user: empty, not an error
        with pytest.raises(UnavailableError, match="no LLM"):
            mem.answer("what do I play?", user_id="alice")
        with pytest.raises(InvalidInputError, match="before|time"):
            mem.expire(before="last week")
        with pytest.raises(InvalidInputError, match="keeps no facts"):
            mem.kg.facts(user_id="alice")
    for key in (None, "mgs_0123456789abcdef_" + "A" * 43, "not-a-key"):
        with Client(server.url, key) as anonymous, pytest.raises(AuthError, match="API key"):
            anonymous.users()
    with Client(server.url, server.keys["alice"]) as tenant:
        assert tenant.search("chess", user_id="alice") == []  # the tenant's own alice is not the admin's alice
        with pytest.raises(ForbiddenError, match="may not access user 'bob'"):
            tenant.search("go", user_id="bob")
        with pytest.raises(ForbiddenError, match="admin"):
            tenant.stats()
        with pytest.raises(ForbiddenError, match="admin"):
            tenant.expire()  # every user's: an admin's call
        assert tenant.expire(user_id="alice") == 0


def test_async_errors_are_the_same_exceptions(server: LiveServer) -> None:
    async def scenario(mem: Mem) -> None:
        with pytest.raises(AuthError):
            await done(mem.users())

    run(scenario, "async", server.url, "mgs_0123456789abcdef_" + "A" * 43)


@pytest.mark.parametrize("kind", KINDS)
def test_a_server_that_cannot_be_reached_is_unavailable_naming_its_url(kind: str) -> None:
    url = f"http://127.0.0.1:{free_port()}"

    async def scenario(mem: Mem) -> None:
        for call in (lambda: mem.users(), lambda: mem.add(talk("x"), user_id="u")):
            with pytest.raises(UnavailableError, match=re.escape(f"cannot reach the memgas server at {url}: ")) as e:
                await done(call())
            assert "\n" not in str(e.value)

    run(scenario, kind, url, None, retries=0)


def test_a_closed_client_refuses_calls(server: LiveServer) -> None:
    mem = Client(server.url, server.keys["admin"])
    mem.close()
    mem.close()
    with pytest.raises(MemgasError, match="closed"):
        mem.users()


def test_bad_client_arguments_are_refused() -> None:
    with pytest.raises(InvalidInputError, match="url"):
        Client("127.0.0.1:8000")
    with pytest.raises(InvalidInputError, match="retries"):
        Client("http://127.0.0.1:8000", retries=-1)


@pytest.mark.slow
def test_rate_limited_calls_raise_with_retry_after(tmp_path_factory: pytest.TempPathFactory,
                                                  env: dict[str, str]) -> None:
    tmp = tmp_path_factory.mktemp("limited")
    key = make_key(tmp / "memory.db")
    live = start_server(tmp / "memory.db", "--rate-limit", "2", tmp=tmp, env=env)
    try:
        with Client(live.url, key) as mem, pytest.raises(RateLimitedError, match="rate limit") as e:
            for _ in range(50):
                mem.users()
        assert 1.0 <= e.value.retry_after <= 2.0
    finally:
        live.stop()


# -- retries and error decoding against a scripted HTTP server -----------------------------------------------

class Scripted:
    """A loopback HTTP server answering every request with one fixed status and body; counts requests."""

    def __init__(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.requests: list[str] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                owner.requests.append(f"{self.command} {self.path}")
                self.send_response(status)
                for name, value in {"Content-Length": str(len(body)), **(headers or {})}.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_DELETE = _answer

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def __enter__(self) -> Scripted:
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def error(code: str, message: str) -> bytes:
    return json.dumps({"error": {"code": code, "message": message}, "request_id": "r1"}).encode()


@pytest.mark.parametrize("kind", KINDS)
def test_reads_are_retried_a_bounded_number_of_times_and_adds_never(kind: str) -> None:
    with Scripted(503, error("unavailable", "store is down"), {"Retry-After": "0"}) as srv:
        async def scenario(mem: Mem) -> None:
            with pytest.raises(UnavailableError, match="store is down"):
                await done(mem.get("s/1", user_id="u"))
            assert srv.requests == ["GET /v1/sessions/s%2F1?user_id=u"] * 3
            srv.requests.clear()
            for write in (lambda: mem.add(talk("x"), user_id="u"), lambda: mem.delete(user_id="u"),
                          lambda: mem.search("x", user_id="u")):
                with pytest.raises(UnavailableError):
                    await done(write())
            assert [r.split()[0] for r in srv.requests] == ["POST", "DELETE", "POST"]
            assert await done(mem.ready()) is False and len(srv.requests) == 4  # a probe's 503 is its answer

        run(scenario, kind, srv.url, "k", retries=2)


def test_retries_back_off_and_honour_retry_after_up_to_a_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    waits: list[float] = []
    monkeypatch.setattr("memgas.client.time.sleep", waits.append)
    with Scripted(503, error("unavailable", "busy")) as srv, Client(srv.url, retries=3) as mem:
        with pytest.raises(UnavailableError):
            mem.users()
    assert waits == [0.25, 0.5, 1.0]
    waits.clear()
    with Scripted(503, error("unavailable", "busy"), {"Retry-After": "120"}) as srv, Client(srv.url) as mem:
        with pytest.raises(UnavailableError):
            mem.users()
    assert waits == [MAX_RETRY_WAIT] * DEFAULT_RETRIES
    waits.clear()
    with Client(f"http://127.0.0.1:{free_port()}") as mem, pytest.raises(UnavailableError):
        mem.stats()
    assert waits == [0.25, 0.5]


@pytest.mark.slow
def test_error_codes_and_foreign_answers_are_decoded() -> None:
    with Scripted(503, error("llm_unavailable", "the LLM at http://x timed out")) as srv, Client(srv.url) as mem:
        with pytest.raises(LLMError, match="timed out"):
            mem.answer("q", user_id="u")
    with Scripted(429, error("rate_limited", "slow down"), {"Retry-After": "7"}) as srv, Client(srv.url) as mem:
        with pytest.raises(RateLimitedError, match="slow down") as e:
            mem.users()
        assert e.value.retry_after == 7.0
    with Scripted(413, error("payload_too_large", "body over 8 MiB")) as srv, Client(srv.url) as mem:
        with pytest.raises(InvalidInputError, match="8 MiB"):
            mem.add(talk("x"), user_id="u")
    with Scripted(502, b"<html>Bad Gateway</html>") as srv, Client(srv.url, retries=0) as mem:
        with pytest.raises(UnavailableError, match="HTTP 502: .*Bad Gateway"):
            mem.users()
    with Scripted(200, b"not json") as srv, Client(srv.url) as mem:
        with pytest.raises(MemgasError, match="not JSON"):
            mem.users()


# -- answer and facts on a server with an LLM ---------------------------------------------------------------

def responder(body: dict[str, Any]) -> str:
    """Units, fact extraction and judging, the memory filter and the answer, each in its expected JSON."""
    system, user = body["messages"][0]["content"], body["messages"][1]["content"]
    if "memory notes" in system:
        return json.dumps({"summary": "A conversation about Lisbon.", "keywords": ["Lisbon"]})
    if system.startswith("You extract facts"):
        message = user.split("CURRENT MESSAGE:\n", 1)[1]
        found = [{"subject": "user", "relation": "lives in", "object": "Lisbon"}] if "Lisbon" in message else []
        return json.dumps({"facts": found})
    if "which memories answer" in system:
        return json.dumps({n: True for n in re.findall(r"^\[(\d+)\]", user, re.M)})
    if "answer questions" in system:
        return json.dumps({"answer": "Lisbon", "sources": [1]})
    return json.dumps({"verdict": "new", "ids": []})


@pytest.mark.parametrize("kind", KINDS)
def test_answer_and_facts_from_a_server_with_an_llm(llm_server: tuple[LiveServer, str], kind: str) -> None:
    live, key = llm_server

    async def scenario(mem: Mem) -> None:
        user = f"lisboeta-{kind}"
        await done(mem.add(talk("I moved to Lisbon last year."), user_id=user, session_id="move",
                           timestamp="2024-03-01T10:00:00"))
        answer = await done(mem.answer("Where do I live?", user_id=user, question_date=datetime(2025, 1, 1)))
        assert isinstance(answer, Answer) and answer.answer == "Lisbon" and answer.sources == ["move"]
        assert answer.memories[0].timestamp == datetime(2024, 3, 1, 10, 0)
        assert isinstance(answer.usage.calls, int) and answer.usage.calls + answer.usage.cached >= 1
        facts = await done(mem.kg.facts(user_id=user))
        assert [(f.subject, f.relation, f.object, f.episodes) for f in facts] == [("user", "lives in", "Lisbon",
                                                                                  ["move#0"])]
        assert isinstance(facts[0].created_at, datetime) and facts[0].invalid_at is None
        assert await done(mem.kg.facts(user_id=user, entity="nobody")) == []
        assert [f.object for f in await done(mem.kg.history(facts[0].id, user_id=user))] == ["Lisbon"]
        assert await done(mem.kg.communities(user_id=user)) == []  # one fact: no batch summarised yet
        assert await done(mem.kg.retry_pending(user_id=user)) == 0

    run(scenario, kind, live.url, key)


def test_fact_ids_are_read_as_strictly_as_message_indices(llm_server: tuple[LiveServer, str]) -> None:
    live, key = llm_server
    auth = {"Authorization": f"Bearer {key}"}
    with Client(live.url, api_key=key) as mem:
        mem.add(talk("I moved to Lisbon last year."), user_id="strict", session_id="move")
        fact = mem.kg.facts(user_id="strict")[0].id
        for written in ("+1", "%201", "00", "1.0", "-1", "0x1"):
            r = httpx.get(f"{live.url}/v1/facts/{written}/history", headers=auth, params={"user_id": "strict"})
            assert r.status_code == 422, written
        r = httpx.get(f"{live.url}/v1/facts/{fact}/history", headers=auth, params={"user_id": "strict"})
        assert r.status_code == 200 and r.json()["facts"][0]["object"] == "Lisbon"
        with pytest.raises(NotFoundError, match="no fact 999"):
            mem.kg.history(999, user_id="strict")
        # a user with no memory: the same answer on every read of a collection, an empty 200
        for path in ("/v1/facts", "/v1/communities", "/v1/profile", "/v1/timeline"):
            r = httpx.get(f"{live.url}{path}", headers=auth, params={"user_id": "nobody-yet"})
            assert r.status_code == 200 and list(r.json().values()) == [[]], path


@pytest.fixture(scope="module")
def llm_server(tmp_path_factory: pytest.TempPathFactory, env: dict[str, str]) -> Iterator[tuple[LiveServer, str]]:
    """A ``--method zep`` server whose LLM is the scripted stub, and its admin key."""
    tmp = tmp_path_factory.mktemp("llm")
    with OpenAIStub(responder) as stub:
        key = make_key(tmp / "memory.db")
        live = start_server(tmp / "memory.db", "--method", "zep", "--llm", f"openai:tiny@{stub.base_url}",
                            tmp=tmp, env=env)
        yield live, key
        live.stop()


def test_the_package_exports_both_clients() -> None:
    assert memgas.Client is Client and memgas.AsyncClient is AsyncClient  # their calls: tests/system/test_api.py


def test_the_key_may_come_from_the_environment(server: LiveServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMGAS_API_KEY", server.keys["admin"])
    with Client(server.url) as mem:
        assert isinstance(mem.users(), list)
    with Client(server.url, "not-a-key") as mem, pytest.raises(AuthError):  # a key passed in wins
        mem.users()
    monkeypatch.setenv("MEMGAS_API_KEY", "")
    with Client(server.url) as mem, pytest.raises(AuthError):  # empty: no key
        mem.users()
