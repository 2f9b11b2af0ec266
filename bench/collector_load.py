"""Bounded load on the collector: writers append batches to their own runs; prints events/s and latency.

    python bench/collector_load.py --db sqlite:///load.db [--writers 4 --events 20000 --batch 50 --max-seconds 60]
    python bench/collector_load.py --url http://127.0.0.1:8765 --token pgt_... --project load/

With ``--db`` it starts a collector on a free loopback port over that database and makes a
token; both the event count and the seconds are capped.
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from procgrade.engine.recorder import record  # noqa: E402


def load(url: str, token: str, *, project: str, writers: int, events: int, batch: int, max_seconds: float) -> dict[str, Any]:
    """Each writer records ``events // writers`` commands into ``<project>run-<w>`` in batches of ``batch``."""
    latencies: list[float] = []
    sent = [0] * writers
    lock = threading.Lock()
    failures: list[BaseException] = []
    deadline = time.monotonic() + max_seconds
    stamp = time.strftime("%Y%m%dT%H%M%S")

    def write(w: int) -> None:
        try:
            started = time.perf_counter()
            rec = record(f"{project}run-{w}" if project.endswith(("/", ":")) else f"{project}/run-{w}", url,
                         token=token, harness="load", clock=None, batch_size=10**9, labels={"at": stamp})
            with lock:
                latencies.append(time.perf_counter() - started)
            for i in range(events // writers):
                rec.command(command=f"step {i}", exit_code=0)
                if len(rec.pending) >= batch:
                    t0 = time.perf_counter()
                    rec.flush()
                    with lock:
                        latencies.append(time.perf_counter() - t0)
                        sent[w] += batch
                    if time.monotonic() > deadline:
                        rec.pending.clear()
                        break
            if rec.pending:
                t0 = time.perf_counter()
                n = len(rec.pending)
                rec.flush()
                with lock:
                    latencies.append(time.perf_counter() - t0)
                    sent[w] += n
            rec.close()
        except BaseException as exc:
            failures.append(exc)

    t_start = time.perf_counter()
    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t_start
    if failures:
        raise failures[0]
    ordered = sorted(latencies)

    def pct(p: float) -> float:
        return ordered[min(len(ordered) - 1, int(p * len(ordered)))] * 1000

    total = sum(sent)
    return {"events": total, "requests": len(ordered), "seconds": elapsed, "events_per_second": total / elapsed,
            "p50_ms": pct(0.50), "p99_ms": pct(0.99), "max_ms": ordered[-1] * 1000}


def _spawn(db: str) -> tuple[subprocess.Popen[bytes], str, str]:
    from procgrade.engine.store import open_store
    from procgrade.engine.tokens import TokenStore

    store = open_store(db, create=True)
    token, _ = TokenStore(store.engine).create("load/", "write", "bench")
    store.close()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "procgrade.engine.collector", "--db", db, "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            urllib.request.urlopen(url + "/readyz", timeout=1)
            break
        except OSError:
            time.sleep(0.1)
    return proc, url, token


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db")
    parser.add_argument("--url")
    parser.add_argument("--token")
    parser.add_argument("--project", default="load/")
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--max-seconds", type=float, default=60)
    args = parser.parse_args()
    proc = None
    if args.db:
        proc, url, token = _spawn(args.db)
    else:
        url, token = args.url, args.token
    try:
        report = load(url, token, project=args.project, writers=args.writers, events=min(args.events, 1_000_000),
                      batch=args.batch, max_seconds=min(args.max_seconds, 600))
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait()
    print(f"{report['events']} events in {report['requests']} requests, {report['seconds']:.2f} s: "
          f"{report['events_per_second']:.0f} events/s, latency p50 {report['p50_ms']:.1f} ms, "
          f"p99 {report['p99_ms']:.1f} ms, max {report['max_ms']:.1f} ms")


if __name__ == "__main__":
    main()
