"""``MemgasMemoryBlock`` with LlamaIndex's own package: the block protocol on a real store, and a chat engine whose
model (LlamaIndex's ``MockLLM``, which answers with the prompt it was given) receives a fact stored in an earlier
conversation."""

from __future__ import annotations

import asyncio
from typing import Any, Sequence

import pytest

pytest.importorskip("llama_index.core", reason="llama-index-core is not installed (pip install -e '.[llamaindex]')")

from llama_index.core.chat_engine import SimpleChatEngine
from llama_index.core.llms import ChatMessage, ChatResponse, CompletionResponse, CustomLLM, LLMMetadata, MockLLM
from llama_index.core.llms.callbacks import llm_chat_callback, llm_completion_callback
from llama_index.core.memory import Memory as LlamaMemory

from memgas import AsyncMemory, Memory
from memgas.embed.base import Embedder
from memgas.integrations.llamaindex import MemgasMemoryBlock
from support.scenario import (
    QUESTION,
    check_not_recalled,
    check_recalled,
    check_recalled_later,
    check_window_lost_it,
    turns,
)


def test_put_appends_to_the_session_and_get_recalls_the_other_sessions(embedder: Embedder) -> None:
    with Memory(embedder=embedder) as mem:
        mem.add("I adopted a greyhound called Pixel.", user_id="ana", session_id="pets")
        block = MemgasMemoryBlock(memory=AsyncMemory(mem), user_id="ana", session_id="today", max_tokens=80)
        asyncio.run(block.aput([ChatMessage(role="user", content="Remind me of my dog's name later."),
                                ChatMessage(role="assistant", content="Sure.")]))
        assert [m.content for m in mem.get("today", user_id="ana").messages] == [
            "Remind me of my dog's name later.", "Sure."]
        recalled = asyncio.run(block.aget([ChatMessage(role="user", content="What is my dog called?")]))
        assert "user: I adopted a greyhound called Pixel." in recalled and "· pets" in recalled
        assert len(recalled) <= 4 * 80 + 10
        assert asyncio.run(block.aget([])) == ""


def test_a_fact_from_one_conversation_reaches_the_models_prompt_in_the_next(embedder: Embedder) -> None:
    with Memory(embedder=embedder) as mem:
        earlier = MemgasMemoryBlock(memory=mem, user_id="bo", session_id="monday")
        asyncio.run(earlier.aput([ChatMessage(role="user", content="My locker code is 4512."),
                                  ChatMessage(role="assistant", content="Noted.")]))
        block = MemgasMemoryBlock(memory=mem, user_id="bo", session_id="tuesday")
        memory = LlamaMemory.from_defaults(session_id="tuesday", token_limit=40_000, memory_blocks=[block])
        engine = SimpleChatEngine.from_defaults(llm=MockLLM(), memory=memory)
        reply = engine.chat("What is my locker code?")
        assert "· monday · user: My locker code is 4512." in str(reply)  # MockLLM echoes its prompt


def test_what_llamaindex_flushed_from_its_window_is_recalled_from_the_blocks_own_session(embedder: Embedder) -> None:
    """LlamaIndex's Memory flushes old messages into the block (its own session): 60 messages after "My locker code
    is 4512" left the short-term window, the prompt LlamaIndex builds still holds it (issue 39: the block once left
    its own session out of its context, which is exactly where the flushed messages went)."""
    with Memory(embedder=embedder) as mem:
        block = MemgasMemoryBlock(memory=mem, user_id="ana", session_id="chat1", max_tokens=300)
        memory = LlamaMemory.from_defaults(session_id="chat1", token_limit=400, token_flush_size=100,
                                           chat_history_token_ratio=0.5, memory_blocks=[block])
        chatter = [ChatMessage(role="user", content="My locker code is 4512."),
                   ChatMessage(role="assistant", content="Noted.")]
        for i in range(30):
            chatter += [ChatMessage(role="user", content=f"Tell me fact number {i} about the ocean and its tides."),
                        ChatMessage(role="assistant", content=f"Ocean fact {i}: the tides follow the moon.")]
        asyncio.run(memory.aput_messages(chatter))
        asyncio.run(memory.aput(ChatMessage(role="user", content="What is my locker code?")))
        flushed = [m.content for m in mem.get("chat1", user_id="ana").messages]
        assert "My locker code is 4512." in flushed and len(flushed) >= 40  # out of the window, into memgas
        prompt = asyncio.run(memory.aget())
        window = [m for m in prompt if m.role.value != "system"]
        assert all("4512" not in str(m.content) for m in window)  # LlamaIndex's own window no longer holds it
        assert any("My locker code is 4512." in str(m.content) for m in prompt)  # the block's context does


class Scripted(CustomLLM):
    """The test's own LlamaIndex model: answers "Noted." and keeps every prompt it is sent."""

    prompts: list[str] = []

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(is_chat_model=True)

    @llm_chat_callback()
    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        self.prompts.append("\n".join(f"{m.role.value}: {m.content}" for m in messages))
        return ChatResponse(message=ChatMessage(role="assistant", content="Noted."))

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        self.prompts.append(prompt)
        return CompletionResponse(text="Noted.")

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
        raise NotImplementedError


def _conversation(mem: Memory, user: str, session: str, said: list[str]) -> Scripted:
    block = MemgasMemoryBlock(memory=mem, user_id=user, session_id=session, max_tokens=300)
    memory = LlamaMemory.from_defaults(session_id=session, token_limit=400, token_flush_size=100,
                                       chat_history_token_ratio=0.5, memory_blocks=[block])
    llm = Scripted(prompts=[])
    engine = SimpleChatEngine.from_defaults(llm=llm, memory=memory)
    for text in said:
        engine.chat(text)
    return llm


@pytest.mark.slow
def test_the_shared_scenario_in_a_chat_engine(embedder: Embedder) -> None:
    with Memory(embedder=embedder) as mem:
        first = _conversation(mem, "ana", "chat-1", turns())
        prompt = first.prompts[-1]
        window = "\n".join(line for line in prompt.splitlines() if not line.startswith("system:") and "<memory>" not in
                           line and " · chat-1 · " not in line)
        check_window_lost_it(window)
        check_recalled(prompt)
        check_recalled_later(_conversation(mem, "ana", "chat-2", [QUESTION]).prompts[-1])
        check_not_recalled(_conversation(mem, "bo", "chat-3", [QUESTION]).prompts[-1])
