"""Terminal recordings (asciinema cast v2/v3) read back as the lines a program printed.

Some harnesses keep an agent's own structured log only as terminal output: Terminal-Bench
runs an installed agent in tmux under ``asciinema rec``, and the agent's JSON lines
(Claude Code's ``--output-format stream-json``) exist only inside ``sessions/agent.cast``.
A cast is a JSON header line, then one ``[time, code, data]`` line per chunk the terminal
saw (``o`` output, ``i`` keystrokes, ``m`` markers, ``r`` resizes, ``x`` exit in v3).

What a reader gets back (:func:`read_cast`) is the *output* stream as lines: chunks are
joined first (a printed line is often split over several chunks), split at newlines, and
each line is stripped of what a terminal draws rather than prints: escape sequences
(CSI ``ESC [ ... final``, OSC ``ESC ] ... BEL``, two-character escapes) and carriage returns
(text before the last ``\\r`` of a line was overwritten on screen). Every line carries the
number of the cast line where it began, so a record found in it is cited as
``agent.cast:<line>``. Keystrokes are not output: the harness's own log has them.

A malformed event line (cut off at the end of a killed recording, not a triple) is
reported back, not fatal; a header that is not asciinema v2/v3 is an ``InputError``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from procgrade.engine.errors import InputError
from procgrade.engine.importers.source_tree import SourceTree

__all__ = ["CastLine", "Cast", "read_cast", "strip_terminal"]

# ESC [ params intermediates final | ESC ] ... (BEL | ESC \) | ESC P/X/^/_ ... ESC \ | ESC single char
_ESCAPES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"
    r"|\x1b[ -/]*[0-~]"
    r"|\x9b[0-?]*[ -/]*[@-~]")
# Other C0 controls a terminal does not print (tab, newline and carriage return are handled apart).
_CONTROLS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


@dataclass(frozen=True)
class CastLine:
    """One printed line: the cast line it began on, its text as it reads, and the output
    chunks it was printed in (cast line, seconds into the recording, raw data)."""

    line: int
    text: str
    pieces: tuple[tuple[int, float, str], ...] = ()

    def origin(self) -> tuple[int, float | None]:
        """The cast line (and recording time) of the chunk where the visible text begins:
        a line often begins with escapes left over from the chunk before."""
        for index in range(len(self.pieces) - 1, -1, -1):
            if strip_terminal("".join(p[2] for p in self.pieces[index:]).removesuffix("\r")) == self.text:
                return self.pieces[index][0], self.pieces[index][1]
        return (self.pieces[0][0], self.pieces[0][1]) if self.pieces else (self.line, None)


@dataclass
class Cast:
    header: dict[str, Any]
    lines: list[CastLine] = field(default_factory=list)
    #: (cast line, raw text, reason) of event lines that could not be read.
    bad: list[tuple[int, str, str]] = field(default_factory=list)

    def epoch(self, seconds: float | None) -> float | None:
        """Seconds since the epoch of a moment of the recording (None when the header has no time)."""
        start = self.header.get("timestamp")
        if seconds is None or not isinstance(start, (int, float)) or isinstance(start, bool):
            return None
        return start + seconds


def strip_terminal(text: str) -> str:
    """``text`` as it reads on screen: escapes removed, overwritten text (before a bare
    ``\\r``) dropped, other control characters removed."""
    text = _ESCAPES.sub("", text)
    if "\r" in text:
        text = text.rsplit("\r", 1)[-1] if text.rstrip("\r") else text.replace("\r", "")
    return _CONTROLS.sub("", text)


def read_cast(tree: SourceTree, rel: str) -> Cast:
    """The output lines of the cast ``rel`` (see the module docstring)."""
    raw = tree.read_bytes(rel).decode("utf-8", "replace")
    rows = raw.split("\n")
    try:
        header = json.loads(rows[0]) if rows else None
    except ValueError as exc:
        raise InputError(tree.label(rel), "1", None, f"not an asciinema cast: the header is not JSON ({exc})") from None
    if not isinstance(header, dict):
        raise InputError(tree.label(rel), "1", None, "not an asciinema cast: the header is not a JSON object")
    version = header.get("version")
    if version not in (2, 3) or isinstance(version, bool):
        raise InputError(tree.label(rel), "1", "version", f"expected asciinema cast version 2 or 3, got {version!r}")
    cast = Cast(header)
    relative = version == 3  # v3 times are intervals since the previous event
    clock = 0.0
    buffer: list[tuple[int, float, str]] = []

    def flush() -> None:
        text = "".join(piece[2] for piece in buffer)
        cast.lines.append(CastLine(buffer[0][0], strip_terminal(text.removesuffix("\r")), tuple(buffer)))

    for number, row in enumerate(rows[1:], start=2):
        if not row.strip():
            continue
        try:
            event = json.loads(row)
        except ValueError as exc:
            cast.bad.append((number, row, f"not a JSON cast event: {exc}"))
            continue
        if not (isinstance(event, list) and len(event) == 3 and isinstance(event[0], (int, float))
                and not isinstance(event[0], bool) and isinstance(event[1], str) and isinstance(event[2], str)):
            cast.bad.append((number, row, "not a [time, code, data] cast event"))
            continue
        clock = clock + event[0] if relative else float(event[0])
        if event[1] != "o":
            continue
        data = event[2]
        while data:
            cut = data.find("\n")
            if cut < 0:
                buffer.append((number, clock, data))
                break
            buffer.append((number, clock, data[:cut]))
            flush()
            buffer = []
            data = data[cut + 1:]
    if buffer:
        flush()
    return cast
