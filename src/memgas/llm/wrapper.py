"""The :class:`LLM` every caller uses: a chat model with the response cache, the JSON path (schema-constrained
output where the server supports it; otherwise extract, validate and retry once) and the counters.
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

from memgas.core.errors import InvalidInputError, LLMError
from memgas.llm.base import ChatMessage, ChatModel, Completion, Usage, record_usage
from memgas.llm.cache import ResponseCache
from memgas.llm.structured import extract_json, validate_json

__all__ = ["LLM"]

# ----------------------------------------------------------------------------- the client


class LLM:
    """A chat model with a response cache, validated JSON output, and counters.

    ``usage`` counts everything this object did; :func:`track_usage` counts per block of code.

    Args:
        model: a :class:`ChatModel` (:class:`OpenAIChat`, :class:`memgas.llm.local.LocalChat`, ...).
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
        record_usage(self.usage, delta)
