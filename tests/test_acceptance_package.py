"""Task packages: the sample task loads, the suite hash is what the manifest says, and every
malformed package is refused with ``FILE: field: reason`` for each problem."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from procgrade.oracles.task_package import TaskPackageError, fill_template, load_task, suite_sha256

TASK = Path(__file__).resolve().parent.parent / "tasks" / "verrange"


@pytest.fixture
def task_copy(tmp_path: Path) -> Path:
    target = tmp_path / "verrange"
    shutil.copytree(TASK, target)
    return target


def _edit_json(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def test_sample_task_loads_with_its_suite_and_controls() -> None:
    task = load_task(TASK)
    assert task.task_id == "verrange"
    assert task.milestone == "final"
    assert task.tests.expected_test_count == 43
    assert task.tests.judge_timeout_sec == 300
    assert sorted(task.controls) == ["empty", "hollow-banned", "partial", "reference"]
    assert task.controls["reference"].expect.reward == 1
    assert task.controls["partial"].expect.must_fail_tests == [
        "F03_acceptance.py::test_caret_ranges_with_zero_major_keep_leftmost_nonzero_component",
        "F04_acceptance.py::test_caret_matching_with_zero_major",
    ]
    assert [f.name for f in task.suite] == [*task.tests.test_files, "conftest.py", "pytest.ini"]
    assert "semver" in task.denylist.import_ban
    assert task.manifest.submit_marker is None


def test_suite_hash_is_sha256_of_canonical_sorted_name_hash_pairs() -> None:
    task = load_task(TASK)
    names = task.tests.test_files + task.tests.support_files
    pairs = sorted([n, hashlib.sha256((TASK / "milestones/final/tests" / n).read_bytes()).hexdigest()] for n in names)
    expected = hashlib.sha256(json.dumps(pairs, separators=(",", ":")).encode()).hexdigest()
    assert task.suite_sha256 == expected == suite_sha256(list(task.suite))


def test_suite_hash_changes_with_one_byte_of_a_test(task_copy: Path) -> None:
    before = load_task(task_copy).suite_sha256
    test = task_copy / "milestones/final/tests/F05_acceptance.py"
    test.write_bytes(test.read_bytes() + b"\n")
    assert load_task(task_copy).suite_sha256 != before


def test_every_problem_is_reported_as_file_field_reason(task_copy: Path) -> None:
    tm = task_copy / "milestones/final/test_manifest.json"
    _edit_json(tm, lambda d: d.update(timeout=5, test_files=d["test_files"] + ["F09_missing.py"]))
    _edit_json(task_copy / "controls/partial/expect.json", lambda d: d.update(reward=2))
    _edit_json(task_copy / "source/denylist.json", lambda d: d.update(import_ban=["semver", "not a module"]))
    with pytest.raises(TaskPackageError) as caught:
        load_task(task_copy)
    problems = caught.value.problems
    text = str(caught.value)
    assert f"{tm}: timeout: unknown field (not part of the layout)" in problems
    assert any(p.startswith(f"{task_copy / 'controls/partial/expect.json'}: reward: ") for p in problems)
    assert any(p.startswith(f"{task_copy / 'source/denylist.json'}: import_ban: ") and "'not a module'" in p
               for p in problems)
    assert len(problems) == 3 and text.count("\n") == 2


def test_missing_files_and_inconsistent_manifests(task_copy: Path) -> None:
    (task_copy / "milestones/final/tests/conftest.py").unlink()
    _edit_json(task_copy / "source/manifest.json", lambda d: d.update(task_id="other", test_command="pytest {test_files} {junit_xml}"))
    _edit_json(task_copy / "controls/partial/expect.json",
               lambda d: d.update(must_fail_tests=["F03_acceptance.py::x", "F99.py::y", "no-separator"]))
    (task_copy / "controls/reference/expect.json").unlink()
    with pytest.raises(TaskPackageError) as caught:
        load_task(task_copy)
    text = str(caught.value)
    assert "test_manifest.json: support_files: 'conftest.py' is not a regular file" in text
    assert "source/manifest.json: task_id: 'other' differs from the folder name 'verrange'" in text
    assert "source/manifest.json: test_command: differs from milestones/final/test_manifest.json" in text
    assert "controls/partial/expect.json: must_fail_tests: 'F99.py::y' is not a test id" in text
    assert "controls/partial/expect.json: must_fail_tests: 'no-separator' is not a test id" in text
    assert "'F03_acceptance.py::x'" not in text  # a well-formed id in a listed file is fine at load
    assert "controls/reference/expect.json: -: missing" in text


@pytest.mark.parametrize("command, reason", [
    ("pytest {tests} --junitxml={junit_xml} {test_files}", "unknown placeholder(s) {tests}"),
    ("pytest {test_files}", "must use {junit_xml}"),
    ("pytest --junitxml={junit_xml}", "must use {test_files}"),
])
def test_command_template_is_checked(task_copy: Path, command: str, reason: str) -> None:
    for rel in ("milestones/final/test_manifest.json", "source/manifest.json"):
        _edit_json(task_copy / rel, lambda d: d.update(test_command=command))
    with pytest.raises(TaskPackageError) as caught:
        load_task(task_copy)
    assert f"test_command: {reason}" in str(caught.value)


@pytest.mark.parametrize("name", ["../escape.py", "/abs/F01.py", "sub/../F01_acceptance.py", "F-01.py", "notes.txt"])
def test_test_files_must_be_importable_paths_inside_the_tests_folder(task_copy: Path, name: str) -> None:
    _edit_json(task_copy / "milestones/final/test_manifest.json", lambda d: d.update(test_files=[name]))
    with pytest.raises(TaskPackageError, match="test_files"):
        load_task(task_copy)


def test_submit_marker_is_an_optional_strict_field(task_copy: Path) -> None:
    manifest = task_copy / "source/manifest.json"
    _edit_json(manifest, lambda d: d.update(submit_marker={"path": ".submit", "content": "CODINGBENCH_SUBMIT"}))
    assert load_task(task_copy).manifest.submit_marker.content == "CODINGBENCH_SUBMIT"
    _edit_json(manifest, lambda d: d.update(submit_marker={"path": "../outside", "content": "x"}))
    with pytest.raises(TaskPackageError, match="submit_marker.path"):
        load_task(task_copy)


def test_not_a_task_folder(tmp_path: Path) -> None:
    with pytest.raises(TaskPackageError) as caught:
        load_task(tmp_path)
    text = str(caught.value)
    for rel in ("source/manifest.json", "source/denylist.json", "milestones/final/test_manifest.json", "public"):
        assert f"{tmp_path / rel}: -: missing" in text


def test_fill_template_shell_quotes_every_value() -> None:
    command = fill_template("cd {workspace} && {python} -m pytest --junitxml={junit_xml} {test_files}", {
        "workspace": "/w s", "python": "/py", "junit_xml": "/r/j.xml", "test_files": ["/t/a.py", "/t/b c.py"],
    })
    assert command == "cd '/w s' && /py -m pytest --junitxml=/r/j.xml /t/a.py '/t/b c.py'"
