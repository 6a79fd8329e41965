"""``MemgasMemoryStore`` inside Strands Agents' own loop, run in the Strands environment (``.venv-strands``; Strands pins
``mcp<2.2``, which memgas's service cannot share) by ``test_own_environments.py``: an ``Agent`` with a
``SlidingWindowConversationManager`` of 10 messages and the ``MemoryManager`` plugin over the store, the model a
Strands ``Model`` of the test's own that records each request: the shared scenario (``tests/support/scenario.py``),
and the docs' Strands example."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any, AsyncIterable

import pytest
from strands import Agent
from strands.agent.conversation_manager import SlidingWindowConversationManager
from strands.memory import MemoryManager
from strands.models.model import Model

from memgas import Memory
from memgas.integrations.strands import MemgasMemoryStore
from support.scenario import (
    FACT,
    QUESTION,
    check_not_recalled,
    check_recalled,
    check_recalled_later,
    check_window_lost_it,
    turns,
)

WINDOW = 10


class Scripted(Model):
    """Answers "Noted." and keeps each request's text: (everything sent, the conversation's messages alone)."""

    def __init__(self) -> None:
        self.prompts: list[tuple[str, str]] = []

    def update_config(self, **model_config: Any) -> None:
        pass

    def get_config(self) -> Any:
        return {}

    def structured_output(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    async def stream(self, messages: Any, tool_specs: Any = None, system_prompt: str | None = None,
                     **kwargs: Any) -> AsyncIterable[Any]:
        def text(message: Any) -> str:
            return "\n".join(str(b.get("text", "")) for b in message.get("content", []) if isinstance(b, dict))

        every = "\n".join([system_prompt or "", *(text(m) for m in messages)])
        window = "\n".join(re.sub(r"<memory>.*?</memory>", "", text(m), flags=re.S) for m in messages)
        self.prompts.append((every, window))
        yield {"messageStart": {"role": "assistant"}}
        yield {"contentBlockDelta": {"delta": {"text": "Noted."}}}
        yield {"contentBlockStop": {}}
        yield {"messageStop": {"stopReason": "end_turn"}}


def conversation(mem: Memory, user: str, session: str, said: list[str]) -> Scripted:
    """One conversation driven in one event loop (``invoke_async``), where the manager's background saves run; the
    synchronous ``agent(text)`` of Strands 1.62 saved only its first invocation's messages here."""
    model = Scripted()
    store = MemgasMemoryStore(mem, user_id=user, session_id=session, window=WINDOW)
    manager = MemoryManager(stores=[store])
    agent = Agent(model=model, conversation_manager=SlidingWindowConversationManager(window_size=WINDOW),
                  plugins=[manager], callback_handler=None)

    async def run() -> None:
        for text in said:
            await agent.invoke_async(text)
        await manager.flush()

    asyncio.run(run())
    return model


def test_the_shared_scenario_in_the_agent_loop() -> None:
    with Memory() as mem:
        first = conversation(mem, "ana", "chat-1", turns())
        every, window = first.prompts[-1]
        check_window_lost_it(window)
        check_recalled(every)
        kept = [m.content for m in mem.get("chat-1", user_id="ana").messages]
        assert FACT in kept and kept.count(FACT) == 1 and len(kept) == 2 * len(turns())
        check_recalled_later(conversation(mem, "ana", "chat-2", [QUESTION]).prompts[-1][0])
        check_not_recalled(conversation(mem, "bo", "chat-3", [QUESTION]).prompts[-1][0])
    with pytest.raises(ValueError, match="window"):
        MemgasMemoryStore(mem, user_id="ana", session_id="x", window=-1)


def test_the_docs_strands_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The frameworks guide's Strands block (the docs' own runner leaves it to this environment)."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "guides" / "frameworks.md").read_text(encoding="utf-8")
    (block,) = [b for b in re.findall(r"^```python\n(.*?)^```", page, re.S | re.M) if "from strands" in b]
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "docs-example")  # the model is built, never called
    namespace: dict[str, object] = {}
    exec(compile("from memgas import Memory\n" + block, "frameworks.md", "exec"), namespace)
    assert isinstance(namespace["agent"], Agent) and namespace["store"].window == 20
