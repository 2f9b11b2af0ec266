"""A loopback stand-in for an OpenAI-compatible chat endpoint that scripts the agent grader's tool calls.

:class:`StubEndpoint` serves ``POST /v1/chat/completions`` on 127.0.0.1 and answers each request with the tool
calls its ``policy`` returns for the conversation so far. :func:`plan_player` is a policy that plays a plan the
way an honest grader would: the step's actions one by one, then a report quoting the latest screen; its
``lie``/``reload``/``silent`` options make it break the grader rules for the protocol's discard tests.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from procgrade.oracles.browser_plans import Plan

Policy = Callable[[list[dict[str, Any]]], list[tuple[str, dict[str, Any]]]]


class StubEndpoint:
    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.requests: list[dict[str, Any]] = []

    @contextmanager
    def serving(self) -> Iterator[str]:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stub.requests.append(body)
                calls = stub.policy(body["messages"])
                message: dict[str, Any] = {"role": "assistant", "content": None if calls else "I am done."}
                if calls:
                    message["tool_calls"] = [{"id": f"call_{len(stub.requests)}_{i}", "type": "function",
                                              "function": {"name": name, "arguments": json.dumps(args)}}
                                             for i, (name, args) in enumerate(calls)]
                data = json.dumps({"id": f"cmpl-{len(stub.requests)}", "object": "chat.completion", "created": 0,
                                   "model": body["model"], "choices": [{"index": 0, "message": message,
                                   "finish_reason": "tool_calls" if calls else "stop"}],
                                   "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}/v1"
        finally:
            server.shutdown()
            server.server_close()


def _normal(text: str) -> str:
    return " ".join(text.split()).casefold()


def _call_of(action: Any) -> tuple[str, dict[str, Any]]:
    verb = action.verb
    if verb == "click":
        return "click", action.click.model_dump(exclude_none=True)
    if verb == "fill":
        return "type", {"label": action.fill.label, "text": action.fill.value}
    if verb == "select":
        return "select", {"label": action.select.label, "option": action.select.option}
    if verb == "press":
        return "press", {"key": action.press}
    if verb == "goto":
        return "goto", {"path": action.goto}
    return "reload", {}


def plan_player(plan: Plan, *, lie: bool = False, reload_in_step: int | None = None,
                silent: bool = False) -> Policy:
    """Play ``plan`` honestly (or break one rule): actions one per reply, then ``report_step``."""

    def policy(messages: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
        if silent:
            return []
        last_user = max(i for i, m in enumerate(messages) if m["role"] == "user" and isinstance(m["content"], str)
                        and m["content"].startswith("Step "))
        index = int(re.match(r"Step (\d+)", messages[last_user]["content"]).group(1)) - 1
        step = plan.steps[index]
        made = sum(1 for m in messages[last_user:] if m["role"] == "assistant")
        if reload_in_step == index and made == 0:
            return [("reload", {})]
        if made < len(step.actions):
            return [_call_of(step.actions[made])]
        screen = next(m["content"] for m in reversed(messages) if isinstance(m.get("content"), str)
                      and "accessibility snapshot:" in m["content"])
        screen = screen.split("The screen now:", 1)[-1]
        lines = [line.strip() for line in screen.splitlines() if line.strip()]
        checks = []
        for n, check in enumerate(step.checks, 1):
            if lie:
                checks.append({"check": n, "passed": True, "evidence": "Everything works perfectly"})
                continue
            if check.kind in ("text_visible", "text_absent"):
                hit = next((line for w in check.wordings for line in lines if _normal(w) in _normal(line)), None)
                passed = (hit is not None) == (check.kind == "text_visible")
                checks.append({"check": n, "passed": passed, "evidence": hit or lines[0]})
            elif check.kind == "url":
                address = lines[0]
                checks.append({"check": n, "passed": address.split("://", 1)[-1].split("/", 1)[-1].split("?")[0]
                               == check.url.lstrip("/"), "evidence": address})
            else:
                role = check.count.role if check.count else "textbox"
                hits = [line for line in lines if line.startswith(f"- {role}")]
                checks.append({"check": n, "passed": check.count is not None and len(hits) == check.count.equals,
                               "evidence": "\n".join(hits) or lines[0]})
        return [("report_step", {"checks": checks})]

    return policy
