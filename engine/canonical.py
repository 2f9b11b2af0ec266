"""Canonical JSON: the one byte form of a value that procgrade hashes.

The form is RFC 8785 (JSON Canonicalization Scheme): keys sorted by UTF-16 code
units, no whitespace, ECMAScript number formatting, minimal string escaping. One
extension: integers outside the I-JSON safe range (|n| > 2**53 - 1), which RFC
8785 refuses, are written as their exact decimal digits, because real harness
logs carry them (nanosecond clocks, token ids) and refusing them would make
those logs unimportable.

``orjson`` with sorted keys produces exactly the RFC 8785 bytes for values
without floats and without characters outside the Basic Multilingual Plane
(the property tests in ``tests/test_canonical.py`` hold it to that). Every other
value takes the slow path through the ``rfc8785`` reference implementation.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

import orjson
import rfc8785

__all__ = ["canonical_json", "sha256_hex", "CanonicalJSONError"]

_SORTED = orjson.OPT_SORT_KEYS
# A digit followed by '.', 'e' or 'E' may be a float (or may sit inside a
# string: a false alarm only costs the slow path). A byte >= 0xF0 starts a
# 4-byte UTF-8 sequence, a character outside the BMP whose UTF-16 sort order can
# differ from its UTF-8 order.
_NEEDS_REFERENCE = re.compile(rb"[0-9][.eE]|[\xf0-\xf4]")
_SAFE_INT = 2**53 - 1


class CanonicalJSONError(ValueError):
    """The value has no canonical JSON form (NaN, infinity, non-JSON type)."""


def canonical_json(value: Any) -> bytes:
    """Return the canonical JSON bytes of ``value`` (dicts, lists, str, int, float, bool, None)."""
    try:
        out = orjson.dumps(value, option=_SORTED)
    except (TypeError, orjson.JSONEncodeError) as exc:
        if isinstance(exc, TypeError) or "Integer exceeds 64-bit range" in str(exc):
            return _reference(value)
        raise CanonicalJSONError(str(exc)) from exc
    if _NEEDS_REFERENCE.search(out) is None:
        return out
    return _reference(value)


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _reference(value: Any) -> bytes:
    try:
        return rfc8785.dumps(value)
    except rfc8785.IntegerDomainError:
        return _with_big_ints(value)
    except (rfc8785.FloatDomainError, rfc8785.CanonicalizationError) as exc:
        raise CanonicalJSONError(str(exc)) from exc


def _with_big_ints(value: Any) -> bytes:
    """RFC 8785 with exact decimal integers outside the safe range (the documented extension)."""
    if isinstance(value, bool) or value is None:
        return rfc8785.dumps(value)
    if isinstance(value, int):
        return str(value).encode() if abs(value) > _SAFE_INT else rfc8785.dumps(value)
    if isinstance(value, dict):
        keys = sorted(value, key=_utf16_key)
        parts = [rfc8785.dumps(k) + b":" + _with_big_ints(value[k]) for k in keys]
        return b"{" + b",".join(parts) + b"}"
    if isinstance(value, (list, tuple)):
        return b"[" + b",".join(_with_big_ints(v) for v in value) + b"]"
    try:
        return rfc8785.dumps(value)
    except rfc8785.CanonicalizationError as exc:
        raise CanonicalJSONError(str(exc)) from exc


def _utf16_key(key: str) -> bytes:
    if not isinstance(key, str):
        raise CanonicalJSONError(f"object key {key!r} is not a string")
    return key.encode("utf-16-be")
