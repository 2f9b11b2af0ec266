"""Acceptance checks recorded in the store (SQLite and PostgreSQL): events in order, one
transaction, new attempts on re-judging, outcome-only runs, and ``procgrade accept``."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from procgrade.engine.cli import app
from procgrade.engine.errors import RunSealedError, UnknownRunError
from procgrade.engine.events import EVENT_KINDS
from procgrade.engine.log_verification import verify_log
from procgrade.engine.store import EventStore
from procgrade.oracles.acceptance import accept
from procgrade.oracles.local_sandbox import LocalSandbox, isolation_available
from procgrade.oracles.task_package import load_task

TASK = Path(__file__).resolve().parent.parent / "tasks" / "verrange"
REFERENCE = TASK / "controls/reference/app"


@pytest.fixture(scope="module")
def sandbox() -> LocalSandbox:
    ok, why = isolation_available()
    if not ok:
        pytest.skip(f"the local sandbox cannot isolate here: {why}")
    return LocalSandbox()


def _kinds(store: EventStore, run_id: str) -> list[str]:
    return [e.kind for e in store.events(run_id)]


def test_outcome_only_run_is_created_with_the_events_in_order(store: EventStore, sandbox: LocalSandbox) -> None:
    task = load_task(TASK)
    verdict = accept(store, TASK, REFERENCE, sandbox=sandbox)
    ws = verdict.result.workspace_sha256
    assert verdict.run_id == f"acceptance/verrange/{ws[:16]}"
    assert verdict.created_run and verdict.attempt == 0
    events = list(store.events(verdict.run_id))
    assert [e.kind for e in events] == ["run_started", "acceptance_started", "denylist_scan", *["test_result"] * 43,
                                        "acceptance_verdict"]
    assert [e.seq for e in events] == list(range(47))
    assert events == verdict.events
    start, began, scan, verdict_event = events[0], events[1], events[2], events[-1]
    assert (start.harness.name, start.task_id, start.actor) == ("procgrade-acceptance", "verrange", "harness")
    assert {e.actor for e in events[1:]} == {"grader"}
    assert (began.task_id, began.suite_sha256, began.backend, began.workspace_sha256, began.milestone) == (
        "verrange", task.suite_sha256, "local", ws, "final")
    assert (scan.status, scan.files_scanned, scan.findings) == ("passed", 3, None)
    results = [e for e in events if e.kind == "test_result"]
    assert results[0].test_id == "F01_acceptance.py::test_core_and_prerelease_fields"
    assert {(r.outcome, r.verifier) for r in results} == {("passed", "procgrade-acceptance")}
    assert all(r.group == r.test_id.split("::")[0] and r.duration_ms is not None for r in results)
    assert (verdict_event.verifier, verdict_event.status, verdict_event.reward) == ("procgrade-acceptance", "evaluated", "1")
    assert (verdict_event.passed, verdict_event.failed, verdict_event.errored, verdict_event.skipped) == (43, 0, 0, 0)
    assert verdict_event.suite_sha256 == task.suite_sha256 and verdict_event.duration_ms > 0
    assert verdict_event.explanation == "all 43 hidden tests passed"
    assert verdict_event.details["attempt"] == 0 and verdict_event.details["canary"] == "failed"
    assert "43 passed" in verdict_event.payload["output_tail"]
    assert all(e.parent_seq == 1 for e in events[2:])
    assert len({e.event_id for e in events}) == 47
    assert began.event_id == f"{verdict.run_id}@accept:{task.suite_sha256[:12]}:{ws[:12]}:0:0"
    info = store.run(verdict.run_id)
    assert (info.harness, info.task_id, info.event_count) == ("procgrade-acceptance", "verrange", 47)
    assert verify_log(store, verdict.run_id).ok


def test_rejudging_appends_a_second_attempt(store: EventStore, sandbox: LocalSandbox) -> None:
    first = accept(store, TASK, REFERENCE, sandbox=sandbox)
    second = accept(store, TASK, REFERENCE, sandbox=sandbox)
    assert second.run_id == first.run_id and not second.created_run and second.attempt == 1
    kinds = _kinds(store, first.run_id)
    assert len(kinds) == 1 + 2 * 46 and kinds.count("acceptance_started") == 2 and kinds.count("acceptance_verdict") == 2
    assert second.events[0].seq == 47 and second.events[0].kind == "acceptance_started"
    assert all(e.parent_seq == 47 for e in second.events[1:])
    assert not {e.event_id for e in first.events} & {e.event_id for e in second.events}
    assert second.events[-1].details["attempt"] == 1
    assert verify_log(store, first.run_id).ok


def test_check_appended_to_an_existing_run(store: EventStore, sandbox: LocalSandbox) -> None:
    run_id = "agent-run-1"
    start = EVENT_KINDS["run_started"].model_validate(
        {"run_id": run_id, "seq": 0, "event_id": "r1-0", "actor": "harness", "harness": {"name": "codex"},
         "task_id": "verrange"})
    claim = EVENT_KINDS["completion_claim"].model_validate(
        {"run_id": run_id, "seq": 1, "event_id": "r1-1", "actor": "agent", "claim": "verrange is done"})
    store.append(run_id, [start, claim])
    verdict = accept(store, TASK, TASK / "controls/partial/app", run_id, sandbox=sandbox)
    assert (verdict.run_id, verdict.created_run, verdict.attempt) == (run_id, False, 0)
    kinds = _kinds(store, run_id)
    assert kinds[:3] == ["run_started", "completion_claim", "acceptance_started"]
    assert kinds[-1] == "acceptance_verdict" and len(kinds) == 2 + 46
    last = list(store.events(run_id))[-1]
    assert (last.status, last.reward, last.passed, last.failed) == ("evaluated", "0", 41, 2)
    failed = [e.test_id for e in store.events(run_id) if e.kind == "test_result" and e.outcome == "failed"]
    assert failed == ["F03_acceptance.py::test_caret_ranges_with_zero_major_keep_leftmost_nonzero_component",
                      "F04_acceptance.py::test_caret_matching_with_zero_major"]
    assert store.run(run_id).harness == "codex"


def test_rejected_and_empty_workspaces_record_what_happened(store: EventStore, sandbox: LocalSandbox) -> None:
    rejected = accept(store, TASK, TASK / "controls/hollow-banned/app", sandbox=sandbox)
    kinds = [e.kind for e in rejected.events]
    assert kinds == ["run_started", "acceptance_started", "denylist_scan", "acceptance_verdict"]
    scan, verdict = rejected.events[2], rejected.events[3]
    assert (scan.status, scan.files_scanned) == ("rejected", 2)
    assert scan.findings == ["verrange/__init__.py:9: semver", "verrange/shim.py:3: packaging.version",
                             "verrange/shim.py:3: packaging.version.InvalidVersion"]
    assert (verdict.status, verdict.reward, verdict.passed) == ("rejected", "0", None)

    empty = accept(store, TASK, TASK / "controls/empty/app", sandbox=sandbox)
    results = [e for e in empty.events if e.kind == "test_result"]
    assert [(r.test_id, r.outcome, r.group) for r in results] == [
        (f"F0{i}_acceptance.py", "error", "collection_error") for i in range(1, 6)]
    assert (empty.events[-1].status, empty.events[-1].reward, empty.events[-1].errored) == ("evaluated", "0", 5)


def test_unknown_and_sealed_runs_are_refused_before_judging(store: EventStore, sandbox: LocalSandbox) -> None:
    with pytest.raises(UnknownRunError):
        accept(store, TASK, REFERENCE, "no-such-run", sandbox=sandbox)
    first = accept(store, TASK, TASK / "controls/hollow-banned/app", sandbox=sandbox)
    store.seal(first.run_id)
    with pytest.raises(RunSealedError):
        accept(store, TASK, REFERENCE, first.run_id, sandbox=sandbox)
    assert store.run(first.run_id).event_count == 4


def test_cli_accept_prints_the_verdict_and_exits_by_it(store_url: str, sandbox: LocalSandbox) -> None:
    runner = CliRunner()
    ok = runner.invoke(app, ["accept", "--task", str(TASK), "--workspace", str(REFERENCE), "--db", store_url])
    assert ok.exit_code == 0, ok.output
    assert "acceptance check 1 on task verrange: evaluated, reward 1 (43 passed, 0 failed, 0 errored, 0 skipped)" in ok.output
    assert "47 events appended" in ok.output and "all 43 hidden tests passed" in ok.output
    again = runner.invoke(app, ["accept", "--task", str(TASK), "--workspace", str(REFERENCE), "--db", store_url])
    assert again.exit_code == 0 and "acceptance check 2" in again.output and "46 events appended" in again.output
    bad = runner.invoke(app, ["accept", "--task", str(TASK), "--workspace", str(TASK / "controls/partial/app"),
                              "--db", store_url])
    assert bad.exit_code == 1 and "evaluated, reward 0 (41 passed, 2 failed" in bad.output
    missing = runner.invoke(app, ["accept", "--task", str(TASK), "--workspace", "/nonexistent", "--db", store_url])
    # a missing workspace is a user error (1), like every other (2 is for usage: options, arguments)
    assert missing.exit_code == 1 and "workspace: does not exist" in str(missing.exception)
