"""``is_instant``'s fast path (digit pairs compared, dates remembered) decides exactly what the
full parse decides, for every text matching the timestamp pattern and for odd texts too."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from procgrade.engine.events import TS_PATTERN, _parsed_instant, is_instant

pair = st.integers(0, 99).map(lambda n: f"{n:02d}")


@st.composite
def ascii_timestamps(draw: st.DrawFn) -> str:
    year = draw(st.integers(0, 9999))
    month, day, hour, minute, second = (draw(pair) for _ in range(5))
    sep = draw(st.sampled_from("Tt "))
    fraction = draw(st.one_of(st.just(""), st.from_regex(r"\.[0-9]{1,9}", fullmatch=True)))
    zone = draw(st.one_of(st.sampled_from("Zz"), st.builds(lambda s, h, m: f"{s}{h}:{m}",
                                                            st.sampled_from("+-"), pair, pair)))
    return f"{year:04d}-{month}-{day}{sep}{hour}:{minute}:{second}{fraction}{zone}"


@settings(max_examples=3000)
@given(ascii_timestamps())
@example("2024-02-29T23:59:60+23:59")
@example("2023-02-29T00:00:00Z")
@example("0000-01-01T00:00:00Z")
@example("2026-13-45T25:61:61Z")
@example("2026-11-01T24:00:00Z")
@example("2026-11-01T00:00:00+24:00")
@example("2026-11-01T00:00:00-00:60")
def test_fast_path_equals_the_full_parse(text: str) -> None:
    assert is_instant(text) == _parsed_instant(text)
    assert is_instant(text) == _parsed_instant(text)  # a second time, with the date remembered


@settings(max_examples=1000)
@given(st.from_regex(TS_PATTERN, fullmatch=True))
def test_any_text_of_the_pattern_is_decided_as_by_the_full_parse(text: str) -> None:
    """Unicode digits (which ``\\d`` matches) included: they take the full parse."""
    assert is_instant(text) == _parsed_instant(text)
