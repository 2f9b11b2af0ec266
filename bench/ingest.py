"""Ingest benchmark: native JSONL -> store, against a bare bulk insert of the same rows.

Run by hand (``make bench-ingest`` or ``python bench/ingest.py --events 1000000``).
Prints events/s of ``procgrade ingest``'s library path for SQLite and PostgreSQL,
next to the bare limit: the store's own bulk insert (on SQLite, INSERT statements of many rows
each; on PostgreSQL, COPY (FORMAT BINARY)) of the very same prepared rows in one transaction,
and the ratio between them.
Both sides run in the same process, interleaved, on the same machine; each side's best of
``--repeats`` runs (default 3) is compared, and each round's own ratio is printed beside it (the
scatter a reader should see).
Then the large-payload case: command events carrying 10-100 KB tool outputs, in MB/s
of input against the 30 MB/s target (issue 16). The ingest side's CPU time counts its
worker processes too (``PROCGRADE_INGEST_WORKERS`` sets how many; 0: none).

Each database then gets two lines: the CPU each side's best round used (the writer thread, the
workers, the local PostgreSQL server's processes), and the ceiling that CPU allows on this
machine's cores: the bare insert's wall time over the least wall time the ingest's CPU could
take, with no core ever idle (:func:`ceiling`). A ratio can then be read against what the cores
allow, not only against the target.
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.synthetic import write_large_payloads, write_native  # noqa: E402
from bench.targets import verdict  # noqa: E402
from procgrade.engine.chain import GENESIS  # noqa: E402
from procgrade.engine.cores import usable_cores  # noqa: E402
from procgrade.engine.ingest import ingest_native  # noqa: E402
from procgrade.engine.native import read_native  # noqa: E402
from procgrade.engine.store import open_store  # noqa: E402
from procgrade.engine.stored import to_stored  # noqa: E402


def prepared_rows(paths: list[Path]) -> list[tuple]:
    rows = []
    for path in paths:
        for run in read_native(path):
            prev = GENESIS
            for event in run.events:
                stored = to_stored(event, prev)
                prev = stored.hash
                rows.append(stored.row)
    return rows


def run_rows(rows: list[tuple]) -> list[tuple]:
    """One runs-table row per run, so the foreign key holds for the bare insert."""
    seen: dict[str, int] = {}
    for row in rows:
        seen[row[0]] = seen.get(row[0], 0) + 1
    return [(run_id, count) for run_id, count in seen.items()]


#: Issue 16's target for native ingest against the bare insert, on both databases.
TARGET = 0.7


def _cpu() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _own_cpu() -> float:
    """This thread's CPU seconds (the writer's: the one thread whose work, in order, no other core
    can take; the worker pool's helper threads in this process are not counted)."""
    return time.thread_time()


def server_cpu() -> dict[int, float] | None:
    """CPU seconds so far of each process of the local PostgreSQL server, by pid (Linux's /proc),
    or None where /proc cannot tell: the server's share of a COPY, which neither side's rusage counts."""
    ticks = os.sysconf("SC_CLK_TCK")
    found: dict[int, float] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return None
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                stat = handle.read()
        except OSError:  # gone meanwhile, or not ours to read
            continue
        name, _, rest = stat.partition("(")[2].rpartition(")")
        if name == "postgres":
            fields = rest.split()
            found[int(entry)] = (int(fields[11]) + int(fields[12])) / ticks  # utime, stime
    return found or None


def local_server(url: str) -> bool:
    """Is the server at ``url`` on this machine (a loopback address or a Unix socket)? Only then
    are its processes the ones :func:`server_cpu` reads."""
    from sqlalchemy.engine import make_url

    host = make_url(url).host or make_url(url).query.get("host")
    return host in (None, "", "localhost", "127.0.0.1", "::1") or str(host).startswith("/")


def server_cpu_since(before: dict[int, float] | None) -> float | None:
    """The server's CPU seconds since ``before`` (:func:`server_cpu`): its processes alive now,
    so a side must take this before it closes its connection (its backend ends with it); None
    where ``before`` is (not measured), without reading /proc again."""
    after = server_cpu() if before is not None else None
    if before is None or after is None:
        return None
    return sum(seconds - before.get(pid, 0.0) for pid, seconds in after.items())


def least_wall(writer: float, total: float, server: float | None, cores: int) -> tuple[float, str]:
    """The least wall time an ingest's CPU could take on ``cores`` cores, and what sets it: the
    most of ``total / cores`` (every core busy all the time), the writer thread's own CPU (its
    checks, chaining and insert are in order) and the server's (one backend per connection)."""
    return max((total / cores, f"its {total:.2f} s of CPU on {cores} cores, none idle"),
               (writer, "the writer thread's own CPU"), (server or 0.0, "the server's CPU"))


def ceiling(bare_wall: float, writer: float, total: float, server: float | None, cores: int) -> float:
    """The highest ingest/bare ratio the CPU the ingest used allows: the bare insert's wall time
    over :func:`least_wall`."""
    return bare_wall / least_wall(writer, total, server, cores)[0]


#: Per side, the CPU seconds of its last measurement: this process and its workers, this process
#: alone, and the database server's (None: not measured, or not readable here).
cpu_detail: dict[str, tuple[float, float, float | None]] = {}


def bare_insert(url: str, rows: list[tuple], server: bool = False) -> float:
    """The limit: the store's own bulk path (INSERT statements of many rows each on SQLite,
    COPY BINARY on PostgreSQL) fed the already prepared rows, in one transaction of the kind
    ingest writes in (on SQLite, a new store's first load without the WAL), with no parsing,
    validation or hashing."""
    store = open_store(url, create=True)
    gc.disable()
    served = server_cpu() if server else None
    cpu, own = _cpu(), _own_cpu()
    start = time.perf_counter()
    with store._write_transaction(bulk=True) as tx:
        tx.executemany(store._sql("INSERT INTO runs (run_id, event_count) VALUES (?, ?)"), run_rows(rows))
        store._insert_rows(tx, rows)
    elapsed = time.perf_counter() - start
    cpu_detail["bare"] = (_cpu() - cpu, _own_cpu() - own, server_cpu_since(served))
    gc.enable()
    store.close()
    return elapsed


def timed_ingest(url: str, paths: list[Path], server: bool = False) -> float:
    store = open_store(url, create=True)
    served = server_cpu() if server else None
    cpu, own = _cpu(), _own_cpu()
    start = time.perf_counter()
    ingest_native(store, paths)
    elapsed = time.perf_counter() - start
    cpu_detail["ingest"] = (_cpu() - cpu, _own_cpu() - own, server_cpu_since(served))
    store.close()
    return elapsed



def large_payloads(tmpdir: Path, args: argparse.Namespace) -> None:
    """Native ingest of command events with 10-100 KB outputs: MB/s of input file per database."""
    paths = write_large_payloads(tmpdir / "large", args.large_events, args.large_runs)
    megabytes = sum(p.stat().st_size for p in paths) / 1e6
    events = sum(1 for p in paths for _ in p.open("rb"))
    print(f"large payloads: {events:,} events of 10-100 KB in {args.large_runs} runs ({megabytes:.0f} MB)")
    targets = [("sqlite", lambda: timed_ingest(f"sqlite:///{tmpdir}/large.db", paths))]
    if not args.skip_postgres:
        def postgres() -> float:
            schema, url = postgres_schema(args.pg)
            try:
                return timed_ingest(url, paths)
            finally:
                drop_schema(args.pg, schema)
        targets.append(("postgresql", postgres))
    for name, run in targets:
        seconds = run()
        rate = megabytes / seconds
        print(f"large payloads {name:<11} {events / seconds:>9,.0f} ev/s {rate:>7.1f} MB/s of input "
              f"({rate / 30:.2f}x the 30 MB/s target)")


def postgres_schema(base: str) -> tuple[str, str]:
    import psycopg

    schema = f"bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(base.replace("postgresql+psycopg://", "postgresql://"), autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    return schema, f"{base}?options=-csearch_path%3D{schema}"


def drop_schema(base: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(base.replace("postgresql+psycopg://", "postgresql://"), autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--pg", default="postgresql+psycopg://postgres@127.0.0.1:5432/test")
    parser.add_argument("--skip-postgres", action="store_true")
    parser.add_argument("--large-events", type=int, default=1000, help="Events of the large-payload case (0: skip).")
    parser.add_argument("--large-runs", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3,
                        help="Interleaved runs of each side per database; the best of each is compared (default 3).")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="procgrade-bench-") as tmp:
        tmpdir = Path(tmp)
        paths = write_native(tmpdir / "native", args.events, args.runs)
        total = sum(1 for p in paths for _ in p.open("rb"))
        print(f"{total:,} native events in {args.runs} runs ({sum(p.stat().st_size for p in paths) / 1e6:.0f} MB)")
        rows = prepared_rows(paths)

        def sqlite(side: str, attempt: int) -> float:
            url = f"sqlite:///{tmpdir}/{side}-{attempt}.db"
            seconds = timed_ingest(url, paths) if side == "ingest" else bare_insert(url, rows)
            for leftover in tmpdir.glob(f"{side}-{attempt}.db*"):
                leftover.unlink()
            return seconds

        local = local_server(args.pg)

        def postgresql(side: str, attempt: int) -> float:
            schema, url = postgres_schema(args.pg)
            try:
                if side == "ingest":
                    return timed_ingest(url, paths, server=local)
                return bare_insert(url, rows, server=local)
            finally:
                drop_schema(args.pg, schema)

        databases = [("sqlite", sqlite)] + ([] if args.skip_postgres else [("postgresql", postgresql)])
        results = []
        for name, measure in databases:
            # interleaved, best of --repeats each: on a noisy machine one run of either side alone
            # moves the ratio by a third
            best: dict[str, tuple[float, tuple[float, float, float | None]]] = {}
            rounds: list[float] = []  # each round's bare/ingest, its two sides run one after the other
            for attempt in range(args.repeats):
                taken = {}
                for side in ("ingest", "bare"):
                    seconds = taken[side] = measure(side, attempt)
                    if side not in best or seconds < best[side][0]:
                        best[side] = (seconds, cpu_detail[side])
                rounds.append(taken["bare"] / taken["ingest"])
            results.append((name, best["ingest"], best["bare"], rounds))

        print(f"{'database':<11} {'ingest ev/s':>12} {'bare ev/s':>12} {'ingest/bare':>12}")
        for name, (ingest_s, _), (bare_s, _), _rounds in results:
            ratio = bare_s / ingest_s
            print(f"{name:<11} {total / ingest_s:>12,.0f} {total / bare_s:>12,.0f} {ratio:>11.2f}x "
                  f"({verdict(ratio, 'at least', TARGET)})")
        for name, *_, rounds in results:
            print(f"{name:<11} each round's ingest/bare: {', '.join(f'{ratio:.2f}x' for ratio in rounds)}")
        # the CPU each side's best round used (this process, its workers, the server), and what it
        # allows on this machine's cores, whatever else runs beside the bench
        cores = usable_cores()
        for name, (ingest_s, (ingest_cpu, writer, server)), (bare_s, (bare_cpu, _own, bare_server)), _ in results:
            served = "" if server is None else f" + server {server:.2f}"
            bare_served = "" if bare_server is None else f" + server {bare_server:.2f}"
            print(f"{name:<11} CPU s: ingest {ingest_cpu:.2f}{served} (writer thread {writer:.2f}, workers and pool "
                  f"threads {ingest_cpu - writer:.2f}), bare {bare_cpu:.2f}{bare_served}; wall s: ingest "
                  f"{ingest_s:.2f}, bare {bare_s:.2f}")
            if name != "sqlite" and server is None:
                print(f"{name:<11} ceiling: not known (the server's CPU is not read: it is not on this machine, "
                      "or /proc does not show it)")
                continue
            total_cpu = ingest_cpu + (server or 0.0)
            least, bound = least_wall(writer, total_cpu, server, cores)
            print(f"{name:<11} ceiling on {cores} cores: {ceiling(bare_s, writer, total_cpu, server, cores):.2f}x "
                  f"(bare {bare_s:.2f} s wall over the ingest's least, {least:.2f} s: {bound})")
        if args.large_events:
            large_payloads(tmpdir, args)
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} (1 and 5 min)")


if __name__ == "__main__":
    main()
