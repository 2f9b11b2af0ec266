"""A scripted OpenAI-compatible chat-completions server on loopback, for the LLM-judge tests.

The product code under test is the real client (the ``openai`` package over HTTP): only the other
end is scripted. Every request is recorded (body and headers) and counted. What the server answers
is decided per request by ``script(request, n)`` (``n`` counts from 0), returning a :class:`Reply`;
the default script is a well-behaved judge that passes, gives the top level of an ordinal scale, or
writes notes, and cites the first seq of the log it was shown.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["Reply", "StubServer", "shown_seqs", "verdict_for"]


@dataclass
class Reply:
    """What to answer: a chat ``content`` (wrapped in a completion), or a raw ``status``/``body``."""

    content: str | None = None
    status: int = 200
    body: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    usage: tuple[int, int] = (100, 20)


def shown_seqs(request: dict[str, Any]) -> list[int]:
    """The seqs of the log lines in the request's user message."""
    text = next(m["content"] for m in request["messages"] if m["role"] == "user")
    return [int(s) for s in re.findall(r"^\[(\d+)\]", text, flags=re.M)]


def _schema(request: dict[str, Any]) -> dict[str, Any]:
    """The reply schema: from response_format, else from the prompt (where procgrade writes it then)."""
    if "response_format" in request:
        return request["response_format"].get("json_schema", {}).get("schema", {})
    text = next(m["content"] for m in request["messages"] if m["role"] == "user")
    marker = "The reply's JSON Schema: "
    return json.loads(text[text.index(marker) + len(marker):].split("\n", 1)[0])


def verdict_for(request: dict[str, Any], *, passed: bool = True, value: int | None = None,
                evidence: list[int] | None = None) -> str:
    """A valid reply for the request's schema (notes, pass/fail or an ordinal level)."""
    props = _schema(request).get("properties", {})
    cite = evidence if evidence is not None else shown_seqs(request)[:1]
    if "notes" in props:
        return json.dumps({"notes": "noted", "evidence": cite})
    if "passed" in props:
        return json.dumps({"passed": passed, "rationale": "scripted", "evidence": cite})
    levels = props["value"]["enum"]
    return json.dumps({"value": max(levels) if value is None else value, "rationale": "scripted", "evidence": cite})


def default_script(request: dict[str, Any], n: int) -> Reply:
    return Reply(verdict_for(request))


class StubServer:
    """``with StubServer() as stub: stub.url``; ``stub.count`` requests so far, ``stub.requests`` their bodies."""

    def __init__(self, script: Callable[[dict[str, Any], int], Reply] = default_script) -> None:
        self.script = script
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self._lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                length = int(self.headers.get("content-length", 0))
                request = json.loads(self.rfile.read(length) or b"{}")
                with stub._lock:
                    n = len(stub.requests)
                    stub.requests.append(request)
                    stub.headers.append({k.lower(): v for k, v in self.headers.items()})
                reply = stub.script(request, n)
                if reply.delay:
                    time.sleep(reply.delay)
                if reply.body is not None or reply.status != 200:
                    body = reply.body if reply.body is not None else json.dumps(
                        {"error": {"message": f"scripted {reply.status}", "type": "scripted"}}).encode()
                else:
                    body = json.dumps({
                        "id": f"chatcmpl-{n}", "object": "chat.completion", "created": 0,
                        "model": request.get("model"),
                        "choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": reply.content}}],
                        "usage": {"prompt_tokens": reply.usage[0], "completion_tokens": reply.usage[1],
                                  "total_tokens": sum(reply.usage)},
                    }).encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("content-type", "application/json")
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.send_header("content-length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a scripted timeout)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._server.block_on_close = False  # a scripted slow reply never holds the test up
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    @property
    def count(self) -> int:
        with self._lock:
            return len(self.requests)

    def __enter__(self) -> "StubServer":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()
