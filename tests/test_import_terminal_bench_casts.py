"""Terminal-Bench runs whose agent's process exists only in the terminal recording.

The bundled sample (tests/fixtures/imports/terminal-bench-claude-code, real runs of the
Claude Code agent behind four models, see its README) has Claude Code's stream-json echoed
into ``sessions/agent.cast``; the importer recovers it and maps it through the Claude Code
importer. Figures pinned below were checked against the source: per system 15 trials with a
cast (65 more are outcome-only entries of the run-level results.json), resolved counts as in
the dataset README (8, 12, 7, 0), 5 casts where the agent crashed before its result record.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from import_checks import FIXTURES, kinds, of_kind, read_one, read_runs
from procgrade.engine.errors import InputError
from procgrade.engine.importers.asciinema import strip_terminal
from procgrade.engine.ingest import ingest_paths
from procgrade.engine.log_verification import verify_log

SAMPLE = FIXTURES / "terminal-bench-claude-code"
SYSTEMS = SAMPLE / "data" / "traj" / "claude_code"
C4_HELLO = SYSTEMS / "claude_code_c4" / "hello-world" / "hello-world.1-of-1.2025-11-08__13-10-33"

# system -> (runs with a cast, their events, kinds, actors (subagents pooled), verdicts (status, reward),
#            outcome-only runs, run_ended (status -> count))
EXPECTED: dict[str, tuple[Any, ...]] = {
    "claude_code_c4": (15, 746, {"acceptance_verdict": 15, "command": 191, "completion_claim": 12, "file_edit": 33,
                                 "file_read": 23, "message": 312, "run_ended": 15, "run_started": 15,
                                 "source_record": 58, "test_result": 53, "test_run": 19},
                       {"agent": 468, "grader": 68, "harness": 195, "user": 15},
                       {("evaluated", "1"): 8, ("evaluated", "0"): 7}, 65, {"completed": 12, "error": 3}),
    "claude_code_coder": (15, 695, {"acceptance_verdict": 15, "command": 212, "completion_claim": 14, "file_edit": 35,
                                    "file_read": 23, "message": 241, "run_ended": 15, "run_started": 15,
                                    "source_record": 50, "test_result": 53, "test_run": 22},
                          {"agent": 417, "grader": 68, "harness": 195, "user": 15},
                          {("evaluated", "1"): 12, ("evaluated", "0"): 3}, 65, {"completed": 14, "error": 1}),
    "claude_code_gpt5": (15, 698, {"acceptance_verdict": 15, "command": 158, "completion_claim": 14, "delegation": 2,
                                   "file_edit": 24, "file_read": 47, "message": 275, "run_ended": 15, "run_started": 15,
                                   "source_record": 61, "test_result": 53, "test_run": 17, "worker_report": 2},
                         {"agent": 392, "grader": 68, "harness": 197, "subagent:*": 26, "user": 15},
                         {("evaluated", "1"): 7, ("evaluated", "0"): 8}, 65, {"completed": 14, "error": 1}),
    "claude_code_v3": (15, 354, {"acceptance_verdict": 15, "command": 112, "completion_claim": 15, "file_edit": 12,
                                 "file_read": 3, "message": 52, "run_ended": 15, "run_started": 15,
                                 "source_record": 48, "test_result": 51, "test_run": 16},
                       {"agent": 78, "grader": 66, "harness": 195, "user": 15},
                       {("evaluated", "0"): 15}, 65, {"completed": 15}),
}
MODELS = {"claude_code_c4": "openai/app-8687wa-1753680546005046674",
          "claude_code_coder": "openai/app-dsw4xd-1757654301803448727",
          "claude_code_gpt5": "openai/app-4lj8uu-1757909116059641172",
          "claude_code_v3": "openai/app-41qhry-1758530790726637044"}


def _has_cast(run: Any) -> bool:
    return any(f.endswith("sessions/agent.cast") for f in run.files)


@pytest.fixture(scope="module")
def sample_runs() -> list[Any]:
    return read_runs(SAMPLE)


def test_per_system_process_and_outcomes(sample_runs: list[Any]) -> None:
    assert len({r.run_id for r in sample_runs}) == len(sample_runs) == 320  # no collision across systems
    seen: dict[str, list[Any]] = {}
    for run in sample_runs:
        seen.setdefault(run.events[0].labels["system"], []).append(run)
    assert sorted(seen) == sorted(EXPECTED)
    for system, runs in seen.items():
        with_cast = [r for r in runs if _has_cast(r)]
        actors: Counter[str] = Counter()
        all_kinds: Counter[str] = Counter()
        for run in with_cast:
            all_kinds.update(e.kind for e in run.events)
            actors.update("subagent:*" if e.actor.startswith("subagent:") else e.actor for e in run.events)
        verdicts = Counter((v.status, v.reward) for r in with_cast for v in of_kind(r, "acceptance_verdict"))
        ends = Counter(e.status for r in with_cast for e in of_kind(r, "run_ended"))
        got = (len(with_cast), sum(len(r.events) for r in with_cast), dict(sorted(all_kinds.items())),
               dict(sorted(actors.items())), dict(verdicts), len(runs) - len(with_cast), dict(ends))
        assert got == EXPECTED[system], system
        for run in runs:
            started = run.events[0]
            assert started.model == MODELS[system] and started.labels["benchmark"] == "terminal-bench"
            assert started.harness.name == "claude-code"
        assert all(r.events[0].harness.version == "2.0.29" for r in with_cast)
        assert all(not any(e.actor in ("agent",) or e.actor.startswith("subagent:") for e in r.events)
                   for r in runs if not _has_cast(r))  # outcome-only entries carry no model event


def test_recovered_process_of_one_run() -> None:
    """c4 on hello-world, read by hand from the cast: init (line 341), a message, a Write
    of hello.txt, the final text (the run's claim: the result record says success)."""
    runs = {r.run_id: r for r in read_runs(SYSTEMS / "claude_code_c4") if "hello-world." in r.run_id}
    (run,) = [r for r in runs.values() if _has_cast(r)]
    assert run.run_id == "terminal-bench/hello-world.1-of-1.2025-11-08__13-10-33/08e35dc7-d6fc-4f68-a610-c98386f5b9bb"
    cast = "hello-world/hello-world.1-of-1.2025-11-08__13-10-33/sessions/agent.cast"
    from_cast = [(e.kind, e.actor, run.place_of(e.seq)) for e in run.events if run.place_of(e.seq).startswith(cast)]
    assert from_cast == [("source_record", "harness", f"{cast}:341"), ("message", "agent", f"{cast}:360"),
                         ("file_edit", "agent", f"{cast}:361"), ("completion_claim", "agent", f"{cast}:370"),
                         ("run_ended", "harness", f"{cast}:371")]
    edit = of_kind(run, "file_edit")[0]
    assert (edit.path, edit.edit_kind) == ("hello.txt", "create") and edit.ts == "2025-11-08T14:36:50.380495Z"
    (ended,) = of_kind(run, "run_ended")
    assert (ended.status, ended.reason) == ("completed", "success")
    assert [s["file"] for s in ended.payload["source"]] == [cast, "hello-world/hello-world.1-of-1.2025-11-08__13-10-33/results.json"]
    # the launch keystrokes come before the agent's events, the test phase after the end
    launch = [e for e in of_kind(run, "command") if e.command.startswith("claude --verbose")]
    assert launch and launch[0].actor == "harness" and launch[0].seq < edit.seq
    assert [(e.command, e.actor) for e in of_kind(run, "test_run")] == [("bash /tests/run-tests.sh", "harness")]
    assert of_kind(run, "test_run")[0].seq > ended.seq
    labels = run.events[0].labels
    assert labels["system"] == "claude_code_c4" and labels["session_id"] == "7b7cabc2-ec40-4fa2-b095-6e22689ff8e2"
    assert run.events[0].task_id == "hello-world"


def test_spot_checks_of_recovered_commands(sample_runs: list[Any]) -> None:
    found = {(r.events[0].labels["system"], r.events[0].task_id, e.command)
             for r in sample_runs for e in of_kind(r, "test_run") if e.actor == "agent"}
    assert found == {("claude_code_c4", "openssl-selfsigned-cert", "python3 /app/check_cert.py"),
                     ("claude_code_coder", "openssl-selfsigned-cert", "python3 /app/check_cert.py"),
                     ("claude_code_gpt5", "openssl-selfsigned-cert", "chmod 755 /app/check_cert.py && python3 /app/check_cert.py"),
                     ("claude_code_c4", "grid-pattern-transform", "python test_transform.py"),
                     ("claude_code_c4", "cartpole-rl-training", "python test.py"),
                     ("claude_code_coder", "grid-pattern-transform", "python test_solution.py"),
                     ("claude_code_coder", "grid-pattern-transform", "python final_test.py"),
                     ("claude_code_coder", "cartpole-rl-training", "python /app/test.py"),
                     ("claude_code_gpt5", "cartpole-rl-training", "python /app/test.py"),
                     ("claude_code_v3", "cartpole-rl-training", "python /app/test.py")}
    v3 = [r for r in sample_runs if r.events[0].labels["system"] == "claude_code_v3" and _has_cast(r)
          and r.events[0].task_id == "create-bucket"][0]
    # v3 answered in prose and stopped: one agent text, made the run's claim by the success result
    assert [(e.kind, e.actor) for e in v3.events if e.actor == "agent"] == [("completion_claim", "agent")]


def test_crashed_agent_ends_in_error_with_its_crash_line(sample_runs: list[Any]) -> None:
    crashed = sorted((r.events[0].labels["system"], r.events[0].task_id) for r in sample_runs if _has_cast(r)
                     for e in of_kind(r, "run_ended") if e.status == "error")
    assert crashed == [("claude_code_c4", "blind-maze-explorer-5x5"), ("claude_code_c4", "get-bitcoin-nodes"),
                       ("claude_code_c4", "vim-terminal-task"), ("claude_code_coder", "get-bitcoin-nodes"),
                       ("claude_code_gpt5", "blind-maze-explorer-5x5")]
    run = [r for r in sample_runs if r.events[0].labels["system"] == "claude_code_c4"
           and r.events[0].task_id == "blind-maze-explorer-5x5" and _has_cast(r)][0]
    (ended,) = of_kind(run, "run_ended")
    assert ended.actor == "harness" and ended.reason.endswith("it printed: Error: spawn ps ENOENT")
    assert not of_kind(run, "completion_claim")  # no result record: nothing makes the last text a claim


def test_sample_imports_on_both_databases(store: Any) -> None:
    report = ingest_paths(store, [SYSTEMS / "claude_code_c4" , SYSTEMS / "claude_code_v3"])
    assert len(report.reports) == 160
    for item in report.reports[:3]:
        assert verify_log(store, item.run_id).ok
    again = ingest_paths(store, [SYSTEMS])  # from the parent folder: the same runs, a no-op
    assert sum(not r.result.no_op for r in again.reports) == 160  # the two systems not stored yet
    assert all(r.result.no_op for r in again.reports
               if "2025-11-08__13-10-33" in r.run_id or "2025-11-09__04-16-47" in r.run_id)


# --- synthetic casts: wrapping, chunking, escapes, a killed agent -------------------------------------------


def _trial(tmp_path: Path, cast_events: list[list[Any]], *, failure_mode: str = "unset",
           header: dict[str, Any] | None = None, raw_tail: str = "") -> Path:
    trial = tmp_path / "t"
    shutil.copytree(C4_HELLO, trial)
    if failure_mode != "unset":
        data = json.loads((trial / "results.json").read_text())
        data["failure_mode"] = failure_mode
        (trial / "results.json").write_text(json.dumps(data))
    lines = [json.dumps(header or {"version": 2, "width": 80, "height": 24, "timestamp": 1762612543})]
    lines += [json.dumps(e) for e in cast_events]
    (trial / "sessions" / "agent.cast").write_text("\n".join(lines) + "\n" + raw_tail)
    return trial / "results.json"


INIT = {"type": "system", "subtype": "init", "cwd": "/app", "session_id": "s1", "model": "m", "claude_code_version": "2.0.1"}


def _assistant(content: list[dict[str, Any]], ident: str) -> dict[str, Any]:
    return {"type": "assistant", "message": {"id": ident, "role": "assistant", "model": "m", "content": content},
            "session_id": "s1", "uuid": ident}


def _result_for(call: str, text: str) -> dict[str, Any]:
    return {"type": "user", "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call,
                                                                       "content": text}]}, "session_id": "s1"}


def test_wrapped_split_and_escaped_records(tmp_path: Path) -> None:
    bash = json.dumps(_assistant([{"type": "tool_use", "id": "c1", "name": "Bash",
                                   "input": {"command": "cd /app && pytest -q tests"}}], "a1"))
    wrapped = "\r\n".join(bash[i:i + 80] for i in range(0, len(bash), 80))  # a terminal that hard-wraps at 80
    text = json.dumps(_assistant([{"type": "text", "text": "All done: the tests pass."}], "a2"))
    result = json.dumps({"type": "result", "subtype": "success", "is_error": False, "session_id": "s1"})
    events = [[0.5, "o", "$ claude -p ...\r\n\x1b[?2004l\r" + json.dumps(INIT)[:30]],  # a record split over chunks
              [0.6, "o", json.dumps(INIT)[30:] + "\r\n"],
              [0.7, "i", '{"type": "keys the harness typed"}\r'],
              [1.0, "o", "\x1b[32m" + wrapped + "\x1b[0m\r\n"],
              [1.5, "o", json.dumps(_result_for("c1", "3 passed in 0.01s")) + "\r\n" + text + "\r\n"],
              [2.0, "o", result + "\r\n\x1b[?2004hroot@x:/app# "]]
    run = read_one(_trial(tmp_path, events))
    places = [run.place_of(e.seq).rsplit("/", 1)[-1] for e in run.events if "agent.cast" in run.place_of(e.seq)]
    assert places == ["agent.cast:2", "agent.cast:5", "agent.cast:6.2", "agent.cast:7"]
    (test,) = [e for e in of_kind(run, "test_run") if e.actor == "agent"]
    assert (test.command, test.passed) == ("cd /app && pytest -q tests", 3)
    assert test.ts == "2025-11-08T14:35:44.000000Z"  # header time + 1.0 s
    (claim,) = of_kind(run, "completion_claim")
    assert claim.claim == "All done: the tests pass." and claim.scope == "run"
    assert [(e.status, e.reason) for e in of_kind(run, "run_ended")] == [("completed", "success")]
    assert run.events[0].harness.version == "2.0.1" and run.unparsed == 0


def test_killed_agent_keeps_what_was_written(tmp_path: Path) -> None:
    """An agent timeout: the harness kills the agent mid-record. The records before it are
    the run's process, the cut record is kept unparsed, the end is the harness's timeout."""
    edit = json.dumps(_assistant([{"type": "tool_use", "id": "c1", "name": "Write",
                                   "input": {"file_path": "/app/x.py", "content": "x = 1\n"}}], "a1"))
    events = [[0.1, "o", json.dumps(INIT) + "\r\n"], [0.2, "o", edit + "\r\n"],
              [0.3, "o", json.dumps(_result_for("c1", "File created successfully at: /app/x.py")) + "\r\n"],
              [0.4, "o", '{"type":"assistant","message":{"id":"a2","content":[{"type":"text","te'],
              [900.0, "o", "\r\n^C\r\nroot@x:/app# "]]
    run = read_one(_trial(tmp_path, events, failure_mode="agent_timeout", raw_tail='[900.5, "o", "cut'))
    assert [e.path for e in of_kind(run, "file_edit") if e.actor == "agent"] == ["x.py"]
    unparsed = of_kind(run, "unparsed")
    assert [u.record.rsplit("/", 1)[-1] for u in unparsed] == ["agent.cast:7", "agent.cast:5"]
    assert unparsed[0].reason.startswith("not a JSON cast event") and unparsed[1].reason.startswith("invalid JSON")
    (ended,) = of_kind(run, "run_ended")
    assert (ended.actor, ended.status, ended.reason) == ("harness", "timeout", "agent_timeout")
    (verdict,) = of_kind(run, "acceptance_verdict")
    assert verdict.status == "timeout"
    assert not of_kind(run, "completion_claim")


def test_not_a_cast_is_an_error(tmp_path: Path) -> None:
    path = _trial(tmp_path, [], header={"version": 1, "width": 80})
    with pytest.raises(InputError) as caught:
        read_one(path)
    assert "agent.cast" in str(caught.value) and caught.value.field == "version"


def test_a_cast_without_stream_json_changes_nothing(tmp_path: Path) -> None:
    path = _trial(tmp_path, [[0.1, "o", "root@x:/app# ls\r\n"], [0.2, "o", '{"type": "not the agent"}\r\n']])
    run = read_one(path)
    assert not [e for e in run.events if e.actor == "agent"]
    assert [(e.status, e.reason) for e in of_kind(run, "run_ended")] == [("completed", None)]
    assert kinds(run)["command"] == 7


def test_strip_terminal() -> None:
    assert strip_terminal("\x1b[?2004l\r{\"a\":1}") == '{"a":1}'
    assert strip_terminal("\x1b]0;title\x07\x1b[1;32mok\x1b[0m") == "ok"
    assert strip_terminal("50%\r100%") == "100%"


def test_turn_limit_is_the_harness_not_a_claim(tmp_path: Path) -> None:
    """Claude Code stopped at its turn limit: budget_exhausted by the harness; the last text
    is a message, not a completion claim (only a success result makes it one)."""
    text = json.dumps(_assistant([{"type": "text", "text": "I have fixed the bug and everything is done."}], "a1"))
    result = json.dumps({"type": "result", "subtype": "error_max_turns", "is_error": True, "session_id": "s1"})
    run = read_one(_trial(tmp_path, [[0.1, "o", json.dumps(INIT) + "\r\n" + text + "\r\n" + result + "\r\n"]]))
    (ended,) = of_kind(run, "run_ended")
    assert (ended.actor, ended.status, ended.reason) == ("harness", "budget_exhausted", "error_max_turns")
    assert not of_kind(run, "completion_claim")
    assert [m.text for m in of_kind(run, "message") if m.actor == "agent"] == [
        "I have fixed the bug and everything is done."]


@pytest.mark.parametrize(("failure_mode", "ended", "verdict"), [
    ("context_length_exceeded", ("budget_exhausted", "context_length_exceeded"), "evaluated"),
    ("test_timeout", ("completed", "success"), "timeout"),  # the agent had finished; the tests timed out
    ("unknown_agent_error", ("error", "unknown_agent_error"), "infra_error"),
])
def test_how_the_harness_says_the_agent_phase_ended(tmp_path: Path, failure_mode: str, ended: tuple[str, str],
                                                    verdict: str) -> None:
    result = json.dumps({"type": "result", "subtype": "success", "is_error": False, "session_id": "s1"})
    run = read_one(_trial(tmp_path, [[0.1, "o", json.dumps(INIT) + "\r\n" + result + "\r\n"]], failure_mode=failure_mode))
    (end,) = of_kind(run, "run_ended")
    assert (end.actor, end.status, end.reason) == ("harness", *ended)
    assert of_kind(run, "acceptance_verdict")[0].status == verdict


def test_asciinema_v3_intervals(tmp_path: Path) -> None:
    """Cast v3 records intervals since the previous event (and ``x`` exit events): the clock adds up."""
    edit = json.dumps(_assistant([{"type": "tool_use", "id": "c1", "name": "Write",
                                   "input": {"file_path": "/app/y.py", "content": "y = 2\n"}}], "a1"))
    events = [[1.0, "o", json.dumps(INIT) + "\r\n"], [0.5, "i", "x"], [2.0, "o", edit + "\r\n"], [0.1, "x", "0"]]
    run = read_one(_trial(tmp_path, events, header={"version": 3, "term": {"cols": 80, "rows": 24},
                                                     "timestamp": 1762612543}))
    (edit_event,) = [e for e in of_kind(run, "file_edit") if e.actor == "agent"]
    assert edit_event.ts == "2025-11-08T14:35:46.500000Z"  # 1.0 + 0.5 + 2.0 s after the header's time
    assert [(e.status, e.reason) for e in of_kind(run, "run_ended")] == [("error", _no_result())]


def _no_result() -> str:
    from procgrade.engine.importers.terminal_bench import _NO_RESULT

    return _NO_RESULT


def test_recovered_commands_carry_how_they_ended(sample_runs: list[Any]) -> None:
    """The model's commands and test runs get their endings from Claude Code's tool results
    (engine/importers/claude_code_bash.py). Counted from the casts' 267 Bash results, all
    2.0.29 stream-json with no stated exit code: 32 ``is_error: true`` (-> 1), 218 plain
    successes (-> 0), 7 background launches and 10 grep/find successes (0 or 1: null)."""
    found: dict[str, Counter[Any]] = {}
    for run in sample_runs:
        seen = found.setdefault(run.events[0].labels["system"], Counter())
        for event in run.events:
            if event.kind in ("command", "test_run") and (event.actor == "agent" or event.actor.startswith("subagent:")):
                seen[(event.kind, event.exit_code)] += 1
    assert found == {
        "claude_code_c4": Counter({("command", 0): 69, ("command", None): 11, ("command", 1): 6,
                                   ("test_run", 0): 3, ("test_run", 1): 1}),
        "claude_code_coder": Counter({("command", 0): 89, ("command", 1): 13, ("command", None): 5,
                                      ("test_run", 0): 6, ("test_run", 1): 1}),
        "claude_code_gpt5": Counter({("command", 0): 42, ("command", 1): 10, ("command", None): 1,
                                     ("test_run", 0): 2}),
        "claude_code_v3": Counter({("command", 0): 6, ("command", 1): 1, ("test_run", 0): 1}),
    }
    # c4 on grid-pattern-transform: its test hit a missing numpy, then passed (recovery)
    c4_grid = [e for r in sample_runs if r.events[0].labels["system"] == "claude_code_c4"
               and r.events[0].task_id == "grid-pattern-transform" for e in of_kind(r, "test_run") if e.actor == "agent"]
    assert [(e.command, e.exit_code) for e in c4_grid] == [("python test_transform.py", 1), ("python test_transform.py", 0)]
