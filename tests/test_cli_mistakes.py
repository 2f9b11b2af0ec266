"""User mistakes through the real ``procgrade`` console script: one line, no traceback, the documented code.

Each row of :data:`MISTAKES` runs the installed console script of this venv in a subprocess (as a
user types it) in a folder holding a small store, and checks: the exit code (1 user error, 2
usage), that stderr is exactly one line holding the expected words, that no traceback is
printed, and, where the mistake names a file to create or write, that none was created.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from databases import pg_base_url  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PROCGRADE = Path(sys.executable).parent / "procgrade"
EXAMPLE = ROOT / "examples" / "native" / "todo-app-run.jsonl"
TASK = ROOT / "tasks" / "verrange"
RUN = "todo-app-demo"


def _pg(database: str | None = None, port: int | None = None) -> str:
    from sqlalchemy.engine import make_url

    url = make_url(pg_base_url())
    if database is not None:
        url = url.set(database=database)
    if port is not None:
        url = url.set(port=port)
    return url.render_as_string(hide_password=False)


@dataclass(frozen=True)
class Mistake:
    name: str
    args: tuple[str, ...]
    code: int
    says: tuple[str, ...]
    #: Files (relative to the folder) that must not exist afterwards.
    not_created: tuple[str, ...] = ()
    #: Modules made unimportable for the run (a missing optional extra).
    without: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)


MISTAKES = [
    # --- usage: exit 2 ------------------------------------------------------------------------
    Mistake("unknown command", ("frobnicate",), 2, ("No such command 'frobnicate'", "procgrade --help")),
    Mistake("unknown sub-command", ("schema", "nope"), 2, ("No such command 'nope'", "procgrade schema --help")),
    Mistake("unknown option", ("runs", "--bogus"), 2, ("No such option: --bogus", "procgrade runs --help")),
    Mistake("missing argument", ("show",), 2, ("Missing argument 'RUN'",)),
    Mistake("missing required option", ("calibrate",), 2, ("Missing option '--candidate'",)),
    Mistake("workers not a number", ("rescore", "--all", "--workers", "two"), 2, ("--workers", "integer")),
    Mistake("workers below 1", ("rescore", "--all", "--workers", "0"), 2, ("--workers", "greater than or equal to 1")),
    Mistake("rescore without --all", ("rescore",), 2, ("say which runs: --all",)),
    Mistake("unknown ingest format", ("ingest", "-f", "nope", str(EXAMPLE)), 2, ("unknown format 'nope'", "known:")),
    Mistake("unknown grades format", ("grades", "import", "-f", "nope", "x.csv"), 2, ("unknown grades format 'nope'",)),
    Mistake("unknown grouping field", ("compare", "--by", "nonsense"), 2, ("unknown grouping field 'nonsense'",)),
    # --- the database: exit 1 -----------------------------------------------------------------
    Mistake("read-only command on a missing SQLite file", ("runs", "--db", "typo.db"), 1,
            ("no database at typo.db", "procgrade init --db typo.db"), not_created=("typo.db",)),
    Mistake("score on a missing SQLite file", ("score", RUN, "--db", "sqlite:///missing.db"), 1,
            ("no database at missing.db",), not_created=("missing.db",)),
    Mistake("verify on a missing file via the environment", ("verify",), 1, ("no database at env.db",),
            not_created=("env.db",), env={"PROCGRADE_DB": "env.db"}),
    Mistake("database is a folder", ("runs", "--db", "."), 1, ("is a folder, not a SQLite file",)),
    Mistake("init into a folder", ("init", "--db", "sub"), 1, ("is a folder, not a SQLite file",)),
    Mistake("database in a missing folder", ("ingest", str(EXAMPLE), "--db", "nowhere/x.db"), 1,
            ("the folder nowhere does not exist",)),
    Mistake("database not SQLite", ("runs", "--db", "notes.txt"), 1, ("notes.txt is not a SQLite database",)),
    Mistake("malformed port", ("runs", "--db", "postgresql://u@127.0.0.1:abc/db"), 1,
            ("is malformed (the port is not a number)",)),
    Mistake("unsupported database", ("runs", "--db", "mysql://u@localhost/db"), 1, ("unsupported database 'mysql'",)),
    Mistake("empty database URL", ("runs", "--db", ""), 1, ("the database URL is empty",)),
    Mistake("unreachable PostgreSQL", ("runs", "--db", _pg(port=1)), 1,
            ("cannot reach PostgreSQL at", "start the server")),
    Mistake("missing PostgreSQL database", ("runs", "--db", _pg(database="procgrade_no_such_db")), 1,
            ("has no database 'procgrade_no_such_db'", "createdb")),
    Mistake("missing postgres extra", ("runs", "--db", "postgresql://u@127.0.0.1/db"), 1,
            ("pip install 'procgrade[postgres]'",), without=("psycopg",)),
    Mistake("missing analysis extra", ("compare", "--by", "model"), 1,
            ("pip install 'procgrade[analysis]'",), without=("scipy", "numpy")),
    # --- runs, files, input: exit 1 -------------------------------------------------------------
    Mistake("unknown run in show", ("show", "nope"), 1, ("no run 'nope' in the store", "procgrade runs")),
    Mistake("unknown run in score", ("score", "nope"), 1, ("no run 'nope' in the store",)),
    Mistake("unknown run in explain", ("explain", "nope"), 1, ("no run 'nope' in the store",)),
    Mistake("unknown run in seal", ("seal", "nope"), 1, ("no run 'nope' in the store",)),
    Mistake("unknown run in verify", ("verify", "nope"), 1, ("no run 'nope' in the store",)),
    Mistake("export into a missing folder", ("export", RUN, "-o", "out/run.jsonl"), 1,
            ("the folder out does not exist",), not_created=("out",)),
    Mistake("export onto a folder", ("export", RUN, "-o", "sub"), 1, ("sub is a folder",)),
    Mistake("report into a missing folder", ("report", "--html", "reports/r.html"), 1,
            ("cannot write the report reports/r.html", "does not exist"), not_created=("reports",)),
    Mistake("report onto a folder", ("report", "--html", "sub"), 1, ("the report sub is a folder",)),
    Mistake("comparison JSON into a missing folder", ("compare", "--json", "out/c.json", "--allow-mixed"), 1,
            ("cannot write the JSON file out/c.json",), not_created=("out",)),
    Mistake("ingest a missing file", ("ingest", "nope.jsonl"), 1, ("nope.jsonl", "no such file")),
    Mistake("ingest a malformed native line", ("ingest", "-f", "native", "bad.jsonl"), 1, ("bad.jsonl:1:",)),
    Mistake("rules file missing", ("score", RUN, "--rules", "nope.yaml"), 1, ("nope.yaml", "cannot read")),
    Mistake("rules file malformed", ("score", RUN, "--rules", "bad.yaml"), 1, ("bad.yaml:",)),
    Mistake("accept a missing workspace", ("accept", "--task", str(TASK), "--workspace", "nowhere"), 1,
            ("nowhere: workspace: does not exist",)),
    Mistake("accept a missing task", ("accept", "--task", "nowhere", "--workspace", "sub"), 1, ("not a directory",)),
    Mistake("grades from a missing file", ("grades", "import", "nope.csv"), 1, ("nope.csv", "no such file")),
    Mistake("planted corpus missing", ("validate-rules", "nope"), 1, ("nope", "not a directory")),
    Mistake("calibration with no grade of the layer", ("calibrate", "--candidate", "judge", "--layer", "nope"), 1,
            ("no grade by 'human'",)),
]


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with a store holding the example run (procgrade.db, the default), a sub-folder,
    a text file, a malformed rule set and a malformed native log."""
    where = tmp_path_factory.mktemp("mistakes")
    done = subprocess.run([str(PROCGRADE), "ingest", str(EXAMPLE)], cwd=where, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    (where / "sub").mkdir()
    (where / "notes.txt").write_text("not a database\n")
    (where / "bad.yaml").write_text("rules: [\n")
    (where / "bad.jsonl").write_text('{"run_id": "x", "seq": 0}\n')
    return where


def _run(folder: Path, mistake: Mistake) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PROCGRADE_DB", "PROCGRADE_DEBUG")}
    env.update(mistake.env)
    if mistake.without:
        # A missing extra: sys.modules[name] = None makes `import name` fail as if it were not installed.
        site = folder / f"without-{'-'.join(mistake.without)}"
        site.mkdir(exist_ok=True)
        (site / "sitecustomize.py").write_text(
            "import sys\n" + "".join(f"sys.modules[{name!r}] = None\n" for name in mistake.without))
        env["PYTHONPATH"] = str(site)
    return subprocess.run([str(PROCGRADE), *mistake.args], cwd=folder, env=env, capture_output=True, text=True,
                          timeout=300)


def test_the_table_is_long_enough() -> None:
    assert len(MISTAKES) >= 30
    assert len({m.name for m in MISTAKES}) == len(MISTAKES)


@pytest.mark.parametrize("mistake", MISTAKES, ids=[m.name for m in MISTAKES])
def test_a_mistake_ends_with_one_line_and_its_exit_code(folder: Path, mistake: Mistake) -> None:
    done = _run(folder, mistake)
    lines = done.stderr.strip().splitlines()
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == mistake.code, (done.returncode, done.stderr)
    assert len(lines) == 1, done.stderr
    for words in mistake.says:
        assert words in lines[0], (words, lines[0])
    for name in mistake.not_created:
        assert not (folder / name).exists(), f"{name} was created"


def test_debug_shows_the_traceback_and_still_ends_with_the_line(folder: Path) -> None:
    for args in (("--debug", "runs", "--db", "typo.db"), ("runs", "--db", "typo.db", "--debug")):
        done = _run(folder, Mistake("debug", args, 1, ()))
        assert done.returncode == 1
        assert "Traceback (most recent call last)" in done.stderr
        assert done.stderr.strip().splitlines()[-1].startswith("procgrade: no database at typo.db")
    assert not (folder / "typo.db").exists()


def test_ingest_seal_of_a_stored_run_says_it_sealed_it(folder: Path, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 's.db'}"
    first = subprocess.run([str(PROCGRADE), "ingest", str(EXAMPLE), "--db", db], capture_output=True, text=True)
    assert first.returncode == 0 and "34 events appended" in first.stdout
    sealed = subprocess.run([str(PROCGRADE), "ingest", "--seal", str(EXAMPLE), "--db", db], capture_output=True,
                            text=True)
    assert sealed.returncode == 0
    assert "already stored (34 events); sealed now at head" in sealed.stdout and "nothing written" not in sealed.stdout
    again = subprocess.run([str(PROCGRADE), "ingest", "--seal", str(EXAMPLE), "--db", db], capture_output=True,
                           text=True)
    assert "already stored (34 events, sealed), nothing written" in again.stdout


def test_help_shows_readable_placeholders() -> None:
    for command in ([], ["rescore"], ["score"], ["calibrate"], ["report"], ["ingest"], ["accept"], ["compare"]):
        done = subprocess.run([str(PROCGRADE), *command, "--help"], capture_output=True, text=True,
                              env={**os.environ, "COLUMNS": "200"})
        assert done.returncode == 0, done.stderr
        for python_type in ("<bool>", "<str>", "<int", "<path>", "<list[", "<float"):
            assert python_type not in done.stdout, (command, python_type, done.stdout)
    rescore = subprocess.run([str(PROCGRADE), "rescore", "--help"], capture_output=True, text=True,
                             env={**os.environ, "COLUMNS": "200"}).stdout
    assert "--db" in rescore and "URL" in rescore and "--workers" in rescore and " N " in rescore
    score = subprocess.run([str(PROCGRADE), "score", "--help"], capture_output=True, text=True,
                           env={**os.environ, "COLUMNS": "200"}).stdout
    assert "Usage: procgrade score [OPTIONS] RUN..." in score
