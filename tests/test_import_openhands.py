"""OpenHands V0 event streams and V1 SDK events as procgrade runs.

Expected numbers are read off the samples by hand (the comments say how):

- ``multi_swe_bench_output.jsonl``: three real CodeActAgent eval runs (Llama-4-Maverick,
  OpenHands 0.35.0) on Multi-SWE-bench ponyc issues; ``test_result.git_patch`` and no verdict.
- ``runtime_*.json``: real runs kept upstream for replay tests (V0 JSON event lists).
- ``native_openhands_trajectory.json``: a real OpenHands 0.58.0 run (gpt-5) from the ATIF RFC.
- ``v1_sdk_events.jsonl``: a 10-event slice of a real V1 SDK conversation (one observation's
  action is not in the slice).

Everything written to ``tmp_path`` below is SYNTHETIC (marked so in each test): truncated or
corrupted copies of the samples, an eval line given a ``report``, a SWE-bench report layout, a
V0 session directory and a V1 conversation directory exercising delegation, condensation and
test runs, which the samples do not contain.
"""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from import_checks import FIXTURES, actors, assert_rejected, kinds, of_kind, read_one, read_runs, snapshot, test_runs_found
from procgrade.engine.cli import app
from procgrade.engine.ingest import ingest_paths
from procgrade.engine.rescoring import verify_scores

DIR = FIXTURES / "openhands"
EVAL = DIR / "multi_swe_bench_output.jsonl"
BASIC = DIR / "runtime_basic.json"
INTERACTIONS = DIR / "runtime_basic_interactions.json"
WRONG_STATE = DIR / "runtime_wrong_initial_state.json"
NATIVE = DIR / "native_openhands_trajectory.json"
V1 = DIR / "v1_sdk_events.jsonl"

SAMPLE_LIST = [
    (EVAL, "openhands", ["openhands/openai/openrouter-llama-4-maverick/ponylang__ponyc-4595", "openhands/openai/openrouter-llama-4-maverick/ponylang__ponyc-4593",
                         "openhands/openai/openrouter-llama-4-maverick/ponylang__ponyc-4588"]),
    (BASIC, "openhands", ["openhands/runtime_basic"]),
    (INTERACTIONS, "openhands", ["openhands/runtime_basic_interactions"]),
    (WRONG_STATE, "openhands", ["openhands/runtime_wrong_initial_state"]),
    (NATIVE, "openhands", ["openhands/native_openhands_trajectory"]),
    (V1, "openhands-v1", ["openhands-v1/v1_sdk_events"]),
]


@functools.lru_cache(maxsize=None)
def eval_runs() -> tuple[Any, ...]:
    """The three eval-output runs, read once (events are immutable)."""
    return tuple(read_runs(EVAL))


def load_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def write_json(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1), encoding="utf-8")
    return path


def write_lines(path: Path, rows: list[Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def cited(event: Any) -> list[tuple[str, Any]]:
    """(record label, native id) of every source record an event cites."""
    return [(s["record"], s.get("id")) for s in event.payload["source"]]


def raw_of(run: Any, event: Any, index: int = 0) -> Any:
    entry = event.payload["source"][index]
    if "raw" in entry:
        return entry["raw"]
    first = run.events[entry["at_seq"]]
    return next(c["raw"] for c in first.payload["source"] if c["record"] == entry["record"])


# --- V0 JSON event lists -----------------------------------------------------------------------


def test_runtime_basic() -> None:
    run = read_one(BASIC)
    assert run.run_id == "openhands/runtime_basic" and run.format == "openhands"
    # 4 events: user message (0), str_replace_editor create (3) + its observation (4), finish (5).
    # The edit carries a thought -> a reasoning message before the file_edit.
    assert len(run.events) == 5
    assert kinds(run) == {"completion_claim": 1, "file_edit": 1, "message": 2, "run_started": 1}
    assert actors(run) == {"agent": 3, "harness": 1, "user": 1}
    start = run.events[0]
    assert start.harness.name == "openhands" and start.model == "claude-3-5-sonnet-20241022"
    assert start.imported.records == 4

    user, thought = of_kind(run, "message")
    assert (user.actor, user.text[:40]) == ("user", "Please create a simple 2048 game. No nee")
    assert (thought.actor, thought.intent) == ("agent", "reasoning")
    (edit,) = of_kind(run, "file_edit")
    # /workspace/game_2048.py relative to the workspace root; created (translated code says 'create')
    assert (edit.path, edit.edit_kind, edit.parent_seq) == ("game_2048.py", "create", thought.seq)
    assert cited(edit) == [("[1]", "3"), ("[2]", "4")]  # the action and its observation (cause 3)
    (claim,) = of_kind(run, "completion_claim")
    assert claim.scope == "run" and claim.claim.startswith("I've created a simple implementation of the 2048 game")
    assert test_runs_found(run) == []
    assert of_kind(run, "acceptance_verdict") == [] and of_kind(run, "run_ended") == []


def test_runtime_basic_interactions() -> None:
    run = read_one(INTERACTIONS)
    # Three user turns (0, 6, 12), two agent replies (3, 9), then finish (15) with an empty
    # thought: the claim is the finish's message.
    assert len(run.events) == 7
    assert kinds(run) == {"completion_claim": 1, "message": 5, "run_started": 1}
    assert actors(run) == {"agent": 3, "harness": 1, "user": 3}
    assert [(m.actor, m.text[:25]) for m in of_kind(run, "message")] == [
        ("user", "what's 1+1?"), ("agent", "1 + 1 equals 2."), ("user", "No, I mean by Goldbach's "),
        ("agent", "Goldbach's conjecture is "), ("user", "Finish please")]
    assert [c.claim for c in of_kind(run, "completion_claim")] == ["All done! What's next on the agenda?"]
    assert run.events[0].model == "gpt-4o-2024-08-06"
    assert test_runs_found(run) == []


def test_runtime_wrong_initial_state() -> None:
    run = read_one(WRONG_STATE)
    # user message; view /workspace (3+4); `mv` (5+6, exit 0); view /workspace (7+8); finish (9).
    # Each tool call carries a thought (3 reasoning messages); `mv` is a rename on the shell.
    assert len(run.events) == 10
    assert kinds(run) == {"command": 1, "completion_claim": 1, "file_edit": 1, "file_read": 2, "message": 4,
                          "run_started": 1}
    assert actors(run) == {"agent": 8, "harness": 1, "user": 1}
    (command,) = of_kind(run, "command")
    assert (command.command, command.exit_code) == ("mv /workspace/game_2048.py /workspace/2048.py", 0)
    assert cited(command) == [("[3]", "5"), ("[4]", "6")]
    (rename,) = of_kind(run, "file_edit")
    assert (rename.edit_kind, rename.path, rename.new_path, rename.parent_seq) == (
        "rename", "game_2048.py", "2048.py", command.seq)
    assert [r.path for r in of_kind(run, "file_read")] == [".", "."]  # the workspace root itself
    assert [c.claim[:45] for c in of_kind(run, "completion_claim")] == ["The file has been successfully renamed from `"]
    assert test_runs_found(run) == []


def test_native_openhands_trajectory() -> None:
    run = read_one(NATIVE)
    # system (0), user message (1), recall (2) + recall observation (4): harness plumbing kept;
    # one `run` (5+6) writing and reading hello.txt; finish (7) with a final_thought.
    assert len(run.events) == 9
    assert kinds(run) == {"command": 1, "completion_claim": 1, "file_edit": 1, "file_read": 1, "message": 1,
                          "run_started": 1, "source_record": 3}
    assert actors(run) == {"agent": 4, "harness": 4, "user": 1}
    start = run.events[0]
    assert (start.harness.version, start.model, start.labels) == (
        "0.58.0", "gpt-5-2025-08-07", {"source_layout": "event-list", "agent_class": "CodeActAgent"})
    assert [e.record_type for e in of_kind(run, "source_record")] == [
        "action:system", "action:recall", "observation:recall"]
    (command,) = of_kind(run, "command")
    assert command.exit_code == 0 and command.cwd == "/app"
    # the recall observation names the runtime's working_dir /app: it is the workspace root
    assert [(e.kind, e.path) for e in run.events if e.kind in ("file_edit", "file_read")] == [
        ("file_edit", "hello.txt"), ("file_read", "hello.txt")]
    (claim,) = of_kind(run, "completion_claim")
    assert claim.claim == ('Created /app/hello.txt with the requested content: "Hello, world!". '
                           "Let me know if you want it moved or modified.")
    assert test_runs_found(run) == []


# --- V0 eval output ----------------------------------------------------------------------------


def test_eval_output_runs() -> None:
    runs = list(eval_runs())
    assert [r.run_id for r in runs] == ["openhands/openai/openrouter-llama-4-maverick/ponylang__ponyc-4595", "openhands/openai/openrouter-llama-4-maverick/ponylang__ponyc-4593",
                                        "openhands/openai/openrouter-llama-4-maverick/ponylang__ponyc-4588"]
    first, second, third = runs
    # Counts per line, from the history (see the per-line comments):
    # line 1: 49 events; 13 runs; 6 editor views + 2 `grep FILE` reads; 1 good str_replace + 2 shell
    #   writes (echo > /workspace/test.c, > test.pony); 1 refused str_replace (id 27: "ERROR: No
    #   replacement"); 21 thoughts + think + finish thought; system/recall/recall-obs kept.
    assert len(first.events) == 56
    # 3 of the 13 runs compile and run the agent's ./test program: test runs
    assert kinds(first) == {"command": 10, "completion_claim": 1, "file_edit": 3, "file_read": 8, "message": 25,
                            "run_ended": 1, "run_started": 1, "source_record": 4, "test_run": 3}
    assert actors(first) == {"agent": 49, "harness": 6, "user": 1}
    # line 2: 69 events; 12 runs; 8 editor views (`grep -r ... /workspace/ponylang__ponyc__0.1`
    #   searches a tree: no read); 11 refused editor calls, one error observation (29) and one
    #   good insert; finish with task_completed "false".
    assert len(second.events) == 84
    assert kinds(second) == {"command": 12, "file_edit": 1, "file_read": 8, "message": 47, "run_ended": 1,
                             "run_started": 1, "source_record": 14}
    assert actors(second) == {"agent": 66, "harness": 17, "user": 1}
    # line 3: 103 events, no finish; 24 runs; 8 views + 2 greps; 4 good tool edits + sed -i +
    #   2x rm -rf build; 12 refused editor calls and one error observation (55).
    assert len(third.events) == 121
    assert kinds(third) == {"command": 24, "file_edit": 7, "file_read": 10, "message": 63, "run_ended": 1,
                            "run_started": 1, "source_record": 15}
    assert actors(third) == {"agent": 102, "harness": 18, "user": 1}

    # Exit codes from extras.metadata.exit_code, per command, in order.
    assert [c.exit_code for c in of_kind(first, "command")] == [0, 0, 0, 0, 0, 0, 0, 2, 2, 0]
    assert [c.exit_code for c in of_kind(first, "test_run")] == [127, 127, 127]  # ponyc not found: ./test never ran
    assert [c.exit_code for c in of_kind(second, "command") if c.exit_code] == [2, 1]
    assert [c.exit_code for c in of_kind(third, "command") if c.exit_code] == [1, 2, 2, 2, 2, 2, 1, 100, 2, 1, 1, 100]
    # line 1 compiles the agent's test.pony and runs ./test (a test run; ponyc was not found: exit 127)
    assert [outcome for _, outcome in test_runs_found(first)] == ["fail"] * 3
    for run in runs[1:]:
        assert test_runs_found(run) == []  # make / cmake / grep: no test suite was run
        assert of_kind(run, "acceptance_verdict") == [] and of_kind(run, "test_result") == []  # patch only

    start = first.events[0]
    assert (start.model, start.task_id, start.harness.version) == (
        "openai/openrouter-llama-4-maverick", "ponylang__ponyc-4595", "0.35.0")
    assert start.model_settings == {"temperature": 0.0, "top_p": 1.0, "reasoning_effort": "high",
                                    "max_iterations": 50, "condenser": "noop"}
    assert start.labels["repo"] == "ponylang/ponyc" and start.labels["source_layout"] == "eval-output"
    # the patch stays in the raw line kept by run_started (history is kept event by event)
    envelope = raw_of(first, start)
    assert start.payload["source"][0]["record"] == "1" and "history" not in envelope
    assert envelope["test_result"]["git_patch"].startswith("diff --git a/src/libponyc/ast/parser.c")

    # completion claims: line 1 finish(task_completed "partial") -> claim with its final_thought;
    # line 2 finish(task_completed "false") -> no claim, an admitting summary message.
    (claim,) = of_kind(first, "completion_claim")
    assert claim.scope == "run" and claim.claim.startswith("The issue with the `ponyc` compiler segfaulting")
    assert raw_of(first, claim)["args"]["task_completed"] == "partial"
    assert of_kind(second, "completion_claim") == []
    admission = [m for m in of_kind(second, "message") if m.intent == "summary"]
    assert [m.text[:40] for m in admission] == ["Unable to make necessary changes to the "]

    # The refused str_replace (27/28) is kept, and the tool's refusal is the harness's message.
    refused = next(e for e in first.events if e.kind == "source_record" and e.record_type == "action:edit")
    message = first.events[refused.seq + 1]
    assert (message.kind, message.actor, message.parent_seq) == ("message", "harness", refused.seq)
    assert message.text.startswith("ERROR:\nNo replacement was performed")
    # `cd /workspace && echo ... > test.pony` writes /workspace/test.pony (cwd resolved)
    assert [(e.path, e.edit_kind) for e in of_kind(first, "file_edit")] == [
        ("ponylang__ponyc__0.1/src/libponyc/ast/parser.c", "modify"), ("test.c", "create"), ("test.pony", "create")]

    # run endings: two finished lines, one stopped at the iteration limit
    assert [(r.events[-1].kind, r.events[-1].status) for r in runs] == [
        ("run_ended", "completed"), ("run_ended", "completed"), ("run_ended", "budget_exhausted")]
    assert third.events[-1].actor == "harness" and "completion_claim" not in kinds(third)
    assert third.events[-1].reason == ("RuntimeError: Agent reached maximum iteration in headless mode. "
                                       "Current iteration: 50, max iteration: 50")


# --- V1 SDK events -----------------------------------------------------------------------------


def test_v1_sdk_events() -> None:
    run = read_one(V1)
    assert run.run_id == "openhands-v1/v1_sdk_events" and run.format == "openhands-v1"
    # 10 lines: 5 ConversationStateUpdateEvents (1 execution_status, 4 stats) kept; two
    # ActionEvents (lines 4, 9) each paired with its ObservationEvent (5, 10) by action_id; the
    # observation on line 7 points at an action not in the slice: its command still counts.
    # Line 4 has reasoning_content and visible text -> 2 reasoning messages; line 9 only reasoning.
    assert len(run.events) == 12
    assert kinds(run) == {"command": 3, "message": 3, "run_started": 1, "source_record": 5}
    assert actors(run) == {"agent": 6, "harness": 6}
    assert run.events[0].model == "litellm_proxy/minimax-m2.7" and run.events[0].harness.name == "openhands-sdk"
    commands = of_kind(run, "command")
    # "Cannot execute multiple commands at once": refused, exit_code null / metadata -1 -> unknown
    assert [c.exit_code for c in commands] == [None, None, 1]
    assert [cited(c) for c in commands] == [
        [("4", "e54cbba2-3be2-4494-aa13-83af6044c5a7"), ("5", "d4f6dce6-2c6f-4559-8481-8b07ce1e775e")],
        [("7", "8df85183-1da3-4677-ad2e-eb87d6f33809")],
        [("9", "1eb65bb3-22e7-473f-855c-2dcf26ae8e08"), ("10", "88ece7fc-2f7b-4d51-b006-5570b76f4e19")]]
    assert [(m.intent, m.text[:30]) for m in of_kind(run, "message")] == [
        ("reasoning", "Let me analyze the task. I nee"), ("reasoning", "I'll help you review PR #3745 "),
        ("reasoning", "Let me chain these properly wi")]
    assert {e.record_type for e in of_kind(run, "source_record")} == {"ConversationStateUpdateEvent"}
    assert of_kind(run, "completion_claim") == [] and of_kind(run, "run_ended") == []  # status stays "running"
    assert test_runs_found(run) == []


# --- store: every sample imports, re-imports as a no-op, and scores ------------------------------


def test_store_import_is_idempotent_and_scores(store: Any, store_url: str) -> None:
    # every sample through the store (SQLite and PostgreSQL), one ingest per file, as a user would
    expected = [(fmt, rid) for path, fmt, run_ids in SAMPLE_LIST for rid in run_ids]
    reports = []
    for path, _fmt, _ids in SAMPLE_LIST:
        first = ingest_paths(store, [path], format="auto")
        assert first.unrecognised == [] and all(not r.result.no_op for r in first.reports)
        reports.extend(first.reports)
    assert [(r.format, r.run_id) for r in reports] == expected
    before = snapshot(store)
    for path, _fmt, _ids in SAMPLE_LIST:
        second = ingest_paths(store, [path], format="auto")
        assert all(r.result.no_op for r in second.reports)
    assert snapshot(store) == before
    result = CliRunner().invoke(app, ["score", *(rid for _, rid in expected), "--db", store_url])
    assert result.exit_code == 0, result.output
    checked, drifts = verify_scores(store, [rid for _, rid in expected])  # every run got a stored score
    assert checked == len(expected) and drifts == []


def test_reading_is_deterministic() -> None:
    for path in (BASIC, NATIVE, V1):  # the eval output: see the store re-import test
        assert [r.events for r in read_runs(path)] == [r.events for r in read_runs(path)]


# --- malformed inputs ----------------------------------------------------------------------------


def test_malformed_inputs_are_rejected_and_leave_the_store_unchanged(store: Any, tmp_path: Path) -> None:
    ingest_paths(store, [BASIC])  # something already stored, which must stay as it is
    # SYNTHETIC variants of the samples, written to tmp_path.

    # a JSON event list cut mid-record: the parser names the line where it breaks
    text = BASIC.read_text(encoding="utf-8")
    cut = tmp_path / "cut" / "runtime_basic.json"
    cut.parent.mkdir()
    cut.write_text(text[: len(text) // 2], encoding="utf-8")
    with pytest.raises(json.JSONDecodeError) as parse:
        json.loads(text[: len(text) // 2])
    assert_rejected(store, cut, where=f"runtime_basic.json:{parse.value.lineno}", field=None)

    # the same for a list whose first event holds a 12 kB system prompt before its "action" key
    native = NATIVE.read_text(encoding="utf-8")
    cut_native = tmp_path / "cutnative" / "native_openhands_trajectory.json"
    cut_native.parent.mkdir()
    cut_native.write_text(native[:20000], encoding="utf-8")
    with pytest.raises(json.JSONDecodeError) as parse:
        json.loads(native[:20000])
    assert_rejected(store, cut_native, where=f"native_openhands_trajectory.json:{parse.value.lineno}", field=None)

    # a required field deleted: the `run` action (id 5, list index 3) without its command
    events = json.loads(WRONG_STATE.read_text(encoding="utf-8"))
    no_command = copy.deepcopy(events)
    del no_command[3]["args"]["command"]
    assert_rejected(store, write_json(tmp_path / "nocmd" / "runtime_wrong_initial_state.json", no_command),
                    where="runtime_wrong_initial_state.json:[3]", field="args.command")

    # a wrong type in a required field: the event id as text
    bad_id = copy.deepcopy(events)
    bad_id[2]["id"] = "five"
    assert_rejected(store, write_json(tmp_path / "badid" / "runtime_wrong_initial_state.json", bad_id),
                    where="runtime_wrong_initial_state.json:[2]", field="id")

    # eval output: non-JSON bytes for line 2, a line cut mid-record, a history event without its
    # command, a line without instance_id
    raw_lines = EVAL.read_bytes().split(b"\n")
    garbage = tmp_path / "garbage" / "output.jsonl"
    garbage.parent.mkdir()
    garbage.write_bytes(b"\n".join([raw_lines[0], b"\xff\xfe not json {", raw_lines[2], b""]))
    assert_rejected(store, garbage, where="output.jsonl:2", field=None)

    truncated = tmp_path / "truncated" / "output.jsonl"
    truncated.parent.mkdir()
    truncated.write_bytes(b"\n".join([raw_lines[0], raw_lines[1], raw_lines[2][: len(raw_lines[2]) // 2]]))
    assert_rejected(store, truncated, where="output.jsonl:3", field=None)

    only_line = tmp_path / "onlyline" / "output.jsonl"  # a single run, cut mid-write
    only_line.parent.mkdir()
    only_line.write_bytes(raw_lines[0][: len(raw_lines[0]) // 2])
    assert_rejected(store, only_line, where="output.jsonl:1", field=None)

    rows = load_lines(EVAL)
    no_history_command = copy.deepcopy(rows)
    assert no_history_command[0]["history"][4]["action"] == "run"
    del no_history_command[0]["history"][4]["args"]["command"]
    assert_rejected(store, write_lines(tmp_path / "histcmd" / "output.jsonl", no_history_command),
                    where="output.jsonl:1:history[4]", field="args.command")

    no_instance = copy.deepcopy(rows[:1])
    del no_instance[0]["instance_id"]
    assert_rejected(store, write_lines(tmp_path / "noinst" / "output.jsonl", no_instance),
                    where="output.jsonl:1", field="instance_id")

    # V1: a wrong type in a required field of an ActionEvent (line 4)
    v1_rows = load_lines(V1)
    v1_bad = copy.deepcopy(v1_rows)
    v1_bad[3]["action"]["command"] = 42
    assert_rejected(store, write_lines(tmp_path / "v1bad" / "v1_sdk_events.jsonl", v1_bad),
                    where="v1_sdk_events.jsonl:4", field="action.command")
    v1_eval = tmp_path / "v1eval" / "output.jsonl"  # a V1 benchmark line, cut mid-write
    v1_eval.parent.mkdir()
    v1_eval.write_text(json.dumps({"instance_id": "x__y-1", "history": v1_rows})[:3000], encoding="utf-8")
    error = assert_rejected(store, v1_eval, where="output.jsonl:1", field=None)
    assert "openhands" not in str(error)  # the parse error itself, not "nothing here is in any known format"
    v1_no_kind = copy.deepcopy(v1_rows)
    del v1_no_kind[5]["kind"]
    assert_rejected(store, write_lines(tmp_path / "v1nokind" / "v1_sdk_events.jsonl", v1_no_kind),
                    where="v1_sdk_events.jsonl:6", field="kind")


def test_old_pair_history_layout(tmp_path: Path) -> None:
    # SYNTHETIC: line 1 rewritten in the oldest eval layout, history = [action, observation] pairs
    row = load_lines(EVAL)[0]
    history, pairs = row["history"], []
    index = 0
    while index < len(history):
        event = history[index]
        following = history[index + 1] if index + 1 < len(history) else {}
        if "action" in event and following.get("cause") == event["id"]:
            pairs.append([event, following])
            index += 2
        else:
            pairs.append([event])
            index += 1
    row["history"] = pairs
    run = read_one(write_lines(tmp_path / "pairs" / "output.jsonl", [row]))
    reference = eval_runs()[0]
    assert [(e.kind, e.actor) for e in run.events] == [(e.kind, e.actor) for e in reference.events]
    (command, *_) = of_kind(run, "command")
    assert cited(command) == [("1:history[3][0]", "5"), ("1:history[3][1]", "6")]


def test_v1_jsonl_tolerates_a_cut_line(store: Any, tmp_path: Path) -> None:
    # SYNTHETIC: the V1 events file cut in the middle of its last line (a write interrupted),
    # and a non-JSON line in the middle: both kept as unparsed, counted on the run.
    data = V1.read_bytes()
    cut = tmp_path / "cut" / "v1_sdk_events.jsonl"
    cut.parent.mkdir()
    cut.write_bytes(data[: len(data) - 200])
    run = read_one(cut)
    assert run.unparsed == 1 and run.events[0].imported.unparsed == 1
    (unparsed,) = of_kind(run, "unparsed")
    assert unparsed.record == "v1_sdk_events.jsonl:10" and unparsed.reason.startswith("invalid JSON")
    # the cut observation's action (line 9) now has no observation: exit code unknown
    assert [c.exit_code for c in of_kind(run, "command")] == [None, None, None]

    lines = data.split(b"\n")
    noisy = tmp_path / "noisy" / "v1_sdk_events.jsonl"
    noisy.parent.mkdir()
    noisy.write_bytes(b"\n".join(lines[:3] + [b"\x00 not json"] + lines[3:]))
    report = ingest_paths(store, [noisy])
    assert [(r.format, r.events_read) for r in report.reports] == [("openhands-v1", 13)]
    run = read_one(noisy)
    assert [(u.record, u.actor) for u in of_kind(run, "unparsed")] == [("v1_sdk_events.jsonl:4", "system")]
    assert [c.exit_code for c in of_kind(run, "command")] == [None, None, 1]


# --- outcomes: synthetic eval reports ------------------------------------------------------------


def test_eval_line_with_report_resolved_gives_a_verdict(tmp_path: Path) -> None:
    # SYNTHETIC: line 1 of the real eval output with a `report` added, as OpenHands'
    # update_output_with_eval.py writes it after evaluation (and a "synthetic" marker).
    row = load_lines(EVAL)[0]
    row["synthetic"] = "test fixture: report added to a real eval line"
    row["report"] = {"empty_generation": False, "resolved": True, "failed_apply_patch": False,
                     "error_eval": False, "test_timeout": False}
    path = write_lines(tmp_path / "synthetic_resolved" / "output.jsonl", [row])
    run = read_one(path)
    assert run.run_id == "openhands/openai/openrouter-llama-4-maverick/ponylang__ponyc-4595"
    (verdict,) = of_kind(run, "acceptance_verdict")
    assert (verdict.verifier, verdict.status, verdict.reward, verdict.value, verdict.actor) == (
        "openhands-eval", "evaluated", "1", "resolved", "grader")
    assert verdict.details["resolved"] is True
    assert verdict.seq == len(run.events) - 1 and run.events[-2].kind == "run_ended"  # outcomes come last
    assert of_kind(run, "test_result") == []

    # the other report flags, as verdict statuses (one variant line per flag set)
    cases = [({"resolved": False}, ("evaluated", "0")), ({"empty_generation": True}, ("not_submitted", None)),
             ({"error_eval": True}, ("infra_error", None)), ({"test_timeout": True}, ("timeout", None)),
             ({"resolved": False, "failed_apply_patch": True}, ("evaluated", "0"))]
    variants = [dict(row, report=flags, instance_id=f"synthetic-{i}") for i, (flags, _) in enumerate(cases)]
    runs = read_runs(write_lines(tmp_path / "synthetic_flags" / "output.jsonl", variants))
    assert [(v.status, v.reward) for r in runs for v in of_kind(r, "acceptance_verdict")] == [e for _, e in cases]


def test_swe_bench_report_layout(store: Any, tmp_path: Path) -> None:
    # SYNTHETIC: a SWE-bench evaluation folder around the real eval lines 1-2: the aggregate
    # report.json next to output.jsonl and a per-instance report with per-test lists.
    folder = tmp_path / "synthetic_swebench"
    write_lines(folder / "output.jsonl", load_lines(EVAL)[:2])
    write_json(folder / "report.json", {
        "total_instances": 2, "submitted_instances": 2, "completed_instances": 2, "resolved_instances": 1,
        "unresolved_instances": 1, "empty_patch_instances": 0, "error_instances": 0,
        "resolved_ids": ["ponylang__ponyc-4595"], "unresolved_ids": ["ponylang__ponyc-4593"],
        "error_ids": [], "empty_patch_ids": [], "incomplete_ids": []})
    write_json(folder / "eval_outputs" / "ponylang__ponyc-4595" / "report.json", {"ponylang__ponyc-4595": {
        "patch_is_None": False, "patch_exists": True, "patch_successfully_applied": True, "resolved": True,
        "tests_status": {"PASS_TO_PASS": {"success": ["test_b", "test_c"], "failure": ["test_d"]},
                         "FAIL_TO_PASS": {"success": ["test_a"], "failure": []}}}})
    result = ingest_paths(store, [folder])
    assert [(r.format, r.run_id) for r in result.reports] == [
        ("openhands", "openhands/openai/openrouter-llama-4-maverick/ponylang__ponyc-4595"), ("openhands", "openhands/openai/openrouter-llama-4-maverick/ponylang__ponyc-4593")]
    assert result.unrecognised == []  # both reports are claimed with output.jsonl

    resolved, unresolved = read_runs(folder / "output.jsonl")
    (verdict,) = of_kind(resolved, "acceptance_verdict")
    assert (verdict.verifier, verdict.status, verdict.reward) == ("swe-bench", "evaluated", "1")
    assert cited(verdict) == [("resolved_ids[0]", "ponylang__ponyc-4595")]
    assert [(t.test_id, t.outcome, t.group, t.verifier) for t in of_kind(resolved, "test_result")] == [
        ("test_a", "passed", "FAIL_TO_PASS", "swe-bench"), ("test_b", "passed", "PASS_TO_PASS", "swe-bench"),
        ("test_c", "passed", "PASS_TO_PASS", "swe-bench"), ("test_d", "failed", "PASS_TO_PASS", "swe-bench")]
    (verdict,) = of_kind(unresolved, "acceptance_verdict")
    assert (verdict.status, verdict.reward, verdict.value) == ("evaluated", "0", "unresolved")
    assert of_kind(unresolved, "test_result") == []


# --- synthetic V0 session directory: delegation, condensation, test runs --------------------------


def _v0(ident: int, source: str, **fields: Any) -> dict[str, Any]:
    return {"id": ident, "timestamp": f"2025-05-01T10:00:{ident:02d}.000000", "source": source, "message": "", **fields}


def _v0_run(ident: int, command: str, thought: str = "", **args: Any) -> dict[str, Any]:
    return _v0(ident, "agent", action="run", args={"command": command, "is_input": False, "thought": thought, **args},
               tool_call_metadata={"function_name": "execute_bash", "tool_call_id": f"call_{ident}",
                                   "total_calls_in_response": 1})


def _v0_run_obs(ident: int, cause: int, output: str, code: int, cwd: str) -> dict[str, Any]:
    return _v0(ident, "agent", observation="run", cause=cause, content=output,
               extras={"command": "", "metadata": {"exit_code": code, "working_dir": cwd}}, success=code == 0,
               tool_call_metadata={"function_name": "execute_bash", "tool_call_id": f"call_{cause}"})


def synthetic_session(root: Path) -> Path:
    """SYNTHETIC sessions/<sid>/events/<n>.json written in the V0 file store's layout."""
    events = [
        _v0(0, "user", action="message", args={"content": "Fix the failing test in calc.py", "wait_for_response": False}),
        _v0_run(1, "cd /workspace/proj && python -m pytest -q tests", thought="1. Run the tests\n2. Fix the bug"),
        _v0_run_obs(2, 1, "F..\n1 failed, 2 passed in 0.10s", 1, "/workspace/proj"),
        _v0(3, "agent", action="read", args={"path": "/workspace/proj/calc.py", "thought": ""}),
        _v0(4, "agent", observation="read", cause=3, content="def add(a, b): return a - b", extras={"path": "/workspace/proj/calc.py"}),
        _v0(5, "agent", action="delegate", args={"agent": "BrowsingAgent", "thought": "",
                                                 "inputs": {"task": "Check the docs for add() in /workspace/proj/calc.py"}}),
        _v0_run(6, "cat notes.txt"),
        _v0_run_obs(7, 6, "add must add", 0, "/workspace/proj"),
        _v0(8, "agent", action="finish", args={"outputs": {"content": "add() must return a + b"}, "thought": ""}),
        _v0(9, "agent", observation="delegate", cause=5,
            content="BrowsingAgent finishes task with content: see /workspace/proj/calc.py",
            extras={"outputs": {"content": "add() must return a + b"}}),
        _v0(10, "agent", action="condensation_request", args={},
            tool_call_metadata={"function_name": "request_condensation", "tool_call_id": "call_10"}),
        _v0(11, "agent", action="condensation", args={"forgotten_event_ids": [1, 2], "summary": "Tests failed in add()."}),
        _v0(12, "agent", action="condensation", args={"forgotten_events_start_id": 3, "forgotten_events_end_id": 4,
                                                      "summary": "Read calc.py."}),
        _v0(13, "agent", action="edit", args={"path": "/workspace/proj/calc.py", "command": "str_replace",
                                              "old_str": "a - b", "new_str": "a + b", "thought": ""}),
        _v0(14, "agent", observation="edit", cause=13, content="The file /workspace/proj/calc.py has been edited.",
            extras={"path": "/workspace/proj/calc.py", "prev_exist": True, "diff": "-a - b\n+a + b"}),
        _v0_run(15, "python -m pytest -q tests"),
        _v0_run_obs(16, 15, "...\n3 passed in 0.05s", 0, "/workspace/proj"),
        _v0(17, "agent", action="finish", args={"final_thought": "Fixed add() in calc.py; all 3 tests pass.",
                                                "task_completed": "true", "outputs": {}, "thought": ""}),
        _v0(18, "environment", observation="agent_state_changed", content="", extras={"agent_state": "finished"}),
    ]
    session = root / "sessions" / "sess-1"
    for event in events:
        write_json(session / "events" / f"{event['id']}.json", event)
    write_json(session / "metadata.json", {"title": "synthetic session", "selected_repository": None})
    return session


def test_v0_session_directory(store: Any, tmp_path: Path) -> None:
    synthetic_session(tmp_path)
    result = ingest_paths(store, [tmp_path / "sessions"])
    assert [(r.format, r.run_id) for r in result.reports] == [("openhands", "openhands/sess-1")]
    assert result.unrecognised == []  # metadata.json is the session's companion
    run = read_one(tmp_path / "sessions")
    # events in id order (10.json after 9.json, not after 1.json)
    ids = [int(e.payload["source"][0]["id"]) for e in run.events[1:]]
    assert ids == sorted(ids) and ids[0] == 0 and ids[-1] == 18
    assert run.events[0].labels == {"source_layout": "session-events"}
    assert [s["record"] for s in run.events[0].payload["source"]] == ["$"]  # metadata.json cited by the start
    assert len(run.events) == 18
    assert kinds(run) == {"command": 1, "compaction": 2, "completion_claim": 2, "delegation": 1, "file_edit": 1,
                          "file_read": 2, "message": 2, "run_ended": 1, "run_started": 1, "source_record": 2,
                          "test_run": 2, "worker_report": 1}
    worker = "BrowsingAgent@5"
    assert actors(run) == {"agent": 9, "harness": 4, f"subagent:{worker}": 4, "user": 1}

    plan = of_kind(run, "message")[1]
    assert (plan.intent, plan.text) == ("plan", "1. Run the tests\n2. Fix the bug")
    assert test_runs_found(run) == [("cd /workspace/proj && python -m pytest -q tests", "fail"),
                                    ("python -m pytest -q tests", "pass")]
    first_test = of_kind(run, "test_run")[0]
    assert (first_test.failed, first_test.passed, first_test.exit_code) == (1, 2, 1)

    (delegation,) = of_kind(run, "delegation")
    assert (delegation.worker_id, delegation.actor, delegation.context) == (worker, "agent", ["proj/calc.py"])
    # the delegate's own events share the stream until its observation: they are the sub-agent's
    (command,) = of_kind(run, "command")
    assert (command.actor, command.cwd) == (f"subagent:{worker}", "/workspace/proj")
    assert [(r.actor, r.path) for r in of_kind(run, "file_read")] == [
        ("agent", "proj/calc.py"), (f"subagent:{worker}", "proj/notes.txt")]
    sub_claim, claim = of_kind(run, "completion_claim")
    assert (sub_claim.actor, sub_claim.scope, sub_claim.claim) == (f"subagent:{worker}", "step", "add() must return a + b")
    assert (claim.actor, claim.scope, claim.claim) == ("agent", "run", "Fixed add() in calc.py; all 3 tests pass.")
    (report,) = of_kind(run, "worker_report")
    assert (report.worker_id, report.status, report.evidence) == (worker, "success", ["proj/calc.py"])

    requested, automatic = of_kind(run, "compaction")
    assert (requested.actor, requested.summary) == ("agent", "Tests failed in add().")
    assert (automatic.actor, automatic.summary) == ("harness", "Read calc.py.")
    assert [(e.record_type, e.actor) for e in of_kind(run, "source_record")] == [
        ("action:condensation_request", "agent"), ("observation:agent_state_changed", "harness")]
    (edit,) = of_kind(run, "file_edit")
    assert (edit.path, edit.edit_kind, edit.diff_sha256 is not None) == ("proj/calc.py", "modify", True)
    assert (run.events[-1].kind, run.events[-1].status) == ("run_ended", "completed")

    # a single event file names its session too (the tree is its folder)
    assert read_one(tmp_path / "sessions" / "sess-1" / "events" / "3.json").run_id == "openhands/sess-1"


# --- synthetic V1 conversation directory ----------------------------------------------------------


def _v1(index: int, kind: str, source: str, **fields: Any) -> dict[str, Any]:
    return {"id": f"00000000-0000-4000-8000-{index:012d}", "timestamp": f"2026-01-01T00:00:{index:02d}.000000",
            "source": source, **fields, "kind": kind}


def _v1_action(index: int, action: dict[str, Any], tool: str, **fields: Any) -> dict[str, Any]:
    call = f"call_{index}"
    return _v1(index, "ActionEvent", "agent", thought=fields.pop("thought", []), action=action, tool_name=tool,
               tool_call_id=call, tool_call={"id": call, "name": tool, "arguments": "{}", "origin": "completion"},
               llm_response_id=f"resp_{index}", security_risk="LOW", **fields)


def _v1_obs(index: int, action_index: int, tool: str, observation: dict[str, Any]) -> dict[str, Any]:
    return _v1(index, "ObservationEvent", "environment", tool_name=tool, tool_call_id=f"call_{action_index}",
               observation=observation, action_id=f"00000000-0000-4000-8000-{action_index:012d}")


def synthetic_conversation(root: Path) -> Path:
    """SYNTHETIC <conv>/events/event-<idx>-<id>.json + base_state.json as the V1 SDK persists them."""
    text = lambda t: [{"type": "text", "text": t}]  # noqa: E731
    events = [
        _v1(0, "SystemPromptEvent", "agent", system_prompt={"type": "text", "text": "You are OpenHands."}, tools=[]),
        _v1(1, "MessageEvent", "user", llm_message={"role": "user", "content": text("Add a README")}),
        _v1_action(2, {"command": "view", "path": "/repo", "kind": "FileEditorAction"}, "file_editor",
                   thought=text("Let me look at the repository.")),
        _v1_obs(3, 2, "file_editor", {"content": text("README.md missing"), "is_error": False,
                                      "command": "view", "path": "/repo", "kind": "FileEditorObservation"}),
        _v1_action(4, {"command": "create", "path": "/repo/README.md", "file_text": "# Repo\n",
                       "kind": "FileEditorAction"}, "file_editor"),
        _v1_obs(5, 4, "file_editor", {"content": text("File created"), "is_error": False, "command": "create",
                                      "path": "/repo/README.md", "kind": "FileEditorObservation"}),
        _v1_action(6, {"command": "pytest -q", "is_input": False, "kind": "TerminalAction"}, "terminal",
                   reasoning_content="I should run the tests."),
        _v1_obs(7, 6, "terminal", {"content": text("..\n2 passed in 0.01s"), "is_error": False, "command": "pytest -q",
                                   "exit_code": 0, "metadata": {"exit_code": 0, "working_dir": "/repo"},
                                   "kind": "TerminalObservation"}),
        _v1(8, "CondensationRequest", "agent"),
        _v1(9, "Condensation", "environment", forgotten_event_ids=[f"00000000-0000-4000-8000-{i:012d}" for i in (2, 3)],
            summary="Viewed the repo.", summary_offset=1),
        _v1_action(10, {"prompt": "Review /repo/README.md", "subagent_type": "reviewer", "kind": "TaskAction"}, "task"),
        _v1_obs(11, 10, "task", {"content": text("Looks good: /repo/README.md"), "is_error": False, "task_id": "t1",
                                 "subagent": "reviewer", "status": "completed", "kind": "TaskObservation"}),
        _v1_action(12, {"command": "str_replace", "path": "/repo/README.md", "old_str": "x", "new_str": "y",
                        "kind": "FileEditorAction"}, "file_editor"),
        _v1_obs(13, 12, "file_editor", {"content": text("No replacement was performed"), "is_error": True,
                                        "command": "str_replace", "path": "/repo/README.md",
                                        "kind": "FileEditorObservation"}),
        _v1_action(14, {"message": "Added README.md; tests pass.", "kind": "FinishAction"}, "finish"),
        _v1_obs(15, 14, "finish", {"content": text("Added README.md; tests pass."), "kind": "FinishObservation"}),
        _v1(16, "ConversationStateUpdateEvent", "environment", key="execution_status", value="finished"),
    ]
    conv = root / "conversations" / "conv-123"
    for index, event in enumerate(events):
        write_json(conv / "events" / f"event-{index:05d}-{event['id']}.json", event)
    write_json(conv / "base_state.json", {
        "id": "conv-123", "agent": {"llm": {"model": "anthropic/claude-sonnet-4", "temperature": 0.0}, "kind": "Agent"},
        "workspace": {"working_dir": "/repo", "kind": "LocalWorkspace"}, "max_iterations": 100,
        "execution_status": "finished", "stats": {"usage_to_metrics": {}}})
    return conv


def test_v1_conversation_directory(store: Any, tmp_path: Path) -> None:
    synthetic_conversation(tmp_path)
    result = ingest_paths(store, [tmp_path / "conversations"])
    assert [(r.format, r.run_id) for r in result.reports] == [("openhands-v1", "openhands-v1/conv-123")]
    assert result.unrecognised == []
    run = read_one(tmp_path / "conversations")
    assert len(run.events) == 17
    assert kinds(run) == {"completion_claim": 1, "compaction": 1, "delegation": 1, "file_edit": 1, "file_read": 1,
                          "message": 4, "run_ended": 1, "run_started": 1, "source_record": 4, "test_run": 1,
                          "worker_report": 1}
    assert actors(run) == {"agent": 10, "harness": 5, "subagent:reviewer@t1": 1, "user": 1}
    start = run.events[0]
    assert (start.model, start.model_settings) == ("anthropic/claude-sonnet-4", {"temperature": 0.0, "max_iterations": 100})
    # workspace root from base_state: /repo
    assert [(e.kind, e.path, getattr(e, "edit_kind", None)) for e in run.events if e.kind in ("file_read", "file_edit")] == [
        ("file_read", ".", None), ("file_edit", "README.md", "create")]
    assert test_runs_found(run) == [("pytest -q", "pass")]
    (compaction,) = of_kind(run, "compaction")
    assert (compaction.actor, compaction.summary) == ("agent", "Viewed the repo.")
    (delegation,) = of_kind(run, "delegation")
    (report,) = of_kind(run, "worker_report")
    assert (delegation.worker_id, delegation.context) == ("reviewer@t1", ["README.md"])
    assert (report.worker_id, report.status, report.evidence, report.parent_seq) == (
        "reviewer@t1", "success", ["README.md"], delegation.seq)
    refused = next(e for e in of_kind(run, "source_record") if e.record_type == "FileEditorAction:str_replace")
    assert run.events[refused.seq + 1].text == "No replacement was performed"
    (claim,) = of_kind(run, "completion_claim")
    assert (claim.claim, claim.scope, len(cited(claim))) == ("Added README.md; tests pass.", "run", 2)
    assert (run.events[-1].kind, run.events[-1].status) == ("run_ended", "completed")


# --- detection ------------------------------------------------------------------------------------


def test_detection_claims_only_openhands_files(tmp_path: Path) -> None:
    from procgrade.engine.errors import InputError
    from procgrade.engine.importers import plan_imports
    from procgrade.engine.importers.source_tree import open_tree

    plan = plan_imports(open_tree(DIR))
    assert sorted((importer.name, unit.primary) for importer, unit in plan.units) == [
        ("openhands", "multi_swe_bench_output.jsonl"), ("openhands", "native_openhands_trajectory.json"),
        ("openhands", "runtime_basic.json"), ("openhands", "runtime_basic_interactions.json"),
        ("openhands", "runtime_wrong_initial_state.json"), ("openhands-v1", "v1_sdk_events.jsonl")]
    assert sorted(plan.unrecognised) == ["LICENSE", "LICENSE-apache-2.0", "LICENSE-software-agent-sdk", "README.md"]
    # lists and JSONL of something else are not OpenHands
    write_json(tmp_path / "other" / "steps.json", [{"step": 1, "agent": {"thought": "x"}}])
    write_lines(tmp_path / "other" / "log.jsonl", [{"type": "user", "message": {"content": "hi"}}])
    with pytest.raises(InputError):
        plan_imports(open_tree(tmp_path / "other"), "openhands")
    with pytest.raises(InputError):
        plan_imports(open_tree(tmp_path / "other"), "openhands-v1")
