"""Language models for memgas: one small protocol (:mod:`~memgas.llm.base`), an OpenAI-compatible HTTP
provider (:mod:`~memgas.llm.openai`), a local GGUF provider (:mod:`~memgas.llm.local`), a SQLite response cache
(:mod:`~memgas.llm.cache`), validated JSON output (:mod:`~memgas.llm.structured`) and call accounting.

Pick one with :func:`get_llm` (:mod:`~memgas.llm.factory`)::

    get_llm("openai:gpt-4o-mini")            # OpenAI, key from $MEMGAS_LLM_API_KEY / $OPENAI_API_KEY
    get_llm("openai:qwen2.5:7b-instruct@http://localhost:11434/v1")  # Ollama, vLLM, LM Studio, llama.cpp
    get_llm("local")                         # the GGUF model shipped in a PyPI package
    get_llm("local:/models/any.gguf", cache=default_llm_cache_path())

Every provider returns a :class:`Completion`; the :class:`LLM` wrapper (:mod:`~memgas.llm.wrapper`) adds the
response cache, the JSON path (schema-constrained output where the server supports it; otherwise extract,
validate and retry once with the validation error) and the counters (:class:`Usage`, :func:`track_usage`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memgas.core.lazy import lazy_exports

if TYPE_CHECKING:
    from memgas.core.errors import LLMError
    from memgas.core.paths import default_llm_cache_path
    from memgas.llm.base import ChatModel, Completion, Usage, track_usage
    from memgas.llm.cache import ResponseCache
    from memgas.llm.factory import get_llm
    from memgas.llm.openai import OpenAIChat
    from memgas.llm.structured import extract_json, strip_think, validate_json
    from memgas.llm.wrapper import LLM

#: Each public name and the module that defines it (the names ``memgas.llm`` had as one module).
_LAZY: dict[str, str] = {
    "ChatModel": ".base", "Completion": ".base", "Usage": ".base", "track_usage": ".base",
    "LLMError": "..core.errors", "OpenAIChat": ".openai", "ResponseCache": ".cache", "LLM": ".wrapper",
    "get_llm": ".factory", "default_llm_cache_path": "..core.paths", "strip_think": ".structured",
    "extract_json": ".structured", "validate_json": ".structured",
}

__all__ = list(_LAZY)

__getattr__, __dir__ = lazy_exports(__name__, globals(), _LAZY)
