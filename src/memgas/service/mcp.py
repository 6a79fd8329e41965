"""The MCP server: memgas's tools for agents, over stdio (``memgas mcp``) and streamable HTTP (``/mcp``).

Both transports serve the same tools (:func:`build_server`) over :class:`ScopedMemory`, as the caller
sees it: the caller's :class:`Principal` lives in a context variable that the transport sets, once for
the process on stdio (:func:`run_stdio`), and per HTTP request under ``memgas serve`` after the API key
was verified, exactly as the REST routes verify it (:func:`mount_mcp`). A tool that finds no principal
refuses to run.

HTTP is served **stateless, with JSON responses**: every POST is verified and handled on its own, so
the principal of the request is the one its tools see (a stateful session would run later calls in
the task its first request started, with that request's key), a revoked key stops working at once,
several worker processes can serve one client, and there is no session table to expire.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import json
import re
import sys
import uuid
from contextvars import ContextVar
from typing import TYPE_CHECKING, Annotated, Any, AsyncContextManager, Callable, Literal, TypeVar

import anyio
import anyio.to_thread
from fastapi import FastAPI, Request
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import CallToolResult, TextContent
from mcp_types import ToolAnnotations
from pydantic import BaseModel, Field, ValidationError

from memgas.core.errors import MemgasError
from memgas.core.validate import MAX_K, MAX_MESSAGE_CHARS, MAX_QUERY_CHARS
from memgas.core.version import __version__
from memgas.memory import Memory
from memgas.service.deps import ServiceState, api_key_header, bearer_scheme, principal
from memgas.service.errors import error_response, status_of
from memgas.service.keys import ANONYMOUS, Principal, parse_scope
from memgas.service.mcp_text import render
from memgas.service.metrics import Metrics
from memgas.service.schemas import (
    AgentId,
    AnswerOut,
    AppendResult,
    DeleteResult,
    MessageIn,
    MinSimilarity,
    PrincipleMatches,
    ProfileOut,
    SearchResponse,
    SessionId,
    SessionList,
    SessionOut,
    TemplateMatches,
    TimelineOut,
    Timestamp,
    UserId,
    messages_payload,
)
from memgas.service.scoped import ScopedMemory
from memgas.service.scoped_experience import ScopedExperience

if TYPE_CHECKING:
    from starlette.types import Receive, Scope, Send

__all__ = ["build_server", "mount_mcp", "run_stdio", "tools_markdown"]

_T = TypeVar("_T")

#: Who is calling the tools now: set by the transport, read by every tool.
_principal: ContextVar[Principal] = ContextVar("memgas_mcp_principal")

_INSTRUCTIONS = (
    "Long-term memory of conversations, per user. Store each turn's new messages with add_memory and the "
    "conversation's session_id (they are appended); before answering, get_context (compact text) or "
    "search_memory for what the user said earlier; get_profile lists the user's standing instructions and "
    "preferences; get_timeline gives the course of the conversations (what each session brought up, or what "
    "happened with one topic, oldest first); get_session shows a "
    "whole session; delete_memory forgets a session or, explicitly, everything about a user. "
    "Experience shared by an agent (agent_id) or kept for one user (user_id): recall_principles finds "
    "conversation strategy principles for the situation at hand; match_templates finds reasoning templates "
    "for a kind of problem."
)

Query = Annotated[str, Field(min_length=1, max_length=MAX_QUERY_CHARS, description=(
    f"the question or topic, in natural language (at most {MAX_QUERY_CHARS:,} characters)"))]
K = Annotated[int, Field(ge=1, le=MAX_K, description=f"how many sessions to return, 1-{MAX_K:,}")]
QueryTime = Annotated[str | None, Field(max_length=64, description=(
    "ISO 8601 time the question is asked at; anchors 'yesterday', 'last week'. Default: now"))]
MinScore = Annotated[float, Field(ge=0.0, le=1.0, description=(
    "leave out sessions whose relevance (0-1) is below this; 0 keeps the k best whatever they score"))]
Messages = Annotated[list[MessageIn] | Annotated[str, Field(min_length=1, max_length=MAX_MESSAGE_CHARS)], Field(description=(
    "the messages in order: [{role: user|assistant|system|tool, content, name?}, ...] (OpenAI and Anthropic "
    "message formats are read too), or a plain string as one user message"))]
MaxTokens = Annotated[int, Field(ge=1, le=100_000, description="the text's budget, 4 characters a token")]
ExcludeSessions = Annotated[list[SessionId], Field(max_length=100, description="sessions to leave out: the current "
                                                                                "conversation")]
Metadata = Annotated[dict[str, Any] | None, Field(description=(
    "a JSON object kept with the session (at most 64 KiB, 32 levels)"))]
OptionalSession = Annotated[SessionId | None, Field(description=(
    "the session to delete; leave out (with all_sessions=true) to delete all of the user's memory"))]
AllSessions = Annotated[bool, Field(description="must be true to delete every session of the user (no session_id)")]
ExperienceAgent = Annotated[AgentId | None, Field(description=(
    "whose experience: an agent's, shared by its users (give agent_id or user_id, not both)"))]
ExperienceUser = Annotated[UserId | None, Field(description="or one user's own experience")]
ItemsK = Annotated[int, Field(ge=1, le=MAX_K, description=f"how many items to return, 1-{MAX_K:,}")]
McpFilters = Annotated[dict[str, Any] | None, Field(description=(
    "only the sessions that pass: {\"agent_id\": \"planner\"}, {\"project\": {\"$in\": [\"a\", \"b\"]}}, "
    "{\"timestamp\": {\"$gte\": \"2026-03-01\"}}, $and/$or/$not; other names are metadata keys"))]
PageLimit = Annotated[int | None, Field(ge=1, le=10_000, description="sessions per page (default: all)")]
PageCursor = Annotated[str | None, Field(min_length=1, max_length=2048, description=(
    "next_cursor of the previous page"))]
Format = Annotated[Literal["text", "json"], Field(description=(
    "text (default): compact lines for you to read; json: the whole result as JSON"))]


class _Server(MCPServer):
    """:class:`MCPServer` whose argument errors are one line, as REST's 422 messages are, not pydantic's report."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        """Call a tool (:meth:`MCPServer.call_tool`)."""
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            errors = exc.__cause__.errors() if isinstance(exc.__cause__, ValidationError) else None
            if not errors:
                raise
            first = errors[0]
            # A union's member names its branch in the location (messages.list[MessageIn].0.role): left out.
            where = ".".join(str(part) for part in first["loc"] if not re.fullmatch(r"\w+\[.*\]|str", str(part)))
            more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
            message = f"Error executing tool {name}: invalid arguments: {where}: {first['msg']}{more}"
            raise ToolError(message) from exc.__cause__


def build_server(memory: Memory, *, metrics: Metrics | None = None) -> MCPServer:
    """The MCP server whose tools act on ``memory`` as the principal of :data:`_principal`.

    ``answer`` is offered only when ``memory`` has an LLM. ``metrics`` (under ``memgas serve``) counts
    adds, searches and answers as the REST routes do.
    """
    server = _Server("memgas", version=__version__, instructions=_INSTRUCTIONS, log_level="WARNING")

    def reply(tool: str, model: BaseModel, fmt: str) -> Any:
        """The tool's result: compact text (:mod:`memgas.service.mcp_text`) or JSON text, the whole result as
        structured content either way."""
        data = model.model_dump(mode="json")
        text = json.dumps(data, ensure_ascii=False) if fmt == "json" else render(tool, data)
        return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=data)

    async def call(fn: Callable[[ScopedMemory], _T], counter: str | None = None) -> _T:
        """Run ``fn`` on the caller's scoped memory in a worker thread; memgas's errors become tool errors."""
        try:
            who = _principal.get()
        except LookupError:  # a transport that forgot to say who calls: refuse rather than guess
            raise ToolError("no authenticated caller") from None
        try:
            result = await anyio.to_thread.run_sync(fn, ScopedMemory(memory, who))
        except MemgasError as exc:
            raise ToolError(who.unscoped(str(exc))) from None
        if metrics is not None and counter is not None:
            metrics.inc(counter)
        return result

    async def add_memory(user_id: UserId, messages: Messages, session_id: SessionId | None = None,
                         timestamp: Timestamp | None = None, metadata: Metadata = None,
                         format: Format = "text") -> AppendResult:
        """Store messages of a conversation in the user's long-term memory.

        Call it every turn with the new messages and the same `session_id`: they are added to the end of
        that conversation (created on first use). Without `session_id`, the messages are stored as a new
        conversation with a random id (returned). Give `timestamp` (when it happened) only if it is not now.
        """
        plain = messages_payload(messages)
        sid = session_id if session_id is not None else uuid.uuid4().hex
        result = await call(lambda mem: mem.append(plain, user_id=user_id, session_id=sid, timestamp=timestamp,
                                                 metadata=metadata))
        if result.created and metrics is not None:
            metrics.inc("adds")
        return reply("add_memory", AppendResult(**result.to_dict()), format)

    async def get_context(user_id: UserId, query: Query, k: K = 5, max_tokens: MaxTokens = 1000,
                          exclude_sessions: ExcludeSessions | None = None) -> str:
        """What from earlier conversations matters for `query`, as compact prompt-ready text.

        The user's standing instructions and preferences that apply come first, then one dated line per
        relevant message of earlier conversations (the part that matters of a long one), within `max_tokens`
        (4 characters a token). Pass the current conversation in `exclude_sessions` so it is not repeated.
        """
        excluded = exclude_sessions or []
        text = await call(lambda mem: mem.context(query, user_id=user_id, k=k, max_tokens=max_tokens,
                                                  exclude_sessions=excluded), "searches")
        return text or "(no memories yet)"

    async def get_profile(user_id: UserId, format: Format = "text") -> ProfileOut:
        """The user's standing instructions and preferences: what they asked to hold from then on ("always…",
        "never…", "call me…") and what they prefer, oldest first, each with its session and date.

        Follow them when answering; get_context already puts the relevant ones first.
        """
        return reply("get_profile", ProfileOut(statements=[
            s.to_dict() for s in await call(lambda mem: mem.profile(user_id=user_id))]), format)

    async def get_timeline(user_id: UserId, topic: Annotated[str | None, Field(
                               min_length=1, max_length=MAX_QUERY_CHARS, description=(
                                   "only what was said about this, across sessions; default: every item"))] = None,
                           since: Timestamp | None = None, until: Timestamp | None = None,
                           format: Format = "text") -> TimelineOut:
        """The course of the user's conversations: what each session brought up, in order, oldest session first,
        each item a line of the message that brought it up (with its session, message and date).

        Use it for questions about order, progress or a summary ("in what order did I…", "how has my project
        gone"); with `topic`, only the items about it, so it reads as what happened with it. `since`/`until`
        (ISO 8601) keep the sessions dated in between.
        """
        return reply("get_timeline", TimelineOut(sessions=[d.to_dict() for d in await call(
            lambda mem: mem.timeline(user_id=user_id, topic=topic, since=since, until=until))]), format)

    async def search_memory(user_id: UserId, query: Query, k: K = 5, query_time: QueryTime = None,
                            min_score: MinScore = 0.0, filters: McpFilters = None,
                            format: Format = "text") -> SearchResponse:
        """Find what the user said or was told in earlier conversations.

        Use it before answering anything that may depend on the past (preferences, facts about the
        user, earlier plans). Returns up to `k` sessions, most relevant first, each with its best
        matching turns as text and a relevance score; no hits for a user with nothing stored yet.
        `filters` narrows the search to sessions of one agent, run or project (their metadata).
        """
        hits = await call(lambda mem: mem.search(query, user_id=user_id, k=k, query_time=query_time, min_score=min_score,
                                                 filters=filters), "searches")
        return reply("search_memory", SearchResponse(hits=[h.to_dict() for h in hits]), format)

    async def get_session(user_id: UserId, session_id: SessionId, format: Format = "text") -> SessionOut:
        """The full stored conversation of one session (its messages, timestamp and metadata).

        Use it when a search hit's turns are not enough context.
        """
        return reply("get_session", SessionOut(**(await call(lambda mem: mem.get(session_id, user_id=user_id))).to_dict()), format)

    async def list_sessions(user_id: UserId, filters: McpFilters = None, limit: PageLimit = None,
                            cursor: PageCursor = None, format: Format = "text") -> SessionList:
        """The user's stored sessions, oldest first: ids, timestamps, sizes, scope and each one's first user line
        (not their content). Pages with `limit`; pass the result's `next_cursor` as `cursor` for the next."""
        page = await call(lambda mem: mem.list(user_id=user_id, filters=filters, limit=limit, cursor=cursor))
        return reply("list_sessions", SessionList(**page.to_dict()), format)

    async def delete_memory(user_id: UserId, session_id: OptionalSession = None,
                            all_sessions: AllSessions = False, format: Format = "text") -> DeleteResult:
        """Forget: delete one session of the user, or everything stored about the user.

        Pass `session_id` to delete that session. To delete ALL of the user's memory, leave out
        `session_id` and pass `all_sessions: true`. Deletion cannot be undone.
        """
        if (session_id is not None) != all_sessions:
            return reply("delete_memory", DeleteResult(**(await call(lambda mem: mem.delete(session_id, user_id=user_id))).to_dict()),
                         format)
        if session_id is None:
            raise ToolError("pass session_id to delete one session, or all_sessions=true to delete all the memory "
                            f"of user {user_id!r}")
        raise ToolError("pass either session_id or all_sessions=true, not both")

    async def recall_principles(context: Query, agent_id: ExperienceAgent = None, user_id: ExperienceUser = None,
                                k: ItemsK = 3, min_similarity: MinSimilarity = None,
                                format: Format = "text") -> PrincipleMatches:
        """Strategy principles learned from earlier conversations that fit the situation at hand.

        Pass the conversation so far (or a summary of the situation) as `context`. Each principle says
        in which situation it applies, what to do, what to avoid and why, with its similarity to the
        context (0-1), best first. Follow the best ones in your next reply.
        """
        return reply("recall_principles", PrincipleMatches(matches=await call(lambda mem: ScopedExperience(
            mem.memory, mem.principal, agent_id=agent_id, user_id=user_id).recall_principles(
                context, k=k, min_similarity=min_similarity))), format)

    async def match_templates(description: Query, agent_id: ExperienceAgent = None, user_id: ExperienceUser = None,
                              k: ItemsK = 1, min_similarity: MinSimilarity = None,
                              format: Format = "text") -> TemplateMatches:
        """Reasoning templates (Buffer of Thoughts) for a kind of problem, learned from problems solved before.

        Describe the problem in general terms as `description`: the kind of task and what it asks for,
        without its particular numbers, words or dates. Each template lists general reasoning steps, with
        its similarity to the description (0-1), best first; follow its steps with your problem's values.
        """
        return reply("match_templates", TemplateMatches(matches=await call(lambda mem: ScopedExperience(
            mem.memory, mem.principal, agent_id=agent_id, user_id=user_id).match_templates(
                description, k=k, min_similarity=min_similarity))), format)

    def add(fn: Callable[..., Any], annotations: ToolAnnotations) -> None:
        server.add_tool(fn, description=inspect.getdoc(fn), annotations=annotations)

    read_only = ToolAnnotations(read_only_hint=True, open_world_hint=False)
    add(add_memory, ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False,
                                    open_world_hint=False))
    add(search_memory, read_only)
    add(get_context, read_only)
    add(get_profile, read_only)
    add(get_timeline, read_only)
    add(get_session, read_only)
    add(list_sessions, read_only)
    add(delete_memory, ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False,
                                       open_world_hint=False))
    add(recall_principles, read_only)
    add(match_templates, read_only)

    if memory.llm is not None:
        async def answer(user_id: UserId, question: Query, k: K = 5, question_date: QueryTime = None,
                         format: Format = "text") -> AnswerOut:
            """Answer a question from the user's memories with the server's LLM, citing the sessions used.

            Use it when you want a short answer rather than the raw search hits; `sources` lists the
            session ids the answer rests on.
            """
            return reply("answer", AnswerOut(**(await call(lambda mem: mem.answer(
                question, user_id=user_id, question_date=question_date, k=k), "answers")).to_dict()), format)

        add(answer, read_only)
    return server


class _Authenticated:
    """ASGI app: verify the API key as the REST routes do (401/429 as JSON), then serve MCP as its principal."""

    #: The route template the request's metrics and log line show (FastAPI names only its own routes in the scope).
    path = "/mcp"

    def __init__(self, server: MCPServer) -> None:
        self.server = server

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        scope["route"] = self
        request = Request(scope, receive)
        try:
            # In a worker thread, as REST runs it: it reads the store (and takes the rate limiter's lock).
            who = await anyio.to_thread.run_sync(principal, request, await bearer_scheme(request),
                                                 await api_key_header(request))
        except MemgasError as exc:  # AuthError or RateLimitedError
            status, code, headers = status_of(exc)
            request_id = scope.get("state", {}).get("request_id", "")
            await error_response(status, code, str(exc), request_id, headers)(scope, receive, send)
            return
        token = _principal.set(who)  # the SDK's per-request tasks start from this context, so they see it
        try:
            await self.server.session_manager.handle_request(scope, receive, send)
        finally:
            _principal.reset(token)


def tools_markdown(memory: Memory | None = None) -> str:
    """The tools a server serves (with ``memory``; ``None``: an in-memory one without an LLM), as the rows of a
    Markdown table: each tool's name, its parameters and the first paragraph of its description, as an MCP client
    lists them (the docs' table is this, so it cannot drift from the server)."""
    with contextlib.ExitStack() as stack:
        if memory is None:
            memory = stack.enter_context(Memory(None))
        tools = anyio.run(build_server(memory).list_tools)
    rows = ["| tool | parameters | what an agent uses it for |", "|---|---|---|"]
    for tool in tools:
        params = ", ".join(f"`{p}`" for p in tool.input_schema.get("properties", {}) if p != "format")
        first = " ".join((tool.description or "").split("\n\n")[0].split())
        rows.append(f"| `{tool.name}` | {params} | {first} |")
    return "\n".join(rows)


def mount_mcp(app: FastAPI, state: ServiceState) -> Callable[[], AsyncContextManager[None]]:
    """Serve the MCP tools at ``/mcp`` of ``app`` (same API keys as REST); return the lifespan to enter.

    The SDK's DNS-rebinding protection is off: without authentication the app's middleware already
    refuses every request not addressed to loopback from a loopback origin (for REST and MCP alike),
    and with keys a web page cannot call the server anyway.
    """
    server = build_server(state.memory, metrics=state.metrics)
    security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    # Builds the session manager (server.session_manager); its own Starlette app is not used.
    server.streamable_http_app(stateless_http=True, json_response=True, transport_security=security,
                               max_request_body_size=state.max_body)
    app.add_route(_Authenticated.path, _Authenticated(server),  # type: ignore[arg-type]  # an ASGI app, served as one
                  include_in_schema=False)
    return server.session_manager.run


def run_stdio(args: argparse.Namespace, options: dict[str, Any] | None = None) -> None:
    """``memgas mcp``: serve the tools over stdin/stdout until the client closes them (``options``: the method's
    parameters, from ``--set``).

    Acts on every user, or with ``--tenant NAME`` on that tenant's users only. Only the MCP protocol
    goes to stdout: anything printed while the memory opens goes to stderr.

    Raises:
        InvalidInputError: a malformed tenant name.
    """
    who = ANONYMOUS
    if args.tenant is not None:
        _, tenant = parse_scope(f"tenant:{args.tenant}")
        who = Principal(key_id="stdio", tenant=tenant)
    with contextlib.redirect_stdout(sys.stderr):
        memory = Memory(args.db, method=args.method, llm=args.llm, **(options or {}))
    try:
        server = build_server(memory)
        _principal.set(who)  # anyio.run starts from this context, and every task it makes copies it
        anyio.run(server.run_stdio_async)
    finally:
        memory.close()
