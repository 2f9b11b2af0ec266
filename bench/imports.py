"""Import benchmark: harness logs -> store, against native ingest of the very same events.

Run by hand (``make bench-import`` or ``python bench/imports.py --copies 200``). The
bundled OpenHands evaluation output (three real runs) and a Claude Code session are
copied ``--copies`` times under fresh ids, imported with ``--format auto`` into a fresh
SQLite store, exported as native JSONL and ingested again into a second store: the
ratio is what reading a harness format costs over reading procgrade's own.
Both sides run in the same process, one after the other.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from procgrade.engine.ingest import ingest_native, ingest_paths  # noqa: E402
from procgrade.engine.native import dump_native  # noqa: E402
from procgrade.engine.store import open_store  # noqa: E402

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "imports"


def write_inputs(folder: Path, copies: int) -> None:
    eval_lines = (FIXTURES / "openhands" / "multi_swe_bench_output.jsonl").read_text().splitlines()
    with (folder / "output.jsonl").open("w") as handle:
        for copy in range(copies):
            for line in eval_lines:
                record = json.loads(line)
                record["instance_id"] = f"{record['instance_id']}-copy{copy}"
                handle.write(json.dumps(record) + "\n")
    session = (FIXTURES / "claude-code" / "sidechain_integrated.jsonl").read_text()
    sessions = folder / "claude"
    sessions.mkdir()
    original = json.loads(session.splitlines()[0])["sessionId"]
    for copy in range(copies):
        fresh = f"{original[:-12]}{copy:012d}"
        (sessions / f"{fresh}.jsonl").write_text(session.replace(original, fresh))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--copies", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        inputs = root / "in"
        inputs.mkdir()
        write_inputs(inputs, args.copies)

        imported = open_store(f"sqlite:///{root / 'imported.db'}", create=True)
        start = time.perf_counter()
        done = ingest_paths(imported, [inputs])
        import_seconds = time.perf_counter() - start
        events = sum(r.result.appended for r in done.reports)

        exported = root / "exported.jsonl"
        with exported.open("wb") as handle:
            for info in imported.runs():
                handle.writelines(dump_native(imported.events(info.run_id)))
        native = open_store(f"sqlite:///{root / 'native.db'}", create=True)
        start = time.perf_counter()
        ingest_native(native, [exported])
        native_seconds = time.perf_counter() - start
        imported.close()
        native.close()

    print(f"{len(done.reports)} runs, {events} events")
    print(f"import (harness formats): {events / import_seconds:10,.0f} events/s  ({import_seconds:.2f} s)")
    print(f"native ingest, same events: {events / native_seconds:8,.0f} events/s  ({native_seconds:.2f} s)")
    print(f"import / native time: {import_seconds / native_seconds:.2f}x")


if __name__ == "__main__":
    main()
