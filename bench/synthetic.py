"""Synthetic native runs for benchmarks: realistic kinds, sizes and payloads, deterministic."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator
from pathlib import Path

import orjson

_COMMANDS = ["pytest -q", "npm test", "ls -la", "cat app/api.py", "git status", "python -m app", "make build"]
_PATHS = [f"app/module_{i}.py" for i in range(40)] + [f"tests/test_{i}.py" for i in range(20)]


def synthetic_run(run_id: str, n_events: int, seed: int) -> Iterator[dict]:
    rng = random.Random(seed)
    yield {"run_id": run_id, "seq": 0, "event_id": f"{run_id}/0", "ts": "2026-11-01T00:00:00Z",
           "kind": "run_started", "actor": "harness", "harness": {"name": "bench", "version": "1"},
           "model": f"model-{seed % 4}", "task_id": f"task-{seed % 10}"}
    stage = 0
    for seq in range(1, n_events):
        base = {"run_id": run_id, "seq": seq, "event_id": f"{run_id}/{seq}", "ts": "2026-11-01T00:00:01Z",
                "actor": "agent", "stage": stage}
        roll = rng.random()
        if seq == n_events - 1:
            base.update(kind="run_ended", actor="harness", status="completed")
            base.pop("stage")
        elif roll < 0.25:
            cmd = rng.choice(_COMMANDS)
            code = rng.choice((0, 0, 0, 1))
            base.update(kind="command", command=cmd, exit_code=code, duration_ms=rng.randrange(5, 9000),
                        output_sha256=hashlib.sha256(f"{seq}".encode()).hexdigest(),
                        payload={"tool": "bash", "call_id": f"call_{seq}", "exit": code})
        elif roll < 0.45:
            base.update(kind="file_read", path=rng.choice(_PATHS), payload={"tool": "read", "call_id": f"call_{seq}"})
        elif roll < 0.65:
            base.update(kind="file_edit", path=rng.choice(_PATHS), edit_kind="modify",
                        payload={"tool": "str_replace", "call_id": f"call_{seq}", "lines": rng.randrange(1, 80)})
        elif roll < 0.75:
            failed = rng.choice((0, 0, 1, 3))
            base.update(kind="test_run", command="pytest -q", passed=rng.randrange(1, 200), failed=failed,
                        exit_code=1 if failed else 0, payload={"call_id": f"call_{seq}"})
        elif roll < 0.97:
            base.update(kind="message", text="Next I will look at the failing assertion and fix the handler.",
                        payload={"role": "assistant", "tokens": rng.randrange(10, 4000)})
        elif roll < 0.99:
            stage += 1
            base.update(kind="stage_started", actor="harness", stage=stage, spec_ref=f"specs/stage-{stage}.md")
        else:
            base.update(kind="completion_claim", claim="stage done", scope="stage")
        yield base


def write_native(directory: Path, n_events: int, n_runs: int) -> list[Path]:
    """Write ``n_runs`` runs totalling ``n_events`` into one JSONL file per run."""
    directory.mkdir(parents=True, exist_ok=True)
    per_run = n_events // n_runs
    paths = []
    for r in range(n_runs):
        path = directory / f"run-{r:04d}.jsonl"
        with path.open("wb") as handle:
            handle.writelines(orjson.dumps(e) + b"\n" for e in synthetic_run(f"bench-{r:04d}", per_run, r))
        paths.append(path)
    return paths


def large_payload_run(run_id: str, n_events: int, seed: int, min_kb: int = 10, max_kb: int = 100) -> Iterator[dict]:
    """A run whose commands carry whole tool outputs (``min_kb``..``max_kb`` KB of log text) in their
    payloads, as harness logs of test suites and builds do."""
    rng = random.Random(seed)
    yield {"run_id": run_id, "seq": 0, "event_id": f"{run_id}/0", "ts": "2026-11-01T00:00:00Z",
           "kind": "run_started", "actor": "harness", "harness": {"name": "bench", "version": "1"},
           "model": f"model-{seed % 4}", "task_id": f"task-{seed % 10}"}
    for seq in range(1, n_events):
        size = rng.randrange(min_kb, max_kb + 1) * 1024
        lines, total = [], 0
        while total < size:
            path = rng.choice(_PATHS)
            text = (f"{path}::test_case_{rng.randrange(1000)} {rng.choice(('PASSED', 'PASSED', 'FAILED', 'SKIPPED'))}"
                    f" [{rng.randrange(100):>3}%] ({rng.randrange(1, 9000)} ms)")
            lines.append(text)
            total += len(text) + 1
        yield {"run_id": run_id, "seq": seq, "event_id": f"{run_id}/{seq}", "ts": "2026-11-01T00:00:01Z",
               "actor": "agent", "kind": "command", "command": rng.choice(_COMMANDS), "exit_code": 0,
               "duration_ms": rng.randrange(5, 9000),
               "payload": {"tool": "bash", "call_id": f"call_{seq}", "output": "\n".join(lines)}}


def write_large_payloads(directory: Path, n_events: int, n_runs: int) -> list[Path]:
    """Like :func:`write_native`, with :func:`large_payload_run` runs."""
    directory.mkdir(parents=True, exist_ok=True)
    per_run = n_events // n_runs
    paths = []
    for r in range(n_runs):
        path = directory / f"large-{r:04d}.jsonl"
        with path.open("wb") as handle:
            handle.writelines(orjson.dumps(e) + b"\n" for e in large_payload_run(f"large-{r:04d}", per_run, r))
        paths.append(path)
    return paths
