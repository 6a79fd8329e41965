"""A scripted OpenAI-compatible chat-completions server on loopback, for tests (real HTTP, no network).

Usage::

    with OpenAIStub() as stub:
        stub.script += [{"status": 429}, {"text": '{"a": 1}'}]   # consumed in order, one per request
        stub.responder = lambda body: "default reply"             # used when the script is empty
        llm = get_llm(f"openai:tiny@{stub.base_url}")

Script steps (dicts):
    ``{"text": str}``: a 200 chat completion with that message content (``usage`` optional).
    ``{"status": int, "body"?: str, "headers"?: dict}``: an error status (429 sends ``Retry-After: 0``).
    ``{"sleep": float}``: wait that long (to provoke a client timeout), then answer with the responder.
    ``{"raw": bytes}``: a 200 whose body is these bytes (malformed JSON).
    ``{"payload": Any}``: a 200 whose body is this value as JSON (a malformed completion: wrong types anywhere).
    ``{"drop": True}``: close the connection without an answer.
    ``{"silent": float}``: read the request, then say nothing for that long (a server that never answers).
    ``{"trickle": float}``: a 200 completion (from the responder) sent one byte every that many seconds.

``refuse`` lists request keys (e.g. ``"response_format"``) answered with HTTP 400 naming the key,
as servers without a feature do. Every request body is kept in ``requests``.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

__all__ = ["OpenAIStub", "completion_payload"]


def completion_payload(text: str, model: str = "stub", usage: dict[str, int] | None = None) -> dict[str, Any]:
    """A chat-completion response body holding ``text``."""
    payload: dict[str, Any] = {
        "id": "chatcmpl-stub", "object": "chat.completion", "created": 0, "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
    }
    if usage is not None:
        payload["usage"] = usage
    return payload


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that timed out closed the socket: writing to it fails, which is expected here


class OpenAIStub:
    """The scripted server (see the module notes). Start it with ``with`` or :meth:`start`."""

    def __init__(self, responder: Callable[[dict[str, Any]], str] | None = None) -> None:
        self.script: list[dict[str, Any]] = []
        self.responder: Callable[[dict[str, Any]], str] = responder or (lambda body: "ok")
        self.usage: dict[str, int] | None = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
        self.refuse: set[str] = set()
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with owner._lock:
                    owner.requests.append(body)
                    owner.headers.append(dict(self.headers))
                    step = owner.script.pop(0) if owner.script else {}
                if not self.path.endswith("/chat/completions"):
                    return self._send(404, json.dumps({"error": {"message": "no such route"}}).encode())
                refused = sorted(k for k in owner.refuse if k in body)
                if refused:
                    message = f"Unsupported parameter: '{refused[0]}' is not supported with this model."
                    if refused[0] == "max_tokens":  # OpenAI's wording for its reasoning models
                        message += " Use 'max_completion_tokens' instead."
                    return self._send(400, json.dumps({"error": {"message": message}}).encode())
                if "sleep" in step:
                    time.sleep(step["sleep"])
                if "silent" in step:
                    time.sleep(step["silent"])
                    self.close_connection = True
                    return
                if step.get("drop"):
                    self.close_connection = True
                    return
                if "status" in step:
                    headers = {"Retry-After": "0"} if step["status"] == 429 else {}
                    headers.update(step.get("headers", {}))
                    error = json.dumps({"error": {"message": step.get("body", f"status {step['status']}")}})
                    return self._send(step["status"], error.encode(), headers)
                if "raw" in step:
                    return self._send(200, step["raw"])
                if "payload" in step:
                    return self._send(200, json.dumps(step["payload"]).encode())
                text = step["text"] if "text" in step else owner.responder(body)
                payload = completion_payload(text, body.get("model", "stub"), step.get("usage", owner.usage))
                self._send(200, json.dumps(payload).encode(), every=step.get("trickle"))

            def _send(self, code: int, raw: bytes, headers: dict[str, str] | None = None,
                      every: float | None = None) -> None:
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                if every is None:
                    self.wfile.write(raw)
                    return
                for i in range(len(raw)):  # until the client hangs up (the write then fails)
                    self.wfile.write(raw[i : i + 1])
                    self.wfile.flush()
                    time.sleep(every)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = _Server(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)

    def start(self) -> "OpenAIStub":
        """Start serving in a daemon thread."""
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving and free the port."""
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> "OpenAIStub":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
