"""The static scan run on a submitted workspace before any hidden test is injected.

Two checks, both on the judged copy of the workspace, both without running any of
its code:

- **imports** (:func:`scan_imports`): every ``*.py`` file of the workspace's own code
  is parsed with :mod:`ast` (never imported) and each imported module is matched
  against the task's ``import_ban``. An entry ``E`` matches module ``M`` when
  ``M == E`` or ``M`` starts with ``E + "."``. Seen: ``import a.b`` (``a.b``),
  ``from a.b import c`` (``a.b`` and ``a.b.c``), ``__import__("x")``,
  ``importlib.import_module("x")`` (also through ``from importlib import
  import_module [as alias]`` and ``import importlib as alias``) when the name is a
  string literal; relative imports are the workspace's own. Not seen (a static scan's
  limit): names built at run time, ``exec`` of text, compiled extension modules.
  "Own code" leaves out third-party trees the workspace may hold: virtualenvs
  (a folder with ``pyvenv.cfg``), ``site-packages``/``dist-packages``,
  ``node_modules`` and ``.git``; they are not on the judge's import path.
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
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "Finding",
    "ScanResult",
    "scan_imports",
    "find_shadows",
    "banned_entry",
    "FIXED_SHADOW_NAMES",
    "SKIPPED_DIRS",
]

#: Folders whose contents are not the workspace's own code.
SKIPPED_DIRS = frozenset({".git", "node_modules", "site-packages", "dist-packages", "__pycache__"})

#: Top-level names refused at the workspace root whatever the runner loads.
FIXED_SHADOW_NAMES = frozenset({"pytest", "_pytest", "pluggy", "sitecustomize", "usercustomize", "conftest"})
#: Files refused at the workspace root by exact name (configuration pytest would read).
FIXED_SHADOW_FILES = frozenset({"pytest.ini", "conftest.py"})

_MODULE_SUFFIXES = tuple(sorted(set(importlib.machinery.all_suffixes()), key=len, reverse=True))


@dataclass(frozen=True)
class Finding:
    file: str
    line: int
    name: str
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.name}" + (f" ({self.detail})" if self.detail else "")


@dataclass
class ScanResult:
    files_scanned: int = 0
    findings: list[Finding] = field(default_factory=list)
    #: Files that are not valid Python 3 (not a ban; the tests will show if they matter).
    unparsed: list[str] = field(default_factory=list)
    #: ``*.py`` files left out as third-party trees (virtualenvs, site-packages, ...).
    skipped_files: int = 0

    @property
    def passed(self) -> bool:
        return not self.findings


def banned_entry(module: str, bans: list[str] | tuple[str, ...]) -> str | None:
    """The ``import_ban`` entry that matches ``module``, if any."""
    for ban in bans:
        if module == ban or module.startswith(ban + "."):
            return ban
    return None


#: Largest file parsed; a bigger ``*.py`` (or a link to ``/proc/kcore``) is listed as unparsed.
MAX_FILE_BYTES = 16 << 20
#: Most ``*.py`` files one scan reads; a workspace with more is rejected (it could be a link
#: to the whole file system meant to stall the judge).
MAX_FILES = 50_000


def _own_python_files(root: Path) -> tuple[list[Path], int, bool]:
    """The workspace's own ``*.py`` files (sorted), how many were left out as third-party,
    and whether the walk stopped at :data:`MAX_FILES`.

    Links to folders are followed (what Python would import through them is scanned),
    each real folder once, so a link loop or a second link to the same place costs nothing.
    """
    own: list[Path] = []
    skipped = 0
    visited: set[str] = set()
    for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
        here = Path(dirpath)
        real = os.path.realpath(here)
        if real in visited:
            dirnames[:] = []
            continue
        visited.add(real)
        third_party = (here != root and (here / "pyvenv.cfg").is_file()) or here.name in SKIPPED_DIRS
        if third_party:
            skipped += sum(1 for _d, _s, names in os.walk(here) for name in names if name.endswith(".py"))
            dirnames[:] = []
            continue
        dirnames.sort()
        for name in sorted(filenames):
            if name.endswith(".py"):
                path = here / name
                if path.is_file():  # a regular file, or a link to one
                    own.append(path)
                    if len(own) > MAX_FILES:
                        return own, skipped, True
    return own, skipped, False


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
    """Parse the workspace's own ``*.py`` files and report every banned import."""
    root = Path(root)
    files, skipped, truncated = _own_python_files(root)
    result = ScanResult(skipped_files=skipped)
    if truncated:
        result.findings.append(Finding(".", 0, f"more than {MAX_FILES} Python files", "too many to scan"))
        return result
    for path in files:
        rel = path.relative_to(root).as_posix()
        result.files_scanned += 1
        try:
            with open(path, "rb") as handle:
                data = handle.read(MAX_FILE_BYTES + 1)
            if len(data) > MAX_FILE_BYTES:
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
    return result


def _top_level_name(entry: os.DirEntry[str]) -> str | None:
    """The module name an entry at the root of ``sys.path`` provides, if any."""
    if entry.is_dir(follow_symlinks=True):
        return entry.name
    for suffix in _MODULE_SUFFIXES:
        if entry.name.endswith(suffix):
            return entry.name[: -len(suffix)]
    return None


def find_shadows(root: str | Path, runner_modules: frozenset[str] | set[str] = frozenset()) -> list[Finding]:
    """Entries at the workspace root that would shadow the test runner (see module doc)."""
    names = FIXED_SHADOW_NAMES | set(runner_modules)
    findings: list[Finding] = []
    with os.scandir(root) as entries:
        for entry in sorted(entries, key=lambda e: e.name):
            if entry.name in FIXED_SHADOW_FILES:
                findings.append(Finding(entry.name, 0, entry.name, "shadows the test runner's configuration"))
                continue
            name = _top_level_name(entry)
            if name is not None and name in names:
                what = f"{entry.name}/" if entry.is_dir(follow_symlinks=True) else entry.name
                findings.append(Finding(what, 0, name, "shadows the test runner's module"))
    return findings
