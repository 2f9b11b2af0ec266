"""The fact extractor: the typed columns rules read, derived from a validated event.

Rules never parse JSON at scoring time; they read these columns. The columns are
a pure function of the event, versioned by :data:`EXTRACTOR_VERSION`: a change to
what any column means is a new version, and the version enters every rule-set
hash, so old scores stay reproducible and new ones are told apart.
"""

from __future__ import annotations

import hashlib
from typing import Any

from engine.events import (
    Command,
    Delegation,
    Event,
    FileEdit,
    FileRead,
    JobFinished,
    JobPolled,
    JobStarted,
    Message,
    TestRun,
    WorkerReport,
)

__all__ = ["EXTRACTOR_VERSION", "FACT_COLUMNS", "extract_facts", "command_hash", "test_outcome"]

EXTRACTOR_VERSION = "1"

#: Column name -> SQL type family ("text" or "int"). Order is the column order in the store.
FACT_COLUMNS: dict[str, str] = {
    "path": "text",
    "command": "text",
    "cmd_hash": "text",
    "exit_code": "int",
    "outcome": "text",
    "job_id": "text",
    "worker_id": "text",
    "intent": "text",
    "tests_passed": "int",
    "tests_failed": "int",
    "tests_errored": "int",
    "context_count": "int",
}

_EMPTY: tuple[Any, ...] = (None,) * len(FACT_COLUMNS)


def command_hash(command: str) -> str:
    """Identity of a command line, whitespace-normalised, for "same command again" rules."""
    return hashlib.sha256(" ".join(command.split()).encode()).hexdigest()[:32]


def test_outcome(event: TestRun) -> str | None:
    """pass / fail / error from the counts and exit code; None when nothing tells."""
    if event.errored:
        return "error"
    if event.failed:
        return "fail"
    if event.exit_code is not None and event.exit_code != 0:
        return "fail"
    if event.passed or event.exit_code == 0:
        return "pass"
    return None


def _exit_outcome(exit_code: int | None) -> str | None:
    if exit_code is None:
        return None
    return "pass" if exit_code == 0 else "fail"


def _row(**columns: Any) -> tuple[Any, ...]:
    return tuple(columns.get(name) for name in FACT_COLUMNS)


def extract_facts(event: Event) -> tuple[Any, ...]:
    """The fact columns of ``event`` as a tuple in :data:`FACT_COLUMNS` order."""
    if isinstance(event, (FileRead, FileEdit)):
        return _row(path=event.path)
    if isinstance(event, Command):
        return _row(command=event.command, cmd_hash=command_hash(event.command),
                    exit_code=event.exit_code, outcome=_exit_outcome(event.exit_code))
    if isinstance(event, TestRun):
        cmd = event.command
        return _row(command=cmd, cmd_hash=command_hash(cmd) if cmd is not None else None,
                    exit_code=event.exit_code, outcome=test_outcome(event),
                    tests_passed=event.passed, tests_failed=event.failed, tests_errored=event.errored)
    if isinstance(event, Message):
        return _row(intent=event.intent)
    if isinstance(event, Delegation):
        return _row(worker_id=event.worker_id, context_count=len(event.context or ()))
    if isinstance(event, WorkerReport):
        return _row(worker_id=event.worker_id, outcome=event.status)
    if isinstance(event, JobStarted):
        cmd = event.command
        return _row(job_id=event.job_id, command=cmd, cmd_hash=command_hash(cmd) if cmd is not None else None)
    if isinstance(event, JobPolled):
        return _row(job_id=event.job_id)
    if isinstance(event, JobFinished):
        return _row(job_id=event.job_id, exit_code=event.exit_code, outcome=_exit_outcome(event.exit_code))
    return _EMPTY
