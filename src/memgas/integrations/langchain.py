"""LangChain: ``MemgasRetriever`` (a ``BaseRetriever``) and ``MemgasChatMessageHistory`` (a
``BaseChatMessageHistory`` over one memgas session). Extra ``langchain`` (``langchain-core``).

What maps to what:

- a retriever call is :meth:`Memory.search <memgas.memory.Memory.search>` for the retriever's ``user_id``; each
  hit is one ``Document`` whose ``page_content`` is the session's best turns (best first, one
  ``speaker: text`` line per message) and whose ``metadata`` holds ``session_id``, ``timestamp`` (ISO 8601),
  ``score``, ``relevance`` and the ``turns`` shown; ``k`` per call overrides the retriever's;
- a chat history is one session (``session_id``) of one user: ``add_messages`` is
  :meth:`Memory.append <memgas.memory.Memory.append>` (the session is made on the first one), ``messages`` reads
  it back, ``clear`` deletes it. ``HumanMessage`` is ``user``, ``AIMessage`` ``assistant`` (its tool calls are kept
  as ``[tool call] name({...})`` lines), ``SystemMessage`` ``system``, ``ToolMessage`` ``tool``; read back, a
  message keeps its role and content (tool calls come back as those lines, tool results without their call id).

>>> from memgas import Memory
>>> from memgas.integrations.langchain import MemgasRetriever
>>> mem = Memory()
>>> _ = mem.add("My locker code is 4512.", user_id="ana", session_id="gym")
>>> [d.metadata["session_id"] for d in MemgasRetriever(memory=mem, user_id="ana").invoke("locker code?")]
['gym']
"""

from __future__ import annotations

from typing import Any, Sequence

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field

from memgas.core.errors import NotFoundError
from memgas.core.types import Hit
from memgas.integrations.calls import AnyMemory, acall, call

__all__ = ["MemgasRetriever", "MemgasChatMessageHistory", "to_memgas", "from_memgas"]


def _document(hit: Hit) -> Document:
    turns = sorted(hit.turns, key=lambda t: -t.score)
    return Document(page_content="\n".join(t.text for t in turns),
                    metadata={"session_id": hit.session_id,
                              "timestamp": hit.timestamp.isoformat() if hit.timestamp else None,
                              "score": float(hit.score), "relevance": float(hit.relevance),
                              "turns": [t.index for t in turns]})


class MemgasRetriever(BaseRetriever):
    """The sessions of ``user_id`` most relevant to a query, as ``Document``\\ s (see the module docstring).

    Args:
        memory: a ``Memory``, ``AsyncMemory``, ``Client`` or ``AsyncClient``.
        user_id: whose memory.
        k: how many sessions (a call's ``k=`` overrides it).
        exclude_sessions: sessions never returned (the conversation already in the prompt).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    memory: Any
    user_id: str
    k: int = 4
    exclude_sessions: list[str] = Field(default_factory=list)

    def _options(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        return {"user_id": self.user_id, "k": kwargs.get("k", self.k), "exclude_sessions": self.exclude_sessions}

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun,
                                **kwargs: Any) -> list[Document]:
        return [_document(h) for h in call(self.memory.search, query, **self._options(kwargs))]

    async def _aget_relevant_documents(self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun,
                                       **kwargs: Any) -> list[Document]:
        return [_document(h) for h in await acall(self.memory.search, query, **self._options(kwargs))]


def to_memgas(message: BaseMessage) -> dict[str, Any]:
    """A LangChain message as memgas stores it."""
    content = message.content  # a string, or content parts (memgas reads both)
    if isinstance(message, HumanMessage):
        return {"role": "user", "content": content, **({"name": message.name} if message.name else {})}
    if isinstance(message, AIMessage):
        calls = [{"function": {"name": c["name"], "arguments": c["args"]}} for c in message.tool_calls]
        return {"role": "assistant", "content": content or None, **({"tool_calls": calls} if calls else {})}
    if isinstance(message, SystemMessage):
        return {"role": "system", "content": content}
    if isinstance(message, ToolMessage):
        return {"role": "tool", "content": content, **({"name": message.name} if message.name else {})}
    return {"role": "user", "content": content}


def from_memgas(message: dict[str, Any]) -> BaseMessage:
    """A stored memgas message as a LangChain message."""
    role, content, name = message["role"], message["content"], message.get("name")
    if role == "assistant":
        return AIMessage(content=content, name=name)
    if role == "system":
        return SystemMessage(content=content)
    if role == "tool":
        return ToolMessage(content=content, tool_call_id="", name=name)
    return HumanMessage(content=content, name=name)


class MemgasChatMessageHistory(BaseChatMessageHistory):
    """One memgas session as a LangChain chat history (see the module docstring).

    Args:
        memory: a ``Memory``, ``AsyncMemory``, ``Client`` or ``AsyncClient``.
        user_id: whose memory.
        session_id: the conversation.
    """

    def __init__(self, memory: AnyMemory, *, user_id: str, session_id: str) -> None:
        self.memory, self.user_id, self.session_id = memory, user_id, session_id

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """The session's messages, oldest first (none before the first ``add_messages``)."""
        try:
            stored = call(self.memory.get, self.session_id, user_id=self.user_id)
        except NotFoundError:
            return []
        return [from_memgas(m.to_dict()) for m in stored.messages]

    async def aget_messages(self) -> list[BaseMessage]:
        try:
            stored = await acall(self.memory.get, self.session_id, user_id=self.user_id)
        except NotFoundError:
            return []
        return [from_memgas(m.to_dict()) for m in stored.messages]

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Append the messages to the session (made on the first call)."""
        if messages:
            call(self.memory.append, [to_memgas(m) for m in messages], user_id=self.user_id,
                 session_id=self.session_id)

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        if messages:
            await acall(self.memory.append, [to_memgas(m) for m in messages], user_id=self.user_id,
                        session_id=self.session_id)

    def clear(self) -> None:
        """Delete the session (and everything memgas derived from it)."""
        try:
            call(self.memory.delete, self.session_id, user_id=self.user_id)
        except NotFoundError:
            pass

    async def aclear(self) -> None:
        try:
            await acall(self.memory.delete, self.session_id, user_id=self.user_id)
        except NotFoundError:
            pass
