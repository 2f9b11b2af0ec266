"""The executor interface: chunk planning, results in task order whatever order tasks finish
in, progress told as tasks finish, and command-line mistakes as located errors."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from procgrade.engine.errors import InputError
from procgrade.engine.executors import MAX_TASK_EVENTS, MIN_TASK_EVENTS, LocalExecutor, make_executor, plan_chunks


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
    """Task 0 ends only once task 1 has ended: completion order 1, 0."""
    marker = Path(directory) / "1"
    if i == 0:
        deadline = time.monotonic() + 60
        while not marker.exists():
            if time.monotonic() > deadline:
                raise TimeoutError("task 1 never ran")
            time.sleep(0.01)
    else:
        marker.write_text("done")
    return i * 10


def test_results_come_in_task_order_and_progress_as_tasks_finish(tmp_path: Path) -> None:
    done: list[int] = []
    with LocalExecutor(2) as executor:
        results = list(executor.map(finish_after_the_second, [(0, str(tmp_path)), (1, str(tmp_path))],
                                    weights=[5, 7], on_done=done.append))
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
