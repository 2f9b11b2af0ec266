"""OpenHands: the V0 event stream and the V1 software-agent-sdk events.

Two importers live here.

``openhands`` reads the V0 event stream (All-Hands-AI/OpenHands up to 0.6x): a JSON
list of event dicts (``tests/runtime/trajs/*.json``, the UI's trajectory download),
a session directory ``sessions/<sid>/events/<n>.json`` (one event per file, ordered by
``n``), and evaluation ``output.jsonl`` files whose lines each hold one run
(``instance_id``, ``instruction``, ``metadata``, ``history`` of events, ``metrics``,
``error``, ``test_result``, after evaluation ``report``).

``openhands-v1`` reads V1 SDK events (``kind`` = ActionEvent, ObservationEvent, ...):
an event JSONL file, a conversation directory ``<conv>/events/event-<idx>-<id>.json``
(with ``base_state.json`` next to ``events/``), and benchmark ``output.jsonl`` lines
whose ``history`` holds V1 events.

Mapping (both): an action and its observation (V0 ``cause``, V1 ``action_id``, then the
shared tool-call id) make one event citing both records. Shell commands go through
``RunBuilder.command`` with the exit code from the observation (``-1``, OpenHands' "no
exit code yet", is kept as unknown); relative paths on the command line are resolved
against the shell's working directory (the previous observation's ``working_dir`` and a
leading ``cd``) so they compare equal to the editor tool's absolute paths. Editor
reads/edits (``read``/``edit``/``write`` actions, ``str_replace_editor``/``file_editor``
calls) are ``file_read``/``file_edit``; an edit or read the tool refused (``ERROR:``) is
no file event: the attempt is kept and the tool's error becomes a harness message.
``finish`` is a run-scoped ``completion_claim`` (``task_completed: "false"`` is an
admission, kept as a summary message instead); ``think`` and the thought accompanying
each tool call are ``reasoning`` messages; ``delegate`` is a ``delegation`` whose
sub-agent events (V0 shares one stream) are ``subagent:<id>`` until its report;
condensations are ``compaction`` (harness, or agent when the agent asked for it).
Paths are relative to the workspace root: ``/workspace``, or the runtime's working directory
when the stream names it (V0 recall observation, V1 ``base_state.json``).

An eval line ends with ``run_ended`` (its ``error``: the iteration/budget/context limit ->
budget_exhausted, a stuck-loop stop -> aborted, anything else -> error); a plain stream only when it records a terminal agent state /
execution status. Outcomes: an evaluated ``report`` on the line (verifier
``openhands-eval``) or the SWE-bench ``report.json`` next to ``output.jsonl`` (verifier
``swe-bench``) with the per-test lists of ``eval_outputs/<instance>/report.json``; a
``git_patch`` alone is no verdict (it stays in the kept raw line).
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from procgrade.engine.errors import InputError
from procgrade.engine.importers.base import Importer, Unit, register
from procgrade.engine.importers.building import ImportedRun, Record, RunBuilder, timestamp
from procgrade.engine.importers.provenance import Experiment, identify
from procgrade.engine.importers.shell import exit_code_from_text, file_effects
from procgrade.engine.importers.source_tree import SourceTree

__all__ = ["OpenHandsImporter", "OpenHandsV1Importer"]

DEFAULT_WORKSPACE = "/workspace"

_V0_EVENT_FILE = re.compile(r"^(\d+)\.json$")
_V1_EVENT_FILE = re.compile(r"^event-(\d+)-[^/]+\.json$")
_V1_KINDS = frozenset({
    "ActionEvent", "ObservationEvent", "MessageEvent", "SystemPromptEvent", "AgentErrorEvent",
    "UserRejectObservation", "Condensation", "CondensationRequest", "CondensationSummaryEvent",
    "ConversationStateUpdateEvent", "PauseEvent", "ConversationErrorEvent", "HookExecutionEvent",
    "LLMCompletionLogEvent", "TokenEvent", "StreamingDeltaEvent",
})
_WORKER_ID_BAD = re.compile(r"[^A-Za-z0-9._@/+-]")
_THINK_BLOCK = re.compile(r"<think>[\s\S]*?</think>", re.IGNORECASE)
_LEADING_CD = re.compile(r"""^\s*cd\s+("[^"]*"|'[^']*'|[^\s;&|]+)\s*(?:&&|;)""")
_PLAN_START = re.compile(r"^(?:#+\s*)?(?:1[.)]\s|step\s+1\b|plan\s*:|(?:here\s+is\s+|here's\s+)?(?:my\s+|the\s+)?plan\b.*:$)",
                         re.IGNORECASE)
_CONTINUE_PROMPT = "Please continue working on the task"
_AGENTSKILLS = re.compile(
    r"\b(open_file|create_file|edit_file_by_replace|insert_content_at_line|append_file)\(\s*(?:file_name\s*=\s*)?"
    r"""(?:r?["'])([^"']+)["']""")


# --- shared helpers -------------------------------------------------------------------------


def _plan_or(text: str, default: str | None) -> str | None:
    """``plan`` when the text visibly is one (a numbered plan, a "Plan:" heading)."""
    first = text.strip().split("\n", 1)[0].strip()
    return "plan" if _PLAN_START.match(first) else default


def _worker_id(name: str, anchor: str) -> str:
    base = _WORKER_ID_BAD.sub("_", name).strip("_") or "worker"
    if not base[0].isalnum():
        base = "w" + base
    ident = f"{base}@{_WORKER_ID_BAD.sub('_', anchor)}"
    return ident[:128]


def _text_of(content: Any) -> str:
    """Text of an SDK content list ([{type: text, text}]) or a plain string."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [c.get("text") for c in content if isinstance(c, dict) and isinstance(c.get("text"), str)]
        return "\n".join(p for p in parts if p)
    return ""


class _Session:
    """What the mapping of one run shares: the builder, actors, shell cwd, delegations."""

    def __init__(self, builder: RunBuilder, root: str) -> None:
        self.b = builder
        self.root = root
        self.cwd: str | None = None
        self.delegates: list[str] = []          # worker ids of open V0 delegations (innermost last)
        self.condensation_actor: str | None = None
        self.touched: set[str] = set()           # paths read or edited so far (write: create or modify)

    # actors ---------------------------------------------------------------------------------

    def model_actor(self) -> str:
        return f"subagent:{self.delegates[-1]}" if self.delegates else "agent"

    def actor_of(self, source: str | None) -> str:
        if source == "agent":
            return self.model_actor()
        if source == "user":
            return "harness" if self.delegates else "user"
        return "harness"

    # paths ----------------------------------------------------------------------------------

    def resolve(self, path: str, cwd: str | None) -> str:
        if path.startswith("/") or cwd is None or not cwd.startswith("/"):
            return path
        return posixpath.normpath(posixpath.join(cwd, path))

    def paths_in(self, text: str) -> list[str]:
        """Absolute paths under the workspace root that ``text`` cites, in order, once each."""
        found: list[str] = []
        for match in re.finditer(r"(?<![\w/.])(/[\w.@+-]+(?:/[\w.@+-]+)+)", text):
            path = match.group(1).rstrip(".")
            if path.startswith(self.root + "/") and path not in found:
                found.append(path)
        return found

    def context_of(self, text: str) -> list[str] | None:
        """Paths a delegation hands over, spelled relative to the workspace like every path
        (the builder maps ``path``/``new_path``/``evidence`` but not ``context``)."""
        return [self.b.workspace_path(p) for p in self.paths_in(text)] or None

    # events ---------------------------------------------------------------------------------

    def thought(self, text: str | None, rec: Record, actor: str, ts: str | None) -> int | None:
        if not text or not text.strip():
            return None
        return self.b.add("message", actor=actor, source=rec, ts=ts, text=text, intent=_plan_or(text, "reasoning"))

    def shell(self, command: str, *, actor: str, sources: list[Record], output: str | None, exit_code: int | None,
              ts: str | None, parent: int | None, working_dir: str | None, effects: bool = True) -> int:
        """A shell command with its file effects resolved against the shell's cwd."""
        cwd = self.cwd
        seq = self.b.command(command, actor=actor, source=sources, output=output, exit_code=exit_code, ts=ts,
                             parent=parent, cwd=cwd, effects=False)
        if effects:
            effect_cwd = cwd
            cd = _LEADING_CD.match(command)
            if cd:  # `cd DIR && ...`: the rest of the line runs in DIR (unknown if DIR is not literal)
                target = cd.group(1).strip("\"'")
                literal = not any(c in target for c in "$~`")
                effect_cwd = self.resolve(target, cwd) if literal and (target.startswith("/") or cwd) else None
            for effect in file_effects(command):
                path = self.resolve(effect.path, effect_cwd)
                if effect.action == "read":
                    self.b.add("file_read", actor=actor, source=sources, parent=seq, ts=ts, path=path)
                else:
                    new_path = self.resolve(effect.new_path, effect_cwd) if effect.new_path else None
                    self.b.add("file_edit", actor=actor, source=sources, parent=seq, ts=ts, path=path,
                               edit_kind=effect.edit_kind, new_path=new_path)
                self.touched.add(path)
        if working_dir and working_dir.startswith("/"):
            self.cwd = working_dir
        return seq

    def file_read(self, path: str, *, actor: str, sources: list[Record], ts: str | None, parent: int | None) -> int:
        path = self.resolve(path, self.cwd)
        self.touched.add(path)
        return self.b.add("file_read", actor=actor, source=sources, ts=ts, parent=parent, path=path)

    def file_edit(self, path: str, edit_kind: str, *, actor: str, sources: list[Record], ts: str | None,
                  parent: int | None, diff: str | None = None) -> int:
        path = self.resolve(path, self.cwd)
        self.touched.add(path)
        diff_sha = hashlib.sha256(diff.encode()).hexdigest() if diff else None
        return self.b.add("file_edit", actor=actor, source=sources, ts=ts, parent=parent, path=path,
                          edit_kind=edit_kind, diff_sha256=diff_sha)

    def failed_tool(self, action: Record, obs: Record, record_type: str, error: str, *, actor: str,
                    ts: str | None, parent: int | None) -> int:
        """A read or edit the tool refused: the attempt is kept, the refusal is the harness's message."""
        seq = self.b.add("source_record", actor=actor, source=action, ts=ts, parent=parent, record_type=record_type)
        self.b.add("message", actor="harness", source=obs, parent=seq, text=error or "(error)")
        return seq


# --- evaluation output: the envelope both importers share --------------------------------------


class _EvalOutcomes:
    """SWE-bench companions of an ``output.jsonl``: the aggregate report.json and the
    per-instance ``eval_outputs/<id>/report.json`` files."""

    def __init__(self, tree: SourceTree, folder: str) -> None:
        self.tree = tree
        self.aggregate = _aggregate_report(tree, folder)
        self.instance_reports: dict[str, str] = {}
        base = tree.join(folder, "eval_outputs") if folder else "eval_outputs"
        for rel in tree.under(base):
            parts = rel[len(base) + 1:].split("/")
            if len(parts) == 2 and parts[1] == "report.json":
                self.instance_reports[parts[0]] = rel

    @property
    def files(self) -> list[str]:
        return ([self.aggregate] if self.aggregate else []) + sorted(self.instance_reports.values())


def _aggregate_report(tree: SourceTree, folder: str) -> str | None:
    rel = tree.join(folder, "report.json") if folder else "report.json"
    if not tree.exists(rel):
        return None
    data = tree.try_json(rel)
    if isinstance(data, dict) and isinstance(data.get("resolved_ids"), list):
        return rel
    return None


def _eval_companions(tree: SourceTree, rel: str) -> list[str]:
    return _EvalOutcomes(tree, posixpath.dirname(rel)).files


def _report_verdict(report: dict[str, Any]) -> tuple[str, str | None, str | None]:
    """(status, reward, explanation) of an OpenHands eval ``report`` dict."""
    if report.get("empty_generation") is True:
        return "not_submitted", None, "empty patch"
    if report.get("error_eval") is True:
        return "infra_error", None, "evaluation error"
    if report.get("test_timeout") is True:
        return "timeout", None, "tests timed out"
    resolved = report.get("resolved")
    if report.get("failed_apply_patch") is True and resolved is not True:
        return "evaluated", "0", "patch failed to apply"
    return "evaluated", "1" if resolved is True else "0", None


def _tests_status(b: RunBuilder, rec: Record, status: Any, verifier: str) -> bool:
    """SWE-bench ``tests_status`` {group: {success: [...], failure: [...]}} as test_result events;
    whether there was any."""
    if not isinstance(status, dict):
        return False
    emitted = False
    for group in sorted(status):
        lists = status[group]
        if not isinstance(lists, dict):
            continue
        for key, outcome in (("success", "passed"), ("failure", "failed")):
            tests = lists.get(key)
            if isinstance(tests, list):
                for test in tests:
                    if isinstance(test, str) and test:
                        b.outcome("test_result", source=rec, test_id=test, outcome=outcome, group=group,
                                  verifier=verifier)
                        emitted = True
    return emitted


def _eval_outcomes(b: RunBuilder, envelope: Record, instance_id: str, outcomes: _EvalOutcomes) -> None:
    """Verdict and per-test results of one eval line: the line's own report first, else the
    SWE-bench report files next to output.jsonl. No report: no verdict (a patch is not a grade)."""
    line_report = envelope.get("report", dict, required=False)
    if line_report is None:
        line_report = envelope.get("test_result.report", dict, required=False)
    if line_report is not None:
        status, reward, explanation = _report_verdict(line_report)
        b.outcome("acceptance_verdict", source=envelope, verifier="openhands-eval", status=status, reward=reward,
                  value="resolved" if reward == "1" else ("unresolved" if reward == "0" else None),
                  explanation=explanation, details=line_report)
        _tests_status(b, envelope, line_report.get("tests_status"), "openhands-eval")
    elif isinstance(envelope.get("resolved", object, required=False), bool):
        resolved = envelope.get("resolved", bool)
        b.outcome("acceptance_verdict", source=envelope, verifier="openhands-eval", status="evaluated",
                  reward="1" if resolved else "0", value="resolved" if resolved else "unresolved")
    elif outcomes.aggregate is not None:
        _aggregate_verdict(b, instance_id, outcomes)
    per_instance = outcomes.instance_reports.get(instance_id)
    if per_instance is not None:
        data = outcomes.tree.json(per_instance)
        entry = data.get(instance_id) if isinstance(data, dict) else None
        if isinstance(entry, dict):
            rec = b.record(per_instance, instance_id, entry, native_id=instance_id)
            cited = False
            resolved = entry.get("resolved")
            if line_report is None and outcomes.aggregate is None and isinstance(resolved, bool):
                b.outcome("acceptance_verdict", source=rec, verifier="swe-bench", status="evaluated",
                          reward="1" if resolved else "0", value="resolved" if resolved else "unresolved")
                cited = True
            cited = _tests_status(b, rec, entry.get("tests_status"), "swe-bench") or cited
            if not cited:
                b.keep(rec, "swe-bench instance report")


_AGGREGATE_LISTS = (
    ("empty_patch_ids", "not_submitted", None, "empty patch"),
    ("error_ids", "infra_error", None, "evaluation error"),
    ("resolved_ids", "evaluated", "1", None),
    ("unresolved_ids", "evaluated", "0", None),
    ("incomplete_ids", "no_grade", None, "evaluation incomplete"),
)


def _aggregate_verdict(b: RunBuilder, instance_id: str, outcomes: _EvalOutcomes) -> None:
    rel = outcomes.aggregate
    assert rel is not None
    report = outcomes.tree.json(rel)
    for key, status, reward, explanation in _AGGREGATE_LISTS:
        ids = report.get(key)
        if isinstance(ids, list) and instance_id in ids:
            index = ids.index(instance_id)
            rec = b.record(rel, f"{key}[{index}]", instance_id, native_id=instance_id)
            b.outcome("acceptance_verdict", source=rec, verifier="swe-bench", status=status, reward=reward,
                      value={"1": "resolved", "0": "unresolved"}.get(reward or ""), explanation=explanation)
            return


def _eval_end(b: RunBuilder, envelope: Record) -> None:
    error = envelope.get("error", str, required=False)
    if error:
        budget = re.search(r"maximum iteration|budget|max_iterations|max iterations|context window", error, re.IGNORECASE)
        stopped = re.search(r"stuck", error, re.IGNORECASE)
        b.add("run_ended", actor="harness", source=envelope,
              status="budget_exhausted" if budget else "aborted" if stopped else "error", reason=error)
    else:
        b.add("run_ended", actor="harness", source=envelope, status="completed")


def _llm_settings(llm: dict[str, Any]) -> dict[str, Any]:
    keys = ("temperature", "top_p", "top_k", "max_output_tokens", "max_input_tokens", "reasoning_effort", "seed",
            "native_tool_calling", "extended_thinking_budget")
    return {k: llm[k] for k in keys if llm.get(k) is not None}


def _eval_native_id(tree: SourceTree, rel: str, native: str, line: dict[str, Any], *,
                    instance_id: str | None = None) -> tuple[str, Experiment]:
    """An eval line's run id: the instance, qualified by the system (the experiment folder or
    ``--system``) or else the line's model, so two systems' outputs of one instance never collide."""
    metadata = line.get("metadata") if isinstance(line.get("metadata"), dict) else {}
    llm = metadata.get("llm_config") if isinstance(metadata.get("llm_config"), dict) else {}
    model = llm.get("model") if isinstance(llm.get("model"), str) and llm["model"] else None
    return identify(tree, rel, native, instance_id=instance_id or native, model=model)


def _eval_start_fields(envelope: Record) -> tuple[str | None, dict[str, Any], dict[str, str]]:
    """(model, model_settings, labels) from an eval line's ``metadata``."""
    metadata = envelope.get("metadata", dict, required=False) or {}
    llm = metadata.get("llm_config") if isinstance(metadata.get("llm_config"), dict) else {}
    model = llm.get("model") if isinstance(llm.get("model"), str) else None
    settings = _llm_settings(llm)
    if isinstance(metadata.get("max_iterations"), int):
        settings["max_iterations"] = metadata["max_iterations"]
    condenser = metadata.get("condenser_config")
    if isinstance(condenser, dict) and isinstance(condenser.get("type"), str):
        settings["condenser"] = condenser["type"]
    labels: dict[str, str] = {"source_layout": "eval-output"}
    for key in ("agent_class", "dataset", "git_commit", "data_split"):
        if isinstance(metadata.get(key), str):
            labels[key] = metadata[key]
    instance = envelope.get("instance", dict, required=False) or {}
    if isinstance(instance.get("repo"), str):
        labels["repo"] = instance["repo"]
    return model, settings, labels


# --- V0 -----------------------------------------------------------------------------------------


def _is_v0_event(value: Any) -> bool:
    return (isinstance(value, dict) and isinstance(value.get("id"), int) and not isinstance(value.get("id"), bool)
            and ("action" in value or "observation" in value) and "kind" not in value)


def _is_v1_event(value: Any) -> bool:
    if not isinstance(value, dict) or not isinstance(value.get("kind"), str) or not isinstance(value.get("id"), str):
        return False
    kind = value["kind"]
    return kind in _V1_KINDS or (kind.endswith("Event") and value.get("source") in ("agent", "user", "environment", "hook"))


def _history_version(value: Any) -> str | None:
    """``v0``/``v1`` for an eval line (``instance_id`` + ``history``), by its first event."""
    if not isinstance(value, dict) or not isinstance(value.get("history"), list) \
            or not ({"instance_id", "instruction", "metadata"} & value.keys()):
        return None
    history = value["history"]
    if not history:
        return "v0"
    first = history[0]
    if isinstance(first, list):  # very old outputs: [action, observation] pairs
        first = next((x for x in first if isinstance(x, dict)), None)
    if _is_v1_event(first):
        return "v1"
    if isinstance(first, dict) and ("action" in first or "observation" in first):
        return "v0"
    return None


# event_to_dict() writes id, timestamp, source first; "action"/"observation" may come after a
# long message (a system prompt), so either tells.
_V0_LIST_HEAD = re.compile(rb'^\s*\[\s*\{(?:\s*"id"\s*:\s*\d+\s*,\s*"timestamp"\s*:\s*"[^"]*"\s*,\s*"source"\s*:'
                           rb'|[\s\S]*?"(?:action|observation)"\s*:)')
_V0_EVENT_HEAD = re.compile(rb'^\s*\{(?:\s*"id"\s*:\s*\d+\s*,\s*"timestamp"\s*:\s*"[^"]*"\s*,\s*"source"\s*:'
                            rb'|[\s\S]*?"(?:action|observation)"\s*:)')
_EVAL_HISTORY = re.compile(rb'"history"\s*:\s*\[\s*(?:\{\s*"id"\s*:\s*(["\d]))?')


def _head(tree: SourceTree, rel: str, size: int = 4096) -> bytes:
    try:
        return tree.head(rel, size)
    except InputError:
        return b""


def _looks_like(tree: SourceTree, rel: str, pattern: re.Pattern[bytes], size: int = 4096) -> bool:
    """For a file that does not parse: whether its head still shows this format (read()
    then reports where it breaks instead of the file going unrecognised)."""
    head = _head(tree, rel, size)
    return bool(pattern.search(head)) and b'"id"' in head


def _looks_like_eval(tree: SourceTree, rel: str) -> str | None:
    """``v0``/``v1`` for an eval output whose first line does not parse (cut mid-write), from
    its head: an object with ``instance_id`` and a ``history`` list (V1 events carry ``kind``)."""
    head = _head(tree, rel, 1 << 20)
    if not head.lstrip().startswith(b"{") or b'"instance_id"' not in head:
        return None
    found = _EVAL_HISTORY.search(head)
    if found is None:
        return None
    return "v1" if found.group(1) == b'"' else "v0"  # V1 event ids are UUID strings, V0 ids integers


def _find_units(importer: Importer, tree: SourceTree, candidates: Sequence[str], event_file: re.Pattern[str],
                is_stream: Callable[[str], bool], state_file: str) -> list[Unit]:
    """Both versions' units: first the folders of one-event-per-file streams (``event_file``; an
    ``events/`` folder takes its sibling ``state_file`` along), then the single files the
    importer sniffs, each with the companions nobody claimed yet."""
    units: list[Unit] = []
    claimed: set[str] = set()
    for folder, members in _event_groups(tree, candidates, event_file).items():
        if not is_stream(members[0]):
            continue
        extra = []
        if posixpath.basename(folder) == "events":
            state = tree.join(posixpath.dirname(folder) or ".", state_file)
            if tree.exists(state):
                extra.append(state)
        units.append(Unit(members[0], tuple(members[1:] + extra)))
        claimed.update(members + extra)
    for rel in candidates:
        if rel in claimed or not importer.sniff(tree, rel):
            continue
        companions = tuple(c for c in importer.companions(tree, rel) if c not in claimed)
        units.append(Unit(rel, companions))
        claimed.update((rel, *companions))
    return units


def _event_groups(tree: SourceTree, candidates: Sequence[str], pattern: re.Pattern[str]) -> dict[str, list[str]]:
    """Folders holding event files (``pattern``) among ``candidates``, each with all its event files."""
    folders = sorted({posixpath.dirname(rel) for rel in candidates if pattern.match(posixpath.basename(rel))})
    groups: dict[str, list[str]] = {}
    listing = tree.files()
    for folder in folders:
        members = [rel for rel in listing if posixpath.dirname(rel) == folder and pattern.match(posixpath.basename(rel))]
        groups[folder] = sorted(members, key=lambda rel: int(pattern.match(posixpath.basename(rel)).group(1)))  # type: ignore[union-attr]
    return groups


def _session_id(tree: SourceTree, folder: str) -> str:
    """The session/conversation id: the folder above ``events/`` (or above the events files)."""
    parts = [p for p in folder.split("/") if p] if folder else []
    if parts and parts[-1] == "events":
        parts = parts[:-1]
    if parts:
        return parts[-1]
    label = tree.label_root
    if Path(label).exists():  # "." or "events" as typed: name the session by where it is
        label = Path(label).resolve().as_posix()
    root = [p for p in label.replace("\\", "/").split("/") if p]
    if len(tree.selected) == 1 and root and root[-1] == tree.selected[0]:
        root = root[:-1]  # a single selected file: the tree's label is the file
    if root and root[-1] == "events":
        root = root[:-1]
    return root[-1] if root else "session"


@register
class OpenHandsImporter(Importer):
    name = "openhands"
    title = "OpenHands V0 event stream (JSON list, sessions/<sid>/events/, eval output.jsonl)"
    version = "2"

    def find(self, tree: SourceTree, candidates: Sequence[str]) -> list[Unit]:
        def is_session(first_member: str) -> bool:
            first = tree.try_json(first_member)
            return _is_v0_event(first) or (first is None and _looks_like(tree, first_member, _V0_EVENT_HEAD))

        return _find_units(self, tree, candidates, _V0_EVENT_FILE, is_session, "metadata.json")

    def sniff(self, tree: SourceTree, rel: str) -> bool:
        lower = rel.lower()
        if lower.endswith(".jsonl"):
            first = tree.first_json_line(rel)
            if first is None:
                return _looks_like_eval(tree, rel) == "v0"
            return _history_version(first) == "v0"
        if lower.endswith(".json") and not _V0_EVENT_FILE.match(posixpath.basename(rel)):
            data = tree.try_json(rel)
            if data is None:
                return _looks_like(tree, rel, _V0_LIST_HEAD, 1 << 16)
            return isinstance(data, list) and bool(data) and _is_v0_event(data[0])
        return False

    def companions(self, tree: SourceTree, rel: str) -> list[str]:
        return _eval_companions(tree, rel) if rel.lower().endswith(".jsonl") else []

    def read(self, tree: SourceTree, unit: Unit) -> list[ImportedRun]:
        if _V0_EVENT_FILE.match(posixpath.basename(unit.primary)):
            return [self._read_session_dir(tree, unit)]
        if unit.primary.lower().endswith(".jsonl"):
            return self._read_eval_output(tree, unit)
        return [self._read_event_list(tree, unit)]

    # layouts ----------------------------------------------------------------------------------

    def _read_event_list(self, tree: SourceTree, unit: Unit) -> ImportedRun:
        data = tree.json(unit.primary)
        if not isinstance(data, list):
            raise InputError(tree.label(unit.primary), None, None, "expected a JSON list of OpenHands events")
        native = posixpath.splitext(posixpath.basename(unit.primary))[0]
        events = [(f"[{i}]", item) for i, item in enumerate(data)]
        root = _v0_workspace_root(events)
        b = self.builder(tree, unit, native, workspace_root=root)
        records = [_v0_record(b, tree, unit.primary, label, item) for label, item in events]
        _V0Mapper(b, root, records).run(labels={"source_layout": "event-list"})
        return b.build()

    def _read_session_dir(self, tree: SourceTree, unit: Unit) -> ImportedRun:
        event_files = [rel for rel in unit.files if _V0_EVENT_FILE.match(posixpath.basename(rel))]
        folder = posixpath.dirname(unit.primary)
        events = []
        for rel in event_files:
            events.append((rel, tree.json(rel)))
        root = _v0_workspace_root([("$", data) for _, data in events])
        b = self.builder(tree, unit, _session_id(tree, folder), workspace_root=root)
        records = [_v0_record(b, tree, rel, "$", data) for rel, data in events]
        meta_records = []
        for rel in unit.files:
            if posixpath.basename(rel) == "metadata.json":
                meta_records.append(b.record(rel, "$", tree.json(rel)))
        _V0Mapper(b, root, records).run(labels={"source_layout": "session-events"}, start_sources=meta_records)
        return b.build()

    def _read_eval_output(self, tree: SourceTree, unit: Unit) -> list[ImportedRun]:
        outcomes = _EvalOutcomes(tree, posixpath.dirname(unit.primary))
        runs: list[ImportedRun] = []
        for line in tree.jsonl(unit.primary):
            if line.error is not None:
                raise InputError(tree.label(unit.primary), line.line, None, line.error)
            value = line.value
            if not isinstance(value, dict):
                raise InputError(tree.label(unit.primary), line.line, None, "expected a JSON object (one eval output)")
            probe = Record(tree, unit.primary, str(line.line), value, None)
            instance_id = probe.get("instance_id", (str, int))
            history = probe.list("history")
            flat: list[tuple[str, Any]] = []
            for i, item in enumerate(history):
                if isinstance(item, list):  # old [action, observation] pairs
                    flat.extend((f"{line.line}:history[{i}][{j}]", sub) for j, sub in enumerate(item))
                else:
                    flat.append((f"{line.line}:history[{i}]", item))
            root = _v0_workspace_root(flat)
            native, experiment = _eval_native_id(tree, unit.primary, str(instance_id), value)
            b = self.builder(tree, unit, native, workspace_root=root)
            envelope = b.record(unit.primary, line.line, {k: v for k, v in value.items() if k != "history"},
                                native_id=str(instance_id))
            records = [_v0_record(b, tree, unit.primary, label, item) for label, item in flat]
            model, settings, labels = _eval_start_fields(envelope)
            labels.update(experiment.labels())
            mapper = _V0Mapper(b, root, records, eval_run=True)
            mapper.run(labels=labels, start_sources=[envelope], model=model, model_settings=settings,
                       task_id=str(instance_id), ts=timestamp(envelope.get("metadata.start_time", str, required=False)))
            _eval_end(b, envelope)
            _eval_outcomes(b, envelope, str(instance_id), outcomes)
            runs.append(b.build())
        return runs


def _v0_record(b: RunBuilder, tree: SourceTree, file: str, label: str, item: Any) -> Record:
    rec = b.record(file, label, item, native_id=item.get("id") if isinstance(item, dict) else None)
    if not isinstance(item, dict):
        raise rec.error(None, f"expected an event object, got {type(item).__name__}")
    rec.int("id")
    if "action" not in rec.data and "observation" not in rec.data:
        raise rec.error("action", "missing (an event has an action or an observation)")
    if "action" in rec.data:
        rec.str("action")
    else:
        rec.str("observation")
    rec.get("source", str, required=False)
    return rec


def _v0_workspace_root(events: list[tuple[str, Any]]) -> str:
    """The runtime's working directory when the recall observation names it, else /workspace."""
    for _, item in events:
        if isinstance(item, dict) and item.get("observation") == "recall":
            extras = item.get("extras")
            working = extras.get("working_dir") if isinstance(extras, dict) else None
            if isinstance(working, str) and working.startswith("/") and len(working) > 1:
                return working.rstrip("/")
    return DEFAULT_WORKSPACE


_V0_TERMINAL_STATES = {"finished": "completed", "error": "error", "stopped": "aborted", "rejected": "aborted"}
_PAIRED_V0_ACTIONS = {"run", "run_ipython", "read", "edit", "write", "think", "browse", "browse_interactive",
                      "call_tool_mcp", "task_tracking", "finish", "reject"}


class _V0Mapper:
    """Maps one run's V0 event records, in stream order."""

    def __init__(self, b: RunBuilder, root: str, records: list[Record], *, eval_run: bool = False) -> None:
        self.b = b
        self.s = _Session(b, root)
        self.records = records
        self.eval_run = eval_run
        self.consumed: set[int] = set()  # id() of observation records cited by their action's event
        self.pairs = self._pair()
        self.delegate_open: dict[int, str] = {}  # delegate action id -> worker id
        self.agent_state: tuple[str, Record] | None = None
        self.user_messages = 0

    def _pair(self) -> dict[int, Record]:
        """action record index -> its observation record (by cause, then by tool_call_id)."""
        actions: dict[int, int] = {}
        by_call: dict[str, int] = {}
        for index, rec in enumerate(self.records):
            if "action" in rec.data and rec.data.get("action") in _PAIRED_V0_ACTIONS:
                actions.setdefault(rec.data["id"], index)
                call = _call_id(rec)
                if call:
                    by_call.setdefault(call, index)
        pairs: dict[int, Record] = {}
        for rec in self.records:
            if "observation" not in rec.data or rec.data.get("observation") == "delegate":
                continue
            cause = rec.data.get("cause")
            index = actions.get(cause) if isinstance(cause, int) and not isinstance(cause, bool) else None
            if index is None:
                call = _call_id(rec)
                index = by_call.get(call) if call else None
            if index is not None and index not in pairs and self.records[index].data["id"] < rec.data["id"]:
                pairs[index] = rec
        return pairs

    def run(self, *, labels: dict[str, str], start_sources: Sequence[Record] = (), model: str | None = None,
            model_settings: dict[str, Any] | None = None, task_id: str | None = None, ts: str | None = None) -> None:
        version = None
        system_rec = None
        for rec in self.records:
            if rec.data.get("action") == "system":
                args = rec.data.get("args") if isinstance(rec.data.get("args"), dict) else {}
                version = args.get("openhands_version") if isinstance(args.get("openhands_version"), str) else None
                if isinstance(args.get("agent_class"), str):
                    labels.setdefault("agent_class", args["agent_class"])
                system_rec = rec
                break
        if model is None:
            model = _first_response_model(self.records)
        sources = list(start_sources) or ([system_rec] if system_rec is not None else [])
        self.b.start(harness="openhands", harness_version=version, model=model, model_settings=model_settings or None,
                     task_id=task_id, labels=labels or None, ts=ts, source=sources)
        for index, rec in enumerate(self.records):
            if id(rec) in self.consumed:
                continue
            if "action" in rec.data:
                self.action(rec, self.pairs.get(index))
            else:
                self.observation(rec)
        if not self.eval_run and self.agent_state is not None:
            state, rec = self.agent_state
            if state in _V0_TERMINAL_STATES:
                reason = rec.get("extras.reason", str, required=False) or None
                self.b.add("run_ended", actor="harness", source=rec, status=_V0_TERMINAL_STATES[state], reason=reason)

    # actions ----------------------------------------------------------------------------------

    def action(self, rec: Record, obs: Record | None) -> None:
        s, b = self.s, self.b
        kind = rec.str("action")
        source = rec.get("source", str, required=False)
        ts = timestamp(rec.data.get("timestamp"))
        actor = s.actor_of(source)
        args = rec.get("args", dict, required=False) or {}
        if obs is not None:
            self.consumed.add(id(obs))
        sources = [rec] + ([obs] if obs is not None else [])
        thought = args.get("thought") if isinstance(args.get("thought"), str) else None

        if kind == "message":
            text = rec.str("args.content")
            if source == "user":
                self.user_messages += 1
                if self.eval_run and self.user_messages > 1 and text.startswith(_CONTINUE_PROMPT):
                    actor = "harness"  # the eval harness's automatic "please continue" reply
                b.add("message", actor=actor, source=sources, ts=ts, text=text)
            else:
                wait = args.get("wait_for_response") is True
                intent = "question" if wait and text.rstrip().endswith("?") else _plan_or(text, None)
                b.add("message", actor=actor, source=sources, ts=ts, text=text, intent=intent if text else None)
        elif kind == "system":
            b.keep(rec, "action:system", actor="harness", ts=ts)
        elif kind == "recall":
            b.keep(rec, "action:recall", actor="harness", ts=ts)
        elif kind == "run":
            parent = s.thought(thought, rec, actor, ts)
            command = rec.str("args.command")
            is_input = args.get("is_input") in (True, "true")
            if args.get("hidden") is True:
                actor = "harness"
            if not command.strip():
                # an empty command only polls the running process's output
                b.keep(rec, "action:run (poll output)", actor=actor, ts=ts)
                if obs is not None:
                    b.keep(obs, "observation:run")
                return
            output, code, working = _v0_run_result(obs)
            s.shell(command, actor=actor, sources=sources, output=output, exit_code=code, ts=ts, parent=parent,
                    working_dir=working, effects=not is_input)
        elif kind == "run_ipython":
            parent = s.thought(thought, rec, actor, ts)
            code = rec.str("args.code")
            output = obs.get("content", str, required=False) if obs is not None else None
            seq = b.command(code, actor=actor, source=sources, output=output, ts=ts, parent=parent, effects=False)
            for match in _AGENTSKILLS.finditer(code):
                func, path = match.groups()
                if func == "open_file":
                    s.file_read(path, actor=actor, sources=sources, ts=ts, parent=seq)
                else:
                    s.file_edit(path, "create" if func == "create_file" else "modify", actor=actor, sources=sources,
                                ts=ts, parent=seq)
        elif kind == "read":
            parent = s.thought(thought, rec, actor, ts)
            path = rec.str("args.path")
            error = _v0_tool_error(obs)
            if error is not None and obs is not None:
                s.failed_tool(rec, obs, "action:read", error, actor=actor, ts=ts, parent=parent)
            else:
                s.file_read(path, actor=actor, sources=sources, ts=ts, parent=parent)
        elif kind in ("edit", "write"):
            parent = s.thought(thought, rec, actor, ts)
            path = rec.str("args.path")
            error = _v0_tool_error(obs)
            if error is not None and obs is not None:
                s.failed_tool(rec, obs, f"action:{kind}", error, actor=actor, ts=ts, parent=parent)
            else:
                edit_kind = self._edit_kind(kind, rec, obs, path)
                diff = obs.get("extras.diff", str, required=False) if obs is not None else None
                s.file_edit(path, edit_kind, actor=actor, sources=sources, ts=ts, parent=parent, diff=diff)
        elif kind == "think":
            text = thought if thought is not None else rec.get("args.thought", str)
            b.add("message", actor=actor, source=sources, ts=ts, text=text or "(empty thought)", intent="reasoning")
        elif kind == "finish":
            self.finish(rec, sources, actor, args, ts)
        elif kind == "reject":
            parent = s.thought(thought, rec, actor, ts)
            outputs = args.get("outputs") if isinstance(args.get("outputs"), dict) else {}
            reason = outputs.get("reason") if isinstance(outputs.get("reason"), str) else None
            b.add("message", actor=actor, source=sources, ts=ts, parent=parent,
                  text=reason or rec.get("message", str, required=False) or "(task rejected)")
        elif kind == "delegate":
            self.delegate(rec, actor, args, ts, thought)
        elif kind in ("condensation", "condensation_request"):
            self.condensation(kind, rec, source, args, ts)
        elif kind == "task_tracking":
            parent = s.thought(thought, rec, actor, ts)
            if args.get("command") == "plan" and isinstance(args.get("task_list"), list):
                b.add("message", actor=actor, source=sources, ts=ts, parent=parent, text=_render_tasks(args["task_list"]),
                      intent="plan")
            else:
                b.keep(rec, "action:task_tracking", actor=actor, ts=ts)
                if obs is not None:
                    b.keep(obs, "observation:task_tracking")
        else:
            # browse, MCP calls, push, change_agent_state, pause, ... : kept as what the actor did
            if actor != "harness":
                s.thought(thought, rec, actor, ts)
            b.keep(rec, f"action:{kind}", actor=actor, ts=ts)
            if obs is not None:
                b.keep(obs, f"observation:{obs.data.get('observation')}")

    def _edit_kind(self, kind: str, rec: Record, obs: Record | None, path: str) -> str:
        command = rec.get("args.command", str, required=False)
        if command is None:
            code = rec.get("args.translated_ipython_code", str, required=False) or ""
            found = re.search(r"""['"]command['"]\s*:\s*['"](\w+)['"]""", code)
            command = found.group(1) if found else None
        if command == "create":
            return "create"
        if command in ("str_replace", "insert", "undo_edit", "edit"):
            return "modify"
        if obs is not None and isinstance(obs.data.get("extras"), dict) and isinstance(obs.data["extras"].get("prev_exist"), bool):
            return "modify" if obs.data["extras"]["prev_exist"] else "create"
        resolved = self.s.resolve(path, self.s.cwd)
        return "modify" if resolved in self.s.touched else ("create" if kind == "write" else "modify")

    def finish(self, rec: Record, sources: list[Record], actor: str, args: dict[str, Any], ts: str | None) -> None:
        final = args.get("final_thought") if isinstance(args.get("final_thought"), str) else None
        thought = args.get("thought") if isinstance(args.get("thought"), str) else None
        outputs = args.get("outputs")
        claim = final or None
        if not claim and isinstance(outputs, dict) and outputs:
            content = outputs.get("content") or outputs.get("answer")
            claim = content if isinstance(content, str) and content else json.dumps(outputs, sort_keys=True)
        parent = None
        if thought and thought.strip() and thought != claim:
            if claim:
                parent = self.s.thought(thought, rec, actor, ts)
            else:
                claim = thought
        if not claim:
            claim = rec.get("message", str, required=False) or "(finished)"
        completed = args.get("task_completed")
        scope = "step" if self.s.delegates else "run"
        if completed in ("false", False):
            # the agent stops and says the task is NOT done: an admission, not a completion claim
            self.b.add("message", actor=actor, source=sources, ts=ts, parent=parent, text=claim, intent="summary")
        else:
            self.b.add("completion_claim", actor=actor, source=sources, ts=ts, parent=parent, claim=claim, scope=scope)

    def delegate(self, rec: Record, actor: str, args: dict[str, Any], ts: str | None, thought: str | None) -> None:
        parent = self.s.thought(thought, rec, actor, ts)
        agent = rec.get("args.agent", str, required=False) or "delegate"
        inputs = args.get("inputs") if isinstance(args.get("inputs"), dict) else {}
        task = inputs.get("task")
        instruction = task if isinstance(task, str) else json.dumps(inputs, sort_keys=True)
        worker = _worker_id(agent, str(rec.data["id"]))
        self.b.add("delegation", actor=actor, source=rec, ts=ts, parent=parent, worker_id=worker,
                   instruction=instruction, context=self.s.context_of(instruction))
        self.delegate_open[rec.data["id"]] = worker
        self.s.delegates.append(worker)

    def condensation(self, kind: str, rec: Record, source: str | None, args: dict[str, Any], ts: str | None) -> None:
        if kind == "condensation_request":
            requested_by = self.s.model_actor() if (source == "agent" and rec.data.get("tool_call_metadata")) else "harness"
            self.s.condensation_actor = requested_by
            self.b.keep(rec, "action:condensation_request", actor=requested_by, ts=ts)
            return
        actor = self.s.condensation_actor or "harness"
        self.s.condensation_actor = None
        summary = args.get("summary") if isinstance(args.get("summary"), str) else None
        self.b.add("compaction", actor=actor, source=rec, ts=ts, summary=summary or None)

    # observations -----------------------------------------------------------------------------

    def observation(self, rec: Record) -> None:
        s, b = self.s, self.b
        kind = rec.str("observation")
        ts = timestamp(rec.data.get("timestamp"))
        content = rec.get("content", str, required=False) or ""
        if kind == "delegate":
            cause = rec.data.get("cause")
            worker = self.delegate_open.pop(cause, None) if isinstance(cause, int) else None
            if worker is None and s.delegates:
                worker = s.delegates[-1]
            if worker in s.delegates:
                s.delegates.remove(worker)
            worker = worker or _worker_id("delegate", str(rec.data["id"]))
            status = "failure" if "encountered an error" in content else ("success" if "finishes task" in content else None)
            text = content or json.dumps(rec.get("extras.outputs", dict, required=False) or {}, sort_keys=True)
            b.add("worker_report", actor=f"subagent:{worker}", source=rec, ts=ts, worker_id=worker, text=text,
                  status=status, evidence=s.paths_in(text) or None)
        elif kind == "error":
            b.add("message", actor="harness", source=rec, ts=ts, text=content or "(error)")
        elif kind == "agent_state_changed":
            state = rec.get("extras.agent_state", str, required=False)
            if state:
                self.agent_state = (state, rec)
            b.keep(rec, "observation:agent_state_changed", ts=ts)
        elif kind == "user_rejected":
            b.add("message", actor="user", source=rec, ts=ts, text=content or "(action rejected)")
        elif kind in ("chat", "message"):
            actor = s.actor_of(rec.get("source", str, required=False))
            b.add("message", actor=actor, source=rec, ts=ts, text=content or "(empty message)")
        elif kind == "condense":
            b.add("compaction", actor="harness", source=rec, ts=ts, summary=content or None)
        elif kind == "run" and rec.get("extras.command", str, required=False):
            # its action is not in this slice of the stream: the command still ran
            output, code, working = _v0_run_result(rec)
            s.shell(rec.get("extras.command", str), actor=s.model_actor(), sources=[rec], output=output,
                    exit_code=code, ts=ts, parent=None, working_dir=working)
        else:
            if kind == "recall":
                working = rec.get("extras.working_dir", str, required=False)
                if working and working.startswith("/") and s.cwd is None:
                    s.cwd = working
            b.keep(rec, f"observation:{kind}", ts=ts)


def _call_id(rec: Record) -> str | None:
    meta = rec.data.get("tool_call_metadata")
    if isinstance(meta, dict) and isinstance(meta.get("tool_call_id"), str) and meta["tool_call_id"]:
        return meta["tool_call_id"]
    return None


def _first_response_model(records: list[Record]) -> str | None:
    for rec in records:
        meta = rec.data.get("tool_call_metadata")
        response = meta.get("model_response") if isinstance(meta, dict) else None
        if isinstance(response, dict) and isinstance(response.get("model"), str) and response["model"]:
            return response["model"]
    return None


def _v0_run_result(obs: Record | None) -> tuple[str | None, int | None, str | None]:
    """(output, exit code, working dir after) of a run observation; -1 means no exit code."""
    if obs is None:
        return None, None, None
    output = obs.get("content", str, required=False)
    if obs.data.get("observation") != "run":
        return output, None, None
    code = obs.get("extras.metadata.exit_code", int, required=False)
    if code is None:
        code = obs.get("extras.exit_code", int, required=False)
    if code is None and output:
        code = exit_code_from_text(output)
    if code == -1:
        code = None
    working = obs.get("extras.metadata.working_dir", str, required=False)
    return output, code, working


def _v0_tool_error(obs: Record | None) -> str | None:
    """The editor's refusal text, when the observation is one."""
    if obs is None:
        return None
    content = obs.get("content", str, required=False) or ""
    if obs.data.get("observation") == "error" or content.lstrip().startswith("ERROR:"):
        return content
    return None


def _render_tasks(tasks: list[Any]) -> str:
    lines = []
    for index, task in enumerate(tasks, start=1):
        if isinstance(task, dict):
            title = task.get("title") or task.get("description") or ""
            status = task.get("status")
            lines.append(f"{index}. {title}" + (f" [{status}]" if isinstance(status, str) else ""))
        else:
            lines.append(f"{index}. {task}")
    return "\n".join(lines) or "(empty plan)"


# --- V1 -----------------------------------------------------------------------------------------

_V1_TERMINAL = {"finished": "completed", "error": "error", "stuck": "aborted"}
_V1_SHELL = {"TerminalAction", "ExecuteBashAction", "BashAction", "CmdRunAction"}
_V1_EDITOR = {"FileEditorAction", "StrReplaceEditorAction", "PlanningFileEditorAction"}
_V1_TASK_DONE = {"completed": "success", "succeeded": "success", "success": "success", "finished": "success",
                 "failed": "failure", "error": "failure", "errored": "failure", "cancelled": "failure",
                 "canceled": "failure", "stopped": "failure"}


@register
class OpenHandsV1Importer(Importer):
    name = "openhands-v1"
    title = "OpenHands V1 SDK events (events JSONL, <conv>/events/event-*.json, benchmark output.jsonl)"
    version = "2"

    def find(self, tree: SourceTree, candidates: Sequence[str]) -> list[Unit]:
        def is_conversation(first_member: str) -> bool:
            first = tree.try_json(first_member)
            return _is_v1_event(first) or (first is None and b'"kind"' in _head(tree, first_member))

        return _find_units(self, tree, candidates, _V1_EVENT_FILE, is_conversation, "base_state.json")

    def sniff(self, tree: SourceTree, rel: str) -> bool:
        if not rel.lower().endswith(".jsonl"):
            return False
        first = tree.first_json_line(rel)
        if first is None:
            return _looks_like_eval(tree, rel) == "v1"
        return _is_v1_event(first) or _history_version(first) == "v1"

    def companions(self, tree: SourceTree, rel: str) -> list[str]:
        return _eval_companions(tree, rel) if self._is_eval(tree, rel) else []

    @staticmethod
    def _is_eval(tree: SourceTree, rel: str) -> bool:
        first = tree.first_json_line(rel)
        return _history_version(first) == "v1" if first is not None else _looks_like_eval(tree, rel) == "v1"

    def read(self, tree: SourceTree, unit: Unit) -> list[ImportedRun]:
        if _V1_EVENT_FILE.match(posixpath.basename(unit.primary)):
            return [self._read_conversation_dir(tree, unit)]
        if self._is_eval(tree, unit.primary):
            return self._read_eval_output(tree, unit)
        return [self._read_events_jsonl(tree, unit)]

    def _read_events_jsonl(self, tree: SourceTree, unit: Unit) -> ImportedRun:
        native = posixpath.splitext(posixpath.basename(unit.primary))[0]
        b = self.builder(tree, unit, native, workspace_root=DEFAULT_WORKSPACE)
        items: list[Record | tuple[int, str, str]] = []
        for line in tree.jsonl(unit.primary):
            if line.error is not None:
                items.append((line.line, line.text, line.error))  # a line cut mid-write: kept, counted
                continue
            items.append(_v1_record(b, unit.primary, str(line.line), line.value))
        _V1Mapper(b, DEFAULT_WORKSPACE, items, unit.primary).run(labels={"source_layout": "events-jsonl"})
        return b.build()

    def _read_conversation_dir(self, tree: SourceTree, unit: Unit) -> ImportedRun:
        folder = posixpath.dirname(unit.primary)
        state_rel = next((f for f in unit.files if posixpath.basename(f) == "base_state.json"), None)
        state = tree.json(state_rel) if state_rel else None
        root = DEFAULT_WORKSPACE
        if isinstance(state, dict):
            workspace = state.get("workspace")
            working = workspace.get("working_dir") if isinstance(workspace, dict) else None
            if isinstance(working, str) and working.startswith("/") and len(working) > 1:
                root = working.rstrip("/")
        native = state.get("id") if isinstance(state, dict) and isinstance(state.get("id"), str) else _session_id(tree, folder)
        b = self.builder(tree, unit, native, workspace_root=root)
        state_rec = b.record(state_rel, "$", state, native_id=native) if state_rel else None
        items: list[Record | tuple[int, str, str]] = []
        for rel in unit.files:
            if _V1_EVENT_FILE.match(posixpath.basename(rel)):
                items.append(_v1_record(b, rel, "$", tree.json(rel)))
        mapper = _V1Mapper(b, root, items, unit.primary)
        model, settings = None, {}
        if state_rec is not None:
            llm = state_rec.get("agent.llm", dict, required=False) or {}
            model = llm.get("model") if isinstance(llm.get("model"), str) else None
            settings = _llm_settings(llm)
            if isinstance(state_rec.data.get("max_iterations"), int):
                settings["max_iterations"] = state_rec.data["max_iterations"]
            status = state_rec.get("execution_status", str, required=False)
            if status:
                mapper.final_status = (status, state_rec)
        mapper.run(labels={"source_layout": "conversation-dir"}, start_sources=[state_rec] if state_rec else [],
                   model=model, model_settings=settings)
        return b.build()

    def _read_eval_output(self, tree: SourceTree, unit: Unit) -> list[ImportedRun]:
        outcomes = _EvalOutcomes(tree, posixpath.dirname(unit.primary))
        runs = []
        for line in tree.jsonl(unit.primary):
            if line.error is not None:
                raise InputError(tree.label(unit.primary), line.line, None, line.error)
            value = line.value
            if not isinstance(value, dict):
                raise InputError(tree.label(unit.primary), line.line, None, "expected a JSON object (one eval output)")
            probe = Record(tree, unit.primary, str(line.line), value, None)
            instance_id = str(probe.get("instance_id", (str, int)))
            attempt = value.get("attempt")
            native = instance_id if not isinstance(attempt, int) or attempt <= 1 else f"{instance_id}.attempt{attempt}"
            native, experiment = _eval_native_id(tree, unit.primary, native, value, instance_id=instance_id)
            history = probe.list("history")
            b = self.builder(tree, unit, native, workspace_root=DEFAULT_WORKSPACE)
            envelope = b.record(unit.primary, line.line, {k: v for k, v in value.items() if k != "history"},
                                native_id=instance_id)
            items: list[Record | tuple[int, str, str]] = [
                _v1_record(b, unit.primary, f"{line.line}:history[{i}]", item) for i, item in enumerate(history)]
            model, settings, labels = _eval_start_fields(envelope)
            labels.update(experiment.labels())
            mapper = _V1Mapper(b, DEFAULT_WORKSPACE, items, unit.primary, eval_run=True)
            mapper.run(labels=labels, start_sources=[envelope], model=model, model_settings=settings, task_id=instance_id)
            _eval_end(b, envelope)
            _eval_outcomes(b, envelope, instance_id, outcomes)
            runs.append(b.build())
        return runs


def _v1_record(b: RunBuilder, file: str, label: str, item: Any) -> Record:
    rec = b.record(file, label, item, native_id=item.get("id") if isinstance(item, dict) else None)
    if not isinstance(item, dict):
        raise rec.error(None, f"expected an event object, got {type(item).__name__}")
    rec.str("id")
    rec.str("kind")
    return rec


class _V1Mapper:
    """Maps one run's V1 SDK events, in stream order."""

    def __init__(self, b: RunBuilder, root: str, items: list[Record | tuple[int, str, str]], file: str, *,
                 eval_run: bool = False) -> None:
        self.b = b
        self.s = _Session(b, root)
        self.items = items
        self.file = file
        self.eval_run = eval_run
        self.final_status: tuple[str, Record] | None = None
        self.workers: dict[str, str] = {}  # task id -> worker id
        self.consumed: set[int] = set()
        self.pairs = self._pair()

    def _pair(self) -> dict[int, Record]:
        actions: dict[str, int] = {}
        by_call: dict[str, int] = {}
        for index, rec in enumerate(self.items):
            if isinstance(rec, Record) and rec.data.get("kind") == "ActionEvent":
                actions.setdefault(rec.data["id"], index)
                call = rec.data.get("tool_call_id")
                if isinstance(call, str) and call:
                    by_call.setdefault(call, index)
        pairs: dict[int, Record] = {}
        for index, rec in enumerate(self.items):
            if not isinstance(rec, Record) or rec.data.get("kind") != "ObservationEvent":
                continue
            action_id = rec.get("action_id", str, required=False)
            target = actions.get(action_id) if action_id is not None else None
            if target is None:
                call = rec.data.get("tool_call_id")
                target = by_call.get(call) if isinstance(call, str) else None
            if target is not None and target < index and target not in pairs:
                pairs[target] = rec
        return pairs

    def run(self, *, labels: dict[str, str], start_sources: Sequence[Record] = (), model: str | None = None,
            model_settings: dict[str, Any] | None = None, task_id: str | None = None) -> None:
        if model is None:
            model = _v1_model(self.items)
        self.b.start(harness="openhands-sdk", model=model, model_settings=model_settings or None, task_id=task_id,
                     labels=labels or None, source=list(start_sources))
        for index, item in enumerate(self.items):
            if not isinstance(item, Record):
                line, text, reason = item
                self.b.unparsed(self.file, line, text, reason)
                continue
            if id(item) in self.consumed:
                continue
            self.event(item, self.pairs.get(index))
        if not self.eval_run and self.final_status is not None:
            status, rec = self.final_status
            if status in _V1_TERMINAL:
                self.b.add("run_ended", actor="harness", source=rec, status=_V1_TERMINAL[status],
                           reason=None if status == "finished" else f"execution_status {status}")

    def event(self, rec: Record, obs: Record | None) -> None:
        s, b = self.s, self.b
        kind = rec.str("kind")
        source = rec.get("source", str, required=False)
        ts = timestamp(rec.data.get("timestamp"))
        actor = s.actor_of(source)
        if kind == "ActionEvent":
            if obs is not None:
                self.consumed.add(id(obs))
            self.action(rec, obs, actor, ts)
        elif kind == "ObservationEvent":
            self.orphan_observation(rec, ts)
        elif kind == "MessageEvent":
            role = rec.get("llm_message.role", str, required=False)
            text = _text_of(rec.get("llm_message.content", object, required=False))
            reasoning = rec.get("reasoning_content", str, required=False) or \
                rec.get("llm_message.reasoning_content", str, required=False)
            if role == "assistant" or source == "agent":
                parent = s.thought(reasoning, rec, "agent", ts)
                if text or parent is None:
                    b.add("message", actor="agent", source=rec, ts=ts, parent=parent, text=text or "(empty message)",
                          intent=_plan_or(text, None))
            else:
                b.add("message", actor="user" if source == "user" else "harness", source=rec, ts=ts,
                      text=text or "(empty message)")
        elif kind == "AgentErrorEvent":
            b.add("message", actor="harness", source=rec, ts=ts, text=rec.get("error", str, required=False) or "(error)")
        elif kind == "UserRejectObservation":
            reason = rec.get("rejection_reason", str, required=False) or "(action rejected)"
            by = rec.get("rejection_source", str, required=False)
            b.add("message", actor="user" if by in (None, "user") else "harness", source=rec, ts=ts, text=reason)
        elif kind == "CondensationRequest":
            s.condensation_actor = "agent" if source == "agent" else "harness"
            b.keep(rec, kind, actor=s.condensation_actor, ts=ts)
        elif kind == "Condensation":
            actor = s.condensation_actor or "harness"
            s.condensation_actor = None
            summary = rec.get("summary", str, required=False)
            b.add("compaction", actor=actor, source=rec, ts=ts, summary=summary or None)
        elif kind == "ConversationStateUpdateEvent":
            if rec.data.get("key") == "execution_status" and isinstance(rec.data.get("value"), str):
                self.final_status = (rec.data["value"], rec)
            b.keep(rec, kind, ts=ts)
        elif kind == "PauseEvent":
            b.keep(rec, kind, actor="user" if source == "user" else "harness", ts=ts)
        else:
            # SystemPromptEvent, CondensationSummaryEvent, hook and LLM-log events, future kinds
            b.keep(rec, kind, actor="harness" if actor != "user" else "user", ts=ts)

    def thoughts(self, rec: Record, actor: str, ts: str | None) -> int | None:
        reasoning = rec.get("reasoning_content", str, required=False)
        visible = _THINK_BLOCK.sub("", _text_of(rec.get("thought", object, required=False))).strip()
        parent = self.s.thought(reasoning, rec, actor, ts)
        if visible and visible != (reasoning or "").strip():
            parent = self.s.thought(visible, rec, actor, ts) or parent
        return parent

    def action(self, rec: Record, obs: Record | None, actor: str, ts: str | None) -> None:
        s, b = self.s, self.b
        action = rec.get("action", dict, required=False)
        sources = [rec] + ([obs] if obs is not None else [])
        parent = self.thoughts(rec, actor, ts)
        if action is None:
            # a tool call the SDK could not turn into an action (not executed)
            tool = rec.get("tool_name", str, required=False) or "tool"
            b.add("source_record", actor=actor, source=rec, ts=ts, parent=parent,
                  record_type=f"ActionEvent:{tool} (not executed)")
            if obs is not None:
                b.keep(obs, "ObservationEvent")
            return
        kind = rec.str("action.kind")
        error = _v1_error(obs)
        if kind in _V1_SHELL:
            command = rec.str("action.command")
            if not command.strip():
                b.keep(rec, f"{kind} (poll output)", actor=actor, ts=ts)
                if obs is not None:
                    b.keep(obs, "ObservationEvent")
                return
            output, code, working = _v1_run_result(obs)
            s.shell(command, actor=actor, sources=sources, output=output, exit_code=code, ts=ts, parent=parent,
                    working_dir=working, effects=action.get("is_input") is not True)
        elif kind in _V1_EDITOR:
            path = rec.str("action.path")
            command = rec.get("action.command", str, required=False) or "view"
            if error is not None and obs is not None:
                s.failed_tool(rec, obs, f"{kind}:{command}", error, actor=actor, ts=ts, parent=parent)
            elif command == "view":
                s.file_read(path, actor=actor, sources=sources, ts=ts, parent=parent)
            else:
                s.file_edit(path, "create" if command == "create" else "modify", actor=actor, sources=sources,
                            ts=ts, parent=parent)
        elif kind == "FinishAction":
            message = rec.get("action.message", str, required=False) or "(finished)"
            b.add("completion_claim", actor=actor, source=sources, ts=ts, parent=parent, claim=message, scope="run")
        elif kind == "ThinkAction":
            text = rec.get("action.thought", str, required=False) or "(empty thought)"
            b.add("message", actor=actor, source=sources, ts=ts, parent=parent, text=text, intent="reasoning")
        elif kind == "TaskTrackerAction" and action.get("command") == "plan" and isinstance(action.get("task_list"), list):
            b.add("message", actor=actor, source=sources, ts=ts, parent=parent, text=_render_tasks(action["task_list"]),
                  intent="plan")
        elif kind == "TaskAction":
            self.task(rec, obs, actor, ts, parent)
        elif kind == "TaskOutputAction" and obs is not None and _task_status(obs) is not None:
            b.keep(rec, kind, actor=actor, ts=ts)
            self.task_report(obs, rec.get("action.task_id", str, required=False), ts)
        elif kind == "DelegateAction" and isinstance(action.get("tasks"), dict):
            self.delegate(rec, obs, actor, ts, parent, action["tasks"])
        elif kind == "DelegateAction" and isinstance(action.get("task"), str):
            self.delegate(rec, obs, actor, ts, parent, {"": action["task"]})
        else:
            b.keep(rec, f"ActionEvent:{kind}", actor=actor, ts=ts)
            if obs is not None:
                b.keep(obs, "ObservationEvent")

    def task(self, rec: Record, obs: Record | None, actor: str, ts: str | None, parent: int | None) -> None:
        prompt = rec.str("action.prompt")
        task_id = obs.get("observation.task_id", str, required=False) if obs is not None else None
        subagent = rec.get("action.subagent_type", str, required=False) or "subagent"
        worker = _worker_id(subagent, task_id or rec.data["id"][:8])
        if task_id:
            self.workers[task_id] = worker
        seq = self.b.add("delegation", actor=actor, source=rec, ts=ts, parent=parent, worker_id=worker,
                         instruction=prompt, context=self.s.context_of(prompt))
        if obs is not None:
            if _task_status(obs) is not None:
                self.task_report(obs, task_id, ts, worker=worker, parent=seq)
            else:
                self.b.keep(obs, "ObservationEvent:TaskObservation")

    def task_report(self, obs: Record, task_id: str | None, ts: str | None, *, worker: str | None = None,
                    parent: int | None = None) -> None:
        worker = worker or (self.workers.get(task_id) if task_id else None) or _worker_id("task", task_id or obs.data["id"][:8])
        text = _text_of(obs.get("observation.content", object, required=False)) or "(no output)"
        self.b.add("worker_report", actor=f"subagent:{worker}", source=obs, ts=ts, parent=parent, worker_id=worker,
                   text=text, status=_task_status(obs), evidence=self.s.paths_in(text) or None)

    def delegate(self, rec: Record, obs: Record | None, actor: str, ts: str | None, parent: int | None,
                 tasks: dict[str, Any]) -> None:
        seqs = []
        for ident in sorted(tasks):
            task = tasks[ident]
            instruction = task if isinstance(task, str) else json.dumps(task, sort_keys=True)
            anchor = ident or (obs.get("observation.sub_conversation_id", str, required=False) if obs else None) \
                or rec.data["id"][:8]
            worker = _worker_id("delegate", anchor)
            seqs.append((worker, self.b.add("delegation", actor=actor, source=rec, ts=ts, parent=parent,
                                            worker_id=worker, instruction=instruction,
                                            context=self.s.context_of(instruction))))
        if obs is not None:
            text = _text_of(obs.get("observation.content", object, required=False)) or \
                obs.get("observation.message", str, required=False) or "(no output)"
            failed = _v1_error(obs) is not None or obs.get("observation.success", bool, required=False) is False
            for worker, seq in seqs:
                self.b.add("worker_report", actor=f"subagent:{worker}", source=obs, ts=ts, parent=seq, worker_id=worker,
                           text=text, status="failure" if failed else None, evidence=self.s.paths_in(text) or None)

    def orphan_observation(self, rec: Record, ts: str | None) -> None:
        """An observation whose action is not in this slice (the SDK's fixtures are slices)."""
        command = rec.get("observation.command", str, required=False)
        if command and command.strip():
            output, code, working = _v1_run_result(rec)
            self.s.shell(command, actor="agent", sources=[rec], output=output, exit_code=code, ts=ts, parent=None,
                         working_dir=working)
        else:
            self.b.keep(rec, "ObservationEvent", ts=ts)


def _v1_model(items: Sequence[Any]) -> str | None:
    for item in items:
        if isinstance(item, Record) and item.data.get("kind") == "ConversationStateUpdateEvent" and item.data.get("key") == "stats":
            usage = item.get("value.usage_to_metrics", dict, required=False) or {}
            default = usage.get("default") if isinstance(usage.get("default"), dict) else None
            if default and isinstance(default.get("model_name"), str):
                return default["model_name"]
    return None


def _v1_run_result(obs: Record | None) -> tuple[str | None, int | None, str | None]:
    if obs is None:
        return None, None, None
    output = _text_of(obs.get("observation.content", object, required=False)) or \
        obs.get("observation.output", str, required=False)
    code = obs.get("observation.exit_code", int, required=False)
    if code is None:
        code = obs.get("observation.metadata.exit_code", int, required=False)
    if code == -1:
        code = None
    working = obs.get("observation.metadata.working_dir", str, required=False)
    return output, code, working


def _v1_error(obs: Record | None) -> str | None:
    if obs is None:
        return None
    error = obs.get("observation.error", str, required=False)
    if error:
        return error
    if obs.get("observation.is_error", bool, required=False) is True:
        return _text_of(obs.get("observation.content", object, required=False)) or "(error)"
    return None


def _task_status(obs: Record) -> str | None:
    status = obs.get("observation.status", str, required=False)
    return _V1_TASK_DONE.get(status.lower()) if status else None
