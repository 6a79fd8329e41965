"""``MemgasMemoryBlock`` with LlamaIndex's own package: the block protocol on a real store, and a chat engine whose
model (LlamaIndex's ``MockLLM``, which answers with the prompt it was given) receives a fact stored in an earlier
conversation."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("llama_index.core", reason="llama-index-core is not installed (pip install 'memgas[llamaindex]')")

from llama_index.core.chat_engine import SimpleChatEngine
from llama_index.core.llms import ChatMessage, MockLLM
from llama_index.core.memory import Memory as LlamaMemory

from memgas import AsyncMemory, Memory
from memgas.embed.base import Embedder
from memgas.integrations.llamaindex import MemgasMemoryBlock


def test_put_appends_to_the_session_and_get_recalls_the_other_sessions(embedder: Embedder) -> None:
    with Memory(embedder=embedder) as mem:
        mem.add("I adopted a greyhound called Pixel.", user_id="ana", session_id="pets")
        block = MemgasMemoryBlock(memory=AsyncMemory(mem), user_id="ana", session_id="today", max_tokens=80)
        asyncio.run(block.aput([ChatMessage(role="user", content="Remind me of my dog's name later."),
                                ChatMessage(role="assistant", content="Sure.")]))
        assert [m.content for m in mem.get("today", user_id="ana").messages] == [
            "Remind me of my dog's name later.", "Sure."]
        recalled = asyncio.run(block.aget([ChatMessage(role="user", content="What is my dog called?")]))
        assert "· pets · user: I adopted a greyhound called Pixel." in recalled and "· today ·" not in recalled
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
