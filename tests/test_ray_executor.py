"""The Ray executor on a real local Ray cluster (2 CPUs, started once for this module):
the same score bytes as the local executor, from the store and from an archive, and a
worker killed mid-task (``os._exit`` on a task's first attempt) changes nothing."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from builders import ev, run_started, write_jsonl
from databases import fresh_url
from procgrade.engine.archive import export_archive
from procgrade.engine.executors import LocalExecutor, RayExecutor
from procgrade.engine.ingest import ingest_native
from procgrade.engine.parallel_scoring import score_many, verify_archive_many, verify_many
from procgrade.engine.store import EventStore, open_store
from procgrade.engine.store.scores import ScoreStore
from procgrade.rules.loading import load_ruleset

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "native" / "todo-app-run.jsonl"


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[Any]:
    import ray

    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    try:
        yield ray
    finally:
        ray.shutdown()


def _run(run_id: str, n: int) -> list[dict]:
    events = [run_started(run_id), ev("stage_started", 1, run_id, actor="harness", stage=0, spec_ref="s.md")]
    for seq in range(2, n):
        if seq % 3 == 0:
            events.append(ev("test_run", seq, run_id, stage=0, command="pytest -q", passed=2, failed=seq % 2,
                             exit_code=seq % 2))
        elif seq % 3 == 1:
            events.append(ev("file_edit", seq, run_id, stage=0, path=f"m{seq % 5}.py", edit_kind="modify"))
        else:
            events.append(ev("completion_claim", seq, run_id, stage=0, claim="done"))
    return events


def _populate(store: EventStore, tmp_path: Path) -> None:
    files = [write_jsonl(tmp_path / f"r{i}.jsonl", _run(f"run-{i:02d}", 20 + 7 * i)) for i in range(8)]
    ingest_native(store, [EXAMPLE, *files])
    for info in store.runs():
        store.seal(info.run_id)


@pytest.fixture
def small_tasks(monkeypatch: pytest.MonkeyPatch) -> None:
    """One run per task, so the 9 runs make 9 tasks spread over both workers."""
    monkeypatch.setattr("procgrade.engine.executors.MIN_TASK_EVENTS", 1)


class CrashOnce(RayExecutor):
    """Kills the worker process running the first task, on its first attempt only."""

    def __init__(self, marker: Path) -> None:
        super().__init__("auto", max_retries=2)
        self.marker = str(marker)

    def _task_function(self, fn: Any) -> Any:
        marker = self.marker

        def crash_on_first_attempt(*args: Any) -> Any:
            chunk = args[-1]
            if chunk and chunk[0][0] == "run-00" and not os.path.exists(marker):
                with open(marker, "w") as handle:
                    handle.write(str(os.getpid()))
                os._exit(1)  # the worker dies mid-task: no result, no exception
            return fn(*args)

        return crash_on_first_attempt


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_ray_scores_are_the_local_bytes_and_a_killed_worker_changes_nothing(
        ray_cluster: Any, small_tasks: None, tmp_path: Path, database: str) -> None:
    ruleset = load_ruleset()
    with fresh_url(database, tmp_path / "local") as local_url, fresh_url(database, tmp_path / "ray") as ray_url:
        local, remote = open_store(local_url, create=True), open_store(ray_url, create=True)
        try:
            _populate(local, tmp_path)
            _populate(remote, tmp_path)
            expected = [o.document.canonical for o in score_many(local, None, ruleset, executor=LocalExecutor(1))]
            marker = tmp_path / "crashed"
            progress: list[int] = []
            with CrashOnce(marker) as executor:
                assert executor.workers == 2
                outcomes = score_many(remote, None, ruleset, executor=executor, on_events=progress.append)
            assert marker.exists(), "the first task's worker was never killed"
            assert [o.document.canonical for o in outcomes] == expected
            assert all(o.written for o in outcomes)
            # Each run scored once, stored once: the same rows as the local executor's.
            assert [(s.run_id, s.document) for s in ScoreStore(remote).scores()] == \
                [(s.run_id, s.document) for s in ScoreStore(local).scores()]
            assert sum(progress) == sum(info.event_count for info in remote.runs())
            with RayExecutor("auto") as executor:
                assert verify_many(remote, executor=executor) == (9, [])
                again = score_many(remote, None, ruleset, executor=executor)
            assert [o.document.canonical for o in again] == expected and not any(o.written for o in again)
        finally:
            local.close()
            remote.close()


def test_ray_rescores_and_verifies_from_an_archive(ray_cluster: Any, small_tasks: None, tmp_path: Path) -> None:
    ruleset = load_ruleset()
    store = open_store(f"sqlite:///{tmp_path}/s.db", create=True)
    try:
        _populate(store, tmp_path)
        archive = (tmp_path / "archive").as_uri()
        export_archive(store, archive)
        expected = [o.document.canonical for o in score_many(store, None, ruleset)]
        fresh = open_store(f"sqlite:///{tmp_path}/fresh.db", create=True)
        try:
            _populate(fresh, tmp_path)
            with RayExecutor("auto") as executor:
                outcomes = score_many(fresh, None, ruleset, executor=executor, archive=archive)
                assert [o.document.canonical for o in outcomes] == expected
                results = verify_archive_many(archive, executor=executor)
            assert [r[0] for r in results] == [i.run_id for i in store.runs()]
            assert all(not problems for _, _, problems in results)
        finally:
            fresh.close()
    finally:
        store.close()


def test_cli_rescore_through_ray_matches_the_local_executor(tmp_path: Path) -> None:
    """The command line end to end: `rescore --executor ray --address local` starts its own
    cluster in the command's process and stores the bytes `rescore --workers 2` stores."""
    import subprocess
    import sys

    stores = {}
    for name in ("local", "ray"):
        url = f"sqlite:///{tmp_path}/{name}.db"
        store = open_store(url, create=True)
        try:
            _populate(store, tmp_path)
        finally:
            store.close()
        stores[name] = url
    command = [sys.executable, "-m", "procgrade.engine.cli", "rescore", "--all"]
    local = subprocess.run([*command, "--workers", "2", "--db", stores["local"]], capture_output=True, text=True,
                           cwd=ROOT, timeout=300)
    assert local.returncode == 0, local.stderr
    ray_run = subprocess.run([*command, "--executor", "ray", "--address", "local", "--db", stores["ray"]],
                             capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert ray_run.returncode == 0, ray_run.stderr
    documents = {}
    for name, url in stores.items():
        store = open_store(url)
        try:
            documents[name] = [(s.run_id, s.document) for s in ScoreStore(store).scores()]
        finally:
            store.close()
    assert len(documents["ray"]) == 9 and documents["ray"] == documents["local"]
