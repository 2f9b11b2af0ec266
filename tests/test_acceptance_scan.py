"""The static checks (denylist imports, runner shadows) and the JUnit report reader, without a sandbox."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from oracles.denylist import banned_entry, find_shadows, scan_imports
from oracles.junit import JUnitError, parse_junit, static_test_ids
from oracles.sandbox import copy_workspace, hash_workspace

BANS = ["semver", "packaging", "pip._vendor", "univers"]


def _write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _findings(root: Path) -> list[str]:
    return [str(f) for f in scan_imports(root, BANS).findings]


def test_banned_entry_matches_the_module_and_its_submodules_only() -> None:
    assert banned_entry("semver", BANS) == "semver"
    assert banned_entry("semver.version", BANS) == "semver"
    assert banned_entry("pip._vendor.packaging.version", BANS) == "pip._vendor"
    assert banned_entry("semverish", BANS) is None
    assert banned_entry("pip", BANS) is None
    assert banned_entry("mypackaging", BANS) is None


def test_every_import_form_is_found_with_file_and_line(tmp_path: Path) -> None:
    _write(tmp_path, "pkg/a.py", "import os\nimport semver\nimport semver.version as v\nimport semverish\n")
    _write(tmp_path, "pkg/b.py", "from pip._vendor import packaging\nfrom . import semver\nfrom .packaging import x\n")
    _write(tmp_path, "pkg/c.py", "x = __import__('univers')\nimport importlib\nimportlib.import_module('packaging.version')\n"
                                 "importlib.import_module('.semver', 'pkg')\nname = 'semver'\n__import__(name)\n")
    _write(tmp_path, "pkg/d.py", "from importlib import import_module as im\nim('semver')\n"
                                 "import importlib as il\nil.import_module('univers.x')\n"
                                 "__import__('os', None, None, ['path'])\nfrom os import *\n")
    _write(tmp_path, "tests/test_x.py", "def test():\n    import packaging\n")
    assert _findings(tmp_path) == [
        "pkg/a.py:2: semver",
        "pkg/a.py:3: semver.version",
        "pkg/b.py:1: pip._vendor",
        "pkg/b.py:1: pip._vendor.packaging",
        "pkg/c.py:1: univers",
        "pkg/c.py:3: packaging.version",
        "pkg/d.py:2: semver",
        "pkg/d.py:4: univers.x",
        "tests/test_x.py:2: packaging",
    ]
    assert scan_imports(tmp_path, BANS).files_scanned == 5


def test_third_party_trees_are_not_own_code_and_broken_files_are_not_bans(tmp_path: Path) -> None:
    _write(tmp_path, ".venv/pyvenv.cfg", "home = /usr/bin\n")
    _write(tmp_path, ".venv/lib/python3.11/site-packages/pip/_internal/x.py", "from pip._vendor import packaging\n")
    _write(tmp_path, "vendor/site-packages/semver/__init__.py", "import semver.version\n")
    _write(tmp_path, "node_modules/x/y.py", "import semver\n")
    _write(tmp_path, "pkg/__pycache__/z.py", "import semver\n")
    _write(tmp_path, "pkg/broken.py", "def (:\n")
    _write(tmp_path, "pkg/py2.py", "print 'hello'\n")
    result = scan_imports(tmp_path, BANS)
    assert result.findings == [] and result.passed
    assert result.files_scanned == 2 and sorted(result.unparsed) == ["pkg/broken.py", "pkg/py2.py"]
    assert result.skipped_files == 4


def test_links_are_followed_once_and_loops_do_not_hang(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    _write(outside, "semver_copy/__init__.py", "import semver\n")
    ws = tmp_path / "ws"
    _write(ws, "pkg/__init__.py", "")
    os.symlink(outside / "semver_copy", ws / "pkg" / "vendored")
    os.symlink("..", ws / "pkg" / "loop")
    os.symlink(ws / "pkg", ws / "again")
    findings = _findings(ws)
    assert findings == ["again/vendored/__init__.py:1: semver"] or findings == ["pkg/vendored/__init__.py:1: semver"]


@pytest.mark.parametrize("entry, name", [
    ("pytest.py", "pytest"), ("pytest/__init__.py", "pytest"), ("_pytest/__init__.py", "_pytest"),
    ("pluggy.py", "pluggy"), ("sitecustomize.py", "sitecustomize"), ("usercustomize.pyc", "usercustomize"),
    ("conftest.py", "conftest.py"), ("pytest.ini", "pytest.ini"), ("iniconfig/__init__.py", "iniconfig"),
])
def test_runner_shadows_at_the_root_are_found(tmp_path: Path, entry: str, name: str) -> None:
    _write(tmp_path, "verrange/__init__.py", "")
    _write(tmp_path, entry, "")
    found = find_shadows(tmp_path, {"iniconfig", "pytest", "_pytest", "pluggy"})
    assert [f.name for f in found] == [name]
    assert str(found[0]).startswith(entry.split("/")[0])


def test_ordinary_roots_and_nested_conftests_are_not_shadows(tmp_path: Path) -> None:
    for rel in ("verrange/__init__.py", "tests/conftest.py", "tests/pytest.ini", "setup.py", "pyproject.toml",
                "README.md", "test_mine.py", "pytest_notes.txt"):
        _write(tmp_path, rel, "")
    assert find_shadows(tmp_path, {"pytest", "_pytest", "pluggy"}) == []


def test_copy_hashes_what_it_copies_and_leaves_caches_out(tmp_path: Path) -> None:
    src = tmp_path / "src"
    _write(src, "pkg/__init__.py", "x = 1\n")
    _write(src, "pkg/__pycache__/__init__.cpython-311.pyc", "stale")
    _write(src, "bin/run", "#!/bin/sh\n").chmod(0o4777)
    os.symlink("pkg/__init__.py", src / "link.py")
    os.mkfifo(src / "pipe")
    dest = tmp_path / "dest"
    dest.mkdir()
    loaded = copy_workspace(src, dest)
    assert loaded.sha256 == hash_workspace(src) == hash_workspace(dest)
    assert loaded.files == 2 and loaded.left_out == ["pipe", "pkg/__pycache__/"]
    assert os.readlink(dest / "link.py") == "pkg/__init__.py"
    assert (dest / "bin/run").stat().st_mode & 0o7777 == 0o755
    assert not (dest / "pkg/__pycache__").exists()
    (src / "pkg/__init__.py").write_text("x = 2\n")
    assert hash_workspace(src) != loaded.sha256


# --- JUnit ---------------------------------------------------------------------------------------

FILES = ["F01_a.py", "sub/F02_b.py"]


def _xml(cases: str, tests: int, failures: int = 0, errors: int = 0, skipped: int = 0) -> bytes:
    return (f'<?xml version="1.0" encoding="utf-8"?><testsuites name="pytest tests"><testsuite name="pytest" '
            f'errors="{errors}" failures="{failures}" skipped="{skipped}" tests="{tests}" time="0.1">{cases}'
            f'</testsuite></testsuites>').encode()


def test_junit_cases_map_to_test_ids_with_outcomes() -> None:
    report = parse_junit(_xml(
        '<testcase classname="F01_a" name="test_ok" time="0.0125"/>'
        '<testcase classname="F01_a" name="test_bad" time="0.002"><failure message="assert 1 == 2">detail</failure></testcase>'
        '<testcase classname="F01_a.TestGroup" name="test_method[p-1]" time="0"><skipped message="why"/></testcase>'
        '<testcase classname="sub.F02_b" name="test_err" time="x"><error message="setup failed"/></testcase>',
        tests=4, failures=1, errors=1, skipped=1), FILES)
    assert [(c.test_id, c.outcome, c.duration_ms) for c in report.cases] == [
        ("F01_a.py::test_ok", "passed", 12),
        ("F01_a.py::test_bad", "failed", 2),
        ("F01_a.py::TestGroup::test_method[p-1]", "skipped", 0),
        ("sub/F02_b.py::test_err", "error", None),
    ]
    assert report.cases[1].message == "assert 1 == 2\ndetail"
    assert report.problems == []


def test_junit_collection_errors_foreign_and_duplicate_cases() -> None:
    report = parse_junit(_xml(
        '<testcase classname="" name="sub.F02_b"><error message="collection failure">ImportError</error></testcase>'
        '<testcase classname="F01_a" name="test_ok"/><testcase classname="F01_a" name="test_ok"/>'
        '<testcase classname="workspace_tests" name="test_mine"/><testcase classname="" name="::test_a"/>',
        tests=5, errors=1), FILES)
    assert [(c.test_id, c.outcome) for c in report.collection_errors] == [("sub/F02_b.py", "error")]
    assert [c.test_id for c in report.cases] == ["F01_a.py::test_ok"]
    assert report.duplicates == ["F01_a.py::test_ok"]
    assert report.foreign == ["workspace_tests::test_mine", "::test_a"]
    assert len(report.problems) == 2


def test_junit_totals_must_agree_with_the_cases() -> None:
    report = parse_junit(_xml('<testcase classname="F01_a" name="test_ok"/>', tests=43), FILES)
    assert report.problems == ["the report's totals say 43 tests but it lists 1 testcases"]
    report = parse_junit(_xml('<testcase classname="F01_a" name="t"><failure/></testcase>', tests=1), FILES)
    assert "failure and error totals are lower" in report.problems[0]


@pytest.mark.parametrize("data, reason", [
    (b"", "not well-formed"),
    (_xml('<testcase classname="F01_a" name="t"/>', 1) * 2, "not well-formed"),
    (b'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "b">]><testsuite tests="0"/>', "DOCTYPE"),
    (b"<html/>", "root element is <html>"),
    (b'<testsuite tests="many"/>', "not a count"),
])
def test_unusable_reports_are_refused(data: bytes, reason: str) -> None:
    with pytest.raises(JUnitError, match=reason):
        parse_junit(data, FILES)


def test_static_test_ids_read_from_the_test_files() -> None:
    files = {
        "F01_a.py": b"import pytest\n\ndef test_one(): pass\nasync def test_two(): pass\ndef helper(): pass\n"
                    b"@pytest.fixture\ndef test_data(): return 1\n"
                    b"class TestA:\n    def test_m(self): pass\n    def other(self): pass\n"
                    b"class TestWithInit:\n    def __init__(self): pass\n    def test_x(self): pass\n"
                    b"class TestOff:\n    __test__ = False\n    def test_y(self): pass\n",
        "F02_b.py": b"def (:\n",
    }
    assert static_test_ids(files, "[pytest]\nxfail_strict = true\n") == {
        "F01_a.py::test_one", "F01_a.py::test_two", "F01_a.py::TestA::test_m"}
    assert static_test_ids(files, "[pytest]\npython_functions = check_*\n") is None


def test_links_to_huge_or_special_files_do_not_stall_the_scan(tmp_path: Path) -> None:
    _write(tmp_path, "pkg/__init__.py", "import semver\n")
    os.symlink("/dev/zero", tmp_path / "pkg" / "zero.py")
    os.symlink("/proc/kcore", tmp_path / "pkg" / "core.py")
    big = _write(tmp_path, "pkg/big.py", "")
    with open(big, "wb") as handle:
        handle.truncate((16 << 20) + 1)
    result = scan_imports(tmp_path, BANS)
    assert [str(f) for f in result.findings] == ["pkg/__init__.py:1: semver"]
    assert "pkg/big.py" in result.unparsed


def test_junit_module_skipped_at_collection_is_kept_apart() -> None:
    report = parse_junit(_xml('<testcase classname="" name="F01_a"><skipped message="not today"/></testcase>',
                              tests=1, skipped=1), FILES)
    assert [(c.test_id, c.outcome, c.message) for c in report.collection_skipped] == [("F01_a.py", "skipped", "not today")]
    assert report.cases == [] and report.foreign == [] and report.problems == []
