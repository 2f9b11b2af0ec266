"""Several workers reading one Inspect log, each every n-th sample: the store gets the very rows,
reports and errors one reader gives (first error in the log's order, nothing written), and a
sample that does not parse alone hands the rest of the log to one reader, as it does in process."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from import_checks import inspect_log, snapshot
from procgrade.engine.errors import InputError
from procgrade.engine.importers import inspect_ai, pipeline
from procgrade.engine.importers.json_items import ArrayItems, ItemError
from procgrade.engine.ingest import ingest_paths
from procgrade.engine.store import open_store


def _log(path: Path, samples: int, *, without_epoch: tuple[int, ...] = ()) -> Path:
    doc = inspect_log(samples)
    for index in without_epoch:
        del doc["samples"][index]["epoch"]
    path.write_text(json.dumps(doc, indent=2, ensure_ascii=False))
    return path


def _ingest(tmp_path: Path, log: Path, workers: int, monkeypatch: pytest.MonkeyPatch, name: str) -> tuple[Any, Any]:
    """(reports as (run, events read, head), every row) of ``log`` ingested with ``workers``."""
    monkeypatch.setattr(inspect_ai, "_WORKER_BYTES", 0)
    monkeypatch.setenv("PROCGRADE_IMPORT_WORKERS", str(workers))
    used: list[int] = []
    original = pipeline._workers
    monkeypatch.setattr(pipeline, "_workers", lambda *a: used.append(original(*a)) or used[-1])
    store = open_store(f"sqlite:///{tmp_path / name}.db", create=True)
    try:
        reports = ingest_paths(store, [log]).reports
        assert used == [workers]
        return ([(r.run_id, r.events_read, r.result.head_hash) for r in reports], snapshot(store)[1])
    finally:
        store.close()


@pytest.mark.parametrize("samples", [1, 5])
def test_shares_store_the_rows_one_reader_stores(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, samples: int) -> None:
    log = _log(tmp_path / "log.json", samples)
    alone = _ingest(tmp_path, log, 0, monkeypatch, "alone")
    assert len(alone[0]) == samples
    for workers in (1, 2, 3):
        assert _ingest(tmp_path, log, workers, monkeypatch, f"w{workers}") == alone


@pytest.mark.parametrize("workers", [0, 2, 3])
def test_the_first_bad_sample_in_the_log_is_the_one_reported(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int) -> None:
    log = _log(tmp_path / "bad.json", 5, without_epoch=(1, 2))  # read by different workers
    monkeypatch.setattr(inspect_ai, "_WORKER_BYTES", 0)
    monkeypatch.setenv("PROCGRADE_IMPORT_WORKERS", str(workers))
    store = open_store(f"sqlite:///{tmp_path / 'bad'}.db", create=True)
    try:
        with pytest.raises(InputError) as caught:
            ingest_paths(store, [log])
        assert caught.value.line == "samples[1]" and caught.value.field == "epoch"
        assert store.runs() == []
    finally:
        store.close()


def test_a_sample_that_does_not_parse_alone_hands_the_rest_to_one_reader(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # as if the third sample's span were cut where the layout misleads the sample finder: the
    # whole document then gives every run from that sample on, once each, to one reader
    log = _log(tmp_path / "odd.json", 5)
    items = ArrayItems.items

    def misleading(self: ArrayItems, share: int = 0, shares: int = 1) -> Any:
        for index, item in items(self, share, shares):
            if index == 2:
                raise ItemError(2)
            yield index, item

    clean = _ingest(tmp_path, log, 0, monkeypatch, "clean")
    monkeypatch.setattr(ArrayItems, "items", misleading)
    alone = _ingest(tmp_path, log, 0, monkeypatch, "alone")
    assert alone == clean and len({run for run, _, _ in alone[0]}) == 5
    for workers in (2, 3):
        assert _ingest(tmp_path, log, workers, monkeypatch, f"w{workers}") == clean


def test_busy_cores_are_measured_between_zero_and_all() -> None:
    busy = pipeline._busy_elsewhere()
    assert 0 <= busy <= (pipeline.os.cpu_count() or 1) + 1e-9


def test_workers_are_one_per_core_while_a_core_is_idle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from procgrade.engine.importers import get_importer, plan_imports
    from procgrade.engine.importers.source_tree import open_tree

    log = _log(tmp_path / "log.json", 1)
    tree = open_tree(log)
    ((importer, unit),) = plan_imports(tree).units
    monkeypatch.setattr(inspect_ai, "_WORKER_BYTES", 0)
    monkeypatch.setattr(pipeline.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(pipeline, "usable_cores", lambda: 2)
    monkeypatch.delenv("PROCGRADE_IMPORT_WORKERS", raising=False)
    for busy, workers in ((0, 2), (1, 2), (1.4, 2), (1.5, 0), (2, 0)):
        monkeypatch.setattr(pipeline, "_busy_elsewhere", lambda busy=busy: busy)
        assert pipeline._workers(importer, tree, unit) == workers, busy
    for setting, workers in (("0", 0), ("1", 1), ("3", 3), ("9", pipeline.MAX_WORKERS)):
        monkeypatch.setenv("PROCGRADE_IMPORT_WORKERS", setting)
        assert pipeline._workers(importer, tree, unit) == workers
    monkeypatch.setattr(inspect_ai, "_WORKER_BYTES", 1 << 40)  # a small log: never worth a worker
    assert pipeline._workers(importer, tree, unit) == 0
    assert get_importer("inspect") is importer
