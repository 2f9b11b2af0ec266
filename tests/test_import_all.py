"""Every bundled sample, every importer, end to end: detected, stored, verified, scored,
and re-imported without a change (SQLite and PostgreSQL)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from import_checks import FIXTURES, snapshot
from procgrade.engine.importers import importers
from procgrade.engine.ingest import ingest_paths
from procgrade.engine.log_verification import verify_log
from procgrade.engine.rescoring import score_runs, verify_scores
from procgrade.rules.loading import load_ruleset

SAMPLE_FOLDERS = sorted(p for p in FIXTURES.iterdir() if p.is_dir())


def test_every_importer_has_bundled_samples() -> None:
    done = {}
    for folder in SAMPLE_FOLDERS:
        from procgrade.engine.importers import plan_imports
        from procgrade.engine.importers.source_tree import open_tree

        for importer, _unit in plan_imports(open_tree(folder)).units:
            done.setdefault(importer.name, folder.name)
    assert sorted(done) == sorted(importers())


def test_all_samples_import_score_and_reimport_as_a_no_op(store: Any) -> None:
    first = ingest_paths(store, SAMPLE_FOLDERS)
    run_ids = sorted({r.run_id for r in first.reports})
    assert len(run_ids) == len(first.reports)
    assert all(not r.result.no_op for r in first.reports)
    unrecognised = sorted(Path(label).name for label in first.unrecognised)
    assert all(name.startswith(("LICENSE", "README")) for name in unrecognised), unrecognised

    for run_id in run_ids:
        report = verify_log(store, run_id)
        assert report.ok, (run_id, report.problems)

    outcomes = score_runs(store, run_ids, load_ruleset())
    assert sorted(o.document.run_id for o in outcomes) == run_ids
    checked, drifts = verify_scores(store, run_ids)
    assert checked == len(run_ids) and drifts == []

    before = snapshot(store)
    second = ingest_paths(store, SAMPLE_FOLDERS)
    assert [r.run_id for r in second.reports] == [r.run_id for r in first.reports]
    assert all(r.result.no_op for r in second.reports)
    assert snapshot(store) == before
