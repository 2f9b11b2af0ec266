"""Canonical JSON is RFC 8785 (rfc8785.dumps is the reference), plus exact big integers."""

from __future__ import annotations

import json
import math
from collections import OrderedDict, defaultdict

import pytest
import rfc8785
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from procgrade.engine.canonical import CanonicalJSONError, canonical_json, sha256_hex

SAFE = 2**53 - 1

# Any unicode text: BMP, non-BMP (emoji, CJK ext.), controls, DEL, U+2028; no lone surrogates
# (they are not Unicode scalar values and have no JSON/UTF-8 form).
strings = st.text(st.characters(codec="utf-8"), max_size=12) | st.sampled_from(
    ["", "\x00", "\x1f", "\x7f", "\u2028", "\ufeff", "\ue000", "\uffff", "\U0001f600", "\U00010000",
     "1.5", "1e3", "a\"b\\c/d", "\b\f\n\r\t"]
)
floats = st.floats(allow_nan=False, allow_infinity=False)
safe_ints = st.integers(min_value=-SAFE, max_value=SAFE)
scalars = st.none() | st.booleans() | safe_ints | floats | strings
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(strings, children, max_size=5),
    max_leaves=25,
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json_values)
@example({"\ue000": 1, "\U0001f600": 2})  # UTF-16 order differs from code point order here
@example({"b": 1, "a": {"d": [1.5, 2e-7, 1e21, -0.0], "c": "\x00\u2028"}})
@example([SAFE, -SAFE, 0, 5e-324, 1.7976931348623157e308])
def test_matches_rfc8785(value) -> None:
    assert canonical_json(value) == rfc8785.dumps(value)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(strings, safe_ints | strings | st.none() | st.booleans(), max_size=8))
def test_keys_sorted_by_utf16_code_units_and_round_trip(value) -> None:
    out = canonical_json(value)
    pairs = json.loads(out, object_pairs_hook=list)
    keys = [k for k, _ in pairs]
    assert keys == sorted(value, key=lambda k: k.encode("utf-16-be"))
    assert dict(pairs) == value
    assert out == rfc8785.dumps(value)


@pytest.mark.parametrize("value,expected", [
    (2**53, b"9007199254740992"),
    (-(2**53), b"-9007199254740992"),
    (2**63, b"9223372036854775808"),
    (2**64, b"18446744073709551616"),
    (-(2**64) - 1, b"-18446744073709551617"),
    (10**30 + 7, b"1000000000000000000000000000007"),
    ({"ns": 1_700_000_000_123_456_789_000}, b'{"ns":1700000000123456789000}'),
    ([2**70, 1.5, "x"], b"[1180591620717411303424,1.5,\"x\"]"),
    # keys sorted by UTF-16 code units: U+1F600 (D83D DE00) sorts before U+E000
    ({"b": 2**60, "a": 0.1, "\U0001f600": 2**65, "\ue000": -(2**66)},
     '{"a":0.1,"b":1152921504606846976,"\U0001f600":36893488147419103232,"\ue000":-73786976294838206464}'.encode()),
])
def test_big_ints_are_exact_decimal_digits(value, expected) -> None:
    assert canonical_json(value) == expected


@settings(max_examples=200, deadline=None)
@given(st.integers().filter(lambda n: abs(n) > SAFE) | st.integers(min_value=2**53, max_value=2**200))
def test_any_big_int_is_its_exact_digits(n: int) -> None:
    assert canonical_json(n) == str(n).encode()
    assert canonical_json([n, {"k": n}]) == f'[{n},{{"k":{n}}}]'.encode()
    assert int(canonical_json(n)) == n


@pytest.mark.parametrize("value", [
    math.nan,
    math.inf,
    -math.inf,
    {"x": math.nan},
    [1, math.nan],
    {"a": [1, {"b": math.inf}]},
    {"big": 2**70, "bad": math.nan},
])
def test_nan_and_infinity_raise(value) -> None:
    with pytest.raises(CanonicalJSONError):
        canonical_json(value)


@pytest.mark.parametrize("value", [{1: "int key"}, {"s": {1, 2}}, object(), b"bytes"])
def test_non_json_values_raise(value) -> None:
    with pytest.raises(CanonicalJSONError):
        canonical_json(value)


def test_sha256_hex() -> None:
    assert sha256_hex(b"") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert sha256_hex(canonical_json({"b": 1, "a": 2})) == sha256_hex(b'{"a":2,"b":1}')


class _MyList(list):
    pass


@pytest.mark.parametrize("value", [
    OrderedDict([("b", 1.0), ("a", 0.5)]),
    OrderedDict([("\ue000", 1), ("\U0001f600", 2)]),
    {"outer": OrderedDict([("x", 1e21)])},
    defaultdict(list, {"z": [2.50], "a": []}),
    [_MyList([1.0, 2.5])],
    {"k": _MyList([{"\U0001f600": 0, "\ue000": 1}])},
], ids=["ordereddict-float", "ordereddict-non-bmp-keys", "nested-ordereddict", "defaultdict", "list-subclass",
        "list-subclass-non-bmp"])
def test_dict_and_list_subclasses_are_canonical_too(value) -> None:
    """A dict is a dict: callers building payloads in Python (OrderedDict, defaultdict) must
    get the same canonical bytes as for the plain JSON value."""
    assert canonical_json(value) == rfc8785.dumps(value)


@settings(max_examples=150, deadline=None)
@given(json_values)
def test_matches_rfc8785_with_containers_as_subclasses(value) -> None:
    def convert(v):
        if isinstance(v, dict):
            return OrderedDict((k, convert(x)) for k, x in v.items())
        if isinstance(v, list):
            return _MyList(convert(x) for x in v)
        return v
    converted = convert(value)
    assert canonical_json(converted) == rfc8785.dumps(value)
