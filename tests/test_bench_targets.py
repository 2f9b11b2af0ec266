"""The verdict the benches print beside a ratio (bench/targets.py): decided on the ratio itself,
and shown with enough places to see why."""

from __future__ import annotations

from fractions import Fraction

from bench.targets import verdict


def test_a_ratio_a_hair_past_the_line_shows_the_places_that_decide_it() -> None:
    assert verdict(0.3334, "at most", Fraction(1, 3)) == "0.3334; target at most 1/3: missed"
    assert verdict(0.69951, "at least", 0.7) == "0.6995; target at least 0.70x: missed"
    assert verdict(1.50004, "under", 1.5) == "1.50004; target under 1.50x: missed"


def test_three_places_where_they_show_the_side() -> None:
    assert verdict(0.695, "at least", 0.7) == "0.695; target at least 0.70x: missed"
    assert verdict(0.2241, "at most", Fraction(1, 3)) == "0.224; target at most 1/3: met"
    assert verdict(1.438, "under", 1.5) == "1.438; target under 1.50x: met"


def test_a_ratio_exactly_on_the_line() -> None:
    assert verdict(0.7, "at least", 0.7) == "0.700; target at least 0.70x: met"
    assert verdict(1.5, "under", 1.5) == "1.500; target under 1.50x: missed"
