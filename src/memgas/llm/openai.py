"""Chat completions from any OpenAI-compatible HTTP server (OpenAI, Ollama, vLLM, LM Studio, llama.cpp).
"""

from __future__ import annotations

import os
import re
import threading
import time
from typing import Any, Mapping, Sequence

from memgas.core.errors import InvalidInputError, LLMError
from memgas.llm.base import ChatMessage, Completion, HTTPStatusError

__all__ = ["OpenAIChat"]


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
    retry (see :func:`memgas.core.http.post_json`) and reading an answer that trickles in. At most
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
        from memgas.core import http as http_base  # http.client and urllib only once a call is made (fast start)

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
