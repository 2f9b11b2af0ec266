"""The DevAI (Agent-as-a-Judge) trajectory importer (``devai``): the one committed trajectory
(OpenHands on task 39) with its schema and instance, the store round trip, ``procgrade
score``, sub-agent naming, and files that break the trajectory schema.

Expected numbers were derived by reading the 34 steps (comments say which steps make which
events), not by printing the importer's output.
"""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from procgrade.engine.cli import app
from procgrade.engine.importers.devai import TRAJECTORY_SCHEMA
from procgrade.engine.ingest import ingest_paths
from import_checks import FIXTURES, actors, assert_rejected, kinds, of_kind, read_one, snapshot, test_runs_found

HERE = FIXTURES / "devai"
NAME = "39_Drug_Response_Prediction_SVM_GDSC_ML"
TRAJECTORY = HERE / "trajectories" / "OpenHands" / f"{NAME}.json"
SCHEMA = HERE / "trajectories" / "trajectory-schema.json"
INSTANCE = HERE / "instances" / f"{NAME}.json"
RUN_ID = f"devai/OpenHands/{NAME}"

# Steps whose action is "Running command: ..." (20) and "Running Python code interactively: ..." (13).
SHELL_STEPS = [0, 8, 11, 12, 13, 14, 15, 16, 17, 18, 19, 23, 24, 25, 26, 27, 28, 29, 31, 32]
IPYTHON_STEPS = [1, 2, 3, 4, 5, 6, 7, 9, 10, 20, 21, 22, 30]


def cited(event) -> list[str]:
    return [s["record"] for s in event.payload["source"]]


def test_task_39_trajectory() -> None:
    run = read_one(HERE)
    assert run.run_id == RUN_ID
    assert run.files == [f"trajectories/OpenHands/{NAME}.json", "trajectories/trajectory-schema.json",
                         f"instances/{NAME}.json"]
    # Step 0's user message (the task) + 34 thoughts -> 35 messages. 20 shell commands (step 0's
    # "touch" creates 3 files, step 18 cats performance.txt); 13 IPython cells: 10 are file-skill
    # calls only (open_file x3 -> reads; insert_content_at_line x4, edit_file_by_replace x2,
    # create_file -> edits), 3 are other code -> commands (step 7 also writes the CSV it makes,
    # step 9 does not parse, step 20 shows an image). Step 33 has no action: the claim.
    assert len(run.events) == 75
    assert kinds(run) == {"command": 23, "completion_claim": 1, "file_edit": 11, "file_read": 4, "message": 35,
                          "run_started": 1}
    assert actors(run) == {"agent": 73, "harness": 1, "user": 1}
    assert test_runs_found(run) == []  # "python3 src/train.py" is a script run, not a test suite
    assert [e for e in run.events if e.kind in ("acceptance_verdict", "test_result", "run_ended")] == []

    start = run.events[0]
    assert (start.harness.name, start.model, start.task_id) == ("OpenHands", "gpt-4o-2024-05-13", NAME)
    assert start.labels == {"benchmark": "DevAI", "system": "OpenHands", "steps": "34",
                            "accumulated_cost": "2.6073150000000003", "accumulated_time": "233.4816267490387",
                            "input_tokens": "508344", "output_tokens": "4373"}
    instance = json.loads(INSTANCE.read_text(encoding="utf-8"))
    assert cited(start) == ["instance"] and start.payload["source"][0]["raw"] == instance
    assert start.task_id == instance["name"]

    user = of_kind(run, "message")[0]
    assert (user.actor, cited(user)) == ("user", ["steps[0]"])
    assert user.text.startswith(instance["query"])  # OpenHands appended its time-limit note
    thoughts = [e for e in of_kind(run, "message") if e.actor == "agent"]
    assert len(thoughts) == 34 and all(e.intent == "reasoning" for e in thoughts)

    commands = of_kind(run, "command")
    shell = [e for e in commands if cited(e)[0] in {f"steps[{i}]" for i in SHELL_STEPS}]
    assert [cited(e)[0] for e in shell] == [f"steps[{i}]" for i in SHELL_STEPS]
    assert shell[0].command == "mkdir -p src results/metrics results/figures\ntouch src/data_loader.py src/model.py src/train.py"
    assert shell[1].command == "python3 src/train.py"
    # OpenHands printed no exit codes in these observations: none is invented.
    assert all(e.exit_code is None for e in commands) and all(e.output_sha256 for e in commands)
    cells = [e for e in commands if e not in shell]
    assert [cited(e)[0] for e in cells] == ["steps[7]", "steps[9]", "steps[20]"]
    assert cells[1].command.endswith("</execute_ipython)")

    edits = [(e.path, e.edit_kind, cited(e)[0], e.parent_seq) for e in of_kind(run, "file_edit")]
    touch = shell[0].seq
    assert edits == [
        ("src/data_loader.py", "create", "steps[0]", touch), ("src/model.py", "create", "steps[0]", touch),
        ("src/train.py", "create", "steps[0]", touch),
        ("src/data_loader.py", "modify", "steps[2]", None), ("src/model.py", "modify", "steps[4]", None),
        ("src/train.py", "modify", "steps[6]", None),
        ("path_to_gdsc_dataset.csv", "create", "steps[7]", cells[0].seq),
        ("src/train.py", "modify", "steps[10]", None),
        ("results/drug_response_prediction_report.md", "create", "steps[21]", None),
        ("results/drug_response_prediction_report.md", "modify", "steps[22]", None),
        ("results/drug_response_prediction_report.md", "modify", "steps[30]", None)]
    reads = [(e.path, cited(e)[0]) for e in of_kind(run, "file_read")]
    assert reads == [("src/data_loader.py", "steps[1]"), ("src/model.py", "steps[3]"), ("src/train.py", "steps[5]"),
                     ("results/metrics/performance.txt", "steps[18]")]

    (claim,) = of_kind(run, "completion_claim")
    assert (claim.actor, claim.scope, cited(claim)) == ("agent", "run", ["steps[33]"])
    assert claim.claim.startswith("The PDF report `drug_response_prediction_report.pdf` has been successfully generated")
    # Every step is kept whole, with its usage, in the first event made from it.
    assert run.events[1].payload["source"][0]["raw"]["step_usage"]["cost"] == 0.02311


def test_single_file_and_other_systems(tmp_path: Path) -> None:
    alone = read_one(TRAJECTORY)
    full = read_one(HERE)
    assert alone.run_id == RUN_ID and alone.files == [f"{NAME}.json"]
    assert [(e.kind, e.actor) for e in alone.events] == [(e.kind, e.actor) for e in full.events]
    assert cited(alone.events[0]) == []  # no instance next to it

    other = tmp_path / "MetaGPT" / "07_Sentiment.json"
    other.parent.mkdir()
    steps = json.loads(TRAJECTORY.read_text(encoding="utf-8"))[:3]
    steps[1]["agent"]["agent_name"] = "Engineer"
    steps[2]["agent"]["agent_name"] = "Engineer"
    steps[0]["agent"]["agent_name"] = "ProductManager"
    steps.append({**copy.deepcopy(steps[2]), "step": 3, "agent": {"thought": "Done.", "action": None,
                                                               "agent_name": "ProductManager"},
                  "environment": None})
    other.write_text(json.dumps(steps), encoding="utf-8")
    run = read_one(other)
    assert run.run_id == "devai/MetaGPT/07_Sentiment" and run.events[0].harness.name == "MetaGPT"
    # Step 0: user + thought + command (+3 touch edits); steps 1-2 by another agent: thought +
    # file event each; step 3: thought + the claim.
    assert actors(run) == {"agent": 7, "harness": 1, "subagent:Engineer": 4, "user": 1}
    assert of_kind(run, "completion_claim")[0].actor == "agent"


def test_embedded_schema_is_the_published_one() -> None:
    assert json.loads(SCHEMA.read_text(encoding="utf-8")) == TRAJECTORY_SCHEMA


def test_store_round_trip_and_score(store: Any, store_url: str) -> None:
    first = ingest_paths(store, [HERE])
    assert [(r.format, r.run_id, r.result.appended) for r in first.reports] == [("devai", RUN_ID, 75)]
    assert sorted(Path(u).name for u in first.unrecognised) == ["LICENSE", "README.md"]
    info = store.run(RUN_ID)
    assert (info.source_format, info.unparsed, info.model) == ("devai", 0, "gpt-4o-2024-05-13")
    before = snapshot(store)
    again = ingest_paths(store, [HERE], format="devai")
    assert [r.run_id for r in again.reports] == [RUN_ID] and again.reports[0].result.no_op
    assert snapshot(store) == before
    result = CliRunner().invoke(app, ["score", RUN_ID, "--db", store_url])
    assert result.exit_code == 0, result.output


def broken(tmp_path: Path, name: str, steps: Any = None, raw: bytes | None = None) -> Path:
    folder = tmp_path / name / "OpenHands"
    folder.mkdir(parents=True)
    shutil.copy(SCHEMA, folder.parent / "trajectory-schema.json")
    path = folder / f"{NAME}.json"
    if raw is not None:
        path.write_bytes(raw)
    else:
        path.write_text(json.dumps(steps, indent=2), encoding="utf-8")
    return path


def test_broken_trajectories_are_rejected(store: Any, tmp_path: Path) -> None:
    ingest_paths(store, [HERE])
    steps = json.loads(TRAJECTORY.read_text(encoding="utf-8"))
    raw = TRAJECTORY.read_bytes()

    no_thought = copy.deepcopy(steps)
    del no_thought[5]["agent"]["thought"]
    path = broken(tmp_path, "no_thought", no_thought)
    error = assert_rejected(store, path, where=f"{path}:steps[5]", field="agent.thought")
    assert error.reason == "missing"

    no_usage = copy.deepcopy(steps)
    del no_usage[12]["accumulated_usage"]["accumulated_cost"]
    path = broken(tmp_path, "no_usage", no_usage)
    assert_rejected(store, path, where=f"{path}:steps[12]", field="accumulated_usage.accumulated_cost")

    wrong = copy.deepcopy(steps)
    wrong[3]["step"] = "3"
    path = broken(tmp_path, "wrong", wrong)
    error = assert_rejected(store, path, where=f"{path}:steps[3]", field="step")
    assert "expected an integer" in error.reason

    action = copy.deepcopy(steps)
    action[8]["agent"]["action"] = ["python3", "src/train.py"]
    path = broken(tmp_path, "action", action)
    error = assert_rejected(store, path, where=f"{path}:steps[8]", field="agent.action")
    assert "expected a string or null" in error.reason

    path = broken(tmp_path, "cut", raw=raw[: len(raw) // 3])
    assert_rejected(store, path, where=f"{path}:", field=None)

    path = broken(tmp_path, "garbage", raw=raw[:2000] + b"\xff\x00" + raw[2000:])
    error = assert_rejected(store, path, where=f"{path}:", field=None)
    assert "not UTF-8" in str(error)

    path = broken(tmp_path, "empty", [])
    assert_rejected(store, path, format="devai", where=str(path), field=None)
