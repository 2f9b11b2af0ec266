"""The chat client the agentic browser grader talks through: a small interface and an OpenAI-compatible back-end.

The agent grader needs one thing of a model: given the conversation and the tools, the next reply with its tool
calls. :class:`ChatClient` is that interface; :class:`OpenAIChatClient` implements it with the ``openai``
package against any OpenAI-compatible endpoint (base URL and model are configuration). The judge layer
(``judges/``) builds its own client; :class:`JudgeLayerClient` adapts its ``ChatModel`` to this interface, so
pointing the grader at it is ``AgentGrader(JudgeLayerClient(model))``.

Configuration (arguments win over the environment): ``PROCGRADE_GRADER_BASE_URL``, ``PROCGRADE_GRADER_MODEL``,
``PROCGRADE_GRADER_API_KEY`` (else ``OPENAI_API_KEY``; a local endpoint may need none).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Protocol

from procgrade.engine.errors import ProcgradeError

__all__ = ["ToolCall", "ChatReply", "ChatClient", "OpenAIChatClient", "JudgeLayerClient", "client_from_config"]


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    #: The parsed arguments; ``None`` when the model sent arguments that are not a JSON object.
    arguments: dict[str, Any] | None
    raw_arguments: str = ""


@dataclass(frozen=True)
class ChatReply:
    content: str | None
    tool_calls: list[ToolCall] = field(default_factory=list)
    model: str = ""


class ChatClient(Protocol):
    model: str

    def chat(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ChatReply:
        """The model's next reply to ``messages`` (OpenAI chat format), offered ``tools`` (function tools)."""
        ...


class OpenAIChatClient:
    """An OpenAI-compatible chat-completions endpoint through the ``openai`` package."""

    def __init__(self, base_url: str, model: str, api_key: str | None = None, *, temperature: float | None = None,
                 timeout_sec: float = 300.0, max_retries: int = 2) -> None:
        try:
            import openai
        except ImportError:
            raise ProcgradeError("the agent grader needs the openai package: pip install 'procgrade[browser]'") from None
        self.model, self.temperature = model, temperature
        self._client = openai.OpenAI(base_url=base_url, api_key=api_key or "not-needed", timeout=timeout_sec,
                                     max_retries=max_retries)

    def chat(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ChatReply:
        options: dict[str, Any] = {}
        if self.temperature is not None:
            options["temperature"] = self.temperature
        response = self._client.chat.completions.create(model=self.model, messages=messages, tools=tools,
                                                        tool_choice="auto", **options)
        message = response.choices[0].message
        calls = [_parse_call(call.model_dump(mode="json")) for call in message.tool_calls or []]
        return ChatReply(message.content, calls, response.model or self.model)


def _parse_call(call: dict[str, Any]) -> ToolCall:
    function = call.get("function") or {}
    raw = function.get("arguments") or ""
    try:
        parsed = json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError:
        parsed = None
    return ToolCall(str(call.get("id", "")), str(function.get("name", "")), parsed if isinstance(parsed, dict) else None,
                    raw)


class JudgeLayerClient:
    """The judge layer's model (``procgrade.judges.client.ChatModel``: ``complete(ChatRequest) -> ChatResponse``, with its
    retries, recorded attempts and key handling) as the grader's :class:`ChatClient`."""

    def __init__(self, chat_model: Any, *, temperature: float | None = None) -> None:
        self.chat_model, self.temperature = chat_model, temperature
        endpoint = getattr(chat_model, "endpoint", None)
        self.model = str(getattr(endpoint, "model", None) or getattr(chat_model, "model", ""))

    def chat(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ChatReply:
        from procgrade.judges.client import ChatRequest

        response = self.chat_model.complete(ChatRequest(messages=tuple(messages), tools=tuple(tools),
                                                        response_format="none", temperature=self.temperature))
        return ChatReply(response.content, [_parse_call(dict(c)) for c in response.tool_calls],
                         response.model or self.model)


def client_from_config(base_url: str | None = None, model: str | None = None, api_key: str | None = None,
                       temperature: float | None = None) -> ChatClient:
    """An :class:`OpenAIChatClient` from arguments, else the ``PROCGRADE_GRADER_*`` environment."""
    base_url = base_url or os.environ.get("PROCGRADE_GRADER_BASE_URL")
    model = model or os.environ.get("PROCGRADE_GRADER_MODEL")
    if not base_url or not model:
        raise ProcgradeError("the agent grader needs an endpoint: --agent-base-url and --agent-model "
                             "(or PROCGRADE_GRADER_BASE_URL and PROCGRADE_GRADER_MODEL)")
    key = api_key or os.environ.get("PROCGRADE_GRADER_API_KEY") or os.environ.get("OPENAI_API_KEY")
    return OpenAIChatClient(base_url, model, key, temperature=temperature)
