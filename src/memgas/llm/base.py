"""The chat-model protocol every LLM provider implements, what a call returns (:class:`Completion`) and
the call accounting (:class:`Usage`, :func:`track_usage`).
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import asdict, dataclass
from typing import Any, Iterator, Mapping, Protocol, Sequence

from memgas.core.errors import LLMError

__all__ = ["ChatMessage", "ChatModel", "Completion", "Usage", "HTTPStatusError", "track_usage", "record_usage"]

ChatMessage = Mapping[str, str]


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


def record_usage(usage: Usage, delta: Usage) -> None:
    """Add ``delta`` to ``usage`` (a model's own counter) and to every :func:`track_usage` scope open here."""
    with _USAGE_LOCK:
        usage.add(delta)
        for scope in _SCOPES.get():
            scope.add(delta)


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


# ----------------------------------------------------------------------------- HTTP


class HTTPStatusError(LLMError):
    """The LLM endpoint answered with a status that retrying will not fix (see :mod:`memgas.core.http`)."""

    def __init__(self, message: str, status: int, detail: str) -> None:
        super().__init__(message)
        self.status = status
        self.detail = detail
