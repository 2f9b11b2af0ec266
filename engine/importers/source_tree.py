"""What an importer reads from: a file, a directory or an archive, seen as one tree.

Importers never open paths themselves. A :class:`SourceTree` lists the files
(sorted, as relative POSIX paths), reads their bytes, parses JSON and JSONL
strictly (NaN, Infinity and overflowing numbers are not JSON) and names every
place for error messages: ``dir/file.jsonl:12`` or ``runs.tar.gz!trial/result.json``.
A single file is a tree over its directory with only that file selected, so the
companions a format keeps next to it (sub-agent transcripts, continuation files,
outcome reports) are still found. Archives are read in memory, never extracted.
"""

from __future__ import annotations

import json
import math
import os
import posixpath
import re
import tarfile
import zipfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from procgrade.engine.errors import InputError
from procgrade.engine.importers.json_items import ArrayItems, open_mapped, split_array
from procgrade.engine.json_guards import (
    MAX_DEPTH,
    DuplicateKey,
    TooDeep,
    key_endings,
    nesting_error,
    pairs_without_duplicates,
    shape,
)

__all__ = ["SourceTree", "JsonLine", "open_tree", "tree_of_bytes", "ARCHIVE_SUFFIXES", "strict_json", "refuse_unsafe_json"]

ARCHIVE_SUFFIXES = (".zip", ".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tar.xz")


class _NotJson(ValueError):
    pass


def _refuse_constant(token: str) -> Any:
    raise _NotJson(f"{token} is not JSON")


def _finite(token: str) -> float:
    value = float(token)
    if math.isinf(value):
        raise _NotJson(f"number {token} is not finite JSON")
    return value


def strict_json(data: bytes | str) -> Any:
    """Parse RFC 8259 JSON exactly: big integers stay exact; NaN, Infinity and numbers
    that overflow a double are refused (none has a canonical form); so are objects that
    repeat a key (:class:`DuplicateKey`) and nesting deeper than ``MAX_DEPTH`` (:class:`TooDeep`;
    no recursion limit is ever reached: orjson stops at 1024 levels, and the stdlib path checks
    the nesting before it parses). Raises ValueError.

    orjson parses (C speed); the checks it does not make are made cheaply around it, and
    anything it parses differently from the standard library (integers past 64 bits, which
    it reads as floats; lone surrogates, which it refuses) or may have let through (a repeated
    key) goes to the exact stdlib path, which also gives the errors their lines and columns."""
    try:
        value = orjson.loads(data)  # nests at most 1024 deep, or raises
    except orjson.JSONDecodeError:
        pass
    else:
        keys, depth, huge = shape(value)
        if depth > MAX_DEPTH:
            raise TooDeep(f"JSON nested deeper than {MAX_DEPTH} levels")
        if keys == key_endings(data) and not (huge and _may_hold_long_integer(data)):
            return value  # else a key was repeated, or an integer became a float: the exact path
    return _exact_json(data)


def _exact_json(data: bytes | str) -> Any:
    """The standard library's parse with every strictness hook: exact, and slow."""
    problem = nesting_error(data)
    if problem is not None:
        raise TooDeep(problem)
    if isinstance(data, bytes):
        data = data.decode("utf-8")
    return json.loads(data, parse_constant=_refuse_constant, parse_float=_finite,
                      object_pairs_hook=pairs_without_duplicates)


_DIGITS = re.compile(rb"[0-9]{19}")
_DIGITS_TEXT = re.compile(r"[0-9]{19}")
_BEFORE_NUMBER = frozenset(b":[,")
_BLANKS = frozenset(b" \t\r\n")


def _may_hold_long_integer(data: bytes | str) -> bool:
    """Whether a number token of 19 or more digits before any fraction is in ``data``: it may
    not fit 64 bits, and orjson reads such an integer as a float (asked only when the parsed
    value holds a float that big). Found from each run of 19 digits by what precedes it: a digit run after a ``.`` or a letter is a
    fraction, an exponent or text; one after ``:``, ``[``, ``,`` (or at the start) is a number,
    or inside a string (``\\": 1234...``), which only costs the exact path."""
    text = isinstance(data, str)
    for found in (_DIGITS_TEXT if text else _DIGITS).finditer(data):  # type: ignore[arg-type]
        at = found.start()
        if at and data[at - 1] in ("-", 45):
            at -= 1
        while at and (ord(data[at - 1]) if text else data[at - 1]) in _BLANKS:  # type: ignore[arg-type]
            at -= 1
        if at == 0 or (ord(data[at - 1]) if text else data[at - 1]) in _BEFORE_NUMBER:  # type: ignore[arg-type]
            return True
    return False


def refuse_unsafe_json(label: str, line: int | None, exc: ValueError) -> None:
    """For importers' own line loops: a duplicate key or too deep nesting is never tolerated
    like a cut-off record; raise its located :class:`InputError`."""
    located = _strictness_error(label, "", exc, line)
    if located is not None:
        raise located from None


def _strictness_error(label: str, text: str, exc: ValueError, line: int | None = None) -> InputError | None:
    """The located error for a duplicate key or too deep nesting (never tolerated, unlike a
    truncated record), or None for other errors."""
    if isinstance(exc, DuplicateKey):
        if line is None:
            token = json.dumps(exc.key)
            first = text.find(token)
            second = text.find(token, first + 1) if first >= 0 else -1
            line = text.count("\n", 0, second) + 1 if second >= 0 else None
        return InputError(label, line, exc.key, str(exc))
    if isinstance(exc, TooDeep):
        return InputError(label, line, None, str(exc))
    return None


@dataclass(frozen=True)
class JsonLine:
    """One non-blank line of a JSONL file: its value, or why it is not JSON."""

    line: int
    value: Any = None
    error: str | None = None
    text: str = ""


class SourceTree:
    """Files under one root, read-only. ``selected`` are the files the user pointed at."""

    def __init__(self, label: str, files: dict[str, Any] | Callable[[], dict[str, Any]],
                 selected: Sequence[str] | None = None, separator: str = "/",
                 direct: dict[str, Any] | None = None) -> None:
        self.label_root = label
        # rel path -> Path (on disk) or bytes (archive member); a callable lists lazily
        # (a single file's directory is only walked when an importer looks for companions).
        self._listing = files
        self._direct = direct or {}
        self._separator = separator
        if selected is None:
            selected = list(self._all())
        self.selected: tuple[str, ...] = tuple(sorted(selected))
        self._json_cache: dict[str, Any] = {}

    def _all(self) -> dict[str, Any]:
        if callable(self._listing):
            self._listing = self._listing()
        return self._listing

    # --- listing -------------------------------------------------------------------------------

    def files(self) -> list[str]:
        """Every file of the tree, sorted (companions included)."""
        return sorted(self._all())

    def exists(self, rel: str) -> bool:
        return rel in self._direct or rel in self._all()

    def under(self, folder: str) -> list[str]:
        """Files below ``folder`` (a relative path), sorted."""
        prefix = folder.rstrip("/") + "/" if folder not in ("", ".") else ""
        return [name for name in self.files() if name.startswith(prefix)]

    @staticmethod
    def join(*parts: str) -> str:
        """A relative path inside the tree (``a/b/../c`` is ``a/c``)."""
        return posixpath.normpath(posixpath.join(*parts))

    def label(self, rel: str) -> str:
        """How errors name the file: the user's path joined with the member."""
        if self._separator == "!":
            return f"{self.label_root}!{rel}"
        if self._direct and len(self.selected) == 1 and self.label_root.endswith(self.selected[0]):
            # a single-file tree is labelled by the file; its companions sit beside it
            return self.label_root[: len(self.label_root) - len(self.selected[0])] + rel
        return posixpath.join(self.label_root, rel) if self.label_root else rel

    def folders(self, rel: str) -> list[str]:
        """The names of the folders holding ``rel``, outermost first, also above the tree's
        root where they are known (a directory's absolute path; an archive counts as a folder
        named after it without its suffix). Names an archive gives by its folders (a system,
        an experiment, a split) are read from here, so they do not depend on how far up the
        user pointed."""
        source = self._direct.get(rel)
        if source is None:
            source = self._all().get(rel)
        inner = [part for part in posixpath.dirname(rel).split("/") if part]
        if source is not None and not isinstance(source, bytes):
            absolute = os.path.abspath(os.fspath(source))
            return [part for part in Path(absolute).parent.parts if part not in ("/", "\\") and not part.endswith(":\\")]
        if self._separator == "!":
            name = posixpath.basename(self.label_root.replace("\\", "/").rstrip("/"))
            lowered = name.lower()
            for suffix in ARCHIVE_SUFFIXES:
                if lowered.endswith(suffix):
                    name = name[: len(name) - len(suffix)]
                    break
            return [name, *inner] if name and "!" not in name else inner
        return inner

    def disk_path(self, rel: str) -> Path | None:
        """Where ``rel`` is on disk (None for an archive member)."""
        source = self._direct.get(rel)
        if source is None:
            source = self._all().get(rel)
        return None if source is None or isinstance(source, bytes) else Path(os.path.abspath(os.fspath(source)))

    def folder_name(self, rel: str) -> str:
        """The name of the folder holding ``rel``, also when that folder is the tree's root."""
        found = self.folders(rel)
        return found[-1] if found else ""

    # --- reading -------------------------------------------------------------------------------

    def read_bytes(self, rel: str) -> bytes:
        source = self._direct.get(rel)
        if source is None:
            source = self._all().get(rel)
        if source is None:
            raise InputError(self.label(rel), None, None, "no such file")
        if isinstance(source, bytes):
            return source
        try:
            return Path(source).read_bytes()
        except OSError as exc:
            raise InputError(self.label(rel), None, None, f"cannot read: {exc.strerror or exc}") from exc

    def head(self, rel: str, limit: int) -> bytes:
        """The first ``limit`` bytes of ``rel`` (for sniffing: a file on disk is not read whole)."""
        source = self._direct.get(rel)
        if source is None:
            source = self._all().get(rel)
        if source is None or isinstance(source, bytes):
            return self.read_bytes(rel)[:limit]
        try:
            with Path(source).open("rb") as handle:
                return handle.read(limit)
        except OSError as exc:
            raise InputError(self.label(rel), None, None, f"cannot read: {exc.strerror or exc}") from exc

    def json_items(self, rel: str, key: str) -> ArrayItems | None:
        """The JSON object in ``rel`` split into its header and the items of its top-level array
        ``key``, parsed one at a time (see :mod:`~procgrade.engine.importers.json_items`); None
        when that does not apply, and then :meth:`json` reads it whole."""
        if rel in self._json_cache:
            return None
        path = self.disk_path(rel)
        data = open_mapped(path) if path is not None else None
        if data is None:
            data = self.read_bytes(rel)
        try:
            return split_array(data, key, strict_json)
        except ValueError:  # a header that breaks a rule: the whole parse says where
            return None

    def iter_lines(self, rel: str) -> Iterator[bytes]:
        """The file's lines without their ``\\n``, read as they are needed: a file on disk is
        never held whole (an archive member already is)."""
        source = self._direct.get(rel)
        if source is None:
            source = self._all().get(rel)
        if source is None or isinstance(source, bytes):
            yield from self.read_bytes(rel).split(b"\n")
            return
        try:
            handle = Path(source).open("rb")
        except OSError as exc:
            raise InputError(self.label(rel), None, None, f"cannot read: {exc.strerror or exc}") from exc
        from procgrade.engine.native import bounded_lines

        yield from bounded_lines(handle, self.label(rel))

    def text(self, rel: str) -> str:
        data = self.read_bytes(rel)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = data.count(b"\n", 0, exc.start) + 1
            raise InputError(self.label(rel), line, None, f"not UTF-8: byte 0x{data[exc.start]:02x}") from None

    def json(self, rel: str) -> Any:
        """The file parsed as one JSON document (cached); errors name the line."""
        if rel not in self._json_cache:
            text = self.text(rel)
            try:
                self._json_cache[rel] = strict_json(text)
            except json.JSONDecodeError as exc:
                raise InputError(self.label(rel), exc.lineno, None, f"invalid JSON: {exc.msg} (column {exc.colno})") from None
            except ValueError as exc:
                located = _strictness_error(self.label(rel), text, exc)
                raise (located or InputError(self.label(rel), None, None, f"invalid JSON: {exc}")) from None
        return self._json_cache[rel]

    def hold(self, rel: str, data: bytes) -> None:
        """Give listed member ``rel`` of an in-memory tree its bytes (read when its turn came)."""
        if not isinstance(self._all().get(rel), bytes):
            raise KeyError(rel)
        self._all()[rel] = data
        self._json_cache.pop(rel, None)

    def release(self, rel: str) -> None:
        """Let go of member ``rel``'s bytes and parse once read (it stays listed, empty), so a
        tree read member by member holds one at a time."""
        self.hold(rel, b"")

    def try_json(self, rel: str) -> Any:
        """The parsed document, or None when the file is not JSON (for sniffing)."""
        try:
            return self.json(rel)
        except InputError:
            return None

    def jsonl(self, rel: str) -> list[JsonLine]:
        """Every non-blank line, parsed; a line that is not JSON carries its error instead
        (the importer decides whether its format tolerates that)."""
        data = self.read_bytes(rel)
        lines: list[JsonLine] = []
        for number, raw_bytes in enumerate(data.split(b"\n"), start=1):
            if not raw_bytes.strip():
                continue
            try:
                raw = raw_bytes.decode("utf-8")
            except UnicodeDecodeError as exc:  # e.g. a character cut off by an interrupted write
                lines.append(JsonLine(number, None, f"not UTF-8: byte 0x{raw_bytes[exc.start]:02x} at column {exc.start + 1}",
                                      raw_bytes.decode("utf-8", errors="replace")))
                continue
            try:
                lines.append(JsonLine(number, strict_json(raw), None, raw))
            except json.JSONDecodeError as exc:
                lines.append(JsonLine(number, None, f"invalid JSON: {exc.msg} (column {exc.colno})", raw))
            except ValueError as exc:
                located = _strictness_error(self.label(rel), raw, exc, number)
                if located is not None:
                    raise located from None
                lines.append(JsonLine(number, None, f"invalid JSON: {exc}", raw))
        return lines

    def first_json_line(self, rel: str, limit: int = 5) -> Any:
        """The first parseable line of a JSONL file among its first ``limit`` (for sniffing)."""
        lines = self.iter_lines(rel)
        try:
            for _, raw in zip(range(limit), lines):
                if raw.strip():
                    try:
                        return strict_json(raw)
                    except (ValueError, UnicodeDecodeError):
                        continue
        except InputError:
            return None
        finally:
            lines.close()
        return None


def open_tree(path: Path | str) -> SourceTree:
    """The tree for what the user named: a directory, an archive, or a single file."""
    path = Path(path)
    label = str(path)
    if path.is_dir():
        files = {p.relative_to(path).as_posix(): p for p in _walk(path)}
        return SourceTree(label.rstrip("/"), files)
    if not path.exists():
        raise InputError(label, None, None, "no such file or directory")
    name = path.name.lower()
    if name.endswith(ARCHIVE_SUFFIXES):
        return SourceTree(label, _archive_members(path), separator="!")
    parent = path.parent
    return SourceTree(label, lambda: {p.relative_to(parent).as_posix(): p for p in _walk(parent)},
                      selected=[path.name], separator="/", direct={path.name: path})


def _walk(root: Path) -> Iterator[Path]:
    for entry in sorted(root.rglob("*")):
        if entry.is_file() and not _hidden(entry.relative_to(root).as_posix()):
            yield entry


def _archive_members(path: Path) -> dict[str, bytes]:
    label = str(path)
    members: dict[str, bytes] = {}

    def add(name: str, read: Callable[[], bytes]) -> None:
        normal = _member_name(label, name)
        if normal in members:  # one would silently replace the other
            raise InputError(f"{label}!{name}", None, None, f"a second archive member named {normal!r}")
        members[normal] = read()

    try:
        if path.name.lower().endswith(".zip"):
            with zipfile.ZipFile(path) as archive:
                for info in archive.infolist():
                    if not info.is_dir():
                        add(info.filename, lambda info=info: archive.read(info))
        else:
            with tarfile.open(path) as archive:
                for member in archive.getmembers():
                    if member.isfile():
                        handle = archive.extractfile(member)
                        assert handle is not None
                        add(member.name, handle.read)
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError) as exc:
        raise InputError(label, None, None, f"unreadable archive: {exc}") from exc
    return {name: members[name] for name in sorted(members) if not _hidden(name)}


def _member_name(label: str, name: str) -> str:
    normal = posixpath.normpath(name.replace("\\", "/"))
    if normal.startswith(("/", "../")) or normal == "..":
        raise InputError(f"{label}!{name}", None, None, "archive member points outside the archive")
    return normal


_JUNK_DIRS = {".git", ".hg", ".svn", "__MACOSX", ".venv", ".tox", ".cache", ".pytest_cache", ".ruff_cache"}


def _hidden(name: str) -> bool:
    """Dot files and VCS/OS junk; hidden *directories* such as ``.claude/`` and ``.codex/``
    (where Claude Code and Codex keep their logs) are read."""
    *folders, base = name.split("/")
    return base.startswith(".") or any(part in _JUNK_DIRS for part in folders)


def tree_of_bytes(label: str, files: dict[str, bytes]) -> SourceTree:
    """A tree over in-memory files (tests, nested archives)."""
    return SourceTree(label, dict(sorted(files.items())), separator="!")

