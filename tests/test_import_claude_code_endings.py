"""How a Claude Code Bash call ended (engine/importers/claude_code_bash.py), form by form.

Each form is read the same way from a session JSONL file and from headless stream-json
(the form the Terminal-Bench casts echo); the figures on the bundled Terminal-Bench sample
are pinned in tests/test_import_terminal_bench_casts.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from procgrade.engine.importers.claude_code_bash import bash_ending
from import_checks import of_kind, read_one, test_runs_found


def _session(calls: list[tuple[str, dict[str, Any], dict[str, Any] | None, Any]]) -> list[dict[str, Any]]:
    """A session JSONL transcript: per call (command line, extra tool input, result block
    fields or None for no result, toolUseResult or None)."""
    def rec(kind: str, uuid: str, parent: str | None, **fields: Any) -> dict[str, Any]:
        return {"type": kind, "uuid": uuid, "parentUuid": parent, "isSidechain": False, "sessionId": "end",
                "cwd": "/repo", "version": "2.1.0", "timestamp": "2025-01-01T00:00:00Z", **fields}

    records = [rec("user", "u0", None, message={"role": "user", "content": "Fix it"})]
    parent = "u0"
    for i, (command, extra, result, outcome) in enumerate(calls):
        call = {"type": "tool_use", "id": f"t{i}", "name": "Bash", "input": {"command": command, **extra}}
        records.append(rec("assistant", f"a{i}", parent, message={
            "id": f"m{i}", "role": "assistant", "model": "claude-x", "content": [call], "stop_reason": "tool_use"}))
        parent = f"a{i}"
        if result is not None:
            fields = {} if outcome is None else {"toolUseResult": outcome}
            records.append(rec("user", f"r{i}", parent, message={"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": f"t{i}", **result}]}, **fields))
            parent = f"r{i}"
    return records


def _stream(calls: list[tuple[str, dict[str, Any], dict[str, Any] | None, Any]]) -> list[dict[str, Any]]:
    """The same calls as headless ``--output-format stream-json`` lines."""
    lines: list[dict[str, Any]] = [{"type": "system", "subtype": "init", "cwd": "/repo", "session_id": "end",
                                    "model": "claude-x", "claude_code_version": "2.0.29", "permissionMode": "default"}]
    for i, (command, extra, result, outcome) in enumerate(calls):
        call = {"type": "tool_use", "id": f"t{i}", "name": "Bash", "input": {"command": command, **extra}}
        lines.append({"type": "assistant", "session_id": "end", "parent_tool_use_id": None, "message": {
            "id": f"m{i}", "role": "assistant", "model": "claude-x", "content": [call], "stop_reason": None}})
        if result is not None:
            fields = {} if outcome is None else {"tool_use_result": outcome}
            lines.append({"type": "user", "session_id": "end", "parent_tool_use_id": None, "message": {
                "role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{i}", **result}]}, **fields})
    return lines


def _read(tmp_path: Path, shape: str, calls: list[tuple[str, dict[str, Any], dict[str, Any] | None, Any]]) -> Any:
    records = _session(calls) if shape == "session" else _stream(calls)
    path = tmp_path / ("end.jsonl" if shape == "session" else "claude-code.txt")
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return read_one(path)


# (command line, extra input, result block, toolUseResult) -> the command's exit code
FORMS: dict[str, tuple[tuple[str, dict[str, Any], dict[str, Any] | None, Any], int | None]] = {
    "stated code": (("make all", {}, {"content": "Exit code 2\nmake: *** [all] Error 2", "is_error": True},
                     {"stdout": "", "stderr": "make: *** [all] Error 2", "interrupted": False}), 2),
    "stated code in the session's error string": (
        ("ls nope", {}, {"content": "ls: cannot access 'nope'", "is_error": True},
         "Error: Exit code 2\nls: cannot access 'nope'"), 2),
    "failed, no code stated": (("python app.py", {}, {"content": "Traceback (most recent call last):\nValueError: x",
                                                      "is_error": True}, None), 1),
    "failed, an inner 'exit code: 1' is not the command's": (
        ("pip install numpy", {}, {"content": "error: subprocess-exited-with-error\n  exit code: 3\n", "is_error": True},
         None), 1),
    "succeeded": (("ls /repo", {}, {"content": "src\ntests", "is_error": False}, None), 0),
    "succeeded, printing 'Exit code 3' itself": (("echo 'Exit code 3'", {}, {"content": "Exit code 3", "is_error": False},
                                                  {"stdout": "Exit code 3", "stderr": "", "interrupted": False}), 0),
    "interrupted by the user": (("sleep 100", {}, {"content": "[Request interrupted by user for tool use]",
                                                   "is_error": True}, None), None),
    "interrupted, code stated": (("sleep 100", {}, {"content": "Exit code 143\n[Request interrupted by user for tool use]",
                                                    "is_error": True}, None), 143),
    "structured result says interrupted": (("long_job", {}, {"content": "partial", "is_error": False},
                                            {"stdout": "partial", "stderr": "", "interrupted": True}), None),
    "timed out": (("long_job", {}, {"content": "Command timed out after 2m 0.0s", "is_error": True}, None), None),
    "background launch": (("./serve.sh", {"run_in_background": True},
                           {"content": "Command running in background with ID: 78dd67", "is_error": False}, None), None),
    "grep, status 0 or 1 not told apart": (("pip list | grep numpy", {}, {"content": "numpy 2.3.4", "is_error": False},
                                           None), None),
    "grep, structured result without interpretation": (
        ("grep -n x a.txt", {}, {"content": "1:x", "is_error": False},
         {"stdout": "1:x", "stderr": "", "interrupted": False}), 0),
    "grep, no match interpreted": (
        ("grep -n zzz a.txt", {}, {"content": "(Bash completed with no output)", "is_error": False},
         {"stdout": "", "stderr": "", "interrupted": False, "returnCodeInterpretation": "No matches found"}), 1),
    "no is_error and no structured verdict": (("ls", {}, {"content": "src"}, None), None),
    "no result at all": (("ls", {}, None, None), None),
}


@pytest.mark.parametrize("shape", ["session", "stream-json"])
@pytest.mark.parametrize("form", sorted(FORMS))
def test_each_ending_form(tmp_path: Path, shape: str, form: str) -> None:
    call, expected = FORMS[form]
    run = _read(tmp_path, shape, [call])
    (command,) = [e for e in run.events if e.kind in ("command", "test_run") and e.actor == "agent"]
    assert (command.kind, command.command, command.exit_code) == ("command", call[0], expected)


def test_direct_reading_names_the_form() -> None:
    def how(form: str) -> tuple[int | None, str, bool]:
        (command, extra, block, outcome), _ = FORMS[form]
        text = block.get("content") if block is not None else None
        ending = bash_ending(command, extra, block, text, outcome)
        return ending.exit_code, ending.how, ending.ran

    assert how("stated code") == (2, "stated", True)
    assert how("failed, no code stated") == (1, "failed", True)
    assert how("succeeded") == (0, "succeeded", True)
    assert how("interrupted by the user") == (None, "interrupted", True)
    assert how("background launch") == (None, "background", True)
    assert how("grep, status 0 or 1 not told apart") == (None, "ambiguous", True)
    assert how("grep, no match interpreted") == (1, "interpreted", True)
    assert how("no result at all") == (None, "unknown", True)


@pytest.mark.parametrize("words", [
    "<tool_use_error>InputValidationError: Bash failed due to the following issue: command is missing</tool_use_error>",
    "The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it was a file edit, "
    "the new_string was NOT written to the file). STOP what you are doing and wait for the user to tell you how to proceed.",
    "Permission to use Bash with command rm -rf build has been denied.",
    "Claude requested permissions to use Bash, but you haven't granted it yet.",
])
@pytest.mark.parametrize("shape", ["session", "stream-json"])
def test_a_refused_call_ran_nothing(tmp_path: Path, shape: str, words: str) -> None:
    """Claude Code refused the call: no command, no exit code, and no file effect of its line."""
    run = _read(tmp_path, shape, [("rm -rf build", {}, {"content": words, "is_error": True}, None)])
    assert not [e for e in run.events if e.kind in ("command", "test_run", "file_edit")]
    (kept,) = [e for e in of_kind(run, "source_record") if e.actor == "agent"]
    assert kept.record_type == "tool_use:Bash:refused"


@pytest.mark.parametrize("shape", ["session", "stream-json"])
def test_test_runs_get_counts_and_an_exit_code(tmp_path: Path, shape: str) -> None:
    run = _read(tmp_path, shape, [
        # failing: counts from pytest's summary, the failure status without a stated code
        ("python -m pytest -q", {}, {"content": "F...\n1 failed, 3 passed in 0.20s", "is_error": True}, None),
        # failing with Claude Code's stated code
        ("cargo test", {}, {"content": "Exit code 101\ntest result: FAILED. 4 passed; 2 failed; 0 ignored", "is_error": True},
         None),
        # passing
        ("go test ./...", {}, {"content": "--- PASS: TestA (0.00s)\n--- PASS: TestB (0.00s)\nok  \tx\t0.01s",
                               "is_error": False}, None),
        # a test script whose runner prints no summary: the exit code alone decides
        ("python test_solution.py", {}, {"content": "AssertionError: grid differs", "is_error": True}, None),
        ("python test_solution.py", {}, {"content": "all good", "is_error": False}, None),
        # interrupted: no outcome is made up
        ("npm test", {}, {"content": "[Request interrupted by user for tool use]", "is_error": True}, None),
    ])
    runs = of_kind(run, "test_run")
    assert [(e.exit_code, e.passed, e.failed) for e in runs] == [
        (1, 3, 1), (101, 4, 2), (0, 2, 0), (1, None, None), (0, None, None), (None, None, None)]
    assert [outcome for _, outcome in test_runs_found(run)] == ["fail", "fail", "pass", "fail", "pass", None]
