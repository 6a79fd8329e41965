"""The LangChain adapters with LangChain's own package: the standard retriever suite of ``langchain-tests``, the chat
history round trip over sync and async facades, and a chain whose (scripted) model receives, in its prompt, a fact
stored in an earlier conversation."""

from __future__ import annotations

import asyncio
import functools
from typing import Any

import pytest

pytest.importorskip("langchain_core", reason="langchain-core is not installed (pip install -e '.[langchain]')")
tests_base = pytest.importorskip("langchain_tests.integration_tests",
                                 reason="langchain-tests is not installed (scripts/test installs it)")

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableLambda, RunnablePassthrough

from memgas import AsyncMemory, Memory
from memgas.embed.factory import get_embedder
from memgas.integrations.langchain import MemgasChatMessageHistory, MemgasRetriever
from support.recorder import Recorder
from support.scenario import (
    QUESTION,
    check_not_recalled,
    check_recalled,
    check_recalled_later,
    check_window_lost_it,
    turns,
)

FACTS = ["My locker code at the gym is 4512.", "I adopted a greyhound called Pixel.", "My sister lives in Bergen.",
         "I am allergic to peanuts.", "I play the cello on Sundays."]


@functools.cache
def shared_memory() -> Memory:
    """One in-memory store with five sessions for the standard suite (its properties cannot take fixtures)."""
    mem = Memory(embedder=get_embedder())
    for i, fact in enumerate(FACTS):
        mem.add([{"role": "user", "content": fact}, {"role": "assistant", "content": "Noted."}], user_id="ana",
                session_id=f"s{i}", timestamp=f"2024-05-0{i + 1}")
    return mem


class TestMemgasRetrieverStandard(tests_base.RetrieversIntegrationTests):
    @property
    def retriever_constructor(self) -> type[MemgasRetriever]:
        return MemgasRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"memory": shared_memory(), "user_id": "ana"}

    @property
    def retriever_query_example(self) -> str:
        return "what is my locker code?"


def test_documents_carry_the_session_its_time_and_scores() -> None:
    docs = MemgasRetriever(memory=shared_memory(), user_id="ana", k=2).invoke("what is my locker code?")
    assert len(docs) == 2 and docs[0].metadata["session_id"] == "s0"
    assert docs[0].page_content.startswith("user: My locker code at the gym is 4512.")
    assert docs[0].metadata["timestamp"].startswith("2024-05-01") and 0 < docs[0].metadata["relevance"] <= 1
    assert docs[0].metadata["score"] >= docs[1].metadata["score"]
    excluded = MemgasRetriever(memory=shared_memory(), user_id="ana", k=2, exclude_sessions=["s0"])
    assert "s0" not in [d.metadata["session_id"] for d in excluded.invoke("what is my locker code?")]
    assert MemgasRetriever(memory=shared_memory(), user_id="nobody").invoke("anything") == []


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_chat_history_is_one_session(kind: str, embedder) -> None:  # type: ignore[no-untyped-def]
    messages = [SystemMessage("Be brief."), HumanMessage("Book a table at Zuma."),
                AIMessage("", tool_calls=[{"name": "book", "args": {"venue": "Zuma"}, "id": "c1"}]),
                ToolMessage("booked for 8pm", tool_call_id="c1"), AIMessage("Done: 8pm at Zuma.")]
    with Memory(embedder=embedder) as mem:
        history = MemgasChatMessageHistory(mem if kind == "sync" else AsyncMemory(mem), user_id="u", session_id="chat")

        async def run() -> list[Any]:
            assert await history.aget_messages() == []
            await history.aadd_messages(messages[:2])
            await history.aadd_messages(messages[2:])
            got = await history.aget_messages()
            await history.aclear()
            return got

        if kind == "async":
            got = asyncio.run(run())
        else:
            assert history.messages == []
            history.add_messages(messages[:2])
            history.add_messages(messages[2:])
            got = history.messages
            history.clear()
        assert [type(m).__name__ for m in got] == ["SystemMessage", "HumanMessage", "AIMessage", "ToolMessage",
                                                   "AIMessage"]
        assert got[2].content == '[tool call] book({"venue": "Zuma"})' and got[3].content == "booked for 8pm"
        assert mem.list(user_id="u") == []  # clear deleted the session


def test_a_fact_from_one_conversation_reaches_the_models_prompt_in_the_next(embedder) -> None:  # type: ignore[no-untyped-def]
    with Memory(embedder=embedder) as mem:
        first = MemgasChatMessageHistory(mem, user_id="bo", session_id="monday")
        first.add_messages([HumanMessage("Remember: my locker code is 4512."), AIMessage("Got it.")])
        for i, fact in enumerate(FACTS[1:]):
            mem.add(fact, user_id="bo", session_id=f"other-{i}")
        prompts: list[str] = []

        def capture(value: Any) -> Any:
            prompts.append(value.to_string())
            return value

        prompt = ChatPromptTemplate.from_messages([("system", "Memories:\n{context}"), ("human", "{question}")])
        model = GenericFakeChatModel(messages=iter([AIMessage("Your locker code is 4512.")]))
        retriever = MemgasRetriever(memory=mem, user_id="bo", k=2, exclude_sessions=["tuesday"])
        chain = ({"context": retriever | RunnableLambda(lambda docs: "\n".join(d.page_content for d in docs)),
                  "question": RunnablePassthrough()} | prompt | RunnableLambda(capture) | model)
        answer = chain.invoke("What is my locker code?")
        assert answer.content == "Your locker code is 4512."
        assert "my locker code is 4512" in prompts[0]  # the stored fact is in what the model read


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:RunnableWithMessageHistory is deprecated")  # the issue names it; still shipped
def test_the_shared_scenario_in_a_chain_with_message_history(embedder: Any) -> None:
    """``RunnableWithMessageHistory`` keeps each conversation in memgas (``MemgasChatMessageHistory``); the chain
    shows the model the latest 10 messages and what ``MemgasRetriever`` finds for the question (LangChain stores the
    turn after the chain has run, so the question being asked is not memory yet)."""
    from langchain_core.prompts import MessagesPlaceholder
    from langchain_core.runnables.history import RunnableWithMessageHistory

    with Memory(embedder=embedder) as mem:
        model = Recorder(prompts=[])
        prompt = ChatPromptTemplate.from_messages([("system", "Memories:\n{memories}"),
                                                   MessagesPlaceholder("history"), ("human", "{question}")])

        def chain_for(user: str) -> Any:
            retriever = MemgasRetriever(memory=mem, user_id=user, k=3)
            recall = RunnableLambda(lambda x: "\n".join(d.page_content for d in retriever.invoke(x["question"])))
            chain = (RunnablePassthrough.assign(memories=recall, history=lambda x: x["history"][-10:])
                     | prompt | model)
            return RunnableWithMessageHistory(
                chain, lambda session_id: MemgasChatMessageHistory(mem, user_id=user, session_id=session_id),
                input_messages_key="question", history_messages_key="history")

        def conversation(user: str, session: str, said: list[str]) -> str:
            chain = chain_for(user)
            for text in said:
                chain.invoke({"question": text}, {"configurable": {"session_id": session}})
            return model.prompts[-1]

        last = conversation("ana", "chat-1", turns())
        check_window_lost_it(last.split("\nhuman: ", 1)[1])  # what follows the memories: the window and the question
        check_recalled(last)
        assert len(mem.get("chat-1", user_id="ana").messages) == 2 * len(turns())
        check_recalled_later(conversation("ana", "chat-2", [QUESTION]))
        check_not_recalled(conversation("bo", "chat-3", [QUESTION]))
