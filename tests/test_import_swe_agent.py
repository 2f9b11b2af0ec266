"""SWE-agent ``.traj`` and mini-swe-agent trajectories (+ SWE-bench ``report.json``) as procgrade runs.

Expected numbers are read off the samples by hand (see the comments): the pydicom run is a
real GPT-4 SWE-agent 0.x run (``state`` as text, no ``message_type``); the marshmallow run a
1.x demonstration replay (``state`` dicts, ``execution_time``, ``tool_calls``); the mini-swe-agent
file a real v1 (``mini-swe-agent-1``) run. ``report.json`` is a synthetic SWE-bench report for
the marshmallow instance.
"""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from import_checks import FIXTURES, actors, assert_rejected, kinds, of_kind, read_one, read_runs, snapshot, test_runs_found
from procgrade.engine.cli import app
from procgrade.engine.errors import InputError
from procgrade.engine.importers.swe_agent import mini_run_status, swe_agent_run_status
from procgrade.engine.ingest import ingest_paths

DIR = FIXTURES / "swe-agent"
PYDICOM = DIR / "pydicom__pydicom-1458.traj"
MARSHMALLOW = DIR / "marshmallow-code__marshmallow-1867.traj"
MINI = DIR / "native_mini-swe-agent-trajectory.json"
REPORT = DIR / "report.json"

SAMPLES = [
    pytest.param(PYDICOM, "swe-agent", "swe-agent/pydicom__pydicom-1458", 30, id="pydicom"),
    pytest.param(MARSHMALLOW, "swe-agent", "swe-agent/gpt-4o/marshmallow-code__marshmallow-1867", 32, id="marshmallow"),
    pytest.param(MINI, "mini-swe-agent", "mini-swe-agent/anthropic/claude-3-5-sonnet-20241022/native_mini-swe-agent-trajectory", 12, id="mini"),
]


def load(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def write_json(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    return path


def raw_of(event: Any, index: int = 0, run: Any = None) -> Any:
    """The raw source record an event cites (followed to the event that first kept it)."""
    cited = event.payload["source"][index]
    if "raw" in cited:
        return cited["raw"]
    first = run.events[cited["at_seq"]]
    return next(c["raw"] for c in first.payload["source"] if c["record"] == cited["record"])


# --- pydicom: SWE-agent 0.x, real GPT-4 run ------------------------------------------------------------


def test_pydicom_mapping() -> None:
    run = read_one(PYDICOM)
    assert run.run_id == "swe-agent/pydicom__pydicom-1458"
    # 26 history items: system prompt, one demonstration, the issue, then 12 assistant turns with
    # 11 observations (none after `submit`) -- all paired with the 12 trajectory steps:
    # create, edit 1:1, python, find_file, open, 3 rejected edits, edit 287:296, python, rm, submit.
    assert len(run.events) == 30
    # the two `python reproduce_bug.py` runs are reproductions: test runs
    assert kinds(run) == {"command": 5, "completion_claim": 1, "file_edit": 4, "file_read": 1, "message": 14,
                          "run_ended": 1, "run_started": 1, "source_record": 1, "test_run": 2}
    assert actors(run) == {"agent": 25, "harness": 4, "user": 1}

    claims = of_kind(run, "completion_claim")
    assert [(c.scope, c.claim[:60]) for c in claims] == [
        ("run", "The `reproduce_bug.py` script has been successfully removed.")]
    assert raw_of(claims[0], run=run)["action"] == "submit\n"
    # `python reproduce_bug.py` is the agent's reproduction: a test run with no outcome (0.x prints no exit codes)
    assert test_runs_found(run) == [("python reproduce_bug.py", None)] * 2
    assert of_kind(run, "acceptance_verdict") == [] and of_kind(run, "test_result") == []

    # Tool edits land on the open file; paths are relative to the repo (/pydicom__pydicom).
    assert [(e.path, e.edit_kind) for e in of_kind(run, "file_edit")] == [
        ("reproduce_bug.py", "create"), ("reproduce_bug.py", "modify"),
        ("pydicom/pixel_data_handlers/numpy_handler.py", "modify"), ("reproduce_bug.py", "delete")]
    assert [e.path for e in of_kind(run, "file_read")] == ["pydicom/pixel_data_handlers/numpy_handler.py"]
    commands = sorted(of_kind(run, "command") + of_kind(run, "test_run"), key=lambda e: e.seq)
    # The three edits the linter rolled back changed nothing: commands, not edits.
    assert [c.command.split("\n")[0] for c in commands] == [
        "python reproduce_bug.py", 'find_file "numpy_handler.py"', "edit 287:295", "edit 287:295", "edit 287:295",
        "python reproduce_bug.py", "rm reproduce_bug.py"]
    assert all(c.exit_code is None for c in commands)  # SWE-agent records no exit codes: none guessed
    assert {c.cwd for c in commands if c.kind == "command"} == {"/pydicom__pydicom"}
    delete = of_kind(run, "file_edit")[-1]
    assert delete.parent_seq == commands[-1].seq

    messages = of_kind(run, "message")
    assert [(m.actor, m.intent) for m in messages[:3]] == [("harness", None), ("user", None), ("agent", "reasoning")]
    assert messages[0].text.startswith("SETTING: You are an autonomous programmer")
    assert messages[1].text.startswith("We're currently solving the following issue")
    assert of_kind(run, "source_record")[0].record_type == "demonstration"
    # Each step event cites the trajectory step and its history twin.
    first_edit = of_kind(run, "file_edit")[0]
    assert [s["record"] for s in first_edit.payload["source"]] == ["trajectory[0]", "history[4]"]

    start, end = run.events[0], of_kind(run, "run_ended")[0]
    # The harness's statistics are run labels (exact text), not settings.
    assert (start.task_id, start.model, start.model_settings) == ("pydicom__pydicom-1458", None, None)
    assert start.labels == {"environment": "swe_main", "total_cost": "1.26719", "instance_cost": "1.26719",
                            "cost": "1.26719", "tokens_sent": "122612", "tokens_received": "1369", "api_calls": "12"}
    assert (end.status, end.reason) == ("completed", "submitted")
    assert raw_of(end)["submission"].startswith("\ndiff --git a/pydicom/pixel_data_handlers/numpy_handler.py")
    assert start.imported.records == 40  # environment + 12 steps + 26 history items + info


# --- marshmallow: SWE-agent 1.x demonstration replay, with the synthetic SWE-bench report ------------


def test_marshmallow_mapping_with_report() -> None:
    run = read_one(MARSHMALLOW)  # report.json next to it is claimed as its companion
    assert run.files == ["marshmallow-code__marshmallow-1867.traj", "report.json"]
    # 11 steps: create, insert, python, ls, find_file, open, rejected edit, edit, python, rm, submit;
    # 24 history items: system, issue, 11 assistant + 11 tool observations.
    assert len(run.events) == 32
    assert kinds(run) == {"acceptance_verdict": 1, "command": 4, "completion_claim": 1, "file_edit": 4,
                          "file_read": 1, "message": 13, "run_ended": 1, "run_started": 1, "test_result": 4,
                          "test_run": 2}  # python reproduce.py, twice
    assert actors(run) == {"agent": 23, "grader": 5, "harness": 3, "user": 1}
    assert [c.claim for c in of_kind(run, "completion_claim")] == ["Calling `submit` to submit."]
    assert test_runs_found(run) == [("python reproduce.py", None)] * 2

    assert [(e.path, e.edit_kind) for e in of_kind(run, "file_edit")] == [
        ("reproduce.py", "create"), ("reproduce.py", "modify"), ("src/marshmallow/fields.py", "modify"),
        ("reproduce.py", "delete")]
    assert [e.path for e in of_kind(run, "file_read")] == ["src/marshmallow/fields.py"]
    commands = sorted(of_kind(run, "command") + of_kind(run, "test_run"), key=lambda e: e.seq)
    assert [(c.kind, c.command.split(" ")[0]) for c in commands] == [
        ("test_run", "python"), ("command", "ls"), ("command", "find_file"), ("command", "edit"),
        ("test_run", "python"), ("command", "rm")]
    assert [c.duration_ms for c in commands] == [330, 217, 220, 685, 321, 215]  # execution_time seconds
    assert {c.cwd for c in commands if c.kind == "command"} == {"/testbed"} and all(c.exit_code is None for c in commands)
    # Demonstration texts differ between trajectory and history; steps still pair by action.
    assert all(len(e.payload["source"]) == 2 for e in run.events[3:26])

    start = run.events[0]
    assert (start.model, start.task_id) == ("gpt-4o", "marshmallow-code__marshmallow-1867")
    assert start.model_settings["temperature"] == 1.0 and "model_stats" not in start.model_settings
    assert {k: start.labels[k] for k in ("instance_cost", "cost", "tokens_sent", "api_calls")} == {
        "instance_cost": "0", "cost": "0", "tokens_sent": "0", "api_calls": "11"}

    # Outcomes come after the process events: one verdict, then one result per test.
    verdict, *results = run.events[27:]
    assert verdict.kind == "acceptance_verdict" and verdict.actor == "grader"
    assert (verdict.verifier, verdict.status, verdict.reward, verdict.value, verdict.passed, verdict.failed) == (
        "swe-bench", "evaluated", "1", "resolved", 4, 0)
    assert verdict.details["groups"]["FAIL_TO_PASS"] == {"passed": 1, "failed": 0}
    assert [(r.group, r.outcome, r.test_id) for r in results] == [
        ("FAIL_TO_PASS", "passed", "tests/test_fields.py::TestFieldSerialization::test_timedelta_field_rounding"),
        ("PASS_TO_PASS", "passed", "tests/test_fields.py::TestFieldSerialization::test_timedelta_field"),
        ("PASS_TO_PASS", "passed", "tests/test_fields.py::TestFieldDeserialization::test_timedelta_field_deserialization"),
        ("PASS_TO_PASS", "passed", "tests/test_schema.py::test_serializing_basic_object")]
    assert {r.verifier for r in results} == {"swe-bench"}
    assert raw_of(verdict)["resolved"] is True and results[0].payload["source"][0]["at_seq"] == verdict.seq


def test_marshmallow_alone_has_no_outcome(tmp_path: Path) -> None:
    alone = tmp_path / MARSHMALLOW.name
    shutil.copyfile(MARSHMALLOW, alone)
    run = read_one(alone)
    assert len(run.events) == 27 and run.files == [MARSHMALLOW.name]
    assert "acceptance_verdict" not in kinds(run) and "test_result" not in kinds(run)


@pytest.mark.parametrize(("entry", "expected"), [
    pytest.param({"patch_is_None": False, "patch_exists": True, "patch_successfully_applied": True, "resolved": False,
                  "tests_status": {"FAIL_TO_PASS": {"success": [], "failure": ["t::a"]},
                                   "PASS_TO_PASS": {"success": ["t::b"], "failure": ["t::c"]}}},
                 ("evaluated", "0", "unresolved", 1, 2, [("t::a", "failed", "FAIL_TO_PASS"), ("t::b", "passed", "PASS_TO_PASS"),
                                                         ("t::c", "failed", "PASS_TO_PASS")]), id="unresolved"),
    pytest.param({"patch_is_None": True, "patch_exists": False, "patch_successfully_applied": False, "resolved": False},
                 ("not_submitted", None, "unresolved", 0, 0, []), id="no-patch"),
])
def test_report_variants(tmp_path: Path, entry: dict[str, Any], expected: tuple[Any, ...]) -> None:
    shutil.copyfile(MARSHMALLOW, tmp_path / MARSHMALLOW.name)
    write_json(tmp_path / "report.json", {"marshmallow-code__marshmallow-1867": entry})
    run = read_one(tmp_path)
    verdict = of_kind(run, "acceptance_verdict")[0]
    results = [(r.test_id, r.outcome, r.group) for r in of_kind(run, "test_result")]
    assert (verdict.status, verdict.reward, verdict.value, verdict.passed, verdict.failed, results) == expected


def test_report_for_another_instance_is_not_claimed(tmp_path: Path) -> None:
    shutil.copyfile(MARSHMALLOW, tmp_path / MARSHMALLOW.name)
    write_json(tmp_path / "report.json", {"other__instance-1": {"resolved": True}})
    run = read_one(tmp_path / MARSHMALLOW.name)
    assert run.files == [MARSHMALLOW.name] and "acceptance_verdict" not in kinds(run)


# --- mini-swe-agent v1 (real) and v2 (synthetic, built from it) ----------------------------------------


def test_mini_v1_mapping() -> None:
    run = read_one(MINI)
    assert run.run_id == "mini-swe-agent/anthropic/claude-3-5-sonnet-20241022/native_mini-swe-agent-trajectory"
    # system, task, 3 x (assistant THOUGHT + bash block, user <returncode> result); the last
    # result is the (empty) submission after `echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`.
    assert len(run.events) == 12
    assert kinds(run) == {"command": 2, "completion_claim": 1, "file_edit": 1, "file_read": 1, "message": 5,
                          "run_ended": 1, "run_started": 1}
    assert actors(run) == {"agent": 8, "harness": 3, "user": 1}
    claim = of_kind(run, "completion_claim")[0]
    assert claim.scope == "run" and claim.claim.startswith("THOUGHT: Perfect! We have successfully completed the task.")
    assert [s["record"] for s in claim.payload["source"]] == ["messages[6]", "messages[7]"]
    assert test_runs_found(run) == []
    assert of_kind(run, "acceptance_verdict") == []
    commands = of_kind(run, "command")
    assert [(c.command, c.exit_code) for c in commands] == [('echo "Hello, world!" > hello.txt', 0), ("cat hello.txt", 0)]
    assert [(e.path, e.edit_kind) for e in of_kind(run, "file_edit")] == [("hello.txt", "create")]
    assert [e.path for e in of_kind(run, "file_read")] == ["hello.txt"]
    thoughts = [m for m in of_kind(run, "message") if m.actor == "agent"]
    assert all(m.intent == "reasoning" and "```" not in m.text for m in thoughts) and len(thoughts) == 3
    assert thoughts[0].ts == "2025-10-10T06:35:27.000000Z"  # extra.response.created
    start, end = run.events[0], of_kind(run, "run_ended")[0]
    assert (start.harness.name, start.harness.version, start.model) == (
        "mini-swe-agent", "1.13.4", "anthropic/claude-3-5-sonnet-20241022")
    assert start.labels["trajectory_format"] == "mini-swe-agent-1"
    assert (end.status, end.reason) == ("completed", "Submitted")


def mini_v2_doc() -> dict[str, Any]:
    """The v1 sample rewritten the way mini-swe-agent 2.x (tool calling) saves it."""
    doc = copy.deepcopy(load(MINI))
    doc["trajectory_format"] = "mini-swe-agent-1.1"
    doc["info"]["mini_version"] = "2.0.0"
    doc["info"]["config"]["environment"]["cwd"] = "/testbed"
    system, task = doc["messages"][:2]

    def turn(n: int, thought: str, command: str, code: int | None, output: str) -> list[dict[str, Any]]:
        call = {"id": f"call_{n}", "type": "function",
                "function": {"name": "bash", "arguments": json.dumps({"command": command})}}
        out = [{"role": "assistant", "content": thought, "tool_calls": [call],
                "extra": {"actions": [{"command": command, "tool_call_id": f"call_{n}"}], "cost": 0.01,
                          "timestamp": 1760078127 + n}}]
        if code is not None:
            out.append({"role": "tool", "tool_call_id": f"call_{n}",
                        "content": f"<returncode>{code}</returncode>\n<output>\n{output}</output>",
                        "extra": {"returncode": code, "raw_output": output, "timestamp": 1760078127.5 + n}})
        return out

    doc["messages"] = [
        system, task,
        *turn(1, "Create it.", "printf 'Hello, world!' > /testbed/hello.txt", 0, ""),
        {"role": "assistant", "content": "I am done, no tool call.", "extra": {"cost": 0.01}},
        {"role": "user", "content": "Please always provide EXACTLY ONE action.",
         "extra": {"interrupt_type": "FormatError"}},
        *turn(2, "", "python -m pytest -q tests", 1, "1 failed, 2 passed in 0.10s\n"),
        *turn(3, "Submit.", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git diff", None, ""),
        {"role": "exit", "content": "diff --git a/hello.txt b/hello.txt",
         "extra": {"exit_status": "Submitted", "submission": "diff --git a/hello.txt b/hello.txt"}},
    ]
    return doc


def test_mini_v2_tool_calls(tmp_path: Path) -> None:
    path = write_json(tmp_path / "demo__demo-1.traj.json", mini_v2_doc())
    run = read_one(path)
    assert run.run_id == "mini-swe-agent/anthropic/claude-3-5-sonnet-20241022/demo__demo-1"
    assert kinds(run) == {"command": 1, "completion_claim": 1, "file_edit": 1, "message": 6, "run_ended": 1,
                          "run_started": 1, "test_run": 1}
    assert actors(run) == {"agent": 7, "harness": 4, "user": 1}
    assert test_runs_found(run) == [("python -m pytest -q tests", "fail")]
    test_run = of_kind(run, "test_run")[0]
    assert (test_run.exit_code, test_run.passed, test_run.failed) == (1, 2, 1)
    assert [s["id"] for s in test_run.payload["source"]] == ["call_2", "call_2"]  # call and its tool result
    assert [(e.path, e.edit_kind) for e in of_kind(run, "file_edit")] == [("hello.txt", "create")]  # under cwd /testbed
    assert of_kind(run, "command")[0].ts == "2025-10-10T06:35:28.500000Z"
    assert [(m.actor, m.intent, m.text) for m in of_kind(run, "message")[2:]] == [
        ("agent", "reasoning", "Create it."), ("agent", None, "I am done, no tool call."),
        ("harness", None, "Please always provide EXACTLY ONE action."), ("agent", "reasoning", "Submit.")]
    end = of_kind(run, "run_ended")[0]
    assert (end.status, end.reason) == ("completed", "Submitted")
    assert [s["record"] for s in end.payload["source"]] == ["info", "messages[9]"]


# --- SWE-agent 1.x shapes the samples lack ---------------------------------------------------------------


def swe_agent_1x_doc() -> dict[str, Any]:
    """A small 1.x trajectory: str_replace_editor, a requeried (never run) step, a cost exit."""
    def step(thought: str, action: str, observation: str, open_file: str = "n/a") -> dict[str, Any]:
        return {"thought": thought, "action": action, "observation": observation, "response": thought,
                "execution_time": 0.5, "state": {"open_file": open_file, "working_dir": "/testbed"},
                "query": [], "extra_info": {}}

    steps = [
        step("Look around.", "str_replace_editor view /testbed", "Here's the files and directories up to 2 levels deep in /testbed"),
        step("Read it.", "str_replace_editor view /testbed/src/a.py", "Here's the result of running `cat -n`"),
        step("Bad call.", "rm -rf /", ""),  # blocked, requeried: not in history, never ran
        step("Fix it.", "str_replace_editor str_replace /testbed/src/a.py   --old_str x --new_str y",
             "The file /testbed/src/a.py has been edited."),
        step("Again.", "str_replace_editor str_replace /testbed/src/a.py   --old_str x --new_str y",
             "No replacement was performed, old_str `x` did not appear verbatim in /testbed/src/a.py."),
        step("Test.", "pytest -q", "===== 3 passed in 0.20s =====\n[Command finished with exit code 0]"),
        step("Exit due to cost limit", "", "Exited (autosubmitted)"),
    ]
    history: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a helpful assistant.", "message_type": "system_prompt", "agent": "main"},
        {"role": "user", "content": [{"type": "text", "text": "<uploaded_files>/testbed</uploaded_files> Fix a."}],
         "message_type": "observation", "agent": "main"},
    ]
    for k, s in enumerate(steps):
        if k == 2:
            continue
        history.append({"role": "assistant", "content": s["thought"], "thought": s["thought"], "action": s["action"],
                        "message_type": "action", "agent": "main",
                        "tool_calls": [{"id": f"call_{k}", "type": "function", "function": {"name": "x", "arguments": "{}"}}]})
        if k < 6:
            history.append({"role": "tool", "content": s["observation"], "tool_call_ids": [f"call_{k}"],
                            "message_type": "observation", "agent": "main"})
    return {"trajectory": steps, "history": history,
            "info": {"exit_status": "submitted (exit_cost)", "submission": "diff", "swe_agent_version": "1.1.0",
                     "model_stats": {"instance_cost": 3.1, "api_calls": 40}},
            "replay_config": json.dumps({"env": {"repo": {"repo_name": "testbed"}},
                                         "agent": {"model": {"name": "claude-x", "temperature": 0.0}}}),
            "environment": "main"}


def test_swe_agent_1x_tools_requery_and_cost_exit(tmp_path: Path) -> None:
    run = read_one(write_json(tmp_path / "demo__demo-2.traj", swe_agent_1x_doc()))
    assert kinds(run) == {"command": 2, "file_edit": 1, "file_read": 1, "message": 9, "run_ended": 1,
                          "run_started": 1, "test_run": 1}
    assert [e.path for e in of_kind(run, "file_read")] == ["src/a.py"]
    assert [(e.path, e.edit_kind) for e in of_kind(run, "file_edit")] == [("src/a.py", "modify")]
    assert [c.command.split(" ")[1] for c in of_kind(run, "command")] == ["view", "str_replace"]
    assert test_runs_found(run) == [("pytest -q", "pass")]
    assert of_kind(run, "test_run")[0].exit_code == 0  # printed by the harness, so read
    # The blocked `rm -rf /` never ran: its thought is kept, no command or edit made of it.
    bad = [m for m in of_kind(run, "message") if m.text == "Bad call."][0]
    assert [s["record"] for s in bad.payload["source"]] == ["trajectory[2]"]
    assert not any(getattr(e, "command", None) == "rm -rf /" for e in run.events)
    exit_message = [m for m in of_kind(run, "message") if m.text == "Exit due to cost limit"][0]
    assert exit_message.actor == "harness"
    assert "completion_claim" not in kinds(run)
    start, end = run.events[0], of_kind(run, "run_ended")[0]
    assert (start.model, start.harness.version, start.model_settings["temperature"]) == ("claude-x", "1.1.0", 0.0)
    assert (end.status, end.reason, end.actor) == ("budget_exhausted", "submitted (exit_cost)", "harness")
    assert [m.actor for m in of_kind(run, "message")[:2]] == ["harness", "user"]


def test_exit_status_mapping() -> None:
    assert [swe_agent_run_status(s) for s in ("submitted", "submitted (exit_context)", "exit_format", "exit_api",
                                               "exit_total_execution_time", "something_new", "submitted (exit_cost)",
                                               "exit_cost", "exit_forfeit", "skipped")] == [
        "completed", "budget_exhausted", "failed", "error", "timeout", None, "budget_exhausted", "budget_exhausted",
        "gave_up", "aborted"]
    assert [mini_run_status(s) for s in ("Submitted", "LimitsExceeded", "TimeExceeded", "RuntimeError")] == [
        "completed", "budget_exhausted", "timeout", "error"]


# --- through the store: detection, idempotence, scoring ------------------------------------------------


@pytest.mark.parametrize(("path", "fmt", "run_id", "count"), SAMPLES)
def test_store_import_is_idempotent_and_scores(store: Any, store_url: str, path: Path, fmt: str, run_id: str,
                                                count: int) -> None:
    done = ingest_paths(store, [path], format="auto")
    assert [(r.format, r.run_id, r.result.appended) for r in done.reports] == [(fmt, run_id, count)]
    before = snapshot(store)
    again = ingest_paths(store, [path], format="auto")
    assert [r.result.no_op for r in again.reports] == [True]
    assert snapshot(store) == before
    result = CliRunner().invoke(app, ["score", run_id, "--db", store_url])
    assert result.exit_code == 0, result.output


def test_directory_import_joins_the_report(store: Any) -> None:
    done = ingest_paths(store, [DIR], format="auto")
    assert sorted((r.format, r.run_id, r.result.appended) for r in done.reports) == [
        ("mini-swe-agent", "mini-swe-agent/anthropic/claude-3-5-sonnet-20241022/native_mini-swe-agent-trajectory", 12),
        ("swe-agent", "swe-agent/gpt-4o/marshmallow-code__marshmallow-1867", 32),
        ("swe-agent", "swe-agent/pydicom__pydicom-1458", 30)]
    assert sorted(Path(u).name for u in done.unrecognised) == ["LICENSE", "LICENSE-apache-2.0", "README.md"]
    stored = list(store.events("swe-agent/gpt-4o/marshmallow-code__marshmallow-1867"))
    verdicts = [e for e in stored if e.kind == "acceptance_verdict"]
    assert [(v.verifier, v.status, v.reward) for v in verdicts] == [("swe-bench", "evaluated", "1")]
    assert [e.group for e in stored if e.kind == "test_result"] == ["FAIL_TO_PASS"] + ["PASS_TO_PASS"] * 3
    before = snapshot(store)
    assert all(r.result.no_op for r in ingest_paths(store, [DIR]).reports)
    assert snapshot(store) == before


# --- malformed input: located errors, nothing written --------------------------------------------------


def truncated(path: Path, tmp_path: Path, name: str | None = None) -> tuple[Path, int]:
    text = path.read_text(encoding="utf-8")
    cut = text[: len(text) // 2]
    out = tmp_path / (name or path.name)
    out.write_text(cut, encoding="utf-8")
    try:
        json.loads(cut)
    except json.JSONDecodeError as exc:
        return out, exc.lineno
    raise AssertionError("cut text still parses")


@pytest.mark.parametrize("path", [PYDICOM, MARSHMALLOW, MINI], ids=["pydicom", "marshmallow", "mini"])
def test_truncated_file_is_rejected(store: Any, tmp_path: Path, path: Path) -> None:
    out, line = truncated(path, tmp_path)
    error = assert_rejected(store, out, where=f"{out.name}:{line}", field=None)
    assert "invalid JSON" in error.reason


@pytest.mark.parametrize("name", ["x.traj", "x.traj.json"])
def test_non_json_bytes_are_rejected(store: Any, tmp_path: Path, name: str) -> None:
    out = tmp_path / name
    out.write_bytes(b'{"trajectory": [\xff\xfe\x00garbage')
    error = assert_rejected(store, out, where=f"{name}:1", field=None)
    assert "not UTF-8" in error.reason


def _edited(tmp_path: Path, source: Path, edit: Any, name: str | None = None) -> Path:
    data = load(source)
    edit(data)
    return write_json(tmp_path / (name or source.name), data)


@pytest.mark.parametrize(("source", "edit", "record", "field"), [
    pytest.param(PYDICOM, lambda d: d["trajectory"][3].pop("action"), "trajectory[3]", "action", id="pydicom-no-action"),
    pytest.param(PYDICOM, lambda d: d["trajectory"][2].update(observation=5), "trajectory[2]", "observation",
                 id="pydicom-observation-int"),
    pytest.param(PYDICOM, lambda d: d["trajectory"][4].update(state="{not json"), "trajectory[4]", "state",
                 id="pydicom-state-not-json"),
    pytest.param(PYDICOM, lambda d: d["history"][7].pop("role"), "history[7]", "role", id="pydicom-history-no-role"),
    pytest.param(MARSHMALLOW, lambda d: d["trajectory"][5].update(action=["open"]), "trajectory[5]", "action",
                 id="marshmallow-action-list"),
    pytest.param(MARSHMALLOW, lambda d: d["trajectory"][1].update(execution_time="fast"), "trajectory[1]",
                 "execution_time", id="marshmallow-time-text"),
    pytest.param(MARSHMALLOW, lambda d: d["info"].update(exit_status=1), "info", "exit_status",
                 id="marshmallow-exit-status-int"),
    pytest.param(MINI, lambda d: d["messages"][2].pop("role"), "messages[2]", "role", id="mini-no-role"),
    pytest.param(MINI, lambda d: d["messages"][4].update(content=5), "messages[4]", "content", id="mini-content-int"),
    pytest.param(MINI, lambda d: d["messages"][3].update(extra="rc=0"), "messages[3]", "extra", id="mini-extra-text"),
])
def test_bad_record_is_rejected(store: Any, tmp_path: Path, source: Path, edit: Any, record: str, field: str) -> None:
    out = _edited(tmp_path, source, edit)
    assert_rejected(store, out, where=f"{out.name}:{record}", field=field)


def test_missing_trajectory_is_rejected(store: Any, tmp_path: Path) -> None:
    out = _edited(tmp_path, PYDICOM, lambda d: d.pop("trajectory"))
    assert_rejected(store, out, where=f"{out.name}: trajectory", field="trajectory")


@pytest.mark.parametrize(("edit", "field"), [
    pytest.param(lambda e: e.pop("resolved"), "resolved", id="no-resolved"),
    pytest.param(lambda e: e["tests_status"]["PASS_TO_PASS"].update(success=["ok", 7]), "tests_status.PASS_TO_PASS.success.1",
                 id="test-id-int"),
    pytest.param(lambda e: e.update(tests_status=[]), "tests_status", id="status-list"),
])
def test_bad_report_is_rejected(store: Any, tmp_path: Path, edit: Any, field: str) -> None:
    shutil.copyfile(MARSHMALLOW, tmp_path / MARSHMALLOW.name)
    report = load(REPORT)
    edit(report["marshmallow-code__marshmallow-1867"])
    write_json(tmp_path / "report.json", report)
    assert_rejected(store, tmp_path, where="report.json:marshmallow-code__marshmallow-1867", field=field)


def test_truncated_report_is_rejected_with_its_trajectory(store: Any, tmp_path: Path) -> None:
    shutil.copyfile(MARSHMALLOW, tmp_path / MARSHMALLOW.name)
    cut = REPORT.read_text()[:200]
    (tmp_path / "report.json").write_text(cut)
    with pytest.raises(json.JSONDecodeError) as parsed:
        json.loads(cut)
    error = assert_rejected(store, tmp_path, where=f"report.json:{parsed.value.lineno}", field=None)
    assert "invalid JSON" in error.reason


def test_format_named_explicitly(tmp_path: Path) -> None:
    runs = read_runs(MINI, format="mini-swe-agent")
    assert [r.run_id for r in runs] == ["mini-swe-agent/anthropic/claude-3-5-sonnet-20241022/native_mini-swe-agent-trajectory"]
    with pytest.raises(InputError, match="nothing here is in the swe-agent format"):
        read_runs(MINI, format="swe-agent")
