"""Checks JSON parsers skip: duplicate keys and nesting depth, cheap enough for every line.

orjson and pydantic keep the *last* of two equal keys (``{"actor": "agent", "actor":
"harness"}`` is a harness event) and recurse on nesting until Python's or their own limit
breaks. Both checks start with a byte-level filter that costs a regex pass: a text whose key
tokens are all different (and carry no escapes) cannot repeat a key in any object, and a
text with fewer brackets than the limit cannot nest deeper. Only texts that fail the filter
are looked at closely (stdlib ``json`` with ``object_pairs_hook``; a scan of the brackets
outside strings).
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

__all__ = ["MAX_DEPTH", "TooDeep", "DuplicateKey", "nesting_error", "duplicate_key", "pairs_without_duplicates"]

#: Deepest nesting of arrays and objects accepted anywhere (well below any recursion limit).
MAX_DEPTH = 128

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_STRING_TEXT = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
# Unrolled (``[^"\\]*(?:\\.[^"\\]*)*``): many times faster in ``re`` than an alternation per character.
_KEY = re.compile(rb'"([^"\\]*(?:\\.[^"\\]*)*)"\s*:', re.S)
_KEY_TEXT = re.compile(r'"([^"\\]*(?:\\.[^"\\]*)*)"\s*:', re.S)
_KEY_END = re.compile(rb'"[ \t\r\n]*:')
_KEY_END_TEXT = re.compile(r'"[ \t\r\n]*:')
_UNPARSED = object()
_BRACKET = re.compile(rb"[\[\]{}]")
_BRACKET_TEXT = re.compile(r"[\[\]{}]")


class TooDeep(ValueError):
    """The text nests arrays/objects deeper than :data:`MAX_DEPTH`."""


class DuplicateKey(ValueError):
    """An object holds the same key twice."""

    def __init__(self, key: str) -> None:
        super().__init__(f"duplicate key {key!r}: a JSON object must not repeat a key (the last value would silently win)")
        self.key = key


def nesting_error(data: bytes | str, limit: int = MAX_DEPTH) -> str | None:
    """Why ``data`` nests too deep, or None. Call before parsing it."""
    if isinstance(data, str):
        if data.count("[") + data.count("{") <= limit:
            return None
        stripped: Any = _STRING_TEXT.sub("", data)
        brackets = _BRACKET_TEXT.findall(stripped)
        opening = ("[", "{")
    else:
        if data.count(b"[") + data.count(b"{") <= limit:
            return None
        stripped = _STRING.sub(b"", data)
        brackets = _BRACKET.findall(stripped)
        opening = (b"[", b"{")
    depth = 0
    for bracket in brackets:
        if bracket in opening:
            depth += 1
            if depth > limit:
                return f"JSON nested deeper than {limit} levels"
        else:
            depth -= 1
    return None


def _may_repeat(keys: list[Any]) -> bool:
    if len(keys) < 2:
        return False
    if len(set(keys)) != len(keys):
        return True
    if isinstance(keys[0], bytes):
        return b"\\" in b"".join(keys)  # "a" and "\u0061" are one key
    return "\\" in "".join(keys)


def pairs_without_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook`` for stdlib json: the object, or :class:`DuplicateKey`."""
    result = dict(pairs)
    if len(result) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKey(key)
            seen.add(key)
    return result


def _count_keys(value: Any) -> int:
    count, stack = 0, [value]
    while stack:
        item = stack.pop()
        if type(item) is dict:
            count += len(item)
            stack.extend(item.values())
        elif type(item) is list:
            stack.extend(item)
    return count


def duplicate_key(data: bytes | str) -> str | None:
    """The first key some object of ``data`` repeats, or None (also None for text that is not
    JSON: the parser reports that). Call on text the nesting check passed.

    Fast path: every key of the text ends in ``"``, blanks and ``:``, and elsewhere that sequence
    can only sit inside a string (as ``\\"`` then ``:``); so when the parsed value holds as many
    keys as the text holds such endings, no key was dropped, i.e. none was repeated."""
    try:
        parsed = orjson.loads(data)
    except orjson.JSONDecodeError:
        parsed = _UNPARSED
    if parsed is not _UNPARSED:
        endings = len((_KEY_END_TEXT if isinstance(data, str) else _KEY_END).findall(data))
        if endings == _count_keys(parsed):
            return None
    else:
        keys = (_KEY_TEXT if isinstance(data, str) else _KEY).findall(data)
        if not _may_repeat(keys):
            return None
    try:
        json.loads(data, object_pairs_hook=pairs_without_duplicates)
    except DuplicateKey as exc:
        return exc.key
    except (ValueError, RecursionError):
        return None
    return None
