"""The Codex CLI rollout importer (``codex``): the shared samples, a synthetic rollout that
exercises the rest of the mapping, the store round trip, ``procgrade score``, and broken files.

Expected numbers were derived by reading each sample line by line (comments say which line
makes which event), not by printing the importer's output.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from procgrade.engine.cli import app
from procgrade.engine.importers.source_tree import open_tree
from procgrade.engine.importers import plan_imports
from procgrade.engine.ingest import ingest_paths
from import_checks import FIXTURES, actors, assert_rejected, kinds, of_kind, read_one, snapshot, test_runs_found

HERE = FIXTURES / "codex"
ONE_TURN = HERE / "rollout-2026-01-02T03-04-05-11111111-1111-4111-8111-111111111111.jsonl"
SPAWN = HERE / "rollout-2026-01-03T04-05-06-22222222-2222-4222-8222-222222222222.jsonl"
MALFORMED = HERE / "rollout-66666666-6666-4666-8666-666666666666.jsonl"
MINIMAL = HERE / "sample_codex_session.jsonl"
SAMPLES = {
    ONE_TURN: "codex/11111111-1111-4111-8111-111111111111",
    SPAWN: "codex/22222222-2222-4222-8222-222222222222",
    MALFORMED: "codex/66666666-6666-4666-8666-666666666666",
    MINIMAL: "codex/test-session",
}


def cited(event) -> list[str]:
    """The record labels (line numbers) an event cites, in order."""
    return [s["record"] for s in event.payload["source"]]


# --- the shared samples -------------------------------------------------------------------------


def test_one_turn_sample() -> None:
    run = read_one(ONE_TURN)
    assert run.run_id == SAMPLES[ONE_TURN]
    # 1 session_meta -> run_started; 2 turn_context -> stage 1; 3+4 user message (event_msg and
    # response_item repeat each other) -> 1 message; 5 reasoning summary -> message; 6+7
    # exec_command -> command; 8+9 apply_patch -> file_edit gamma.txt; 10+11 MCP -> source_record;
    # 12+13 final answer -> 1 message; 14 unknown record type -> source_record.
    assert len(run.events) == 9
    assert kinds(run) == {"command": 1, "file_edit": 1, "message": 3, "run_started": 1, "source_record": 2,
                          "stage_started": 1}
    assert actors(run) == {"agent": 5, "harness": 3, "user": 1}
    assert of_kind(run, "completion_claim") == []          # an answer, and no task_complete
    assert test_runs_found(run) == []
    assert [e for e in run.events if e.kind in ("acceptance_verdict", "test_result")] == []
    assert run.unparsed == 0

    start = run.events[0]
    assert start.harness.name == "codex" and start.harness.version == "0.0.0-test"
    assert start.model == "synthetic-model"
    assert start.model_settings["model_provider"] == "synthetic"
    assert start.labels == {"source": "cli", "originator": "codex_cli_rs", "cwd": "/workspace/synthetic-project"}
    assert start.imported.records == 14 and start.imported.format == "codex"

    stage = run.events[1]
    assert (stage.kind, stage.stage, cited(stage)) == ("stage_started", 1, ["2"])
    assert all(e.stage == 1 for e in run.events[1:])

    user, reasoning, answer = of_kind(run, "message")
    assert (user.actor, user.text, cited(user)) == ("user", "List the synthetic files.", ["3", "4"])
    assert (reasoning.actor, reasoning.intent, reasoning.text) == ("agent", "reasoning", "I will inspect the synthetic directory.")
    # the encrypted reasoning is kept raw, not rendered
    assert reasoning.payload["source"][0]["raw"]["payload"]["encrypted_content"] == "SYNTHETIC_ENCRYPTED_CONTENT_MUST_NOT_RENDER"
    assert (answer.actor, answer.intent, cited(answer)) == ("agent", None, ["12", "13"])

    (command,) = of_kind(run, "command")
    assert command.command == "find . -maxdepth 1 -type f"
    assert command.exit_code is None                          # the output has no exit line
    assert cited(command) == ["6", "7"] and command.cwd == "/workspace/synthetic-project"

    (edit,) = of_kind(run, "file_edit")
    assert (edit.path, edit.edit_kind, edit.actor, cited(edit)) == ("gamma.txt", "create", "agent", ["8", "9"])

    mcp, future = of_kind(run, "source_record")
    assert (mcp.actor, mcp.record_type, cited(mcp)) == ("agent", "mcp_tool_call:mcp__synthetic__lookup", ["10", "11"])
    assert (future.actor, future.record_type, cited(future)) == ("harness", "future_synthetic_record", ["14"])


def test_spawn_sample() -> None:
    run = read_one(SPAWN)
    assert run.run_id == SAMPLES[SPAWN]
    # 1 session_meta; 2 user_message -> stage 1 (opened by the user) + message; 3 spawn_agent +
    # 4 collab_tool_call + 5 output -> one delegation to the new thread.
    assert len(run.events) == 4
    assert kinds(run) == {"delegation": 1, "message": 1, "run_started": 1, "stage_started": 1}
    assert actors(run) == {"agent": 1, "harness": 1, "user": 2}
    assert of_kind(run, "completion_claim") == [] and of_kind(run, "worker_report") == []
    assert test_runs_found(run) == []
    assert run.events[0].model is None and run.events[0].model_settings is None   # no turn_context, no provider
    (delegation,) = of_kind(run, "delegation")
    assert delegation.worker_id == "33333333-3333-4333-8333-333333333333"
    assert delegation.instruction == "Inspect fixtures."
    assert delegation.context is None
    assert cited(delegation) == ["3", "4", "5"]
    assert of_kind(run, "stage_started")[0].actor == "user"


def test_malformed_sample_keeps_the_bad_line() -> None:
    run = read_one(MALFORMED)
    assert run.run_id == SAMPLES[MALFORMED]
    # 1 session_meta; 2 user_message -> stage + message; 3 `{synthetic malformed json` -> unparsed.
    assert len(run.events) == 4
    assert kinds(run) == {"message": 1, "run_started": 1, "stage_started": 1, "unparsed": 1}
    assert actors(run) == {"harness": 1, "system": 1, "user": 2}
    assert of_kind(run, "completion_claim") == [] and test_runs_found(run) == []
    assert run.unparsed == 1 and run.events[0].imported.unparsed == 1
    (bad,) = of_kind(run, "unparsed")
    assert bad.record == "rollout-66666666-6666-4666-8666-666666666666.jsonl:3"
    assert bad.reason.startswith("invalid JSON")
    assert bad.payload["source"][0]["raw"] == {"text": "{synthetic malformed json"}
    assert run.events[0].model_settings is None and run.events[0].harness.version == "0.0.0-test"


def test_minimal_real_session_sample() -> None:
    run = read_one(MINIMAL)
    assert run.run_id == SAMPLES[MINIMAL]
    # 1 session_meta (instructions, provider); 2 user message -> stage + message; 3 one assistant
    # record holding a reasoning item and a text item -> two messages.
    assert len(run.events) == 5
    assert kinds(run) == {"message": 3, "run_started": 1, "stage_started": 1}
    assert actors(run) == {"agent": 2, "harness": 1, "user": 2}
    assert of_kind(run, "completion_claim") == [] and test_runs_found(run) == []
    start = run.events[0]
    assert start.model_settings == {"model_provider": "openai", "instructions": "Sample instructions"}
    assert start.harness.version == "0.0.0" and start.labels["cwd"] == "/project"
    user, thought, text = of_kind(run, "message")
    assert (user.actor, user.text) == ("user", "Write a hello world function")
    assert (thought.intent, thought.text) == ("reasoning", "I'll include a minimal example and keep it short.")
    assert (text.intent, text.text, cited(text)) == (None, "Here is a simple hello world function.", ["3"])


def test_samples_are_recognised_as_codex() -> None:
    for path in SAMPLES:
        tree = open_tree(path)
        plan = plan_imports(tree)
        assert [importer.name for importer, _ in plan.units] == ["codex"], path


def test_reads_are_deterministic() -> None:
    for path in SAMPLES:
        first, second = read_one(path), read_one(path)
        assert [e.model_dump() for e in first.events] == [e.model_dump() for e in second.events]


# --- through the store, and `procgrade score` ----------------------------------------------------


@pytest.mark.parametrize("path", list(SAMPLES), ids=lambda p: p.name[:30])
def test_store_round_trip_and_score(store, store_url: str, path: Path) -> None:
    result = ingest_paths(store, [path], format="auto")
    (report,) = result.reports
    assert report.format == "codex" and report.run_id == SAMPLES[path]
    assert not report.result.no_op and report.result.appended == len(read_one(path).events)
    before = snapshot(store)
    again = ingest_paths(store, [path], format="auto")
    assert again.reports[0].result.no_op
    assert snapshot(store) == before
    scored = CliRunner().invoke(app, ["score", SAMPLES[path], "--db", store_url])
    assert scored.exit_code == 0, scored.output


# --- a synthetic rollout for the rest of the mapping ---------------------------------------------

SESSION = "aaaaaaaa-0000-4000-8000-000000000001"
LEAD = SESSION
REVIEWER = "bbbbbbbb-0000-4000-8000-000000000002"
CRASHED = "cccccccc-0000-4000-8000-000000000003"


def _line(second: int, kind: str, payload: dict) -> str:
    return json.dumps({"timestamp": f"2026-03-01T00:00:{second:02d}.000Z", "type": kind, "payload": payload})


def _call(second: int, name: str, args: dict | str, call_id: str) -> str:
    arguments = args if isinstance(args, str) else json.dumps(args)
    return _line(second, "response_item", {"type": "function_call", "name": name, "arguments": arguments, "call_id": call_id})


def _out(second: int, call_id: str, output) -> str:
    return _line(second, "response_item", {"type": "function_call_output", "call_id": call_id, "output": output})


def _event(second: int, **payload) -> str:
    return _line(second, "event_msg", payload)


def _msg(second: int, role: str, text: str, **extra) -> str:
    kind = "output_text" if role == "assistant" else "input_text"
    return _line(second, "response_item", {"type": "message", "role": role, "content": [{"type": kind, "text": text}], **extra})


CLAIM = "I've fixed the bug in `src/app.py` and all tests pass."

RICH = [
    # 1
    _line(0, "session_meta", {"id": SESSION, "timestamp": "2026-03-01T00:00:00.000Z", "cwd": "/repo",
                              "originator": "codex_cli_rs", "cli_version": "0.99.0", "source": "exec",
                              "model_provider": "openai", "instructions": "Be careful.",
                              "git": {"commit_hash": "abc123", "branch": "main", "repository_url": "https://example.com/r.git"}}),
    # 2-3: what the harness injects before the first turn
    _msg(1, "user", "<environment_context>\n  <cwd>/repo</cwd>\n</environment_context>"),
    _msg(1, "developer", "<permissions instructions>sandboxed</permissions instructions>"),
    # 4-5: turn 1 starts (task_started opens the stage; its turn_context belongs to it)
    _event(2, type="task_started", turn_id="t1", model_context_window=1000),
    _line(2, "turn_context", {"turn_id": "t1", "cwd": "/repo", "model": "gpt-5-codex", "approval_policy": "never",
                              "sandbox_policy": {"type": "workspace-write"}, "effort": "high", "summary": "auto"}),
    # 6-7: the user's request, twice (response_item and event_msg)
    _msg(3, "user", "Fix the bug in src/app.py and run the tests."),
    _event(3, type="user_message", message="Fix the bug in src/app.py and run the tests.", images=[]),
    # 8-10: a two-part reasoning summary and its two agent_reasoning events
    _line(4, "response_item", {"type": "reasoning", "summary": [{"type": "summary_text", "text": "Look at the file."},
                                                                {"type": "summary_text", "text": "Then test."}],
                               "encrypted_content": "gAAAA"}),
    _event(4, type="agent_reasoning", text="Look at the file."),
    _event(4, type="agent_reasoning", text="Then test."),
    # 11-12: update_plan
    _call(5, "update_plan", {"explanation": "Steps", "plan": [{"step": "read", "status": "in_progress"},
                                                               {"step": "fix", "status": "pending"}]}, "c-plan"),
    _out(5, "c-plan", "Plan updated"),
    # 13-14: shell with a JSON output (metadata.exit_code)
    _call(6, "shell", {"command": ["bash", "-lc", "cat src/app.py"], "workdir": "/repo"}, "c1"),
    _out(6, "c1", json.dumps({"output": "print(1)\n", "metadata": {"exit_code": 0, "duration_seconds": 0.25}})),
    # 15-17: apply_patch inside a shell call, confirmed by patch_apply_end
    _call(7, "shell", {"command": ["apply_patch", "*** Begin Patch\n*** Update File: src/app.py\n@@\n-print(1)\n+print(2)\n*** End Patch\n"],
                       "workdir": "/repo"}, "c2"),
    _event(7, type="patch_apply_end", call_id="c2", stdout="ok", stderr="", success=True),
    _out(7, "c2", json.dumps({"output": "Success. Updated the following files:\nM src/app.py\n", "metadata": {"exit_code": 0}})),
    # 18-19: shell_command; the exit line is read from the header only (the body says "Exit code: 0")
    _call(8, "shell_command", {"command": "python -m pytest -q", "workdir": "/repo/sub"}, "c3"),
    _out(8, "c3", "Exit code: 1\nWall time: 1.5 seconds\nOutput:\n1 failed, 2 passed in 0.1s\nExit code: 0\n"),
    # 20-25: a unified-exec session that outlives its call, polled with write_stdin
    _call(9, "exec_command", {"cmd": "pytest -q tests/test_app.py", "workdir": "sub"}, "c4"),
    _out(9, "c4", "Chunk ID: 1\nWall time: 10.0 seconds\nProcess running with session ID 7\nOriginal token count: 1\nOutput:\n..."),
    _call(10, "write_stdin", {"session_id": 7, "chars": ""}, "c5"),
    _out(10, "c5", "Chunk ID: 2\nWall time: 5.0 seconds\nProcess running with session ID 7\nOutput:\n.."),
    _call(11, "write_stdin", {"session_id": 7, "chars": ""}, "c6"),
    _out(11, "c6", "Chunk ID: 3\nWall time: 0.1 seconds\nProcess exited with code 0\nOutput:\n3 passed in 0.2s\n"),
    # 26-27: a patch that failed: nothing was edited
    _line(12, "response_item", {"type": "custom_tool_call", "name": "apply_patch", "call_id": "c7",
                                "input": "*** Begin Patch\n*** Update File: missing.py\n@@\n-a\n+b\n*** End Patch"}),
    _line(12, "response_item", {"type": "custom_tool_call_output", "call_id": "c7",
                                "output": "apply_patch verification failed: missing.py not found"}),
    # 28-29: the model sent arguments that are not JSON (its error, not a broken log)
    _call(13, "shell", "{not json", "c8"),
    _out(13, "c8", "failed to parse function arguments"),
    # 30
    _event(14, type="token_count", info=None, rate_limits=None),
    # 31-33: the final answer (twice) and the turn's end: a completion claim
    _event(15, type="agent_message", message=CLAIM),
    _msg(15, "assistant", CLAIM, phase="final_answer"),
    _event(16, type="task_complete", turn_id="t1", last_agent_message=CLAIM),
    # 34-41: turn 2, a question: a plan-shaped commentary, a past-tense list, an answer; no claim
    _event(17, type="task_started", turn_id="t2"),
    _line(17, "turn_context", {"turn_id": "t2", "cwd": "/repo", "model": "gpt-5-codex"}),
    _event(17, type="user_message", message="What did you change?"),
    _msg(17, "user", "What did you change?"),
    _msg(18, "assistant", "1. Inspect the diff\n2. Summarise it", phase="commentary"),
    _msg(18, "assistant", "1. Changed one line.", phase="commentary"),
    _msg(18, "assistant", "I changed one line. Anything else?"),
    _event(19, type="task_complete", turn_id="t2", last_agent_message=None),
    # 42-45: turn 3, /compact (a compaction that is a turn of its own)
    _event(20, type="task_started", turn_id="t3"),
    _line(20, "compacted", {"message": "Summary: fixed app.py", "replacement_history": []}),
    _event(20, type="context_compacted"),
    _event(21, type="task_complete", turn_id="t3", last_agent_message=None),
    # 46-47: turn 4, sub-agents
    _event(22, type="task_started", turn_id="t4"),
    _event(22, type="user_message", message="Ask a helper to review."),
    # 48-50: spawn (the thread id comes from the collab event)
    _call(23, "spawn_agent", {"message": "Review src/app.py", "task_name": "reviewer",
                              "items": [{"type": "mention", "path": "/repo/src/app.py"}]}, "s1"),
    _event(23, type="collab_agent_spawn_end", call_id="s1", sender_thread_id=LEAD, new_thread_id=REVIEWER,
           prompt="Review src/app.py", status="pending_init"),
    _out(23, "s1", json.dumps({"agent_id": REVIEWER})),
    # 51-52: wait -> the reviewer's report
    _call(24, "wait", {"ids": [REVIEWER], "timeout_ms": 1000}, "w1"),
    _out(24, "w1", json.dumps({"status": {REVIEWER: {"completed": "Looks fine; see `src/app.py:3` and docs/notes.md."}},
                               "timed_out": False})),
    # 53: a notification the harness injects about another (failed) sub-agent
    _msg(25, "user", "<subagent_notification>\n" + json.dumps({"agent_id": CRASHED, "status": {"errored": "crashed"}})
         + "\n</subagent_notification>"),
    # 54: a v2 message from the reviewer (by agent path, which names the same thread)
    _line(26, "inter_agent_communication", {"author": "/root/reviewer", "recipient": "/root", "other_recipients": [],
                                            "content": "Second opinion: ok", "trigger_turn": False}),
    # 55: activity that belongs to no call
    _event(27, type="sub_agent_activity", agent_thread_id="dddddddd-0000-4000-8000-000000000004", agent_path="/root/x",
           kind="started"),
    # 56-57: local_shell_call in a sub-directory
    _line(28, "response_item", {"type": "local_shell_call", "call_id": "ls1", "status": "completed",
                                "action": {"type": "exec", "command": ["bash", "-lc", "rm -f old.txt"],
                                           "working_directory": "/repo/sub"}}),
    _out(28, "ls1", "Exit code: 0\nWall time: 0 seconds\nOutput:\n"),
    # 58: a command the user ran himself (!ls), persisted by an older version
    _event(29, type="exec_command_end", call_id="user1", turn_id="t4", command=["bash", "-lc", "ls"], cwd="/repo",
           parsed_cmd=[], source="user_shell", stdout="", stderr="", aggregated_output="a\n", exit_code=0,
           formatted_output="a"),
    # 59: an event type this importer has never heard of
    _event(30, type="brand_new_event", foo=1),
    # 60
    _event(31, type="turn_aborted", turn_id="t4", reason="interrupted"),
]
# 61: the last line was cut mid-write
CUT = '{"timestamp":"2026-03-01T00:00:40.000Z","type":"event_msg","payload":{"type":"agent_mes'


@pytest.fixture
def rich(tmp_path: Path) -> Path:
    path = tmp_path / f"rollout-2026-03-01T00-00-00-{SESSION}.jsonl"
    path.write_text("\n".join(RICH) + "\n" + CUT, encoding="utf-8")
    return path


def test_synthetic_rollout_mapping(rich: Path) -> None:
    run = read_one(rich)
    assert run.run_id == f"codex/{SESSION}"
    assert len(run.events) == 45
    assert kinds(run) == {
        "command": 3, "compaction": 1, "completion_claim": 1, "delegation": 1, "file_edit": 2, "file_read": 1,
        "job_finished": 1, "job_polled": 1, "job_started": 1, "message": 11, "run_started": 1, "source_record": 7,
        "stage_ended": 4, "stage_started": 4, "test_run": 2, "unparsed": 1, "worker_report": 3,
    }
    assert actors(run) == {"agent": 20, "harness": 16, f"subagent:{CRASHED}": 1, f"subagent:{REVIEWER}": 2,
                           "system": 1, "user": 5}
    assert run.unparsed == 1

    start = run.events[0]
    assert start.model == "gpt-5-codex" and start.harness.version == "0.99.0"
    assert start.model_settings["instructions"] == "Be careful." and start.model_settings["reasoning_effort"] == "high"
    assert start.labels["git_commit"] == "abc123" and start.labels["git_branch"] == "main"
    assert start.labels["source"] == "exec"

    by_line = {}
    for event in run.events[1:]:
        by_line.setdefault(cited(event)[0], []).append(event)

    # injected context is the harness's, before any stage
    assert [(e.actor, e.stage) for e in by_line["2"] + by_line["3"]] == [("harness", None), ("harness", None)]
    # stages: opened by task_started, closed by task_complete / turn_aborted
    assert [(e.stage, cited(e)) for e in of_kind(run, "stage_started")] == [(1, ["4"]), (2, ["34"]), (3, ["42"]), (4, ["46"])]
    assert [(e.stage, e.status) for e in of_kind(run, "stage_ended")] == [
        (1, "completed"), (2, "completed"), (3, "completed"), (4, "aborted")]
    # the twins make one event each
    (user,) = by_line["6"]
    assert (user.actor, cited(user)) == ("user", ["6", "7"])
    (thought,) = by_line["8"]
    assert (thought.intent, thought.text, cited(thought)) == ("reasoning", "Look at the file.\n\nThen test.", ["8", "9", "10"])
    (plan,) = by_line["11"]
    assert (plan.intent, plan.text) == ("plan", "Steps\n- [in_progress] read\n- [pending] fix")

    cat, read = by_line["13"]
    assert (cat.kind, cat.exit_code, cat.duration_ms) == ("command", 0, 250)
    assert (read.kind, read.path, read.parent_seq) == ("file_read", "src/app.py", cat.seq)
    (patched,) = by_line["15"]
    assert (patched.kind, patched.path, patched.edit_kind, cited(patched)) == ("file_edit", "src/app.py", "modify", ["15", "16", "17"])

    assert test_runs_found(run) == [("python -m pytest -q", "fail"), ("pytest -q tests/test_app.py", "pass")]
    first, second = of_kind(run, "test_run")
    assert (first.exit_code, first.passed, first.failed, first.duration_ms) == (1, 2, 1, 1500)
    started, polled = by_line["20"][0], by_line["22"][0]
    assert (started.kind, started.job_id, started.command) == ("job_started", "exec-session-7", "pytest -q tests/test_app.py")
    assert (polled.kind, polled.status) == ("job_polled", "running")
    assert (second.exit_code, second.passed, second.parent_seq, cited(second)) == (0, 3, started.seq, ["24", "25"])
    (finished,) = of_kind(run, "job_finished")
    assert (finished.exit_code, finished.parent_seq) == (0, second.seq)

    (failed_patch,) = by_line["26"]
    assert (failed_patch.kind, failed_patch.actor, failed_patch.record_type) == ("source_record", "agent", "apply_patch:failed")
    (bad_args,) = by_line["28"]
    assert (bad_args.kind, bad_args.actor, bad_args.record_type) == ("source_record", "agent", "tool_call:shell")

    (answer,) = by_line["31"]
    assert (answer.intent, cited(answer)) == (None, ["31", "32"])
    (claim,) = of_kind(run, "completion_claim")
    assert (claim.claim, claim.scope, claim.stage, claim.parent_seq) == (CLAIM, "stage", 1, answer.seq)
    assert cited(claim) == ["33", "31"]

    commentary_plan, past, last = by_line["38"] + by_line["39"] + by_line["40"]
    assert (commentary_plan.intent, past.intent, last.intent) == ("plan", "progress", None)

    (compaction,) = of_kind(run, "compaction")
    assert (compaction.actor, compaction.summary, cited(compaction)) == ("user", "Summary: fixed app.py", ["43", "44"])

    (delegation,) = of_kind(run, "delegation")
    assert (delegation.worker_id, delegation.instruction, delegation.context) == (REVIEWER, "Review src/app.py", ["src/app.py"])
    assert cited(delegation) == ["48", "49", "50"]
    report, crash, message = of_kind(run, "worker_report")
    assert (report.actor, report.worker_id, report.status) == (f"subagent:{REVIEWER}", REVIEWER, "success")
    assert report.evidence == ["src/app.py", "docs/notes.md"]
    assert (crash.actor, crash.status, crash.text) == (f"subagent:{CRASHED}", "failure", "crashed")
    assert (message.worker_id, message.status, message.text) == (REVIEWER, None, "Second opinion: ok")

    (activity,) = by_line["55"]
    assert (activity.kind, activity.record_type) == ("source_record", "event_msg.sub_agent_activity")
    rm, removed = by_line["56"]
    assert (rm.command, rm.exit_code, rm.cwd) == ("rm -f old.txt", 0, "/repo/sub")
    assert (removed.path, removed.edit_kind) == ("sub/old.txt", "delete")     # seen from the workdir
    (own,) = by_line["58"]
    assert (own.kind, own.actor, own.command, own.exit_code) == ("command", "user", "ls", 0)
    (unknown,) = by_line["59"]
    assert unknown.record_type == "event_msg.brand_new_event"
    cut = run.events[-1]
    assert (cut.kind, cut.record, cut.stage) == ("unparsed", f"{rich.name}:61", None)


def test_turns_without_recorded_ends(tmp_path: Path) -> None:
    """Older rollouts record no task_complete: a user message after the model acted starts
    the next round; no claim is made without a turn end."""
    lines = [
        _line(0, "session_meta", {"id": "old-session", "cwd": "/w", "cli_version": "0.20.0"}),
        _msg(1, "user", "first"),
        _msg(2, "assistant", "Done. I have implemented it."),
        _msg(3, "user", "second"),
        _line(3, "turn_context", {"cwd": "/w", "model": "o3"}),
        _msg(4, "assistant", "ok"),
    ]
    path = tmp_path / "old.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    run = read_one(path)
    assert [(e.stage, cited(e)) for e in of_kind(run, "stage_started")] == [(1, ["2"]), (2, ["4"])]
    assert len(of_kind(run, "stage_ended")) == 1
    assert of_kind(run, "completion_claim") == []
    assert kinds(run)["source_record"] == 1                    # the turn_context inside round 2


@pytest.mark.parametrize("text, claims", [
    ("I've implemented the parser and added tests.", True),
    ("The bug is now fixed.", True),
    ("Done.", True),
    ("All tests pass.", True),
    ("I successfully updated the config.", True),
    ("I've fixed the parser, but I couldn't run the tests.", False),
    ("The synthetic files are alpha.txt and beta.txt.", False),
    ("Which file should I change?", False),
    ("I changed one line.", False),
])
def test_completion_claim_rule(tmp_path: Path, text: str, claims: bool) -> None:
    lines = [
        _line(0, "session_meta", {"id": "claims", "cwd": "/w"}),
        _event(1, type="task_started", turn_id="t"),
        _event(1, type="user_message", message="do it"),
        _event(2, type="agent_message", message=text),
        _event(3, type="task_complete", turn_id="t", last_agent_message=text),
    ]
    path = tmp_path / "claims.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    found = [e.claim for e in of_kind(read_one(path), "completion_claim")]
    assert found == ([text] if claims else [])


# --- broken files ---------------------------------------------------------------------------------


def _variant(tmp_path: Path, source: Path, edit) -> Path:
    lines = source.read_text(encoding="utf-8").split("\n")
    path = tmp_path / source.name
    path.write_text("\n".join(edit(lines)), encoding="utf-8")
    return path


def _json_edit(number: int, change):
    def edit(lines: list[str]) -> list[str]:
        record = json.loads(lines[number - 1])
        change(record)
        lines[number - 1] = json.dumps(record)
        return lines
    return edit


BROKEN = [   # (line of the one-turn sample, what to break, the field the error must name)
    (6, lambda r: r["payload"].pop("call_id"), "payload.call_id"),
    (6, lambda r: r["payload"].update(arguments=5), "payload.arguments"),
    (8, lambda r: r["payload"].update(input=["not", "text"]), "payload.input"),
    (9, lambda r: r["payload"].pop("output"), "payload.output"),
    (3, lambda r: r.pop("type"), "type"),
    (4, lambda r: r.pop("payload"), "payload"),
    (12, lambda r: r["payload"].update(message=None), "payload.message"),
    (13, lambda r: r["payload"].update(content="text"), "payload.content"),
    (5, lambda r: r.update(timestamp=12), "timestamp"),
    (1, lambda r: r["payload"].pop("id"), "payload.id"),
]


def test_broken_records_are_rejected(store, tmp_path: Path) -> None:
    ingest_paths(store, [SPAWN])            # something already stored must stay as it was
    for number, (line, change, field) in enumerate(BROKEN):
        folder = tmp_path / str(number)
        folder.mkdir()
        path = _variant(folder, ONE_TURN, _json_edit(line, change))
        error = assert_rejected(store, path, where=f"{path.name}:{line}: ", field=field)
        assert error.source.endswith(path.name) and str(error.line) == str(line), str(error)


def _last_json_line(lines: list[str]) -> int:
    """1-based number of the last line that is JSON."""
    for number in range(len(lines), 0, -1):
        try:
            json.loads(lines[number - 1])
            return number
        except ValueError:
            continue
    raise AssertionError("no JSON line")


def test_every_sample_cut_broken_and_garbled(store, tmp_path: Path) -> None:
    """For each sample: cut mid-record -> kept as unparsed and importable; a required field
    deleted or of the wrong type -> rejected at FILE:LINE naming the field, store unchanged;
    a line of non-JSON bytes -> one more unparsed event."""
    for n, sample in enumerate(SAMPLES):
        original = read_one(sample)
        lines = sample.read_text(encoding="utf-8").split("\n")
        last = _last_json_line(lines)
        folder = tmp_path / f"s{n}"
        folder.mkdir()

        cut = folder / "cut" / sample.name
        cut.parent.mkdir()
        cut.write_text("\n".join(lines[:last - 1] + [lines[last - 1][: len(lines[last - 1]) // 2]]), encoding="utf-8")
        run = read_one(cut)
        dropped = sum(1 for line in lines[last:] if line.strip())       # lines after the cut are gone
        assert run.unparsed == original.unparsed - dropped + 1, sample.name
        assert run.events[-1].kind == "unparsed" and run.events[-1].record == f"{sample.name}:{last}"
        (report,) = ingest_paths(store, [cut]).reports
        assert report.format == "codex" and report.result.appended == len(run.events)

        missing = folder / "missing" / sample.name
        missing.parent.mkdir()
        missing.write_text("\n".join(_json_edit(last, lambda r: r.pop("type"))(list(lines))), encoding="utf-8")
        assert_rejected(store, missing, where=f"{sample.name}:{last}: ", field="type")

        wrong = folder / "wrong" / sample.name
        wrong.parent.mkdir()
        wrong.write_text("\n".join(_json_edit(1, lambda r: r.update(payload="session"))(list(lines))), encoding="utf-8")
        assert_rejected(store, wrong, where=f"{sample.name}:1: ", field="payload")

        garbled = folder / "garbled" / sample.name
        garbled.parent.mkdir()
        data = sample.read_bytes().split(b"\n")
        garbled.write_bytes(b"\n".join(data[:1] + [b"\x00\xff{not json\x80"] + data[1:]))
        run = read_one(garbled)
        assert run.unparsed == original.unparsed + 1 and len(run.events) == len(original.events) + 1
        assert of_kind(run, "unparsed")[0].record == f"{sample.name}:2"


def test_json_that_is_not_an_object_is_rejected(store, tmp_path: Path) -> None:
    def edit(lines: list[str]) -> list[str]:
        lines[4] = "[1, 2, 3]"
        return lines
    path = _variant(tmp_path, ONE_TURN, edit)
    assert_rejected(store, path, where=f"{path.name}:5: ", field=None)


def test_cut_mid_record_is_kept_as_unparsed(store, tmp_path: Path) -> None:
    def edit(lines: list[str]) -> list[str]:
        return lines[:7] + [lines[7][:60]]       # line 8 (the apply_patch call) cut mid-write
    path = _variant(tmp_path, ONE_TURN, edit)
    run = read_one(path)
    assert run.unparsed == 1
    assert kinds(run) == {"command": 1, "message": 2, "run_started": 1, "stage_started": 1, "unparsed": 1}
    assert run.events[-1].record == f"{path.name}:8"
    (report,) = ingest_paths(store, [path]).reports
    assert report.format == "codex" and report.result.appended == 6


def test_garbage_bytes_line_is_kept_as_unparsed(store, tmp_path: Path) -> None:
    garbage = b"\xff\xfe\x00garbage \x80\x81 not json\x00"
    data = ONE_TURN.read_bytes().split(b"\n")
    path = tmp_path / ONE_TURN.name
    path.write_bytes(b"\n".join(data[:6] + [garbage] + data[6:]))
    run = read_one(path)
    assert run.unparsed == 1 and len(run.events) == 10
    (bad,) = of_kind(run, "unparsed")
    assert bad.record == f"{path.name}:7" and bad.reason.startswith("not UTF-8")
    assert "\x00" not in bad.payload["source"][0]["raw"]["text"]
    # line 6 (the call) still pairs with its output, now on line 8
    (command,) = of_kind(run, "command")
    assert cited(command) == ["6", "8"]
    before = snapshot(store)
    ingest_paths(store, [path])
    assert snapshot(store) != before
    assert ingest_paths(store, [path]).reports[0].result.no_op


def test_explicit_format_on_a_non_rollout_is_refused(tmp_path: Path) -> None:
    from procgrade.engine.errors import InputError
    from import_checks import read_runs

    path = tmp_path / "claude.jsonl"
    path.write_text(json.dumps({"type": "user", "uuid": "u1", "message": {"role": "user", "content": "hi"}}) + "\n")
    with pytest.raises(InputError):
        read_runs(path, format="codex")


def test_spawned_agent_rollout_keeps_the_copied_lead_history(tmp_path: Path) -> None:
    """A child thread's rollout (shape of claude-code-log's 3333... fixture): its session_meta
    names the lead's spawn call; the lead's history copied before it is not the child's."""
    child = "33333333-3333-4333-8333-333333333333"
    lines = [
        _line(10, "session_meta", {"id": child, "cwd": "/workspace/synthetic-project", "cli_version": "0.0.0-test",
                                   "source": {"subagent": {"thread_spawn": {
                                       "parent_thread_id": "22222222-2222-4222-8222-222222222222",
                                       "forked_from_id": "fork-item-001", "spawn_call_id": "call-spawn-001"}}}}),
        _event(7, type="user_message", message="Spawn a synthetic researcher."),
        _call(8, "spawn_agent", {"task_name": "synthetic_researcher", "message": "Inspect fixtures."}, "call-spawn-001"),
        _event(11, type="user_message", message="Inspect fixtures."),
        _event(12, type="agent_message", message="The fixtures are fully synthetic."),
    ]
    path = tmp_path / f"rollout-2026-01-03T04-05-10-{child}.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    run = read_one(path)
    assert run.run_id == f"codex/{child}"
    assert run.events[0].labels["parent_thread_id"] == "22222222-2222-4222-8222-222222222222"
    assert [(e.kind, e.record_type) for e in run.events[1:3]] == [
        ("source_record", "copied_context:event_msg.user_message"),
        ("source_record", "copied_context:response_item.function_call")]
    assert of_kind(run, "delegation") == []
    assert kinds(run) == {"message": 2, "run_started": 1, "source_record": 2, "stage_started": 1}
    assert actors(run) == {"agent": 1, "harness": 3, "user": 2}
