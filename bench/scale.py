"""Scale benchmark: N runs / M synthetic events built, sealed, archived to Parquet, and re-scored
from the archive with 1 and 2 local workers and through Ray; events/s, peak memory per process,
and a projection to a 100-node cluster with what is serial and what is not.

Run by hand: ``python bench/scale.py`` (10,000 runs / 10,000,000 events), ``--small`` (200 runs /
200,000 events), or ``--runs N --events M``. ``--keep DIR`` keeps (and on the next run reuses)
the database and the archive. Ray runs on a local cluster of ``--ray-cpus`` CPUs started here,
or on ``--ray-address``. Every pass must give the same score bytes: the first stores the
documents, the later ones find identical documents stored (a different byte would raise).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import hashlib
import os
import resource
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import orjson  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn  # noqa: E402

from bench.synthetic import synthetic_run  # noqa: E402
from procgrade.engine.archive import export_archive  # noqa: E402
from procgrade.engine.executors import LocalExecutor, RayExecutor  # noqa: E402
from procgrade.engine.ingest import ingest_native  # noqa: E402
from procgrade.engine.parallel_scoring import score_many  # noqa: E402
from procgrade.engine.store import open_store  # noqa: E402
from procgrade.rules.loading import load_ruleset  # noqa: E402

console = Console(stderr=True)
APPLICATION = "procgrade-scale-bench"


class MemorySampler:
    """Peak RSS of this process and of every descendant (pool workers, Ray's processes), by role."""

    def __init__(self) -> None:
        import psutil

        self.psutil = psutil
        self.me = psutil.Process()
        self.peaks: dict[int, tuple[str, int]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> "MemorySampler":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while not self._stop.wait(0.25):
            try:
                children = self.me.children(recursive=True)
            except self.psutil.Error:
                continue
            for proc in children:
                try:
                    rss = proc.memory_info().rss
                    role = _role(" ".join(proc.cmdline()[:3]))
                except self.psutil.Error:
                    continue
                old = self.peaks.get(proc.pid, (role, 0))
                self.peaks[proc.pid] = (role, max(old[1], rss))

    def summary(self) -> dict[str, Any]:
        by_role: dict[str, list[int]] = {}
        for role, rss in self.peaks.values():
            by_role.setdefault(role, []).append(rss)
        return {
            "driver_peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            **{f"{role}_peak_mb_max": max(v) / 2**20 for role, v in sorted(by_role.items())},
            **{f"{role}_processes": len(v) for role, v in sorted(by_role.items())},
        }


class ConnectionSampler:
    """Peak number of connections to a PostgreSQL store (nothing for SQLite)."""

    def __init__(self, url: str) -> None:
        self.url = url if url.startswith("postgres") else None
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> "ConnectionSampler":
        if self.url:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self.url:
            self._thread.join()

    def _loop(self) -> None:
        import psycopg
        from sqlalchemy.engine import make_url

        url = make_url(self.url)
        with psycopg.connect(host=url.host, port=url.port or 5432, user=url.username, dbname=url.database,
                             password=url.password, autocommit=True) as conn:
            while not self._stop.wait(0.1):
                count = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                                     (APPLICATION,)).fetchone()[0]
                self.peak = max(self.peak, count)

    def summary(self) -> dict[str, Any]:
        return {"postgres_connections_peak": self.peak} if self.url else {}


def _role(cmdline: str) -> str:
    if "ray::" in cmdline or "default_worker" in cmdline:
        return "ray_worker"
    if "raylet" in cmdline or "gcs_server" in cmdline or "ray" in cmdline:
        return "ray_system"
    if "forkserver" in cmdline or "multiprocessing" in cmdline or "python" in cmdline:
        return "pool_worker"
    return "other"


def build(url: str, work: Path, runs: int, events: int) -> float:
    """Ingest and seal ``runs`` synthetic runs totalling ``events``, in batches of files."""
    store = open_store(url, create=True)
    per_run = events // runs
    native = work / "native"
    native.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    batch = 100
    with _bar("building") as (progress, task):
        progress.update(task, total=runs * per_run)
        for first in range(0, runs, batch):
            paths = []
            for r in range(first, min(runs, first + batch)):
                path = native / f"run-{r:05d}.jsonl"
                with path.open("wb") as handle:
                    handle.writelines(orjson.dumps(e) + b"\n" for e in synthetic_run(f"bench-{r:05d}", per_run, r))
                paths.append(path)
            ingest_native(store, paths, seal=True)
            for path in paths:
                path.unlink()
            progress.advance(task, len(paths) * per_run)
    store.close()
    return time.perf_counter() - start


class _bar:
    def __init__(self, label: str) -> None:
        self.progress = Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), TextColumn("events"),
                                 TimeElapsedColumn(), console=console, transient=True)

    def __enter__(self) -> tuple[Progress, Any]:
        self.progress.start()
        return self.progress, self.progress.add_task("", total=None)

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()


@contextlib.contextmanager
def timed_writes() -> Iterator[dict[str, float]]:
    """Time the driver spends storing documents (the one serial writer: one transaction per task)."""
    import procgrade.engine.parallel_scoring as scoring

    spent = {"seconds": 0.0, "documents": 0}
    original = scoring.store_scores

    def store_scores(store: Any, rows: Any) -> list[bool]:
        start = time.perf_counter()
        try:
            return original(store, rows)
        finally:
            spent["seconds"] += time.perf_counter() - start
            spent["documents"] += len(rows)

    scoring.store_scores = store_scores
    try:
        yield spent
    finally:
        scoring.store_scores = original


def rescore(label: str, url: str, archive: str | None, executor: Any, total: int) -> dict[str, Any]:
    store = open_store(url)
    ruleset = load_ruleset()
    gc.collect()
    digest = hashlib.sha256()
    with timed_writes() as writes, ConnectionSampler(url) as connections, MemorySampler() as memory, _bar(f"re-scoring ({label})") as (progress, task):
        progress.update(task, total=total)
        start = time.perf_counter()
        counts = {"runs": 0, "written": 0}

        def seen(outcome: Any) -> None:
            digest.update(outcome.document.canonical)
            counts["runs"] += 1
            counts["written"] += outcome.written

        score_many(store, None, ruleset, executor=executor, archive=archive,
                   on_events=lambda n: progress.advance(task, n), on_outcome=seen, collect=False)
        elapsed = time.perf_counter() - start
    store.close()
    return {"label": label, "seconds": elapsed, "events_per_s": total / elapsed, "runs": counts["runs"],
            "written": counts["written"], "documents_sha256": digest.hexdigest(),
            "writer_seconds": writes["seconds"], **memory.summary(), **connections.summary()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--small", action="store_true", help="200 runs / 200,000 events: a quick look.")
    parser.add_argument("--keep", type=Path, help="Keep the database and archive here (reused when present).")
    parser.add_argument("--ray-address", default="local", help="local (start a cluster here), auto, ray://HOST:PORT")
    parser.add_argument("--ray-cpus", type=int, default=2)
    parser.add_argument("--skip-ray", action="store_true")
    parser.add_argument("--passes", default="1,2,ray",
                        help="Re-scoring passes, in order: 1, 2, ray (from the archive); store-1, store-2, "
                             "store-ray (from the database's tables).")
    parser.add_argument("--db", help="Build in this database (e.g. a PostgreSQL URL) instead of a SQLite file; "
                                     "it must be empty, or hold the runs of an earlier --keep run.")
    args = parser.parse_args()
    if args.small:
        args.runs, args.events = 200, 200_000
    work = args.keep or Path(tempfile.mkdtemp(prefix="procgrade-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    url = args.db or f"sqlite:///{work}/scale.db"
    if url.startswith("postgres"):  # every connection of this bench (driver and workers) is counted
        url += ("&" if "?" in url else "?") + f"application_name={APPLICATION}"
    archive = str(work / "archive")
    total = (args.events // args.runs) * args.runs
    report: dict[str, Any] = {"runs": args.runs, "events": total, "cpus": os.cpu_count()}
    try:
        built = (work / "built").exists()
        if not built:
            seconds = build(url, work, args.runs, args.events)
            report["build"] = {"seconds": seconds, "events_per_s": total / seconds}
            console.print(f"built and sealed {total:,} events in {args.runs:,} runs: {seconds:.1f} s "
                          f"({total / seconds:,.0f} events/s)")
            (work / "built").write_text(url)
        if (work / "scale.db").exists():
            report["database_mb"] = (work / "scale.db").stat().st_size / 2**20
        if not (work / "archive" / "archive.json").exists():
            store = open_store(url)
            start = time.perf_counter()
            with _bar("archiving") as (progress, task):
                progress.update(task, total=total)
                export_archive(store, archive, progress=lambda _r, n: progress.advance(task, n))
            seconds = time.perf_counter() - start
            store.close()
            report["export"] = {"seconds": seconds, "events_per_s": total / seconds}
            console.print(f"archived in {seconds:.1f} s ({total / seconds:,.0f} events/s)")
        report["archive_mb"] = sum(f.stat().st_size for f in (work / "archive").rglob("*")) / 2**20
        passes = []
        for name in args.passes.split(","):
            source = None if name.startswith("store-") else archive
            name = name.removeprefix("store-")
            if name == "ray":
                if args.skip_ray:
                    continue
                executor: Any = RayExecutor(args.ray_address, init_options={"num_cpus": args.ray_cpus}
                                            if args.ray_address == "local" else None)
                label = f"ray, {executor.workers} CPUs"
            else:
                executor = LocalExecutor(int(name))
                label = f"local, {name} worker{'s' if name != '1' else ''}"
            if source is None:
                label += ", from the database"
            with executor:
                result = rescore(label, url, source, executor, total)
            passes.append(result)
            console.print(f"{label}: {result['seconds']:.1f} s, {result['events_per_s']:,.0f} events/s, "
                          f"{result['written']} documents written, driver writing {result['writer_seconds']:.1f} s")
        report["rescore"] = passes
        digests = {p["documents_sha256"] for p in passes}
        report["identical_documents"] = len(digests) == 1
        report["projection"] = projection(report, passes)
        print(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode())
        if len(digests) != 1:
            raise SystemExit("score documents differ between passes")
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


def projection(report: dict[str, Any], passes: list[dict[str, Any]]) -> dict[str, Any]:
    """100 nodes x 16 cores from the measured per-worker rate and the measured serial writer.

    Parallel: reading each run's Parquet file and evaluating the rules (per worker rate measured
    here with 1 worker). Serial: the driver storing one document per run (measured writer
    seconds per document on the first pass, which inserts) and handing out tasks. Assumed: the
    archive's object store serves every node at the per-worker read rate (Parquet files of
    ~50-100 KB per 1,000-event run), and scheduling stays < 1 ms per task."""
    one = next((p for p in passes if p["label"].startswith("local, 1 ")), passes[0] if passes else None)
    if one is None:
        return {}
    per_worker = one["events_per_s"] * one["seconds"] / max(1e-9, one["seconds"] - one["writer_seconds"])
    inserting = next((p for p in passes if p["written"]), one)
    per_document = inserting["writer_seconds"] / max(1, inserting["runs"])
    cores = 100 * 16
    events, runs = report["events"], report["runs"]
    from procgrade.engine.executors import MIN_TASK_EVENTS

    # No task is smaller than MIN_TASK_EVENTS, so a small archive cannot use every core.
    parallel = max(events / (per_worker * cores), min(events, MIN_TASK_EVENTS) / per_worker)
    serial = runs * per_document
    return {
        "assumed_nodes": 100, "assumed_cores_per_node": 16,
        "per_worker_events_per_s": per_worker,
        "serial_writer_seconds_per_document": per_document,
        "this_archive_seconds": max(parallel, serial),
        "parallel_part_seconds": parallel, "serial_part_seconds": serial,
        "archive_of_100M_events_in_100k_runs_seconds": max(parallel * 10, serial * 10),
        "bound_by": "the single writer" if serial > parallel else "scoring",
    }


if __name__ == "__main__":
    main()
