"""procgrade's engine: event model, store, ingest, scoring pipeline, analysis and CLI.

The public surface for library users; the modules behind it can move freely. Names are
imported on first use (PEP 562), so ``import engine`` (and the ``procgrade`` command's
start, where a Ctrl-C must already be answered cleanly) costs nothing until one is needed.
The documented API with one function per command is :mod:`procgrade.engine.api`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from procgrade.engine.version import __version__

#: Public name -> the module that defines it.
_EXPORTS = {
    "CanonicalJSONError": "procgrade.engine.canonical", "canonical_json": "procgrade.engine.canonical",
    "ConflictError": "procgrade.engine.errors", "EventIdConflictError": "procgrade.engine.errors", "InputError": "procgrade.engine.errors",
    "ProcgradeError": "procgrade.engine.errors", "RunSealedError": "procgrade.engine.errors", "SchemaNotReadyError": "procgrade.engine.errors",
    "SeqConflictError": "procgrade.engine.errors", "StoreError": "procgrade.engine.errors", "UnknownRunError": "procgrade.engine.errors",
    "EVENT_KINDS": "procgrade.engine.events", "AnyEvent": "procgrade.engine.events", "Event": "procgrade.engine.events",
    "event_adapter": "procgrade.engine.events", "events_json_schema": "procgrade.engine.events", "is_model_actor": "procgrade.engine.events",
    "EXTRACTOR_VERSION": "procgrade.engine.facts", "FACT_COLUMNS": "procgrade.engine.facts", "extract_facts": "procgrade.engine.facts",
    "IngestReport": "procgrade.engine.ingest", "ingest_native": "procgrade.engine.ingest", "ingest_paths": "procgrade.engine.ingest",
    "LogVerification": "procgrade.engine.log_verification", "verify_log": "procgrade.engine.log_verification",
    "dump_native": "procgrade.engine.native", "read_native": "procgrade.engine.native",
    "AppendResult": "procgrade.engine.store", "EventStore": "procgrade.engine.store", "RunInfo": "procgrade.engine.store",
    "init_database": "procgrade.engine.store", "open_store": "procgrade.engine.store",
    "RecordConflictError": "procgrade.engine.recorder", "Recorder": "procgrade.engine.recorder", "record": "procgrade.engine.recorder",
}

__all__ = sorted([*_EXPORTS, "__version__"])


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'engine' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


if TYPE_CHECKING:  # pragma: no cover - what type checkers and IDEs see
    from procgrade.engine.canonical import CanonicalJSONError, canonical_json
    from procgrade.engine.errors import (
        ConflictError,
        EventIdConflictError,
        InputError,
        ProcgradeError,
        RunSealedError,
        SchemaNotReadyError,
        SeqConflictError,
        StoreError,
        UnknownRunError,
    )
    from procgrade.engine.events import EVENT_KINDS, AnyEvent, Event, event_adapter, events_json_schema, is_model_actor
    from procgrade.engine.facts import EXTRACTOR_VERSION, FACT_COLUMNS, extract_facts
    from procgrade.engine.ingest import IngestReport, ingest_native, ingest_paths
    from procgrade.engine.log_verification import LogVerification, verify_log
    from procgrade.engine.native import dump_native, read_native
    from procgrade.engine.recorder import RecordConflictError, Recorder, record
    from procgrade.engine.store import AppendResult, EventStore, RunInfo, init_database, open_store
