"""Which runs have a process grade to rank, and why the others are left out.

A run enters process rankings, rank agreement, rule-outcome association and calibration of ``rules``
only when the rule set judged some decision of its model: its score document has a process score
(``process_score`` is null when no rule had a judged activation; such a run is *not graded: no model
decisions*, never 1). ``--min-coverage`` raises the bar: a run whose share of applicable rules
(``coverage.rules_applicable / coverage.rules``) is below the threshold is left out too. Every run left
out is listed with its reason; nothing is dropped silently.

The threshold is parsed exactly (``0.5``, ``1/2``, ``50%``), never as a float.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction

from procgrade.engine.analysis.dataset import NOT_GRADED, Coverage, RunView

__all__ = ["LeftOut", "Selection", "coverage_text", "parse_min_coverage", "select_graded"]


@dataclass(frozen=True)
class LeftOut:
    """A run left out of process analyses, and why."""

    run_id: str
    reason: str
    #: The run's coverage, when it was scored.
    coverage: Coverage | None = None

    @property
    def coverage_text(self) -> str:
        """``applicable/rules`` (e.g. ``0/11``), or ``-``."""
        c = self.coverage
        return "-" if c is None else f"{c.rules_applicable}/{c.rules}"


@dataclass(frozen=True)
class Selection:
    graded: tuple[RunView, ...]
    left_out: tuple[LeftOut, ...]
    min_coverage: Fraction | None

    @property
    def graded_ids(self) -> frozenset[str]:
        return frozenset(r.run_id for r in self.graded)

    def reason(self, run_id: str) -> str | None:
        for entry in self.left_out:
            if entry.run_id == run_id:
                return entry.reason
        return None


def parse_min_coverage(text: str | Fraction | None) -> Fraction | None:
    """``0.5``, ``1/2`` or ``50%`` as an exact fraction in [0, 1]; ValueError otherwise (None stays None)."""
    if text is None or isinstance(text, Fraction):
        value = text
    else:
        raw = str(text).strip()
        try:
            value = Fraction(raw[:-1].strip()) / 100 if raw.endswith("%") else Fraction(raw)
        except (ValueError, ZeroDivisionError):
            raise ValueError(f"--min-coverage must be a fraction such as 0.5, 1/2 or 50%, not {text!r}") from None
    if value is not None and not 0 <= value <= 1:
        raise ValueError(f"--min-coverage must be between 0 and 1, not {text}")
    return value


def coverage_text(value: Fraction | None) -> str:
    return "-" if value is None else f"{value.numerator}/{value.denominator}"


def select_graded(runs: Iterable[RunView], min_coverage: Fraction | None = None) -> Selection:
    """The runs with a process score (and, with ``min_coverage``, at least that share of applicable
    rules), in the given order, and every other run with the reason it is left out."""
    graded, left_out = [], []
    for run in runs:
        process = run.process
        if process is None:
            left_out.append(LeftOut(run.run_id, "not scored (no rule set)"))
            continue
        cov = process.coverage
        if process.total is None:
            left_out.append(LeftOut(run.run_id, NOT_GRADED, cov))
        elif min_coverage is not None and cov is not None and cov.fraction < min_coverage:
            left_out.append(LeftOut(run.run_id, f"coverage {cov.rules_applicable}/{cov.rules} rules applicable, "
                                                f"below --min-coverage {coverage_text(min_coverage)}", cov))
        else:
            graded.append(run)
    return Selection(tuple(graded), tuple(left_out), min_coverage)
