"""Columnar archives of sealed runs: what scoring and chain verification need, in Parquet.

A leaderboard's archive outgrows the OLTP tables; re-scoring it needs the typed fact
columns only, and proving it untouched needs the chain. An archive holds, per sealed
run, one Parquet file (``runs/<quoted run id>.parquet``) sorted by seq with every
stored column except the payload text: the envelope, the typed fact columns (and any
derived ones), the kind's own fields as JSON, the payload's sha256 and the chain hash.
Each file's key-value metadata names the run, its sealed head hash, its event count and
the extractor version; ``archive.json``, written last, lists the runs (an archive
without it is incomplete and refused).

Because the chain hashes the payload's digest, not the payload, :func:`verify_archive`
recomputes every chain from the archive alone, and rebuilds each event (with an empty
payload: no extractor reads it) to recompute its typed fact columns: a flipped byte in
any column is caught. Archives live wherever pyarrow's filesystems reach: a local
path, ``file://``, ``s3://``, ``gs://``, ``hdfs://``.

pyarrow is the optional extra ``procgrade[archive]``; it is imported only here.
"""

from __future__ import annotations

import dataclasses
import hashlib
import posixpath
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import orjson
from pydantic import ValidationError

from procgrade.engine.canonical import canonical_json, parse_json
from procgrade.engine.chain import GENESIS, link
from procgrade.engine.errors import InputError, ProcgradeError, UnknownRunError
from procgrade.engine.events import event_adapter
from procgrade.engine.facts import EXTRACTOR_VERSION, FACT_COLUMNS, extract_facts
from procgrade.engine.store import EventStore
from procgrade.engine.store.schema import events as events_table
from procgrade.engine.stored import STORED_COLUMNS

__all__ = [
    "ARCHIVE_FORMAT", "ARCHIVE_COLUMNS", "ArchivedRun", "Archive", "ArchiveVerification",
    "export_archive", "open_archive", "verify_archive", "verify_archived_run",
]

ARCHIVE_FORMAT = "procgrade.archive/1"
MANIFEST = "archive.json"
_META_KEY = b"procgrade"
_ENVELOPE = ("run_id", "seq", "event_id", "ts", "kind", "actor", "stage", "parent_seq")
#: Every stored column but the payload text (its sha256 stays), in the store's order.
ARCHIVE_COLUMNS: tuple[str, ...] = tuple(name for name in STORED_COLUMNS if name != "payload")
#: Columns derived from the run rather than from one event (none before extractor 2).
_DERIVED = tuple(name for name in ARCHIVE_COLUMNS
                 if name not in _ENVELOPE and name not in FACT_COLUMNS
                 and name not in ("facts", "payload_sha256", "hash"))


def _pyarrow() -> tuple[Any, Any, Any]:
    try:
        import pyarrow
        import pyarrow.fs
        import pyarrow.parquet
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ProcgradeError("columnar archives need pyarrow: pip install 'procgrade[archive]'") from exc
    return pyarrow, pyarrow.parquet, pyarrow.fs


def _arrow_schema() -> Any:
    pa, _, _ = _pyarrow()
    fields = []
    for name in ARCHIVE_COLUMNS:
        python_type = events_table.c[name].type.python_type
        fields.append(pa.field(name, pa.int64() if python_type is int else pa.string(),
                               nullable=events_table.c[name].nullable))
    return pa.schema(fields)


def _filesystem(location: str) -> tuple[Any, str]:
    """(pyarrow filesystem, path in it) for a local path or any URL pyarrow understands."""
    _, _, fs = _pyarrow()
    if "://" not in location:
        import os

        return fs.LocalFileSystem(), os.path.abspath(location)
    try:
        return fs.FileSystem.from_uri(location)
    except (ValueError, OSError) as exc:
        raise InputError(location, None, "archive", str(exc)) from exc


def run_file(run_id: str) -> str:
    """The file of ``run_id`` inside an archive (any run id is a safe single path segment)."""
    return f"runs/{quote(run_id, safe='')}.parquet"


@dataclass(frozen=True)
class ArchivedRun:
    run_id: str
    file: str
    head_hash: str
    event_count: int
    extractor_version: str
    #: sha256 of the run's Parquet file as written (kept in the manifest, not in the file): any changed
    #: byte of the file is caught, also one in a page statistics or padding no decoded column shows.
    file_sha256: str | None = None


def _entry(run: ArchivedRun) -> dict[str, Any]:
    return {"run_id": run.run_id, "file": run.file, "head_hash": run.head_hash,
            "event_count": run.event_count, "extractor_version": run.extractor_version}


# --- export ------------------------------------------------------------------------------------


def export_archive(store: EventStore, destination: str, run_ids: Sequence[str] | None = None,
                   *, progress: Any = None) -> list[ArchivedRun]:
    """Write the sealed runs ``run_ids`` (default: every sealed run) to the archive at
    ``destination``; runs already archived with the same head are kept as they are.
    Returns the runs written or kept, in run order."""
    pa, pq, fs_module = _pyarrow()
    fs, root = _filesystem(destination)
    if run_ids:
        infos = [store.run(run_id) for run_id in sorted(set(run_ids))]
        unsealed = [info.run_id for info in infos if not info.sealed]
        if unsealed:
            raise InputError(destination, None, f"run {unsealed[0]}", "not sealed: only sealed runs are archived "
                             f"(procgrade seal {unsealed[0]})")
    else:
        infos = [info for info in store.runs() if info.sealed]
    existing = _read_manifest(fs, root, missing_ok=True)
    held = {run.run_id: run for run in existing}
    fs.create_dir(posixpath.join(root, "runs"), recursive=True)
    schema = _arrow_schema()
    written: dict[str, ArchivedRun] = dict(held)
    for info in infos:
        known = held.get(info.run_id)
        if known is not None:
            if known.head_hash != info.sealed_head_hash:
                raise InputError(destination, None, f"run {info.run_id}", "archived with head "
                                 f"{known.head_hash[:16]}, the store has {str(info.sealed_head_hash)[:16]}")
            if progress is not None:
                progress(info.run_id, info.sealed_event_count or 0)
            continue
        run = ArchivedRun(info.run_id, run_file(info.run_id), info.sealed_head_hash or GENESIS,
                          info.sealed_event_count or 0, EXTRACTOR_VERSION)
        columns = _stored_columns(store, info.run_id, run.event_count)
        if run.event_count and columns["hash"][-1] != run.head_hash:
            raise ProcgradeError(f"run {info.run_id}: its last stored hash is not its sealed head "
                                 f"(procgrade verify-log {info.run_id})")
        metadata = {**_entry(run), "format": ARCHIVE_FORMAT,
                    "run": {k: getattr(info, k) for k in ("harness", "harness_version", "model", "task_id",
                                                          "source_format", "redactions", "unparsed")}}
        table = pa.Table.from_pydict(columns, schema=schema.with_metadata({_META_KEY: canonical_json(metadata)}))
        path = posixpath.join(root, run.file)
        staging = path + ".partial"
        pq.write_table(table, staging, filesystem=fs, compression="zstd",
                       sorting_columns=[pq.SortingColumn(ARCHIVE_COLUMNS.index("seq"))])
        fs.move(staging, path)
        run = dataclasses.replace(run, file_sha256=_file_sha256(fs, path))
        written[run.run_id] = run
        if progress is not None:
            progress(info.run_id, run.event_count)
    _write_manifest(fs, root, sorted(written.values(), key=lambda r: r.run_id))
    return [written[info.run_id] for info in infos]


def _stored_columns(store: EventStore, run_id: str, count: int) -> dict[str, list[Any]]:
    from sqlalchemy import select

    query = (select(*(events_table.c[name] for name in ARCHIVE_COLUMNS))
             .where((events_table.c.run_id == run_id) & (events_table.c.seq < count))
             .order_by(events_table.c.seq))
    columns: dict[str, list[Any]] = {name: [] for name in ARCHIVE_COLUMNS}
    lists = list(columns.values())
    with store.engine.connect() as conn:
        for row in conn.execution_options(yield_per=20_000).execute(query):
            for target, value in zip(lists, row):
                target.append(value)
    if len(columns["seq"]) != count:
        raise ProcgradeError(f"run {run_id}: {len(columns['seq'])} events stored, {count} sealed")
    return columns


def _file_sha256(fs: Any, path: str) -> str:
    digest = hashlib.sha256()
    with fs.open_input_stream(path) as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _write_manifest(fs: Any, root: str, runs: list[ArchivedRun]) -> None:
    body = {"format": ARCHIVE_FORMAT, "columns": list(ARCHIVE_COLUMNS),
            "runs": [{**_entry(run), **({"file_sha256": run.file_sha256} if run.file_sha256 else {})}
                     for run in runs]}
    path = posixpath.join(root, MANIFEST)
    with fs.open_output_stream(path + ".partial") as handle:
        handle.write(orjson.dumps(body, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))
    fs.move(path + ".partial", path)


def _read_manifest(fs: Any, root: str, *, missing_ok: bool = False) -> list[ArchivedRun]:
    _, _, fs_module = _pyarrow()
    path = posixpath.join(root, MANIFEST)
    if fs.get_file_info(path).type == fs_module.FileType.NotFound:
        if missing_ok:
            return []
        raise InputError(root, None, MANIFEST, f"no {MANIFEST}: not a procgrade archive, or its export did not finish")
    with fs.open_input_stream(path) as handle:
        raw = handle.read()
    try:
        body = orjson.loads(raw)
        if body.get("format") != ARCHIVE_FORMAT:
            raise InputError(path, None, "format", f"{body.get('format')!r}, this procgrade reads {ARCHIVE_FORMAT}")
        return [ArchivedRun(e["run_id"], e["file"], e["head_hash"], int(e["event_count"]), e["extractor_version"],
                            e.get("file_sha256"))
                for e in body["runs"]]
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise InputError(path, None, None, f"not a valid archive manifest: {exc}") from exc


# --- reading -----------------------------------------------------------------------------------


class Archive:
    """An archive opened for reading (cheap: the manifest only; files are read per run)."""

    def __init__(self, location: str) -> None:
        self.location = location
        self._fs, self._root = _filesystem(location)
        self.runs = _read_manifest(self._fs, self._root)
        self._by_id = {run.run_id: run for run in self.runs}

    def run(self, run_id: str) -> ArchivedRun:
        try:
            return self._by_id[run_id]
        except KeyError:
            raise UnknownRunError(f"no run {run_id!r} in the archive {self.location}") from None

    def read(self, run_id: str, columns: Sequence[str] | None = None) -> Any:
        """The run's Parquet table (the named columns), checked to belong to ``run_id``."""
        _, pq, _ = _pyarrow()
        run = self.run(run_id)
        path = posixpath.join(self._root, run.file)
        try:
            # ParquetFile, not read_table: no dataset discovery, ~6x faster on a run's small file.
            with self._fs.open_input_file(path) as handle:
                table = pq.ParquetFile(handle).read(columns=list(columns) if columns else None)
        except (OSError, ValueError) as exc:  # ArrowInvalid is a ValueError
            raise ProcgradeError(f"archive {self.location}: {run.file}: unreadable: {exc}") from exc
        return table

    def fact_batches(self, run_id: str, *, upto: int | None = None,
                     batch: int = 20_000) -> Iterator[list[tuple[Any, ...]]]:
        """The run's fact rows in seq order, as the store gives them (rules cannot tell)."""
        from procgrade.engine.store.scores import FACT_ROW_COLUMNS

        run = self.run(run_id)
        extractor = run.extractor_version
        if extractor != EXTRACTOR_VERSION:
            raise ProcgradeError(f"run {run_id} was archived under fact extractor {extractor}; this engine has "
                                 f"{EXTRACTOR_VERSION}: re-export it from a store of this version")
        table = self.read(run_id, FACT_ROW_COLUMNS)
        if upto is not None:
            table = table.slice(0, upto)
        columns = [table.column(name).to_pylist() for name in FACT_ROW_COLUMNS]
        rows = list(zip(*columns))
        for start in range(0, len(rows), batch):
            yield rows[start:start + batch]

    def hash_at(self, run_id: str, seq: int) -> str | None:
        table = self.read(run_id, ["hash"])
        return table.column("hash")[seq].as_py() if 0 <= seq < table.num_rows else None

    def close(self) -> None:
        """Nothing to release (the interface of a store)."""


def open_archive(location: str) -> Archive:
    return Archive(location)


# --- verification ------------------------------------------------------------------------------


@dataclass
class ArchiveVerification:
    run_id: str
    events_checked: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def verify_archived_run(archive: Archive, run_id: str, *, max_problems: int = 20) -> ArchiveVerification:
    """Recompute the run's chain, fact columns and metadata from the archive alone."""
    report = ArchiveVerification(run_id)
    run = archive.run(run_id)
    if run.file_sha256 is not None:
        try:
            actual = _file_sha256(archive._fs, posixpath.join(archive._root, run.file))
        except OSError as exc:
            actual = f"unreadable ({exc})"
        if actual != run.file_sha256:
            report.problems.append(f"{run.file}: its bytes differ from the manifest's sha256 "
                                   f"{run.file_sha256[:16]} (now {actual[:16]}): the file was changed")
    try:
        table = archive.read(run_id)
    except ProcgradeError as exc:
        report.problems.append(str(exc))
        return report
    problems = report.problems
    metadata = (table.schema.metadata or {}).get(_META_KEY)
    try:
        meta = orjson.loads(metadata) if metadata is not None else None
    except orjson.JSONDecodeError:
        meta = None
    if meta is None:
        problems.append(f"{run.file}: no readable procgrade metadata")
    else:
        for key, want in _entry(run).items():
            if meta.get(key) != want:
                problems.append(f"{run.file}: metadata {key} is {meta.get(key)!r}, the manifest says {want!r}")
    names = table.column_names
    if tuple(names) != ARCHIVE_COLUMNS:
        problems.append(f"{run.file}: columns {names} are not this engine's {list(ARCHIVE_COLUMNS)}")
        return report
    try:
        columns = {name: table.column(name).to_pylist() for name in names}
    except (ValueError, OSError) as exc:  # a damaged page decodes to garbage (UnicodeDecodeError)
        problems.append(f"{run.file}: unreadable column data: {exc}")
        return report
    typed = [columns[name] for name in FACT_COLUMNS]
    derived = _derived_checker()
    prev = GENESIS
    for i in range(table.num_rows):
        if len(problems) >= max_problems:
            problems.append("... (stopped after too many problems)")
            break
        seq = columns["seq"][i]
        if seq != i:
            problems.append(f"row {i}: seq {seq}, expected {i} (rows must be every seq in order)")
        if columns["run_id"][i] != run_id:
            problems.append(f"seq {seq}: run_id column is {columns['run_id'][i]!r}")
        header: dict[str, Any] = {name: columns[name][i] for name in _ENVELOPE if columns[name][i] is not None}
        try:
            fields = parse_json(columns["facts"][i])
            if not isinstance(fields, dict):
                raise ValueError("not a JSON object")
        except ValueError as exc:
            problems.append(f"seq {seq}: facts column is not valid JSON: {exc}")
            prev = columns["hash"][i]
            continue
        header.update(fields)
        header["payload_sha256"] = columns["payload_sha256"][i]
        try:
            event = event_adapter().validate_python({**{k: v for k, v in header.items() if k != "payload_sha256"},
                                                     "payload": {}})
        except (ValidationError, ValueError) as exc:
            problems.append(f"seq {seq}: archived row is not a valid event: {str(exc).splitlines()[0]}")
            event = None
        if event is not None:
            if tuple(column[i] for column in typed) != extract_facts(event):
                problems.append(f"seq {seq}: typed fact columns differ from the event's facts")
            if derived is not None:
                problem = derived(event, columns, i)
                if problem:
                    problems.append(f"seq {seq}: {problem}")
        expected = link(prev, canonical_json(header))
        if expected != columns["hash"][i]:
            problems.append(f"seq {seq}: hash mismatch (archived {str(columns['hash'][i])[:12]}, "
                            f"recomputed {expected[:12]})")
        prev = expected
        report.events_checked += 1
    if table.num_rows != run.event_count:
        problems.append(f"{run.file}: {table.num_rows} rows, the run has {run.event_count} events")
    if report.events_checked == table.num_rows and prev != run.head_hash:
        problems.append(f"recomputed head {prev[:12]} differs from the archived head {run.head_hash[:12]}")
    return report


def _derived_checker() -> Any:
    """A check for the run-derived columns, when this engine has any (stage membership)."""
    if not _DERIVED:
        return None
    if _DERIVED != ("in_stage",):  # pragma: no cover - a new derived column needs its check here
        raise ProcgradeError(f"archive verification does not know the derived columns {_DERIVED}")
    from procgrade.engine.stages import StageTracker  # type: ignore[import-not-found]

    tracker = StageTracker(strict=False)

    def check(event: Any, columns: dict[str, list[Any]], i: int) -> str | None:
        in_stage = tracker.step(event.seq, event.kind, event.actor, event.stage)
        if columns["in_stage"][i] != in_stage:
            return f"derived stage column is {columns['in_stage'][i]}, the log gives {in_stage}"
        return None

    return check


def verify_archive(location: str, run_ids: Sequence[str] | None = None) -> list[ArchiveVerification]:
    """Verify every run (or ``run_ids``) of the archive, in run order."""
    archive = open_archive(location)
    wanted = [run.run_id for run in archive.runs] if run_ids is None else sorted(set(run_ids))
    return [verify_archived_run(archive, run_id) for run_id in wanted]
