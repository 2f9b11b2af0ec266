"""Talking to a model behind any OpenAI-compatible chat-completions endpoint.

:class:`ChatModel` is the small interface the rest of procgrade uses (the LLM judge here, and any
other grader that needs a model, tool calls included): one :class:`ChatRequest` in, one
:class:`ChatResponse` out. :class:`OpenAIChatModel` implements it with the ``openai`` package, so
the same code talks to OpenAI, vLLM, llama.cpp's server, Ollama, LiteLLM or a test's loopback server.

Transport failures (connection errors, timeouts, HTTP 408/409/429 and 5xx, a response body that is
not JSON) are retried with exponential backoff, waiting what a ``Retry-After`` header asks instead
when there is one; the ``openai`` package's own retries are turned off so every attempt is counted
and recorded. Other HTTP errors (400, 401, 404, ...) are not retried. The API key is used for the
requests and nowhere else: it is never part of a request record, a repr, an error or a log line.

Endpoint settings come from, in order: flags, the environment (``PROCGRADE_JUDGE_BASE_URL``,
``PROCGRADE_JUDGE_MODEL``, ``PROCGRADE_JUDGE_API_KEY``, then ``OPENAI_BASE_URL`` and
``OPENAI_API_KEY``), and a TOML config file (``--config``, or ``PROCGRADE_JUDGE_CONFIG``) with keys
``base_url``, ``model``, ``api_key_env`` (the *name* of the variable holding the key; a key written
into the file itself is refused), ``price_input`` and ``price_output`` (USD per million tokens).
"""

from __future__ import annotations

import email.utils
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from fractions import Fraction
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit, urlunsplit

from procgrade.engine.errors import InputError, ProcgradeError

__all__ = [
    "ChatModel",
    "ChatRequest",
    "ChatResponse",
    "Endpoint",
    "EndpointError",
    "OpenAIChatModel",
    "Price",
    "RetryPolicy",
    "TransportError",
    "Usage",
    "resolve_endpoint",
]

_RETRIED_STATUS = frozenset({408, 409, 429})


class EndpointError(ProcgradeError):
    """The endpoint refused the request (bad model, bad key, bad request): retrying will not help."""


class TransportError(ProcgradeError):
    """The endpoint could not be reached, or kept failing, through every retry."""


@dataclass(frozen=True)
class Price:
    """USD per million input (prompt) and output (completion) tokens, exact."""

    input: Fraction
    output: Fraction

    def cost(self, prompt_tokens: int, completion_tokens: int) -> Fraction:
        return (self.input * prompt_tokens + self.output * completion_tokens) / 1_000_000


@dataclass(frozen=True)
class Endpoint:
    """Where the model is. ``api_key`` is never shown (not in repr, not in :meth:`record`)."""

    model: str
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    price: Price | None = None

    def shown_url(self) -> str:
        """The base URL without credentials, query or fragment (what records and messages show)."""
        if self.base_url is None:
            return "https://api.openai.com/v1"
        parts = urlsplit(self.base_url)
        host = parts.hostname or ""
        if parts.port:
            host += f":{parts.port}"
        return urlunsplit((parts.scheme, host, parts.path.rstrip("/"), "", ""))

    def record(self) -> dict[str, Any]:
        return {"base_url": self.shown_url(), "model": self.model}


@dataclass(frozen=True)
class RetryPolicy:
    """``attempts`` tries in all; waits ``base * 2**n`` seconds (at most ``cap``) between them, or what
    ``Retry-After`` asks (up to ``max_retry_after``; a longer wait gives up); ``timeout`` per request."""

    attempts: int = 6
    base: float = 1.0
    cap: float = 60.0
    max_retry_after: float = 600.0
    timeout: float = 120.0

    def record(self) -> dict[str, Any]:
        return {"attempts": self.attempts, "timeout_s": self.timeout}


@dataclass(frozen=True)
class ChatRequest:
    """One chat completion. ``schema`` asks for structured output (``response_format`` json_schema,
    strict); ``tools`` are passed through for callers that use tool calling."""

    messages: tuple[Mapping[str, Any], ...]
    schema: Mapping[str, Any] | None = None
    schema_name: str = "reply"
    response_format: str = "json_schema"  # json_schema | json_object | none
    temperature: float | None = None
    seed: int | None = None
    max_tokens: int | None = None
    top_p: float | None = None
    tools: tuple[Mapping[str, Any], ...] = ()

    def params(self) -> dict[str, Any]:
        """Every sampling parameter, as recorded with the reply."""
        return {"temperature": self.temperature, "seed": self.seed, "max_tokens": self.max_tokens,
                "top_p": self.top_p, "response_format": self.response_format}


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: "Usage") -> "Usage":
        return Usage(self.prompt_tokens + other.prompt_tokens, self.completion_tokens + other.completion_tokens)

    def record(self) -> dict[str, int]:
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens}


@dataclass(frozen=True)
class ChatResponse:
    content: str | None
    usage: Usage
    model: str | None = None
    finish_reason: str | None = None
    response_id: str | None = None
    tool_calls: tuple[dict[str, Any], ...] = ()
    #: Transport failures retried before this response came.
    retries: tuple[str, ...] = ()

    def record(self) -> dict[str, Any]:
        return {"content": self.content, "model": self.model, "finish_reason": self.finish_reason,
                "id": self.response_id, "usage": self.usage.record(), "retries": list(self.retries),
                **({"tool_calls": list(self.tool_calls)} if self.tool_calls else {})}


class ChatModel(Protocol):
    """What a grader needs from a model."""

    endpoint: Endpoint

    def complete(self, request: ChatRequest) -> ChatResponse: ...


def _retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds a ``Retry-After`` (or ``retry-after-ms``) header asks to wait, if any."""
    if not headers:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)  # an HTTP date
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - time.time())


class OpenAIChatModel:
    """:class:`ChatModel` over the ``openai`` package (``sleep`` is how it waits between attempts)."""

    def __init__(self, endpoint: Endpoint, retry: RetryPolicy | None = None,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        import openai

        if not endpoint.api_key:
            raise EndpointError("no API key: set PROCGRADE_JUDGE_API_KEY or OPENAI_API_KEY (or name the variable "
                                "with --api-key-env); a server that needs none accepts any value")
        self.endpoint = endpoint
        self.retry = retry or RetryPolicy()
        self._sleep = sleep
        self._openai = openai
        self._client = openai.OpenAI(api_key=endpoint.api_key, base_url=endpoint.base_url, max_retries=0,
                                     timeout=self.retry.timeout)

    def _scrub(self, text: str) -> str:
        """``text`` without the key (a server may echo what it was sent)."""
        return text.replace(self.endpoint.api_key, "[REDACTED-SECRET]") if self.endpoint.api_key else text

    def close(self) -> None:
        self._client.close()

    def _arguments(self, request: ChatRequest) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"model": self.endpoint.model, "messages": [dict(m) for m in request.messages]}
        for name in ("temperature", "seed", "max_tokens", "top_p"):
            value = getattr(request, name)
            if value is not None:
                kwargs[name] = value
        if request.schema is not None and request.response_format == "json_schema":
            kwargs["response_format"] = {"type": "json_schema", "json_schema": {
                "name": request.schema_name, "schema": dict(request.schema), "strict": True}}
        elif request.response_format == "json_object":
            kwargs["response_format"] = {"type": "json_object"}
        if request.tools:
            kwargs["tools"] = [dict(t) for t in request.tools]
        return kwargs

    def complete(self, request: ChatRequest) -> ChatResponse:
        openai = self._openai
        kwargs = self._arguments(request)
        failures: list[str] = []
        for attempt in range(self.retry.attempts):
            wait: float | None = None
            try:
                response = self._client.chat.completions.create(**kwargs)
            except openai.APITimeoutError:
                failures.append(f"timeout after {self.retry.timeout:g} s")
            except openai.APIConnectionError as exc:
                failures.append(f"connection error: {type(exc.__cause__ or exc).__name__}")
            except openai.APIStatusError as exc:
                status = exc.status_code
                if status not in _RETRIED_STATUS and status < 500:
                    raise EndpointError(f"{self.endpoint.shown_url()} refused the request for model "
                                        f"{self.endpoint.model}: HTTP {status}: "
                                        f"{self._scrub(_short(exc.message))}") from None
                failures.append(f"HTTP {status}")
                wait = _retry_after(exc.response.headers if exc.response is not None else None)
            except (openai.APIResponseValidationError, ValueError) as exc:
                failures.append(f"unreadable response: {type(exc).__name__}")
            else:
                result = _response(response, tuple(failures))
                if result.content and self.endpoint.api_key in result.content:  # an echoing server
                    result = replace(result, content=self._scrub(result.content))
                return result
            if attempt == self.retry.attempts - 1:
                break
            if wait is not None and wait > self.retry.max_retry_after:
                failures.append(f"Retry-After {wait:g} s is longer than {self.retry.max_retry_after:g} s: gave up")
                break
            self._sleep(wait if wait is not None else min(self.retry.cap, self.retry.base * 2 ** attempt))
        raise TransportError(f"{self.endpoint.shown_url()} (model {self.endpoint.model}) failed "
                             f"{len(failures)} time(s): {'; '.join(failures[-3:])}")


def _short(text: str, width: int = 200) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _response(response: Any, retries: tuple[str, ...]) -> ChatResponse:
    if not getattr(response, "choices", None):
        raise TransportError("the endpoint answered without choices")
    choice = response.choices[0]
    message = choice.message
    usage = getattr(response, "usage", None)
    tool_calls = tuple(call.model_dump(mode="json") for call in (message.tool_calls or ()))
    return ChatResponse(
        content=message.content,
        usage=Usage(int(getattr(usage, "prompt_tokens", 0) or 0), int(getattr(usage, "completion_tokens", 0) or 0)),
        model=getattr(response, "model", None), finish_reason=choice.finish_reason,
        response_id=getattr(response, "id", None), tool_calls=tool_calls, retries=retries)


# --- where the settings come from --------------------------------------------------------------------


def _config_file(path: Path | None) -> tuple[dict[str, Any], str | None]:
    import tomllib

    if path is None:
        env = os.environ.get("PROCGRADE_JUDGE_CONFIG")
        path = Path(env) if env else None
    if path is None:
        return {}, None
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(str(path), None, None, f"cannot read: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise InputError(str(path), None, None, f"not TOML: {exc}") from None
    section = data.get("judge", data)
    known = {"base_url", "model", "api_key_env", "price_input", "price_output"}
    for key in section:
        if key == "api_key":
            raise InputError(str(path), None, "api_key", "a key is not kept in a file procgrade reads: name the "
                                                          "environment variable holding it with api_key_env")
        if key not in known:
            raise InputError(str(path), None, key, f"unknown key (known: {', '.join(sorted(known))})")
    return section, str(path)


def _price(value: Any, source: str, name: str) -> Fraction:
    try:
        price = Fraction(str(value))
    except (ValueError, ZeroDivisionError):
        raise InputError(source, None, name, f"not a price in USD per million tokens: {value!r}") from None
    if price < 0:
        raise InputError(source, None, name, "a price cannot be negative")
    return price


def resolve_endpoint(*, model: str | None = None, base_url: str | None = None, api_key: str | None = None,
                     api_key_env: str | None = None, price_input: str | None = None,
                     price_output: str | None = None, config: Path | None = None) -> Endpoint:
    """The endpoint from flags, then the environment, then the config file (see the module docstring)."""
    section, source = _config_file(config)
    env = os.environ
    model = model or env.get("PROCGRADE_JUDGE_MODEL") or section.get("model")
    if not model:
        raise InputError("--model", None, None, "name the judge model (--model, PROCGRADE_JUDGE_MODEL or the "
                                                "config file's model)")
    base_url = base_url or env.get("PROCGRADE_JUDGE_BASE_URL") or section.get("base_url") or env.get("OPENAI_BASE_URL")
    key_env = api_key_env or section.get("api_key_env")
    if api_key_env and api_key_env not in env:
        raise InputError("--api-key-env", None, None, f"the environment has no variable {api_key_env}")
    key = api_key or (env.get(key_env) if key_env else None) or env.get("PROCGRADE_JUDGE_API_KEY") \
        or env.get("OPENAI_API_KEY")
    given_in = price_input if price_input is not None else section.get("price_input")
    given_out = price_output if price_output is not None else section.get("price_output")
    price = None
    if given_in is not None or given_out is not None:
        if given_in is None or given_out is None:
            raise InputError(source or "--price-input", None, None, "give both prices: input and output, USD per "
                                                                     "million tokens")
        price = Price(_price(given_in, source or "--price-input", "price_input"),
                      _price(given_out, source or "--price-output", "price_output"))
    return Endpoint(model=model, base_url=base_url, api_key=key, price=price)
