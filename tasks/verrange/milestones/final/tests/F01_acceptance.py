"""FP-01: version texts (parsing, fields, text form, immutability, errors)."""

import pytest

import verrange
from verrange import InvalidRange, InvalidVersion, Version


def test_core_and_prerelease_fields():
    v = Version("1.22.333")
    assert (v.major, v.minor, v.patch) == (1, 22, 333)
    assert all(type(x) is int for x in (v.major, v.minor, v.patch))
    assert v.prerelease == ()
    assert v.build == ()

    zero = Version("0.0.0")
    assert (zero.major, zero.minor, zero.patch) == (0, 0, 0)

    big = Version("12345678901234567890.0.1")
    assert big.major == 12345678901234567890

    p = Version("1.0.0-alpha.1.0a.x-y.0")
    assert p.prerelease == ("alpha", 1, "0a", "x-y", 0)
    assert [type(i) for i in p.prerelease] == [str, int, str, str, int]
    assert p.build == ()


def test_build_identifiers_are_text_with_leading_zeros_kept():
    v = Version("1.0.0-alpha.1+001.exp-sha.5114f85")
    assert v.prerelease == ("alpha", 1)
    assert v.build == ("001", "exp-sha", "5114f85")
    assert all(type(i) is str for i in v.build)

    w = Version("1.0.0+20130313144700")
    assert w.prerelease == ()
    assert w.build == ("20130313144700",)

    z = Version("2.0.0+0.00.-")
    assert z.build == ("0", "00", "-")


def test_text_form_round_trips_including_hyphen_identifiers():
    texts = [
        "0.0.0",
        "1.2.3",
        "10.20.30",
        "1.0.0-alpha",
        "1.0.0-alpha.1",
        "1.0.0-0.3.7",
        "1.0.0-x.7.z.92",
        "1.0.0-x-y-z.--",
        "1.0.0--",
        "1.0.0-0a.00a.-",
        "1.0.0-alpha+001",
        "1.0.0+20130313144700",
        "1.0.0-beta+exp.sha.5114f85",
        "1.0.0+21AF26D3----117B344092BD",
        "1.0.0-rc.1+build.1-2",
        "99999999999999999999.0.0",
    ]
    for t in texts:
        assert str(Version(t)) == t, t

    assert Version("1.0.0-x-y-z.--").prerelease == ("x-y-z", "--")
    assert Version("1.0.0--").prerelease == ("-",)
    assert Version("1.0.0-0a.00a.-").prerelease == ("0a", "00a", "-")
    assert Version("1.0.0-rc.1+build.1-2").build == ("build", "1-2")


def test_leading_zeros_rejected_in_numbers_and_numeric_prerelease_identifiers():
    for t in ["01.2.3", "1.02.3", "1.2.03", "00.0.0", "0.00.0"]:
        with pytest.raises(InvalidVersion):
            Version(t)
    for t in ["1.0.0-01", "1.0.0-alpha.007", "1.0.0-00", "1.0.0-rc.01+build"]:
        with pytest.raises(InvalidVersion):
            Version(t)
    # Zero itself, and alphanumeric identifiers starting with zeros, are fine.
    assert Version("1.0.0-0").prerelease == (0,)
    assert Version("1.0.0-alpha.0").prerelease == ("alpha", 0)
    assert Version("1.0.0-007a").prerelease == ("007a",)


def test_malformed_texts_raise_invalid_version_a_value_error():
    bad = [
        "",
        "1",
        "1.2",
        "1.2.3.4",
        "v1.2.3",
        "=1.2.3",
        " 1.2.3",
        "1.2.3 ",
        "1. 2.3",
        "1.2.3-",
        "1.2.3+",
        "1.2.3-+build",
        "1.2.3-alpha..1",
        "1.2.3-alpha.",
        "1.2.3+build..1",
        "1.2.3-al_pha",
        "1.2.3+bu!ld",
        "-1.2.3",
        "1.2.-3",
        "a.b.c",
        "1.2.x",
        "1.2.3-beta+exp+sha",
    ]
    for t in bad:
        with pytest.raises(InvalidVersion):
            Version(t)
    assert issubclass(InvalidVersion, ValueError)
    assert issubclass(InvalidRange, ValueError)
    assert not issubclass(InvalidVersion, InvalidRange)
    assert not issubclass(InvalidRange, InvalidVersion)
    with pytest.raises(ValueError):
        Version("1.2")
    assert verrange.InvalidVersion is InvalidVersion


def test_non_ascii_digits_and_trailing_newline_are_invalid():
    for t in [
        "1.2.\uff13",          # fullwidth digit three
        "\u0661.2.3",          # Arabic-Indic digit one
        "1.0.0-\u0661",
        "1.0.0+\u00e9",
        "1.2.3\n",
        "1.0.0-alpha\n",
        "1.0.0+build\n",
        "1.2.3\t",
    ]:
        with pytest.raises(InvalidVersion):
            Version(t)


def test_non_text_argument_raises_type_error():
    for value in [b"1.2.3", 123, None, 1.5, ["1.2.3"], Version("1.2.3")]:
        with pytest.raises(TypeError):
            Version(value)


def test_version_is_immutable():
    v = Version("1.2.3-rc.1+b")
    for name, value in [("major", 9), ("minor", 9), ("patch", 9),
                        ("prerelease", ()), ("build", ()), ("extra", 1)]:
        with pytest.raises(AttributeError):
            setattr(v, name, value)
    assert str(v) == "1.2.3-rc.1+b"
    assert (v.major, v.minor, v.patch) == (1, 2, 3)
