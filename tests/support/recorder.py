"""``Recorder``, a LangChain chat model of the tests' own for the LangChain and LangGraph scenarios: it answers
"Noted." and keeps every prompt it is sent, as text (``type: content`` lines). Import it only where langchain-core is
installed."""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, ChatResult

__all__ = ["Recorder"]


class Recorder(BaseChatModel):
    """The test's own chat model (see the module docstring)."""

    prompts: list[str] = []

    @property
    def _llm_type(self) -> str:
        return "recorder"

    def _generate(self, messages: list[Any], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        self.prompts.append("\n".join(f"{m.type}: {m.content}" for m in messages))
        return ChatResult(generations=[ChatGeneration(message=AIMessage("Noted."))])
