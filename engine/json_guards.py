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

__all__ = ["MAX_DEPTH", "TooDeep", "DuplicateKey", "nesting_error", "duplicate_key", "may_hide_duplicate", "key_endings", "shape",
           "pairs_without_duplicates"]

#: Deepest nesting of arrays and objects accepted anywhere (well below any recursion limit).
MAX_DEPTH = 128

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_STRING_TEXT = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
# Unrolled (``[^"\\]*(?:\\.[^"\\]*)*``): many times faster in ``re`` than an alternation per character.
_KEY = re.compile(rb'"([^"\\]*(?:\\.[^"\\]*)*)"\s*:', re.S)
_KEY_TEXT = re.compile(r'"([^"\\]*(?:\\.[^"\\]*)*)"\s*:', re.S)
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


def shape(value: Any) -> tuple[int, int, bool]:
    """(how many keys its objects hold, how deep its arrays and objects nest, whether it holds a
    float of 2**63 or more in magnitude) of a parsed value, level by level (``list.extend`` does
    the visiting at C speed). Such a float may be an integer too big for 64 bits that orjson
    read as a float."""
    keys = deepest = depth = 0
    huge = False
    level = [value]
    while level:
        depth += 1
        below: list[Any] = []
        for item in level:
            kind = type(item)
            if kind is dict:
                keys += len(item)
                below.extend(item.values())
                deepest = depth
            elif kind is list:
                below.extend(item)
                deepest = depth
            elif kind is float and not -_BIG < item < _BIG:
                huge = True
        level = below
    return keys, deepest, huge


_BIG = float(2**63)


# A quote that ends a string (after an even run of backslashes), then blanks, then a colon.
_KEY_END_SPACED = re.compile(rb'(?<!\\)(?:\\\\)*"[ \t\r\n]+:')
_KEY_END_SPACED_TEXT = re.compile(r'(?<!\\)(?:\\\\)*"[ \t\r\n]+:')
# The same without the parity (a literal first character: a fast scan), to see if any is there.
_QUOTE_SPACED = re.compile(rb'"[ \t\r\n]+:')
_QUOTE_SPACED_TEXT = re.compile(r'"[ \t\r\n]+:')


# ``":`` after k or more backslashes, k = 0..7: counted as a literal ``re`` search's matches, which
# is faster than ``bytes.count`` on JSON text (whose skip table stalls on its frequent quotes).
_KEY_END_RUNS = tuple(re.compile(re.escape(b"\\" * k + b'":')).findall for k in range(8))
_KEY_END_RUNS_TEXT = tuple(re.compile(re.escape("\\" * k + '":')).findall for k in range(8))


def key_endings(data: bytes | str) -> int:
    """How many keys ``data`` (valid JSON) holds, from its text: every ``":`` whose quote ends a
    string, i.e. follows an even run of backslashes (``\\":`` inside a string follows an odd
    one). With c(k) the ``":`` following k or more backslashes (``bytes.count``, C speed), those
    after an even run number c(0) - c(1) + c(2) - ...; a quote, blanks, then a colon is rare
    (indented JSON has no blank before its colons) and counted by a regex only when present."""
    text = isinstance(data, str)
    endings, sign = 0, 1
    for finder in _KEY_END_RUNS_TEXT if text else _KEY_END_RUNS:
        found = len(finder(data))  # type: ignore[arg-type]
        if not found:
            break
        endings += sign * found
        sign = -sign
    else:  # a run longer than the table: count on, one backslash more each time
        needle = ('\\' if text else b'\\') * len(_KEY_END_RUNS) + ('":' if text else b'":')
        while found := data.count(needle):  # type: ignore[arg-type]
            endings += sign * found
            sign, needle = -sign, needle[:1] + needle
    if (_QUOTE_SPACED_TEXT if text else _QUOTE_SPACED).search(data) is not None:  # type: ignore[arg-type]
        endings += len((_KEY_END_SPACED_TEXT if text else _KEY_END_SPACED).findall(data))  # type: ignore[arg-type]
    return endings


def may_hide_duplicate(data: bytes | str, value: Any) -> bool:
    """Whether ``value`` (the parse of valid JSON ``data`` by a parser that keeps the last of two
    equal keys) may have dropped a repeated key: when it holds as many keys as the text does,
    none was dropped. (Keys spelled with escapes, ``"a"`` and ``"\\u0061"``, count as two in
    the text and one in the value: a true duplicate, reported as such by the exact path.)"""
    return key_endings(data) != shape(value)[0]


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
        if not may_hide_duplicate(data, parsed):
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
