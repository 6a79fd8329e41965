"""A client of ``memgas serve``: :class:`Client` and :class:`AsyncClient`, with the methods of :class:`~memgas.Memory`.

With a server running (``memgas serve``):

>>> from memgas import Client
>>> with Client("http://127.0.0.1:8000", api_key="mgs_...") as mem:  # doctest: +SKIP
...     mem.add([{"role": "user", "content": "I hiked Mount Hood"}], user_id="alice", session_id="s1")
...     hits = mem.search("where did I hike?", user_id="alice")

Each method is written once, as a request builder (:class:`_Requests`) that turns its arguments into a
:class:`_Call`: the HTTP method, path, query and JSON body, and how to decode the answer. The two classes
only send calls, one with :class:`httpx.Client`, the other with :class:`httpx.AsyncClient`; errors are
memgas's exceptions, mapped back from the server's status and error code (:func:`_error_of`).

Experience memory (``/v1/templates``, ``/v1/principles``): ``templates``, ``template``, ``delete_template``,
``match_templates``, ``solve_template`` and ``learn_template`` (a server with an LLM), ``principles``,
``principle``, ``delete_principle``, ``add_principle`` and ``recall_principles``, each for ``agent_id=`` or
``user_id=`` (exactly one), returning what :class:`~memgas.experience.thoughts.BufferOfThoughts` and
:class:`~memgas.experience.principles.Principles` return.

Retries: a ``GET`` (the idempotent reads ``get``, ``list``, ``users``, ``stats``, ``kg.facts``, ``health``,
``ready`` and the experience reads) is retried up to ``retries`` times (default :data:`DEFAULT_RETRIES`) when the
server cannot be reached or
answers 503, after 0.25 s, 0.5 s, ... (or the server's ``Retry-After``, at most :data:`MAX_RETRY_WAIT`
seconds). Writes, ``search`` and ``answer`` are sent once: a failed ``add`` is never sent twice.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import os
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Callable, Concatenate, Coroutine, Generic, Iterable, Mapping, ParamSpec, TypeVar
from urllib.parse import quote

import httpx

from memgas.core.errors import (
    AuthError,
    DuplicateSessionError,
    ForbiddenError,
    InvalidInputError,
    MemgasError,
    NotFoundError,
    RateLimitedError,
    UnavailableError,
)
from memgas.core.results import Added, Appended, Deleted, Edited, SessionPage, UserSessions
from memgas.core.types import Hit, Session
from memgas.core.validate import check_id
from memgas.core.version import __version__

if TYPE_CHECKING:
    from memgas.answer import Answer
    from memgas.context.profile import StandingStatement
    from memgas.experience.principles import Principle
    from memgas.kernels.temporal_graph import Fact
    from memgas.methods.zep import CommunitySummary
    from memgas.sessions.timeline import SessionDigest

__all__ = ["Client", "AsyncClient", "DEFAULT_RETRIES", "MAX_RETRY_WAIT", "API_KEY_ENV"]

#: The environment variable an API key is read from when none is passed.
API_KEY_ENV = "MEMGAS_API_KEY"
#: How many times a ``GET`` is retried after a connection failure or a 503.
DEFAULT_RETRIES = 2
#: The longest wait before a retry, in seconds, whatever the server's ``Retry-After`` says.
MAX_RETRY_WAIT = 5.0
_FIRST_RETRY_WAIT = 0.25

T = TypeVar("T")
P = ParamSpec("P")
Timestamp = str | datetime | None


@dataclass(frozen=True)
class _Call(Generic[T]):
    """One request, ready to send, and how to read its answer.

    ``accept`` are error statuses that ``decode`` reads instead of raising (``/readyz``'s 503).
    """

    method: str
    path: str
    decode: Callable[[httpx.Response], T]
    params: dict[str, Any] = field(default_factory=dict)
    body: bytes | None = None
    accept: frozenset[int] = frozenset()

    @property
    def retryable(self) -> bool:
        """Only reads that change nothing may be sent twice."""
        return self.method == "GET"


# -- request building ---------------------------------------------------------------------------------------


def _segment(what: str, value: str) -> str:
    """An id as one path segment: every character but letters, digits, ``_`` and ``-`` percent-encoded.

    ``/`` would split the segment, and a bare ``.`` or ``..`` would be removed as a dot segment by
    httpx's URL normalisation (RFC 3986), so both are encoded; the server decodes them back. Checked
    first (:func:`~memgas.core.validate.check_id`), so an empty id cannot turn into another route.
    """
    return quote(check_id(what, value), safe="").replace(".", "%2E")


def _iso(value: Timestamp) -> str | None:
    """A timestamp argument as the server takes it: ISO 8601 text (a naive datetime is read as UTC there)."""
    return value.isoformat() if isinstance(value, datetime) else value


def _json_body(payload: Mapping[str, Any]) -> bytes:
    """``payload`` as UTF-8 JSON, leaving out ``None`` fields; what JSON cannot hold is the caller's error."""
    try:
        return json.dumps({k: v for k, v in payload.items() if v is not None}, ensure_ascii=False,
                          allow_nan=False).encode("utf-8")
    except (TypeError, ValueError) as exc:  # a set, an object, NaN, a lone surrogate: nothing is sent
        raise InvalidInputError(f"cannot send this request as JSON: {exc}") from None


def _as_list(value: Any) -> Any:
    """An iterable argument (a generator too) as a JSON list; anything else is sent as is, for the server to refuse."""
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        return value
    return list(value)


def _session_json(session: Any) -> Any:
    """One session of a batch with its timestamp as text (``Memory.add_many`` also takes datetimes)."""
    if not isinstance(session, Mapping):
        return session  # the server names the bad position
    return {**session, "timestamp": _iso(session["timestamp"])} if "timestamp" in session else dict(session)


def _json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        raise MemgasError(f"the server's answer is not JSON (HTTP {response.status_code}): "
                          f"{response.text[:200]!r}") from None


def _added(response: httpx.Response) -> Added:
    return Added.from_dict(_json(response))


def _appended(response: httpx.Response) -> Appended:
    return Appended.from_dict(_json(response))


def _edited(response: httpx.Response) -> Edited:
    return Edited.from_dict(_json(response))


def _deleted(response: httpx.Response) -> Deleted:
    return Deleted.from_dict(_json(response))


def _message_path(index: int) -> str:
    """The path of one message (its session goes in the query); the index is checked here, so no other value can
    change the route."""
    if isinstance(index, bool) or not isinstance(index, int) or index < 0:
        raise InvalidInputError(f"index must be an integer >= 0, got {index!r}")
    return f"/v1/messages/{index}"


def _answer(response: httpx.Response) -> Answer:
    from memgas.answer import Answer  # imports the LLM layer: only when an answer arrives

    return Answer.from_dict(_json(response))


def _profile(response: httpx.Response) -> list[StandingStatement]:
    from memgas.context.profile import StandingStatement

    return [StandingStatement.from_dict(d) for d in _json(response)["statements"]]


def _timeline(response: httpx.Response) -> list[SessionDigest]:
    from memgas.sessions.timeline import SessionDigest

    return [SessionDigest.from_dict(d) for d in _json(response)["sessions"]]


def _facts(response: httpx.Response) -> list[Fact]:
    from memgas.kernels.temporal_graph import Fact

    return [Fact.from_dict(f) for f in _json(response)["facts"]]


def _communities(response: httpx.Response) -> list[CommunitySummary]:
    from memgas.methods.zep import CommunitySummary  # imports the method: only when communities arrive

    return [CommunitySummary.from_dict(c) for c in _json(response)["communities"]]


def _item_path(kind: str, item_id: int) -> str:
    """The path of one experience item; the id is checked here, so no other value can change the route."""
    if isinstance(item_id, bool) or not isinstance(item_id, int) or item_id < 1:
        raise InvalidInputError(f"an item id is an integer >= 1, got {item_id!r}")
    return f"/v1/{kind}/{item_id}"


def _principle(row: Mapping[str, Any]) -> Principle:
    from memgas.experience.principles import Principle  # the experience layer: only when a principle arrives

    return Principle(**row)


def _added_principle(response: httpx.Response) -> tuple[Principle, bool]:
    body = _json(response)
    return _principle(body["principle"]), body["added"]


def _matches(name: str, decode: Callable[[Any], Any]) -> Callable[[httpx.Response], list[tuple[Any, float]]]:
    """A decoder of ``{"matches": [{name: ..., "similarity"}]}`` into ``[(item, similarity), ...]``."""
    return lambda r: [(decode(m[name]), m["similarity"]) for m in _json(r)["matches"]]


class _Requests:
    """The request builders: one per public method, with its signature and docstring (see the module docstring).

    ``list`` is defined last: in a class body, its name would shadow the builtin in later annotations.
    """

    @staticmethod
    def add(messages: Iterable[Any], *, user_id: str, session_id: str | None = None, timestamp: Timestamp = None,
            metadata: dict[str, Any] | None = None, agent_id: str | None = None,
            run_id: str | None = None) -> _Call[Added]:
        """Store one conversation session (:meth:`Memory.add`).

        Raises:
            InvalidInputError: bad messages, ids, timestamp or metadata (nothing is written).
            DuplicateSessionError: the user already has this session id (nothing is written).
        """
        body = _json_body({"user_id": user_id, "messages": _as_list(messages), "session_id": session_id,
                           "timestamp": _iso(timestamp), "metadata": metadata, "agent_id": agent_id,
                           "run_id": run_id})
        return _Call("POST", "/v1/sessions", _added, body=body)

    @staticmethod
    def add_many(sessions: Iterable[Mapping[str, Any]], *, user_id: str,
                 skip_existing: bool = False) -> _Call[list[Added]]:
        """Store several sessions of one user, all of them or none (:meth:`Memory.add_many`).

        Returns:
            One :class:`~memgas.core.results.Added` per session, in order (``skipped`` for one left out).

        Raises:
            InvalidInputError: a bad session (named by its position), or two sessions with one id.
            DuplicateSessionError: without ``skip_existing``, a session id the user already has.
        """
        batch = _as_list(sessions)
        if isinstance(batch, list):
            batch = [_session_json(s) for s in batch]
        body = _json_body({"user_id": user_id, "sessions": batch,
                           "skip_existing": skip_existing})
        return _Call("POST", "/v1/sessions/batch", lambda r: [Added.from_dict(x) for x in _json(r)["results"]], body=body)

    @staticmethod
    def append(messages: Any, *, user_id: str, session_id: str, timestamp: Timestamp = None,
               metadata: dict[str, Any] | None = None, agent_id: str | None = None, run_id: str | None = None,
               return_context: bool = False, context_tokens: int = 1000, window: int = 20) -> _Call[Appended]:
        """Add messages to the end of a session, making it if new (:meth:`Memory.append`).

        Raises:
            InvalidInputError: bad messages, ids, timestamp or metadata (nothing is written).
        """
        body = _json_body({"user_id": user_id, "messages": _as_list(messages), "timestamp": _iso(timestamp),
                           "metadata": metadata, "agent_id": agent_id, "run_id": run_id,
                           "return_context": return_context, "context_tokens": context_tokens, "window": window})
        return _Call("POST", f"/v1/sessions/{_segment('session_id', session_id)}/messages", _appended, body=body)

    @staticmethod
    def update_message(session_id: str, index: int, content: str, *, user_id: str) -> _Call[Edited]:
        """Replace the content of message ``index`` of a session (:meth:`Memory.update_message`).

        Raises:
            InvalidInputError: a bad id, index or content.
            NotFoundError: unknown session.
        """
        return _Call("PATCH", _message_path(index), _edited,
                     params={"user_id": user_id, "session_id": check_id("session_id", session_id)},
                     body=_json_body({"content": content}))

    @staticmethod
    def delete_message(session_id: str, index: int, *, user_id: str) -> _Call[Edited]:
        """Delete message ``index`` of a session (:meth:`Memory.delete_message`).

        Raises:
            InvalidInputError: a bad id or index.
            NotFoundError: unknown session.
        """
        return _Call("DELETE", _message_path(index), _edited,
                     params={"user_id": user_id, "session_id": check_id("session_id", session_id)})

    @staticmethod
    def search(query: str, *, user_id: str, k: int = 5, query_time: Timestamp = None,
               min_score: float = 0.0, exclude_sessions: Iterable[str] = (),
               filters: Mapping[str, Any] | None = None) -> _Call[list[Hit]]:
        """The ``k`` sessions of ``user_id`` most relevant to ``query``, best first (:meth:`Memory.search`);
        none for a user with no memory yet.

        Raises:
            InvalidInputError: an empty or too long query, a bad ``k``, user id, ``query_time``, ``min_score`` or
                filter.
        """
        body = _json_body({"user_id": user_id, "query": query, "k": k, "query_time": _iso(query_time),
                           "min_score": min_score, "exclude_sessions": _as_list(exclude_sessions),
                           "filters": filters})
        return _Call("POST", "/v1/search", lambda r: [Hit.from_dict(h) for h in _json(r)["hits"]], body=body)

    @staticmethod
    def context(query: str, *, user_id: str, k: int = 5, max_tokens: int = 1000, exclude_sessions: Iterable[str] = (),
                query_time: Timestamp = None, min_score: float | None = None,
                filters: Mapping[str, Any] | None = None, in_prompt: Mapping[str, int] | None = None) -> _Call[str]:
        """Prompt-ready text of the relevant memories, within ``max_tokens`` (:meth:`Memory.context`).

        Raises:
            InvalidInputError: as :meth:`search`, or a bad ``max_tokens``.
        """
        body = _json_body({"user_id": user_id, "query": query, "k": k, "max_tokens": max_tokens,
                           "exclude_sessions": _as_list(exclude_sessions), "query_time": _iso(query_time),
                           "min_score": min_score, "filters": filters,
                           "in_prompt": None if in_prompt is None else dict(in_prompt)})
        return _Call("POST", "/v1/context", lambda r: str(_json(r)["context"]), body=body)

    @staticmethod
    def profile(*, user_id: str, exclude_sessions: Iterable[str] = (),
                filters: Mapping[str, Any] | None = None) -> _Call[list[StandingStatement]]:
        """The user's standing instructions and preferences, oldest first (:meth:`Memory.profile`).

        Raises:
            InvalidInputError: a bad user id, session id or filter.
        """
        params = {"user_id": user_id, "exclude_sessions": _as_list(exclude_sessions),
                  "filters": None if filters is None else _json_body(filters).decode("utf-8")}
        return _Call("GET", "/v1/profile", _profile, params=params)

    @staticmethod
    def timeline(*, user_id: str, topic: str | None = None, since: Timestamp = None, until: Timestamp = None,
                 filters: Mapping[str, Any] | None = None) -> _Call[list[SessionDigest]]:
        """The course of the user's conversations: each session's digest, oldest first (:meth:`Memory.timeline`).

        Raises:
            InvalidInputError: a bad user id, topic, time or filter.
        """
        params = {"user_id": user_id, "topic": topic, "since": _iso(since), "until": _iso(until),
                  "filters": None if filters is None else _json_body(filters).decode("utf-8")}
        return _Call("GET", "/v1/timeline", _timeline, params=params)

    @staticmethod
    def get(session_id: str, *, user_id: str) -> _Call[Session]:
        """One stored session: its id, user id, timestamp, metadata and messages (:meth:`Memory.get`).

        Raises:
            InvalidInputError: a malformed user or session id.
            NotFoundError: unknown user or session.
        """
        return _Call("GET", f"/v1/sessions/{_segment('session_id', session_id)}", lambda r: Session.from_dict(_json(r)),
                     params={"user_id": user_id})

    @staticmethod
    def delete(session_id: str | None = None, *, user_id: str,
               filters: Mapping[str, Any] | None = None) -> _Call[Deleted]:
        """Delete one session, the sessions that pass ``filters``, or all of the user's memory when neither is
        given (:meth:`Memory.delete`).

        Raises:
            InvalidInputError: a malformed user or session id, a malformed or empty filter, or both.
            NotFoundError: unknown user or session.
        """
        if filters is not None:
            if session_id is not None:
                raise InvalidInputError("give a session_id or filters, not both")
            return _Call("POST", "/v1/sessions/delete", _deleted,
                         body=_json_body({"user_id": user_id, "filters": filters}))
        if session_id is None:
            return _Call("DELETE", f"/v1/users/{_segment('user_id', user_id)}", _deleted)
        return _Call("DELETE", f"/v1/sessions/{_segment('session_id', session_id)}", _deleted,
                     params={"user_id": user_id})

    @staticmethod
    def units(session_id: str, *, user_id: str) -> _Call[dict[str, Any]]:
        """A session's units by granularity and the sessions it is associated with (:meth:`Memory.units`).

        Raises:
            NotFoundError: unknown user or session.
        """
        return _Call("GET", "/v1/inspect/units", _json, params={"user_id": user_id, "session_id": session_id})

    @staticmethod
    def graph(*, user_id: str, limit: int = 300) -> _Call[dict[str, Any]]:
        """The user's sessions as an association graph (:meth:`Memory.graph`).

        Raises:
            NotFoundError: the user has no memory.
        """
        return _Call("GET", "/v1/inspect/graph", _json, params={"user_id": user_id, "limit": limit})

    @staticmethod
    def expire(*, user_id: str | None = None, before: Timestamp = None) -> _Call[int]:
        """Delete the sessions past their own expiry or the server's retention period (or older than ``before``), of
        one user or, with an admin key, of every user; how many went (:meth:`Memory.expire`).

        Raises:
            InvalidInputError: a bad user id or time.
            ForbiddenError: every user's with a tenant key.
        """
        body = _json_body({"user_id": user_id, "before": _iso(before)})
        return _Call("POST", "/v1/expire", lambda r: int(_json(r)["expired_sessions"]), body=body)

    @staticmethod
    def stats(user_id: str | None = None) -> _Call[dict[str, Any]]:
        """Counts for one user, or (an admin key) for the whole store with the server's timings (:meth:`Memory.stats`).

        Raises:
            NotFoundError: the user has no memory.
            ForbiddenError: store-wide counts with a tenant key.
        """
        return _Call("GET", "/v1/stats", _json, params={"user_id": user_id})

    @staticmethod
    def answer(question: str, *, user_id: str, question_date: Timestamp = None, k: int = 5,
               use_filter: bool = True) -> _Call[Answer]:
        """Answer ``question`` from ``user_id``'s memories, citing the sessions used (:meth:`Memory.answer`).

        Raises:
            InvalidInputError: an empty question, a bad k or date.
            NotFoundError: the user has no memory.
            UnavailableError: the server has no LLM.
            memgas.core.errors.LLMError: the server's LLM could not be called.
        """
        body = _json_body({"user_id": user_id, "question": question, "question_date": _iso(question_date), "k": k,
                           "use_filter": use_filter})
        return _Call("POST", "/v1/answer", _answer, body=body)

    @staticmethod
    def users() -> _Call[list[UserSessions]]:
        """The users this key may see, with their session counts (:meth:`Memory.users`)."""
        return _Call("GET", "/v1/users", lambda r: [UserSessions.from_dict(u) for u in _json(r)["users"]])

    @staticmethod
    def health() -> _Call[dict[str, Any]]:
        """``/healthz``: ``{"status": "ok", ...}`` while the server process is up (no key needed)."""
        return _Call("GET", "/healthz", _json)

    @staticmethod
    def ready() -> _Call[bool]:
        """``/readyz``: whether the server can read its store (no key needed); ``False`` while it cannot.

        Raises:
            UnavailableError: the server cannot be reached.
        """
        return _Call("GET", "/readyz", lambda r: r.status_code == 200, accept=frozenset({503}))

    @staticmethod
    def templates(*, agent_id: str | None = None, user_id: str | None = None) -> _Call[list[dict[str, Any]]]:
        """The Buffer-of-Thoughts templates of an agent (or of one user), oldest first (:meth:`BufferOfThoughts.list`).

        Raises:
            InvalidInputError: neither or both of ``agent_id`` and ``user_id``, or a malformed id.
            ForbiddenError: a ``user_id`` the key may not use.
        """
        return _Call("GET", "/v1/templates", lambda r: _json(r)["templates"],
                     params={"agent_id": agent_id, "user_id": user_id})

    @staticmethod
    def template(item_id: int, *, agent_id: str | None = None, user_id: str | None = None) -> _Call[dict[str, Any]]:
        """One template of the scope (:meth:`BufferOfThoughts.get`).

        Raises:
            NotFoundError: the scope has no template with this id.
        """
        return _Call("GET", _item_path("templates", item_id), _json, params={"agent_id": agent_id, "user_id": user_id})

    @staticmethod
    def delete_template(item_id: int, *, agent_id: str | None = None,
                        user_id: str | None = None) -> _Call[dict[str, Any]]:
        """Delete one template of the scope: ``{"id", "deleted": True}``.

        Raises:
            NotFoundError: the scope has no template with this id (nothing is deleted).
        """
        return _Call("DELETE", _item_path("templates", item_id), _json,
                     params={"agent_id": agent_id, "user_id": user_id})

    @staticmethod
    def match_templates(description: str, *, agent_id: str | None = None, user_id: str | None = None, k: int = 1,
                        min_similarity: float | None = None) -> _Call[list[tuple[dict[str, Any], float]]]:
        """The ``k`` templates nearest an already distilled problem ``description``, best first, with their cosine
        (:meth:`BufferOfThoughts.match`; no LLM runs on the server).

        Raises:
            InvalidInputError: an empty description, a bad ``k`` or ``min_similarity``, or a bad scope.
        """
        body = _json_body({"agent_id": agent_id, "user_id": user_id, "description": description, "k": k,
                           "min_similarity": min_similarity})
        return _Call("POST", "/v1/templates/match", _matches("template", dict), body=body)

    @staticmethod
    def solve_template(problem: str, *, agent_id: str | None = None, user_id: str | None = None,
                       learn: bool = False) -> _Call[dict[str, Any]]:
        """Solve ``problem`` with the scope's best template and the server's LLM (:meth:`BufferOfThoughts.solve`):
        ``{"answer", "reasoning", "distilled", "template": {"template", "similarity"} | None, "learned", "llm"}``
        (and ``distill_error`` when the distiller failed); with ``learn``, a template is learned from the solution.

        Raises:
            InvalidInputError: an empty problem or a bad scope.
            UnavailableError: the server has no LLM.
            memgas.core.errors.LLMError: the server's LLM failed to solve (nothing is stored).
        """
        body = _json_body({"agent_id": agent_id, "user_id": user_id, "problem": problem, "learn": learn})
        return _Call("POST", "/v1/templates/solve", _json, body=body)

    @staticmethod
    def learn_template(problem: str, solution: str, *, agent_id: str | None = None, user_id: str | None = None,
                       answer: str | None = None) -> _Call[dict[str, Any]]:
        """Write a template from a solved problem with the server's LLM (:meth:`BufferOfThoughts.learn`):
        ``{"status": "added", "id", "template"}``, ``{"status": "duplicate", "duplicate_of", "score", "template"}``
        (nothing stored) or ``{"status": "pending", "id", "error"}`` (the LLM failed: the raw solution is kept),
        each with ``llm``.

        Raises:
            InvalidInputError: an empty problem or solution, or a bad scope (nothing is written).
            UnavailableError: the server has no LLM (nothing is written).
        """
        body = _json_body({"agent_id": agent_id, "user_id": user_id, "problem": problem, "solution": solution,
                           "answer": answer})
        return _Call("POST", "/v1/templates/learn", _json, body=body)

    @staticmethod
    def principles(*, agent_id: str | None = None, user_id: str | None = None) -> _Call[list[Principle]]:
        """The PRINCIPLES principles of an agent (or of one user), oldest first (:meth:`Principles.list`).

        Raises:
            InvalidInputError: neither or both of ``agent_id`` and ``user_id``, or a malformed id.
            ForbiddenError: a ``user_id`` the key may not use.
        """
        return _Call("GET", "/v1/principles", lambda r: [_principle(p) for p in _json(r)["principles"]],
                     params={"agent_id": agent_id, "user_id": user_id})

    @staticmethod
    def principle(item_id: int, *, agent_id: str | None = None, user_id: str | None = None) -> _Call[Principle]:
        """One principle of the scope (:meth:`Principles.get`).

        Raises:
            NotFoundError: the scope has no principle with this id.
        """
        return _Call("GET", _item_path("principles", item_id), lambda r: _principle(_json(r)),
                     params={"agent_id": agent_id, "user_id": user_id})

    @staticmethod
    def delete_principle(item_id: int, *, agent_id: str | None = None,
                         user_id: str | None = None) -> _Call[dict[str, Any]]:
        """Delete one principle of the scope: ``{"id", "deleted": True}``.

        Raises:
            NotFoundError: the scope has no principle with this id (nothing is deleted).
        """
        return _Call("DELETE", _item_path("principles", item_id), _json,
                     params={"agent_id": agent_id, "user_id": user_id})

    @staticmethod
    def add_principle(situation: str, action: str, avoid: str, reason: str, *, agent_id: str | None = None,
                      user_id: str | None = None) -> _Call[tuple[Principle, bool]]:
        """Store a principle written by hand (:meth:`Principles.add`): ``(principle, added)``, where a near-duplicate
        is not stored and ``principle`` is the stored one whose ``support`` grew (``added`` false).

        Raises:
            InvalidInputError: an empty field or a bad scope (nothing is written).
        """
        body = _json_body({"agent_id": agent_id, "user_id": user_id, "situation": situation, "action": action,
                           "avoid": avoid, "reason": reason})
        return _Call("POST", "/v1/principles", _added_principle, body=body)

    @staticmethod
    def recall_principles(context: str, *, agent_id: str | None = None, user_id: str | None = None, k: int = 3,
                          min_similarity: float | None = None) -> _Call[list[tuple[Principle, float]]]:
        """The ``k`` principles whose situations are nearest ``context``, best first, with their cosine
        (:meth:`Principles.recall`; no LLM runs on the server).

        Raises:
            InvalidInputError: an empty context, a bad ``k`` or ``min_similarity``, or a bad scope.
        """
        body = _json_body({"agent_id": agent_id, "user_id": user_id, "context": context, "k": k,
                           "min_similarity": min_similarity})
        return _Call("POST", "/v1/principles/recall", _matches("principle", _principle), body=body)

    @staticmethod
    def list(*, user_id: str, filters: Mapping[str, Any] | None = None, limit: int | None = None,
             cursor: str | None = None, order: str = "oldest") -> _Call[SessionPage]:
        """A page of the user's session headers (``limit``, ``cursor``, ``order`` and ``filters`` as in
        :meth:`Memory.list`).

        Raises:
            InvalidInputError: a bad filter, limit, cursor or order.
        """
        body = _json_body({"user_id": user_id, "filters": filters, "limit": limit, "cursor": cursor, "order": order})
        return _Call("POST", "/v1/sessions/query", lambda r: SessionPage.from_dict(_json(r)), body=body)


class _KnowledgeGraphRequests:
    """The request builders of the knowledge graph's calls (:class:`memgas.api.KnowledgeGraphAPI`; a ``zep``
    server): ``Client.kg`` and ``AsyncClient.kg``."""

    @staticmethod
    def facts(*, user_id: str, entity: str | None = None, as_of: Timestamp = None,
              include_invalid: bool = False) -> _Call[list[Fact]]:
        """The user's knowledge-graph facts, valid now or at ``as_of`` (``Memory.kg.facts``).

        Raises:
            InvalidInputError: the server's method keeps no facts.
            NotFoundError: the user has no memory.
        """
        return _Call("GET", "/v1/facts", _facts, params={"user_id": user_id, "entity": entity, "as_of": _iso(as_of),
                                                          "include_invalid": include_invalid})

    @staticmethod
    def history(fact_id: int, *, user_id: str) -> _Call[list[Fact]]:
        """How one fact changed, oldest version first (``Memory.kg.history``).

        Raises:
            InvalidInputError: the server's method keeps no facts.
            NotFoundError: the user has no memory.
        """
        if isinstance(fact_id, bool) or not isinstance(fact_id, int) or fact_id < 0:
            raise InvalidInputError(f"fact_id must be an integer >= 0, got {fact_id!r}")
        return _Call("GET", f"/v1/facts/{fact_id}/history", _facts, params={"user_id": user_id})

    @staticmethod
    def communities(*, user_id: str) -> _Call[list[CommunitySummary]]:
        """The user's entity communities with their summaries (``Memory.kg.communities``).

        Raises:
            InvalidInputError: the server's method keeps no facts.
            NotFoundError: the user has no memory.
        """
        return _Call("GET", "/v1/communities", _communities, params={"user_id": user_id})

    @staticmethod
    def retry_pending(*, user_id: str) -> _Call[int]:
        """Retry the user's extractions that failed at add; how many messages are still pending
        (``Memory.kg.retry_pending``; sent once, as every write is).

        Raises:
            InvalidInputError: the server's method keeps no facts.
            NotFoundError: the user has no memory.
        """
        return _Call("POST", "/v1/facts/retry", lambda r: int(_json(r)["pending"]),
                     body=_json_body({"user_id": user_id}))


# -- response decoding ----------------------------------------------------------------------------------------

_ERRORS: dict[int, type[MemgasError]] = {
    400: InvalidInputError, 413: InvalidInputError, 422: InvalidInputError, 409: DuplicateSessionError,
    404: NotFoundError, 401: AuthError, 403: ForbiddenError, 502: UnavailableError, 503: UnavailableError,
    504: UnavailableError,
}


def _error_of(response: httpx.Response) -> MemgasError:
    """The memgas exception of an error answer, with the server's message (see the module docstring)."""
    try:
        error = response.json()["error"]
        code, message = str(error["code"]), str(error["message"])
    except (ValueError, KeyError, TypeError):  # not the server's JSON (e.g. a proxy's page): say what came
        code, message = "", f"HTTP {response.status_code}: {response.text[:200]!r}"
    if response.status_code == 429:
        return RateLimitedError(message, retry_after=_retry_after(response) or 1.0)
    if response.status_code == 503 and code == "llm_unavailable":
        from memgas.core.errors import LLMError  # loads the LLM layer: only for this error

        return LLMError(message)
    return _ERRORS.get(response.status_code, MemgasError)(message)


def _retry_after(response: httpx.Response) -> float | None:
    """The ``Retry-After`` header in seconds (``None`` when absent or an HTTP date)."""
    try:
        return max(0.0, float(response.headers["Retry-After"]))
    except (KeyError, ValueError):
        return None


def _decode(call: _Call[T], response: httpx.Response) -> T:
    if response.is_success or response.status_code in call.accept:
        return call.decode(response)
    raise _error_of(response)


# -- sending --------------------------------------------------------------------------------------------------


class _Base:
    """What both clients share: the server's URL, the key, the retry policy, and when to retry."""

    def __init__(self, url: str, api_key: str | None, *, retries: int) -> None:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise InvalidInputError(f"url must be the server's http:// or https:// address, got {url!r}")
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise InvalidInputError(f"retries must be an integer >= 0, got {retries!r}")
        # httpx joins a relative path onto the base URL's path, so a server behind a prefix works too.
        self.url = url.rstrip("/")
        self.retries = retries
        self._headers = {"User-Agent": f"memgas-client/{__version__}", "Accept": "application/json"}
        if api_key is None:  # a key kept out of the code, as deployments pass secrets
            api_key = os.environ.get(API_KEY_ENV) or None
        if api_key is not None:
            self._headers["Authorization"] = f"Bearer {api_key}"

    def _request(self, call: _Call[Any]) -> dict[str, Any]:
        """The keyword arguments of ``httpx.request`` for ``call``."""
        headers = {"Content-Type": "application/json"} if call.body is not None else None
        return {"method": call.method, "url": call.path, "content": call.body, "headers": headers,
                "params": {k: v for k, v in call.params.items() if v is not None}}

    def _wait(self, call: _Call[Any], attempt: int, response: httpx.Response | None) -> float | None:
        """Seconds to wait before sending ``call`` again, or ``None`` not to retry.

        ``response`` is ``None`` when the server could not be reached.
        """
        if not call.retryable or attempt >= self.retries:
            return None
        if response is not None and (response.status_code != 503 or 503 in call.accept):
            return None
        hint = _retry_after(response) if response is not None else None
        return min(MAX_RETRY_WAIT, _FIRST_RETRY_WAIT * 2 ** attempt if hint is None else hint)

    def _unreachable(self, exc: httpx.TransportError) -> UnavailableError:
        detail = " ".join(str(exc).split()) or type(exc).__name__  # one line; some httpx errors have no text
        return UnavailableError(f"cannot reach the memgas server at {self.url}: {detail}")

    def _closed(self) -> MemgasError:
        return MemgasError(f"this {type(self).__name__} is closed")


def _sync(build: Callable[P, _Call[T]]) -> Callable[Concatenate[Client, P], T]:
    """A :class:`Client` method that sends what ``build`` makes (same signature and docstring)."""

    @functools.wraps(build)
    def method(self: Client, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._send(build(*args, **kwargs))

    return _with_self(method, build)


def _async(build: Callable[P, _Call[T]]) -> Callable[Concatenate[AsyncClient, P], Coroutine[Any, Any, T]]:
    """An :class:`AsyncClient` coroutine method that sends what ``build`` makes."""

    @functools.wraps(build)
    async def method(self: AsyncClient, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self._send(build(*args, **kwargs))

    return _with_self(method, build)


def _with_self(method: Any, build: Callable[..., Any]) -> Any:
    """Give ``method`` the builder's signature with ``self`` first and the decoded type as its return, so
    ``help()`` and ``inspect`` show what a caller gets (the annotations are strings: ``"_Call[X]"`` → ``"X"``)."""
    signature = inspect.signature(build)
    self_param = inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY)
    returns = str(signature.return_annotation).removeprefix("_Call[").removesuffix("]")
    method.__signature__ = signature.replace(parameters=[self_param, *signature.parameters.values()],
                                             return_annotation=returns)
    return method


class Client(_Base):
    """A synchronous client of ``memgas serve`` with the methods and return types of :class:`~memgas.Memory`.

    Args:
        url: the server's base URL, e.g. ``"http://127.0.0.1:8000"`` (a path prefix is kept).
        api_key: a key from ``memgas keys create`` (sent as ``Authorization: Bearer``); ``None`` for a
            ``--no-auth`` server.
        timeout: seconds for connecting, and for each read or write.
        retries: how often a ``GET`` is retried after a connection failure or a 503 (see the module docstring).
        transport: an :class:`httpx.BaseTransport` to send through instead of the network (tests, proxies).

    Errors are memgas's exceptions: InvalidInputError (400, 413, 422), DuplicateSessionError (409),
    NotFoundError (404), AuthError (401), ForbiddenError (403), RateLimitedError (429, ``retry_after``),
    LLMError (503 ``llm_unavailable``), UnavailableError (other 503s, and a server that cannot be reached).
    """

    def __init__(self, url: str, api_key: str | None = None, *, timeout: float = 30.0,
                 retries: int = DEFAULT_RETRIES, transport: httpx.BaseTransport | None = None) -> None:
        super().__init__(url, api_key, retries=retries)
        self._http = httpx.Client(base_url=self.url, headers=self._headers, timeout=timeout, transport=transport)
        #: The knowledge graph's calls (:class:`memgas.api.KnowledgeGraphAPI`; a server with ``--method zep``).
        self.kg = _ClientKnowledgeGraph(self)

    def _send(self, call: _Call[T]) -> T:
        """Send ``call`` (retrying as :meth:`_Base._wait` says) and decode its answer."""
        if self._http.is_closed:
            raise self._closed()
        attempt = 0
        while True:
            try:
                response = self._http.request(**self._request(call))
            except httpx.TransportError as exc:
                wait = self._wait(call, attempt, None)
                if wait is None:
                    raise self._unreachable(exc) from None
            else:
                wait = self._wait(call, attempt, response)
                if wait is None:
                    return _decode(call, response)
            time.sleep(wait)
            attempt += 1

    add = _sync(_Requests.add)
    add_many = _sync(_Requests.add_many)
    append = _sync(_Requests.append)
    update_message = _sync(_Requests.update_message)
    delete_message = _sync(_Requests.delete_message)
    search = _sync(_Requests.search)
    context = _sync(_Requests.context)
    profile = _sync(_Requests.profile)
    timeline = _sync(_Requests.timeline)
    get = _sync(_Requests.get)
    users = _sync(_Requests.users)
    units = _sync(_Requests.units)
    graph = _sync(_Requests.graph)
    delete = _sync(_Requests.delete)
    expire = _sync(_Requests.expire)
    stats = _sync(_Requests.stats)
    answer = _sync(_Requests.answer)
    templates = _sync(_Requests.templates)
    template = _sync(_Requests.template)
    delete_template = _sync(_Requests.delete_template)
    match_templates = _sync(_Requests.match_templates)
    solve_template = _sync(_Requests.solve_template)
    learn_template = _sync(_Requests.learn_template)
    principles = _sync(_Requests.principles)
    principle = _sync(_Requests.principle)
    delete_principle = _sync(_Requests.delete_principle)
    add_principle = _sync(_Requests.add_principle)
    recall_principles = _sync(_Requests.recall_principles)
    health = _sync(_Requests.health)
    ready = _sync(_Requests.ready)
    list = _sync(_Requests.list)

    def close(self) -> None:
        """Close the connections (idempotent); a later call raises :class:`~memgas.core.errors.MemgasError`."""
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncClient(_Base):
    """An asyncio client of ``memgas serve``: the methods of :class:`Client`, as coroutines.

    Takes the arguments of :class:`Client`; ``transport`` is an :class:`httpx.AsyncBaseTransport`.
    Use it as ``async with AsyncClient(url, key) as mem: hits = await mem.search(...)``, or call
    ``await mem.close()``.
    """

    def __init__(self, url: str, api_key: str | None = None, *, timeout: float = 30.0,
                 retries: int = DEFAULT_RETRIES, transport: httpx.AsyncBaseTransport | None = None) -> None:
        super().__init__(url, api_key, retries=retries)
        self._http = httpx.AsyncClient(base_url=self.url, headers=self._headers, timeout=timeout, transport=transport)
        #: The knowledge graph's calls as coroutines (a server with ``--method zep``).
        self.kg = _AsyncClientKnowledgeGraph(self)

    async def _send(self, call: _Call[T]) -> T:
        """Send ``call`` (retrying as :meth:`_Base._wait` says) and decode its answer."""
        if self._http.is_closed:
            raise self._closed()
        attempt = 0
        while True:
            try:
                response = await self._http.request(**self._request(call))
            except httpx.TransportError as exc:
                wait = self._wait(call, attempt, None)
                if wait is None:
                    raise self._unreachable(exc) from None
            else:
                wait = self._wait(call, attempt, response)
                if wait is None:
                    return _decode(call, response)
            await asyncio.sleep(wait)
            attempt += 1

    add = _async(_Requests.add)
    add_many = _async(_Requests.add_many)
    append = _async(_Requests.append)
    update_message = _async(_Requests.update_message)
    delete_message = _async(_Requests.delete_message)
    search = _async(_Requests.search)
    context = _async(_Requests.context)
    profile = _async(_Requests.profile)
    timeline = _async(_Requests.timeline)
    get = _async(_Requests.get)
    users = _async(_Requests.users)
    units = _async(_Requests.units)
    graph = _async(_Requests.graph)
    delete = _async(_Requests.delete)
    expire = _async(_Requests.expire)
    stats = _async(_Requests.stats)
    answer = _async(_Requests.answer)
    templates = _async(_Requests.templates)
    template = _async(_Requests.template)
    delete_template = _async(_Requests.delete_template)
    match_templates = _async(_Requests.match_templates)
    solve_template = _async(_Requests.solve_template)
    learn_template = _async(_Requests.learn_template)
    principles = _async(_Requests.principles)
    principle = _async(_Requests.principle)
    delete_principle = _async(_Requests.delete_principle)
    add_principle = _async(_Requests.add_principle)
    recall_principles = _async(_Requests.recall_principles)
    health = _async(_Requests.health)
    ready = _async(_Requests.ready)
    list = _async(_Requests.list)

    async def close(self) -> None:
        """Close the connections (idempotent); a later call raises :class:`~memgas.core.errors.MemgasError`."""
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class _ClientKnowledgeGraph:
    """``Client.kg``: the knowledge graph's calls, sent by the client."""

    def __init__(self, client: Client) -> None:
        self._send = client._send

    facts = _sync(_KnowledgeGraphRequests.facts)
    history = _sync(_KnowledgeGraphRequests.history)
    communities = _sync(_KnowledgeGraphRequests.communities)
    retry_pending = _sync(_KnowledgeGraphRequests.retry_pending)


class _AsyncClientKnowledgeGraph:
    """``AsyncClient.kg``: the knowledge graph's calls as coroutines."""

    def __init__(self, client: AsyncClient) -> None:
        self._send = client._send

    facts = _async(_KnowledgeGraphRequests.facts)
    history = _async(_KnowledgeGraphRequests.history)
    communities = _async(_KnowledgeGraphRequests.communities)
    retry_pending = _async(_KnowledgeGraphRequests.retry_pending)
