"""``MemgasStore`` with LangGraph's own package: the BaseStore protocol (sync and async) on a real store, items
searchable as soon as ``put`` returns, and a compiled graph whose node reads the store and whose (scripted)
model receives, in its prompt, a fact put in an earlier run."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest

pytest.importorskip("langgraph.store.base", reason="langgraph is not installed (pip install -e '.[langgraph]')")

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.store.base import BaseStore, Item, SearchItem

from memgas import AsyncMemory, Memory
from memgas.core.errors import InvalidInputError
from memgas.embed.base import Embedder
from memgas.integrations.langgraph import MemgasStore, item_text
from support.recorder import Recorder
from support.scenario import (
    QUESTION,
    check_not_recalled,
    check_recalled,
    check_recalled_later,
    check_window_lost_it,
    turns,
)


def test_put_get_search_delete_and_namespaces(tmp_path: Path, embedder: Embedder) -> None:
    with Memory(tmp_path / "lg.db", embedder=embedder) as mem:
        store = MemgasStore(mem)
        assert isinstance(store, BaseStore)
        store.put(("ana", "memories"), "gym", {"text": "My locker code is 4512.", "kind": "fact"})
        store.put(("ana", "memories"), "dog", {"text": "I adopted a greyhound called Pixel.", "kind": "fact"})
        store.put(("ana", "prefs", "food"), "nuts", {"allergy": "peanuts", "severity": 3})
        store.put(("bo", "memories"), "gym", {"text": "Bo's locker code is 9999."})
        got = store.get(("ana", "memories"), "gym")
        assert isinstance(got, Item) and got.value == {"text": "My locker code is 4512.", "kind": "fact"}
        assert got.namespace == ("ana", "memories") and got.created_at <= got.updated_at
        hits = store.search(("ana",), query="what is my locker code?")  # searchable as soon as put returned
        assert [h.key for h in hits][0] == "gym" and isinstance(hits[0], SearchItem) and 0 < hits[0].score <= 1
        assert "9999" not in str([h.value for h in hits])  # another user's items never show
        assert [h.key for h in store.search(("ana", "prefs"), query="allergy")] == ["nuts"]
        assert [h.key for h in store.search(("ana",), query="pet", filter={"kind": "fact"}, limit=1)] == ["dog"]
        # a plain memgas session of the user about lockers too never shows as an item, and k = limit still finds one
        mem.add("My other locker code is 1234.", user_id="ana", session_id="plain")
        assert [h.key for h in store.search(("ana",), query="locker code 1234", limit=1)] == ["gym"]
        store.put(("ana", "memories"), "tagged", {"text": "Locker at the pool.", "tags": ["swim", "pool"]})
        nested = store.search(("ana",), query="locker", filter={"tags": ["swim", "pool"]})  # checked on the hits
        assert [h.key for h in nested] == ["tagged"]
        assert store.search(("ana", "nothing"), query="locker") == []
        store.delete(("ana", "memories"), "tagged")
        mem.delete("plain", user_id="ana")
        assert {h.key for h in store.search(("ana", "memories"))} == {"gym", "dog"}  # no query: the items
        assert store.list_namespaces(prefix=("ana",)) == [("ana", "memories"), ("ana", "prefs", "food")]
        assert store.list_namespaces(max_depth=2) == [("ana", "memories"), ("ana", "prefs"), ("bo", "memories")]
        first = store.get(("ana", "memories"), "gym")
        store.put(("ana", "memories"), "gym", {"text": "My locker code is now 7781."})
        again = store.get(("ana", "memories"), "gym")
        assert again.value["text"].endswith("7781.") and again.created_at == first.created_at  # replaced
        assert "4512" not in str(mem.get(mem.list(user_id="ana")[0].session_id, user_id="ana"))
        store.delete(("ana", "memories"), "gym")
        assert store.get(("ana", "memories"), "gym") is None
        assert [h.key for h in store.search(("ana",), query="locker code")] != ["gym"]
        store.put(("ana", "odd names/with spaces"), "key with ü & /", {"text": "kept"})
        assert store.get(("ana", "odd names/with spaces"), "key with ü & /").value == {"text": "kept"}
        with pytest.raises(InvalidInputError, match="user_id"):  # the first element is a memgas user id
            store.put(("not a user id", "m"), "k", {"text": "no user"})
        assert item_text({"a": 1, "b": {"c": [2]}}) == 'a: 1\nb: {"c": [2]}'


def test_the_async_operations_over_an_async_memory(embedder: Embedder) -> None:
    async def scenario() -> list[str]:
        async with AsyncMemory(embedder=embedder) as mem:
            store = MemgasStore(mem)
            await store.aput(("ana", "m"), "k1", {"text": "I play the cello on Sundays."})
            await store.aput(("ana", "m"), "k2", {"text": "My sister lives in Bergen."})
            assert (await store.aget(("ana", "m"), "k1")).value["text"].startswith("I play")
            return [h.key for h in await store.asearch(("ana",), query="where does my sister live?")]

    assert asyncio.run(scenario())[0] == "k2"


class State(TypedDict):
    user: str
    question: str
    prompt: str
    answer: str


def test_a_fact_put_in_one_run_reaches_the_models_prompt_in_the_next(embedder: Embedder) -> None:
    model = GenericFakeChatModel(messages=iter([AIMessage("Noted."), AIMessage("Your locker code is 4512.")]))

    def remember(state: State, *, store: BaseStore) -> dict[str, Any]:
        if "remember" in state["question"].lower():
            store.put((state["user"], "memories"), "fact-1", {"text": state["question"]})
        return {}

    def respond(state: State, *, store: BaseStore) -> dict[str, Any]:
        memories = store.search((state["user"], "memories"), query=state["question"], limit=3)
        prompt = "Memories:\n" + "\n".join(m.value["text"] for m in memories)
        reply = model.invoke([SystemMessage(prompt), HumanMessage(state["question"])])
        return {"prompt": prompt, "answer": reply.content}

    with Memory(embedder=embedder) as mem:
        graph = StateGraph(State)
        graph.add_node("remember", remember)
        graph.add_node("respond", respond)
        graph.add_edge(START, "remember")
        graph.add_edge("remember", "respond")
        graph.add_edge("respond", END)
        app = graph.compile(store=MemgasStore(mem))
        app.invoke({"user": "ana", "question": "Remember: my locker code is 4512."})
        later = app.invoke({"user": "ana", "question": "What is my locker code?"})
        assert "my locker code is 4512" in later["prompt"] and later["answer"] == "Your locker code is 4512."


class Chat(TypedDict):
    messages: Annotated[list[Any], add_messages]


@pytest.mark.slow
def test_the_shared_scenario_in_a_compiled_graph(embedder: Embedder) -> None:
    """A graph with a checkpointer (the thread: the short-term conversation) and the memgas store (long-term): the
    node shows the model the thread's latest 10 messages and what the store finds for the question, then puts the
    user's message into the store; 40 turns later the fact of turn 2 is in the prompt through the store."""
    from langgraph.checkpoint.memory import InMemorySaver

    def respond(state: Chat, config: RunnableConfig, *, store: BaseStore) -> dict[str, Any]:
        user, thread = config["configurable"]["user"], config["configurable"]["thread_id"]
        asked = state["messages"][-1].content
        found = store.search((user,), query=asked, limit=3)
        memory = SystemMessage("Memories:\n" + "\n".join(item.value["text"] for item in found))
        reply = model.invoke([memory, *state["messages"][-10:]])
        store.put((user, thread), f"turn-{len(state['messages'])}", {"text": asked})  # after: never the question
        return {"messages": [reply]}

    model = Recorder(prompts=[])
    graph = StateGraph(Chat)
    graph.add_node("respond", respond)
    graph.add_edge(START, "respond")
    graph.add_edge("respond", END)

    def conversation(app: Any, user: str, thread: str, said: list[str]) -> str:
        for text in said:
            app.invoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": thread, "user": user}})
        return model.prompts[-1]

    with Memory(embedder=embedder) as mem:
        app = graph.compile(checkpointer=InMemorySaver(), store=MemgasStore(mem))
        prompt = conversation(app, "ana", "chat-1", turns())
        check_window_lost_it(prompt.split("\n", 1)[1].split("\nhuman: ", 1)[1])  # the thread's messages alone
        check_recalled(prompt)
        check_recalled_later(conversation(app, "ana", "chat-2", [QUESTION]))
        check_not_recalled(conversation(app, "bo", "chat-3", [QUESTION]))


def test_the_index_config_names_the_fields_ranked_and_index_false_keeps_an_item_out_of_queries(
        embedder: Embedder) -> None:
    with Memory(embedder=embedder) as mem:
        store = MemgasStore(mem, index={"dims": 384, "fields": ["note", "place.city"]})
        store.put(("ana", "m"), "trip", {"note": "I flew to Bergen", "place": {"city": "Bergen"}, "id": 7})
        store.put(("ana", "m"), "code", {"text": "My locker code is 4512."}, index=False)
        store.put(("ana", "m"), "pet", {"title": "dog", "body": "I adopted a greyhound called Pixel."},
                  index=["body"])
        assert mem.get("lg/m/trip", user_id="ana").messages[0].content == "I flew to Bergen\nBergen"
        assert mem.get("lg/m/pet", user_id="ana").messages[0].content == "I adopted a greyhound called Pixel."
        assert [h.key for h in store.search(("ana",), query="what is my locker code?")] != ["code"]
        assert "code" not in [h.key for h in store.search(("ana",), query="locker code 4512")]
        assert store.get(("ana", "m"), "code").value["text"] == "My locker code is 4512."  # kept, not ranked
        assert {h.key for h in store.search(("ana", "m"))} == {"trip", "code", "pet"}  # no query: every item
        assert store.search(("ana",), query="which dog did I adopt?")[0].key == "pet"


def test_an_item_stored_before_the_index_flag_is_still_ranked(embedder: Embedder) -> None:
    with Memory(embedder=embedder) as mem:
        store = MemgasStore(mem)
        store.put(("ana", "m"), "code", {"text": "My locker code is 4512."})
        old = mem.get("lg/m/code", user_id="ana")
        meta = {"langgraph": {k: v for k, v in old.metadata["langgraph"].items() if k != "indexed"}}
        mem.delete("lg/m/code", user_id="ana")
        mem.add(old.messages[0].content, user_id="ana", session_id="lg/m/code", metadata=meta)
        assert [h.key for h in store.search(("ana",), query="what is my locker code?")] == ["code"]
