"""Where hidden tests run: the :class:`Sandbox` interface the judge talks to.

A back-end (``local`` here, ``docker`` later) gives the judge one fresh
:class:`SandboxSession` per judgement and keeps the judge ignorant of paths and
isolation. The judge's order is fixed and each step is one call:

1. :meth:`SandboxSession.load_workspace`: copy the submitted workspace in and hash
   the judged bytes (nothing of the workspace runs);
2. the static scans, on :attr:`LoadedWorkspace.path` (a host path the judge reads);
3. :meth:`SandboxSession.inject_tests`: only now do the hidden tests exist in the
   sandbox, in a folder outside the workspace that the tested code cannot write;
4. :meth:`SandboxSession.run_tests`: the test command, isolated, with a wall-clock
   limit; it returns the JUnit report exactly as the runner wrote it (the judge
   parses and checks it) and how the process ended.

A back-end that cannot do its job raises :class:`SandboxError`: the judge records
an infrastructure error, never a verdict about the workspace.
"""

from __future__ import annotations

import hashlib
import os
import stat
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from procgrade.engine.canonical import canonical_json
from procgrade.engine.errors import ProcgradeError
from procgrade.oracles.task_package import SuiteFile

__all__ = [
    "Sandbox",
    "SandboxSession",
    "SandboxError",
    "LoadedWorkspace",
    "RunSpec",
    "RunOutcome",
    "copy_workspace",
    "workspace_sha256",
    "hash_workspace",
    "CACHE_DIRS",
    "VENV_DIRS",
    "RUNNER_PROBE",
    "RUNNER_PROBE_PRINT",
    "PolicyLines",
    "BANNED_PROBE",
]

#: Bytecode caches are derived data and are not judged: a stale or crafted ``.pyc`` whose
#: header matches its source would run code the scan never saw. Python rebuilds them.
CACHE_DIRS = frozenset({"__pycache__"})
#: Names of a top-level virtualenv (a folder holding a regular ``pyvenv.cfg``, or a link by
#: that name) that is not judged: the judge runs its own interpreter with only the workspace
#: root on the import path, so a virtualenv the workspace carries is never the one used, and
#: leaving it out of the copy means none of its (unscanned, third-party) code is reachable
#: in the sandbox, even through ``sys.path`` changed at run time.
VENV_DIRS = frozenset({".venv", "venv"})


#: Run by each back-end inside its sandbox, as the judge user: runs a tiny passing and failing
#: suite and prints, as JSON, the third-party modules the runner loaded (a workspace file with
#: one of these names would shadow the runner: it is refused), pytest's and Python's versions.
#: A back-end may append lines that add keys to ``report`` before it is printed.
RUNNER_PROBE = r"""
import contextlib, io, json, os, shutil, sys, tempfile
d = tempfile.mkdtemp(prefix="procgrade-probe-")
with open(os.path.join(d, "test_probe.py"), "w") as f:
    f.write("def test_pass():\n    assert 1\n\n\ndef test_fail():\n    assert [1] == [2]\n")
with open(os.path.join(d, "pytest.ini"), "w") as f:
    f.write("[pytest]\njunit_family = xunit2\n")
import pytest
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    pytest.main(["-c", d + "/pytest.ini", "--rootdir", d, "-p", "no:cacheprovider", "-q", "-rfE",
                 "--junitxml", d + "/j.xml", d + "/test_probe.py"])
shutil.rmtree(d, ignore_errors=True)

def third_party(mod):
    spec = getattr(mod, "__spec__", None)
    places = [getattr(spec, "origin", None) or ""] + list(getattr(spec, "submodule_search_locations", None) or [])
    return any(part in ("site-packages", "dist-packages") for p in places if p for part in p.split(os.sep))

tops = {name.partition(".")[0] for name in list(sys.modules)}
modules = sorted(t for t in tops if sys.modules.get(t) is not None and third_party(sys.modules[t]))
report = {"modules": modules, "pytest": pytest.__version__, "version": sys.version.split()[0]}
"""

#: Run with the judge interpreter, banned module names as arguments: prints, as JSON, where each
#: one installed in the environment's site-packages lives (found without importing it), so a
#: back-end can mask those files for the whole run (:meth:`SandboxSession.mask_modules`).
BANNED_PROBE = r"""
import importlib.util, json, os, sys
out = {}
for name in sys.argv[1:]:
    root = name.split(".")[0]
    try:
        spec = importlib.util.find_spec(root)
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        continue
    places = list(spec.submodule_search_locations or [])
    if not places and spec.origin and os.path.isabs(spec.origin):
        places = [spec.origin]
    places = [os.path.realpath(p) for p in places
              if any(part in ("site-packages", "dist-packages") for part in p.split(os.sep))]
    if places:
        out[root] = sorted(set(places))
print(json.dumps(out, sort_keys=True))
"""

#: Prints the probe's report (appended last).
RUNNER_PROBE_PRINT = "print(json.dumps(report, sort_keys=True))\n"


#: A line the launcher writes for each refused attempt (``procgrade-policy {json}``).
POLICY_MARK = b"procgrade-policy "
MAX_POLICY_EVENTS = 100


class PolicyLines:
    """Collects the launcher's ``procgrade-policy`` lines from a run's output, fed in chunks."""

    def __init__(self) -> None:
        self.partial = b""
        self.events: list[dict[str, Any]] = []

    def feed(self, chunk: bytes) -> None:
        data = self.partial + chunk
        lines = data.split(b"\n")
        self.partial = lines.pop()[-4096:]
        for line in lines:
            self._line(line)

    def _line(self, line: bytes) -> None:
        line = line.strip()
        if not line.startswith(POLICY_MARK) or len(self.events) >= MAX_POLICY_EVENTS:
            return
        import json

        try:
            event = json.loads(line[len(POLICY_MARK):].decode("utf-8", "replace"))
        except ValueError:
            return
        if isinstance(event, dict) and event not in self.events:
            self.events.append({k: str(v)[:300] for k, v in sorted(event.items())})

    def finish(self) -> list[dict[str, Any]]:
        if self.partial:
            self._line(self.partial)
            self.partial = b""
        return self.events


class SandboxError(ProcgradeError):
    """The back-end could not prepare or run the sandbox (an infrastructure error)."""


@dataclass(frozen=True)
class LoadedWorkspace:
    #: The judged copy, as the judge (host side) reads it.
    path: Path
    #: See :func:`workspace_sha256`.
    sha256: str
    files: int
    bytes: int
    #: Entries not copied: bytecode cache folders, a top-level virtualenv, special files (FIFOs,
    #: sockets, devices).
    left_out: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class RunSpec:
    """What to run: the task's command template and where it runs."""

    command_template: str
    workdir_template: str
    test_files: Sequence[str]
    timeout_sec: float
    #: Host paths the tested code must not see (the task package: controls, tests, sources).
    hide: Sequence[Path] = ()


@dataclass(frozen=True)
class RunOutcome:
    exit_code: int | None
    timed_out: bool
    duration_ms: int
    #: The JUnit XML bytes the runner wrote (None: nothing was written).
    report: bytes | None
    #: Why the report cannot be used even if present (too large, written after the runner ended, ...).
    report_problem: str | None = None
    #: The last lines of the command's output (stdout and stderr).
    output_tail: str = ""
    #: The command line as run (placeholders filled in).
    command: str = ""
    #: Processes of the sandbox still alive after the run that the back-end had to kill.
    stragglers_killed: int = 0
    #: What the judge's launcher refused while the tests ran (``{kind, name, detail}``, see
    #: :mod:`procgrade.oracles.judge_launcher`), read from the run's output.
    policy_events: list[dict[str, Any]] = field(default_factory=list)


class SandboxSession(ABC):
    """One judgement's sandbox; closed (and everything in it removed) when the context ends."""

    @abstractmethod
    def load_workspace(self, source: Path) -> LoadedWorkspace: ...

    @abstractmethod
    def runner_modules(self) -> frozenset[str]:
        """Top-level module names of the test runner's own (non-stdlib) code in the judge
        environment: a workspace may not shadow them."""

    def mask_modules(self, modules: Sequence[str]) -> dict[str, list[str]]:
        """Hide the installed files of these banned modules from the whole run (every process,
        a fresh interpreter the tested code starts included), before :meth:`load_workspace`;
        ``{module: [paths masked]}``. The test runner's own modules are never masked (the
        launcher's in-process ban covers them). The default masks nothing (a back-end that
        cannot)."""
        return {}

    @abstractmethod
    def inject_tests(self, files: Sequence[SuiteFile]) -> None: ...

    @abstractmethod
    def run_tests(self, spec: RunSpec) -> RunOutcome: ...

    @property
    @abstractmethod
    def details(self) -> dict[str, Any]:
        """How this sandbox isolates (recorded with the verdict)."""


class Sandbox(ABC):
    """A back-end: makes fresh sessions."""

    backend: str = ""
    #: Local packages (folders with ``pyproject.toml``, or wheels) added to every judge
    #: environment this back-end builds (e.g. an upstream a control wraps, in tests).
    packages: tuple[str, ...] = ()

    @abstractmethod
    def session(self, env: Any = None) -> AbstractContextManager[SandboxSession]:
        """A fresh session; ``env`` (an :class:`procgrade.oracles.judge_env.EnvSpec`): run it in that
        task's judge environment (built once, cached) instead of the default one."""


# --- shared helpers ---------------------------------------------------------------------------


def workspace_sha256(entries: list[list[str]]) -> str:
    """sha256 of the canonical JSON of the sorted ``[path, digest]`` entries: a regular
    file's digest is the sha256 of its bytes, a link's is ``symlink:<target>``."""
    return hashlib.sha256(canonical_json(sorted(entries))).hexdigest()


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


def _open_dir(root_fd: int, rel: str) -> int:
    """A descriptor of folder ``rel`` under ``root_fd``, opened one component at a time
    without following any link (a folder swapped for a link meanwhile fails, never leads
    out of the workspace)."""
    fd = os.dup(root_fd)
    for part in rel.split("/") if rel else ():
        try:
            nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
        finally:
            os.close(fd)
        fd = nxt
    return fd


def _is_virtualenv(dir_fd: int, name: str) -> bool:
    try:
        fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except OSError:
        return False
    try:
        return stat.S_ISREG(os.stat("pyvenv.cfg", dir_fd=fd, follow_symlinks=False).st_mode)
    except OSError:
        return False
    finally:
        os.close(fd)


def _tree(source: Path) -> Iterator[tuple[str, str, Any]]:
    """Everything under ``source`` as ``(rel, kind, value)``, folders before their contents,
    never following a link: ``("dir", rel, None)``, ``("link", rel, target)``,
    ``("file", rel, (fd, st))`` (an open descriptor, valid until the next item),
    ``("left_out", rel, None)`` (a bytecode cache, a top-level virtualenv, a special file).

    Every folder is opened relative to its parent with ``O_NOFOLLOW`` and every file with
    ``O_NOFOLLOW | O_NONBLOCK`` and checked with ``fstat``: the walk runs as root, and a
    workspace changing under it cannot make it read a FIFO, a device or a file outside."""
    root_fd = os.open(source, _DIR_FLAGS)
    try:
        stack = [""]
        while stack:
            rel_dir = stack.pop()
            dfd = _open_dir(root_fd, rel_dir)
            try:
                with os.scandir(dfd) as it:
                    names = sorted(entry.name for entry in it)
                for name in names:
                    rel = f"{rel_dir}/{name}" if rel_dir else name
                    try:
                        st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
                    except FileNotFoundError:
                        continue
                    if stat.S_ISLNK(st.st_mode):
                        if not rel_dir and name in VENV_DIRS:
                            yield "left_out", rel, None
                        else:
                            yield "link", rel, os.readlink(name, dir_fd=dfd)
                    elif stat.S_ISDIR(st.st_mode):
                        if name in CACHE_DIRS or (not rel_dir and name in VENV_DIRS and _is_virtualenv(dfd, name)):
                            yield "left_out", rel + "/", None
                        else:
                            yield "dir", rel, None
                            stack.append(rel)
                    elif stat.S_ISREG(st.st_mode):
                        try:
                            fd = os.open(name, _FILE_FLAGS, dir_fd=dfd)
                        except OSError:
                            yield "left_out", rel, None
                            continue
                        try:
                            fst = os.fstat(fd)
                            if stat.S_ISREG(fst.st_mode):
                                yield "file", rel, (fd, fst)
                            else:
                                yield "left_out", rel, None
                        finally:
                            os.close(fd)
                    else:
                        yield "left_out", rel, None
            finally:
                os.close(dfd)
    finally:
        os.close(root_fd)


def copy_workspace(source: Path, dest: Path, *, chunk: int = 1 << 20) -> LoadedWorkspace:
    """Copy ``source`` into the existing empty folder ``dest`` without following links (a link
    is copied as a link, never what it points to), hashing what is copied. Left out: bytecode
    caches, a top-level virtualenv (:data:`VENV_DIRS`) and special files (FIFOs, sockets,
    devices). Modes are normalised (0755 for folders and executables, else 0644: no setuid,
    no world-writable files); times are not kept."""
    entries: list[list[str]] = []
    left_out: list[str] = []
    files = total = 0
    for kind, rel, value in _tree(source):
        target = dest / rel
        if kind == "link":
            os.symlink(value, target)
            entries.append([rel, "symlink:" + value])
        elif kind == "dir":
            os.mkdir(target, 0o755)
        elif kind == "file":
            fd, st = value
            digest = hashlib.sha256()
            out = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                          0o755 if st.st_mode & 0o111 else 0o644)
            try:
                while block := os.read(fd, chunk):
                    digest.update(block)
                    view = memoryview(block)
                    while view:
                        view = view[os.write(out, view):]
                    total += len(block)
            finally:
                os.close(out)
            files += 1
            entries.append([rel, digest.hexdigest()])
        else:
            left_out.append(rel)
    return LoadedWorkspace(dest, workspace_sha256(entries), files, total, sorted(left_out))


def hash_workspace(source: Path) -> str:
    """The :func:`workspace_sha256` of ``source`` without copying it (same rules as the copy)."""
    entries: list[list[str]] = []
    for kind, rel, value in _tree(source):
        if kind == "link":
            entries.append([rel, "symlink:" + value])
        elif kind == "file":
            digest = hashlib.sha256()
            while block := os.read(value[0], 1 << 20):
                digest.update(block)
            entries.append([rel, digest.hexdigest()])
    return workspace_sha256(entries)
