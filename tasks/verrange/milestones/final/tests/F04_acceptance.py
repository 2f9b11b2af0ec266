"""FP-04: range matching (contains, `in`, satisfies, the pre-release rule)."""

import pytest

from verrange import InvalidRange, InvalidVersion, Range, Version, satisfies


def _check(range_text, inside=(), outside=(), **kwargs):
    r = Range(range_text)
    for v in inside:
        assert r.contains(v, **kwargs) is True, f"{v!r} should be in {range_text!r} {kwargs}"
    for v in outside:
        assert r.contains(v, **kwargs) is False, f"{v!r} should not be in {range_text!r} {kwargs}"


def test_comparator_bounds_and_sets_need_every_comparator():
    _check(">=1.2.3", inside=["1.2.3", "1.2.4", "2.0.0", "1.2.3+b"], outside=["1.2.2", "0.9.9"])
    _check(">1.2.3", inside=["1.2.4", "1.3.0"], outside=["1.2.3", "1.2.3+b", "1.0.0"])
    _check("<1.2.3", inside=["1.2.2", "0.0.0"], outside=["1.2.3", "1.3.0"])
    _check("<=1.2.3", inside=["1.2.3", "1.2.3+z", "1.2.2"], outside=["1.2.4"])
    _check("1.2.3", inside=["1.2.3", "1.2.3+build.9"], outside=["1.2.4", "1.2.2"])
    _check("=1.2.3-rc.1", inside=["1.2.3-rc.1", "1.2.3-rc.1+b"], outside=["1.2.3-rc.2", "1.2.3"])
    _check(">=1.0.0 <2.0.0", inside=["1.0.0", "1.99.99"], outside=["0.9.9", "2.0.0", "2.5.0"])
    _check(">=1.0.0 <2.0.0 >1.5.0", inside=["1.5.1", "1.9.0"], outside=["1.2.0", "1.5.0", "2.0.0"])
    _check("<1.0.0 >2.0.0", outside=["0.5.0", "1.5.0", "2.5.0"])


def test_union_matches_when_any_set_matches():
    _check("1.2.7 || >=1.2.9 <2.0.0",
           inside=["1.2.7", "1.2.9", "1.4.6"], outside=["1.2.8", "2.0.0", "1.2.6"])
    _check("<1.0.0 || >=3.0.0", inside=["0.1.0", "3.0.0", "9.0.0"], outside=["1.0.0", "2.9.9"])


def test_tilde_x_range_and_hyphen_matching():
    _check("~1.2.3", inside=["1.2.3", "1.2.99"], outside=["1.2.2", "1.3.0"])
    _check("1.x", inside=["1.0.0", "1.99.0"], outside=["0.9.9", "2.0.0"])
    _check("1.2", inside=["1.2.0", "1.2.9"], outside=["1.3.0", "1.1.9"])
    _check("*", inside=["0.0.0", "99.0.0", "1.2.3+b"])
    _check("", inside=["0.0.0", "5.0.0"])
    _check("1.2.3 - 2.3", inside=["1.2.3", "2.3.99"], outside=["1.2.2", "2.4.0"])
    _check("1.2.3 - 2.3.4", inside=["2.3.4"], outside=["2.3.5"])
    _check(">1.2", inside=["1.3.0"], outside=["1.2.9"])
    _check("<=1.2", inside=["1.2.9"], outside=["1.3.0"])


def test_caret_matching_with_zero_major():
    _check("^1.2.3", inside=["1.2.3", "1.9.9"], outside=["1.2.2", "2.0.0"])
    _check("^0.2.3", inside=["0.2.3", "0.2.9"], outside=["0.2.2", "0.3.0", "1.0.0"])
    _check("^0.0.3", inside=["0.0.3"], outside=["0.0.2", "0.0.4", "0.1.0"])
    _check("^0.0.x", inside=["0.0.0", "0.0.9"], outside=["0.1.0"])
    _check("^0.1", inside=["0.1.0", "0.1.7"], outside=["0.2.0"])
    _check("^0", inside=["0.0.0", "0.9.9"], outside=["1.0.0"])


def test_prerelease_needs_a_comparator_with_the_same_core_version():
    _check(">=1.2.3-alpha.3", inside=["1.2.3-alpha.3", "1.2.3-alpha.7", "1.2.3", "3.4.5"],
           outside=["3.4.5-alpha.9", "1.2.3-alpha.2", "1.2.4-alpha.3"])
    _check("~1.2.3-beta.2", inside=["1.2.3-beta.2", "1.2.3-beta.4", "1.2.4"],
           outside=["1.2.4-beta.2", "1.2.3-beta.1"])
    _check("<2.0.0", inside=["1.9.9"], outside=["2.0.0-rc.1", "1.5.0-beta"])
    _check(">=1.0.0 <=1.0.1-rc.3", inside=["1.0.1-rc.2", "1.0.0"], outside=["1.0.0-rc.9", "1.0.1-rc.4"])
    _check("1.0.0-rc.1", inside=["1.0.0-rc.1"], outside=["1.0.0-rc.2"])


def test_wildcard_and_partial_ranges_exclude_prereleases():
    _check("*", outside=["1.0.0-beta", "0.0.1-0"])
    _check("", outside=["1.0.0-beta"])
    _check("1.x", inside=["1.5.0"], outside=["1.5.0-rc.1", "1.0.0-0"])
    _check(">=0.0.0", outside=["1.0.0-beta"])


def test_prerelease_rule_is_decided_per_set():
    r = ">=1.2.3-rc.1 <1.2.3-rc.5 || >=1.0.0"
    _check(r, inside=["1.2.3-rc.2", "1.2.3", "1.0.0"], outside=["1.2.3-rc.7", "1.5.0-beta"])
    _check(">=1.2.3-rc.1 <1.2.3-rc.5 || >=1.2.3-rc.6",
           inside=["1.2.3-rc.2", "1.2.3-rc.7"], outside=["1.2.3-rc.5"])
    _check("1.2.3-rc.1 || 1.x", outside=["1.2.3-rc.2"])


def test_include_prerelease_lifts_only_the_prerelease_rule():
    kw = {"include_prerelease": True}
    _check(">=1.2.3-alpha.3", inside=["3.4.5-alpha.9", "1.2.3-alpha.7"], outside=["1.2.3-alpha.1"], **kw)
    _check("*", inside=["1.0.0-beta", "0.0.1-0"], **kw)
    _check("<2.0.0", inside=["2.0.0-rc.1"], outside=["2.0.0", "2.0.1-rc.1"], **kw)
    # Only the bounds remain: 2.0.0-0 is below the upper bound <2.0.0.
    _check("1.x", inside=["1.5.0-rc.1", "2.0.0-0"], outside=["1.0.0-0", "2.0.0"], **kw)
    _check(">=1.2.3-rc.1 <1.2.3-rc.5 || >=1.0.0", inside=["1.2.3-rc.7"], outside=["0.9.0-rc.1"], **kw)
    _check("*", outside=["1.0.0-beta"], include_prerelease=False)


def test_entry_points_agree_and_reject_invalid_inputs():
    r = Range(">=1.2.3 <2.0.0")
    assert ("1.5.0" in r) is True
    assert (Version("1.5.0") in r) is True
    assert ("2.0.0" in r) is False
    assert ("1.5.0-beta" in Range("*")) is False
    assert r.contains(Version("1.9.0")) is True
    assert satisfies("1.5.0", ">=1.2.3 <2.0.0") is True
    assert satisfies(Version("1.5.0"), r) is True
    assert satisfies("2.5.0", r) is False
    assert satisfies("1.5.0-beta", "*") is False
    assert satisfies("1.5.0-beta", "*", include_prerelease=True) is True
    assert satisfies("1.5.0-beta", Range("^1.0.0"), include_prerelease=True) is True

    with pytest.raises(InvalidVersion):
        r.contains("1.5")
    with pytest.raises(InvalidVersion):
        "not-a-version" in r
    with pytest.raises(InvalidVersion):
        satisfies("1.5", "*")
    with pytest.raises(InvalidRange):
        satisfies("1.5.0", "1.x.3")
    for bad in [None, b"1.5.0", 1.5]:
        with pytest.raises(TypeError):
            r.contains(bad)
        with pytest.raises(TypeError):
            satisfies(bad, "*")
    with pytest.raises(TypeError):
        satisfies("1.5.0", None)
