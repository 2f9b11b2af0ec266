"""The report's "rules and outcome" section, from :class:`procgrade.engine.analysis.association.Association`: which
rules applied where and how often they flagged a run (per group), which of them predict resolution (violation
rate in resolved vs unresolved runs, odds ratio with its exact interval, pooled with Mantel-Haenszel), and how
well the process score separates resolved from unresolved runs (AUC). Suppressed statistics say why."""

from __future__ import annotations

import math
from typing import Any

from procgrade.engine.reporting.markup import NOT_AVAILABLE, esc, fmt_num

__all__ = ["rules_section", "suppressed_notes"]

ALL = "all"


def _ratio(value: float | None) -> str:
    if value is None:
        return "-"
    if math.isinf(value):
        return "\u221e"
    return f"{value:.2f}"


def _odds(estimate: float | None, low: float | None, high: float | None) -> str:
    if estimate is None:
        return "-"
    return f"{_ratio(estimate)} ({_ratio(low)}\u2013{_ratio(high)})"


def _rate(count: int, total: int) -> str:
    return "-" if total == 0 else f"{count}/{total} ({count * 100 / total:.0f}%)"


def _applicability(result: Any) -> str:
    groups = (ALL, *result.groups)
    head = "".join(f'<th class="num">{esc(g)}</th>' for g in groups)
    rows = []
    for rule in result.rules:
        cells = []
        for group in groups:
            row = result.applicability_of(rule, group)
            title = (f"applied to {row.applied} of {row.graded_runs} graded runs; flagged {row.violated}")
            rate = "-" if not row.applied else f"{row.violated * 100 / row.applied:.0f}%"
            css = "num" + (" never-applied" if not row.applied else "")
            cells.append(f'<td class="{css}" title="{esc(title)}">{esc(rate)} '
                         f'<span class="note">{row.violated}/{row.applied}</span></td>')
        rows.append(f'<tr data-rule="{esc(rule)}"><td><code>{esc(rule)}</code></td>{"".join(cells)}</tr>')
    return ('<table class="applicability"><thead><tr><th>rule: violation rate (flagged / applied)</th>'
            f"{head}</tr></thead><tbody>" + "".join(rows) + "</tbody></table>"
            '<p class="note">A rule <em>applied</em> to a run when it judged something there (fulfilled + violated '
            "&gt; 0); the rate is the share of those runs it flagged. <code>-</code>: the rule applied to no run of "
            "the group.</p>")


def _associations(result: Any) -> str:
    rows = []
    for row in result.associations:
        if row.group != ALL and row.runs == 0:
            continue
        if row.note is None:
            odds = _odds(row.odds_ratio, row.low, row.high)
            verdict = ("violating runs resolve less often" if row.high is not None and row.high < 1 else
                       "violating runs resolve more often" if row.low is not None and row.low > 1 else
                       "interval includes 1")
            stat = (f'<td class="num odds-ratio">{esc(odds)}</td><td class="num">{esc(fmt_num(row.pvalue, 3))}</td>'
                    f'<td class="note">{esc(verdict)}</td>')
        else:
            stat = f'<td colspan="3" class="suppressed">{esc(row.note)}</td>'
        mh = ""
        if row.group == ALL and result.groups:
            mh = (_odds(row.mh_odds_ratio, row.mh_low, row.mh_high) + f" over {row.mh_strata}"
                  if row.mh_odds_ratio is not None and row.mh_note is None else (row.mh_note or "-"))
        css = "pooled" if row.group == ALL else "group"
        rows.append(f'<tr class="{css}" data-rule="{esc(row.rule)}" data-group="{esc(row.group)}">'
                    f"<td><code>{esc(row.rule)}</code></td><td>{esc(row.group)}</td>"
                    f'<td class="num">{row.runs}</td>'
                    f'<td class="num">{esc(_rate(row.violated_resolved, row.violated_resolved + row.clean_resolved))}'
                    "</td>"
                    f'<td class="num">{esc(_rate(row.violated_unresolved, row.violated_unresolved + row.clean_unresolved))}'
                    f"</td>{stat}<td>{esc(mh)}</td></tr>")
    pct = f"{result.confidence:.0%}"
    return ('<table class="association"><thead><tr><th>rule</th><th>group</th><th class="num">runs</th>'
            '<th class="num">violated among resolved</th><th class="num">violated among unresolved</th>'
            f'<th class="num">odds ratio of resolving when violated ({esc(pct)} exact)</th>'
            '<th class="num">Fisher p</th><th>reading</th>'
            f"<th>pooled within {esc(result.by)} (Mantel-Haenszel)</th></tr></thead><tbody>"
            + "".join(rows) + "</tbody></table>"
            '<p class="note">Over the graded runs the rule applied to, with a resolved/unresolved outcome. An odds ratio '
            "below 1 means runs the rule flagged resolved less often: the behaviour it penalises predicts failure. "
            "Conditional maximum-likelihood estimate with its exact (Fisher) interval "
            "(<code>scipy.stats.contingency.odds_ratio</code>); pooled over groups also stratified by group "
            "(Mantel-Haenszel, <code>statsmodels</code>), since groups differ in how often they resolve. Group rows "
            "appear where the rule applied.</p>")


def _discrimination(result: Any) -> str:
    rows = []
    for d in result.discrimination:
        auc = "-" if d.auc is None else (f"{d.auc:.2f}" + ("" if d.low is None else f" ({d.low:.2f}\u2013{d.high:.2f})"))
        rows.append(f'<tr data-group="{esc(d.group)}"><td>{esc(d.group)}</td><td class="num">{d.resolved}</td>'
                    f'<td class="num">{d.unresolved}</td><td class="num">{esc(fmt_num(d.mean_resolved, 4))}</td>'
                    f'<td class="num">{esc(fmt_num(d.mean_unresolved, 4))}</td><td class="num auc">{esc(auc)}</td>'
                    f'<td class="note">{esc(d.note or "")}</td></tr>')
    return ('<table class="discrimination"><thead><tr><th>group</th><th class="num">resolved</th>'
            '<th class="num">unresolved</th><th class="num">mean process score, resolved</th>'
            '<th class="num">mean process score, unresolved</th>'
            f'<th class="num">AUC ({result.confidence:.0%} bootstrap)</th><th>note</th></tr></thead><tbody>'
            + "".join(rows) + "</tbody></table>"
            '<p class="note">AUC: the chance that a resolved run has a higher process score than an unresolved one '
            "(ties half); 0.5 is no signal, below 0.5 the score ranks failing runs higher.</p>")


def suppressed_notes(result: Any) -> list[str]:
    """The statistics this section could not give, grouped by reason."""
    notes = []
    by_reason: dict[str, list[str]] = {}
    for row in result.associations:
        if row.note is not None and row.note != "not applied to a run with an outcome":
            by_reason.setdefault(row.note, []).append(f"{row.rule} ({row.group})")
    never = [rule for rule in result.rules if result.applicability_of(rule).applied == 0]
    if never:
        notes.append(f"rule-outcome odds ratio: {len(never)} rule(s) never applied to a graded run: "
                     + ", ".join(never))
    for reason, where in sorted(by_reason.items()):
        notes.append(f"rule-outcome odds ratio suppressed, {reason}: " + ", ".join(where[:6])
                     + (f" and {len(where) - 6} more" if len(where) > 6 else ""))
    for d in result.discrimination:
        if d.note is not None and (d.resolved or d.unresolved):
            notes.append(f"AUC of {d.group}: {d.note}")
    return notes


def rules_section(result: Any | None, note: str | None) -> tuple[str, str]:
    """The section's HTML and a few words for the report's summary line."""
    if result is None:
        return (f'<p class="not-available">Rule-outcome association {NOT_AVAILABLE}: {esc(note or "no data")}.</p>',
                f"association {NOT_AVAILABLE}")
    intro = (f'<p>{result.graded} graded runs, grouped by <strong>{esc(result.by)}</strong> '
             f"({len(result.without_outcome)} without a resolved/unresolved outcome are left out of the association"
             + (f"; {len(result.ungrouped)} without a {esc(result.by)} count in the pooled rows only"
                if result.ungrouped else "") + ").</p>")
    html = (intro + "<h3>Per-rule violation rates per group</h3>" + _applicability(result)
            + "<h3>Rule-outcome association</h3>" + _associations(result)
            + "<h3>Process score as a predictor of resolution</h3>" + _discrimination(result))
    tested = sum(1 for row in result.associations if row.group == ALL and row.note is None)
    return html, f"{tested} of {len(result.rules)} rules associated with outcome"
