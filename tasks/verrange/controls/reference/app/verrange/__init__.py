"""verrange: version texts, precedence and version ranges (reference implementation)."""

from .ranges import InvalidRange, Range, max_satisfying, min_satisfying, satisfies
from .version import InvalidVersion, Version, compare, sort_versions

__all__ = [
    "InvalidVersion",
    "InvalidRange",
    "Version",
    "Range",
    "compare",
    "sort_versions",
    "satisfies",
    "max_satisfying",
    "min_satisfying",
]
