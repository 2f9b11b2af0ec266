"""FP-02: precedence (operators, equality and hash, compare, sort_versions)."""

import pytest

from verrange import InvalidVersion, Version, compare, sort_versions

V = Version


def _strictly_increasing(texts):
    vs = [V(t) for t in texts]
    for i, a in enumerate(vs):
        for j, b in enumerate(vs):
            pair = (texts[i], texts[j])
            if i < j:
                assert a < b and a <= b and b > a and b >= a and a != b, pair
                assert not (a > b) and not (a >= b) and not (a == b), pair
            elif i == j:
                assert a == b and a <= b and a >= b and not (a < b) and not (a != b), pair


def test_core_numbers_compare_numerically_and_prerelease_is_lower():
    _strictly_increasing(["0.0.0", "0.0.1", "0.1.0", "0.9.0", "0.10.0", "1.0.0",
                          "1.9.0", "1.10.0", "1.11.0", "2.0.0", "10.0.0"])
    _strictly_increasing(["1.0.0-rc.1", "1.0.0", "1.0.1-alpha", "1.0.1"])
    assert V("2.0.0-alpha") > V("1.99.99")


def test_specification_precedence_chain():
    _strictly_increasing([
        "1.0.0-alpha",
        "1.0.0-alpha.1",
        "1.0.0-alpha.beta",
        "1.0.0-beta",
        "1.0.0-beta.2",
        "1.0.0-beta.11",
        "1.0.0-rc.1",
        "1.0.0",
    ])


def test_numeric_identifier_is_lower_than_alphanumeric():
    _strictly_increasing(["1.0.0-2", "1.0.0-10", "1.0.0-999", "1.0.0-0a", "1.0.0-a"])
    _strictly_increasing(["1.0.0-rc.9", "1.0.0-rc.10", "1.0.0-rc.a"])
    _strictly_increasing(["1.0.0-1.2", "1.0.0-1.2.0", "1.0.0-1.10", "1.0.0-1.b"])


def test_alphanumeric_identifiers_compare_by_ascii_order():
    _strictly_increasing(["1.0.0-Beta", "1.0.0-alpha"])
    _strictly_increasing(["1.0.0-RC", "1.0.0-Rc", "1.0.0-rC", "1.0.0-rc"])
    _strictly_increasing(["1.0.0-alpha-2", "1.0.0-alpha2", "1.0.0-alphaZ", "1.0.0-alphaz"])
    _strictly_increasing(["1.0.0--", "1.0.0-0-", "1.0.0-A", "1.0.0-a"])


def test_build_metadata_is_ignored_for_equality_and_hash():
    a, b, c = V("1.0.0+a"), V("1.0.0+b.2"), V("1.0.0")
    assert a == b == c
    assert not (a != b)
    assert not (a < b) and not (a > b) and a <= b and a >= b
    assert hash(a) == hash(b) == hash(c)
    assert len({a, b, c}) == 1
    assert V("1.0.0-rc.1+x") == V("1.0.0-rc.1+y")
    assert hash(V("1.0.0-rc.1+x")) == hash(V("1.0.0-rc.1"))
    assert V("1.0.0-rc.1+x") != V("1.0.0-rc.2+x")
    assert len({V("1.2.3"), V("1.2.3+z"), V("1.2.4"), V("1.2.3-0")}) == 3
    assert {V("1.0.0+a"): "first"}[V("1.0.0+zzz")] == "first"


def test_compare_accepts_versions_and_texts():
    cases = [
        ("1.0.0", "2.0.0", -1),
        ("2.0.0", "1.0.0", 1),
        ("1.0.0", "1.0.0", 0),
        ("1.0.0+a", "1.0.0+b", 0),
        ("1.0.0-alpha", "1.0.0", -1),
        ("1.0.0-beta.11", "1.0.0-beta.2", 1),
        ("1.10.0", "1.9.0", 1),
    ]
    for a, b, expected in cases:
        for x, y in [(a, b), (V(a), b), (a, V(b)), (V(a), V(b))]:
            got = compare(x, y)
            assert type(got) is int and got == expected, (a, b)
    with pytest.raises(InvalidVersion):
        compare("1.0", "1.0.0")
    with pytest.raises(InvalidVersion):
        compare(V("1.0.0"), "01.0.0")
    for bad in [None, b"1.0.0", 1]:
        with pytest.raises(TypeError):
            compare(bad, "1.0.0")
        with pytest.raises(TypeError):
            compare("1.0.0", bad)


def test_comparison_with_a_non_version_is_unsupported():
    v = V("1.0.0")
    assert (v == "1.0.0") is False
    assert (v != "1.0.0") is True
    assert (v == 1) is False
    for op in (lambda: v < "2.0.0", lambda: v <= "2.0.0", lambda: v > "0.1.0",
               lambda: v >= "0.1.0", lambda: v < 2, lambda: "0.1.0" < v):
        with pytest.raises(TypeError):
            op()


def test_sort_versions_ascending_is_stable_and_rejects_invalid_text():
    items = ["1.0.0+b", "0.9.0", V("1.0.0+a"), "1.0.0-rc.1", "1.0.0", "0.10.0", "1.0.0+c"]
    snapshot = list(items)
    out = sort_versions(items)
    assert isinstance(out, list) and all(isinstance(v, Version) for v in out)
    assert [str(v) for v in out] == [
        "0.9.0", "0.10.0", "1.0.0-rc.1", "1.0.0+b", "1.0.0+a", "1.0.0", "1.0.0+c",
    ]
    assert items == snapshot and out is not items
    assert sort_versions(iter(["2.0.0", "1.0.0"])) == [V("1.0.0"), V("2.0.0")]
    assert sort_versions([]) == []

    with pytest.raises(InvalidVersion):
        sort_versions(["1.0.0", "not-a-version", "2.0.0"])
    with pytest.raises(InvalidVersion):
        sort_versions(["1.0.0", "1.0"])
    with pytest.raises(TypeError):
        sort_versions(["1.0.0", None])


def test_sort_versions_reverse_keeps_input_order_of_equal_versions():
    items = ["1.0.0+b", "2.0.0", "1.0.0+a", "0.1.0", "1.0.0+c", "2.0.0+x"]
    out = sort_versions(items, reverse=True)
    assert [str(v) for v in out] == [
        "2.0.0", "2.0.0+x", "1.0.0+b", "1.0.0+a", "1.0.0+c", "0.1.0",
    ]
