"""Which files a patch touches: Codex's ``apply_patch`` envelope and unified diffs.

A patch is an edit whatever tool carried it (a harness's own patch tool, ``git
apply`` or ``patch`` fed a heredoc): these parsers give the files and how each was
changed, so importers emit one ``file_edit`` per file.
"""

from __future__ import annotations

import re
from typing import NamedTuple

__all__ = ["FileEffect", "apply_patch_effects", "unified_diff_effects", "patch_effects"]


class FileEffect(NamedTuple):
    """A file the command or patch reads or changes."""

    action: str  # "read" or "edit"
    path: str
    edit_kind: str | None = None  # create / modify / delete / rename, for edits
    new_path: str | None = None


_APPLY_PATCH_LINE = re.compile(r"^\*\*\* (Add|Update|Delete) File: (.+?)\s*$")
_MOVE_TO = re.compile(r"^\*\*\* Move to: (.+?)\s*$")


def apply_patch_effects(patch: str) -> list[FileEffect]:
    """Files in an ``*** Begin Patch`` envelope (Codex CLI's apply_patch format)."""
    effects: list[FileEffect] = []
    for line in patch.splitlines():
        header = _APPLY_PATCH_LINE.match(line)
        if header:
            verb, path = header.groups()
            kind = {"Add": "create", "Update": "modify", "Delete": "delete"}[verb]
            effects.append(FileEffect("edit", path, kind))
            continue
        move = _MOVE_TO.match(line)
        if move and effects and effects[-1].edit_kind == "modify":
            last = effects.pop()
            effects.append(FileEffect("edit", last.path, "rename", move.group(1)))
    return effects


_DIFF_OLD = re.compile(r"^--- (?:a/)?(\S+)")
_DIFF_NEW = re.compile(r"^\+\+\+ (?:b/)?(\S+)")
_GIT_RENAME_FROM = re.compile(r"^rename from (.+)$")
_GIT_RENAME_TO = re.compile(r"^rename to (.+)$")


def unified_diff_effects(diff: str) -> list[FileEffect]:
    """Files in a unified diff (``---``/``+++`` headers, git rename headers)."""
    effects: list[FileEffect] = []
    old: str | None = None
    rename_from: str | None = None
    for line in diff.splitlines():
        if (m := _GIT_RENAME_FROM.match(line)) is not None:
            rename_from = m.group(1)
            continue
        if (m := _GIT_RENAME_TO.match(line)) is not None and rename_from is not None:
            effects.append(FileEffect("edit", rename_from, "rename", m.group(1)))
            rename_from = None
            continue
        if (m := _DIFF_OLD.match(line)) is not None:
            old = m.group(1)
            continue
        if (m := _DIFF_NEW.match(line)) is not None and old is not None:
            new = m.group(1)
            if old == "/dev/null":
                effects.append(FileEffect("edit", new, "create"))
            elif new == "/dev/null":
                effects.append(FileEffect("edit", old, "delete"))
            else:
                effects.append(FileEffect("edit", new, "modify"))
            old = None
    return effects


def patch_effects(text: str) -> list[FileEffect]:
    """Either format, whichever ``text`` is."""
    if "*** Begin Patch" in text:
        return apply_patch_effects(text)
    return unified_diff_effects(text)
