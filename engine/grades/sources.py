"""Which files hold grades, in which format, and the grades they hold.

A path is a file or a directory (walked in sorted order; only ``.csv`` and ``.json``
files are looked at). With ``auto`` a ``.csv`` file is an arena sheet, a JSON document
with a ``format`` key is an arena sheet, and a JSON object with ``requirements`` sitting
in the DevAI judgment layout is a DevAI judgment. A file named on the command line that
is none of these is an error; one found in a directory is listed as skipped.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from procgrade.engine.errors import InputError
from procgrade.engine.grades.arena import FORMAT_TAG, FORMAT_TAG_V2, parse_json, read_csv_sheet, read_json_sheet, read_study_sheet
from procgrade.engine.grades.devai import (
    LAYOUT_HELP,
    judge_layout,
    looks_like_judgment,
    read_devai_judgment,
)
from procgrade.engine.grades.record import GradeRecord

__all__ = ["GRADE_FORMATS", "SheetFile", "read_grade_files"]

#: What ``--format`` takes.
GRADE_FORMATS = ("auto", "arena", "devai")


@dataclass(frozen=True)
class SheetFile:
    """One file read: how it is named, its format, and its grades in file order."""

    label: str
    format: str
    grades: tuple[GradeRecord, ...]


def read_grade_files(paths: Sequence[Path | str], format: str = "auto") -> tuple[list[SheetFile], list[str]]:
    """Every grade in ``paths`` (files read and the files skipped); the first bad record
    anywhere raises :class:`InputError`."""
    if format not in GRADE_FORMATS:
        raise ValueError(f"unknown grades format {format!r} (known: {', '.join(GRADE_FORMATS)})")
    read: list[SheetFile] = []
    skipped: list[str] = []
    seen: set[Path] = set()
    for given in paths:
        path = Path(given)
        if path.is_dir():
            for file in _walk(path):
                if file.resolve() in seen:
                    continue
                seen.add(file.resolve())
                label = os.path.join(str(given).rstrip("/"), file.relative_to(path).as_posix())
                sheet = _read(file, label, format, explicit=False)
                if sheet is None:
                    skipped.append(label)
                else:
                    read.append(sheet)
        elif path.is_file():
            if path.resolve() in seen:
                continue
            seen.add(path.resolve())
            sheet = _read(path, str(given), format, explicit=True)  # raises when it holds no grades
            if sheet is not None:
                read.append(sheet)
        else:
            raise InputError(str(given), None, None, "no such file or directory")
    return read, skipped


def _walk(root: Path) -> list[Path]:
    found = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        found.extend(Path(folder) / name for name in files
                     if not name.startswith(".") and name.lower().endswith((".csv", ".json")))
    return sorted(found, key=lambda p: p.relative_to(root).as_posix())


def _read(path: Path, label: str, format: str, *, explicit: bool) -> SheetFile | None:
    suffix = path.suffix.lower()
    if suffix == ".csv" and format != "devai":
        return SheetFile(label, "arena", tuple(read_csv_sheet(_bytes(path, label), label, path.name)))
    if suffix != ".json":
        return _unknown(label, format, explicit)
    layout = judge_layout(path)
    if format == "devai" and layout is None:
        return _unknown(label, format, explicit, f"a DevAI judgment sits at {LAYOUT_HELP}")
    doc = parse_json(_bytes(path, label), label)
    is_sheet = isinstance(doc, dict) and "format" in doc
    if format == "arena" and (is_sheet or explicit) or format == "auto" and is_sheet:
        tag = doc.get("format") if isinstance(doc, dict) else None
        if tag not in (FORMAT_TAG, FORMAT_TAG_V2) and isinstance(doc, dict) and "format" in doc:
            raise InputError(label, None, "format", f"expected {FORMAT_TAG} (arena) or {FORMAT_TAG_V2} (study), "
                                                    f"got {json.dumps(tag)[:60]}".replace('"', "'"))
        if tag == FORMAT_TAG_V2:
            return SheetFile(label, "arena", tuple(read_study_sheet(doc, label, path.name)))
        return SheetFile(label, "arena", tuple(read_json_sheet(doc, label, path.name)))
    if format == "devai" or format == "auto" and looks_like_judgment(doc):
        if layout is None:
            return _unknown(label, format, explicit, f"a DevAI judgment sits at {LAYOUT_HELP}")
        return SheetFile(label, "devai", tuple(read_devai_judgment(doc, layout, label)))
    return _unknown(label, format, explicit)


def _unknown(label: str, format: str, explicit: bool, hint: str | None = None) -> None:
    if not explicit:
        return
    wanted = {"auto": "an arena grade sheet (CSV, or JSON with \"format\": \"procgrade.grades/1\" or \"procgrade.grades/2\") or a DevAI judgment",
              "arena": "an arena grade sheet (CSV, or JSON with \"format\": \"procgrade.grades/1\" or \"procgrade.grades/2\")",
              "devai": "a DevAI judgment"}[format]
    raise InputError(label, None, None, f"not {wanted}" + (f": {hint}" if hint else ""))


def _bytes(path: Path, label: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise InputError(label, None, None, f"cannot read: {exc.strerror or exc}") from None
