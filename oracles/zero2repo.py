"""Zero2Repo case packages read as they are (``benchmark/cases/<case_id>/``).

:func:`procgrade.oracles.task_package.load_task` hands a folder here when its
``source/manifest.json`` has a ``case_id`` (Zero2Repo's internal and public manifest
variants; procgrade's own layout has ``task_id``). Every field gets the meaning Zero2Repo's
runner gives it:

``source/manifest.json``
    ``case_id`` is the task id (it must equal ``denylist.json``'s); ``runner.install_command``
    builds the task's judge environment (its pip requirements, see
    :mod:`procgrade.oracles.judge_env`); ``runner.build_command`` is not run at judge time (Zero2Repo's
    judge records it ``skipped``: build outputs must be in the workspace);
    ``runner.workdir`` (``/app``) is the workspace; ``runner.judge_bans`` (``socket``,
    ``subprocess``) are enforced by the launcher's audit hook while tests run;
    ``test_command_template`` is used only when the test manifest has no command;
    ``sensitive_terms``, ``repo_slug``, ``status``, ... are kept as metadata.
``source/denylist.json``
    ``import_ban`` entries (``"itsdangerous"`` and the path token ``"itsdangerous/"``) are
    the modules the static scan and the judge-time ban refuse; ``case_id`` must match.
``milestones/<step>/test_manifest.json``
    ``test_files`` / ``support_files`` keep their ``tests/`` prefix (relative to the
    milestone folder, as the judge's ``--rootdir`` gives test ids ``tests/F01_x.py::name``);
    the test command (``test_command``, else ``test_command_template``) must be a pytest
    invocation: its ``PYTHONPATH=`` entries become the *product paths* (put on
    ``sys.path`` after pytest is imported, and scanned for runner shadows); the run is
    Zero2Repo's ``pytest -c /dev/null --rootdir=<tests>`` with ``--confcutdir=<tests>``;
    ``judge_timeout_sec`` only widens the 600 s floor; ``expected_test_count`` /
    ``test_count`` freeze the number of tests; ``step`` must be the milestone.
``controls/<name>/expect.json``
    ``reward`` (0 or 1), ``note``; ``must_fail_tests`` are test-id *suffixes* that must be
    reported failed (not errored), as Zero2Repo's rejudge reads them.

What procgrade cannot honour (hardware profiles, per-feature ``execution_groups``, apt
steps, environment checks, solve-time fields...) is listed by name in
:attr:`Task.notices` (``FILE: field: why``, the file relative to the case folder), never
silently dropped; ``procgrade task validate`` prints them and every verdict keeps them
(``details.not_honoured``).
"""

from __future__ import annotations

import json
import posixpath
import re
import shlex
from pathlib import Path
from typing import Any

from procgrade.oracles.judge_env import EnvSpec, parse_install_command

__all__ = ["is_zero2repo", "load_zero2repo", "TIMEOUT_FLOOR_SEC", "ZERO2REPO_COMMAND"]

#: Zero2Repo's judge timeout floor (``max_test_timeout_sec``); a case's ``judge_timeout_sec`` only widens it.
TIMEOUT_FLOOR_SEC = 600
#: The command procgrade runs for a Zero2Repo pytest case (the judge swaps ``{python} -m pytest``
#: for its launcher, which imports pytest first, installs the bans and puts the product paths first).
ZERO2REPO_COMMAND = ("PYTHONDONTWRITEBYTECODE=1 PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 {python} -m pytest -c /dev/null "
                     "--rootdir={test_dir} --confcutdir={test_dir} -p no:cacheprovider -o junit_family=xunit2 "
                     "-q -rfE --junitxml={junit_xml} {test_files}")

_CASE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_WORKSPACE = "/app"

# Field -> what procgrade does with it ("" = honoured as described in the module doc).
_SOURCE_FIELDS = {
    "schema_version": "", "case_id": "", "repo_slug": "", "repository_url": "", "commit": "",
    "sensitive_terms": "kept as metadata; procgrade runs no public-document leakage scan",
    "runner": "", "init_metadata": "", "status": "",
    "hardware_requirements": "not honoured: procgrade's sandboxes probe no hardware profile",
}
_RUNNER_FIELDS = {
    "schema_version": "", "language_label": "", "install_command": "", "build_command": "", "workdir": "",
    "test_command_template": "", "judge_bans": "",
    "repo_warm_command": "not honoured: a solve-time step", "env_probe_command": "not honoured: a solve-time step",
    "test_file_patterns": "kept as metadata", "source_file_patterns": "kept as metadata",
    "judge_profile": "not honoured: procgrade has no judge profiles (copy-on-write substrates)",
    "environment_checks": "not honoured: procgrade runs no environment checks",
}
_DENYLIST_FIELDS = {
    "schema_version": "", "case_id": "", "ecosystem": "", "import_ban": "", "notes": "",
    "install_ban": "not enforced: procgrade judges a finished workspace and does not control the solve "
                   "environment's installers",
    "runtime_equivalents": "not honoured: no runtime-equivalence exemptions",
}
_TESTS_FIELDS = {
    "schema_version": "", "step": "", "test_files": "", "support_files": "", "test_command": "",
    "test_command_template": "", "workdir": "", "execution_policy": "", "judge_timeout_sec": "",
    "expected_test_count": "", "test_count": "", "framework_label": "",
    "suite_wall_seconds": "kept as metadata (informational)", "suite_wall_measured_on": "kept as metadata",
    "execution_groups": "not honoured: the whole suite runs as one pytest session (Zero2Repo's final judge does "
                        "the same; per-feature commands are not run)",
    "judge_substrates": "not honoured: no judge substrates",
}
_EXPECT_FIELDS = {"reward", "note", "must_fail_tests"}
_POLICY_EXPECTED = {"network": "none", "product_immutable": True, "build_owner": "runner", "entrypoint": "test_command"}


def is_zero2repo(root: Path) -> bool:
    """Whether ``root/source/manifest.json`` is a Zero2Repo manifest (it has ``case_id``)."""
    try:
        data = json.loads((root / "source" / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and "case_id" in data and "task_id" not in data


class _Reader:
    def __init__(self, problems: Any, notices: list[str]) -> None:
        self.problems, self.notices = problems, notices

    def read(self, path: Path) -> dict[str, Any] | None:
        if not path.is_file():
            self.problems.add(path, None, "missing" if not path.exists() else "not a file")
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            self.problems.add(path, None, f"not valid JSON: {exc}")
            return None
        if not isinstance(data, dict):
            self.problems.add(path, None, f"must be a JSON object, got {type(data).__name__}")
            return None
        return data

    def fields(self, path: Path, data: dict[str, Any], known: dict[str, str], prefix: str = "") -> None:
        """Report unknown fields and fields procgrade does not honour, by name."""
        for name in data:
            if name not in known:
                self.notices.append(f"{path}: {prefix}{name}: unknown field, not honoured")
            elif known[name] and data[name] not in (None, "", [], {}):
                self.notices.append(f"{path}: {prefix}{name}: {known[name]}")

    def text(self, path: Path, data: dict[str, Any], name: str, *, required: bool = False) -> str | None:
        value = data.get(name)
        if value is None:
            if required:
                self.problems.add(path, name, "missing")
            return None
        if not isinstance(value, str):
            self.problems.add(path, name, f"must be a string, got {type(value).__name__}")
            return None
        return value

    def strings(self, path: Path, data: dict[str, Any], name: str) -> list[str]:
        value = data.get(name, [])
        if value is None:
            return []
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            self.problems.add(path, name, "must be a list of non-empty strings")
            return []
        return value


def _workdir(value: str | None) -> str | None:
    """Zero2Repo's workdir (``/app`` or below it) as procgrade's ``{workspace}`` template."""
    if value in (None, "", ".", _WORKSPACE, _WORKSPACE + "/"):
        return "{workspace}"
    norm = posixpath.normpath(value)
    if norm.startswith(_WORKSPACE + "/") and ".." not in norm.split("/"):
        return "{workspace}" + norm[len(_WORKSPACE):]
    if not norm.startswith("/") and not norm.startswith(".."):
        return "{workspace}/" + norm
    return None


def _product_path(entry: str) -> str | None:
    """A ``PYTHONPATH`` entry of the case's command as a path relative to the workspace."""
    if entry in ("", ".", "./", _WORKSPACE, _WORKSPACE + "/"):
        return ""
    norm = posixpath.normpath(entry)
    if norm.startswith(_WORKSPACE + "/"):
        norm = norm[len(_WORKSPACE) + 1:]
    if norm.startswith("/") or norm == ".." or norm.startswith("../") or "$" in norm:
        return None
    return "" if norm == "." else norm


def parse_pytest_command(command: str) -> tuple[list[str], list[str], list[str], list[str]] | str:
    """``(product paths, test paths, other words, unhonoured)`` of a Zero2Repo pytest command,
    or why it is not one procgrade can run."""
    try:
        words = shlex.split(command)
    except ValueError as exc:
        return f"cannot be parsed ({exc})"
    products: list[str] = []
    unhonoured: list[str] = []
    while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
        name, _, value = words.pop(0).partition("=")
        if name == "PYTHONPATH":
            for entry in value.split(":"):
                path = _product_path(entry)
                if path is None:
                    unhonoured.append(f"PYTHONPATH entry {entry!r} (outside the workspace)")
                elif path not in products:
                    products.append(path)
        elif name in ("PYTHONDONTWRITEBYTECODE", "PYTEST_DISABLE_PLUGIN_AUTOLOAD", "PYTHONSAFEPATH",
                      "PYTHONNOUSERSITE", "PYTHONUNBUFFERED"):
            continue
        else:
            unhonoured.append(f"environment assignment {name}= (the judge runs with a clean environment)")
    if words[:1] and re.match(r"^(?:.*/)?python(?:3(?:\.\d+)?)?$", words[0]) and words[1:3] == ["-m", "pytest"]:
        rest = words[3:]
    elif words[:1] and re.match(r"^(?:.*/)?(?:py\.test|pytest)$", words[0]):
        rest = words[1:]
    else:
        return "is not a pytest invocation (procgrade's Zero2Repo judge runs pytest commands only)"
    tests: list[str] = []
    other: list[str] = []
    for word in rest:
        if word.startswith("-"):
            other.append(word)
        elif word.endswith(".py") or "::" in word or word.rstrip("/") == "tests" or word.startswith("tests/"):
            tests.append(word)
        else:
            other.append(word)
    if other:
        unhonoured.append(f"pytest arguments {' '.join(other)!r} (Zero2Repo's launcher passes only the test files)")
    return products, tests, other, unhonoured


def load_zero2repo(root: Path, milestone: str, problems: Any) -> dict[str, Any] | None:
    """The parts of a :class:`~procgrade.oracles.task_package.Task` read from a Zero2Repo case (``None``
    when a problem was added to ``problems``)."""
    from procgrade.oracles.task_package import ControlExpect, Denylist, SourceManifest, TestManifest, _check_relpath

    notices: list[str] = []
    r = _Reader(problems, notices)
    before = len(problems.items)
    mpath = root / "source" / "manifest.json"
    dpath = root / "source" / "denylist.json"
    mdir = root / "milestones" / milestone
    tpath = mdir / "test_manifest.json"
    manifest = r.read(mpath)
    denylist = r.read(dpath) if dpath.exists() else {}
    if not dpath.exists():
        notices.append(f"{dpath}: missing: no import ban (Zero2Repo's public clones run with --no-enforce-denylist)")
    tests = r.read(tpath)
    if not (root / "public").is_dir():
        problems.add(root / "public", None, "missing: the public specification folder")
    recipe = root / "source" / "recipe.lock.json"
    if recipe.exists():
        notices.append(f"{recipe}: not read: procgrade builds the judge environment from runner.install_command, "
                       "not from the case's image recipe")
    if (mdir / "run_acceptance.sh").exists():
        notices.append(f"{mdir / 'run_acceptance.sh'}: not run: procgrade runs the test manifest's pytest command")
    if manifest is None or tests is None or denylist is None:
        return None

    # source/manifest.json
    r.fields(mpath, manifest, _SOURCE_FIELDS)
    case_id = r.text(mpath, manifest, "case_id", required=True)
    if case_id is not None and not _CASE_ID.match(case_id):
        problems.add(mpath, "case_id", f"{case_id!r} is not a usable id (letters, digits, . _ -)")
    runner = manifest.get("runner")
    if not isinstance(runner, dict):
        problems.add(mpath, "runner", "missing or not an object")
        runner = {}
    r.fields(mpath, runner, _RUNNER_FIELDS, "runner.")
    install = r.text(mpath, runner, "install_command") or ""
    requirements, skipped = parse_install_command(install)
    notices += [f"{mpath}: runner.install_command: {s}" for s in skipped]
    build = r.text(mpath, runner, "build_command")
    if build and build.strip() not in ("true", ":"):
        notices.append(f"{mpath}: runner.build_command: not run at judge time (Zero2Repo's judge skips it too: "
                       "build outputs must be in the workspace)")
    workdir = _workdir(r.text(mpath, runner, "workdir"))
    if workdir is None:
        problems.add(mpath, "runner.workdir", f"{runner.get('workdir')!r} is not {_WORKSPACE} or a folder below it")
    judge_bans = r.strings(mpath, runner, "judge_bans")
    for ban in judge_bans:
        if ban not in ("socket", "subprocess"):
            problems.add(mpath, "runner.judge_bans", f"{ban!r}: procgrade knows the judge bans socket and subprocess")
    status = manifest.get("status")
    if status not in (None, "released"):
        notices.append(f"{mpath}: status: {status!r} (not released)")
    language = r.text(mpath, runner, "language_label") or "python"

    # source/denylist.json
    import_ban: list[str] = []
    if denylist:
        r.fields(dpath, denylist, _DENYLIST_FIELDS)
        did = denylist.get("case_id")
        if did is not None and case_id is not None and did != case_id:
            problems.add(dpath, "case_id", f"{did!r} differs from source/manifest.json case_id {case_id!r}")
        ecosystem = denylist.get("ecosystem")
        if ecosystem not in (None, "pip", "source", "conda"):
            notices.append(f"{dpath}: ecosystem: {ecosystem!r}: only Python imports are banned")
        for entry in r.strings(dpath, denylist, "import_ban"):
            module = entry.rstrip("/").strip().replace("/", ".")
            if _MODULE.match(module):
                if module not in import_ban:
                    import_ban.append(module)
            else:
                notices.append(f"{dpath}: import_ban: {entry!r} is not a Python module name or path token "
                               "(not enforced)")
    install_ban = r.strings(dpath, denylist, "install_ban") if denylist else []

    # milestones/<step>/test_manifest.json
    r.fields(tpath, tests, _TESTS_FIELDS)
    step = tests.get("step")
    if step is not None and step != milestone:
        problems.add(tpath, "step", f"{step!r} differs from the milestone folder {milestone!r}")
    test_files = r.strings(tpath, tests, "test_files")
    support_files = r.strings(tpath, tests, "support_files")
    if not test_files:
        problems.add(tpath, "test_files", "lists no test file")
    for kind, names in (("test_files", test_files), ("support_files", support_files)):
        for name in names:
            try:
                _check_relpath(name)
            except ValueError as exc:
                problems.add(tpath, kind, str(exc))
    command = r.text(tpath, tests, "test_command") or r.text(tpath, tests, "test_command_template") \
        or r.text(mpath, runner, "test_command_template")
    products: list[str] = [""]
    if command is None:
        problems.add(tpath, "test_command", "missing (and no test_command_template here or in source/manifest.json)")
    else:
        parsed = parse_pytest_command(command.replace("{test_files}", "").replace("{test_dir}", "tests"))
        if isinstance(parsed, str):
            problems.add(tpath, "test_command", f"{command!r} {parsed}")
        else:
            products, listed, _, unhonoured = parsed
            products = products or [""]
            notices += [f"{tpath}: test_command: {u}" for u in unhonoured]
            stray = [t for t in listed if t.split("::")[0] not in test_files + support_files
                     and t.rstrip("/") != "tests"]
            if stray:
                notices.append(f"{tpath}: test_command: names {', '.join(stray[:3])} beyond test_files "
                               "(the judge runs test_files)")
    twd = tests.get("workdir")
    if twd is not None and _workdir(twd) != workdir:
        notices.append(f"{tpath}: workdir: {twd!r} differs from runner.workdir (runner.workdir is used)")
    policy = tests.get("execution_policy") or {}
    if isinstance(policy, dict):
        for key, value in policy.items():
            if key in ("schema_version", "run_dependencies"):
                continue
            if _POLICY_EXPECTED.get(key, object()) != value:
                notices.append(f"{tpath}: execution_policy.{key}: {value!r} not honoured (procgrade: "
                               "network none, a copied workspace, the runner's test command)")
    timeout = tests.get("judge_timeout_sec")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0):
        problems.add(tpath, "judge_timeout_sec", "must be a positive number of seconds")
        timeout = None
    effective_timeout = max(TIMEOUT_FLOOR_SEC, int(-(-float(timeout) // 1)) if timeout else 0)
    count = tests.get("expected_test_count", tests.get("test_count"))
    if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count <= 0):
        problems.add(tpath, "expected_test_count", "must be a positive integer")
        count = None
    framework = tests.get("framework_label")
    if framework is not None and "pytest" not in str(framework).lower():
        problems.add(tpath, "framework_label", f"{framework!r}: procgrade judges pytest suites only")

    # controls/<name>/expect.json (read here: Zero2Repo's fields, rewards may be 0.0 / 1.0)
    controls: dict[str, tuple[Path, Any]] = {}
    cdir = root / "controls"
    if cdir.is_dir():
        for entry in sorted(cdir.iterdir()):
            if not entry.is_dir():
                continue
            epath = entry / "expect.json"
            if not (entry / "app").is_dir():
                problems.add(entry / "app", None, "missing: the control's workspace")
            data = r.read(epath)
            if data is None:
                continue
            for name in data:
                if name not in _EXPECT_FIELDS:
                    notices.append(f"{epath}: {name}: unknown field, not honoured")
            reward = data.get("reward")
            if reward not in (0, 1) or isinstance(reward, bool):
                problems.add(epath, "reward", f"must be 0 or 1, got {reward!r}")
                continue
            note = data.get("note") or f"control {entry.name}"
            must_fail = r.strings(epath, data, "must_fail_tests") or None
            if must_fail and reward == 1:
                problems.add(epath, "must_fail_tests", "a control with reward 1 cannot have failing tests")
                continue
            controls[entry.name] = (entry / "app", ControlExpect(reward=int(reward), note=str(note),
                                                                  must_fail_tests=must_fail))

    if len(problems.items) > before or case_id is None or workdir is None or not test_files:
        return None
    try:
        source = SourceManifest(task_id=case_id, title=str(manifest.get("repo_slug") or case_id), language=language,
                                language_version=str(runner.get("schema_version") or "unspecified"),
                                build_command=build or None, workdir=workdir, test_command=ZERO2REPO_COMMAND,
                                milestones=[milestone], sensitive_terms=[t for t in manifest.get("sensitive_terms") or []
                                                                         if isinstance(t, str) and t])
        deny = Denylist(install_ban=install_ban, import_ban=import_ban)
        test_manifest = TestManifest(test_files=test_files, support_files=support_files,
                                     test_command=ZERO2REPO_COMMAND, judge_timeout_sec=effective_timeout,
                                     expected_test_count=count)
    except Exception as exc:  # pydantic.ValidationError: a value Zero2Repo allows and procgrade cannot use
        for error in getattr(exc, "errors", lambda **_: [{"loc": (), "msg": str(exc)}])(include_url=False):
            problems.add(tpath, ".".join(str(p) for p in error["loc"]) or None, error["msg"].removeprefix("Value error, "))
        return None
    metadata = {k: manifest[k] for k in ("schema_version", "repo_slug", "repository_url", "commit", "status")
                if k in manifest}
    metadata["runner"] = {k: runner[k] for k in ("language_label", "install_command", "build_command",
                                                 "test_command_template", "workdir") if k in runner}
    metadata["case_timeout_sec"] = timeout
    for key in ("suite_wall_seconds", "framework_label"):
        if key in tests:
            metadata[key] = tests[key]
    return {
        "manifest": source, "denylist": deny, "tests": test_manifest, "tests_dir": mdir,
        "controls": controls, "layout": "zero2repo",
        "notices": tuple(n.removeprefix(str(root) + "/") for n in notices),
        "env": EnvSpec(tuple(requirements)) if requirements else None,
        "product_paths": tuple(products), "judge_bans": tuple(judge_bans), "metadata": metadata,
    }
