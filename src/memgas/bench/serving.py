"""``memgas bench http``: what serving memory over HTTP costs beside calling it in-process.

One user holds ``sessions`` real LongMemEval sessions (ingested once, in this process, into the measured
store). A ``memgas serve`` subprocess (one uvicorn worker, an admin API key, defaults otherwise) serves
that store on a free loopback port; in this process a :class:`~memgas.memory.Memory` opens the same store.
For each client count ``n``, ``n`` threads start together on a barrier and each makes a fixed number of
calls, first over HTTP (httpx, one keep-alive connection per thread) and then the same calls on the
in-process ``Memory``:

* *search*: ``requests`` searches each (``k = 5``) of the one user, with the dataset's questions;
* *add*: ``requests // 4`` (at least 1) adds each, every client to a user of its own, of sessions no
  other call adds (distinct across clients, client counts and warm-ups; both sides add the same texts,
  each side into its own in-memory embedding cache, so every add runs the embedding model).

Requests/s is all clients' calls over the phase's wall time (first start to last end); p50/p95 are over
every call. The HTTP clients run in the bench process, so on a small machine they share the cores with
the server, as a co-located agent would.
"""

from __future__ import annotations

import sys
import threading
import time
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any, Callable, ContextManager, Iterator, Protocol, Sequence

import httpx

from memgas.bench.backends import rate
from memgas.bench.cost import distinct_sessions
from memgas.bench.datasets import load_longmemeval
from memgas.core.errors import InvalidInputError
from memgas.core.types import Session
from memgas.service.spawn import spawn_server, stop_server
from memgas.store import KeyStore, part

__all__ = ["DEFAULT_CLIENTS", "DEFAULT_SESSIONS", "DEFAULT_REQUESTS", "adds_per_client", "run_http", "http_markdown"]

#: Concurrent client counts measured by default.
DEFAULT_CLIENTS: tuple[int, ...] = (1, 8, 32)
#: Sessions of the searched user by default (about one LongMemEval-S haystack).
DEFAULT_SESSIONS = 50
#: Searches per client by default.
DEFAULT_REQUESTS = 20
#: An add costs ~20 searches (it runs the embedding model over a whole session): each client adds
#: ``requests // ADD_SHARE`` sessions, so adds take about as long as searches.
ADD_SHARE = 4
#: Hits per search, on both sides.
K = 5
#: Seconds a request may take (adds queue behind one writer: 32 clients wait for each other).
REQUEST_TIMEOUT = 300.0
#: Seconds the server has to answer ``/healthz`` after it starts (it loads the embedding model).
START_TIMEOUT = 120.0


def adds_per_client(requests: int) -> int:
    """Sessions each client adds for ``--requests requests``."""
    return max(1, requests // ADD_SHARE)


class _Caller(Protocol):
    """One client's way to call memory: over HTTP or in-process."""

    def search(self, user_id: str, query: str) -> None: ...

    def add(self, user_id: str, session: Session) -> None: ...


def _messages(session: Session) -> list[dict[str, str]]:
    return [{"role": m.role, "content": m.content} for m in session.messages]


def _timestamp(session: Session) -> str | None:
    return None if session.timestamp is None else session.timestamp.isoformat()


class _InProcess:
    """The calls on a :class:`~memgas.memory.Memory` shared by every thread (as the server shares its own)."""

    def __init__(self, memory: Any) -> None:
        self.memory = memory

    def search(self, user_id: str, query: str) -> None:
        """One search of ``user_id``."""
        self.memory.search(query, user_id=user_id, k=K)

    def add(self, user_id: str, session: Session) -> None:
        """Add ``session`` to ``user_id``."""
        self.memory.add(_messages(session), user_id=user_id, session_id=session.session_id,
                        timestamp=_timestamp(session))


class _Http:
    """The same calls as REST requests on one connection; any other status than the expected one fails."""

    def __init__(self, client: httpx.Client) -> None:
        self.client = client

    def _expect(self, response: httpx.Response, status: int) -> None:
        if response.status_code != status:
            raise RuntimeError(f"{response.request.method} {response.request.url.path} answered "
                               f"{response.status_code}, not {status}: {response.text[:300]}")

    def search(self, user_id: str, query: str) -> None:
        """``POST /v1/search``, expecting 200."""
        self._expect(self.client.post("/v1/search", json={"user_id": user_id, "query": query, "k": K}), 200)

    def add(self, user_id: str, session: Session) -> None:
        """``POST /v1/sessions``, expecting 201."""
        body = {"user_id": user_id, "session_id": session.session_id, "messages": _messages(session),
                "timestamp": _timestamp(session)}
        self._expect(self.client.post("/v1/sessions", json=body), 201)


@contextmanager
def _http_caller(url: str, key: str) -> Iterator[_Http]:
    """A client with its connection open (a ``/healthz`` call before the clock starts)."""
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=REQUEST_TIMEOUT) as client:
        caller = _Http(client)
        caller._expect(client.get("/healthz"), 200)
        yield caller


@contextmanager
def _server(target: str, log: Path) -> Iterator[tuple[str, list[str]]]:
    """``memgas serve`` on ``target`` at a free loopback port, its stderr in ``log``: yields its URL and argv.

    Raises:
        RuntimeError: it exited or did not answer ``/healthz`` in time (the log's tail is in the message).
    """
    proc, url, argv = spawn_server(target, log=log, timeout=START_TIMEOUT)
    try:
        yield url, argv
    finally:
        stop_server(proc)


def _clients(n: int, count: int, open_caller: Callable[[], ContextManager[_Caller]],
             call: Callable[[_Caller, int, int], None]) -> dict[str, float]:
    """``n`` threads, started together, each doing ``call(caller, client, j)`` for ``j < count``; their rate.

    Raises:
        RuntimeError: a call failed (the first failure is in the message).
    """
    barrier = threading.Barrier(n)
    records: list[dict[str, Any]] = []
    errors: list[BaseException] = []

    def work(client: int) -> None:
        try:
            with open_caller() as caller:
                barrier.wait()
                latencies, start = [], time.time()
                for j in range(count):
                    t0 = time.perf_counter()
                    call(caller, client, j)
                    latencies.append(time.perf_counter() - t0)
                records.append({"latencies": latencies, "span": (start, time.time())})
        except BaseException as exc:  # the others must not wait on the barrier for a dead client
            barrier.abort()
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        first = next((e for e in errors if not isinstance(e, threading.BrokenBarrierError)), errors[0])
        raise RuntimeError(f"{len(errors)} of {n} clients failed: {type(first).__name__}: {first}")
    return rate(records, "latencies", "span")


def run_http(target: str, data: Path, clients: Sequence[int], *, sessions: int = DEFAULT_SESSIONS,
             requests: int = DEFAULT_REQUESTS, log: Path, progress: bool = True) -> dict[str, Any]:
    """Search and add over HTTP and in-process at each client count (see the module docstring).

    Args:
        target: the store (a SQLite path or a ``postgresql://`` URL); this run writes users of its own
            (``h<time>-...``) and leaves them there.
        data: a LongMemEval file: the searched user's sessions, the sessions added and the queries.
        clients: concurrent client counts, one after another.
        sessions: sessions of the searched user.
        requests: searches per client; each client adds ``adds_per_client(requests)`` sessions.
        log: the server's stderr (its one line per request) goes here.
        progress: print each phase's figures on stderr as it ends.

    Returns:
        ``{"server": {argv, workers, auth, embedding_cache}, "config": {...}, "runs": [{"clients",
        "search": {"http", "in_process"}, "add": {...}}]}``, each leaf ``{n, wall_s, per_s, p50_ms, p95_ms}``.

    Raises:
        InvalidInputError: a count below 1, or fewer distinct sessions in ``data`` than the run needs.
        RuntimeError: the server did not start, or a call failed.
    """
    from memgas.memory import Memory
    from memgas.service.keys import create_key

    if sessions < 1 or requests < 1 or not clients or min(clients) < 1:
        raise InvalidInputError("--sessions, --requests and --clients must be positive")
    adds = adds_per_client(requests)
    need = sessions + 1 + sum(clients) * adds  # the user's, one warm-up add, then every measured add
    pool, questions = distinct_sessions(data, need)
    if len(pool) < need:
        raise InvalidInputError(f"{data} holds {len(pool)} distinct sessions; {need} are needed "
                                f"({sessions} stored, {adds} added by each client of each run, one warm-up)")
    if len(questions) < requests:
        questions = [q.question for q in load_longmemeval(data, limit=requests)]
    tag = f"h{int(time.time())}"
    searched = f"{tag}-searched"
    corpus, warm, added = pool[:sessions], pool[sessions], pool[sessions + 1:]
    with Memory(target) as memory:
        memory.add_many([{"messages": _messages(s), "session_id": s.session_id, "timestamp": _timestamp(s)}
                         for s in corpus], user_id=searched)
        key = create_key(part(memory.store, KeyStore), "admin", name="memgas bench http")[0]
        with _server(target, log) as (url, argv):
            sides: dict[str, Callable[[], ContextManager[_Caller]]] = {
                "http": lambda: _http_caller(url, key), "in_process": lambda: nullcontext(_InProcess(memory))}
            for side, open_caller in sides.items():  # load models, build the searched user's index
                with open_caller() as caller:
                    caller.search(searched, questions[0])
                    caller.add(f"{tag}-{side}-warm", warm)

            def search(caller: _Caller, client: int, j: int) -> None:
                caller.search(searched, questions[(client * requests + j) % len(questions)])

            runs: list[dict[str, Any]] = []
            offset = 0  # the next unused session of `added`
            for n in clients:
                run: dict[str, Any] = {"clients": n, "search": {}, "add": {}}
                for side, open_caller in sides.items():
                    with open_caller() as caller:  # its index again, should the adds have evicted it
                        caller.search(searched, questions[0])
                    run["search"][side] = _clients(n, requests, open_caller, search)
                    run["add"][side] = _clients(n, adds, open_caller, _adder(f"{tag}-{side}-n{n}", added, offset, adds))
                    if progress:
                        print(f"bench http: {n} clients, {side}: search {run['search'][side]['per_s']:.1f}/s, "
                              f"add {run['add'][side]['per_s']:.2f}/s", file=sys.stderr, flush=True)
                offset += n * adds
                runs.append(run)
    server = {"argv": ["memgas", *argv[3:]], "workers": 1, "auth": "admin API key (Bearer)",
              "rate_limit": None, "embedding_cache": "in memory (every add runs the model)",
              "clients": "httpx, one keep-alive connection per client thread, in the bench process"}
    config = {"sessions": sessions, "searches_per_client": requests, "adds_per_client": adds, "k": K,
              "clients": list(clients), "data": str(data)}
    return {"server": server, "config": config, "runs": runs}


def _cell(r: dict[str, float], digits: int) -> tuple[str, str]:
    return f"{r['per_s']:.{digits}f}", f"{r['p50_ms']:.1f} / {r['p95_ms']:.1f}"


def http_markdown(result: dict[str, Any]) -> str:
    """The table: per operation and client count, HTTP beside in-process and the p50 difference."""
    lines = ["| operation | clients | HTTP req/s | HTTP p50 / p95 (ms) | in-process calls/s | "
             "in-process p50 / p95 (ms) | HTTP − in-process p50 (ms) |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for op, digits in (("search", 1), ("add", 2)):
        for run in result["runs"]:
            http, local = run[op]["http"], run[op]["in_process"]
            lines.append(f"| {op} | {run['clients']} | {' | '.join(_cell(http, digits))} | "
                         f"{' | '.join(_cell(local, digits))} | {http['p50_ms'] - local['p50_ms']:+.1f} |")
    return "\n".join(lines) + "\n"


def _adder(prefix: str, added: Sequence[Any], base: int, adds: int) -> Callable[[Any, int, int], Any]:
    """Client ``i``'s ``j``-th add of one run: the next session of its own share, as its own user."""
    return lambda c, i, j: c.add(f"{prefix}-c{i}", added[base + i * adds + j])
