"""Agno: ``MemgasAgnoMemory``, memgas as an Agno agent's long-term memory through Agno's own hooks: a run dependency
(the context for the run's input) and a post-hook (the run kept in memgas). Extra ``agno``.

What maps to what: Agno's ``user_id`` is memgas's ``user_id``, an Agno session (``session_id``) one memgas session of
the same id, a run two messages of it (the input as ``user``, the reply as ``assistant``). Agno shows the model the
latest ``num_history_runs`` runs of its session (``add_history_to_context``): give the agent the same number as
``window_runs``, and the context leaves those runs out (``Memory.context``'s ``in_prompt``) while the session's older
runs and every other conversation of the user are recalled. The run being answered is kept only after it ran (a
post-hook), so it never recalls itself.

Wire it with::

    memory = MemgasAgnoMemory(Memory("memory.db"), window_runs=3)
    agent = Agent(model=..., db=InMemoryDb(), add_history_to_context=True, num_history_runs=3,
                  dependencies={"memory": memory.context}, add_dependencies_to_context=True,
                  post_hooks=[memory.keep])
"""

from __future__ import annotations

from typing import Any

from agno.run.agent import RunInput, RunOutput
from agno.run.base import RunContext

from memgas.integrations.calls import AnyMemory, call

__all__ = ["MemgasAgnoMemory"]


class MemgasAgnoMemory:
    """memgas for an Agno agent (see the module docstring).

    Args:
        memory: a ``Memory`` or ``Client`` (Agno resolves dependencies and runs post-hooks synchronously).
        window_runs: the agent's ``num_history_runs``: the runs its prompt holds as they are.
        k: sessions the context draws on.
        max_tokens: the context's budget (4 characters a token).
    """

    def __init__(self, memory: AnyMemory, *, window_runs: int = 3, k: int = 5, max_tokens: int = 800) -> None:
        if window_runs < 0:
            raise ValueError("window_runs must be 0 or more")
        self.memory, self.window_runs, self.k, self.max_tokens = memory, window_runs, k, max_tokens

    def context(self, run_input: RunInput, run_context: RunContext) -> str:
        """The run dependency: what memgas recalls for the run's input (``""`` when nothing, or no user)."""
        asked = run_input.input_content_string() if run_input is not None else ""
        if not asked.strip() or not run_context.user_id:
            return ""
        held = {run_context.session_id: 2 * self.window_runs} if run_context.session_id else None
        text = call(self.memory.context, asked[:10_000], user_id=run_context.user_id, k=self.k,
                    max_tokens=self.max_tokens, in_prompt=held)
        return str(text)

    def keep(self, run_output: RunOutput, run_context: RunContext) -> None:
        """The post-hook: append the run's input and reply to the memgas session of the Agno session."""
        if not run_context.user_id or not run_context.session_id:
            return
        said = run_output.input.input_content_string() if run_output.input is not None else ""
        reply = run_output.content if isinstance(run_output.content, str) else str(run_output.content or "")
        messages: list[dict[str, Any]] = [{"role": role, "content": text} for role, text in
                                          (("user", said), ("assistant", reply)) if text.strip()]
        if messages:
            call(self.memory.append, messages, user_id=run_context.user_id, session_id=run_context.session_id)
