"""Zero2Repo case packages judged as they are, on both back-ends: the layout and its field
semantics, per-task judge environments (pinned pytest and a test-only dependency, used
offline), the judge-time import ban against a wrapper of an upstream that IS installed, runner
shadows on the product path, and a local sandbox that shows the submission nothing of the host.

The case is ``tests/fixtures/zero2repo/ttlmap`` (written for these tests, see its README); its
upstream ``expirykit`` is installed into the judge environment with ``packages=``. The Docker
engine is part of what is tested: when it does not answer these tests fail, they do not skip.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from acceptance_attacks import TASK as VERRANGE
from procgrade.engine.cli import app
from procgrade.engine.errors import ProcgradeError
from procgrade.oracles.acceptance import judge, make_sandbox, validate_task
from procgrade.oracles.denylist import find_shadows
from procgrade.oracles.judge_env import EnvSpec, parse_install_command
from procgrade.oracles.local_sandbox import Limits, LocalSandbox, isolation_available
from procgrade.oracles.task_package import TaskPackageError, load_task

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "zero2repo"
CASE = FIXTURES / "ttlmap"
UPSTREAM = FIXTURES / "expirykit"
REPO = Path(__file__).resolve().parent.parent
OWNER, OWNER_VALUE = "procgrade.test-owner", f"pytest-z2r-{os.getpid()}-{time.time_ns()}"
EXPECTED = {"empty": "0", "partial": "0", "reference": "1", "upstream_wrapper": "0", "src_shadow": "0"}


# --- fixtures -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def local() -> LocalSandbox:
    ok, why = isolation_available()
    if not ok:
        pytest.fail(f"the local sandbox cannot isolate here: {why}", pytrace=False)
    return LocalSandbox(packages=[UPSTREAM])


@pytest.fixture(scope="module")
def docker() -> Any:
    from procgrade.oracles.docker_sandbox import DockerSandbox, engine_available

    ok, why = engine_available()
    if not ok:
        pytest.fail(f"the Docker engine is not reachable: {why}", pytrace=False)
    sb = DockerSandbox(packages=[UPSTREAM], labels={OWNER: OWNER_VALUE})
    try:
        sb.image()
    except Exception as exc:  # noqa: BLE001
        pytest.fail(f"the judge image cannot be built: {exc}", pytrace=False)
    return sb


@pytest.fixture(params=["local", "docker"])
def sandbox(request: pytest.FixtureRequest) -> Any:
    return request.getfixturevalue(request.param)


def case_copy(tmp_path: Path, edit: Any = None) -> Path:
    target = tmp_path / "ttlmap"
    shutil.copytree(CASE, target)
    if edit is not None:
        edit(target)
    return target


def edit_json(path: Path, change: Any) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data, indent=2))


def reference_with(tmp_path: Path, prelude: str) -> Path:
    """A copy of the reference workspace whose package runs ``prelude`` when imported."""
    ws = tmp_path / "ws"
    shutil.copytree(CASE / "controls" / "reference" / "app", ws)
    init = ws / "src" / "ttlmap" / "__init__.py"
    init.write_text(prelude + "\n" + init.read_text())
    return ws


# --- the layout ------------------------------------------------------------------------------------


def test_the_case_loads_unchanged_with_zero2repo_semantics() -> None:
    task = load_task(CASE)
    assert (task.layout, task.task_id, task.milestone) == ("zero2repo", "ttlmap", "final")
    # test ids keep Zero2Repo's tests/ prefix (the judge's --rootdir is the milestone folder)
    assert task.tests_dir == CASE / "milestones" / "final"
    assert task.tests.test_files == ["tests/F01_acceptance.py", "tests/F01_helpers.py", "tests/F02_acceptance.py",
                                     "tests/F02_helpers.py"]
    assert [f.name for f in task.suite][-2:] == ["tests/_harness.py", "tests/conftest.py"]
    # judge_timeout_sec 5 only widens Zero2Repo's 600 s floor
    assert task.tests.judge_timeout_sec == 600 and task.metadata["case_timeout_sec"] == 5
    # runner.install_command's pip pins are the judge environment; PYTHONPATH=src the product path
    assert task.env == EnvSpec(("pytest==8.3.5", "freezegun==1.5.2"))
    assert task.product_paths == ("src",)
    # "expirykit/" is a path token for the same module root
    assert task.denylist.import_ban == ["expirykit"]
    assert "expiry-kit" in task.denylist.install_ban
    assert task.manifest.workdir == "{workspace}" and task.manifest.sensitive_terms == ["expirykit", "expiry-kit"]
    assert "-c /dev/null --rootdir={test_dir} --confcutdir={test_dir}" in task.tests.test_command
    assert task.controls["partial"].expect.must_fail_tests == ["test_parse_compound_durations[1h30m-5400]",
                                                               "test_format_uses_days[86400-1d]"]
    assert {n: str(c.expect.reward) for n, c in task.controls.items()} == EXPECTED


def test_what_procgrade_cannot_honour_is_named_never_dropped(tmp_path: Path) -> None:
    root = case_copy(tmp_path, lambda t: edit_json(t / "source/manifest.json",
                                                    lambda d: d["runner"].update(frobnicate=1, judge_profile="cow")))
    notices = load_task(root).notices
    text = "\n".join(notices)
    for name in ("source/manifest.json: hardware_requirements: not honoured",
                 "source/manifest.json: runner.frobnicate: unknown field, not honoured",
                 "source/manifest.json: runner.judge_profile: not honoured",
                 "source/manifest.json: runner.install_command: 'apt-get update'",
                 "source/manifest.json: runner.install_command: 'apt-get install -y --no-install-recommends python3-pip'",
                 "source/manifest.json: runner.repo_warm_command: not honoured",
                 "source/denylist.json: install_ban: not enforced",
                 "milestones/final/test_manifest.json: execution_groups: not honoured",
                 "source/recipe.lock.json: not read"):
        assert name in text, name
    assert all(n.startswith(("source/", "milestones/", "controls/")) for n in notices)  # relative to the case


def test_the_public_manifest_variant_loads(tmp_path: Path) -> None:
    def public(target: Path) -> None:
        manifest = json.loads((target / "source/manifest.json").read_text())
        runner = {k: manifest["runner"][k] for k in ("schema_version", "language_label", "install_command",
                                                     "build_command", "test_command_template", "workdir")}
        (target / "source/manifest.json").write_text(json.dumps(
            {"schema_version": 3, "case_id": "ttlmap", "runner": runner, "status": "released"}))
        (target / "source/denylist.json").unlink()  # public clones ship no denylist
        edit_json(target / "milestones/final/test_manifest.json", lambda d: d.update(judge_timeout_sec=900))

    task = load_task(case_copy(tmp_path, public))
    assert task.layout == "zero2repo" and task.denylist.import_ban == []
    assert task.tests.judge_timeout_sec == 900  # wider than the floor: kept
    assert task.env == EnvSpec(("pytest==8.3.5", "freezegun==1.5.2"))
    assert any("denylist.json: missing: no import ban" in n for n in task.notices)


def test_a_broken_case_is_refused_file_by_field(tmp_path: Path) -> None:
    def breaks(target: Path) -> None:
        edit_json(target / "source/denylist.json", lambda d: d.update(case_id="other"))
        edit_json(target / "source/manifest.json", lambda d: d["runner"].update(workdir="/srv", judge_bans=["disk"]))
        edit_json(target / "milestones/final/test_manifest.json",
                  lambda d: d.update(test_command="bash run.sh", step="m1", expected_test_count=0))
        edit_json(target / "controls/reference/expect.json", lambda d: d.update(reward=0.5))

    root = case_copy(tmp_path, breaks)
    with pytest.raises(TaskPackageError) as caught:
        load_task(root)
    problems = caught.value.problems
    assert f"{root}/source/denylist.json: case_id: 'other' differs from source/manifest.json case_id 'ttlmap'" in problems
    assert f"{root}/source/manifest.json: runner.workdir: '/srv' is not /app or a folder below it" in problems
    assert any(p.startswith(f"{root}/source/manifest.json: runner.judge_bans: 'disk'") for p in problems)
    assert any(p.startswith(f"{root}/milestones/final/test_manifest.json: test_command: 'bash run.sh' is not a pytest")
               for p in problems)
    assert f"{root}/milestones/final/test_manifest.json: step: 'm1' differs from the milestone folder 'final'" in problems
    assert f"{root}/milestones/final/test_manifest.json: expected_test_count: must be a positive integer" in problems
    assert f"{root}/controls/reference/expect.json: reward: must be 0 or 1, got 0.5" in problems


def test_install_commands_give_their_pip_pins_and_name_the_rest() -> None:
    reqs, rest = parse_install_command(
        "apt-get update && apt-get install -y python3-pip && python3 -m pip install --no-cache-dir "
        "pytest==8.3.5 'flit_core>=3.11,<4' -i https://mirror.invalid/simple; pip3 install freezegun==1.5.2 ./vendor")
    assert reqs == ["pytest==8.3.5", "flit_core>=3.11,<4", "freezegun==1.5.2"]
    assert rest == ["'apt-get update' (procgrade builds judge environments from PyPI with pip only)",
                    "'apt-get install -y python3-pip' (procgrade builds judge environments from PyPI with pip only)",
                    "pip option '-i https://mirror.invalid/simple' (not applied)",
                    "local requirement './vendor' (a path of the case's build image)"]
    assert parse_install_command("") == ([], [])
    # a task that pins no pytest gets the judge image's pytest; the key follows the pins
    assert EnvSpec(("freezegun==1.5.2",)).effective_requirements()[1].startswith("pytest==")
    assert EnvSpec(("pytest==8.3.5",)).key("x") != EnvSpec(("pytest==8.3.4",)).key("x")
    assert EnvSpec(("a==1", "b==2")).key("x") == EnvSpec(("b==2", "a==1")).key("x")


def test_runner_shadows_anywhere_on_the_product_path_are_found(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    for rel in ("src/pytest.py", "src/conftest.py", "src/pluggy/__init__.py", "lib/sitecustomize.py", "conftest.py",
                "src/ttlmap/pytest.py", "docs/pytest.py"):
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text("")
    found = sorted(str(f) for f in find_shadows(ws, frozenset({"pluggy"}), ("src", "lib")))
    assert found == ["conftest.py:0: conftest.py (shadows the test runner's configuration)",
                     "lib/sitecustomize.py:0: sitecustomize (shadows the test runner's module)",
                     "src/conftest.py:0: conftest.py (shadows the test runner's configuration)",
                     "src/pluggy/:0: pluggy (shadows the test runner's module)",
                     "src/pytest.py:0: pytest (shadows the test runner's module)"]


def test_the_judge_environment_is_chosen_by_name() -> None:
    with pytest.raises(ProcgradeError, match="is not an executable file"):
        make_sandbox("local", python="/nonexistent/python3")
    with pytest.raises(ProcgradeError, match="--image chooses the docker back-end"):
        make_sandbox("local", image="procgrade-judge:x")
    with pytest.raises(ProcgradeError, match="--python chooses the local back-end"):
        make_sandbox("docker", python="/usr/bin/python3")


# --- judged, on both back-ends ---------------------------------------------------------------------


def test_the_case_validates_unchanged_with_every_control_at_its_reward(sandbox: Any) -> None:
    task, checks = validate_task(CASE, sandbox.backend, sandbox=sandbox)
    assert {c.name: (c.ok, c.result.reward) for c in checks} == {n: (True, r) for n, r in EXPECTED.items()}, \
        [(c.name, c.problem, c.result.explanation[:300]) for c in checks if not c.ok]
    by = {c.name: c.result for c in checks}
    assert (by["reference"].passed, by["reference"].failed) == (46, 0)
    assert by["src_shadow"].status == "rejected" and "src/pytest.py" in by["src_shadow"].explanation
    wrapper = by["upstream_wrapper"]
    # the static scan does not see a built name; the judge-time ban does, though the upstream is installed
    assert wrapper.scan is not None and wrapper.scan.status == "passed"
    assert wrapper.details["sandbox"]["judge_env"]["distributions"]["expirykit"] == "1.0.0"
    assert {e["name"] for e in wrapper.details["policy_events"]} == {"expirykit"}
    assert wrapper.explanation.startswith("the tested code tried to import what the task bans (expirykit)")
    assert all("PROCGRADE_IMPORT_BAN" in (c.message or "") for c in wrapper.tests)
    for check in checks:
        assert check.seconds > 0
        if check.result.status == "evaluated":
            assert check.result.details["sandbox"]["judge_env"]["distributions"]["pytest"] == "8.3.5"


def test_the_wrapper_would_pass_were_the_upstream_not_banned(tmp_path: Path, sandbox: Any) -> None:
    """Proof that the ban is what fails the wrapper: the upstream is importable in the judge environment."""
    root = case_copy(tmp_path, lambda t: edit_json(t / "source/denylist.json", lambda d: d.update(import_ban=[])))
    task = load_task(root)
    result = judge(task, root / "controls/upstream_wrapper/app", sandbox)
    assert (result.status, result.reward) == ("evaluated", "1"), result.explanation
    assert "policy_events" not in result.details


def test_pinned_test_dependencies_are_the_versions_judging(tmp_path: Path, sandbox: Any) -> None:
    versions = ("import freezegun, pytest, socket\n\n\n"
                "def test_the_judge_environment_has_the_pinned_versions():\n"
                "    assert (pytest.__version__, freezegun.__version__) == ('8.3.5', '1.5.2')\n\n\n"
                "def test_judging_is_offline():\n"
                "    try:\n"
                "        socket.create_connection(('pypi.org', 443), timeout=3).close()\n"
                "    except OSError:\n"
                "        return\n"
                "    raise AssertionError('the judge reached the network')\n")

    def add(target: Path) -> None:
        (target / "milestones/final/tests/F09_acceptance.py").write_text(versions)
        edit_json(target / "milestones/final/test_manifest.json",
                  lambda d: d.update(test_files=d["test_files"] + ["tests/F09_acceptance.py"]))

    root = case_copy(tmp_path, add)
    task = load_task(root)
    sandbox.environment(task.env)  # built (or found) before judging: judging itself only uses it
    result = judge(task, CASE / "controls/reference/app", sandbox)
    assert (result.status, result.reward, result.passed) == ("evaluated", "1", 48), result.explanation
    env = result.details["sandbox"]["judge_env"]
    assert env["requirements"] == ["pytest==8.3.5", "freezegun==1.5.2"]
    assert (env["distributions"]["pytest"], env["distributions"]["freezegun"]) == ("8.3.5", "1.5.2")
    assert env["built_now"] is False  # built by an earlier judgement, reused
    assert result.details["sandbox"]["network"].startswith("none")


FRESH_INTERPRETER = """
import subprocess as _sp, sys as _sys
_code = "import importlib, inspect; print(inspect.getsource(importlib.import_module('expiry' + 'kit')))"
_src = _sp.run([_sys.executable, "-I", "-c", _code], capture_output=True, text=True).stdout
exec(compile(_src, "ttlmap_upstream", "exec"), globals())
"""


@pytest.mark.parametrize("banned", [True, False], ids=["banned", "not-banned"])
def test_a_fresh_interpreter_cannot_load_the_banned_upstream_either(tmp_path: Path, sandbox: Any, banned: bool) -> None:
    """The in-process ban does not reach a new interpreter the tested code starts (``-I``):
    the banned package's files are masked for the whole run instead. Without the ban the same
    workspace passes: the upstream is really there."""
    ws = tmp_path / "ws"
    (ws / "src" / "ttlmap").mkdir(parents=True)
    (ws / "src" / "ttlmap" / "__init__.py").write_text(FRESH_INTERPRETER)
    root = case_copy(tmp_path, None if banned else
                     (lambda t: edit_json(t / "source/denylist.json", lambda d: d.update(import_ban=[]))))
    result = judge(load_task(root), ws, sandbox)
    if banned:
        assert (result.status, result.reward, result.passed) == ("evaluated", "0", 0), result.explanation
        masked = result.details["masked_modules"]
        assert list(masked) == ["expirykit"] and masked["expirykit"][0].endswith("site-packages/expirykit")
    else:
        assert (result.status, result.reward) == ("evaluated", "1"), result.explanation
        assert "masked_modules" not in result.details


HOST_PROBE = """
import os as _os
_seen = [p for p in {paths!r} if _os.path.exists(p)]
if _seen:
    raise RuntimeError("the host is visible: %r" % _seen)
"""


def test_the_submission_sees_nothing_of_the_host(tmp_path: Path, sandbox: Any) -> None:
    token = os.urandom(4).hex()
    elsewhere = Path(f"/opt/procgrade-other-checkout-{token}")
    home = Path(f"/home/procgrade-user-{token}")
    files = [elsewhere / "tasks/ttlmap/controls/reference/app/src/ttlmap/__init__.py", home / "notes.txt"]
    for f in files:
        f.parent.mkdir(parents=True)
        f.write_text("world-readable answers\n")
        f.chmod(0o644)
        for d in [*f.parents][:-1]:
            if str(d).startswith((str(elsewhere), str(home))):
                d.chmod(0o755)
    try:
        probe = [str(p) for p in files] + [str(elsewhere), str(home), str(REPO / "README.md"), str(REPO / "tasks"),
                                           str(CASE), str(REPO / ".git")]
        assert all(os.path.exists(p) for p in probe[:5])  # on the host they are there
        ws = reference_with(tmp_path, HOST_PROBE.format(paths=probe))
        result = judge(load_task(CASE), ws, sandbox)
    finally:
        shutil.rmtree(elsewhere)
        shutil.rmtree(home)
    assert (result.status, result.reward) == ("evaluated", "1"), [c.message for c in result.tests][:1] or \
        result.explanation


def test_the_local_root_holds_only_what_the_judge_needs(tmp_path: Path, local: LocalSandbox) -> None:
    probe = """
import os as _os, sys as _sys
_allowed = {"bin", "sbin", "lib", "lib32", "lib64", "libx32", "usr", "etc", "dev", "proc", "tmp", "var", "run"}
_allowed |= {p.split("/")[1] for p in (_sys.prefix, _sys.base_prefix, _os.environ["HOME"])}
_top = set(_os.listdir("/"))
_etc = set(_os.listdir("/etc"))
if not _top <= _allowed:
    raise RuntimeError("the root shows %r" % sorted(_top - _allowed))
if not _etc <= {"ld.so.cache", "localtime", "passwd", "group"}:
    raise RuntimeError("/etc shows %r" % sorted(_etc))
_root = _os.listdir("/root") if _os.path.isdir("/root") else []
if not set(_root) <= {".pyenv", ".cache"}:
    raise RuntimeError("/root shows %r" % _root)
"""
    result = judge(load_task(CASE), reference_with(tmp_path, probe), local)
    assert (result.status, result.reward) == ("evaluated", "1"), [c.message for c in result.tests][:1] or \
        result.explanation
    sandbox = result.details["sandbox"]
    assert sandbox["mounts"]["/"].startswith("fresh tmpfs root; read-only: /usr")
    assert sandbox["memory"].startswith(("cgroup v2 memory.max", "cgroup v1 memory.limit_in_bytes"))


def test_a_built_name_import_is_banned_in_procgrade_layout_tasks_too(tmp_path: Path, sandbox: Any) -> None:
    """verrange bans ``packaging``, which pytest itself installs in every judge environment."""
    ws = tmp_path / "ws"
    shutil.copytree(VERRANGE / "controls/reference/app", ws)
    init = ws / "verrange" / "__init__.py"
    init.write_text("import importlib as _il\ntry:\n    _il.import_module('pack' + 'aging.version')\n"
                    "except ImportError:\n    pass\n" + init.read_text())
    result = judge(load_task(VERRANGE), ws, sandbox)
    # every test passes (the import was caught), but the attempt is recorded and costs the reward
    assert (result.status, result.reward, result.passed, result.failed) == ("evaluated", "0", 43, 0), result.explanation
    assert result.explanation.startswith("the tested code tried to import what the task bans (packaging)")
    assert result.details["policy_events"][0]["kind"] == "import_ban"


SUBPROCESS_AT_59 = """    if seconds < 0:
        raise ValueError("negative duration")
    if seconds == 59:
        import subprocess
        subprocess.run(["true"], check=False)"""


def test_judge_bans_fail_the_calling_test_and_are_recorded(tmp_path: Path, local: LocalSandbox) -> None:
    root = case_copy(tmp_path, lambda t: edit_json(t / "source/manifest.json",
                                                    lambda d: d["runner"].update(judge_bans=["subprocess"])))
    ws = tmp_path / "ws"
    shutil.copytree(CASE / "controls/reference/app", ws)
    init = ws / "src" / "ttlmap" / "__init__.py"
    text = init.read_text()
    init.write_text(text.replace(SUBPROCESS_AT_59.rsplit("\n", 3)[0], SUBPROCESS_AT_59))
    result = judge(load_task(root), ws, local)
    # only the two tests that call format_duration(59) fail; every other test passes
    assert (result.status, result.reward, result.passed, result.failed) == ("evaluated", "0", 44, 2), \
        result.explanation
    failed = [c for c in result.tests if c.outcome == "failed"]
    assert [c.test_id for c in failed] == ["tests/F01_acceptance.py::test_format_durations[59-59s]",
                                           "tests/F01_acceptance.py::test_format_then_parse_round_trips[59]"]
    assert all("PROCGRADE_JUDGE_BANS: subprocess.Popen is banned by the task" in (c.message or "") for c in failed)
    assert result.details["policy_events"] == [{"detail": "subprocess.Popen", "kind": "judge_ban", "name": "subprocess"}]


def test_the_memory_cgroup_bounds_the_whole_run(tmp_path: Path) -> None:
    """A 160 MiB allocation, far below the per-process address-space rlimit (4 GiB), is stopped
    by the run's 96 MiB memory cgroup: the runner is killed, the verdict is 0, not a pass."""
    ws = reference_with(tmp_path, "_ballast = b'x' * (160 << 20)")
    result = judge(load_task(CASE), ws, LocalSandbox(limits=Limits(memory_bytes=96 << 20), packages=[UPSTREAM]))
    assert (result.status, result.reward) == ("evaluated", "0"), result.explanation
    assert "SIGKILL" in result.explanation, result.explanation
    assert str(96 << 20) in result.details["sandbox"]["memory"]


# --- the command ------------------------------------------------------------------------------------


def test_task_validate_prints_times_notices_and_the_environment() -> None:
    result = CliRunner().invoke(app, ["task", "validate", str(CASE), "--backend", "local", "--timeout", "120",
                                      "--with-package", str(UPSTREAM)], terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "all 5 controls get their expected verdict" in result.output
    assert "seconds" in result.output and "zero2repo layout" in result.output
    assert "freezegun==1.5.2" in result.output and "pytest==8.3.5" in result.output
    assert "note: milestones/final/test_manifest.json: execution_groups: not honoured" in result.output
