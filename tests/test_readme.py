"""Every code line of the README runs as written on the demo's database, with the exit code it promises.

The demo database is made the way ``make demo`` makes it: the module fixture runs the Makefile's
``demo`` recipe line by line (the ``procgrade`` of this venv, the database and report in a fresh
folder that holds the repository's data folders). Then each line of the README's ``sh`` blocks runs
in that folder, in README order, through ``bash`` with this venv's ``procgrade`` first on PATH,
and must exit 0, or the code its comment announces (``exits 1``), with no traceback; the
README's ``python`` blocks run there too. Docker (the judge image) and the local sandbox are
the real ones: a missing service is a failure, not a skip.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
MAKEFILE = ROOT / "Makefile"
BIN = Path(sys.executable).parent
#: Folders of the repository the README's lines read (linked into the demo's folder).
DATA = ("examples", "tests", "tasks", "rules")
#: README lines not run here, and why.
NOT_RUN = {
    "make demo": "the fixture runs its recipe from the Makefile, line by line",
    "make test": "is this test suite",
}
LINE_TIMEOUT = 900


def fenced(text: str, language: str) -> list[tuple[int, str]]:
    """(line number, line) of every line inside ```language blocks."""
    found, inside = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            inside = not inside and line[3:].strip() == language
            continue
        if inside:
            found.append((number, line))
    return found


def python_blocks(text: str) -> list[str]:
    blocks, current, inside = [], [], False
    for line in text.splitlines():
        if line.startswith("```"):
            if inside:
                blocks.append("\n".join(current))
                current, inside = [], False
            else:
                inside = line[3:].strip() == "python"
            continue
        if inside:
            current.append(line)
    return blocks


def command_lines() -> list[tuple[int, str, int]]:
    """(README line, command, expected exit code) for every ``sh`` line to run."""
    lines = []
    for number, line in fenced(README.read_text(encoding="utf-8"), "sh"):
        command, _, comment = line.partition("  #")
        command = command.strip()
        if not command:
            continue
        if command in NOT_RUN:
            continue
        expected = re.search(r"\bexits (\d+)", comment)
        lines.append((number, command, int(expected.group(1)) if expected else 0))
    return lines


def demo_recipe() -> list[str]:
    """The ``demo`` target's commands, with the Makefile's variables for this venv and folder."""
    text = MAKEFILE.read_text(encoding="utf-8")
    recipe = text.split("\ndemo:", 1)[1].split("\n\n", 1)[0].splitlines()[1:]
    # the Makefile's own simple variables (NAME ?= value, NAME := value), as make would expand them
    variables = dict(re.findall(r"^([A-Z_]+) *[?:]?= *(\S.*?) *$", text, flags=re.M))
    commands = []
    for line in recipe:
        line = line.strip()
        if not line or line.startswith("@"):
            continue
        line = line.replace("$(BIN)/", f"{BIN}/")
        for name, value in variables.items():
            line = line.replace(f"$({name})", value)
        assert "$(" not in line, f"a Makefile variable this test does not know: {line}"
        commands.append(line)
    return commands


def run(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("PROCGRADE_DB", None)
    return subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=LINE_TIMEOUT)


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("demo")
    for name in DATA:
        (folder / name).symlink_to(ROOT / name)
    for command in demo_recipe():
        done = run(command, folder)
        assert done.returncode == 0, f"make demo: {command}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    return folder


def test_the_readme_has_lines_to_run_and_only_commands_in_sh_blocks() -> None:
    lines = command_lines()
    assert len(lines) >= 30
    for number, command, _ in lines:
        assert command.startswith("procgrade "), f"README.md:{number}: not a procgrade command: {command}"
        assert "[" not in command and "..." not in command, f"README.md:{number}: a synopsis, not a runnable line"
    assert python_blocks(README.read_text(encoding="utf-8")), "the README's notebook session is gone"


def test_every_readme_line_runs_as_written_on_the_demo_database(demo: Path) -> None:
    failures = []
    for number, command, expected in command_lines():
        done = run(command, demo)
        if done.returncode != expected or "Traceback" in done.stderr:
            failures.append(f"README.md:{number}: {command}: exit {done.returncode}, expected {expected}\n"
                            f"{done.stderr[-1500:]}")
    assert not failures, "\n\n".join(failures)
    assert (demo / "procgrade-report.html").stat().st_size > 10_000
    assert (demo / "todo-app-demo.jsonl").read_bytes().count(b"\n") == 34


def test_the_readme_notebook_session_runs_on_the_demo_database(demo: Path) -> None:
    for block in python_blocks(README.read_text(encoding="utf-8")):
        done = subprocess.run([sys.executable, "-c", block], cwd=demo, capture_output=True, text=True,
                              timeout=LINE_TIMEOUT)
        assert done.returncode == 0, f"{block}\n{done.stderr[-3000:]}"


def test_the_readme_refusal_example_is_what_procgrade_says(demo: Path) -> None:
    """The README quotes the refusal of ``outcomes`` without --allow-mixed: it is true, and names no
    Python keyword."""
    done = run("procgrade outcomes --by model", demo)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "allow_mixed" not in lines[0] and "True" not in lines[0]
    assert lines[0].startswith("procgrade: runs of one model group differ in settings (harness, harness_version, ")
    assert "add --allow-mixed to pool them anyway" in lines[0]
    text = README.read_text(encoding="utf-8")
    assert "`procgrade outcomes --by model` says `runs of one model group differ in settings (harness," in text
