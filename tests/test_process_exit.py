"""Waiting for a child with a time limit (oracles/process_exit.py): the local sandbox's test run
and the product server's stop wait this way, woken by the exit itself rather than by a look
every 50 ms."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from procgrade.oracles import process_exit
from procgrade.oracles.process_exit import wait_for_exit

pytestmark = pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="no pidfd on this platform (Linux 5.3+)")


def _child(seconds: float, code: int = 0) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", f"import time, sys; time.sleep({seconds}); sys.exit({code})"])


def test_an_exit_is_seen_without_sleeping_in_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    """``Popen.wait(timeout=...)`` sleeps in steps of up to 50 ms; this wait never sleeps at all."""
    child = _child(0.3, code=3)

    def no_sleeping(_seconds: float) -> None:
        raise AssertionError("waited by sleeping in steps")

    monkeypatch.setattr(time, "sleep", no_sleeping)
    assert wait_for_exit(child, 30) is True
    assert child.returncode == 3  # reaped


def test_the_time_limit_leaves_the_child_running() -> None:
    child = _child(30)
    try:
        assert wait_for_exit(child, 0.2) is False
        assert child.poll() is None
    finally:
        child.kill()
        child.wait()
    assert wait_for_exit(child, 0.2) is True  # reaped already: answered at once


def test_without_pidfds_the_standard_librarys_wait_gives_the_same_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(os, "pidfd_open")
    slow = _child(30)
    try:
        assert wait_for_exit(slow, 0.2) is False
    finally:
        slow.kill()
        slow.wait()
    quick = _child(0, code=5)
    assert wait_for_exit(quick, 30) is True and quick.returncode == 5


def test_a_kernel_refusing_pidfds_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(_pid: int) -> int:
        raise OSError(38, "Function not implemented")

    monkeypatch.setattr(process_exit.os, "pidfd_open", refused)
    quick = _child(0, code=4)
    assert wait_for_exit(quick, 30) is True and quick.returncode == 4
