"""The report's process-versus-outcome section, from :meth:`procgrade.engine.analysis.comparison.Comparison.to_dict`:
the per-group table (process score, pass@1 and plan pass rate with their intervals, both ranks), the
rank agreement (Kendall tau-b and Spearman rho with their bootstrap intervals), the rank flips with
the rules that drive them, and three charts: process score against pass@1, the rank bump chart,
and pass@1 with its interval per group."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

from procgrade.engine.reporting.charts import BumpRow, IntervalRow, Point, bump_chart, interval_chart, scatter_chart
from procgrade.engine.reporting.markup import NOT_AVAILABLE, esc, fmt_num, fmt_pct

__all__ = ["comparison_section"]

Plain = Mapping[str, Any]


def _exact(value: Plain | None) -> Fraction | None:
    """An exact rational of the comparison (``{"exact": "num/den", "display": ...}``)."""
    return None if value is None else Fraction(value["exact"])


def _shown(value: Plain | None) -> str:
    return "-" if value is None else str(value["display"])


def _summary(row: Plain) -> Plain | None:
    return (row.get("outcome") or {}).get("summary")


def _interval_text(interval: Plain | None) -> str:
    return "-" if interval is None else str(interval["display"])


def _clipped(value: float | None) -> float | None:
    return None if value is None else min(1.0, max(0.0, value))


def _figure(svg: str, caption: str, chart_id: str) -> str:
    if not svg:
        return f'<p class="not-available" id="{chart_id}">{esc(caption)} {NOT_AVAILABLE}: nothing to plot.</p>'
    return f'<figure class="chart-figure" id="{chart_id}">{svg}<figcaption>{esc(caption)}</figcaption></figure>'


def _group_table(rows: Sequence[Plain], by: str) -> str:
    body = []
    for row in rows:
        process = row["process"]
        summary = _summary(row)
        p1 = summary and summary.get("pass_at_1")
        plan = summary and summary.get("plan_pass_rate")
        note = (row.get("outcome") or {}).get("note") or (summary or {}).get("interval_note")
        score_title = f' title="{esc(process["score"]["exact"])}"' if process.get("score") else ""
        body.append(
            f'<tr data-group="{esc(row["group"])}"><td>{esc(row["group"])}</td>'
            f'<td class="num">{esc(row["runs"])}</td>'
            f'<td class="num process-score"{score_title}>{esc(_shown(process.get("score")))}</td>'
            f'<td class="num pass-at-1">{esc(fmt_pct(_exact(p1)))}</td>'
            f'<td class="num">{esc(_interval_text(summary and summary.get("pass_at_1_interval")))}</td>'
            f'<td class="num plan-pass">{esc(fmt_pct(_exact(plan)))}</td>'
            f'<td class="num">{esc(_interval_text(summary and summary.get("plan_pass_interval")))}</td>'
            f'<td class="num process-rank">{esc(fmt_num(process.get("rank"), 1))}</td>'
            f'<td class="num outcome-rank">{esc(fmt_num(row.get("outcome_rank"), 1))}</td>'
            f'<td class="note">{esc(note or "")}</td></tr>')
    return (f'<table class="groups"><thead><tr><th>{esc(by)}</th><th class="num">runs</th>'
            '<th class="num">process score</th><th class="num">pass@1 %</th><th class="num">pass@1 95% interval</th>'
            '<th class="num">plan pass %</th><th class="num">plan pass 95% interval</th>'
            '<th class="num">process rank</th><th class="num">outcome rank</th><th>note</th></tr></thead><tbody>'
            + "".join(body) + "</tbody></table>")


def _bracket(low: Any, high: Any) -> str:
    """A correlation interval as ``[-1.000, 0.554]`` (a dash between signed numbers misreads), or why none."""
    if low is None or high is None:
        return "none"
    return f"[{fmt_num(low, 3)}, {fmt_num(high, 3)}]"


def _agreement(data: Plain) -> str:
    block = data.get("rank_agreement") or {}
    result = block.get("result")
    note = f'<p class="note">{esc(block.get("note"))}</p>' if block.get("note") else ""
    if result is None:
        return f'<p class="not-available">Rank agreement {NOT_AVAILABLE}.</p>{note}'
    rows = []
    for name, label in (("kendall_tau_b", "Kendall tau-b"), ("spearman", "Spearman rho")):
        entry = result.get(name) or {}
        rows.append(f'<tr data-statistic="{name}"><td>{label}</td>'
                    f'<td class="num">{esc(fmt_num(entry.get("statistic"), 3))}</td>'
                    f'<td class="num">{esc(_bracket(entry.get("low"), entry.get("high")))}</td>'
                    f'<td class="num">{esc(fmt_num(entry.get("pvalue"), 3))}</td></tr>')
    return (f'<table class="correlations"><thead><tr><th>process rank vs {esc(data.get("outcome_metric"))} rank</th>'
            '<th class="num">value</th>'
            f'<th class="num">{esc(fmt_pct(block.get("confidence"), 0))}% bootstrap interval</th>'
            '<th class="num">p</th></tr></thead><tbody>' + "".join(rows) + "</tbody></table>"
            + note + "".join(f'<p class="note">{esc(n)}</p>' for n in result.get("notes") or ())
            + f'<p class="note">{esc(block.get("n_resamples"))} resamples over {esc(block.get("over"))}, '
            f'seed {esc(block.get("seed"))}.</p>')


def _flips(data: Plain) -> str:
    flips = data.get("flips") or []
    if not flips:
        return '<p class="note">No rank flips: the process score and pass@1 order every pair of groups alike.</p>'
    rows = []
    for flip in flips:
        rules = "; ".join(f"{r['rule']} ({_shown(r['ahead']) if r['ahead'] else 'not applied'} vs "
                          f"{_shown(r['behind'])})" for r in flip["rules"]) or "-"
        rows.append(f'<tr class="flip"><td>{esc(flip["process_ahead"])}</td><td>{esc(flip["outcome_ahead"])}</td>'
                    f'<td class="num">{esc(_shown(flip["process"][0]))} vs {esc(_shown(flip["process"][1]))}</td>'
                    f'<td class="num">{esc(fmt_pct(_exact(flip["outcome"][0])))} vs '
                    f'{esc(fmt_pct(_exact(flip["outcome"][1])))}</td><td>{esc(rules)}</td></tr>')
    return ('<table class="flips"><thead><tr><th>ahead on process</th><th>ahead on outcome</th>'
            '<th class="num">process scores</th><th class="num">pass@1 %</th>'
            '<th>rules behind the process lead (mean score ahead vs behind)</th></tr></thead><tbody>'
            + "".join(rows) + "</tbody></table>")


def _charts(rows: Sequence[Plain]) -> str:
    points, bumps, intervals = [], [], []
    for row in rows:
        summary = _summary(row)
        process = _exact(row["process"].get("score"))
        p1 = _exact(summary.get("pass_at_1")) if summary else None
        interval = summary.get("pass_at_1_interval") if summary else None
        low = _clipped(interval["low"]) if interval else None
        high = _clipped(interval["high"]) if interval else None
        points.append(Point(row["group"], None if process is None else float(process),
                            None if p1 is None else float(p1), low, high))
        bumps.append(BumpRow(row["group"], row["process"].get("rank"), row.get("outcome_rank")))
        if p1 is not None:
            intervals.append(IntervalRow(row["group"], float(p1), low, high, _interval_text(interval)
                                         if interval else fmt_pct(p1)))
    return (
        _figure(scatter_chart(points, title="Process score against pass@1", x_label="process score",
                              y_label="pass@1"),
                "Process score (x) against pass@1 (y), one point per group, with the pass@1 95% interval.",
                "chart-scatter")
        + _figure(bump_chart(bumps, title="Process rank and outcome rank", left_label="process rank",
                             right_label="pass@1 rank"),
                  "Each group's rank by process score (left) and by pass@1 (right), 1 = best; crossing lines are "
                  "rank flips.", "chart-bump")
        + _figure(interval_chart(intervals, title="pass@1 with its 95% interval", axis_label="pass@1"),
                  "pass@1 per group with its 95% interval (ViBench 2.0: t over products, Clopper-Pearson near 0 "
                  "and 100%).", "chart-pass-intervals"))


def comparison_section(data: Plain | None, note: str | None, *, by: str) -> tuple[str, str]:
    """The section's HTML and a few words for the report's summary line."""
    if data is None:
        return (f'<p class="not-available">Comparison {NOT_AVAILABLE}: {esc(note or "no data")}.</p>',
                f"comparison {NOT_AVAILABLE}")
    rows = list(data.get("groups") or [])
    excluded = "".join(f"<li>{esc(e['group'])}: {esc(e['reason'])}</li>" for e in data.get("excluded") or [])
    ruleset = data.get("ruleset") or {}
    intro = (f'<p>Groups by <strong>{esc(data.get("by"))}</strong>; process score under rule set '
             f'{esc(ruleset.get("name") or "-")} (mean of the runs\' scores); outcome ranking by '
             f'{esc(data.get("outcome_metric"))}.</p>')
    html = (intro + _group_table(rows, by)
            + (f'<details><summary>Groups not ranked ({len(data.get("excluded") or [])})</summary><ul>{excluded}</ul>'
               "</details>" if excluded else "")
            + f"<h3>Rank agreement</h3>{_agreement(data)}<h3>Rank flips</h3>{_flips(data)}"
            + f"<h3>Charts</h3>{_charts(rows)}")
    ranked = len(data.get("ranked") or [])
    return html, f"{len(rows)} groups compared ({ranked} ranked, {len(data.get('flips') or [])} rank flips)"
