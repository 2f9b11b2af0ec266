"""Overhead of an acceptance back-end (local or docker) over a bare pytest run of the same suite.

Both sides run the hidden suite of a task on one control workspace (default:
tasks/verrange, reference), alternating, N times each, in this one process:

- bare: copy the workspace and the tests to fresh temporary folders and run the
  manifest's test command with ``/bin/sh`` (as the README's "checking by hand");
- judge: :func:`procgrade.oracles.acceptance.judge` with the local sandbox: copy and hash,
  scans, injection, the isolated run (dedicated uid, namespaces, tmpfs, rlimits),
  report parsing and teardown.

Prints both medians and the ratio, with whether it meets issue 5's target (judge at most 1.3x bare).

With ``--backend docker`` the judge uses the docker sandbox (a fresh container per trial:
volume and container create + start + copy in, inject, exec, supervisor stop, report fetch,
remove), and a third side times one bare docker session step by step (no scan, no
report parsing), printing the median of each step.

    .venv/bin/python bench/accept.py [--task tasks/verrange] [--control reference] [-n 15] [--backend local|docker]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.targets import verdict  # noqa: E402
from procgrade.oracles.acceptance import judge  # noqa: E402
from procgrade.oracles.local_sandbox import LocalSandbox  # noqa: E402
from procgrade.oracles.sandbox import RunSpec, Sandbox  # noqa: E402
from procgrade.oracles.task_package import Task, fill_template, load_task  # noqa: E402

#: Issue 5's target for the local back-end: at most this many times a bare pytest run.
TARGET = 1.3


def bare_run(task: Task, app: Path) -> float:
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-bare-") as tmp:
        root = Path(tmp)
        ws, tests, out = root / "ws", root / "tests", root / "out"
        shutil.copytree(app, ws)
        tests.mkdir()
        out.mkdir()
        for f in task.suite:
            (tests / f.name).write_bytes(f.data)
        command = fill_template(task.tests.test_command, {
            "workspace": str(ws), "test_dir": str(tests), "junit_xml": str(out / "junit.xml"),
            "test_files": [str(tests / n) for n in task.tests.test_files], "python": sys.executable,
        })
        done = subprocess.run(["/bin/sh", "-c", command], cwd=ws, capture_output=True)
        if done.returncode not in (0, 1) or not (out / "junit.xml").exists():
            raise SystemExit(f"bare run failed: {done.stdout.decode()[-500:]}")
    return time.perf_counter() - started


def judge_run(task: Task, app: Path, sandbox: Sandbox, expected: str) -> float:
    started = time.perf_counter()
    result = judge(task, app, sandbox)
    elapsed = time.perf_counter() - started
    if result.reward != expected:
        raise SystemExit(f"judge gave {result.status}/{result.reward}, expected reward {expected}: {result.explanation}")
    return elapsed


def session_steps(task: Task, app: Path, sandbox: Sandbox) -> dict[str, float]:
    """One sandbox session by hand, each step timed (seconds)."""
    steps: dict[str, float] = {}
    t0 = time.perf_counter()
    with sandbox.session() as sb:
        t1 = time.perf_counter()
        sb.load_workspace(app)
        t2 = time.perf_counter()
        sb.inject_tests(list(task.suite))
        t3 = time.perf_counter()
        outcome = sb.run_tests(RunSpec(task.tests.test_command, task.manifest.workdir, task.tests.test_files,
                                       task.tests.judge_timeout_sec))
        t4 = time.perf_counter()
    t5 = time.perf_counter()
    if outcome.report is None or outcome.timed_out:
        raise SystemExit(f"session run failed: {outcome.report_problem} {outcome.output_tail[-500:]}")
    steps.update({"open": t1 - t0, "create+start+copy": t2 - t1, "inject": t3 - t2,
                  "exec+stop+fetch": t4 - t3, "  of which the command": outcome.duration_ms / 1000,
                  "remove": t5 - t4, "session total": t5 - t0})
    return steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default=str(Path(__file__).resolve().parent.parent / "tasks" / "verrange"))
    parser.add_argument("--control", default="reference")
    parser.add_argument("-n", type=int, default=15, help="repetitions of each side")
    parser.add_argument("--backend", choices=("local", "docker"), default="local")
    args = parser.parse_args()

    task = load_task(args.task)
    control = task.controls[args.control]
    sandbox: Sandbox
    if args.backend == "docker":
        from procgrade.oracles.docker_sandbox import DockerSandbox

        sandbox = DockerSandbox()
    else:
        sandbox = LocalSandbox()
    expected = str(control.expect.reward)
    # Warm-up (not timed): the interpreter probe is cached per process, file caches fill.
    bare_run(task, control.app)
    judge_run(task, control.app, sandbox, expected)
    bare, judged = [], []
    steps: list[dict[str, float]] = []
    for _ in range(args.n):
        bare.append(bare_run(task, control.app))
        judged.append(judge_run(task, control.app, sandbox, expected))
        if args.backend == "docker":
            steps.append(session_steps(task, control.app, sandbox))
    b, j = statistics.median(bare), statistics.median(judged)
    print(f"task {task.task_id}, control {args.control}, {args.n} runs each (alternating), "
          f"{len(task.tests.test_files)} test files")
    print(f"bare pytest     median {b * 1000:7.1f} ms  (min {min(bare) * 1000:.1f}, max {max(bare) * 1000:.1f})")
    print(f"{args.backend:<6} judge    median {j * 1000:7.1f} ms  (min {min(judged) * 1000:.1f}, max {max(judged) * 1000:.1f})")
    target = f" ({verdict(j / b, 'at most', TARGET)})" if args.backend == "local" else ""
    print(f"ratio judge/bare {j / b:.2f}x{target}; overhead {(j - b) * 1000:.1f} ms")
    if steps:
        print("docker session by hand, median per step:")
        for name in steps[0]:
            print(f"  {name:<24} {statistics.median(s[name] for s in steps) * 1000:7.1f} ms")
        total = statistics.median(s["session total"] for s in steps)
        print(f"ratio session/bare {total / b:.2f}x; overhead {(total - b) * 1000:.1f} ms")


if __name__ == "__main__":
    main()
