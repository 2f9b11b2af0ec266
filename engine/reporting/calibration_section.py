"""The report's calibration section, from :meth:`procgrade.engine.analysis.calibration.Calibration.to_dict`.

Per layer: each candidate's agreement with the reference, over all runs and per group (agreement
with its Clopper-Pearson interval, Cohen's kappa with its interval, Krippendorff's alpha, and for
binary layers the wrong-pass and wrong-fail rates), or its rank correlation where rules meet an
ordinal layer; the agreement matrix among every grader of the layer; the rank correlation of
the groups' mean grades; and Bradley-Terry ratings of the groups per grader. One chart shows
every agreement with its interval.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from procgrade.engine.reporting.charts import IntervalRow, interval_chart
from procgrade.engine.reporting.markup import NOT_AVAILABLE, esc, fmt_interval, fmt_num, fmt_pct, fmt_pct_interval

__all__ = ["calibration_section"]

Plain = Mapping[str, Any]


def _group(value: Any) -> str:
    return "all" if value is None else str(value)


def _proportion(entry: Plain | None) -> tuple[str, str]:
    if not entry or entry.get("estimate") is None:
        return "-", "-"
    return fmt_pct(entry["estimate"]), fmt_pct_interval(entry.get("low"), entry.get("high"))


def _stat(entry: Plain | None, key: str = "value") -> tuple[str, str]:
    if not entry or entry.get(key) is None:
        return "-", "-"
    return fmt_num(entry[key], 3), fmt_interval(entry.get("low"), entry.get("high"), 3)


def _comparison_agreement(comparison: Plain) -> Plain | None:
    """The agreement part of a comparison: its binary or its ordinal result."""
    return comparison.get("binary") or comparison.get("ordinal")


def _notes(notes: Sequence[str] | None) -> str:
    return "".join(f'<p class="note">{esc(n)}</p>' for n in notes or ())


def _comparisons_table(layer: Plain, reference: str) -> str:
    rows = []
    for c in layer.get("comparisons") or ():
        attrs = (f'data-layer="{esc(layer["layer"])}" data-candidate="{esc(c["candidate"])}" '
                 f'data-group="{esc(_group(c.get("group")))}"')
        head = (f"<td>{esc(c['candidate'])}</td><td>{esc(_group(c.get('group')))}</td><td>{esc(c.get('level'))}</td>"
                f'<td class="num">{esc(fmt_num(c.get("n"), 0))}</td>')
        found = _comparison_agreement(c)
        rank = c.get("rank")
        if found is not None:
            agree, agree_ci = _proportion(found.get("agreement"))
            kappa, kappa_ci = _stat(found.get("kappa"))
            alpha = fmt_num((c.get("alpha") or {}).get("value"), 3)
            wrong_pass, _ = _proportion(found.get("wrong_pass"))
            wrong_fail, _ = _proportion(found.get("wrong_fail"))
            cells = (f'<td class="num agreement">{esc(agree)}</td><td class="num">{esc(agree_ci)}</td>'
                     f'<td class="num kappa">{esc(kappa)}</td><td class="num">{esc(kappa_ci)}</td>'
                     f'<td class="num">{esc(alpha)}</td><td class="num">{esc(wrong_pass)}</td>'
                     f'<td class="num">{esc(wrong_fail)}</td>')
        elif rank is not None:
            tau, tau_ci = _stat(rank.get("kendall_tau_b"), "statistic")
            cells = (f'<td colspan="4">rank correlation: Kendall tau-b {esc(tau)} ({esc(tau_ci)}), Spearman '
                     f'{esc(_stat(rank.get("spearman"), "statistic")[0])}</td><td class="num">-</td>'
                     '<td class="num">-</td><td class="num">-</td>')
        else:
            cells = f'<td colspan="7">{esc("; ".join(c.get("notes") or ()) or NOT_AVAILABLE)}</td>'
        rows.append(f"<tr {attrs}>{head}{cells}</tr>")
    if not rows:
        return f'<p class="not-available">No candidate comparisons on this layer: {NOT_AVAILABLE}.</p>'
    return (f'<table class="agreement"><thead><tr><th>candidate (vs {esc(reference)})</th><th>group</th><th>level</th>'
            '<th class="num">items</th><th class="num">agreement %</th><th class="num">95% CI (Clopper-Pearson)</th>'
            '<th class="num">kappa</th><th class="num">95% CI</th><th class="num">alpha</th>'
            '<th class="num">wrong-pass %</th><th class="num">wrong-fail %</th></tr></thead><tbody>'
            + "".join(rows) + "</tbody></table>")


def _matrix_table(layer: Plain) -> str:
    matrix = layer.get("matrix")
    if not matrix or not matrix.get("pairs"):
        return ""
    rows = []
    for pair in matrix["pairs"]:
        agree, agree_ci = _proportion(pair.get("agreement"))
        kappa, _ = _stat(pair.get("kappa"))
        rows.append(f"<tr><td>{esc(pair['first'])}</td><td>{esc(pair['second'])}</td>"
                    f'<td class="num">{esc(fmt_num(pair.get("n"), 0))}</td><td class="num">{esc(agree)}</td>'
                    f'<td class="num">{esc(agree_ci)}</td><td class="num">{esc(kappa)}</td></tr>')
    return ("<h4>Agreement among graders</h4>"
            '<table class="matrix"><thead><tr><th>grader</th><th>grader</th><th class="num">items</th>'
            '<th class="num">agreement %</th><th class="num">95% CI</th><th class="num">kappa</th></tr></thead>'
            "<tbody>" + "".join(rows) + "</tbody></table>")


def _rankings_table(layer: Plain) -> str:
    rows = []
    for ranking in layer.get("rankings") or ():
        result = ranking.get("result")
        if result is None:
            rows.append(f"<tr><td>{esc(ranking['candidate'])}</td><td colspan=\"4\">"
                        f"{esc('; '.join(ranking.get('notes') or ()) or NOT_AVAILABLE)}</td></tr>")
            continue
        tau, tau_ci = _stat(result.get("kendall_tau_b"), "statistic")
        rho, rho_ci = _stat(result.get("spearman"), "statistic")
        rows.append(f"<tr><td>{esc(ranking['candidate'])}</td><td>{esc(ranking.get('resampled') or '-')}</td>"
                    f'<td class="num">{esc(tau)}</td><td class="num">{esc(tau_ci)}</td>'
                    f'<td class="num">{esc(rho)} ({esc(rho_ci)})</td></tr>')
    if not rows:
        return ""
    return ("<h4>Ranking of groups by mean grade (reference vs candidate)</h4>"
            '<table class="rankings"><thead><tr><th>candidate</th><th>bootstrap resamples</th>'
            '<th class="num">Kendall tau-b</th><th class="num">95% CI</th><th class="num">Spearman (95% CI)</th>'
            "</tr></thead><tbody>" + "".join(rows) + "</tbody></table>")


def _ratings_table(layer: Plain) -> str:
    rows = []
    for ratings in layer.get("ratings") or ():
        result = ratings.get("result")
        if result is None:
            rows.append(f"<tr><td>{esc(ratings['grader'])}</td><td colspan=\"4\">"
                        f"{esc('; '.join(ratings.get('notes') or ()) or NOT_AVAILABLE)}</td></tr>")
            continue
        for rating in result.get("ratings") or ():
            rows.append(f"<tr><td>{esc(ratings['grader'])}</td><td>{esc(rating['player'])}</td>"
                        f'<td class="num">{esc(fmt_num(rating.get("rating"), 1))}</td>'
                        f'<td class="num">{esc(fmt_interval(rating.get("low"), rating.get("high"), 1))}</td>'
                        f'<td class="num">{esc(fmt_num(rating.get("games"), 0))}</td></tr>')
    if not rows:
        return ""
    return ("<h4>Bradley-Terry ratings of the groups</h4>"
            '<table class="ratings"><thead><tr><th>grader</th><th>group</th><th class="num">rating</th>'
            '<th class="num">95% CI</th><th class="num">games</th></tr></thead><tbody>' + "".join(rows)
            + "</tbody></table>")


def _chart(layers: Sequence[Plain], reference: str) -> str:
    rows = []
    for layer in layers:
        for c in layer.get("comparisons") or ():
            found = _comparison_agreement(c)
            entry = (found or {}).get("agreement") or {}
            if entry.get("estimate") is None:
                continue
            label = f"{c['candidate']} \u00b7 {layer['layer']} \u00b7 {_group(c.get('group'))}"
            text = f"{fmt_pct(entry['estimate'])} ({fmt_pct_interval(entry.get('low'), entry.get('high'))})"
            rows.append(IntervalRow(label, entry["estimate"], entry.get("low"), entry.get("high"), text))
    svg = interval_chart(rows, title=f"Agreement with {reference}", axis_label=f"agreement with {reference}")
    if not svg:
        return (f'<p class="not-available" id="chart-agreement">Agreement chart: {NOT_AVAILABLE} '
                "(no agreement to plot).</p>")
    return (f'<figure class="chart-figure" id="chart-agreement">{svg}<figcaption>Agreement of each candidate with '
            f"{esc(reference)} (candidate \u00b7 layer \u00b7 group) with its Clopper-Pearson 95% interval."
            "</figcaption></figure>")


def calibration_section(data: Plain | None, note: str | None, *, reference: str) -> tuple[str, str]:
    """The section's HTML and a few words for the report's summary line."""
    if data is None:
        return (f'<p class="not-available">Calibration {NOT_AVAILABLE}: {esc(note or "no data")}.</p>',
                f"calibration {NOT_AVAILABLE}")
    layers = list(data.get("layers") or ())
    intro = (f'<p>Reference <strong>{esc(data.get("reference"))}</strong>; candidates '
             f'{esc(", ".join(data.get("candidates") or ()))}; {esc(fmt_num(data.get("runs"), 0))} runs; '
             f'groups by {esc(data.get("rank_by"))}; {esc(fmt_num(data.get("bootstrap"), 0))} bootstrap resamples, '
             f'seed {esc(data.get("seed"))}.</p>')
    parts = [intro, _notes(([note] if note else []) + list(data.get("notes") or ())), _chart(layers, reference)]
    for layer in layers:
        parts.append(f'<div class="layer" data-layer="{esc(layer["layer"])}"><h3>Layer {esc(layer["layer"])} '
                     f'({esc(layer.get("scale"))}, {esc(fmt_num(layer.get("reference_items"), 0))} items graded by '
                     f"{esc(reference)})</h3>{_comparisons_table(layer, reference)}{_notes(layer.get('notes'))}"
                     f"{_matrix_table(layer)}{_rankings_table(layer)}{_ratings_table(layer)}</div>")
    comparisons = sum(len(layer.get("comparisons") or ()) for layer in layers)
    return "".join(parts), f"calibration of {comparisons} comparisons on {len(layers)} layers"
