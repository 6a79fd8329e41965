"""Every face of the memory API against its one declaration (:mod:`memgas.api`): the Python faces by signature and
result type, the REST API by its served OpenAPI schema, the MCP tools by their input schemas. (The TypeScript
client is checked by its compiler against the generated ``src/api.ts``: tests/clients/test_typescript.py.)

Each check is a function that lists the differences, so that the tests below can also show that it bites: a face
with one call removed, or one parameter renamed, is reported.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import re
from typing import Any, Callable

import pytest

from memgas.api import KnowledgeGraphAPI, MemoryAPI, calls
from memgas.async_memory import AsyncKnowledgeGraph, AsyncMemory
from memgas.client import AsyncClient, Client, _AsyncClientKnowledgeGraph, _ClientKnowledgeGraph
from memgas.core import results
from memgas.core.types import Hit, Session
from memgas.memory import KnowledgeGraph, Memory
from memgas.service.app import create_app
from memgas.service.mcp import build_server
from memgas.service.scoped import ScopedKnowledgeGraph, ScopedMemory

#: Each Python face of each declaration, and whether its calls are coroutines.
FACES: list[tuple[type, type, bool]] = [
    (MemoryAPI, Memory, False), (MemoryAPI, ScopedMemory, False), (MemoryAPI, Client, False),
    (MemoryAPI, AsyncMemory, True), (MemoryAPI, AsyncClient, True),
    (KnowledgeGraphAPI, KnowledgeGraph, False), (KnowledgeGraphAPI, ScopedKnowledgeGraph, False),
    (KnowledgeGraphAPI, _ClientKnowledgeGraph, False), (KnowledgeGraphAPI, AsyncKnowledgeGraph, True),
    (KnowledgeGraphAPI, _AsyncClientKnowledgeGraph, True),
]

#: The REST routes of each declared call (the union of their fields is the call's parameters).
ROUTES: dict[str, list[tuple[str, str]]] = {
    "add": [("post", "/v1/sessions")], "add_many": [("post", "/v1/sessions/batch")],
    "append": [("post", "/v1/sessions/{session_id}/messages")],
    "update_message": [("patch", "/v1/messages/{index}")],
    "delete_message": [("delete", "/v1/messages/{index}")],
    "delete": [("delete", "/v1/sessions/{session_id}"), ("delete", "/v1/users/{user_id}"),
               ("post", "/v1/sessions/delete")],
    "expire": [("post", "/v1/expire")],
    "search": [("post", "/v1/search")], "context": [("post", "/v1/context")], "profile": [("get", "/v1/profile")],
    "timeline": [("get", "/v1/timeline")],
    "answer": [("post", "/v1/answer")], "get": [("get", "/v1/sessions/{session_id}")],
    "list": [("post", "/v1/sessions/query")], "users": [("get", "/v1/users")],
    "units": [("get", "/v1/inspect/units")], "graph": [("get", "/v1/inspect/graph")], "stats": [("get", "/v1/stats")],
    "facts": [("get", "/v1/facts")], "history": [("get", "/v1/facts/{fact_id}/history")],
    "communities": [("get", "/v1/communities")], "retry_pending": [("post", "/v1/facts/retry")],
}
#: What each typed result is sent as over REST (the response schema's fields are the type's).
RESULT_SCHEMAS = {"Added": "AddResult", "Appended": "AppendResult", "Edited": "MessageChange",
                  "Deleted": "DeleteResult", "Session": "SessionOut", "SessionPage": "SessionList",
                  "UserSessions": "UserRow", "Hit": "HitOut"}
#: Each MCP tool and the call it makes; a tool may leave parameters out, never name one otherwise. Its own extras:
#: ``format`` (text or JSON) everywhere, ``all_sessions`` (the confirmation a delete of everything needs).
TOOLS = {"add_memory": "append", "search_memory": "search", "get_context": "context", "get_profile": "profile",
         "get_timeline": "timeline",
         "get_session": "get", "list_sessions": "list", "delete_memory": "delete"}
TOOL_EXTRAS = {"format", "all_sessions"}


def _params(sig: inspect.Signature) -> list[tuple[str, Any, Any]]:
    return [(p.name, p.kind, p.default) for p in sig.parameters.values()]


def _returns(sig: inspect.Signature) -> str:
    """A call's result type as written (``builtins.list`` where a class's own ``list`` shadows the builtin)."""
    text = str(sig.return_annotation).replace("builtins.", "")
    return text.removeprefix("_Call[").removesuffix("]") if text.startswith("_Call[") else text


def python_differences(api: type, face: type, coroutines: bool) -> list[str]:
    """How ``face`` differs from ``api``: missing calls, other parameters (names, kinds, defaults, order), another
    result type, or a sync call where a coroutine is due (and the reverse)."""
    out = []
    for name, declared in calls(api):
        member = getattr(face, name, None)
        if member is None or not callable(member):
            out.append(f"{face.__name__} lacks {name}")
            continue
        sig = inspect.signature(member)
        sig = sig.replace(parameters=[p for p in sig.parameters.values() if p.name != "self"])
        if _params(sig) != _params(declared):
            out.append(f"{face.__name__}.{name}{sig} is not {name}{declared}")
        if _returns(sig) != _returns(declared):
            out.append(f"{face.__name__}.{name} returns {_returns(sig)}, not {declared.return_annotation}")
        if inspect.iscoroutinefunction(member) != coroutines:
            out.append(f"{face.__name__}.{name} is {'not ' if coroutines else ''}a coroutine")
    return out


def _resolve(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        node = schema["components"]["schemas"][node["$ref"].rsplit("/", 1)[1]]
    return node


def _route_fields(schema: dict[str, Any], method: str, path: str) -> set[str] | None:
    op = schema["paths"].get(path, {}).get(method)
    if op is None:
        return None
    fields = {p["name"] for p in op.get("parameters", [])}
    body = op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
    if body is not None:
        fields |= set(_resolve(schema, body).get("properties", {}))
    return fields


def rest_differences(schema: dict[str, Any]) -> list[str]:
    """How the served OpenAPI ``schema`` differs from the declaration: a call without its route, a route whose
    fields are not the call's parameters, a response whose fields are not the result type's."""
    out = []
    for api in (MemoryAPI, KnowledgeGraphAPI):
        for name, declared in calls(api):
            fields: set[str] = set()
            for method, path in ROUTES[name]:
                found = _route_fields(schema, method, path)
                if found is None:
                    out.append(f"{name}: no route {method.upper()} {path}")
                    continue
                fields |= found
            if fields != set(declared.parameters):
                out.append(f"{name}: REST fields {sorted(fields)} are not its parameters {sorted(declared.parameters)}")
            returned = re.sub(r"^list\[(.+)\]$", r"\1", _returns(declared))
            if returned in RESULT_SCHEMAS:
                model = schema["components"]["schemas"][RESULT_SCHEMAS[returned]]
                kind = results.RESULTS.get(returned) or {"Session": Session, "Hit": Hit}[returned]
                names = ({"sessions", "next_cursor"} if kind is results.SessionPage
                         else {f.name for f in dataclasses.fields(kind) if f.init})
                if set(model["properties"]) != names:
                    out.append(f"{name}: REST sends {sorted(model['properties'])}, {returned} has {sorted(names)}")
    return out


def mcp_differences(tools: dict[str, set[str]]) -> list[str]:
    """How the MCP tools (name → input properties) differ: a tool missing, or a parameter the call does not have."""
    declared = dict(calls(MemoryAPI))
    out = []
    for tool, call in TOOLS.items():
        if tool not in tools:
            out.append(f"no MCP tool {tool}")
            continue
        odd = tools[tool] - set(declared[call].parameters) - TOOL_EXTRAS
        if odd:
            out.append(f"MCP {tool} names {sorted(odd)}, which {call} does not take")
    return out


@pytest.fixture(scope="module")
def openapi() -> dict[str, Any]:
    with Memory(None) as mem:
        return create_app(mem, mcp=False).openapi()


@pytest.fixture(scope="module")
def mcp_tools() -> dict[str, set[str]]:
    with Memory(None) as mem:
        tools = asyncio.run(build_server(mem).list_tools())
    return {t.name: set(t.input_schema["properties"]) for t in tools}


@pytest.mark.parametrize("api,face,coroutines", FACES, ids=[f.__name__ for _, f, _ in FACES])
def test_every_python_face_follows_the_declaration(api: type, face: type, coroutines: bool) -> None:
    assert python_differences(api, face, coroutines) == []


def test_the_rest_api_follows_the_declaration(openapi: dict[str, Any]) -> None:
    assert rest_differences(openapi) == []


def test_the_mcp_tools_follow_the_declaration(mcp_tools: dict[str, set[str]]) -> None:
    assert mcp_differences(mcp_tools) == []


def _without(face: type, name: str) -> type:
    return type(face.__name__, (), {k: v for k, v in vars(face).items() if k != name and not k.startswith("__")})


@pytest.mark.parametrize("api,face,coroutines", FACES, ids=[f.__name__ for _, f, _ in FACES])
def test_the_check_bites_on_each_python_face(api: type, face: type, coroutines: bool) -> None:
    name, declared = calls(api)[-1]
    assert python_differences(api, _without(face, name), coroutines) == [f"{face.__name__} lacks {name}"]
    renamed: Callable[..., Any] = lambda self, *a, **kw: None
    first = list(declared.parameters)[0] if declared.parameters else None
    params = [p.replace(name=p.name + "_x") if p.name == first else p for p in declared.parameters.values()]
    renamed.__signature__ = declared.replace(  # type: ignore[attr-defined]
        parameters=[inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY), *params])
    odd = type(face.__name__, (_without(face, name),), {name: renamed})
    assert any(f"{face.__name__}.{name}" in d for d in python_differences(api, odd, coroutines))


def test_the_check_bites_on_the_rest_api_and_the_mcp_tools(openapi: dict[str, Any],
                                                            mcp_tools: dict[str, set[str]]) -> None:
    paths = {p: ops for p, ops in openapi["paths"].items() if p != "/v1/users"}
    assert rest_differences({**openapi, "paths": paths}) == ["users: no route GET /v1/users"]
    search = openapi["components"]["schemas"]["SearchRequest"]
    props = {("minimum_score" if k == "min_score" else k): v for k, v in search["properties"].items()}
    schemas = {**openapi["components"]["schemas"], "SearchRequest": {**search, "properties": props}}
    assert any(d.startswith("search: REST fields") for d in rest_differences(
        {**openapi, "components": {**openapi["components"], "schemas": schemas}}))
    assert mcp_differences({k: v for k, v in mcp_tools.items() if k != "get_profile"}) == ["no MCP tool get_profile"]
    renamed = {**mcp_tools, "get_context": mcp_tools["get_context"] - {"max_tokens"} | {"budget"}}
    assert mcp_differences(renamed) == ["MCP get_context names ['budget'], which context does not take"]
