"""The float fast path of canonical JSON writes exactly rfc8785's bytes (and the big-int extension's)."""

from __future__ import annotations

import math

import pytest
import rfc8785
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from procgrade.engine.canonical import CanonicalJSONError, _float_bytes, _float_fast_path, _reference, canonical_and_faithful, canonical_json

SAFE = 2**53 - 1

strings = st.text(st.characters(codec="utf-8"), max_size=10) | st.sampled_from(
    ["", "\x00", "\x1f", "\x7f", "\u2028", "\ufeff", "\ue000", "\U0001f600", "a\"b\\c/d", "\b\f\n\r\t", "é", "日本"])
# Floats from every corner of ECMAScript's formatting: integral, tiny, huge, subnormal, exponent edges.
edge_floats = st.sampled_from([0.0, -0.0, 1.0, -1.0, 0.1, 1e-6, 1e-7, 1.5e-7, 1e20, 1e21, 1.5e21, 123456789012345680.0,
                               5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, 9007199254740993.0, 0.000001234])
floats = st.floats(allow_nan=False, allow_infinity=False) | edge_floats
safe_ints = st.integers(min_value=-SAFE, max_value=SAFE)
big_ints = st.integers(min_value=SAFE + 1, max_value=2**80) | st.integers(min_value=-(2**80), max_value=-SAFE - 1)
scalars = st.none() | st.booleans() | safe_ints | floats | strings
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=5) | st.tuples(children, children)
    | st.dictionaries(strings, children, max_size=5),
    max_leaves=30,
)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json_values)
@example({"b": [1.0, 2.5e-7, 1e21, -0.0], "a": {"\u00e9": 1e20, "z": [0.1, "x"]}})
@example({"\ue000": 1.5, "\U0001f600": 2.5})  # UTF-16 order differs from code point order: the reference decides
@example([[[[[[0.5]]]]]])
def test_fast_path_is_byte_identical_to_rfc8785(value) -> None:
    expected = rfc8785.dumps(value)
    fast = _float_fast_path(value)
    if fast is not None:
        assert fast == expected
    assert canonical_json(value) == expected


@settings(max_examples=200, deadline=None)
@given(st.lists(floats | big_ints | strings, min_size=1, max_size=8), st.dictionaries(strings, floats | big_ints, max_size=5))
def test_floats_beside_big_ints_match_the_extension(items, mapping) -> None:
    value = {"items": items, "mapping": mapping}
    assert canonical_json(value) == _reference(value)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(st.characters(codec="utf-8", min_codepoint=0x61, max_codepoint=0x7a), max_size=4),
                       floats, min_size=1, max_size=6))
def test_every_plain_float_mapping_takes_the_fast_path(value) -> None:
    """Not a vacuous property: ASCII keys and floats are exactly what the fast path is for."""
    assert _float_fast_path(value) == rfc8785.dumps(value)


def test_faithful_form_keeps_the_float_while_canonical_drops_it() -> None:
    canonical, faithful = canonical_and_faithful({"x": 1.0, "y": [2.5, 1e21]})
    assert canonical == b'{"x":1,"y":[2.5,1e+21]}'
    assert faithful == b'{"x":1.0,"y":[2.5,1e+21]}'


@pytest.mark.parametrize("value", [math.nan, [1.0, math.inf], {"a": -math.inf}, {"a": 1.5, "b": "\ud800"}, {1: 1.5}])
def test_what_has_no_canonical_form_is_still_refused(value) -> None:
    assert _float_fast_path(value) is None
    with pytest.raises(CanonicalJSONError):
        canonical_json(value)


@settings(max_examples=2000, deadline=None)
@given(floats | st.floats(min_value=1e-5, max_value=1e-3) | st.floats(min_value=1e15, max_value=1e17)
       | st.floats(min_value=-1e17, max_value=-1e15) | st.floats(min_value=-1e-3, max_value=-1e-5))
@example(1e-4)
@example(0.00009999999999999999)
@example(1e16)
@example(9999999999999998.0)
@example(-9999999999999998.0)
@example(2.0**53 + 2)
@example(-0.0)
def test_each_float_is_written_as_rfc8785_writes_it(number: float) -> None:
    assert _float_bytes(number) == rfc8785.dumps(number)
