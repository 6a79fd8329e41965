"""The MCP server through the official MCP client: over stdio (``memgas mcp``) and over streamable HTTP
(``/mcp`` of a real ``memgas serve`` on loopback), with the same API keys as REST."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable, Iterator

import anyio
import httpx
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from memgas.core.validate import MAX_K, MAX_QUERY_CHARS
from memgas.memory import Memory
from memgas.service.keys import revoke_key
from memgas.store import open_store
from support.live_server import LiveServer, make_key, start_server
from support.openai_stub import OpenAIStub

TOOLS = {"add_memory", "search_memory", "get_context", "get_profile", "get_timeline", "get_session", "list_sessions",
         "delete_memory",
         "recall_principles", "match_templates"}
LISBON = [{"role": "user", "content": "I moved to Lisbon last spring and I love the tiles."},
          {"role": "assistant", "content": "Lisbon is lovely; the azulejos are everywhere."}]
TEA = [{"role": "user", "content": "My favourite drink is green tea, never coffee."}]
ENV = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
JSON_RPC_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
                    "MCP-Protocol-Version": "2025-11-25"}


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    """Run an async test body (no async test plugin needed)."""
    anyio.run(scenario)


def ok(result: Any) -> dict[str, Any]:
    """The structured content of a successful tool call, whose text (what the model reads) is compact, not JSON."""
    assert not result.is_error, result.content[0].text
    assert result.structured_content is not None
    with pytest.raises(ValueError):  # compact lines, not JSON (format=json asks for JSON)
        json.loads(result.content[0].text)
    return result.structured_content


def text_of(result: Any) -> str:
    """The text of a successful tool call that returns text (``get_context``)."""
    assert not result.is_error, result.content[0].text
    return result.content[0].text


def error(result: Any) -> str:
    """The message of a failed tool call (one line)."""
    assert result.is_error
    message = result.content[0].text
    assert "\n" not in message and "Traceback" not in message
    return message


def stdio(db: Path, *extra: str, env: dict[str, str] | None = None) -> Client:
    """An MCP client that starts ``memgas mcp --db db`` as its subprocess."""
    params = StdioServerParameters(command=sys.executable, args=["-m", "memgas.cli", "mcp", "--db", str(db), "--create", *extra],
                                   env=env or ENV)
    return Client(params)


@asynccontextmanager
async def http(server: LiveServer, key: str | None, mode: str = "auto") -> AsyncIterator[Client]:
    """An MCP client of ``server``'s ``/mcp`` sending ``key`` as a bearer token."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with httpx2.AsyncClient(headers=headers, timeout=120) as session:
        async with Client(streamable_http_client(f"{server.url}/mcp", http_client=session), mode=mode) as client:
            yield client


async def roundtrip(client: Client, user: str) -> None:
    """Call every tool once the way an agent would, and check each answer and each refusal."""
    added = ok(await client.call_tool("add_memory", {"user_id": user, "messages": LISBON, "session_id": "trip",
                                                     "timestamp": "2024-05-01T10:00:00", "metadata": {"src": "t"}}))
    assert added["session_id"] == "trip" and added["units"] > 0
    first = ok(await client.call_tool("add_memory", {"user_id": user, "messages": TEA, "session_id": "drinks"}))
    again = ok(await client.call_tool("add_memory", {"user_id": user, "messages": TEA, "session_id": "drinks"}))
    assert (first["created"], again["created"], again["messages"]) == (True, False, 2 * len(TEA))  # appended
    made = await client.call_tool("add_memory", {"user_id": user, "messages": "I also like oolong."})
    fresh = ok(made)
    assert made.content[0].text == f"created session {fresh['session_id']}: 1 message"  # not "1 messages"
    assert fresh["created"] and fresh["session_id"] not in ("trip", "drinks")  # no id: a new session
    ok(await client.call_tool("delete_memory", {"user_id": user, "session_id": fresh["session_id"]}))
    context = text_of(await client.call_tool("get_context", {"user_id": user, "query": "which city do I live in?",
                                                             "max_tokens": 200}))
    assert " · trip · " in context and "Lisbon" in context and len(context) <= 4 * 200 + 50
    assert " · trip · " not in text_of(await client.call_tool("get_context", {
        "user_id": user, "query": "which city do I live in?", "exclude_sessions": ["trip"]}))
    assert text_of(await client.call_tool("get_context", {"user_id": "newcomer", "query": "x"})) == "(no memories yet)"
    # a preference no phrase of the rules names, found by the learned detector, and the move: a fact about the home
    assert text_of(await client.call_tool("get_profile", {"user_id": user})).endswith(
        "] preference (food): My favourite drink is green tea, never coffee.")
    assert "· trip] fact (home): I moved to Lisbon last spring and I love the tiles." in text_of(
        await client.call_tool("get_profile", {"user_id": user}))
    assert text_of(await client.call_tool("get_profile", {"user_id": "newcomer"})) == (
        "(no standing instructions or preferences)")
    ok(await client.call_tool("add_memory", {"user_id": user, "messages": "Always use metric units, please.",
                                             "session_id": "drinks"}))
    profile = await client.call_tool("get_profile", {"user_id": user})
    assert [s["text"] for s in profile.structured_content["statements"]] == [
        "I moved to Lisbon last spring and I love the tiles.", "My favourite drink is green tea, never coffee.",
        "Always use metric units, please."]  # oldest first
    assert text_of(profile).splitlines()[2] == (
        f"- [{profile.structured_content['statements'][2]['timestamp'][:16].replace('T', ' ')} "
        "· drinks] instruction: Always use metric units, please.")  # of no subject: none said
    assert "Always use metric units" in text_of(await client.call_tool("get_context", {"user_id": user,
                                                                                      "query": "How tall is Everest?"}))
    course = await client.call_tool("get_timeline", {"user_id": user, "topic": "living in Lisbon"})
    assert [d["session_id"] for d in course.structured_content["sessions"]] == ["trip"]
    assert text_of(course).splitlines() == ["session trip · 2024-05-01 10:00",
                                            "  - #0 user: I moved to Lisbon last spring and I love the tiles."]
    assert [d["session_id"] for d in ok(await client.call_tool("get_timeline", {"user_id": user,
                                                                               "since": "2024-06-01"}))["sessions"]] \
        == ["drinks"]

    compact = await client.call_tool("search_memory", {"user_id": user, "query": "which city do I live in?", "k": 1})
    as_json = await client.call_tool("search_memory", {"user_id": user, "query": "which city do I live in?", "k": 1,
                                                       "format": "json"})
    assert json.loads(as_json.content[0].text) == as_json.structured_content == ok(compact)  # JSON on request
    text = compact.content[0].text
    assert text.startswith("[1] session trip · 2024-05-01 10:00 · relevance ") and "Lisbon" in text
    assert "seed_score" not in text and "weights" not in text and len(text) < len(as_json.content[0].text) / 2
    hits = ok(compact)["hits"]
    assert [h["session_id"] for h in hits] == ["trip"] and "Lisbon" in hits[0]["turns"][0]["text"]
    assert ok(await client.call_tool("search_memory", {"user_id": user, "query": "tiles",
                                                       "min_score": 1.0}))["hits"] == []

    session = ok(await client.call_tool("get_session", {"user_id": user, "session_id": "trip"}))
    assert session["user_id"] == user and session["metadata"] == {"src": "t"}
    assert [m["content"] for m in session["messages"]] == [m["content"] for m in LISBON]
    listed = ok(await client.call_tool("list_sessions", {"user_id": user}))["sessions"]
    assert [s["session_id"] for s in listed] == ["trip", "drinks"] and listed[0]["messages"] == 2

    # Deleting all of a user's memory must be asked for explicitly; a refused delete deletes nothing.
    assert "all_sessions=true" in error(await client.call_tool("delete_memory", {"user_id": user}))
    assert "not both" in error(await client.call_tool("delete_memory", {"user_id": user, "session_id": "trip",
                                                                         "all_sessions": True}))
    assert len(ok(await client.call_tool("list_sessions", {"user_id": user}))["sessions"]) == 2
    assert ok(await client.call_tool("delete_memory", {"user_id": user, "session_id": "trip"})) == {
        "user_id": user, "deleted_sessions": 1}
    assert error(await client.call_tool("get_session", {"user_id": user, "session_id": "trip"})).endswith(
        f"user {user!r} has no session 'trip'")
    assert ok(await client.call_tool("delete_memory", {"user_id": user, "all_sessions": True})) == {
        "user_id": user, "deleted_sessions": 1}
    assert ok(await client.call_tool("search_memory", {"user_id": user, "query": "x"})) == {"hits": []}  # empty now


async def check_bad_arguments(client: Client) -> None:
    """Schema violations come back as one-line tool errors naming the argument."""
    message = error(await client.call_tool("search_memory", {"user_id": "u", "query": "x", "k": MAX_K + 1}))
    assert "invalid arguments: k:" in message and f"{MAX_K}" in message
    message = error(await client.call_tool("add_memory", {"user_id": "u", "messages": [{"role": "bot",
                                                                                         "content": "hi"}]}))
    assert "messages.0.role" in message
    assert "user_id" in error(await client.call_tool("list_sessions", {"user_id": "no spaces"}))


# --- stdio -------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_stdio_lists_and_calls_every_tool(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with stdio(tmp_path / "m.db") as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert set(tools) == TOOLS  # no LLM: no answer tool
            for tool in tools.values():
                assert len(tool.description or "") > 40 and tool.input_schema["type"] == "object"
                scoped = "user_id" in tool.input_schema["required"] or {"agent_id", "user_id"} <= set(
                    tool.input_schema["properties"])  # experience tools: an agent's or a user's
                assert scoped and tool.output_schema is not None
            search = tools["search_memory"].input_schema["properties"]
            assert search["k"]["maximum"] == MAX_K and search["k"]["minimum"] == 1
            assert search["query"]["maxLength"] == MAX_QUERY_CHARS and search["min_score"]["maximum"] == 1
            assert tools["delete_memory"].annotations.destructive_hint
            assert tools["search_memory"].annotations.read_only_hint
            await roundtrip(client, "alice")
            await check_bad_arguments(client)

    run(scenario)


@pytest.mark.slow
def test_stdio_tenant_namespaces_users(tmp_path: Path) -> None:
    db = tmp_path / "m.db"

    async def scenario() -> None:
        async with stdio(db, "--tenant", "acme") as client:
            ok(await client.call_tool("add_memory", {"user_id": "alice", "messages": TEA, "session_id": "s"}))
            assert ok(await client.call_tool("get_session", {"user_id": "alice", "session_id": "s"}))["user_id"] == \
                "alice"
        async with stdio(db, "--tenant", "globex") as client:
            assert ok(await client.call_tool("list_sessions", {"user_id": "alice"})) == {"sessions": [], "next_cursor": None}  # not acme's
            assert error(await client.call_tool("get_session", {"user_id": "alice", "session_id": "s"})).endswith(
                "user 'alice' has no session 's'")

    run(scenario)
    with open_store(str(db)) as store:
        assert store.list_users() == ["acme::alice"]
    bad = subprocess.run([sys.executable, "-m", "memgas.cli", "mcp", "--db", str(db), "--tenant", "Not Valid"],
                         capture_output=True, text=True, env=ENV, stdin=subprocess.DEVNULL, timeout=120)
    assert bad.returncode == 2 and bad.stdout == "" and "invalid scope" in bad.stderr


@pytest.mark.slow
def test_stdio_writes_only_protocol_to_stdout(tmp_path: Path) -> None:
    requests = [{"jsonrpc": "2.0", "id": 1, "method": "initialize",
                 "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                            "clientInfo": {"name": "raw", "version": "0"}}},
                {"jsonrpc": "2.0", "method": "notifications/initialized"},
                {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                 "params": {"name": "add_memory", "arguments": {"user_id": "u", "messages": TEA}}},
                {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                 "params": {"name": "search_memory", "arguments": {"user_id": "u", "query": "drink"}}}]
    proc = subprocess.Popen([sys.executable, "-m", "memgas.cli", "mcp", "--db", str(tmp_path / "m.db"), "--create"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV)
    assert proc.stdin is not None and proc.stdout is not None
    replies = []
    for request in requests:  # one at a time: stdin closing would end the server before it answers
        proc.stdin.write((json.dumps(request) + "\n").encode())
        proc.stdin.flush()
        if "id" in request:
            replies.append(json.loads(proc.stdout.readline()))
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err.decode()
    assert [r["id"] for r in replies] == [1, 2, 3] and all(r["jsonrpc"] == "2.0" for r in replies)
    assert not replies[2]["result"]["isError"]
    assert replies[2]["result"]["structuredContent"]["hits"][0]["session_id"] == \
        replies[1]["result"]["structuredContent"]["session_id"]


@pytest.mark.slow
def test_stdio_answer_with_an_llm(tmp_path: Path, stub: OpenAIStub) -> None:
    db = tmp_path / "m.db"
    with Memory(db) as memory:
        memory.add(LISBON, user_id="alice", session_id="trip")
    stub.responder = lambda body: '{"answer": "Lisbon", "sources": [1]}'
    env = {**ENV, "MEMGAS_CACHE_DIR": str(tmp_path / "cache")}  # a private LLM response cache

    async def scenario() -> None:
        async with stdio(db, "--llm", f"openai:tiny@{stub.base_url}", env=env) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert set(tools) == TOOLS | {"answer"}
            assert tools["answer"].input_schema["properties"]["k"]["maximum"] == MAX_K
            answer = ok(await client.call_tool("answer", {"user_id": "alice", "question": "Where do I live?"}))
            assert answer["answer"] == "Lisbon" and answer["sources"] == ["trip"]
            assert error(await client.call_tool("answer", {"user_id": "bob", "question": "?"})).endswith(
                "unknown user 'bob': no memory stored for this user")

    run(scenario)
    assert any("Where do I live?" in json.dumps(r["messages"]) for r in stub.requests)


# --- streamable HTTP under memgas serve --------------------------------------------------------------


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """One server for the HTTP tests, with an admin key, two tenants' keys and a revoked key."""
    tmp = tmp_path_factory.mktemp("mcp-http")
    db = tmp / "m.db"
    keys = {"admin": make_key(db), "acme": make_key(db, "tenant:acme"), "globex": make_key(db, "tenant:globex"),
            "revoked": make_key(db)}
    with open_store(str(db)) as store:
        revoke_key(store, keys["revoked"].split("_")[1])
    server = start_server(db, tmp=tmp)
    server.keys = keys
    yield server
    server.stop()


@pytest.mark.parametrize("mode", ["auto", "legacy"])  # the 2026 per-request envelope, and the initialize handshake
def test_http_lists_and_calls_every_tool(served: LiveServer, mode: str) -> None:
    async def scenario() -> None:
        async with http(served, served.keys["admin"], mode) as client:
            assert {t.name for t in (await client.list_tools()).tools} == TOOLS
            await roundtrip(client, f"alice-{mode}")
            await check_bad_arguments(client)

    run(scenario)
    metrics = httpx.get(f"{served.url}/metrics", headers={"Authorization": f"Bearer {served.keys['admin']}"}).text
    assert 'route="/mcp"' in metrics


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer mgs_0123456789abcdef_" + "x" * 43},
                                     {"X-API-Key": "not-a-key"}, {"Authorization": "Basic dXNlcjpwYXNz"}],
                         ids=["none", "wrong", "wrong-x-api-key", "basic"])
def test_http_refuses_without_a_valid_key(served: LiveServer, headers: dict[str, str]) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    r = httpx.post(f"{served.url}/mcp", json=body, headers={**JSON_RPC_HEADERS, **headers})
    assert r.status_code == 401 and r.headers["WWW-Authenticate"] == "Bearer"
    assert r.json()["error"]["code"] == "unauthorized" and r.json()["request_id"] == r.headers["X-Request-ID"]


def test_http_revoked_key_and_the_mcp_client(served: LiveServer) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    revoked = httpx.post(f"{served.url}/mcp", json=body,
                         headers={**JSON_RPC_HEADERS, "Authorization": f"Bearer {served.keys['revoked']}"})
    assert revoked.status_code == 401 and revoked.json()["error"]["message"] == "invalid or revoked API key"
    good = httpx.post(f"{served.url}/mcp", json=body, headers={**JSON_RPC_HEADERS, "X-API-Key": served.keys["acme"]})
    assert good.status_code == 200 and {t["name"] for t in good.json()["result"]["tools"]} == TOOLS

    async def connect(key: str | None) -> None:
        async with http(served, key) as client:
            await client.list_tools()

    for key in (None, served.keys["revoked"]):
        with pytest.raises(ExceptionGroup) as refused:  # the client cannot even start a session
            run(lambda: connect(key))
        assert "Server returned an error response" in repr(refused.value), refused.value


def test_http_tenants_are_isolated(served: LiveServer) -> None:
    keys = served.keys

    async def scenario() -> None:
        async with http(served, keys["acme"]) as acme, http(served, keys["globex"]) as globex:
            ok(await acme.call_tool("add_memory", {"user_id": "alice", "messages": LISBON, "session_id": "trip"}))
            assert ok(await globex.call_tool("search_memory", {"user_id": "alice", "query": "Lisbon"})) == {"hits": []}
            assert ok(await globex.call_tool("list_sessions", {"user_id": "alice"})) == {"sessions": [], "next_cursor": None}
            no_session = "user 'alice' has no session 'trip'"
            for tool, args, expected in [("get_session", {"session_id": "trip"}, no_session),
                                         ("delete_memory", {"session_id": "trip"}, no_session)]:
                assert error(await globex.call_tool(tool, {"user_id": "alice", **args})).endswith(expected)
            ok(await globex.call_tool("add_memory", {"user_id": "alice", "messages": TEA, "session_id": "trip"}))

            # Many interleaved calls of both tenants: each sees its own alice, whichever task serves it.
            seen: dict[str, list[str]] = {"acme": [], "globex": []}

            async def look(name: str, client: Client) -> None:
                hits = ok(await client.call_tool("search_memory", {"user_id": "alice", "query": "what do I like?"}))
                seen[name].append(hits["hits"][0]["turns"][0]["text"])

            async with anyio.create_task_group() as tg:
                for _ in range(6):
                    tg.start_soon(look, "acme", acme)
                    tg.start_soon(look, "globex", globex)
            assert len(seen["acme"]) == len(seen["globex"]) == 6
            assert all("Lisbon" in text for text in seen["acme"]) and all("tea" in text for text in seen["globex"])

        async with http(served, keys["admin"]) as admin:
            for stored in ("acme::alice", "globex::alice"):
                assert ok(await admin.call_tool("list_sessions", {"user_id": stored}))["sessions"][0]["session_id"] \
                    == "trip"

    run(scenario)


@pytest.mark.slow
def test_http_without_auth_serves_loopback_names_only(tmp_path: Path) -> None:
    server = start_server(tmp_path / "m.db", "--no-auth", tmp=tmp_path)
    try:
        async def scenario() -> None:
            async with http(server, None) as client:
                ok(await client.call_tool("add_memory", {"user_id": "bob", "messages": TEA}))
                assert len(ok(await client.call_tool("list_sessions", {"user_id": "bob"}))["sessions"]) == 1

        run(scenario)
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        # A web page reaching the loopback server through a rebound DNS name is refused.
        port = server.url.rsplit(":", 1)[1]
        rebound = httpx.post(f"{server.url}/mcp", json=body, headers={**JSON_RPC_HEADERS,
                                                                      "Host": f"evil.example:{port}"})
        assert rebound.status_code == 421
        foreign = httpx.post(f"{server.url}/mcp", json=body, headers={**JSON_RPC_HEADERS,
                                                                      "Origin": "http://evil.example"})
        assert foreign.status_code == 421 and foreign.json()["error"]["code"] == "misdirected_request"
        # Read strictly: what only starts or ends like a loopback name is none (issue 41's probe).
        for headers in ({"Host": "127.0.0.1:80@evil.example"}, {"Host": "[::1]x.evil.example"},
                        {"Host": f"127.0.0.1:{port}", "Origin": "http://127.0.0.1:80@evil.example"},
                        {"Host": f"127.0.0.1:{port}", "Origin": "null"}):
            tricked = httpx.post(f"{server.url}/mcp", json=body, headers={**JSON_RPC_HEADERS, **headers})
            assert tricked.status_code == 421 and "tools" not in tricked.text, headers
        assert httpx.post(f"{server.url}/mcp", json=body, headers=JSON_RPC_HEADERS).status_code == 200
        for host in (f"localhost:{port}", f"127.0.0.5:{port}", f"[::1]:{port}"):  # every loopback name
            assert httpx.post(f"{server.url}/mcp", json=body, headers={**JSON_RPC_HEADERS, "Host": host,
                                                                         "Origin": f"http://{host}"}).status_code == 200
    finally:
        server.stop()


def test_http_filters_narrow_search_and_pages_of_sessions(served: LiveServer) -> None:
    keys = served.keys

    async def scenario() -> None:
        async with http(served, keys["acme"]) as acme, http(served, keys["globex"]) as globex:
            for i, project in enumerate(["apollo", "gemini", "apollo"]):
                ok(await acme.call_tool("add_memory", {
                    "user_id": "carol", "session_id": f"p{i}", "metadata": {"project": project},
                    "messages": [{"role": "user", "content": f"Project {project} meeting {i}: we chose Lisbon."}]}))
            found = ok(await acme.call_tool("search_memory", {"user_id": "carol", "query": "Lisbon meeting",
                                                              "filters": {"project": "gemini"}}))
            assert [h["session_id"] for h in found["hits"]] == ["p1"] and found["hits"][0]["metadata"]["project"]
            page = await acme.call_tool("list_sessions", {"user_id": "carol", "limit": 2,
                                                          "filters": {"project": "apollo"}})
            assert [s["session_id"] for s in ok(page)["sessions"]] == ["p0", "p2"] and ok(page)["next_cursor"] is None
            first = ok(await acme.call_tool("list_sessions", {"user_id": "carol", "limit": 1}))
            assert "(more: cursor " in (await acme.call_tool("list_sessions", {"user_id": "carol", "limit": 1}))\
                .content[0].text and "Project apollo meeting 0" in first["sessions"][0]["preview"]
            rest = ok(await acme.call_tool("list_sessions", {"user_id": "carol", "cursor": first["next_cursor"]}))
            assert [s["session_id"] for s in rest["sessions"]] == ["p1", "p2"]
            assert "filters.project.$gt" in error(await acme.call_tool("search_memory", {
                "user_id": "carol", "query": "x", "filters": {"project": {"$gt": "a"}}}))
            # another tenant's filter reaches nothing of acme's, whatever it names
            assert ok(await globex.call_tool("search_memory", {"user_id": "carol", "query": "Lisbon",
                                                               "filters": {"project": "gemini"}})) == {"hits": []}

    run(scenario)


@pytest.mark.slow
def test_stdio_set_passes_memgas_parameters_and_a_bad_one_is_refused(tmp_path: Path) -> None:
    from support.moves import SESSIONS

    db = tmp_path / "moves.db"
    with Memory(str(db)) as mem:
        for sid, when, said, reply in SESSIONS:
            mem.add([{"role": "user", "content": said}, {"role": "assistant", "content": reply}], user_id="u",
                    session_id=sid, timestamp=when)

    async def scenario() -> None:
        async with stdio(db, "--set", "current_first=true", "--set", "current_ratio=0") as client:
            found = ok(await client.call_tool("search_memory", {
                "user_id": "u", "query": "Which neighbourhood of Portland do I live in these days?", "k": 2}))
            assert [h["session_id"] for h in found["hits"]] == ["april", "march"]  # the newer state first

    run(scenario)
    bad = subprocess.run([sys.executable, "-m", "memgas.cli", "mcp", "--db", str(tmp_path / "new.db"), "--create",
                          "--set", "nope=1"], capture_output=True, text=True, env=ENV, stdin=subprocess.DEVNULL,
                         timeout=120)
    assert bad.returncode == 2 and bad.stdout == "" and "--set 'nope=1'" in bad.stderr
    assert not (tmp_path / "new.db").exists()


def test_http_route_like_session_ids_reach_exactly_their_session(served: LiveServer) -> None:
    """The MCP side of issue 41's id property: ids that look like the REST API's paths (``chat/messages/0`` beside
    ``chat``) are stored, read and deleted each as itself."""
    ids = ["chat", "chat/messages/0", "chat/messages", "a/../b", "batch"]

    async def scenario() -> None:
        async with http(served, served.keys["admin"]) as client:
            for sid in ids:
                ok(await client.call_tool("add_memory", {"user_id": "routes", "session_id": sid,
                                                         "messages": [{"role": "user", "content": f"I am {sid}."}]}))
            for sid in ids:
                got = ok(await client.call_tool("get_session", {"user_id": "routes", "session_id": sid}))
                assert got["session_id"] == sid and got["messages"][0]["content"] == f"I am {sid}."
            ok(await client.call_tool("delete_memory", {"user_id": "routes", "session_id": "chat/messages/0"}))
            listed = ok(await client.call_tool("list_sessions", {"user_id": "routes"}))["sessions"]
            assert sorted(s["session_id"] for s in listed) == sorted(set(ids) - {"chat/messages/0"})
            chat = ok(await client.call_tool("get_session", {"user_id": "routes", "session_id": "chat"}))
            assert len(chat["messages"]) == 1  # chat's message 0 is still there

    run(scenario)
