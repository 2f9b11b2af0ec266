"""OpenAI Codex CLI rollout JSONL (``~/.codex/sessions/YYYY/MM/DD/rollout-<ts>-<uuid>.jsonl``).

Each line is ``{"timestamp": ISO, "type": <item>, "payload": {...}}`` with ``type`` one of
``session_meta``, ``turn_context``, ``response_item``, ``event_msg``, ``compacted`` (and,
newer, ``inter_agent_communication``, ``world_state``, ...). One file is one run:
``codex/<session id>`` (the ``session_meta`` id, else the uuid in the file name).

How records become events (everything in file order; timestamps are informational):

- ``session_meta`` (the first one) is the run's provenance: ``cli_version``,
  ``model_provider`` and ``instructions`` (in ``model_settings``), ``cwd`` (the workspace
  root, so absolute tool paths and relative shell paths compare equal), ``originator``,
  ``source`` (a sub-agent session names its parent thread, role and path), ``git``.
  The model is the first ``turn_context``'s ``model``.
- Rounds: a user turn is a stage (``begin_stage``, numbered from 1). A turn starts at a
  ``turn_context``, ``task_started``/``turn_started`` or a genuine user message, unless
  that marker belongs to the turn already open (same ``turn_id``; or the open turn has
  neither ended nor, in files that never record turn ends, seen the model act).
  ``task_complete``/``turn_complete`` end it (``completed``), ``turn_aborted`` too
  (``aborted``); a file cut mid-turn leaves the last stage open.
- Tool calls pair with their outputs and the harness events about them on ``call_id``
  (``function_call`` <-> ``function_call_output``, ``custom_tool_call`` <->
  ``custom_tool_call_output``, ``local_shell_call``, ``exec_command_*``,
  ``patch_apply_*``, ``mcp_tool_call_*``, ``collab_*``): the event sits at the call's
  position and cites every record of the pair/group.
  * ``shell``/``container.exec``/``shell_command``/``exec_command``/``local_shell_call``:
    ``RunBuilder.command`` (a ``test_run`` when it runs tests) with the script of
    ``["bash", "-lc", script]``; exit code from ``exec_command_end`` when persisted (old
    versions), else parsed from the output: JSON ``metadata.exit_code`` (``shell``), or
    the header of the text output (``Exit code: N`` / ``Process exited with code N``,
    read above the ``Output:`` line only). Relative paths the command line reads or
    edits are resolved against the call's ``workdir`` when it is not the workspace root.
  * ``exec_command`` still running (``Process running with session ID N``) is a
    background job: ``job_started`` (id ``exec-session-N``) at the call, ``job_polled``
    for each ``write_stdin`` on it, and when a poll shows the exit code the finished
    ``command``/``test_run`` (with the exit code) plus ``job_finished``.
  * ``apply_patch`` (custom tool, JSON function tool, or ``apply_patch <<'EOF'`` /
    ``["apply_patch", patch]`` inside a shell call, which Codex intercepts): one
    ``file_edit`` per file of the patch (create/modify/delete/rename, ``diff_sha256`` of
    the file's section) unless the patch is known to have failed
    (``patch_apply_end.success`` false, non-zero exit code, "verification failed"):
    then one ``source_record`` (actor agent) keeps the attempt.
  * ``update_plan``: a ``message`` with intent ``plan`` (the format labels it).
  * ``view_image``: a ``file_read``.
  * Sub-agents: ``spawn_agent`` -> ``delegation`` (worker id = the new thread id from
    ``collab_*`` events / ``sub_agent_activity`` / the output, else the task name;
    ``context`` = paths of the input items handed over); ``send_input``/
    ``send_message``/``followup_task`` -> ``delegation`` to that worker; ``wait``/
    ``wait_agent`` -> a ``worker_report`` per agent in a final state (completed ->
    success, errored -> failure, interrupted -> partial), actor ``subagent:<id>``,
    ``evidence`` = paths the report cites in backticks or with a slash. Reports also come
    from ``inter_agent_communication`` items (author is not this agent),
    ``<subagent_notification>`` blocks the harness injects, and ``sub_agent_activity``
    events in a final state that belong to no call.
  * MCP tools (``mcp__server__tool``, a ``namespace``) and other tools: a
    ``source_record`` (actor agent, ``record_type`` = ``mcp_tool_call:<name>`` or
    ``tool_call:<name>``): the model chose the call, but nothing says what it did to the
    workspace, so no rule should read it as a command, read or edit.
  * A call whose ``arguments`` are not valid JSON or lack the command is the model's
    error (Codex answers it with an error output), not a broken log: a ``source_record``.
- Messages: assistant text -> ``message`` (actor agent; ``plan`` when it starts with a
  plan label, or with a numbered list whose first item does not start with a past-tense
  verb ("1. Added ...") and is not the turn's final message; ``progress``
  for ``phase: commentary``); user text -> ``message`` actor user, except blocks the
  harness injects (``<environment_context>``, ``<user_instructions>``, AGENTS.md,
  ``<turn_aborted>``, any ``<tag>...</tag>`` block, ``developer``/``system`` roles) ->
  actor harness. ``event_msg`` ``user_message``/``agent_message``/``agent_reasoning`` repeat
  the ``response_item`` next to them: one event cites both. Reasoning summaries (and raw
  reasoning content) -> ``message`` intent ``reasoning``; reasoning with only
  ``encrypted_content`` -> ``source_record`` (actor agent; the raw record is kept).
- Completion claims (conservative): at ``task_complete``/``turn_complete``, the turn's
  final agent message (``last_agent_message``, else the last assistant message of the
  turn) is a ``completion_claim`` (scope ``stage``) only when it says the work is done
  ("I've implemented/fixed/added ...", "... is now complete/fixed", "all tests pass",
  "Done", "successfully ...") and says nothing of being unable/blocked/failing. Answers
  and questions are not claims.
- Compaction: a ``compacted`` item, ``context_compacted`` event or ``compaction``
  response item (adjacent ones are one event) -> ``compaction`` with the summary; actor
  ``user`` when the compaction is a turn of its own (Codex runs one only for
  ``/compact``), else ``harness``.
- A spawned sub-agent's rollout (``source.subagent.thread_spawn``) is its own run (actor
  ``agent`` there); the lead's history copied at its start, up to the lead's spawn call
  (``spawn_call_id``), is kept as ``source_record`` ``copied_context:<type>`` (actor
  harness), not replayed as this agent's decisions.
- ``token_count``, ``turn_context`` that opens no stage, ``task_started`` that opens no
  stage, errors, web searches, diffs and every unknown record type (top-level or
  ``event_msg``/``response_item`` subtype) -> ``source_record`` (never dropped).
- A line that is not JSON (or not UTF-8): the file is append-only and can be cut
  mid-write, so it becomes an ``unparsed`` event counted on the run. A JSON line without
  a required field (``type``, ``payload``, ``payload.type``, a call's ``call_id``, ...)
  or with one of the wrong type is a broken log: ``FILE:LINE: field: reason``.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from procgrade.engine.importers.base import Importer, Unit, register
from procgrade.engine.importers.building import ImportedRun, Record, RunBuilder, timestamp
from procgrade.engine.importers.patches import apply_patch_effects
from procgrade.engine.importers.redaction import Redactor
from procgrade.engine.importers.shell import exit_code_from_text, file_effects
from procgrade.engine.importers.source_tree import SourceTree, refuse_unsafe_json, strict_json

__all__ = ["CodexImporter"]

#: Top-level rollout item types this importer knows (and whose payload must be an object).
_KNOWN_TOP = {"session_meta", "turn_context", "response_item", "event_msg", "compacted",
              "inter_agent_communication", "inter_agent_communication_metadata", "world_state"}
#: Types that can open a rollout file (used to recognise one).
_SNIFF_TOP = {"session_meta", "turn_context", "response_item", "event_msg", "compacted"}

_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_SHELL_TOOLS = {"shell", "container.exec", "shell_command", "exec_command", "local_shell"}
_PATCH_TOOLS = {"apply_patch", "applypatch"}
_SPAWN_TOOLS = {"spawn_agent", "spawn_subagent"}
_SEND_TOOLS = {"send_input", "send_message", "followup_task", "assign_task"}
_WAIT_TOOLS = {"wait", "wait_agent", "wait_agents"}
_SHELL_PROGRAMS = {"bash", "sh", "zsh", "dash", "ksh", "fish"}

# Records that may sit between an event_msg and the response_item it repeats.
_TWIN_SEGMENT = {("response_item", "message"), ("response_item", "reasoning"), ("event_msg", "user_message"),
                 ("event_msg", "agent_message"), ("event_msg", "agent_reasoning"),
                 ("event_msg", "agent_reasoning_raw_content"), ("event_msg", "agent_reasoning_section_break"),
                 ("event_msg", "token_count"), ("turn_context", None), ("event_msg", "task_started"),
                 ("event_msg", "turn_started")}
_COMPACTION_ITEMS = {("compacted", None), ("event_msg", "context_compacted"), ("response_item", "compaction"),
                     ("response_item", "context_compaction"), ("response_item", "compaction_summary")}
_TWIN_WINDOW = 32   # how far (in records of the stretch) a repeat is looked for
_TURN_ENDS = {"task_complete", "turn_complete", "turn_aborted"}
_TURN_STARTS = {"task_started", "turn_started"}
# Harness events that belong to a tool call (matched on call_id).
_CALL_EVENTS = {"exec_command_begin", "exec_command_end", "patch_apply_begin", "patch_apply_end",
                "mcp_tool_call_begin", "mcp_tool_call_end", "collab_tool_call", "collab_agent_spawn_begin",
                "collab_agent_spawn_end", "collab_agent_interaction_begin", "collab_agent_interaction_end",
                "collab_waiting_begin", "collab_waiting_end", "collab_close_begin", "collab_close_end",
                "collab_resume_begin", "collab_resume_end", "web_search_begin", "web_search_end",
                "view_image_tool_call", "apply_patch_approval_request", "exec_approval_request",
                "sub_agent_activity", "dynamic_tool_call_request", "dynamic_tool_call_response"}

_INJECTED_BLOCK = re.compile(r"^\s*<([A-Za-z_][A-Za-z0-9_ -]*)>[\s\S]*</\1>\s*$")
_INJECTED_PREFIX = re.compile(r"(?i)^\s*(?:# AGENTS\.md instructions|<environment_context>|<user_instructions>|"
                              r"<turn_aborted>|<subagent_notification>|<INSTRUCTIONS>)")
_NOTIFICATION = re.compile(r"(?is)^\s*<subagent_notification>\s*(.*?)\s*</subagent_notification>\s*$")
_PLAN_LABEL = re.compile(r"(?i)^\s*(?:#+\s*|\*\*)?(?:plan\b|my plan\b|here(?:'s| is) (?:my|the) plan\b|implementation plan\b)")
_NUMBERED_START = re.compile(r"^\s*1[.)]\s+\**([A-Za-z']+)")
_CLAIMS = tuple(re.compile(p, re.IGNORECASE | re.MULTILINE) for p in (
    r"\b(?:i|we)(?:'ve| have)\s+(?:now\s+|also\s+)?(?:successfully\s+)?(?:implemented|fixed|added|completed|finished|"
    r"resolved|updated|created|refactored|applied|written|made the (?:change|fix)e?s?)\b",
    r"\b(?:is|are|has been|have been)\s+(?:now\s+)?(?:successfully\s+)?(?:done|complete|completed|finished|fixed|"
    r"resolved|implemented|in place)\b",
    r"\A\s*(?:all\s+)?(?:done|finished|completed?)\b",
    r"\ball (?:\d+ )?(?:the )?tests (?:now )?pass",
    r"\bsuccessfully (?:implemented|fixed|added|completed|updated|created|applied|resolved)\b",
))
_NOT_DONE = re.compile(r"(?i)\b(?:could(?:n't|n’t| not)|unable to|can(?:'t|’t|not)|failed to|not (?:yet )?(?:done|complete|"
                       r"finished|able)|blocked|still (?:fail|failing|broken))\b")
_RUNNING = re.compile(r"Process running with session ID (\d+)")
_WALL_TIME = re.compile(r"(?im)^\s*wall time:\s*([0-9]+(?:\.[0-9]+)?)\s*seconds?\s*$")
_PATCH_HEADER = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: ")
_PATCH_IN_SCRIPT = re.compile(r"^\s*(?:cd\s+(?P<dir>'[^']*'|\"[^\"]*\"|\S+)\s*&&\s*)?(?:apply_patch|applypatch)\b")
_PATCH_FAILED = re.compile(r"(?i)verification failed|invalid patch|failed to apply|^\s*error\b|patch rejected")
_SPAWNED = re.compile(r"(?i)\bagent\s+(\S+)\s+spawned\b")


@dataclass
class _Line:
    """One non-blank line of the rollout."""

    line: int
    rec: Record | None = None      # None: not JSON (kept as unparsed)
    text: str = ""
    error: str | None = None
    top: str = ""                  # the envelope's type
    sub: str | None = None         # payload.type of response_item / event_msg
    payload: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str | None]:
        return (self.top, self.sub)


@dataclass
class _Group:
    """Records that make one event, emitted at the position of the first of them."""

    kind: str                      # "message", "call", "compaction"
    primary: int
    members: list[int]             # every index, primary included, in file order


@register
class CodexImporter(Importer):
    name = "codex"
    title = "OpenAI Codex CLI rollout JSONL (~/.codex/sessions/.../rollout-*.jsonl)"
    version = "2"

    def sniff(self, tree: SourceTree, rel: str) -> bool:
        # The envelope's type names are Codex's own; the payload is not looked at, so a
        # broken first record is reported precisely by read() instead of going unrecognised.
        first = tree.first_json_line(rel)
        return isinstance(first, dict) and first.get("type") in _SNIFF_TOP and ("payload" in first or "timestamp" in first)

    def read(self, tree: SourceTree, unit: Unit) -> list[ImportedRun]:
        return [_Reader(self, tree, unit).run()]


def _lines(tree: SourceTree, rel: str) -> list[tuple[int, Any, str, str | None]]:
    """(line number, value, text, error) for every non-blank line; a line that is not UTF-8
    or not JSON carries its error (a cut-off last line is both, sometimes)."""
    out = []
    for number, raw in enumerate(tree.read_bytes(rel).split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            out.append((number, None, raw.decode("utf-8", "replace").replace("\x00", "\ufffd"),
                        f"not UTF-8: byte 0x{raw[exc.start]:02x} at column {exc.start + 1}"))
            continue
        try:
            out.append((number, strict_json(text), text, None))
        except json.JSONDecodeError as exc:
            out.append((number, None, text.replace("\x00", "\ufffd"), f"invalid JSON: {exc.msg} (column {exc.colno})"))
        except ValueError as exc:
            refuse_unsafe_json(tree.label(rel), number, exc)
            out.append((number, None, text.replace("\x00", "\ufffd"), f"invalid JSON: {exc}"))
    return out


def _script(argv: Sequence[str]) -> str:
    """The script of ``["bash", "-lc", script]`` (and PowerShell's ``-Command``), else the
    argv joined as a shell would read it."""
    if len(argv) >= 3 and posixpath.basename(argv[0]) in _SHELL_PROGRAMS and argv[1].startswith("-") and "c" in argv[1]:
        return argv[2]
    if len(argv) >= 3 and posixpath.basename(argv[0]).lower() in {"powershell", "powershell.exe", "pwsh", "pwsh.exe"} \
            and argv[-2].lower() in {"-command", "-c"}:
        return argv[-1]
    return shlex.join(argv)


def _text_of(output: Any) -> str | None:
    """A tool output as text: a string, or the text of content items."""
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        parts = [item.get("text") for item in output if isinstance(item, dict) and isinstance(item.get("text"), str)]
        return "\n".join(parts)
    if isinstance(output, dict):
        for name in ("content", "output", "text"):
            if name in output:
                return _text_of(output[name])
    return None


@dataclass
class _Result:
    """What a tool output says: the body, the exit code, the duration."""

    body: str | None = None
    exit_code: int | None = None
    duration_ms: int | None = None
    running_session: str | None = None


def _parse_output(output: Any) -> _Result:
    """JSON ``{"output", "metadata": {"exit_code", "duration_seconds"}}`` (the ``shell``
    tool), or text whose header (above an ``Output:`` line) says ``Exit code: N`` /
    ``Process exited with code N`` / ``Wall time: S seconds`` (``shell_command``,
    ``exec_command``); text without such a header is searched whole for an exit line."""
    data = output
    if isinstance(output, str) and output.lstrip().startswith("{"):
        try:
            data = strict_json(output)
        except ValueError:
            data = output
    if isinstance(data, dict) and ("metadata" in data or "exit_code" in data):
        meta = data.get("metadata") if isinstance(data.get("metadata"), dict) else data
        code = meta.get("exit_code")
        seconds = meta.get("duration_seconds")
        body = _text_of(data.get("output")) if "output" in data else _text_of(data)
        duration = None
        if isinstance(seconds, (int, float)) and not isinstance(seconds, bool) and 0 <= seconds <= 10**9:
            duration = int(round(seconds * 1000))
        return _Result(body, code if isinstance(code, int) and not isinstance(code, bool) else None, duration)
    text = _text_of(output)
    if text is None:
        return _Result()
    lines = text.split("\n")
    header, body = text, text
    for index, line in enumerate(lines):
        if line.strip() == "Output:":
            header, body = "\n".join(lines[:index]), "\n".join(lines[index + 1:])
            break
    code = exit_code_from_text(header)
    wall = _WALL_TIME.search(header)
    duration = int(round(float(wall.group(1)) * 1000)) if wall and float(wall.group(1)) <= 10**9 else None
    running = _RUNNING.search(header) if code is None else None
    return _Result(body, code, duration, running.group(1) if running else None)


def _join_chunks(chunks: Sequence[str]) -> str:
    """A running command's output read in polls: chunks joined, a line break between two
    when the first does not end one (so a runner's summary line stays a line)."""
    text = ""
    for chunk in chunks:
        if text and chunk and not text.endswith("\n"):
            text += "\n"
        text += chunk
    return text


def _patch_sections(patch: str) -> list[str]:
    """The text of each file section of an apply_patch envelope, in order."""
    sections: list[list[str]] = []
    for line in patch.splitlines():
        if _PATCH_HEADER.match(line):
            sections.append([line])
        elif sections and line.strip() != "*** End Patch":
            sections[-1].append(line)
    return ["\n".join(s) for s in sections]


def _sanitize_actor_id(value: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9._@/+-]", "_", value).lstrip("._@/+-")[:128]
    return cleaned or "unknown"


_PATHLIKE = re.compile(r"^(?:\.{0,2}/)?(?:[\w.@+-]+/)*[\w@+-][\w.@+-]*(?:\.[A-Za-z][A-Za-z0-9]{0,9})?$")


def _cited_paths(text: str) -> list[str]:
    """Paths a report cites: in backticks (with a slash or an extension), or bare with a
    slash and an extension; ``:line`` suffixes dropped; URLs ignored; first mention first."""
    found: list[str] = []

    def take(token: str, quoted: bool) -> None:
        token = re.sub(r":\d+(?::\d+)?(?:-\d+)?$", "", token.strip())
        if not token or "://" in token or " " in token or not _PATHLIKE.match(token):
            return
        last = token.rsplit("/", 1)[-1]
        has_ext = re.search(r"[\w-]\.[A-Za-z][A-Za-z0-9]{0,9}$", last) is not None
        if (quoted and ("/" in token or has_ext)) or (not quoted and "/" in token and has_ext):
            if token not in found:
                found.append(token)

    quoted_spans = []
    for match in re.finditer(r"`([^`\n]+)`", text):
        quoted_spans.append(match.span())
        take(match.group(1), True)
    rest = text
    for start, end in reversed(quoted_spans):
        rest = rest[:start] + " " + rest[end:]
    for word in rest.split():
        take(word.strip("()[]{}<>,;\"'*").rstrip(".:"), False)
    return found


class _Reader:
    """Reads one rollout file into one run."""

    def __init__(self, importer: CodexImporter, tree: SourceTree, unit: Unit) -> None:
        self.importer, self.tree, self.unit = importer, tree, unit
        self.file = unit.primary
        self.lines: list[_Line] = []
        self.groups: dict[int, _Group] = {}        # emission index -> group
        self.consumed: set[int] = set()           # indices emitted within a group elsewhere
        self.final_messages: set[int] = set()     # assistant messages that end a completed turn
        self.aliases: dict[str, str] = {}         # agent path / task name -> thread id
        # turn state
        self.stage_no = 0
        self.turn_id: str | None = None
        self.turn_ended = False
        self.turn_activity = False
        self.turn_user = False
        self.last_agent: tuple[str, int, Record] | None = None   # (text, seq, record) of the turn's last agent message
        self.cwd: str | None = None
        self.exec_sessions: dict[str, dict[str, Any]] = {}

    # --- reading -------------------------------------------------------------------------------

    def run(self) -> ImportedRun:
        raw_lines = _lines(self.tree, self.file)
        meta_index = next((i for i, (_, value, _, err) in enumerate(raw_lines)
                           if err is None and isinstance(value, dict) and value.get("type") == "session_meta"), None)
        native_id, root = self._identity(raw_lines, meta_index)
        self.b: RunBuilder = self.importer.builder(self.tree, self.unit, native_id, workspace_root=root)
        self.root = self.b.workspace_root
        self.cwd = root
        for number, value, text, error in raw_lines:
            if error is not None:
                self.lines.append(_Line(number, None, text, error))
                continue
            self.lines.append(self._envelope(number, value))
        self.has_turn_ends = any(ln.top == "event_msg" and ln.sub in _TURN_ENDS for ln in self.lines)
        self.own_path = self._own_path(meta_index)
        self.copied_until = self._copied_prefix(meta_index)
        self._start(meta_index)
        self._pair_calls()
        self._pair_twins()
        self._group_compactions()
        self._mark_final_messages()
        for index, ln in enumerate(self.lines):
            if index in self.consumed:
                continue
            if ln.rec is None:
                self.b.unparsed(self.file, ln.line, ln.text, ln.error or "invalid JSON")
                continue
            if index == meta_index:
                continue
            if index <= self.copied_until:
                self._keep(ln.rec, f"copied_context:{self._record_type(ln)}", ts=self._ts(ln))
                continue
            group = self.groups.get(index)
            if group is not None:
                self._emit_group(group)
            else:
                self._emit(index)
        return self.b.build()

    def _identity(self, raw_lines: list[tuple[int, Any, str, str | None]], meta_index: int | None) -> tuple[str, str | None]:
        """The session id and workspace root (session cwd, else the first turn's cwd),
        checked on a throwaway redacted record."""
        context_cwd = next((v["payload"]["cwd"] for _, v, _, e in raw_lines
                            if e is None and isinstance(v, dict) and v.get("type") == "turn_context"
                            and isinstance(v.get("payload"), dict) and isinstance(v["payload"].get("cwd"), str)), None)
        if meta_index is None:
            name = posixpath.basename(self.file)
            found = _UUID.findall(name)
            return (found[-1] if found else re.sub(r"\.jsonl?$", "", name)), context_cwd
        number, value, _, _ = raw_lines[meta_index]
        rec = Record(self.tree, self.file, str(number), Redactor().value(value), None)
        rec.obj("payload")
        ident = rec.get("payload.id", str, required=False) or rec.get("payload.session_id", str, required=False)
        if not ident:
            raise rec.error("payload.id", "missing (the session id)")
        return ident, rec.opt_str("payload.cwd") or context_cwd

    def _envelope(self, number: int, value: Any) -> _Line:
        native = None
        if isinstance(value, dict) and isinstance(value.get("payload"), dict):
            p = value["payload"]
            for name in ("call_id", "id", "turn_id", "event_id", "session_id"):
                if isinstance(p.get(name), (str, int)) and not isinstance(p.get(name), bool):
                    native = p[name]
                    break
        rec = self.b.record(self.file, number, value, native_id=native)
        if not isinstance(rec.data, dict):
            raise rec.error(None, f"expected a JSON object per line, got {type(rec.data).__name__}")
        top = rec.str("type")
        rec.get("timestamp", str, required=False)
        ln = _Line(number, rec, top=top)
        if top in _KNOWN_TOP:
            ln.payload = rec.obj("payload")
            if top in ("response_item", "event_msg"):
                ln.sub = rec.str("payload.type")
        elif isinstance(rec.data.get("payload"), dict):
            ln.payload = rec.data["payload"]
        self._validate(ln)
        return ln

    def _validate(self, ln: _Line) -> None:
        """The fields this importer reads, checked once: missing or wrongly typed is an error."""
        rec = ln.rec
        assert rec is not None
        key = ln.key
        if ln.top == "turn_context":
            for name in ("cwd", "model", "turn_id", "approval_policy", "effort", "summary"):
                rec.get(f"payload.{name}", str, required=False)
        elif ln.top == "compacted":
            rec.str("payload.message")
            rec.get("payload.replacement_history", list, required=False)
        elif ln.top == "inter_agent_communication":
            rec.str("payload.author")
            rec.str("payload.content")
            rec.get("payload.recipient", str, required=False)
        elif ln.top == "session_meta":
            for name in ("cwd", "cli_version", "originator", "model_provider", "instructions", "timestamp"):
                rec.get(f"payload.{name}", str, required=False)
            rec.get("payload.source", (str, dict), required=False)
            rec.get("payload.git", dict, required=False)
        elif key == ("response_item", "message"):
            rec.str("payload.role")
            for i, item in enumerate(rec.list("payload.content")):
                if not isinstance(item, dict):
                    raise rec.error(f"payload.content.{i}", f"expected an object, got {type(item).__name__}")
                rec.str(f"payload.content.{i}.type")
                rec.get(f"payload.content.{i}.text", str, required=False)
            rec.get("payload.phase", str, required=False)
        elif key == ("response_item", "reasoning"):
            for part in ("summary", "content"):
                for i, item in enumerate(rec.opt_list(f"payload.{part}")):
                    if not isinstance(item, dict):
                        raise rec.error(f"payload.{part}.{i}", f"expected an object, got {type(item).__name__}")
                    rec.get(f"payload.{part}.{i}.text", str, required=False)
            rec.get("payload.encrypted_content", str, required=False)
        elif key == ("response_item", "function_call"):
            rec.str("payload.name")
            rec.str("payload.arguments")
            rec.str("payload.call_id")
        elif key == ("response_item", "custom_tool_call"):
            rec.str("payload.name")
            rec.str("payload.input")
            rec.str("payload.call_id")
        elif key in (("response_item", "function_call_output"), ("response_item", "custom_tool_call_output")):
            rec.str("payload.call_id")
            rec.get("payload.output", (str, list, dict))
        elif key == ("response_item", "local_shell_call"):
            if rec.get("payload.call_id", str, required=False) is None:
                rec.get("payload.id", str, required=False)
            rec.obj("payload.action")
            if rec.get("payload.action.type", str, required=False) in (None, "exec"):
                command = rec.list("payload.action.command")
                for i, word in enumerate(command):
                    if not isinstance(word, str):
                        raise rec.error(f"payload.action.command.{i}", f"expected a string, got {type(word).__name__}")
            rec.get("payload.action.working_directory", str, required=False)
        elif key in (("event_msg", "user_message"), ("event_msg", "agent_message")):
            rec.str("payload.message")
        elif key in (("event_msg", "agent_reasoning"), ("event_msg", "agent_reasoning_raw_content")):
            rec.str("payload.text")
        elif ln.top == "event_msg" and ln.sub in _TURN_ENDS | _TURN_STARTS:
            rec.get("payload.turn_id", str, required=False)
            rec.get("payload.last_agent_message", str, required=False)
        elif key == ("event_msg", "patch_apply_end"):
            rec.get("payload.call_id", str, required=False)
            rec.get("payload.success", bool)
            rec.get("payload.changes", dict, required=False)
        elif key == ("event_msg", "exec_command_end"):
            rec.str("payload.call_id")
            rec.get("payload.exit_code", int)
            rec.get("payload.command", (list, str), required=False)
        elif ln.top == "event_msg" and ln.sub in _CALL_EVENTS:
            rec.get("payload.call_id", str, required=False)

    # --- provenance ----------------------------------------------------------------------------

    def _own_path(self, meta_index: int | None) -> str:
        if meta_index is not None:
            source = self.lines[meta_index].payload.get("source")
            spawn = source.get("subagent") if isinstance(source, dict) else None
            spawn = spawn.get("thread_spawn") if isinstance(spawn, dict) else None
            if isinstance(spawn, dict) and isinstance(spawn.get("agent_path"), str):
                return spawn["agent_path"]
        return "/root"

    def _copied_prefix(self, meta_index: int | None) -> int:
        """A spawned sub-agent's rollout may open with the lead's history, copied in up to
        the lead's spawn call (the ``spawn_call_id`` its session_meta names): those records
        are the lead's decisions, kept but not replayed as this agent's. The index of that
        call, or -1."""
        if meta_index is None:
            return -1
        source = self.lines[meta_index].payload.get("source")
        spawn = source.get("subagent") if isinstance(source, dict) else None
        spawn = spawn.get("thread_spawn") if isinstance(spawn, dict) else None
        call_id = spawn.get("spawn_call_id") if isinstance(spawn, dict) else None
        if not isinstance(call_id, str):
            return -1
        for index, ln in enumerate(self.lines):
            if ln.top == "response_item" and ln.sub in ("function_call", "custom_tool_call") \
                    and ln.payload.get("call_id") == call_id:
                return index
        return -1

    def _start(self, meta_index: int | None) -> None:
        ctx = next((ln for ln in self.lines if ln.top == "turn_context"), None)
        ctx_payload = ctx.payload if ctx else {}
        if meta_index is None:
            self.b.start(harness="codex", model=ctx_payload.get("model"), source=())
            return
        ln = self.lines[meta_index]
        p = ln.payload
        settings: dict[str, Any] = {}
        for name, value in (("model_provider", p.get("model_provider")),
                            ("reasoning_effort", ctx_payload.get("effort")),
                            ("reasoning_summary", ctx_payload.get("summary")),
                            ("approval_policy", ctx_payload.get("approval_policy")),
                            ("sandbox_policy", ctx_payload.get("sandbox_policy")),
                            ("instructions", p.get("instructions")),
                            ("base_instructions", p.get("base_instructions"))):
            if value is not None:
                settings[name] = value
        labels: dict[str, str] = {}
        source = p.get("source")
        if isinstance(source, str):
            labels["source"] = source
        elif isinstance(source, dict):
            labels["source"] = next(iter(source), "unknown")
            spawn = source.get("subagent")
            spawn = spawn.get("thread_spawn") if isinstance(spawn, dict) else None
            if isinstance(spawn, dict):
                for name in ("parent_thread_id", "agent_role", "agent_nickname", "agent_path", "spawn_call_id"):
                    if isinstance(spawn.get(name), str):
                        labels[name] = spawn[name]
        for name in ("originator", "cwd", "forked_from_id"):
            if isinstance(p.get(name), str):
                labels[name] = p[name]
        git = p.get("git") if isinstance(p.get("git"), dict) else {}
        for label, names in (("git_commit", ("commit_hash", "sha")), ("git_branch", ("branch",)),
                             ("git_repository_url", ("repository_url", "origin_url"))):
            value = next((git[n] for n in names if isinstance(git.get(n), str)), None)
            if value is not None:
                labels[label] = value
        ts = timestamp(p.get("timestamp")) or self._ts(ln)
        self.b.start(harness="codex", harness_version=p.get("cli_version"), model=ctx_payload.get("model"),
                     model_settings=settings or None, labels=labels or None, ts=ts, source=ln.rec)

    # --- pre-passes ----------------------------------------------------------------------------

    def _pair_calls(self) -> None:
        """Each tool call with its outputs and the harness events that name its call_id."""
        open_calls: dict[str, int] = {}
        for index, ln in enumerate(self.lines):
            if ln.rec is None or index <= self.copied_until:
                continue
            p = ln.payload
            if ln.key in (("response_item", "function_call"), ("response_item", "custom_tool_call"),
                          ("response_item", "local_shell_call")):
                call_id = p.get("call_id") if isinstance(p.get("call_id"), str) else p.get("id")
                group = _Group("call", index, [index])
                self.groups[index] = group
                if isinstance(call_id, str):
                    open_calls[call_id] = index
                continue
            call_id = None
            if ln.key in (("response_item", "function_call_output"), ("response_item", "custom_tool_call_output")):
                call_id = p.get("call_id")
            elif ln.top == "event_msg" and ln.sub in _CALL_EVENTS:
                call_id = p.get("call_id")
                if ln.sub == "sub_agent_activity" and not isinstance(call_id, str):
                    call_id = p.get("event_id")
            if isinstance(call_id, str) and call_id in open_calls:
                owner = self.groups[open_calls[call_id]]
                owner.members.append(index)
                self.consumed.add(index)
        # Aliases: an agent path or task name for the thread id the harness gave it.
        for group in self.groups.values():
            if group.kind != "call":
                continue
            call = self.lines[group.primary]
            if call.payload.get("name") not in _SPAWN_TOOLS:
                continue
            thread = self._spawned_thread(group)
            args = self._args(call) or {}
            if thread:
                for name in ("task_name", "agent_name", "name"):
                    if isinstance(args.get(name), str):
                        self.aliases.setdefault(args[name], thread)
                        self.aliases.setdefault(f"{self.own_path.rstrip('/')}/{args[name]}", thread)
        for ln in self.lines:
            p = ln.payload
            thread = p.get("agent_thread_id") or p.get("new_thread_id") or p.get("thread_id")
            path = p.get("agent_path") or p.get("new_agent_path")
            if isinstance(thread, str) and isinstance(path, str):
                self.aliases.setdefault(path, thread)

    def _pair_twins(self) -> None:
        """An event_msg that repeats the response_item next to it (same text, same stretch of
        message/reasoning records) joins that item's group."""
        twins: dict[int, _Group] = {}
        segment: list[int] = []

        def flush() -> None:
            used_keys: dict[int, set[str]] = {}
            for at, i in enumerate(segment):
                ln = self.lines[i]
                if ln.top != "event_msg" or ln.sub not in ("user_message", "agent_message", "agent_reasoning",
                                                            "agent_reasoning_raw_content"):
                    continue
                text = (ln.payload.get("message") if ln.sub in ("user_message", "agent_message") else ln.payload.get("text"))
                if not isinstance(text, str):
                    continue
                best = None
                nearby = segment[max(0, at - _TWIN_WINDOW):at + _TWIN_WINDOW + 1]
                for j in sorted(nearby, key=lambda j: (abs(j - i), j)):
                    other = self.lines[j]
                    if other.top != "response_item" or j in self.consumed:
                        continue
                    if ln.sub in ("user_message", "agent_message"):
                        role = "user" if ln.sub == "user_message" else "assistant"
                        if other.sub != "message" or other.payload.get("role") != role or j in twins:
                            continue
                        if self._joined_text(other, user=role == "user").strip() == text.strip():
                            best = j
                            break
                    elif other.sub == "reasoning":
                        part = "summary" if ln.sub == "agent_reasoning" else "content"
                        texts = [t.strip() for t in self._reasoning_parts(other, part)]
                        taken = used_keys.setdefault(j, set())
                        tag = f"{part}:{text.strip()}"
                        if text.strip() in texts and tag not in taken:
                            taken.add(tag)
                            best = j
                            break
                if best is None:
                    continue
                group = twins.get(best)
                if group is None:
                    group = twins[best] = _Group("message", best, [best])
                group.members.append(i)
            for group in twins.values():
                if group.primary in segment:
                    group.members.sort()
            segment.clear()

        for index, ln in enumerate(self.lines):
            if ln.rec is not None and ln.key in _TWIN_SEGMENT and index > self.copied_until:
                segment.append(index)
            else:
                flush()
        flush()
        for group in twins.values():
            first = group.members[0]
            self.groups[first] = group
            self.consumed.update(m for m in group.members if m != first)

    def _group_compactions(self) -> None:
        index = self.copied_until + 1
        while index < len(self.lines):
            ln = self.lines[index]
            if ln.rec is None or ln.key not in _COMPACTION_ITEMS or index in self.consumed:
                index += 1
                continue
            members = [index]
            j = index + 1
            while j < len(self.lines):
                other = self.lines[j]
                if other.rec is not None and other.key in _COMPACTION_ITEMS and j not in self.consumed:
                    members.append(j)
                elif other.rec is None or other.key != ("event_msg", "token_count"):
                    break
                j += 1
            primary = next((m for m in members if self.lines[m].top == "compacted"), members[0])
            self.groups[index] = _Group("compaction", primary, members)
            self.consumed.update(members[1:])
            index = j

    def _mark_final_messages(self) -> None:
        last: int | None = None
        for index, ln in enumerate(self.lines):
            if ln.rec is None:
                continue
            if ln.key == ("response_item", "message") and ln.payload.get("role") == "assistant":
                last = index
            elif ln.key == ("event_msg", "agent_message"):
                last = index
            elif ln.top == "event_msg" and ln.sub in _TURN_STARTS:
                last = None
            elif ln.top == "event_msg" and ln.sub in ("task_complete", "turn_complete"):
                if last is not None:
                    self.final_messages.add(last)
                last = None

    # --- helpers -------------------------------------------------------------------------------

    @staticmethod
    def _ts(ln: _Line) -> str | None:
        return timestamp(ln.rec.data.get("timestamp")) if ln.rec is not None else None

    def _records(self, indices: Sequence[int]) -> list[Record]:
        return [self.lines[i].rec for i in indices if self.lines[i].rec is not None]  # type: ignore[misc]

    def _add(self, kind: str, *, actor: str, source: Sequence[Record] | Record, ts: str | None = None, **fields: Any) -> int:
        seq = self.b.add(kind, actor=actor, source=source, ts=ts, **fields)
        if actor == "agent" or actor.startswith("subagent:"):
            self.turn_activity = True
        return seq

    def _keep(self, source: Sequence[Record] | Record, record_type: str, *, actor: str = "harness", ts: str | None = None) -> int:
        return self._add("source_record", actor=actor, source=source, ts=ts, record_type=record_type)

    @staticmethod
    def _record_type(ln: _Line) -> str:
        return f"{ln.top}.{ln.sub}" if ln.sub else ln.top

    def _args(self, ln: _Line) -> dict[str, Any] | None:
        """A function call's arguments, or None when the model sent no JSON object."""
        raw = ln.payload.get("arguments")
        if not isinstance(raw, str):
            return None
        try:
            value = strict_json(raw)
        except ValueError:
            return None
        return value if isinstance(value, dict) else None

    @staticmethod
    def _joined_text(ln: _Line, *, user: bool) -> str:
        parts = []
        for item in ln.payload.get("content") or []:
            text = item.get("text") if isinstance(item, dict) else None
            if isinstance(text, str) and item.get("type") != "reasoning":
                if user and _is_injected(text):
                    continue
                parts.append(text)
        return "\n".join(parts)

    @staticmethod
    def _reasoning_parts(ln: _Line, part: str) -> list[str]:
        return [item["text"] for item in ln.payload.get(part) or []
                if isinstance(item, dict) and isinstance(item.get("text"), str) and item["text"].strip()]

    def _resolve_dir(self, workdir: Any) -> str | None:
        if isinstance(workdir, str) and workdir:
            if workdir.startswith("/") or not self.cwd:
                return posixpath.normpath(workdir)
            return posixpath.normpath(posixpath.join(self.cwd, workdir))
        return self.cwd

    def _resolve(self, path: str, base: str | None) -> str:
        """A relative path as seen from ``base``, made absolute when ``base`` is not the
        workspace root (the builder then makes it relative to the root again)."""
        if path.startswith("/") or not base or (self.root and posixpath.normpath(base) == self.root):
            return path
        return posixpath.normpath(posixpath.join(base, path))

    def _worker(self, ident: str) -> str:
        return self.aliases.get(ident, ident)

    # --- turns ---------------------------------------------------------------------------------

    def _turn_marker(self, ln: _Line, *, source: Sequence[Record], user: bool = False, turn_id: str | None = None) -> bool:
        """Open a new stage when ``ln`` starts a new turn; True when it did."""
        new = False
        if turn_id and turn_id == self.turn_id:
            new = False                      # a late record of the turn already seen
        elif self.b.stage is None:
            new = True
        elif turn_id and self.turn_id and turn_id != self.turn_id:
            new = True
        elif self.turn_ended:
            new = True
        elif ln.sub in _TURN_STARTS:
            new = self.turn_activity or self.turn_user
        elif not self.has_turn_ends and self.turn_activity:
            new = True
        if new:
            self.stage_no += 1
            self.b.begin_stage(self.stage_no, source=source, actor="user" if user else "harness", ts=self._ts(ln))
            self.turn_id = turn_id
            self.turn_ended = False
            self.turn_activity = False
            self.turn_user = False
            self.last_agent = None
        elif turn_id and not self.turn_id:
            self.turn_id = turn_id
        if user:
            self.turn_user = True
        return new

    # --- emitting ------------------------------------------------------------------------------

    def _emit(self, index: int) -> None:
        ln = self.lines[index]
        rec = ln.rec
        assert rec is not None
        ts = self._ts(ln)
        p = ln.payload
        if ln.top == "session_meta":
            self._keep(rec, "session_meta", ts=ts)
        elif ln.top == "turn_context":
            self.cwd = p.get("cwd") or self.cwd
            if not self._turn_marker(ln, source=[rec], turn_id=p.get("turn_id")):
                self._keep(rec, "turn_context", ts=ts)
        elif ln.top == "inter_agent_communication":
            self._communication(p, [rec], ts)
        elif ln.top == "event_msg":
            self._event(index, ln, ts)
        elif ln.top == "response_item":
            if ln.sub in ("message", "reasoning"):
                self._response_message(ln, [rec], ts, final=index in self.final_messages)
            elif ln.sub in ("function_call_output", "custom_tool_call_output"):
                self._keep(rec, self._record_type(ln), ts=ts)     # an output whose call is not in the file
            else:
                actor = "agent" if ln.sub in ("web_search_call", "image_generation_call", "tool_search_call") else "harness"
                self._keep(rec, self._record_type(ln), actor=actor, ts=ts)
        else:
            self._keep(rec, self._record_type(ln), ts=ts)

    def _event(self, index: int, ln: _Line, ts: str | None) -> None:
        rec = ln.rec
        assert rec is not None
        p = ln.payload
        sub = ln.sub
        if sub in _TURN_STARTS:
            if not self._turn_marker(ln, source=[rec], turn_id=p.get("turn_id")):
                self._keep(rec, self._record_type(ln), ts=ts)
        elif sub in ("task_complete", "turn_complete"):
            self._claim(ln, rec, ts)
            if self.b.stage is not None:
                self.b.end_stage(source=rec, status="completed", ts=ts)
            else:
                self._keep(rec, self._record_type(ln), ts=ts)
            self.turn_ended = True
        elif sub == "turn_aborted":
            if self.b.stage is not None:
                self.b.end_stage(source=rec, status="aborted", ts=ts)
            else:
                self._keep(rec, self._record_type(ln), ts=ts)
            self.turn_ended = True
        elif sub in ("user_message", "agent_message", "agent_reasoning", "agent_reasoning_raw_content"):
            self._lone_event_message(ln, [rec], ts, final=index in self.final_messages)
        elif sub == "sub_agent_activity":
            self._activity(p, [rec], ts)
        elif sub == "patch_apply_end":
            self._lone_patch_end(ln, rec, ts)
        elif sub == "exec_command_end":
            argv = p.get("command")
            script = _script(argv) if isinstance(argv, list) and all(isinstance(w, str) for w in argv) else (
                argv if isinstance(argv, str) else None)
            if script:
                actor = "user" if p.get("source") == "user_shell" else "harness"
                output = p.get("aggregated_output") if isinstance(p.get("aggregated_output"), str) else None
                self._command(script, actor=actor, source=[rec], output=output, exit_code=p.get("exit_code"),
                              duration_ms=None, cwd=self._resolve_dir(p.get("cwd")), ts=ts)
            else:
                self._keep(rec, self._record_type(ln), ts=ts)
        else:
            self._keep(rec, self._record_type(ln), ts=ts)

    def _lone_event_message(self, ln: _Line, sources: list[Record], ts: str | None, *, final: bool) -> None:
        """A user/agent message or reasoning known only from its event_msg."""
        text = ln.payload.get("message") if ln.sub in ("user_message", "agent_message") else ln.payload.get("text")
        assert isinstance(text, str)
        if ln.sub == "user_message":
            self._user_text(ln, text, sources, ts)
        elif ln.sub == "agent_message":
            self._agent_text(ln, text, sources, ts, final=final)
        else:
            self._add("message", actor="agent", source=sources, ts=ts, text=text, intent="reasoning")

    def _user_text(self, ln: _Line, text: str, sources: list[Record], ts: str | None, *, role: str = "user") -> None:
        notification = _NOTIFICATION.match(text)
        if notification and self._notification(notification.group(1), sources, ts):
            return
        if role == "user" and not _is_injected(text):
            self._turn_marker(ln, source=sources, user=True)
            self._add("message", actor="user", source=sources, ts=ts, text=text)
        else:
            self._add("message", actor="harness", source=sources, ts=ts, text=text)

    def _agent_text(self, ln: _Line, text: str, sources: list[Record], ts: str | None, *, final: bool,
                    phase: Any = None) -> None:
        communication = _as_communication(text)
        if communication is not None:
            self._communication(communication, sources, ts)
            return
        intent = None
        numbered = _NUMBERED_START.match(text)
        if _PLAN_LABEL.match(text) or (numbered and not final and not numbered.group(1).lower().endswith("ed")):
            intent = "plan"
        elif phase == "commentary":
            intent = "progress"
        seq = self._add("message", actor="agent", source=sources, ts=ts, text=text, intent=intent)
        self.last_agent = (text, seq, sources[0])

    def _emit_group(self, group: _Group) -> None:
        if group.kind == "call":
            self._call(group)
        elif group.kind == "compaction":
            self._compaction(group)
        else:
            self._message_group(group)

    def _message_group(self, group: _Group) -> None:
        primary = self.lines[group.primary]
        sources = self._records(group.members)   # in file order: the event sits at the first
        ts = self._ts(self.lines[group.members[0]])
        self._response_message(primary, sources, ts, final=any(m in self.final_messages for m in group.members))

    def _response_message(self, ln: _Line, sources: list[Record], ts: str | None, *, final: bool) -> None:
        p = ln.payload
        if ln.sub == "reasoning":
            parts = self._reasoning_parts(ln, "summary") or self._reasoning_parts(ln, "content")
            if parts:
                self._add("message", actor="agent", source=sources, ts=ts, text="\n\n".join(parts), intent="reasoning")
            else:
                self._keep(sources, "response_item.reasoning", actor="agent", ts=ts)
            return
        role = p.get("role")
        made = 0
        items = [item for item in p.get("content") or [] if isinstance(item, dict) and isinstance(item.get("text"), str)]
        if role == "assistant":
            texts = [item for item in items if item.get("type") != "reasoning"]
            for item in items:
                if item.get("type") == "reasoning":
                    self._add("message", actor="agent", source=sources, ts=ts, text=item["text"], intent="reasoning")
                    made += 1
            for n, item in enumerate(texts):
                self._agent_text(ln, item["text"], sources, ts, final=final and n == len(texts) - 1, phase=p.get("phase"))
                made += 1
        elif role == "user":
            for item in items:
                self._user_text(ln, item["text"], sources, ts)
                made += 1
        else:   # developer / system: what the harness tells the model
            for item in items:
                self._add("message", actor="harness", source=sources, ts=ts, text=item["text"])
                made += 1
        if not made:
            actor = {"assistant": "agent", "user": "user"}.get(role if isinstance(role, str) else "", "harness")
            self._keep(sources, "response_item.message", actor=actor, ts=ts)   # images only, no text

    # --- tool calls ----------------------------------------------------------------------------

    def _call(self, group: _Group) -> None:
        call = self.lines[group.primary]
        members = [self.lines[m] for m in group.members]
        sources = self._records(group.members)
        ts = self._ts(call)
        p = call.payload
        outputs = [m for m in members if m.key in (("response_item", "function_call_output"),
                                                  ("response_item", "custom_tool_call_output"))]
        output = outputs[0].payload.get("output") if outputs else None
        name = p.get("name") if isinstance(p.get("name"), str) else ("local_shell" if call.sub == "local_shell_call" else "")
        events = {m.sub: m for m in members if m.top == "event_msg"}
        if call.sub == "local_shell_call":
            action = p.get("action") or {}
            if action.get("type", "exec") != "exec":
                self._keep(sources, "response_item.local_shell_call", actor="agent", ts=ts)
                return
            self._shell(name, action.get("command"), action.get("working_directory"), output, events, sources, ts)
            return
        if call.sub == "custom_tool_call":
            if name in _PATCH_TOOLS:
                self._patch(p.get("input", ""), self.cwd, output, events, sources, ts)
            elif name.startswith("mcp__") or p.get("namespace"):
                self._keep(sources, f"mcp_tool_call:{_tool_name(p)}", actor="agent", ts=ts)
            else:
                self._keep(sources, f"tool_call:{name}", actor="agent", ts=ts)
            return
        args = self._args(call)
        if name.startswith("mcp__") or p.get("namespace") or "mcp_tool_call_end" in events:
            self._keep(sources, f"mcp_tool_call:{_tool_name(p)}", actor="agent", ts=ts)
            return
        if args is None:
            self._keep(sources, f"tool_call:{name}", actor="agent", ts=ts)
            return
        if name in _SHELL_TOOLS:
            command = args.get("cmd") if "cmd" in args else args.get("command")
            self._shell(name, command, args.get("workdir"), output, events, sources, ts)
        elif name in _PATCH_TOOLS and isinstance(args.get("input") or args.get("patch"), str):
            self._patch(args.get("input") or args.get("patch"), self._resolve_dir(args.get("workdir")), output,
                        events, sources, ts)
        elif name == "write_stdin":
            self._stdin(args, output, sources, ts)
        elif name == "update_plan":
            self._plan(args, sources, ts)
        elif name == "view_image" and isinstance(args.get("path"), str):
            self._add("file_read", actor="agent", source=sources, ts=ts, path=self._resolve(args["path"], self.cwd))
        elif name in _SPAWN_TOOLS:
            self._spawn(group, args, sources, ts)
        elif name in _SEND_TOOLS:
            self._send(args, sources, ts)
        elif name in _WAIT_TOOLS:
            self._wait(args, output, events, sources, ts, name)
        else:
            self._keep(sources, f"tool_call:{name}", actor="agent", ts=ts)

    def _shell(self, name: str, command: Any, workdir: Any, output: Any, events: dict[str, _Line],
               sources: list[Record], ts: str | None) -> None:
        if isinstance(command, list) and command and all(isinstance(w, str) for w in command):
            argv: list[str] | None = command
            script = _script(command)
        elif isinstance(command, str) and command.strip():
            argv, script = None, command
        else:
            self._keep(sources, f"tool_call:{name}", actor="agent", ts=ts)
            return
        cwd = self._resolve_dir(workdir)
        patch, patch_dir = _patch_in_command(argv, script)
        if patch is not None:
            base = self._resolve_dir(posixpath.join(cwd or "", patch_dir)) if patch_dir else cwd
            self._patch(patch, base, output, events, sources, ts)
            return
        result = _parse_output(output)
        exit_code = result.exit_code
        end = events.get("exec_command_end")
        if end is not None and isinstance(end.payload.get("exit_code"), int):
            exit_code = end.payload["exit_code"]
            if isinstance(end.payload.get("aggregated_output"), str):
                result.body = end.payload["aggregated_output"]
        if exit_code is None and result.running_session is not None and name == "exec_command":
            job = f"exec-session-{result.running_session}"
            seq = self._add("job_started", actor="agent", source=sources, ts=ts, job_id=job, command=script)
            self._effects(script, cwd, sources, seq, ts)
            self.exec_sessions[result.running_session] = {"script": script, "cwd": cwd, "outputs": [result.body or ""],
                                                          "job": job, "seq": seq}
            return
        self._command(script, actor="agent", source=sources, output=result.body, exit_code=exit_code,
                      duration_ms=result.duration_ms, cwd=cwd, ts=ts)

    def _command(self, script: str, *, actor: str, source: list[Record], output: str | None, exit_code: int | None,
                 duration_ms: int | None, cwd: str | None, ts: str | None, parent: int | None = None,
                 effects: bool = True) -> int:
        seq = self.b.command(script, actor=actor, source=source, output=output, exit_code=exit_code,
                             duration_ms=duration_ms, cwd=cwd, ts=ts, parent=parent, effects=False)
        if actor == "agent":
            self.turn_activity = True
        if effects:
            self._effects(script, cwd, source, seq, ts, actor=actor)
        return seq

    def _effects(self, script: str, cwd: str | None, source: list[Record], parent: int, ts: str | None,
                 actor: str = "agent") -> None:
        """The files the command line reads or changes, relative paths seen from ``cwd``."""
        for effect in file_effects(script):
            path = self._resolve(effect.path, cwd)
            if effect.action == "read":
                self._add("file_read", actor=actor, source=source, parent=parent, ts=ts, path=path)
            else:
                new_path = self._resolve(effect.new_path, cwd) if effect.new_path else None
                self._add("file_edit", actor=actor, source=source, parent=parent, ts=ts, path=path,
                          edit_kind=effect.edit_kind, new_path=new_path)

    def _stdin(self, args: dict[str, Any], output: Any, sources: list[Record], ts: str | None) -> None:
        session = args.get("session_id")
        session = str(session) if isinstance(session, (int, str)) and not isinstance(session, bool) else None
        if session is None:
            self._keep(sources, "tool_call:write_stdin", actor="agent", ts=ts)
            return
        job = f"exec-session-{session}"
        result = _parse_output(output)
        state = self.exec_sessions.get(session)
        if result.exit_code is None:
            if state is not None:
                state["outputs"].append(result.body or "")
            self._add("job_polled", actor="agent", source=sources, ts=ts, job_id=job,
                      status="running" if result.running_session is not None or state is not None else "unknown")
            return
        parent = None
        if state is not None:
            state["outputs"].append(result.body or "")
            parent = self._command(state["script"], actor="agent", source=sources, output=_join_chunks(state["outputs"]),
                                   exit_code=result.exit_code, duration_ms=None, cwd=state["cwd"], ts=ts,
                                   parent=state["seq"], effects=False)
            del self.exec_sessions[session]
        self._add("job_finished", actor="agent", source=sources, ts=ts, job_id=job, exit_code=result.exit_code,
                  parent=parent)

    def _patch(self, patch: str, base: str | None, output: Any, events: dict[str, _Line], sources: list[Record],
               ts: str | None) -> None:
        effects = apply_patch_effects(patch)
        end = events.get("patch_apply_end")
        failed = False
        if end is not None:
            failed = end.payload.get("success") is False
        else:
            result = _parse_output(output)
            exec_end = events.get("exec_command_end")
            code = exec_end.payload.get("exit_code") if exec_end is not None else result.exit_code
            if isinstance(code, int):
                failed = code != 0
            elif result.body is not None and _PATCH_FAILED.search(result.body):
                failed = True
        if failed or not effects:
            self._keep(sources, "apply_patch:failed" if failed else "apply_patch:no-files", actor="agent", ts=ts)
            return
        sections = _patch_sections(patch)
        for n, effect in enumerate(effects):
            digest = hashlib.sha256(sections[n].encode()).hexdigest() if n < len(sections) else None
            self._add("file_edit", actor="agent", source=sources, ts=ts, path=self._resolve(effect.path, base),
                      edit_kind=effect.edit_kind, diff_sha256=digest,
                      new_path=self._resolve(effect.new_path, base) if effect.new_path else None)

    def _lone_patch_end(self, ln: _Line, rec: Record, ts: str | None) -> None:
        """A patch_apply_end no call in the file explains: its ``changes`` are the edits."""
        changes = ln.payload.get("changes")
        if ln.payload.get("success") is not True or not isinstance(changes, dict) or not changes:
            self._keep(rec, self._record_type(ln), ts=ts)
            return
        for path, change in changes.items():
            kind = change.get("type") if isinstance(change, dict) else None
            move = change.get("move_path") if isinstance(change, dict) else None
            edit_kind = {"add": "create", "delete": "delete", "update": "modify"}.get(kind or "", "modify")
            if isinstance(move, str) and move:
                edit_kind = "rename"
            self._add("file_edit", actor="agent", source=[rec], ts=ts, path=path, edit_kind=edit_kind,
                      new_path=move if isinstance(move, str) and move else None)

    def _plan(self, args: dict[str, Any], sources: list[Record], ts: str | None) -> None:
        lines = []
        if isinstance(args.get("explanation"), str) and args["explanation"].strip():
            lines.append(args["explanation"].strip())
        for step in args.get("plan") or []:
            if isinstance(step, dict) and isinstance(step.get("step"), str):
                status = step.get("status") if isinstance(step.get("status"), str) else "pending"
                lines.append(f"- [{status}] {step['step']}")
        if not lines:
            self._keep(sources, "tool_call:update_plan", actor="agent", ts=ts)
            return
        self._add("message", actor="agent", source=sources, ts=ts, text="\n".join(lines), intent="plan")

    # --- sub-agents ----------------------------------------------------------------------------

    def _spawned_thread(self, group: _Group) -> str | None:
        for m in group.members:
            ln = self.lines[m]
            if ln.top == "event_msg":
                for name in ("new_thread_id", "agent_thread_id", "receiver_thread_id"):
                    if isinstance(ln.payload.get(name), str) and ln.payload[name]:
                        return ln.payload[name]
        for m in group.members:
            ln = self.lines[m]
            if ln.key == ("response_item", "function_call_output"):
                output = ln.payload.get("output")
                data = output
                if isinstance(output, str) and output.lstrip().startswith("{"):
                    try:
                        data = strict_json(output)
                    except ValueError:
                        data = None
                if isinstance(data, dict):
                    for name in ("agent_id", "thread_id", "id", "agent_path"):
                        if isinstance(data.get(name), str) and data[name]:
                            return data[name]
                text = _text_of(output) or ""
                spawned = _SPAWNED.search(text)
                if spawned:
                    return spawned.group(1)
        return None

    def _spawn(self, group: _Group, args: dict[str, Any], sources: list[Record], ts: str | None) -> None:
        worker = self._spawned_thread(group)
        if worker is None:
            for name in ("task_name", "agent_name", "name"):
                if isinstance(args.get(name), str) and args[name]:
                    worker = self._worker(args[name])
                    break
        if worker is None:
            worker = self.lines[group.primary].payload.get("call_id") or "unknown"
        instruction, context = _instruction(args)
        self._add("delegation", actor="agent", source=sources, ts=ts, worker_id=worker, instruction=instruction,
                  context=[self.b.workspace_path(self._resolve(c, self.cwd)) for c in context] or None)

    def _send(self, args: dict[str, Any], sources: list[Record], ts: str | None) -> None:
        target = next((args[n] for n in ("id", "agent_id", "target", "thread_id", "to", "agent")
                       if isinstance(args.get(n), str)), None)
        if target is None:
            self._keep(sources, "tool_call:send_input", actor="agent", ts=ts)
            return
        instruction, context = _instruction(args)
        self._add("delegation", actor="agent", source=sources, ts=ts, worker_id=self._worker(target),
                  instruction=instruction,
                  context=[self.b.workspace_path(self._resolve(c, self.cwd)) for c in context] or None)

    def _wait(self, args: dict[str, Any], output: Any, events: dict[str, _Line], sources: list[Record],
              ts: str | None, name: str) -> None:
        statuses: dict[str, Any] = {}
        data = output
        if isinstance(output, str) and output.lstrip().startswith("{"):
            try:
                data = strict_json(output)
            except ValueError:
                data = None
        if isinstance(data, dict):
            found = data.get("status") if isinstance(data.get("status"), dict) else data.get("statuses")
            if isinstance(found, dict):
                statuses = found
        if not statuses and "collab_waiting_end" in events:
            found = events["collab_waiting_end"].payload.get("statuses")
            if isinstance(found, dict):
                statuses = found
        made = 0
        for agent, value in statuses.items():
            state, text = _agent_status(value)
            if state in _REPORT_STATUS:
                self._report(agent, text or "", _REPORT_STATUS[state], sources, ts)
                made += 1
        if not made:
            self._keep(sources, f"tool_call:{name}", actor="agent", ts=ts)

    def _report(self, agent: str, text: str, status: str | None, sources: list[Record], ts: str | None) -> int:
        worker = self._worker(agent)
        return self._add("worker_report", actor=f"subagent:{_sanitize_actor_id(worker)}", source=sources, ts=ts,
                         worker_id=worker, text=text, status=status, evidence=_cited_paths(text) or None)

    def _notification(self, body: str, sources: list[Record], ts: str | None) -> bool:
        try:
            data = strict_json(body)
        except ValueError:
            return False
        if not isinstance(data, dict) or not isinstance(data.get("agent_id") or data.get("agent_path"), str):
            return False
        state, text = _agent_status(data.get("status"))
        if state not in _REPORT_STATUS:
            return False
        self._report(data.get("agent_id") or data["agent_path"], text or "", _REPORT_STATUS[state], sources, ts)
        return True

    def _communication(self, p: dict[str, Any], sources: list[Record], ts: str | None) -> None:
        author, content = p.get("author"), p.get("content")
        if not isinstance(author, str) or not isinstance(content, str):
            self._keep(sources, "inter_agent_communication", actor="harness", ts=ts)
            return
        own = self.own_path.rstrip("/")
        if author.rstrip("/") == own:
            self._keep(sources, "inter_agent_communication", actor="agent", ts=ts)
        elif own.startswith(author.rstrip("/") + "/"):
            # the lead (an ancestor) writing to this agent: relayed by the harness
            self._add("message", actor="harness", source=sources, ts=ts, text=content)
        else:
            self._report(author, content, None, sources, ts)

    def _activity(self, p: dict[str, Any], sources: list[Record], ts: str | None) -> None:
        agent = next((p[n] for n in ("agent_thread_id", "agent_path", "agent_reference", "thread_id")
                      if isinstance(p.get(n), str) and p[n]), None)
        kind = p.get("kind").lower() if isinstance(p.get("kind"), str) else None
        if agent is not None and kind in _REPORT_STATUS:
            text = p.get("status_message") if isinstance(p.get("status_message"), str) else ""
            self._report(agent, text, _REPORT_STATUS[kind], sources, ts)
        else:
            self._keep(sources, "event_msg.sub_agent_activity", ts=ts)

    # --- turn ends and compaction --------------------------------------------------------------

    def _claim(self, ln: _Line, rec: Record, ts: str | None) -> None:
        last = ln.payload.get("last_agent_message")
        text = last if isinstance(last, str) and last.strip() else (self.last_agent[0] if self.last_agent else None)
        if not text or not _claims_completion(text):
            return
        parent = self.last_agent[1] if self.last_agent and self.last_agent[0].strip() == text.strip() else None
        sources = [rec] if parent is None or self.last_agent is None else [rec, self.last_agent[2]]
        self._add("completion_claim", actor="agent", source=sources, ts=ts, claim=text, scope="stage", parent=parent)

    def _compaction(self, group: _Group) -> None:
        members = group.members
        primary = self.lines[group.primary]
        sources = self._records([group.primary] + [m for m in members if m != group.primary])
        summary = primary.payload.get("message") if primary.top == "compacted" else None
        actor = "user" if self._compaction_requested(members[0], members[-1]) else "harness"
        self._add("compaction", actor=actor, source=sources, ts=self._ts(self.lines[members[0]]),
                  summary=summary if isinstance(summary, str) and summary.strip() else None)

    def _compaction_requested(self, first: int, last: int) -> bool:
        """Codex runs a compaction as a turn of its own only when the user typed /compact:
        nothing but the turn's start, token counts and the compaction since the last turn
        boundary, and nothing else before the turn ends."""
        def quiet(ln: _Line) -> bool:
            return ln.rec is not None and (ln.key in _COMPACTION_ITEMS or ln.top == "turn_context"
                                           or ln.key == ("event_msg", "token_count"))
        i = first - 1
        while i >= 0 and quiet(self.lines[i]):
            i -= 1
        if i < 0 or not (self.lines[i].top == "event_msg" and self.lines[i].sub in _TURN_STARTS):
            return False
        j = last + 1
        while j < len(self.lines) and quiet(self.lines[j]):
            j += 1
        return j < len(self.lines) and self.lines[j].top == "event_msg" \
            and self.lines[j].sub in ("task_complete", "turn_complete")


_REPORT_STATUS = {"completed": "success", "errored": "failure", "failed": "failure", "interrupted": "partial"}


def _agent_status(value: Any) -> tuple[str | None, str | None]:
    """(state, text) of an AgentStatus: ``"running"``, ``{"completed": "msg"}``, ``{"errored": "e"}``."""
    if isinstance(value, str):
        return value.lower(), None
    if isinstance(value, dict) and len(value) == 1:
        state, text = next(iter(value.items()))
        return str(state).lower(), text if isinstance(text, str) else None
    return None, None


def _instruction(args: dict[str, Any]) -> tuple[str, list[str]]:
    """The instruction text handed to a worker and the paths of the input items with it."""
    texts: list[str] = []
    for name in ("message", "prompt", "task", "instructions", "input"):
        if isinstance(args.get(name), str) and args[name].strip():
            texts.append(args[name])
            break
    paths: list[str] = []
    for item in args.get("items") or []:
        if not isinstance(item, dict):
            continue
        if isinstance(item.get("text"), str) and item["text"].strip():
            texts.append(item["text"])
        for name in ("path", "file", "file_path"):
            if isinstance(item.get(name), str) and item[name] and item[name] not in paths:
                paths.append(item[name])
    return "\n\n".join(texts), paths


def _tool_name(p: dict[str, Any]) -> str:
    name = p.get("name") if isinstance(p.get("name"), str) else "unknown"
    namespace = p.get("namespace")
    return f"{namespace}__{name}" if isinstance(namespace, str) and namespace and not name.startswith("mcp__") else name


def _patch_in_command(argv: list[str] | None, script: str) -> tuple[str | None, str | None]:
    """An apply_patch call Codex intercepts inside a shell call: (patch, cd dir)."""
    if argv and len(argv) == 2 and posixpath.basename(argv[0]) in _PATCH_TOOLS:
        return argv[1], None
    match = _PATCH_IN_SCRIPT.match(script)
    if match and "*** Begin Patch" in script:
        start = script.index("*** Begin Patch")
        end = script.find("*** End Patch", start)
        patch = script[start:end + len("*** End Patch")] if end >= 0 else script[start:]
        directory = match.group("dir")
        return patch, directory.strip("'\"") if directory else None
    return None, None


def _is_injected(text: str) -> bool:
    """A block the harness puts in a user-role message (context, instructions, notices)."""
    return bool(_INJECTED_PREFIX.match(text) or _INJECTED_BLOCK.match(text))


def _as_communication(text: str) -> dict[str, Any] | None:
    """An inter-agent message the harness recorded as assistant text (its JSON envelope)."""
    stripped = text.strip()
    if not (stripped.startswith("{") and stripped.endswith("}")):
        return None
    try:
        data = strict_json(stripped)
    except ValueError:
        return None
    if isinstance(data, dict) and {"author", "content"} <= data.keys() and ("recipient" in data or "trigger_turn" in data):
        return data
    return None


def _claims_completion(text: str) -> bool:
    """Conservative: the text says the work is done, and nothing of being unable to do it."""
    return any(p.search(text) for p in _CLAIMS) and not _NOT_DONE.search(text)
