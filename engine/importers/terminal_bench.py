"""Terminal-Bench 1 (``tb run``) trials, read as procgrade events.

TB1 writes, per run, ``runs/<run>/results.json`` (``results[]``, one entry per trial),
``run_metadata.json`` (agent, model, dataset), and per trial
``<task_id>/<trial_name>/{results.json, commands.txt, sessions/, panes/}``. The
importer ``terminal-bench`` reads a run-level ``results.json`` (one run per entry,
the trial directory's own files when present) or a trial-level ``results.json`` alone.

What becomes what:

- Provenance: ``run_metadata.json`` (agent name as the harness, model, agent kwargs,
  dataset) when it sits two levels up from the trial, the trial's ``task_id`` and
  ``trial_name``. ``labels.system`` is the run folder's name when it is not tb's own
  (``runs/<run_id>/`` renamed after the experiment, e.g. ``claude_code_c4/``);
  ``labels.benchmark`` the dataset name, else ``terminal-bench``. Run ids are
  ``terminal-bench/<trial_name>/<trial uuid>``; a trial without a uuid is
  ``terminal-bench/<system>/<trial_name>`` so two systems' trials never collide.
- The task ``instruction`` is the ``user`` message.
- ``commands.txt`` (one Python list of tmux keys per line) gives commands without exit
  codes or output (TB1 records none). Lines before the test recording
  (``asciinema rec ... tests.cast``) are the agent phase: when the agent is an
  installed one (the phase sources ``/installed-agent/``) every line is the harness
  launching it, otherwise the lines after the recorder start are the model's
  keystrokes (actor ``agent``). The test phase is the harness's. Lines of pure control
  keys (``C-d``) and empty polls are kept as ``source_record`` ``keystrokes``; a line
  that is not a list of strings is ``unparsed`` (the file is a plain log).
- The agent's own process, when ``sessions/agent.cast`` holds Claude Code's
  ``--output-format stream-json`` (an installed ``claude-code`` agent): the cast's output
  stream is read back as printed lines (:mod:`procgrade.engine.importers.asciinema`: chunks joined,
  terminal escapes and overwritten text stripped), each line that starts a
  ``{"type"...`` object with a ``session_id`` is a record (re-joined with the following
  lines when the terminal wrapped it), cited as ``sessions/agent.cast:<cast line>`` (the
  cast line where it began; ``<line>.<k>`` for the k-th record begun on one line), timed
  from the cast's clock. The records go through the Claude Code mapping
  (:func:`procgrade.engine.importers.claude_code.emit_stream_json`): messages, commands and test
  runs (with how each ended, :mod:`procgrade.engine.importers.claude_code_bash`), file reads and
  edits, delegations, the completion claim. They sit after the
  harness's launch keystrokes and before the test phase. A record cut off (the agent
  killed mid-write) is ``unparsed``; the keystrokes (``i`` events) are not read.
- ``run_ended`` (actor ``harness``), where the test phase starts: ``agent_timeout`` ->
  timeout, ``context_length_exceeded``/``output_length_exceeded`` -> budget_exhausted,
  ``fatal_llm_parse_error`` -> failed, agent or harness errors -> error (``failure_mode``
  as the reason); otherwise (``test_timeout`` included: the agent had finished),
  with a stream, as its ``result`` record says (``success`` -> completed) or, when the
  stream has no result record (the agent process died: its crash line is quoted), error;
  without a stream, completed.
- Outcome: ``acceptance_verdict`` (verifier ``terminal-bench``, reward ``1``/``0`` from
  ``is_resolved``; status ``timeout`` for agent/test timeouts, ``infra_error`` for
  harness failures, else ``evaluated``; ``no_grade`` when ``is_resolved`` is null),
  and one ``test_result`` per ``parser_results`` entry.

Not read: ``sessions/tests.cast``, other casts without stream-json, ``agent.log`` /
``panes/*`` (terminal recordings, no structure to map; they stay claimed with the trial),
``tb.lock`` (claimed with the run) and the run-level aggregate fields (``accuracy``,
``pass_at_k``), which are no single run's.
"""

from __future__ import annotations

import ast
import json
import posixpath
import re
from collections.abc import Sequence
from typing import Any

from procgrade.engine.errors import InputError
from procgrade.engine.importers.asciinema import read_cast
from procgrade.engine.importers.base import Importer, Unit, register
from procgrade.engine.importers.building import ImportedRun, RunBuilder, timestamp
from procgrade.engine.importers.claude_code import StreamEnd, StreamProvenance, emit_stream_json, parse_line
from procgrade.engine.importers.source_tree import SourceTree

__all__ = ["TerminalBenchImporter"]

_TIMEOUTS = {"agent_timeout", "test_timeout"}
_GRADED = {None, "unset", "none", "fatal_llm_parse_error", "context_length_exceeded", "output_length_exceeded"}
# How the agent phase ended, by failure_mode: the harness stopping the model at a time or
# context limit is not the model finishing.
_RUN_STATUS = {None: "completed", "unset": "completed", "none": "completed", "test_timeout": "completed",
               "agent_timeout": "timeout", "context_length_exceeded": "budget_exhausted",
               "output_length_exceeded": "budget_exhausted", "fatal_llm_parse_error": "failed"}
_AGENT_DECIDES = {None, "unset", "none", "test_timeout"}
_ENTER_KEYS = {"Enter", "C-m", "KPEnter"}
_CONTROL_KEY = re.compile(r"^(?:[CMS]-\S+|Escape|Tab|BTab|BSpace|DC|End|Home|IC|NPage|PPage|PgDn|PgUp|Up|Down|Left|Right|Space|F\d+)$")
_HEAD_KEYS = (b'"is_resolved"', b'"parser_results"', b'"failure_mode"')
_NO_RESULT = "the agent's stream-json ended without a result record (the agent process stopped early)"
_RECORD_START = '{"type"'
#: What a crashing agent process prints after its last record (Node: ``Error: spawn ps ENOENT``).
_CRASH = re.compile(r"^\s*(?:[A-Z][A-Za-z]*)?Error\b:?.{0,300}")
#: A stream-json record the terminal wrapped over several lines is re-joined up to this many characters.
_MAX_RECORD_CHARS = 50_000_000


def _system_of(tree: SourceTree, meta_rel: str | None, meta: Any) -> str | None:
    """The system a run folder names: ``runs/<run_id>/`` is tb's own name (no system), a
    folder renamed after the experiment (``claude_code_c4/``) is one."""
    if meta_rel is None:
        return None
    folder = tree.folder_name(meta_rel)
    run_id = meta.get("run_id") if isinstance(meta, dict) else None
    if not folder or folder == run_id:
        return None
    return folder


def _stream_json(tree: SourceTree, b: RunBuilder, rel: str) -> tuple[list[Any], str | None]:
    """Claude Code stream-json records echoed in the cast ``rel``: each printed line that
    starts a ``{"type"...`` object (after the terminal's escapes), re-joined with the lines
    after it when the terminal wrapped it. A record begun but never complete (the agent was
    killed mid-write) is kept as unparsed; so are cast lines that are not cast events."""
    cast = read_cast(tree, rel)
    for number, raw, why in cast.bad:
        b.unparsed(rel, number, raw, why)
    records: list[Any] = []
    on_line: dict[int, int] = {}
    lines = cast.lines
    index = 0
    after_last = 0
    while index < len(lines):
        start = lines[index]
        at = start.text.find(_RECORD_START)
        if at < 0:
            index += 1
            continue
        text, end = start.text[at:], index
        value = _json_object(text)
        while value is None and end + 1 < len(lines) and len(text) < _MAX_RECORD_CHARS \
                and not lines[end + 1].text.lstrip().startswith(_RECORD_START):
            end += 1
            text += lines[end].text
            value = _json_object(text) if text.rstrip().endswith("}") else None
        if value is None:
            text, end = start.text[at:], index  # never completed: the line as printed
        elif not isinstance(value, dict) or "session_id" not in value:
            index = end + 1  # a JSON line, but not the agent's stream
            continue
        origin, clock = start.origin()
        count = on_line[origin] = on_line.get(origin, 0) + 1
        label = str(origin) if count == 1 else f"{origin}.{count}"
        moment = cast.epoch(clock)
        records.append(parse_line(rel, label, text, when=timestamp(moment) if moment is not None else None))
        index = after_last = end + 1
    crash = next((m.group(0).strip() for line in lines[after_last:] if (m := _CRASH.match(line.text))), None) \
        if records else None
    return records, crash


def _json_object(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _json_head(tree: SourceTree, rel: str) -> bytes:
    try:
        return tree.head(rel, 4096)
    except InputError:
        return b""


def _is_trial(doc: Any) -> bool:
    return isinstance(doc, dict) and "is_resolved" in doc and ("trial_name" in doc or "task_id" in doc) \
        and not isinstance(doc.get("results"), list)


def _is_run(doc: Any) -> bool:
    return isinstance(doc, dict) and isinstance(doc.get("results"), list) and bool(doc["results"]) \
        and all(_is_trial(entry) for entry in doc["results"])


@register
class TerminalBenchImporter(Importer):
    """Terminal-Bench 1 results.json (run or trial) with commands.txt."""

    name = "terminal-bench"
    title = "Terminal-Bench 1 trial results.json (+ commands.txt, run_metadata.json)"
    version = "3"

    def find(self, tree: SourceTree, candidates: Sequence[str]) -> list[Unit]:
        units: list[Unit] = []
        claimed: set[str] = set()
        results = [rel for rel in candidates if posixpath.basename(rel) == "results.json"]
        for rel in results:  # run-level files first: they claim their trials' directories
            doc = tree.try_json(rel)
            if _is_run(doc):
                companions = self._run_companions(tree, rel, doc)
                units.append(Unit(rel, tuple(companions)))
                claimed.update(companions)
        for rel in results:
            if rel in claimed or any(u.primary == rel for u in units):
                continue
            if self.sniff(tree, rel):
                units.append(Unit(rel, tuple(self.companions(tree, rel))))
        return units

    def sniff(self, tree: SourceTree, rel: str) -> bool:
        if posixpath.basename(rel) != "results.json":
            return False
        doc = tree.try_json(rel)
        if doc is None:
            head = _json_head(tree, rel)
            return all(key in head for key in _HEAD_KEYS[:1]) and b'"results"' not in head[:200]
        return _is_trial(doc)

    def companions(self, tree: SourceTree, rel: str) -> list[str]:
        folder = posixpath.dirname(rel)
        return [f for f in tree.under(folder) if f != rel] if folder else [f for f in tree.files() if f != rel]

    @staticmethod
    def _trial_dir(run_rel: str, entry: dict[str, Any]) -> str | None:
        task, trial = entry.get("task_id"), entry.get("trial_name")
        if not isinstance(task, str) or not isinstance(trial, str) or not task or not trial:
            return None
        folder = posixpath.dirname(run_rel)
        path = posixpath.normpath(posixpath.join(folder, task, trial))
        return None if path.startswith("..") else path

    def _run_companions(self, tree: SourceTree, rel: str, doc: dict[str, Any]) -> list[str]:
        folder = posixpath.dirname(rel)
        files: list[str] = []
        for name in ("run_metadata.json", "tb.lock"):  # tb.lock: the invocation, not read
            meta = posixpath.join(folder, name) if folder else name
            if tree.exists(meta):
                files.append(meta)
        for entry in doc["results"]:
            trial_dir = self._trial_dir(rel, entry)
            if trial_dir is not None:
                files.extend(tree.under(trial_dir))
        return list(dict.fromkeys(files))

    # --- reading -------------------------------------------------------------------------------

    def read(self, tree: SourceTree, unit: Unit) -> list[ImportedRun]:
        doc = tree.json(unit.primary)
        if isinstance(doc, dict) and isinstance(doc.get("results"), list):
            runs = []
            for index, entry in enumerate(doc["results"]):
                trial_dir = self._trial_dir(unit.primary, entry) if isinstance(entry, dict) else None
                trial_results = posixpath.join(trial_dir, "results.json") if trial_dir else None
                if trial_results and tree.exists(trial_results):
                    runs.append(self._trial(tree, unit, trial_results, "result", tree.json(trial_results), trial_dir))
                else:
                    runs.append(self._trial(tree, unit, unit.primary, f"results[{index}]", entry, trial_dir))
            return runs
        return [self._trial(tree, unit, unit.primary, "result", doc, posixpath.dirname(unit.primary))]

    def _trial(self, tree: SourceTree, unit: Unit, file: str, label: str, data: Any,
               trial_dir: str | None) -> ImportedRun:
        if not isinstance(data, dict):
            raise InputError(tree.label(file), label, None, f"expected a trial result object, got {type(data).__name__}")
        trial_name = data.get("trial_name") if isinstance(data.get("trial_name"), str) else None
        task_id = data.get("task_id") if isinstance(data.get("task_id"), str) else None
        ident = data.get("id") if isinstance(data.get("id"), str) else None
        meta_rel = None
        if trial_dir is not None:
            meta_rel = posixpath.normpath(posixpath.join(trial_dir, "..", "..", "run_metadata.json"))
            if meta_rel.startswith("..") or not tree.exists(meta_rel):
                meta_rel = None
        system = _system_of(tree, meta_rel, tree.try_json(meta_rel) if meta_rel is not None else None)
        # The trial's uuid names it uniquely; without one, the system keeps two systems' trials apart.
        native = "/".join(p for p in ((trial_name or task_id, ident) if ident else (system, trial_name or task_id))
                          if p) or "trial"
        files = [file]
        b = self.builder(tree, unit, native, workspace_root="/app")
        rec = b.record(file, label, data, native_id=ident)
        rec.str("task_id")
        rec.opt_str("trial_name")
        resolved = rec.get("is_resolved", (bool, type(None)))
        failure_mode = rec.get("failure_mode", (str, type(None)), required=False)
        parser_results = rec.get("parser_results", (dict, type(None)), required=False)
        instruction = rec.opt_str("instruction")

        # Provenance: run_metadata.json two levels up (runs/<run>/<task>/<trial>/).
        start_sources = [rec]
        meta: dict[str, Any] = {}
        if meta_rel is not None:
            meta_doc = tree.json(meta_rel)
            meta_rec = b.record(meta_rel, "metadata", meta_doc)
            if not isinstance(meta_doc, dict):
                raise meta_rec.error(None, f"expected an object, got {type(meta_doc).__name__}")
            meta = meta_rec.data  # redacted
            start_sources.append(meta_rec)
            files.append(meta_rel)
        labels = {"runner": "terminal-bench"}
        if trial_name:
            labels["trial_name"] = trial_name
        for key in ("run_id", "agent_name", "commit_hash"):
            if isinstance(meta.get(key), str):
                labels[key] = meta[key]
        if isinstance(meta.get("dataset_name"), str):
            version = meta.get("dataset_version")
            labels["dataset"] = meta["dataset_name"] + (f"@{version}" if isinstance(version, str) and version else "")
        labels["benchmark"] = meta["dataset_name"] if isinstance(meta.get("dataset_name"), str) and meta["dataset_name"] \
            else "terminal-bench"
        if system is not None:
            labels["system"] = system
        settings = meta.get("agent_kwargs") if isinstance(meta.get("agent_kwargs"), dict) and meta["agent_kwargs"] else None
        agent = meta.get("agent_name") if isinstance(meta.get("agent_name"), str) and meta["agent_name"] else None
        model = meta.get("model_name") if isinstance(meta.get("model_name"), str) and meta["model_name"] else None

        if instruction:
            b.add("message", actor="user", source=rec, ts=timestamp(data.get("agent_started_at")), text=instruction)

        run_status = _RUN_STATUS.get(failure_mode, "error")
        reason = failure_mode if failure_mode not in (None, "unset", "none") else None

        # The agent's own process: Claude Code's stream-json echoed into the agent cast.
        cast_rel = posixpath.join(trial_dir, "sessions", "agent.cast") if trial_dir is not None else None
        stream: list[Any] = []
        crash: str | None = None
        if cast_rel is not None and tree.exists(cast_rel):
            files.append(cast_rel)
            stream, crash = _stream_json(tree, b, cast_rel)
        found: list[StreamProvenance] = []

        def end_run(end: StreamEnd | None = None) -> None:
            status, why, sources = run_status, reason, [rec]
            if end is not None and end.record is not None:
                sources = [end.record, rec]
            if end is not None and failure_mode in _AGENT_DECIDES:  # the harness did not stop it: the agent's account decides
                if end.record is not None:
                    status, why = end.status or "completed", end.reason
                else:
                    status, why = "error", _NO_RESULT + (f"; it printed: {crash}" if crash else "")
            b.add("run_ended", actor="harness", source=sources,
                  ts=timestamp(data.get("agent_ended_at")) or (end.ts if end is not None else None),
                  status=status, reason=why)

        def agent_phase() -> None:
            if stream:
                found.append(emit_stream_json(self, tree, b, stream, end_run))
            else:
                end_run()

        ended = False
        commands = posixpath.join(trial_dir, "commands.txt") if trial_dir else "commands.txt"
        if trial_dir is not None and tree.exists(commands):
            files.append(commands)
            ended = self._commands(tree, b, commands, agent_phase)
        if not ended:
            agent_phase()

        version = None
        if found:
            version = found[0].harness_version
            model = model or found[0].model
            for key, value in found[0].labels.items():
                labels.setdefault(key, value)
        b.start(harness=agent or ("claude-code" if found else "terminal-bench"), harness_version=version,
                model=model, model_settings=settings, task_id=rec.str("task_id"),
                labels=labels, ts=timestamp(data.get("trial_started_at")), source=start_sources)

        # Outcome.
        tests: list[tuple[str, str]] = []
        for name, status in (parser_results or {}).items():
            if not isinstance(status, str):
                raise rec.error(f"parser_results.{name}", f"expected a string, got {type(status).__name__}")
            tests.append((name, status))
        outcome_of = {"passed": "passed", "failed": "failed", "skipped": "skipped", "error": "error"}
        passed = sum(1 for _, s in tests if s == "passed")
        failed = sum(1 for _, s in tests if s == "failed")
        errored = sum(1 for _, s in tests if outcome_of.get(s, "error") == "error")
        skipped = sum(1 for _, s in tests if s == "skipped")
        if failure_mode in _TIMEOUTS:
            status = "timeout"
        elif failure_mode not in _GRADED:
            status = "infra_error"
        else:
            status = "evaluated" if resolved is not None else "no_grade"
        b.outcome("acceptance_verdict", source=rec, ts=timestamp(data.get("test_ended_at")), verifier="terminal-bench",
                  status=status, reward=None if resolved is None else ("1" if resolved else "0"),
                  value=None if resolved is None else ("resolved" if resolved else "unresolved"),
                  passed=passed if tests else None, failed=failed if tests else None,
                  errored=errored or None, skipped=skipped or None,
                  explanation=f"failure_mode: {failure_mode}" if reason else None,
                  details={"failure_mode": failure_mode} if failure_mode is not None else None)
        for name, test_status in tests:
            outcome = outcome_of.get(test_status, "error")
            b.outcome("test_result", source=rec, ts=timestamp(data.get("test_ended_at")), verifier="terminal-bench",
                      test_id=name, outcome=outcome,
                      message=None if test_status in outcome_of else f"status {test_status!r}")
        b.files = list(dict.fromkeys(files))  # the files read, primary first
        return b.build()

    @staticmethod
    def _commands(tree: SourceTree, b: RunBuilder, rel: str, end_run: Any) -> bool:
        """commands.txt: one tmux key list per line. Returns whether run_ended was placed
        (where the test phase starts)."""
        lines: list[tuple[int, str, list[str] | None, str | None]] = []
        for number, raw in enumerate(tree.text(rel).split("\n"), start=1):
            if not raw.strip():
                continue
            try:
                keys = ast.literal_eval(raw)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError) as exc:
                lines.append((number, raw, None, f"not a key list: {type(exc).__name__}"))
                continue
            if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
                lines.append((number, raw, None, "not a list of strings"))
                continue
            lines.append((number, raw, keys, None))

        def text_of(keys: list[str]) -> str:
            return "".join("\n" if k in _ENTER_KEYS else k for k in keys)

        test_start = next((i for i, (_, _, keys, _) in enumerate(lines)
                           if keys is not None and "asciinema rec" in text_of(keys) and "tests.cast" in text_of(keys)),
                          len(lines))
        installed = any(keys is not None and re.match(r"^\s*(source|\.)\s+/installed-agent/", text_of(keys))
                        for _, _, keys, _ in lines[:test_start])
        ended = False
        previous = ""
        for position, (number, raw, keys, error) in enumerate(lines):
            if position == test_start and not ended:
                end_run()
                ended = True
            if keys is None:
                b.unparsed(rel, number, raw, error or "not a key list")
                previous = ""
                continue
            rec = b.record(rel, number, {"keys": keys})
            keys = rec.data["keys"]  # redacted
            text = text_of(keys)
            command = text[:-1] if text.endswith("\n") else text
            harness_line = position >= test_start or installed or "asciinema rec" in command \
                or (command.strip() == "clear" and "asciinema rec" in previous)
            actor = "harness" if harness_line else "agent"
            previous = command
            literal = [k for k in keys if k not in _ENTER_KEYS and not _CONTROL_KEY.match(k)]
            if not command.strip() or not "".join(literal).strip():
                b.keep(rec, "keystrokes", actor=actor)
                continue
            b.command(command, actor=actor, source=rec, effects=actor == "agent")
        return ended
