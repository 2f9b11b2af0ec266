"""The report on the demo databases: ``procgrade report --html`` timed as ``make demo`` runs it.

Run by hand: ``python bench/report.py [--repeats 3]``. Builds both demo databases in a
temporary folder by running the Makefile's ``demo`` recipe line by line (every line but the
``report`` lines, with the Makefile's own variables), then runs each ``report`` line of the
recipe ``--repeats`` times as a fresh process under ``/usr/bin/time`` and prints the median
wall and CPU time and the peak memory of each, against the target of under 5 s. The demo's
other lines are timed once too, so a slow step shows up next to the report.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
DATA = ("examples", "tests", "tasks", "rules")  # what the recipe's lines read, linked into the folder
#: The folders of procgrade's modules (the package `procgrade` is the repository root: pyproject.toml),
#: compiled once before the timed runs as a user's installed package would be.
PACKAGE_FOLDERS = ("__init__.py", "engine", "rules", "oracles", "judges", "migrations")
TARGET_S = 5.0


def demo_recipe() -> list[str]:
    """The Makefile ``demo`` target's commands with its simple variables expanded (as make would)."""
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    recipe = text.split("\ndemo:", 1)[1].split("\n\n", 1)[0].splitlines()[1:]
    variables = dict(re.findall(r"^([A-Z_]+) *[?:]?= *(\S.*?) *$", text, flags=re.M))
    commands = []
    for line in recipe:
        line = line.strip()
        if not line or line.startswith("@"):
            continue
        line = line.replace("$(BIN)/", f"{BIN}/")
        for name, value in variables.items():
            line = line.replace(f"$({name})", value)
        if "$(" in line:
            raise SystemExit(f"a Makefile variable this bench does not know: {line}")
        commands.append(line)
    return commands


def timed(command: str, cwd: Path) -> tuple[float, float, float]:
    """(wall s, CPU s, peak MB) of one shell command under /usr/bin/time; exits on failure."""
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("PROCGRADE_DB", None)
    with tempfile.NamedTemporaryFile("r", suffix=".time") as out:
        done = subprocess.run(["/usr/bin/time", "-o", out.name, "-f", "%e %U %S %M", "bash", "-c", command],
                              cwd=cwd, env=env, capture_output=True, text=True)
        if done.returncode:
            raise SystemExit(f"failed: {command}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
        wall, user, system, peak_kb = out.read().split()[-4:]
    return float(wall), float(user) + float(system), int(peak_kb) / 1024


def short(command: str) -> str:
    return command.replace(f"{BIN}/", "").split(" > ")[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="Runs of each report line (median).")
    args = parser.parse_args()
    # Time what a user's shell sees, as bench/suite.py does: Python caches compiled modules (a sandbox
    # may set PYTHONDONTWRITEBYTECODE, and then every command compiles procgrade's source again).
    if os.environ.pop("PYTHONDONTWRITEBYTECODE", None) is not None:
        print("note: PYTHONDONTWRITEBYTECODE was set; unset for the bench (modules are cached as usual)")
    # procgrade's own modules only: the task packages' apps and builds are data the judge copies and
    # the tests expect without caches of their own (tests/test_acceptance_adversarial.py)
    subprocess.run([sys.executable, "-m", "compileall", "-q", *(str(ROOT / name) for name in PACKAGE_FOLDERS)],
                   check=False, capture_output=True)
    recipe = demo_recipe()
    reports = [line for line in recipe if " report " in line]
    with tempfile.TemporaryDirectory(prefix="procgrade-report-bench-") as tmp:
        folder = Path(tmp)
        for name in DATA:
            (folder / name).symlink_to(ROOT / name)
        print("building the demo databases (the Makefile's demo recipe):")
        for line in recipe:
            if line in reports:
                continue
            wall, cpu, peak = timed(line, folder)
            print(f"  {wall:7.2f} s wall {cpu:7.2f} s CPU {peak:6.0f} MB  {short(line)[:110]}", flush=True)
        for line in reports:
            runs = [timed(line, folder) for _ in range(args.repeats)]
            wall = statistics.median(r[0] for r in runs)
            cpu = statistics.median(r[1] for r in runs)
            peak = max(r[2] for r in runs)
            db = re.search(r"--db sqlite:///(\S+)", line)
            verdict = "met" if wall < TARGET_S else "NOT met"
            print(f"report --html on {db.group(1) if db else 'the demo database'}: {wall:.2f} s wall, {cpu:.2f} s CPU "
                  f"(median of {args.repeats}), peak RSS {peak:.0f} MB; {wall / TARGET_S:.2f}x the 5 s target: {verdict}")


if __name__ == "__main__":
    main()
