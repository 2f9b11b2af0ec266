"""Escaping and number formatting shared by the report's pages and charts.

Everything that reaches the page passes through :func:`esc` (text and attribute values) or one
of the formatters here, so text from logs (run ids, messages, commands, model names) never
becomes markup, and the same data always gives the same bytes (fixed decimals, no locale).
"""

from __future__ import annotations

import hashlib
import html
import math
import re
from fractions import Fraction
from typing import Any

from procgrade.engine.analysis.outcome_metrics import format_percent
from procgrade.engine.scoring import display

__all__ = ["NOT_AVAILABLE", "anchor", "esc", "fmt_interval", "fmt_num", "fmt_pct", "fmt_pct_interval", "run_label",
           "short_run_id"]

NOT_AVAILABLE = "not available"
_DASH = "\u2013"


def esc(value: Any) -> str:
    """``value`` as HTML text, safe inside elements and quoted attribute values."""
    return html.escape("" if value is None else str(value), quote=True)


def _finite(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, dict) and set(value) == {"num", "den"}:  # an exact rational of a score document
        value = Fraction(int(value["num"]), int(value["den"]))
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def fmt_num(value: Any, digits: int = 3) -> str:
    """A number with ``digits`` decimals (``-`` when missing); exact rationals are rounded here only,
    half-even like :func:`procgrade.engine.scoring.display`."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, Fraction):
        return display(value, digits)  # exact, rounded half-even: as score documents display it
    number = _finite(value)
    if number is None:
        return "-"
    text = f"{number:.{digits}f}"
    return "0." + "0" * digits if text == "-0." + "0" * digits else text


def fmt_pct(value: Any, digits: int = 1) -> str:
    """A proportion (0..1) as a percentage with ``digits`` decimals, without the sign (``-`` when missing)."""
    if isinstance(value, Fraction):
        return format_percent(value, digits)
    number = _finite(value)
    # Rounded as the CLI and the interval columns round (half up, on the exact value), so a
    # point and its interval never disagree in the last digit.
    return "-" if number is None else format_percent(number, digits)


def fmt_interval(low: Any, high: Any, digits: int = 3) -> str:
    if _finite(low) is None or _finite(high) is None:
        return "-"
    return f"{fmt_num(low, digits)}{_DASH}{fmt_num(high, digits)}"


def fmt_pct_interval(low: Any, high: Any, digits: int = 1) -> str:
    if _finite(low) is None or _finite(high) is None:
        return "-"
    return f"{fmt_pct(low, digits)}{_DASH}{fmt_pct(high, digits)}"


def anchor(prefix: str, key: str) -> str:
    """A stable fragment id for ``key`` (e.g. a run id from a log): a readable slug plus a short
    digest, so distinct keys never share an id and the id needs no URL escaping."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", key).strip("-")[:60] or "x"
    digest = hashlib.sha256(key.encode("utf-8")).hexdigest()[:8]
    return f"{prefix}-{slug}-{digest}"


_HASHLIKE = re.compile(r"^[0-9a-fA-F-]{16,}$")


def short_run_id(run_id: str, limit: int = 30) -> str:
    """A run id short enough for a table cell (the full id goes in a tooltip): the last path segment, or,
    when that is an opaque id (hex or a UUID), the segment before it and the id's first 8 characters;
    each part clipped with an ellipsis."""
    if len(run_id) <= limit:
        return run_id
    parts = [p for p in run_id.split("/") if p]
    if not parts:
        return run_id[: limit - 1] + "\u2026"
    last = parts[-1]
    if _HASHLIKE.match(last) and len(parts) > 1:
        head = parts[-2]
        room = limit - 10
        head = head if len(head) <= room else head[: room - 1] + "\u2026"
        return f"{head}/{last[:8]}"
    return last if len(last) <= limit else last[: limit - 1] + "\u2026"


def run_label(run_id: str, href: str | None = None) -> str:
    """A run id as a short ``<code>`` with the full id on hover (linked to ``href`` when given)."""
    inner = f'<code title="{esc(run_id)}">{esc(short_run_id(run_id))}</code>'
    return f'<a href="{esc(href)}">{inner}</a>' if href else inner
