"""The four controls of tasks/verrange on the local back-end, task validation, submission markers
and the ``procgrade task validate`` command."""

from __future__ import annotations

import json
import os
import re
import shutil
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from procgrade.engine.cli import app
from procgrade.oracles import acceptance
from procgrade.oracles.acceptance import JudgeResult, judge, validate_task
from procgrade.oracles.local_sandbox import LocalSandbox, isolation_available
from procgrade.oracles.sandbox import hash_workspace
from procgrade.oracles.task_package import Task, load_task

TASK = Path(__file__).resolve().parent.parent / "tasks" / "verrange"


@pytest.fixture(scope="module")
def sandbox() -> LocalSandbox:
    ok, why = isolation_available()
    if not ok:
        pytest.skip(f"the local sandbox cannot isolate here: {why}")
    return LocalSandbox()


@pytest.fixture(scope="module")
def task() -> Task:
    return load_task(TASK)


@pytest.fixture(scope="module")
def verdicts(task: Task, sandbox: LocalSandbox) -> dict[str, JudgeResult]:
    return {name: judge(task, control.app, sandbox) for name, control in task.controls.items()}


def test_reference_is_accepted_with_all_43_tests(verdicts: dict[str, JudgeResult], task: Task) -> None:
    result = verdicts["reference"]
    assert (result.status, result.reward) == ("evaluated", "1")
    assert result.accepted
    assert (result.passed, result.failed, result.errored, result.skipped) == (43, 0, 0, 0)
    assert len(result.tests) == 43 and {c.outcome for c in result.tests} == {"passed"}
    assert result.tests[0].test_id == "F01_acceptance.py::test_core_and_prerelease_fields"
    assert {c.file for c in result.tests} == set(task.tests.test_files)
    assert result.scan is not None and (result.scan.status, result.scan.files_scanned) == ("passed", 3)
    assert result.suite_sha256 == task.suite_sha256
    assert result.workspace_sha256 == hash_workspace(task.controls["reference"].app)
    assert result.details["canary"] == "failed" and result.details["exit_code"] == 1
    assert result.explanation == "all 43 hidden tests passed"
    assert "43 passed" in result.output_tail


def test_partial_fails_exactly_its_must_fail_tests(verdicts: dict[str, JudgeResult], task: Task) -> None:
    result = verdicts["partial"]
    assert (result.status, result.reward) == ("evaluated", "0")
    assert (result.passed, result.failed, result.errored, result.skipped) == (41, 2, 0, 0)
    failing = sorted(c.test_id for c in result.tests if c.outcome != "passed")
    assert failing == sorted(task.controls["partial"].expect.must_fail_tests)
    assert all("<0.3.0" in c.message or "0.3.0" in c.message for c in result.tests if c.outcome == "failed")
    assert result.explanation.startswith("2 of 43 hidden tests failed: ")


def test_empty_workspace_is_not_a_pass(verdicts: dict[str, JudgeResult]) -> None:
    result = verdicts["empty"]
    assert (result.status, result.reward) == ("evaluated", "0")
    assert result.tests == [] and result.passed == 0
    assert [c.test_id for c in result.collection_errors] == [f"F0{i}_acceptance.py" for i in range(1, 6)]
    assert result.errored == 5
    assert all("No module named 'verrange'" in c.message for c in result.collection_errors)
    assert "no hidden test ran" in result.explanation


def test_hollow_banned_is_rejected_before_any_test_runs(verdicts: dict[str, JudgeResult]) -> None:
    result = verdicts["hollow-banned"]
    assert (result.status, result.reward) == ("rejected", "0")
    assert result.scan is not None and result.scan.status == "rejected"
    assert result.scan.findings == [
        "verrange/__init__.py:9: semver",
        "verrange/shim.py:3: packaging.version",
        "verrange/shim.py:3: packaging.version.InvalidVersion",
    ]
    assert result.tests == [] and result.collection_errors == [] and result.passed is None
    assert "exit_code" not in result.details and result.output_tail == ""
    assert result.explanation.startswith("rejected before any test ran: 3 banned import(s)")


def test_validate_task_checks_every_control(sandbox: LocalSandbox) -> None:
    task, checks = validate_task(TASK, sandbox=sandbox)
    assert [(c.name, c.ok) for c in checks] == [
        ("empty", True), ("hollow-banned", True), ("partial", True), ("reference", True)]


def test_cli_task_validate_prints_a_table_and_exits_0() -> None:
    result = CliRunner().invoke(app, ["task", "validate", str(TASK)])
    assert result.exit_code == 0, result.output
    for cell in ("reference", "partial", "empty", "hollow-banned", "rejected", "evaluated", "43", "41"):
        assert cell in result.output
    assert "all 4 controls get their expected verdict" in result.output


def test_cli_task_validate_fails_on_a_wrong_expectation(tmp_path: Path, sandbox: LocalSandbox) -> None:
    copy = tmp_path / "verrange"
    shutil.copytree(TASK, copy, ignore=shutil.ignore_patterns("empty", "hollow-banned"))
    expect = copy / "controls/partial/expect.json"
    data = json.loads(expect.read_text())
    data["must_fail_tests"] = data["must_fail_tests"][:1]
    expect.write_text(json.dumps(data))
    result = CliRunner().invoke(app, ["task", "validate", str(copy)])
    assert result.exit_code == 1
    assert "must_fail_tests mismatch; also failing: F04_acceptance.py::test_caret_matching_with_zero_major" in result.output
    assert "1 of 2 controls did not get their expected verdict: partial" in result.output


def test_submission_marker_when_the_task_requires_one(tmp_path: Path, sandbox: LocalSandbox) -> None:
    copy = tmp_path / "verrange"
    shutil.copytree(TASK, copy, ignore=shutil.ignore_patterns("controls"))
    manifest = copy / "source/manifest.json"
    data = json.loads(manifest.read_text())
    data["submit_marker"] = {"path": ".procgrade/submit", "content": "CODINGBENCH_SUBMIT"}
    manifest.write_text(json.dumps(data))
    task = load_task(copy)
    workspace = tmp_path / "ws"
    shutil.copytree(TASK / "controls/reference/app", workspace)

    missing = judge(task, workspace, sandbox)
    assert (missing.status, missing.reward, missing.scan) == ("not_submitted", "0", None)
    assert "does not exist" in missing.explanation and missing.workspace_sha256 == hash_workspace(workspace)

    (workspace / ".procgrade").mkdir()
    (workspace / ".procgrade/submit").write_text("done\n")
    assert judge(task, workspace, sandbox).status == "not_submitted"

    (workspace / ".procgrade/submit").write_text("CODINGBENCH_SUBMIT\n")
    assert (judge(task, workspace, sandbox).status, judge(task, workspace, sandbox).reward) == ("evaluated", "1")

    outside = tmp_path / "submit"
    outside.write_text("CODINGBENCH_SUBMIT")
    (workspace / ".procgrade/submit").unlink()
    assert judge(task, workspace, sandbox, submit_file=outside).reward == "1"


def _judged_within(seconds: float, *args, **kwargs) -> JudgeResult:
    """``judge(*args, **kwargs)`` in a thread, which must finish in time (a hang fails, not blocks)."""
    done: list[JudgeResult] = []
    thread = threading.Thread(target=lambda: done.append(judge(*args, **kwargs)), daemon=True)
    thread.start()
    thread.join(seconds)
    assert done, f"the judge still runs after {seconds}s"
    return done[0]


def test_a_marker_that_is_no_regular_file_is_no_submission_and_cannot_hang_the_judge(tmp_path: Path,
                                                                                      sandbox: LocalSandbox) -> None:
    copy = tmp_path / "verrange"
    shutil.copytree(TASK, copy, ignore=shutil.ignore_patterns("controls"))
    manifest = copy / "source/manifest.json"
    data = json.loads(manifest.read_text())
    data["submit_marker"] = {"path": "logs/submit", "content": "CODINGBENCH_SUBMIT"}
    manifest.write_text(json.dumps(data))
    task = load_task(copy)
    workspace = tmp_path / "ws"
    shutil.copytree(TASK / "controls/reference/app", workspace)
    marker = workspace / "logs/submit"
    marker.parent.mkdir()
    real = tmp_path / "real-marker"
    real.write_text("CODINGBENCH_SUBMIT\n")

    def make_fifo() -> None:
        os.mkfifo(marker)

    for make, why in ((make_fifo, "is not a regular file"),                                # /tmp/atk10
                      (lambda: os.symlink("/dev/zero", marker), "is not a regular file"),   # endless
                      (lambda: os.symlink(real, marker), "is not a regular file"),          # a link, even to the text
                      (lambda: marker.mkdir(), "is not a regular file"),
                      (lambda: marker.write_text("CODINGBENCH_SUBMIT\n\n\n"), "does not hold"),
                      (lambda: marker.write_text("CODINGBENCH_SUBMIT" + "x" * (1 << 20)), "does not hold")):
        make()
        result = _judged_within(30, task, workspace, sandbox)
        assert (result.status, result.reward, result.scan) == ("not_submitted", "0", None), make
        assert why in result.explanation and result.workspace_sha256 is not None
        if marker.is_dir() and not marker.is_symlink():
            marker.rmdir()
        else:
            marker.unlink()
    os.mkfifo(tmp_path / "fifo")
    result = _judged_within(30, task, workspace, sandbox, submit_file=tmp_path / "fifo")
    assert result.status == "not_submitted" and "is not a regular file" in result.explanation
    marker.write_text("CODINGBENCH_SUBMIT\r\n")
    assert judge(task, workspace, sandbox).reward == "1"


# --- judge faults are infrastructure errors; a submission that breaks the runner is not ---------


def _task_copy(tmp_path: Path, change_manifest=None, test_text: str | None = None) -> Task:
    copy = tmp_path / "verrange"
    shutil.copytree(TASK, copy, ignore=shutil.ignore_patterns("controls"))
    for rel in ("milestones/final/test_manifest.json", "source/manifest.json"):
        path = copy / rel
        data = json.loads(path.read_text())
        if change_manifest:
            change_manifest(data, rel)
        path.write_text(json.dumps(data))
    if test_text is not None:
        for test in (copy / "milestones/final/tests").glob("F0*_acceptance.py"):
            test.write_text(test_text)
    return load_task(copy)


def test_a_broken_judge_interpreter_is_an_infrastructure_error(task: Task) -> None:
    result = judge(task, TASK / "controls/reference/app", LocalSandbox("/nonexistent/python3"))
    assert (result.status, result.reward) == ("infra_error", None)
    assert result.explanation.startswith("judge error: cannot run the judge interpreter /nonexistent/python3")


def test_a_broken_test_command_is_an_infrastructure_error(tmp_path: Path, sandbox: LocalSandbox) -> None:
    def bad_option(data: dict, rel: str) -> None:
        data["test_command"] = data["test_command"].replace("-rfE", "--no-such-option")

    task = _task_copy(tmp_path, bad_option)
    result = judge(task, TASK / "controls/reference/app", sandbox)
    assert (result.status, result.reward) == ("infra_error", None)
    assert "judge error: the runner wrote no report (exit 4)" in result.explanation
    assert "on an empty workspace either" in result.explanation


def test_a_suite_with_no_tests_is_a_judge_error_not_a_pass(tmp_path: Path, sandbox: LocalSandbox) -> None:
    def no_count(data: dict, rel: str) -> None:
        data.pop("expected_test_count", None)

    task = _task_copy(tmp_path, no_count, test_text="import verrange\n")
    result = judge(task, TASK / "controls/reference/app", sandbox)
    assert (result.status, result.reward) == ("infra_error", None)
    assert result.explanation == ("judge error: no test ran: the report lists no hidden test (exit 1), and the "
                                  "hidden test files define none")
    # A suite whose ini makes pytest collect none of its tests (so its text says nothing): the
    # empty workspace lists nothing either, so it is not the submission's doing.
    task = _task_copy(tmp_path / "ini", no_count, test_text="def test_x():\n    pass\n")
    ini = task.root / "milestones/final/tests/pytest.ini"
    ini.write_text(ini.read_text() + "python_functions = check_*\n")
    result = judge(load_task(task.root), TASK / "controls/reference/app", sandbox)
    assert (result.status, result.reward) == ("infra_error", None)
    assert result.explanation.startswith("judge error: no test ran: the report lists no hidden test (exit 5); "
                                         "no test ran on an empty workspace either")


def test_a_submission_that_kills_the_runner_gets_0_not_an_infra_error(tmp_path: Path, task: Task,
                                                                       sandbox: LocalSandbox) -> None:
    ws = tmp_path / "ws"
    shutil.copytree(TASK / "controls/reference/app", ws)
    init = ws / "verrange/__init__.py"
    init.write_text("import os\nos._exit(4)\n" + init.read_text())
    result = judge(task, ws, sandbox)
    assert (result.status, result.reward) == ("evaluated", "0")
    assert result.explanation == ("the runner wrote no report (exit 4); on an empty workspace the same command "
                                  "reports normally, so the submission broke the run")


def test_a_submission_that_interrupts_collection_gets_0_not_an_infra_error(tmp_path: Path, task: Task,
                                                                           sandbox: LocalSandbox) -> None:
    # /tmp/atk1: pytest stops at the first import and writes a report listing no test (exit 2).
    ws = tmp_path / "ws"
    (ws / "verrange").mkdir(parents=True)
    (ws / "verrange/__init__.py").write_text("raise KeyboardInterrupt\n")
    result = judge(task, ws, sandbox)
    assert (result.status, result.reward) == ("evaluated", "0")
    assert result.explanation == ("no test ran: the report lists no hidden test (exit 2); on an empty workspace the "
                                  "same command reports normally, so the submission broke the run")


def test_unisolated_mode_still_judges_correctly(task: Task) -> None:
    result = judge(task, TASK / "controls/partial/app", LocalSandbox(isolate=False))
    assert (result.status, result.reward, result.passed, result.failed) == ("evaluated", "0", 41, 2)
    assert result.details["sandbox"]["isolated"] is False


# --- the canary ----------------------------------------------------------------------------------


def test_the_canary_has_an_ordinary_random_name_and_body(task: Task) -> None:
    names, places = set(), set()
    for _ in range(40):
        j = acceptance._Judgement(task, TASK / "controls/reference/app", LocalSandbox(), None)
        assert re.fullmatch(r"test_[a-z]{10}\.py", j.canary.name)
        assert re.fullmatch(r"test_[a-z]{10}\.py::test_[a-z]{10}", j.canary_id)
        text = j.canary.data.decode()
        for word in ("canary", "procgrade", "judge", "must fail", '"""', "#"):
            assert word not in text.lower()
        namespace: dict = {}
        exec(compile(text, j.canary.name, "exec"), namespace)  # noqa: S102 - the judge's own canary text
        with pytest.raises(AssertionError):
            namespace[j.canary_id.split("::")[1]]()
        assert sorted(j.test_files) == sorted([*task.tests.test_files, j.canary.name])
        assert [f for f in j.test_files if f != j.canary.name] == task.tests.test_files
        names.add(j.canary.name)
        places.add(j.test_files.index(j.canary.name))
    assert len(names) == 40 and len(places) > 1


def test_the_canary_never_takes_a_name_of_the_suite(task: Task, monkeypatch: pytest.MonkeyPatch) -> None:
    taken = ["test_aaaaaaaaaa", "f01_acceptance", "conftest"]
    given = iter([*taken, "test_bbbbbbbbbb", "test_cccccccccc"])
    monkeypatch.setattr(acceptance, "_random_name", lambda: next(given))
    suite = [*task.suite, acceptance.SuiteFile("sub/Test_AAAAAAAAAA.py", b"", True)]
    fake = type("T", (), {"suite": suite})()
    assert acceptance._canary_names(fake) == ("test_bbbbbbbbbb", "test_cccccccccc")
