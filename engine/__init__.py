"""procgrade's engine: event model, store, ingest, scoring pipeline, analysis and CLI.

The public surface for library users; the modules behind it can move freely.
"""

from importlib import import_module
from typing import Any

from engine.version import __version__

#: Where each public name lives. Imported on first use (PEP 562), so that ``procgrade --help`` and
#: light commands do not pay for the store's database drivers or the event model.
_PUBLIC = {
    "CanonicalJSONError": "engine.canonical", "canonical_json": "engine.canonical",
    **{name: "engine.errors" for name in ("ConflictError", "EventIdConflictError", "InputError", "ProcgradeError",
                                          "RunSealedError", "SchemaNotReadyError", "SeqConflictError",
                                          "StoreError", "UnknownRunError")},
    **{name: "engine.events" for name in ("EVENT_KINDS", "AnyEvent", "Event", "event_adapter",
                                          "events_json_schema", "is_model_actor")},
    **{name: "engine.facts" for name in ("EXTRACTOR_VERSION", "FACT_COLUMNS", "extract_facts")},
    **{name: "engine.ingest" for name in ("IngestReport", "ingest_native", "ingest_paths")},
    **{name: "engine.log_verification" for name in ("LogVerification", "verify_log")},
    **{name: "engine.native" for name in ("dump_native", "read_native")},
    **{name: "engine.store" for name in ("AppendResult", "EventStore", "RunInfo", "init_database", "open_store")},
    **{name: "engine.recorder" for name in ("RecordConflictError", "Recorder", "record")},
}


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'engine' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PUBLIC))


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
