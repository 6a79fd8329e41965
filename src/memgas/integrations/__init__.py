"""memgas inside agent frameworks: one module per framework, each behind its own extra, each taking a
:class:`~memgas.memory.Memory`, an :class:`~memgas.async_memory.AsyncMemory`, or a
:class:`~memgas.client.Client` / :class:`~memgas.client.AsyncClient` (memgas over HTTP) interchangeably.

- :mod:`memgas.integrations.langchain`: ``MemgasRetriever`` (a ``BaseRetriever``) and
  ``MemgasChatMessageHistory`` (a ``BaseChatMessageHistory`` over one session); extra ``langchain``;
- :mod:`memgas.integrations.langgraph`: ``MemgasStore`` (a ``BaseStore``); extra ``langgraph``;
- :mod:`memgas.integrations.llamaindex`: ``MemgasMemoryBlock`` (a ``BaseMemoryBlock``); extra ``llamaindex``;
- :mod:`memgas.integrations.autogen`: ``MemgasMemory`` (an ``autogen_core.memory.Memory``, optionally keeping the conversation);
  extra ``autogen``;
- :mod:`memgas.integrations.openai_agents`: ``MemgasSession`` (the Agents SDK's ``Session``) and ``memgas_tools``;
  extra ``openai-agents``;
- :mod:`memgas.integrations.pydantic_ai`: ``MemgasHistory`` (a history processor: a window, what leaves it kept, the
  context added) and ``memgas_toolset``; extra ``pydantic-ai``;
- :mod:`memgas.integrations.adk`: ``MemgasMemoryService`` (Google ADK's ``BaseMemoryService``); extra ``adk``;
- :mod:`memgas.integrations.agno`: ``MemgasAgnoMemory`` (a run dependency and a post-hook of an Agno agent); extra
  ``agno``;
- :mod:`memgas.integrations.strands`: ``MemgasMemoryStore`` (a store for Strands' ``MemoryManager``); extra
  ``strands`` (not beside ``server``: Strands pins ``mcp<2.2``);
- :mod:`memgas.integrations.crewai`: ``MemgasCrewMemory`` (a CrewAI ``Memory``); extra ``crewai`` (not beside
  ``openai-agents``: CrewAI pins ``openai<3``).

Only the facades are called: an adapter maps the framework's objects to memgas's calls and back.
"""
