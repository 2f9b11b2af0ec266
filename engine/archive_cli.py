"""``procgrade archive ...`` and the executor options shared by score, rescore and verify."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Optional

import typer

from procgrade.engine.settings import DEFAULT_DB
from procgrade.engine.terminal import err, out

archive_app = typer.Typer(help="Columnar (Parquet) archives of sealed runs: export, verify; "
                               "`rescore --from-archive` scores from them.", no_args_is_help=True)


DbOption = Annotated[str, typer.Option("--db", envvar="PROCGRADE_DB", help="Database URL or SQLite file path.")]
ExecutorOption = Annotated[str, typer.Option(
    "--executor", help="Where the work runs: local (this machine, --workers processes) or ray "
                       "(a Ray cluster, --address; pip install 'procgrade[ray]').")]
WorkersOption = Annotated[int, typer.Option("--workers", min=1, help="Local processes; output does not depend on it.")]
AddressOption = Annotated[Optional[str], typer.Option(
    "--address", help="Ray cluster: auto (the one `ray start` runs here), ray://HOST:PORT, or local "
                      "(start one in this process).")]


@contextmanager
def events_progress(label: str) -> Iterator[tuple[Callable[[int, int], None], Callable[[int], None]]]:
    """A progress bar over events, fed by the driver as tasks finish on any worker."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("events"),
                  TimeElapsedColumn(), TimeRemainingColumn(), console=err, transient=True) as progress:
        task = progress.add_task(label, total=None)

        def plan(runs: int, events: int) -> None:
            progress.update(task, total=events, description=f"{label} {runs} runs")

        yield plan, lambda n: progress.advance(task, n)


def executor_from(kind: str, workers: int, address: str | None):
    from procgrade.engine.executors import make_executor

    return make_executor(kind, workers=workers, address=address)


@archive_app.command("export")
def export_command(
    destination: Annotated[str, typer.Argument(help="Directory or URL (file://, s3://, gs://, hdfs://...).")],
    run_ids: Annotated[Optional[list[str]], typer.Argument(help="Sealed runs (default: every sealed run).")] = None,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Write sealed runs' fact, envelope and digest columns to Parquet, one file per run, sorted by seq."""
    from procgrade.engine.archive import export_archive
    from procgrade.engine.store import open_store

    store = open_store(db)
    try:
        with events_progress("archiving") as (plan, advance):
            infos = [store.run(r) for r in sorted(set(run_ids))] if run_ids else [i for i in store.runs() if i.sealed]
            plan(len(infos), sum(i.sealed_event_count or 0 for i in infos))
            runs = export_archive(store, destination, run_ids or None, progress=lambda _r, n: advance(n))
    finally:
        store.close()
    out.print(f"archived {len(runs)} runs, {sum(r.event_count for r in runs)} events at {destination}")


@archive_app.command("verify")
def verify_command(
    location: Annotated[str, typer.Argument(help="The archive's directory or URL.")],
    run_ids: Annotated[Optional[list[str]], typer.Argument(help="Runs to check (default: all).")] = None,
    executor: ExecutorOption = "local",
    workers: WorkersOption = 1,
    address: AddressOption = None,
) -> None:
    """Recompute every run's chain and fact columns from the archive alone; exit 1 on any mismatch."""
    from procgrade.engine.parallel_scoring import verify_archive_many

    with executor_from(executor, workers, address) as runner, events_progress("verifying") as (plan, advance):
        results = verify_archive_many(location, run_ids, executor=runner, on_events=advance, on_plan=plan)
    bad = 0
    for run_id, checked, problems in results:
        if problems:
            bad += 1
            for problem in problems:
                err.print(f"{run_id}: {problem}", markup=False)
    if bad:
        err.print(f"procgrade: {bad} of {len(results)} archived run(s) fail verification", markup=False)
        raise typer.Exit(1)
    out.print(f"{len(results)} archived runs verify ({sum(c for _, c, _ in results)} events)")
