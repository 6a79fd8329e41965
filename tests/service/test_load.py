"""Concurrent clients on a real server on loopback: no acknowledged add is lost, nothing answers 5xx, and the
per-request log and ``/metrics`` count exactly what happened; and ``memgas bench http`` end to end."""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import httpx
import pytest

from memgas.cli.commands import main
from support.datasets import lme_records
from support.live_server import LiveServer, make_key, start_server

#: Concurrent clients; two of them write each user, so adds to one user really race.
CLIENTS = 8
USERS = CLIENTS // 2
#: Sessions each client adds (with a search after each, and a refused add every other round).
ROUNDS = 4
TOPICS = ("apricot orchard", "sailing lessons", "violin practice", "sourdough starter", "marathon training",
          "pottery class", "birdwatching trip", "chess openings")


def _messages(client: int, rnd: int) -> list[dict[str, str]]:
    topic = TOPICS[client]
    return [{"role": "user", "content": f"Round {rnd}: an update on my {topic}, week {rnd + 1} of it."},
            {"role": "assistant", "content": f"Noted: {topic}, week {rnd + 1}."}]


@dataclass
class Load:
    """What the clients sent and what came back."""

    server: LiveServer
    key: str
    acked: dict[str, set[str]] = field(default_factory=dict)  # user → session ids answered 201
    sent: dict[str, tuple[str, str, int]] = field(default_factory=dict)  # request id → (kind, session id, status)
    transport_errors: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)  # exceptions raised in a client thread
    lock: threading.Lock = field(default_factory=threading.Lock)

    def statuses(self, kind: str) -> list[int]:
        """The statuses of every request of this kind."""
        return [status for k, _, status in self.sent.values() if k == kind]


def _client(load: Load, client: int, barrier: threading.Barrier) -> None:
    """Add ROUNDS sessions to this client's user, each followed by a search; every other round also a
    duplicate add (409) and one with a bad timestamp (400), which must leave nothing behind."""
    user = f"user-{client % USERS}"
    counter = iter(range(10_000))

    def send(kind: str, session_id: str, method: str, path: str, **kwargs: Any) -> None:
        request_id = f"load-{client}-{next(counter)}"
        try:
            response = http.request(method, path, headers={"X-Request-ID": request_id}, **kwargs)
        except httpx.TransportError as exc:
            with load.lock:
                load.transport_errors.append(f"{kind} {session_id}: {type(exc).__name__}: {exc}")
            return
        with load.lock:
            load.sent[request_id] = (kind, session_id, response.status_code)
            if kind == "add" and response.status_code == 201:
                load.acked.setdefault(user, set()).add(session_id)

    try:
        with httpx.Client(base_url=load.server.url, headers={"Authorization": f"Bearer {load.key}"},
                          timeout=60) as http:
            barrier.wait()
            for rnd in range(ROUNDS):
                sid = f"c{client}-r{rnd}"
                body = {"user_id": user, "session_id": sid, "messages": _messages(client, rnd)}
                send("add", sid, "POST", "/v1/sessions", json=body)
                if rnd % 2:
                    send("duplicate", sid, "POST", "/v1/sessions", json=body)
                    send("invalid", f"{sid}-bad", "POST", "/v1/sessions",
                         json={**body, "session_id": f"{sid}-bad", "timestamp": "the day after tomorrow"})
                send("search", "", "POST", "/v1/search",
                     json={"user_id": user, "query": f"how is my {TOPICS[client]} going?", "k": 3})
    except BaseException as exc:  # reported by the fixture rather than lost with the thread
        barrier.abort()
        with load.lock:
            load.failures.append(f"client {client}: {type(exc).__name__}: {exc}")


@pytest.fixture(scope="module")
def load(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Load]:
    """A fresh server under CLIENTS concurrent clients; yields once they are all done."""
    tmp = tmp_path_factory.mktemp("load")
    db = tmp / "load.db"
    key = make_key(db)
    server = start_server(db, tmp=tmp)
    try:
        result = Load(server, key)
        barrier = threading.Barrier(CLIENTS)
        threads = [threading.Thread(target=_client, args=(result, i, barrier), daemon=True) for i in range(CLIENTS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not any(t.is_alive() for t in threads), "a client did not finish within 120 s"
        yield result
    finally:
        server.stop()


def _eventually(read: Callable[[], Any], want: Any, timeout: float = 10.0) -> Any:
    """``read()`` once it equals ``want`` (the server logs and counts a request just after answering it)."""
    deadline = time.monotonic() + timeout
    while (got := read()) != want and time.monotonic() < deadline:
        time.sleep(0.1)
    return got


@pytest.mark.slow
def test_concurrent_clients_lose_no_acknowledged_add_and_get_no_5xx(load: Load) -> None:
    assert load.failures == [] and load.transport_errors == []
    assert len(load.sent) == CLIENTS * (2 * ROUNDS + ROUNDS)  # add + search per round, 2 refusals every other
    assert [s for s in (status for _, _, status in load.sent.values()) if s >= 500] == []
    assert load.statuses("add") == [201] * CLIENTS * ROUNDS
    assert set(load.statuses("duplicate")) == {409} and set(load.statuses("invalid")) == {400}
    assert load.statuses("search") == [200] * CLIENTS * ROUNDS  # searches during the load
    assert sorted(load.acked) == [f"user-{u}" for u in range(USERS)]

    with httpx.Client(base_url=load.server.url, headers={"Authorization": f"Bearer {load.key}"}) as http:
        for user, acked in load.acked.items():
            listed = http.get("/v1/sessions", params={"user_id": user})
            assert listed.status_code == 200
            assert sorted(s["session_id"] for s in listed.json()["sessions"]) == sorted(acked)
            for sid in acked:
                got = http.get(f"/v1/sessions/{sid}", params={"user_id": user})
                assert got.status_code == 200, sid
                client, rnd = (int(x) for x in re.fullmatch(r"c(\d+)-r(\d+)", sid).groups())
                assert [m["content"] for m in got.json()["messages"]] == [
                    m["content"] for m in _messages(client, rnd)]
            assert http.get(f"/v1/sessions/{sorted(acked)[0]}-bad", params={"user_id": user}).status_code == 404


def test_log_lines_and_metrics_count_exactly_the_acknowledged_adds(load: Load) -> None:
    acked = sum(len(s) for s in load.acked.values())
    assert acked == CLIENTS * ROUNDS

    def load_lines() -> dict[str, dict[str, Any]]:
        rows = [json.loads(line) for line in load.server.log_lines() if line.startswith("{")]
        return {r["request_id"]: r for r in rows if r["request_id"].startswith("load-")}

    lines = _eventually(lambda: set(load_lines()), set(load.sent))
    assert lines == set(load.sent)  # one line per request, no more
    logged = load_lines()
    assert {rid: logged[rid]["status"] for rid in load.sent} == {rid: s for rid, (_, _, s) in load.sent.items()}
    assert sum(r["method"] == "POST" and r["route"] == "/v1/sessions" and r["status"] == 201
               for r in logged.values()) == acked

    created = 'memgas_http_requests_total{method="POST",route="/v1/sessions",status="201"}'

    def counters() -> tuple[int, int]:
        text = httpx.get(f"{load.server.url}/metrics", headers={"Authorization": f"Bearer {load.key}"}).text
        values = dict(line.rsplit(" ", 1) for line in text.splitlines() if line and not line.startswith("#"))
        return int(values.get("memgas_adds_total", 0)), int(values.get(created, 0))

    assert _eventually(counters, (acked, acked)) == (acked, acked)


@pytest.mark.slow
def test_bench_http_runs_end_to_end_and_prints_the_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from memgas.store import open_store

    data = tmp_path / "lme.json"
    data.write_text(json.dumps(lme_records()))  # 6 distinct sessions: 2 stored, 1 warm-up, 1 + 2 added
    out = tmp_path / "http"
    assert main(["bench", "http", "--data", str(data), "--sessions", "2", "--clients", "1,2", "--requests", "4",
                 "--out", str(out), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "CPU cores" in printed and "memgas serve --db" in printed
    rows = [line.split(" | ")[:2] for line in printed.splitlines() if line.startswith(("| search", "| add"))]
    assert rows == [["| search", "1"], ["| search", "2"], ["| add", "1"], ["| add", "2"]]

    result = json.loads((out / "results.json").read_text())
    assert result["command"].startswith("memgas bench http") and result["cpu_cores"] >= 1
    assert result["config"]["searches_per_client"] == 4 and result["config"]["adds_per_client"] == 1
    for run in result["runs"]:
        for side in ("http", "in_process"):
            assert run["search"][side]["n"] == 4 * run["clients"] and run["add"][side]["n"] == run["clients"]
            assert run["search"][side]["per_s"] > 0 and 0 < run["add"][side]["p50_ms"] <= run["add"][side]["p95_ms"]
    # The HTTP side went through the server: its adds (warm-up and measured) are its 201s in the log.
    logged = [json.loads(line) for line in (out / "server.log").read_text().splitlines() if line.startswith("{")]
    assert sum(r["route"] == "/v1/sessions" and r["status"] == 201 for r in logged) == 1 + 1 + 2
    assert sum(r["route"] == "/v1/search" and r["status"] == 200 for r in logged) == 1 + (1 + 4) + (1 + 8)
    with open_store(out / "http.db") as store:
        users = {u: sorted(s.session_id for s in store.list_sessions(u)) for u in store.list_users()}
    searched = [u for u in users if u.endswith("-searched")]
    assert len(searched) == 1 and len(users[searched[0]]) == 2
    for side in ("http", "in_process"):  # both sides add the same sessions, each client to its own user
        added = {u: s for u, s in users.items() if f"-{side}-n" in u}
        assert len(added) == 3 and all(len(s) == 1 for s in added.values())
    assert sorted(sum((s for u, s in users.items() if "-http-n" in u), [])) == sorted(
        sum((s for u, s in users.items() if "-in_process-n" in u), []))

    assert main(["bench", "http", "--data", str(data), "--requests", "0", "--out", str(out)]) == 2
    assert "must be positive" in capsys.readouterr().err
