"""Shared checks for importer tests: what a run holds, and that a failed import wrote nothing."""

from __future__ import annotations

import copy
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from procgrade.engine.errors import InputError
from procgrade.engine.events import Event
from procgrade.engine.importers import get_importer, plan_imports
from procgrade.engine.importers.building import ImportedRun
from procgrade.engine.importers.source_tree import open_tree
from procgrade.engine.ingest import ingest_paths
from procgrade.engine.store import EventStore
from procgrade.engine.store.schema import events as events_table
from procgrade.engine.store.schema import runs as runs_table

FIXTURES = Path(__file__).parent / "fixtures" / "imports"
INSPECT_BROWSER = FIXTURES / "inspect" / "browser_agent_log.json"


def inspect_log(samples: int) -> dict[str, Any]:
    """The one-sample Inspect browser log with its sample copied ``samples`` times (ids 1..n,
    distinct uuids): a log of many runs, as inspect-ai writes it."""
    doc = json.loads(INSPECT_BROWSER.read_text())
    (sample,) = doc["samples"]
    doc["samples"] = []
    for index in range(samples):
        copied = copy.deepcopy(sample)
        copied["id"] = index + 1
        copied["uuid"] = f"{sample.get('uuid', 'u')}-{index + 1}"
        doc["samples"].append(copied)
    return doc


def read_runs(path: Path | str, format: str = "auto") -> list[ImportedRun]:
    """Every run the importers read from ``path`` (no store involved)."""
    tree = open_tree(path)
    plan = plan_imports(tree, format)
    return [run for importer, unit in plan.units for run in importer.read(tree, unit)]


def read_one(path: Path | str, format: str = "auto") -> ImportedRun:
    runs = read_runs(path, format)
    assert len(runs) == 1, [r.run_id for r in runs]
    return runs[0]


def kinds(run: ImportedRun | list[Event]) -> dict[str, int]:
    events = run.events if isinstance(run, ImportedRun) else run
    return dict(sorted(Counter(e.kind for e in events).items()))


def actors(run: ImportedRun | list[Event]) -> dict[str, int]:
    events = run.events if isinstance(run, ImportedRun) else run
    return dict(sorted(Counter(e.actor for e in events).items()))


def of_kind(run: ImportedRun, kind: str) -> list[Event]:
    return [e for e in run.events if e.kind == kind]


def test_runs_found(run: ImportedRun) -> list[tuple[str | None, str | None]]:
    """(command, outcome fact) of every test_run, in seq order."""
    from procgrade.engine.facts import test_outcome

    return [(e.command, test_outcome(e)) for e in of_kind(run, "test_run")]  # type: ignore[arg-type]


test_runs_found.__test__ = False  # type: ignore[attr-defined]


def snapshot(store: EventStore) -> tuple[list[Any], list[Any]]:
    """Every runs row and every event row: equal snapshots mean nothing was written."""
    with store.engine.connect() as conn:
        runs = [tuple(r) for r in conn.execute(select(runs_table).order_by(runs_table.c.run_id))]
        events = [tuple(r) for r in conn.execute(select(events_table).order_by(events_table.c.run_id, events_table.c.seq))]
    return runs, events


def assert_rejected(store: EventStore, path: Path, *, format: str = "auto", where: str, field: str | None) -> InputError:
    """Importing ``path`` fails with an InputError at ``where`` (``FILE:RECORD``, matched as the
    message's start after the file name) naming ``field``, and the store is unchanged."""
    before = snapshot(store)
    with pytest.raises(InputError) as caught:
        ingest_paths(store, [path], format=format)
    message = str(caught.value)
    assert where in message, message
    if field is not None:
        assert caught.value.field == field, message
    assert snapshot(store) == before
    return caught.value


def importer_of(name: str):
    return get_importer(name)
