"""``is_instant``'s fast path (digit pairs compared, dates remembered) decides exactly what the
full parse decides, for every text matching the timestamp pattern and for odd texts too; and the
real-instant pattern the event model checks decides what ``is_instant`` decides."""

from __future__ import annotations

import re

import orjson
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from procgrade.engine.events import REAL_TS_PATTERN, TS_PATTERN, _parsed_instant, event_adapter, is_instant

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


_REAL = re.compile(REAL_TS_PATTERN)


@settings(max_examples=3000)
@given(ascii_timestamps())
@example("2024-02-29T23:59:60+23:59")
@example("2023-02-29T00:00:00Z")
@example("2000-02-29T00:00:00Z")
@example("1900-02-29T00:00:00Z")
@example("0400-02-29T00:00:00Z")
@example("0004-02-29T00:00:00Z")
@example("0000-02-29T00:00:00Z")
@example("0000-01-01T00:00:00Z")
@example("0001-01-01T00:00:00Z")
@example("9999-12-31T23:59:60-23:59")
@example("2026-04-31T00:00:00Z")
@example("2026-13-45T25:61:61Z")
@example("2026-11-01T24:00:00Z")
@example("2026-11-01T00:00:00+24:00")
@example("2026-11-01T00:00:00-00:60")
def test_the_real_instant_pattern_decides_as_is_instant(text: str) -> None:
    """The events' ``ts`` field checks REAL_TS_PATTERN in pydantic's regex engine instead of
    calling is_instant: the two must accept exactly the same texts of TS_PATTERN."""
    assert (_REAL.fullmatch(text) is not None) == is_instant(text)


@st.composite
def month_ends(draw: st.DrawFn) -> str:
    """The last days of months in years around centuries and leap years, where dates go wrong."""
    near_century = st.builds(lambda century, off: (century * 100 + off) % 10000, st.integers(0, 99), st.integers(-4, 4))
    year = draw(st.one_of(st.integers(0, 9999), near_century))
    month = draw(st.integers(0, 13))
    day = draw(st.integers(27, 32))
    return f"{year:04d}-{month:02d}-{day:02d}T12:00:00Z"


@settings(max_examples=3000)
@given(month_ends())
def test_the_real_instant_pattern_knows_each_months_days(text: str) -> None:
    assert (_REAL.fullmatch(text) is not None) == is_instant(text) == _parsed_instant(text)


@settings(max_examples=1000)
@given(st.from_regex(TS_PATTERN, fullmatch=True))
@example("2024-01-01T00:00:00.\u0661Z")
@example("2024-01-01T00:00:00.\u0661\u0662Z")
@example("\u0662024-01-01T00:00:00Z")
def test_the_real_instant_pattern_refuses_what_is_instant_refuses(text: str) -> None:
    """Unicode digits included (``\\d`` matches them): refused in the date and time, taken in the
    fraction, which is_instant ignores."""
    assert (_REAL.fullmatch(text) is not None) == is_instant(text)


@pytest.mark.parametrize(("ts", "accepted"), [("2024-02-29T23:59:60.123456789+23:59", True),
                                              ("2023-02-29T00:00:00Z", False), ("2026-11-01 00:00:00z", True),
                                              ("2026-11-01T00:00:00+24:00", False)])
def test_an_events_ts_is_checked_by_the_pattern(ts: str, accepted: bool) -> None:
    line = orjson.dumps({"run_id": "r", "seq": 0, "event_id": "e", "ts": ts, "actor": "harness",
                         "kind": "run_started", "harness": {"name": "h"}})
    if accepted:
        assert event_adapter().validate_json(line).ts == ts
    else:
        with pytest.raises(ValidationError) as caught:
            event_adapter().validate_json(line)
        error = caught.value.errors(include_url=False)[0]
        assert error["loc"][-1] == "ts" and error["msg"].startswith("not a real RFC 3339 instant")
