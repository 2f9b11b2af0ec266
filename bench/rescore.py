"""Re-scoring benchmark: the default rule set over >= 1,000,000 stored events, against a bare
read of the same typed columns from the store.

Run by hand: ``python bench/rescore.py [--events 1000000] [--runs 100]``. Prints, side by side
in one run on the same database: the bare column read, the monitor alone on rows already in
memory, and the full re-score (read + monitor + canonical score document), as events/s, with
the ratio of re-score to bare read.
"""

from __future__ import annotations

import argparse
import gc
import sys
import tempfile
import time
from collections import deque
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.synthetic import write_native  # noqa: E402
from procgrade.engine.ingest import ingest_native  # noqa: E402
from procgrade.engine.rescoring import compute_score  # noqa: E402
from procgrade.engine.store import open_store  # noqa: E402
from procgrade.engine.store.scores import ScoreStore  # noqa: E402
from procgrade.rules.identity import ruleset_hash  # noqa: E402
from procgrade.rules.loading import load_ruleset  # noqa: E402
from procgrade.rules.monitor import RunMonitor  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--db", help="Use this existing database instead of building one (SQLAlchemy URL).")
    args = parser.parse_args()
    ruleset = load_ruleset()
    digest = ruleset_hash(ruleset)
    with tempfile.TemporaryDirectory(prefix="procgrade-rescore-") as tmp:
        url = args.db or f"sqlite:///{tmp}/bench.db"
        store = open_store(url, create=True)
        if not args.db:
            start = time.perf_counter()
            ingest_native(store, write_native(Path(tmp) / "native", args.events, args.runs))
            print(f"built {args.events:,} events in {args.runs} runs in {time.perf_counter() - start:.1f} s")
        run_ids = [info.run_id for info in store.runs()]
        total = sum(info.event_count for info in store.runs())
        scores = ScoreStore(store)
        gc.collect()

        start = time.perf_counter()
        for run_id in run_ids:
            deque(scores.fact_rows(run_id), maxlen=0)
        bare = time.perf_counter() - start

        in_memory = [list(scores.fact_rows(run_id)) for run_id in run_ids]
        start = time.perf_counter()
        for rows in in_memory:
            monitor = RunMonitor(ruleset, detail=False)
            monitor.feed(rows)
            monitor.finish()
        monitor_only = time.perf_counter() - start
        del in_memory

        start = time.perf_counter()
        for run_id in run_ids:
            compute_score(store, ruleset, run_id, digest=digest)
        full = time.perf_counter() - start
        store.close()

    print(f"{total:,} events, {len(ruleset.rules)} rules, one core")
    print(f"{'step':<34} {'seconds':>8} {'events/s':>12}")
    for name, seconds in (("bare read of typed columns", bare), ("monitor on in-memory rows", monitor_only),
                          ("re-score (read + monitor + doc)", full)):
        print(f"{name:<34} {seconds:>8.2f} {total / seconds:>12,.0f}")
    print(f"re-score / bare read: {full / bare:.2f}x the time")


if __name__ == "__main__":
    main()
