"""DevAI trajectories (metauto-ai/agent-as-a-judge, the Agent-as-a-Judge benchmark).

A trajectory is one JSON array of steps ``{step, user_message, agent{thought, action,
agent_name}, environment, step_usage, accumulated_usage}`` (``trajectory-schema.json``),
stored as ``trajectories/<system>/<task>.json``. The whole file is validated against the
schema with ``jsonschema`` first (the schema next to the data when the tree holds it, else
the copy below); a violation is reported at ``FILE:steps[i]: field: reason``.

One run per file, id ``devai/<system>/<task>``: the system is the parent folder's name
(``OpenHands``), the task the file name's stem (also the ``task_id``, which is the name of
the DevAI instance). Steps are read in file order; each step is one record ``steps[i]``.

Mapping per step: ``user_message`` -> ``message`` (user); ``agent.thought`` -> ``message``
(intent reasoning); ``agent.action`` as OpenHands wrote it: ``Running command: <cmd>`` ->
``command`` through the builder (test runs and the file reads/edits the command line
shows; the exit code only when the environment text prints one: OpenHands's shell
observations here do not); ``Running Python code interactively: <code>`` (an IPython
cell) -> the file reads/edits of the OpenHands file skills it calls (``open_file``,
``create_file``, ``insert_content_at_line``, ``edit_file_by_replace``, ``append_file``,
...; a cell of skill calls only is just those events) and, for any other code, a
``command`` holding the code (no shell file effects are read from Python) with the
writes it visibly makes (``open(path, "w")``, ``df.to_csv(path)``, ``savefig(path)``) and
reads (``open(path)``, ``pd.read_csv(path)``) as children; a cell that does not parse is a
``command`` only (nothing of it ran). Any other action text is kept as ``source_record``.
A last step with no action is the agent finishing: ``completion_claim`` (scope run) with
the thought. ``environment`` is the output of the step's command (its hash is on the
command; the text stays in the raw record). ``step_usage`` stays in the raw records; the
totals of the last step's ``accumulated_usage`` are run labels, as the exact decimal
strings the file holds (``accumulated_cost``, ``accumulated_time``), with summed tokens.
``agent.agent_name``: the first step's agent is ``agent``; steps by another named agent
are ``subagent:<name>``.

No outcome is in a trajectory: DevAI's judgments (per-requirement ``satisfied``) are
separate files. The task's instance file (``instances/<task>.json``) and the schema are
claimed with the trajectory when the tree holds them; the instance is kept with the run's
provenance.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import posixpath
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from procgrade.engine.errors import InputError
from procgrade.engine.exact import decimal_text
from procgrade.engine.importers.base import Importer, Unit, register
from procgrade.engine.importers.building import ImportedRun, Record, RunBuilder
from procgrade.engine.importers.inspect_ai import shell_command
from procgrade.engine.importers.shell import exit_code_from_text
from procgrade.engine.importers.source_tree import SourceTree

if TYPE_CHECKING:
    import jsonschema

__all__ = ["DevAIImporter", "TRAJECTORY_SCHEMA"]

#: ``benchmark/devai/trajectory-schema.json`` of metauto-ai/agent-as-a-judge (commit 43c2fa7),
#: MIT licence, Copyright (c) 2024 metauto.ai. Used when the schema file is not next to the data.
TRAJECTORY_SCHEMA: dict[str, Any] = {
    "type": "array",
    "items": {
        "type": "object",
        "properties": {
            "step": {"type": "integer", "description": "The step number in the trajectory, 0-based."},
            "user_message": {
                "type": ["string", "null"],
                "description": "The message from the external user to the agent. If null, no message was sent.",
            },
            "agent": {
                "type": "object",
                "properties": {
                    "thought": {"type": "string", "description": "The agent's thought at this step."},
                    "action": {
                        "type": ["string", "null"],
                        "description": ("The agent's action sent to the environment. If null, the agent did not take any "
                                        "action, for example, when the agent has finished the task."),
                    },
                    "agent_name": {"type": "string", "description": "The name of the agent that made the action."},
                },
                "required": ["thought", "action"],
                "description": "Everything related to the agent at this step.",
            },
            "environment": {
                "type": ["string", "null"],
                "description": ("The environment's (shell, python interpreter) response to the action submitted by "
                                "the agent. If null, the environment was not involved in this step."),
            },
            "step_usage": {
                "type": "object",
                "properties": {
                    "input_tokens": {"type": "integer", "description": "The number of input tokens passed as LLM context."},
                    "output_tokens": {"type": "integer", "description": "The number of tokens produced by the LLM."},
                    "model": {"type": "string", "description": "The name of the LLM model used."},
                    "cost": {"type": "number", "description": "The cost of the LLM inference, in USD."},
                    "llm_inference_time": {
                        "type": "number",
                        "description": "The time taken by the LLM to generate the output tokens, in seconds.",
                    },
                    "step_execution_time": {
                        "type": "number",
                        "description": "The time taken to make an entire step including LLM inference and environment execution, in seconds.",
                    },
                },
                "required": ["input_tokens", "output_tokens", "model", "cost", "llm_inference_time",
                             "step_execution_time"],
            },
            "accumulated_usage": {
                "type": "object",
                "properties": {
                    "accumulated_cost": {"type": "number", "description": "The total cost of the trajectory up to this step, in USD."},
                    "accumulated_time": {
                        "type": "number",
                        "description": "The total time taken by the agent to complete the trajectory up to this step, in seconds.",
                    },
                },
                "required": ["accumulated_cost", "accumulated_time"],
            },
        },
        "required": ["step", "user_message", "agent", "environment", "step_usage", "accumulated_usage"],
    },
}

SCHEMA_NAME = "trajectory-schema.json"
_HEAD = re.compile(rb'^\s*\[\s*\{\s*"step"\s*:')
_COMMAND = "Running command: "
_IPYTHON = "Running Python code interactively: "
_WORKSPACE = "/workspace"

# OpenHands agentskills file operations: name -> (effect, the argument naming the file).
_SKILLS: dict[str, tuple[str, str]] = {
    "open_file": ("read", "path"),
    "search_file": ("read", "file_path"),
    "parse_pdf": ("read", "file_path"),
    "parse_docx": ("read", "file_path"),
    "parse_latex": ("read", "file_path"),
    "parse_pptx": ("read", "file_path"),
    "create_file": ("create", "filename"),
    "insert_content_at_line": ("modify", "file_name"),
    "edit_file_by_replace": ("modify", "file_name"),
    "append_file": ("modify", "file_name"),
    "edit_file": ("modify", "file_name"),
}
_PATH_KEYWORDS = ("path", "file_path", "filename", "file_name", "file")
# Skills that touch no file (navigation, search over a directory).
_OTHER_SKILLS = {"goto_line", "scroll_down", "scroll_up", "search_dir", "find_file"}
_WRITE_METHODS = {"to_csv", "to_json", "to_excel", "to_parquet", "to_pickle", "to_html", "to_markdown", "savefig",
                  "to_feather", "save"}
_READ_FUNCTIONS = {"read_csv", "read_json", "read_excel", "read_parquet", "read_pickle", "read_table",
                   "read_feather", "loadtxt", "genfromtxt", "imread"}


@register
class DevAIImporter(Importer):
    name = "devai"
    title = "DevAI (Agent-as-a-Judge) trajectory JSON"
    version = "2"

    def find(self, tree: SourceTree, candidates: Sequence[str]) -> list[Unit]:
        units: list[Unit] = []
        taken: set[str] = set()
        for rel in candidates:
            if not self.sniff(tree, rel):
                continue
            # The schema and an instance are shared by many trajectories: the first one claims them.
            mine = [f for f in self.companions(tree, rel) if f not in taken]
            taken.update(mine)
            units.append(Unit(rel, tuple(mine)))
        return units

    def sniff(self, tree: SourceTree, rel: str) -> bool:
        if not rel.lower().endswith(".json") or posixpath.basename(rel) == SCHEMA_NAME:
            return False
        try:
            head = tree.head(rel, 4096)
        except InputError:
            return False
        return _HEAD.match(head) is not None

    def companions(self, tree: SourceTree, rel: str) -> list[str]:
        found = [f for f in (_schema_file(tree, rel), _instance_file(tree, rel)) if f]
        return found

    def read(self, tree: SourceTree, unit: Unit) -> list[ImportedRun]:
        rel = unit.primary
        label = tree.label(rel)
        doc = tree.json(rel)
        schema_file = _schema_file(tree, rel)
        schema = tree.json(schema_file) if schema_file else TRAJECTORY_SCHEMA
        _validate(doc, schema, label, tree.label(schema_file) if schema_file else None)
        steps: list[dict[str, Any]] = doc
        if not steps:
            raise InputError(label, None, None, "the trajectory holds no steps")

        stem = posixpath.splitext(posixpath.basename(rel))[0]
        system = _system_of(label)
        b = self.builder(tree, unit, f"{system}/{stem}", workspace_root=_WORKSPACE)
        records = [b.record(rel, f"steps[{i}]", step, native_id=step.get("step")) for i, step in enumerate(steps)]
        instance_file = _instance_file(tree, rel)
        start_sources: list[Record] = []
        if instance_file:
            instance = tree.json(instance_file)
            start_sources.append(b.record(instance_file, "instance", instance,
                                          native_id=instance.get("name") if isinstance(instance, dict) else None))
        self._start(b, system, stem, records, start_sources)

        main = records[0].get("agent.agent_name", str, required=False)
        for i, rec in enumerate(records):
            self._step(b, rec, main, last=i == len(records) - 1)
        return [b.build()]

    @staticmethod
    def _start(b: RunBuilder, system: str, stem: str, records: list[Record], sources: list[Record]) -> None:
        last = records[-1]
        models = []
        for rec in records:
            model = rec.get("step_usage.model", str)
            if model not in models:
                models.append(model)
        labels = {
            "benchmark": "DevAI",
            "system": system,
            "steps": str(len(records)),
            "accumulated_cost": _number_text(last.get("accumulated_usage.accumulated_cost", (int, float))),
            "accumulated_time": _number_text(last.get("accumulated_usage.accumulated_time", (int, float))),
            "input_tokens": str(sum(r.int("step_usage.input_tokens") for r in records)),
            "output_tokens": str(sum(r.int("step_usage.output_tokens") for r in records)),
        }
        if len(models) > 1:
            labels["models"] = ", ".join(models)
        b.start(harness=system, model=models[0] if models else None, task_id=stem, labels=labels, source=sources)

    def _step(self, b: RunBuilder, rec: Record, main: str | None, *, last: bool) -> None:
        name = rec.get("agent.agent_name", str, required=False)
        actor = "agent" if name is None or name == main else "subagent:" + _clean_id(name)
        made = 0
        user = rec.get("user_message", str, required=False)
        if user:
            b.add("message", actor="user", source=rec, text=user)
            made += 1
        thought = rec.str("agent.thought")
        if thought.strip():
            b.add("message", actor=actor, source=rec, text=thought, intent="reasoning")
            made += 1
        action = rec.get("agent.action", str, required=False)
        environment = rec.get("environment", str, required=False)
        if action is None:
            if last:
                b.add("completion_claim", actor=actor, source=rec, claim=thought, scope="run")
                made += 1
        elif action.startswith(_COMMAND):
            command = action[len(_COMMAND):]
            shell_command(b, command, actor=actor, source=rec, output=environment,
                          exit_code=exit_code_from_text(environment) if environment else None)
            made += 1
        elif action.startswith(_IPYTHON):
            made += self._ipython(b, rec, actor, action[len(_IPYTHON):], environment)
        else:
            b.add("source_record", actor=actor, source=rec, record_type="action")
            made += 1
        if not made:
            b.keep(rec, "step", actor=actor)

    @staticmethod
    def _ipython(b: RunBuilder, rec: Record, actor: str, code: str, environment: str | None) -> int:
        # The code is Python, not a shell line: it is never read for test runs or shell effects.
        output_sha = hashlib.sha256(environment.encode()).hexdigest() if environment is not None else None
        try:
            tree = ast.parse(code)
        except (SyntaxError, ValueError):
            b.add("command", actor=actor, source=rec, command=code, output_sha256=output_sha)
            return 1
        effects, skills_only = _cell_effects(tree)
        if skills_only and effects:
            for kind, path in effects:
                _file_event(b, rec, actor, kind, path, parent=None)
            return len(effects)
        seq = b.add("command", actor=actor, source=rec, command=code, output_sha256=output_sha)
        for kind, path in effects:
            _file_event(b, rec, actor, kind, path, parent=seq)
        return 1 + len(effects)


# --- validation ------------------------------------------------------------------------------------


def _validate(doc: Any, schema: Any, label: str, schema_label: str | None) -> None:
    import jsonschema  # here, not at the top: every ingest imports every importer to detect formats

    try:
        validator_class = jsonschema.validators.validator_for(schema, default=jsonschema.Draft7Validator)
        validator_class.check_schema(schema)
    except (jsonschema.SchemaError, TypeError) as exc:
        raise InputError(schema_label or "devai schema", None, None,
                         f"not a usable JSON Schema: {getattr(exc, 'message', exc)}") from None
    errors = list(validator_class(schema).iter_errors(doc))
    if not errors:
        return
    error = min(errors, key=_error_order)
    path = list(error.absolute_path)
    if not path:
        if error.validator == "type":
            raise InputError(label, None, None,
                             f"expected a JSON array of steps (a DevAI trajectory), got {_describe(doc)}")
        raise InputError(label, None, None, f"not a DevAI trajectory: {error.message}")
    record = f"steps[{path[0]}]" if isinstance(path[0], int) else str(path[0])
    fields = [str(p) for p in path[1:]]
    if error.validator == "required":
        missing = next((r for r in error.validator_value if isinstance(error.instance, dict) and r not in error.instance),
                       None)
        fields.append(str(missing))
        reason = "missing"
    elif error.validator == "type":
        wanted = error.validator_value if isinstance(error.validator_value, list) else [error.validator_value]
        reason = f"expected {' or '.join(_TYPE_WORDS.get(w, w) for w in wanted)}, got {_describe(error.instance)}"
    else:
        reason = error.message
    raise InputError(label, record, ".".join(fields) or None, reason)


_TYPE_WORDS = {"string": "a string", "integer": "an integer", "number": "a number", "object": "an object",
               "array": "an array", "null": "null", "boolean": "a boolean"}


def _error_order(error: jsonschema.ValidationError) -> tuple[Any, ...]:
    return (tuple((0, p, "") if isinstance(p, int) else (1, 0, str(p)) for p in error.absolute_path), error.message)


def _describe(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return f"{type(value).__name__ if not isinstance(value, (dict, list)) else ('an object' if isinstance(value, dict) else 'an array')} " \
        f"{text[:40] + '...' if len(text) > 40 else text}"


# --- files next to the trajectory ------------------------------------------------------------------


def _ancestors(rel: str) -> list[str]:
    out = []
    folder = posixpath.dirname(rel)
    while True:
        out.append(folder)
        if not folder:
            return out
        folder = posixpath.dirname(folder)


def _schema_file(tree: SourceTree, rel: str) -> str | None:
    for folder in _ancestors(rel):
        for candidate in (posixpath.join(folder, SCHEMA_NAME), posixpath.join(folder, "devai", SCHEMA_NAME)):
            if tree.exists(candidate):
                return candidate
    return None


def _instance_file(tree: SourceTree, rel: str) -> str | None:
    name = posixpath.basename(rel)
    for folder in _ancestors(rel):
        for candidate in (posixpath.join(folder, "instances", name), posixpath.join(folder, "devai", "instances", name)):
            if candidate != rel and tree.exists(candidate):
                return candidate
    return None


def _system_of(label: str) -> str:
    """The developer agent that made the trajectory: the folder it is stored in."""
    path = label.rsplit("!", 1)[-1] if "!" in label else os.path.abspath(label)
    parent = posixpath.basename(posixpath.dirname(path.replace("\\", "/")))
    return _clean_id(parent) if parent else "unknown"


# --- IPython cells ---------------------------------------------------------------------------------


def _cell_effects(tree: ast.Module) -> tuple[list[tuple[str, str]], bool]:
    """The file effects a cell visibly has (skill calls, writes, reads), in order, and
    whether the cell is nothing but file-skill calls (and the code strings they insert)."""
    effects: list[tuple[str, str]] = []
    skills_only = True
    for statement in tree.body:
        call = statement.value if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call) else None
        name = call.func.id if call is not None and isinstance(call.func, ast.Name) else None
        if name in _SKILLS or name in _OTHER_SKILLS:
            continue
        if isinstance(statement, ast.Assign) and isinstance(statement.value, ast.Constant) \
                and isinstance(statement.value.value, str):
            continue
        skills_only = False
    calls = sorted((n for n in ast.walk(tree) if isinstance(n, ast.Call)), key=lambda n: (n.lineno, n.col_offset))
    for call in calls:
        effect = _call_effect(call)
        if effect is not None and effect not in effects:
            effects.append(effect)
    return effects, skills_only


def _call_effect(call: ast.Call) -> tuple[str, str] | None:
    func = call.func
    if isinstance(func, ast.Name) and func.id in _SKILLS:
        kind, keyword = _SKILLS[func.id]
        path = _string_argument(call, 0, (keyword, *_PATH_KEYWORDS))
        return (kind, path) if path else None
    if isinstance(func, ast.Name) and func.id == "open":
        path = _string_argument(call, 0, ("file",))
        if not path:
            return None
        mode = _string_argument(call, 1, ("mode",)) or "r"
        if any(c in mode for c in "wx"):
            return ("create", path)
        if "a" in mode or "+" in mode:
            return ("modify", path)
        return ("read", path)
    if isinstance(func, ast.Attribute):
        if func.attr in _WRITE_METHODS:
            path = _string_argument(call, 0, ("path_or_buf", "fname", "path", "excel_writer", "filepath"))
            return ("create", path) if path else None
        if func.attr in _READ_FUNCTIONS:
            path = _string_argument(call, 0, ("filepath_or_buffer", "path", "fname", "io", "path_or_buf"))
            return ("read", path) if path else None
    return None


def _string_argument(call: ast.Call, position: int, keywords: tuple[str, ...]) -> str | None:
    if len(call.args) > position:
        node = call.args[position]
        return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value else None
    for keyword in call.keywords:
        if keyword.arg in keywords and isinstance(keyword.value, ast.Constant) and isinstance(keyword.value.value, str):
            return keyword.value.value or None
    return None


def _file_event(b: RunBuilder, rec: Record, actor: str, kind: str, path: str, parent: int | None) -> None:
    if kind == "read":
        b.add("file_read", actor=actor, source=rec, parent=parent, path=path)
    else:
        b.add("file_edit", actor=actor, source=rec, parent=parent, path=path, edit_kind=kind)


# --- helpers ---------------------------------------------------------------------------------------


def _number_text(value: int | float) -> str:
    """The number as the file writes it (a float's shortest round-trip form, never an exponent)."""
    return decimal_text(value)


def _clean_id(name: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9._@/+-]", "_", name).lstrip("._@/+-")
    return (cleaned or "unnamed")[:128]
