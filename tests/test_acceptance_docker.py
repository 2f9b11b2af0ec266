"""The docker sandbox back-end, against a real Docker engine: the controls of tasks/verrange get
their expected rewards, the sandbox holds its isolation promises from the inside, and the
network, hang, fork-bomb, disk-fill and fake-report attacks are contained.

The engine is part of what is tested: when it does not answer, these tests fail (they do not
skip). Start it as root with ``nohup dockerd >/tmp/dockerd.log 2>&1 &``, as ``bash .ci/run``
does; the judge image is built on first use when missing (``python -m procgrade.oracles.judge_image``).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from acceptance_attacks import (
    SPARE,
    TASK,
    assert_no_connection,
    assert_partial_honest,
    listener,
    messages,
    workspace,
)
from procgrade.oracles.acceptance import judge, validate_task
from procgrade.oracles.docker_sandbox import (
    DockerLimits,
    DockerSandbox,
    engine_available,
    leftovers,
)
from procgrade.oracles.judge_image import ImageBuildError, docker_client, image_tag, recipe_sha256
from procgrade.oracles.junit import parse_junit
from procgrade.oracles.sandbox import RunSpec, hash_workspace
from procgrade.oracles.task_package import SuiteFile, Task, load_task

MiB = 1 << 20
LIMITS = DockerLimits(memory_bytes=1 << 30, pids=128, scratch_bytes=64 * MiB, tmp_bytes=64 * MiB, cleanup_sec=10)
#: Label on what this test process's sandboxes make (other processes may judge meanwhile).
OWNER, OWNER_VALUE = "procgrade.test-owner", f"pytest-{os.getpid()}-{time.time_ns()}"


@pytest.fixture(scope="module")
def client() -> Any:
    ok, why = engine_available()
    if not ok:
        pytest.fail(f"the Docker engine is not reachable: {why}", pytrace=False)
    return docker_client()


@pytest.fixture(scope="module")
def sandbox(client: Any) -> DockerSandbox:
    sb = DockerSandbox(limits=LIMITS, client=client, labels={OWNER: OWNER_VALUE})
    try:
        sb.image()
    except Exception as exc:  # noqa: BLE001
        pytest.fail(f"the judge image cannot be built: {exc}", pytrace=False)
    return sb


def sandbox_image(client: Any) -> str:
    return DockerSandbox(client=client).image()


@pytest.fixture(scope="module")
def task() -> Task:
    return load_task(TASK)


@pytest.fixture(autouse=True)
def nothing_left_behind(request: pytest.FixtureRequest) -> Iterator[None]:
    """Every container and volume a test's sessions made is gone when the test ends."""
    if "sandbox" not in request.fixturenames:
        yield
        return
    yield
    after = [x for group in leftovers(request.getfixturevalue("client"), f"{OWNER}={OWNER_VALUE}") for x in group]
    assert after == [], f"left behind: {[getattr(x, 'name', x.id) for x in after]}"


# --- the engine, the image ----------------------------------------------------------------------


def test_an_unreachable_engine_is_an_infrastructure_error_not_a_verdict(tmp_path: Path, task: Task) -> None:
    import docker

    dead = docker.DockerClient(base_url=f"unix://{tmp_path}/no-such-docker.sock", version="1.41", timeout=5)
    result = judge(task, TASK / "controls/reference/app", DockerSandbox(client=dead), check_submission=False)
    assert (result.status, result.reward) == ("infra_error", None)
    assert result.explanation.startswith("judge error: docker: ")


def test_the_image_tag_names_the_recipe(client: Any) -> None:
    tag = image_tag()
    assert re.fullmatch(r"procgrade-judge:py311-[0-9a-f]{12}", tag) and tag.endswith(recipe_sha256()[:12])
    image = client.images.get(tag)
    assert image.labels["procgrade.recipe_sha256"] == recipe_sha256()
    assert image.attrs["Size"] < 300 * MiB


def test_a_missing_image_is_not_built_when_building_is_off(client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from procgrade.oracles import judge_image

    monkeypatch.setattr(judge_image, "image_tag", lambda: "procgrade-judge:does-not-exist")
    with pytest.raises(ImageBuildError, match="is missing"):
        judge_image.ensure_image(client, build=False)


# --- the controls ---------------------------------------------------------------------------------


def test_every_control_gets_its_expected_reward(task: Task, sandbox: DockerSandbox) -> None:
    _, checks = validate_task(TASK, sandbox=sandbox)
    by_name = {c.name: c for c in checks}
    assert sorted(by_name) == ["empty", "hollow-banned", "partial", "reference"]
    assert all(c.ok for c in checks), [(c.name, c.problem, c.result.explanation) for c in checks if not c.ok]
    ref = by_name["reference"].result
    assert (ref.backend, ref.status, ref.reward, ref.passed) == ("docker", "evaluated", "1", 43)
    assert ref.details["canary"] == "failed" and ref.details["exit_code"] == 1
    assert ref.details["sandbox"]["network"] == "none" and ref.details["sandbox"]["pytest"].split(".")[0] >= "8"
    assert_partial_honest(by_name["partial"].result)
    empty = by_name["empty"].result
    assert (empty.status, empty.reward, len(empty.collection_errors)) == ("evaluated", "0", 5)
    banned = by_name["hollow-banned"].result
    assert (banned.status, banned.reward) == ("rejected", "0") and "exit_code" not in banned.details


def test_the_session_step_by_step(tmp_path: Path, task: Task, sandbox: DockerSandbox, client: Any) -> None:
    source = TASK / "controls/reference/app"
    with sandbox.session() as sb:
        loaded = sb.load_workspace(source)
        assert loaded.sha256 == hash_workspace(source) and loaded.files == 3
        assert loaded.path.is_dir() and hash_workspace(loaded.path) == loaded.sha256  # the host copy the judge scans
        assert {"pytest", "_pytest", "pluggy"} <= sb.runner_modules()
        sb.inject_tests(list(task.suite))
        outcome = sb.run_tests(RunSpec(task.tests.test_command, task.manifest.workdir, task.tests.test_files, 120))
        container = sb.details["container"]
        host_copy = loaded.path
    assert (outcome.exit_code, outcome.timed_out, outcome.report_problem, outcome.stragglers_killed) == (0, False, None, 0)
    assert "--junitxml=/judge/report/junit.xml" in outcome.command and "/judge/tests/F01_acceptance.py" in outcome.command
    assert "43 passed" in outcome.output_tail
    report = parse_junit(outcome.report, task.tests.test_files)
    assert len(report.cases) == 43 and all(c.outcome == "passed" for c in report.cases) and not report.problems
    assert not host_copy.exists()
    assert client.containers.list(all=True, filters={"id": container}) == []


# --- isolation, seen from inside --------------------------------------------------------------------

INSIDE = r'''
import errno, json, os, resource, signal, socket, stat

PORT = {port}
JUNIT = "/judge/report/junit.xml"


def _errno(call):
    try:
        call()
    except OSError as exc:
        return exc.errno
    return 0


def test_runs_as_the_unprivileged_judge_user_without_capabilities():
    assert (os.getuid(), os.geteuid(), os.getgid(), set(os.getgroups())) == (10001, 10001, 10001, {{10001}})
    status = dict(line.split(":\t", 1) for line in open("/proc/self/status").read().splitlines() if ":\t" in line)
    assert status["CapEff"] == status["CapPrm"] == status["CapInh"] == status["CapAmb"] == "0000000000000000"
    assert status["NoNewPrivs"] == "1"
    assert _errno(lambda: open("/etc/shadow").read()) == errno.EACCES


def test_no_network_but_loopback():
    assert os.listdir("/sys/class/net") == ["lo"]
    assert open("/proc/net/route").read().strip().count("\n") == 0  # the header only: no route
    # The host's loopback is not this one: the judge's listener is not reachable.
    assert _errno(lambda: socket.create_connection(("127.0.0.1", PORT), timeout=5)) == errno.ECONNREFUSED
    # Anywhere else: no route at all (no packet leaves; the address is documentation-only).
    assert _errno(lambda: socket.create_connection(("192.0.2.1", 80), timeout=5)) == errno.ENETUNREACH


def test_the_root_file_system_is_read_only_and_the_tests_are_not_writable():
    for path in ("/x", "/etc/x", "/usr/local/lib/python3.11/dist-packages/x.py", "/var/tmp/x"):
        assert _errno(lambda: open(path, "w")) in (errno.EROFS, errno.EACCES), path
    tests = os.path.dirname(os.path.abspath(__file__))
    assert tests == "/judge/tests"
    mode = os.stat(tests).st_mode
    assert os.stat(tests).st_uid == 0 and stat.S_IMODE(mode) == 0o555
    assert _errno(lambda: open(__file__, "a")) in (errno.EACCES, errno.EROFS)
    assert _errno(lambda: open(os.path.join(tests, "conftest.py"), "w")) in (errno.EACCES, errno.EROFS)
    assert _errno(lambda: os.unlink(__file__)) in (errno.EACCES, errno.EROFS)


def test_the_report_channel_cannot_be_read_replaced_or_bypassed():
    assert stat.S_ISFIFO(os.stat(JUNIT).st_mode) and os.stat(JUNIT).st_uid == 0
    assert _errno(lambda: os.open(JUNIT, os.O_RDONLY | os.O_NONBLOCK)) == errno.EACCES
    assert _errno(lambda: os.unlink(JUNIT)) == errno.EACCES
    assert _errno(lambda: os.rename(JUNIT, "/tmp/j")) in (errno.EACCES, errno.EXDEV)
    assert _errno(lambda: os.listdir("/judge/out")) == errno.EACCES
    assert _errno(lambda: open("/judge/out/junit.xml", "w")) == errno.EACCES
    assert _errno(lambda: open("/judge/report/other.xml", "w")) == errno.EACCES


def test_the_workspace_and_tmp_are_the_only_writable_places_and_are_small():
    assert os.getcwd() == "/app" and os.stat("/app").st_uid == 10001
    for place, most in (("/app", 80 << 20), ("/tmp", 64 << 20)):
        with open(os.path.join(place, "probe"), "w") as f:
            f.write("x")
        st = os.statvfs(place)
        assert st.f_blocks * st.f_frsize <= most, place
    assert os.environ["HOME"] == "/tmp" and os.environ["TMPDIR"] == "/tmp"


def test_nothing_of_the_host_is_visible():
    for path in ("/work", "/root/.cache", "/var/run/docker.sock", "/run/docker.sock", "/var/lib/docker", {task!r}):
        assert not os.path.exists(path), path
    assert "PROCGRADE_PROBE_SECRET" not in os.environ
    procs = [p for p in os.listdir("/proc") if p.isdigit()]
    assert len(procs) < 10  # its own PID namespace: init, the supervisor, the test command


def test_the_supervisor_and_init_cannot_be_signalled():
    others = []
    for p in os.listdir("/proc"):
        if p.isdigit() and int(p) != os.getpid():
            uid = int(open(f"/proc/{{p}}/status").read().split("Uid:")[1].split()[0])
            if uid == 0:
                others.append(int(p))
    assert 1 in others and len(others) >= 2
    for pid in others:
        assert _errno(lambda: os.kill(pid, signal.SIGKILL)) == errno.EPERM


def test_resource_limits():
    assert resource.getrlimit(resource.RLIMIT_NOFILE) == (1024, 1024)
    assert resource.getrlimit(resource.RLIMIT_CORE) == (0, 0)
    for path, want in (("/sys/fs/cgroup/pids/pids.max", "128"), ("/sys/fs/cgroup/pids.max", "128"),
                       ("/sys/fs/cgroup/memory/memory.limit_in_bytes", str(1 << 30)),
                       ("/sys/fs/cgroup/memory.max", str(1 << 30))):
        if os.path.exists(path):
            assert open(path).read().strip() == want, path
'''


def test_isolation_holds_inside_the_container(tmp_path: Path, sandbox: DockerSandbox,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROCGRADE_PROBE_SECRET", "the judge's environment must not reach the tested code")
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "README").write_text("a workspace\n")
    with listener() as server, sandbox.session() as sb:
        sb.load_workspace(tmp_path / "ws")
        text = INSIDE.format(port=server.getsockname()[1], task=str(TASK))
        sb.inject_tests([SuiteFile("test_inside.py", text.encode(), True)])
        outcome = sb.run_tests(RunSpec("PYTHONDONTWRITEBYTECODE=1 {python} -m pytest -p no:cacheprovider -q "
                                       "--junitxml={junit_xml} {test_files}", "{workspace}", ["test_inside.py"], 120))
        assert_no_connection(server)
    report = parse_junit(outcome.report, ["test_inside.py"])
    failed = {c.test_id: c.message for c in report.cases if c.outcome != "passed"}
    assert failed == {} and len(report.cases) == 8, outcome.output_tail


# --- attacks -----------------------------------------------------------------------------------------


def test_network_at_import_time_is_unreachable(tmp_path: Path, task: Task, sandbox: DockerSandbox) -> None:
    with listener() as server:
        attack = f"""
        import socket as _socket
        _conn = _socket.create_connection(("127.0.0.1", {server.getsockname()[1]}), timeout=10)
        _conn.sendall(b"the hidden tests are ...")
        """
        result = judge(task, workspace(tmp_path, "reference", attack), sandbox)
        assert_no_connection(server)
    assert (result.status, result.reward) == ("evaluated", "0")
    assert len(result.collection_errors) == 5 and "Connection refused" in messages(result)


def test_contained_network_attempts_do_not_cost_an_honest_pass(tmp_path: Path, task: Task,
                                                                sandbox: DockerSandbox) -> None:
    with listener() as server:
        attack = f"""
        import errno as _errno, socket as _socket
        for _host, _want in (("127.0.0.1", _errno.ECONNREFUSED), ("::1", _errno.ECONNREFUSED),
                             ("192.0.2.1", _errno.ENETUNREACH)):
            try:
                _socket.create_connection((_host, {server.getsockname()[1]}), timeout=3).sendall(b"x")
            except OSError as _exc:
                if _exc.errno not in (_want, _errno.EADDRNOTAVAIL, _errno.ENETUNREACH):
                    raise
            else:
                raise RuntimeError("reached " + _host)
        """
        result = judge(task, workspace(tmp_path, "reference", attack), sandbox)
        assert_no_connection(server)
    assert (result.status, result.reward, result.passed) == ("evaluated", "1", 43), result.explanation


def test_hanging_workspace_times_out_and_the_container_goes(tmp_path: Path, task: Task,
                                                           sandbox: DockerSandbox) -> None:
    attack = """
    import os, time
    if os.fork() == 0:          # a daemon that outlives its parent
        os.setsid()
        if os.fork() == 0:
            time.sleep(3600)
        os._exit(0)
    time.sleep(3600)
    """
    started = time.monotonic()
    result = judge(task, workspace(tmp_path, "reference", attack), sandbox, timeout_sec=5)
    assert (result.status, result.reward) == ("timeout", "0")
    assert result.explanation == "the test command did not finish within 5s and was killed"
    assert result.details["stragglers_killed"] >= 3  # sh, pytest, the daemon
    assert time.monotonic() - started < 25


def test_a_daemon_holding_the_report_channel_is_killed_and_the_report_kept(tmp_path: Path, task: Task,
                                                                           sandbox: DockerSandbox) -> None:
    attack = """
    import os, sys, time
    _junit = next(a.split("=", 1)[1] for a in sys.argv if a.startswith("--junitxml="))
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            _fd = os.open(_junit, os.O_WRONLY)  # held open, never written
            time.sleep(3600)
        os._exit(0)
    """
    result = judge(task, workspace(tmp_path, "reference", attack), sandbox)
    assert (result.status, result.reward, result.passed) == ("evaluated", "1", 43), result.explanation
    assert result.details["stragglers_killed"] == 1


def test_bounded_fork_bomb_hits_the_pids_limit(tmp_path: Path, task: Task, sandbox: DockerSandbox) -> None:
    attack = """
    import os, time
    _n, _err = 0, None
    try:
        while True:
            if os.fork() == 0:
                time.sleep(600)
                os._exit(0)
            _n += 1
    except OSError as exc:
        _err = exc
    raise RuntimeError(f"fork bomb stopped after {_n} forks: {_err}")
    """
    result = judge(task, workspace(tmp_path, "reference", attack), sandbox)
    assert (result.status, result.reward) == ("evaluated", "0"), result.explanation
    first = result.collection_errors[0].message
    assert "Resource temporarily unavailable" in first
    forks = int(re.search(r"stopped after (\d+) forks", first).group(1))
    assert 100 <= forks < 128  # pids_limit = 128 for the whole container
    assert result.details["stragglers_killed"] >= forks
    assert subprocess.run(["true"], check=False).returncode == 0  # the host still forks


def test_a_fork_bomb_left_running_does_not_cost_the_report(tmp_path: Path, task: Task, sandbox: DockerSandbox) -> None:
    attack = """
    import os, time
    if os.fork() == 0:
        os.setsid()
        while True:             # every pid taken, for good
            try:
                os.fork()
            except OSError:
                time.sleep(0.2)
    """
    started = time.monotonic()
    result = judge(task, workspace(tmp_path, "reference", attack), sandbox, timeout_sec=60)
    # The supervisor is signalled from outside (no process needs to start), kills the bomb
    # and hands over pytest's report intact.
    assert (result.status, result.reward, result.passed) == ("evaluated", "1", 43), result.explanation
    assert result.details["stragglers_killed"] >= 100
    assert time.monotonic() - started < 60


def test_unbounded_fork_bomb_is_killed_at_the_time_limit(tmp_path: Path, task: Task, sandbox: DockerSandbox) -> None:
    attack = """
    import os
    while True:
        try:
            os.fork()
        except OSError:
            pass
    """
    started = time.monotonic()
    result = judge(task, workspace(tmp_path, "reference", attack), sandbox, timeout_sec=8)
    assert (result.status, result.reward) == ("timeout", "0")
    assert time.monotonic() - started < 40
    assert subprocess.run(["true"], check=False).returncode == 0


def test_filling_the_disk_fills_only_the_sandbox(tmp_path: Path, task: Task, sandbox: DockerSandbox) -> None:
    attack = """
    import errno, os
    _total, _errors = 0, []
    for _place in ("/tmp", "/app", "/dev/shm", "/var/tmp", "/judge"):
        _n = 0
        while True:
            try:
                with open(os.path.join(_place, f"fill{_n}.bin"), "wb") as _f:
                    _n += 1
                    while True:
                        _f.write(b"x" * (1 << 20))
                        _total += 1
            except OSError as exc:
                _errors.append(f"{_place}: {exc.strerror}")
                break
    raise RuntimeError(f"disk full after {_total} MiB: {'; '.join(_errors)}")
    """
    free_before = shutil.disk_usage("/").free
    result = judge(task, workspace(tmp_path, "reference", attack), sandbox)
    assert (result.status, result.reward) == ("evaluated", "0")
    text = messages(result)
    assert "/tmp: No space left on device" in text and "/app: No space left on device" in text
    assert "/var/tmp: Read-only file system" in text and "/judge: Permission denied" in text
    written = int(re.search(r"disk full after (\d+) MiB", text).group(1))
    assert 64 <= written <= 64 + 64 + 64 + 2  # /tmp + the workspace's scratch + /dev/shm
    assert shutil.disk_usage("/").free > free_before - 100 * MiB  # the host disk took none of it


FORGE = """
import ast, atexit, os, sys
def _fake():
    cases = []
    for f in sys.argv:
        if f.endswith(".py") and os.path.isfile(f):
            for node in ast.parse(open(f).read()).body:
                if isinstance(node, ast.FunctionDef) and node.name.startswith("test") and {keep}(os.path.basename(f)):
                    cases.append('<testcase classname="%s" name="%s" time="0.001"/>' % (os.path.basename(f)[:-3], node.name))
    return ('<?xml version="1.0" encoding="utf-8"?><testsuites name="pytest tests"><testsuite name="pytest" '
            'errors="0" failures="0" skipped="0" tests="%d" time="0.2">%s</testsuite></testsuites>'
            % (len(cases), "".join(cases)))
def _junit():
    for a in sys.argv:
        if a.startswith("--junitxml="):
            return a.split("=", 1)[1]
def _plant():
    with open(_junit(), "w") as f:
        f.write(_fake())
for _p in ("/judge/out/junit.xml", "/judge/out/status.json", "/judge/report/junit.xml.new", "/logs/verifier/reward.txt"):
    try:
        with open(_p, "w") as f:
            f.write("1.0\\n")
    except OSError:
        pass
{action}
"""


@pytest.mark.parametrize("variant, action, keep, why", [
    ("planted before pytest writes", "_plant()", "bool", "unreadable"),
    ("rewritten at exit", "atexit.register(_plant)", "bool", "unreadable"),
    ("planted, then exit 0", "_plant(); os._exit(0)", "bool", "canary test, which must fail, was reported passed"),
    ("planted without the canary, then exit 0", "_plant(); os._exit(0)", "(lambda n: n.startswith('F0'))",
     "canary test is missing"),
])
def test_forged_reports_do_not_pass(tmp_path: Path, task: Task, sandbox: DockerSandbox, variant: str, action: str,
                                    keep: str, why: str) -> None:
    result = judge(task, workspace(tmp_path, "partial", FORGE.format(action=action, keep=keep)), sandbox)
    assert (result.status, result.reward) == ("evaluated", "0"), result.explanation
    assert why in result.explanation


def test_a_forger_sparing_the_old_canary_name_is_caught(tmp_path: Path, task: Task, sandbox: DockerSandbox) -> None:
    result = judge(task, workspace(tmp_path, "partial", SPARE), sandbox)
    assert (result.status, result.reward) == ("evaluated", "0")
    assert result.passed == 43 and result.details["canary"] == "passed"


def test_a_submission_that_interrupts_collection_gets_0_not_an_infra_error(tmp_path: Path, task: Task,
                                                                           sandbox: DockerSandbox) -> None:
    ws = tmp_path / "ws"
    (ws / "verrange").mkdir(parents=True)
    (ws / "verrange/__init__.py").write_text("raise KeyboardInterrupt\n")
    result = judge(task, ws, sandbox)
    assert (result.status, result.reward) == ("evaluated", "0")
    assert result.explanation == ("no test ran: the report lists no hidden test (exit 2); on an empty workspace the "
                                  "same command reports normally, so the submission broke the run")


def test_reports_planted_in_the_workspace_and_tampering_with_the_tests_change_nothing(
        tmp_path: Path, task: Task, sandbox: DockerSandbox) -> None:
    fake = ('<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" errors="0" failures="0" '
            'skipped="0" tests="43" time="0.2"></testsuite></testsuites>')
    attack = """
    import os, sys
    for _arg in list(sys.argv):
        if _arg.endswith(".py") and os.path.isfile(_arg):
            for _target in (_arg, os.path.join(os.path.dirname(_arg), "conftest.py")):
                for _op in (lambda: open(_target, "w").write("def test_nothing():\\n    pass\\n"),
                            lambda: os.chmod(_target, 0o666), lambda: os.unlink(_target)):
                    try:
                        _op()
                    except OSError:
                        pass
    """
    files = {"judge/report/junit.xml": fake, "judge/out/junit.xml": fake, "judge/out/status.json": '{"bytes": 1}',
             "reward.txt": "1.0\n"}
    result = judge(task, workspace(tmp_path, "partial", attack, files), sandbox)
    assert_partial_honest(result)


# --- the run's end --------------------------------------------------------------------------------


def test_a_quiet_run_longer_than_the_clients_timeout_is_waited_for(tmp_path: Path, task: Task, client: Any) -> None:
    """The output stream's read timeout (here 3 s) neither ends a run early nor loses its output;
    a command that closes its output early is still waited for."""
    quick = DockerSandbox(sandbox_image(client), limits=LIMITS, client=docker_client(timeout=3),
                          labels={OWNER: OWNER_VALUE})
    (tmp_path / "ws").mkdir()
    for command, seconds, says in (("sleep 5; echo done-after-silence", 5, "done-after-silence"),
                                   ("exec >/dev/null 2>&1; sleep 4", 4, "")):
        with quick.session() as sb:
            sb.load_workspace(tmp_path / "ws")
            sb.inject_tests([])
            outcome = sb.run_tests(RunSpec(command + "; : {junit_xml} {test_files}", "{workspace}", [], 60))
        assert (outcome.exit_code, outcome.timed_out) == (0, False)
        assert outcome.duration_ms >= seconds * 1000 and says in outcome.output_tail
    assert [x for group in leftovers(client, f"{OWNER}={OWNER_VALUE}") for x in group] == []


def test_memory_is_bounded_and_an_oom_kill_is_the_submissions_fault(tmp_path: Path, task: Task,
                                                                     sandbox: DockerSandbox) -> None:
    attack = """
    _hog = b"x" * (3 << 30)     # 3 GiB, the limit is 1 GiB (no swap)
    """
    result = judge(task, workspace(tmp_path, "reference", attack), sandbox)
    assert (result.status, result.reward) == ("evaluated", "0"), result.explanation
    assert result.details["exit_code"] == 137 or "MemoryError" in messages(result)
