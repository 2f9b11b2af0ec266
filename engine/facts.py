"""The fact extractor: the typed columns rules read, derived from a validated event.

Rules never parse JSON at scoring time; they read these columns. The columns are
a pure function of the event, versioned by :data:`EXTRACTOR_VERSION`: a change to
what any column means is a new version, and the version enters every rule-set
hash, so old scores stay reproducible and new ones are told apart.
"""

from __future__ import annotations

import hashlib
import operator
import posixpath
from functools import lru_cache
from typing import Any

from procgrade.engine.command_io import command_io, normalised_command
from procgrade.engine.events import (
    AcceptanceVerdict,
    Command,
    Delegation,
    EVENT_KINDS,
    Event,
    FileEdit,
    FileRead,
    Grade,
    RunEnded,
    JobFinished,
    JobPolled,
    JobStarted,
    Message,
    TestResult,
    TestRun,
    WorkerReport,
)

__all__ = ["EXTRACTOR_VERSION", "EXTRACTOR_VERSIONS", "area_of", "FACT_COLUMNS", "extract_facts", "command_hash", "normal_path", "test_outcome", "verdict_outcome"]

#: Version 2 added columns (``io_path``, ``io``, ``status``, ``area``, ``cmd_key``) and left
#: every version-1 column as it was, so rule sets of version 1 read the same values.
EXTRACTOR_VERSION = "2"
#: Extractor versions whose rule sets this engine still evaluates (archived scores re-verify).
EXTRACTOR_VERSIONS = ("1", "2")

#: Column name -> SQL type family ("text" or "int"). Order is the column order in the store.
FACT_COLUMNS: dict[str, str] = {
    "path": "text",
    "new_path": "text",
    "edit_kind": "text",
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
    # extractor 2
    "io_path": "text",   # the file a read reads, a job writes (derived from the command line when needed)
    "io": "text",        # read / job_started / job_finished
    "status": "text",    # how a run ended (run_ended.status)
    "area": "text",      # top-level part of a read or edited path ("." for the workspace root)
    "cmd_key": "text",   # identity of a command line after normalisation (cd/env/timeout/bash -c dropped)
}

_EMPTY: tuple[Any, ...] = (None,) * len(FACT_COLUMNS)


def normal_path(path: str | None) -> str | None:
    """One spelling per path, so rules compare files, not spellings: ``./a`` is ``a``, and
    ``app/../../x`` is ``../x`` (visibly outside the workspace). Lexical only: the file
    system is never consulted, so the result depends on the log alone."""
    if path is None:
        return None
    return _normpath(path) if len(path) <= _REMEMBERED_LENGTH else posixpath.normpath(path)


#: Paths and command lines up to this long are remembered: a run reads, edits and runs the same
#: few hundred again and again, and each event derives several columns from them.
_REMEMBERED_LENGTH = 1024
_normpath = lru_cache(maxsize=8192)(posixpath.normpath)


def area_of(path: str | None) -> str | None:
    """The top-level part of a normalised path: ``src`` for ``src/a/b.py``, ``.`` for a file at
    the workspace root, ``/etc`` for ``/etc/hosts``, ``..`` for anything above the workspace."""
    if path is None:
        return None
    if path.startswith("../") or path == "..":
        return ".."
    if path.startswith("/"):
        parts = path.split("/")
        return "/" + parts[1] if len(parts) > 2 else "/"
    return path.split("/", 1)[0] if "/" in path else "."


def command_hash(command: str) -> str:
    """Identity of a command line, whitespace-normalised, for "same command again" rules."""
    return _remembered_command_hash(command) if len(command) <= _REMEMBERED_LENGTH else _command_hash(command)


def _command_hash(command: str) -> str:
    return hashlib.sha256(" ".join(command.split()).encode()).hexdigest()[:32]


_remembered_command_hash = lru_cache(maxsize=8192)(_command_hash)


def test_outcome(event: TestRun) -> str | None:
    """pass / fail / error from the counts and exit code; None when nothing tells."""
    return _test_outcome(event.exit_code, event.passed, event.failed, event.errored)


def _test_outcome(exit_code: int | None, passed: int | None, failed: int | None, errored: int | None) -> str | None:
    if errored:
        return "error"
    if failed:
        return "fail"
    if exit_code is not None and exit_code != 0:
        return "fail"
    if passed or exit_code == 0:
        return "pass"
    return None


def verdict_outcome(event: AcceptanceVerdict) -> str:
    """pass only for an evaluated verdict with reward 1; fail for any other evaluated
    reward; otherwise the status itself (rejected, timeout, ...), never a pass."""
    if event.status != "evaluated":
        return event.status
    return "pass" if event.reward == "1" else "fail"


def _exit_outcome(exit_code: int | None) -> str | None:
    if exit_code is None:
        return None
    return "pass" if exit_code == 0 else "fail"


_INDEX = {name: i for i, name in enumerate(FACT_COLUMNS)}


def _extractor(**sources: Any) -> Any:
    """Build a fast extractor: ``column=callable(event)`` pairs placed at their column positions
    (each callable is handed what the extractor is: the event, or the values of
    :func:`_field_extractor`'s inputs)."""
    slots = tuple((_INDEX[name], getter) for name, getter in sources.items())
    width = len(FACT_COLUMNS)

    def extract(*given: Any) -> tuple[Any, ...]:
        row = [None] * width
        for index, getter in slots:
            row[index] = getter(*given)
        return tuple(row)

    return extract


def _field_extractor(inputs: tuple[str, ...], *, remember: bool = True, **sources: Any) -> Any:
    """An extractor whose columns are functions of the fields ``inputs`` alone: each
    ``column=callable(*values of inputs)`` (it is handed nothing else, so it cannot depend on
    anything else), remembered by those values. A run reads, edits and runs the same few
    hundred paths and commands again and again. Only plain ints, None and texts up to a remembered
    path's length are kept, the first :data:`_REMEMBERED_FACTS` distinct inputs (a validated event
    holds nothing else; an unvalidated copy holding ``True`` must not answer for ``1``).
    ``remember=False`` for inputs that may be lists (unhashable): derived every time.

    The extractor takes the event; its ``of_fields`` takes the event's validated fields as a
    mapping (native ingest's workers validate a line's fields without building the model), and
    answers from the same functions and the same memory."""
    derive = _extractor(**sources)
    single = len(inputs) == 1
    remembered: dict[Any, tuple[Any, ...]] = {}

    def derived(key: Any) -> tuple[Any, ...]:
        values = (key,) if single else key
        facts = derive(*values)
        if remember and len(remembered) < _REMEMBERED_FACTS and all(
                value is None or type(value) is int or (type(value) is str and len(value) <= _REMEMBERED_LENGTH)
                for value in values):  # never a bool or float (1 == True == 1.0 as keys)
            remembered[key] = facts
        return facts

    def bound(values_of: Any) -> Any:
        if not remember:
            return lambda holder: derived(values_of(holder))

        def extract(holder: Any) -> tuple[Any, ...]:
            key = values_of(holder)
            facts = remembered.get(key)
            return derived(key) if facts is None else facts
        return extract

    extract = bound(operator.attrgetter(*inputs))
    extract.of_fields = bound(operator.itemgetter(*inputs))  # type: ignore[attr-defined]
    extract.remembered = remembered  # type: ignore[attr-defined]
    return extract


#: Distinct inputs remembered per kind (each at most a few KB).
_REMEMBERED_FACTS = 8192


def _command_hash_of(command: str | None) -> str | None:
    return None if command is None else command_hash(command)


def _command_key_of(command: str | None) -> str | None:
    return None if command is None else command_hash(normalised_command(command))


def _job_output(command: str | None, output_path: str | None) -> str | None:
    return normal_path(output_path if output_path is not None else command_io(command).path)


_EXTRACTORS: dict[type[Event], Any] = {
    # the kinds most events are, remembered by the fields they derive from
    FileRead: _field_extractor(("path",), path=normal_path, io_path=normal_path, io=lambda path: "read",
                               area=lambda path: area_of(normal_path(path))),
    FileEdit: _field_extractor(("path", "new_path", "edit_kind"),
                               path=lambda path, new, how: normal_path(path),
                               new_path=lambda path, new, how: normal_path(new),
                               edit_kind=lambda path, new, how: how,
                               area=lambda path, new, how: area_of(normal_path(path))),
    Command: _field_extractor(("command", "exit_code"), command=lambda command, code: command,
                              cmd_hash=lambda command, code: _command_hash_of(command),
                              exit_code=lambda command, code: code,
                              outcome=lambda command, code: _exit_outcome(code),
                              io_path=lambda command, code: normal_path(command_io(command).path),
                              io=lambda command, code: command_io(command).role,
                              cmd_key=lambda command, code: _command_key_of(command)),
    TestRun: _field_extractor(("command", "exit_code", "passed", "failed", "errored"),
                              command=lambda command, *counts: command,
                              cmd_hash=lambda command, *counts: _command_hash_of(command),
                              exit_code=lambda command, code, passed, failed, errored: code,
                              outcome=lambda command, *counts: _test_outcome(*counts),
                              tests_passed=lambda command, code, passed, failed, errored: passed,
                              tests_failed=lambda command, code, passed, failed, errored: failed,
                              tests_errored=lambda command, code, passed, failed, errored: errored,
                              cmd_key=lambda command, *counts: _command_key_of(command)),
    Message: _field_extractor(("intent",), intent=lambda intent: intent),
    Delegation: _field_extractor(("worker_id", "context"), remember=False,
                                 worker_id=lambda worker, context: worker,
                                 context_count=lambda worker, context: len(context or ())),
    # The report's primary evidence (the first path it cites) is what must be re-read.
    WorkerReport: _field_extractor(("worker_id", "status", "evidence"), remember=False,
                                   worker_id=lambda worker, status, evidence: worker,
                                   outcome=lambda worker, status, evidence: status,
                                   path=lambda worker, status, evidence:
                                   normal_path(evidence[0]) if evidence else None),
    JobStarted: _field_extractor(("job_id", "command", "output_path"),
                                 job_id=lambda job, command, output: job,
                                 command=lambda job, command, output: command,
                                 cmd_hash=lambda job, command, output: _command_hash_of(command),
                                 path=lambda job, command, output: normal_path(output),
                                 io_path=lambda job, command, output: _job_output(command, output),
                                 io=lambda job, command, output: "job_started",
                                 cmd_key=lambda job, command, output: _command_key_of(command)),
    JobPolled: _field_extractor(("job_id",), job_id=lambda job: job),
    JobFinished: _field_extractor(("job_id", "exit_code", "output_path"),
                                  job_id=lambda job, code, output: job,
                                  exit_code=lambda job, code, output: code,
                                  outcome=lambda job, code, output: _exit_outcome(code),
                                  path=lambda job, code, output: normal_path(output),
                                  io_path=lambda job, code, output: normal_path(output),
                                  io=lambda job, code, output: "job_finished"),
    RunEnded: _field_extractor(("status",), status=lambda status: status),
    AcceptanceVerdict: _extractor(outcome=verdict_outcome, tests_passed=lambda e: e.passed,
                                  tests_failed=lambda e: e.failed, tests_errored=lambda e: e.errored),
    TestResult: _field_extractor(("outcome",), outcome=lambda outcome: outcome),
    Grade: _extractor(outcome=lambda e: None if e.passed is None else ("pass" if e.passed else "fail")),
}


def extract_facts(event: Event) -> tuple[Any, ...]:
    """The fact columns of ``event`` as a tuple in :data:`FACT_COLUMNS` order."""
    extractor = _EXTRACTORS.get(type(event))
    return _EMPTY if extractor is None else extractor(event)


#: Per kind: its fact columns from its validated fields as a mapping (every field of the model,
#: None where not given), for the kinds whose extractor reads named fields only; a kind with no
#: fact columns answers :data:`_EMPTY`. Kinds missing here (their extractor reads the model) must
#: be extracted from the model.
FIELD_EXTRACTORS: dict[str, Any] = {
    kind: (lambda fields: _EMPTY) if extractor is None else extractor.of_fields
    for kind, cls in EVENT_KINDS.items()
    if (extractor := _EXTRACTORS.get(cls)) is None or hasattr(extractor, "of_fields")
}
