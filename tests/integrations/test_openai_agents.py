"""``MemgasSession`` and ``memgas_tools`` with the OpenAI Agents SDK's own package: the Session protocol on a real
store (every kind of item round-trips), and two ``Runner.run`` conversations whose model is the loopback
OpenAI-protocol stub: a fact told in the first reaches the model's prompt in the second through the memory tool."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

agents = pytest.importorskip("agents", reason="openai-agents is not installed (pip install -e '.[openai-agents]')")

from agents.tool_context import ToolContext

from memgas import AsyncMemory, Memory
from memgas.embed.base import Embedder
from memgas.integrations.openai_agents import MemgasSession, item_message, memgas_tools
from support.openai_stub import OpenAIStub, completion_payload
from support.scenario import (
    QUESTION,
    check_not_recalled,
    check_recalled,
    check_recalled_later,
    check_window_lost_it,
    turns,
)

ITEMS: list[dict[str, Any]] = [
    {"role": "user", "content": "What's the weather in Lisbon?"},
    {"type": "reasoning", "id": "rs_1", "summary": []},
    {"type": "function_call", "call_id": "call_1", "name": "weather", "arguments": '{"city": "Lisbon"}',
     "id": "fc_1", "status": "completed"},
    {"type": "function_call_output", "call_id": "call_1", "output": "sunny, 24 C"},
    {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
     "content": [{"type": "output_text", "text": "It is sunny in Lisbon, 24 C.", "annotations": []}]},
    {"role": "developer", "content": [{"type": "input_text", "text": "Answer briefly."}]},
]


def test_the_session_protocol_round_trips_every_kind_of_item(embedder: Embedder) -> None:
    async def scenario() -> None:
        with Memory(embedder=embedder) as mem:
            session = MemgasSession("chat-1", AsyncMemory(mem), user_id="ana")
            assert isinstance(session, agents.memory.Session) and await session.get_items() == []
            await session.add_items(ITEMS[:3])
            await session.add_items(ITEMS[3:])
            assert await session.get_items() == ITEMS
            assert await session.get_items(limit=2) == ITEMS[-2:]
            stored = mem.get("chat-1", user_id="ana").messages
            assert [m.role for m in stored] == ["user", "assistant", "assistant", "tool", "assistant", "system"]
            assert stored[2].content == '[tool call] weather({"city": "Lisbon"})' and stored[3].content == "sunny, 24 C"
            hits = mem.search("weather in Lisbon", user_id="ana", k=1)  # the conversation is memory too
            assert hits[0].session_id == "chat-1"
            assert await session.pop_item() == ITEMS[-1] and await session.get_items() == ITEMS[:-1]
            mem.append("added by hand", user_id="ana", session_id="chat-1")
            assert (await session.get_items(limit=1)) == [{"role": "user", "content": "added by hand"}]
            await session.clear_session()
            assert await session.get_items() == [] and await session.pop_item() is None
            assert mem.list(user_id="ana") == []
            await session.clear_session()  # nothing left: no error

    asyncio.run(scenario())


def test_an_item_becomes_a_message_with_the_item_kept() -> None:
    for item in ITEMS + [{"type": "web_search_call", "id": "ws_1", "status": "completed"},
                         {"type": "message", "role": "assistant", "content": [{"type": "refusal", "refusal": "no"}]}]:
        message = item_message(item)
        assert message["metadata"] == {"openai_agents": item} and message["content"].strip()
    assert item_message(ITEMS[1])["content"] == "[reasoning]"
    assert item_message({"type": "web_search_call"})["content"] == "[web_search_call]"


def _tool_call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    body = completion_payload("")
    body["choices"][0]["message"] = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}]}
    body["choices"][0]["finish_reason"] = "tool_calls"
    return body


def test_a_fact_from_one_run_reaches_the_models_prompt_in_the_next(embedder: Embedder,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from openai import AsyncOpenAI

    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    agents.set_tracing_disabled(True)  # no trace export: nothing leaves the machine

    async def scenario(stub: OpenAIStub) -> list[dict[str, Any]]:
        with Memory(embedder=embedder) as mem:
            model = agents.OpenAIChatCompletionsModel(
                model="stub", openai_client=AsyncOpenAI(base_url=stub.base_url, api_key="test", max_retries=0))
            agent = agents.Agent(name="assistant", instructions="Use memory.", model=model,
                                 tools=memgas_tools(mem, user_id="bo"))
            stub.script += [{"text": "Noted."}]
            first = MemgasSession("monday", mem, user_id="bo")
            await agents.Runner.run(agent, "My locker code is 4512.", session=first)
            assert [i.get("role") for i in await first.get_items()] == ["user", "assistant"]
            stub.script += [{"payload": _tool_call("search_memory", {"query": "locker code"})},
                            {"text": "Your locker code is 4512."}]
            tuesday = MemgasSession("tuesday", mem, user_id="bo")
            result = await agents.Runner.run(agent.clone(tools=tuesday.tools()), "What is my locker code?",
                                             session=tuesday)
            assert result.final_output == "Your locker code is 4512."
            return stub.requests[-1]["messages"]

    with OpenAIStub() as stub:
        prompt = asyncio.run(scenario(stub))
    tool_results = [m for m in prompt if m["role"] == "tool"]
    assert tool_results and "My locker code is 4512." in tool_results[0]["content"]
    # The question the agent is answering is in its prompt already: never recalled as memory (issue 39).
    assert "· tuesday ·" not in tool_results[0]["content"]


def test_a_sessions_tools_leave_its_own_conversation_out(embedder: Embedder) -> None:
    with Memory(embedder=embedder) as mem:
        mem.add("My locker code is 4512.", user_id="bo", session_id="monday")
        live = MemgasSession("tuesday", mem, user_id="bo")
        asyncio.run(live.add_items([{"role": "user", "content": "What is my locker code again?"}]))
        search = {t.name: t for t in live.tools()}["search_memory"]
        everything = {t.name: t for t in memgas_tools(mem, user_id="bo")}["search_memory"]
        args = json.dumps({"query": "what is my locker code"})

        def invoke(tool: Any) -> str:
            ctx = ToolContext(context=None, tool_name=tool.name, tool_call_id="call_1", tool_arguments=args,
                              run_config=agents.RunConfig())
            return str(asyncio.run(tool.on_invoke_tool(ctx, args)))

        own, unscoped = invoke(search), invoke(everything)
        assert "· monday ·" in own and "· tuesday ·" not in own
        assert "· tuesday ·" in unscoped  # what the tools would recall without the session's id


class Scripted(agents.Model):
    """The test's own model: answers "Noted.", except to the scenario's question, which it first answers with a
    ``search_memory`` call; every input it is given is kept as text."""

    def __init__(self) -> None:
        self.inputs: list[str] = []

    async def get_response(self, system_instructions: str | None, input: Any, *args: Any,
                           **kwargs: Any) -> agents.ModelResponse:
        from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

        items = [{"role": "user", "content": input}] if isinstance(input, str) else list(input)
        self.inputs.append(json.dumps(items, default=str))
        asked = items[-1].get("content") == QUESTION if isinstance(items[-1], dict) else False
        if asked:
            call = ResponseFunctionToolCall(type="function_call", call_id="call_1", name="search_memory",
                                            arguments=json.dumps({"query": "locker code"}))
            return agents.ModelResponse(output=[call], usage=agents.Usage(), response_id=None)
        text = ResponseOutputText(type="output_text", text="Noted.", annotations=[])
        message = ResponseOutputMessage(type="message", id="msg_1", role="assistant", status="completed",
                                        content=[text])
        return agents.ModelResponse(output=[message], usage=agents.Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the scenario runs without streaming")


async def _conversation(mem: Memory, user: str, session_id: str, said: list[str], window: int = 10) -> Scripted:
    model = Scripted()
    session = MemgasSession(session_id, mem, user_id=user, window=window)
    agent = agents.Agent(name="assistant", instructions="Use memory.", model=model, tools=session.tools())
    for text in said:
        await agents.Runner.run(agent, text, session=session)
    return model


@pytest.mark.slow
def test_the_shared_scenario_in_the_runner_loop(embedder: Embedder) -> None:
    """A 40-turn conversation through ``Runner.run``: the SDK reads the session's latest 10 items, the fact of turn 2
    comes back through ``search_memory`` from the older part of the same conversation (issue 39: the tools once left
    the whole conversation out, the fact with it)."""
    agents.set_tracing_disabled(True)
    with Memory(embedder=embedder) as mem:
        first = asyncio.run(_conversation(mem, "ana", "chat-1", turns()))
        check_window_lost_it(first.inputs[-2])  # the question's first call: the session's window, no tool output
        check_recalled(first.inputs[-1])  # after search_memory: its output holds the fact
        again = asyncio.run(_conversation(mem, "ana", "chat-2", [QUESTION]))
        check_recalled_later(again.inputs[-1])
        other = asyncio.run(_conversation(mem, "bo", "chat-3", [QUESTION]))
        check_not_recalled(other.inputs[-1])
    with pytest.raises(ValueError, match="window"):
        MemgasSession("x", mem, user_id="ana", window=0)
