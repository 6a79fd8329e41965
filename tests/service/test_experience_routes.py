"""Experience memory over the service: ``/v1/templates`` and ``/v1/principles`` on a real ``memgas serve`` (SQLite
file, the shipped embedder), through raw HTTP, the Python clients and the MCP tools, with the keys' scoping;
solving and learning templates on a server whose LLM is a scripted OpenAI-compatible stub on loopback."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Iterator

import anyio
import httpx
import httpx2
import pytest
from mcp import Client as MCPClient
from mcp.client.streamable_http import streamable_http_client

from memgas.client import AsyncClient, Client
from memgas.core.errors import AuthError, ForbiddenError, InvalidInputError, LLMError, NotFoundError, UnavailableError
from memgas.embed.base import Embedder
from memgas.experience.facade import Experience
from memgas.experience.principles import Principle
from memgas.experience.thoughts import DISTILL_SCHEMA, SOLVE_SCHEMA, TEMPLATE_SCHEMA
from support.live_server import LiveServer, make_key, start_server
from support.openai_stub import OpenAIStub

ARITHMETIC = "arithmetic puzzle: combine the given numbers with + - * / to reach a target number"
SORTING = "word sorting: put a list of words into alphabetical order"
FEELINGS = {"situation": "When the user says they feel ignored or unheard by the people around them",
            "action": "acknowledge the feeling and ask what happened", "avoid": "jumping to advice",
            "reason": "people who feel unheard need to be heard first"}
PRICE = {"situation": "When the other side rejects the price as too high",
         "action": "ask which part of the offer matters most to them", "avoid": "cutting the price at once",
         "reason": "a concession without information gives value away"}


def seed_templates(db: Path, embedder: Embedder, agent_id: str, descriptions: list[str]) -> list[int]:
    """Templates as Buffer of Thoughts stores them, written straight into the store before the server starts."""
    with Experience(str(db), agent_id=agent_id, embedder=embedder) as exp:
        return [exp.bank.add("template", d, {"task_type": d.split(":")[0], "description": d,
                                             "steps": ["read the task", "apply the method"],
                                             "source": {"problem": "p", "solution": "s", "answer": None}})
                for d in descriptions]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, embedder: Embedder) -> Iterator[LiveServer]:
    tmp = tmp_path_factory.mktemp("experience")
    db = tmp / "exp.db"
    keys = {"admin": make_key(db), "acme": make_key(db, "tenant:acme"), "beta": make_key(db, "tenant:beta"),
            "acme_alice": make_key(db, "tenant:acme", users=["alice"])}
    ids = {"acme": seed_templates(db, embedder, "acme::solver", [ARITHMETIC, SORTING]),
           "beta": seed_templates(db, embedder, "beta::solver", [ARITHMETIC])}
    with Experience(str(db), agent_id="acme::solver", embedder=embedder) as exp:
        ids["pending"] = [exp.bank.add("pending", "an unsolved problem", {"problem": "x", "solution": "y"},
                                       matchable=False)]
    srv = start_server(db, tmp=tmp)
    srv.keys = keys
    srv.ids = ids  # type: ignore[attr-defined]  # read back with ids()
    yield srv
    srv.stop()


def ids(server: LiveServer) -> dict[str, list[int]]:
    """The seeded item ids: ``acme`` (arithmetic, sorting), ``beta`` (arithmetic), ``pending`` (acme's)."""
    return server.ids  # type: ignore[attr-defined, no-any-return]


def call(server: LiveServer, method: str, path: str, key: str | None, **kwargs: Any) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.request(method, server.url + path, headers=headers, timeout=60, **kwargs)


def error_of(response: httpx.Response) -> tuple[int, str]:
    body = response.json()
    assert set(body) == {"error", "request_id"} and body["error"]["message"], response.text
    return response.status_code, body["error"]["code"]


def test_principles_added_by_hand_are_recalled_by_situation(server: LiveServer) -> None:
    key, scope = server.keys["admin"], {"agent_id": "coach"}
    assert call(server, "GET", "/v1/principles", key, params=scope).json() == {"principles": []}
    added = [call(server, "POST", "/v1/principles", key, json={**scope, **p}) for p in (FEELINGS, PRICE)]
    assert [r.status_code for r in added] == [201, 201]
    feelings, price = (r.json()["principle"] for r in added)
    assert added[0].json()["added"] and feelings == {"id": feelings["id"], **FEELINGS, "support": 1, "origin": {}}

    recalled = call(server, "POST", "/v1/principles/recall", key, json={
        **scope, "context": "Nobody at work listens to me, my manager ignores everything I say.", "k": 2,
        "min_similarity": -1}).json()["matches"]
    assert [m["principle"]["id"] for m in recalled] == [feelings["id"], price["id"]]
    assert 1 >= recalled[0]["similarity"] > recalled[1]["similarity"]
    default = call(server, "POST", "/v1/principles/recall", key, json={
        **scope, "context": "Nobody at work listens to me, my manager ignores everything I say."}).json()["matches"]
    assert [m["principle"]["id"] for m in default] == [feelings["id"]]  # the price one is below 0.25
    assert call(server, "POST", "/v1/principles/recall", key, json={
        **scope, "context": "they said the price is too high", "min_similarity": 0.99}).json() == {"matches": []}

    # A near-duplicate is not stored: the stored principle's support grows.
    again = call(server, "POST", "/v1/principles", key, json={**scope, **PRICE, "action": "ask why"}).json()
    assert again == {"added": False, "principle": {**price, "support": 2}}
    price = again["principle"]
    assert len(call(server, "GET", "/v1/principles", key, params=scope).json()["principles"]) == 2

    assert call(server, "GET", f"/v1/principles/{price['id']}", key, params=scope).json() == price
    assert call(server, "DELETE", f"/v1/principles/{price['id']}", key, params=scope).json() == {
        "id": price["id"], "deleted": True}
    for method in ("GET", "DELETE"):
        assert error_of(call(server, method, f"/v1/principles/{price['id']}", key, params=scope)) == (404, "not_found")
    assert [p["id"] for p in call(server, "GET", "/v1/principles", key, params=scope).json()["principles"]] == [
        feelings["id"]]
    # An agent's principles are not its user's, nor another agent's.
    for other in ({"agent_id": "coach2"}, {"user_id": "coach"}):
        assert call(server, "GET", "/v1/principles", key, params=other).json() == {"principles": []}
        assert error_of(call(server, "GET", f"/v1/principles/{feelings['id']}", key, params=other)) == (
            404, "not_found")


def test_templates_seeded_in_the_store_are_listed_matched_and_deleted(server: LiveServer) -> None:
    key, scope = server.keys["acme"], {"agent_id": "solver"}
    arithmetic, sorting = ids(server)["acme"]
    listed = call(server, "GET", "/v1/templates", key, params=scope).json()["templates"]
    assert [(t["id"], t["description"]) for t in listed] == [(arithmetic, ARITHMETIC), (sorting, SORTING)]  # no pending
    assert listed[0]["steps"] == ["read the task", "apply the method"] and listed[0]["source"]["problem"] == "p"

    body = {**scope, "description": "reach a target number by combining numbers with arithmetic operations"}
    matches = call(server, "POST", "/v1/templates/match", key, json=body).json()["matches"]
    assert [m["template"]["id"] for m in matches] == [arithmetic] and matches[0]["similarity"] >= 0.5
    both = call(server, "POST", "/v1/templates/match", key, json={**body, "k": 5, "min_similarity": -1}).json()
    assert [m["template"]["id"] for m in both["matches"]] == [arithmetic, sorting]
    assert both["matches"][0]["similarity"] > both["matches"][1]["similarity"]

    assert call(server, "GET", f"/v1/templates/{sorting}", key, params=scope).json() == listed[1]
    pending = ids(server)["pending"][0]
    assert error_of(call(server, "GET", f"/v1/templates/{pending}", key, params=scope)) == (404, "not_found")
    assert error_of(call(server, "DELETE", f"/v1/templates/{pending}", key, params=scope)) == (404, "not_found")
    assert call(server, "DELETE", f"/v1/templates/{sorting}", key, params=scope).json() == {"id": sorting,
                                                                                           "deleted": True}
    assert error_of(call(server, "GET", f"/v1/templates/{sorting}", key, params=scope)) == (404, "not_found")
    assert [t["id"] for t in call(server, "GET", "/v1/templates", key, params=scope).json()["templates"]] == [
        arithmetic]
    # A template is not a principle, nor the reverse.
    assert error_of(call(server, "GET", f"/v1/principles/{arithmetic}", key, params=scope)) == (404, "not_found")


def test_tenants_share_agent_ids_but_never_each_others_items(server: LiveServer) -> None:
    acme, beta, scope = server.keys["acme"], server.keys["beta"], {"agent_id": "solver"}
    beta_template = ids(server)["beta"][0]
    assert [t["id"] for t in call(server, "GET", "/v1/templates", beta, params=scope).json()["templates"]] == [
        beta_template]
    acme_template = ids(server)["acme"][0]
    for method in ("GET", "DELETE"):
        r = call(server, method, f"/v1/templates/{acme_template}", beta, params=scope)
        assert error_of(r) == (404, "not_found") and "acme" not in r.text and "beta" not in r.text
        assert r.json()["error"]["message"] == f"no template {acme_template} for agent 'solver'"
    assert call(server, "GET", f"/v1/templates/{acme_template}", acme, params=scope).status_code == 200  # not deleted

    added = call(server, "POST", "/v1/principles", acme, json={**scope, **PRICE}).json()
    assert added["added"]
    recall = {**scope, "context": "they rejected my price", "min_similarity": -1}
    assert call(server, "POST", "/v1/principles/recall", beta, json=recall).json() == {"matches": []}
    assert call(server, "GET", "/v1/principles", beta, params=scope).json() == {"principles": []}
    r = call(server, "GET", f"/v1/principles/{added['principle']['id']}", beta, params=scope)
    assert error_of(r) == (404, "not_found") and "acme" not in r.text
    # The admin key names the stored scope; an unprefixed agent is a third, separate one.
    admin = server.keys["admin"]
    assert [p["id"] for p in call(server, "GET", "/v1/principles", admin,
                                  params={"agent_id": "acme::solver"}).json()["principles"]] == [
        added["principle"]["id"]]
    assert call(server, "GET", "/v1/templates", admin, params=scope).json() == {"templates": []}


def test_a_key_limited_to_users_keeps_to_them_but_shares_its_tenants_agents(server: LiveServer) -> None:
    limited = server.keys["acme_alice"]
    for method, path, kwargs in [("GET", "/v1/principles", {"params": {"user_id": "bob"}}),
                                 ("GET", "/v1/templates", {"params": {"user_id": "bob"}}),
                                 ("POST", "/v1/principles", {"json": {"user_id": "bob", **PRICE}}),
                                 ("POST", "/v1/principles/recall", {"json": {"user_id": "bob", "context": "x"}}),
                                 ("POST", "/v1/templates/match", {"json": {"user_id": "bob", "description": "x"}})]:
        r = call(server, method, path, limited, **kwargs)
        assert error_of(r) == (403, "forbidden") and "'bob'" in r.text, (method, path)
    assert call(server, "GET", "/v1/principles", server.keys["acme"], params={"user_id": "bob"}).json() == {
        "principles": []}  # nothing was written for bob
    mine = call(server, "POST", "/v1/principles", limited, json={"user_id": "alice", **FEELINGS})
    assert mine.status_code == 201
    assert call(server, "GET", "/v1/principles", server.keys["acme"], params={"user_id": "alice"}).json()[
        "principles"] == [mine.json()["principle"]]
    shared = call(server, "GET", "/v1/templates", limited, params={"agent_id": "solver"}).json()["templates"]
    assert ids(server)["acme"][0] in [t["id"] for t in shared]


ROUTES = [("GET", "/v1/templates", {"params": {"agent_id": "solver"}}),
          ("GET", "/v1/templates/1", {"params": {"agent_id": "solver"}}),
          ("DELETE", "/v1/templates/1", {"params": {"agent_id": "solver"}}),
          ("POST", "/v1/templates/match", {"json": {"agent_id": "solver", "description": "x"}}),
          ("POST", "/v1/templates/solve", {"json": {"agent_id": "solver", "problem": "x"}}),
          ("POST", "/v1/templates/learn", {"json": {"agent_id": "solver", "problem": "x", "solution": "y"}}),
          ("GET", "/v1/principles", {"params": {"agent_id": "solver"}}),
          ("GET", "/v1/principles/1", {"params": {"agent_id": "solver"}}),
          ("DELETE", "/v1/principles/1", {"params": {"agent_id": "solver"}}),
          ("POST", "/v1/principles", {"json": {"agent_id": "solver", **PRICE}}),
          ("POST", "/v1/principles/recall", {"json": {"agent_id": "solver", "context": "x"}})]


@pytest.mark.parametrize("method,path,kwargs", ROUTES, ids=[f"{m} {p}" for m, p, _ in ROUTES])
def test_every_route_needs_a_valid_key(server: LiveServer, method: str, path: str, kwargs: dict[str, Any]) -> None:
    for key in (None, server.keys["admin"][:-3] + "xyz"):
        assert error_of(call(server, method, path, key, **kwargs)) == (401, "unauthorized")


def test_bad_input_is_refused_and_writes_nothing(server: LiveServer) -> None:
    key, scope = server.keys["admin"], {"agent_id": "careful"}
    for params in ({}, {"agent_id": "careful", "user_id": "careful"}):
        assert error_of(call(server, "GET", "/v1/principles", key, params=params)) == (400, "invalid_input")
        assert error_of(call(server, "GET", "/v1/templates/1", key, params=params)) == (400, "invalid_input")
    bad = [({**PRICE}, 400), ({**PRICE, **scope, "user_id": "careful"}, 400), ({**PRICE, **scope, "reason": "   "}, 400),
           ({**PRICE, **scope, "reason": ""}, 422), ({**PRICE, **scope, "extra": 1}, 422),
           ({**PRICE, "agent_id": "no spaces"}, 422), ({**PRICE, "agent_id": "x" * 257}, 422),
           ({k: v for k, v in {**PRICE, **scope}.items() if k != "avoid"}, 422)]
    for body, status in bad:
        r = call(server, "POST", "/v1/principles", key, json=body)
        assert r.status_code == status, (body, r.text)
    for path, body in [("/v1/principles/recall", {**scope, "context": "x", "k": 0}),
                       ("/v1/principles/recall", {**scope, "context": ""}),
                       ("/v1/templates/match", {**scope, "description": "x", "min_similarity": 2}),
                       ("/v1/templates/match", {**scope, "description": "x", "k": 1001})]:
        assert error_of(call(server, "POST", path, key, json=body)) == (422, "validation_error"), (path, body)
    for path in ("/v1/principles/abc", "/v1/principles/0", "/v1/templates/-1", f"/v1/templates/{2**63}"):
        assert error_of(call(server, "GET", path, key, params=scope)) == (422, "validation_error"), path
    # A tenant's namespaced id over 256 characters is the caller's error, without the namespace.
    r = call(server, "GET", "/v1/principles", server.keys["acme"], params={"agent_id": "a" * 256})
    assert error_of(r) == (400, "invalid_input") and "acme" not in r.text
    assert call(server, "GET", "/v1/principles", key, params=scope).json() == {"principles": []}


def test_the_clients_speak_every_route(server: LiveServer) -> None:
    with Client(server.url, server.keys["acme"]) as mem:
        assert [t["id"] for t in mem.templates(agent_id="solver")] == [ids(server)["acme"][0]]
        template, score = mem.match_templates("reach a target with arithmetic on numbers", agent_id="solver")[0]
        assert template["description"] == ARITHMETIC and 0.5 <= score <= 1
        assert mem.template(template["id"], agent_id="solver") == template
        principle, added = mem.add_principle(**FEELINGS, user_id="carol")
        assert added and isinstance(principle, Principle) and principle.situation == FEELINGS["situation"]
        again, added = mem.add_principle(**FEELINGS, user_id="carol")
        assert not added and again.id == principle.id and again.support == 2
        assert mem.principles(user_id="carol") == [again] and mem.principle(principle.id, user_id="carol") == again
        [(hit, similarity)] = mem.recall_principles("my friends ignore me", user_id="carol")
        assert hit == again and 0.25 <= similarity <= 1
        assert mem.delete_principle(principle.id, user_id="carol") == {"id": principle.id, "deleted": True}
        with pytest.raises(NotFoundError, match=f"no principle {principle.id} for user 'carol'"):
            mem.principle(principle.id, user_id="carol")
        with pytest.raises(NotFoundError):
            mem.delete_template(10**6, agent_id="solver")
        with pytest.raises(InvalidInputError, match="exactly one"):
            mem.templates()
        with pytest.raises(InvalidInputError, match="item id"):
            mem.template("1/../../users", agent_id="solver")  # type: ignore[arg-type]
    with Client(server.url, server.keys["acme_alice"]) as limited, pytest.raises(ForbiddenError):
        limited.principles(user_id="bob")
    with Client(server.url, "mgs_0123456789abcdef_" + "x" * 43) as wrong, pytest.raises(AuthError):
        wrong.recall_principles("x", agent_id="solver")

    async def scenario() -> None:
        async with AsyncClient(server.url, server.keys["beta"]) as mem:
            [(template, _)] = await mem.match_templates(ARITHMETIC, agent_id="solver")
            assert template["id"] == ids(server)["beta"][0]
            principle, added = await mem.add_principle(**PRICE, agent_id="haggler")
            assert added and [p for p, _ in await mem.recall_principles("too expensive", agent_id="haggler",
                                                                         min_similarity=-1)] == [principle]
            assert (await mem.delete_template(template["id"], agent_id="solver"))["deleted"]
            assert await mem.templates(agent_id="solver") == []

    asyncio.run(scenario())


def test_mcp_tools_recall_principles_and_match_templates(server: LiveServer) -> None:
    async def tools(key: str, name: str, arguments: dict[str, Any]) -> Any:
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=120) as session:
            async with MCPClient(streamable_http_client(f"{server.url}/mcp", http_client=session)) as client:
                listed = {t.name: t for t in (await client.list_tools()).tools}
                assert listed[name].annotations.read_only_hint
                return await client.call_tool(name, arguments)

    def ok(result: Any) -> dict[str, Any]:
        assert not result.is_error, result.content[0].text
        assert result.structured_content is not None and result.content[0].text  # compact text, the whole as structure
        return result.structured_content

    def refused(result: Any) -> str:
        assert result.is_error and "\n" not in result.content[0].text
        return result.content[0].text

    async def scenario() -> None:
        acme, beta = server.keys["acme"], server.keys["beta"]
        got = ok(await tools(acme, "match_templates", {"agent_id": "solver", "description": ARITHMETIC, "k": 3}))
        assert [m["template"]["description"] for m in got["matches"]] == [ARITHMETIC]
        assert ok(await tools(beta, "match_templates", {"agent_id": "solver", "description": SORTING})) == {
            "matches": []}  # beta has no sorting template; acme's is never seen
        call(server, "POST", "/v1/principles", acme, json={"agent_id": "mcp-coach", **FEELINGS})
        got = ok(await tools(acme, "recall_principles", {"agent_id": "mcp-coach", "context": "I feel unheard"}))
        assert [m["principle"]["situation"] for m in got["matches"]] == [FEELINGS["situation"]]
        assert ok(await tools(beta, "recall_principles", {"agent_id": "mcp-coach", "context": "I feel unheard",
                                                          "min_similarity": -1})) == {"matches": []}
        assert "'bob'" in refused(await tools(server.keys["acme_alice"], "recall_principles",
                                              {"user_id": "bob", "context": "x"}))
        assert "exactly one" in refused(await tools(acme, "match_templates", {"description": "x"}))
        assert "invalid arguments: k:" in refused(await tools(acme, "recall_principles",
                                                              {"agent_id": "a", "context": "x", "k": 0}))

    anyio.run(scenario)


# ----------------------------------------------------------------------------- solving and learning with an LLM

SORT_KIND = "Sort a list of words into alphabetical order."
DATE_KIND = "Find the calendar date that is a given number of days after a start date."
SORT_STEPS = ["Compare the first letters.", "Break ties by the next letters."]


def bot_reply(body: dict[str, Any]) -> str:
    """The scripted model: each Buffer-of-Thoughts step answered by its JSON schema, the kind of problem told by
    its words (so the distiller and the template writer describe one kind alike, as a real model roughly does)."""
    schema = json.dumps(body["response_format"]["json_schema"]["schema"], sort_keys=True)
    text = body["messages"][-1]["content"]
    kind = SORT_KIND if "Sort" in text else DATE_KIND  # not "date": every prompt says "dates"
    if schema == json.dumps(DISTILL_SCHEMA, sort_keys=True):
        return json.dumps({"key_information": ["the words"], "constraints": ["each once"], "task_type": "sorting",
                           "description": kind})
    if schema == json.dumps(TEMPLATE_SCHEMA, sort_keys=True):
        return json.dumps({"task_type": "t", "description": kind, "steps": SORT_STEPS})
    assert schema == json.dumps(SOLVE_SCHEMA, sort_keys=True), schema
    return json.dumps({"reasoning": "compared the letters", "answer": "apple pear"})


@pytest.fixture(scope="module")
def llm_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """A server with ``--llm`` at a scripted stub (``llm_server.stub``); keys admin, acme, beta, acme_alice."""
    tmp = tmp_path_factory.mktemp("experience-llm")
    db = tmp / "exp.db"
    keys = {"admin": make_key(db), "acme": make_key(db, "tenant:acme"), "beta": make_key(db, "tenant:beta"),
            "acme_alice": make_key(db, "tenant:acme", users=["alice"])}
    with OpenAIStub(bot_reply) as stub:  # module-scoped, unlike conftest's ``stub``: one server for these tests
        srv = start_server(db, "--no-mcp", "--llm", f"openai:tiny@{stub.base_url}?retries=0", tmp=tmp)
        srv.keys = keys
        srv.stub = stub  # type: ignore[attr-defined]
        yield srv
        srv.stop()


def stub_of(server: LiveServer) -> OpenAIStub:
    return server.stub  # type: ignore[attr-defined, no-any-return]


def stored(server: LiveServer, embedder: Embedder, kind: str | None, **scope: str) -> list[dict[str, Any]]:
    """The stored scope's items of ``kind`` (``None``: all), read from the server's store (pending ones are not
    served)."""
    with Experience(server.db, embedder=embedder, **scope) as exp:
        return exp.templates.list(kind)


def test_solve_learn_and_solve_again_with_the_template_each_tenant_its_own(llm_server: LiveServer) -> None:
    acme, beta, scope = llm_server.keys["acme"], llm_server.keys["beta"], {"agent_id": "solver"}
    problem = {**scope, "problem": "Sort these words: pear apple fig"}
    first = call(llm_server, "POST", "/v1/templates/solve", acme, json=problem)
    assert first.status_code == 200, first.text
    assert first.json() == {"answer": "apple pear", "reasoning": "compared the letters", "template": None,
                            "distilled": {"key_information": ["the words"], "constraints": ["each once"],
                                          "task_type": "sorting", "description": SORT_KIND},
                            "distill_error": None, "learned": None, "llm": first.json()["llm"]}
    assert first.json()["llm"]["calls"] == 2  # distil, then solve plainly: the scope has no template
    assert call(llm_server, "GET", "/v1/templates", acme, params=scope).json() == {"templates": []}

    learned = call(llm_server, "POST", "/v1/templates/learn", acme, json={
        **scope, "problem": "Sort: kiwi banana", "solution": "b before k", "answer": "banana kiwi"})
    assert learned.status_code == 201, learned.text
    body = learned.json()
    assert body["status"] == "added" and body["template"]["description"] == SORT_KIND and body["llm"]["calls"] == 1
    [template] = call(llm_server, "GET", "/v1/templates", acme, params=scope).json()["templates"]
    assert template["id"] == body["id"] and template["steps"] == SORT_STEPS
    assert template["source"] == {"problem": "Sort: kiwi banana", "solution": "b before k", "answer": "banana kiwi"}

    # The same kind again is a duplicate: 200, nothing stored.
    again = call(llm_server, "POST", "/v1/templates/learn", acme, json={**scope, "problem": "Sort: b a",
                                                                         "solution": "a b"})
    assert again.status_code == 200 and again.json()["status"] == "duplicate", again.text
    assert again.json()["duplicate_of"] == body["id"] and again.json()["score"] >= 0.75
    assert len(call(llm_server, "GET", "/v1/templates", acme, params=scope).json()["templates"]) == 1

    # Another tenant's "solver" has no template: it solves plainly and sees none.
    other = call(llm_server, "POST", "/v1/templates/solve", beta, json=problem).json()
    assert other["template"] is None and other["answer"] == "apple pear"
    assert call(llm_server, "GET", "/v1/templates", beta, params=scope).json() == {"templates": []}
    stub = stub_of(llm_server)
    assert "Thought template" not in stub.requests[-1]["messages"][-1]["content"]

    # The tenant that learned it solves with it, the template's steps in the solving prompt.
    used = call(llm_server, "POST", "/v1/templates/solve", acme, json=problem).json()
    assert used["template"]["template"] == template and used["template"]["similarity"] > 0.99
    assert all(step in stub.requests[-1]["messages"][-1]["content"] for step in SORT_STEPS)

    # With learn, a new kind is learned from the solution.
    dated = call(llm_server, "POST", "/v1/templates/solve", acme, json={
        **scope, "problem": "What date is 3 days after 2024-01-01?", "learn": True}).json()
    assert dated["template"] is None and dated["learned"]["status"] == "added"
    assert dated["learned"]["template"]["description"] == DATE_KIND and dated["llm"]["calls"] == 3
    kinds = [t["description"] for t in call(llm_server, "GET", "/v1/templates", acme, params=scope).json()["templates"]]
    assert kinds == [SORT_KIND, DATE_KIND]


def test_a_failing_llm_is_503_on_solve_and_keeps_a_learned_solution_pending(llm_server: LiveServer,
                                                                            embedder: Embedder) -> None:
    key, stub, scope = llm_server.keys["admin"], stub_of(llm_server), {"agent_id": "flaky"}
    stub.script = [{"status": 500}] * 20  # fresh problems below: the response cache cannot answer them
    try:
        for learn in (False, True):
            r = call(llm_server, "POST", "/v1/templates/solve", key, json={
                **scope, "problem": f"Sort these words ({learn}): yak emu", "learn": learn})
            assert error_of(r) == (503, "llm_unavailable") and r.headers["retry-after"]
        assert stored(llm_server, embedder, "pending", agent_id="flaky") == []  # no solution, so nothing to keep

        r = call(llm_server, "POST", "/v1/templates/learn", key, json={
            **scope, "problem": "Sort: yak emu", "solution": "e before y", "answer": "emu yak"})
        assert r.status_code == 201 and r.json()["status"] == "pending" and r.json()["error"], r.text
        [pending] = stored(llm_server, embedder, "pending", agent_id="flaky")
        assert pending["id"] == r.json()["id"]
        assert (pending["problem"], pending["solution"], pending["answer"]) == (
            "Sort: yak emu", "e before y", "emu yak")
        assert call(llm_server, "GET", "/v1/templates", key, params=scope).json() == {"templates": []}
        with Client(llm_server.url, key) as mem, pytest.raises(LLMError):
            mem.solve_template("Sort these words: owl cat", agent_id="flaky")
    finally:
        stub.script.clear()


def test_the_clients_solve_and_learn_in_a_users_scope(llm_server: LiveServer, embedder: Embedder) -> None:
    limited = llm_server.keys["acme_alice"]
    with Client(llm_server.url, limited) as mem:
        learned = mem.learn_template("Sort: fig date", "d before f", user_id="alice")
        assert learned["status"] == "added" and learned["template"]["steps"] == SORT_STEPS
        solved = mem.solve_template("Sort these words: pear apple fig", user_id="alice")
        assert solved["template"]["template"]["id"] == learned["id"] and solved["template"]["similarity"] > 0.99
        with pytest.raises(ForbiddenError, match="'bob'"):
            mem.learn_template("Sort: fig date", "d before f", user_id="bob")
        with pytest.raises(InvalidInputError, match="problem"):
            mem.learn_template("   ", "d before f", user_id="alice")
    assert stored(llm_server, embedder, None, user_id="acme::bob") == []  # the refused call wrote nothing
    assert stored(llm_server, embedder, None, agent_id="acme::alice") == []  # a user's scope is not an agent's

    async def scenario() -> None:
        async with AsyncClient(llm_server.url, llm_server.keys["acme"]) as mem:
            assert (await mem.learn_template("Sort: b a", "a b", user_id="alice"))["status"] == "duplicate"
            solved = await mem.solve_template("Sort: kiwi fig", user_id="alice", learn=True)
            assert solved["template"]["template"]["id"] == learned["id"]
            assert solved["learned"]["status"] == "duplicate"

    asyncio.run(scenario())


def test_without_an_llm_solve_and_learn_are_503_and_write_nothing(server: LiveServer, embedder: Embedder) -> None:
    key, scope = server.keys["acme"], {"agent_id": "nollm"}
    for path, body in [("/v1/templates/solve", {**scope, "problem": "Sort: b a", "learn": True}),
                       ("/v1/templates/learn", {**scope, "problem": "Sort: b a", "solution": "a b"})]:
        r = call(server, "POST", path, key, json=body)
        assert error_of(r) == (503, "unavailable") and "--llm" in r.json()["error"]["message"], path
    assert stored(server, embedder, None, agent_id="acme::nollm") == []  # not even a pending item
    with Client(server.url, key) as mem, pytest.raises(UnavailableError, match="no LLM"):
        mem.learn_template("Sort: b a", "a b", agent_id="nollm")
