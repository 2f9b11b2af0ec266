"""procgrade: an event-sourced process-grading engine for long-horizon coding-agent builds.

``import procgrade`` is the Python API (:mod:`procgrade.engine.api`: one function per command,
DataFrame views for notebooks) and the live recorder (:mod:`procgrade.engine.recorder`). The
repository root is this package; its folders are the sub-packages (``procgrade.engine``,
``procgrade.rules``, ``procgrade.oracles``, ``procgrade.judges``, ``procgrade.migrations``), so the
one installed name never shadows another project's ``engine``, ``rules`` or ``migrations``.

Names load on first use (PEP 562): ``procgrade --help`` imports this package too and must not pay
for the store, the event model or the analysis libraries.
"""

from __future__ import annotations

import importlib
from typing import Any

from procgrade.engine.version import __version__

#: The public names, each with the module that defines it (tests/test_packaging.py keeps this list
#: equal to ``procgrade.engine.api.__all__`` plus the recorder's).
_API = (
    "Store", "open_store", "init",
    "ingest", "formats", "runs", "show", "verify_log", "export", "seal", "schema",
    "score", "rescore", "verify", "Verification", "explain", "Explanation", "validate_rules",
    "import_grades", "accept", "validate_task", "outcomes", "compare", "calibrate", "report",
    "runs_df", "events_df", "findings_df", "scores_df", "outcomes_df", "grades_df",
    "EventStore", "RunInfo", "Event", "Ingested", "LogVerification", "ScoreOutcome", "Drift",
    "ProcgradeError", "InputError", "StoreError", "SchemaNotReadyError", "ConflictError", "SeqConflictError",
    "EventIdConflictError", "RunSealedError", "UnknownRunError", "DatabaseUnavailableError",
    "MissingExtraError", "OutputPathError",
    "DEFAULT_DB",
)
_RECORDER = ("record", "Recorder", "RecordConflictError")
_WHERE = {**{name: "procgrade.engine.api" for name in _API},
          **{name: "procgrade.engine.recorder" for name in _RECORDER}}

__all__ = [*_API, *_RECORDER, "__version__"]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'procgrade' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
