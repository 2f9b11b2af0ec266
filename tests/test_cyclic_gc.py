"""The cyclic garbage collector is paused around ingest and scoring, and always put back as it was."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from builders import small_run, write_jsonl
from procgrade.engine import cyclic_gc, parallel_scoring
from procgrade.engine.executors import LocalExecutor
from procgrade.engine.ingest import ingest_native
from procgrade.engine.parallel_scoring import score_many
from procgrade.engine.store import EventStore
from procgrade.rules.loading import load_ruleset


@pytest.fixture
def collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_paused_turns_the_collector_off_and_back_on(collector_on: None) -> None:
    with cyclic_gc.paused():
        assert not gc.isenabled()
        with cyclic_gc.paused():
            assert not gc.isenabled()
        assert not gc.isenabled(), "a nested pause leaves it off for the outer one"
    assert gc.isenabled()
    with pytest.raises(RuntimeError), cyclic_gc.paused():
        raise RuntimeError("boom")
    assert gc.isenabled(), "back on after an error"


def test_paused_leaves_a_collector_the_caller_turned_off_off(collector_on: None) -> None:
    gc.disable()
    with cyclic_gc.paused():
        pass
    assert not gc.isenabled()


def test_scoring_runs_with_the_collector_paused(store: EventStore, tmp_path: Path, collector_on: None,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    ingest_native(store, [write_jsonl(tmp_path / f"run-{n}.jsonl", small_run(f"run-{n}")) for n in range(3)])
    seen: list[bool] = []
    store_scores = parallel_scoring.store_scores

    def watched(*args: object) -> list[bool]:
        seen.append(gc.isenabled())
        return store_scores(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(parallel_scoring, "store_scores", watched)
    outcomes = score_many(store, None, load_ruleset(), executor=LocalExecutor(1))
    assert len(outcomes) == 3 and seen and not any(seen)
    assert gc.isenabled()
