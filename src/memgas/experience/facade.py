"""``Experience``: an agent's (or a user's) experience memory over a store, an embedder and an LLM."""

from __future__ import annotations

from contextlib import ExitStack, closing
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memgas.core.paths import default_llm_cache_path
from memgas.embed.base import Embedder
from memgas.embed.cache import EmbeddingCache
from memgas.embed.factory import get_embedder
from memgas.experience.bank import ExperienceBank, scope_of
from memgas.llm.base import ChatModel
from memgas.llm.factory import get_llm
from memgas.llm.wrapper import LLM
from memgas.store import Store, open_store

if TYPE_CHECKING:
    from memgas.experience.principles import Principles
    from memgas.experience.thoughts import BufferOfThoughts

__all__ = ["Experience"]


class Experience:
    """Experience memory of one agent (shared by its users) or one user.

    >>> exp = Experience("memory.db", agent_id="solver")
    >>> exp.principles.recall("the user feels ignored at work")  # PRINCIPLES: nothing learned yet
    []
    >>> exp.close()

    With an LLM (``llm="local"``), ``exp.templates.solve("Use 4 7 8 8 to make 24")`` solves with Buffer of
    Thoughts and learns a template from the solution.

    Args:
        path: a store (SQLite file, ``postgresql://`` URL, or an open :class:`~memgas.store.Store`); the
            same store as a :class:`~memgas.memory.Memory` may be used (experience lives in its own table).
        agent_id: whose experience: an agent's, shared across its users ...
        user_id: ... or one user's (exactly one of the two).
        embedder: as for :class:`~memgas.memory.Memory` (the store's embedder must match).
        llm: an LLM spec or instance: every learning step needs one, and so do Buffer of Thoughts'
            ``recall``/``solve`` (its problem distiller runs first); PRINCIPLES' ``recall`` does not.
        llm_cache: the response cache for an LLM given by spec (default: ``llm.sqlite`` in the cache folder).
        templates: options of :class:`~memgas.experience.thoughts.BufferOfThoughts`, e.g. ``{"dedup_threshold": 0.9}``.
        principles: options of :class:`~memgas.experience.principles.Principles`, e.g. ``{"min_similarity": 0.3}``.
    """

    def __init__(self, path: str | Path | Store | None = None, *, agent_id: str | None = None,
                 user_id: str | None = None, embedder: str | Embedder | None = None,
                 llm: str | LLM | ChatModel | None = None, llm_cache: str | Path | None = None,
                 templates: dict[str, Any] | None = None, principles: dict[str, Any] | None = None) -> None:
        scope = scope_of(agent_id, user_id)
        # What this object opens goes on one stack: close() closes it, and so does a failure below (a bad embedder
        # or LLM spec), which then leaves nothing open. A store given open and an LLM given whole are the caller's.
        self._opened = ExitStack()
        try:
            self.store = open_store(path)
            if not isinstance(path, Store):
                self._opened.callback(self.store.close)
            self._embedding_cache = self._opened.enter_context(closing(EmbeddingCache(None)))
            self.embedder = get_embedder(embedder, cache=self._embedding_cache)
            self.llm = None if llm is None else get_llm(llm, cache=llm_cache or default_llm_cache_path())
            if self.llm is not None and self.llm is not llm and self.llm.cache is not None:
                self._opened.callback(self.llm.cache.close)
            self.bank = ExperienceBank(self.store, self.embedder, scope)
        except BaseException:
            self._opened.close()
            raise
        self._options = {"templates": templates or {}, "principles": principles or {}}
        self._templates: BufferOfThoughts | None = None
        self._principles: Principles | None = None

    @property
    def templates(self) -> "BufferOfThoughts":
        """Buffer of Thoughts over this scope (see :mod:`memgas.experience.thoughts`)."""
        if self._templates is None:
            from memgas.experience.thoughts import BufferOfThoughts

            self._templates = BufferOfThoughts(self.bank, self.llm, **self._options["templates"])
        return self._templates

    @property
    def principles(self) -> "Principles":
        """PRINCIPLES over this scope (see :mod:`memgas.experience.principles`)."""
        if self._principles is None:
            from memgas.experience.principles import Principles

            self._principles = Principles(self.bank, self.llm, **self._options["principles"])
        return self._principles

    def close(self) -> None:
        """Close what this object opened: the store unless it was given open, the caches (an :class:`LLM`
        given as an instance keeps its cache open: it may serve others, e.g. a server's ``Memory``)."""
        self._opened.close()

    def __enter__(self) -> "Experience":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
