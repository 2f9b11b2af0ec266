"""Import workers that fail the hard way: one killed in the middle of handing a run over gives a
named error, not a bare pipe error; one whose parent is killed outright dies with it instead of
holding a copy of the parent's database connection (and a PostgreSQL transaction) forever."""

from __future__ import annotations

import os
import signal
import struct
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from procgrade.engine.importers import pipeline
from procgrade.engine.importers.base import Importer, Unit
from procgrade.engine.importers.source_tree import SourceTree

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="fork and PR_SET_PDEATHSIG are Linux's")


class _Endless(Importer):
    name = "endless"

    def worth_a_worker(self, tree: SourceTree, unit: Unit) -> bool:
        return True

    def iter_runs(self, tree: SourceTree, unit: Unit) -> Iterator[Any]:
        raise AssertionError("the test's worker never reads")


def _cut_off(read: Any, tree: Any, writer: Any, *rest: Any) -> None:
    """A worker killed while sending: a frame header promising 1000 bytes, 10 of them, gone."""
    os.write(writer.fileno(), struct.pack("!i", 1000) + b"x" * 10)
    os._exit(9)


def test_a_worker_cut_off_mid_message_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROCGRADE_IMPORT_WORKERS", "1")
    monkeypatch.setattr(pipeline, "_read", _cut_off)
    tree = SourceTree("archive", {"log.json": b"{}"})
    with pytest.raises(RuntimeError, match=r"import worker reading .*log\.json stopped \(exit code 9\)"):
        list(pipeline.prepared_runs_of(_Endless(), tree, Unit("log.json")))


_PARENT = textwrap.dedent("""
    import os, sys, time
    from procgrade.engine.importers import pipeline
    from procgrade.engine.importers.base import Importer, Unit
    from procgrade.engine.importers.source_tree import SourceTree

    class Hanging(Importer):
        name = "hanging"
        def worth_a_worker(self, tree, unit):
            return True
        def iter_runs(self, tree, unit):  # runs in the worker
            with open(sys.argv[1] + ".tmp", "w") as handle:
                handle.write(str(os.getpid()))
            os.rename(sys.argv[1] + ".tmp", sys.argv[1])
            time.sleep(120)
            yield from ()

    os.environ["PROCGRADE_IMPORT_WORKERS"] = "1"
    list(pipeline.prepared_runs_of(Hanging(), SourceTree("archive", {"log.json": b"{}"}), Unit("log.json")))
""")


def _alive(pid: int) -> bool:
    """Running, not a zombie left for a PID 1 that does not reap."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status


def test_a_worker_dies_with_a_parent_killed_outright(tmp_path: Path) -> None:
    pid_file = tmp_path / "worker.pid"
    parent = subprocess.Popen([sys.executable, "-c", _PARENT, str(pid_file)])
    try:
        deadline = time.monotonic() + 60
        while not pid_file.exists():
            assert parent.poll() is None, "the parent ended before its worker started"
            assert time.monotonic() < deadline, "the worker never started"
            time.sleep(0.05)
        worker = int(pid_file.read_text())
        assert _alive(worker)
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + 10
        while _alive(worker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(worker), "the worker outlived its parent"
    finally:
        if parent.poll() is None:
            parent.kill()
        if pid_file.exists() and _alive(int(pid_file.read_text())):
            os.kill(int(pid_file.read_text()), signal.SIGKILL)
