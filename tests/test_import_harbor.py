"""Harbor trial directories, ATIF trajectories and Terminal-Bench 1 runs, read as procgrade events.

Expected numbers below are counted from the samples by hand (see the comments), not
printed from the importer: a step-by-step account of each file is in the docstring of
``engine/importers/harbor.py`` and in tests/fixtures/imports/atif/README.md.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from import_checks import FIXTURES, actors, assert_rejected, kinds, of_kind, read_one, read_runs, snapshot, test_runs_found
from procgrade.engine.cli import app
from procgrade.engine.importers import importers
from procgrade.engine.ingest import ingest_paths

ATIF = FIXTURES / "atif"
SUMMARIZATION = ATIF / "terminus2_hello-world-context-summarization.trajectory.json"
LINEAR = ATIF / "terminus2_hello-world-context-summarization-linear-history.trajectory.json"
INVALID = ATIF / "terminus2_hello-world-invalid-json.trajectory.json"
TIMEOUT = ATIF / "terminus2_hello-world-timeout.trajectory.json"
OPENHANDS = ATIF / "openhands_hello-world.trajectory.json"
TRIAL_OK = ATIF / "harbor" / "hello-world__Kx7pQ2m"
TRIAL_TIMEOUT = ATIF / "harbor" / "hello-world__T1meOut"
TB_RUN = ATIF / "terminal-bench" / "2025-11-02__09-00-00"
TB_TRIAL = TB_RUN / "hello-world" / "hello-world.1-of-1.2025-11-02__09-00-00"

CONFIRMED = "Analysis: Yes, confirming task completion.\nPlan: Final confirmation."
TB_HELLO = "terminal-bench/hello-world.1-of-1.2025-11-02__09-00-00/d1e2f3a4-b5c6-4d7e-8f90-a1b2c3d4e5f6"
TB_PERMS = "terminal-bench/fix-permissions.1-of-1.2025-11-02__09-00-00/0a9b8c7d-6e5f-4a3b-9c2d-1e0f9a8b7c6d"

# Context summarization (root 10 steps + 3 summarizer files):
#  s1 user; s2..s4 agent: message + command (+ file_edit for the two `echo >`): 2+3+3;
#  s5 system -> compaction, then the summarizer files as harness: summary (3 copied + 2 msgs),
#  questions (2 msgs), answers (5 copied + 2 msgs); s6 handoff -> harness message;
#  s7 printf (msg+cmd+edit), s8 cat (msg+cmd+read), s9 msg+completion_request+harness question,
#  s10 msg+completion_claim+harness screen.
SUMMARIZATION_KINDS = {"command": 5, "compaction": 1, "completion_claim": 1, "file_edit": 3, "file_read": 1,
                       "message": 17, "run_started": 1, "source_record": 9}
SUMMARIZATION_ACTORS = {"agent": 18, "harness": 19, "user": 1}


def _plus(base: dict[str, int], **more: int) -> dict[str, int]:
    out = dict(base)
    for key, value in more.items():
        out[key] = out.get(key, 0) + value
    return dict(sorted(out.items()))


# path -> {run_id: (events, kinds, actors, claims, test runs, outcomes)}
SAMPLES: dict[Path, tuple[str, dict[str, tuple[Any, ...]]]] = {
    SUMMARIZATION: ("atif", {"atif/NORMALIZED_SESSION_ID/terminus2_hello-world-context-summarization.trajectory": (
        38, SUMMARIZATION_KINDS, SUMMARIZATION_ACTORS, [CONFIRMED], [], [])}),
    # root: s1 user, s2..s4 raw JSON replies (msg+cmd(+edit)), s5 compaction (summarizer files absent);
    # cont-1: continuation kept, s1..s4 copied, s5..s8 as in the summarization sample.
    LINEAR: ("atif", {"atif/NORMALIZED_SESSION_ID/terminus2_hello-world-context-summarization-linear-history.trajectory": (
        28, {"command": 5, "compaction": 1, "completion_claim": 1, "file_edit": 3, "file_read": 1, "message": 10,
             "run_started": 1, "source_record": 6},
        {"agent": 18, "harness": 9, "user": 1}, [CONFIRMED], [], [])}),
    # s1 user; s2 reasoning+invalid reply+harness parse error; s3 reasoning+msg+printf+edit;
    # s4 reasoning+msg+request+harness question; s5 reasoning+msg+claim+harness screen.
    INVALID: ("atif", {"atif/NORMALIZED_SESSION_ID/terminus2_hello-world-invalid-json.trajectory": (
        17, {"command": 1, "completion_claim": 1, "file_edit": 1, "message": 12, "run_started": 1, "source_record": 1},
        {"agent": 12, "harness": 4, "user": 1},
        ["Analysis: Task already completed.\nPlan: No further action needed."], [], [])}),
    # s1 user; s2..s4 msg + command (echo, sleep 50, sleep 50); no claim: the run timed out.
    TIMEOUT: ("atif", {"atif/NORMALIZED_SESSION_ID/terminus2_hello-world-timeout.trajectory": (
        8, {"command": 3, "message": 4, "run_started": 1}, {"agent": 6, "harness": 1, "user": 1}, [], [], [])}),
    # s1 system prompt, s2 user task, s3/s4 system notes; s5 msg + str_replace_editor create; s6 msg + finish.
    OPENHANDS: ("atif", {"atif/NORMALIZED_SESSION_ID/openhands_hello-world.trajectory": (
        9, {"completion_claim": 1, "file_edit": 1, "message": 6, "run_started": 1},
        {"agent": 4, "harness": 4, "user": 1}, ["Task complete. Created /app/hello.txt with 'Hello, world!'"], [], [])}),
    # the summarization trajectory + run_ended + verdict (reward 1.0, ctrf 2 passed) + 2 test results.
    TRIAL_OK: ("harbor", {"harbor/hello-world__Kx7pQ2m": (
        42, _plus(SUMMARIZATION_KINDS, run_ended=1, acceptance_verdict=1, test_result=2),
        {"agent": 18, "grader": 3, "harness": 20, "user": 1}, [CONFIRMED], [],
        [("acceptance_verdict", {"verifier": "harbor", "status": "evaluated", "reward": "1", "rewards": None,
                                 "passed": 2, "failed": 0, "skipped": 0, "errored": 0}),
         ("test_result", {"test_id": "test_outputs.py::test_hello_file_exists", "outcome": "passed", "duration_ms": 1}),
         ("test_result", {"test_id": "test_outputs.py::test_hello_file_contents", "outcome": "passed", "duration_ms": 3})])}),
    # the timeout trajectory + run_ended (timeout) + verdict (AgentTimeoutError, rewards 0) + 1 failing test.
    TRIAL_TIMEOUT: ("harbor", {"harbor/hello-world__T1meOut": (
        11, {"acceptance_verdict": 1, "command": 3, "message": 4, "run_ended": 1, "run_started": 1, "test_result": 1},
        {"agent": 6, "grader": 2, "harness": 2, "user": 1}, [], [],
        [("acceptance_verdict", {"verifier": "harbor", "status": "timeout", "reward": "0",
                                 "rewards": {"reward": "0", "tests_passed": "0", "tests_total": "1"},
                                 "passed": 0, "failed": 1, "explanation": "Agent execution timed out after 60.0 seconds"}),
         ("test_result", {"test_id": "test_outputs.py::test_hello_file_exists", "outcome": "failed",
                          "message": "AssertionError: File /app/hello.txt does not exist"})])}),
    # hello-world: instruction; commands.txt 13 lines: 2 recorder lines (harness), ls, printf (+edit),
    # cat (+read), pytest (test_run), '' poll and C-c (keystrokes), run_ended, 3 test-phase commands (the
    # last, run-tests.sh, a harness test_run) and 2 C-d (harness); verdict + 2 parser results. fix-permissions: run-level entry only.
    TB_RUN: ("terminal-bench", {
        TB_HELLO: (21, {"acceptance_verdict": 1, "command": 7, "file_edit": 1, "file_read": 1, "message": 1,
                        "run_ended": 1, "run_started": 1, "source_record": 4, "test_result": 2, "test_run": 2},
                   {"agent": 8, "grader": 3, "harness": 9, "user": 1}, [],
                   [("python -m pytest tests/test_hello.py -q", None), ("bash /tests/run-tests.sh", None)],
                   [("acceptance_verdict", {"verifier": "terminal-bench", "status": "evaluated", "reward": "1",
                                            "value": "resolved", "passed": 2, "failed": 0}),
                    ("test_result", {"test_id": "test_hello_file_exists", "outcome": "passed"}),
                    ("test_result", {"test_id": "test_hello_file_contents", "outcome": "passed"})]),
        TB_PERMS: (6, {"acceptance_verdict": 1, "message": 1, "run_ended": 1, "run_started": 1, "test_result": 2},
                   {"grader": 3, "harness": 2, "user": 1}, [], [],
                   [("acceptance_verdict", {"verifier": "terminal-bench", "status": "timeout", "reward": "0",
                                            "value": "unresolved", "passed": 1, "failed": 1,
                                            "explanation": "failure_mode: agent_timeout"}),
                    ("test_result", {"test_id": "test_script_executable", "outcome": "failed"}),
                    ("test_result", {"test_id": "test_script_output", "outcome": "passed"})]),
    }),
}
OUTCOME_KINDS = ("acceptance_verdict", "test_result")


def _ids(path: Path) -> str:
    return path.name[:40]


def test_importers_are_registered() -> None:
    names = list(importers())
    assert {"harbor", "atif", "terminal-bench"} <= set(names)
    assert names.index("harbor") < names.index("atif")


@pytest.mark.parametrize("path", list(SAMPLES), ids=_ids)
def test_sample_mapping(path: Path) -> None:
    fmt, expected = SAMPLES[path]
    runs = {run.run_id: run for run in read_runs(path)}
    assert sorted(runs) == sorted(expected)
    for run_id, (count, kind_counts, actor_counts, claims, tests, outcomes) in expected.items():
        run = runs[run_id]
        assert run.format == fmt
        assert kinds(run) == kind_counts, run_id
        assert actors(run) == actor_counts, run_id
        assert len(run.events) == count
        assert [e.claim for e in of_kind(run, "completion_claim")] == claims
        assert all(e.scope == "run" and e.actor == "agent" for e in of_kind(run, "completion_claim"))
        assert test_runs_found(run) == tests
        got = [e for e in run.events if e.kind in OUTCOME_KINDS]
        assert [e.kind for e in got] == [kind for kind, _ in outcomes]
        for event, (_, fields) in zip(got, outcomes):
            for name, value in fields.items():
                assert getattr(event, name) == value, (event.kind, name)
        # outcomes come after every process event, and every event keeps its source record
        first_outcome = min((e.seq for e in got), default=len(run.events))
        assert all(e.kind in OUTCOME_KINDS for e in run.events[first_outcome:])
        assert all(e.payload["source"] for e in run.events)


def test_reads_are_deterministic() -> None:
    for path in SAMPLES:
        first, second = read_runs(path), read_runs(path)
        assert [[e.model_dump() for e in r.events] for r in first] == [[e.model_dump() for e in r.events] for r in second]


# --- spot checks -------------------------------------------------------------------------------


def test_terminus_commands_and_effects() -> None:
    run = read_one(SUMMARIZATION)
    commands = [e.command for e in of_kind(run, "command")]
    # the 5 root commands once each: the summarizer's copies of steps 2-3 are not commands again
    assert commands == ["mkdir test_dir", "echo 'test1' > test_dir/file1.txt", "echo 'test2' > test_dir/file2.txt",
                        "printf 'Hello, world!\\n' > hello.txt", "cat hello.txt"]
    assert all(e.exit_code is None for e in of_kind(run, "command"))  # Terminus shows no exit codes
    assert [(e.path, e.edit_kind) for e in of_kind(run, "file_edit")] == [
        ("test_dir/file1.txt", "create"), ("test_dir/file2.txt", "create"), ("hello.txt", "create")]
    assert [e.path for e in of_kind(run, "file_read")] == ["hello.txt"]
    started = run.events[0]
    assert started.harness.name == "terminus-2" and started.harness.version == "2.0.0"
    assert started.model == "openai/gpt-4o" and started.labels["session_id"] == "NORMALIZED_SESSION_ID"


def test_summarization_is_a_harness_compaction() -> None:
    run = read_one(SUMMARIZATION)
    (compaction,) = of_kind(run, "compaction")
    assert compaction.actor == "harness"
    assert compaction.summary.startswith("I have been working on creating hello.txt.")
    cited = [s["file"] for s in compaction.payload["source"]]
    assert cited[0] == SUMMARIZATION.name and len(cited) == 4  # the system step + the three summarizer files
    summarizer = [e for e in run.events if e.seq > compaction.seq and e.payload["source"][0]["file"] != SUMMARIZATION.name]
    assert len(summarizer) == 14 and all(e.actor == "harness" for e in summarizer)
    assert [e.intent for e in summarizer if e.kind == "message" and e.intent] == ["summary", "question", "answer"]
    assert sum(1 for e in summarizer if e.kind == "source_record" and e.record_type == "copied_context") == 8
    handoff = run.events[summarizer[-1].seq + 1]
    assert handoff.kind == "message" and handoff.actor == "harness" and handoff.text.startswith("Here are the answers")
    assert not any(e.actor.startswith("subagent:") for e in run.events)


def test_mark_task_complete_counts_once() -> None:
    run = read_one(SUMMARIZATION)
    request = [e for e in of_kind(run, "source_record") if e.record_type == "completion_request"]
    (claim,) = of_kind(run, "completion_claim")
    assert len(request) == 1 and request[0].actor == "agent" and request[0].seq < claim.seq
    assert request[0].payload["source"][0]["record"] == "steps[8]" and claim.payload["source"][0]["record"] == "steps[9]"
    question = run.events[request[0].seq + 1]
    assert question.actor == "harness" and "Are you sure you want to mark the task as complete" in question.text


def test_linear_history_continuation_reads_into_one_run() -> None:
    run = read_one(LINEAR)
    assert run.files == [LINEAR.name, LINEAR.name.replace(".trajectory.json", ".trajectory.cont-1.json")]
    cont = LINEAR.name.replace(".trajectory.json", ".trajectory.cont-1.json")
    kept = [e for e in of_kind(run, "source_record")]
    assert [(e.record_type, e.payload["source"][0]["record"]) for e in kept] == [
        ("continuation", "root"), ("copied_context", "steps[0]"), ("copied_context", "steps[1]"),
        ("copied_context", "steps[2]"), ("copied_context", "steps[3]"), ("completion_request", "steps[6]")]
    assert all(e.payload["source"][0]["file"] == cont for e in kept)
    # raw Terminus JSON replies give the same commands as the parsed tool calls of the other sample
    assert [e.command for e in of_kind(run, "command")] == [e.command for e in of_kind(read_one(SUMMARIZATION), "command")]
    plans = [e for e in of_kind(run, "message") if e.actor == "agent"]
    assert len(plans) == 7 and all(e.intent == "plan" for e in plans)


def test_invalid_json_reply_imports() -> None:
    run = read_one(INVALID)
    step2 = [e for e in run.events if e.payload["source"][0]["record"] == "steps[1]"]
    assert [(e.kind, e.actor, e.intent) for e in step2] == [
        ("message", "agent", "reasoning"), ("message", "agent", None), ("message", "harness", None)]
    assert step2[2].text.startswith("Previous response had parsing errors:")
    assert [e.command for e in of_kind(run, "command")] == ["printf 'Hello, world!\\n' > hello.txt"]


def test_openhands_atif_tools() -> None:
    run = read_one(OPENHANDS)
    (edit,) = of_kind(run, "file_edit")
    assert (edit.path, edit.edit_kind, edit.actor) == ("hello.txt", "create", "agent")  # /app is the workspace root
    assert [e.actor for e in of_kind(run, "message")] == ["harness", "user", "harness", "harness", "agent", "agent"]
    assert run.events[0].model is None and run.events[0].model_settings == {"agent_class": "CodeActAgent"}


def test_harbor_trial_provenance_and_parity_with_atif() -> None:
    run = read_one(TRIAL_OK)
    started = run.events[0]
    assert (started.harness.name, started.harness.version, started.model) == ("terminus-2", "2.0.0", "openai/gpt-4o")
    assert started.task_id == "hello-world" and started.ts == "2025-11-01T12:00:01.125000Z"
    assert started.model_settings == {"temperature": 0.7}
    assert started.labels == {"runner": "harbor", "session_id": "NORMALIZED_SESSION_ID", "schema_version": "ATIF-v1.5",
                              "trial_name": "hello-world__Kx7pQ2m", "dataset": "synthetic-fixtures",
                              "task_checksum": "9b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c",
                              "job_id": "b2e7c9a0-5d41-4f3e-8a6b-1c2d3e4f5a6b"}
    assert run.files[:3] == ["result.json", "config.json", "agent/trajectory.json"]
    assert "trial.log" not in run.files  # claimed with the trial, not read
    standalone = read_one(SUMMARIZATION)
    process = [(e.kind, e.actor) for e in run.events[1:] if e.kind not in ("run_ended", *OUTCOME_KINDS)]
    assert process == [(e.kind, e.actor) for e in standalone.events[1:]]
    (ended,) = of_kind(run, "run_ended")
    assert ended.status == "completed" and ended.seq == 38
    (verdict,) = of_kind(run, "acceptance_verdict")
    cited = [s["file"] for s in verdict.payload["source"]]
    assert cited == ["result.json", "verifier/reward.txt", "verifier/test-stdout.txt", "verifier/ctrf.json"]


def test_harbor_timeout_trial() -> None:
    run = read_one(TRIAL_TIMEOUT)
    (ended,) = of_kind(run, "run_ended")
    assert ended.status == "timeout" and ended.reason == "AgentTimeoutError: Agent execution timed out after 60.0 seconds"
    assert [s["file"] for s in ended.payload["source"]] == ["result.json", "exception.txt"]
    (verdict,) = of_kind(run, "acceptance_verdict")
    assert verdict.details == {"exception_type": "AgentTimeoutError"}


def test_terminal_bench_commands_and_provenance() -> None:
    runs = {r.run_id: r for r in read_runs(TB_RUN)}
    run = runs[TB_HELLO]
    started = run.events[0]
    assert (started.harness.name, started.model, started.task_id) == ("terminus", "anthropic/claude-sonnet-4-20250514",
                                                                      "hello-world")
    assert started.labels["dataset"] == "terminal-bench-core@0.1.1" and started.model_settings == {"temperature": 0.0}
    agent = [(e.kind, e.command) for e in run.events if e.actor == "agent" and e.kind in ("command", "test_run")]
    assert agent == [("command", "ls -la /app"), ("command", "printf 'Hello, world!\\n' > hello.txt"),
                     ("command", "cat hello.txt"), ("test_run", "python -m pytest tests/test_hello.py -q")]
    assert all(e.exit_code is None for e in run.events if e.kind in ("command", "test_run"))
    (ended,) = of_kind(run, "run_ended")
    harness_after = [(e.kind, e.command) for e in run.events[ended.seq:] if e.kind in ("command", "test_run")]
    assert harness_after == [("command", "asciinema rec --stdin /logs/tests.cast"), ("command", "clear"),
                             ("test_run", "bash /tests/run-tests.sh")]  # the harness's own test phase
    assert run.files == ["hello-world/hello-world.1-of-1.2025-11-02__09-00-00/results.json", "run_metadata.json",
                         "hello-world/hello-world.1-of-1.2025-11-02__09-00-00/commands.txt"]
    perms = runs[TB_PERMS]
    assert perms.events[0].task_id == "fix-permissions" and perms.files == ["results.json", "run_metadata.json"]


def test_terminal_bench_trial_alone(tmp_path: Path) -> None:
    """A trial-level results.json on its own is a run too (no run_metadata next to it)."""
    trial = tmp_path / "hello-world.1-of-1.x"
    shutil.copytree(TB_TRIAL, trial)
    run = read_one(trial / "results.json")
    assert run.run_id == TB_HELLO and run.format == "terminal-bench"
    assert run.events[0].harness.name == "terminal-bench" and run.events[0].model is None
    assert kinds(run)["command"] == 7 and kinds(run)["test_run"] == 2 and len(run.events) == 21


def test_terminal_bench_installed_agent_and_bad_lines(tmp_path: Path) -> None:
    trial = tmp_path / "t"
    trial.mkdir()
    data = json.loads((TB_TRIAL / "results.json").read_text())
    (trial / "results.json").write_text(json.dumps(data))
    (trial / "commands.txt").write_text(
        "['asciinema rec --stdin /logs/agent.cast', 'Enter']\n['clear', 'Enter']\n"
        "['source /installed-agent/setup-env.sh', 'Enter']\n"
        "[\"mini -m anthropic/claude -t 'do it' -y\", 'Enter']\n"
        "this is not a key list\n"
        "['asciinema rec --stdin /logs/tests.cast', 'Enter']\n['bash ', '/tests/run-tests.sh', 'Enter']\n")
    run = read_one(trial / "results.json")
    assert run.unparsed == 1 and run.events[0].imported.unparsed == 1
    (bad,) = of_kind(run, "unparsed")
    assert bad.record == "commands.txt:5" and bad.actor == "system"
    assert [e.actor for e in run.events if e.kind in ("command", "test_run")] == ["harness"] * 6  # installed agent: all harness


# --- synthetic ATIF for sub-agents and other agents' tools ---------------------------------------


def _atif(steps: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"schema_version": "ATIF-v1.7", "session_id": "sess-1",
            "agent": {"name": "claude-code", "version": "2.0.1", "model_name": "claude-sonnet-4-5"}, "steps": steps, **extra}


def test_subagents_and_claude_code_tools(tmp_path: Path) -> None:
    worker = _atif([{"step_id": 1, "source": "user", "message": "Find the failing test"},
                    {"step_id": 2, "source": "agent", "message": "Looking",
                     "tool_calls": [{"tool_call_id": "w1", "function_name": "Read", "arguments": {"file_path": "/app/src/a.py"}}],
                     "observation": {"results": [{"source_call_id": "w1", "content": "x = 1"}]}},
                    {"step_id": 3, "source": "agent", "message": "It is test_a in tests/test_a.py"}],
                   session_id="sess-1", trajectory_id="worker-7")
    orphan = _atif([{"step_id": 1, "source": "agent", "message": "unreferenced"}], trajectory_id="orphan-1")
    doc = _atif([
        {"step_id": 1, "source": "user", "message": "Fix the bug"},
        {"step_id": 2, "source": "agent", "message": "1. find the test\n2. fix it", "reasoning_content": "think first",
         "tool_calls": [{"tool_call_id": "c1", "function_name": "Task",
                         "arguments": {"prompt": "Find the failing test", "files": ["tests/test_a.py"]}}],
         "observation": {"results": [{"source_call_id": "c1", "content": "test_a fails",
                                      "subagent_trajectory_ref": [{"trajectory_id": "worker-7"}]}]}},
        {"step_id": 3, "source": "agent", "message": "",
         "tool_calls": [{"tool_call_id": "c2", "function_name": "Bash", "arguments": {"command": "pytest -q"}},
                        {"tool_call_id": "c3", "function_name": "Edit", "arguments": {"file_path": "/app/src/a.py"}},
                        {"tool_call_id": "c4", "function_name": "WebSearch", "arguments": {"query": "x"}}],
         "observation": {"results": [{"source_call_id": "c2", "content": "1 failed, 2 passed in 0.10s\n[exit_code] 1"},
                                     {"source_call_id": "c3", "content": "ok"}]}},
        {"step_id": 4, "source": "agent", "message": "done",
         "tool_calls": [{"tool_call_id": "c5", "function_name": "Bash",
                         "arguments": {"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"}}],
         "observation": {"results": [{"source_call_id": "c5", "content": "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"}]}},
    ], subagent_trajectories=[worker, orphan])
    path = tmp_path / "trajectory.json"
    path.write_text(json.dumps(doc))
    run = read_one(path)
    assert run.run_id == "atif/sess-1/trajectory"
    order = [(e.kind, e.actor) for e in run.events[1:]]
    assert order == [
        ("message", "user"), ("message", "agent"), ("message", "agent"), ("delegation", "agent"),
        ("message", "harness"), ("message", "subagent:worker-7"), ("file_read", "subagent:worker-7"),
        ("message", "subagent:worker-7"), ("worker_report", "subagent:worker-7"),
        ("test_run", "agent"), ("file_edit", "agent"), ("source_record", "agent"),
        ("message", "agent"), ("command", "agent"), ("completion_claim", "agent"),
        ("source_record", "harness"), ("message", "subagent:orphan-1")]
    (delegation,) = of_kind(run, "delegation")
    assert (delegation.worker_id, delegation.instruction, delegation.context) == (
        "worker-7", "Find the failing test", ["tests/test_a.py"])
    assert [s["record"] for s in delegation.payload["source"]] == ["steps[1]", "subagent_trajectories[0]"]
    (report,) = of_kind(run, "worker_report")
    assert report.text == "test_a fails" and report.parent_seq == delegation.seq
    messages = of_kind(run, "message")
    assert [(m.actor, m.intent) for m in messages[:3]] == [("user", None), ("agent", "reasoning"), ("agent", "plan")]
    assert messages[3].text == "Find the failing test"  # the worker's "user" turn: the lead's instruction, relayed
    (test,) = of_kind(run, "test_run")
    assert (test.exit_code, test.passed, test.failed) == (1, 2, 1)
    assert test_runs_found(run) == [("pytest -q", "fail")]
    assert of_kind(run, "file_read")[0].path == "src/a.py" and of_kind(run, "file_edit")[0].path == "src/a.py"
    assert [e.record_type for e in of_kind(run, "source_record")] == ["tool_call:WebSearch", "subagent_trajectory"]
    assert of_kind(run, "completion_claim")[0].claim == "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"


def test_openhands_bash_exit_code_and_dangling_subagent_file(tmp_path: Path) -> None:
    doc = {"schema_version": "ATIF-v1.2", "session_id": "oh", "agent": {"name": "openhands", "version": "1"},
           "steps": [{"step_id": 1, "source": "agent", "message": "run it",
                      "tool_calls": [{"tool_call_id": "a", "function_name": "execute_bash",
                                      "arguments": {"command": "make test"}},
                                     {"tool_call_id": "b", "function_name": "think", "arguments": {"thought": "hmm"}}],
                      "observation": {"results": [
                          {"source_call_id": "a", "content": "FAIL\n[Command finished with exit code 2]"},
                          {"content": "delegated", "subagent_trajectory_ref": [
                              {"session_id": "gone", "trajectory_path": "trajectory.gone.json"}]}]}}]}
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    run = read_one(path)
    (test,) = of_kind(run, "test_run")
    assert test.command == "make test" and test.exit_code == 2
    assert [(e.kind, e.actor) for e in run.events[1:]] == [
        ("message", "agent"), ("test_run", "agent"), ("message", "agent"), ("delegation", "agent"),
        ("worker_report", "subagent:gone")]
    assert of_kind(run, "message")[1].intent == "reasoning"


def test_terminus_cwd_from_prompts(tmp_path: Path) -> None:
    screen = "New Terminal Output:\n\nroot@c1:/app# cd src\nroot@c1:/app/src# cat a.py\nx = 1\nroot@c1:/app/src# "
    doc = {"schema_version": "ATIF-v1.5", "session_id": "s", "agent": {"name": "terminus-2", "version": "2.0.0"},
           "steps": [{"step_id": 1, "source": "agent", "message": "Analysis: look.\nPlan: read a.py.",
                      "tool_calls": [{"tool_call_id": "call_0_1", "function_name": "bash_command",
                                      "arguments": {"keystrokes": "cd src\n", "duration": 0.1}},
                                     {"tool_call_id": "call_0_2", "function_name": "bash_command",
                                      "arguments": {"keystrokes": "cat a.py\n", "duration": 0.1}},
                                     {"tool_call_id": "call_0_3", "function_name": "bash_command",
                                      "arguments": {"keystrokes": "", "duration": 5}}],
                      "observation": {"results": [{"content": screen}]}},
                     {"step_id": 2, "source": "agent", "message": "Analysis: edit.\nPlan: edit.",
                      "tool_calls": [{"tool_call_id": "call_1_1", "function_name": "bash_command",
                                      "arguments": {"keystrokes": "sed -i 's/1/2/' a.py\n", "duration": 0.1}}],
                      "observation": {"results": [{"content": "New Terminal Output:\n\n"}]}}]}
    path = tmp_path / "trajectory.json"
    path.write_text(json.dumps(doc))
    run = read_one(path)
    assert [e.cwd for e in of_kind(run, "command")] == ["/app", "/app/src", "/app/src"]
    assert [e.path for e in of_kind(run, "file_read")] == ["src/a.py"]  # /app is the workspace root
    assert [e.path for e in of_kind(run, "file_edit")] == ["src/a.py"]  # the last prompt's directory
    assert [e.record_type for e in of_kind(run, "source_record")] == ["wait"]  # the empty poll


def test_harbor_installed_agent_without_atif(tmp_path: Path) -> None:
    trial = tmp_path / "task__abc"
    (trial / "agent" / "command-0").mkdir(parents=True)
    (trial / "agent" / "command-0" / "command.txt").write_text(
        "ANTHROPIC_API_KEY=sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789 "
        "claude --print 'do it' | tee /logs/agent/claude-code.txt\n")
    (trial / "agent" / "command-0" / "return-code.txt").write_text("1\n")
    (trial / "agent" / "command-0" / "stdout.txt").write_text("boom\n")
    (trial / "agent" / "claude-code.txt").write_text("not ours\n")
    (trial / "result.json").write_text(json.dumps({
        "task_name": "task", "trial_name": "task__abc", "agent_info": {"name": "claude-code", "version": "2.0.0",
                                                                       "model_info": {"name": "sonnet", "provider": "anthropic"}},
        "verifier_result": None, "exception_info": {"exception_type": "NonZeroAgentExitCodeError",
                                                    "exception_message": "exit 1"},
        "started_at": "2025-11-01T00:00:00Z", "finished_at": "2025-11-01T00:01:00Z"}))
    tree_runs = read_runs(trial)
    (run,) = [r for r in tree_runs if r.format == "harbor"]
    assert run.events[0].model == "anthropic/sonnet"
    (command,) = of_kind(run, "command")
    assert (command.actor, command.exit_code, command.command) == (
        "harness", 1, "ANTHROPIC_API_KEY=[REDACTED-SECRET] claude --print 'do it' | tee /logs/agent/claude-code.txt")
    assert run.events[0].imported.redactions == 1 and "sk-ant-" not in json.dumps(command.payload)
    assert not of_kind(run, "file_edit")  # harness launch lines have no file effects
    (ended,) = of_kind(run, "run_ended")
    assert ended.status == "error"
    (verdict,) = of_kind(run, "acceptance_verdict")
    assert verdict.status == "infra_error" and verdict.reward is None
    assert "agent/claude-code.txt" not in run.files


def test_harbor_reward_txt_without_result_rewards(tmp_path: Path) -> None:
    trial = tmp_path / "hello-world__Kx7pQ2m"
    shutil.copytree(TRIAL_OK, trial)
    result = json.loads((trial / "result.json").read_text())
    result["verifier_result"] = None
    (trial / "result.json").write_text(json.dumps(result))
    (trial / "verifier" / "reward.txt").write_text("0.50\n")
    (verdict,) = of_kind(read_one(trial), "acceptance_verdict")
    assert (verdict.status, verdict.reward, verdict.rewards) == ("evaluated", "0.5", None)


# --- through the store, and `procgrade score` ----------------------------------------------------


@pytest.mark.parametrize("path", list(SAMPLES), ids=_ids)
def test_store_round_trip_and_score(store, store_url: str, path: Path) -> None:
    fmt, expected = SAMPLES[path]
    result = ingest_paths(store, [path], format="auto")
    assert sorted(r.run_id for r in result.reports) == sorted(expected)
    for report in result.reports:
        assert report.format == fmt and not report.result.no_op
        assert report.result.appended == expected[report.run_id][0]
    before = snapshot(store)
    again = ingest_paths(store, [path], format="auto")
    assert all(r.result.no_op for r in again.reports) and len(again.reports) == len(expected)
    assert snapshot(store) == before
    for run_id in expected:
        scored = CliRunner().invoke(app, ["score", run_id, "--db", store_url])
        assert scored.exit_code == 0, scored.output


# --- malformed input: located errors, nothing written --------------------------------------------


def _seed(store) -> Any:
    """A store holding a good run, so "nothing written" is checked against real rows."""
    ingest_paths(store, [OPENHANDS], format="auto")
    seeded = snapshot(store)
    assert seeded[1]
    return seeded


def _copy(tmp_path: Path, source: Path) -> Path:
    target = tmp_path / source.name
    target.write_bytes(source.read_bytes())
    return target


def _edit_json(path: Path, change: Any) -> None:
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc, indent=1))


def test_truncated_atif(store, tmp_path: Path) -> None:
    seeded = _seed(store)
    path = _copy(tmp_path, INVALID)
    text = path.read_text()
    path.write_text(text[: len(text) // 2])
    try:
        json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        line = exc.lineno
    error = assert_rejected(store, path, where=f"{path}:{line}:", field=None)
    assert "invalid JSON" in error.reason
    assert snapshot(store) == seeded


def test_atif_non_json_bytes(store, tmp_path: Path) -> None:
    seeded = _seed(store)
    path = _copy(tmp_path, TIMEOUT)
    data = path.read_bytes()
    cut = data.index(b'"step_id": 3')
    path.write_bytes(data[:cut] + b"\xff\xfe\x00garbage" + data[cut:])
    line = data[:cut].count(b"\n") + 1
    error = assert_rejected(store, path, where=f"{path}:{line}:", field=None)
    assert "not UTF-8" in error.reason
    assert snapshot(store) == seeded


ATIF_CORRUPTIONS = [
    ("no-source", lambda d: d["steps"][2].pop("source"), "steps[2]", "source"),
    ("step-id-text", lambda d: d["steps"][1].__setitem__("step_id", "2"), "steps[1]", "step_id"),
    ("arguments-text", lambda d: d["steps"][2]["tool_calls"][0].__setitem__("arguments", "printf"), "steps[2]",
     "tool_calls.0.arguments"),
    ("no-keystrokes", lambda d: d["steps"][2]["tool_calls"][0]["arguments"].pop("keystrokes"), "steps[2]",
     "tool_calls.0.arguments.keystrokes"),
    ("unknown-source", lambda d: d["steps"][3].__setitem__("source", "robot"), "steps[3]", "source"),
    ("no-agent-name", lambda d: d["agent"].pop("name"), "root", "agent.name"),
    ("steps-object", lambda d: d.__setitem__("steps", {}), "root", "steps"),
    ("missing-continuation", lambda d: d.__setitem__("continued_trajectory_ref", "trajectory.cont-9.json"), "root",
     "continued_trajectory_ref"),
]


def test_corrupted_atif(store, tmp_path: Path) -> None:
    seeded = _seed(store)
    for name, change, where, field in ATIF_CORRUPTIONS:
        folder = tmp_path / name
        folder.mkdir()
        path = _copy(folder, INVALID)
        _edit_json(path, change)
        assert_rejected(store, path, where=f"{path}:{where}:", field=field)
    assert snapshot(store) == seeded


def _trial(folder: Path) -> Path:
    trial = folder / TRIAL_OK.name
    shutil.copytree(TRIAL_OK, trial)
    return trial


HARBOR_CORRUPTIONS = [
    ("result.json", lambda d: d["verifier_result"]["rewards"].__setitem__("reward", "high"), "result.json:result",
     "verifier_result.rewards.reward"),
    ("result.json", lambda d: d["verifier_result"].__setitem__("rewards", [1.0]), "result.json:result",
     "verifier_result.rewards"),
    ("verifier/ctrf.json", lambda d: d["results"]["tests"][1].pop("status"), "verifier/ctrf.json:results.tests[1]",
     "status"),
    ("agent/trajectory.json", lambda d: d["steps"][6].pop("step_id"), "agent/trajectory.json:steps[6]", "step_id"),
    ("agent/trajectory.summarization-1-answers.json", lambda d: d["steps"][6].__setitem__("message", 7),
     "agent/trajectory.summarization-1-answers.json:steps[6]", "message"),
]


def test_corrupted_harbor_trial(store, tmp_path: Path) -> None:
    seeded = _seed(store)
    for index, (file, change, where, field) in enumerate(HARBOR_CORRUPTIONS):
        trial = _trial(tmp_path / str(index))
        _edit_json(trial / file, change)
        assert_rejected(store, trial, where=f"{trial}/{where}:", field=field)
    assert snapshot(store) == seeded


def test_truncated_harbor_files(store, tmp_path: Path) -> None:
    seeded = _seed(store)
    trial = _trial(tmp_path)
    text = (trial / "result.json").read_text()
    (trial / "result.json").write_text(text[:300])
    error = assert_rejected(store, trial, where=f"{trial}/result.json:", field=None)
    assert "invalid JSON" in error.reason
    (trial / "result.json").write_text(text)
    (trial / "verifier" / "ctrf.json").write_bytes(b"\x00\x01 not json")
    assert_rejected(store, trial, where=f"{trial}/verifier/ctrf.json:1:", field=None)
    (trial / "verifier" / "ctrf.json").write_text("{}")
    (trial / "verifier" / "reward.txt").write_text("NaN\n")
    result = json.loads(text)
    result["verifier_result"] = None
    (trial / "result.json").write_text(json.dumps(result))
    assert_rejected(store, trial, where=f"{trial}/verifier/reward.txt:1:", field="reward")
    assert snapshot(store) == seeded


TB_CORRUPTIONS = [
    (lambda d: d.__setitem__("is_resolved", "yes"), "is_resolved"),
    (lambda d: d.pop("task_id"), "task_id"),
    (lambda d: d["parser_results"].__setitem__("test_hello_file_exists", True), "parser_results.test_hello_file_exists"),
]


def test_corrupted_terminal_bench(store, tmp_path: Path) -> None:
    seeded = _seed(store)
    for index, (change, field) in enumerate(TB_CORRUPTIONS):
        trial = tmp_path / str(index)
        shutil.copytree(TB_TRIAL, trial)
        _edit_json(trial / "results.json", change)
        assert_rejected(store, trial / "results.json", where=f"{trial / 'results.json'}:result:", field=field)
    assert snapshot(store) == seeded


def test_truncated_terminal_bench(store, tmp_path: Path) -> None:
    seeded = _seed(store)
    trial = tmp_path / "trial"
    shutil.copytree(TB_TRIAL, trial)
    text = (trial / "results.json").read_text()
    (trial / "results.json").write_text(text[:400])
    error = assert_rejected(store, trial / "results.json", where=f"{trial / 'results.json'}:", field=None)
    assert "invalid JSON" in error.reason
    assert snapshot(store) == seeded
