"""The hidden-test acceptance oracle: judge a submitted workspace against a task's hidden suite.

Tasks come in procgrade's layout or as Zero2Repo case packages read unchanged
(:mod:`procgrade.oracles.zero2repo`); a task's pinned test dependencies are judged in its own cached
environment (:mod:`procgrade.oracles.judge_env`), named in ``details.sandbox.judge_env``.

:func:`judge` is pure (no store): copy the workspace into a fresh sandbox, scan it
(runner shadows and the denylist) before any test exists there, inject the hidden
suite, run it isolated with a wall-clock limit, and decide from the JUnit report.
:func:`accept` does that and appends the check to a run as events, in one
transaction. :func:`validate_task` judges every control of a task package.

Statuses, kept apart (``acceptance_verdict.status``):

``evaluated``
    The suite ran; ``reward`` is ``"1"`` only if the runner exited cleanly (below), its report is
    consistent (every testcase belongs to a hidden test file, none twice, totals agree),
    at least one hidden test ran, every reported test passed (none failed, errored or
    was skipped: a skipped hidden test is not a pass), no test module failed to import,
    the number of tests equals ``expected_test_count`` when the manifest gives it,
    every test visible in the test files' text was reported, and the tested code made no
    attempt the judge-time import ban refused (``details.policy_events``: the launcher,
    :mod:`procgrade.oracles.judge_launcher`, runs every ``{python} -m pytest`` command with a
    meta-path finder and an audit hook in force; an attempt costs the reward even when
    the code catches the ``ImportError``). Otherwise ``"0"``.
``rejected``
    The static scan found a banned import, compiled code it cannot read, a link out of the
    workspace, or a runner shadow (:mod:`procgrade.oracles.denylist`); no test was injected or run.
    Reward ``"0"``.
``not_submitted``
    The task requires a submit marker and it is missing, wrong, or not a regular file (a
    link in the workspace, a FIFO or a device is no submission: the marker is checked with
    ``lstat``, opened ``O_NONBLOCK | O_NOFOLLOW`` and read only up to the expected length,
    so it cannot hang the judge). Reward ``"0"``.
``timeout``
    The test command exceeded ``judge_timeout_sec`` and was killed. Reward ``"0"``.
``infra_error``
    The judge could not judge ("judge error: ..."), no reward: the sandbox could not be
    set up; or the runner produced no usable report, or a report listing no hidden test
    at all (zero tests is never a pass), *and* does the same on an empty workspace. When
    the same command reports normally on an empty workspace, the submission caused it (it
    crashed, killed or hijacked the runner, or stopped it during collection, e.g. with
    ``raise KeyboardInterrupt`` on import) and the status is ``evaluated`` with reward
    ``"0"``: a submission cannot turn its failure into an infrastructure error. (A suite
    whose text defines no test is always the judge's fault; a command that deselects
    every test looks like a broken submission here, and ``procgrade task validate``
    catches it: the reference control then gets reward 0.)

Trust model of the report: the tested code runs inside the test process, so code
written to subvert pytest in memory can forge results; no in-process runner
prevents that (Zero2Repo's judge has the same limit). What the judge does prevent:
reports or reward files planted anywhere (only the judge's own report channel is
read, and everything written to it during the run is read, so an extra write before
or after pytest's own makes it unreadable), runner shadowing (rejected), tampering
with the injected tests (read-only to the tested code), and reports that do not
match the suite (foreign, duplicate or missing tests, wrong count).

And each judgement adds a *canary*: one extra test module holding one test that must
fail. An honest run reports it failed (so pytest exits 1, and "the runner exited
cleanly" means: exit status 1 with the canary as the only failure). Code that forces
results to "passed" without telling tests apart (a patched report class, a report
generated from the test files it can see, an early exit with status 0) reports the
canary passed, leaves it out, or exits 0, and gets reward 0. The canary is named like
an ordinary test, ``test_<10 random letters>.py::test_<10 random letters>`` (never a
name of the suite), is put at a random place among the hidden test files on the command
line, and its body is one of a few ordinary comparisons of random values that fail, with
no docstring or word naming the judge: no fixed name or text gives it away. This is a
mitigation, not a proof: code written against this judge, which knows the hidden suite's
file names or guesses the canary from what it sees in the running process, can spare
it and forge the rest, and still get reward 1. The canary is not a hidden test: it is
not counted, not hashed into ``suite_sha256`` and has no ``test_result`` event;
``details.canary`` records its outcome.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import posixpath
import re
import shlex
import secrets
import signal
import stat
import string
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from procgrade.engine.errors import ProcgradeError
from procgrade.engine.events import Event
from procgrade.oracles.denylist import find_shadows, imported_banned, scan_imports
from procgrade.oracles.junit import CaseResult, JUnitError, JUnitReport, parse_junit, static_test_ids
from procgrade.oracles.outcome_runs import OutcomeRun, append_outcome, outcome_event as _event, require_appendable
from procgrade.oracles.sandbox import RunOutcome, RunSpec, Sandbox, SandboxError, hash_workspace
from procgrade.oracles.task_package import SuiteFile, Task, load_task

__all__ = [
    "VERIFIER",
    "JudgeResult",
    "ScanSummary",
    "Verdict",
    "ControlCheck",
    "judge",
    "accept",
    "validate_task",
    "make_sandbox",
    "acceptance_events",
]

VERIFIER = "procgrade-acceptance"
HARNESS = "procgrade-acceptance"
_LIST = 5  # test ids named in an explanation


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class ScanSummary:
    status: str  # passed | rejected
    files_scanned: int
    findings: list[str]


@dataclass(frozen=True)
class JudgeResult:
    task_id: str
    milestone: str
    backend: str
    status: str
    reward: str | None
    suite_sha256: str
    workspace_sha256: str | None
    explanation: str
    started_at: str
    finished_at: str
    duration_ms: int
    scan: ScanSummary | None = None
    tests: list[CaseResult] = field(default_factory=list)
    collection_errors: list[CaseResult] = field(default_factory=list)
    collection_skipped: list[CaseResult] = field(default_factory=list)
    passed: int | None = None
    failed: int | None = None
    errored: int | None = None
    skipped: int | None = None
    details: dict[str, Any] = field(default_factory=dict)
    output_tail: str = ""
    command: str = ""

    @property
    def accepted(self) -> bool:
        return self.status == "evaluated" and self.reward == "1"

    def outcome_of(self, test_id: str) -> str | None:
        return next((c.outcome for c in self.tests if c.test_id == test_id), None)


def make_sandbox(backend: str = "local", *, python: str | None = None, image: str | None = None,
                 packages: Sequence[str | Path] = ()) -> Sandbox:
    """The back-end named ``backend``: ``python`` is the local back-end's judge interpreter
    (and the base of its per-task environments), ``image`` the Docker back-end's judge image
    (and the base of its per-task layers); ``packages`` are local packages added to every
    per-task judge environment."""
    if backend == "local":
        if image is not None:
            raise ProcgradeError("--image chooses the docker back-end's judge image; the local back-end takes --python")
        from procgrade.oracles.local_sandbox import LocalSandbox

        if python is not None and not (os.path.isfile(python) and os.access(python, os.X_OK)):
            raise ProcgradeError(f"the judge interpreter {python} is not an executable file")
        return LocalSandbox(python, packages=packages)
    if backend == "docker":
        if python is not None:
            raise ProcgradeError("--python chooses the local back-end's interpreter; the docker back-end takes --image")
        try:
            from procgrade.oracles.docker_sandbox import DockerSandbox
        except ImportError as exc:
            raise ProcgradeError(f"the docker back-end is not available: {exc}") from None
        return DockerSandbox(image, packages=packages)
    raise ProcgradeError(f"unknown sandbox back-end {backend!r} (available: local, docker)")


def open_session(sandbox: Sandbox, task: Task) -> Any:
    """A session of ``sandbox`` in the task's judge environment (its pins plus the packages
    the sandbox was given), or in the sandbox's default one when the task declares none."""
    if task.env is None and not getattr(sandbox, "packages", ()):
        return sandbox.session()
    from procgrade.oracles.judge_env import EnvSpec

    return sandbox.session(env=task.env or EnvSpec())


# --- judging ----------------------------------------------------------------------------------


class _Judgement:
    def __init__(self, task: Task, workspace: Path, sandbox: Sandbox, timeout_sec: float | None) -> None:
        self.task, self.workspace, self.sandbox = task, workspace, sandbox
        self.timeout = float(timeout_sec if timeout_sec is not None else task.tests.judge_timeout_sec)
        self.started_at = _now()
        self.t0 = time.monotonic()
        self.workspace_sha: str | None = None
        self.details: dict[str, Any] = {"milestone": task.milestone, "timeout_sec": self.timeout}
        if task.tests.expected_test_count is not None:
            self.details["expected_test_count"] = task.tests.expected_test_count
        module, function = _canary_names(task)
        self.canary = SuiteFile(f"{module}.py", _canary_text(function).encode(), True)
        self.canary_id = f"{self.canary.name}::{function}"
        files = list(task.tests.test_files)
        files.insert(secrets.randbelow(len(files) + 1), self.canary.name)
        self._test_files = files
        self.product_paths = product_paths(task)
        self.launcher = SuiteFile(_free_name(task, "procgrade_launcher"), LAUNCHER_SOURCE, False)
        if task.layout == "zero2repo":
            self.details["layout"] = "zero2repo"
            self.details["case_timeout_sec"] = task.metadata.get("case_timeout_sec")
        if task.notices:
            self.details["not_honoured"] = list(task.notices)

    def result(self, status: str, reward: str | None, explanation: str, **fields: Any) -> JudgeResult:
        if self.workspace_sha is None:
            try:
                self.workspace_sha = hash_workspace(self.workspace)
            except OSError:
                pass
        return JudgeResult(
            task_id=self.task.task_id, milestone=self.task.milestone, backend=self.sandbox.backend, status=status,
            reward=reward, suite_sha256=self.task.suite_sha256, workspace_sha256=self.workspace_sha,
            explanation=explanation, started_at=self.started_at, finished_at=_now(),
            duration_ms=int((time.monotonic() - self.t0) * 1000), details=self.details, **fields,
        )


    @property
    def injected(self) -> list[SuiteFile]:
        return [*self.task.suite, self.canary, self.launcher]

    def command(self) -> str:
        """The task's command with ``{python} -m pytest`` run through the judge's launcher
        (:mod:`procgrade.oracles.judge_launcher`): pytest first, then the bans, then the product."""
        task = self.task
        template = task.tests.test_command
        if _PYTEST_MODULE not in template:
            self.details["judge_time_ban"] = "not installed: the command does not run {python} -m pytest"
            return template
        args = ["{python}", "{test_dir}/" + self.launcher.name, "--mode",
                "isolated" if task.layout == "zero2repo" else "module", "--workspace", "{workspace}",
                "--tests", "{test_dir}"]
        if task.layout == "zero2repo":
            for path in self.product_paths:
                args += ["--product", "{workspace}" + ("/" + path if path else "")]
        for ban in task.denylist.import_ban:
            args += ["--ban", shlex.quote(ban)]
        for ban in task.judge_bans:
            args += ["--judge-ban", shlex.quote(ban)]
        if _suite_imports_banned(task):
            args.append("--allow-tests")
        self.details["judge_time_ban"] = {"modules": list(task.denylist.import_ban),
                                          "judge_bans": list(task.judge_bans),
                                          "tests_may_import": "--allow-tests" in args}
        return template.replace(_PYTEST_MODULE, " ".join(args) + " --", 1)

    @property
    def test_files(self) -> list[str]:
        """The hidden test files with the canary at a random place among them."""
        return list(self._test_files)

    def spec(self) -> RunSpec:
        hide = [self.task.root]
        for folder in (self.task.root, *self.task.root.parents):
            if (folder / ".git").exists():  # the repository holding the task has its answers too
                hide.append(folder / ".git")
                break
        return RunSpec(command_template=self.command(), workdir_template=self.task.manifest.workdir,
                       test_files=self.test_files, timeout_sec=self.timeout, hide=hide)


_PYTEST_MODULE = "{python} -m pytest"
#: The launcher's source, injected beside the hidden tests (not part of the suite hash).
LAUNCHER_SOURCE = (Path(__file__).with_name("judge_launcher.py")).read_bytes()
_PYTHONPATH = re.compile(r"(?:^|\s)PYTHONPATH=(\S+)")


def product_paths(task: Task) -> tuple[str, ...]:
    """The workspace folders on the product's import path (relative, ``""`` the root): the
    task's own (Zero2Repo's ``PYTHONPATH=src``), or the ``{workspace}`` entries of
    ``PYTHONPATH=`` in the test command; the root when it names none."""
    if task.product_paths is not None:
        return task.product_paths or ("",)
    paths: list[str] = []
    for match in _PYTHONPATH.finditer(task.tests.test_command):
        for entry in match.group(1).split(":"):
            if entry == "{workspace}" or entry.startswith("{workspace}/"):
                rel = posixpath.normpath(entry[len("{workspace}"):].lstrip("/") or ".")
                rel = "" if rel == "." else rel
                if not rel.startswith("..") and rel not in paths:
                    paths.append(rel)
    return tuple(paths) or ("",)


def _free_name(task: Task, stem: str) -> str:
    taken = {f.name.split("/")[0].lower() for f in task.suite}
    name, n = f"{stem}.py", 1
    while name.lower() in taken:
        n += 1
        name = f"{stem}{n}.py"
    return name


_SUITE_BANNED: dict[str, bool] = {}


def _suite_imports_banned(task: Task) -> bool:
    """Whether the hidden suite itself imports a banned module (an oracle): then the judge-time
    ban lets the suite's own imports through."""
    key = task.suite_sha256 + ":" + ",".join(task.denylist.import_ban)
    if key not in _SUITE_BANNED:
        found = False
        for f in task.suite:
            if f.name.endswith(".py") and task.denylist.import_ban:
                if imported_banned(f.data, task.denylist.import_ban):
                    found = True
                    break
        _SUITE_BANNED[key] = found
    return _SUITE_BANNED[key]


def _random_name() -> str:
    return "test_" + "".join(secrets.choice(string.ascii_lowercase) for _ in range(10))


def _canary_names(task: Task) -> tuple[str, str]:
    """A random module name that is no name of the suite (no file, folder or module stem of
    it, compared without case) and a random test function name."""
    taken: set[str] = set()
    for f in task.suite:
        for part in f.name.split("/"):
            taken.update({part.lower(), part.rsplit(".", 1)[0].lower()})
    while True:
        module = _random_name()
        if module not in taken:
            return module, _random_name()


def _canary_text(function: str) -> str:
    """An ordinary-looking test that fails: one of a few comparisons of random values, with no
    docstring, comment or word that names the judge."""
    r = secrets.randbelow
    a, b = 2 + r(10**6), 2 + r(10**6)
    forms = [
        f"def {function}():\n    assert {a} + {b} == {a + b + 1 + r(97)}\n",
        (f"def {function}():\n    values = [{a}, {a + 1 + r(500)}, {a + 600 + r(500)}]\n"
         f"    assert sorted(values) == values[::-1]\n"),
        f"def {function}():\n    text = {format(a, 'x')!r}\n    assert text.upper() == {format(a, 'x') + 'g'!r}\n",
        f"def {function}():\n    left, right = {a}, {b}\n    assert left * right == {a * b - 1 - r(97)}\n",
    ]
    return forms[r(len(forms))]


def _read_marker(path: Path, follow: bool, limit: int) -> bytes | str:
    """At most ``limit`` bytes of the marker, or why it is no submission. Only a regular file
    counts: it is checked with ``lstat`` (``stat`` for a file the caller named, which may be
    a link) before it is opened, opened with ``O_NONBLOCK`` (and ``O_NOFOLLOW`` in the
    workspace) and checked again with ``fstat``, so a FIFO, a device or a link to one can
    neither hang the judge nor be opened."""
    try:
        st = os.stat(path, follow_symlinks=follow)
        if not stat.S_ISREG(st.st_mode):
            return f"the submit marker {path} is not a regular file"
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW))
    except FileNotFoundError:
        return f"the submit marker {path} does not exist"
    except OSError as exc:
        return f"the submit marker {path} cannot be read: {exc}"
    try:
        fst = os.fstat(fd)
        if not stat.S_ISREG(fst.st_mode) or (fst.st_dev, fst.st_ino) != (st.st_dev, st.st_ino):
            return f"the submit marker {path} is not a regular file"
        chunks, size = [], 0
        while size < limit:
            block = os.read(fd, limit - size)
            if not block:
                break
            chunks.append(block)
            size += len(block)
        return b"".join(chunks)
    except OSError as exc:
        return f"the submit marker {path} cannot be read: {exc}"
    finally:
        os.close(fd)


def _submission_problem(task: Task, workspace: Path, submit_file: Path | None) -> str | None:
    """Why the workspace is not submitted, if it is not. The marker must be a regular file (a
    link in the workspace, a FIFO or a device is no submission) holding exactly the
    manifest's content, optionally followed by one line ending (at most two of ``\\r``, ``\\n``)."""
    marker = task.manifest.submit_marker
    if marker is None:
        return None
    path = submit_file if submit_file is not None else workspace / marker.path
    want = marker.content.encode("utf-8")
    data = _read_marker(Path(path), submit_file is not None, len(want) + 3)
    if isinstance(data, str):
        return f"no submission: {data} (the hidden tests were not run)"
    rest = data[len(want):]
    if not data.startswith(want) or len(rest) > 2 or rest.strip(b"\r\n"):
        return f"no submission: the submit marker {path} does not hold {marker.content!r} (the hidden tests were not run)"
    return None


_FINDING_KINDS = (("shadow", "runner shadow(s) on the product's import path"), ("import", "banned import(s)"),
                  ("compiled", "compiled module(s) the scan cannot read"), ("link", "link(s) out of the workspace"),
                  ("limit", "workspace(s) too large to scan"))


def judge(task: Task, workspace: str | Path, sandbox: Sandbox, *, submit_file: str | Path | None = None,
          timeout_sec: float | None = None, check_submission: bool = True) -> JudgeResult:
    """Judge ``workspace`` against ``task``'s hidden suite in ``sandbox`` (see the module doc)."""
    workspace = Path(workspace).resolve()
    j = _Judgement(task, workspace, sandbox, timeout_sec)
    if check_submission:
        problem = _submission_problem(task, workspace, Path(submit_file) if submit_file is not None else None)
        if problem is not None:
            return j.result("not_submitted", "0", problem)
    scan: ScanSummary | None = None
    try:
        with open_session(sandbox, task) as sb:
            masked = _mask_banned(j, sb)
            if masked:
                j.details["masked_modules"] = masked
            loaded = sb.load_workspace(workspace)
            j.workspace_sha = loaded.sha256
            j.details["workspace"] = {"files": loaded.files, "bytes": loaded.bytes,
                                      **({"left_out": loaded.left_out[:20]} if loaded.left_out else {})}
            shadows = find_shadows(loaded.path, sb.runner_modules(), j.product_paths)
            scanned = scan_imports(loaded.path, task.denylist.import_ban)
            found = [*shadows, *scanned.findings]
            findings = [str(f) for f in found]
            scan = ScanSummary("rejected" if findings else "passed", scanned.files_scanned, findings)
            if scanned.unparsed:
                j.details["scan"] = {"unparsed": scanned.unparsed[:20]}
            j.details["sandbox"] = sb.details
            if findings:
                what = []
                for kind, label in _FINDING_KINDS:
                    n = sum(1 for f in found if f.kind == kind)
                    if n:
                        what.append(f"{n} {label}")
                return j.result("rejected", "0", f"rejected before any test ran: {' and '.join(what)}: "
                                + "; ".join(findings[:_LIST]) + (" ..." if len(findings) > _LIST else ""), scan=scan)
            sb.inject_tests(j.injected)
            spec = j.spec()
            outcome = sb.run_tests(spec)
            j.details["sandbox"] = sb.details
    except SandboxError as exc:
        return j.result("infra_error", None, f"judge error: {exc}", scan=scan)
    assert scan is not None
    return _decide(j, scan, outcome)


def _mask_banned(j: _Judgement, sb: Any) -> dict[str, list[str]]:
    """Mask the banned modules installed in the judge environment for the whole run (so no
    process, not even a fresh interpreter the tested code starts, can load them), unless
    the hidden suite imports one itself or the runner needs it (pytest's own dependencies:
    the launcher's in-process ban covers those)."""
    task = j.task
    bans = task.denylist.import_ban
    if not bans or _PYTEST_MODULE not in task.tests.test_command or _suite_imports_banned(task):
        return {}
    return sb.mask_modules(sorted({b.split(".")[0] for b in bans}))


def _exit_text(code: int | None) -> str:
    if code is None:
        return "no exit status"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    if code > 128:
        try:
            return f"exit {code} (a process killed by {signal.Signals(code - 128).name})"
        except ValueError:
            pass
    return f"exit {code}"


def _names(cases: Sequence[CaseResult]) -> str:
    ids = [c.test_id for c in cases]
    return ", ".join(ids[:_LIST]) + (f" and {len(ids) - _LIST} more" if len(ids) > _LIST else "")


def _runner_sanity(j: _Judgement) -> tuple[bool, str]:
    """Does the same command report normally on an empty workspace? (Tells a judge fault
    from a submission that broke the runner.)"""
    try:
        with tempfile.TemporaryDirectory(prefix="procgrade-empty-workspace-") as empty:
            with open_session(j.sandbox, j.task) as sb:
                sb.load_workspace(Path(empty))
                sb.inject_tests(j.injected)
                outcome = sb.run_tests(j.spec())
    except SandboxError as exc:
        return False, f"the sandbox fails on an empty workspace too: {exc}"
    if outcome.timed_out:
        return False, "the test command times out on an empty workspace too"
    if outcome.report is None or outcome.report_problem:
        return False, (f"the test command writes no usable report on an empty workspace either "
                       f"({_exit_text(outcome.exit_code)}): {outcome.output_tail.strip()[-500:]}")
    try:
        report = parse_junit(outcome.report, j.test_files)
    except JUnitError as exc:
        return False, f"the report on an empty workspace is unreadable too: {exc}"
    if not any(c.file != j.canary.name for c in [*report.cases, *report.collection_errors]):
        return False, "no test ran on an empty workspace either (the suite collects nothing)"
    return True, "on an empty workspace the same command reports normally"


_STATIC_IDS: dict[str, set[str] | None] = {}


def _static_ids(task: Task) -> set[str] | None:
    """The test ids visible in the suite's text (cached per suite hash)."""
    if task.suite_sha256 not in _STATIC_IDS:
        ini = next((f.data.decode("utf-8", "replace") for f in task.suite if f.name.endswith("pytest.ini")), None)
        _STATIC_IDS[task.suite_sha256] = static_test_ids({f.name: f.data for f in task.suite if f.is_test}, ini)
    return _STATIC_IDS[task.suite_sha256]


def _decide(j: _Judgement, scan: ScanSummary, outcome: RunOutcome) -> JudgeResult:
    task = j.task
    j.details.update(exit_code=outcome.exit_code, runner_duration_ms=outcome.duration_ms)
    if outcome.stragglers_killed:
        j.details["stragglers_killed"] = outcome.stragglers_killed
    common = {"scan": scan, "output_tail": outcome.output_tail, "command": outcome.command}
    banned = [e for e in outcome.policy_events if e.get("kind") == "import_ban"]
    if outcome.policy_events:
        j.details["policy_events"] = outcome.policy_events[:50]
    if outcome.timed_out:
        return j.result("timeout", "0", f"the test command did not finish within {j.timeout:g}s and was killed",
                        **common)

    report: JUnitReport | None = None
    broken = None
    if outcome.report is None:
        broken = f"the runner wrote no report ({_exit_text(outcome.exit_code)})"
    elif outcome.report_problem:
        broken = f"the report cannot be used: {outcome.report_problem}"
    else:
        try:
            report = parse_junit(outcome.report, j.test_files)
        except JUnitError as exc:
            broken = f"the report is unreadable ({exc}; {_exit_text(outcome.exit_code)})"
        else:
            hidden = [c for c in [*report.cases, *report.collection_errors, *report.collection_skipped]
                      if c.file != j.canary.name]
            if not hidden and not report.foreign:
                # pytest collected nothing from the hidden test files: the suite or the command
                # (a judge fault), or a submission that stopped the runner during collection
                # (``raise KeyboardInterrupt`` on import). A suite whose text defines no test is
                # the judge's fault whatever the workspace; otherwise the empty workspace tells.
                j.details["canary"] = next((c.outcome for c in report.cases if c.file == j.canary.name), "not run")
                broken = f"no test ran: the report lists no hidden test ({_exit_text(outcome.exit_code)})"
                if _static_ids(task) == set():
                    return j.result("infra_error", None, f"judge error: {broken}, and the hidden test files "
                                    "define none", **common)
    if broken is not None:
        works, why = _runner_sanity(j)
        j.details["runner_sanity"] = why
        if not works:
            return j.result("infra_error", None, f"judge error: {broken}; {why}", **common)
        return j.result("evaluated", "0", f"{broken}; {why}, so the submission broke the run", **common)

    assert report is not None
    canary = [c for c in report.cases if c.file == j.canary.name]
    tests = [c for c in report.cases if c.file != j.canary.name]
    cerrs = [c for c in report.collection_errors if c.file != j.canary.name]
    cskips = [c for c in report.collection_skipped if c.file != j.canary.name]
    canary_problem = None
    if not canary:
        if not cerrs:
            canary_problem = "the judge's canary test is missing from the report"
    elif len(canary) > 1 or canary[0].test_id != j.canary_id:
        canary_problem = "the report holds an unexpected canary test"
    elif canary[0].outcome not in ("failed", "error"):
        canary_problem = (f"the judge's canary test, which must fail, was reported {canary[0].outcome}: "
                          "the test results were tampered with")
    j.details["canary"] = canary[0].outcome if canary else "not run"
    counts = {
        "passed": sum(1 for c in tests if c.outcome == "passed"),
        "failed": sum(1 for c in tests if c.outcome == "failed"),
        "errored": sum(1 for c in tests if c.outcome == "error") + len(cerrs),
        "skipped": sum(1 for c in tests if c.outcome == "skipped") + len(cskips),
    }
    problems = list(report.problems)
    expected = task.tests.expected_test_count
    if expected is not None and len(tests) != expected and not cerrs and not cskips:
        problems.append(f"the report lists {len(tests)} hidden tests, the manifest expects {expected}")
    static = _static_ids(task)
    if static is not None and not cerrs and not cskips:
        reported = {c.test_id.split("[", 1)[0] for c in tests}
        missing = sorted(static - reported)
        if missing:
            problems.append(f"{len(missing)} test(s) in the test files were not reported, first {missing[0]}")
    if canary_problem:
        problems.insert(0, canary_problem)
    if problems:
        j.details["report_problems"] = problems

    failed = [c for c in tests if c.outcome == "failed"]
    errored = [c for c in tests if c.outcome == "error"]
    skipped = [c for c in tests if c.outcome == "skipped"]
    reasons = []
    if cerrs:
        reasons.append(f"{len(cerrs)} hidden test module(s) failed to import (collection errors: "
                       f"{', '.join(c.test_id for c in cerrs[:_LIST])})" + ("; no hidden test ran" if not tests else ""))
    if cskips:
        reasons.append(f"{len(cskips)} hidden test module(s) were skipped as a whole "
                       f"({', '.join(c.test_id for c in cskips[:_LIST])}): a skipped hidden test is not a pass")
    if failed:
        reasons.append(f"{len(failed)} of {len(tests)} hidden tests failed: {_names(failed)}")
    if errored:
        reasons.append(f"{len(errored)} errored: {_names(errored)}")
    if skipped:
        reasons.append(f"{len(skipped)} skipped ({_names(skipped)}): a skipped hidden test is not a pass")
    if problems:
        reasons.append("inconsistent report: " + "; ".join(problems))
    if not reasons and outcome.exit_code != 1:
        # pytest exits 1 when a test failed: here exactly one did, the canary.
        reasons.append(f"every hidden test passed but the runner ended with {_exit_text(outcome.exit_code)}, "
                       f"not with the status of a run whose only failure is the canary (exit 1)")
    if not tests and not reasons:
        reasons.append("no hidden test ran")
    if banned:
        names = sorted({str(e.get("name")) for e in banned})
        reasons.insert(0, f"the tested code tried to import what the task bans ({', '.join(names[:_LIST])}): "
                          "refused by the judge-time import ban")
    if reasons:
        return j.result("evaluated", "0", "; ".join(reasons), tests=tests, collection_errors=cerrs,
                        collection_skipped=cskips, **counts, **common)
    return j.result("evaluated", "1", f"all {len(tests)} hidden tests passed", tests=tests, collection_errors=cerrs,
                    **counts, **common)


# --- events and the store ---------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    run_id: str
    #: How many acceptance checks the run held before this one (0 for the first).
    attempt: int
    created_run: bool
    events: list[Event]
    result: JudgeResult

    @property
    def status(self) -> str:
        return self.result.status

    @property
    def reward(self) -> str | None:
        return self.result.reward


def _event_id(run_id: str, result: JudgeResult, attempt: int, n: int) -> str:
    base = f"{run_id}@accept:{result.suite_sha256[:12]}:{(result.workspace_sha256 or 'none')[:12]}:{attempt}:{n}"
    return base if len(base) <= 200 else "sha256:" + hashlib.sha256(base.encode()).hexdigest()


def acceptance_events(run_id: str, first_seq: int, attempt: int, result: JudgeResult) -> list[Event]:
    """The events of one acceptance check, from seq ``first_seq``: ``acceptance_started``,
    ``denylist_scan`` (when the scan ran), one ``test_result`` per hidden test (and per
    module that failed to import or was skipped whole), ``acceptance_verdict``."""
    events: list[Event] = []
    start = first_seq

    def add(kind: str, ts: str, **fields: Any) -> None:
        seq = first_seq + len(events)
        events.append(_event(kind, run_id=run_id, seq=seq, event_id=_event_id(run_id, result, attempt, len(events)),
                             ts=ts, actor="grader", parent_seq=None if seq == start else start, **fields))

    add("acceptance_started", result.started_at, task_id=result.task_id, suite_sha256=result.suite_sha256,
        backend=result.backend, workspace_sha256=result.workspace_sha256, milestone=result.milestone)
    if result.scan is not None:
        add("denylist_scan", result.finished_at, status=result.scan.status, files_scanned=result.scan.files_scanned,
            findings=result.scan.findings or None)
    for case in result.collection_errors:
        add("test_result", result.finished_at, test_id=case.test_id, outcome="error", group="collection_error",
            verifier=VERIFIER, duration_ms=case.duration_ms, message=case.message)
    for case in result.collection_skipped:
        add("test_result", result.finished_at, test_id=case.test_id, outcome="skipped", group="collection_skipped",
            verifier=VERIFIER, duration_ms=case.duration_ms, message=case.message)
    for case in result.tests:
        add("test_result", result.finished_at, test_id=case.test_id, outcome=case.outcome, group=case.file,
            verifier=VERIFIER, duration_ms=case.duration_ms, message=case.message)
    payload = {k: v for k, v in (("command", result.command), ("output_tail", result.output_tail)) if v}
    add("acceptance_verdict", result.finished_at, verifier=VERIFIER, status=result.status, reward=result.reward,
        passed=result.passed, failed=result.failed, errored=result.errored, skipped=result.skipped,
        suite_sha256=result.suite_sha256, duration_ms=result.duration_ms, explanation=result.explanation,
        details={**result.details, "attempt": attempt}, payload=payload)
    return events


def accept(store: Any, task_dir: str | Path, workspace_dir: str | Path, run_id: str | None = None,
           backend: str = "local", *, sandbox: Sandbox | None = None, submit_file: str | Path | None = None,
           timeout_sec: float | None = None) -> Verdict:
    """Judge the workspace and append the check to run ``run_id`` in one transaction.

    Without ``run_id`` the check goes to an outcome-only run
    ``acceptance/<task_id>/<workspace sha256[:16]>`` (created with a ``run_started`` by
    harness ``procgrade-acceptance``). Every call is a new attempt: judging the same
    workspace again appends a second check, never replaces the first.
    """
    task = load_task(task_dir)
    sandbox = sandbox or make_sandbox(backend)
    if run_id is not None:
        require_appendable(store, run_id, "an acceptance check")  # before spending a judgement
    result = judge(task, workspace_dir, sandbox, submit_file=submit_file, timeout_sec=timeout_sec)
    appended = append_outcome(
        store, run_id, f"acceptance/{task.task_id}/{(result.workspace_sha256 or 'unknown')[:16]}",
        started_kind="acceptance_started",
        build=lambda target, first_seq, attempt: acceptance_events(target, first_seq, attempt, result),
        opening=OutcomeRun(HARNESS, task.task_id, "acceptance-only", result.started_at), what="the acceptance check")
    return Verdict(appended.run_id, appended.check, appended.created, appended.events, result)


# --- task validation ----------------------------------------------------------------------------


@dataclass(frozen=True)
class ControlCheck:
    name: str
    expected_reward: int
    result: JudgeResult
    ok: bool
    problem: str = ""

    @property
    def seconds(self) -> float:
        """How long judging this control took (wall clock)."""
        return self.result.duration_ms / 1000


def _must_fail_problem(task: Task, want: list[str], result: JudgeResult) -> str:
    """Procgrade's layout: exactly ``want`` fail (or error), all others pass. Zero2Repo's: each
    entry is a test-id suffix that must be reported failed (not errored)."""
    if task.layout == "zero2repo":
        missing = []
        for entry in want:
            hits = [c for c in result.tests if c.test_id == entry or c.test_id.endswith("::" + entry)
                    or c.test_id.endswith("/" + entry) or c.test_id.endswith(entry)]
            if not any(c.outcome == "failed" for c in hits):
                missing.append(entry)
        return f"must_fail_tests not reported FAILED: {', '.join(missing[:3])}" if missing else ""
    wanted = set(want)
    failing = {c.test_id for c in result.tests if c.outcome in ("failed", "error")}
    others = {c.test_id for c in result.tests if c.outcome != "passed"} - wanted
    if failing != wanted or others or result.collection_errors:
        extra = sorted((failing | others) - wanted)
        missing = sorted(wanted - failing)
        return "must_fail_tests mismatch" + (f"; also failing: {', '.join(extra[:3])}" if extra else "") + (
            f"; not failing: {', '.join(missing[:3])}" if missing else "")
    return ""


def validate_task(task_dir: str | Path, backend: str = "local", *, sandbox: Sandbox | None = None,
                  timeout_sec: float | None = None) -> tuple[Task, list[ControlCheck]]:
    """Judge every control; each must get its expected reward, and for ``must_fail_tests``
    exactly those tests must fail (or error) and all others pass."""
    task = load_task(task_dir)
    sandbox = sandbox or make_sandbox(backend)
    if (task.env is not None or getattr(sandbox, "packages", ())) and hasattr(sandbox, "environment"):
        from procgrade.oracles.judge_env import EnvSpec

        try:  # built (or found) once up front: each control's time is its judging only
            sandbox.environment(task.env or EnvSpec())
        except SandboxError:
            pass  # every control then reports the same infrastructure error
    checks = []
    for name, control in sorted(task.controls.items()):
        result = judge(task, control.app, sandbox, timeout_sec=timeout_sec, check_submission=False)
        expected = str(control.expect.reward)
        problem = ""
        if result.reward != expected:
            problem = f"expected reward {expected}, got {result.reward or 'none'} ({result.status})"
        elif result.status in ("infra_error", "timeout"):
            problem = f"reward {expected} but status {result.status}"
        elif control.expect.must_fail_tests is not None:
            problem = _must_fail_problem(task, control.expect.must_fail_tests, result)
        checks.append(ControlCheck(name, control.expect.reward, result, not problem, problem))
    return task, checks
