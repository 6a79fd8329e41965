"""Experience memory: what worked, not what was said.

* :mod:`.bank`: one scope's items (an agent's or a user's), matched by the embedding of their key text.
* :mod:`.bot`: Buffer of Thoughts (Yang et al. 2024): thought templates distilled from solved problems,
  retrieved by a distilled problem description and instantiated for a new problem.
* :mod:`.principles`: PRINCIPLES: strategy principles from simulated dialogues judged by a critic,
  retrieved by situation and rewritten for the current conversation.
* :mod:`.facade`: :class:`Experience`, the entry point over a store, an embedder and an LLM.
"""
