"""Canonical JSON: the one byte form of a value that procgrade hashes.

The form is RFC 8785 (JSON Canonicalization Scheme): keys sorted by UTF-16 code
units, no whitespace, ECMAScript number formatting, minimal string escaping. One
extension: integers outside the I-JSON safe range (|n| > 2**53 - 1), which RFC
8785 refuses, are written as their exact decimal digits, because real harness
logs carry them (nanosecond clocks, token ids) and refusing them would make
those logs unimportable.

``orjson`` with sorted keys produces exactly the RFC 8785 bytes for values
without floats and without object keys outside the Basic Multilingual Plane
(the property tests in ``tests/test_canonical.py`` hold it to that). Values with
floats take a fast path too: each float is replaced by an ``orjson.Fragment`` of
the bytes ``rfc8785`` itself writes for that float (ECMAScript number-to-string),
and orjson writes the rest (``tests/test_canonical_fast_path.py``). Only object
keys outside the BMP, integers beyond 64 bits and values orjson refuses take the
slow path through the ``rfc8785`` reference implementation.
"""

from __future__ import annotations

import hashlib
import json
import re
from functools import lru_cache
from typing import Any

import orjson
import rfc8785

__all__ = ["canonical_json", "canonical_and_faithful", "canonical_json_of_typed", "faithful_json", "parse_json", "sha256_hex", "CanonicalJSONError"]

_SORTED = orjson.OPT_SORT_KEYS
_SAFE_INT = 2**53 - 1


class CanonicalJSONError(ValueError):
    """The value has no canonical JSON form (NaN, infinity, non-JSON type)."""


def canonical_json(value: Any) -> bytes:
    """Return the canonical JSON bytes of ``value`` (dicts, lists, str, int, float, bool, None)."""
    if _orjson_is_canonical(value):
        return _sorted_or_reference(value)
    fast = _float_fast_path(value)
    return fast if fast is not None else _reference(value)


def _sorted_or_reference(value: Any) -> bytes:
    """orjson's sorted bytes of a value :func:`_orjson_is_canonical` passed, else the reference's."""
    try:
        return orjson.dumps(value, option=_SORTED)
    except orjson.JSONEncodeError:
        return _reference(value)  # an int beyond 64 bits, or a type orjson does not know: it decides


def canonical_and_faithful(value: Any) -> tuple[bytes, bytes]:
    """(canonical JSON, faithful JSON) of ``value``, the same bytes twice when they agree.

    They agree unless the value holds a float (canonical JSON writes ``1.0`` as ``1``)
    or an object key outside the BMP (only the key order differs).
    """
    if _orjson_is_canonical(value):
        canonical = _sorted_or_reference(value)
        return canonical, canonical
    fast = _float_fast_path(value)  # what canonical_json does after the same scan
    return (fast if fast is not None else _reference(value)), faithful_json(value)


def faithful_json(value: Any) -> bytes:
    """Deterministic JSON that keeps what canonical JSON normalises away (``1.0`` stays a float).

    What procgrade stores of free-form JSON (payloads): reading it back gives the
    same Python values, while the canonical form of those values is what is hashed.
    """
    try:
        return orjson.dumps(value, option=_SORTED)
    except orjson.JSONEncodeError:  # an int beyond 64 bits
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                          allow_nan=False).encode()


def parse_json(text: str | bytes) -> Any:
    """Parse stored JSON exactly: orjson, or the standard library where an integer
    beyond 64 bits may sit (orjson would read it as a float)."""
    probe = text.encode() if isinstance(text, str) else text
    if _LONG_DIGITS.search(probe) is None:
        return orjson.loads(text)
    return json.loads(text)


_LONG_DIGITS = re.compile(rb"[0-9]{19}")  # -2**63 - 1 already has 19 digits


def canonical_json_of_typed(value: dict[str, Any]) -> bytes:
    """Canonical JSON of a mapping whose keys are ASCII and that holds no float anywhere.

    The caller vouches for that from the value's type (the typed fields of an event
    model); this skips the scan :func:`canonical_json` makes, on the hot ingest path.
    """
    return orjson.dumps(value, option=_SORTED)


def _orjson_is_canonical(value: Any) -> bool:
    """True when orjson's sorted output is byte-identical to RFC 8785 for ``value``.

    That holds unless the value holds a float (number formatting differs) or an
    object key outside the Basic Multilingual Plane (UTF-16 and UTF-8 orders differ).
    """
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            try:
                keys = "".join(item)  # every key at once (a key that is no str cannot be joined)
            except TypeError:
                return False
            if not keys.isascii() and max(keys) > "\uffff":
                return False
            values: Any = item.values()
        elif isinstance(item, (list, tuple)):
            values = item
        else:
            return not isinstance(item, float)
        for member in values:
            if type(member) not in _SCALARS:  # the common members cost one set lookup
                if isinstance(member, (dict, list, tuple)):
                    stack.append(member)
                elif isinstance(member, float):
                    return False
    return True


#: Types orjson writes as RFC 8785 does (exact types: a float subclass is still a float).
_SCALARS = frozenset({str, int, bool, type(None)})


class _NotFast(Exception):
    """The value needs the reference path (an object key outside the BMP, or not a str)."""


def _float_fast_path(value: Any) -> bytes | None:
    """RFC 8785 bytes of a value holding floats, by orjson; None when only the reference path can tell.

    Every float becomes an ``orjson.Fragment`` of ``rfc8785.dumps(float)`` (the reference's own
    ECMAScript formatting), so the only difference left between orjson and RFC 8785, number
    formatting, is gone; key order agrees because keys outside the BMP are sent to the reference.
    """
    try:
        return orjson.dumps(_floats_as_fragments(value), option=_SORTED)
    except (_NotFast, orjson.JSONEncodeError, rfc8785.CanonicalizationError, RecursionError):
        return None  # the reference path decides (big ints, NaN, surrogates, odd types) and words the error


def _floats_as_fragments(item: Any) -> Any:
    kind = type(item)
    if kind is str or kind is int or kind is bool or item is None:
        return item  # the common leaves first: orjson writes them as RFC 8785 does
    if isinstance(item, float):
        return orjson.Fragment(_float_bytes(float(item)))
    if isinstance(item, dict):
        out = {}
        for key, child in item.items():
            if type(key) is not str or (not key.isascii() and max(key) > "\uffff"):
                raise _NotFast
            out[key] = _floats_as_fragments(child)
        return out
    if isinstance(item, (list, tuple)):
        return [_floats_as_fragments(child) for child in item]
    return item


def _float_bytes(number: float) -> bytes:
    """ECMAScript number-to-string as RFC 8785 amends it.

    Both Python's ``repr`` and ECMAScript pick the shortest digits that round-trip, and between
    1e-4 and 1e16 both write them in fixed notation, so there ``repr`` minus a trailing ``.0`` is
    the answer; everything else (zero, tiny, huge, NaN) goes to ``rfc8785``'s own formatting.
    """
    if 1e-4 <= abs(number) < 1e16:
        text = repr(number)
        return (text[:-2] if text.endswith(".0") else text).encode()
    return _float_bytes_reference(number)


@lru_cache(maxsize=1024)
def _float_bytes_reference(number: float) -> bytes:
    """``-0.0`` and ``0.0`` share a cache entry (equal keys), rightly: both are written ``0``."""
    return rfc8785.dumps(number)


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
