"""Exact decimal text of JSON numbers (rewards, costs)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from procgrade.engine.exact import decimal_text


@pytest.mark.parametrize(
    ("value", "text"),
    [(1, "1"), (1.0, "1"), (0.5, "0.5"), ("0.50", "0.5"), (1e-7, "0.0000001"), (100.0, "100"),
     (-0.0, "0"), (2.6073150000000003, "2.6073150000000003"), (Decimal("2/1".split("/")[0]), "2"),
     (2**70, str(2**70)), (" 3 ", "3")],
)
def test_decimal_text(value: object, text: str) -> None:
    assert decimal_text(value) == text  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [True, "abc", float("nan"), float("inf"), "Infinity"])
def test_non_numbers_are_refused(value: object) -> None:
    with pytest.raises(ValueError):
        decimal_text(value)  # type: ignore[arg-type]
