"""The verdict a bench prints beside a ratio measured against one of its targets (issue 16's, issue 5's).

Decided on the ratio itself and printed to three places (more where three would show the target
itself): at two, 0.695 shows as the 0.70x it misses, and 1.496 and 1.504 both as 1.50x.
"""

from __future__ import annotations

from fractions import Fraction

__all__ = ["verdict"]

_HOLDS = {"at least": float.__ge__, "at most": float.__le__, "under": float.__lt__}


def verdict(ratio: float, bound: str, target: Fraction | float) -> str:
    """``"0.695; target at least 0.70x: missed"``; ``bound`` is "at least", "at most" or "under",
    ``target`` a float or an exact fraction (shown as one: 1/3, not 0.33)."""
    met = _HOLDS[bound](float(ratio), float(target))
    shown = f"{target}" if isinstance(target, Fraction) else f"{target:.2f}x"
    return f"{_places(float(ratio), float(target))}; target {bound} {shown}: {'met' if met else 'missed'}"


def _places(ratio: float, target: float) -> str:
    """``ratio`` to three places, or to as many more (up to six) as it takes to differ from
    ``target`` there: 0.3334 against 1/3 shows as 0.3334, not as a 0.333 that was missed."""
    for places in range(3, 7):
        text = f"{ratio:.{places}f}"
        if text != f"{target:.{places}f}" or ratio == target:
            return text
    return text
