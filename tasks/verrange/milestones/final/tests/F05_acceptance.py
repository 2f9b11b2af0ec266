"""FP-05: selection (max_satisfying, min_satisfying)."""

import pytest

from verrange import InvalidRange, Range, Version, max_satisfying, min_satisfying

POOL = ["1.2.3", "1.2.4", "1.3.0", "2.0.0", "1.10.0", "0.9.0"]


def test_max_satisfying_returns_the_highest_match():
    got = max_satisfying(POOL, "1.x")
    assert isinstance(got, Version) and str(got) == "1.10.0"
    assert str(max_satisfying(POOL, "~1.2.0")) == "1.2.4"
    assert str(max_satisfying(POOL, Range(">=1.0.0 <1.10.0"))) == "1.3.0"
    assert str(max_satisfying(iter(POOL), "*")) == "2.0.0"
    assert str(max_satisfying([Version("1.2.3"), "1.2.5"], "1.2")) == "1.2.5"
    assert max_satisfying(POOL, ">=3.0.0") is None
    assert max_satisfying([], "*") is None


def test_min_satisfying_returns_the_lowest_match():
    got = min_satisfying(POOL, "1.x")
    assert isinstance(got, Version) and str(got) == "1.2.3"
    assert str(min_satisfying(POOL, ">1.2.3")) == "1.2.4"
    assert str(min_satisfying(POOL, Range("1.3.0 || 2.x"))) == "1.3.0"
    assert str(min_satisfying(iter(POOL), "*")) == "0.9.0"
    assert min_satisfying(POOL, "<0.1.0") is None
    assert min_satisfying([], "*") is None


def test_selection_skips_invalid_version_texts():
    items = ["bogus", "1.2.3", "1.2", "1.2.4", "01.2.5", "1.2.6\n", "v1.2.7", ""]
    assert str(max_satisfying(items, "1.2.x")) == "1.2.4"
    assert str(min_satisfying(items, "1.2.x")) == "1.2.3"
    assert max_satisfying(["nope", "1.0", "x.y.z"], "*") is None
    assert min_satisfying(["nope", "1.0", "x.y.z"], "*") is None


def test_selection_ties_return_the_first_item():
    items = ["1.2.3+b", "1.0.0", "1.2.3+a", "1.2.3", "1.0.0+z"]
    assert str(max_satisfying(items, "1.x")) == "1.2.3+b"
    assert str(min_satisfying(items, "1.x")) == "1.0.0"
    assert str(min_satisfying(["1.0.0+z", "1.0.0"], "*")) == "1.0.0+z"
    assert str(max_satisfying([Version("2.0.0+q"), "2.0.0+r"], "2")) == "2.0.0+q"


def test_selection_applies_the_prerelease_rule_and_option():
    items = ["1.2.3", "1.3.0-beta", "1.2.4-rc.1", "1.2.3-rc.9"]
    assert str(max_satisfying(items, "^1.2.3")) == "1.2.3"
    assert str(max_satisfying(items, "^1.2.3", include_prerelease=True)) == "1.3.0-beta"
    assert str(min_satisfying(items, "^1.2.3-rc.1")) == "1.2.3-rc.9"
    assert str(min_satisfying(items, "^1.2.3-rc.1", include_prerelease=True)) == "1.2.3-rc.9"
    assert str(max_satisfying(items, "~1.2.4-rc.0")) == "1.2.4-rc.1"
    assert max_satisfying(["1.0.0-beta", "2.0.0-rc.1"], "*") is None
    assert str(min_satisfying(["2.0.0-rc.1", "1.0.0-beta"], "*", include_prerelease=True)) == "1.0.0-beta"


def test_selection_rejects_invalid_ranges_and_non_text_items():
    for fn in (max_satisfying, min_satisfying):
        with pytest.raises(InvalidRange):
            fn([], "1.x.3")
        with pytest.raises(InvalidRange):
            fn(["1.2.3"], ">=1.0.0<2.0.0")
        with pytest.raises(TypeError):
            fn(["1.2.3", None], "*")
        with pytest.raises(TypeError):
            fn([b"1.2.3"], "*")
        with pytest.raises(TypeError):
            fn(["1.2.3"], None)
