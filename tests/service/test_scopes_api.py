"""Scopes and filters over REST and the Python clients, on a live ``memgas serve``: filters in search and context,
pages of headers (query parameters or a body), delete by filter, and tenants that a filter cannot widen."""

from __future__ import annotations

from typing import Any, Iterator

import httpx
import pytest

from memgas.client import AsyncClient, Client
from memgas.core.errors import NotFoundError
from memgas.core.results import Deleted
from support.live_server import LiveServer, make_key, start_server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    tmp = tmp_path_factory.mktemp("scopes")
    db = tmp / "s.db"
    srv = start_server(db, tmp=tmp)
    srv.keys = {"admin": make_key(db), "acme": make_key(db, "tenant:acme"), "beta": make_key(db, "tenant:beta")}
    yield srv
    srv.stop()


def post(server: LiveServer, path: str, key: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(server.url + path, json=body, headers={"Authorization": f"Bearer {key}"}, timeout=60)


def get(server: LiveServer, path: str, key: str, **params: Any) -> httpx.Response:
    return httpx.get(server.url + path, params=params, headers={"Authorization": f"Bearer {key}"}, timeout=60)


def test_rest_filters_pages_and_delete_by_filter(server: LiveServer) -> None:
    key = server.keys["acme"]
    for i in range(6):
        added = post(server, "/v1/sessions", key, {
            "user_id": "dana", "session_id": f"s{i}", "timestamp": f"2026-0{i + 1}-10T09:00:00",
            "agent_id": ("planner", "coder")[i % 2], "run_id": f"r{i % 3}", "metadata": {"n": i},
            "messages": [{"role": "user", "content": f"Note {i}: my locker code is {4500 + i}."}]})
        assert added.status_code == 201
    hits = post(server, "/v1/search", key, {"user_id": "dana", "query": "locker code", "k": 2,
                                            "filters": {"agent_id": "coder", "n": {"$gte": 3}}}).json()["hits"]
    assert {h["session_id"] for h in hits} == {"s3", "s5"} and all(h["agent_id"] == "coder" for h in hits)
    assert hits[0]["created_at"] and hits[0]["metadata"]["n"] in (3, 5) and hits[0]["run_id"] in ("r0", "r2")
    text = post(server, "/v1/context", key, {"user_id": "dana", "query": "locker code",
                                             "filters": {"run_id": "r1"}}).json()["context"]
    assert "4501" in text and "4504" in text and "4500" not in text
    bad = post(server, "/v1/search", key, {"user_id": "dana", "query": "x", "filters": {"n": {"$regex": "1"}}})
    assert bad.status_code == 400 and "filters.n.$regex" in bad.json()["error"]["message"]

    first = get(server, "/v1/sessions", key, user_id="dana", agent_id="planner", limit=2, order="newest").json()
    assert [s["session_id"] for s in first["sessions"]] == ["s4", "s2"] and first["next_cursor"]
    assert first["sessions"][0]["preview"] == "Note 4: my locker code is 4504."
    rest = get(server, "/v1/sessions", key, user_id="dana", agent_id="planner", limit=2, order="newest",
               cursor=first["next_cursor"]).json()
    assert [s["session_id"] for s in rest["sessions"]] == ["s0"] and rest["next_cursor"] is None
    body = post(server, "/v1/sessions/query", key, {"user_id": "dana", "filters": {"$or": [{"n": 1}, {"n": 5}]}})
    assert [s["session_id"] for s in body.json()["sessions"]] == ["s1", "s5"]
    as_json = get(server, "/v1/sessions", key, user_id="dana", filters='{"n": {"$lt": 2}}', run_id="r1").json()
    assert [s["session_id"] for s in as_json["sessions"]] == ["s1"]
    assert get(server, "/v1/sessions", key, user_id="dana", filters="{not json").status_code == 400
    assert get(server, "/v1/sessions", key, user_id="dana", cursor="nonsense").status_code == 400
    assert post(server, "/v1/sessions/delete", key, {"user_id": "dana", "filters": {}}).status_code == 422

    gone = post(server, "/v1/sessions/delete", key, {"user_id": "dana", "filters": {"run_id": "r0"}}).json()
    assert gone == {"user_id": "dana", "deleted_sessions": 2}
    left = [s["session_id"] for s in get(server, "/v1/sessions", key, user_id="dana").json()["sessions"]]
    assert left == ["s1", "s2", "s4", "s5"]


def test_a_filter_cannot_reach_another_tenant(server: LiveServer) -> None:
    acme, beta = server.keys["acme"], server.keys["beta"]
    post(server, "/v1/sessions", acme, {"user_id": "erin", "session_id": "secret", "metadata": {"tenant": "acme"},
                                        "messages": "The vault code is 7788."})
    post(server, "/v1/sessions", beta, {"user_id": "erin", "session_id": "mine", "messages": "I like tea."})
    for spec in ({"session_id": "secret"}, {"tenant": "acme"}, {"user_id": "acme:erin"}, {"$not": {"x": 1}},
                 {"metadata.tenant": {"$exists": True}}):
        hits = post(server, "/v1/search", beta, {"user_id": "erin", "query": "vault code", "filters": spec})
        assert all(h["session_id"] == "mine" for h in hits.json()["hits"])
        listed = post(server, "/v1/sessions/query", beta, {"user_id": "erin", "filters": spec}).json()["sessions"]
        assert {s["session_id"] for s in listed} <= {"mine"}
        post(server, "/v1/sessions/delete", beta, {"user_id": "erin", "filters": spec})
    assert [s["session_id"] for s in get(server, "/v1/sessions", acme, user_id="erin").json()["sessions"]] == [
        "secret"]


def test_both_clients_carry_scopes_filters_and_pages(server: LiveServer) -> None:
    import asyncio

    with Client(server.url, api_key=server.keys["admin"]) as client:
        client.add("I parked on level 3 today.", user_id="fay", session_id="a", agent_id="car", run_id="r")
        client.append("I moved the car to level 5.", user_id="fay", session_id="b", agent_id="car")
        client.add("Buy oat milk.", user_id="fay", session_id="c", metadata={"list": "shopping"})
        hits = client.search("where is the car parked?", user_id="fay", filters={"agent_id": "car"})
        assert {h.session_id for h in hits} == {"a", "b"} and hits[0].agent_id == "car"
        assert "level" in client.context("car", user_id="fay", filters={"run_id": "r"})
        page = client.list(user_id="fay", limit=2)
        more = client.list(user_id="fay", limit=2, cursor=page[-1].cursor)
        assert [s.session_id for s in page + more] == ["a", "b", "c"] and page[0].agent_id == "car"
        assert client.get("a", user_id="fay").run_id == "r"
        assert page.next_cursor == page[-1].cursor and more.next_cursor is None
        with pytest.raises(TypeError, match="user_id"):
            client.list(limit=2)  # type: ignore[call-arg]
        with pytest.raises(NotFoundError):
            client.delete(user_id="nobody", filters={"list": "x"})

    async def scenario() -> None:
        async with AsyncClient(server.url, api_key=server.keys["admin"]) as client:
            listed = await client.list(user_id="fay", filters={"list": "shopping"})
            assert [s.session_id for s in listed] == ["c"]
            assert await client.delete(user_id="fay", filters={"agent_id": "car"}) == Deleted("fay", 2)
            assert [s.session_id for s in await client.list(user_id="fay")] == ["c"]

    asyncio.run(scenario())


def test_the_clients_read_the_inspectors_views(server: LiveServer) -> None:
    with Client(server.url, api_key=server.keys["admin"]) as client:
        client.add("I hiked Mount Hood with Ann.", user_id="gus", session_id="h1", timestamp="2024-05-01")
        client.add("Ann and I will hike Mount Hood again.", user_id="gus", session_id="h2", timestamp="2024-06-01")
        view = client.units("h2", user_id="gus")
        assert view["session_id"] == "h2" and view["units"] and view["links"][0]["session_id"] == "h1"
        graph = client.graph(user_id="gus", limit=10)
        assert [n["session_id"] for n in graph["sessions"]] == ["h2", "h1"] and graph["links"]
        with pytest.raises(NotFoundError):
            client.units("nope", user_id="gus")
    other = get(server, "/v1/inspect/graph", server.keys["beta"], user_id="gus")
    assert other.status_code == 404  # another tenant's user is not there
