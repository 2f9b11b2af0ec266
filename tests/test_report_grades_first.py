"""A report over runs whose grades arrived before any trajectory (they live in ``<run>@grades``
streams, which the analysis shows under the run's own id): every run page is built from the
stream that holds it, on SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path

from procgrade.engine import api
from procgrade.engine.grades.record import grades_stream
from procgrade.engine.reporting.markup import esc

FIXTURES = Path(__file__).parent / "fixtures"
JUDGMENTS = FIXTURES / "devai-judgments"


def test_a_report_over_grades_only_runs_shows_each_run_from_its_grades_stream(store_url: str, tmp_path: Path) -> None:
    api.init(store_url)
    api.import_grades(store_url, [JUDGMENTS])
    store = api.open_store(store_url)
    try:
        streams = [info.run_id for info in store.runs()]
    finally:
        store.close()
    assert streams and all(run_id.endswith("@grades") for run_id in streams)
    run_id = streams[0].removesuffix("@grades")
    assert grades_stream(run_id) == streams[0]

    page = tmp_path / "report.html"
    done = api.report(store_url, page, allow_mixed=True, resamples=99)
    html = page.read_text(encoding="utf-8")
    assert f"{len(streams)} runs (0 graded, {len(streams)} not graded)" in done.summary
    assert esc(run_id) in html  # the run's page, under the run's own id
