"""Files procgrade writes (reports, exports, JSON results): checked before work, written whole.

A report can take a minute to compute; finding out afterwards that its folder does not exist
wastes that minute. :func:`check_output` fails first, with one line. :func:`write_whole` writes
to a temporary file beside the target and renames it over, so an interrupted or failed write
never leaves half a page where the user expects a report (nor destroys the previous one).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

from procgrade.engine.errors import OutputPathError

__all__ = ["check_output", "write_whole"]


def check_output(path: Path | str, what: str = "the output file") -> Path:
    """``path`` as a Path if a file can be written there, else :class:`OutputPathError` saying why."""
    target = Path(path)
    if str(path) == "" or target.name in ("", ".", ".."):
        raise OutputPathError(f"{what} {str(path)!r} names no file: give a file name")
    if target.is_dir():
        raise OutputPathError(f"{what} {target} is a folder: name a file inside it, e.g. {target / _example(what)}")
    parent = target.parent
    if not parent.exists():
        raise OutputPathError(f"cannot write {what} {target}: the folder {parent} does not exist: create it first")
    if not parent.is_dir():
        raise OutputPathError(f"cannot write {what} {target}: {parent} is not a folder")
    if target.exists() and not os.access(target, os.W_OK):
        raise OutputPathError(f"cannot write {what} {target}: the file is not writable: check its permissions")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputPathError(f"cannot write {what} {target}: the folder {parent} is not writable: "
                              "choose another place")
    return target


def _example(what: str) -> str:
    return "report.html" if "report" in what else "out.json" if "JSON" in what else "run.jsonl"


def write_whole(path: Path | str, data: bytes | Iterable[bytes]) -> Path:
    """Write ``data`` to ``path`` all at once: a temporary file in the same folder, then a rename."""
    target = check_output(path)
    handle = tempfile.NamedTemporaryFile(dir=target.parent, prefix=f".{target.name}.", suffix=".part",
                                         delete=False)
    try:
        with handle:
            if isinstance(data, bytes):
                handle.write(data)
            else:
                handle.writelines(data)
        if target.exists():
            os.chmod(handle.name, target.stat().st_mode & 0o7777)
        else:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(handle.name, 0o666 & ~umask)
        os.replace(handle.name, target)
    except BaseException:
        Path(handle.name).unlink(missing_ok=True)
        raise
    return target
