"""procgrade's engine: event model, store, ingest, scoring pipeline, analysis and CLI.

The public surface for library users; the modules behind it can move freely. Names are
imported on first use (PEP 562), so ``import engine`` (and the ``procgrade`` command's
start, where a Ctrl-C must already be answered cleanly) costs nothing until one is needed.
The documented API with one function per command is :mod:`engine.api`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from engine.version import __version__

#: Public name -> the module that defines it.
_EXPORTS = {
    "CanonicalJSONError": "engine.canonical", "canonical_json": "engine.canonical",
    "ConflictError": "engine.errors", "EventIdConflictError": "engine.errors", "InputError": "engine.errors",
    "ProcgradeError": "engine.errors", "RunSealedError": "engine.errors", "SchemaNotReadyError": "engine.errors",
    "SeqConflictError": "engine.errors", "StoreError": "engine.errors", "UnknownRunError": "engine.errors",
    "EVENT_KINDS": "engine.events", "AnyEvent": "engine.events", "Event": "engine.events",
    "event_adapter": "engine.events", "events_json_schema": "engine.events", "is_model_actor": "engine.events",
    "EXTRACTOR_VERSION": "engine.facts", "FACT_COLUMNS": "engine.facts", "extract_facts": "engine.facts",
    "IngestReport": "engine.ingest", "ingest_native": "engine.ingest", "ingest_paths": "engine.ingest",
    "LogVerification": "engine.log_verification", "verify_log": "engine.log_verification",
    "dump_native": "engine.native", "read_native": "engine.native",
    "AppendResult": "engine.store", "EventStore": "engine.store", "RunInfo": "engine.store",
    "init_database": "engine.store", "open_store": "engine.store",
    "RecordConflictError": "engine.recorder", "Recorder": "engine.recorder", "record": "engine.recorder",
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
    from engine.canonical import CanonicalJSONError, canonical_json
    from engine.errors import (
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
    from engine.events import EVENT_KINDS, AnyEvent, Event, event_adapter, events_json_schema, is_model_actor
    from engine.facts import EXTRACTOR_VERSION, FACT_COLUMNS, extract_facts
    from engine.ingest import IngestReport, ingest_native, ingest_paths
    from engine.log_verification import LogVerification, verify_log
    from engine.native import dump_native, read_native
    from engine.recorder import RecordConflictError, Recorder, record
    from engine.store import AppendResult, EventStore, RunInfo, init_database, open_store
