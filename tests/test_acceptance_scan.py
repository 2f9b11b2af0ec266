"""The static checks (denylist imports, runner shadows) and the JUnit report reader, without a sandbox."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from procgrade.oracles.denylist import banned_entry, find_shadows, scan_imports
from procgrade.oracles.junit import JUnitError, parse_junit, static_test_ids
from procgrade.oracles.sandbox import copy_workspace, hash_workspace

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


def test_every_copied_tree_is_own_code_and_broken_files_are_not_bans(tmp_path: Path) -> None:
    # Anything copied can be put on sys.path at run time: no folder name or marker file exempts it.
    _write(tmp_path, "verrange/pyvenv.cfg", "home = /usr/bin\n")
    _write(tmp_path, "verrange/__init__.py", "import packaging.version\n")
    _write(tmp_path, "verrange/node_modules/h.py", "import semver\n")
    _write(tmp_path, "vendor/site-packages/semver/__init__.py", "import semver.version\n")
    _write(tmp_path, "lib/dist-packages/u.py", "import univers\n")
    _write(tmp_path, ".hidden/x.py", "import semver\n")
    _write(tmp_path, "sub/.venv/pyvenv.cfg", "home = /usr/bin\n")
    _write(tmp_path, "sub/.venv/lib/python3.11/site-packages/s.py", "import semver\n")
    _write(tmp_path, "venv/lib/python3.11/site-packages/s.py", "import semver\n")  # no pyvenv.cfg: not a virtualenv
    _write(tmp_path, ".git/hooks/h.py", "import semver\n")
    _write(tmp_path, "pkg/broken.py", "def (:\n")
    _write(tmp_path, "pkg/py2.py", "print 'hello'\n")
    result = scan_imports(tmp_path, BANS)
    assert [str(f) for f in result.findings] == [
        ".git/hooks/h.py:1: semver",
        ".hidden/x.py:1: semver",
        "lib/dist-packages/u.py:1: univers",
        "sub/.venv/lib/python3.11/site-packages/s.py:1: semver",
        "vendor/site-packages/semver/__init__.py:1: semver.version",
        "venv/lib/python3.11/site-packages/s.py:1: semver",
        "verrange/__init__.py:1: packaging.version",
        "verrange/node_modules/h.py:1: semver",
    ]
    assert result.files_scanned == 10 and sorted(result.unparsed) == ["pkg/broken.py", "pkg/py2.py"]


def test_a_top_level_virtualenv_is_neither_copied_nor_scanned(tmp_path: Path) -> None:
    src = tmp_path / "src"
    _write(src, "verrange/__init__.py", "")
    for venv in (".venv", "venv"):
        _write(src, f"{venv}/pyvenv.cfg", "home = /usr/bin\n")
        _write(src, f"{venv}/lib/python3.11/site-packages/pip/_internal/x.py", "from pip._vendor import packaging\n")
        _write(src, f"{venv}/lib/python3.11/site-packages/_cffi.cpython-311-x86_64-linux-gnu.so", "ELF")
    os.symlink("/usr", src / "venv" / "lib64")
    assert scan_imports(src, BANS).findings == []
    dest = tmp_path / "dest"
    dest.mkdir()
    loaded = copy_workspace(src, dest)
    assert loaded.left_out == [".venv/", "venv/"] and sorted(os.listdir(dest)) == ["verrange"]
    assert loaded.sha256 == hash_workspace(src) == hash_workspace(dest)
    # A link named like one is left out too (whatever it points to, it is not judged).
    (tmp_path / "src2").mkdir()
    os.symlink("/usr/lib", tmp_path / "src2" / ".venv")
    assert copy_workspace(tmp_path / "src2", tmp_path / "dest").left_out == [".venv"]


def test_links_are_not_followed_and_links_out_of_the_workspace_are_findings(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    _write(outside, "semver_copy/__init__.py", "import semver\n")
    _write(outside, "mod.py", "import semver\n")
    ws = tmp_path / "ws"
    _write(ws, "pkg/__init__.py", "")
    _write(ws, "pkg/data.txt", "import univers\n")
    os.symlink(outside / "semver_copy", ws / "pkg" / "vendored")   # absolute, out
    os.symlink("../../outside/mod.py", ws / "pkg" / "mod.py")      # relative, climbs out
    os.symlink("/", ws / "hostroot")                              # the whole host: never walked
    os.symlink("..", ws / "pkg" / "loop")                          # inside: not followed, no finding
    os.symlink("pkg", ws / "again")                                # inside
    os.symlink("data.txt", ws / "pkg" / "text.py")                 # a .py link inside: read where it leads
    os.symlink("again/../pkg/../../ws/pkg/text.py", ws / "chain.py")  # climbs out on the way: out
    os.symlink("a.py", ws / "b.py")                                # a loop of links: dangles inside
    os.symlink("b.py", ws / "a.py")
    os.symlink("missing/x.py", ws / "dangling.py")
    assert _findings(ws) == [
        "chain.py:0: link out of the workspace (-> again/../pkg/../../ws/pkg/text.py)",
        "hostroot:0: link out of the workspace (-> /)",
        "pkg/mod.py:0: link out of the workspace (-> ../../outside/mod.py)",
        "pkg/text.py:1: univers",
        f"pkg/vendored:0: link out of the workspace (-> {outside / 'semver_copy'})",
    ]
    found = scan_imports(ws, BANS).findings
    assert {f.kind for f in found} == {"link", "import"}


def test_compiled_modules_outside_caches_are_findings(tmp_path: Path) -> None:
    import py_compile

    _write(tmp_path, "verrange/__init__.py", "from . import _helper\n")
    source = _write(tmp_path / "elsewhere", "_helper.py", "import packaging\nBANNED = packaging\n")
    py_compile.compile(str(source), cfile=str(tmp_path / "verrange/_helper.pyc"))
    for name in ("a.pyo", "b.pyd", "c.so", "d.cpython-311-x86_64-linux-gnu.so", "e.abi3.so"):
        _write(tmp_path, f"verrange/{name}", "x")
    _write(tmp_path, "verrange/__pycache__/__init__.cpython-311.pyc", "x")  # a cache: left out, not a finding
    _write(tmp_path, "verrange/libfoo.so.1", "x")  # not a name Python imports
    os.symlink("libfoo.so.1", tmp_path / "verrange" / "f.so")
    found = scan_imports(tmp_path / "verrange", BANS).findings
    assert [(f.file, f.kind) for f in found] == [
        ("_helper.pyc", "compiled"), ("a.pyo", "compiled"), ("b.pyd", "compiled"), ("c.so", "compiled"),
        ("d.cpython-311-x86_64-linux-gnu.so", "compiled"), ("e.abi3.so", "compiled"), ("f.so", "compiled"),
    ]
    assert str(found[0]) == "_helper.pyc:0: compiled module (Python would import it; the scan cannot read it)"


def test_the_copy_never_follows_links_or_opens_special_files(tmp_path: Path) -> None:
    src = tmp_path / "src"
    _write(src, "pkg/__init__.py", "")
    os.symlink("/", src / "hostroot")
    os.symlink("/root", src / "pkg" / "home")
    os.symlink("/dev/zero", src / "pkg" / "zero.py")
    os.mkfifo(src / "pkg" / "fifo.py")
    dest = tmp_path / "dest"
    dest.mkdir()
    loaded = copy_workspace(src, dest)  # a FIFO opened for reading, or /dev/zero read, would hang here
    assert loaded.files == 1 and loaded.left_out == ["pkg/fifo.py"]
    assert sorted(os.listdir(dest)) == ["hostroot", "pkg"] and os.readlink(dest / "hostroot") == "/"
    assert sorted(os.listdir(dest / "pkg")) == ["__init__.py", "home", "zero.py"]
    assert loaded.sha256 == hash_workspace(src)


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
    os.mkfifo(tmp_path / "pkg" / "fifo.py")
    os.symlink("fifo.py", tmp_path / "pkg" / "pipe.py")
    big = _write(tmp_path, "pkg/big.py", "")
    with open(big, "wb") as handle:
        handle.truncate((16 << 20) + 1)
    result = scan_imports(tmp_path, BANS)
    assert [str(f) for f in result.findings] == ["pkg/__init__.py:1: semver",
                                                 "pkg/core.py:0: link out of the workspace (-> /proc/kcore)",
                                                 "pkg/zero.py:0: link out of the workspace (-> /dev/zero)"]
    assert sorted(result.unparsed) == ["pkg/big.py", "pkg/pipe.py"]


def test_junit_module_skipped_at_collection_is_kept_apart() -> None:
    report = parse_junit(_xml('<testcase classname="" name="F01_a"><skipped message="not today"/></testcase>',
                              tests=1, skipped=1), FILES)
    assert [(c.test_id, c.outcome, c.message) for c in report.collection_skipped] == [("F01_a.py", "skipped", "not today")]
    assert report.cases == [] and report.foreign == [] and report.problems == []
