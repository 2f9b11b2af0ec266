"""Exact numbers from JSON: the decimal a file wrote, as text, never a rounded float.

Rewards, costs and token counts arrive as JSON numbers. Scores must be exact and
canonical, so a number is carried as its shortest exact decimal text: ``1.0`` is
``"1"``, ``0.50`` is ``"0.5"``, ``1e-7`` is ``"0.0000001"``. A float is taken at its
shortest round-trip form (``repr``), which is the number the file wrote.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from fractions import Fraction

__all__ = ["decimal_text", "rational_text"]


def decimal_text(value: int | float | str | Decimal) -> str:
    """The exact decimal text of ``value`` (no exponent, no trailing zeros, no ``-0``).
    Raises ValueError for booleans, non-numbers and non-finite values."""
    if isinstance(value, bool):
        raise ValueError(f"a boolean is not a number: {value!r}")
    try:
        if isinstance(value, float):
            number = Decimal(repr(value))
        elif isinstance(value, (int, Decimal)):
            number = Decimal(value)
        else:
            number = Decimal(str(value).strip())
    except InvalidOperation:
        raise ValueError(f"not a number: {value!r}") from None
    if not number.is_finite():
        raise ValueError(f"not a finite number: {value!r}")
    text = format(number.normalize(), "f")
    return "0" if text == "-0" else text


def rational_text(value: Fraction) -> str:
    """The one spelling of an exact rational: decimal text when it has a finite decimal
    expansion (``"1"``, ``"0.75"``), else the reduced fraction (``"2/3"``)."""
    denominator = value.denominator
    for prime in (2, 5):
        while denominator % prime == 0:
            denominator //= prime
    if denominator == 1:
        return decimal_text(Decimal(value.numerator) / Decimal(value.denominator))
    return f"{value.numerator}/{value.denominator}"
