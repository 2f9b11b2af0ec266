"""All benches in one run (``make bench``): one table of ratios, CPU time and peak memory.

Each bench runs as its own process under ``/usr/bin/time``, one after the other on the same
machine, with sizes small enough that the whole suite takes four to five minutes on two shared
cores; the ratios each bench prints (procgrade's path against the bare limit measured in the
same process) go into the table. Start-up is measured here: ``procgrade --help`` and
``procgrade runs`` against ``python -c pass``, interleaved, median of five each. On a loaded
machine read the CPU columns, not the wall clock.

    python bench/suite.py [--quick] [--only ingest,startup] [--pg URL | --skip-postgres]
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PG = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
# The figures worth a table cell: ratios ("0.29x"), peak-memory lines and throughput lines.
_KEEP = re.compile(r"\d+\.\d+x|peak RSS|events/s, latency")


def benches(quick: bool, pg: str | None, work: Path) -> list[tuple[str, list[str]]]:
    """(name, arguments to bench/<script>) for each bench; ``quick`` shrinks every size by ~5x."""
    scale = 5 if quick else 1
    ingest = ["--events", str(200_000 // scale), "--runs", "20"] + (["--pg", pg] if pg else ["--skip-postgres"])
    return [
        ("ingest", ["ingest.py", *ingest]),
        ("rescore", ["rescore.py", "--events", str(200_000 // scale), "--runs", "100", "--no-compare"]),
        ("rescore small runs", ["rescore.py", "--compare-only", "--small", f"{10_000 // scale}x35",
                                "--large", f"{100 // scale}x3500"]),
        ("canonical", ["canonical.py", "--payloads", str(20_000 // scale)]),
        ("imports", ["imports.py", "--copies", str(40 // scale)]),
        ("inspect_score", ["inspect_score.py", "--samples", str(500 // scale), "--rounds", "2" if quick else "3"]),
        ("accept", ["accept.py", "-n", str(max(2, 5 // scale)), "--backend", "local"]),
        ("huge_run", ["huge_run.py", "--events", str(200_000 // scale)]),
        ("report", ["report.py", "--repeats", "1" if quick else "3"]),
        ("collector_load", ["collector_load.py", "--db", f"sqlite:///{work}/collector.db",
                            "--events", str(10_000 // scale), "--max-seconds", "60"]),
    ]


def timed(command: list[str], *, cwd: Path = ROOT) -> tuple[float, float, float, str, int]:
    """Run ``command`` under /usr/bin/time: (wall s, CPU s = user + system, peak RSS MB, stdout, exit code)."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as out:
        done = subprocess.run(["/usr/bin/time", "-o", out.name, "-f", "%e %U %S %M", *command],
                              capture_output=True, text=True, cwd=cwd)
        wall, user, system, peak_kb = out.read().split()[-4:]
    if done.returncode:
        sys.stderr.write(done.stdout[-2000:] + done.stderr[-4000:])
    return float(wall), float(user) + float(system), int(peak_kb) / 1024, done.stdout, done.returncode


def startup(procgrade: str, db: str, repeats: int) -> list[tuple[str, str, float, float, float]]:
    """Interleaved start-up runs: (name, what it was measured against, median wall, median CPU, max peak MB)."""
    subprocess.run([procgrade, "init", "--db", db], check=True, capture_output=True, cwd=ROOT)
    commands = {"python -c pass": [sys.executable, "-c", "pass"],
                "procgrade --help": [procgrade, "--help"],
                "procgrade runs": [procgrade, "runs", "--db", db]}
    seen: dict[str, list[tuple[float, float, float]]] = {name: [] for name in commands}
    for _ in range(repeats):
        for name, command in commands.items():
            wall, cpu, peak, _, code = timed(command)
            if code:
                raise SystemExit(f"{name} failed")
            seen[name].append((wall, cpu, peak))
    rows = []
    for name, samples in seen.items():
        rows.append((name, f"median of {repeats}", statistics.median(s[0] for s in samples),
                     statistics.median(s[1] for s in samples), max(s[2] for s in samples)))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="About five times smaller sizes (a smoke run).")
    parser.add_argument("--only", help="Comma-separated bench names (ingest, rescore, ..., startup).")
    parser.add_argument("--pg", default=PG, help=f"PostgreSQL URL for the ingest bench (default {PG}).")
    parser.add_argument("--skip-postgres", action="store_true")
    parser.add_argument("--repeats", type=int, default=5, help="Start-up runs of each command.")
    args = parser.parse_args()
    only = set(args.only.split(",")) if args.only else None
    # Measure what a user's shell sees: Python caches compiled modules, so each command does not
    # compile procgrade's source again (a sandbox may set PYTHONDONTWRITEBYTECODE; the benches'
    # processes inherit this environment). Compile once now, so the first start-up does not pay it.
    if os.environ.pop("PYTHONDONTWRITEBYTECODE", None) is not None:
        print("note: PYTHONDONTWRITEBYTECODE was set; unset for the benches (modules are cached as usual)")
    subprocess.run([sys.executable, "-m", "compileall", "-q", "-x", r"/(\.venv|tests|bench)/", str(ROOT)],
                   check=False, capture_output=True)
    procgrade = str(Path(sys.executable).with_name("procgrade"))
    began = time.perf_counter()
    rows: list[tuple[str, float, float, float, str]] = []
    with tempfile.TemporaryDirectory(prefix="procgrade-suite-") as tmp:
        work = Path(tmp)
        for name, command in benches(args.quick, None if args.skip_postgres else args.pg, work):
            if only and name not in only and name.split()[0] not in only:
                continue
            print(f"$ python bench/{' '.join(command)}", flush=True)
            wall, cpu, peak, out, code = timed([sys.executable, str(ROOT / "bench" / command[0]), *command[1:]])
            sys.stdout.write(out)
            kept = [" ".join(line.split()) for line in out.splitlines() if _KEEP.search(line)]
            rows.append((name, wall, cpu, peak, "FAILED" if code else "; ".join(kept)))
        if not only or "startup" in only:
            print("$ start-up: python -c pass, procgrade --help, procgrade runs (interleaved)", flush=True)
            measured = startup(procgrade, f"sqlite:///{work}/startup.db", args.repeats)
            base_wall, base_cpu = measured[0][2], measured[0][3]
            for name, how, wall, cpu, peak in measured:
                note = how if name == "python -c pass" else f"{how}; +{wall - base_wall:.2f} s wall, +{cpu - base_cpu:.2f} s CPU over python -c pass"
                rows.append((f"start-up: {name}", wall, cpu, peak, note))

    print()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, {platform.system()} {platform.release()}, "
          f"Python {platform.python_version()}, load average {os.getloadavg()[0]:.1f}; "
          f"suite {time.perf_counter() - began:.0f} s")
    print(f"| {'bench':<26} | {'wall s':>7} | {'CPU s':>7} | {'peak MB':>7} | result")
    print(f"|{'-' * 28}|{'-' * 9}|{'-' * 9}|{'-' * 9}|{'-' * 8}")
    for name, wall, cpu, peak, result in rows:
        print(f"| {name:<26} | {wall:>7.2f} | {cpu:>7.2f} | {peak:>7.0f} | {result}")


if __name__ == "__main__":
    main()
