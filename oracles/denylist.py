"""The static scan run on a submitted workspace before any hidden test is injected.

Checks on the judged copy of the workspace (:func:`~procgrade.oracles.sandbox.copy_workspace`: bytecode
caches and a top-level virtualenv are not copied, so they are neither scanned nor reachable
in the sandbox), all without running any of its code:

- **imports** (:func:`scan_imports`): every ``*.py`` file of the copy, wherever it lies
  (``node_modules``, ``site-packages``, a folder holding ``pyvenv.cfg``, dot-folders: the
  tested code can put any folder on ``sys.path`` at run time, so everything copied is its own
  code), is parsed with :mod:`ast` (never imported) and each imported module is matched
  against the task's ``import_ban``. An entry ``E`` matches module ``M`` when
  ``M == E`` or ``M`` starts with ``E + "."``. Seen: ``import a.b`` (``a.b``),
  ``from a.b import c`` (``a.b`` and ``a.b.c``), ``__import__("x")``,
  ``importlib.import_module("x")`` (also through ``from importlib import
  import_module [as alias]`` and ``import importlib as alias``) when the name is a
  string literal; relative imports are the workspace's own. Not seen (a static scan's
  limit): names built at run time, ``exec`` of text, code loaded from files of other
  names (``zipimport`` of an archive put on ``sys.path``, ``ctypes`` loading a library).
- **code the scan cannot read** (findings too, so the workspace is rejected): compiled
  modules Python would import from the workspace (sourceless bytecode ``*.pyc``, and
  ``*.pyo``, extension modules ``*.so`` / ``*.cpython-*.so`` / ``*.abi3.so``, ``*.pyd``)
  outside ``__pycache__`` (caches are not copied); and links leading out of the workspace:
  an absolute link, or a relative one that climbs out (followed only while it stays
  inside). Through such a link the tested code would import what the scan never saw, and
  on the local back-end reach the host. Links are never followed out of the workspace and
  links to folders are not walked (what they point to inside is scanned where it lies); a
  ``*.py`` link that stays inside is parsed as the file it leads to.
- **runner shadows** (:func:`find_shadows`): the test command puts the workspace first
  on ``sys.path``, so a top-level module there named like the test runner's own
  code (``pytest``, ``_pytest``, ``pluggy``, their third-party dependencies) or like a
  file the interpreter or pytest loads by name (``sitecustomize``, ``usercustomize``,
  ``conftest.py``, ``pytest.ini``) could replace the runner and forge its report.
  Any such entry at the workspace root rejects the workspace.

A finding is written ``FILE:LINE: name`` (``FILE`` relative to the workspace).
"""

from __future__ import annotations

import ast
import importlib.machinery
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from procgrade.oracles.sandbox import CACHE_DIRS, VENV_DIRS

__all__ = [
    "Finding",
    "ScanResult",
    "scan_imports",
    "find_shadows",
    "banned_entry",
    "imported_banned",
    "FIXED_SHADOW_NAMES",
    "COMPILED_SUFFIXES",
]

#: Top-level names refused at the workspace root whatever the runner loads.
FIXED_SHADOW_NAMES = frozenset({"pytest", "_pytest", "pluggy", "sitecustomize", "usercustomize", "conftest"})
#: Files refused at the workspace root by exact name (configuration pytest would read).
FIXED_SHADOW_FILES = frozenset({"pytest.ini", "conftest.py"})

_MODULE_SUFFIXES = tuple(sorted(set(importlib.machinery.all_suffixes()), key=len, reverse=True))
#: Compiled code the scan cannot read: what this Python imports without source (bytecode,
#: extension modules), and the other platforms' and older versions' forms.
COMPILED_SUFFIXES = tuple(sorted(set(importlib.machinery.BYTECODE_SUFFIXES) | set(importlib.machinery.EXTENSION_SUFFIXES)
                                 | {".pyc", ".pyo", ".pyd", ".so"}, key=len, reverse=True))


@dataclass(frozen=True)
class Finding:
    file: str
    line: int
    name: str
    detail: str = ""
    #: ``import`` (a banned import), ``compiled`` (compiled code), ``link`` (a link out of the
    #: workspace), ``shadow`` (a runner shadow), ``limit`` (too many files to scan).
    kind: str = "import"

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.name}" + (f" ({self.detail})" if self.detail else "")


@dataclass
class ScanResult:
    files_scanned: int = 0
    findings: list[Finding] = field(default_factory=list)
    #: Files that are not valid Python 3 (not a ban; the tests will show if they matter).
    unparsed: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.findings


def banned_entry(module: str, bans: list[str] | tuple[str, ...]) -> str | None:
    """The ``import_ban`` entry that matches ``module``, if any."""
    for ban in bans:
        if module == ban or module.startswith(ban + "."):
            return ban
    return None


#: Largest file parsed; a bigger ``*.py`` is listed as unparsed.
MAX_FILE_BYTES = 16 << 20
#: Most ``*.py`` files one scan reads; a workspace with more is rejected.
MAX_FILES = 50_000
#: Most links followed while resolving one link (a loop stays inside: it leads nowhere).
_MAX_HOPS = 40
#: Longest link target quoted in a finding.
_QUOTE = 200


def _resolve_inside(root: Path, rel: str) -> str | None:
    """Where the link at ``rel`` leads, relative to ``root``, following links only while the
    path stays inside; ``None`` when it leads out (an absolute target, or ``..`` above the
    root). Only paths under ``root`` are looked at: nothing outside is touched."""
    parts = rel.split("/")[:-1]
    pending = os.readlink(root / rel).split("/")[::-1]
    if not pending[-1]:
        return None  # absolute
    hops = 0
    while pending:
        part = pending.pop()
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                return None
            parts.pop()
            continue
        parts.append(part)
        here = root.joinpath(*parts)
        if here.is_symlink():
            hops += 1
            if hops > _MAX_HOPS:
                return "/".join(parts)  # a loop: dangles, inside
            target = os.readlink(here)
            if target.startswith("/"):
                return None
            parts.pop()
            pending.extend(target.split("/")[::-1])
    return "/".join(parts)


def _compiled(name: str) -> bool:
    return name.endswith(COMPILED_SUFFIXES)


def _walk(root: Path, result: ScanResult) -> tuple[list[tuple[str, Path]], bool]:
    """``(rel, path to read)`` of every ``*.py`` file (sorted), and whether the walk stopped at
    :data:`MAX_FILES`; compiled modules and links out of the workspace go to ``result``.
    No link is followed: a ``*.py`` link is read where it leads only if that is inside."""
    sources: list[tuple[str, Path]] = []
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        with os.scandir(root / rel_dir if rel_dir else root) as it:
            entries = sorted(it, key=lambda e: e.name)
        subdirs = []
        for entry in entries:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            if entry.is_symlink():
                if not rel_dir and entry.name in VENV_DIRS:
                    continue  # left out of the copy
                inside = _resolve_inside(root, rel)
                if inside is None:
                    target = os.readlink(entry.path)
                    quoted = target if len(target) <= _QUOTE else target[:_QUOTE] + "..."
                    result.findings.append(Finding(rel, 0, "link out of the workspace", f"-> {quoted}", "link"))
                elif _compiled(entry.name):
                    result.findings.append(Finding(rel, 0, "compiled module", "a link to code the scan cannot read",
                                                   "compiled"))
                elif entry.name.endswith(".py"):
                    sources.append((rel, root / inside if inside else root))
                    if len(sources) > MAX_FILES:
                        return sources, True
                continue
            try:
                mode = entry.stat(follow_symlinks=False).st_mode
            except OSError:
                continue
            if stat.S_ISDIR(mode):
                if entry.name in CACHE_DIRS or (not rel_dir and entry.name in VENV_DIRS
                                                and (Path(entry.path) / "pyvenv.cfg").is_file()
                                                and not (Path(entry.path) / "pyvenv.cfg").is_symlink()):
                    continue  # left out of the copy
                subdirs.append(rel)
            elif stat.S_ISREG(mode):
                if entry.name.endswith(".py"):
                    sources.append((rel, Path(entry.path)))
                    if len(sources) > MAX_FILES:
                        return sources, True
                elif _compiled(entry.name):
                    result.findings.append(Finding(rel, 0, "compiled module",
                                                   "Python would import it; the scan cannot read it", "compiled"))
        stack.extend(reversed(subdirs))
    return sorted(sources), False


def _read_source(path: Path) -> bytes | None:
    """At most ``MAX_FILE_BYTES + 1`` bytes of a regular file (None: not a regular file)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks, size = [], 0
        while size <= MAX_FILE_BYTES:
            block = os.read(fd, min(1 << 20, MAX_FILE_BYTES + 1 - size))
            if not block:
                break
            chunks.append(block)
            size += len(block)
        return b"".join(chunks)
    finally:
        os.close(fd)


class _Imports(ast.NodeVisitor):
    """Collects (line, module) for every import the module's text states."""

    def __init__(self) -> None:
        self.found: list[tuple[int, str]] = []
        self.import_module_names: set[str] = {"import_module"}
        self.importlib_names: set[str] = {"importlib"}

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.found.append((node.lineno, alias.name))
            if alias.name == "importlib":
                self.importlib_names.add(alias.asname or "importlib")
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level == 0 and node.module:
            self.found.append((node.lineno, node.module))
            for alias in node.names:
                if alias.name != "*":
                    self.found.append((node.lineno, f"{node.module}.{alias.name}"))
                if node.module == "importlib" and alias.name == "import_module":
                    self.import_module_names.add(alias.asname or alias.name)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        dynamic = False
        if isinstance(func, ast.Name) and (func.id == "__import__" or func.id in self.import_module_names):
            dynamic = True
        elif isinstance(func, ast.Attribute) and func.attr in ("import_module", "__import__"):
            base = func.value
            dynamic = func.attr == "__import__" or (isinstance(base, ast.Name) and base.id in self.importlib_names)
        if dynamic and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str) and not first.value.startswith("."):
                self.found.append((node.lineno, first.value))
                if isinstance(func, ast.Name) and func.id == "__import__" or \
                        isinstance(func, ast.Attribute) and func.attr == "__import__":
                    fromlist = node.args[3] if len(node.args) > 3 else next(
                        (k.value for k in node.keywords if k.arg == "fromlist"), None)
                    if isinstance(fromlist, (ast.List, ast.Tuple)):
                        for elt in fromlist.elts:
                            if isinstance(elt, ast.Constant) and isinstance(elt.value, str):
                                self.found.append((node.lineno, f"{first.value}.{elt.value}"))
        self.generic_visit(node)


def scan_imports(root: str | Path, import_ban: list[str] | tuple[str, ...]) -> ScanResult:
    """Scan the workspace (see the module doc): banned imports, compiled modules, links out."""
    root = Path(root)
    result = ScanResult()
    files, truncated = _walk(root, result)
    if truncated:
        result.findings.append(Finding(".", 0, f"more than {MAX_FILES} Python files", "too many to scan", "limit"))
        return result
    for rel, path in files:
        result.files_scanned += 1
        try:
            data = _read_source(path)
            if data is None or len(data) > MAX_FILE_BYTES:
                result.unparsed.append(rel)
                continue
            tree = ast.parse(data, filename=rel)
        except (SyntaxError, ValueError, UnicodeDecodeError, RecursionError, MemoryError, OSError):
            result.unparsed.append(rel)
            continue
        visitor = _Imports()
        try:
            visitor.visit(tree)
        except RecursionError:
            result.unparsed.append(rel)
            continue
        seen: set[tuple[int, str]] = set()
        for line, module in visitor.found:
            if (line, module) in seen:
                continue
            seen.add((line, module))
            if banned_entry(module, import_ban) is not None:
                result.findings.append(Finding(rel, line, module))
    result.findings.sort(key=lambda f: (f.file, f.line, f.name))
    return result


def _top_level_name(entry: os.DirEntry[str]) -> str | None:
    """The module name an entry at the root of ``sys.path`` provides, if any."""
    if entry.is_dir(follow_symlinks=True):
        return entry.name
    for suffix in _MODULE_SUFFIXES:
        if entry.name.endswith(suffix):
            return entry.name[: -len(suffix)]
    return None


def find_shadows(root: str | Path, runner_modules: frozenset[str] | set[str] = frozenset(),
                 product_paths: tuple[str, ...] | list[str] = ("",)) -> list[Finding]:
    """Entries that would shadow the test runner (see module doc) at the workspace root and
    at the top of every folder on the product's import path (``product_paths``, relative to
    the workspace: a case with ``PYTHONPATH=src`` puts ``src/`` before the runner's own
    folders, so ``src/pytest.py`` or ``src/conftest.py`` is refused like ``pytest.py``)."""
    names = FIXED_SHADOW_NAMES | set(runner_modules)
    findings: list[Finding] = []
    root = Path(root)
    seen: set[str] = set()
    for rel in ("", *product_paths):
        rel = rel.strip("/")
        if rel in seen or ".." in rel.split("/"):
            continue
        seen.add(rel)
        folder = root / rel if rel else root
        if folder.is_symlink() or not folder.is_dir():
            continue
        prefix = f"{rel}/" if rel else ""
        with os.scandir(folder) as entries:
            for entry in sorted(entries, key=lambda e: e.name):
                if entry.name in FIXED_SHADOW_FILES:
                    findings.append(Finding(prefix + entry.name, 0, entry.name,
                                            "shadows the test runner's configuration", "shadow"))
                    continue
                name = _top_level_name(entry)
                if name is not None and name in names:
                    what = f"{entry.name}/" if entry.is_dir(follow_symlinks=True) else entry.name
                    findings.append(Finding(prefix + what, 0, name, "shadows the test runner's module", "shadow"))
    return findings


def imported_banned(source: bytes, import_ban: list[str] | tuple[str, ...]) -> bool:
    """Whether a Python text states an import of a banned module (unparsable text: no)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    visitor = _Imports()
    try:
        visitor.visit(tree)
    except RecursionError:
        return False
    return any(banned_entry(module, import_ban) is not None for _, module in visitor.found)
