"""Claude Code session transcripts: ``~/.claude/projects/<cwd-slug>/<sessionId>.jsonl``.

One JSON record per line (``type`` user / assistant / system / summary /
file-history-snapshot / ...), linked into a tree by ``uuid`` / ``parentUuid``;
sub-agents either inline (``isSidechain: true`` lines with ``agentId``) or, in
newer versions, in ``<sessionId>/subagents/agent-<agentId>.jsonl`` with a
``agent-<agentId>.meta.json`` naming the parent's ``toolUseId``. The headless
``claude -p --output-format stream-json`` output (``session_id``,
``parent_tool_use_id``, a final ``{"type": "result"}`` line) is read too.

How records become events:

- **Branches.** ``parentUuid`` (or ``logicalParentUuid`` across a compaction) links
  the main records into a tree; a rewind leaves a sibling branch behind. The run's
  process is the path from the root to the last user/assistant record in file order.
  A branch that forks off that path (or a second root, when the user rewound to the
  very first prompt) and holds a user or assistant record is *abandoned*: each of its
  records is kept as a ``source_record`` ``abandoned_branch:<type>``, outside any stage,
  at its place in the file (a rewound branch is written right after its fork point,
  before the continued branch), so nothing is lost and no rule scores it. Side records
  hanging off the path (system/progress records) stay process. A file with no
  resolvable links at all is read in file order. Sub-agent work started from an
  abandoned record is abandoned with it.
- **Messages.** User text is ``message`` actor ``user``; ``<system-reminder>`` blocks
  are split out of it into a ``message`` actor ``harness`` (a record that is only
  reminders, ``isMeta`` records, the local-command caveat and ``<local-command-stdout>``
  are harness messages). A real user prompt after the agent acted opens a new round
  (``begin_stage``; stage 0 for the first prompt); slash-command records and
  ``[Request interrupted by user]`` are user messages that open no round. Assistant
  ``text`` is ``message`` actor ``agent`` (intent ``plan`` when it starts as a plan),
  ``thinking`` is intent ``reasoning``; synthetic assistant records (API errors,
  model ``<synthetic>``) are the harness's.
- **Completion claims.** There is no finish tool: the last assistant text of a round,
  when its message ended with ``stop_reason: end_turn``, no tool call follows it in the
  round, and its words claim completion (done / completed / finished / implemented /
  fixed / resolved / all tests pass, not negated), is a ``completion_claim`` (scope
  ``stage``; ``run`` when the session has no rounds). In headless output a ``result``
  line with subtype ``success`` makes the final assistant text the run's claim (scope
  ``run``) whatever its words, and the line itself is ``run_ended`` (``error_max_turns``:
  ``budget_exhausted``, the harness stopped the model). Records recovered from another
  harness's log (a Terminal-Bench cast) go through the same mapping
  (:func:`emit_stream_json`); that harness then says how the run ended.
- **Tools** (the call's record and its ``tool_result`` record are the sources of one
  event): ``Bash`` -> ``RunBuilder.command`` (a ``test_run`` with counts when the line
  runs tests), its exit code read from how the result ended
  (:mod:`procgrade.engine.importers.claude_code_bash`: a stated ``Exit code N``; ``is_error`` without
  a stated code -> 1, the documented failure marker; a plain success -> 0; interrupted,
  background or ambiguous -> null); a call Claude Code refused to run is a
  ``source_record`` ``tool_use:Bash:refused``; ``Read``,
  ``Glob`` (pattern joined to its path), ``Grep`` on a file path -> ``file_read``;
  ``Edit`` / ``MultiEdit`` / ``Write`` / ``NotebookEdit`` -> ``file_edit`` (``create`` when
  the result says so or the edit starts from an empty ``old_string``, ``Write`` unless
  ``toolUseResult.type`` is ``update``); a read or edit whose result has ``is_error``
  did nothing to the file and is kept as ``source_record`` ``tool_use:<name>:error``; ``TodoWrite`` and
  ``ExitPlanMode`` -> ``message`` intent ``plan``; ``Task`` / ``Agent`` -> ``delegation``
  (``worker_id`` the agent id from the meta file, ``toolUseResult.agentId``, the result
  record's ``agentId`` or its ``agentId:`` line, else the tool-use id; ``context`` the
  paths the prompt names, else None) and its result -> ``worker_report`` by
  ``subagent:<id>`` at the result's place (``status`` from ``toolUseResult.status``; the ``agentId:``/``<usage>`` trailer block is
  left out of ``text``; ``evidence`` the file paths the report names). Any other tool
  (MCP, web, ...) is a ``source_record`` ``tool_use:<name>`` by the agent.
- **Sub-agents.** Inline sidechain lines are read in file order as ``subagent:<id>``
  (the line's ``agentId``, else its sidechain chain's, else the one agent of the session;
  ``parent_tool_use_id`` in stream-json names the delegation);
  a sub-agent file's transcript is read right after the events of the parent record
  that delegated to it (files nothing delegated to come last). The prompt a sub-agent
  starts from is a ``source_record`` ``sidechain_prompt`` (its words are the delegation's
  instruction). Sub-agent texts are messages: their hand-back is the worker report.
- **Compaction.** ``compact_boundary`` -> ``compaction`` (actor ``harness`` for
  ``trigger: auto``, ``user`` for manual ``/compact``; ``tokens_before`` from ``preTokens``)
  with the following ``isCompactSummary`` record as its ``summary`` and second source;
  ``microcompact_boundary`` likewise.
- **Repeats.** A line identical to an earlier one (or an assistant line repeating an
  earlier line's ``message.id`` and content) is kept as ``<type>:repeated``.
- **Usage.** One API response is split across lines sharing ``message.id``; the run's
  token totals count each message id once (field-wise maximum over its lines, every
  file and branch included) and go into ``run_started.labels``.
- **Malformed records.** A line that is not UTF-8 JSON, not an object, has no string
  ``type``, or a user/assistant record whose ``message``/``message.content`` has the
  wrong shape is kept as ``unparsed`` (Claude Code writes can be cut mid-line; the
  reason names the field). Inside a well-formed content block the fields read are
  required: a tool call without ``name`` or a ``Bash`` command that is not a string is
  an ``InputError``, as is a malformed sub-agent ``.meta.json``.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from procgrade.engine.errors import InputError
from procgrade.engine.exact import decimal_text
from procgrade.engine.importers.base import Importer, Unit, register
from procgrade.engine.importers.building import ImportedRun, Record, RunBuilder, timestamp
from procgrade.engine.importers.claude_code_bash import bash_ending
from procgrade.engine.importers.redaction import Redactor
from procgrade.engine.importers.source_tree import SourceTree, refuse_unsafe_json, strict_json

__all__ = ["ClaudeCodeImporter", "StreamEnd", "StreamProvenance", "emit_stream_json", "parse_line"]

_CONVERSATIONAL = ("user", "assistant")
_EDIT_TOOLS = ("Edit", "MultiEdit", "Write", "NotebookEdit")
_DELEGATION_TOOLS = ("Task", "Agent")
_USAGE_FIELDS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens")
_SUBAGENT_FILE = re.compile(r"^agent-(.+)\.jsonl$")
_SUBAGENT_META = re.compile(r"^agent-(.+)\.meta\.json$")
_ACTOR_ID = re.compile(r"[^A-Za-z0-9._@/+-]")

_REMINDER = re.compile(r"<system-reminder>\s*(.*?)\s*</system-reminder>", re.S)
_CAVEAT = "Caveat: The messages below were generated by the user while running local commands"
_HARNESS_PREFIXES = ("<local-command-stdout>", "<local-command-stderr>", "<bash-stdout>", "<bash-stderr>", _CAVEAT)
_USER_COMMAND_PREFIXES = ("<command-name>", "<command-message>", "<bash-input>", "[Request interrupted by user")
_AGENT_TRAILER = re.compile(r"^\s*agentId:\s*\S+")
_AGENT_ID_IN_TEXT = re.compile(r"(?m)^\s*agentId:\s*([A-Za-z0-9][A-Za-z0-9_-]*)")

# A completion claim, conservatively: "is/are/now done", "completed", "implemented",
# "fixed", "all tests pass", ... not preceded by a negation.
_CLAIM = re.compile(
    r"(?i)(?:^\s*done\b|\b(?:is|are|now|been|all|everything(?:'s| is)?)\s+(?:done|complete|finished|fixed|implemented|resolved)\b"
    r"|\b(?:completed|finished|implemented|fixed|resolved)\b|\ball (?:the )?tests (?:now )?pass(?:ed|es|ing)?\b)")
_NEGATED = re.compile(r"(?i)(?:\bnot|n't|\bnever|\byet to be|\bno longer|\bbefore it is|\bonce|\bwhen|\buntil|\bif)\s+(?:\w+\s+){0,2}$")
_PLAN = re.compile(r"(?i)^\s*(?:#+\s*)?(?:\*\*)?(?:plan|my plan|the plan|implementation plan|here'?s (?:my|the) plan)\b")

# Paths named in a prompt or report: a token with a slash or a file extension.
_PATH_TOKEN = re.compile(r"`([^`\s]+)`|(?<![\w@:/.-])((?:~|\.{1,2})?/?[A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)*/?)")
_SLASH_WORDS = {"and/or", "either/or", "input/output", "read/write", "true/false", "yes/no", "on/off", "i/o",
                "client/server", "he/she", "his/her", "w/o", "n/a", "pass/fail", "success/failure", "start/stop",
                "open/close", "before/after", "frontend/backend", "front/back", "get/set", "push/pull", "in/out"}
_EXTENSIONS = {"py", "pyi", "js", "jsx", "ts", "tsx", "mjs", "cjs", "json", "jsonl", "yaml", "yml", "toml", "ini", "cfg",
               "md", "rst", "txt", "html", "htm", "css", "scss", "go", "rs", "java", "kt", "c", "h", "cc", "cpp", "hpp",
               "cs", "rb", "php", "swift", "sh", "bash", "zsh", "sql", "xml", "csv", "lock", "proto", "vue", "svelte",
               "ipynb", "env", "conf", "gradle", "mk", "lua", "r", "scala", "ex", "exs", "erl", "hs", "ml", "dart"}


@dataclass
class _Line:
    """One non-blank line of a transcript file (or one record recovered from elsewhere)."""

    file: str
    line: int | str
    text: str
    value: Any = None
    bad: str | None = None            # why the line is kept as unparsed
    rec: Record | None = None         # the registered record of a well-formed line
    type: str = ""
    uuid: str | None = None
    sidechain: bool = False
    agent: str | None = None          # the sub-agent a sidechain line belongs to
    abandoned: bool = False
    repeated: bool = False            # the same record (or API message content) written again
    when: str | None = None           # when the record was seen, for records that carry no time

    @property
    def data(self) -> dict[str, Any]:
        assert self.rec is not None
        return self.rec.data

    @property
    def ts(self) -> str | None:
        if self.rec is None:
            return self.when
        return timestamp(self.data.get("timestamp")) or self.when


@dataclass
class _Call:
    line: _Line
    index: int | None
    block: dict[str, Any]
    path: str                         # the block's field path, for errors


@dataclass
class _Transcript:
    agent: str
    file: str
    lines: list[_Line]
    meta: Record | None = None
    tool_use_id: str | None = None
    emitted: bool = False


@dataclass
class _UserText:
    user: str | None = None           # the user's own words
    prompt: bool = False              # the words are a prompt that can open a round
    harness: list[str] = field(default_factory=list)


@register
class ClaudeCodeImporter(Importer):
    name = "claude-code"
    title = "Claude Code session transcript JSONL (+ subagents/, headless stream-json)"
    version = "3"

    def sniff(self, tree: SourceTree, rel: str) -> bool:
        if rel.endswith(".json"):
            return False
        try:
            return _looks_like_claude_code(tree.first_json_line(rel))
        except Exception:  # sniffing never raises
            return False

    def find(self, tree: SourceTree, candidates: Any) -> list[Unit]:
        primaries = [rel for rel in candidates if self.sniff(tree, rel)]
        if not primaries:  # no session here: the tree is not walked for sub-agent files
            return []
        flat = _flat_agent_files(tree)
        companions = {rel: _companions(tree, rel, flat) for rel in primaries}
        owned = {c for files in companions.values() for c in files}
        return [Unit(rel, tuple(companions[rel])) for rel in primaries if rel not in owned]

    def companions(self, tree: SourceTree, rel: str) -> list[str]:
        """``<session>/subagents/agent-<id>.jsonl`` and ``.meta.json`` files, and (older
        versions) ``agent-<id>.jsonl`` files next to the session file that name its session."""
        return _companions(tree, rel, _flat_agent_files(tree))

    def read(self, tree: SourceTree, unit: Unit) -> list[ImportedRun]:
        return [_Reader(self, tree, unit).build()]


def _flat_agent_files(tree: SourceTree) -> dict[tuple[str, str], list[str]]:
    """(folder, session id) -> the ``agent-<id>.jsonl`` files of the older flat layout."""
    found: dict[tuple[str, str], list[str]] = {}
    for rel in tree.files():
        folder, base = posixpath.split(rel)
        if _SUBAGENT_FILE.match(base) and posixpath.basename(folder) != "subagents":
            first = tree.first_json_line(rel)
            if isinstance(first, dict) and isinstance(first.get("sessionId"), str):
                found.setdefault((folder, first["sessionId"]), []).append(rel)
    return found


def _companions(tree: SourceTree, rel: str, flat: dict[tuple[str, str], list[str]]) -> list[str]:
    folder, base = posixpath.split(rel)
    if _SUBAGENT_FILE.match(base):
        return []
    stem = base.rsplit(".", 1)[0] if "." in base else base
    sub = posixpath.join(folder, stem, "subagents")
    found = [f for f in tree.under(sub)
             if "/" not in f[len(sub) + 1:] and (_SUBAGENT_FILE.match(posixpath.basename(f))
                                                 or _SUBAGENT_META.match(posixpath.basename(f)))]
    found.extend(f for f in flat.get((folder, stem), []) if f != rel)
    return sorted(set(found))


def _looks_like_claude_code(obj: Any) -> bool:
    if not isinstance(obj, dict):
        return False
    kind = obj.get("type")
    if kind == "summary":
        return "leafUuid" in obj
    if kind == "file-history-snapshot":
        return "snapshot" in obj and "messageId" in obj
    if kind in ("user", "assistant", "system", "attachment", "progress") and isinstance(obj.get("sessionId"), str):
        return "uuid" in obj
    if kind == "queue-operation":
        return isinstance(obj.get("sessionId"), str) and "operation" in obj
    if kind == "system" and obj.get("subtype") == "init" and isinstance(obj.get("session_id"), str):
        return any(k in obj for k in ("claude_code_version", "apiKeySource", "permissionMode"))
    return False


def parse_line(rel: str, record: int | str, text: str, *, when: str | None = None, label: str | None = None) -> _Line:
    """One transcript line: its value, or why it is kept as ``unparsed`` (a cut-off record is
    tolerated; a duplicate key or too deep nesting never is: a located error, ``label`` naming the file)."""
    try:
        value = strict_json(text)
    except json.JSONDecodeError as exc:
        return _Line(rel, record, text, bad=f"invalid JSON: {exc.msg} (column {exc.colno})", when=when)
    except ValueError as exc:
        refuse_unsafe_json(label or rel, record if isinstance(record, int) else None, exc)
        return _Line(rel, record, text, bad=f"invalid JSON: {exc}", when=when)
    # the reason quotes the value: describe the redacted value, never the raw one
    return _Line(rel, record, text, value=value, bad=_shape_problem(Redactor().value(value)), when=when)


@dataclass
class StreamEnd:
    """How a headless stream-json run ended, as its ``result`` record says (None: no result record)."""

    record: Record | None
    status: str | None
    reason: str | None
    ts: str | None


@dataclass
class StreamProvenance:
    """What a stream-json transcript says about its run, for the importer that owns the run."""

    harness_version: str | None
    model: str | None
    labels: dict[str, str]
    first: Record | None


def emit_stream_json(importer: Importer, tree: SourceTree, builder: RunBuilder, lines: list[_Line],
                     end_run: Callable[[StreamEnd], None]) -> StreamProvenance:
    """Emit the events of Claude Code records recovered from another harness's log (e.g. the
    stream-json a Terminal-Bench cast echoes) into ``builder``, through the same mapping as a
    transcript file. ``lines`` come from :func:`parse_line`; the ``result`` record (or its
    absence) is handed to ``end_run`` instead of ending the run here, since the owning
    harness knows more about how the run ended (a timeout kills the agent before it writes one)."""
    primary = lines[0].file if lines else "stream.jsonl"
    ended: list[StreamEnd] = []

    def first_end(end: StreamEnd) -> None:
        if not ended:  # a second result record is kept as a record, not a second end
            ended.append(end)
            end_run(end)

    reader = _Reader(importer, tree, Unit(primary), main=lines, builder=builder, end_run=first_end)
    reader.emit()
    if not ended:
        end_run(StreamEnd(None, None, None, None))
    return reader.provenance()


class _Reader:
    """Reads one unit (a session file and its sub-agent files) into one run."""

    def __init__(self, importer: Importer, tree: SourceTree, unit: Unit, *, main: list[_Line] | None = None,
                 builder: RunBuilder | None = None, end_run: Callable[[StreamEnd], None] | None = None) -> None:
        self.importer, self.tree, self.unit = importer, tree, unit
        self.primary = unit.primary
        self.end_run = end_run
        self.main = main if main is not None else self._read_lines(self.primary)
        self.standalone_agent = self._agent_of_file(self.primary)
        self.transcripts: dict[str, _Transcript] = {}
        metas: list[tuple[str, str]] = []
        for rel in unit.companions:
            base = posixpath.basename(rel)
            if (m := _SUBAGENT_FILE.match(base)) is not None:
                if m.group(1) in self.transcripts:  # flat and subagents/ layouts both name this agent
                    raise InputError(tree.label(rel), None, None, f"a second transcript of sub-agent {m.group(1)!r} "
                                     f"(also {tree.label(self.transcripts[m.group(1)].file)})")
                self.transcripts[m.group(1)] = _Transcript(m.group(1), rel, [])
            elif (m := _SUBAGENT_META.match(base)) is not None:
                metas.append((m.group(1), rel))
        self.session_id = self._session_id()
        self.cwd = self._first_str("cwd")
        self.b: RunBuilder = builder if builder is not None else importer.builder(
            tree, unit, self._native_id(), workspace_root=_slashes(self.cwd) if self.cwd else None)
        # Register every well-formed record, then the sub-agent files and metas.
        self._register(self.main)
        for transcript in self.transcripts.values():
            transcript.lines = self._read_lines(transcript.file)
            self._register(transcript.lines)
            for line in transcript.lines:
                if line.rec is not None:
                    line.sidechain, line.agent = True, transcript.agent
        self.orphan_metas: list[Record] = []
        for agent, rel in metas:
            rec = self.b.record(rel, "$", tree.json(rel))
            if not isinstance(rec.data, dict):
                raise rec.error(None, "expected a JSON object")
            tool_use_id = rec.opt_str("toolUseId")
            rec.opt_str("agentType"), rec.opt_str("description")
            transcript = self.transcripts.setdefault(agent, _Transcript(agent, "", []))
            if transcript.meta is None:
                transcript.meta, transcript.tool_use_id = rec, tool_use_id
            else:
                self.orphan_metas.append(rec)
        self.calls: dict[str, dict[str, _Call]] = {}
        self.results: dict[str, dict[str, _Call]] = {}
        for lines in [self.main, *(t.lines for t in self.transcripts.values())]:
            self._index_tools(lines)
        self.worker_of: dict[str, str] = {}       # delegation tool-use id -> worker id
        self.transcript_of: dict[str, _Transcript] = {}
        self._link_delegations()
        self._mark_repeats()
        self._mark_branches()
        self._mark_sidechains()
        self.round_of: dict[int, int] = {}        # id(line) -> round opened by it
        self.claims: dict[tuple[int, int | None], str] = {}  # (id(line), block index) -> scope
        self.result_line = next((ln for ln in self.main if ln.rec is not None and ln.type == "result"), None)
        self._plan_rounds()
        # Emission state.
        self.delegation_seq: dict[str, int] = {}
        self.consumed: set[int] = set()           # id(line) of compact summaries attached to a boundary

    # --- reading ---------------------------------------------------------------------------

    def _read_lines(self, rel: str) -> list[_Line]:
        data = self.tree.read_bytes(rel)
        lines: list[_Line] = []
        for number, raw in enumerate(data.split(b"\n"), start=1):
            raw = raw.rstrip(b"\r")
            if not raw.strip():
                continue
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                lines.append(_Line(rel, number, raw.decode("utf-8", "replace"),
                                   bad=f"not UTF-8: byte 0x{raw[exc.start]:02x}"))
                continue
            lines.append(parse_line(rel, number, text, label=self.tree.label(rel)))
        return lines

    def _register(self, lines: list[_Line]) -> None:
        for line in lines:
            if line.bad is not None:
                continue
            value = line.value
            native = value.get("uuid") if isinstance(value.get("uuid"), str) else None
            if native is None:
                message = value.get("message")
                for candidate in (value.get("messageId"), message.get("id") if isinstance(message, dict) else None):
                    if isinstance(candidate, str):
                        native = candidate
                        break
            line.rec = self.b.record(line.file, line.line, value, native_id=native)
            line.type = value["type"]
            line.uuid = native if isinstance(value.get("uuid"), str) else None
            tool_parent = value.get("parent_tool_use_id")
            line.sidechain = value.get("isSidechain") is True or (isinstance(tool_parent, str) and bool(tool_parent))
            if self.standalone_agent is not None and line.file == self.primary:
                line.sidechain = True

    def _good(self, lines: list[_Line]) -> list[_Line]:
        return [ln for ln in lines if ln.rec is not None]

    def _first_str(self, key: str) -> str | None:
        """The first non-empty string ``key`` of a main record (redacted once registered)."""
        for line in self.main:
            if line.bad is None:
                value = (line.rec.data if line.rec is not None else line.value).get(key)
                if isinstance(value, str) and value:
                    return value
        return None

    def _session_id(self) -> str:
        base = posixpath.basename(self.primary)
        stem = base.rsplit(".", 1)[0] if "." in base else base
        ids = [ln.value.get("sessionId", ln.value.get("session_id")) for ln in self.main if ln.bad is None]
        ids = [i for i in ids if isinstance(i, str) and i]
        return stem if stem in ids else (ids[0] if ids else stem)

    def _native_id(self) -> str:
        if self.standalone_agent is not None:
            return f"{self.session_id}/agent-{self.standalone_agent}"
        return self.session_id

    def _agent_of_file(self, rel: str) -> str | None:
        m = _SUBAGENT_FILE.match(posixpath.basename(rel))
        if m is None:
            return None
        values = [ln.value for ln in self.main if ln.bad is None and ln.value.get("type") in _CONVERSATIONAL]
        return m.group(1) if values and all(v.get("isSidechain") is True for v in values) else None

    # --- indexes ---------------------------------------------------------------------------

    def _index_tools(self, lines: list[_Line]) -> None:
        """Index tool calls and results by id; the block fields read later must be well typed."""
        for line in self._good(lines):
            if line.type not in _CONVERSATIONAL:
                continue
            for index, block, path in _blocks(line):
                kind = block["type"]
                if kind == "tool_use" and line.type == "assistant":
                    rec = line.rec
                    assert rec is not None
                    call_id = rec.str(f"{path}.id")
                    rec.str(f"{path}.name")
                    rec.obj(f"{path}.input")
                    self.calls.setdefault(line.file, {}).setdefault(call_id, _Call(line, index, block, path))
                elif kind == "tool_result":
                    assert line.rec is not None
                    call_id = line.rec.str(f"{path}.tool_use_id")
                    self.results.setdefault(line.file, {}).setdefault(call_id, _Call(line, index, block, path))
                elif kind in ("text", "thinking") and index is not None:
                    assert line.rec is not None
                    line.rec.str(f"{path}.{kind}")

    def _result_of(self, call: _Call) -> _Call | None:
        found = self.results.get(call.line.file, {}).get(call.block["id"])
        return found

    def _link_delegations(self) -> None:
        by_tool = {t.tool_use_id: t for t in sorted(self.transcripts.values(), key=lambda t: t.file or "~")
                   if t.tool_use_id}
        for file_calls in self.calls.values():
            for call_id, call in file_calls.items():
                if call.block["name"] not in _DELEGATION_TOOLS:
                    continue
                agent: str | None = None
                transcript = by_tool.get(call_id)
                if transcript is not None:
                    agent = transcript.agent
                result = self._result_of(call)
                if agent is None and result is not None:
                    outcome = _tool_use_result(result.line)
                    if isinstance(outcome, dict) and isinstance(outcome.get("agentId"), str) and outcome["agentId"]:
                        agent = outcome["agentId"]
                    elif not result.line.sidechain and isinstance(result.line.data.get("agentId"), str) \
                            and result.line.data["agentId"]:
                        agent = result.line.data["agentId"]
                    else:
                        m = _AGENT_ID_IN_TEXT.search(_result_text(result.block))
                        agent = m.group(1) if m else None
                self.worker_of[call_id] = agent or call_id
                if transcript is None and agent is not None:
                    transcript = self.transcripts.get(agent)
                    if transcript is not None and transcript.tool_use_id not in (None, call_id):
                        transcript = None
                if transcript is not None and transcript.lines and \
                        all(t is not transcript for t in self.transcript_of.values()):
                    self.transcript_of[call_id] = transcript

    def _mark_sidechains(self) -> None:
        """Which sub-agent each inline sidechain line of the main file belongs to."""
        side = [ln for ln in self._good(self.main) if ln.sidechain]
        if not side:
            return
        if self.standalone_agent is not None:
            for line in side:
                line.agent = self.standalone_agent
            return
        by_uuid = {ln.uuid: ln for ln in side if ln.uuid}
        parent: dict[int, _Line] = {}
        for line in side:
            p = line.data.get("parentUuid")
            if isinstance(p, str) and p in by_uuid and by_uuid[p] is not line:
                parent[id(line)] = by_uuid[p]

        def root(line: _Line) -> _Line:
            seen = set()
            while id(line) in parent and id(line) not in seen:
                seen.add(id(line))
                line = parent[id(line)]
            return line

        groups: dict[int, list[_Line]] = {}
        for line in side:
            groups.setdefault(id(root(line)), []).append(line)
        known = sorted({ln.data["agentId"] for ln in side if isinstance(ln.data.get("agentId"), str) and ln.data["agentId"]}
                       | {w for t, w in self.worker_of.items() if w != t})
        prompts = {}
        for call_id, worker in self.worker_of.items():
            call = next((c[call_id] for c in self.calls.values() if call_id in c), None)
            if call is not None and isinstance(call.block["input"].get("prompt"), str):
                prompts.setdefault(call.block["input"]["prompt"].strip(), worker)
        for members in groups.values():
            ids = sorted({ln.data["agentId"] for ln in members
                          if isinstance(ln.data.get("agentId"), str) and ln.data["agentId"]})
            by_tool = [self.worker_of.get(ln.data["parent_tool_use_id"], ln.data["parent_tool_use_id"])
                       for ln in members if isinstance(ln.data.get("parent_tool_use_id"), str)]
            first_text = _user_text_of(members[0]) if members[0].type == "user" else None
            if by_tool:
                agent = by_tool[0]
            elif len(ids) == 1:
                agent = ids[0]
            elif first_text is not None and first_text.strip() in prompts:
                agent = prompts[first_text.strip()]
            elif len(known) == 1:
                agent = known[0]
            elif len(self.worker_of) == 1:
                agent = next(iter(self.worker_of.values()))
            else:
                agent = "sidechain"
            for line in members:
                own = line.data.get("agentId")
                line.agent = own if isinstance(own, str) and own else agent
        # The work of a sub-agent started from a rewound branch is abandoned with it.
        abandoned_workers = {self.worker_of[block["id"]] for line in self._good(self.main) if line.abandoned
                             and line.type == "assistant" for _, block, _ in _blocks(line)
                             if block["type"] == "tool_use" and block["id"] in self.worker_of}
        for line in side:
            if line.agent in abandoned_workers:
                line.abandoned = True

    def _mark_branches(self) -> None:
        """Mark the records of rewound branches (see the module docstring)."""
        nodes = [ln for ln in self._good(self.main) if not ln.sidechain and not ln.repeated and ln.uuid is not None]
        if not nodes:
            return
        by_uuid: dict[str, list[int]] = {}
        for i, line in enumerate(nodes):
            by_uuid.setdefault(line.uuid, []).append(i)  # type: ignore[arg-type]
        parent: dict[int, int] = {}
        for i, line in enumerate(nodes):
            link = line.data.get("parentUuid")
            if link is None:
                link = line.data.get("logicalParentUuid")
            if not isinstance(link, str) or link not in by_uuid:
                continue
            earlier = [j for j in by_uuid[link] if j < i]
            j = earlier[-1] if earlier else by_uuid[link][0]
            if j != i:
                parent[i] = j
        if not parent:
            return  # no links in use: file order
        conversational = [i for i, ln in enumerate(nodes) if _is_conversational(ln)]
        if not conversational:
            return
        leaf = conversational[-1]
        active: set[int] = set()
        i: int | None = leaf
        while i is not None and i not in active:
            active.add(i)
            i = parent.get(i)

        def top(i: int) -> tuple[int, int | None]:
            """(the branch head below the active path or the root, the active node it hangs off)."""
            seen = set()
            while i in parent and i not in seen:
                seen.add(i)
                if parent[i] in active:
                    return i, parent[i]
                i = parent[i]
            return i, None

        active_root = next((j for j in sorted(active) if j not in parent), None)
        rewound_to_start = active_root is not None and _is_genuine_root(nodes[active_root])
        branches: dict[int, list[int]] = {}
        for i in range(len(nodes)):
            if i in active:
                continue
            head, fork = top(i)
            if fork is None and not (rewound_to_start and _is_genuine_root(nodes[head])):
                continue  # a disconnected piece (dangling link): process, in file order
            branches.setdefault(head, []).append(i)
        for members in branches.values():
            if any(_is_conversational(nodes[i]) for i in members):
                for i in members:
                    nodes[i].abandoned = True

    def _mark_repeats(self) -> None:
        seen_records: set[str] = set()
        seen_messages: set[tuple[str, str, str]] = set()
        for line in self._good(self.main) + [ln for t in self.transcripts.values() for ln in self._good(t.lines)]:
            whole = json.dumps(line.value, sort_keys=True)
            if whole in seen_records:
                line.repeated = True
            seen_records.add(whole)
            message = line.data.get("message")
            if line.type == "assistant" and isinstance(message, dict) and isinstance(message.get("id"), str):
                key = (line.file, message["id"], json.dumps(message.get("content"), sort_keys=True))
                if key in seen_messages:
                    line.repeated = True
                seen_messages.add(key)

    # --- rounds and claims -------------------------------------------------------------------

    def _stop_reasons(self) -> dict[str, str]:
        reasons: dict[str, str] = {}
        for line in self._good(self.main):
            message = line.data.get("message")
            if line.type == "assistant" and isinstance(message, dict) and isinstance(message.get("id"), str) \
                    and isinstance(message.get("stop_reason"), str):
                reasons[message["id"]] = message["stop_reason"]
        return reasons

    def _plan_rounds(self) -> None:
        stops = self._stop_reasons()
        round_index, open_round, acted = -1, False, False
        candidate: tuple[_Line, int | None, bool] | None = None  # (line, block, ended the turn)

        def close() -> None:
            if candidate is not None and candidate[2]:
                line, index, _ = candidate
                text = _block_text(line, index)
                if _claims_completion(text):
                    self.claims[(id(line), index)] = "stage" if open_round else "run"

        for line in self._good(self.main):
            if line.sidechain or line.abandoned or line.repeated:
                continue
            if line.type == "result":
                if candidate is not None and line.data.get("subtype") == "success" and line.data.get("is_error") is not True:
                    self.claims[(id(candidate[0]), candidate[1])] = "run"
                    candidate = None
                continue
            if line.type == "user":
                words = _classify_user(line)
                if words.prompt and (not open_round or acted):
                    close()
                    candidate = None
                    round_index += 1
                    open_round, acted = True, False
                    self.round_of[id(line)] = round_index
            elif line.type == "assistant" and not _is_synthetic(line):
                acted = True
                message = line.data["message"]
                ended = stops.get(line.rec.get("message.id", str, required=False),  # type: ignore[union-attr]
                                  message.get("stop_reason")) == "end_turn"
                for index, block, _ in _blocks(line):
                    if block["type"] == "text" and isinstance(block.get("text"), str) and block["text"].strip():
                        candidate = (line, index, ended)
                    elif block["type"] == "tool_use":
                        candidate = None
        close()

    # --- emitting ----------------------------------------------------------------------------

    def build(self) -> ImportedRun:
        self.emit()
        self._start()
        return self.b.build()

    def emit(self) -> None:
        for line in self.main:
            self._emit(line)
        for transcript in sorted(self.transcripts.values(), key=lambda t: (t.file or "~", t.agent)):
            if not transcript.emitted:
                self._emit_transcript(transcript, abandoned=False)
        for meta in self.orphan_metas:
            self.b.keep(meta, "subagent-meta")

    def _emit(self, line: _Line) -> None:
        b = self.b
        if line.rec is None:
            b.unparsed(line.file, line.line, line.text, line.bad or "unreadable")
            return
        if line.abandoned:
            self._abandon(line)
            return
        if line.repeated:
            b.keep(line.rec, f"{line.type}:repeated", actor=_actor_of_kept(line), ts=line.ts)
            return
        actor = self._actor(line)
        if line.type == "assistant":
            self._emit_assistant(line, actor)
        elif line.type == "user":
            self._emit_user(line, actor)
        elif line.type == "system":
            self._emit_system(line)
        elif line.type == "result":
            self._emit_result(line)
        if not self._cited(line):  # summary, file-history-snapshot, queue-operation, unknown types, ...
            b.keep(line.rec, line.type, actor=_actor_of_kept(line), ts=line.ts)

    def _cited(self, line: _Line) -> bool:
        return line.rec is not None and line.rec.first_seq is not None

    def _actor(self, line: _Line) -> str:
        if line.sidechain:
            return _subagent(line.agent or "sidechain")
        if line.type == "assistant" and _is_synthetic(line):
            return "harness"
        return "agent"

    def _abandon(self, line: _Line) -> None:
        assert line.rec is not None
        self.b.add("source_record", actor=_actor_of_kept(line), source=line.rec, ts=line.ts, stage=None,
                   record_type=f"abandoned_branch:{line.type}")
        if line.type == "assistant":
            for index, block, _ in _blocks(line):
                if block["type"] == "tool_use" and block["name"] in _DELEGATION_TOOLS:
                    transcript = self.transcript_of.get(block["id"])
                    if transcript is not None and not transcript.emitted:
                        self._emit_transcript(transcript, abandoned=True)

    # --- assistant ---------------------------------------------------------------------------

    def _emit_assistant(self, line: _Line, actor: str) -> None:
        b = self.b
        rec, ts = line.rec, line.ts
        assert rec is not None
        delegated: list[str] = []
        for index, block, path in _blocks(line):
            kind = block["type"]
            if kind == "text":
                text = rec.str(f"{path}.text")
                if not text.strip():
                    continue
                scope = self.claims.get((id(line), index))
                if scope is not None:
                    b.add("completion_claim", actor=actor, source=rec, ts=ts, claim=text, scope=scope)
                else:
                    b.add("message", actor=actor, source=rec, ts=ts, text=text, intent="plan" if _is_plan(text) else None)
            elif kind == "thinking":
                text = rec.str(f"{path}.thinking")
                if text.strip():
                    b.add("message", actor=actor, source=rec, ts=ts, text=text, intent="reasoning")
            elif kind == "tool_use":
                if self._emit_tool(line, _Call(line, index, block, path), actor):
                    delegated.append(block["id"])
        for call_id in delegated:
            transcript = self.transcript_of.get(call_id)
            if transcript is not None and not transcript.emitted:
                self._emit_transcript(transcript, abandoned=False)

    def _emit_tool(self, line: _Line, call: _Call, actor: str) -> bool:
        """One event (or a few) for a tool call; True when it was a delegation."""
        b = self.b
        rec, ts, path = line.rec, line.ts, call.path
        assert rec is not None
        name, call_id, args = call.block["name"], call.block["id"], call.block["input"]
        result = self._result_of(call)
        sources = [rec] + ([result.line.rec] if result is not None and result.line.rec is not None
                           and result.line.rec is not rec else [])
        text = _result_text(result.block) if result is not None else None
        failed = result is not None and result.block.get("is_error") is True
        outcome = _tool_use_result(result.line) if result is not None else {}
        if name == "Bash":
            command = rec.str(f"{path}.input.command")
            ending = bash_ending(command, args if isinstance(args, dict) else {},
                                 result.block if result is not None else None, text,
                                 _tool_use_result_raw(result.line) if result is not None else None)
            if not ending.ran:  # refused before running: no command, no file effect
                b.add("source_record", actor=actor, source=sources, ts=ts, record_type=f"tool_use:{name}:refused")
            else:
                b.command(command, actor=actor, source=sources, output=text, exit_code=ending.exit_code, ts=ts,
                          cwd=line.data.get("cwd") if isinstance(line.data.get("cwd"), str) else None)
        elif name in ("Read", "NotebookRead"):
            key = "file_path" if name == "Read" else "notebook_path"
            target = rec.str(f"{path}.input.{key}")
            if failed:
                b.add("source_record", actor=actor, source=sources, ts=ts, record_type=f"tool_use:{name}:error")
            else:
                b.add("file_read", actor=actor, source=sources, ts=ts, path=_slashes(target))
        elif name == "Grep":
            target = rec.get(f"{path}.input.path", str, required=False)
            if target and _file_like(target) and not failed:
                b.add("file_read", actor=actor, source=sources, ts=ts, path=_slashes(target))
            else:
                b.add("source_record", actor=actor, source=sources, ts=ts, record_type=f"tool_use:{name}")
        elif name == "Glob":
            pattern = rec.str(f"{path}.input.pattern")
            base = rec.get(f"{path}.input.path", str, required=False)
            target = posixpath.join(_slashes(base), _slashes(pattern)) if base else _slashes(pattern)
            b.add("file_read", actor=actor, source=sources, ts=ts, path=target)
        elif name in _EDIT_TOOLS:
            key = "notebook_path" if name == "NotebookEdit" else "file_path"
            target = rec.str(f"{path}.input.{key}")
            if failed:
                b.add("source_record", actor=actor, source=sources, ts=ts, record_type=f"tool_use:{name}:error")
            else:
                b.add("file_edit", actor=actor, source=sources, ts=ts, path=_slashes(target),
                      edit_kind=_edit_kind(name, args, outcome, text))
        elif name == "TodoWrite":
            todos = rec.get(f"{path}.input.todos", list, required=False, default=[])
            b.add("message", actor=actor, source=sources, ts=ts, text=_render_todos(todos), intent="plan")
        elif name == "ExitPlanMode":
            plan = rec.get(f"{path}.input.plan", str, required=False)
            b.add("message", actor=actor, source=sources, ts=ts, intent="plan",
                  text=plan if plan is not None else json.dumps(args, ensure_ascii=False, sort_keys=True))
        elif name in _DELEGATION_TOOLS:
            prompt = rec.str(f"{path}.input.prompt")
            transcript = self.transcript_of.get(call_id)
            meta = [transcript.meta] if transcript is not None and transcript.meta is not None else []
            context = [self.b.workspace_path(p) for p in _paths_in(prompt)] or None
            self.delegation_seq[call_id] = b.add(
                "delegation", actor=actor, source=[rec, *meta], ts=ts, worker_id=self.worker_of.get(call_id, call_id),
                instruction=prompt, context=context)
            return True
        else:
            b.add("source_record", actor=actor, source=sources, ts=ts, record_type=f"tool_use:{name}")
        return False

    # --- user ----------------------------------------------------------------------------------

    def _emit_user(self, line: _Line, actor: str) -> None:
        b = self.b
        rec, ts = line.rec, line.ts
        assert rec is not None
        if id(line) in self.consumed:
            return
        if line.data.get("isCompactSummary") is True:
            b.add("compaction", actor="harness", source=rec, ts=ts, summary=_user_text_of(line) or None)
            return
        for index, block, path in _blocks(line):
            if block["type"] != "tool_result":
                continue
            call_id = block["tool_use_id"]
            if call_id in self.delegation_seq:
                self._emit_report(line, call_id, block, actor)
        words = _classify_user(line)
        if line.sidechain:
            # A sub-agent's "user" is its lead: the prompt it starts from is the delegation's instruction.
            if words.user is not None or words.harness:
                b.keep(rec, "sidechain_prompt", ts=ts)
        else:
            if id(line) in self.round_of:
                title = words.user.strip().splitlines()[0][:120] if words.user and words.user.strip() else None
                b.begin_stage(self.round_of[id(line)], source=rec, ts=ts, title=title)
            if words.user is not None:
                b.add("message", actor="user", source=rec, ts=ts, text=words.user)
            if words.harness:
                b.add("message", actor="harness", source=rec, ts=ts, text="\n\n".join(words.harness))
        if not self._cited(line):
            kept = "tool_result" if any(blk["type"] == "tool_result" for _, blk, _ in _blocks(line)) else "user"
            b.keep(rec, kept, ts=ts, actor=_actor_of_kept(line))

    def _emit_report(self, line: _Line, call_id: str, block: dict[str, Any], actor: str) -> None:
        assert line.rec is not None
        worker = self.worker_of.get(call_id, call_id)
        state = _tool_use_result(line).get("status")
        if isinstance(state, str) and state.startswith("async"):
            return  # a background agent was launched: no report yet (the record is kept)
        text = _result_text(block, drop_trailer=True)
        evidence = [p for p in _paths_in(text) if _file_like(p)] or None
        self.b.add("worker_report", actor=_subagent(worker), source=line.rec, ts=line.ts,
                   parent=self.delegation_seq[call_id], worker_id=worker, text=text,
                   status=_report_status(state, block.get("is_error") is True), evidence=evidence)

    # --- system, result ----------------------------------------------------------------------

    def _emit_system(self, line: _Line) -> None:
        b = self.b
        rec, ts = line.rec, line.ts
        assert rec is not None
        subtype = line.data.get("subtype")
        if subtype in ("compact_boundary", "microcompact_boundary"):
            key = "compactMetadata" if subtype == "compact_boundary" else "microcompactMetadata"
            trigger = rec.get(f"{key}.trigger", str, required=False)
            before = rec.get(f"{key}.preTokens", int, required=False)
            saved = rec.get(f"{key}.tokensSaved", int, required=False)
            after = before - saved if before is not None and saved is not None and saved <= before else None
            summary = self._compact_summary(line)
            sources = [rec] + ([summary.rec] if summary is not None and summary.rec is not None else [])
            b.add("compaction", actor="user" if trigger == "manual" else "harness", source=sources, ts=ts,
                  tokens_before=before, tokens_after=after,
                  summary=(_user_text_of(summary) or None) if summary is not None else None)
        else:
            b.keep(rec, f"system:{subtype}" if isinstance(subtype, str) and subtype else "system", ts=ts)

    def _compact_summary(self, boundary: _Line) -> _Line | None:
        """The isCompactSummary record that follows a compact boundary (it is then not re-emitted)."""
        lines = self.main if boundary.file == self.primary else \
            next(t.lines for t in self.transcripts.values() if t.file == boundary.file)
        start = next(i for i, line in enumerate(lines) if line is boundary)
        for line in lines[start + 1:]:
            if line.rec is None or line.abandoned:
                continue
            if line.type == "user" and line.data.get("isCompactSummary") is True:
                parent = line.data.get("parentUuid")
                if parent in (None, boundary.uuid) or boundary.uuid is None:
                    self.consumed.add(id(line))
                    return line
                return None
            if line.type in _CONVERSATIONAL or (line.type == "system" and "compact" in str(line.data.get("subtype"))):
                return None
        return None

    def _emit_result(self, line: _Line) -> None:
        b = self.b
        rec = line.rec
        assert rec is not None
        subtype = rec.get("subtype", str, required=False)
        is_error = rec.get("is_error", bool, required=False)
        if subtype == "success" and is_error is not True:
            status = "completed"
        elif subtype == "success":
            status = "failed"
        elif subtype == "error_max_turns":
            status = "budget_exhausted"
        else:
            status = "error"
        b.end_stage(source=rec, ts=line.ts, status="completed" if status == "completed" else "failed")
        if self.end_run is not None:
            self.end_run(StreamEnd(rec, status, subtype, line.ts))
        else:
            b.add("run_ended", actor="harness", source=rec, ts=line.ts, status=status, reason=subtype)

    # --- sub-agent transcripts -----------------------------------------------------------------

    def _emit_transcript(self, transcript: _Transcript, *, abandoned: bool) -> None:
        transcript.emitted = True
        b = self.b
        if transcript.meta is not None and transcript.meta.first_seq is None and (
                abandoned or transcript.tool_use_id not in self.delegation_seq):
            b.add("source_record", actor="harness", source=transcript.meta, stage=None if abandoned else b.stage,
                  record_type="abandoned_branch:subagent-meta" if abandoned else "subagent-meta")
        for line in transcript.lines:
            if abandoned and line.rec is not None:
                line.abandoned = True
                self._abandon(line)
            else:
                self._emit(line)

    # --- provenance ------------------------------------------------------------------------------

    def _start(self) -> None:
        found = self.provenance()
        self.b.start(harness="claude-code", harness_version=found.harness_version, model=found.model,
                     labels=found.labels, ts=self._good(self.main)[0].ts if found.first is not None else None,
                     source=found.first if found.first is not None else ())

    def provenance(self) -> StreamProvenance:
        good = self._good(self.main)
        everything = good + [ln for t in self.transcripts.values() for ln in self._good(t.lines)]
        models: list[str] = []
        for line in [ln for ln in good if not ln.sidechain and not ln.abandoned] + everything:
            message = line.data.get("message")
            model = message.get("model") if isinstance(message, dict) and line.type == "assistant" else None
            if line.type == "system" and line.data.get("subtype") == "init":
                model = line.data.get("model")
            if isinstance(model, str) and model and model != "<synthetic>" and model not in models:
                models.append(model)
        labels: dict[str, str] = {"session_id": self.session_id}
        cwd = self._first_str("cwd")
        if cwd:
            labels["cwd"] = cwd
        branch = self._first_str("gitBranch")
        if branch:
            labels["git_branch"] = branch
        if self.standalone_agent is not None:
            labels["agent_id"] = self.standalone_agent
        if len(models) > 1:
            labels["models"] = ",".join(sorted(models))
        labels.update(_usage_totals(everything))
        abandoned = sum(1 for ln in everything if ln.abandoned)
        if abandoned:
            labels["abandoned_records"] = str(abandoned)
        if self.result_line is not None:
            for key in ("num_turns", "duration_ms", "total_cost_usd"):
                value = self.result_line.data.get(key)
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    labels[key] = _number_text(value)
        version = self._first_str("version") or self._first_str("claude_code_version")
        first = good[0].rec if good else None
        return StreamProvenance(version, models[0] if models else None, labels, first)


# --- helpers ---------------------------------------------------------------------------------------


def _shape_problem(value: Any) -> str | None:
    """Why a parsed line cannot be read as a Claude Code record (None when it can)."""
    if not isinstance(value, dict):
        return f"not a JSON object: got {_describe(value)}"
    kind = value.get("type")
    if not isinstance(kind, str) or not kind:
        return "type: missing" if kind is None else f"type: expected a string, got {_describe(kind)}"
    if kind not in _CONVERSATIONAL:
        return None
    message = value.get("message")
    if not isinstance(message, dict):
        return "message: missing" if message is None else f"message: expected an object, got {_describe(message)}"
    content = message.get("content")
    if content is None:
        return "message.content: missing"
    if isinstance(content, str):
        return None
    if not isinstance(content, list):
        return f"message.content: expected a string or an array, got {_describe(content)}"
    for index, block in enumerate(content):
        if not isinstance(block, dict):
            return f"message.content.{index}: expected an object, got {_describe(block)}"
        if not isinstance(block.get("type"), str):
            return f"message.content.{index}.type: missing"
    return None


def _describe(value: Any) -> str:
    names = {str: "a string", int: "an integer", bool: "a boolean", dict: "an object", list: "an array",
             float: "a number", type(None): "null"}
    text = repr(value)
    return f"{names.get(type(value), type(value).__name__)} {text[:40] + '...' if len(text) > 40 else text}"


def _blocks(line: _Line) -> list[tuple[int | None, dict[str, Any], str]]:
    """(index, block, field path) of a user/assistant record's content blocks."""
    content = line.data["message"]["content"]
    if isinstance(content, str):
        return [(None, {"type": "text", "text": content}, "message.content")]
    return [(i, block, f"message.content.{i}") for i, block in enumerate(content)]


def _block_text(line: _Line, index: int | None) -> str:
    for i, block, _ in _blocks(line):
        if i == index:
            return block.get("text") if isinstance(block.get("text"), str) else ""
    return ""


def _result_text(block: dict[str, Any], *, drop_trailer: bool = False) -> str:
    content = block.get("content")
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts = [item["text"] for item in content
             if isinstance(item, dict) and item.get("type") == "text" and isinstance(item.get("text"), str)]
    if drop_trailer:
        parts = [p for p in parts if not _AGENT_TRAILER.match(p)]
    return "\n".join(parts)


def _tool_use_result(line: _Line) -> dict[str, Any]:
    """The structured tool result on a user record (``tool_use_result`` in stream-json)."""
    value = _tool_use_result_raw(line)
    return value if isinstance(value, dict) else {}


def _tool_use_result_raw(line: _Line) -> Any:
    """The tool result on a user record as logged: an object, or Claude Code's error string."""
    return line.data.get("toolUseResult", line.data.get("tool_use_result"))


def _user_text_of(line: _Line) -> str:
    parts = [block["text"] for _, block, _ in _blocks(line)
             if block["type"] == "text" and isinstance(block.get("text"), str)]
    return "\n\n".join(parts)


def _classify_user(line: _Line) -> _UserText:
    """Whose words a user record holds: the user's, the harness's injected text, or both."""
    text = _user_text_of(line)
    if not text.strip():
        return _UserText()
    if line.data.get("isMeta") is True or line.data.get("isCompactSummary") is True:
        return _UserText(harness=[text.strip()])
    stripped = text.lstrip()
    if stripped.startswith(_HARNESS_PREFIXES):
        return _UserText(harness=[text.strip()])
    if stripped.startswith(_USER_COMMAND_PREFIXES):
        return _UserText(user=text.strip(), prompt=False)
    pieces = _REMINDER.split(text)  # own text, reminder, own text, reminder, ...
    reminders = pieces[1::2]
    own = "\n".join(part.strip() for part in pieces[0::2] if part.strip())
    return _UserText(user=own or None, prompt=bool(own), harness=reminders)


def _is_conversational(line: _Line) -> bool:
    if line.type in _CONVERSATIONAL:
        return True
    return line.type == "system" and line.data.get("subtype") == "compact_boundary"


def _is_genuine_root(line: _Line) -> bool:
    """A record that starts a conversation: no parent, not a compaction or its summary."""
    data = line.data
    return (data.get("parentUuid") is None and data.get("logicalParentUuid") is None and line.type == "user"
            and data.get("isCompactSummary") is not True and data.get("isMeta") is not True)


def _is_synthetic(line: _Line) -> bool:
    message = line.data.get("message")
    return line.data.get("isApiErrorMessage") is True or (isinstance(message, dict) and message.get("model") == "<synthetic>")


def _actor_of_kept(line: _Line) -> str:
    if line.type == "assistant":
        if _is_synthetic(line):
            return "harness"
        return _subagent(line.agent or "sidechain") if line.sidechain else "agent"
    if line.type == "user" and not line.sidechain:
        content = line.data["message"]["content"]
        if isinstance(content, list) and any(block["type"] == "tool_result" for block in content):
            return "harness"
        words = _classify_user(line)
        return "user" if words.user is not None else "harness"
    return "harness"


def _subagent(agent: str) -> str:
    clean = _ACTOR_ID.sub("-", agent)[:128]
    if not clean[:1].isalnum():
        clean = ("a" + clean)[:128]
    return f"subagent:{clean}"


def _slashes(path: str) -> str:
    """Windows paths (``e:\\work\\x.py``) spelled with ``/`` so the workspace root strips them."""
    if re.match(r"^[A-Za-z]:[\\/]", path) or ("\\" in path and "/" not in path):
        return path.replace("\\", "/")
    return path


def _file_like(path: str) -> bool:
    last = path.rstrip("/").rsplit("/", 1)[-1]
    return not path.endswith("/") and "." in last.strip(".") and not any(c in path for c in "*?{}")


def _paths_in(text: str) -> list[str]:
    """Paths a prompt or report names: backticked paths, and words with a slash or a known
    file extension (URLs, dates, numbers and slash-words like and/or are not paths)."""
    found: list[str] = []
    for m in _PATH_TOKEN.finditer(text):
        token = (m.group(1) or m.group(2) or "").rstrip(".,:;)!?'\"")
        token = re.sub(r":\d+(?::\d+)?$", "", token)  # file.py:12
        if not token or "://" in text[m.start():m.end() + 3] or token.startswith(("www.", "http")):
            continue
        if token.lower() in _SLASH_WORDS or "/" not in token and not _has_extension(token):
            continue
        if all(part.isdigit() for part in token.strip("/").split("/") if part):
            continue
        if "/" in token and token.strip("/") == "":
            continue
        if m.group(1) is None and re.fullmatch(r"[A-Za-z]+/[A-Za-z]+", token) and token.lower() == token and \
                not _looks_like_dir_pair(token):
            continue
        if token not in found:
            found.append(token)
    return found


def _looks_like_dir_pair(token: str) -> bool:
    """``src/web`` is a path, ``this/that`` prose: a two-word slash token is a path when its
    first part is a usual top-level directory."""
    return token.split("/", 1)[0] in {"src", "lib", "app", "apps", "test", "tests", "docs", "doc", "pkg", "cmd",
                                      "internal", "scripts", "bin", "config", "packages", "include", "examples",
                                      "engine", "core", "api", "web", "server", "client", "tools", "build", "spec"}


def _has_extension(token: str) -> bool:
    last = token.rsplit("/", 1)[-1]
    if "." not in last.strip("."):
        return False
    extension = last.rsplit(".", 1)[-1].lower()
    return extension in _EXTENSIONS


def _claims_completion(text: str) -> bool:
    for m in _CLAIM.finditer(text):
        if not _NEGATED.search(text[max(0, m.start() - 40):m.start()]):
            return True
    return False


def _is_plan(text: str) -> bool:
    if _PLAN.match(text):
        return True
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return bool(lines) and re.match(r"^1[.)]\s", lines[0]) is not None and any(re.match(r"^2[.)]\s", ln) for ln in lines)


def _edit_kind(name: str, args: dict[str, Any], outcome: dict[str, Any], text: str | None) -> str:
    if outcome.get("type") in ("create", "update"):
        return "create" if outcome["type"] == "create" else "modify"
    if text and text.lstrip().startswith("File created successfully"):
        return "create"
    if name == "Write":
        return "create"
    if name == "MultiEdit":
        edits = args.get("edits")
        if isinstance(edits, list) and edits and isinstance(edits[0], dict) and edits[0].get("old_string") == "":
            return "create"
    if name == "Edit" and args.get("old_string") == "":
        return "create"
    return "modify"


def _render_todos(todos: list[Any]) -> str:
    lines = []
    for todo in todos:
        if isinstance(todo, dict):
            status = todo.get("status") if isinstance(todo.get("status"), str) else "?"
            content = todo.get("content") if isinstance(todo.get("content"), str) else json.dumps(todo, sort_keys=True)
            lines.append(f"[{status}] {content}")
        else:
            lines.append(todo if isinstance(todo, str) else json.dumps(todo, sort_keys=True))
    return "\n".join(lines) if lines else "(empty todo list)"


def _report_status(state: Any, is_error: bool) -> str | None:
    if state in ("completed", "success", "succeeded"):
        return "success"
    if state in ("failed", "error") or is_error:
        return "failure"
    if state in ("interrupted", "killed", "cancelled", "canceled", "aborted", "max_turns"):
        return "partial"
    return None


def _usage_totals(lines: list[_Line]) -> dict[str, str]:
    """Token totals, each API message (message.id) counted once."""
    per_message: dict[str, dict[str, int]] = {}
    anonymous: list[dict[str, int]] = []
    for line in lines:
        message = line.data.get("message")
        if line.type != "assistant" or not isinstance(message, dict) or not isinstance(message.get("usage"), dict):
            continue
        usage = {k: v for k, v in message["usage"].items()
                 if k in _USAGE_FIELDS and isinstance(v, int) and not isinstance(v, bool)}
        if isinstance(message.get("id"), str):
            seen = per_message.setdefault(message["id"], {})
            for k, v in usage.items():
                seen[k] = max(seen.get(k, 0), v)
        else:
            anonymous.append(usage)
    entries = list(per_message.values()) + anonymous
    if not entries:
        return {}
    totals = {"api_messages": str(len(entries))}
    for key in _USAGE_FIELDS:
        values = [e[key] for e in entries if key in e]
        if values:
            totals[key] = str(sum(values))
    return totals


def _number_text(value: int | float) -> str:
    return decimal_text(value)
