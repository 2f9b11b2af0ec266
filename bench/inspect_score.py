"""Import + rescore of a real-size Inspect AI log against the peer reading it: ``inspect score``.

Run by hand (``python bench/inspect_score.py``; part of ``make bench``). The bench installs
inspect-ai in its own virtualenv (``bench/.cache/inspect-venv``, made once) and builds the log
itself with inspect_ai's own ``read_eval_log``/``write_eval_log``: the one sample of
``tests/fixtures/imports/inspect/browser_agent_log.json`` copied ``--samples`` times under
distinct sample ids (500 copies: about 200 MB of JSON, 17,500 events after import). Then, for
``--rounds`` rounds, interleaved, each a fresh process under ``/usr/bin/time`` (wall, CPU = user
+ system, peak RSS):

- ``inspect score --scorer includes --action overwrite --overwrite LOG`` (on a fresh copy of
  the log each round, since it rewrites the file; inspect-ai and openai, the log's model
  provider, which inspect loads although the scorer calls no model: a dummy key is set);
- ``procgrade ingest --db sqlite:///FRESH.db LOG``;
- ``procgrade rescore --all --db sqlite:///FRESH.db``.

It prints each measurement and the ratios: import / inspect-score time and peak memory, and
how many times faster import + rescore is than inspect score.

    python bench/inspect_score.py [--samples 500] [--rounds 2] [--inspect-venv DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import venv
from fractions import Fraction
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.targets import verdict  # noqa: E402

FIXTURE = ROOT / "tests" / "fixtures" / "imports" / "inspect" / "browser_agent_log.json"
CACHE = ROOT / "bench" / ".cache"

# Run in inspect's own venv: read the one-sample log, write it back with N samples.
_BUILD_LOG = textwrap.dedent("""
    import sys
    from inspect_ai.log import read_eval_log, write_eval_log

    source, target, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    log = read_eval_log(source)
    (sample,) = log.samples
    samples = []
    for index in range(count):
        copy = sample.model_copy(deep=True)
        copy.id = index + 1
        copy.epoch = 1
        if getattr(copy, "uuid", None):
            copy.uuid = f"{sample.uuid}-{index + 1}"
        samples.append(copy)
    log.samples = samples
    if log.eval.dataset is not None:
        log.eval.dataset.samples = count
        log.eval.dataset.sample_ids = [s.id for s in samples]
    write_eval_log(log, target, format="json")
""")


def inspect_venv(folder: Path) -> Path:
    """The ``inspect`` command of a venv holding inspect-ai (made on first use)."""
    command = folder / "bin" / "inspect"
    python = folder / "bin" / "python"
    if not command.exists():
        print(f"installing inspect-ai into {folder} (once) ...", flush=True)
        venv.create(folder, with_pip=True, clear=True)
    # openai: the log's model provider, which inspect loads even for a scorer that calls no model
    if subprocess.run([str(python), "-c", "import inspect_ai, openai"], capture_output=True).returncode:
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", "inspect-ai", "openai"], check=True)
    return command


def build_log(python: Path, samples: int) -> Path:
    """The ``samples``-sample log, cached under bench/.cache (rebuilt when the fixture changes)."""
    folder = CACHE / "inspect-logs"  # a folder of its own: a single file's folder is listed for companions
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"inspect-{samples}-samples.json"
    if target.exists() and target.stat().st_mtime >= FIXTURE.stat().st_mtime:
        return target
    print(f"building {target.name} with inspect_ai's write_eval_log ...", flush=True)
    partial = target.with_suffix(".partial.json")
    subprocess.run([str(python), "-c", _BUILD_LOG, str(FIXTURE), str(partial), str(samples)], check=True)
    partial.replace(target)
    return target


def timed(command: list[str], cwd: Path, env: dict[str, str] | None = None) -> tuple[float, float, float]:
    """Run ``command`` under /usr/bin/time: (wall s, CPU s = user + system, peak RSS MB); fails loudly."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as out:
        done = subprocess.run(["/usr/bin/time", "-o", out.name, "-f", "%e %U %S %M", *command],
                              capture_output=True, text=True, cwd=cwd, env=env)
        wall, user, system, peak_kb = out.read().split()[-4:]
    if done.returncode:
        sys.stderr.write(done.stdout[-2000:] + done.stderr[-4000:])
        raise SystemExit(f"failed ({done.returncode}): {' '.join(command)}")
    return float(wall), float(user) + float(system), int(peak_kb) / 1024


def _busy_cores() -> str:
    """Cores busy over the next 0.2 s (``/proc/stat``), as ingest judges whether to start its
    read-ahead workers (importers/pipeline.py), or "?"."""
    def times() -> list[int]:
        return [int(f) for f in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]

    try:
        first = times()
        time.sleep(0.2)
        second = times()
    except (OSError, ValueError):
        return "?"
    total = sum(second) - sum(first)
    idle = second[3] + second[4] - first[3] - first[4]
    return f"{(os.cpu_count() or 1) * (1 - idle / total):.1f}" if total > 0 else "?"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=500, help="Copies of the fixture's sample (default 500).")
    parser.add_argument("--rounds", type=int, default=2, help="Interleaved rounds (default 2).")
    parser.add_argument("--inspect-venv", type=Path, default=CACHE / "inspect-venv",
                        help="Where inspect-ai is installed (default bench/.cache/inspect-venv).")
    args = parser.parse_args()

    CACHE.mkdir(parents=True, exist_ok=True)
    inspect = inspect_venv(args.inspect_venv)
    log = build_log(inspect.with_name("python"), args.samples)
    procgrade = str(Path(sys.executable).with_name("procgrade"))
    size_mb = log.stat().st_size / 1e6
    print(f"log: {log} ({size_mb:.0f} MB, {args.samples} samples); load average {os.getloadavg()[0]:.1f}")

    # The includes scorer calls no model, but inspect builds the log's model client, which wants a key.
    inspect_env = {**os.environ, "OPENAI_API_KEY": os.environ.get("OPENAI_API_KEY", "sk-unused-by-the-includes-scorer"),
                   "NO_COLOR": "1"}
    seen: dict[str, list[tuple[float, float, float]]] = {"inspect score": [], "procgrade ingest": [],
                                                        "procgrade rescore --all": []}
    with tempfile.TemporaryDirectory(prefix="procgrade-inspect-") as tmp:
        work = Path(tmp)
        for round_ in range(1, args.rounds + 1):
            copy = work / "scored.json"
            shutil.copyfile(log, copy)
            db = f"sqlite:///{work}/round{round_}.db"
            runs = [("inspect score", [str(inspect), "score", "--scorer", "includes", "--action", "overwrite",
                                       "--overwrite", str(copy)]),
                    ("procgrade ingest", [procgrade, "ingest", "--db", db, str(log)]),
                    ("procgrade rescore --all", [procgrade, "rescore", "--all", "--db", db])]
            for name, command in runs:
                busy = _busy_cores()
                wall, cpu, peak = timed(command, work, inspect_env if name == "inspect score" else None)
                seen[name].append((wall, cpu, peak))
                print(f"round {round_}: {name:<24} {wall:7.2f} s wall {cpu:7.2f} s CPU {peak:7.0f} MB peak"
                      f"  (cores busy before: {busy})", flush=True)
            copy.unlink()
            (work / f"round{round_}.db").unlink()

    def median(name: str, index: int) -> float:
        return statistics.median(s[index] for s in seen[name])

    score_wall, ingest_wall, rescore_wall = (median(n, 0) for n in seen)
    score_cpu, ingest_cpu, rescore_cpu = (median(n, 1) for n in seen)
    score_peak = max(s[2] for s in seen["inspect score"])
    ingest_peak = max(s[2] for s in seen["procgrade ingest"])
    rescore_peak = max(s[2] for s in seen["procgrade rescore --all"])
    print(f"medians of {args.rounds}: inspect score {score_wall:.2f} s ({score_cpu:.2f} s CPU, {score_peak:.0f} MB); "
          f"ingest {ingest_wall:.2f} s ({ingest_cpu:.2f} s CPU, {ingest_peak:.0f} MB); "
          f"rescore {rescore_wall:.2f} s ({rescore_cpu:.2f} s CPU, {rescore_peak:.0f} MB)")
    # the targets are on the wall clock: the time a user waits, procgrade's import using both cores
    share, speed_up = ingest_wall / score_wall, score_wall / (ingest_wall + rescore_wall)
    print(f"import / inspect score time: {share:.2f}x wall, {ingest_cpu / score_cpu:.2f}x CPU "
          f"(wall {verdict(share, 'at most', Fraction(1, 3))})")
    print(f"import / inspect score peak RSS: {ingest_peak / score_peak:.2f}x "
          f"({verdict(ingest_peak / score_peak, 'at most', 0.5)})")
    print(f"import + rescore speed-up over inspect score: {speed_up:.2f}x wall, "
          f"{score_cpu / (ingest_cpu + rescore_cpu):.2f}x CPU (wall {verdict(speed_up, 'at least', 3.0)})")
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
