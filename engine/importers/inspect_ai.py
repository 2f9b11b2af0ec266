"""Inspect AI eval logs (UKGovernmentBEIS/inspect_ai): ``.eval`` zip archives and ``.json`` logs.

One run per sample per epoch, id ``inspect/<eval run_id>/<task>/<sample id>_epoch_<n>``.
A ``.eval`` archive holds ``header.json`` (the log without samples; ``_journal/start.json``
stands in for a log that never finished), one ``samples/<id>_epoch_<n>.json`` per sample,
and ``summaries.json`` / ``reductions.json`` / ``_journal/`` (aggregates and the write
journal, which repeat what the header and samples hold: not read). A ``.json`` log is the
same document with ``samples[]`` inline. Records are labelled by their place in the JSON
(``samples[0].events[12]`` in a ``.json`` log, ``events[12]`` in a sample member, whose
errors then read ``LOG.eval!samples/1_epoch_1.json:events[12]: field: reason``).

Records: the header (the log minus ``samples``/``reductions``) and the sample (minus
``events``/``scores``: its input, target, output, messages, attachments, usage, error) are
the provenance of ``run_started``; each transcript event is a record (an event's legacy
nested ``events`` are records of their own, labelled ``events[3].events[0]``); each entry
of the sample's ``scores`` is a record.

Attachments: Inspect replaces long strings by ``attachment://<hash>``, resolved from the
sample's ``attachments`` map. Typed fields (message text, command, path, claim, score
explanation) hold the resolved text; raw payloads keep the reference form exactly as
stored, and the map itself is kept once, in the sample record cited by ``run_started``.
A reference missing from the map is an error at the field that holds it.

Structure: ``span_begin``/``span_end`` (and legacy ``step`` begin/end) are kept as
``source_record`` events, so the span tree (``id``/``parent_id``/``type``/``name``) is in
the log; every event's raw payload carries its ``span_id``. Spans decide actors: inside a
``scorer`` span the model is the ``judge`` and everything else the ``grader``; inside an
``agent`` span that is nested in another agent or in a tool call (a handoff or an agent
used as a tool), or inside a ``subtask``, the model is ``subagent:<name>``; a top-level
agent span (``react()`` run as the solver) is the main ``agent``.

Mapping: ``sample_init`` -> the user's input as ``message``; ``model`` -> the assistant
output as ``message`` (reasoning parts as intent ``reasoning``; an output with only tool
calls is kept as ``source_record``), and the parent of the tool calls it made; ``tool``:
shell tools (``bash``, ``bash_session`` type_submit, ...) and ``python`` -> ``command``
(python as ``python3 - <<'PY'`` with the code), text-editor/file tools -> ``file_read`` /
``file_edit``, ``submit`` -> ``completion_claim``, a tool call that hands off to an agent
-> ``delegation`` and, when its span ends, ``worker_report``; any other tool ->
``source_record`` (actor the model). Sandbox events inside a tool's span are that call's
implementation: the tool record is primary and the sandbox records are cited with it (a
shell tool's exit code is the sandbox exec's ``result``; ``inspect-tool-support``
plumbing execs are cited, never counted as commands; a multi-line command line is read
line by line, see :func:`shell_command`); a sandbox exec outside any tool is a
``command`` of the harness (the grader inside a scorer); ``read_file``/``write_file``
-> ``file_read``/``file_edit``. ``subtask`` -> ``delegation`` (by the harness: solver code
starts subtasks) and ``worker_report``; ``compaction`` -> ``compaction``;
``state``/``store``/``logger``/``info``/``input``/``approval``/``error``/``sample_limit``
and unknown event types -> ``source_record``. A sample without events falls back to its
``messages``.

Outcomes: each ``scores`` entry -> ``acceptance_verdict`` (verifier ``inspect``, scorer
name, value as text, reward 1 for C, 0 for I, 0.5 for P, 0 for N, the exact decimal for
numbers, ``rewards`` per key for dict values), citing the score events of that scorer
too; a final score event with no ``scores`` entry makes its own verdict; intermediate
score events are kept. Scorers named ``model_graded*`` or that called a model are
``judge``, others ``grader``. ``run_ended``: the sample's error -> error; a sample limit
-> timeout (time/working), budget_exhausted (message/token/cost/context) or aborted; else the eval status: success -> completed,
error/cancelled -> error with the eval's error message; ``started`` (unfinished) -> none.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import zipfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from procgrade.engine.errors import InputError
from procgrade.engine.exact import decimal_text
from procgrade.engine.importers.base import TAKEOVER, Importer, SharedReading, Unit, register
from procgrade.engine.importers.building import ImportedRun, Record, RunBuilder, timestamp
from procgrade.engine.importers.json_items import ArrayItems, ItemError
from procgrade.engine.importers.shell import file_effects
from procgrade.engine.importers.source_tree import SourceTree, tree_of_bytes
from procgrade.engine.importers.test_runs import is_test_command, parse_test_counts

__all__ = ["InspectImporter", "score_reward", "shell_command"]

_JSON_HEAD = re.compile(rb'^\s*\{\s*"version"\s*:\s*\d+\s*,')
_EVAL_KEY = re.compile(rb'"eval"\s*:\s*\{')
_SAMPLE_MEMBER = re.compile(r"^samples/(.+)_epoch_(\d+)\.json$")
_ATTACHMENT = "attachment://"
_WORKER_BYTES = 8 << 20  # a log this big is read in a worker while its runs are written

_SHELL_TOOLS = {"bash", "bash_session", "shell", "execute_bash", "run_command", "run_shell_command"}
_PYTHON_TOOLS = {"python", "python_exec", "execute_python", "run_python"}
_EDITOR_TOOLS = {"text_editor", "str_replace_editor", "str_replace_based_edit_tool"}
_EDITOR_COMMANDS = {"view": None, "create": "create", "str_replace": "modify", "insert": "modify",
                    "undo_edit": "modify", "edit": "modify", "append": "modify", "delete": "delete"}
_READ_TOOLS = {"read_file", "view_file", "cat_file", "open_file"}
_WRITE_TOOLS = {"write_file": "create", "create_file": "create", "edit_file": "modify",
                "append_file": "modify", "replace_in_file": "modify", "delete_file": "delete"}
_PATH_ARGS = ("path", "file_path", "file", "filename", "file_name")
_LETTER_REWARDS = {"C": "1", "I": "0", "P": "0.5", "N": "0"}
_WORD_REWARDS = {"yes": "1", "true": "1", "no": "0", "false": "0"}


@register
class InspectImporter(Importer):
    name = "inspect"
    title = "Inspect AI eval log (.eval archive or .json)"
    version = "2"

    def sniff(self, tree: SourceTree, rel: str) -> bool:
        lower = rel.lower()
        if lower.endswith(".eval"):
            return True  # the extension is Inspect's own; a bad archive is reported by read()
        if not lower.endswith(".json"):
            return False
        try:
            head = tree.head(rel, 8192)
        except InputError:
            return False
        return bool(_JSON_HEAD.match(head)) and _EVAL_KEY.search(head) is not None

    def claims_outright(self, tree: SourceTree, rel: str) -> bool:
        # An Inspect log opens with its version and has its "eval" object near the top; no other
        # format's file does, and other sniffers would parse a log of hundreds of MB to see that.
        return rel.lower().endswith(".json") and self.sniff(tree, rel)

    def worth_a_worker(self, tree: SourceTree, unit: Unit) -> bool:
        # A .json log of many samples on disk (the worker reads it by itself; an archive
        # member would have to be handed over, and a .eval's runs carry their inner tree).
        path = tree.disk_path(unit.primary) if unit.primary.lower().endswith(".json") else None
        try:
            return path is not None and path.stat().st_size >= _WORKER_BYTES
        except OSError:
            return False

    def read(self, tree: SourceTree, unit: Unit) -> list[ImportedRun]:
        return list(self.iter_runs(tree, unit))

    def iter_runs(self, tree: SourceTree, unit: Unit) -> Iterator[ImportedRun]:
        if unit.primary.lower().endswith(".eval"):
            return self._read_eval(tree, unit)
        return self._read_json(tree, unit)

    # --- containers ----------------------------------------------------------------------------

    def shared_reading(self, tree: SourceTree, unit: Unit) -> SharedReading | None:
        # A .json log laid out as Inspect writes it: its samples' places are found once, here,
        # and each worker parses and reads only its share of them.
        if not unit.primary.lower().endswith(".json"):
            return None
        split = tree.json_items(unit.primary, "samples")
        return None if split is None else _SharedSamples(self, tree, unit, split)

    def _read_json(self, tree: SourceTree, unit: Unit) -> Iterator[ImportedRun]:
        """One run per sample, parsed one sample at a time when the log is laid out as Inspect
        writes it (indented), else from the whole document; the same runs either way."""
        split = tree.json_items(unit.primary, "samples")
        if split is None:
            yield from self._read_json_whole(tree, unit, tree.json(unit.primary), 0)
            return
        for run in self._read_samples(tree, unit, split, 0, 1):
            assert not isinstance(run, str)
            yield run

    def _read_samples(self, tree: SourceTree, unit: Unit, split: ArrayItems, share: int,
                      shares: int) -> Iterator[ImportedRun | str]:
        """The runs of the samples at ``share``, ``share + shares``, ... of a split log; from a
        sample that does not parse alone on, every run from the whole document (after
        :data:`TAKEOVER` when other shares are being read)."""
        rel = unit.primary
        header = {k: v for k, v in split.header.items() if k != "reductions"}
        items = split.items(share, shares)
        while True:
            try:
                index, sample = next(items)
            except StopIteration:
                return
            except ItemError as exc:
                # A sample that does not parse alone: the whole document gives the located
                # error (or, laid out unusually, the samples from this one on).
                doc = tree.json(rel)
                if not isinstance(doc, dict) or {k: v for k, v in doc.items() if k not in ("samples", "reductions")} != header:
                    # a file rewritten while it was read, or indented so as to mislead the sample finder
                    raise InputError(tree.label(rel), None, None, "the samples could not be read one by one (the log "
                                     "changed while it was read, or is indented unusually)") from None
                if shares > 1:
                    yield TAKEOVER
                yield from self._read_json_whole(tree, unit, doc, exc.index)
                return
            yield _SampleReader(self, tree, unit, rel, header, rel, f"samples[{index}]", sample).read()

    def _read_json_whole(self, tree: SourceTree, unit: Unit, doc: Any, first: int) -> Iterator[ImportedRun]:
        rel = unit.primary
        if not isinstance(doc, dict):
            raise InputError(tree.label(rel), None, None, "expected an Inspect eval log (a JSON object)")
        header = {k: v for k, v in doc.items() if k not in ("samples", "reductions")}
        samples = doc.get("samples")
        if samples is None or samples == []:
            raise InputError(tree.label(rel), None, "samples",
                             "the log holds no samples (logged without samples, or still running)")
        if not isinstance(samples, list):
            raise InputError(tree.label(rel), None, "samples", f"expected an array, got {type(samples).__name__}")
        for i in range(first, len(samples)):
            yield _SampleReader(self, tree, unit, rel, header, rel, f"samples[{i}]", samples[i]).read()

    def _read_eval(self, tree: SourceTree, unit: Unit) -> Iterator[ImportedRun]:
        """One run per sample member, each decompressed and parsed when its run is read and
        let go after: memory holds the compressed archive and one sample, not every member
        decompressed. The other members are read first, as they always were (a bad one is
        reported before any run); a bad sample member is reported when its turn comes."""
        rel = unit.primary
        label = tree.label(rel)
        raw = tree.read_bytes(rel)
        try:
            archive = zipfile.ZipFile(io.BytesIO(raw))
        except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError) as exc:
            raise InputError(label, None, None, f"not a readable .eval archive (zip): {exc}") from None

        def read(info: zipfile.ZipInfo) -> bytes:
            try:
                if info.compress_type == _ZIP_ZSTANDARD and not hasattr(zipfile, "ZIP_ZSTANDARD"):
                    return _zstd_member(raw, info)
                return archive.read(info)
            except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError, NotImplementedError) as exc:
                raise InputError(f"{label}!{info.filename}", None, None, f"unreadable archive member: {exc}") from None

        with archive:
            samples: dict[str, zipfile.ZipInfo] = {}
            members: dict[str, bytes] = {}
            for info in archive.infolist():
                if info.is_dir():
                    continue
                if _SAMPLE_MEMBER.match(info.filename):
                    samples[info.filename] = info
                    members.pop(info.filename, None)
                else:
                    members[info.filename] = read(info)
                    samples.pop(info.filename, None)
            # the samples are listed (empty until read), so the inner tree is the archive's as before
            inner = tree_of_bytes(label, {**members, **{name: b"" for name in samples}})
            header_file = next((m for m in ("header.json", "_journal/start.json") if m in members), None)
            if header_file is None:
                raise InputError(label, None, None, "no header.json or _journal/start.json: not an Inspect .eval log")
            header = inner.json(header_file)
            if not isinstance(header, dict):
                raise InputError(inner.label(header_file), None, None, "expected a JSON object")
            sample_files = sorted(samples, key=_member_order)
            if not sample_files:
                raise InputError(label, None, "samples", "the archive holds no samples/<id>_epoch_<n>.json")
            for member in sample_files:
                inner.hold(member, read(samples[member]))
                sample = inner.json(member)
                run = _SampleReader(self, inner, unit, header_file, header, member, "", sample, in_archive=True).read()
                inner.release(member)
                del sample
                yield run


#: Zip's method id for Zstandard, which inspect-ai writes ``.eval`` members with (Python's zipfile
#: reads it from 3.14 on; before, :func:`_zstd_member` does).
_ZIP_ZSTANDARD = 93


def _zstd_member(archive: bytes, info: zipfile.ZipInfo) -> bytes:
    """A Zstandard-compressed member of the zip ``archive``: its data after its local header,
    decompressed frame by frame (inspect-ai writes several frames for a big member) with the
    ``zstandard`` library, and checked against the member's size and CRC as zipfile checks
    the methods it knows. Raises ValueError (or zipfile.BadZipFile) for a bad member."""
    try:
        import zstandard
    except ImportError:  # pragma: no cover - a dependency
        raise NotImplementedError("compressed with Zstandard, which needs the zstandard package") from None
    header = info.header_offset
    if archive[header:header + 4] != b"PK\x03\x04":
        raise zipfile.BadZipFile("bad local file header")
    start = header + 30 + int.from_bytes(archive[header + 26:header + 28], "little") \
        + int.from_bytes(archive[header + 28:header + 30], "little")
    data = memoryview(archive)[start:start + info.compress_size]
    if len(data) != info.compress_size:
        raise EOFError("the member's data is cut short")
    pieces: list[bytes] = []
    size = 0
    try:
        while data:
            frame = zstandard.ZstdDecompressor().decompressobj()
            piece = frame.decompress(data)
            size += len(piece)
            if size > info.file_size:
                raise zipfile.BadZipFile(f"more data than the member's size ({info.file_size} bytes)")
            pieces.append(piece)
            if not frame.eof:
                raise EOFError("a Zstandard frame is cut short")
            data = memoryview(frame.unused_data)
    except zstandard.ZstdError as exc:
        raise zipfile.BadZipFile(f"Zstandard: {exc}") from None
    result = b"".join(pieces)
    if len(result) != info.file_size or zlib.crc32(result) != info.CRC:
        raise zipfile.BadZipFile(f"Bad CRC-32 or size for file {info.filename!r}")
    return result


class _SharedSamples(SharedReading):
    """A split ``.json`` log read in shares (see :meth:`InspectImporter.shared_reading`)."""

    def __init__(self, importer: InspectImporter, tree: SourceTree, unit: Unit, split: ArrayItems) -> None:
        self.importer, self.tree, self.unit, self.split = importer, tree, unit, split

    def read(self, share: int, shares: int) -> Iterator[ImportedRun | str]:
        return self.importer._read_samples(self.tree, self.unit, self.split, share, shares)


def _member_order(name: str) -> tuple[Any, ...]:
    m = _SAMPLE_MEMBER.match(name)
    assert m is not None
    ident = m.group(1)
    return (int(m.group(2)), (0, int(ident), "") if ident.isdigit() else (1, 0, ident))


# --- one sample ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Frame:
    type: str
    name: str
    key: str  # span id, or "nested:<index>" for a legacy event's nested transcript


@dataclass
class _Item:
    index: int
    rec: Record
    kind: str
    frames: tuple[_Frame, ...]
    nested_end: int | None = None  # for a legacy tool/subtask: index after its nested events
    nested_key: str | None = None


@dataclass
class _Pending:
    index: int | None  # emit before the item at this index
    span: str | None   # or at the end of this span
    emit: Callable[[], Any]


@dataclass
class _Span:
    type: str
    name: str
    parent: str | None
    index: int


class _SampleReader:
    """Reads one sample (one epoch) into one run."""

    def __init__(self, importer: InspectImporter, tree: SourceTree, unit: Unit, header_file: str,
                 header: dict[str, Any], sample_file: str, prefix: str, sample: Any, *, in_archive: bool = False) -> None:
        self.importer, self.tree, self.unit = importer, tree, unit
        self.in_archive = in_archive  # ``tree`` is the .eval's members: their paths are placed as they are
        self.header_file, self.header, self.sample_file, self.prefix = header_file, header, sample_file, prefix
        self.sample_label = prefix or "sample"
        if not isinstance(sample, dict):
            raise InputError(tree.label(sample_file), self.sample_label, None, "expected a sample object")
        self.sample = sample
        self.items: list[_Item] = []
        self.spans: dict[str, _Span] = {}
        self.steps: list[_Frame] = []
        self.attachments: dict[str, Any] = {}
        self.call_parent: dict[str, int] = {}
        self.seq_of: dict[int, int] = {}        # item index -> seq of its (first) event
        self.actor_of: dict[int, str] = {}      # tool item index -> actor
        self.absorbed: set[int] = set()
        self.pending: list[_Pending] = []
        self.judge_scorers: set[str] = set()
        self.limit_seen: Record | None = None
        self.owner: dict[int, int] = {}          # sandbox item index -> the tool item it implements
        self.owned: dict[int, list[_Item]] = {}  # tool item index -> its sandbox items
        self.span_of_tool: dict[int, str] = {}   # tool item index -> its tool span id
        self.scores_seen: list[_Item] = []       # final score events, for the verdicts

    def child(self, name: str) -> str:
        return f"{self.prefix}.{name}" if self.prefix else name

    # --- the run -------------------------------------------------------------------------------

    def read(self) -> ImportedRun:
        head = Record(self.tree, self.header_file, "header", self.header, None)
        whole = Record(self.tree, self.sample_file, self.sample_label, self.sample, None)
        task = head.str("eval.task")
        run_id = head.opt_str("eval.run_id") or head.opt_str("eval.eval_id")
        if not run_id:
            raise head.error("eval.run_id", "missing")
        sample_id = whole.get("id", (str, int))
        epoch = whole.int("epoch")
        events = whole.get("events", list, required=False, default=[])
        scores = whole.get("scores", dict, required=False, default={})
        b = self.b = self.importer.builder(self.tree, self.unit, f"{run_id}/{task}/{sample_id}_epoch_{epoch}",
                                           record_base="" if self.in_archive else None)

        header_rec = b.record(self.header_file, "header", self.header, native_id=head.opt_str("eval.eval_id"))
        summary = {k: v for k, v in self.sample.items() if k not in ("events", "scores")}
        sample_rec = b.record(self.sample_file, self.sample_label, summary,
                              native_id=summary.get("uuid") if isinstance(summary.get("uuid"), str) else sample_id)
        self.attachments = sample_rec.get("attachments", dict, required=False, default={})
        self._start(header_rec, sample_rec, task, run_id, sample_id, epoch)

        self._flatten(events, self.prefix + "." if self.prefix else "", ())
        if self.items:
            self._emit_events()
        else:
            self._emit_messages(sample_rec)
        self._run_ended(header_rec, sample_rec)
        self._outcomes(scores)
        return b.build()

    def _start(self, header: Record, sample: Record, task: str, run_id: str, sample_id: Any, epoch: int) -> None:
        packages = header.opt_obj("eval.packages")
        version = packages.get("inspect_ai") if isinstance(packages.get("inspect_ai"), str) else None
        dataset = header.opt_obj("eval.dataset")
        revision = header.opt_obj("eval.revision")
        labels = {
            "task": task,
            "run_id": run_id,
            "eval_id": header.opt_str("eval.eval_id"),
            "task_version": _scalar_text(header.get("eval.task_version", required=False)),
            "task_file": header.opt_str("eval.task_file"),
            "dataset": _text_or_none(dataset.get("name")) or _text_or_none(dataset.get("location")),
            "sample_id": str(sample_id),
            "epoch": str(epoch),
            "eval_status": header.opt_str("status"),
            "created": header.opt_str("eval.created"),
            "revision": _text_or_none(revision.get("commit")),
        }
        self.b.start(harness="inspect_ai", harness_version=version, model=header.str("eval.model"),
                     model_settings=header.get("eval.model_generate_config", dict, required=False),
                     task_id=f"{task}/{sample_id}", labels={k: v for k, v in labels.items() if v is not None},
                     ts=timestamp(sample.data.get("started_at")) or timestamp(header.data.get("eval", {}).get("created")),
                     source=[header, sample])

    # --- structure ------------------------------------------------------------------------------

    def _flatten(self, events: list[Any], prefix: str, outer: tuple[_Frame, ...]) -> None:
        for j, raw in enumerate(events):
            label = f"{prefix}events[{j}]"
            if not isinstance(raw, dict):
                raise InputError(self.tree.label(self.sample_file), label, None, "expected an event object")
            nested = raw.get("events")
            has_nested = isinstance(nested, list) and bool(nested)
            data = {k: v for k, v in raw.items() if k != "events"} if has_nested else raw
            native = raw.get("uuid") if isinstance(raw.get("uuid"), str) else (
                raw.get("id") if isinstance(raw.get("id"), str) else None)
            rec = self.b.record(self.sample_file, label, data, native_id=native)
            kind = rec.str("event")
            span_id = rec.get("span_id", str, required=False)
            if outer:
                frames = outer
            elif span_id is not None and span_id in self.spans:
                frames = self._chain(span_id)
            else:
                frames = tuple(self.steps)
            item = _Item(len(self.items), rec, kind, frames)
            self.items.append(item)
            if kind == "span_begin":
                sid = rec.str("id")
                rec.str("name")
                self.spans[sid] = _Span(rec.get("type", str, required=False) or "", rec.str("name"),
                                        rec.get("parent_id", str, required=False), item.index)
            elif kind == "span_end":
                rec.str("id")
            elif kind == "step" and not outer:
                action = rec.str("action")
                if action == "begin":
                    self.steps.append(_Frame(rec.get("type", str, required=False) or "", rec.str("name"),
                                             f"step:{item.index}"))
                elif action == "end" and self.steps:
                    self.steps.pop()
            if has_nested and kind in ("tool", "subtask"):
                name = rec.str("function") if kind == "tool" else rec.str("name")
                item.nested_key = f"nested:{item.index}"
                self._flatten(nested, f"{label}.", frames + (_Frame(kind, name, item.nested_key),))
                item.nested_end = len(self.items)

    def _chain(self, span_id: str) -> tuple[_Frame, ...]:
        out: list[_Frame] = []
        seen: set[str] = set()
        sid: str | None = span_id
        while sid is not None and sid in self.spans and sid not in seen:
            seen.add(sid)
            span = self.spans[sid]
            out.append(_Frame(span.type, span.name, sid))
            sid = span.parent
        return tuple(reversed(out))

    def _tool_keys(self) -> dict[str, int]:
        """The span (or nested transcript) of each tool call -> the tool item. A tool event is
        written inside its own ``tool`` span but stamped with the enclosing span: it pairs with
        the nearest unclaimed tool span of the same function whose parent is its span_id."""
        keys: dict[str, int] = {}
        claimed: set[str] = set()
        tool_spans = [(sid, s) for sid, s in self.spans.items() if s.type == "tool"]
        for item in self.items:
            if item.kind != "tool":
                continue
            if item.nested_key:
                keys[item.nested_key] = item.index
                continue
            function = item.rec.str("function")
            parent = item.rec.get("span_id", str, required=False)
            candidates = [(sid, s) for sid, s in tool_spans
                          if sid not in claimed and s.name == function and s.parent == parent]
            before = [c for c in candidates if c[1].index < item.index]
            after = [c for c in candidates if c[1].index > item.index]
            chosen = max(before, key=lambda c: c[1].index) if before else (
                min(after, key=lambda c: c[1].index) if after else None)
            if chosen is not None:
                claimed.add(chosen[0])
                keys[chosen[0]] = item.index
        return keys

    def _owner(self, item: _Item, keys: dict[str, int]) -> int | None:
        """The tool call whose implementation this event is (innermost tool frame, unless an
        agent or subtask runs in between)."""
        for frame in reversed(item.frames):
            if frame.type == "tool":
                return keys.get(frame.key)
            if frame.type in ("agent", "subtask"):
                return None
        return None

    # --- actors ---------------------------------------------------------------------------------

    @staticmethod
    def _model_actor(frames: tuple[_Frame, ...]) -> str:
        actor, in_tool, main_seen = "agent", False, False
        for frame in frames:
            if frame.type in ("scorer", "scorers"):
                return "grader"
            if frame.type == "tool":
                in_tool = True
            elif frame.type == "agent":
                if main_seen or in_tool:
                    actor = "subagent:" + _clean_id(frame.name)
                main_seen = True
            elif frame.type == "subtask":
                actor = "subagent:" + _clean_id(frame.name)
                main_seen = True
        return actor

    @staticmethod
    def _harness_actor(frames: tuple[_Frame, ...]) -> str:
        return "grader" if any(f.type in ("scorer", "scorers") for f in frames) else "harness"

    @staticmethod
    def _scorer_of(frames: tuple[_Frame, ...]) -> str | None:
        for frame in reversed(frames):
            if frame.type == "scorer":
                return frame.name
        return None

    # --- events ---------------------------------------------------------------------------------

    def _emit_events(self) -> None:
        keys = self._tool_keys()
        self.span_of_tool = {v: k for k, v in keys.items() if not k.startswith("nested:")}
        for item in self.items:
            if item.kind == "sandbox":
                tool = self._owner(item, keys)
                if tool is not None and tool < item.index:
                    self.owned.setdefault(tool, []).append(item)
                    self.owner[item.index] = tool
        for item in self.items:
            self._flush(index=item.index)
            if item.index in self.absorbed:
                continue
            self._emit(item)
        self._flush(everything=True)

    def _flush(self, *, index: int | None = None, span: str | None = None, everything: bool = False) -> None:
        keep: list[_Pending] = []
        for pending in self.pending:
            due = everything or (index is not None and pending.index is not None and pending.index <= index) \
                or (span is not None and pending.span == span)
            if due:
                pending.emit()
            else:
                keep.append(pending)
        self.pending = keep

    def _emit(self, item: _Item) -> None:
        b, rec, kind = self.b, item.rec, item.kind
        ts = timestamp(rec.data.get("timestamp"))
        if kind in ("span_begin", "span_end", "step"):
            if kind == "span_end":
                self._flush(span=rec.str("id"))
            self.seq_of[item.index] = b.keep(rec, kind, ts=ts)
        elif kind == "sample_init":
            self._sample_init(item, ts)
        elif kind == "model":
            self._model(item, ts)
        elif kind == "tool":
            self._tool(item, ts)
        elif kind == "sandbox":
            self._sandbox(item, ts)
        elif kind == "compaction":
            self.seq_of[item.index] = b.add("compaction", actor="harness", source=rec, ts=ts,
                                            tokens_before=rec.opt_int("tokens_before"),
                                            tokens_after=rec.opt_int("tokens_after"))
        elif kind == "subtask":
            self._subtask(item, ts)
        elif kind == "score":
            rec.obj("score")
            if rec.data.get("intermediate") is True:
                b.keep(rec, "score", actor="grader", ts=ts)
            else:
                self.scores_seen.append(item)
        else:
            if kind == "sample_limit":
                self.limit_seen = rec
            b.keep(rec, kind, actor=self._harness_actor(item.frames), ts=ts)

    def _sample_init(self, item: _Item, ts: str | None) -> None:
        rec = item.rec
        value = rec.get("sample.input", (str, list))
        seqs = []
        if isinstance(value, str):
            seqs.append(self.b.add("message", actor="user", source=rec, ts=ts,
                                   text=self._resolve(rec, "sample.input", value)))
        else:
            for k, message in enumerate(value):
                where = f"sample.input.{k}"
                if not isinstance(message, dict):
                    raise rec.error(where, "expected a chat message object")
                role = message.get("role")
                text = self._content_text(rec, f"{where}.content", message.get("content"))[0]
                if text:
                    seqs.append(self.b.add("message", actor="harness" if role == "system" else "user",
                                           source=rec, ts=ts, text=text))
        if not seqs:
            seqs.append(self.b.keep(rec, "sample_init", ts=ts))
        self.seq_of[item.index] = seqs[0]

    def _model(self, item: _Item, ts: str | None) -> None:
        rec = item.rec
        rec.get("model", str, required=False)
        actor = self._model_actor(item.frames)
        if actor == "grader":
            actor = "judge"
            scorer = self._scorer_of(item.frames)
            if scorer:
                self.judge_scorers.add(scorer)
        rec.get("output", dict, required=False)
        base = "output.choices.0.message"
        content = rec.get(f"{base}.content", (str, list), required=False)
        text, reasoning = self._content_text(rec, f"{base}.content", content)
        seqs = [self.b.add("message", actor=actor, source=rec, ts=ts, text=r, intent="reasoning") for r in reasoning]
        if text:
            seqs.append(self.b.add("message", actor=actor, source=rec, ts=ts, text=text))
        if not seqs:
            seqs.append(self.b.keep(rec, "model", actor=actor, ts=ts))
        self.seq_of[item.index] = seqs[0]
        for call in rec.get(f"{base}.tool_calls", list, required=False, default=[]):
            if isinstance(call, dict) and isinstance(call.get("id"), str):
                self.call_parent[call["id"]] = seqs[-1]

    def _tool(self, item: _Item, ts: str | None) -> None:
        b, rec = self.b, item.rec
        function = rec.str("function")
        call_id = rec.str("id")
        args = rec.obj("arguments")
        actor = self._model_actor(item.frames)
        parent = self.call_parent.get(call_id)
        self.actor_of[item.index] = actor
        owned = self.owned.get(item.index, [])
        plumbing = [s for s in owned if _is_plumbing(s.rec)]
        agent = rec.get("agent", str, required=False)
        error = rec.get("error", dict, required=False)

        if agent:
            worker = _clean_id(agent)
            self._absorb(plumbing)
            seq = b.add("delegation", actor=actor, source=[rec, *(s.rec for s in plumbing)], ts=ts, parent=parent,
                        worker_id=worker, instruction=_instruction(self._resolve_tree(rec, "arguments", args)))
            self.seq_of[item.index] = seq
            result = self._result_text(rec)

            def report() -> None:
                b.add("worker_report", actor="subagent:" + worker, source=rec, parent=seq, worker_id=worker,
                      text=result, status="failure" if error else None)
            self._later(item, report)
            return

        command = self._shell_command(rec, function, args)
        if command is not None:
            execs = [s for s in owned if s.rec.data.get("action") == "exec" and not _is_plumbing(s.rec)]
            primary = execs[-1] if execs else None
            cited = [s for s in owned if s in plumbing or s is primary]
            self._absorb(cited)
            result = primary.rec.data.get("result") if primary else None
            exit_code = result if isinstance(result, int) and not isinstance(result, bool) else None
            output = self._result_text(rec)
            self.seq_of[item.index] = shell_command(b, command, actor=actor, source=[rec, *(s.rec for s in cited)],
                                                    output=output, exit_code=exit_code, ts=ts, parent=parent)
            return

        file_action = _file_action(function, args)
        if file_action is not None:
            action, path_arg = file_action
            path = self._resolve(rec, f"arguments.{path_arg}", args[path_arg])
            self._absorb(owned)
            sources = [rec, *(s.rec for s in owned)]
            if action == "read":
                seq = b.add("file_read", actor=actor, source=sources, ts=ts, parent=parent, path=path)
            else:
                seq = b.add("file_edit", actor=actor, source=sources, ts=ts, parent=parent, path=path, edit_kind=action)
            self.seq_of[item.index] = seq
            return

        self._absorb(plumbing)
        sources = [rec, *(s.rec for s in plumbing)]
        if function == "submit":
            answer = args.get("answer")
            claim = self._resolve(rec, "arguments.answer", answer) if isinstance(answer, str) else _json(args)
            seq = b.add("completion_claim", actor=actor, source=sources, ts=ts, parent=parent, claim=claim,
                        scope="run" if actor == "agent" else "step")
        else:
            seq = b.add("source_record", actor=actor, source=sources, ts=ts, parent=parent, record_type="tool")
        self.seq_of[item.index] = seq

    def _later(self, item: _Item, emit: Callable[[], Any]) -> None:
        """Emit ``emit`` when the call's span (or nested transcript) ends."""
        span = self.span_of_tool.get(item.index)
        if item.nested_end is not None:
            self.pending.append(_Pending(item.nested_end, None, emit))
        elif span is not None:
            self.pending.append(_Pending(None, span, emit))
        else:
            emit()

    def _absorb(self, items: list[_Item]) -> None:
        self.absorbed.update(s.index for s in items)

    def _shell_command(self, rec: Record, function: str, args: dict[str, Any]) -> str | None:
        if function in _SHELL_TOOLS:
            if function == "bash_session":
                action = args.get("action")
                if action not in (None, "type_submit"):
                    return None
                for name in ("input", "command", "cmd"):
                    if isinstance(args.get(name), str):
                        return self._resolve(rec, f"arguments.{name}", args[name])
                return None
            for name in ("cmd", "command"):
                if isinstance(args.get(name), str):
                    return self._resolve(rec, f"arguments.{name}", args[name])
            return None
        if function in _PYTHON_TOOLS and isinstance(args.get("code"), str):
            return _python_command(self._resolve(rec, "arguments.code", args["code"]))
        return None

    def _sandbox(self, item: _Item, ts: str | None) -> None:
        b, rec = self.b, item.rec
        action = rec.str("action")
        tool = self.owner.get(item.index)
        if tool is not None and tool in self.seq_of:
            actor, parent = self.actor_of.get(tool, "agent"), self.seq_of[tool]
        else:
            actor, parent = self._harness_actor(item.frames), None
        if action == "exec" and isinstance(rec.data.get("cmd"), str):
            result = rec.get("result", (int, str), required=False)
            output = rec.get("output", str, required=False)
            seq = shell_command(b, self._resolve(rec, "cmd", rec.str("cmd")), actor=actor, source=rec, ts=ts,
                                parent=parent, output=self._resolve(rec, "output", output) if output is not None else None,
                                exit_code=result if isinstance(result, int) else None)
        elif action == "read_file" and isinstance(rec.data.get("file"), str) and rec.data["file"]:
            seq = b.add("file_read", actor=actor, source=rec, ts=ts, parent=parent, path=rec.str("file"))
        elif action == "write_file" and isinstance(rec.data.get("file"), str) and rec.data["file"]:
            seq = b.add("file_edit", actor=actor, source=rec, ts=ts, parent=parent, path=rec.str("file"),
                        edit_kind="create")
        else:
            seq = b.keep(rec, "sandbox", actor=actor, ts=ts)
        self.seq_of[item.index] = seq

    def _subtask(self, item: _Item, ts: str | None) -> None:
        b, rec = self.b, item.rec
        name = rec.str("name")
        worker = _clean_id(name)
        payload = rec.get("input", object, required=False)
        seq = b.add("delegation", actor="harness", source=rec, ts=ts, worker_id=worker,
                    instruction=_instruction(self._resolve_tree(rec, "input", payload)))
        self.seq_of[item.index] = seq
        result = rec.get("result", object, required=False)
        text = _render(self._resolve_tree(rec, "result", result))

        def report() -> None:
            b.add("worker_report", actor="subagent:" + worker, source=rec, parent=seq, worker_id=worker, text=text)

        if item.nested_end is not None:
            self.pending.append(_Pending(item.nested_end, None, report))
        elif item.frames and item.frames[-1].type == "subtask" and item.frames[-1].name == name \
                and not item.frames[-1].key.startswith(("nested:", "step:")):
            self.pending.append(_Pending(None, item.frames[-1].key, report))
        else:
            report()

    # --- without events -------------------------------------------------------------------------

    def _emit_messages(self, sample_rec: Record) -> None:
        messages = sample_rec.get("messages", list, required=False, default=[])
        actors = {"system": "harness", "user": "user", "assistant": "agent", "tool": "harness"}
        for j, message in enumerate(messages):
            rec = self.b.record(self.sample_file, self.child(f"messages[{j}]"), message)
            if not isinstance(rec.data, dict):
                raise rec.error(None, "expected a chat message object")
            role = rec.str("role")
            text = self._content_text(rec, "content", rec.data.get("content"))[0] if role != "tool" else ""
            if text:
                self.b.add("message", actor=actors.get(role, "harness"), source=rec, text=text)
            else:
                self.b.keep(rec, f"message:{role}", actor=actors.get(role, "harness"))

    # --- ending and outcomes --------------------------------------------------------------------

    def _run_ended(self, header: Record, sample: Record) -> None:
        error = sample.get("error", dict, required=False)
        limit = sample.get("limit", dict, required=False)
        status = header.opt_str("status")
        completed = timestamp(sample.data.get("completed_at"))
        sources: list[Record] = [sample] + ([self.limit_seen] if self.limit_seen else [])
        if error:
            reason = error.get("message") if isinstance(error.get("message"), str) else _json(error)
            self.b.add("run_ended", actor="harness", source=sources, ts=completed, status="error", reason=reason)
        elif limit:
            kind = limit.get("type")
            reason = f"{kind} limit exceeded" + (f" (limit {limit.get('limit')})" if "limit" in limit else "")
            self.b.add("run_ended", actor="harness", source=sources, ts=completed,
                       status="timeout" if kind in ("time", "working") else
                       "budget_exhausted" if kind in ("message", "token", "cost", "context") else "aborted", reason=reason)
        elif status == "success":
            self.b.add("run_ended", actor="harness", source=sources, ts=completed, status="completed")
        elif status in ("error", "cancelled"):
            message = header.get("error.message", str, required=False)
            self.b.add("run_ended", actor="harness", source=[header, *sources], ts=completed, status="error",
                       reason=message or f"the eval ended with status {status}")

    def _outcomes(self, scores: dict[str, Any]) -> None:
        events = self.scores_seen
        by_scorer: dict[str | None, list[_Item]] = {}
        for item in events:
            name = item.rec.get("scorer", str, required=False) or self._scorer_of(item.frames)
            if name is None and len(scores) == 1:
                name = next(iter(scores))
            by_scorer.setdefault(name, []).append(item)
        for name, raw in scores.items():
            rec = self.b.record(self.sample_file, self.child(f"scores.{name}"), raw)
            if not isinstance(rec.data, dict):
                raise rec.error(None, "expected a score object")
            cited = by_scorer.pop(name, [])
            self._verdict(rec, "", name, [rec, *(i.rec for i in cited)])
        for name, items in by_scorer.items():
            for item in items:
                self._verdict(item.rec, "score.", name, [item.rec])

    def _verdict(self, rec: Record, base: str, name: str | None, sources: list[Record]) -> None:
        value = rec.get(f"{base}value", object, required=True)
        value_text, reward, rewards = score_reward(value)
        answer = rec.get(f"{base}answer", str, required=False)
        explanation = rec.get(f"{base}explanation", str, required=False)
        metadata = rec.get(f"{base}metadata", dict, required=False)
        details = {k: v for k, v in (("answer", self._resolve(rec, f"{base}answer", answer) if answer else answer),
                                     ("metadata", metadata)) if v is not None}
        judged = name is not None and (name in self.judge_scorers or name.startswith("model_graded"))
        events = [r for r in sources if isinstance(r.data, dict) and r.data.get("event") == "score"]
        self.b.outcome("acceptance_verdict", source=sources, actor="judge" if judged else "grader",
                       ts=timestamp(events[0].data.get("timestamp")) if events else None,
                       verifier="inspect", status="evaluated" if value is not None else "no_grade",
                       scorer=name, value=value_text, reward=reward, rewards=rewards,
                       explanation=self._resolve(rec, f"{base}explanation", explanation) if explanation else None,
                       details=details or None)

    # --- text ----------------------------------------------------------------------------------

    def _resolve(self, rec: Record, where: str, value: str) -> str:
        if value.startswith(_ATTACHMENT):
            key = value[len(_ATTACHMENT):]
            found = self.attachments.get(key)
            if not isinstance(found, str):
                raise rec.error(where, f"{value} is not in the sample's attachments")
            return found
        return value

    def _resolve_tree(self, rec: Record, where: str, value: Any) -> Any:
        if isinstance(value, str):
            return self._resolve(rec, where, value)
        if isinstance(value, dict):
            return {k: self._resolve_tree(rec, f"{where}.{k}", v) for k, v in value.items()}
        if isinstance(value, list):
            return [self._resolve_tree(rec, f"{where}.{i}", v) for i, v in enumerate(value)]
        return value

    def _content_text(self, rec: Record, where: str, content: Any) -> tuple[str, list[str]]:
        """(text, reasoning texts) of a chat message's content (a string or content parts)."""
        if content is None:
            return "", []
        if isinstance(content, str):
            return self._resolve(rec, where, content), []
        if not isinstance(content, list):
            raise rec.error(where, f"expected a string or an array, got {type(content).__name__}")
        texts: list[str] = []
        reasoning: list[str] = []
        for k, part in enumerate(content):
            if not isinstance(part, dict):
                continue
            if part.get("type") == "text" and isinstance(part.get("text"), str):
                texts.append(self._resolve(rec, f"{where}.{k}.text", part["text"]))
            elif part.get("type") == "reasoning" and not part.get("redacted"):
                value = part.get("reasoning") if isinstance(part.get("reasoning"), str) else part.get("summary")
                if isinstance(value, str) and value.strip():
                    reasoning.append(self._resolve(rec, f"{where}.{k}.reasoning", value))
        return "\n".join(t for t in texts if t), reasoning

    def _result_text(self, rec: Record) -> str | None:
        result = rec.data.get("result")
        if result is None:
            return None
        if isinstance(result, str):
            return self._resolve(rec, "result", result)
        if isinstance(result, list):
            return self._content_text(rec, "result", result)[0]
        return _json(result)


# --- shell commands --------------------------------------------------------------------------------


def shell_command(b: RunBuilder, command: str, *, actor: str, source: Record | list[Record], output: str | None = None,
                  exit_code: int | None = None, ts: str | None = None, parent: int | None = None) -> int:
    """``RunBuilder.command`` for a command line that may span several lines.

    Workaround: ``shell.split_pipeline`` lexes with ``shlex``, which treats a newline as
    whitespace, so ``mkdir d\ntouch d/f`` reads as one ``mkdir`` and ``cd x\npytest`` is not
    a test run. A multi-line command is cut here into its logical lines (newlines outside
    quotes, heredoc bodies and ``\\`` continuations), each read for test runs and file
    effects, and the one event is made as the builder would. One-line commands go through
    the builder unchanged."""
    lines = _logical_lines(command)
    if len(lines) <= 1:
        return b.command(command, actor=actor, source=source, output=output, exit_code=exit_code, ts=ts, parent=parent)
    output_sha = hashlib.sha256(output.encode()).hexdigest() if output is not None else None
    common = {"command": command, "exit_code": exit_code, "output_sha256": output_sha}
    if any(is_test_command(line) for line in lines):
        counts = parse_test_counts(output) if output else None
        seq = b.add("test_run", actor=actor, source=source, ts=ts, parent=parent, **common,
                    **(counts._asdict() if counts else {}))
    else:
        seq = b.add("command", actor=actor, source=source, ts=ts, parent=parent, **common)
    seen = []
    for line in lines:
        for effect in file_effects(line):
            if effect in seen:
                continue
            seen.append(effect)
            if effect.action == "read":
                b.add("file_read", actor=actor, source=source, parent=seq, ts=ts, path=effect.path)
            else:
                b.add("file_edit", actor=actor, source=source, parent=seq, ts=ts, path=effect.path,
                      edit_kind=effect.edit_kind, new_path=effect.new_path)
    return seq


_HEREDOC_START = re.compile(r"<<-?\s*['\"]?(\w+)['\"]?")


def _logical_lines(command: str) -> list[str]:
    """The command's lines joined where a newline does not end a command (inside quotes,
    in a heredoc body, after a backslash)."""
    out: list[str] = []
    buffer: list[str] = []
    quote: str | None = None
    delimiters: list[str] = []
    for line in command.split("\n"):
        buffer.append(line)
        if delimiters:
            if line.strip() == delimiters[0]:
                delimiters.pop(0)
                if not delimiters:
                    out.append("\n".join(buffer))
                    buffer = []
            continue
        quote = _quote_state(line, quote)
        if quote is not None or line.endswith("\\"):
            continue
        delimiters = _HEREDOC_START.findall(line)
        if delimiters:
            continue
        out.append("\n".join(buffer))
        buffer = []
    if buffer:
        out.append("\n".join(buffer))
    return [line for line in out if line.strip()]


def _quote_state(line: str, quote: str | None) -> str | None:
    """The open quote at the end of ``line`` given the one open at its start."""
    escaped = False
    previous = " "
    for char in line:
        if escaped:
            escaped = False
        elif char == "\\" and quote != "'":
            escaped = True
        elif quote is None and char in "'\"":
            quote = char
        elif char == quote:
            quote = None
        elif quote is None and char == "#" and previous in " \t;&|(":
            break
        previous = char
    return quote


# --- helpers ---------------------------------------------------------------------------------------


def _is_plumbing(rec: Record) -> bool:
    """An exec of Inspect's own tool-support service (how web/editor/bash_session tools run)."""
    cmd = rec.data.get("cmd")
    return rec.data.get("action") == "exec" and isinstance(cmd, str) and (
        "inspect-tool-support" in cmd or "inspect_tool_support" in cmd)


def _file_action(function: str, args: dict[str, Any]) -> tuple[str, str] | None:
    """("read" | edit kind, the argument naming the path) for file tools."""
    path_arg = next((a for a in _PATH_ARGS if isinstance(args.get(a), str) and args[a]), None)
    if path_arg is None:
        return None
    if function in _EDITOR_TOOLS:
        command = args.get("command")
        if command not in _EDITOR_COMMANDS:
            return None
        kind = _EDITOR_COMMANDS[command]
        return ("read" if kind is None else kind), path_arg
    if function in _READ_TOOLS:
        return "read", path_arg
    if function in _WRITE_TOOLS:
        return _WRITE_TOOLS[function], path_arg
    return None


def _python_command(code: str) -> str:
    """The shell equivalent of Inspect's python tool (``python3`` reading the code on stdin)."""
    lines = {line.strip() for line in code.splitlines()}
    delimiter = "PY"
    while delimiter in lines:
        delimiter += "_"
    return f"python3 - <<'{delimiter}'\n{code}\n{delimiter}"


def _instruction(arguments: Any) -> str:
    """What a delegation hands over: a single text argument as is, else the arguments as JSON."""
    if isinstance(arguments, str):
        return arguments
    if isinstance(arguments, dict):
        texts = [v for v in arguments.values() if isinstance(v, str)]
        if len(arguments) == 1 and len(texts) == 1:
            return texts[0]
        return _json(arguments) if arguments else ""
    return "" if arguments is None else _json(arguments)


def _render(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return _json(value)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _clean_id(name: str) -> str:
    """A sub-agent id the actor pattern accepts."""
    cleaned = re.sub(r"[^A-Za-z0-9._@/+-]", "_", name).lstrip("._@/+-")
    return (cleaned or "unnamed")[:128]


def _text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _scalar_text(value: Any) -> str | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float, str)):
        return str(value)
    return None


def _decimal(value: int | float) -> str:
    return decimal_text(value)


def score_reward(value: Any) -> tuple[str | None, str | None, dict[str, str] | None]:
    """(value as text, reward, rewards per key) of an Inspect score value: C/I/P/N letters,
    yes/no words, numbers (exact decimal text), booleans, or a dict/list of those."""
    if value is None:
        return None, None, None
    if isinstance(value, bool):
        return ("true" if value else "false"), ("1" if value else "0"), None
    if isinstance(value, (int, float)):
        text = _decimal(value)
        return text, text, None
    if isinstance(value, str):
        return value, _text_reward(value), None
    if isinstance(value, (dict, list)):
        pairs = value.items() if isinstance(value, dict) else ((str(i), v) for i, v in enumerate(value))
        rewards = {str(k): r for k, v in pairs if (r := score_reward(v)[1]) is not None}
        return _json(value), None, rewards or None
    return _json(value), None, None


def _text_reward(text: str) -> str | None:
    stripped = text.strip()
    if stripped in _LETTER_REWARDS:
        return _LETTER_REWARDS[stripped]
    if stripped.lower() in _WORD_REWARDS:
        return _WORD_REWARDS[stripped.lower()]
    try:
        return decimal_text(stripped)
    except ValueError:
        return None
