"""procgrade's engine: event model, store, ingest, scoring pipeline, analysis and CLI.

The public surface for library users; the modules behind it can move freely.
"""

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
from engine.store import AppendResult, EventStore, RunInfo, init_database, open_store
from engine.recorder import RecordConflictError, Recorder, record

from engine.version import __version__  # noqa: E402

__all__ = [
    "AnyEvent",
    "AppendResult",
    "CanonicalJSONError",
    "ConflictError",
    "EVENT_KINDS",
    "EXTRACTOR_VERSION",
    "Event",
    "EventIdConflictError",
    "EventStore",
    "FACT_COLUMNS",
    "IngestReport",
    "InputError",
    "LogVerification",
    "ProcgradeError",
    "RunInfo",
    "RunSealedError",
    "SchemaNotReadyError",
    "SeqConflictError",
    "StoreError",
    "UnknownRunError",
    "__version__",
    "canonical_json",
    "dump_native",
    "event_adapter",
    "events_json_schema",
    "extract_facts",
    "verify_log",
    "init_database",
    "ingest_native",
    "ingest_paths",
    "is_model_actor",
    "open_store",
    "read_native",
    "record",
    "Recorder",
    "RecordConflictError",
]
