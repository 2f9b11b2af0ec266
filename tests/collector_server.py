"""A real collector (``procgrade serve``) in a subprocess on a free loopback port, for tests."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from procgrade.engine.collector_client import run_path
from procgrade.engine.store import open_store
from procgrade.engine.tokens import TokenStore

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    """Start, SIGKILL and restart a collector over one database; its output goes to ``log``."""

    def __init__(self, db_url: str, log: Path, *extra: str) -> None:
        self.db_url, self.log, self.extra = db_url, log, extra
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        store = open_store(db_url, create=True)
        try:
            self.tokens = TokenStore(store.engine)
            self.token_ids: list[str] = []
        finally:
            self.store = store

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def token(self, project: str, scope: str = "write") -> str:
        secret, info = self.tokens.create(project, scope)
        self.token_ids.append(secret)
        return secret

    def start(self, wait: bool = True) -> None:
        out = open(self.log, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from procgrade.engine.cli import main; main()", "serve", "--db", self.db_url, "--port", str(self.port), *self.extra],
            cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        out.close()
        if wait:
            self.wait_ready()

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(f"the collector exited with {self.proc.returncode}:\n{self.log.read_text()}")
            try:
                with urllib.request.urlopen(self.url + "/readyz", timeout=2) as response:
                    if response.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"the collector did not become ready in {timeout} s:\n{self.log.read_text()}")

    def kill(self) -> None:
        """SIGKILL: no shutdown handler runs, an open transaction is cut off."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()
        self.store.close()


def call(server_url: str, method: str, path: str, token: str | None = None, body: bytes | None = None,
         headers: dict[str, str] | None = None) -> tuple[int, Any]:
    """One HTTP request; (status, JSON body, or text for NDJSON)."""
    request = urllib.request.Request(server_url + path, data=body, method=method, headers=dict(headers or {}))
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            status, raw, kind = response.status, response.read(), response.headers.get("content-type", "")
    except urllib.error.HTTPError as exc:
        status, raw, kind = exc.code, exc.read(), exc.headers.get("content-type", "")
    if "json" in kind and "ndjson" not in kind:
        return status, json.loads(raw)
    return status, raw.decode()


__all__ = ["Server", "call", "free_port", "run_path"]
