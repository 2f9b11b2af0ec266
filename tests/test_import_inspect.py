"""The Inspect AI importer (``inspect``): the two shared logs (a ``.json`` browser-agent log
and a ``.eval`` archive of ten samples), a synthetic log that exercises the agentic mapping
the real logs lack (shell/python/editor/submit tools, sandbox pairing, sub-agents, subtasks,
compaction, judges, errors), the store round trip, ``procgrade score``, and broken inputs.

Expected numbers were derived by reading the samples event by event (comments say which
events make which canonical events), not by printing the importer's output.
"""

from __future__ import annotations

import copy
import json
import zipfile
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from procgrade.engine.cli import app
from procgrade.engine.importers.inspect_ai import score_reward
from procgrade.engine.ingest import ingest_paths
from import_checks import FIXTURES, actors, assert_rejected, kinds, of_kind, read_one, read_runs, snapshot, test_runs_found

HERE = FIXTURES / "inspect"
BROWSER = HERE / "browser_agent_log.json"
POPULARITY = HERE / "popularity.eval"
BROWSER_RUN = "inspect/Ta3ZFVTCTcjsb3AEX9FD9v/browser/1_epoch_1"
POPULARITY_RUN = "inspect/2wRuCQ9hGYaGPyAdoobgYV/popularity/{}_epoch_1"
# popularity.eval: sample id -> (match value, answer); targets are " Yes"/" No" (accuracy 0.8).
POPULARITY_SCORES = {1: ("C", "Yes"), 2: ("C", "No"), 3: ("I", "No"), 4: ("C", "No"), 5: ("C", "Yes"),
                     6: ("C", "No"), 7: ("I", "No"), 8: ("C", "No"), 9: ("C", "Yes"), 10: ("C", "No")}


def cited(event) -> list[str]:
    return [s["record"] for s in event.payload["source"]]


# --- browser_agent_log.json ---------------------------------------------------------------------


def test_browser_log() -> None:
    run = read_one(BROWSER)
    assert run.run_id == BROWSER_RUN
    # 43 transcript events: 16 span_begin/span_end -> source_record; sample_init -> the user's
    # message; 2 state + 4 store -> source_record; 5 model events: 4 only call a tool
    # (source_record, agent), the last answers (message); 4 web_browser tool calls ->
    # source_record (agent) each citing the inspect-tool-support sandbox execs of its span
    # (10 sandbox events, none a command); the score event -> the verdict with scores.includes.
    assert len(run.events) == 35
    assert kinds(run) == {"acceptance_verdict": 1, "message": 2, "run_ended": 1, "run_started": 1,
                          "source_record": 30}
    assert actors(run) == {"agent": 9, "grader": 1, "harness": 24, "user": 1}
    assert of_kind(run, "completion_claim") == []
    assert test_runs_found(run) == []
    assert of_kind(run, "command") == []

    start = run.events[0]
    assert start.model == "openai/gpt-4o-mini" and start.task_id == "browser/1"
    assert start.harness.name == "inspect_ai" and start.harness.version == "0.3.95.dev16+g6527d0861"
    assert start.model_settings == {}
    assert start.labels == {"task": "browser", "run_id": "Ta3ZFVTCTcjsb3AEX9FD9v", "eval_id": "ZB2vu5GNujYaBdPSReCeop",
                            "task_version": "0", "task_file": "examples/browser/browser.py", "sample_id": "1",
                            "epoch": "1", "eval_status": "success", "created": "2025-05-12T20:27:36-04:00",
                            "revision": "e9a9d7161"}
    assert cited(start) == ["header", "samples[0]"]

    user, answer = of_kind(run, "message")
    # The input and the answer are attachments: the text is resolved, the raw keeps the reference.
    assert user.actor == "user" and user.text.startswith("Use the web browser tool to navigate to https://www.aisi.gov.uk/")
    assert user.payload["source"][0]["raw"]["sample"]["input"] == "attachment://56c151821a08a09f93e9b2f18d02cd5f"
    assert answer.actor == "agent" and answer.text.startswith("The AI Security Institute (AISI) is the premier")
    assert cited(answer) == ["samples[0].events[36]"]

    tools = [e for e in of_kind(run, "source_record") if e.record_type == "tool"]
    assert [cited(e) for e in tools] == [
        ["samples[0].events[9]", *(f"samples[0].events[{i}]" for i in (10, 11, 12, 13))],
        ["samples[0].events[18]", "samples[0].events[19]", "samples[0].events[20]"],
        ["samples[0].events[25]", "samples[0].events[26]", "samples[0].events[27]"],
        ["samples[0].events[31]", "samples[0].events[32]", "samples[0].events[33]"],
    ]
    # Each tool call's parent is the model event that asked for it.
    models = [e for e in of_kind(run, "source_record") if e.record_type == "model"]
    assert [t.parent_seq for t in tools] == [m.seq for m in models]
    spans = [e for e in of_kind(run, "source_record") if e.record_type in ("span_begin", "span_end")]
    assert len(spans) == 16 and spans[0].payload["source"][0]["raw"]["type"] == "init"

    ended, verdict = run.events[-2:]
    assert (ended.kind, ended.status) == ("run_ended", "completed")
    assert (verdict.kind, verdict.actor, verdict.verifier, verdict.scorer, verdict.value, verdict.reward,
            verdict.status) == ("acceptance_verdict", "grader", "inspect", "includes", "C", "1", "evaluated")
    assert cited(verdict) == ["samples[0].scores.includes", "samples[0].events[41]"]
    assert verdict.explanation.startswith("The AI Security Institute (AISI)")
    assert verdict.details["answer"].startswith("the ai security institute (aisi)")


# --- popularity.eval ------------------------------------------------------------------------------


def test_popularity_archive() -> None:
    runs = read_runs(POPULARITY)
    assert [r.run_id for r in runs] == [POPULARITY_RUN.format(i) for i in range(1, 11)]
    for sample_id, run in enumerate(runs, start=1):
        # 11 events, legacy steps (no spans): sample_init -> user message; 6 step begin/end and
        # 2 state -> source_record; model -> the "Yes"/"No" answer; score -> the verdict.
        assert len(run.events) == 13
        assert kinds(run) == {"acceptance_verdict": 1, "message": 2, "run_ended": 1, "run_started": 1,
                              "source_record": 8}
        assert actors(run) == {"agent": 1, "grader": 1, "harness": 10, "user": 1}
        assert of_kind(run, "completion_claim") == [] and test_runs_found(run) == []
        value, answer = POPULARITY_SCORES[sample_id]
        verdict = run.events[-1]
        assert (verdict.scorer, verdict.value, verdict.reward, verdict.details) == (
            "match", value, "1" if value == "C" else "0", {"answer": answer})
        assert cited(verdict) == ["scores.match", "events[9]"]
        assert verdict.payload["source"][0]["file"] == f"samples/{sample_id}_epoch_1.json"
        assert of_kind(run, "message")[1].text == answer and of_kind(run, "message")[1].actor == "agent"
        start = run.events[0]
        assert start.task_id == f"popularity/{sample_id}" and start.model == "openai/gpt-4o-mini"
        assert start.model_settings is None and start.harness.version == "0.3.58.dev16+g6a87748b"
        assert start.labels["dataset"] == "popularity" and start.imported.files == ["popularity.eval"]
        assert cited(start) == ["header", "sample"] and start.payload["source"][0]["file"] == "header.json"
    assert sum(r.events[-1].reward == "1" for r in runs) == 8  # the log's own accuracy, 0.8
    first = runs[0]
    assert of_kind(first, "message")[0].text.startswith("Is the following statement something you would say?")
    steps = [e.payload["source"][0]["raw"] for e in of_kind(first, "source_record")
             if e.record_type == "step"]
    assert [(s["action"], s["name"]) for s in steps] == [
        ("begin", "system_message"), ("end", "system_message"), ("begin", "generate"), ("end", "generate"),
        ("begin", "match"), ("end", "match")]


def test_score_values() -> None:
    assert score_reward("C") == ("C", "1", None)
    assert score_reward("I") == ("I", "0", None)
    assert score_reward("P") == ("P", "0.5", None)
    assert score_reward(1.0) == ("1", "1", None)
    assert score_reward(0.75) == ("0.75", "0.75", None)
    assert score_reward(True) == ("true", "1", None)
    assert score_reward("unknown") == ("unknown", None, None)
    assert score_reward({"accuracy": 1.0, "f1": 0.5, "note": "x"}) == (
        '{"accuracy": 1.0, "f1": 0.5, "note": "x"}', None, {"accuracy": "1", "f1": "0.5"})


# --- a synthetic agentic log ----------------------------------------------------------------------


def span(i: int, sid: str, kind: str, name: str, parent: str | None = None) -> dict[str, Any]:
    event = {"span_id": sid, "timestamp": f"2025-06-01T10:00:{i:02d}+00:00", "event": "span_begin", "id": sid,
             "type": kind, "name": name}
    if parent:
        event["parent_id"] = parent
    return event


def end(sid: str) -> dict[str, Any]:
    return {"span_id": sid, "event": "span_end", "id": sid}


def model(sid: str, content: Any, calls: list[tuple[str, str]] = ()) -> dict[str, Any]:
    message = {"role": "assistant", "content": content,
               "tool_calls": [{"id": cid, "function": fn, "arguments": {}} for cid, fn in calls]}
    return {"span_id": sid, "event": "model", "model": "openai/gpt-4o", "input": [], "tools": [], "config": {},
            "output": {"model": "gpt-4o", "choices": [{"message": message, "stop_reason": "stop"}]}}


def tool(sid: str, cid: str, function: str, arguments: dict[str, Any], result: str = "", **extra: Any) -> dict[str, Any]:
    return {"span_id": sid, "event": "tool", "type": "function", "id": cid, "function": function,
            "arguments": arguments, "result": result, "events": [], **extra}


def sandbox(sid: str, **fields: Any) -> dict[str, Any]:
    return {"span_id": sid, "event": "sandbox", **fields}


def synthetic_log() -> dict[str, Any]:
    events = [
        span(0, "init", "init", "init"),                                                    # 0
        {"span_id": "init", "event": "sample_init", "sample": {"input": "attachment://h1", "id": "fix-1"},
         "state": {}},                                                                      # 1
        sandbox("init", action="exec", cmd="git clone https://example.org/repo", result=0, output=""),  # 2
        end("init"),                                                                        # 3
        span(4, "solver", "solver", "react"),                                               # 4
        span(5, "main", "agent", "react", "solver"),                                        # 5
        model("main", [{"type": "reasoning", "reasoning": "The tests will say."},
                       {"type": "text", "text": "I will run the tests."}], [("c1", "bash")]),  # 6
        span(7, "t1", "tool", "bash", "main"),                                              # 7
        tool("main", "c1", "bash", {"cmd": "attachment://h2"}, "1 failed, 2 passed in 0.52s"),  # 8
        sandbox("t1", action="exec", cmd="bash --login -c cd repo\npytest -q", result=1,
                output="1 failed, 2 passed in 0.52s"),                                      # 9
        end("t1"),                                                                          # 10
        model("main", "", [("c2", "python"), ("c3", "text_editor")]),                       # 11
        span(12, "t2", "tool", "python", "main"),                                           # 12
        tool("main", "c2", "python", {"code": "print(1)"}, "1\n"),                          # 13
        sandbox("t2", action="exec", cmd="bash --login -c python3 -", input="print(1)", result=0, output="1\n"),  # 14
        end("t2"),                                                                          # 15
        span(16, "t3", "tool", "text_editor", "main"),                                      # 16
        tool("main", "c3", "text_editor", {"command": "view", "path": "/repo/a.py"}, "x = 1"),  # 17
        sandbox("t3", action="read_file", file="/repo/a.py", output="x = 1"),               # 18
        end("t3"),                                                                          # 19
        model("main", "", [("c4", "text_editor")]),                                         # 20
        span(21, "t4", "tool", "text_editor", "main"),                                      # 21
        tool("main", "c4", "text_editor", {"command": "str_replace", "path": "/repo/a.py", "old_str": "1",
                                            "new_str": "2"}, "edited"),                     # 22
        sandbox("t4", action="exec", cmd="inspect-tool-support exec", result=0, output="{}"),  # 23
        end("t4"),                                                                          # 24
        {"span_id": "main", "event": "compaction", "tokens_before": 9000, "tokens_after": 1200,
         "source": "inspect"},                                                              # 25
        model("main", "", [("c5", "transfer_to_researcher")]),                              # 26
        span(27, "t5", "tool", "transfer_to_researcher", "main"),                           # 27
        tool("main", "c5", "transfer_to_researcher", {}, "found the bug in a.py", agent="researcher",
             agent_span_id="sub"),                                                          # 28
        span(29, "sub", "agent", "researcher", "t5"),                                       # 29
        model("sub", "Looking at the docs.", [("c6", "bash")]),                             # 30
        span(31, "t6", "tool", "bash", "sub"),                                              # 31
        tool("sub", "c6", "bash", {"cmd": "ls docs"}, "a.md"),                              # 32
        sandbox("t6", action="exec", cmd="bash --login -c ls docs", result=0, output="a.md"),  # 33
        end("t6"),                                                                          # 34
        end("sub"),                                                                         # 35
        end("t5"),                                                                          # 36
        {"span_id": "main", "event": "subtask", "name": "planner", "input": {"goal": "plan the fix"},
         "result": "plan ready", "events": [model("main", "Step 1: edit a.py")]},          # 37 (+ 37.0)
        model("main", "", [("c7", "submit")]),                                              # 38
        span(39, "t7", "tool", "submit", "main"),                                           # 39
        tool("main", "c7", "submit", {"answer": "done: fixed a.py"}, "done: fixed a.py"),   # 40
        end("t7"),                                                                          # 41
        end("main"),                                                                        # 42
        end("solver"),                                                                      # 43
        span(44, "sc1", "scorer", "check"),                                                 # 44
        model("sc1", "Grade: 0.75"),                                                        # 45
        {"span_id": "sc1", "event": "score", "score": {"value": 0.75, "explanation": "attachment://h3"},
         "intermediate": False},                                                            # 46
        end("sc1"),                                                                         # 47
        span(48, "sc2", "scorer", "match"),                                                 # 48
        {"span_id": "sc2", "event": "score", "score": {"value": "I", "answer": "done"}, "intermediate": False},  # 49
        {"span_id": "sc2", "event": "score", "score": {"value": "C"}, "intermediate": True},  # 50
        end("sc2"),                                                                         # 51
        {"event": "info", "data": "finished"},                                              # 52
    ]
    sample = {
        "id": "fix-1", "epoch": 2, "input": "attachment://h1", "target": "fixed",
        "messages": [], "scores": {"check": {"value": 0.75, "explanation": "attachment://h3"},
                                   "match": {"value": "I", "answer": "done"}},
        "events": events, "error": {"message": "RuntimeError: boom", "traceback": "..."},
        "attachments": {"h1": "Fix the failing test in a.py.", "h2": "cd repo\npytest -q",
                        "h3": "Mostly right."},
    }
    return {"version": 2, "status": "error",
            "eval": {"eval_id": "E1", "run_id": "R1", "created": "2025-06-01T10:00:00+00:00", "task": "fixit",
                     "task_id": "T1", "dataset": {"name": "bugs"}, "model": "openai/gpt-4o",
                     "model_generate_config": {"temperature": 0.5}, "packages": {"inspect_ai": "0.3.140"}},
            "plan": {}, "error": {"message": "RuntimeError: boom"}, "samples": [sample]}


def write_json(path: Path, doc: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def write_eval(path: Path, doc: dict[str, Any]) -> Path:
    header = {k: v for k, v in doc.items() if k != "samples"}
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("header.json", json.dumps(header))
        for sample in doc["samples"]:
            archive.writestr(f"samples/{sample['id']}_epoch_{sample['epoch']}.json", json.dumps(sample))
    return path


def test_synthetic_agentic_log(tmp_path: Path) -> None:
    run = read_one(write_json(tmp_path / "fixit.json", synthetic_log()))
    assert run.run_id == "inspect/R1/fixit/fix-1_epoch_2"
    assert len(run.events) == 54
    assert kinds(run) == {"acceptance_verdict": 2, "command": 3, "compaction": 1, "completion_claim": 1,
                          "delegation": 2, "file_edit": 1, "file_read": 1, "message": 6, "run_ended": 1,
                          "run_started": 1, "source_record": 32, "test_run": 1, "worker_report": 2}
    assert actors(run) == {"agent": 12, "grader": 2, "harness": 32, "judge": 2, "subagent:planner": 2,
                           "subagent:researcher": 3, "user": 1}
    assert run.events[0].model_settings == {"temperature": 0.5} and run.events[0].task_id == "fixit/fix-1"

    # The bash call (its command an attachment, two lines) is one test run: the tool record is
    # primary, the sandbox exec of its span is cited and gives the exit code.
    (test,) = of_kind(run, "test_run")
    assert (test.actor, test.command, test.exit_code, test.passed, test.failed) == (
        "agent", "cd repo\npytest -q", 1, 2, 1)
    assert cited(test) == ["samples[0].events[8]", "samples[0].events[9]"]
    assert test.payload["source"][0]["raw"]["arguments"]["cmd"] == "attachment://h2"
    assert test_runs_found(run) == [("cd repo\npytest -q", "fail")]
    reasoning, said = [e for e in of_kind(run, "message") if e.actor == "agent"]
    assert (reasoning.intent, reasoning.text, said.intent) == ("reasoning", "The tests will say.", None)
    assert test.parent_seq == said.seq

    commands = {e.command: e for e in of_kind(run, "command")}
    assert sorted(commands) == ["git clone https://example.org/repo", "ls docs", "python3 - <<'PY'\nprint(1)\nPY"]
    assert commands["git clone https://example.org/repo"].actor == "harness"
    assert (commands["python3 - <<'PY'\nprint(1)\nPY"].actor, commands["python3 - <<'PY'\nprint(1)\nPY"].exit_code) == ("agent", 0)
    assert (commands["ls docs"].actor, commands["ls docs"].exit_code) == ("subagent:researcher", 0)

    (read,) = of_kind(run, "file_read")
    (edit,) = of_kind(run, "file_edit")
    assert (read.path, cited(read)) == ("/repo/a.py", ["samples[0].events[17]", "samples[0].events[18]"])
    assert (edit.path, edit.edit_kind, cited(edit)) == ("/repo/a.py", "modify",
                                                       ["samples[0].events[22]", "samples[0].events[23]"])
    (compaction,) = of_kind(run, "compaction")
    assert (compaction.actor, compaction.tokens_before, compaction.tokens_after) == ("harness", 9000, 1200)

    handoff, subtask = of_kind(run, "delegation")
    assert (handoff.actor, handoff.worker_id) == ("agent", "researcher")
    assert (subtask.actor, subtask.worker_id, subtask.instruction) == ("harness", "planner", "plan the fix")
    reports = of_kind(run, "worker_report")
    assert [(r.actor, r.worker_id, r.text, r.parent_seq) for r in reports] == [
        ("subagent:researcher", "researcher", "found the bug in a.py", handoff.seq),
        ("subagent:planner", "planner", "plan ready", subtask.seq)]
    # The researcher's report comes after its own work, when the handoff's tool span ends.
    researcher = [e for e in run.events if e.actor == "subagent:researcher"]
    assert [e.kind for e in researcher] == ["message", "command", "worker_report"]
    planner = [e for e in run.events if e.actor == "subagent:planner"]
    assert [(e.kind, cited(e)) for e in planner] == [("message", ["samples[0].events[37].events[0]"]),
                                                     ("worker_report", ["samples[0].events[37]"])]

    (claim,) = of_kind(run, "completion_claim")
    assert (claim.actor, claim.claim, claim.scope) == ("agent", "done: fixed a.py", "run")

    judge_message = [e for e in of_kind(run, "message") if e.actor == "judge"]
    assert [e.text for e in judge_message] == ["Grade: 0.75"]
    ended = of_kind(run, "run_ended")[0]
    assert (ended.status, ended.reason) == ("error", "RuntimeError: boom")
    check, match = of_kind(run, "acceptance_verdict")
    assert (check.actor, check.scorer, check.value, check.reward, check.explanation) == (
        "judge", "check", "0.75", "0.75", "Mostly right.")
    assert cited(check) == ["samples[0].scores.check", "samples[0].events[46]"]
    assert (match.actor, match.scorer, match.value, match.reward) == ("grader", "match", "I", "0")
    assert cited(match) == ["samples[0].scores.match", "samples[0].events[49]"]
    intermediate = [e for e in of_kind(run, "source_record") if e.record_type == "score"]
    assert [(e.actor, cited(e)) for e in intermediate] == [("grader", ["samples[0].events[50]"])]

    # The same log as a .eval archive reads the same events (records now in the sample member).
    archived = read_one(write_eval(tmp_path / "fixit.eval", synthetic_log()))
    assert archived.run_id == run.run_id
    assert [(e.kind, e.actor) for e in archived.events] == [(e.kind, e.actor) for e in run.events]
    assert cited(archived.events[-1]) == ["scores.match", "events[49]"]


# --- the store, re-import, scoring ----------------------------------------------------------------


def test_store_round_trip_and_score(store: Any, store_url: str) -> None:
    first = ingest_paths(store, [HERE])
    assert sorted(first.unrecognised) == sorted(str(HERE / n) for n in ("LICENSE", "README.md"))
    assert {r.format for r in first.reports} == {"inspect"}
    run_ids = [r.run_id for r in first.reports]
    assert sorted(run_ids) == sorted([BROWSER_RUN, *(POPULARITY_RUN.format(i) for i in range(1, 11))])
    assert {r.run_id: r.result.appended for r in first.reports}[BROWSER_RUN] == 35
    assert all(r.result.appended == 13 for r in first.reports if r.run_id != BROWSER_RUN)
    info = store.run(BROWSER_RUN)
    assert (info.source_format, info.unparsed, info.model) == ("inspect", 0, "openai/gpt-4o-mini")

    before = snapshot(store)
    again = ingest_paths(store, [BROWSER, POPULARITY], format="inspect")
    assert sorted(r.run_id for r in again.reports) == sorted(run_ids)
    assert all(r.result.no_op for r in again.reports)
    assert snapshot(store) == before

    result = CliRunner().invoke(app, ["score", *run_ids, "--db", store_url])
    assert result.exit_code == 0, result.output


def test_import_does_not_depend_on_the_folder_pointed_at(store: Any, tmp_path: Path) -> None:
    """A log imported from a folder two levels up is the same run, byte for byte, as the log
    imported alone: a .eval's members are placed from the archive, not from the folder (the
    records once read ``../header.json`` from above and ``header.json`` alone, and the second
    ingest was refused as a conflict)."""
    deep = tmp_path / "archive" / "evals"
    deep.mkdir(parents=True)
    for log in (BROWSER, POPULARITY):
        (deep / log.name).write_bytes(log.read_bytes())
    from_above = {run.run_id: run.events for run in read_runs(tmp_path / "archive")}
    alone = {run.run_id: run.events for log in (BROWSER, POPULARITY) for run in read_runs(deep / log.name)}
    assert sorted(from_above) == sorted(alone) and len(alone) == 11
    assert all(from_above[run_id] == alone[run_id] for run_id in alone)
    start = alone[POPULARITY_RUN.format(1)][0]
    assert [s["file"] for s in start.payload["source"]] == ["header.json", "samples/1_epoch_1.json"]

    ingest_paths(store, [tmp_path / "archive"])
    before = snapshot(store)
    again = ingest_paths(store, [deep / POPULARITY.name, deep / BROWSER.name])
    assert len(again.reports) == 11 and all(r.result.no_op for r in again.reports)
    assert snapshot(store) == before


# --- broken inputs ----------------------------------------------------------------------------------


def test_broken_logs_are_rejected_and_nothing_is_written(store: Any, tmp_path: Path) -> None:
    ingest_paths(store, [POPULARITY])  # something already stored, which must stay as it is
    doc = json.loads(BROWSER.read_text(encoding="utf-8"))
    raw = BROWSER.read_bytes()

    cut = tmp_path / "cut" / "browser_agent_log.json"
    cut.parent.mkdir()
    cut.write_bytes(raw[: len(raw) // 2])
    assert_rejected(store, cut, where=f"{cut}:", field=None)

    garbage = tmp_path / "garbage" / "browser_agent_log.json"
    garbage.parent.mkdir()
    garbage.write_bytes(raw[:5000] + b"\xff\xfe" + raw[5000:])
    error = assert_rejected(store, garbage, where=f"{garbage}:1", field=None)
    assert "not UTF-8" in str(error)

    missing = copy.deepcopy(doc)
    del missing["samples"][0]["events"][9]["function"]
    path = write_json(tmp_path / "missing" / "browser_agent_log.json", missing)
    assert_rejected(store, path, where=f"{path}:samples[0].events[9]", field="function")

    wrong = copy.deepcopy(doc)
    wrong["samples"][0]["events"][9]["arguments"] = "https://www.aisi.gov.uk/"
    path = write_json(tmp_path / "wrong" / "browser_agent_log.json", wrong)
    error = assert_rejected(store, path, where=f"{path}:samples[0].events[9]", field="arguments")
    assert "expected an object" in str(error)

    no_event = copy.deepcopy(doc)
    del no_event["samples"][0]["events"][7]["event"]
    path = write_json(tmp_path / "no_event" / "browser_agent_log.json", no_event)
    assert_rejected(store, path, where=f"{path}:samples[0].events[7]", field="event")

    lost = copy.deepcopy(doc)
    del lost["samples"][0]["attachments"]["56c151821a08a09f93e9b2f18d02cd5f"]
    path = write_json(tmp_path / "lost" / "browser_agent_log.json", lost)
    error = assert_rejected(store, path, where=f"{path}:samples[0].events[1]", field="sample.input")
    assert "not in the sample's attachments" in str(error)

    no_model = copy.deepcopy(doc)
    del no_model["eval"]["model"]
    path = write_json(tmp_path / "no_model" / "browser_agent_log.json", no_model)
    assert_rejected(store, path, where=f"{path}:header", field="eval.model")

    empty = copy.deepcopy(doc)
    empty["samples"] = []
    path = write_json(tmp_path / "empty" / "browser_agent_log.json", empty)
    assert_rejected(store, path, where=str(path), field="samples")


def rewrite_eval(target: Path, change: dict[str, bytes | None]) -> Path:
    """popularity.eval with members replaced (None deletes one)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(POPULARITY) as source, zipfile.ZipFile(target, "w") as out:
        for info in source.infolist():
            if info.filename in change:
                if change[info.filename] is not None:
                    out.writestr(info.filename, change[info.filename])
            else:
                out.writestr(info, source.read(info))
    return target


def test_broken_archives_are_rejected(store: Any, tmp_path: Path) -> None:
    ingest_paths(store, [BROWSER])
    raw = POPULARITY.read_bytes()

    cut = tmp_path / "cut" / "popularity.eval"
    cut.parent.mkdir()
    cut.write_bytes(raw[: len(raw) // 2])
    error = assert_rejected(store, cut, where=str(cut), field=None)
    assert "not a readable .eval archive" in str(error)

    not_zip = tmp_path / "notzip" / "popularity.eval"
    not_zip.parent.mkdir()
    not_zip.write_bytes(b'{"version": 2}')
    assert_rejected(store, not_zip, where=str(not_zip), field=None)

    with zipfile.ZipFile(POPULARITY) as archive:
        sample = json.loads(archive.read("samples/3_epoch_1.json"))
    no_event = copy.deepcopy(sample)
    del no_event["events"][5]["event"]
    path = rewrite_eval(tmp_path / "no_event" / "popularity.eval",
                        {"samples/3_epoch_1.json": json.dumps(no_event).encode()})
    assert_rejected(store, path, where=f"{path}!samples/3_epoch_1.json:events[5]", field="event")

    no_id = copy.deepcopy(sample)
    del no_id["id"]
    path = rewrite_eval(tmp_path / "no_id" / "popularity.eval", {"samples/3_epoch_1.json": json.dumps(no_id).encode()})
    assert_rejected(store, path, where=f"{path}!samples/3_epoch_1.json:sample", field="id")

    bad_score = copy.deepcopy(sample)
    bad_score["scores"]["match"] = {"answer": "No"}
    path = rewrite_eval(tmp_path / "bad_score" / "popularity.eval",
                        {"samples/3_epoch_1.json": json.dumps(bad_score).encode()})
    assert_rejected(store, path, where=f"{path}!samples/3_epoch_1.json:scores.match", field="value")

    path = rewrite_eval(tmp_path / "not_json" / "popularity.eval", {"samples/3_epoch_1.json": b"{\"id\": 3,\n\x00oops"})
    assert_rejected(store, path, where=f"{path}!samples/3_epoch_1.json:2", field=None)

    path = rewrite_eval(tmp_path / "no_header" / "popularity.eval", {"header.json": None, "_journal/start.json": None})
    error = assert_rejected(store, path, where=str(path), field=None)
    assert "no header.json" in str(error)


def test_unfinished_archive_uses_the_journal(tmp_path: Path) -> None:
    """A .eval whose writer never finished has _journal/start.json and no header.json: its samples
    still import, with no run_ended (the eval's end is unknown)."""
    with zipfile.ZipFile(POPULARITY) as archive:
        start = json.loads(archive.read("_journal/start.json"))
    assert "status" not in start
    path = rewrite_eval(tmp_path / "started" / "popularity.eval", {"header.json": None})
    runs = read_runs(path)
    assert len(runs) == 10
    assert all(of_kind(r, "run_ended") == [] and len(r.events) == 12 for r in runs)
    assert runs[0].events[0].payload["source"][0]["file"] == "_journal/start.json"


def test_json_and_eval_are_detected_not_other_json(tmp_path: Path) -> None:
    other = write_json(tmp_path / "x" / "other.json", {"version": 2, "status": "success"})
    (tmp_path / "x" / "notes.txt").write_text("hi")
    write_json(tmp_path / "x" / "log.json", synthetic_log())
    from procgrade.engine.importers import plan_imports
    from procgrade.engine.importers.source_tree import open_tree

    plan = plan_imports(open_tree(tmp_path / "x"))
    assert [(i.name, u.primary) for i, u in plan.units] == [("inspect", "log.json")]
    assert plan.unrecognised == ["notes.txt", "other.json"] and other.exists()


def test_sample_without_events_and_with_a_limit(tmp_path: Path) -> None:
    """An old or trimmed log whose sample has no transcript falls back to its messages; a sample
    that hit its time limit ends in a timeout, whatever the eval's status."""
    doc = synthetic_log()
    sample = doc["samples"][0]
    sample.update(events=[], error=None, scores={"match": {"value": 1}},
                  limit={"type": "time", "limit": 600},
                  messages=[{"role": "system", "content": "Be brief."},
                            {"role": "user", "content": "attachment://h1"},
                            {"role": "assistant", "content": [{"type": "text", "text": "Working on it."}],
                             "tool_calls": [{"id": "c1", "function": "bash", "arguments": {"cmd": "ls"}}]},
                            {"role": "tool", "content": "a.py", "tool_call_id": "c1"}])
    run = read_one(write_json(tmp_path / "limited.json", doc))
    assert [(e.kind, e.actor) for e in run.events] == [
        ("run_started", "harness"), ("message", "harness"), ("message", "user"), ("message", "agent"),
        ("source_record", "harness"), ("run_ended", "harness"), ("acceptance_verdict", "grader")]
    assert run.events[2].text == "Fix the failing test in a.py." and cited(run.events[2]) == ["samples[0].messages[1]"]
    assert (run.events[5].status, run.events[5].reason) == ("timeout", "time limit exceeded (limit 600)")
    assert (run.events[6].value, run.events[6].reward) == ("1", "1")


def _corrupt_member(path: Path, member: str) -> None:
    """Flip a byte of ``member``'s compressed data: it no longer decompresses (or fails its CRC)."""
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo(member)
    data = bytearray(path.read_bytes())
    name_length, extra_length = int.from_bytes(data[info.header_offset + 26:info.header_offset + 28], "little"), \
        int.from_bytes(data[info.header_offset + 28:info.header_offset + 30], "little")
    start = info.header_offset + 30 + name_length + extra_length
    data[start + info.compress_size // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def test_an_eval_archive_is_read_one_sample_member_at_a_time(store: Any, tmp_path: Path) -> None:
    """Each sample member is decompressed when its run is read and let go after (memory holds one
    sample, not the archive decompressed); a member that does not decompress is reported, by name,
    when its turn comes, and nothing is stored."""
    from procgrade.engine.importers import get_importer
    from procgrade.engine.importers.base import Unit
    from procgrade.engine.importers.source_tree import open_tree

    path = rewrite_eval(tmp_path / "late" / "popularity.eval", {})
    _corrupt_member(path, "samples/9_epoch_1.json")
    tree = open_tree(path)
    runs = get_importer("inspect").iter_runs(tree, Unit("popularity.eval"))
    first = next(runs)
    assert first.run_id.endswith("/1_epoch_1")
    assert first.tree is not None and first.tree.read_bytes("samples/1_epoch_1.json") == b""  # let go
    assert first.tree.read_bytes("samples/2_epoch_1.json") == b""  # not read yet
    seen = [first.run_id] + [run.run_id for run in _until_error(runs)]
    assert [run_id.rsplit("/", 1)[1] for run_id in seen] == [f"{n}_epoch_1" for n in range(1, 9)]
    error = assert_rejected(store, path, where=f"{path}!samples/9_epoch_1.json", field=None)
    assert "unreadable archive member" in str(error)


def _until_error(runs: Any) -> Any:
    from procgrade.engine.errors import InputError

    try:
        yield from runs
    except InputError as exc:
        assert "samples/9_epoch_1.json" in str(exc)
    else:
        raise AssertionError("the corrupt member was read without an error")


def _zstd_eval(target: Path, monkeypatch: Any, *, damage: str | None = None) -> Path:
    """popularity.eval with every member compressed with Zstandard, as inspect-ai writes it (its
    big members in several frames: here each member in two); ``damage`` flips a byte of that member."""
    import zstandard

    class TwoFrames:  # zipfile's compressor interface: compress() then flush()
        def __init__(self) -> None:
            self.data = b""

        def compress(self, data: bytes) -> bytes:
            self.data += data
            return b""

        def flush(self) -> bytes:
            half = len(self.data) // 2
            return b"".join(zstandard.ZstdCompressor().compress(part) for part in (self.data[:half], self.data[half:]))

    monkeypatch.setattr(zipfile, "_check_compression", lambda method: None)
    monkeypatch.setattr(zipfile, "_get_compressor", lambda method, level=None: TwoFrames())
    target.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(POPULARITY) as source, zipfile.ZipFile(target, "w") as out:
        for info in source.infolist():
            data = source.read(info)
            out.writestr(zipfile.ZipInfo(info.filename, info.date_time), data, compress_type=93)
    monkeypatch.undo()
    if damage is not None:
        _corrupt_member(target, damage)
    return target


def test_an_eval_archive_compressed_with_zstandard_reads_as_the_deflated_one(store: Any, tmp_path: Path,
                                                                             monkeypatch: Any) -> None:
    """inspect-ai writes ``.eval`` members with Zstandard (zip method 93), which Python's zipfile
    reads only from 3.14: the same runs and events as the deflated archive; a damaged member is
    refused by name."""
    zstd = _zstd_eval(tmp_path / "zstd" / "popularity.eval", monkeypatch)
    with zipfile.ZipFile(zstd) as archive:
        assert {info.compress_type for info in archive.infolist()} == {93}
    deflated = rewrite_eval(tmp_path / "deflated" / "popularity.eval", {})
    got, want = read_runs(zstd), read_runs(deflated)
    assert [run.run_id for run in got] == [run.run_id for run in want] and len(got) == 10
    assert [[e.model_dump() for e in run.events] for run in got] == [[e.model_dump() for e in run.events] for run in want]

    damaged = _zstd_eval(tmp_path / "damaged" / "popularity.eval", monkeypatch, damage="samples/4_epoch_1.json")
    error = assert_rejected(store, damaged, where=f"{damaged}!samples/4_epoch_1.json", field=None)
    assert "unreadable archive member" in str(error)
