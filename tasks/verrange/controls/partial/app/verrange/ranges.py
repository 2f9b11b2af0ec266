"""Ranges: syntax, canonical form, matching, selection (SPEC.md FP-03..FP-05)."""

from __future__ import annotations

import re
from typing import Iterable

from .version import InvalidVersion, Version, to_version

__all__ = ["InvalidRange", "Range", "satisfies", "max_satisfying", "min_satisfying"]


class InvalidRange(ValueError):
    """A text is not a valid range (SPEC.md FP-03)."""


_WS = " \t\n\r\f\v"
_XR = r"(?:[xX*]|0|[1-9][0-9]*)"
_PRE_ID = r"(?:0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)"
_BUILD_ID = r"[0-9A-Za-z-]+"
_PARTIAL_RE = re.compile(
    rf"({_XR})(?:\.({_XR})(?:\.({_XR})"
    rf"(?:-({_PRE_ID}(?:\.{_PRE_ID})*))?"
    rf"(?:\+({_BUILD_ID}(?:\.{_BUILD_ID})*))?)?)?",
    re.ASCII,
)
_HYPHEN_RE = re.compile(r"(\S+)\s+-\s+(\S+)", re.ASCII)
_TOKEN_RE = re.compile(r"(<=|>=|<|>|=|~|\^)?[ \t\n\r\f\v]*([^ \t\n\r\f\v<>=~^|]+)", re.ASCII)


class _Partial:
    __slots__ = ("major", "minor", "patch", "prerelease")

    def __init__(self, text: str, range_text: str) -> None:
        m = _PARTIAL_RE.fullmatch(text)
        if m is None:
            raise InvalidRange(f"invalid version in range {range_text!r}: {text!r}")
        comps = [None if g is None or g in ("x", "X", "*") else int(g) for g in m.group(1, 2, 3)]
        # Once a component is a wildcard or missing, every later one must be too.
        seen_wild = False
        for c in comps:
            if c is None:
                seen_wild = True
            elif seen_wild:
                raise InvalidRange(f"wildcard followed by a number in {range_text!r}: {text!r}")
        if (m.group(4) or m.group(5)) and comps[2] is None:
            raise InvalidRange(f"pre-release or build on a partial version in {range_text!r}")
        self.major, self.minor, self.patch = comps
        pre = m.group(4)
        self.prerelease = tuple(int(p) if p.isdigit() else p for p in pre.split(".")) if pre else ()

    def floor(self) -> Version:
        """The lowest version the partial stands for (missing parts are 0)."""
        return Version._make(self.major, self.minor or 0, self.patch or 0, self.prerelease)


def _v(major, minor, patch, pre=()) -> Version:
    return Version._make(major, minor, patch, pre)


def _desugar(op: str, p: _Partial, range_text: str) -> list[tuple[str, Version]]:
    """Comparators for one simple item; [] means 'any version'."""
    M, m, pa = p.major, p.minor, p.patch
    if op in ("", "="):
        if M is None:
            return []
        if m is None:
            return [(">=", _v(M, 0, 0)), ("<", _v(M + 1, 0, 0))]
        if pa is None:
            return [(">=", _v(M, m, 0)), ("<", _v(M, m + 1, 0))]
        return [("=", p.floor())]
    if op == ">=":
        return [] if M is None else [(">=", p.floor())]
    if op == ">":
        if M is None:
            raise InvalidRange(f"'>' with a bare wildcard in {range_text!r}")
        if m is None:
            return [(">=", _v(M + 1, 0, 0))]
        if pa is None:
            return [(">=", _v(M, m + 1, 0))]
        return [(">", p.floor())]
    if op == "<":
        if M is None:
            raise InvalidRange(f"'<' with a bare wildcard in {range_text!r}")
        return [("<", p.floor())]
    if op == "<=":
        if M is None:
            return []
        if m is None:
            return [("<", _v(M + 1, 0, 0))]
        if pa is None:
            return [("<", _v(M, m + 1, 0))]
        return [("<=", p.floor())]
    if op == "~":
        if M is None:
            return []
        if m is None:
            return [(">=", _v(M, 0, 0)), ("<", _v(M + 1, 0, 0))]
        return [(">=", p.floor()), ("<", _v(M, m + 1, 0))]
    if op == "^":
        if M is None:
            return []
        if m is None:
            return [(">=", _v(M, 0, 0)), ("<", _v(M + 1, 0, 0))]
        # Control "partial": the caret always bumps the major component, so the
        # zero-major rule of SPEC.md FP-03 (^0.2.3 is <0.3.0, ^0.0.3 is <0.0.4)
        # is missing. Everything else is identical to the reference.
        return [(">=", p.floor()), ("<", _v(M + 1, 0, 0))]
    raise AssertionError(op)  # pragma: no cover


def _hyphen(low: _Partial, high: _Partial) -> list[tuple[str, Version]]:
    comps: list[tuple[str, Version]] = []
    if low.major is not None:
        comps.append((">=", low.floor()))
    if high.major is not None:
        if high.minor is None:
            comps.append(("<", _v(high.major + 1, 0, 0)))
        elif high.patch is None:
            comps.append(("<", _v(high.major, high.minor + 1, 0)))
        else:
            comps.append(("<=", high.floor()))
    return comps


def _parse_set(text: str, range_text: str) -> list[tuple[str, Version]]:
    h = _HYPHEN_RE.fullmatch(text)
    if h is not None:
        return _hyphen(_Partial(h.group(1), range_text), _Partial(h.group(2), range_text))
    comps: list[tuple[str, Version]] = []
    pos, n = 0, len(text)
    while pos < n:
        t = _TOKEN_RE.match(text, pos)
        if t is None:
            raise InvalidRange(f"invalid range: {range_text!r}")
        pos = t.end()
        if pos < n and text[pos] not in _WS:
            raise InvalidRange(f"comparators must be separated by whitespace: {range_text!r}")
        while pos < n and text[pos] in _WS:
            pos += 1
        comps.extend(_desugar(t.group(1) or "", _Partial(t.group(2), range_text), range_text))
    return comps


_CHECKS = {
    "=": lambda v, c: v == c,
    ">": lambda v, c: v > c,
    ">=": lambda v, c: v >= c,
    "<": lambda v, c: v < c,
    "<=": lambda v, c: v <= c,
}


class Range:
    """A parsed range: a union ('||') of comparator sets."""

    __slots__ = ("_sets",)

    def __init__(self, text: str) -> None:
        if not isinstance(text, str):
            raise TypeError(f"range text must be str, not {type(text).__name__}")
        stripped = text.strip(_WS)
        if not stripped:
            self._sets = ((),)
            return
        sets = []
        for part in stripped.split("||"):
            part = part.strip(_WS)
            if not part:
                raise InvalidRange(f"empty comparator set in {text!r}")
            sets.append(tuple(_parse_set(part, text)))
        self._sets = tuple(sets)

    def __str__(self) -> str:
        return " || ".join(
            " ".join(op + str(v) for op, v in s) if s else "*" for s in self._sets
        )

    def __repr__(self) -> str:
        return f"Range({str(self)!r})"

    def contains(self, version, *, include_prerelease: bool = False) -> bool:
        v = to_version(version)
        return any(self._set_matches(s, v, include_prerelease) for s in self._sets)

    def __contains__(self, version) -> bool:
        return self.contains(version)

    @staticmethod
    def _set_matches(comps, v: Version, include_prerelease: bool) -> bool:
        if not all(_CHECKS[op](v, c) for op, c in comps):
            return False
        if v.prerelease and not include_prerelease:
            core = (v.major, v.minor, v.patch)
            return any(c.prerelease and (c.major, c.minor, c.patch) == core for _, c in comps)
        return True


def _to_range(value) -> Range:
    if isinstance(value, Range):
        return value
    if isinstance(value, str):
        return Range(value)
    raise TypeError(f"expected a Range or str, not {type(value).__name__}")


def satisfies(version, range, *, include_prerelease: bool = False) -> bool:  # noqa: A002
    return _to_range(range).contains(version, include_prerelease=include_prerelease)


def _candidates(versions: Iterable):
    for item in versions:
        if isinstance(item, Version):
            yield item
        elif isinstance(item, str):
            try:
                yield Version(item)
            except InvalidVersion:
                continue
        else:
            raise TypeError(f"expected a Version or str, not {type(item).__name__}")


def max_satisfying(versions: Iterable, range, *, include_prerelease: bool = False):  # noqa: A002
    r = _to_range(range)
    best = None
    for v in _candidates(versions):
        if r.contains(v, include_prerelease=include_prerelease) and (best is None or v > best):
            best = v
    return best


def min_satisfying(versions: Iterable, range, *, include_prerelease: bool = False):  # noqa: A002
    r = _to_range(range)
    best = None
    for v in _candidates(versions):
        if r.contains(v, include_prerelease=include_prerelease) and (best is None or v < best):
            best = v
    return best
