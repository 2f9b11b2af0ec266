"""One array of a big JSON document, item by item: memory bounded by the largest item, not the file.

An Inspect ``.json`` log holds every sample in one top-level ``"samples"`` array (hundreds of
megabytes); parsing it whole holds every sample at once. The writers of such logs indent
their JSON, and in indented JSON an item of that array starts on a line ``<indent>{`` and
ends on the first line ``<indent>}`` after it (a raw newline never sits inside a JSON string).
Those byte spans are found with a literal ``re`` search (C speed) and each is *proved* by parsing it: a
JSON value is self-delimiting, so a span that parses as one object is exactly that item. The
rest of the document (the header) is parsed with a sentinel string in place of the array, which
proves the array sat under the top-level key.

Whenever anything does not fit (compact JSON, an item that does not parse, a duplicate key,
a second array of that name), :func:`split_array` answers None and the caller parses the whole
document as before, which reports the same error as it always did.
"""

from __future__ import annotations

import mmap
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["ArrayItems", "ItemError", "split_array"]

_SENTINEL = "procgrade:array-items:5f1c0e9a"
_PAGE = mmap.PAGESIZE
_RELEASE_EVERY = 32 << 20  # give read pages back to the kernel every 32 MB (peak RSS, not page cache)


class ItemError(ValueError):
    """An item that does not parse on its own (the parser's error is its cause)."""

    def __init__(self, index: int) -> None:
        super().__init__(f"item {index} does not parse on its own")
        self.index = index


@dataclass
class ArrayItems:
    """The document without the array (``header``, without the array's key either) and the
    array's items, parsed one at a time as :meth:`items` is iterated."""

    header: dict[str, Any]
    spans: list[tuple[int, int]]
    _data: Any  # bytes or an mmap
    _parse: Any

    def items(self, share: int = 0, shares: int = 1) -> Iterator[tuple[int, Any]]:
        """(index, parsed item) in order, of every item or of those at ``share``, ``share +
        shares``, ... (the others are not parsed); raises :class:`ItemError` (a ValueError from
        the parser, with the item's index) for an item that does not parse (the caller then
        parses the whole document for its located error)."""
        released = 0
        data = self._data
        spans = self.spans
        for index in range(share, len(spans), shares):
            start, end = spans[index]
            try:
                item = self._parse(data[start:end])
            except ValueError as exc:
                raise ItemError(index) from exc
            released = _release(data, released, start)
            yield index, item

    def __len__(self) -> int:
        return len(self.spans)


def open_mapped(path: Path) -> mmap.mmap | None:
    """The file mapped read-only (pages are read as touched and can be given back), or None."""
    try:
        with path.open("rb") as handle:
            return mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):  # empty file, special file
        return None


_TOP_KEY = re.compile(rb'\{[ \t\r]*\n([ \t]+)"')


def split_array(data: bytes | mmap.mmap, key: str, parse: Any) -> ArrayItems | None:
    """The top-level object ``data`` split into its header and the items of array ``key``, or
    None when the fast path does not apply (see the module docstring). ``parse`` is the strict
    parser (bytes -> value, raising ValueError); every span is parsed with it."""
    head = _TOP_KEY.match(bytes(data[:256]).lstrip())
    if head is None:
        return None
    indent = head.group(1)
    item_indent = indent * 2
    opener = b"\n" + indent + b'"' + key.encode() + b'": ['
    found_opener = re.compile(re.escape(opener)).search(data)
    if found_opener is None:  # (a second array of that name later on is in the header: its parse refuses it)
        return None
    array_start = found_opener.end() - 1  # the "["
    position = array_start + 1
    spans: list[tuple[int, int]] = []
    released = 0
    item_open = b"\n" + item_indent + b"{"
    item_close = b"\n" + item_indent + b"}"
    # ``re``'s search for a literal is several times faster here than ``bytes.find`` (whose skip
    # table stalls on indented JSON, where the newline and spaces of the needle are everywhere).
    find_close = re.compile(re.escape(item_close)).search
    while True:
        rest = _skip_blank(data, position)
        if rest >= len(data):
            return None
        char = data[rest:rest + 1]
        if char == b"]":
            array_end = rest + 1
            break
        if spans:
            if char != b",":
                return None
            rest = _skip_blank(data, rest + 1)
        # each item starts on its own line, at the item indent
        if data[rest - len(item_open) + 1:rest + 1] != item_open:
            return None
        found = find_close(data, rest)
        if found is None:
            return None
        end = found.end()
        spans.append((rest, end))
        position = end
        released = _release(data, released, position)
    if not spans:
        return None
    _release(data, released, len(data), every=0)
    token = b'"' + _SENTINEL.encode() + b'"'
    before, after = bytes(data[:array_start]), bytes(data[array_end:])
    if _SENTINEL.encode() in before or _SENTINEL.encode() in after:
        return None
    header_bytes = before + token + after
    try:
        header = parse(header_bytes)
    except ValueError:
        return None
    if not isinstance(header, dict) or header.get(key) != _SENTINEL:
        return None
    del header[key]
    return ArrayItems(header, spans, data, parse)


def _release(data: bytes | mmap.mmap, released: int, upto: int, every: int = _RELEASE_EVERY) -> int:
    """Give the pages of a mapped file before ``upto`` back to the kernel (read again from the
    page cache if touched again) once ``every`` bytes are read: the process's memory then holds
    a window of the file, not all of it. Returns the new released offset."""
    if not isinstance(data, mmap.mmap) or upto - released < max(every, _PAGE):
        return released
    upto -= upto % _PAGE
    try:
        data.madvise(mmap.MADV_DONTNEED, released, upto - released)
    except (AttributeError, OSError, ValueError):  # not on this platform: it only costs memory
        return released
    return upto


def _skip_blank(data: bytes | mmap.mmap, position: int) -> int:
    while data[position:position + 1] in (b" ", b"\n", b"\r", b"\t"):
        position += 1
    return position
