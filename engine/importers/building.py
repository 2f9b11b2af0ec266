"""Building a run's events from source records: the one way every importer emits events.

An importer reads its format and, record by record, tells a :class:`RunBuilder`
what happened. The builder does what every importer must do the same way:

- redacts secrets in each record before anything is read from it (:class:`Record`);
- gives events gapless seqs (``run_started`` at 0, process events, then outcome
  events appended after them) and deterministic event ids made from the run and
  the record's place (``file:record``), so a re-import is a no-op;
- keeps every source record whole in the payload of the first event made from
  it (later events from the same record point at that seq), with its native id;
- refuses to finish while a record it was given produced no event, so nothing is
  silently dropped;
- turns a shell command into a ``command`` or ``test_run`` event plus the file
  reads and edits the command line shows;
- reports a bad source field as ``FILE:RECORD: field: reason``.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from procgrade.engine.errors import InputError, ProcgradeError
from procgrade.engine.events import EVENT_KINDS, TS_PATTERN, Event, is_instant
from procgrade.engine.importers.provenance import current_overrides, resolve
from procgrade.engine.importers.redaction import Redactor
from procgrade.engine.importers.shell import file_effects
from procgrade.engine.importers.source_tree import SourceTree
from procgrade.engine.importers.test_runs import is_test_command, parse_test_counts

__all__ = ["Record", "RunBuilder", "ImportedRun", "ImporterBug", "timestamp", "MISSING"]


class ImporterBug(ProcgradeError):
    """An importer broke the builder's contract (a record produced no event, ...)."""


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()

_TYPE_NAMES = {str: "a string", int: "an integer", bool: "a boolean", dict: "an object", list: "an array",
               float: "a number", type(None): "null"}


class Record:
    """One source record, redacted, with typed accessors that name the field on error."""

    def __init__(self, tree: SourceTree, file: str, record: str, data: Any, native_id: str | None,
                 place: str | None = None) -> None:
        self.tree, self.file, self.record, self.data, self.native_id = tree, file, record, data, native_id
        #: ``file`` relative to the run's own folder: what ids and payloads name, so they do not
        #: depend on how far up the tree the user pointed (``file`` stays for error messages).
        self.place = place if place is not None else file
        self.first_seq: int | None = None
        self.held_by_start = False

    @property
    def where(self) -> str:
        return f"{self.place}:{self.record}"

    def error(self, field: str | None, reason: str) -> InputError:
        return InputError(self.tree.label(self.file), self.record, field, reason)

    def get(self, path: str, types: type | tuple[type, ...] = object, *, required: bool = True,
            default: Any = None) -> Any:
        """The value at dotted ``path`` (``args.command``, ``steps.0.id``); a missing value is
        an error when ``required``, else ``default``; a value of another type is an error."""
        value: Any = self.data
        for part in path.split(".") if path else ():
            if isinstance(value, dict):
                value = value.get(part, MISSING)
            elif isinstance(value, list) and part.isdigit():
                value = value[int(part)] if int(part) < len(value) else MISSING
            else:
                value = MISSING
            if value is MISSING:
                break
        nullable = types is object or type(None) in _as_tuple(types)
        if value is MISSING or (value is None and not nullable):
            if required:
                raise self.error(path or None, "missing" if value is MISSING else "must not be null")
            return default
        if value is None:
            return default if type(None) not in _as_tuple(types) else None
        wanted = _as_tuple(types)
        if object not in wanted and not _isinstance(value, wanted):
            names = " or ".join(_TYPE_NAMES.get(t, t.__name__) for t in wanted)
            raise self.error(path, f"expected {names}, got {_describe(value)}")
        return value

    def str(self, path: str) -> str:
        return self.get(path, str)

    def opt_str(self, path: str) -> str | None:
        return self.get(path, str, required=False)

    def int(self, path: str) -> int:
        return self.get(path, int)

    def opt_int(self, path: str) -> int | None:
        return self.get(path, int, required=False)

    def obj(self, path: str) -> dict[str, Any]:
        return self.get(path, dict)

    def opt_obj(self, path: str) -> dict[str, Any]:
        return self.get(path, dict, required=False, default={})

    def list(self, path: str) -> list[Any]:
        return self.get(path, list)

    def opt_list(self, path: str) -> list[Any]:
        return self.get(path, list, required=False, default=[])


def _as_tuple(types: type | tuple[type, ...]) -> tuple[type, ...]:
    return types if isinstance(types, tuple) else (types,)


def _isinstance(value: Any, types: tuple[type, ...]) -> bool:
    if isinstance(value, bool):  # JSON true is not an integer
        return bool in types or object in types
    if isinstance(value, int) and float in types:
        return True
    return isinstance(value, types)


def _describe(value: Any) -> str:
    text = repr(value)
    return f"{_TYPE_NAMES.get(type(value), type(value).__name__)} {text[:40] + '...' if len(text) > 40 else text}"


_TS = re.compile(TS_PATTERN)


def timestamp(value: Any) -> str | None:
    """An RFC 3339 time from what a format records: ISO text with an offset is kept as
    written; Unix seconds (or milliseconds) become UTC; a time without an offset (local,
    unknown zone) gives None. Times are informational: the raw record keeps the original."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        seconds = value / 1000 if value > 10**11 else value
        try:
            moment = dt.datetime.fromtimestamp(seconds, tz=dt.timezone.utc)
        except (OverflowError, OSError, ValueError):
            return None
        return moment.isoformat(timespec="microseconds").replace("+00:00", "Z")
    if isinstance(value, str):
        text = value.strip()
        if _TS.match(text):
            return text if is_instant(text) else None
        # Fractions longer than nanoseconds, or "+0000" offsets, are normalised.
        m = re.match(r"^(\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2})(\.\d+)?([Zz]|[+-]\d{2}:?\d{2})$", text)
        if m:
            fraction = (m.group(2) or "")[:10]
            offset = m.group(3)
            if len(offset) == 5:
                offset = offset[:3] + ":" + offset[3:]
            normal = f"{m.group(1)}{fraction}{offset}"
            return normal if is_instant(normal) else None
    return None


@dataclass
class ImportedRun:
    """One run read from a source: its events in seq order and where each came from."""

    run_id: str
    format: str
    files: list[str]
    events: list[Event] = field(default_factory=list)
    places: list[tuple[str, str]] = field(default_factory=list)  # (file, record) per seq
    tree_label: str = ""
    #: The tree the places are in (an importer may read an inner tree, e.g. a zip inside the path).
    tree: SourceTree | None = None

    def place_of(self, seq: int) -> str:
        if not 0 <= seq < len(self.places):
            return "-"
        file, record = self.places[seq]
        return f"{file}:{record}" if record else file

    @property
    def unparsed(self) -> int:
        return sum(1 for e in self.events if e.kind == "unparsed")


@dataclass
class _Pending:
    kind: str
    fields: dict[str, Any]
    sources: list[Record]
    place: tuple[str, str]


class RunBuilder:
    """Collects one run's events; :meth:`build` validates the contract and returns them."""

    def __init__(self, tree: SourceTree, *, run_id: str, format: str, importer_version: str,
                 files: Sequence[str], workspace_root: str | None = None, base: str = "",
                 record_base: str | None = None) -> None:
        self.tree = tree
        self.base = base.strip("/")
        # Records of a tree inside an archive member (an Inspect .eval) are placed from the archive,
        # not from the folder the user pointed at: their paths are the archive's own.
        self.record_base = self.base if record_base is None else record_base.strip("/")
        self.run_id = run_id
        self.format = format
        self.importer_version = importer_version
        self.files = list(files)
        self.workspace_root = posixpath.normpath(workspace_root) if workspace_root else None
        if self.workspace_root == "/":
            self.workspace_root = None
        self.redactor = Redactor()
        self.stage: int | None = None
        self._records: list[Record] = []
        self._events: list[Event] = []
        self._places: list[tuple[str, str]] = []
        self._outcomes: list[_Pending] = []
        self._start: dict[str, Any] | None = None
        self._start_sources: list[Record] = []
        self._made_from: dict[int, int] = {}  # id(record) -> events made from it so far
        self._unparsed = 0

    def place_of(self, rel: str, base: str | None = None) -> str:
        """``rel`` (tree-relative) as seen from the run's folder (``../logs/x/report.json`` for a
        companion beside it), so ids and payloads do not depend on how far up the user pointed."""
        base = self.base if base is None else base
        if not base:
            return rel
        if rel.startswith(base + "/"):
            return rel[len(base) + 1:]
        return posixpath.relpath(rel, base)

    def add_file(self, rel: str) -> None:
        """A file found while reading (a continuation, a sub-trajectory): listed on the run once."""
        if rel not in self.files:
            self.files.append(rel)

    # --- records -------------------------------------------------------------------------------

    def record(self, file: str, record: str | int, raw: Any, native_id: Any = None) -> Record:
        """Take a source record in: redacted now, and owed at least one event."""
        data = self.redactor.value(raw)
        ident = None if native_id is None else str(native_id)
        rec = Record(self.tree, file, str(record), data, ident, self.place_of(file, self.record_base))
        self._records.append(rec)
        return rec

    # --- provenance ----------------------------------------------------------------------------

    def start(self, *, harness: str, harness_version: str | None = None, model: str | None = None,
              model_settings: dict[str, Any] | None = None, task_id: str | None = None,
              labels: dict[str, str] | None = None, ts: str | None = None,
              source: Record | Sequence[Record] = ()) -> None:
        """The run's provenance, as the format records it (the records it came from are kept),
        with what the user added at ingest (``--system/--model/--label``) where the archive
        is silent; a different value the archive gives is an error naming both."""
        given = current_overrides()
        if given:
            where = self.tree.label(self.files[0]) if self.files else self.tree.label_root
            model = resolve("model", model, given.model, where, "model")
            merged = dict(labels or {})
            system = resolve("system", merged.get("system"), given.system, where, "labels.system")
            if system is not None:
                merged["system"] = system
            for key, value in given.labels.items():
                merged[key] = resolve(f"label {key}", merged.get(key), value, where, f"labels.{key}")  # type: ignore[assignment]
            labels = merged or None
        harness_info = {"name": harness, **({"version": harness_version} if harness_version else {})}
        self._start = {"harness": harness_info, "model": model, "model_settings": model_settings,
                       "task_id": task_id, "labels": labels, "ts": ts}
        self._start_sources = _as_records(source)
        for rec in self._start_sources:  # seq 0 holds them whole; later events point back
            if rec.first_seq is None:
                rec.first_seq = 0
                rec.held_by_start = True

    # --- events --------------------------------------------------------------------------------

    @property
    def next_seq(self) -> int:
        return len(self._events) + 1

    def begin_stage(self, index: int, *, source: Record | Sequence[Record], actor: str = "harness",
                    title: str | None = None, ts: str | None = None) -> int:
        """Close the current stage (if any) and open stage ``index``; later events carry it."""
        if self.stage is not None:
            self.add("stage_ended", actor="harness", source=source, stage=self.stage, ts=ts)
        self.stage = index
        return self.add("stage_started", actor=actor, source=source, stage=index, title=title, ts=ts)

    def end_stage(self, *, source: Record | Sequence[Record], status: str | None = None, ts: str | None = None) -> int | None:
        if self.stage is None:
            return None
        seq = self.add("stage_ended", actor="harness", source=source, stage=self.stage, status=status, ts=ts)
        self.stage = None
        return seq

    def add(self, kind: str, *, actor: str, source: Record | Sequence[Record], ts: str | None = None,
            stage: int | None | Any = MISSING, parent: int | None = None, **fields: Any) -> int:
        """Append a process event made from ``source`` (one record, or several that together
        make it, e.g. a call and its output); returns its seq."""
        sources = _as_records(source)
        if not sources:
            raise ImporterBug(f"{self.run_id}: a {kind} event must cite the source record(s) it came from")
        seq = self.next_seq
        stage_value = self.stage if stage is MISSING else stage
        event = self._validate(kind, seq, actor, sources, ts, stage_value, parent, fields)
        self._events.append(event)
        self._places.append((sources[0].file, sources[0].record))
        return seq

    def command(self, command: str, *, actor: str, source: Record | Sequence[Record], output: str | None = None,
                exit_code: int | None = None, duration_ms: int | None = None, cwd: str | None = None,
                ts: str | None = None, parent: int | None = None, effects: bool = True) -> int:
        """A shell command: a ``test_run`` when the command line runs a test suite (with counts
        when ``output`` shows them), else a ``command``; then a ``file_read``/``file_edit``
        for each file the command line reads or changes (their parent is the command)."""
        output_sha = hashlib.sha256(output.encode()).hexdigest() if output is not None else None
        common = {"command": command, "exit_code": exit_code, "duration_ms": duration_ms, "output_sha256": output_sha}
        if is_test_command(command):
            counts = parse_test_counts(output) if output else None
            seq = self.add("test_run", actor=actor, source=source, ts=ts, parent=parent, **common,
                           **(counts._asdict() if counts else {}))
        else:
            seq = self.add("command", actor=actor, source=source, ts=ts, parent=parent, cwd=cwd, **common)
        if effects:
            self.file_effects_of(command, actor=actor, source=source, parent=seq, ts=ts, cwd=cwd)
        return seq

    def file_effects_of(self, command: str, *, actor: str, source: Record | Sequence[Record],
                        parent: int | None, ts: str | None = None, cwd: str | None = None) -> list[int]:
        """A ``file_read``/``file_edit`` per file the command line touches; relative paths
        are taken from ``cwd`` when it is known (then made workspace-relative)."""

        def seen_from_cwd(path: str | None) -> str | None:
            if path is None or not cwd or path.startswith("/"):
                return path
            return posixpath.normpath(posixpath.join(cwd, path))

        seqs = []
        for effect in file_effects(command):
            if effect.action == "read":
                seqs.append(self.add("file_read", actor=actor, source=source, parent=parent, ts=ts,
                                     path=seen_from_cwd(effect.path)))
            else:
                seqs.append(self.add("file_edit", actor=actor, source=source, parent=parent, ts=ts,
                                     path=seen_from_cwd(effect.path), edit_kind=effect.edit_kind,
                                     new_path=seen_from_cwd(effect.new_path)))
        return seqs

    def keep(self, source: Record | Sequence[Record], record_type: str, *, actor: str = "harness",
             ts: str | None = None, stage: int | None | Any = MISSING) -> int:
        """A record with no process meaning (metadata, usage, state): kept, not scored."""
        return self.add("source_record", actor=actor, source=source, ts=ts, stage=stage, record_type=record_type)

    def unparsed(self, file: str, record: str | int, text: str, reason: str, *, ts: str | None = None) -> int:
        """A malformed record the format tolerates: kept as text, counted on the run."""
        rec = self.record(file, record, {"text": text})
        self._unparsed += 1
        return self.add("unparsed", actor="system", source=rec, ts=ts, reason=self.redactor.text(reason),
                        record=rec.where)

    def outcome(self, kind: str, *, source: Record | Sequence[Record], actor: str = "grader",
                ts: str | None = None, parent: int | None = None, **fields: Any) -> None:
        """An outcome event (verdict, per-test result): appended after every process event."""
        sources = _as_records(source)
        if not sources:
            raise ImporterBug(f"{self.run_id}: a {kind} outcome must cite its source record(s)")
        self._outcomes.append(_Pending(kind, {"actor": actor, "ts": ts, "parent": parent, **fields}, sources,
                                       (sources[0].file, sources[0].record)))

    # --- finishing -----------------------------------------------------------------------------

    def build(self) -> ImportedRun:
        if self._start is None:
            raise ImporterBug(f"{self.run_id}: the importer never recorded the run's provenance (start())")
        for pending in self._outcomes:
            fields = dict(pending.fields)
            actor, ts, parent = fields.pop("actor"), fields.pop("ts"), fields.pop("parent")
            seq = self.next_seq
            self._events.append(self._validate(pending.kind, seq, actor, pending.sources, ts, None, parent, fields))
            self._places.append(pending.place)
        self._outcomes = []
        unused = [r for r in self._records if r.first_seq is None and r not in self._start_sources]
        if unused:
            raise ImporterBug(f"{self.run_id}: {len(unused)} source record(s) produced no event, "
                              f"first {unused[0].where}: every record must be kept (keep() if it means nothing)")
        start = dict(self._start)
        start_sources = self._start_sources
        imported = {"format": self.format, "importer_version": self.importer_version,
                    "files": [self.place_of(f) for f in self.files],
                    "records": len(self._records), "unparsed": self._unparsed, "redactions": self.redactor.count}
        first = self._validate("run_started", 0, "harness", start_sources, start.pop("ts"), None, None,
                               {**start, "imported": imported}, allow_no_source=True)
        place = ((start_sources[0].file, start_sources[0].record) if start_sources
                 else (self.files[0] if self.files else "-", ""))
        return ImportedRun(self.run_id, self.format, self.files, [first, *self._events], [place, *self._places],
                           self.tree.label_root, self.tree)

    # --- internals -----------------------------------------------------------------------------

    def _event_id(self, sources: list[Record], seq: int) -> str:
        if seq == 0:
            base = f"{self.run_id}@start"
        else:
            primary = sources[0]
            made = self._made_from.get(id(primary), 0)
            self._made_from[id(primary)] = made + 1
            base = f"{self.run_id}@{primary.where}" + (f"#{made}" if made else "")
        if len(base) > 200:
            return "sha256:" + hashlib.sha256(base.encode()).hexdigest()
        return base

    def _payload(self, sources: list[Record], seq: int) -> dict[str, Any]:
        cited = []
        for rec in sources:
            entry: dict[str, Any] = {"file": rec.place, "record": rec.record}
            if rec.native_id is not None:
                entry["id"] = rec.native_id
            if rec.first_seq is None or (seq == 0 and rec.held_by_start):
                rec.first_seq = seq
                entry["raw"] = rec.data
            else:
                entry["at_seq"] = rec.first_seq
            cited.append(entry)
        return {"source": cited}

    def _validate(self, kind: str, seq: int, actor: str, sources: list[Record], ts: str | None,
                  stage: int | None, parent: int | None, fields: dict[str, Any], allow_no_source: bool = False) -> Event:
        model = EVENT_KINDS.get(kind)
        if model is None:
            raise ImporterBug(f"{self.run_id}: unknown event kind {kind!r}")
        for name in ("path", "new_path"):
            if isinstance(fields.get(name), str):
                fields[name] = self.workspace_path(fields[name])
        for name in ("evidence", "context"):
            if isinstance(fields.get(name), list):
                fields[name] = [self.workspace_path(p) if isinstance(p, str) else p for p in fields[name]]
        record: dict[str, Any] = {
            "run_id": self.run_id, "seq": seq, "event_id": self._event_id(sources, seq), "kind": kind,
            "actor": actor, "payload": self._payload(sources, seq),
            **({"ts": ts} if ts is not None else {}),
            **({"stage": stage} if stage is not None else {}),
            **({"parent_seq": parent} if parent is not None else {}),
            **{k: v for k, v in fields.items() if v is not None},
        }
        try:
            return model.model_validate(record)
        except ValidationError as exc:
            error = exc.errors(include_url=False)[0]
            loc = ".".join(str(p) for p in error["loc"]) or "-"
            got = repr(error.get("input"))
            got = got[:57] + "..." if len(got) > 60 else got
            reason = f"cannot make a {kind} event: {loc}: {error['msg'].removeprefix('Value error, ')} (got {got})"
            if sources:
                raise sources[0].error(None, reason) from None
            raise InputError(self.tree.label(self.files[0]) if self.files else self.tree.label_root, None, None, reason) from None

    def workspace_path(self, path: str) -> str:
        """``path`` relative to the workspace root when it lies under it (tools log absolute
        paths, shell commands relative ones: one spelling lets rules match them)."""
        if not path:
            return path
        normal = posixpath.normpath(path)
        if normal.startswith("//"):  # POSIX normpath keeps a leading "//"
            normal = "/" + normal.lstrip("/")
        root = self.workspace_root
        if root and normal == root:
            return "."
        if root and normal.startswith(root + "/"):
            return normal[len(root) + 1:]
        return normal


def _as_records(source: Record | Sequence[Record]) -> list[Record]:
    if isinstance(source, Record):
        return [source]
    return list(source)
