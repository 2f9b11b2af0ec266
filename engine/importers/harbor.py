"""Harbor trial directories and ATIF trajectories, read as procgrade events.

Two importers share one ATIF reader:

``harbor``
    A Harbor trial directory ``<task>__<id>/`` (found by its ``result.json``):
    provenance from ``result.json``/``config.json``, the agent's behaviour from
    ``agent/trajectory.json`` (ATIF, with its continuation and sub-agent files next to
    it), the harness's own agent commands from ``agent/setup/`` and
    ``agent/command-<i>/``, then the outcome: ``verifier_result.rewards`` (or
    ``verifier/reward.txt`` / ``reward.json``) as an ``acceptance_verdict``, one
    ``test_result`` per test of ``verifier/ctrf.json``, and ``exception_info`` /
    ``exception.txt`` as the verdict's status (``AgentTimeoutError`` -> ``timeout``,
    any other exception without a reward -> ``infra_error``) and a ``run_ended``.
``atif``
    A standalone ATIF trajectory file (``ATIF-v1.0`` .. ``v1.8``): one run per root
    trajectory, continuation and sub-agent files claimed with it.

How an ATIF trajectory maps (decisions worth knowing when reading a score):

- Steps are read in ``step_id`` order of the file (file order). ``source: user`` is a
  ``user`` message, ``system`` a ``harness`` message, ``agent`` a message of the agent
  (``reasoning_content`` first, as intent ``reasoning``). Terminus-2 labels every reply
  "Analysis: ... Plan: ...", so its replies carry intent ``plan``; other agents' text
  only when it starts with a plan label or a numbered list.
- Tool calls: shell tools (``bash_command`` keystrokes, ``bash``, ``execute_bash``,
  ``Bash``, ``shell``, ...) become commands through ``RunBuilder.command`` (test runs
  and shell file effects included); observation results are paired by
  ``source_call_id``. Terminus-2 records one result for the whole step (no
  ``source_call_id``): every command of the step gets that output, and an exit code
  only when the screen text shows one (then only the step's last command). The
  directory a command ran in is read from the terminal prompt that echoes it (or the
  last prompt before it), so relative paths after a ``cd`` resolve.
  Empty keystrokes (Terminus "wait" polls) are kept as ``source_record`` ``wait``,
  not counted as commands. File tools (``str_replace_editor``, ``Read``, ``Edit``,
  ``Write``, ...) become ``file_read``/``file_edit``; ``think`` a reasoning message;
  unknown tools a ``source_record`` ``tool_call:<name>`` of the agent.
- Terminus-2's ``raw_content`` mode (linear history) records the model's raw JSON
  reply without ``tool_calls``: when the whole message is a Terminus JSON reply its
  ``commands`` and ``task_complete`` are read exactly as the parsed tool calls would be.
- Completion: ``mark_task_complete`` (or ``task_complete: true``) is answered by the
  harness with "Are you sure you want to mark the task as complete?" the first time;
  that request is kept as ``source_record`` ``completion_request`` (actor agent), and
  only the confirmed one (the harness did not ask again) is the run's
  ``completion_claim`` (scope ``run``): the claim is one decision, counted once.
  ``finish``/``submit`` tools and the mini-swe-agent submit marker are claims too.
- Results the harness sent back without a command to attach them to (parser errors
  for invalid JSON replies, the completion confirmation question) are ``harness``
  messages.
- Continuations (``continued_trajectory_ref``, ``trajectory.cont-N.json``) are read
  into the same run. Steps marked ``is_copied_context`` are never emitted again as
  behaviour: each is kept as ``source_record`` ``copied_context`` (actor harness).
  The prompts that rebuild the context after a summarization (the handoff, the
  re-sent task) are ``harness`` messages although ATIF labels them ``user``, and so are
  the ``user`` turns of a sub-agent's trajectory (the lead's instruction, relayed).
- A ``system`` step whose results reference summarization sub-trajectories is the
  harness compacting the context on its own: one ``compaction`` (actor harness,
  ``summary`` = the summarizer's summary), and the summarizer's own steps are
  ``harness`` messages (intents summary/question/answer), because the model did not
  choose to delegate. Sub-trajectories referenced from an *agent* step (the model
  called a tool that delegated) are a ``delegation`` by the agent, the
  sub-agent's steps as actor ``subagent:<session or trajectory id>`` inline at that
  point, and a ``worker_report``. Embedded v1.7 ``subagent_trajectories`` nobody
  references are read after the root's steps, in their array order.
- Workspace root: the working directory of the first terminal prompt
  (``root@host:/app#``), else ``/app`` (the Harbor / Terminal-Bench task convention).
"""

from __future__ import annotations

import json
import posixpath
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from procgrade.engine.errors import InputError
from procgrade.engine.exact import decimal_text
from procgrade.engine.importers.base import Importer, Unit, register
from procgrade.engine.importers.building import ImportedRun, Record, RunBuilder, timestamp
from procgrade.engine.importers.shell import exit_code_from_text
from procgrade.engine.importers.source_tree import SourceTree, strict_json

__all__ = ["HarborImporter", "AtifImporter", "AtifReader", "reward_text", "actor_id"]

DEFAULT_WORKSPACE = "/app"
_ATIF_HEAD = re.compile(rb'"schema_version"\s*:\s*"ATIF-v')
_PROMPT_CWD = re.compile(r"(?m)^[\w.-]+@[\w.-]+:(/[^\s#$]*)[#$] ")
_PROMPT_LINE = re.compile(r"(?m)^[\w.-]+@[\w.-]+:(/[^\s#$]*|~[^\s#$]*)[#$] ?(.*)$")
_CONFIRM_QUESTION = "are you sure you want to mark the task as complete"
_SUBMIT_MARKER = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
_EXIT_CODE_TAG = re.compile(r"(?m)^\[exit_code\]\s*(-?\d+)\s*$")
_PLAN_LABEL = re.compile(r"(?m)^\s*(?:#+\s*)?plan\s*:?\s*\S", re.IGNORECASE)
_NUMBERED_START = re.compile(r"^\s*1[.)]\s+\S[^\n]*\n\s*2[.)]\s+\S")
_ACTOR_ID = re.compile(r"[^A-Za-z0-9._@/+-]")

_SHELL_TOOLS = {"bash", "execute_bash", "shell", "exec_command", "run_command", "run_shell_command",
                "terminal", "execute_command", "local_shell", "container.exec", "cmd_run"}
_READ_TOOLS = {"read", "read_file", "view_file", "notebookread", "open_file"}
_EDIT_TOOLS = {"edit", "multiedit", "notebookedit", "edit_file", "apply_edit", "replace"}
_WRITE_TOOLS = {"write", "write_file", "create_file"}
_EDITOR_TOOLS = {"str_replace_editor", "file_editor", "str_replace_based_edit_tool", "text_editor", "edit_tool"}
_DELEGATION_TOOLS = {"task", "agent", "delegate", "delegate_task", "spawn_agent", "dispatch_agent", "subagent"}
_FINISH_TOOLS = {"finish", "submit", "attempt_completion", "task_complete"}


# --- small helpers shared with terminal_bench.py ---------------------------------------------


def reward_text(value: Any, rec: Record, field_name: str) -> str:
    """A verifier's number as exact reward text: 1.0 -> "1", 0.50 -> "0.5"."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise rec.error(field_name, f"expected a number, got {type(value).__name__} {value!r}"[:120])
    try:
        return decimal_text(value)
    except ValueError as exc:
        raise rec.error(field_name, f"expected a finite number: {exc}"[:120]) from None


def actor_id(raw: str) -> str:
    """An id usable in ``subagent:<id>`` (letters, digits and ``._@/+-``, at most 128)."""
    cleaned = _ACTOR_ID.sub("_", raw).lstrip("._@/+-")[:128]
    return cleaned or "subagent"


def _content_text(value: Any) -> str:
    """ATIF message/observation content: a string, or (v1.6+) a list of content parts."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = []
        for part in value:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict):
                if isinstance(part.get("text"), str):
                    parts.append(part["text"])
                else:
                    parts.append(f"[{part.get('type', 'part')}]")
        return "\n".join(parts)
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _json_head(tree: SourceTree, rel: str, limit: int = 4096) -> bytes:
    try:
        return tree.head(rel, limit)
    except InputError:
        return b""


def is_atif(doc: Any) -> bool:
    return isinstance(doc, dict) and isinstance(doc.get("schema_version"), str) and doc["schema_version"].startswith("ATIF-")


def sniff_atif(tree: SourceTree, rel: str) -> bool:
    """An ATIF document, or a file that says it is one but does not parse (read() then
    reports where it breaks)."""
    if not rel.endswith(".json"):
        return False
    doc = tree.try_json(rel)
    if doc is not None:
        return is_atif(doc)
    return bool(_ATIF_HEAD.search(_json_head(tree, rel)))


def _trajectory_prefix(name: str) -> str:
    """``x.trajectory.json`` -> ``x.``: golden files keep their sub-trajectories as
    ``x.trajectory.summarization-1-summary.json`` while the reference names
    ``trajectory.summarization-1-summary.json``."""
    m = re.match(r"^(.*?)trajectory\.(?:.*\.)?json$", name)
    return m.group(1) if m else ""


def _linked_path(tree: SourceTree, from_file: str, root_file: str, path: str) -> str | None:
    """The tree file a trajectory reference names, looked up next to ``from_file``."""
    folder = posixpath.dirname(from_file)
    candidates = []
    for base in (posixpath.basename(root_file), posixpath.basename(from_file)):
        prefix = _trajectory_prefix(base)
        if prefix and not posixpath.basename(path).startswith(prefix):
            candidates.append(posixpath.join(posixpath.dirname(path), prefix + posixpath.basename(path)))
    candidates.append(path)
    for candidate in candidates:
        rel = tree.join(folder, candidate) if folder else tree.join(candidate)
        if rel.startswith("../") or rel == ".." or rel.startswith("/"):
            continue
        if tree.exists(rel):
            return rel
    return None


def linked_trajectory_files(tree: SourceTree, rel: str) -> list[str]:
    """Continuation and sub-agent files a trajectory links to, transitively (never raises)."""
    found: list[str] = []
    seen = {rel}
    queue = [rel]
    while queue:
        current = queue.pop(0)
        doc = tree.try_json(current)
        if not isinstance(doc, dict):
            continue
        for path in _referenced_paths(doc):
            target = _linked_path(tree, current, rel, path)
            if target and target not in seen:
                seen.add(target)
                found.append(target)
                queue.append(target)
    return found


def _list(value: Any) -> list[Any]:
    """``value`` when it is a list, else [] (sniffing and look-ahead never raise; read() reports the field)."""
    return value if isinstance(value, list) else []


def _referenced_paths(doc: dict[str, Any]) -> list[str]:
    paths: list[str] = []
    if isinstance(doc.get("continued_trajectory_ref"), str):
        paths.append(doc["continued_trajectory_ref"])
    docs = [doc]
    while docs:
        current = docs.pop(0)
        for step in _list(current.get("steps")):
            observation = step.get("observation") if isinstance(step, dict) else None
            results = observation.get("results") if isinstance(observation, dict) else None
            for result in _list(results):
                refs = result.get("subagent_trajectory_ref") if isinstance(result, dict) else None
                for ref in _list(refs):
                    if isinstance(ref, dict) and isinstance(ref.get("trajectory_path"), str):
                        paths.append(ref["trajectory_path"])
        for sub in _list(current.get("subagent_trajectories")):
            if isinstance(sub, dict):
                docs.append(sub)
    return paths


def workspace_of(doc: Any) -> str:
    """The task's working directory: the cwd of the first terminal prompt in the
    observations, else the Harbor convention ``/app``."""
    if isinstance(doc, dict):
        for step in _list(doc.get("steps")):
            observation = step.get("observation") if isinstance(step, dict) else None
            results = observation.get("results") if isinstance(observation, dict) else None
            for result in _list(results):
                if isinstance(result, dict):
                    m = _PROMPT_CWD.search(_content_text(result.get("content")))
                    if m and m.group(1) not in ("", "/"):
                        return m.group(1).rstrip("/")
    return DEFAULT_WORKSPACE


def _terminus_reply(text: str) -> dict[str, Any] | None:
    """A Terminus JSON reply recorded raw (``raw_content`` mode): the whole message is one
    JSON object with a ``commands`` list of ``{keystrokes}`` objects."""
    stripped = text.strip()
    if not (stripped.startswith("{") and stripped.endswith("}")):
        return None
    try:
        value = strict_json(stripped)  # no nesting deep enough to reach a recursion limit
    except ValueError:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("commands"), list):
        return None
    if not all(isinstance(c, dict) and isinstance(c.get("keystrokes"), str) for c in value["commands"]):
        return None
    return value


def _is_plan(text: str, terminus: bool) -> bool:
    if terminus:
        return bool(re.search(r"(?m)^Plan:\s*\S", text))
    head = text.lstrip()[:2000]
    return bool(re.match(r"(?i)(?:#+\s*)?plan\b\s*:?", head)) or bool(_NUMBERED_START.match(head))


def _role_of(name: str) -> str | None:
    """summary / questions / answers: which part of a Terminus summarization a
    sub-trajectory is (from its path or session id)."""
    stem = name.lower().removesuffix(".json")
    for role in ("summary", "questions", "answers"):
        if stem.endswith(role):
            return role
    return None


_ROLE_INTENT = {"summary": "summary", "questions": "question", "answers": "answer"}


# --- the ATIF reader -------------------------------------------------------------------------


@dataclass
class _Doc:
    """One trajectory document: a file's root, or an embedded sub-trajectory."""

    file: str
    prefix: str  # record label prefix: "" or "subagent_trajectories[0]."
    data: dict[str, Any]
    header: Record
    root_file: str
    records: list[Record] | None = None  # the steps, registered (redacted) on first use


@dataclass
class _StepContext:
    actor: str                 # agent, subagent:<id>, or harness (summarizer steps)
    terminus: bool = False
    role: str | None = None    # summarization part when actor is harness


@dataclass
class _Call:
    index: int
    call_id: str
    name: str
    args: dict[str, Any]
    raw_reply: bool = False    # read from a Terminus raw JSON reply


@dataclass
class AtifReader:
    """Emits one ATIF trajectory (with continuations and sub-trajectories) into a builder."""

    tree: SourceTree
    builder: RunBuilder
    handoff_pending: bool = False
    cwd: str | None = None  # the shell's directory, from the last terminal prompt seen
    compactions: int = 0
    _loaded: set[str] = field(default_factory=set)
    _embedded: dict[str, tuple[_Doc, int]] = field(default_factory=dict)
    _embedded_order: list[tuple[str, int, str]] = field(default_factory=list)  # (key, index, parent prefix)
    _embedded_done: set[str] = field(default_factory=set)

    # --- loading -------------------------------------------------------------------------------

    def load(self, rel: str, root_file: str | None = None) -> _Doc:
        """A trajectory file's root document, its header registered as a record."""
        data = self.tree.json(rel)
        self._loaded.add(rel)
        return self._doc(rel, "", data, root_file or rel)

    def _doc(self, file: str, prefix: str, data: Any, root_file: str) -> _Doc:
        label = prefix.rstrip(".") or "root"
        if not isinstance(data, dict):
            raise InputError(self.tree.label(file), label, None,
                             f"expected an ATIF trajectory object, got {type(data).__name__}")
        header_data = {k: v for k, v in data.items() if k not in ("steps", "subagent_trajectories")}
        ident = data.get("trajectory_id") if isinstance(data.get("trajectory_id"), str) else data.get("session_id")
        header = self.builder.record(file, label, header_data, native_id=ident if isinstance(ident, str) else None)
        version = header.str("schema_version")
        if not version.startswith("ATIF-"):
            raise header.error("schema_version", f"expected ATIF-v1.x, got {version!r}")
        header.obj("agent")
        header.str("agent.name")
        header.opt_str("agent.version")
        header.opt_str("agent.model_name")
        header.opt_str("session_id")
        header.opt_str("trajectory_id")
        header.opt_str("continued_trajectory_ref")
        steps = data.get("steps")
        if not isinstance(steps, list):
            raise header.error("steps", "missing" if steps is None else f"expected an array, got {type(steps).__name__}")
        if not steps:
            raise header.error("steps", "must hold at least one step")
        doc = _Doc(file, prefix, data, header, root_file)
        subs = data.get("subagent_trajectories")
        if subs is not None:
            if not isinstance(subs, list):
                raise header.error("subagent_trajectories", f"expected an array, got {type(subs).__name__}")
            for index, sub in enumerate(subs):
                key = None
                if isinstance(sub, dict):
                    key = sub.get("trajectory_id") if isinstance(sub.get("trajectory_id"), str) else sub.get("session_id")
                key = key if isinstance(key, str) else f"{file}#{prefix}{index}"
                if key not in self._embedded:
                    self._embedded[key] = (doc, index)
                    self._embedded_order.append((key, index, prefix))
        return doc

    def _embedded_doc(self, key: str) -> _Doc | None:
        if key not in self._embedded or key in self._embedded_done:
            return None
        parent, index = self._embedded[key]
        self._embedded_done.add(key)
        sub = parent.data["subagent_trajectories"][index]
        return self._doc(parent.file, f"{parent.prefix}subagent_trajectories[{index}].", sub, parent.root_file)

    def _resolve(self, doc: _Doc, ref: dict[str, Any]) -> _Doc | None:
        """The sub-trajectory a reference names: embedded (by trajectory or session id),
        else a file next to ``doc``; None when absent (dangling references are tolerated)
        or already read into this run."""
        for key in (ref.get("trajectory_id"), ref.get("session_id")):
            if isinstance(key, str) and key in self._embedded:
                return self._embedded_doc(key)
        path = ref.get("trajectory_path")
        if isinstance(path, str) and path:
            rel = _linked_path(self.tree, doc.file, doc.root_file, path)
            if rel is not None and rel not in self._loaded:
                return self.load(rel, doc.root_file)
        return None

    # --- provenance ----------------------------------------------------------------------------

    @staticmethod
    def provenance(doc: _Doc) -> dict[str, Any]:
        header = doc.header
        agent = header.obj("agent")
        extra = agent.get("extra")
        labels = {}
        for key in ("session_id", "trajectory_id", "schema_version"):
            if isinstance(header.data.get(key), str):
                labels[key] = header.data[key]
        first_ts = None
        for step in doc.data["steps"]:
            if isinstance(step, dict) and step.get("timestamp") is not None:
                first_ts = timestamp(step.get("timestamp"))
                break
        return {"harness": agent["name"], "harness_version": agent.get("version"), "model": agent.get("model_name"),
                "model_settings": extra if isinstance(extra, dict) and extra else None, "labels": labels,
                "ts": first_ts}

    # --- the run -------------------------------------------------------------------------------

    def read_root(self, doc: _Doc, actor: str = "agent") -> None:
        """The root trajectory's steps, its continuations, then unreferenced embedded
        sub-trajectories."""
        current: _Doc | None = doc
        while current is not None:
            self.emit_steps(current, _StepContext(actor, terminus=self._is_terminus(current)))
            ref = current.data.get("continued_trajectory_ref")
            if not isinstance(ref, str) or not ref:
                break
            rel = _linked_path(self.tree, current.file, doc.root_file, ref)
            if rel is None:
                raise current.header.error("continued_trajectory_ref", f"no file {ref!r} next to the trajectory")
            if rel in self._loaded:
                raise current.header.error("continued_trajectory_ref", f"{ref!r} continues a trajectory already read (a loop)")
            nxt = self.load(rel, doc.root_file)
            if self.compactions == 0:
                # A continuation without a recorded summarization still means the context was rebuilt.
                self.builder.add("compaction", actor="harness", source=nxt.header)
            else:
                self.builder.keep(nxt.header, "continuation", actor="harness")
            self.compactions = 0
            self.handoff_pending = True
            current = nxt
        position = 0
        while position < len(self._embedded_order):  # nested embedded trajectories join the queue
            key = self._embedded_order[position][0]
            position += 1
            sub = self._embedded_doc(key)
            if sub is not None:
                worker = actor_id(key)
                self.builder.keep(sub.header, "subagent_trajectory", actor="harness")
                self.emit_steps(sub, _StepContext(f"subagent:{worker}", terminus=self._is_terminus(sub)))

    @staticmethod
    def _is_terminus(doc: _Doc) -> bool:
        agent = doc.data.get("agent")
        name = agent.get("name") if isinstance(agent, dict) else None
        return isinstance(name, str) and name.lower().startswith("terminus")

    def step_records(self, doc: _Doc) -> list[Record]:
        """The document's steps as records (registered, so redacted, once)."""
        if doc.records is None:
            doc.records = []
            for index, raw in enumerate(doc.data["steps"]):
                native = raw.get("step_id") if isinstance(raw, dict) else None
                rec = self.builder.record(doc.file, f"{doc.prefix}steps[{index}]", raw,
                                          native_id=native if isinstance(native, (int, str)) else None)
                if not isinstance(raw, dict):
                    raise rec.error(None, f"expected a step object, got {type(raw).__name__}")
                doc.records.append(rec)
        return doc.records

    def emit_steps(self, doc: _Doc, ctx: _StepContext) -> None:
        for rec in self.step_records(doc):
            self._step(doc, rec, ctx)

    def _step(self, doc: _Doc, rec: Record, ctx: _StepContext) -> None:
        b = self.builder
        rec.int("step_id")
        source = rec.str("source")
        if source not in ("system", "user", "agent"):
            raise rec.error("source", f"expected system, user or agent, got {source!r}")
        text = _content_text(rec.get("message", (str, list)))
        ts = timestamp(rec.data.get("timestamp"))
        results = self._results(rec)
        calls = self._calls(rec)
        if rec.get("is_copied_context", bool, required=False):
            b.keep(rec, "copied_context", actor="harness", ts=ts)
            return
        start = b.next_seq
        if source == "user":
            # Only the root agent's user turns are the user's: a sub-agent's "user" turn is the
            # lead's instruction relayed by the harness, and post-compaction prompts are its handoff.
            actor = "user" if ctx.actor == "agent" and not self.handoff_pending else "harness"
            b.add("message", actor=actor, source=rec, ts=ts, text=text)
            self._plain_results(rec, results, ts)
        elif source == "system":
            refs = [(i, r) for i, r in enumerate(results) if r.get("subagent_trajectory_ref")]
            if refs and ctx.actor != "harness":
                self._system_refs(doc, rec, text, refs, ts)
            else:
                b.add("message", actor="harness", source=rec, ts=ts, text=text)
            self._plain_results(rec, [r for r in results if not r.get("subagent_trajectory_ref")], ts)
        else:
            self.handoff_pending = False
            self._agent_step(doc, rec, ctx, text, results, calls, ts)
        if b.next_seq == start:
            b.keep(rec, "step", actor="harness" if source != "agent" else ctx.actor, ts=ts)

    def _results(self, rec: Record) -> list[dict[str, Any]]:
        observation = rec.get("observation", (dict, type(None)), required=False)
        if not observation:
            return []
        results = rec.get("observation.results", list, required=False, default=[]) or []
        for i, result in enumerate(results):
            if not isinstance(result, dict):
                raise rec.error(f"observation.results.{i}", f"expected an object, got {type(result).__name__}")
            rec.get(f"observation.results.{i}.source_call_id", (str, type(None)), required=False)
            refs = rec.get(f"observation.results.{i}.subagent_trajectory_ref", (list, type(None)), required=False)
            for j, ref in enumerate(refs or []):
                if not isinstance(ref, dict):
                    raise rec.error(f"observation.results.{i}.subagent_trajectory_ref.{j}",
                                    f"expected an object, got {type(ref).__name__}")
                for key in ("session_id", "trajectory_id", "trajectory_path"):
                    rec.get(f"observation.results.{i}.subagent_trajectory_ref.{j}.{key}", (str, type(None)), required=False)
        return results

    def _calls(self, rec: Record) -> list[_Call]:
        raw_calls = rec.get("tool_calls", (list, type(None)), required=False) or []
        calls = []
        for i, _ in enumerate(raw_calls):
            call_id = rec.str(f"tool_calls.{i}.tool_call_id")
            name = rec.str(f"tool_calls.{i}.function_name")
            args = rec.get(f"tool_calls.{i}.arguments", (dict, type(None)), required=False) or {}
            calls.append(_Call(i, call_id, name, args))
        return calls

    def _plain_results(self, rec: Record, results: Sequence[dict[str, Any]], ts: str | None) -> None:
        """Results with nothing to attach to: what the harness said back, as its messages."""
        for result in results:
            text = _content_text(result.get("content"))
            if text:
                self.builder.add("message", actor="harness", source=rec, ts=ts, text=text)

    # --- agent steps ---------------------------------------------------------------------------

    def _agent_step(self, doc: _Doc, rec: Record, ctx: _StepContext, text: str, results: list[dict[str, Any]],
                    calls: list[_Call], ts: str | None) -> None:
        b = self.builder
        actor = ctx.actor
        reasoning = rec.get("reasoning_content", (str, type(None)), required=False)
        if reasoning:
            b.add("message", actor=actor, source=rec, ts=ts, text=reasoning, intent="reasoning")
        reply = _terminus_reply(text) if not calls else None
        claim_text = text
        if reply is not None:
            analysis, plan = reply.get("analysis"), reply.get("plan")
            parts = [f"Analysis: {analysis}" if isinstance(analysis, str) and analysis else "",
                     f"Plan: {plan}" if isinstance(plan, str) and plan else ""]
            claim_text = "\n".join(p for p in parts if p)
            calls = [_Call(i, f"commands[{i}]", "bash_command", c, raw_reply=True) for i, c in enumerate(reply["commands"])]
            if reply.get("task_complete") is True:
                calls.append(_Call(len(calls), "task_complete", "mark_task_complete", {}, raw_reply=True))
        if text.strip():
            if ctx.actor == "harness" and ctx.role:
                intent = _ROLE_INTENT.get(ctx.role)
            elif reply is not None:
                intent = "plan" if isinstance(reply.get("plan"), str) and reply["plan"].strip() else None
            else:
                intent = "plan" if _is_plan(text, ctx.terminus) else None
            b.add("message", actor=actor, source=rec, ts=ts, text=text, intent=intent)

        ids = {c.call_id for c in calls if not c.raw_reply}
        paired: dict[str, list[dict[str, Any]]] = {}
        unpaired: list[dict[str, Any]] = []
        for result in results:
            cid = result.get("source_call_id")
            if isinstance(cid, str) and cid in ids:
                paired.setdefault(cid, []).append(result)
            else:
                unpaired.append(result)
        shared = "\n".join(_content_text(r.get("content")) for r in unpaired
                           if not r.get("subagent_trajectory_ref") and r.get("content") is not None)
        shell_calls = [c for c in calls if self._is_shell(c)]
        last_shell = shell_calls[-1].index if shell_calls else None
        used_shared = False

        for call in calls:
            own = paired.get(call.call_id, [])
            own_text = "\n".join(_content_text(r.get("content")) for r in own if r.get("content") is not None)
            own_refs = [r for r in own if r.get("subagent_trajectory_ref")]
            name = call.name.lower()
            field_prefix = f"tool_calls.{call.index}.arguments" if not call.raw_reply else f"message.commands.{call.index}"
            if own_refs or name in _DELEGATION_TOOLS:
                self._delegation_call(doc, rec, ctx, call, own_text, own_refs, ts)
            elif self._is_shell(call):
                command = self._shell_command(rec, call, field_prefix)
                output = own_text if own else (shared if unpaired else None)
                used_shared = used_shared or (not own and bool(unpaired))
                exit_code = None
                if own:
                    exit_code = _exit_code(own_text)
                elif unpaired and call.index == last_shell:
                    exit_code = _exit_code(shared)
                if command is None:
                    b.keep(rec, "wait", actor=actor, ts=ts)
                else:
                    b.command(command, actor=actor, source=rec, output=output, exit_code=exit_code, ts=ts,
                              cwd=self._cwd_of(command, output))
                    if _SUBMIT_MARKER in command:
                        b.add("completion_claim", actor=actor, source=rec, ts=ts, claim=command, scope="run")
            elif name == "mark_task_complete":
                answer = own_text if own else shared
                if _CONFIRM_QUESTION in answer.lower():
                    b.keep(rec, "completion_request", actor=actor, ts=ts)
                else:
                    b.add("completion_claim", actor=actor, source=rec, ts=ts,
                          claim=claim_text.strip() or "mark_task_complete", scope="run")
            elif name in _FINISH_TOOLS:
                claim = next((call.args[k] for k in ("message", "final_thought", "summary", "result", "answer")
                              if isinstance(call.args.get(k), str) and call.args[k].strip()), None)
                b.add("completion_claim", actor=actor, source=rec, ts=ts,
                      claim=claim or claim_text.strip() or call.name, scope="run")
            elif name == "think":
                thought = call.args.get("thought") or call.args.get("content")
                if isinstance(thought, str) and thought:
                    b.add("message", actor=actor, source=rec, ts=ts, text=thought, intent="reasoning")
                else:
                    b.keep(rec, f"tool_call:{call.name}", actor=actor, ts=ts)
            elif not self._file_tool(rec, call, actor, ts, field_prefix):
                b.keep(rec, f"tool_call:{call.name}", actor=actor, ts=ts)

        for result in results:  # the directory the next command starts in
            prompts = [m.group(1) for m in _PROMPT_LINE.finditer(_content_text(result.get("content")))]
            if prompts:
                self.cwd = prompts[-1] if prompts[-1].startswith("/") else None

        # What the harness answered that no command took (parse errors, the confirmation
        # question, the screen after a completion) is its message.
        if not used_shared:
            self._plain_results(rec, [r for r in unpaired if not r.get("subagent_trajectory_ref")], ts)
        for result in unpaired:
            for ref in result.get("subagent_trajectory_ref") or []:
                self._delegate(doc, rec, actor, ref, instruction="", report=_content_text(result.get("content")) or None,
                               ts=ts)

    def _cwd_of(self, command: str, output: str | None) -> str | None:
        """Where a command ran: the prompt that echoes it on the screen (``root@h:/app/src#
        cat a.py``), else the directory of the last prompt seen before it."""
        first = command.strip().splitlines()[0].strip() if command.strip() else ""
        for m in _PROMPT_LINE.finditer(output or ""):
            if first and m.group(2).strip() == first:
                return m.group(1) if m.group(1).startswith("/") else None
        return self.cwd

    @staticmethod
    def _is_shell(call: _Call) -> bool:
        name = call.name.lower()
        return name == "bash_command" or name in _SHELL_TOOLS

    @staticmethod
    def _shell_command(rec: Record, call: _Call, field_prefix: str) -> str | None:
        """The command line of a shell call; None for an empty keystroke poll."""
        args = call.args
        if call.name.lower() == "bash_command" or "keystrokes" in args:
            keys = args.get("keystrokes")
            if not isinstance(keys, str):
                raise rec.error(f"{field_prefix}.keystrokes",
                                "missing" if keys is None else f"expected a string, got {type(keys).__name__}")
            command = keys[:-1] if keys.endswith("\n") else keys
            return command if command.strip() else None
        for key in ("command", "cmd", "commands", "script", "code"):
            value = args.get(key)
            if isinstance(value, str):
                return value if value.strip() else None
            if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
                if len(value) >= 2 and value[0] in ("bash", "sh", "zsh") and value[1] in ("-lc", "-c"):
                    return " ".join(value[2:])
                return shlex.join(value)
        raise rec.error(f"{field_prefix}.command", "missing: a shell call needs a command")

    def _file_tool(self, rec: Record, call: _Call, actor: str, ts: str | None, field_prefix: str) -> bool:
        """File reads and edits through the harness's own tools; False when the tool is not one."""
        b = self.builder
        name = call.name.lower()
        args = call.args

        def path_of(*keys: str) -> str | None:
            for key in keys:
                value = args.get(key)
                if isinstance(value, str) and value:
                    return value
            return None

        if name in _EDITOR_TOOLS:
            sub = args.get("command")
            path = path_of("path", "file_path")
            if path is None:
                raise rec.error(f"{field_prefix}.path", "missing: a file editor call needs a path")
            if sub == "view":
                b.add("file_read", actor=actor, source=rec, ts=ts, path=path)
            elif sub == "create":
                b.add("file_edit", actor=actor, source=rec, ts=ts, path=path, edit_kind="create")
            elif sub in ("str_replace", "insert", "undo_edit", "edit", "replace", "append"):
                b.add("file_edit", actor=actor, source=rec, ts=ts, path=path, edit_kind="modify")
            else:
                return False
            return True
        if name in _READ_TOOLS:
            path = path_of("file_path", "path", "notebook_path", "absolute_path")
            if path is None:
                return False
            b.add("file_read", actor=actor, source=rec, ts=ts, path=path)
            return True
        if name in _EDIT_TOOLS or name in _WRITE_TOOLS:
            path = path_of("file_path", "path", "notebook_path", "absolute_path")
            if path is None:
                return False
            b.add("file_edit", actor=actor, source=rec, ts=ts, path=path,
                  edit_kind="create" if name in _WRITE_TOOLS else "modify")
            return True
        return False

    # --- delegation and sub-trajectories -------------------------------------------------------

    def _delegation_call(self, doc: _Doc, rec: Record, ctx: _StepContext, call: _Call, output: str,
                         ref_results: list[dict[str, Any]], ts: str | None) -> None:
        instruction = next((call.args[k] for k in ("prompt", "instruction", "task", "message", "description")
                            if isinstance(call.args.get(k), str) and call.args[k]), None)
        if instruction is None:
            instruction = json.dumps(call.args, sort_keys=True, ensure_ascii=False) if call.args else ""
        context = _context_of(call.args)
        refs = [ref for result in ref_results for ref in result.get("subagent_trajectory_ref") or []]
        if not refs:
            worker = actor_id(call.call_id)
            seq = self.builder.add("delegation", actor=ctx.actor, source=rec, ts=ts, worker_id=worker,
                                   instruction=instruction, context=context)
            if output:
                self.builder.add("worker_report", actor=f"subagent:{worker}", source=rec, ts=ts, parent=seq,
                                 worker_id=worker, text=output)
            return
        for ref in refs:
            self._delegate(doc, rec, ctx.actor, ref, instruction=instruction, report=output or None, ts=ts,
                           context=context)

    def _delegate(self, doc: _Doc, rec: Record, actor: str, ref: dict[str, Any], *, instruction: str,
                  report: str | None, ts: str | None, context: list[str] | None = None) -> None:
        b = self.builder
        sub = self._resolve(doc, ref)
        key = next((ref[k] for k in ("trajectory_id", "session_id") if isinstance(ref.get(k), str) and ref[k]), None)
        if key is None and isinstance(ref.get("trajectory_path"), str):
            key = posixpath.basename(ref["trajectory_path"]).removesuffix(".json")
        worker = actor_id(key or "subagent")
        sources = [rec] + ([sub.header] if sub is not None else [])
        seq = b.add("delegation", actor=actor, source=sources, ts=ts, worker_id=worker, instruction=instruction,
                    context=context)
        if sub is not None:
            self.emit_steps(sub, _StepContext(f"subagent:{worker}", terminus=self._is_terminus(sub)))
        text = report if report is not None else (self._last_agent_text(sub) if sub is not None else None)
        if text:
            b.add("worker_report", actor=f"subagent:{worker}", source=rec, ts=ts, parent=seq, worker_id=worker, text=text)

    def _system_refs(self, doc: _Doc, rec: Record, text: str, refs: list[tuple[int, dict[str, Any]]],
                     ts: str | None) -> None:
        """A system step referencing sub-trajectories: the harness acted on its own."""
        b = self.builder
        all_refs = [ref for _, result in refs for ref in result.get("subagent_trajectory_ref") or []]
        names = [str(ref.get("trajectory_path") or ref.get("session_id") or "") for ref in all_refs]
        summarization = "summariz" in text.lower() or any("summariz" in n.lower() for n in names)
        if not summarization:
            b.add("message", actor="harness", source=rec, ts=ts, text=text)
            for ref in all_refs:
                self._delegate(doc, rec, "harness", ref, instruction=text, report=None, ts=ts)
            return
        subs = [(self._resolve(doc, ref), _role_of(name)) for ref, name in zip(all_refs, names)]
        summary = next((self._last_agent_text(sub) for sub, role in subs if sub is not None and role == "summary"), None)
        b.add("compaction", actor="harness", source=[rec] + [sub.header for sub, _ in subs if sub is not None], ts=ts,
              summary=summary or None)
        self.compactions += 1
        for sub, role in subs:
            if sub is not None:
                self.emit_steps(sub, _StepContext("harness", role=role))
        self.handoff_pending = True

    def _last_agent_text(self, doc: _Doc | None) -> str | None:
        """The last thing the trajectory's agent said (from the redacted records)."""
        if doc is None:
            return None
        for rec in reversed(self.step_records(doc)):
            if rec.data.get("source") == "agent":
                text = _content_text(rec.data.get("message"))
                if text.strip():
                    return text
        return None


def _exit_code(text: str) -> int | None:
    tagged = _EXIT_CODE_TAG.findall(text)
    if tagged:
        return int(tagged[-1])
    return exit_code_from_text(text)


def _context_of(args: dict[str, Any]) -> list[str] | None:
    for key in ("files", "paths", "context", "context_files"):
        value = args.get(key)
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            return list(value)
    return None


# --- importers -------------------------------------------------------------------------------


@register
class HarborImporter(Importer):
    """A Harbor trial directory: result.json, config.json, agent/, verifier/, exception.txt."""

    name = "harbor"
    title = "Harbor trial directory (result.json + agent/trajectory.json ATIF + verifier/)"
    version = "2"

    def find(self, tree: SourceTree, candidates: Sequence[str]) -> list[Unit]:
        units = []
        for rel in candidates:
            if self.sniff(tree, rel):
                units.append(Unit(rel, tuple(self.companions(tree, rel))))
        return units

    def sniff(self, tree: SourceTree, rel: str) -> bool:
        if posixpath.basename(rel) != "result.json":
            return False
        folder = posixpath.dirname(rel)
        inside = [_relative(f, folder) for f in tree.under(folder) if f != rel]
        if not any(f == "config.json" or f.startswith(("agent/", "verifier/")) for f in inside):
            return False  # a trial directory has its config or agent/verifier folders
        doc = tree.try_json(rel)
        if doc is None:
            head = _json_head(tree, rel)
            return b'"trial_name"' in head or b'"task_name"' in head
        return isinstance(doc, dict) and ("trial_name" in doc or "task_name" in doc) and "trial_results" not in doc

    def companions(self, tree: SourceTree, rel: str) -> list[str]:
        folder = posixpath.dirname(rel)
        # Multi-step trials (steps/<step>/{agent,verifier}) are not read: their files stay
        # unclaimed, so their trajectories are imported as standalone ATIF runs, not dropped.
        files = [f for f in tree.under(folder) if f != rel and not _relative(f, folder).startswith("steps/")]
        has_atif = tree.exists(tree.join(folder, "agent/trajectory.json") if folder else "agent/trajectory.json")
        if not has_atif:
            # Without an ATIF trajectory the agent's native log (Claude Code JSONL, OpenHands
            # events, ...) is left for its own importer.
            files = [f for f in files if not _relative(f, folder).startswith("agent/")
                     or re.match(r"^agent/(setup|command-\d+)/", _relative(f, folder))]
        return files

    def read(self, tree: SourceTree, unit: Unit) -> list[ImportedRun]:
        folder = posixpath.dirname(unit.primary)

        def path(name: str) -> str:
            return tree.join(folder, name) if folder else name

        result = tree.json(unit.primary)
        if not isinstance(result, dict):
            raise InputError(tree.label(unit.primary), None, None, f"expected a trial result object, got {type(result).__name__}")
        trial_name = result.get("trial_name") if isinstance(result.get("trial_name"), str) else None
        native = trial_name or posixpath.basename(folder) or str(result.get("id") or "trial")
        atif_rel = path("agent/trajectory.json")
        atif_doc = tree.json(atif_rel) if tree.exists(atif_rel) else None
        read_files = [unit.primary]
        b = self.builder(tree, unit, native, workspace_root=workspace_of(atif_doc))

        res = b.record(unit.primary, "result", result, native_id=result.get("id"))
        task_name = res.opt_str("task_name")
        res.opt_str("trial_name")
        res.opt_obj("agent_info")
        agent_name = res.get("agent_info.name", (str, type(None)), required=False)
        agent_version = res.get("agent_info.version", (str, type(None)), required=False)
        model_info = res.get("agent_info.model_info", (dict, type(None)), required=False) or {}
        exception_info = res.get("exception_info", (dict, type(None)), required=False)
        verifier_result = res.get("verifier_result", (dict, type(None)), required=False)
        rewards_raw = res.get("verifier_result.rewards", (dict, type(None)), required=False) if verifier_result else None

        start_sources = [res]
        config = None
        if tree.exists(path("config.json")):
            config_doc = tree.json(path("config.json"))
            read_files.append(path("config.json"))
            config = b.record(path("config.json"), "config", config_doc)
            if not isinstance(config_doc, dict):
                raise config.error(None, f"expected an object, got {type(config_doc).__name__}")
            start_sources.append(config)

        reader = AtifReader(tree, b)
        root = None
        if atif_doc is not None:
            read_files.append(atif_rel)
            root = reader.load(atif_rel)
            for linked in linked_trajectory_files(tree, atif_rel):
                read_files.append(linked)
            start_sources.append(root.header)

        # Provenance: the agent scaffold is the harness; Harbor is the runner.
        prov = reader.provenance(root) if root is not None else {}
        model = prov.get("model")
        if model is None and config is not None:
            model = config.get("agent.model_name", (str, type(None)), required=False)
        if model is None and isinstance(model_info.get("name"), str):
            provider = model_info.get("provider")
            model = f"{provider}/{model_info['name']}" if isinstance(provider, str) and provider else model_info["name"]
        settings = config.get("agent.kwargs", (dict, type(None)), required=False) if config is not None else None
        labels = {"runner": "harbor", **(prov.get("labels") or {})}
        for key in ("trial_name", "source", "task_checksum"):
            if isinstance(res.data.get(key), str):
                labels["dataset" if key == "source" else key] = res.data[key]
        if config is not None and isinstance(config.data.get("job_id"), str):
            labels["job_id"] = config.data["job_id"]
        harness = agent_name or prov.get("harness") or "harbor"
        b.start(harness=harness, harness_version=agent_version or prov.get("harness_version"), model=model,
                model_settings=settings or prov.get("model_settings"), task_id=task_name, labels=labels,
                ts=timestamp(result.get("started_at")), source=start_sources)

        # The harness's own commands in the sandbox: agent setup, then the agent's launch.
        self._setup(tree, b, folder, read_files)
        if root is not None:
            reader.read_root(root)

        # How the trial ended.
        exc_rec = None
        exc_type = None
        exc_message = None
        if exception_info:
            exc_type = res.get("exception_info.exception_type", (str, type(None)), required=False)
            exc_message = res.get("exception_info.exception_message", (str, type(None)), required=False)
        if tree.exists(path("exception.txt")):
            text = tree.text(path("exception.txt"))
            read_files.append(path("exception.txt"))
            exc_rec = b.record(path("exception.txt"), "1", {"text": text})
            if exc_type is None:
                exc_type, exc_message = _exception_from_traceback(exc_rec.data["text"])
        outcome_sources = [res] + ([exc_rec] if exc_rec is not None else [])
        timed_out = bool(exc_type) and exc_type.rsplit(".", 1)[-1] == "AgentTimeoutError"
        if result.get("finished_at") is not None or exc_type or exc_rec is not None:
            status = "timeout" if timed_out else ("error" if (exc_type or exc_rec is not None) else "completed")
            reason = f"{exc_type}: {exc_message}" if exc_type and exc_message else exc_type
            b.add("run_ended", actor="harness", source=outcome_sources, ts=timestamp(result.get("finished_at")),
                  status=status, reason=reason)

        # The verifier's outcome.
        rewards, reward_sources = self._rewards(tree, b, res, rewards_raw, folder, read_files)
        ctrf = self._ctrf(tree, b, folder, read_files)
        for name in ("verifier/test-stdout.txt", "verifier/test-stderr.txt"):
            if tree.exists(path(name)):
                read_files.append(path(name))
                reward_sources.append(b.record(path(name), "1", {"text": tree.text(path(name))}))
        reward = None
        if rewards:
            reward = rewards.get("reward") if "reward" in rewards else (next(iter(rewards.values())) if len(rewards) == 1 else None)
        if timed_out:
            status = "timeout"
        elif rewards:
            status = "evaluated"
        elif exc_type or exc_rec is not None:
            status = "infra_error"
        else:
            status = "no_grade"
        counts: dict[str, int] = {}
        if ctrf is not None:
            counts = ctrf[1]
        details = {"exception_type": exc_type} if exc_type else None
        verifier_ts = timestamp(res.get("verifier.finished_at", (str, type(None)), required=False)) \
            if isinstance(result.get("verifier"), dict) else None
        b.outcome("acceptance_verdict", source=outcome_sources + reward_sources + ([ctrf[0]] if ctrf else []),
                  ts=verifier_ts, verifier="harbor", status=status, reward=reward,
                  rewards=rewards if rewards and (len(rewards) > 1 or "reward" not in rewards) else None,
                  explanation=exc_message if exc_type else None, details=details, **counts)
        if ctrf is not None:
            for test_rec, fields in ctrf[2]:
                b.outcome("test_result", source=test_rec, ts=verifier_ts, verifier="harbor", **fields)
        b.files = list(dict.fromkeys(read_files))  # the files read, primary first (the rest are claimed, unread)
        return [b.build()]

    @staticmethod
    def _setup(tree: SourceTree, b: RunBuilder, folder: str, read_files: list[str]) -> None:
        def rel(name: str) -> str:
            return tree.join(folder, name) if folder else name

        def texts(directory: str) -> dict[str, str]:
            found = {}
            for name in ("command.txt", "return-code.txt", "stdout.txt", "stderr.txt"):
                if tree.exists(rel(f"{directory}/{name}")):
                    found[name] = tree.text(rel(f"{directory}/{name}"))
                    read_files.append(rel(f"{directory}/{name}"))
            return found

        setup = texts("agent/setup")
        if setup:
            rec = b.record(rel(f"agent/setup/{next(iter(setup))}"), "1", setup)
            b.keep(rec, "agent_setup", actor="harness")
        numbers = sorted({int(m.group(1)) for f in tree.under(rel("agent"))
                          if (m := re.match(r"^agent/command-(\d+)/", _relative(f, folder)))})
        for number in numbers:
            found = texts(f"agent/command-{number}")
            if not found:
                continue
            rec = b.record(rel(f"agent/command-{number}/{next(iter(found))}"), "1", found)
            found = rec.data  # redacted
            code = None
            if "return-code.txt" in found:
                try:
                    code = int(found["return-code.txt"].strip())
                except ValueError:
                    raise rec.error("return-code.txt", f"expected an integer, got {found['return-code.txt'][:40]!r}") from None
            if "command.txt" in found:
                b.command(found["command.txt"].rstrip("\n"), actor="harness", source=rec, output=found.get("stdout.txt"),
                          exit_code=code, effects=False)
            else:
                b.keep(rec, "agent_command", actor="harness")

    @staticmethod
    def _rewards(tree: SourceTree, b: RunBuilder, res: Record, rewards_raw: dict[str, Any] | None, folder: str,
                 read_files: list[str]) -> tuple[dict[str, str] | None, list[Record]]:
        """Rewards from result.json, else verifier/reward.txt, else verifier/reward.json."""
        def rel(name: str) -> str:
            return tree.join(folder, name) if folder else name

        sources: list[Record] = []
        txt_rec = json_rec = None
        if tree.exists(rel("verifier/reward.txt")):
            read_files.append(rel("verifier/reward.txt"))
            txt_rec = b.record(rel("verifier/reward.txt"), "1", {"text": tree.text(rel("verifier/reward.txt"))})
            sources.append(txt_rec)
        if tree.exists(rel("verifier/reward.json")):
            read_files.append(rel("verifier/reward.json"))
            json_rec = b.record(rel("verifier/reward.json"), "reward", tree.json(rel("verifier/reward.json")))
            sources.append(json_rec)
        if rewards_raw:
            return {str(k): reward_text(v, res, f"verifier_result.rewards.{k}") for k, v in rewards_raw.items()}, sources
        if txt_rec is not None:
            return {"reward": reward_text(txt_rec.data["text"], txt_rec, "reward")}, sources
        if json_rec is not None:
            if not isinstance(json_rec.data, dict):
                raise json_rec.error(None, f"expected an object of rewards, got {type(json_rec.data).__name__}")
            return {str(k): reward_text(v, json_rec, str(k)) for k, v in json_rec.data.items()}, sources
        return None, sources

    @staticmethod
    def _ctrf(tree: SourceTree, b: RunBuilder, folder: str,
              read_files: list[str]) -> tuple[Record, dict[str, int], list[tuple[Record, dict[str, Any]]]] | None:
        """verifier/ctrf.json: the summary record, counts, and one record per test."""
        rel = tree.join(folder, "verifier/ctrf.json") if folder else "verifier/ctrf.json"
        if not tree.exists(rel):
            return None
        read_files.append(rel)
        doc = tree.json(rel)
        results = doc.get("results") if isinstance(doc, dict) else None
        head = b.record(rel, "results", {k: v for k, v in results.items() if k != "tests"}
                        if isinstance(results, dict) else doc)
        if not isinstance(results, dict):
            raise head.error("results", "missing" if results is None else "expected an object")
        tests = results.get("tests")
        if not isinstance(tests, list):
            raise head.error("results.tests", "missing" if tests is None else "expected an array")
        counts: dict[str, int] = {}
        summary = results.get("summary")
        if isinstance(summary, dict):
            for name, keys in (("passed", ("passed",)), ("failed", ("failed",)), ("skipped", ("skipped", "pending")),
                               ("errored", ("other",))):
                values = [summary[k] for k in keys if isinstance(summary.get(k), int) and not isinstance(summary.get(k), bool)]
                if values:
                    counts[name] = sum(values)
        entries = []
        for index, test in enumerate(tests):
            rec = b.record(rel, f"results.tests[{index}]", test)
            name = rec.str("name")
            status = rec.str("status")
            outcome = {"passed": "passed", "failed": "failed", "skipped": "skipped", "pending": "skipped"}.get(status, "error")
            duration = rec.get("duration", (int, float, type(None)), required=False)
            suite = rec.data.get("suite")
            group = "::".join(suite) if isinstance(suite, list) and all(isinstance(s, str) for s in suite) and suite \
                else suite if isinstance(suite, str) and suite else rec.data.get("filePath") \
                if isinstance(rec.data.get("filePath"), str) and rec.data.get("filePath") else None
            message = rec.data.get("message") if isinstance(rec.data.get("message"), str) else None
            if outcome == "error" and status != "other":
                message = f"status {status!r}" + (f": {message}" if message else "")
            entries.append((rec, {"test_id": name, "outcome": outcome, "group": group,
                                  "duration_ms": int(round(duration)) if isinstance(duration, (int, float)) and duration >= 0 else None,
                                  "message": message or None}))
        if not counts:
            for _, fields in entries:
                key = {"passed": "passed", "failed": "failed", "skipped": "skipped", "error": "errored"}[fields["outcome"]]
                counts[key] = counts.get(key, 0) + 1
        return head, counts, entries


def _relative(rel: str, folder: str) -> str:
    return rel[len(folder) + 1:] if folder and rel.startswith(folder + "/") else rel


def _exception_from_traceback(text: str) -> tuple[str | None, str | None]:
    """The exception type and message from a Python traceback's last line."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return None, None
    m = re.match(r"^([A-Za-z_][\w.]*(?:Error|Exception|Timeout|Interrupt|Exit)\w*)(?::\s*(.*))?$", lines[-1].strip())
    if m:
        return m.group(1).rsplit(".", 1)[-1], (m.group(2) or None)
    return "Exception", lines[-1].strip()[:500]


@register
class AtifImporter(Importer):
    """A standalone ATIF trajectory file (with its continuation and sub-agent files)."""

    name = "atif"
    title = "ATIF trajectory JSON (Harbor Agent Trajectory Interchange Format v1.0-v1.8)"
    version = "2"

    def find(self, tree: SourceTree, candidates: Sequence[str]) -> list[Unit]:
        atif = [rel for rel in candidates if sniff_atif(tree, rel)]
        linked = {rel: linked_trajectory_files(tree, rel) for rel in atif}
        referenced = {f for files in linked.values() for f in files}
        return [Unit(rel, tuple(linked[rel])) for rel in atif if rel not in referenced]

    def sniff(self, tree: SourceTree, rel: str) -> bool:
        return sniff_atif(tree, rel)

    def companions(self, tree: SourceTree, rel: str) -> list[str]:
        return linked_trajectory_files(tree, rel)

    def read(self, tree: SourceTree, unit: Unit) -> list[ImportedRun]:
        doc = tree.json(unit.primary)
        name = posixpath.basename(unit.primary).removesuffix(".json")
        ident = None
        if isinstance(doc, dict):
            ident = doc.get("session_id") if isinstance(doc.get("session_id"), str) else doc.get("trajectory_id")
        native = f"{ident}/{name}" if isinstance(ident, str) and ident else name
        b = self.builder(tree, unit, native, workspace_root=workspace_of(doc))
        reader = AtifReader(tree, b)
        root = reader.load(unit.primary)
        prov = reader.provenance(root)
        b.start(harness=prov["harness"], harness_version=prov["harness_version"], model=prov["model"],
                model_settings=prov["model_settings"], labels=prov["labels"] or None, ts=prov["ts"], source=root.header)
        reader.read_root(root)
        return [b.build()]
