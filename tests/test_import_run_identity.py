"""Run identity across systems: a leaderboard archive's systems never collide, and what an
archive does not say can be given at ingest (--system, --model, --label), never contradicting it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from import_checks import FIXTURES, read_runs, snapshot
from procgrade.engine.errors import InputError
from procgrade.engine.importers.provenance import Overrides, experiment_of, overrides, parse_labels
from procgrade.engine.importers.source_tree import open_tree
from procgrade.engine.ingest import ingest_paths

SWE = FIXTURES / "swe-agent"
PYDICOM = SWE / "pydicom__pydicom-1458.traj"
MARSHMALLOW = SWE / "marshmallow-code__marshmallow-1867.traj"
MINI = SWE / "native_mini-swe-agent-trajectory.json"
SYSTEMS = ("20250101_sweagent_model-a", "20250202_sweagent_model-b")


def _leaderboard(root: Path, *, with_reports: bool = True) -> Path:
    """SWE-bench's experiments layout: two systems' runs of the same two instances, each
    system with its metadata.yaml and per-instance reports under logs/."""
    for index, system in enumerate(SYSTEMS):
        folder = root / "evaluation" / "verified" / system
        (folder / "trajs").mkdir(parents=True)
        shutil.copy(PYDICOM, folder / "trajs" / PYDICOM.name)
        shutil.copy(MARSHMALLOW, folder / "trajs" / MARSHMALLOW.name)
        (folder / "metadata.yaml").write_text(
            f"info:\n  name: SWE-agent + model {'AB'[index]}\ntags:\n  model:\n  - model-{'ab'[index]}\n")
        if with_reports:
            for instance, resolved in (("pydicom__pydicom-1458", index == 0), ("marshmallow-code__marshmallow-1867", True)):
                logs = folder / "logs" / instance
                logs.mkdir(parents=True)
                (logs / "report.json").write_text(json.dumps({instance: {
                    "patch_is_None": False, "patch_exists": True, "patch_successfully_applied": True,
                    "resolved": resolved, "tests_status": {"FAIL_TO_PASS": {"success": ["t1"] if resolved else [],
                                                                            "failure": [] if resolved else ["t1"]}}}}))
    return root / "evaluation"


def test_two_systems_of_one_archive_side_by_side(store: Any, tmp_path: Path) -> None:
    archive = _leaderboard(tmp_path)
    done = ingest_paths(store, [archive])
    ids = sorted(r.run_id for r in done.reports)
    assert ids == [f"swe-agent/{s}/{i}" for s in SYSTEMS
                   for i in ("marshmallow-code__marshmallow-1867", "pydicom__pydicom-1458")]
    assert not done.unrecognised or all(u.endswith("metadata.yaml") for u in done.unrecognised)
    for system, letter in zip(SYSTEMS, "ab"):
        events = list(store.events(f"swe-agent/{system}/pydicom__pydicom-1458"))
        started = events[0]
        assert started.labels["system"] == system and started.labels["split"] == "verified"
        assert started.labels["benchmark"] == "swe-bench" and started.labels["system_name"] == f"SWE-agent + model {letter.upper()}"
        assert started.model == f"model-{letter}"  # the 0.x trajectory names no model: metadata.yaml's
        marsh = list(store.events(f"swe-agent/{system}/marshmallow-code__marshmallow-1867"))
        assert marsh[0].model == "gpt-4o"  # the trajectory's own model wins over metadata.yaml
        verdicts = [e for e in events if e.kind == "acceptance_verdict"]
        assert [v.reward for v in verdicts] == ["1" if letter == "a" else "0"]  # logs/<instance>/report.json
    # Pointing at one system's folder gives the same runs: a no-op (the reports are cited as
    # ../logs/<instance>/report.json from the trajectory's folder, whichever folder was named).
    before = snapshot(store)
    again = ingest_paths(store, [archive / "verified" / SYSTEMS[0]])
    assert len(again.reports) == 2 and all(r.result.no_op for r in again.reports)
    assert snapshot(store) == before


def test_experiment_folders_recognised(tmp_path: Path) -> None:
    sweagent = tmp_path / "trajectories" / "me" / "gpt4__swe-bench-dev__default__t-0.00__p-0.95__c-3.00__install-1" / "x__x-1"
    sweagent.mkdir(parents=True)
    shutil.copy(PYDICOM, sweagent / "x__x-1.traj")
    tree = open_tree(tmp_path)
    found = experiment_of(tree, "trajectories/me/gpt4__swe-bench-dev__default__t-0.00__p-0.95__c-3.00__install-1/x__x-1/x__x-1.traj",
                          instance_id="x__x-1")
    assert found.system == "gpt4__swe-bench-dev__default__t-0.00__p-0.95__c-3.00__install-1" and found.split is None
    plain = tmp_path / "Downloads"
    plain.mkdir()
    shutil.copy(PYDICOM, plain / PYDICOM.name)
    assert experiment_of(open_tree(plain), PYDICOM.name).system is None  # a folder is not a system by itself
    assert experiment_of(open_tree(tmp_path), f"Downloads/{PYDICOM.name}").system is None


def test_no_system_known_the_model_keeps_runs_apart() -> None:
    ids = sorted(r.run_id for r in read_runs(SWE))
    assert ids == ["mini-swe-agent/anthropic/claude-3-5-sonnet-20241022/native_mini-swe-agent-trajectory",
                   "swe-agent/gpt-4o/marshmallow-code__marshmallow-1867", "swe-agent/pydicom__pydicom-1458"]


def test_system_model_and_labels_given_at_ingest(store: Any, tmp_path: Path) -> None:
    for system in ("sys-a", "sys-b"):  # the same files under two plain folders, one ingest per system
        folder = tmp_path / system
        folder.mkdir()
        shutil.copy(PYDICOM, folder / PYDICOM.name)
        done = ingest_paths(store, [folder], overrides=Overrides(system=system, model="gpt-4-0613",
                                                                 labels={"benchmark": "swe-bench", "split": "dev"}))
        (report,) = done.reports
        assert report.run_id == f"swe-agent/{system}/pydicom__pydicom-1458" and not report.result.no_op
        started = next(iter(store.events(report.run_id)))
        assert started.model == "gpt-4-0613"
        assert {k: started.labels[k] for k in ("system", "benchmark", "split")} == {
            "system": system, "benchmark": "swe-bench", "split": "dev"}


def test_given_values_never_contradict_the_archive(store: Any, tmp_path: Path) -> None:
    archive = _leaderboard(tmp_path, with_reports=False)
    folder = archive / "verified" / SYSTEMS[0]
    cases = [(Overrides(system="other"), "labels.system", "'other'", SYSTEMS[0]),
             (Overrides(model="gpt-3.5"), "model", "'gpt-3.5'", "'gpt-4o'")]
    for given, field, mine, theirs in cases:
        before = snapshot(store)
        with pytest.raises(InputError) as caught:
            ingest_paths(store, [folder / "trajs" / MARSHMALLOW.name], overrides=given)
        message = str(caught.value)
        assert caught.value.field == field and mine in message and theirs in message, message
        assert MARSHMALLOW.name in message
        assert snapshot(store) == before
    # a label the archive gives: the same value is fine, another is an error
    same = ingest_paths(store, [folder / "trajs" / PYDICOM.name], overrides=Overrides(labels={"split": "verified"}))
    assert len(same.reports) == 1
    with pytest.raises(InputError) as caught:
        ingest_paths(store, [folder / "trajs" / PYDICOM.name], overrides=Overrides(labels={"split": "lite"}))
    assert caught.value.field == "labels.split" and "'lite'" in str(caught.value) and "'verified'" in str(caught.value)


def test_terminal_bench_system_given_and_conflicting() -> None:
    sample = FIXTURES / "terminal-bench-claude-code" / "data" / "traj" / "claude_code" / "claude_code_v3"
    with overrides(Overrides(system="claude_code_v3", labels={"harness_setup": "tb-0.1.1"})):
        runs = read_runs(sample)
    assert {r.events[0].labels["harness_setup"] for r in runs} == {"tb-0.1.1"}
    with overrides(Overrides(system="deepseek")), pytest.raises(InputError) as caught:
        read_runs(sample)
    assert "'deepseek'" in str(caught.value) and "'claude_code_v3'" in str(caught.value)


def test_native_logs_refuse_overrides(store: Any, tmp_path: Path) -> None:
    native = tmp_path / "run.jsonl"
    native.write_text(json.dumps({"run_id": "r1", "seq": 0, "event_id": "e0", "kind": "run_started", "actor": "harness",
                                  "harness": {"name": "h"}}) + "\n")
    with pytest.raises(InputError) as caught:
        ingest_paths(store, [native], overrides=Overrides(system="x"))
    assert "native log" in str(caught.value) and "run.jsonl" in str(caught.value)


def test_label_parsing() -> None:
    assert parse_labels(["split=lite", "benchmark=swe-bench", "note=a=b"]) == {
        "split": "lite", "benchmark": "swe-bench", "note": "a=b"}
    for bad in (["novalue"], ["=x"], ["1x=y"], ["system=x"], ["a=1", "a=2"]):
        with pytest.raises(InputError):
            parse_labels(bad)


def test_cli_flags(tmp_path: Path, store_url: str) -> None:
    from typer.testing import CliRunner

    from procgrade.engine.cli import app

    folder = tmp_path / "plain"
    folder.mkdir()
    shutil.copy(PYDICOM, folder / PYDICOM.name)
    result = CliRunner().invoke(app, ["ingest", str(folder), "--system", "my-sys", "--model", "gpt-4",
                                      "--label", "split=dev", "--label", "benchmark=swe-bench", "--db", store_url])
    assert result.exit_code == 0, result.output
    assert "swe-agent/my-sys/pydicom__pydicom-1458" in result.output
    bad = CliRunner().invoke(app, ["ingest", str(folder), "--label", "oops", "--db", store_url])
    assert bad.exit_code != 0


def test_generic_folders_are_passed_over_not_taken(tmp_path: Path) -> None:
    for layout in ("home/me/logs", "SWE-agent/trajectories", "exp-1/trajs"):
        folder = tmp_path / layout
        folder.mkdir(parents=True)
        shutil.copy(PYDICOM, folder / PYDICOM.name)
    tree = open_tree(tmp_path)
    assert experiment_of(tree, f"home/me/logs/{PYDICOM.name}").system is None
    assert experiment_of(tree, f"SWE-agent/trajectories/{PYDICOM.name}").system is None
    assert experiment_of(tree, f"exp-1/trajs/{PYDICOM.name}").system == "exp-1"
