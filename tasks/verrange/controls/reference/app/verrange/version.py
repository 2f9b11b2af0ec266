"""Version texts: parsing, fields, precedence (SPEC.md FP-01, FP-02)."""

from __future__ import annotations

import re
from typing import Iterable

__all__ = ["InvalidVersion", "Version", "compare", "sort_versions", "to_version"]


class InvalidVersion(ValueError):
    """A text is not a valid version (SPEC.md FP-01)."""


_NUM = r"(?:0|[1-9][0-9]*)"
_PRE_ID = r"(?:0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)"
_BUILD_ID = r"[0-9A-Za-z-]+"
_VERSION_RE = re.compile(
    rf"({_NUM})\.({_NUM})\.({_NUM})"
    rf"(?:-({_PRE_ID}(?:\.{_PRE_ID})*))?"
    rf"(?:\+({_BUILD_ID}(?:\.{_BUILD_ID})*))?",
    re.ASCII,
)


def _pre_identifiers(text: str | None) -> tuple[int | str, ...]:
    if not text:
        return ()
    return tuple(int(p) if p.isdigit() else p for p in text.split("."))


def _build_identifiers(text: str | None) -> tuple[str, ...]:
    if not text:
        return ()
    return tuple(text.split("."))


class Version:
    """An immutable, hashable version; ordered and compared by precedence."""

    __slots__ = ("major", "minor", "patch", "prerelease", "build", "_key")

    def __init__(self, text: str) -> None:
        if not isinstance(text, str):
            raise TypeError(f"version text must be str, not {type(text).__name__}")
        m = _VERSION_RE.fullmatch(text)
        if m is None:
            raise InvalidVersion(f"invalid version: {text!r}")
        self._set(int(m.group(1)), int(m.group(2)), int(m.group(3)),
                  _pre_identifiers(m.group(4)), _build_identifiers(m.group(5)))

    @classmethod
    def _make(cls, major: int, minor: int, patch: int,
              prerelease: tuple[int | str, ...] = (),
              build: tuple[str, ...] = ()) -> "Version":
        v = object.__new__(cls)
        v._set(major, minor, patch, tuple(prerelease), tuple(build))
        return v

    def _set(self, major, minor, patch, prerelease, build) -> None:
        if prerelease:
            pre_key = (0,) + tuple((0, i) if isinstance(i, int) else (1, i) for i in prerelease)
        else:
            pre_key = (1,)
        for name, value in (("major", major), ("minor", minor), ("patch", patch),
                            ("prerelease", prerelease), ("build", build),
                            ("_key", (major, minor, patch, pre_key))):
            object.__setattr__(self, name, value)

    def __setattr__(self, name, value):
        raise AttributeError(f"Version is immutable: cannot set {name!r}")

    def __delattr__(self, name):
        raise AttributeError(f"Version is immutable: cannot delete {name!r}")

    def __str__(self) -> str:
        s = f"{self.major}.{self.minor}.{self.patch}"
        if self.prerelease:
            s += "-" + ".".join(str(i) for i in self.prerelease)
        if self.build:
            s += "+" + ".".join(self.build)
        return s

    def __repr__(self) -> str:
        return f"Version({str(self)!r})"

    def __hash__(self) -> int:
        return hash(self._key)

    def __eq__(self, other):
        if not isinstance(other, Version):
            return NotImplemented
        return self._key == other._key

    def __ne__(self, other):
        if not isinstance(other, Version):
            return NotImplemented
        return self._key != other._key

    def __lt__(self, other):
        if not isinstance(other, Version):
            return NotImplemented
        return self._key < other._key

    def __le__(self, other):
        if not isinstance(other, Version):
            return NotImplemented
        return self._key <= other._key

    def __gt__(self, other):
        if not isinstance(other, Version):
            return NotImplemented
        return self._key > other._key

    def __ge__(self, other):
        if not isinstance(other, Version):
            return NotImplemented
        return self._key >= other._key


def to_version(value) -> Version:
    """A Version from a Version or a version text; TypeError for anything else."""
    if isinstance(value, Version):
        return value
    if isinstance(value, str):
        return Version(value)
    raise TypeError(f"expected a Version or str, not {type(value).__name__}")


def compare(a, b) -> int:
    va, vb = to_version(a), to_version(b)
    return (va > vb) - (va < vb)


def sort_versions(versions: Iterable, *, reverse: bool = False) -> list[Version]:
    return sorted((to_version(v) for v in versions), reverse=bool(reverse))
