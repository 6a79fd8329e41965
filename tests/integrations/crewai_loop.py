"""``MemgasCrewMemory`` inside CrewAI's own loop, run in the CrewAI environment (``.venv-crewai``; CrewAI pins
``openai<3``, which the OpenAI Agents SDK cannot share) by ``test_own_environments.py``: 40 ``Agent.kickoff`` calls of one
conversation, the agent's memory memgas, the model a CrewAI ``BaseLLM`` of the test's own that records each prompt:
the shared scenario (``tests/support/scenario.py``), what CrewAI keeps, and the docs' CrewAI example."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

os.environ.setdefault("CREWAI_DISABLE_TELEMETRY", "true")
os.environ.setdefault("OTEL_SDK_DISABLED", "true")

from crewai import Agent  # after telemetry is off
from crewai.llms.base_llm import BaseLLM

from memgas import Memory
from memgas.integrations.crewai import MemgasCrewMemory, said_in
from support.scenario import (
    FACT,
    QUESTION,
    check_not_recalled,
    check_recalled,
    check_recalled_later,
    check_window_lost_it,
    turns,
)


class Scripted(BaseLLM):  # type: ignore[misc]
    """Answers "Noted." and keeps every prompt it is sent, as text."""

    prompts: list[str] = []

    def call(self, messages: Any, *args: Any, **kwargs: Any) -> str:
        self.prompts.append(messages if isinstance(messages, str) else
                            "\n".join(str(m.get("content")) for m in messages))
        return "Noted."

    def supports_function_calling(self) -> bool:
        return False


def conversation(mem: Memory, user: str, session: str, said: list[str]) -> list[str]:
    llm = Scripted(model="scripted", prompts=[])
    agent = Agent(role="coach", goal="help the user", backstory="a gym coach", llm=llm,
                  memory=MemgasCrewMemory(mem, user_id=user, session_id=session))
    for text in said:
        agent.kickoff(text)
    return llm.prompts


def without_memories(prompt: str) -> str:
    """The prompt without the block CrewAI writes the recalled memories into."""
    return re.sub(r"Relevant memories:.*?IMPORTANT:", "", prompt, flags=re.S)


def test_the_shared_scenario_in_the_kickoff_loop() -> None:
    with Memory() as mem:
        last = conversation(mem, "ana", "chat-1", turns())[-1]
        check_window_lost_it(without_memories(last))  # a kickoff shows the model its own message only
        check_recalled(last)
        kept = [m.content for m in mem.get("chat-1", user_id="ana").messages]
        assert kept[2:4] == [FACT, "Noted."] and len(kept) == 2 * len(turns())  # as said, no LLM distilling it
        check_recalled_later(conversation(mem, "ana", "chat-2", [QUESTION])[-1])
        check_not_recalled(conversation(mem, "bo", "chat-3", [QUESTION])[-1])


def test_what_crewai_keeps_becomes_the_request_and_the_result() -> None:
    assert said_in("Input: My locker code is 4512.\nAgent: coach\nResult: Noted.") == [
        {"role": "user", "content": FACT}, {"role": "assistant", "content": "Noted.", "name": "coach"}]
    assert said_in("Task: Plan a week.\nAgent: coach\nExpected result: a plan\nResult: Mon: row.")[0] == {
        "role": "user", "content": "Plan a week."}
    assert said_in("a free-standing note") == [{"role": "user", "content": "a free-standing note"}]
    with Memory() as mem:
        read_only = MemgasCrewMemory(mem, user_id="ana", session_id="s", read_only=True)
        assert read_only.remember_many([FACT]) == [] and mem.list(user_id="ana") == []
        assert MemgasCrewMemory(mem, user_id="ana", session_id="s").recall(QUESTION) == []


def test_the_docs_crewai_example_runs(tmp_path: Path, monkeypatch: Any) -> None:
    """The frameworks guide's CrewAI block (the docs' own runner leaves it to this environment)."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "guides" / "frameworks.md").read_text(encoding="utf-8")
    (block,) = [b for b in re.findall(r"^```python\n(.*?)^```", page, re.S | re.M) if "from crewai" in b]
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {}
    exec(compile("from memgas import Memory\n" + block, "frameworks.md", "exec"), namespace)
    assert isinstance(namespace["agent"].memory, MemgasCrewMemory)
