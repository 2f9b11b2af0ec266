"""Memory at scale: one native file of millions of tiny events, ingested, scored and reported.

Run by hand: ``python bench/huge_run.py --events 2000000 [--postgres URL] [--steps ingest,score,report]``.
Each step is a ``procgrade`` process run under ``/usr/bin/time -v``; the script prints its
peak resident memory and wall time, and the ratio of the peak to the limit the issue sets
(ingest under 1 GB, report under 500 MB). The input is generated once, deterministically.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
LIMITS_MB = {"ingest": 1024, "score": 1024, "report": 500}


def write_tiny_run(path: Path, n_events: int, run_id: str = "huge") -> Path:
    """One run of ``n_events`` tiny events (about 110 bytes a line)."""
    with path.open("wb") as handle:
        handle.write(orjson.dumps({"run_id": run_id, "seq": 0, "event_id": f"{run_id}/0", "kind": "run_started",
                                   "actor": "harness", "harness": {"name": "bench", "version": "1"},
                                   "model": "m", "task_id": "t"}) + b"\n")
        for seq in range(1, n_events - 1):
            if seq % 3:
                event = {"run_id": run_id, "seq": seq, "event_id": f"{run_id}/{seq}", "kind": "message",
                         "actor": "agent", "text": "ok"}
            else:
                event = {"run_id": run_id, "seq": seq, "event_id": f"{run_id}/{seq}", "kind": "command",
                         "actor": "agent", "command": "make", "exit_code": seq % 2}
            handle.write(orjson.dumps(event) + b"\n")
        handle.write(orjson.dumps({"run_id": run_id, "seq": n_events - 1, "event_id": f"{run_id}/{n_events - 1}",
                                   "kind": "run_ended", "actor": "harness", "status": "completed"}) + b"\n")
    return path


def measured(step: str, args: list[str]) -> tuple[float, str]:
    """Run ``procgrade args`` under /usr/bin/time -v; return (peak RSS in MB, wall time)."""
    command = ["/usr/bin/time", "-v", str(Path(sys.executable).with_name("procgrade")), *args]
    print("$", " ".join(command), flush=True)
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    if done.returncode:
        print(done.stdout[-2000:], done.stderr[-4000:], sep="\n")
        raise SystemExit(f"{step} failed")
    peak_kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr).group(1))
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)", done.stderr).group(1)
    return peak_kb / 1024, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=2_000_000)
    parser.add_argument("--postgres", help="A PostgreSQL URL to measure too (an empty database or schema).")
    parser.add_argument("--steps", default="ingest,score,report")
    parser.add_argument("--no-sqlite", action="store_true", help="Measure only the PostgreSQL database.")
    parser.add_argument("--keep", type=Path, help="Work in this folder and keep it (default: a temporary one).")
    options = parser.parse_args()
    work = options.keep or Path(tempfile.mkdtemp(prefix="procgrade-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    source = work / f"tiny-{options.events}.jsonl"
    if not source.exists():
        write_tiny_run(source, options.events)
    print(f"input: {source} ({source.stat().st_size / 2**20:.0f} MB, {options.events} events)")
    databases = ([] if options.no_sqlite else [f"sqlite:///{work}/scale.db"]) + ([options.postgres] if options.postgres else [])
    steps = options.steps.split(",")
    for db in databases:
        kind = db.split(":", 1)[0]
        commands = {
            "ingest": ["ingest", "--format", "native", "--db", db, str(source)],
            "score": ["score", "huge", "--db", db],
            "report": ["report", "--html", str(work / f"report-{kind.split('+')[0]}.html"), "--db", db],
        }
        for step in steps:
            peak, wall = measured(step, commands[step])
            limit = LIMITS_MB[step]
            print(f"{kind:>20} {step:>7}: peak RSS {peak:7.0f} MB, {peak / limit:.2f} of the {limit} MB limit, "
                  f"wall {wall}", flush=True)
    if options.keep is None:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
