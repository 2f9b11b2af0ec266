"""The recorder's side of the collector protocol (``procgrade serve``), on the standard library.

A harness that records through a collector needs no HTTP dependency. Appends are
native JSONL bodies (the very lines ``procgrade ingest`` reads) with the expected
next seq in the query; the answers map back onto the recorder's errors: 409 is a
:class:`~procgrade.engine.recorder.RecordConflictError` with the run's head, a connection
failure or 5xx is transient (the recorder retries the same batch), 4xx is the
collector's located message.
"""

from __future__ import annotations

import http.client
import urllib.parse
from typing import Any

import orjson

from procgrade.engine.errors import InputError, ProcgradeError, RunSealedError, UnknownRunError
from procgrade.engine.events import Event
from procgrade.engine.native import dump_native
from procgrade.engine.recorder import Head, RecordConflictError, TransientError

__all__ = ["HttpTransport", "CollectorError", "run_path"]


class CollectorError(ProcgradeError):
    """The collector refused the request (status and its message)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"collector answered {status}: {message}")
        self.status = status


def run_path(run_id: str, resource: str = "runs", query: str = "") -> str:
    """``/v1/<resource>/<run id>``: the run id last, so one holding ``/`` stays unambiguous."""
    return f"/v1/{resource}/{urllib.parse.quote(run_id, safe='/:@+')}{query}"


class HttpTransport:
    """One keep-alive connection to a collector; reconnects after any failure."""

    def __init__(self, url: str, token: str, *, timeout: float = 30.0) -> None:
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ProcgradeError(f"not a collector URL: {url!r}")
        self.scheme, self.host, self.port = parsed.scheme, parsed.hostname, parsed.port
        self.base = parsed.path.rstrip("/")
        self.timeout = timeout
        self._token = token
        self._conn: http.client.HTTPConnection | None = None

    def request(self, method: str, path: str, body: bytes | None = None,
                content_type: str = "application/json") -> tuple[int, Any]:
        """Send one request; (status, parsed JSON body). Network failures are :class:`TransientError`."""
        headers = {"Authorization": f"Bearer {self._token}", "Content-Type": content_type}
        try:
            if self._conn is None:
                cls = http.client.HTTPSConnection if self.scheme == "https" else http.client.HTTPConnection
                self._conn = cls(self.host, self.port, timeout=self.timeout)
            self._conn.request(method, self.base + path, body=body, headers=headers)
            response = self._conn.getresponse()
            raw = response.read()
        except (OSError, http.client.HTTPException) as exc:
            self.close()
            raise TransientError(f"collector {self.host}:{self.port} unreachable: {type(exc).__name__}: {exc}") from None
        if response.status >= 500:
            self.close()
            raise TransientError(f"collector answered {response.status}: {raw[:200]!r}")
        try:
            data = orjson.loads(raw) if raw else None
        except orjson.JSONDecodeError:
            data = raw.decode("utf-8", "replace")
        return response.status, data

    def head(self, run_id: str) -> Head:
        status, data = self.request("GET", run_path(run_id))
        if status == 404:
            return Head(0, None)
        _raise_for(status, data)
        return Head(data["event_count"], data["head_hash"], data["sealed"])

    def append(self, run_id: str, events: list[Event], expected_seq: int) -> Head:
        body = b"".join(dump_native(events))
        status, data = self.request("POST", run_path(run_id, "events", f"?expected_seq={expected_seq}"), body,
                                    content_type="application/x-ndjson")
        if status == 409 and isinstance(data, dict) and data.get("code") == "sealed":
            raise RunSealedError(data["error"], run_id=run_id)
        if status == 409 and isinstance(data, dict):
            head = Head(data["event_count"], data["head_hash"], data.get("sealed", False))
            raise RecordConflictError(data["error"], run_id=run_id, seq=data.get("seq"), head=head)
        _raise_for(status, data)
        return Head(data["event_count"], data["head_hash"], data["sealed"])

    def seal(self, run_id: str) -> Head:
        status, data = self.request("POST", run_path(run_id, "seal"))
        _raise_for(status, data)
        return Head(data["event_count"], data["head_hash"], data["sealed"])

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def _raise_for(status: int, data: Any) -> None:
    if status < 400:
        return
    message = data.get("error", "") if isinstance(data, dict) else str(data)
    if status == 400 and isinstance(data, dict) and data.get("source"):
        raise InputError(data["source"], data.get("line"), data.get("field"), data.get("reason", message))
    if status == 404:
        raise UnknownRunError(message)
    raise CollectorError(status, message)
