"""The static HTML report (``procgrade report --html FILE``), opened in a real Chromium.

The store holds the harness samples of ``tests/fixtures/imports`` and twelve native runs written
here: three models x two tasks x two runs, each with an acceptance verdict and human and judge
grades on the ``context_preservation`` check, so the comparison and the calibration have numbers.
One model's name and one message carry markup (an ``<img>`` pointing at a remote host): the page
must show them as text and fetch nothing.

The browser is Debian's ``chromium`` (``apt-get install -y chromium``) driven by the ``playwright``
package; no browser is downloaded. Without ``/usr/bin/chromium`` the browser test fails, saying so.
"""

from __future__ import annotations

import json
import re
import sys
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent))

from builders import ev, run_started  # noqa: E402
from databases import fresh_url  # noqa: E402

from procgrade.engine.analysis.dataset import load_runs  # noqa: E402
from procgrade.engine.cli import app  # noqa: E402
from procgrade.engine.ingest import ingest_paths  # noqa: E402
from procgrade.engine.reporting import ReportError, build_report, render_report  # noqa: E402
from procgrade.engine.reporting.charts import BumpRow, IntervalRow, Point, bump_chart, interval_chart, scatter_chart  # noqa: E402
from procgrade.engine.reporting.run_pages import event_anchor, run_anchor  # noqa: E402
from procgrade.engine.scoring import display  # noqa: E402
from procgrade.engine.store import EventStore, open_store  # noqa: E402
from procgrade.rules.loading import load_ruleset  # noqa: E402

IMPORTS = Path(__file__).parent / "fixtures" / "imports"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
INSTALL_HINT = ("the report's browser test needs Debian's Chromium and the playwright package: "
                "`DEBIAN_FRONTEND=noninteractive apt-get install -y chromium` (as root) and "
                "`pip install -e '.[dev]'` (no `playwright install`: the system browser is used)")

HOSTILE_MODEL = 'model-c <i>&"q"</i>'
HOSTILE_TEXT = '<img src="http://example.invalid/x.png" onerror="console.error(\'xss\')">'
MODELS = ("model-a", "model-b", HOSTILE_MODEL)
TASKS = ("blog", "todo")
#: model -> task -> (good process?, reward) for its two runs.
PLAN: dict[str, dict[str, tuple[tuple[bool, str], tuple[bool, str]]]] = {
    "model-a": {"todo": ((True, "1"), (True, "1")), "blog": ((True, "1"), (True, "0"))},
    "model-b": {"todo": ((False, "1"), (False, "1")), "blog": ((False, "1"), (False, "1"))},
    HOSTILE_MODEL: {"todo": ((True, "0"), (False, "0")), "blog": ((True, "1"), (False, "0"))},
}
RESAMPLES = 200  # bootstrap resamples: enough to draw intervals, quick to compute
#: The seq of the edit made without reading the file first, in a run with a bad process.
BAD_EDIT_SEQ = 2


def _run_id(model: str, task: str, index: int) -> str:
    return f"report-{MODELS.index(model)}-{task}-{index}"


def native_run(model: str, task: str, index: int, good: bool, reward: str, judge_flips: bool) -> list[dict[str, Any]]:
    """A short run: with a good process it plans, reproduces with a test, reads, edits and tests again; with a
    bad one it edits ``src/app.py`` at seq 2 before any test (a ``test-before-first-edit`` violation), unread.
    Then its verdict and grades (the human's check and overall grade, the judge's check)."""
    rid = _run_id(model, task, index)
    plan_text = "Plan: reproduce with the tests, read src/app.py, change it, run the tests."
    if model == HOSTILE_MODEL and index == 0:
        plan_text = HOSTILE_TEXT + plan_text
    rows: list[tuple[str, dict[str, Any]]] = []
    if good:
        rows += [("message", {"text": plan_text, "intent": "plan"}),
                 ("test_run", {"command": "pytest -q", "passed": 2, "failed": 1, "exit_code": 1}),
                 ("file_read", {"path": "src/app.py"}),
                 ("file_edit", {"path": "src/app.py", "edit_kind": "modify"})]
    else:
        rows += [("message", {"text": "Changing it right away.", "intent": "progress"}),
                 ("file_edit", {"path": "src/app.py", "edit_kind": "modify"}),
                 ("message", {"text": "done editing", "intent": "progress"})]
    rows += [
        ("test_run", {"command": "pytest -q", "passed": 3, "failed": 0, "exit_code": 0}),
        ("completion_claim", {"claim": "The change is done; tests pass.", "scope": "run"}),
        ("run_ended", {"actor": "harness", "status": "completed"}),
        ("acceptance_verdict", {"actor": "grader", "verifier": "hidden-tests", "status": "evaluated",
                                "reward": reward}),
        ("grade", {"actor": "human", "layer": "check", "item": "context_preservation", "passed": good,
                   "sheet": "report-test"}),
        ("grade", {"actor": "human", "layer": "overall", "value": 4 if good else 2, "scale_min": 1,
                   "scale_max": 5, "sheet": "report-test"}),
        ("grade", {"actor": "judge", "layer": "check", "item": "context_preservation",
                   "passed": (not good) if judge_flips else good, "sheet": "report-test"}),
    ]
    events = [run_started(rid, model=model, task_id=task, harness={"name": "report-test", "version": "1"},
                          model_settings={"temperature": 0})]
    events += [ev(kind, seq, rid, **fields) for seq, (kind, fields) in enumerate(rows, start=1)]
    return events


def write_native_runs(folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for model in MODELS:
        for task in TASKS:
            for index, (good, reward) in enumerate(PLAN[model][task]):
                judge_flips = (model, task, index) == ("model-a", "blog", 1)
                path = folder / f"{_run_id(model, task, index)}.jsonl"
                lines = native_run(model, task, index, good, reward, judge_flips)
                path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
                paths.append(path)
    return paths


def fill_store(store: EventStore, tmp_path: Path, *, imports: bool = True) -> None:
    ingest_paths(store, write_native_runs(tmp_path / "native"), format="native")
    if imports:
        ingest_paths(store, [IMPORTS])


@pytest.fixture(scope="module")
def report_db(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The filled store, shared by the tests of this module (none writes to it)."""
    folder = tmp_path_factory.mktemp("report")
    url = f"sqlite:///{folder / 'report.db'}"
    store = open_store(url, create=True)
    try:
        fill_store(store, folder)
    finally:
        store.close()
    return url


def expected_numbers(url: str) -> dict[str, dict[str, str]]:
    """Per model of the native runs: pass@1 (percent, one decimal) and the process score (4 places),
    computed here from the dataset layer: pass@1 = mean over tasks of the share of passing runs;
    process score = mean of the runs' exact process scores."""
    store = open_store(url)
    try:
        views = load_runs(store, load_ruleset())
    finally:
        store.close()
    out = {}
    for model in MODELS:
        runs = [v for v in views if v.model == model]
        per_task = [Fraction(sum(v.verdict.reward == "1" for v in runs if v.task_id == task),
                             sum(1 for v in runs if v.task_id == task)) for task in TASKS]
        pass_at_1 = sum(per_task, Fraction(0)) / len(per_task)
        process = sum((v.process.total for v in runs), Fraction(0)) / len(runs)
        out[model] = {"pass_at_1": f"{float(pass_at_1) * 100:.1f}", "process": display(process, 4)}
    return out


# ------------------------------------------------------------------------------------------------
# in Chromium


def _browser():
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: {INSTALL_HINT}")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail(f"the playwright package is missing: {INSTALL_HINT}")
    return sync_playwright


_ROWS_JS = """sel => Array.from(document.querySelectorAll(sel)).map(
    tr => Array.from(tr.querySelectorAll('td')).map(td => td.innerText.trim()))"""


def test_report_in_chromium(report_db: str, tmp_path: Path) -> None:
    sync_playwright = _browser()
    page_path = tmp_path / "out" / "report.html"
    page_path.parent.mkdir()
    store = open_store(report_db)
    try:
        report = render_report(store, allow_mixed=True, resamples=RESAMPLES)
    finally:
        store.close()
    page_path.write_text(report.html, encoding="utf-8")
    expected = expected_numbers(report_db)

    console: list[str] = []
    errors: list[str] = []
    requests: list[str] = []
    refused: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.on("console", lambda msg: console.append(f"{msg.type}: {msg.text}"))
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.on("request", lambda request: requests.append(request.url))

            def route(r: Any) -> None:
                if r.request.url.startswith(("file://", "data:")):
                    r.continue_()
                else:
                    refused.append(r.request.url)
                    r.abort()

            page.route("**/*", route)
            page.goto(page_path.as_uri(), wait_until="load")

            assert page.title() == "procgrade report"
            # the comparison table: one row per model, with the numbers computed from the dataset
            rows = {cells[0]: cells for cells in page.evaluate(_ROWS_JS, "table.groups tbody tr")}
            for model in MODELS:
                assert model in rows, f"no comparison row for {model!r}: {sorted(rows)}"
                cells = rows[model]
                assert cells[2] == expected[model]["process"], (model, cells)
                assert cells[3] == expected[model]["pass_at_1"], (model, cells)
            assert rows["model-a"][3] == "75.0" and rows["model-b"][3] == "100.0" and rows[HOSTILE_MODEL][3] == "25.0"
            # model-a leads on process, model-b on pass@1: a rank flip naming test-before-first-edit
            flips = page.evaluate(_ROWS_JS, "table.flips tbody tr")
            assert any(f[0] == "model-a" and f[1] == "model-b" and "test-before-first-edit" in f[4] for f in flips), flips
            # the calibration: rules agree with the human on all 12 runs, the judge on 11
            agreement = page.evaluate("""() => Object.fromEntries(Array.from(document.querySelectorAll(
                'table.agreement tbody tr[data-layer="check"][data-group="all"]')).map(tr => [tr.dataset.candidate,
                tr.querySelector('td.agreement').innerText]))""")
            assert agreement == {"judge": "91.7", "rules": "100.0"}, agreement

            # every chart is drawn, with a mark per model (the harness samples with verdicts add theirs)
            for chart, marks, labelled in (("chart-scatter", "circle.point", True), ("chart-bump", "circle.rank", True),
                                           ("chart-pass-intervals", "circle.estimate", True),
                                           ("chart-agreement", "circle.estimate", False),
                                           ("chart-runs-outcome", "circle.run-point", True),
                                           ("chart-runs-human", "circle.run-point", True)):
                svg = page.locator(f"#{chart} svg")
                box = svg.bounding_box()
                assert box is not None and box["width"] > 50 and box["height"] > 50, (chart, box)
                drawn = svg.locator(marks)
                assert drawn.count() >= (len(MODELS) if labelled else 2), chart
                first = drawn.first.bounding_box()
                assert first is not None and first["width"] > 0 and first["height"] > 0, chart
                text = svg.text_content()
                assert all(model in text for model in MODELS) if labelled else "judge" in text, (chart, text)
            # labels from logs are text, never markup, in tables and in charts
            assert HOSTILE_MODEL in page.locator("#chart-scatter svg").text_content()
            assert page.locator("i").count() == 0 and page.locator("img").count() == 0

            # a run with a bad process: its edit is marked with the rule that cites it
            bad = _run_id("model-b", "todo", 0)
            section = page.locator(f"#{run_anchor(bad)}")
            assert section.count() == 1
            row = page.locator(f"#{event_anchor(bad, BAD_EDIT_SEQ)}")
            assert "cited" in (row.get_attribute("class") or "")
            assert row.locator(".finding-tag").all_inner_texts() == ["test-before-first-edit",
                                                                     "edits-within-explored-areas"]
            assert row.locator("td").nth(3).inner_text() == "file_edit"
            background = row.evaluate("tr => getComputedStyle(tr).backgroundColor")
            assert background not in ("rgba(0, 0, 0, 0)", "transparent"), background
            finding = section.locator('li.finding[data-rule="test-before-first-edit"]')
            assert finding.count() == 1
            link = finding.locator("a").first
            assert link.get_attribute("href") == f"#{event_anchor(bad, BAD_EDIT_SEQ)}"
            link.click()
            assert page.evaluate("location.hash") == f"#{event_anchor(bad, BAD_EDIT_SEQ)}"
            # the hostile message is shown as text in its timeline
            hostile = section = page.locator(f"#{run_anchor(_run_id(HOSTILE_MODEL, 'todo', 0))}")
            assert HOSTILE_TEXT in hostile.locator("table.timeline").inner_text()
            # a run from the harness samples has its section too
            assert page.locator("section.run[data-run-id^='codex/']").count() >= 1

            # the headline: graded and not graded runs, groups, tasks, the rank agreement with its interval
            facts = page.evaluate("""() => Object.fromEntries(Array.from(document.querySelectorAll(
                'dl.headline .fact')).map(f => [f.dataset.fact, f.querySelector('dd').innerText]))""")
            reader = open_store(report_db)
            try:
                views = load_runs(reader, load_ruleset())
            finally:
                reader.close()
            graded = [v for v in views if v.process is not None and v.process.total is not None]
            assert facts["runs"] == str(len(views)) and facts["graded"] == str(len(graded))
            assert facts["not-graded"].startswith(f"{len(views) - len(graded)} (")
            assert facts["not-graded"].endswith(f"{len(views) - len(graded)} no model decisions)")
            assert re.match(r"-?\d\.\d\d \[-?\d\.\d\d, -?\d\.\d\d\]; \d+ groups", facts["tau"]), facts["tau"]
            assert "AUC" not in facts["auc"] and re.match(r"\d\.\d\d", facts["auc"]), facts["auc"]
            assert page.locator("details.suppressed li").count() >= 1
            # ungraded runs are listed apart, never ranked, and shown as not graded in the runs table
            listed = page.locator('#not-graded details[data-reason="not graded: no model decisions"] li')
            assert listed.count() == sum(1 for v in views if v.process.total is None)
            tb = next(v.run_id for v in views if v.run_id.startswith("terminal-bench/") and v.process.total is None)
            cell = page.locator(f'table.runs tr[data-run-id="{tb}"]')
            assert cell.locator("td.process-score").inner_text() == "not graded"
            short = cell.locator("code").first
            assert short.get_attribute("title") == tb and len(short.inner_text()) <= 30 and short.inner_text() != tb
            assert "(none)" not in page.locator("table.groups").inner_text()
            # the rule-outcome table: a pooled row per rule, with the odds ratio or the reason it has none
            pooled = page.locator('table.association tr.pooled[data-rule="test-before-first-edit"]')
            assert pooled.count() == 1 and int(pooled.locator("td").nth(2).inner_text()) >= 12
            assert page.locator("table.applicability tbody tr").count() == len(load_ruleset().rules)
        finally:
            browser.close()

    assert errors == [], errors
    assert console == [], console
    assert refused == [], f"the page asked the network for {refused}"
    assert all(url.startswith("file://") for url in requests), requests
    assert requests == [page_path.as_uri()], requests


# ------------------------------------------------------------------------------------------------
# the page's bytes


def test_headline_lists_a_few_groups_below_their_count() -> None:
    """The groups card's value is the count of groups; the first names go in a smaller line below it
    as short labels (the full name on hover), with how many more the groups table holds. Fifteen
    model ids in the value itself made the whole headline row as tall as the list."""
    from procgrade.engine.analysis.graded_runs import Selection
    from procgrade.engine.reporting.headline import GROUPS_LISTED, headline_section

    def groups_card(groups: list[str]) -> str:
        page = headline_section(runs=3, selection=Selection((), (), None), by="model", groups=groups, tasks=[],
                                comparison=None, comparison_note="no outcomes", association=None,
                                extra_suppressed=[])
        return re.search(r'<div class="fact" data-fact="groups">(.*?)</div>', page).group(1)

    many = [f"app-{i:02d}qhry-17585307907266370{i:02d}" for i in range(GROUPS_LISTED + 3)]
    card = groups_card(many)
    value, detail = re.findall(r"<dd[^>]*>(.*?)</dd>", card)
    assert value == str(len(many)) and card.count('<dd class="detail">') == 1
    assert detail.endswith(" and 3 more")
    titles = re.findall(r'<code title="([^"]*)">([^<]*)</code>', detail)
    assert [full for full, _ in titles] == many[:GROUPS_LISTED]
    assert all(len(shown) <= 24 and shown != full for full, shown in titles)
    assert many[GROUPS_LISTED] not in card

    few = ["claude-3-5-sonnet", "gpt-4o"]
    value, detail = re.findall(r"<dd[^>]*>(.*?)</dd>", groups_card(few))
    assert value == "2" and "more" not in detail
    assert re.findall(r'<code title="[^"]*">([^<]*)</code>', detail) == few
    assert "<dd" not in groups_card([]).replace("<dd>0</dd>", "")


def test_report_is_deterministic_across_databases(tmp_path: Path) -> None:
    """The same runs give the same bytes: twice on SQLite, and on PostgreSQL."""
    pages = []
    for kind in ("sqlite", "postgresql", "sqlite"):
        with fresh_url(kind, tmp_path / f"db-{len(pages)}") as url:
            store = open_store(url, create=True)
            try:
                fill_store(store, tmp_path / f"in-{len(pages)}", imports=False)
                pages.append(build_report(store, resamples=RESAMPLES))
            finally:
                store.close()
    assert pages[0] == pages[1] == pages[2]
    assert not re.search(r"20\d\d-\d\d-\d\dT", pages[0]), "no time in the page unless one is passed in"


def test_run_pages_with_one_reused_monitor_equal_pages_made_one_by_one(report_db: str) -> None:
    """The report compiles the rule set's monitor once and resets it per run; each page must equal the
    page :func:`run_page` makes alone (its own monitor, its own reads), violations and timeline alike."""
    from procgrade.engine.reporting.html_report import _run_pages
    from procgrade.engine.reporting.run_pages import run_page

    store = open_store(report_db)
    try:
        ruleset = load_ruleset()
        run_ids = [info.run_id for info in store.runs()]
        shared = _run_pages(store, run_ids, ruleset)
        alone = [run_page(store, run_id, ruleset) for run_id in run_ids]
    finally:
        store.close()
    assert len(run_ids) > 10 and any(page.violations for page in alone) and any(not p.violations for p in alone)
    assert shared == alone


def test_report_escapes_and_loads_nothing(report_db: str) -> None:
    store = open_store(report_db)
    try:
        page = build_report(store, allow_mixed=True, resamples=RESAMPLES, generated="build 42")
    finally:
        store.close()
    assert HOSTILE_TEXT not in page and "<i>" not in page
    assert "&lt;img src=&quot;http://example.invalid/x.png&quot;" in page
    assert "model-c &lt;i&gt;&amp;&quot;q&quot;&lt;/i&gt;" in page
    for tag in ("<script", "<img", "<link", "<iframe", "<object", "<embed", "<use", "<image", "@import", "url("):
        assert tag not in page, tag
    assert re.findall(r"(?:href|src)=\"(?!#)", page) == [], "only in-page links"
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    assert "<dt>generated</dt><dd>build 42</dd>" in page


def test_missing_analysis_modules_say_not_available(report_db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "procgrade.engine.analysis.comparison", None)
    monkeypatch.setitem(sys.modules, "procgrade.engine.analysis.calibration", None)
    store = open_store(report_db)
    try:
        report = render_report(store)
    finally:
        store.close()
    assert "Comparison not available: procgrade.engine.analysis.comparison is not installed" in report.html
    assert "Calibration not available: procgrade.engine.analysis.calibration is not installed" in report.html
    assert f'id="{run_anchor(_run_id("model-b", "todo", 0))}"' in report.html
    assert "comparison not available" in report.summary and "calibration not available" in report.summary


def test_mixed_settings_leave_the_comparison_out_unless_allowed(report_db: str) -> None:
    store = open_store(report_db)
    try:
        refused = render_report(store, resamples=RESAMPLES)
        with pytest.raises(ReportError, match="unknown grouping field 'nope'"):
            render_report(store, by="nope")
    finally:
        store.close()
    assert "Comparison not available: refusing to pool runs whose settings differ" in refused.html


def test_cli_report(report_db: str, tmp_path: Path) -> None:
    out = tmp_path / "page.html"
    result = CliRunner().invoke(app, ["report", "--html", str(out), "--allow-mixed", "--resamples", str(RESAMPLES),
                                      "--db", report_db])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == str(out)
    assert re.match(r"\d+ runs \(\d+ graded, \d+ not graded\) in \d+ groups by model, \d+ rule violations; \d+ groups "
                    r"compared \(\d+ ranked, \d+ rank flips\); \d+ of \d+ rules associated with outcome; "
                    r"calibration of \d+ comparisons on 2 layers$", lines[1]), lines[1]
    assert out.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    short = CliRunner().invoke(app, ["report", "--html", str(out), "--no-timelines", "--db", report_db])
    assert short.exit_code == 0, short.output
    page = out.read_text(encoding="utf-8")  # no timelines; without --allow-mixed, no comparison either
    assert 'class="run"' not in page and "Comparison not available: refusing to pool" in page
    bad = CliRunner().invoke(app, ["report", "--html", str(out), "--by", "nope", "--db", report_db])
    assert bad.exit_code != 0


# ------------------------------------------------------------------------------------------------
# charts alone


def test_charts_escape_labels_and_skip_what_they_cannot_draw() -> None:
    label = '<script>alert("x")</script>&'
    svg = scatter_chart([Point(label, 0.5, 0.25, 0.1, 0.4), Point("off", None, 0.3)], title="t", x_label="x",
                        y_label="y")
    assert "<script>" not in svg and "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;" in svg
    assert svg.count('class="point"') == 1
    assert svg == scatter_chart([Point(label, 0.5, 0.25, 0.1, 0.4), Point("off", None, 0.3)], title="t",
                                x_label="x", y_label="y")
    assert scatter_chart([Point("a", None, None)], title="t", x_label="x", y_label="y") == ""
    bump = bump_chart([BumpRow("a", 1, 2), BumpRow("b", 2, 1), BumpRow("c", None, None)], title="t",
                      left_label="l", right_label="r")
    assert bump.count('class="bump"') == 2 and ">c (" not in bump
    forest = interval_chart([IntervalRow("a" * 80, 0.5, 0.4, 0.6, "50%")], title="t", axis_label="x")
    assert "\u2026" in forest and "a" * 80 in forest  # clipped on screen, whole in the tooltip
    assert interval_chart([], title="t", axis_label="x") == ""


def test_percentages_round_like_their_intervals() -> None:
    """1/16 is 6.25%: shown 6.3 as the interval column (half up on the exact value) shows it."""
    from fractions import Fraction

    from procgrade.engine.analysis.outcome_metrics import format_percent
    from procgrade.engine.reporting.markup import fmt_pct

    for value in (Fraction(1, 16), Fraction(5, 16), Fraction(1, 80), 0.0625, 1.0):
        assert fmt_pct(value) == format_percent(value, 1)
    assert fmt_pct(Fraction(1, 16)) == "6.3" and fmt_pct(None) == "-"


def test_report_page_does_not_scroll_sideways(report_db: str, tmp_path: Path) -> None:
    # A column per group: the per-rule table outgrows a laptop screen with a dozen groups (the demo's
    # 15 models made the whole page scroll sideways). It scrolls inside its own box instead, its rule
    # names kept in view.
    sync_playwright = _browser()
    store = open_store(report_db)
    try:
        report = render_report(store, allow_mixed=True, resamples=RESAMPLES)
    finally:
        store.close()
    page_path = tmp_path / "report.html"
    page_path.write_text(report.html, encoding="utf-8")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 640, "height": 800})
            page.goto(page_path.as_uri(), wait_until="load")
            table_width = page.evaluate("document.querySelector('table.applicability').scrollWidth")
            assert table_width > 640, "the fixture's per-rule table fits: this test shows nothing"
            overflowing = page.evaluate("""() => [...document.querySelectorAll('body *')]
                .filter(e => e.getBoundingClientRect().right > document.documentElement.clientWidth + 1
                             && !e.closest('div.wide-table'))
                .map(e => e.tagName + '.' + e.className).slice(0, 5)""")
            assert page.evaluate("document.documentElement.scrollWidth") <= 640, overflowing
            box = page.locator("div.wide-table").first
            box.evaluate("box => { box.scrollLeft = box.scrollWidth; }")
            first_cell = page.locator("table.applicability tbody td").first.bounding_box()
            assert first_cell is not None and first_cell["x"] >= 0, "the rule names scrolled away"
        finally:
            browser.close()
