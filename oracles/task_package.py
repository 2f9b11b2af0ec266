"""Task packages (Zero2Repo layout): load and validate one ``tasks/<task_id>/`` folder.

Layout (paper, Appendix B; the sample ``tasks/verrange/README.md`` explains every key)::

    public/...                              what the agent gets
    source/manifest.json                    runner metadata (SourceManifest)
    source/denylist.json                    install_ban, import_ban (Denylist)
    milestones/final/tests/...              the hidden suite: test_files + support_files
    milestones/final/test_manifest.json     test inventory and command template (TestManifest)
    controls/<name>/app/                    a workspace to judge as a submission
    controls/<name>/expect.json             the reward it must get (ControlExpect)

A folder whose ``source/manifest.json`` has ``case_id`` is a Zero2Repo case package and is
read as it is by :mod:`procgrade.oracles.zero2repo` (its own field names and semantics).

Everything is checked on load and every problem is reported as ``FILE: field: reason``
(all of them at once, one per line). The JSON files are read with strict models
that forbid unknown keys: a typo in a field name is an error, not a default.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from procgrade.engine.canonical import canonical_json
from procgrade.engine.errors import InputError

__all__ = [
    "TaskPackageError",
    "SourceManifest",
    "SubmitMarker",
    "Denylist",
    "TestManifest",
    "ControlExpect",
    "Control",
    "SuiteFile",
    "Task",
    "load_task",
    "suite_sha256",
    "PLACEHOLDERS",
    "fill_template",
]

#: The placeholders a test command template may use (README of tasks/verrange).
PLACEHOLDERS = ("workspace", "test_dir", "test_files", "junit_xml", "python")
_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
_TASK_ID = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$"
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


class TaskPackageError(InputError):
    """A task package is malformed; ``problems`` holds every ``FILE: field: reason`` found."""

    def __init__(self, problems: list[tuple[str, str | None, str]]) -> None:
        first = problems[0]
        super().__init__(first[0], None, first[1], first[2])
        self.problems = [f"{source}: {fld or '-'}: {reason}" for source, fld, reason in problems]

    def __str__(self) -> str:
        return "\n".join(self.problems)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


RelPath = Annotated[str, Field(min_length=1, max_length=500)]


def _check_relpath(value: str) -> str:
    if value.startswith("/") or "\\" in value or "\x00" in value:
        raise ValueError(f"must be a relative POSIX path, got {value!r}")
    norm = posixpath.normpath(value)
    if norm != value or norm.startswith("../") or norm == ".." or norm == ".":
        raise ValueError(f"must be a normalised path inside the folder, got {value!r}")
    return value


class SubmitMarker(_Strict):
    """The explicit submission: a file the agent writes when it is done (Zero2Repo:
    ``/logs/agent/submit`` holding ``CODINGBENCH_SUBMIT``). Optional: without it every
    workspace counts as submitted."""

    path: RelPath = Field(description="Where the marker is, relative to the submitted workspace "
                                      "(a caller may name another file explicitly).")
    content: Annotated[str, Field(min_length=1)] = Field(description="The marker's exact text (a final newline is ignored).")

    @field_validator("path")
    @classmethod
    def _path(cls, value: str) -> str:
        return _check_relpath(value)


class SourceManifest(_Strict):
    """``source/manifest.json``: runner metadata."""

    task_id: Annotated[str, Field(pattern=_TASK_ID)]
    title: Annotated[str, Field(min_length=1)]
    language: Annotated[str, Field(min_length=1)]
    language_version: Annotated[str, Field(min_length=1)]
    build_command: str | None = None
    workdir: Annotated[str, Field(min_length=1)] = "{workspace}"
    test_command: Annotated[str, Field(min_length=1)]
    milestones: Annotated[list[Annotated[str, Field(pattern=_TASK_ID)]], Field(min_length=1)]
    public_files: list[RelPath] = Field(default_factory=list)
    sensitive_terms: list[Annotated[str, Field(min_length=1)]] = Field(default_factory=list)
    submit_marker: SubmitMarker | None = None

    @field_validator("public_files")
    @classmethod
    def _paths(cls, value: list[str]) -> list[str]:
        return [_check_relpath(v) for v in value]

    @field_validator("workdir")
    @classmethod
    def _workdir(cls, value: str) -> str:
        names = set(_PLACEHOLDER.findall(value))
        if names - {"workspace"} or not value.startswith("{workspace}"):
            raise ValueError("must be {workspace} or a path below it ({workspace}/sub)")
        rest = value[len("{workspace}"):]
        if rest and (not rest.startswith("/") or ".." in rest.split("/")):
            raise ValueError("must be {workspace} or a path below it ({workspace}/sub)")
        return value


class Denylist(_Strict):
    """``source/denylist.json``: distributions the installer refuses and modules the scan rejects."""

    install_ban: list[Annotated[str, Field(min_length=1)]] = Field(default_factory=list)
    import_ban: list[Annotated[str, Field(min_length=1)]] = Field(default_factory=list)

    @field_validator("import_ban")
    @classmethod
    def _modules(cls, value: list[str]) -> list[str]:
        for name in value:
            if not _MODULE.match(name):
                raise ValueError(f"{name!r} is not a dotted module name")
        return value


class TestManifest(_Strict):
    """``milestones/<m>/test_manifest.json``: the hidden suite's inventory and command."""

    __test__ = False  # not a pytest test class

    test_files: Annotated[list[RelPath], Field(min_length=1)]
    support_files: list[RelPath] = Field(default_factory=list)
    test_command: Annotated[str, Field(min_length=1)]
    judge_timeout_sec: Annotated[int, Field(gt=0, le=7 * 24 * 3600)]
    expected_test_count: Annotated[int, Field(gt=0)] | None = None

    @field_validator("test_files", "support_files")
    @classmethod
    def _paths(cls, value: list[str]) -> list[str]:
        for v in value:
            _check_relpath(v)
        if len(set(value)) != len(value):
            raise ValueError("lists a file twice")
        return value

    @field_validator("test_files")
    @classmethod
    def _python_tests(cls, value: list[str]) -> list[str]:
        for v in value:
            module = v[:-3].replace("/", ".") if v.endswith(".py") else ""
            if not _MODULE.match(module):
                raise ValueError(f"{v!r}: a test file must be a .py file with an importable module name")
        return value

    @field_validator("test_command")
    @classmethod
    def _template(cls, value: str) -> str:
        unknown = sorted(set(_PLACEHOLDER.findall(value)) - set(PLACEHOLDERS))
        if unknown:
            raise ValueError(f"unknown placeholder(s) {', '.join('{' + u + '}' for u in unknown)} "
                             f"(known: {', '.join('{' + p + '}' for p in PLACEHOLDERS)})")
        for needed in ("test_files", "junit_xml"):
            if "{" + needed + "}" not in value:
                raise ValueError(f"must use {{{needed}}}")
        return value

    @model_validator(mode="after")
    def _disjoint(self) -> "TestManifest":
        both = sorted(set(self.test_files) & set(self.support_files))
        if both:
            raise ValueError(f"{', '.join(both)} listed both as test and as support file")
        return self


class ControlExpect(_Strict):
    """``controls/<name>/expect.json``."""

    reward: Literal[0, 1]
    note: Annotated[str, Field(min_length=1)]
    must_fail_tests: list[Annotated[str, Field(min_length=1)]] | None = None


@dataclass(frozen=True)
class Control:
    name: str
    app: Path
    expect: ControlExpect


@dataclass(frozen=True)
class SuiteFile:
    """One file of the hidden suite: its name relative to the tests folder, and its bytes."""

    name: str
    data: bytes
    is_test: bool

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()


def suite_sha256(files: list[SuiteFile]) -> str:
    """sha256 of the canonical JSON of the sorted ``[name, sha256 of bytes]`` pairs."""
    pairs = sorted([f.name, f.sha256] for f in files)
    return hashlib.sha256(canonical_json(pairs)).hexdigest()


@dataclass(frozen=True)
class Task:
    root: Path
    manifest: SourceManifest
    denylist: Denylist
    milestone: str
    tests_dir: Path
    tests: TestManifest
    controls: dict[str, Control] = field(default_factory=dict)
    #: ``procgrade`` (this module's layout) or ``zero2repo`` (:mod:`procgrade.oracles.zero2repo`).
    layout: str = "procgrade"
    #: The task's own judge environment (pinned test dependencies), if it declares one.
    env: Any = None
    #: Folders of the workspace (relative; ``""`` the root) on the product's import path; None:
    #: read from the ``PYTHONPATH={workspace}...`` of the test command.
    product_paths: tuple[str, ...] | None = None
    #: Zero2Repo's ``judge_bans`` (``socket``, ``subprocess``), enforced while tests run.
    judge_bans: tuple[str, ...] = ()
    #: What procgrade reads but does not honour, ``FILE: field: why`` (never silently dropped).
    notices: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def task_id(self) -> str:
        return self.manifest.task_id

    @cached_property
    def suite(self) -> tuple[SuiteFile, ...]:
        """The hidden suite's files (tests first, then support files), read once."""
        files = [SuiteFile(n, (self.tests_dir / n).read_bytes(), True) for n in self.tests.test_files]
        files += [SuiteFile(n, (self.tests_dir / n).read_bytes(), False) for n in self.tests.support_files]
        return tuple(files)

    @cached_property
    def suite_sha256(self) -> str:
        return suite_sha256(list(self.suite))


def fill_template(template: str, values: dict[str, str | list[str]]) -> str:
    """Replace each ``{name}`` by its shell-quoted value (a list: each item quoted, space-joined)."""
    import shlex

    def one(match: re.Match[str]) -> str:
        value = values[match.group(1)]
        if isinstance(value, list):
            return " ".join(shlex.quote(v) for v in value)
        return shlex.quote(value)

    return _PLACEHOLDER.sub(one, template)


# --- loading --------------------------------------------------------------------------------------


class _Problems:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.items: list[tuple[str, str | None, str]] = []

    def label(self, path: Path) -> str:
        return str(path)

    def add(self, path: Path, fld: str | None, reason: str) -> None:
        self.items.append((self.label(path), fld, reason))


def _read_model(path: Path, model: type[BaseModel], problems: _Problems) -> Any:
    if not path.is_file():
        problems.add(path, None, "missing" if not path.exists() else "not a file")
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        problems.add(path, None, f"not valid JSON: {exc}")
        return None
    if not isinstance(data, dict):
        problems.add(path, None, f"must be a JSON object, got {type(data).__name__}")
        return None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        for error in exc.errors(include_url=False):
            loc = ".".join(str(p) for p in error["loc"]) or None
            msg = error["msg"].removeprefix("Value error, ")
            if error["type"] == "extra_forbidden":
                msg = "unknown field (not part of the layout)"
            problems.add(path, loc, msg)
        return None


def _check_suite_files(tests: TestManifest, tests_dir: Path, mdir: Path, milestone: str, problems: _Problems) -> None:
    if not tests_dir.is_dir():
        problems.add(tests_dir, None, "missing: the hidden tests folder")
        return
    where = tests_dir.relative_to(mdir.parent.parent).as_posix()
    for kind, names in (("test_files", tests.test_files), ("support_files", tests.support_files)):
        for rel in names:
            path = tests_dir / rel
            if path.is_symlink() or not path.is_file():
                problems.add(mdir / "test_manifest.json", kind, f"{rel!r} is not a regular file in {where}/")


def load_task(task_dir: str | Path, milestone: str = "final") -> Task:
    """Load and validate the task package at ``task_dir``; raise :class:`TaskPackageError`
    listing every problem found."""
    root = Path(task_dir).resolve()
    problems = _Problems(root)
    if not root.is_dir():
        raise TaskPackageError([(str(root), None, "not a directory")])
    from procgrade.oracles.zero2repo import is_zero2repo, load_zero2repo

    if is_zero2repo(root):
        parts = load_zero2repo(root, milestone, problems)
        if parts is not None:
            _check_suite_files(parts["tests"], parts["tests_dir"], root / "milestones" / milestone, milestone, problems)
        if problems.items or parts is None:
            raise TaskPackageError(problems.items or [(str(root), None, "not a readable Zero2Repo case")])
        controls = {name: Control(name, app, expect) for name, (app, expect) in parts.pop("controls").items()}
        return Task(root=root, milestone=milestone, controls=controls, **parts)
    manifest = _read_model(root / "source" / "manifest.json", SourceManifest, problems)
    denylist = _read_model(root / "source" / "denylist.json", Denylist, problems)
    mdir = root / "milestones" / milestone
    tests = _read_model(mdir / "test_manifest.json", TestManifest, problems)
    tests_dir = mdir / "tests"
    if not (root / "public").is_dir():
        problems.add(root / "public", None, "missing: the public specification folder")

    if manifest is not None:
        if manifest.task_id != root.name:
            problems.add(root / "source" / "manifest.json", "task_id",
                         f"{manifest.task_id!r} differs from the folder name {root.name!r}")
        if milestone not in manifest.milestones:
            problems.add(root / "source" / "manifest.json", "milestones", f"does not list {milestone!r}")
        for name in manifest.milestones:
            if not (root / "milestones" / name / "test_manifest.json").is_file():
                problems.add(root / "milestones" / name / "test_manifest.json", None,
                             f"missing (milestone {name!r} is listed in source/manifest.json)")
        for rel in manifest.public_files:
            if not rel.startswith("public/"):
                problems.add(root / "source" / "manifest.json", "public_files", f"{rel!r} is not under public/")
            elif not (root / rel).is_file():
                problems.add(root / rel, None, "missing (listed in source/manifest.json public_files)")
        if tests is not None and manifest.test_command != tests.test_command:
            problems.add(root / "source" / "manifest.json", "test_command",
                         f"differs from milestones/{milestone}/test_manifest.json test_command (which is authoritative)")

    if tests is not None:
        _check_suite_files(tests, tests_dir, mdir, milestone, problems)

    controls: dict[str, Control] = {}
    cdir = root / "controls"
    if cdir.is_dir():
        for entry in sorted(cdir.iterdir()):
            if not entry.is_dir():
                problems.add(entry, None, "not a control folder (controls/<name>/app/ + expect.json)")
                continue
            if not (entry / "app").is_dir():
                problems.add(entry / "app", None, "missing: the control's workspace")
            expect = _read_model(entry / "expect.json", ControlExpect, problems)
            if expect is None:
                continue
            if tests is not None and expect.must_fail_tests:
                for test_id in expect.must_fail_tests:
                    file_part = test_id.split("::", 1)[0]
                    if "::" not in test_id or file_part not in tests.test_files:
                        problems.add(entry / "expect.json", "must_fail_tests",
                                     f"{test_id!r} is not a test id of the hidden suite (FILE::NAME, FILE in test_files)")
                if expect.reward == 1:
                    problems.add(entry / "expect.json", "must_fail_tests", "a control with reward 1 cannot have failing tests")
            controls[entry.name] = Control(entry.name, entry / "app", expect)

    if problems.items:
        raise TaskPackageError(problems.items)
    return Task(root=root, manifest=manifest, denylist=denylist, milestone=milestone, tests_dir=tests_dir,
                tests=tests, controls=controls)
