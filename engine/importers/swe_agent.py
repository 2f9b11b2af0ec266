"""SWE-agent ``.traj`` files and mini-swe-agent ``.traj.json`` files, with SWE-bench reports.

**SWE-agent** (``<instance>.traj``) keeps two views of one run: ``trajectory[]``, one
step per model turn (``thought``, ``action``, ``observation``, ``state``; 1.x adds
``execution_time``, ``query``, ``extra_info``), and ``history[]``, the chat the model
saw (system prompt, demonstrations, the instance prompt, then an assistant message and
an observation per executed step). Steps are the process events; history items are
cited alongside the step they belong to (paired by their ``action``), so every record is
kept. A step missing from a history that exists was never executed when its observation
is empty (SWE-agent 1.x records requeried format errors, blocked and syntax-error actions
in the trajectory only): its thought is kept, no command is made of it.

Actions are shell commands or SWE-agent's own tools: ``open``/``goto``/``scroll_*``/
``search_file``/``filemap`` read a file, ``create`` makes one, ``edit``/``insert``/
``append`` change the open file (tracked from ``open``/``create`` and ``state.open_file``),
``str_replace_editor view|create|str_replace|insert|undo_edit PATH`` reads or edits, and
``submit`` claims the run done. A tool whose output says it did nothing (a linted edit
that was rolled back, a search string not found) is a ``command``, not an edit.
SWE-agent prints no exit codes; they are read from the output only where a harness did.
``state`` is a JSON string recorded *before* the action in 0.x and a dict recorded
*after* it in 1.x; the working directory and open file before each action follow that.

**mini-swe-agent** (``trajectory_format`` ``mini-swe-agent-1``, v1.x: ``messages[]`` with
one fenced ``bash`` block per assistant message and the result in the next user message
as ``<returncode>N</returncode><output>...``; ``mini-swe-agent-1.1``, v2.x: assistant
``extra.actions[]``/``tool_calls``, observations as ``role: tool`` messages with
``tool_call_id`` and ``extra.returncode``, a final ``role: exit`` message). The command
``echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`` (older: ``MINI_SWE_AGENT_FINAL_OUTPUT``) is
the completion claim.

**SWE-bench** ``report.json`` next to the trajectory, or in SWE-bench's experiments layout
``<experiment>/logs/<instance>/report.json`` (``{instance_id: {resolved, tests_status:
{FAIL_TO_PASS: {success, failure}, ...}}}``) gives one acceptance verdict and one test result
per test.

**Run identity.** A leaderboard archive holds several systems' runs of the same instances:
run ids are ``<format>/<system>/<instance>``, the system being the experiment folder the
archive names (``evaluation/<split>/<date>_<system>/trajs/...``, a folder with a
``metadata.yaml``, a SWE-agent run folder ``...__t-0.00__p-0.95__c-3.00...``; see
:mod:`procgrade.engine.importers.provenance`) or ``--system``; when neither is known, the raw model
from the run's config qualifies the id instead (``swe-agent/gpt-4o/<instance>``).
``labels.system``/``split``/``benchmark``/``system_name`` record what the folders say.
"""

from __future__ import annotations

import json
import posixpath
import re
import shlex
from collections.abc import Sequence
from typing import Any

from procgrade.engine.errors import InputError
from procgrade.engine.exact import decimal_text
from procgrade.engine.importers.base import Importer, Unit, register
from procgrade.engine.importers.building import ImportedRun, Record, RunBuilder, timestamp
from procgrade.engine.importers.provenance import identify
from procgrade.engine.importers.shell import exit_code_from_text
from procgrade.engine.importers.source_tree import SourceTree, strict_json

__all__ = ["SweAgentImporter", "MiniSweAgentImporter"]

REPORT_NAME = "report.json"
SWE_BENCH = "swe-bench"

# --- shared helpers ----------------------------------------------------------------------------


def _text_of(content: Any) -> str:
    """A chat message's text: a string, or the text parts of a content list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif isinstance(part, str):
                parts.append(part)
        return "\n".join(parts)
    return ""


def _stem(rel: str, suffixes: Sequence[str]) -> str:
    name = posixpath.basename(rel)
    for suffix in suffixes:
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return name


def _dig(value: Any, *keys: str) -> dict[str, Any]:
    """The object at ``value[k1][k2]...``, or {} where any level is not an object."""
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value if isinstance(value, dict) else {}


def _doc_error(tree: SourceTree, rel: str, field: str | None, reason: str) -> InputError:
    """An error about the document as a whole (no record inside it to name)."""
    return InputError(tree.label(rel), None, field, reason)


def _head_bytes(tree: SourceTree, rel: str, limit: int = 4096) -> bytes:
    try:
        return tree.head(rel, limit)
    except Exception:  # noqa: BLE001 - sniffing never raises
        return b""


def _report_for(tree: SourceTree, rel: str, instance_id: str) -> str | None:
    """The SWE-bench ``report.json`` for ``instance_id``: next to ``rel``, or where SWE-bench's
    experiments layout keeps it (``<experiment>/logs/<instance>/report.json`` beside
    ``<experiment>/trajs/``)."""
    folder = posixpath.dirname(rel)
    candidates = [tree.join(folder, REPORT_NAME) if folder else REPORT_NAME]
    parts = folder.split("/") if folder else []
    for up in range(1, min(len(parts), 3) + 1):
        base = "/".join(parts[: len(parts) - up])
        candidates.append(tree.join(base, "logs", instance_id, REPORT_NAME) if base
                          else posixpath.join("logs", instance_id, REPORT_NAME))
    for candidate in candidates:
        if candidate == rel or not tree.exists(candidate):
            continue
        data = tree.try_json(candidate)
        if isinstance(data, dict) and instance_id in data:
            return candidate
        if data is None and f'"{instance_id}"'.encode() in _head_bytes(tree, candidate, 1 << 20):
            return candidate  # broken, but this instance's: claimed so that read() says what is wrong
    return None


def _find_units(importer: Importer, tree: SourceTree, candidates: Sequence[str], instance_id_of: Any) -> list[Unit]:
    """Units of ``importer`` among ``candidates``; a report goes to one unit only and only
    when no other importer has claimed it already (else the trajectory alone is read)."""
    units: list[Unit] = []
    given: set[str] = set()
    for rel in candidates:
        if not importer.sniff(tree, rel):
            continue
        report = _report_for(tree, rel, instance_id_of(rel))
        if report is not None and report not in given and (report in candidates or report not in tree.selected):
            given.add(report)
            units.append(Unit(rel, (report,)))
        else:
            units.append(Unit(rel))
    return units


def _add_swe_bench_outcome(b: RunBuilder, tree: SourceTree, report_rel: str, instance_id: str) -> None:
    """One acceptance verdict and a test result per test from a SWE-bench ``report.json``."""
    data = tree.json(report_rel)
    if not isinstance(data, dict) or instance_id not in data:
        raise _doc_error(tree, report_rel, instance_id, "expected a JSON object holding this instance's report")
    rec = b.record(report_rel, instance_id, data[instance_id], native_id=instance_id)
    rec.obj("")  # the entry is an object
    resolved = rec.get("resolved", bool)
    patch_is_none = rec.get("patch_is_None", bool, required=False)
    patch_exists = rec.get("patch_exists", bool, required=False)
    applied = rec.get("patch_successfully_applied", bool, required=False)
    status_map = rec.opt_obj("tests_status")
    known = ["FAIL_TO_PASS", "PASS_TO_PASS", "FAIL_TO_FAIL", "PASS_TO_FAIL"]
    groups = [g for g in known if g in status_map] + sorted(g for g in status_map if g not in known)
    results: list[tuple[str, str, str]] = []
    per_group: dict[str, dict[str, int]] = {}
    for group in groups:
        rec.obj(f"tests_status.{group}")
        counts = {"passed": 0, "failed": 0}
        for key, outcome in (("success", "passed"), ("failure", "failed")):
            tests = rec.opt_list(f"tests_status.{group}.{key}")
            for index, test in enumerate(tests):
                if not isinstance(test, str) or not test:
                    raise rec.error(f"tests_status.{group}.{key}.{index}", "expected a non-empty test id string")
                results.append((test, outcome, group))
                counts[outcome] += 1
        per_group[group] = counts
    not_submitted = patch_is_none is True or patch_exists is False
    details: dict[str, Any] = {"resolved": resolved, "groups": per_group}
    for name, value in (("patch_is_None", patch_is_none), ("patch_exists", patch_exists),
                        ("patch_successfully_applied", applied)):
        if value is not None:
            details[name] = value
    passed = sum(1 for _, outcome, _ in results if outcome == "passed")
    failed = len(results) - passed
    b.outcome("acceptance_verdict", source=rec, verifier=SWE_BENCH,
              status="not_submitted" if not_submitted else "evaluated",
              reward=None if not_submitted else ("1" if resolved else "0"),
              value="resolved" if resolved else "unresolved",
              passed=passed, failed=failed, details=details)
    for test_id, outcome, group in results:
        b.outcome("test_result", source=rec, test_id=test_id, outcome=outcome, group=group, verifier=SWE_BENCH)


# --- SWE-agent -----------------------------------------------------------------------------------

# Harness actions that end a 0.x run (the model did not choose them).
_HARNESS_EXIT_ACTIONS = {"exit_cost", "exit_context", "exit_error", "exit_format", "exit_api",
                         "exit_environment_error", "exit_total_execution_time", "exit_command_timeout"}
_HARNESS_EXIT_THOUGHT = re.compile(r"^\s*Exit(?:ing)? due to ")

# Outputs of SWE-agent's file tools that mean nothing was changed or read.
_TOOL_FAILED = re.compile(
    r"Your proposed edit has introduced new syntax error|Your edit was not applied|Your changes have NOT been applied"
    r"|No replacement was performed|No changes were made|No file open(?:ed)?\b|^\s*Usage: "
    r"|Search text must not be empty|Cannot overwrite files using command `create`|No edit history found"
    r"|does not exist\. Please provide a valid path|Invalid `\w+` parameter|^\s*File .* not found"
    r"|^\s*Error: File .* not found|^\s*ERROR:",
    re.MULTILINE,
)
_SWE_AGENT_KEYS = {"trajectory", "history", "info", "environment", "replay_config"}
_DIRECTORY_LISTING = re.compile(r"Here's the files and directories up to \d+ levels? deep")
_CURRENT_DIRECTORY = re.compile(r"\(Current directory: ([^)\n]+)\)")

# How a run ended, by SWE-agent's exit status: the harness stopping the model at a cost or
# context limit is ``budget_exhausted`` (an autosubmission then is the harness's, not a
# claim), the model leaving without submitting ``gave_up``.
_RUN_STATUS = {
    "submitted": "completed",
    "exit_cost": "budget_exhausted", "exit_context": "budget_exhausted",
    "exit_forfeit": "gave_up", "exit_command": "gave_up", "early_exit": "gave_up",
    "skipped": "aborted",
    "exit_total_execution_time": "timeout", "exit_command_timeout": "timeout",
    "exit_format": "failed",
    "exit_error": "error", "exit_api": "error", "exit_environment_error": "error",
}


def swe_agent_run_status(exit_status: str) -> str | None:
    """``submitted`` -> completed; ``submitted (exit_cost)`` (the harness autosubmitted) is
    judged by why it stopped: budget_exhausted."""
    text = exit_status.strip()
    inner = re.match(r"^submitted \((.+)\)$", text)
    if inner:
        text = inner.group(1).strip()
    return _RUN_STATUS.get(text)


def _is_demo(item: dict[str, Any]) -> bool:
    return bool(item.get("is_demo")) or item.get("message_type") == "demonstration"


def _config_dict(value: Any) -> dict[str, Any]:
    """``replay_config``: a JSON object, or (as SWE-agent writes it) JSON text of one."""
    if isinstance(value, str):
        try:
            value = strict_json(value)
        except ValueError:
            return {}
    return value if isinstance(value, dict) else {}


def _words(action: str) -> list[str]:
    """The action's words (shell quoting honoured where it balances)."""
    for text in (action, action.split("\n", 1)[0]):
        try:
            words = shlex.split(text, posix=True)
        except ValueError:
            continue
        if words:
            return words
    return action.split()


class _State:
    """The working directory and open file before a step, as the trajectory shows them."""

    def __init__(self, cwd: str | None) -> None:
        self.cwd = cwd
        self.open_file: str | None = None

    def take(self, state: dict[str, Any] | None) -> None:
        if not state:
            return
        cwd = state.get("working_dir")
        if isinstance(cwd, str) and cwd.strip():
            self.cwd = cwd.strip()
        open_file = state.get("open_file")
        if isinstance(open_file, str) and open_file.strip() and open_file.strip() not in ("n/a", "None"):
            self.open_file = open_file.strip()

    def resolve(self, path: str) -> str:
        path = path.strip()
        if path.startswith("/") or not self.cwd:
            return posixpath.normpath(path) if path.startswith("/") else path
        return posixpath.normpath(posixpath.join(self.cwd, path))



def run_statistics(info: dict[str, Any]) -> dict[str, str]:
    """The harness's ``model_stats`` (cost, tokens, API calls) as run labels, exact decimal
    text; ``cost`` is the run's cost. Statistics of the run, not settings: two runs with
    the same settings differ here, so they stay out of ``model_settings``."""
    stats = info.get("model_stats")
    if not isinstance(stats, dict):
        return {}
    labels = {}
    for key in sorted(stats):
        value = stats[key]
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            try:
                labels[key] = decimal_text(value)
            except ValueError:
                continue
    for key in ("instance_cost", "total_cost"):
        if key in labels:
            labels["cost"] = labels[key]
            break
    return labels

@register
class SweAgentImporter(Importer):
    name = "swe-agent"
    title = "SWE-agent .traj trajectory (0.x and 1.x), with a SWE-bench report.json next to it"
    version = "2"

    def sniff(self, tree: SourceTree, rel: str) -> bool:
        if rel.endswith(".traj"):
            return True  # SWE-agent's own suffix: claimed even when broken, so read() says why
        if not rel.endswith(".json") or rel.endswith(".traj.json"):
            return False
        data = tree.try_json(rel)
        if not isinstance(data, dict) or not isinstance(data.get("trajectory"), list) or "messages" in data:
            return False
        if not (isinstance(data.get("history"), list) or isinstance(data.get("info"), dict)):
            return False
        first = data["trajectory"][0] if data["trajectory"] else {}
        return isinstance(first, dict) and ("action" in first or not data["trajectory"])

    def find(self, tree: SourceTree, candidates: Sequence[str]) -> list[Unit]:
        return _find_units(self, tree, candidates, self.instance_id)

    @staticmethod
    def instance_id(rel: str) -> str:
        return _stem(rel, (".traj", ".json"))

    def read(self, tree: SourceTree, unit: Unit) -> list[ImportedRun]:
        rel = unit.primary
        data = tree.json(rel)
        instance_id = self.instance_id(rel)
        if not isinstance(data, dict):
            raise _doc_error(tree, rel, None, "expected a JSON object (a SWE-agent .traj)")

        replay_raw = data.get("replay_config")
        history_raw = data.get("history")
        root = self._workspace_root(_config_dict(replay_raw), history_raw, data.get("trajectory"))
        model_name = _dig(_config_dict(replay_raw), "agent", "model").get("name")
        native, experiment = identify(tree, rel, instance_id, instance_id=instance_id,
                                      model=model_name if isinstance(model_name, str) and model_name else None)
        b = self.builder(tree, unit, native, workspace_root=root)

        # Provenance records (cited by run_started only); provenance is read from the redacted copies.
        start_sources: list[Record] = []
        if "environment" in data:
            env_rec = b.record(rel, "environment", data["environment"])
            env_rec.get("", (str, type(None)))
            start_sources.append(env_rec)
        replay: dict[str, Any] = {}
        if "replay_config" in data:
            replay_rec = b.record(rel, "replay_config", replay_raw)
            replay_rec.get("", (str, dict, type(None)))
            replay = _config_dict(replay_rec.data)
            if isinstance(replay_raw, str) and not replay:
                raise replay_rec.error(None, "not a JSON object (SWE-agent stores the run config as JSON text)")
            start_sources.append(replay_rec)

        traj_list = data.get("trajectory")
        if not isinstance(traj_list, list):
            raise _doc_error(tree, rel, "trajectory", "missing" if traj_list is None else "expected an array")
        steps = [b.record(rel, f"trajectory[{i}]", step) for i, step in enumerate(traj_list)]
        for step in steps:
            self._check_step(step)

        history: list[Record] = []
        if history_raw is not None:
            if not isinstance(history_raw, list):
                raise _doc_error(tree, rel, "history", "expected an array")
            history = [b.record(rel, f"history[{j}]", item, native_id=self._history_native_id(item))
                       for j, item in enumerate(history_raw)]
            for item in history:
                item.obj("")
                item.str("role")
                item.get("content", (str, list, type(None)), required=False)
                item.get("action", (str, type(None)), required=False)

        info_rec: Record | None = None
        info: dict[str, Any] = {}
        if "info" in data:
            info_rec = b.record(rel, "info", data["info"])
            info = info_rec.obj("")
            info_rec.get("exit_status", (str, type(None)), required=False)
            info_rec.get("model_stats", (dict, type(None)), required=False)
            info_rec.get("swe_agent_version", (str, type(None)), required=False)

        extras = [b.record(rel, key, data[key]) for key in data if key not in _SWE_AGENT_KEYS]

        agent_cfg = replay.get("agent") if isinstance(replay.get("agent"), dict) else {}
        model_cfg = agent_cfg.get("model") if isinstance(agent_cfg.get("model"), dict) else {}
        settings = {k: v for k, v in model_cfg.items() if k != "name" and "key" not in k.lower()}
        environment = data.get("environment")
        labels = {"environment": environment} if isinstance(environment, str) else {}
        labels.update(run_statistics(info))
        labels.update(experiment.labels())
        model = model_cfg.get("name") if isinstance(model_cfg.get("name"), str) else None
        if model is None and len(experiment.models) == 1:
            model = experiment.models[0]
        b.start(harness="swe-agent", harness_version=info.get("swe_agent_version"),
                model=model,
                model_settings=settings or None, task_id=instance_id, labels=labels or None,
                source=start_sources)

        self._emit(b, steps, history, root)

        for rec in extras:
            b.keep(rec, rec.record)
        if info_rec is not None:
            exit_status = info_rec.opt_str("exit_status")
            if exit_status:
                b.add("run_ended", actor="harness", source=info_rec, status=swe_agent_run_status(exit_status),
                      reason=exit_status)
            else:
                b.keep(info_rec, "info")
        for report in unit.companions:
            _add_swe_bench_outcome(b, tree, report, instance_id)
        return [b.build()]

    # --- reading ---------------------------------------------------------------------------------

    @staticmethod
    def _workspace_root(replay: dict[str, Any], history: Any, trajectory: Any) -> str | None:
        env = replay.get("env") if isinstance(replay.get("env"), dict) else {}
        repo = env.get("repo") if isinstance(env.get("repo"), dict) else {}
        name = repo.get("repo_name")
        if isinstance(name, str) and name.strip():
            return name if name.startswith("/") else "/" + name
        if isinstance(history, list):
            for item in history:
                if isinstance(item, dict) and item.get("role") == "user" and not item.get("is_demo"):
                    found = _CURRENT_DIRECTORY.search(_text_of(item.get("content")))
                    if found:
                        return found.group(1).strip()
                    break
        if isinstance(trajectory, list) and trajectory and isinstance(trajectory[0], dict):
            # The first step's working directory: before its action in 0.x, after it in 1.x.
            state = _config_dict(trajectory[0].get("state"))
            if isinstance(state.get("working_dir"), str) and state["working_dir"].startswith("/"):
                return state["working_dir"]
        return None

    @staticmethod
    def _history_native_id(item: Any) -> str | None:
        if not isinstance(item, dict):
            return None
        ids = item.get("tool_call_ids")
        if isinstance(ids, list) and ids and isinstance(ids[0], str):
            return ids[0]
        calls = item.get("tool_calls")
        if isinstance(calls, list) and calls and isinstance(calls[0], dict) and isinstance(calls[0].get("id"), str):
            return calls[0]["id"]
        return None

    @staticmethod
    def _check_step(step: Record) -> None:
        step.obj("")
        step.str("action")
        step.get("observation", (str, type(None)), required=False)
        step.get("thought", (str, type(None)), required=False)
        step.get("response", (str, type(None)), required=False)
        step.get("execution_time", (int, float, type(None)), required=False)
        state = step.get("state", (str, dict, type(None)), required=False)
        if isinstance(state, str) and state.strip():
            try:
                parsed = strict_json(state)
            except ValueError:
                raise step.error("state", "not JSON (0.x records the state as a JSON object in text)") from None
            if not isinstance(parsed, dict):
                raise step.error("state", "expected a JSON object in text")

    @staticmethod
    def _state_of(step: Record) -> tuple[dict[str, Any] | None, bool]:
        """(state, recorded_after_action): 0.x text states precede the action, 1.x dicts follow it."""
        state = step.get("state", (str, dict, type(None)), required=False)
        if isinstance(state, str):
            return (strict_json(state) if state.strip() else None), False
        return state, True

    def _pair(self, steps: list[Record], history: list[Record]) -> tuple[dict[int, int], dict[int, int]]:
        """step index -> history index of its assistant message, and of its observation."""
        asked: dict[int, int] = {}
        answered: dict[int, int] = {}
        next_step = 0
        for j, item in enumerate(history):
            if item.data.get("role") != "assistant" or _is_demo(item.data):
                continue
            action = item.data.get("action")
            if not isinstance(action, str):
                continue
            same = [k for k in range(next_step, len(steps)) if steps[k].data["action"].strip() == action.strip()]
            thought = item.data.get("thought")
            if not action.strip() and isinstance(thought, str):
                # Empty actions (requeried format errors, the harness's exit step): the thought decides.
                same = [k for k in same if str(steps[k].data.get("thought") or "").strip() == thought.strip()] or same
            match = same[0] if same else None
            if match is None:
                continue
            asked[match] = j
            next_step = match + 1
            if j + 1 < len(history):
                after = history[j + 1].data
                if after.get("role") in ("user", "tool") and not _is_demo(after):
                    answered[match] = j + 1
        return asked, answered

    def _emit(self, b: RunBuilder, steps: list[Record], history: list[Record], root: str | None) -> None:
        asked, answered = self._pair(steps, history)
        by_history = {j: k for k, j in asked.items()}
        cited = set(asked.values()) | set(answered.values())
        state = _State(root)
        emitted = 0
        seen_task = False
        previous_after: dict[int, dict[str, Any] | None] = {}

        def emit_steps(upto: int) -> None:
            nonlocal emitted
            while emitted < upto:
                self._emit_step(b, steps, emitted, history, asked, answered, state, previous_after)
                emitted += 1

        for j, item in enumerate(history):
            if j in by_history:
                emit_steps(by_history[j] + 1)
                continue
            if j in cited:
                continue
            data = item.data
            role = data.get("role")
            text = _text_of(data.get("content"))
            if _is_demo(data):
                b.keep(item, "demonstration")
            elif role == "system":
                b.add("message", actor="harness", source=item, text=text)
            elif role == "user" and not seen_task and emitted == 0:
                seen_task = True
                b.add("message", actor="user", source=item, text=text)
            elif role == "assistant":
                b.add("message", actor="agent", source=item, text=text)
            else:
                b.add("message", actor="harness", source=item, text=text)
        emit_steps(len(steps))

    def _emit_step(self, b: RunBuilder, steps: list[Record], k: int, history: list[Record], asked: dict[int, int],
                   answered: dict[int, int], state: _State, previous_after: dict[int, Any]) -> None:
        step = steps[k]
        recorded, after = self._state_of(step)
        if after:
            state.take(previous_after.get(k - 1))
        else:
            state.take(recorded)
        previous_after[k] = recorded if after else None

        action = step.data["action"]
        observation = step.get("observation", (str, type(None)), required=False) or ""
        thought = (step.get("thought", (str, type(None)), required=False) or "").strip()
        ask = [history[asked[k]]] if k in asked else []
        answer = [history[answered[k]]] if k in answered else []
        # A step missing from a history that pairs others was requeried, not run, unless it shows output.
        executed = k in asked or not asked or bool(observation.strip())

        words = _words(action) if action.strip() else []
        if action.strip() in _HARNESS_EXIT_ACTIONS or (not action.strip() and _HARNESS_EXIT_THOUGHT.match(thought)):
            # The harness ended the run (cost, context, errors) and autosubmitted.
            b.add("message", actor="harness", source=[step, *ask, *answer], text=thought or action.strip())
            return
        acting = bool(action.strip()) and executed
        action_sources = [step, *ask, *answer]
        if thought:
            b.add("message", actor="agent", source=[step, *ask, *([] if acting else answer)], text=thought,
                  intent="reasoning")
            action_sources = [step, *answer]
        if not acting:
            if not thought:  # a model turn the harness did not run (or an empty one): kept, not scored
                b.add("source_record", actor="agent", source=action_sources,
                      record_type="unexecuted step" if action.strip() else "empty step")
            return
        self._emit_action(b, step, action, words, observation, thought, action_sources, state)

    def _emit_action(self, b: RunBuilder, step: Record, action: str, words: list[str], observation: str,
                     thought: str, sources: list[Record], state: _State) -> None:
        program = words[0] if words else ""
        failed = bool(_TOOL_FAILED.search(observation))

        def read(path: str) -> None:
            b.add("file_read", actor="agent", source=sources, path=state.resolve(path))

        def edit(path: str, kind: str) -> None:
            b.add("file_edit", actor="agent", source=sources, path=state.resolve(path), edit_kind=kind)

        def command() -> None:
            seconds = step.get("execution_time", (int, float, type(None)), required=False)
            duration = int(round(seconds * 1000)) if isinstance(seconds, (int, float)) and 0 <= seconds <= 10**9 else None
            b.command(action.strip(), actor="agent", source=sources, output=observation,
                      exit_code=exit_code_from_text(observation), duration_ms=duration, cwd=state.cwd)

        if program == "submit":
            b.add("completion_claim", actor="agent", source=sources, claim=thought or action.strip(), scope="run")
        elif program in ("open", "filemap") and len(words) >= 2 and not failed:
            read(words[1])
            if program == "open":
                state.open_file = state.resolve(words[1])
        elif program in ("goto", "scroll_up", "scroll_down") and state.open_file and not failed:
            read(state.open_file)
        elif program == "search_file" and not failed and (len(words) >= 3 or state.open_file):
            read(words[2] if len(words) >= 3 else state.open_file)  # type: ignore[arg-type]
        elif program == "create" and len(words) >= 2 and not failed:
            if "already exists" in observation:
                read(words[1])  # the tool opens the existing file instead
            else:
                edit(words[1], "create")
            state.open_file = state.resolve(words[1])
        elif program in ("edit", "insert", "append") and state.open_file and not failed:
            edit(state.open_file, "modify")
        elif program == "str_replace_editor" and len(words) >= 3 and not failed:
            sub, path = words[1], words[2]
            if sub == "view" and not _DIRECTORY_LISTING.search(observation):
                read(path)
            elif sub == "create":
                edit(path, "create")
            elif sub in ("str_replace", "insert", "undo_edit"):
                edit(path, "modify")
            else:
                command()
        else:
            command()


# --- mini-swe-agent ----------------------------------------------------------------------------

_BASH_BLOCK = re.compile(r"```bash\s*\n(.*?)\n```", re.DOTALL)
_SUBMIT_MARKER = re.compile(
    r"\b(?:echo|printf)\s+['\"]?(?:COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT|MINI_SWE_AGENT_FINAL_OUTPUT)\b")
_OUTPUT_BLOCK = re.compile(r"<output>\n?(.*?)</output>", re.DOTALL)

_MINI_STATUS = {"Submitted": "completed", "LimitsExceeded": "budget_exhausted", "TimeExceeded": "timeout",
                "RepeatedFormatError": "failed", "FormatError": "failed"}


def mini_run_status(exit_status: str) -> str:
    return _MINI_STATUS.get(exit_status.strip(), "error")


@register
class MiniSweAgentImporter(Importer):
    name = "mini-swe-agent"
    title = "mini-swe-agent trajectory (.traj.json; formats mini-swe-agent-1 and -1.1), with a SWE-bench report.json"
    version = "2"

    def sniff(self, tree: SourceTree, rel: str) -> bool:
        if not rel.endswith(".json"):
            return False
        data = tree.try_json(rel)
        if data is None:
            # Broken JSON: claimed when it is clearly ours, so read() says what is wrong.
            head = _head_bytes(tree, rel)
            return (rel.endswith(".traj.json") or b'"mini_version"' in head
                    or b'"trajectory_format": "mini-swe-agent' in head)
        if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
            return False
        fmt = data.get("trajectory_format")
        return (isinstance(fmt, str) and fmt.startswith("mini-swe-agent")) or "mini_version" in _dig(data, "info")

    def find(self, tree: SourceTree, candidates: Sequence[str]) -> list[Unit]:
        return _find_units(self, tree, candidates, self.instance_id)

    @staticmethod
    def instance_id(rel: str) -> str:
        return _stem(rel, (".traj.json", ".json"))

    def read(self, tree: SourceTree, unit: Unit) -> list[ImportedRun]:
        rel = unit.primary
        data = tree.json(rel)
        instance_id = self.instance_id(rel)
        if not isinstance(data, dict):
            raise _doc_error(tree, rel, None, "expected a JSON object (a mini-swe-agent trajectory)")
        raw_info = data.get("info") if isinstance(data.get("info"), dict) else {}
        raw_env = _dig(raw_info, "config", "environment")
        cwd = raw_env.get("cwd").strip() if isinstance(raw_env.get("cwd"), str) else ""
        model_name = _dig(raw_info, "config", "model").get("model_name")
        native, experiment = identify(tree, rel, instance_id, instance_id=instance_id,
                                      model=model_name if isinstance(model_name, str) and model_name else None)
        b = self.builder(tree, unit, native, workspace_root=cwd or None)

        info_rec: Record | None = None
        info: dict[str, Any] = {}
        if "info" in data:
            info_rec = b.record(rel, "info", data["info"])
            info = info_rec.obj("")
            info_rec.get("exit_status", (str, type(None)), required=False)
        start_sources = [b.record(rel, key, data[key]) for key in data if key not in ("info", "messages")]
        messages_raw = data.get("messages")
        if not isinstance(messages_raw, list):
            raise _doc_error(tree, rel, "messages", "missing" if messages_raw is None else "expected an array")
        messages = [b.record(rel, f"messages[{i}]", m, native_id=self._native_id(m))
                    for i, m in enumerate(messages_raw)]
        for msg in messages:
            msg.obj("")
            msg.str("role")
            msg.get("content", (str, list, type(None)), required=False)
            msg.get("extra", (dict, type(None)), required=False)
            msg.get("tool_calls", (list, type(None)), required=False)

        # Provenance from the redacted info record.
        config = _dig(info, "config")
        model_cfg, agent_cfg = _dig(config, "model"), _dig(config, "agent")
        settings: dict[str, Any] = {}
        if isinstance(model_cfg.get("model_kwargs"), dict):
            settings["model_kwargs"] = model_cfg["model_kwargs"]
        settings.update({key: agent_cfg[key] for key in ("step_limit", "cost_limit") if key in agent_cfg})
        labels = {key: config[key] for key in ("agent_type", "model_type", "environment_type")
                  if isinstance(config.get(key), str)}
        labels.update(run_statistics(info))
        if isinstance(data.get("trajectory_format"), str):
            labels["trajectory_format"] = data["trajectory_format"]
        labels.update(experiment.labels())
        version, model = info.get("mini_version"), model_cfg.get("model_name")
        if not isinstance(model, str) and len(experiment.models) == 1:
            model = experiment.models[0]
        b.start(harness="mini-swe-agent", harness_version=version if isinstance(version, str) else None,
                model=model if isinstance(model, str) else None, model_settings=settings or None,
                task_id=instance_id, labels=labels or None, source=[*start_sources, *([info_rec] if info_rec else [])])

        exit_messages = self._emit(b, messages, agent_cfg, config)

        exit_status = info_rec.opt_str("exit_status") if info_rec is not None else None
        for msg in exit_messages:
            status = _dig(msg.data, "extra").get("exit_status")
            if not exit_status and isinstance(status, str) and status:
                exit_status = status
        ending = [*([info_rec] if info_rec is not None else []), *exit_messages]
        if exit_status:
            b.add("run_ended", actor="harness", source=ending, status=mini_run_status(exit_status), reason=exit_status)
        else:
            for rec in ending:
                b.keep(rec, "info" if rec is info_rec else "exit")
        for report in unit.companions:
            _add_swe_bench_outcome(b, tree, report, instance_id)
        return [b.build()]

    @staticmethod
    def _native_id(message: Any) -> str | None:
        if not isinstance(message, dict):
            return None
        if isinstance(message.get("tool_call_id"), str):
            return message["tool_call_id"]
        extra = message.get("extra")
        response = extra.get("response") if isinstance(extra, dict) else None
        if isinstance(response, dict) and isinstance(response.get("id"), str):
            return response["id"]
        calls = message.get("tool_calls")
        if isinstance(calls, list) and calls and isinstance(calls[0], dict) and isinstance(calls[0].get("id"), str):
            return calls[0]["id"]
        return None

    @staticmethod
    def _actions(msg: Record) -> list[tuple[str, str | None]] | None:
        """(command, tool_call_id) per action of an assistant message; None when it has none
        that the harness would run (a format error)."""
        actions = _dig(msg.data, "extra").get("actions")
        if isinstance(actions, list) and actions:
            found = []
            for index, action in enumerate(actions):
                if not isinstance(action, dict) or not isinstance(action.get("command"), str):
                    raise msg.error(f"extra.actions.{index}.command", "expected a string")
                call_id = action.get("tool_call_id")
                found.append((action["command"], call_id if isinstance(call_id, str) else None))
            return found
        calls = msg.get("tool_calls", (list, type(None)), required=False)
        if calls:
            found = []
            for index, call in enumerate(calls):
                function = call.get("function") if isinstance(call, dict) else None
                arguments = function.get("arguments") if isinstance(function, dict) else None
                try:
                    args = strict_json(arguments) if isinstance(arguments, str) else arguments
                except ValueError:
                    args = None
                if not isinstance(args, dict) or not isinstance(args.get("command"), str):
                    return None  # the harness answers with a format error
                found.append((args["command"], call.get("id") if isinstance(call.get("id"), str) else None))
            return found
        blocks = _BASH_BLOCK.findall(_text_of(msg.data.get("content")))
        if len(blocks) == 1:
            return [(blocks[0].strip(), None)]
        return None

    def _emit(self, b: RunBuilder, messages: list[Record], agent_cfg: dict[str, Any],
              config: dict[str, Any]) -> list[Record]:
        """Process events from the message list; returns the ``role: exit`` messages."""
        consumed: set[int] = set()
        exits: list[Record] = []
        seen_task = False
        harness_prefixes = [t.split("{", 1)[0].strip()[:40] for key, t in agent_cfg.items()
                            if key.endswith("_template") and key not in ("system_template", "instance_template")
                            and isinstance(t, str) and t.split("{", 1)[0].strip()]
        interactive = "Interactive" in str(config.get("agent_type", ""))
        for i, msg in enumerate(messages):
            if i in consumed:
                continue
            role = msg.data["role"]
            text = _text_of(msg.data.get("content"))
            extra = _dig(msg.data, "extra")
            ts = timestamp(extra.get("timestamp"))
            if role == "system":
                b.add("message", actor="harness", source=msg, text=text, ts=ts)
            elif role == "exit":
                exits.append(msg)
            elif role == "assistant":
                self._emit_assistant(b, messages, i, consumed, ts)
            elif role == "user" and not seen_task:
                seen_task = True
                b.add("message", actor="user", source=msg, text=text, ts=ts)
            else:
                stripped = text.strip()
                from_harness = (role != "user" or bool(extra) or not interactive
                                or any(stripped.startswith(prefix) for prefix in harness_prefixes))
                b.add("message", actor="harness" if from_harness else "user", source=msg, text=text, ts=ts)
        return exits

    def _emit_assistant(self, b: RunBuilder, messages: list[Record], i: int, consumed: set[int],
                        ts: str | None) -> None:
        msg = messages[i]
        text = _text_of(msg.data.get("content"))
        actions = self._actions(msg)
        if ts is None:  # v1: the model response's creation time
            ts = timestamp(_dig(msg.data, "extra", "response").get("created"))
        thought = text
        for command, _ in actions or ():
            # The fenced block that carried the command is the action, not the thought.
            thought = re.sub(r"```[\w-]*[ \t]*\n" + re.escape(command) + r"\s*\n```", "", thought, count=1)
        thought = thought.strip()
        if actions is None:
            # No runnable action: the harness answers with a format error (a later message).
            b.add("message", actor="agent", source=msg, text=text, ts=ts)
            return
        if thought:
            b.add("message", actor="agent", source=msg, text=thought, intent="reasoning", ts=ts)
        # Observations: the following tool/user messages, matched by tool_call_id or in order.
        observations: list[int] = []
        j = i + 1
        while j < len(messages) and len(observations) < len(actions):
            role = messages[j].data.get("role")
            if role == "tool" or (role == "user" and self._observation_like(messages[j])):
                observations.append(j)
                j += 1
                continue
            break
        by_call = {messages[j].data["tool_call_id"]: j for j in observations
                   if isinstance(messages[j].data.get("tool_call_id"), str)}
        in_order = [j for j in observations if not isinstance(messages[j].data.get("tool_call_id"), str)]
        for command, call_id in actions:
            obs_index = by_call.pop(call_id, None) if call_id else None
            if obs_index is None and in_order:
                obs_index = in_order.pop(0)
            if obs_index is None and not call_id and by_call:
                obs_index = by_call.pop(next(iter(by_call)))
            obs = messages[obs_index] if obs_index is not None else None
            sources = [msg]
            if obs is not None:
                consumed.add(obs_index)  # type: ignore[arg-type]
                sources = [msg, obs]
            if _SUBMIT_MARKER.search(command):
                b.add("completion_claim", actor="agent", source=sources, claim=thought or command.strip(),
                      scope="run", ts=ts)
                continue
            output, exit_code, obs_ts = self._observation(obs)
            b.command(command, actor="agent", source=sources, output=output, exit_code=exit_code, ts=obs_ts or ts)

    @staticmethod
    def _observation_like(msg: Record) -> bool:
        """A user message that reports a command's result (not a format error or a prompt)."""
        extra = _dig(msg.data, "extra")
        if extra.get("interrupt_type") == "FormatError":
            return False
        # v2 observations carry extra.returncode; v1 user messages carry no extra at all (the one
        # after an action is its result, a timeout notice, or the submission).
        return "returncode" in extra or "raw_output" in extra or not extra

    @staticmethod
    def _observation(obs: Record | None) -> tuple[str | None, int | None, str | None]:
        if obs is None:
            return None, None, None
        extra = _dig(obs.data, "extra")
        text = _text_of(obs.data.get("content"))
        code = extra.get("returncode")
        if isinstance(code, bool) or not isinstance(code, int):
            code = exit_code_from_text(text)
        raw = extra.get("raw_output")
        if isinstance(raw, str):
            output = raw
        else:
            block = _OUTPUT_BLOCK.search(text)
            output = block.group(1) if block else text
        return output, code, timestamp(extra.get("timestamp"))
