"""The Claude Code importer on the claude-code-log fixtures (tests/fixtures/imports/claude-code/).

Expected numbers were derived by reading each sample line by line (see the comments),
then checked against the importer; every sample is also stored (SQLite and PostgreSQL),
re-imported as a no-op and scored through the CLI.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from procgrade.engine.cli import app
from procgrade.engine.importers.building import ImportedRun
from procgrade.engine.ingest import ingest_paths
from import_checks import FIXTURES, actors, assert_rejected, kinds, of_kind, read_one, read_runs, snapshot, test_runs_found

CC = FIXTURES / "claude-code"
SIDECHAIN = CC / "sidechain_integrated.jsonl"
DAG = CC / "dag_compact_after_rewind.jsonl"
EDGE = CC / "edge_cases.jsonl"
REMINDER = CC / "system_reminder.jsonl"
SHOWCASE_DIR = CC / "minimal_showcase"
SHOWCASE_ID = "55550000-0000-4000-8000-000000000001"
SHOWCASE = SHOWCASE_DIR / f"{SHOWCASE_ID}.jsonl"

SAMPLES = {
    SIDECHAIN: "claude-code/88a8d761-7b9a-4bf1-a8ca-c1febe6bf358",
    DAG: "claude-code/s1",
    EDGE: "claude-code/edge_cases",
    REMINDER: "claude-code/system_reminder",
    SHOWCASE: f"claude-code/{SHOWCASE_ID}",
}


def sources(event: Any) -> list[tuple[str, str]]:
    return [(Path(s["file"]).name, s["record"]) for s in event.payload["source"]]


def claims(run: ImportedRun) -> list[tuple[str, str | None]]:
    return [(e.claim, e.scope) for e in of_kind(run, "completion_claim")]


def outcomes(run: ImportedRun) -> list[Any]:
    return [e for e in run.events if e.kind in ("acceptance_verdict", "test_result")]


def write_jsonl(path: Path, records: list[Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


# --- the samples, one by one ------------------------------------------------------------------


def test_sidechain_integrated() -> None:
    # Real Claude Code 2.0.46 lines (texts cut to ~50 chars): 1 Task tool_use (main), 2 its
    # tool_result (top-level agentId e1c84ba5), 3-5 sidechain lines of that agent (text, a Grep
    # without a path, a tool_result whose call is not in the file), 6 a main assistant text.
    run = read_one(SIDECHAIN)
    assert run.run_id == SAMPLES[SIDECHAIN] and run.format == "claude-code"
    assert len(run.events) == 7
    assert kinds(run) == {"delegation": 1, "message": 2, "run_started": 1, "source_record": 2, "worker_report": 1}
    assert actors(run) == {"agent": 2, "harness": 2, "subagent:e1c84ba5": 3}
    assert claims(run) == [] and test_runs_found(run) == [] and outcomes(run) == []
    assert run.unparsed == 0
    start = run.events[0]
    assert start.harness.name == "claude-code" and start.harness.version == "2.0.46"
    assert start.model == "claude-sonnet-4-5-20250929"
    # msg_017zj75… is split over lines 3 and 4 (same usage): counted once.
    assert start.labels == {"session_id": "88a8d761-7b9a-4bf1-a8ca-c1febe6bf358",
                            "cwd": "e:\\Workspace\\src\\github\\claude-code-log", "api_messages": "3",
                            "input_tokens": "9", "cache_creation_input_tokens": "164054",
                            "cache_read_input_tokens": "141272", "output_tokens": "738"}
    (delegation,) = of_kind(run, "delegation")
    assert (delegation.seq, delegation.actor, delegation.worker_id) == (1, "agent", "e1c84ba5")
    assert delegation.instruction == "Research how data-border-color is used in the code..."
    assert delegation.context is None  # the prompt names no path
    (report,) = of_kind(run, "worker_report")
    assert (report.actor, report.worker_id, report.parent_seq, report.status, report.evidence) == (
        "subagent:e1c84ba5", "e1c84ba5", 1, None, None)
    assert report.text == "Perfect! Now I have a complete understanding. Let ..."
    assert sources(report) == [("sidechain_integrated.jsonl", "2")]
    # Sidechain lines 3 and 4 carry no agentId: the only agent of the session owns them.
    assert [(e.seq, e.kind, e.actor) for e in run.events[3:6]] == [
        (3, "message", "subagent:e1c84ba5"), (4, "source_record", "subagent:e1c84ba5"), (5, "source_record", "harness")]
    assert [e.record_type for e in of_kind(run, "source_record")] == ["tool_use:Grep", "tool_result"]
    assert run.events[6].text == "Excellent research! The sub-assistant has identifi..."
    assert all(e.stage is None for e in run.events)  # no user prompt in the file: no rounds


def test_dag_compact_after_rewind() -> None:
    # u1 "Start" -> a1 "Ready"; rewind: b1u/b1a (lines 3-4) abandoned, b2u "Second attempt" ->
    # b2a, b2u2 "Keep going" -> b2a2; compact_boundary (auto, 150000) + compact summary;
    # p1u "After compaction" -> p1a "Final answer". Four rounds, none claims completion.
    run = read_one(DAG)
    assert run.run_id == "claude-code/s1"
    assert len(run.events) == 19
    assert kinds(run) == {"compaction": 1, "message": 8, "run_started": 1, "source_record": 2, "stage_ended": 3,
                          "stage_started": 4}
    assert actors(run) == {"agent": 5, "harness": 9, "user": 5}
    assert claims(run) == [] and test_runs_found(run) == [] and outcomes(run) == []
    abandoned = of_kind(run, "source_record")
    assert [(e.seq, e.record_type, e.actor, e.stage, sources(e)) for e in abandoned] == [
        (4, "abandoned_branch:user", "user", None, [("dag_compact_after_rewind.jsonl", "3")]),
        (5, "abandoned_branch:assistant", "agent", None, [("dag_compact_after_rewind.jsonl", "4")])]
    # The abandoned texts are not process messages.
    texts = [e.text for e in of_kind(run, "message")]
    assert texts == ["Start", "Ready", "Second attempt", "Second answer", "Keep going", "Kept going",
                     "After compaction", "Final answer"]
    assert [(e.stage, e.title) for e in of_kind(run, "stage_started")] == [
        (0, "Start"), (1, "Second attempt"), (2, "Keep going"), (3, "After compaction")]
    (compaction,) = of_kind(run, "compaction")
    assert (compaction.actor, compaction.tokens_before, compaction.stage) == ("harness", 150000, 2)
    assert compaction.summary.startswith("This session is being continued from a previous conversation")
    assert sources(compaction) == [("dag_compact_after_rewind.jsonl", "9"), ("dag_compact_after_rewind.jsonl", "10")]
    # The compact summary is not a user prompt: "After compaction" opens round 3.
    assert [e.actor for e in of_kind(run, "message") if e.stage == 3] == ["user", "agent"]
    assert run.events[0].labels == {"session_id": "s1", "cwd": "/tmp", "api_messages": "5", "input_tokens": "50",
                                    "output_tokens": "25", "abandoned_records": "2"}


def test_edge_cases() -> None:
    # 19 lines: 1 prompt, 2 markdown answer (end_turn, no claim words), 3 long prompt, 4-5
    # FailingTool + is_error result, 6 local-command caveat, 7 slash command, 8 local stdout,
    # 9 text + MultiEdit creating /tmp/complex_example.py, 10 message.contenst (no content),
    # 11 message "error", 12 prompt with special characters, 13-16 not records or untyped,
    # 17 TodoWrite (other session), 18 content ["wow error"], 19 summary.
    run = read_one(EDGE)
    assert run.run_id == "claude-code/edge_cases"
    assert len(run.events) == 25
    assert kinds(run) == {"file_edit": 1, "message": 9, "run_started": 1, "source_record": 2, "stage_ended": 2,
                          "stage_started": 3, "unparsed": 7}
    assert actors(run) == {"agent": 5, "harness": 9, "system": 7, "user": 4}
    assert claims(run) == [] and test_runs_found(run) == [] and outcomes(run) == []
    assert run.unparsed == 7 and run.events[0].imported.unparsed == 7 and run.events[0].imported.records == 19
    assert [(e.record, e.reason) for e in of_kind(run, "unparsed")] == [
        ("edge_cases.jsonl:10", "message.content: missing"),
        ("edge_cases.jsonl:11", "message: expected an object, got a string 'error'"),
        ("edge_cases.jsonl:13", "not a JSON object: got a string 'massive error'"),
        ("edge_cases.jsonl:14", "type: missing"),
        ("edge_cases.jsonl:15", "not a JSON object: got an integer 42"),
        ("edge_cases.jsonl:16", "not a JSON object: got an array [1]"),
        ("edge_cases.jsonl:18", "message.content.0: expected an object, got a string 'wow error'")]
    (edit,) = of_kind(run, "file_edit")
    assert (edit.path, edit.edit_kind, edit.actor, edit.stage) == ("complex_example.py", "create", "agent", 1)
    failing = of_kind(run, "source_record")[0]
    assert (failing.record_type, sources(failing)) == (
        "tool_use:FailingTool", [("edge_cases.jsonl", "4"), ("edge_cases.jsonl", "5")])
    assert [(e.actor, e.text[:22]) for e in of_kind(run, "message")] == [
        ("user", "Here's a message with "), ("agent", "Great example! Markdow"), ("user", "Let's test a very long"),
        ("harness", "Caveat: The messages b"), ("user", "<command-name>test-com"), ("harness", "<local-command-stdout>"),
        ("agent", "I see the long Lorem i"), ("user", "Testing special charac"), ("agent", "broken_todo\n[in_progre")]
    todo = [e for e in of_kind(run, "message") if e.intent == "plan"]
    assert [t.text.splitlines()[:2] for t in todo] == [["broken_todo", "[in_progress] Implement core functionality"]]
    # The caveat, slash command and local output open no round: 3 rounds from 3 prompts.
    assert [e.stage for e in of_kind(run, "stage_started")] == [0, 1, 2]
    assert run.events[0].labels["models"] == "claude-3-sonnet-20240229,claude-sonnet-4"
    assert (run.events[0].labels["input_tokens"], run.events[0].labels["output_tokens"]) == ("488", "435")


def test_system_reminder() -> None:
    # 1 prompt with a reminder block in the middle, 2 answer (no stop_reason), 3 only a reminder.
    run = read_one(REMINDER)
    assert run.run_id == "claude-code/system_reminder"
    assert len(run.events) == 6
    assert kinds(run) == {"message": 4, "run_started": 1, "stage_started": 1}
    assert actors(run) == {"agent": 1, "harness": 4, "user": 1}
    assert claims(run) == [] and test_runs_found(run) == [] and outcomes(run) == []
    messages = [(e.actor, e.text) for e in of_kind(run, "message")]
    assert messages == [
        ("user", "Please review the change.\n# Project notes\nThe tail content still renders as user text."),
        ("harness", "cwd changed to /tmp/project via /cd.\nA CLAUDE.md is now in scope."),
        ("agent", "Reviewed — the tail is preserved and the reminder is annotated."),
        ("harness", "cwd changed to /tmp/other via /cd")]
    assert sources(of_kind(run, "message")[1]) == [("system_reminder.jsonl", "1")]


@pytest.mark.parametrize("path", [SHOWCASE, SHOWCASE_DIR], ids=["session-file", "directory"])
def test_minimal_showcase_with_subagents(path: Path) -> None:
    # Main: 1 prompt, 2 text + MCP tool, 4 MCP tool, 6 ScheduleWakeup, 8 text + two Agent calls
    # (meta files link toolu_sc_showcol1/2), 9-10 their results (status completed), 11 summary
    # text (no claim words). Sub-agents: showcol1 = prompt + text; showcol2 = prompt + Grep on a
    # directory + its result + text.
    run = read_one(path)
    assert run.run_id == SAMPLES[SHOWCASE]
    sub = f"{SHOWCASE_ID}/subagents"
    assert run.files == [f"{SHOWCASE_ID}.jsonl", f"{sub}/agent-showcol1.jsonl", f"{sub}/agent-showcol1.meta.json",
                         f"{sub}/agent-showcol2.jsonl", f"{sub}/agent-showcol2.meta.json"]
    assert len(run.events) == 18
    assert kinds(run) == {"delegation": 2, "message": 6, "run_started": 1, "source_record": 6, "stage_started": 1,
                          "worker_report": 2}
    assert actors(run) == {"agent": 8, "harness": 4, "subagent:showcol1": 2, "subagent:showcol2": 3, "user": 1}
    assert claims(run) == [] and test_runs_found(run) == [] and outcomes(run) == []
    assert run.events[0].imported.records == 19
    delegations = of_kind(run, "delegation")
    assert [(d.seq, d.worker_id, d.instruction, d.context) for d in delegations] == [
        (8, "showcol1", "Survey src/web and report its layout, with a screenshot.", ["src/web"]),
        (9, "showcol2", "Survey src/jobs and list its scheduled jobs.", ["src/jobs"])]
    assert sources(delegations[0]) == [(f"{SHOWCASE_ID}.jsonl", "8"), ("agent-showcol1.meta.json", "$")]
    # Each transcript follows the delegating record, then the reports at their own lines.
    assert [(e.seq, e.kind, e.actor) for e in run.events[10:17]] == [
        (10, "source_record", "harness"), (11, "message", "subagent:showcol1"),
        (12, "source_record", "harness"), (13, "source_record", "subagent:showcol2"),
        (14, "message", "subagent:showcol2"),
        (15, "worker_report", "subagent:showcol1"), (16, "worker_report", "subagent:showcol2")]
    reports = of_kind(run, "worker_report")
    assert [(r.worker_id, r.status, r.parent_seq, r.text) for r in reports] == [
        ("showcol1", "success", 8, "The web module renders its pages in a column layout (screenshot attached)."),
        ("showcol2", "success", 9, "The jobs module defines three scheduled jobs: cleanup, reindex, report.")]
    assert [e.record_type for e in of_kind(run, "source_record")] == [
        "tool_use:mcp__plugin_showcase_example__inspect_repository_structure",
        "tool_use:mcp__plugin_showcase_example__refresh_search_index", "tool_use:ScheduleWakeup",
        "sidechain_prompt", "sidechain_prompt", "tool_use:Grep"]
    assert run.events[0].labels == {"session_id": SHOWCASE_ID, "cwd": "/workspace/example-app", "api_messages": "8",
                                    "input_tokens": "960", "output_tokens": "320"}
    assert all(e.stage == 0 for e in run.events[1:])


def test_subagent_file_alone_is_its_own_run() -> None:
    run = read_one(SHOWCASE_DIR / SHOWCASE_ID / "subagents" / "agent-showcol2.jsonl")
    assert run.run_id == f"claude-code/{SHOWCASE_ID}/agent-showcol2"
    assert actors(run) == {"harness": 2, "subagent:showcol2": 2}


def test_the_whole_folder_reads_five_runs() -> None:
    runs = read_runs(CC)
    assert sorted(r.run_id for r in runs) == sorted(SAMPLES.values())


# --- through the store: both databases, idempotent, scored ------------------------------------


@pytest.mark.parametrize("path", list(SAMPLES), ids=[p.name for p in SAMPLES])
def test_store_import_is_idempotent_and_scores(path: Path, store: Any, store_url: str) -> None:
    done = ingest_paths(store, [path], format="auto")
    assert [(r.format, r.run_id) for r in done.reports] == [("claude-code", SAMPLES[path])]
    expected = len(read_one(path).events)
    assert done.reports[0].result.appended == expected
    info = store.run(SAMPLES[path])
    assert info.source_format == "claude-code"
    assert info.unparsed == (7 if path == EDGE else 0)
    before = snapshot(store)
    again = ingest_paths(store, [path], format="auto")
    assert all(r.result.no_op for r in again.reports)
    assert snapshot(store) == before
    result = CliRunner().invoke(app, ["score", SAMPLES[path], "--db", store_url])
    assert result.exit_code == 0, result.output


# --- mapping details on small synthetic sessions --------------------------------------------


def _rec(kind: str, uuid: str, parent: str | None, **fields: Any) -> dict[str, Any]:
    return {"type": kind, "uuid": uuid, "parentUuid": parent, "isSidechain": False, "sessionId": "syn",
            "cwd": "/repo", "version": "2.0.10", "timestamp": "2025-01-01T00:00:00Z", **fields}


def _assistant(uuid: str, parent: str, mid: str, blocks: list[Any], stop: str | None = None) -> dict[str, Any]:
    return _rec("assistant", uuid, parent, message={"id": mid, "type": "message", "role": "assistant",
                                                    "model": "claude-x", "content": blocks, "stop_reason": stop,
                                                    "usage": {"input_tokens": 5, "output_tokens": 7}})


def _user(uuid: str, parent: str | None, content: Any, **fields: Any) -> dict[str, Any]:
    return _rec("user", uuid, parent, message={"role": "user", "content": content}, **fields)


def _result(tool_id: str, text: str, error: bool | None = None) -> dict[str, Any]:
    block = {"type": "tool_result", "tool_use_id": tool_id, "content": text}
    return block if error is None else {**block, "is_error": error}


def _tool(tool_id: str, name: str, **args: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_id, "name": name, "input": args}


SYNTHETIC = [
    _user("u1", None, "Fix the failing test in src/app.py"),
    _assistant("a1", "u1", "m1", [{"type": "thinking", "thinking": "Let me look", "signature": "s"}]),
    _assistant("a2", "a1", "m1", [_tool("t1", "Read", file_path="/repo/src/app.py")], "tool_use"),
    _user("r1", "a2", [_result("t1", "1\tprint(1)")]),
    _assistant("a3", "r1", "m2", [_tool("t2", "Bash", command="python -m pytest -q tests")], "tool_use"),
    _user("r2", "a3", [_result("t2", "Exit code 1\n1 failed, 3 passed in 0.2s", True)],
          toolUseResult={"stdout": "", "stderr": "", "interrupted": False}),
    _assistant("a4", "r2", "m3", [_tool("t3", "Edit", file_path="/repo/src/app.py", old_string="1", new_string="2")]),
    _user("r3", "a4", [_result("t3", "The file /repo/src/app.py has been updated.")]),
    _assistant("a5", "r3", "m4", [_tool("t4", "Bash", command="python -m pytest -q tests"),
                                  _tool("t5", "Write", file_path="/repo/NOTES.md", content="x"),
                                  _tool("t6", "Edit", file_path="/repo/src/x.py", old_string="a", new_string="b")]),
    _user("r4", "a5", [_result("t4", "4 passed in 0.1s", False), _result("t5", "File created successfully"),
                       _result("t6", "<tool_use_error>File has not been read yet.</tool_use_error>", True)]),
    _assistant("a6", "r4", "m5", [{"type": "text", "text": "Fixed: all tests pass now."}], "end_turn"),
    _user("u2", "a6", "<command-name>/compact</command-name>"),
    _rec("system", "cb", None, subtype="compact_boundary", logicalParentUuid="u2",
         compactMetadata={"trigger": "manual", "preTokens": 1234}),
    _user("cs", "cb", "Summary: we fixed it", isCompactSummary=True),
    _user("u3", "cs", "Now also update the docs"),
    _assistant("a7", "u3", "m6", [{"type": "text", "text": "I will not be done until the docs build."}], "end_turn"),
]


def test_tools_rounds_claims_and_manual_compaction(tmp_path: Path) -> None:
    run = read_one(write_jsonl(tmp_path / "syn.jsonl", SYNTHETIC))
    assert kinds(run) == {"compaction": 1, "completion_claim": 1, "file_edit": 2, "file_read": 1, "message": 5,
                          "run_started": 1, "source_record": 1, "stage_ended": 1, "stage_started": 2, "test_run": 2}
    # The failed run states "Exit code 1"; the passing run is a plain success (is_error false): 0.
    assert test_runs_found(run) == [("python -m pytest -q tests", "fail"), ("python -m pytest -q tests", "pass")]
    failed, passed = of_kind(run, "test_run")
    assert (failed.exit_code, failed.failed, failed.passed) == (1, 1, 3)
    assert (passed.exit_code, passed.passed) == (0, 4)
    assert [(e.path, e.edit_kind) for e in of_kind(run, "file_edit")] == [("src/app.py", "modify"), ("NOTES.md", "create")]
    assert [e.path for e in of_kind(run, "file_read")] == ["src/app.py"]
    assert [e.record_type for e in of_kind(run, "source_record")] == ["tool_use:Edit:error"]
    assert claims(run) == [("Fixed: all tests pass now.", "stage")]
    (compaction,) = of_kind(run, "compaction")
    assert (compaction.actor, compaction.tokens_before, compaction.summary) == ("user", 1234, "Summary: we fixed it")
    assert [m.intent for m in of_kind(run, "message") if m.actor == "agent"] == ["reasoning", None]
    # Two messages share m1 (counted once), six API messages in all.
    assert run.events[0].labels["api_messages"] == "6"
    assert run.events[0].labels["input_tokens"] == "30"


def test_headless_stream_json_result_line(tmp_path: Path) -> None:
    def line(kind: str, **fields: Any) -> dict[str, Any]:
        return {"type": kind, "session_id": "hs-1", **fields}

    def said(mid: str, blocks: list[Any], parent: str | None = None) -> dict[str, Any]:
        return line("assistant", parent_tool_use_id=parent, message={
            "id": mid, "role": "assistant", "model": "claude-sonnet-4-5", "content": blocks, "stop_reason": None})

    records = [
        line("system", subtype="init", cwd="/app", model="claude-sonnet-4-5", claude_code_version="2.0.30",
             permissionMode="default"),
        said("m1", [_tool("toolu_A", "Task", prompt="Look at `app/main.py`", description="d")]),
        said("m2", [_tool("toolu_B", "Bash", command="cat app/main.py")], parent="toolu_A"),
        line("user", parent_tool_use_id="toolu_A", message={"role": "user", "content": [_result("toolu_B", "x")]}),
        line("user", parent_tool_use_id=None, tool_use_result={"status": "completed"},
             message={"role": "user", "content": [_result("toolu_A", "Bug in app/main.py:3")]}),
        said("m3", [{"type": "text", "text": "The answer is 42."}]),
        line("result", subtype="success", is_error=False, num_turns=3, total_cost_usd=0.0123, result="The answer is 42."),
    ]
    run = read_one(write_jsonl(tmp_path / "claude-code.txt", records))
    assert run.run_id == "claude-code/hs-1"
    assert [(e.kind, e.actor) for e in run.events[1:]] == [
        ("source_record", "harness"), ("delegation", "agent"), ("command", "subagent:toolu_A"),
        ("file_read", "subagent:toolu_A"), ("worker_report", "subagent:toolu_A"), ("completion_claim", "agent"),
        ("run_ended", "harness")]
    assert claims(run) == [("The answer is 42.", "run")]
    (report,) = of_kind(run, "worker_report")
    assert (report.worker_id, report.status, report.evidence) == ("toolu_A", "success", ["app/main.py"])
    assert of_kind(run, "run_ended")[0].status == "completed"
    assert run.events[0].labels["total_cost_usd"] == "0.0123"
    assert run.events[0].harness.version == "2.0.30"


def test_rewind_to_the_first_prompt_abandons_the_first_root_and_its_subagent(tmp_path: Path) -> None:
    records = [
        _user("u1", None, "first try"),
        _assistant("a1", "u1", "m1", [_tool("toolu_X", "Agent", prompt="do x", description="x")], "tool_use"),
        _user("r1", "a1", [{"type": "tool_result", "tool_use_id": "toolu_X", "content": [{"type": "text", "text": "x"}]}],
              toolUseResult={"agentId": "ab1", "status": "completed"}),
        _user("u2", None, "second try"),
        _assistant("a2", "u2", "m2", [{"type": "text", "text": "Done."}], "end_turn"),
    ]
    write_jsonl(tmp_path / "syn" / "subagents" / "agent-ab1.jsonl", [
        {**_user("q1", None, "do x"), "isSidechain": True, "agentId": "ab1"},
        {**_assistant("q2", "q1", "mq", [{"type": "text", "text": "x"}]), "isSidechain": True, "agentId": "ab1"}])
    (tmp_path / "syn" / "subagents" / "agent-ab1.meta.json").write_text(json.dumps({"toolUseId": "toolu_X"}))
    run = read_one(write_jsonl(tmp_path / "syn.jsonl", records))
    assert [e.record_type for e in of_kind(run, "source_record")] == [
        "abandoned_branch:user", "abandoned_branch:assistant", "abandoned_branch:subagent-meta",
        "abandoned_branch:user", "abandoned_branch:assistant", "abandoned_branch:user"]
    assert of_kind(run, "delegation") == [] and of_kind(run, "worker_report") == []
    assert claims(run) == [("Done.", "stage")]
    assert run.events[0].labels["abandoned_records"] == "5"


# --- malformed input ----------------------------------------------------------------------------


def test_cut_mid_record_and_non_json_bytes_are_kept_as_unparsed(tmp_path: Path, store: Any) -> None:
    data = DAG.read_bytes()
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(data[: data.index(b'"uuid":"p1a"')])  # the last line stops mid-record
    run = read_one(cut)
    (bad,) = of_kind(run, "unparsed")
    assert bad.record == "cut.jsonl:12" and bad.reason.startswith("invalid JSON")
    assert len(run.events) == 19 and run.unparsed == 1  # "Final answer" became the unparsed event
    garbage = tmp_path / "garbage.jsonl"
    lines = data.split(b"\n")
    garbage.write_bytes(b"\n".join(lines[:3] + [b"\xff\xfe\x00 not json", b"{oops"] + lines[3:]))
    run = read_one(garbage)
    assert [(e.record, e.reason) for e in of_kind(run, "unparsed")] == [
        ("garbage.jsonl:4", "not UTF-8: byte 0xff"), ("garbage.jsonl:5", "invalid JSON: Expecting property name "
                                                                         "enclosed in double quotes (column 2)")]
    assert len(run.events) == 21
    done = ingest_paths(store, [garbage])
    assert store.run(done.reports[0].run_id).unparsed == 2


def _corrupt(tmp_path: Path, source: Path, line: int, change: Any) -> Path:
    records = [json.loads(x) for x in source.read_text().splitlines() if x.strip()]
    change(records[line - 1])
    return write_jsonl(tmp_path / source.name, records)


def test_missing_tool_name_is_rejected(tmp_path: Path, store: Any) -> None:
    path = _corrupt(tmp_path, SHOWCASE, 4, lambda r: r["message"]["content"][0].pop("name"))
    assert_rejected(store, path, where=f"{SHOWCASE_ID}.jsonl:4", field="message.content.0.name")


def test_wrong_type_of_a_bash_command_is_rejected(tmp_path: Path, store: Any) -> None:
    path = write_jsonl(tmp_path / "syn.jsonl", SYNTHETIC)
    path = _corrupt(tmp_path, path, 5, lambda r: r["message"]["content"][0]["input"].update(command=["pytest"]))
    error = assert_rejected(store, path, where="syn.jsonl:5", field="message.content.0.input.command")
    assert "expected a string" in str(error)


def test_wrong_type_of_pre_tokens_is_rejected(tmp_path: Path, store: Any) -> None:
    path = _corrupt(tmp_path, DAG, 9, lambda r: r["compactMetadata"].update(preTokens="150k"))
    assert_rejected(store, path, where="dag_compact_after_rewind.jsonl:9", field="compactMetadata.preTokens")


def test_missing_delegation_prompt_is_rejected(tmp_path: Path, store: Any) -> None:
    path = _corrupt(tmp_path, SIDECHAIN, 1, lambda r: r["message"]["content"][0]["input"].pop("prompt"))
    assert_rejected(store, path, where="sidechain_integrated.jsonl:1", field="message.content.0.input.prompt")


def test_malformed_subagent_meta_is_rejected(tmp_path: Path, store: Any) -> None:
    folder = tmp_path / "showcase"
    shutil.copytree(SHOWCASE_DIR, folder)
    meta = folder / SHOWCASE_ID / "subagents" / "agent-showcol2.meta.json"
    meta.chmod(0o644)
    meta.write_text(json.dumps({"toolUseId": 7}))
    assert_rejected(store, folder, where="agent-showcol2.meta.json:$", field="toolUseId")
    meta.write_text("{not json")
    assert_rejected(store, folder, where="agent-showcol2.meta.json:1", field=None)


def test_a_record_missing_its_type_is_unparsed_not_rejected(tmp_path: Path) -> None:
    path = _corrupt(tmp_path, REMINDER, 2, lambda r: r.pop("type"))
    run = read_one(path)
    assert [(e.record, e.reason) for e in of_kind(run, "unparsed")] == [("system_reminder.jsonl:2", "type: missing")]


def test_a_text_block_without_text_is_rejected(tmp_path: Path, store: Any) -> None:
    path = _corrupt(tmp_path, REMINDER, 1, lambda r: r["message"]["content"][0].pop("text"))
    assert_rejected(store, path, where="system_reminder.jsonl:1", field="message.content.0.text")
