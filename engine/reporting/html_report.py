"""``procgrade report --html FILE``: one self-contained static page.

The page holds the runs table, the process-versus-outcome comparison (tables and charts), the
calibration of automated grades against the reference grader (tables and a chart), and one
section per run with its timeline and the rule violations marked on the events they cite. It
loads nothing: styles are inline, charts are inline SVG, there is no script, and a
Content-Security-Policy forbids every fetch, so it opens the same from a file, a mail
attachment or an artifact store. The bytes depend only on the data (and on ``generated``, when
a caller passes a time to print): the same store and rule set give the same page.

The comparison and the calibration come from :mod:`procgrade.engine.analysis.comparison` and
:mod:`procgrade.engine.analysis.calibration`; when either is not installed, or the data cannot support
it (no verdicts, no shared grades), its section says so and the rest of the page is unchanged.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from procgrade.engine.analysis.dataset import GROUPING_FIELDS, NOT_GRADED, RunView, group_key, load_runs
from procgrade.engine.analysis.graded_runs import Selection, select_graded
from procgrade.engine.errors import ProcgradeError
from procgrade.engine.reporting.calibration_section import calibration_section
from procgrade.engine.reporting.comparison_section import comparison_section
from procgrade.engine.reporting.charts import RunPoint, jitter, run_scatter
from procgrade.engine.reporting.headline import headline_section
from procgrade.engine.reporting.markup import NOT_AVAILABLE, esc, fmt_num, run_label
from procgrade.engine.reporting.rules_section import rules_section, suppressed_notes
from procgrade.engine.reporting.run_pages import (first_events, run_anchor, run_infos, run_page, run_sections,
                                                   stored_stream_of)
from procgrade.engine.store import EventStore
from procgrade.engine.version import __version__ as ENGINE_VERSION
from procgrade.rules.identity import ruleset_hash
from procgrade.rules.loading import load_ruleset
from procgrade.rules.model import RuleSet

__all__ = ["Report", "ReportError", "build_report", "render_report", "write_report"]

_CSP = ("default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'")

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0 auto;max-width:1200px;padding:0 20px 60px;color:#222;line-height:1.4}
h1{margin:24px 0 4px}
h2{margin-top:40px;border-bottom:2px solid #ddd;padding-bottom:4px}
h3{margin-top:32px}
code{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:92%;word-break:break-all}
table{border-collapse:collapse;margin:8px 0 16px;font-size:14px}
th,td{border-bottom:1px solid #e3e3e3;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f6f6f6;font-weight:600}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
nav a{margin-right:14px}
.meta{color:#555;font-size:14px}
.meta dt{float:left;clear:left;width:200px;color:#777}
.meta dd{word-break:break-all}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px;font-size:14px}
dl.facts dt{color:#777}
dl.facts dd{margin:0;word-break:break-all}
.not-available{white-space:pre-wrap;color:#8a6d3b;background:#fcf8e3;padding:6px 10px;border-left:4px solid #e6c66b}
.note{color:#555;font-size:13px}
figure.chart-figure{display:inline-block;margin:8px 24px 16px 0;vertical-align:top;max-width:100%}
figure.chart-figure svg{max-width:100%;height:auto}
figure.chart-figure figcaption{font-size:13px;color:#555;max-width:560px}
svg.chart text{font-family:inherit}
svg.chart .axis-label{fill:#444;font-weight:600}
table.timeline td.what{word-break:break-word}
tr.cited{background:#fdecea}
tr.cited td:first-child{border-left:4px solid #c0392b}
tr:target{outline:2px solid #0072B2}
.finding-tag{display:inline-block;background:#c0392b;color:#fff;border-radius:3px;padding:0 5px;margin-left:8px;font-size:11px;font-family:ui-monospace,monospace}
ol.findings li{margin:2px 0}
.no-violations{color:#2e7d32}
tr.has-violation td{color:#c0392b}
tr.flip td{background:#fff8e1}
dl.headline{display:grid;grid-template-columns:repeat(auto-fill,minmax(260px,1fr));gap:10px;margin:12px 0}
dl.headline .fact{background:#f4f8fb;border-left:4px solid #0072B2;padding:6px 10px}
dl.headline dt{color:#555;font-size:13px}
dl.headline dd{margin:2px 0 0;font-size:17px;font-weight:600}
dl.headline dd.detail{font-size:13px;font-weight:400;color:#333}
dl.headline dd.detail code{white-space:nowrap}
details.suppressed{font-size:13px;color:#555;margin:8px 0}
td.suppressed{color:#8a6d3b;font-size:13px}
td.not-graded{color:#8a6d3b;font-style:italic}
td.never-applied{color:#aaa}
tr.pooled td{font-weight:600;border-top:2px solid #ddd}
ul.run-list{columns:3;font-size:13px}
table.association code,table.applicability code{word-break:normal;white-space:nowrap}
div.wide-table{overflow-x:auto;max-width:100%}
table.applicability td:first-child,table.applicability th:first-child{position:sticky;left:0;background:#fff}
table.applicability th:first-child{background:#f6f6f6}
"""


class ReportError(ProcgradeError, ValueError):
    """The report cannot be made as asked (e.g. an unknown grouping field)."""


@dataclass(frozen=True)
class Report:
    """The page and a one-line summary of what it shows."""

    html: str
    summary: str


def _analysis(module: str, function: str) -> Callable[..., Any] | str:
    """The analysis function, or why it is not available (its module is not installed)."""
    try:
        return getattr(importlib.import_module(module), function)
    except ModuleNotFoundError as exc:
        if exc.name == module:
            return f"{module} is not installed"
        return f"{module} needs {exc.name}: install the analysis extra (pip install 'procgrade[analysis]')"
    except ImportError as exc:
        return f"{module} cannot be imported: {exc}"
    except AttributeError:
        return f"{module} has no {function}()"


def _has_grades(views: Sequence[RunView], grader: str) -> bool:
    """Whether ``grader`` has labels to calibrate: ``rules`` always (they come from the process
    score); ``human``/``judge`` any grade by that class of actors; another name, a grade by
    that actor or from that sheet (the selection :mod:`procgrade.engine.analysis.calibration` makes)."""
    if grader == "rules":
        return True
    for view in views:
        for grade in view.grades:
            if grader in ("human", "judge"):
                if grade.actor == grader or grade.actor.startswith(grader + ":"):
                    return True
            elif grader in (grade.actor, grade.sheet):
                return True
    return False


def _runs_table(views: Sequence[RunView], by: str, identity: Any = None) -> str:
    rows = []
    for view in views:
        process = view.process
        violations = "-" if process is None or process.total is None else str(sum(process.violations.values()))
        coverage = process.coverage if process is not None else None
        cov = "-" if coverage is None else f"{coverage.rules_applicable}/{coverage.rules}"
        if process is None or process.total is None:
            score = f'<td class="num process-score not-graded" title="{esc(NOT_GRADED)}">not graded</td>'
        else:
            score = (f'<td class="num process-score" title="{esc(process.total.numerator)}/'
                     f'{esc(process.total.denominator)}">{esc(fmt_num(process.total, 4))}</td>')
        rows.append(f'<tr data-run-id="{esc(view.run_id)}"><td>{run_label(view.run_id, "#" + run_anchor(view.run_id))}'
                    f"</td><td>{esc(group_key(view, by, identity) or '-')}</td>"
                    f"<td>{esc(view.task_id or '-')}</td>{score}"
                    f'<td class="num coverage">{esc(cov)}</td>'
                    f'<td class="outcome">{esc(view.outcome or "-")}</td>'
                    f'<td class="num">{violations}</td><td class="num">{view.event_count}</td></tr>')
    return (f'<table class="runs"><thead><tr><th>run</th><th>{esc(by)}</th><th>task</th>'
            '<th class="num">process score</th><th class="num" title="rules applicable / rules">coverage</th>'
            '<th>outcome</th><th class="num">violations</th>'
            '<th class="num">events</th></tr></thead><tbody>' + "".join(rows) + "</tbody></table>"
            '<p class="note">Hover a run for its full id; coverage is rules that judged something in the run / rules '
            "in the set.</p>")


def _not_graded(selection: Selection) -> str:
    if not selection.left_out:
        return '<p class="note">Every run has a process score.</p>'
    by_reason: dict[str, list[str]] = {}
    for entry in selection.left_out:
        by_reason.setdefault(entry.reason, []).append(entry.run_id)
    parts = []
    for reason, ids in by_reason.items():
        items = "".join(f"<li>{run_label(i, '#' + run_anchor(i))}</li>" for i in ids)
        parts.append(f'<details class="not-graded" data-reason="{esc(reason)}"><summary>{esc(reason)}: '
                     f"{len(ids)} run(s)</summary><ul class=\"run-list\">{items}</ul></details>")
    return ('<p>These runs are left out of process rankings, rank agreement, the rule-outcome association and the '
            "calibration of rules, and listed here with the reason.</p>" + "".join(parts))


def _association(views: list[RunView], by: str, *, seed: int, resamples: int | None, min_coverage: Any,
                 identity: Any) -> tuple[Any, str | None]:
    associate = _analysis("procgrade.engine.analysis.association", "associate")
    if isinstance(associate, str):
        return None, associate
    extra = {} if resamples is None else {"n_resamples": resamples}
    try:
        return associate(views, by, seed=seed, min_coverage=min_coverage, identity=identity, **extra), None
    except (ProcgradeError, ValueError) as exc:
        return None, str(exc)


def _human_grade(view: RunView) -> tuple[float, int | None, int | None] | None:
    """The human's overall grade of the run (the mean if several), else the mean of its round grades, with the
    scale: (value, scale_min, scale_max)."""
    for layer in ("overall", "round"):
        grades = [g for g in view.grades if g.layer == layer and g.value is not None
                  and (g.actor == "human" or g.actor.startswith("human:"))]
        if grades:
            lows = [g.scale_min for g in grades if g.scale_min is not None]
            highs = [g.scale_max for g in grades if g.scale_max is not None]
            return (sum(g.value for g in grades) / len(grades),  # type: ignore[misc]
                    min(lows) if lows else None, max(highs) if highs else None)
    return None


def _run_scatters(selection: Selection, by: str, identity: Any) -> str:
    from procgrade.engine.analysis.association import resolved

    outcome_points, grade_points = [], []
    grade_values: list[float] = []
    lows: list[int] = []
    highs: list[int] = []
    for view in selection.graded:
        assert view.process is not None and view.process.total is not None
        group = group_key(view, by, identity) or f"(no {by})"
        score = float(view.process.total)
        x = min(1.0, max(0.0, score + jitter("x" + view.run_id, 0.012)))
        result = resolved(view)
        if result is not None:
            label = (f"{view.run_id}: process {fmt_num(view.process.total, 4)}, "
                     f"{'resolved' if result else 'unresolved'} ({group})")
            outcome_points.append(RunPoint(label, group, x, (1.0 if result else 0.0) + jitter(view.run_id, 0.12)))
        human = _human_grade(view)
        if human is not None:
            value, low, high = human
            grade_values.append(value)
            lows += [low] if low is not None else []
            highs += [high] if high is not None else []
            grade_points.append((view.run_id, group, x, value, score))
    figures = []
    svg = run_scatter(outcome_points, title="Process score against outcome, per run", x_label="process score",
                      y_label="outcome", y_domain=(-0.25, 1.25), y_ticks=[(0.0, "unresolved"), (1.0, "resolved")])
    caption = ("One point per graded run with a resolved/unresolved outcome: its process score (x) and its outcome "
               "(y), jittered by a hash of the run id so that overlapping runs separate; hover a point for the run.")
    figures.append(_figure_html(svg, caption, "chart-runs-outcome"))
    if grade_points:
        low = min(lows + [int(min(grade_values))])
        high = max(highs + [int(max(grade_values)) + (1 if max(grade_values) % 1 else 0)])
        if high == low:
            high = low + 1
        span = (high - low) * 0.04
        points = [RunPoint(f"{run}: process {score:.4f}, human grade {value:g} ({group})", group, x,
                           value + jitter("h" + run, span)) for run, group, x, value, score in grade_points]
        svg = run_scatter(points, title="Process score against human grade, per run", x_label="process score",
                          y_label="human grade", y_domain=(low - 2 * span, high + 2 * span),
                          y_ticks=[(float(v), str(v)) for v in range(low, high + 1)])
        figures.append(_figure_html(svg, "One point per graded run a human graded: its process score (x) and the "
                                    "human's overall grade (or the mean of the round grades) (y), jittered.",
                                    "chart-runs-human"))
    else:
        figures.append(f'<p class="not-available" id="chart-runs-human">Process score against human grade '
                       f"{NOT_AVAILABLE}: no graded run has a human overall or round grade.</p>")
    return "".join(figures)


def _figure_html(svg: str, caption: str, chart_id: str) -> str:
    if not svg:
        return f'<p class="not-available" id="{chart_id}">{esc(caption)} {NOT_AVAILABLE}: nothing to plot.</p>'
    return f'<figure class="chart-figure" id="{chart_id}">{svg}<figcaption>{esc(caption)}</figcaption></figure>'


def _comparison(views: list[RunView], by: str, ruleset: RuleSet, *, allow_mixed: bool, seed: int,
                resamples: int | None, min_coverage: Any = None,
                identity: Any = None) -> tuple[dict[str, Any] | None, str | None]:
    """:func:`procgrade.engine.analysis.comparison.compare`'s plain data, or why there is none."""
    compare = _analysis("procgrade.engine.analysis.comparison", "compare")
    if isinstance(compare, str):
        return None, compare
    extra = {} if resamples is None else {"n_resamples": resamples}
    try:
        return compare(views, by, allow_mixed=allow_mixed, seed=seed, ruleset=ruleset, min_coverage=min_coverage,
                       identity=identity, **extra).to_dict(), None
    except (ProcgradeError, ValueError) as exc:  # mixed settings, too little data
        return None, str(exc)


def _calibration(views: list[RunView], by: str, reference: str, candidates: Sequence[str], *, seed: int,
                 resamples: int | None, min_coverage: Any = None,
                 identity: Any = None) -> tuple[dict[str, Any] | None, str | None]:
    """:func:`procgrade.engine.analysis.calibration.calibrate`'s plain data over the candidates that graded
    something, or why there is none."""
    calibrate = _analysis("procgrade.engine.analysis.calibration", "calibrate")
    if isinstance(calibrate, str):
        return None, calibrate
    if reference == "rules" or not _has_grades(views, reference):
        return None, f"no grade by {reference} (the reference) is stored"
    graders = [name for name in candidates if _has_grades(views, name)]
    if not graders:
        return None, f"no grade by any candidate ({', '.join(candidates)}) is stored"
    extra = {} if resamples is None else {"bootstrap": resamples}
    try:
        result = calibrate(views, reference, graders, by=by, seed=seed, min_coverage=min_coverage, identity=identity,
                           **extra).to_dict()
    except (ProcgradeError, ValueError) as exc:
        return None, str(exc)
    left_out = [name for name in candidates if name not in graders]
    return result, (f"left out, no grade stored: {', '.join(left_out)}" if left_out else None)


_TABLE_TAG = re.compile(r"<table\b")


def _boxed_tables(body: str) -> str:
    """Every table in a box of the page's width that scrolls sideways on its own: tables grow a column
    per group (the per-rule rates) or wide cells, and the page itself should never scroll sideways.
    Text from logs is escaped, so every ``<table`` tag here is one of the report's own."""
    return _TABLE_TAG.sub(r'<div class="wide-table">\g<0>', body).replace("</table>", "</table></div>")


def _page(title: str, body: str) -> str:
    body = _boxed_tables(body)
    return ("<!DOCTYPE html>\n"
            '<html lang="en"><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{esc(title)}</title><style>{_CSS.strip()}</style></head>"
            f"<body>{body}</body></html>\n")


def render_report(store: EventStore, *, ruleset: RuleSet | None = None, by: str = "model",
                  reference: str = "human", candidates: Sequence[str] = ("judge", "rules"), seed: int = 0,
                  allow_mixed: bool = False, resamples: int | None = None, title: str = "procgrade report",
                  generated: str | None = None, run_pages: bool = True, min_coverage: Any = None,
                  identity: Any = None) -> Report:
    """The report page for every run in ``store`` under ``ruleset`` (default: the built-in set).

    ``by`` is the provenance field runs are grouped by; ``reference`` and ``candidates`` name the
    graders the calibration compares (candidates without any grade are left out, and the page says
    so); ``seed`` fixes the bootstrap intervals and ``resamples`` their size (default: the analyses'
    own); ``allow_mixed`` pools runs whose settings differ within a group (otherwise the comparison
    section names them instead); ``generated`` (any text, e.g. a time) is printed in the header when
    given; ``run_pages=False`` leaves the per-run sections out."""
    if by not in GROUPING_FIELDS and not (by.startswith(("settings.", "labels.")) and by.split(".", 1)[1]):
        raise ReportError(f"unknown grouping field {by!r} (known: {', '.join(GROUPING_FIELDS)}, "
                          "settings.<key>, labels.<key>)")
    ruleset = ruleset if ruleset is not None else load_ruleset()
    views = load_runs(store, ruleset)
    selection = select_graded(views, min_coverage)
    comparison_data, comparison_note = _comparison(views, by, ruleset, allow_mixed=allow_mixed, seed=seed,
                                                   resamples=resamples, min_coverage=min_coverage, identity=identity)
    comparison_html, comparison_summary = comparison_section(comparison_data, comparison_note, by=by)
    association, association_note = _association(views, by, seed=seed, resamples=resamples,
                                                  min_coverage=min_coverage, identity=identity)
    rules_html, rules_summary = rules_section(association, association_note)
    calibration_data, calibration_note = _calibration(views, by, reference, candidates, seed=seed,
                                                      resamples=resamples, min_coverage=min_coverage,
                                                      identity=identity)
    calibration_html, calibration_summary = calibration_section(calibration_data, calibration_note,
                                                                reference=reference)
    groups = sorted({group_key(v, by, identity) for v in selection.graded} - {None})  # type: ignore[type-var]
    tasks = sorted({v.task_id for v in selection.graded if v.task_id})  # type: ignore[type-var]
    headline_html = headline_section(
        runs=len(views), selection=selection, by=by, groups=groups, tasks=tasks, comparison=comparison_data,
        comparison_note=comparison_note, association=association,
        extra_suppressed=(suppressed_notes(association) if association is not None else [])
        + _calibration_suppressed(calibration_data))
    if run_pages:
        pages = _run_pages(store, [view.run_id for view in views], ruleset)
        run_detail = run_sections(pages, {v.run_id: v.outcome for v in views},
                                  {v.run_id: (by, group_key(v, by, identity) or "-") for v in views})
    else:
        run_detail = f'<p class="not-available">Run timelines {NOT_AVAILABLE}: left out on request.</p>'

    meta = [("rule set", f"{ruleset.name} v{ruleset.version}"), ("rule set hash", ruleset_hash(ruleset)),
            ("runs", str(len(views))), ("grouped by", by), ("engine", f"procgrade {ENGINE_VERSION}")]
    if min_coverage is not None:
        meta.append(("min coverage", f"{min_coverage.numerator}/{min_coverage.denominator}"))
    if generated is not None:
        meta.append(("generated", generated))
    body = (
        f'<header><h1>{esc(title)}</h1><dl class="meta">'
        + "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in meta) + "</dl>"
        '<nav><a href="#headline">Headline</a><a href="#comparison">Process vs outcome</a>'
        '<a href="#rules-outcome">Rules and outcome</a><a href="#calibration">Calibration</a>'
        '<a href="#runs">Runs</a><a href="#not-graded">Not graded</a><a href="#run-pages">Run timelines</a></nav>'
        "</header>"
        f'<main><section id="headline"><h2>Headline</h2>{headline_html}</section>'
        f'<section id="comparison"><h2>Process vs outcome</h2>{comparison_html}'
        f"<h3>Per run</h3>{_run_scatters(selection, by, identity)}</section>"
        f'<section id="rules-outcome"><h2>Rules and outcome</h2>{rules_html}</section>'
        f'<section id="calibration"><h2>Calibration</h2>{calibration_html}</section>'
        f'<section id="runs"><h2>Runs</h2>{_runs_table(views, by, identity)}</section>'
        f'<section id="not-graded"><h2>Not graded ({len(selection.left_out)})</h2>{_not_graded(selection)}</section>'
        '<section id="run-pages"><h2>Run timelines</h2>'
        '<p class="note">Rows marked red are events a rule violation cites; the tag names the rule.</p>'
        f"{run_detail}</section></main>"
    )
    violations = sum(sum(v.process.violations.values()) for v in selection.graded if v.process is not None)
    summary = (f"{len(views)} runs ({len(selection.graded)} graded, {len(selection.left_out)} not graded) in "
               f"{len(groups)} groups by {by}, {violations} rule violations; "
               f"{comparison_summary}; {rules_summary}; {calibration_summary}")
    return Report(_page(title, body), summary)


def _run_pages(store: EventStore, run_ids: Sequence[str], ruleset: RuleSet) -> list[Any]:
    """Every run's page, the store read in a few set-based queries (run infos once, first events in
    batches), the rule set hashed and its monitor compiled once, not once per run."""
    from procgrade.rules.monitor import RunMonitor

    digest = ruleset_hash(ruleset)
    monitor = RunMonitor(ruleset)
    infos = run_infos(store)
    pages = []
    for start in range(0, len(run_ids), _PAGES_BATCH):
        batch = run_ids[start:start + _PAGES_BATCH]
        streams = [stream for stream in (stored_stream_of(run_id, infos) for run_id in batch) if stream is not None]
        timelines = first_events(store, streams)
        pages += [run_page(store, run_id, ruleset, digest=digest, infos=infos, timelines=timelines,
                           monitor=monitor)
                  for run_id in batch]
    return pages


#: Runs whose pages are made from one read of their first events (bounds what is held at once).
_PAGES_BATCH = 200


def _calibration_suppressed(data: dict[str, Any] | None) -> list[str]:
    """What the calibration could not compute for want of data (intervals, ratings), as notes."""
    notes: list[str] = []
    for layer in (data or {}).get("layers") or ():
        for ratings in layer.get("ratings") or ():
            for note in ratings.get("notes") or ():
                if note.startswith("no "):
                    notes.append(f"calibration, layer {layer['layer']}, {ratings['grader']}: {note}")
        for ranking in layer.get("rankings") or ():
            for note in list(ranking.get("notes") or ()) + list((ranking.get("result") or {}).get("notes") or ()):
                if note.startswith("no "):
                    notes.append(f"calibration, layer {layer['layer']}, {ranking['candidate']}: {note}")
    return notes


def build_report(store: EventStore, *, ruleset: RuleSet | None = None, by: str = "model",
                 reference: str = "human", candidates: Sequence[str] = ("judge", "rules"), seed: int = 0,
                 **options: Any) -> str:
    """The report page as text (see :func:`render_report` for the arguments)."""
    return render_report(store, ruleset=ruleset, by=by, reference=reference, candidates=candidates, seed=seed,
                         **options).html


def write_report(store: EventStore, path: Path, **options: Any) -> Report:
    """Write the page to ``path`` (UTF-8) and return it with its summary."""
    report = render_report(store, **options)
    path.write_bytes(report.html.encode("utf-8"))
    return report
