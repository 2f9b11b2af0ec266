"""The ``procgrade`` command line: a thin layer, each command one library call."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Optional

import orjson
import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from engine.errors import InputError, ProcgradeError, StoreError
from engine.store import DEFAULT_DB, EventStore, open_store

app = typer.Typer(
    name="procgrade",
    help="Event-sourced process grading for long-horizon coding-agent builds.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
schema_app = typer.Typer(help="Print the JSON Schema of procgrade's input formats.", no_args_is_help=True)
app.add_typer(schema_app, name="schema")

# Piped output (CI logs, files) gets wide tables instead of rich's 80-column default.
out = Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 200)
err = Console(stderr=True, highlight=False, soft_wrap=True)

DbOption = Annotated[
    str,
    typer.Option("--db", envvar="PROCGRADE_DB", help="Database URL (sqlite:///FILE, postgresql://...) or a SQLite file path."),
]


def _print_version(value: bool) -> None:
    if value:
        from engine.version import __version__
        from engine.facts import EXTRACTOR_VERSION

        out.print(f"procgrade {__version__} (fact extractor {EXTRACTOR_VERSION})")
        raise typer.Exit()


@app.callback()
def _main_options(
    version: Annotated[bool, typer.Option("--version", callback=_print_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    """Event-sourced process grading for long-horizon coding-agent builds."""


@contextmanager
def _store(db: str, *, create: bool = False) -> Iterator[EventStore]:
    store = open_store(db, create=create)
    try:
        yield store
    finally:
        store.close()


def _fail(message: str, code: int = 1) -> None:
    err.print(message, markup=False)
    raise typer.Exit(code)


@app.command()
def init(db: DbOption = DEFAULT_DB) -> None:
    """Create the database schema, or migrate it to this version of procgrade."""
    from engine.store import init_database

    revision, where = init_database(db)
    out.print(f"database ready at schema revision {revision}: {where}")


@app.command()
def ingest(
    paths: Annotated[list[Path], typer.Argument(help="Files, directories or archives to ingest.", show_default=False)],
    format: Annotated[str, typer.Option("--format", "-f", help="Input format: auto (detect per file), native, "
                                        "or an importer's name (see `procgrade formats`).")] = "auto",
    seal: Annotated[bool, typer.Option(help="Seal each run after ingest: record its head, refuse later appends.")] = False,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Ingest runs: each run whole or not at all; re-ingesting the same input is a no-op."""
    from engine.ingest import formats, ingest_paths

    if format not in formats():
        _fail(f"procgrade: unknown format {format!r} (known: {', '.join(formats())})", 2)
    with _store(db, create=True) as store:
        done = ingest_paths(store, paths, format=format, seal=seal)
    for report in done.reports:
        out.print(report.summary, markup=False)
    if done.unrecognised:
        shown = ", ".join(done.unrecognised[:5]) + (f" and {len(done.unrecognised) - 5} more" if len(done.unrecognised) > 5 else "")
        err.print(f"{len(done.unrecognised)} file(s) skipped, not in a known format: {shown}", markup=False)


@app.command("formats")
def formats_command() -> None:
    """List the input formats procgrade reads."""
    from engine.importers import importers

    table = Table(show_header=True, header_style="bold", box=None)
    table.add_column("format")
    table.add_column("importer version")
    table.add_column("reads")
    table.add_row("native", "-", "procgrade's own event JSONL")
    for name, importer in importers().items():
        table.add_row(name, importer.version, importer.title)
    out.print(table)


@app.command()
def runs(db: DbOption = DEFAULT_DB) -> None:
    """List the stored runs."""
    with _store(db) as store:
        infos = store.runs()
    table = Table(title=f"{len(infos)} runs")
    table.add_column("run", overflow="fold")  # run ids are the handles users copy: never cut them
    for header in ("format", "harness", "model", "task", "events", "unparsed", "redacted", "sealed"):
        table.add_column(header)
    for info in infos:
        harness = " ".join(x for x in (info.harness, info.harness_version) if x) or "-"
        table.add_row(*(Text(cell) for cell in (info.run_id, info.source_format or "native", harness,
                                                info.model or "-", info.task_id or "-")),
                      str(info.event_count), _count(info.unparsed), _count(info.redactions),
                      "yes" if info.sealed else "no")
    out.print(table)


def _count(value: int | None) -> str:
    return "-" if value is None else str(value)


@app.command()
def show(run_id: Annotated[str, typer.Argument(help="The run.")], db: DbOption = DEFAULT_DB) -> None:
    """Show a run's timeline in seq order."""
    from engine.timeline import describe

    with _store(db) as store:
        info = store.run(run_id)
        table = Table("seq", "stage", "actor", "kind", "what", title=f"run {run_id}: {info.event_count} events, head {(info.head_hash or '-')[:16]}")
        for event in store.events(run_id):
            table.add_row(str(event.seq), "" if event.stage is None else str(event.stage), Text(event.actor),
                          event.kind, Text(describe(event)))
    out.print(table)


@app.command("verify-log")
def verify_log_command(
    run_ids: Annotated[Optional[list[str]], typer.Argument(help="Runs to check (default: all).")] = None,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Recompute each run's hash chain from the stored events; exit 1 on any mismatch."""
    from engine.log_verification import verify_log

    bad = 0
    with _store(db) as store:
        for run_id in run_ids or [info.run_id for info in store.runs()]:
            report = verify_log(store, run_id)
            if report.ok:
                out.print(f"{run_id}: ok ({report.events_checked} events, head {(report.head_hash or '-')[:16]})")
            else:
                bad += 1
                for problem in report.problems:
                    err.print(f"{run_id}: {problem}", markup=False)
    if bad:
        _fail(f"procgrade: {bad} run(s) fail verification")


@app.command()
def export(
    run_id: Annotated[str, typer.Argument(help="The run.")],
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="File to write (default: stdout).")] = None,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Export a run as native JSONL (ingesting it elsewhere gives the same head hash)."""
    from engine.native import dump_native

    with _store(db) as store:
        store.run(run_id)
        lines = dump_native(store.events(run_id))
        if output is None:
            for line in lines:
                sys.stdout.buffer.write(line)
            sys.stdout.flush()
        else:
            with output.open("wb") as handle:
                handle.writelines(lines)


@app.command()
def seal(run_id: Annotated[str, typer.Argument(help="The run.")], db: DbOption = DEFAULT_DB) -> None:
    """Seal a run: record its head hash as final and refuse later appends."""
    with _store(db) as store:
        info = store.seal(run_id)
    out.print(f"{run_id}: sealed at {info.sealed_event_count} events, head {info.sealed_head_hash}")


RulesOption = Annotated[
    Optional[Path],
    typer.Option("--rules", help="Rule set file (default: the built-in rules/sets/default.yaml)."),
]


@app.command()
def score(
    run_ids: Annotated[list[str], typer.Argument(help="Runs to score.", show_default=False)],
    rules: RulesOption = None,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Score runs with a rule set and store the score documents (identical re-scores are no-ops)."""
    from engine.rescoring import score_runs
    from rules.loading import load_ruleset

    ruleset = load_ruleset(rules)
    with _store(db) as store:
        outcomes = score_runs(store, run_ids, ruleset)
    _print_scores(outcomes, ruleset.name)


def _print_scores(outcomes: list, ruleset_name: str) -> None:
    from engine.scoring import display

    table = Table("run", "events", "violations", "process score", "exact", "stored",
                  title=f"rule set {ruleset_name}")
    for outcome in outcomes:
        doc = outcome.document
        violations = sum(rule["violated"] for rule in doc.body["rules"])
        exact = "-" if doc.process_score is None else f"{doc.process_score.numerator}/{doc.process_score.denominator}"
        table.add_row(Text(doc.run_id), str(doc.run_event_count), str(violations), display(doc.process_score),
                      exact, "new" if outcome.written else "already stored")
    out.print(table)
    if outcomes:
        out.print(f"rule set hash {outcomes[0].document.ruleset_hash}")


@app.command()
def rescore(
    all_runs: Annotated[bool, typer.Option("--all", help="Re-score every stored run.")] = False,
    rules: RulesOption = None,
    workers: Annotated[int, typer.Option("--workers", min=1, help="Processes to score with; output does not depend on it.")] = 1,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Re-score stored runs; a new rule set adds scores and never replaces old ones."""
    from rich.progress import Progress

    from engine.rescoring import score_runs
    from rules.loading import load_ruleset

    if not all_runs:
        _fail("procgrade: say which runs: --all (or use `procgrade score RUN...`)", 2)
    ruleset = load_ruleset(rules)
    with _store(db) as store:
        run_ids = [info.run_id for info in store.runs()]
        with Progress(console=err, transient=True) as progress:
            task = progress.add_task("scoring", total=len(run_ids))
            outcomes = score_runs(store, run_ids, ruleset, workers=workers,
                                  progress=lambda _run: progress.advance(task))
    _print_scores(outcomes, ruleset.name)


@app.command("verify")
def verify_command(
    run_ids: Annotated[Optional[list[str]], typer.Argument(help="Runs whose stored scores to check (default: all).")] = None,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Recompute every stored score and byte-compare; exit 1 naming any drift."""
    from engine.rescoring import verify_scores

    with _store(db) as store:
        checked, drifts = verify_scores(store, run_ids)
    for drift in drifts:
        err.print(f"{drift.run_id}: rule set {drift.ruleset_hash[:16]}: {drift.reason}", markup=False)
    if drifts:
        _fail(f"procgrade: {len(drifts)} of {checked} stored scores drifted")
    out.print(f"{checked} stored scores reproduce byte for byte")


@app.command()
def explain(
    run_id: Annotated[str, typer.Argument(help="The run.")],
    rules: RulesOption = None,
    show_all: Annotated[bool, typer.Option("--all", help="Also list fulfilled and vacuous activations.")] = False,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Per rule: the verdicts on a run, with the events each one cites."""
    from engine.explanation import explain_run

    with _store(db) as store:
        explanation = explain_run(store, run_id, rules, show_all=show_all)
    for line in explanation:
        out.print(line)


@app.command("validate-rules")
def validate_rules(
    directory: Annotated[Path, typer.Argument(help="Planted-fault corpus: one folder per rule id with fault.jsonl and clean.jsonl.")],
    rules: RulesOption = None,
) -> None:
    """Run a planted-fault corpus: every fault must be flagged by its rule, no clean twin by any rule."""
    from rules.loading import load_ruleset
    from rules.planted import summary, uncovered, validate_corpus

    ruleset = load_ruleset(rules)
    results = validate_corpus(directory, ruleset)
    table = Table("rule", "fault flagged", "violations on fault", "clean twin flagged by", "also flagged on fault",
                  title=f"planted faults in {directory} under rule set {ruleset.name}")
    for result in results:
        table.add_row(result.rule_id, "yes" if result.detected else Text("NO", style="bold red"),
                      str(result.fault_violations.get(result.rule_id, 0)),
                      Text(", ".join(result.false_flags) or "-", style="bold red" if result.false_flags else ""),
                      ", ".join(result.collateral) or "-")
    out.print(table)
    detected, total, false_flags = summary(results)
    missing = uncovered(results, ruleset)
    out.print(f"detected {detected}/{total} faults; {false_flags} clean twins falsely flagged"
              + (f"; rules without a case: {', '.join(missing)}" if missing else ""))
    if detected < total or false_flags:
        raise typer.Exit(1)


@schema_app.command("rules")
def schema_rules() -> None:
    """The JSON Schema of a rule set file."""
    from rules.model import ruleset_json_schema

    sys.stdout.buffer.write(orjson.dumps(ruleset_json_schema(), option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n")


@schema_app.command("events")
def schema_events() -> None:
    """The JSON Schema of one native event line."""
    from engine.events import events_json_schema

    sys.stdout.buffer.write(orjson.dumps(events_json_schema(), option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n")


# --- hidden-test acceptance (oracles/) --------------------------------------------------------

task_app = typer.Typer(help="Task packages for the hidden-test acceptance oracle.", no_args_is_help=True)
app.add_typer(task_app, name="task")

BackendOption = Annotated[str, typer.Option("--backend", help="Sandbox back-end (local).")]


@app.command()
def accept(
    task: Annotated[Path, typer.Option("--task", help="Task package folder (tasks/<id>/).", show_default=False)],
    workspace: Annotated[Path, typer.Option("--workspace", help="The submitted workspace folder.", show_default=False)],
    run: Annotated[Optional[str], typer.Option("--run", help="Append the check to this stored run "
                                               "(default: an outcome-only run acceptance/<task>/<workspace hash>).")] = None,
    backend: BackendOption = "local",
    submit_file: Annotated[Optional[Path], typer.Option("--submit-file", help="The submit marker, when the task "
                                                        "requires one and it is not at its path in the workspace.")] = None,
    timeout: Annotated[Optional[float], typer.Option("--timeout", min=0.1, help="Override judge_timeout_sec.")] = None,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Judge a workspace against a task's hidden tests and record the verdict (exit 0 only when accepted)."""
    from oracles.acceptance import accept as accept_workspace

    if not workspace.is_dir():
        _fail(f"procgrade: the workspace {workspace} is not a folder", 2)
    with _store(db, create=True) as store:
        verdict = accept_workspace(store, task, workspace, run, backend, submit_file=submit_file, timeout_sec=timeout)
    result = verdict.result
    counts = ", ".join(f"{n} {label}" for n, label in ((result.passed, "passed"), (result.failed, "failed"),
                                                       (result.errored, "errored"), (result.skipped, "skipped"))
                       if n is not None)
    out.print(Text(f"{verdict.run_id}: acceptance check {verdict.attempt + 1} on task {result.task_id}: "
                   f"{result.status}, reward {result.reward or 'none'}" + (f" ({counts})" if counts else "")))
    out.print(Text(f"suite {result.suite_sha256[:16]}  workspace {(result.workspace_sha256 or '-')[:16]}  "
                   f"back-end {result.backend}  {result.duration_ms} ms  {len(verdict.events)} events appended"))
    out.print(Text(result.explanation))
    if not result.accepted:
        raise typer.Exit(1)


@task_app.command("validate")
def task_validate(
    directory: Annotated[Path, typer.Argument(help="Task package folder.")],
    backend: BackendOption = "local",
) -> None:
    """Judge every control of a task package; exit 1 unless each gets its expected reward."""
    from oracles.acceptance import validate_task

    task, checks = validate_task(directory, backend)
    table = Table("control", "expected", "status", "reward", "passed", "failed", "errored", "ok",
                  title=f"task {task.task_id}: suite {task.suite_sha256[:16]}, {len(task.tests.test_files)} test files")
    for check in checks:
        r = check.result
        table.add_row(check.name, str(check.expected_reward), r.status, r.reward or "-",
                      *("-" if n is None else str(n) for n in (r.passed, r.failed, r.errored)),
                      Text("yes", style="green") if check.ok else Text("NO", style="bold red"))
    out.print(table)
    for check in checks:
        out.print(Text(f"{check.name}: {check.problem + ': ' if check.problem else ''}{check.result.explanation}"))
    bad = [c.name for c in checks if not c.ok]
    if not checks:
        _fail(f"procgrade: task {task.task_id} has no controls to validate")
    if bad:
        _fail(f"procgrade: {len(bad)} of {len(checks)} controls did not get their expected verdict: {', '.join(bad)}")
    out.print(f"all {len(checks)} controls get their expected verdict")


def main() -> None:
    try:
        app()
    except InputError as exc:
        err.print(str(exc), markup=False)
        sys.exit(1)
    except StoreError as exc:
        err.print(str(exc) if exc.located else f"procgrade: {exc}", markup=False)
        sys.exit(1)
    except ProcgradeError as exc:
        err.print(f"procgrade: {exc}", markup=False)
        sys.exit(1)


if __name__ == "__main__":
    main()
