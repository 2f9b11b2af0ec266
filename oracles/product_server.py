"""The product under test: a fresh copy of the final workspace, on an empty database, on a free loopback port.

Every seed and every grade starts the product afresh (ViBench 2.0, Section 2.1: "every seed and grade starts
a fresh container from the final code with an empty database, so a product must install and start cleanly").
:func:`started_product` copies the workspace into a temporary folder, makes an empty database (a new SQLite
file, or a new database on the local PostgreSQL server that is dropped afterwards), runs the task's setup
commands, starts the product with ``PORT``, ``DATABASE_URL`` (and ``DATABASE_PATH`` for SQLite) in its
environment, and waits until its health path answers below 500, for at most ``start_timeout_sec``.

A product that does not start raises :class:`ProductDidNotStart` holding the whole start log (setup and start
output), which the grading keeps as evidence; every plan then fails.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from procgrade.engine.errors import ProcgradeError
from procgrade.oracles.browser_plans import ProductSpec
from procgrade.oracles.process_exit import wait_for_exit

__all__ = ["DEFAULT_POSTGRES", "ProductDidNotStart", "RunningProduct", "started_product", "free_port"]

#: The local PostgreSQL server a ``database: postgresql`` product gets its fresh database on.
DEFAULT_POSTGRES = os.environ.get("PROCGRADE_PRODUCT_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
_LOG_LIMIT = 1_000_000


class ProductDidNotStart(ProcgradeError):
    """The product's setup failed, or it did not answer its health check in time; ``log`` holds its output."""

    def __init__(self, reason: str, log: bytes) -> None:
        super().__init__(reason)
        self.reason, self.log = reason, log


@dataclass(frozen=True)
class RunningProduct:
    base_url: str
    port: int
    workspace: Path
    database_url: str
    log_path: Path

    def start_log(self) -> bytes:
        return self.log_path.read_bytes()[:_LOG_LIMIT]


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _fill(template: str, values: dict[str, str]) -> str:
    out = template
    for key, value in values.items():
        out = out.replace("{" + key + "}", shlex.quote(value))
    return out


@contextlib.contextmanager
def _database(kind: str, folder: Path, postgres: str) -> Iterator[tuple[str, str | None]]:
    """(DATABASE_URL, DATABASE_PATH or None) of an empty database, removed afterwards."""
    if kind == "sqlite":
        path = folder / "product.db"
        yield f"sqlite:///{path}", str(path)
        return
    import psycopg

    name = f"pg_product_{uuid.uuid4().hex[:16]}"
    try:
        admin = psycopg.connect(postgres, autocommit=True, connect_timeout=10)
    except psycopg.Error as exc:
        raise ProcgradeError(f"the local PostgreSQL server at {postgres} is unreachable: {str(exc).strip()}") from None
    try:
        admin.execute(f'CREATE DATABASE "{name}"')
        head, _, _ = postgres.rpartition("/")
        try:
            yield f"{head}/{name}", None
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        admin.close()


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    if not wait_for_exit(process, 5):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status < 500
    except urllib.error.HTTPError as exc:
        return exc.code < 500
    except (urllib.error.URLError, OSError):
        return False


@contextlib.contextmanager
def started_product(spec: ProductSpec, workspace: str | Path, *, postgres: str = DEFAULT_POSTGRES,
                    python: str = sys.executable) -> Iterator[RunningProduct]:
    """Start the product from a fresh copy of ``workspace`` on an empty database; stop it and remove
    everything on exit. Raises :class:`ProductDidNotStart` with the start log when it does not come up."""
    source = Path(workspace).resolve()
    if not source.is_dir():
        raise ProcgradeError(f"the workspace {source} is not a folder")
    with tempfile.TemporaryDirectory(prefix="procgrade-product-") as tmp:
        folder = Path(tmp)
        copy = folder / "workspace"
        shutil.copytree(source, copy, symlinks=True, ignore=shutil.ignore_patterns(".git", "__pycache__"))
        log_path = folder / "start.log"
        port = free_port()
        with _database(spec.database, folder, postgres) as (database_url, database_path), \
                open(log_path, "wb") as log:
            values = {"python": python, "port": str(port), "workspace": str(copy), "database_url": database_url,
                      "database_path": database_path or ""}
            env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(folder), "LANG": "C.UTF-8",
                   "TZ": "UTC", **spec.env, "PORT": str(port), "HOST": "127.0.0.1", "DATABASE_URL": database_url}
            if database_path:
                env["DATABASE_PATH"] = database_path

            def note(text: str) -> None:
                log.write(f"[procgrade] {text}\n".encode())
                log.flush()

            for command in spec.setup:
                line = _fill(command, values)
                note(f"setup: {line}")
                try:
                    done = subprocess.run(line, shell=True, cwd=copy, env=env, stdout=log, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL, timeout=spec.setup_timeout_sec,
                                          start_new_session=True)
                except subprocess.TimeoutExpired:
                    note(f"setup command timed out after {spec.setup_timeout_sec}s")
                    log.close()
                    raise ProductDidNotStart(f"the setup command {line!r} timed out", log_path.read_bytes()[:_LOG_LIMIT])
                if done.returncode != 0:
                    note(f"setup command exited {done.returncode}")
                    log.close()
                    raise ProductDidNotStart(f"the setup command {line!r} exited {done.returncode}",
                                             log_path.read_bytes()[:_LOG_LIMIT])
            line = _fill(spec.start, values)
            note(f"start: {line} (port {port})")
            process = subprocess.Popen(line, shell=True, cwd=copy, env=env, stdout=log, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, start_new_session=True)
            try:
                base_url = f"http://127.0.0.1:{port}"
                deadline = time.monotonic() + spec.start_timeout_sec
                while True:
                    if process.poll() is not None:
                        note(f"the product exited {process.returncode} before answering {spec.health_path}")
                        raise ProductDidNotStart(f"the product exited {process.returncode} before it answered its "
                                                 f"health check", log_path.read_bytes()[:_LOG_LIMIT])
                    if _healthy(base_url + spec.health_path):
                        break
                    if time.monotonic() > deadline:
                        note(f"no answer below 500 at {spec.health_path} within {spec.start_timeout_sec}s")
                        raise ProductDidNotStart(f"the product did not answer {spec.health_path} within "
                                                 f"{spec.start_timeout_sec}s", log_path.read_bytes()[:_LOG_LIMIT])
                    time.sleep(0.05)
                note("healthy")
                yield RunningProduct(base_url, port, copy, database_url, log_path)
            finally:
                _stop(process)
