"""The executor interface: chunk planning, results in task order whatever order tasks finish
in, progress told as tasks finish, and command-line mistakes as located errors."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from procgrade.engine.errors import InputError
from procgrade.engine.executors import MAX_TASK_EVENTS, MIN_TASK_EVENTS, LocalExecutor, make_executor, plan_chunks

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "native" / "todo-app-run.jsonl"


def test_chunks_keep_order_and_sit_between_the_bounds() -> None:
    items = list(range(1000))
    weights = [1000] * 1000  # 1M events
    for workers in (1, 2, 8, 64):
        chunks = plan_chunks(items, weights, workers)
        assert [i for chunk in chunks for i in chunk] == items
        sizes = [1000 * len(chunk) for chunk in chunks]
        assert all(MIN_TASK_EVENTS <= s <= MAX_TASK_EVENTS for s in sizes[:-1])
    assert len(plan_chunks(items, weights, 1)) == 1_000_000 // MAX_TASK_EVENTS
    assert plan_chunks([], [], 4) == []
    assert plan_chunks(["a", "b"], [10, 10], 4) == [["a", "b"]]  # too little work to split


def finish_after_the_second(i: int, directory: str) -> int:
    """Task 0 ends only once the driver has been told task 1 ended (it writes the marker then):
    completion order 1, 0. Task 1 writing the marker itself raced: on a loaded machine task 0
    could see it and return before task 1's own return reached the driver."""
    marker = Path(directory) / "1"
    if i == 0:
        deadline = time.monotonic() + 60
        while not marker.exists():
            if time.monotonic() > deadline:
                raise TimeoutError("the driver was never told that task 1 ended")
            time.sleep(0.01)
    return i * 10


def test_results_come_in_task_order_and_progress_as_tasks_finish(tmp_path: Path) -> None:
    done: list[int] = []

    def told(weight: int) -> None:
        done.append(weight)
        if weight == 7:  # task 1 is done: task 0 may end now
            (tmp_path / "1").write_text("done")

    with LocalExecutor(2) as executor:
        results = list(executor.map(finish_after_the_second, [(0, str(tmp_path)), (1, str(tmp_path))],
                                    weights=[5, 7], on_done=told))
    assert results == [0, 10]
    assert done == [7, 5]


def test_one_worker_runs_in_this_process() -> None:
    import os

    assert list(LocalExecutor(1).map(os.getpid, [(), ()])) == [os.getpid()] * 2


def test_command_line_mistakes_are_located_errors() -> None:
    with pytest.raises(InputError, match="--executor"):
        make_executor("spark")
    with pytest.raises(InputError, match="--address"):
        make_executor("local", address="auto")
    with pytest.raises(InputError, match="--workers"):
        make_executor("local", workers=0)


def test_small_work_never_starts_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Work below the start-up threshold runs in the calling process; at or above it (or with the
    threshold lowered through the environment) the pool is used."""
    from procgrade.engine.executors import WORKER_MIN_EVENTS

    monkeypatch.delenv("PROCGRADE_WORKER_MIN_EVENTS", raising=False)
    with LocalExecutor(2) as executor:
        small = executor.for_events(WORKER_MIN_EVENTS - 1)
        assert small is not executor and small.workers == 1
        assert list(small.map(os.getpid, [(), ()])) == [os.getpid()] * 2
        assert executor._pool is None
        assert executor.for_events(WORKER_MIN_EVENTS) is executor
        monkeypatch.setenv("PROCGRADE_WORKER_MIN_EVENTS", "0")
        assert executor.for_events(1) is executor
    assert LocalExecutor(1).for_events(10**9).workers == 1


@pytest.mark.parametrize("value", ["many", "-1"])
def test_worker_threshold_from_the_environment_is_checked(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("PROCGRADE_WORKER_MIN_EVENTS", value)
    with pytest.raises(InputError, match="PROCGRADE_WORKER_MIN_EVENTS"):
        LocalExecutor(2).for_events(1)


def test_score_many_on_a_small_store_starts_no_pool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from procgrade.engine.ingest import ingest_native
    from procgrade.engine.parallel_scoring import score_many
    from procgrade.engine.store import open_store
    from procgrade.rules.loading import load_ruleset

    monkeypatch.delenv("PROCGRADE_WORKER_MIN_EVENTS", raising=False)
    store = open_store(f"sqlite:///{tmp_path}/s.db", create=True)
    try:
        ingest_native(store, [EXAMPLE])
        with LocalExecutor(2) as executor:
            outcomes = score_many(store, None, load_ruleset(), executor=executor)
            assert outcomes and executor._pool is None
    finally:
        store.close()
