"""Start-up: ``procgrade --help`` and ``procgrade runs`` load only what they use (issue 16).

Timing is measured in bench/suite.py; these tests pin the cause instead: each command runs in a
fresh interpreter and reports which modules it imported. A top-level import of a heavy library
in the command line's modules (or in a package ``__init__`` they pass through) fails here.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from procgrade.engine.cli_runs import quick_runs
from procgrade.engine.store.location import plain_sqlite_file
from procgrade.engine.store.migrate import schema_head

#: Imported by no command that only prints help or lists runs.
HEAVY = ("sqlalchemy", "alembic", "pydantic", "numpy", "scipy", "pandas", "statsmodels", "sklearn", "pyarrow",
         "playwright", "docker", "openai", "ray", "starlette", "uvicorn", "jsonschema", "markdown_it",
         "procgrade.engine.events", "procgrade.engine.store.base", "procgrade.engine.importers",
         "procgrade.engine.analysis", "procgrade.engine.reporting")

_PROBE = """
import json, sys
sys.argv = ["procgrade", *sys.argv[1:]]
from procgrade.engine.console import main
try:
    main()
except SystemExit as exc:
    code = exc.code
else:
    code = 0
events = sys.modules.get("procgrade.engine.events")  # looked at only where the command imported it
built = None if events is None else sorted(name for name, kind in events.EVENT_KINDS.items()
                                           if kind.__pydantic_complete__)
adapters = None if events is None else events.event_adapter.cache_info().currsize
sys.stdout.flush()
print("\\n@@" + json.dumps({"code": code, "modules": sorted(sys.modules), "built": built, "adapters": adapters}))
"""


def _probe(*args: str) -> tuple[dict, str]:
    """What ``procgrade ARGS`` left behind in a fresh interpreter, and what it printed."""
    done = subprocess.run([sys.executable, "-c", _PROBE, *args], capture_output=True, text=True, timeout=120)
    output, _, report = done.stdout.rpartition("\n@@")
    return json.loads(report), output + done.stderr


def _loaded(*args: str) -> tuple[int, set[str], str]:
    found, output = _probe(*args)
    return found["code"], set(found["modules"]), output


def _heavy(modules: set[str]) -> list[str]:
    return sorted(name for name in modules if any(name == h or name.startswith(h + ".") for h in HEAVY))


def test_help_imports_nothing_heavy() -> None:
    code, modules, output = _loaded("--help")
    assert code == 0 and "runs" in output
    # rich_utils (Typer's help) needs rich.markdown, and so markdown_it: the one exception, help only
    assert [m for m in _heavy(modules) if not m.startswith("markdown_it")] == []


def test_runs_on_sqlite_imports_nothing_heavy(tmp_path: Path) -> None:
    from procgrade.engine.store import init_database

    db = f"sqlite:///{tmp_path / 'store.db'}"
    init_database(db)
    code, modules, output = _loaded("runs", "--db", db)
    assert code == 0 and "0 runs" in output
    assert _heavy(modules) == []


def test_runs_on_a_missing_file_fails_fast_with_the_stores_message(tmp_path: Path) -> None:
    missing = tmp_path / "missing.db"
    code, modules, output = _loaded("runs", "--db", f"sqlite:///{missing}")
    assert code == 1
    assert f"no database at {missing}: check --db (or $PROCGRADE_DB), or create one with `procgrade init" in output
    assert _heavy(modules) == []
    assert not missing.exists()


def test_the_schema_head_read_from_the_files_is_alembics() -> None:
    from procgrade.engine.store.migrate import alembic_head_revision

    assert schema_head() == alembic_head_revision()


@pytest.mark.parametrize(("db", "expected"), [
    ("sqlite:///x.db", Path("x.db")), ("sqlite:////tmp/x.db", Path("/tmp/x.db")), ("x.db", Path("x.db")),
    (" sqlite:///x.db ", Path("x.db")), ("sqlite://", None), ("sqlite:///:memory:", None),
    ("sqlite:///x.db?mode=ro", None), ("sqlite+pysqlite:///x.db", None), ("postgresql://u@h/db", None),
    ("sqlite:///x%20y.db", None), ("", None),
])
def test_only_plain_sqlite_urls_take_the_quick_path(db: str, expected: Path | None) -> None:
    assert plain_sqlite_file(db) == expected


def test_quick_runs_equal_the_stores_runs(tmp_path: Path) -> None:
    from procgrade.engine.store import opened_store

    fixture = Path(__file__).parent.parent / "examples" / "native" / "todo-app-run.jsonl"
    db = f"sqlite:///{tmp_path / 'store.db'}"
    from procgrade.engine.ingest import ingest_paths

    with opened_store(db, create=True) as store:
        ingest_paths(store, [fixture], format="auto", seal=True)
        expected = store.runs()
    quick = quick_runs(db)
    assert quick is not None and len(quick) == len(expected) >= 1
    assert quick == expected
    assert [row.sealed for row in quick] == [info.sealed for info in expected]


def test_quick_runs_leave_other_schemas_to_the_store(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE alembic_version (version_num TEXT)")
        conn.execute("INSERT INTO alembic_version VALUES ('0001')")
    assert quick_runs(f"sqlite:///{path}") is None  # the general path then says "run `procgrade init`"
    empty = tmp_path / "empty.db"
    sqlite3.connect(empty).close()
    assert quick_runs(str(empty)) is None


def test_plain_text_options_coerce_as_typer_does() -> None:
    """--db values reach the command unchanged through the shortcut; other types still go through Typer."""
    from typer.testing import CliRunner

    from procgrade.engine.cli_coercion import install

    install()
    install()  # idempotent
    import typer

    app = typer.Typer()
    seen: dict[str, object] = {}

    @app.command()
    def probe(name: str = "x", count: int = 1, flag: bool = False) -> None:
        seen.update(name=name, count=count, flag=flag)

    result = CliRunner().invoke(app, ["--name", "sqlite:///a b.db", "--count", "3", "--flag"])
    assert result.exit_code == 0, result.output
    assert seen == {"name": "sqlite:///a b.db", "count": 3, "flag": True}
    result = CliRunner().invoke(app, ["--count", "abc"])
    assert result.exit_code == 2 and "--count" in result.output


def test_rescore_builds_no_event_validator(tmp_path: Path) -> None:
    """Re-scoring reads typed columns, never event models: it must not pay for building the
    validators (about 80 ms of every command that imported the event module, before)."""
    from builders import small_run, write_jsonl

    from procgrade.engine.ingest import ingest_native
    from procgrade.engine.store import open_store

    db = f"sqlite:///{tmp_path / 'store.db'}"
    store = open_store(db, create=True)
    ingest_native(store, [write_jsonl(tmp_path / "run.jsonl", small_run("r1"))])
    store.close()
    found, output = _probe("rescore", "--all", "--db", db)
    assert found["code"] == 0, output
    assert "r1" in output
    assert (found["built"], found["adapters"]) == ([], 0)


#: What a command reading a SQLite store loads only when it must: SQLAlchemy (about 0.3 s on this
#: machine, a quarter of a re-score of 500 runs) and Alembic, which the store's own connections
#: (engine/store/sqlite_connections.py) and its schema check do without.
STORE_HEAVY = ("sqlalchemy", "alembic", "mako")


@pytest.mark.parametrize("command", [("rescore", "--all"), ("score", "r1"), ("verify",), ("show", "r1"),
                                     ("explain", "r1"), ("verify-log", "r1")])
def test_store_commands_on_sqlite_import_no_sqlalchemy(tmp_path: Path, command: tuple[str, ...]) -> None:
    from builders import small_run, write_jsonl

    from procgrade.engine.ingest import ingest_native
    from procgrade.engine.store import open_store

    db = f"sqlite:///{tmp_path / 'store.db'}"
    store = open_store(db, create=True)
    ingest_native(store, [write_jsonl(tmp_path / "run.jsonl", small_run("r1"))])
    store.close()
    code, modules, output = _loaded(*command, "--db", db)
    assert code == 0, output
    assert sorted(m for m in modules if m.split(".")[0] in STORE_HEAVY) == []


def test_ingest_into_a_new_sqlite_store_imports_no_sqlalchemy(tmp_path: Path) -> None:
    """The new store's schema comes from the head snapshot (engine/store/sqlite_head.py), not Alembic."""
    from builders import small_run, write_jsonl

    run = write_jsonl(tmp_path / "run.jsonl", small_run("r1"))
    db = tmp_path / "new.db"
    code, modules, output = _loaded("ingest", str(run), "--db", str(db))
    assert code == 0, output
    assert sorted(m for m in modules if m.split(".")[0] in STORE_HEAVY) == []
    assert quick_runs(str(db)) is not None and [info.run_id for info in quick_runs(str(db))] == ["r1"]


def test_building_validators_ahead_builds_every_one() -> None:
    """In a fresh interpreter nothing is built on import; build_event_validators() then builds
    the adapter and every kind's validator (what forked ingest workers inherit)."""
    script = (
        "from procgrade.engine.events import EVENT_KINDS, build_event_validators, event_adapter\n"
        "before = sorted(k for k, c in EVENT_KINDS.items() if c.__pydantic_complete__)\n"
        "assert event_adapter.cache_info().currsize == 0, 'adapter built on import'\n"
        "build_event_validators()\n"
        "after = sorted(k for k, c in EVENT_KINDS.items() if not c.__pydantic_complete__)\n"
        "print(before, after, event_adapter.cache_info().currsize)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["[]", "[]", "1"]


def test_built_validators_validate_as_before() -> None:
    """Building every validator ahead (what a process does before forking ingest workers) leaves
    them the validators first use would build: the same event accepted, the same one refused."""
    from builders import small_run

    from procgrade.engine.events import build_event_validators, event_adapter
    from pydantic import ValidationError

    build_event_validators()
    first = small_run("r1")[1]
    assert event_adapter().validate_python(first).seq == 1
    with pytest.raises(ValidationError):
        event_adapter().validate_python({**first, "seq": "1"})  # strict: no string for an integer
