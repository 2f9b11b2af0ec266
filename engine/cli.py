"""The ``procgrade`` command line: a thin layer, each command one library call.

No ``from __future__ import annotations`` here: Typer reads every command's annotations at each start,
and string annotations cost an ``eval`` each (a tenth of a second over the whole command tree).
"""

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.text import Text

from procgrade.engine.errors import InputError, ProcgradeError, StoreError
from procgrade.engine.tables import Table
from procgrade.engine.terminal import err, out

if TYPE_CHECKING:
    from procgrade.engine.store import EventStore

from procgrade.engine.settings import DEFAULT_DB  # noqa: E402  (``--help`` loads no database driver)

app = typer.Typer(
    name="procgrade",
    help="Event-sourced process grading for long-horizon coding-agent builds.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
schema_app = typer.Typer(help="Print the JSON Schema of procgrade's input formats.", no_args_is_help=True)
app.add_typer(schema_app, name="schema")
# Columnar archives and the executor options (issue 18): engine/archive_cli.py.
from procgrade.engine.archive_cli import AddressOption, ExecutorOption, WorkersOption, archive_app, events_progress, executor_from  # noqa: E402

app.add_typer(archive_app, name="archive")


DbOption = Annotated[
    str,
    typer.Option("--db", envvar="PROCGRADE_DB", help="Database URL (sqlite:///FILE, postgresql://...) or a SQLite file path."),
]


def _print_version(value: bool) -> None:
    if value:
        from procgrade.engine.version import __version__
        from procgrade.engine.facts import EXTRACTOR_VERSION

        out.print(f"procgrade {__version__} (fact extractor {EXTRACTOR_VERSION})")
        raise typer.Exit()


@app.callback()
def _main_options(
    version: Annotated[bool, typer.Option("--version", callback=_print_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
    debug: Annotated[bool, typer.Option("--debug", help="On an error, print the Python traceback too "
                                        "(also PROCGRADE_DEBUG=1; accepted after the command as well).")] = False,
) -> None:
    """Event-sourced process grading for long-horizon coding-agent builds."""


@contextmanager
def _store(db: str, *, create: bool = False) -> Iterator["EventStore"]:
    from procgrade.engine.store import opened_store

    with opened_store(db, create=create) as store:
        yield store


def _fail(message: str, code: int = 1) -> None:
    err.print(message, markup=False)
    raise typer.Exit(code)


@app.command()
def init(db: DbOption = DEFAULT_DB) -> None:
    """Create the database schema, or migrate it to this version of procgrade."""
    from procgrade.engine.store import init_database

    revision, where = init_database(db)
    out.print(f"database ready at schema revision {revision}: {where}")


@app.command()
def ingest(
    paths: Annotated[list[Path], typer.Argument(help="Files, directories or archives to ingest.", show_default=False)],
    format: Annotated[str, typer.Option("--format", "-f", help="Input format: auto (detect per file), native, "
                                        "or an importer's name (see `procgrade formats`).")] = "auto",
    seal: Annotated[bool, typer.Option(help="Seal each run after ingest: record its head, refuse later appends.")] = False,
    system: Annotated[Optional[str], typer.Option(help="The system (experiment/agent configuration) of every run, "
                                                  "for archives that do not name one; also qualifies run ids.")] = None,
    model: Annotated[Optional[str], typer.Option(help="The model of every run, for formats that do not record it.")] = None,
    label: Annotated[Optional[list[str]], typer.Option(help="KEY=VALUE run label for every run (repeatable).")] = None,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Ingest runs: each run whole or not at all; re-ingesting the same input is a no-op."""
    from procgrade.engine.importers.provenance import parse_labels
    from procgrade.engine.ingest import Overrides, formats, ingest_paths

    if format not in formats():
        _fail(f"procgrade: unknown format {format!r} (known: {', '.join(formats())})", 2)
    given = Overrides(system=system, model=model, labels=parse_labels(label or []))
    with _store(db, create=True) as store:
        done = ingest_paths(store, paths, format=format, seal=seal, overrides=given)
    for report in done.reports:
        out.print(report.summary, markup=False)
    if done.unrecognised:
        shown = ", ".join(done.unrecognised[:5]) + (f" and {len(done.unrecognised) - 5} more" if len(done.unrecognised) > 5 else "")
        err.print(f"{len(done.unrecognised)} file(s) skipped, not in a known format: {shown}", markup=False)


@app.command("formats")
def formats_command() -> None:
    """List the input formats procgrade reads."""
    from procgrade.engine.importers import importers

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
    from procgrade.engine.cli_runs import quick_runs

    infos = quick_runs(db)  # a SQLite store is read without loading SQLAlchemy (start-up, issue 16)
    if infos is None:
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
    from procgrade.engine.timeline import describe

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
    receipts: Annotated[Optional[Path], typer.Option("--receipts", help="Also check the store against the signed "
                                                     "seal receipts in this folder (see `procgrade seal --sign`).")] = None,
    public_key: Annotated[Optional[Path], typer.Option("--public-key", help="The Ed25519 public key (PEM) the "
                                                       "receipts must be signed with.")] = None,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Recompute each run's hash chain from the stored events; exit 1 on any mismatch."""
    from procgrade.engine.integrity import seal_problems
    from procgrade.engine.log_verification import verify_log

    bad = 0
    with _store(db) as store:
        wanted = run_ids or [info.run_id for info in store.runs()]
        sealing = {}
        for problem in seal_problems(store, wanted):
            sealing.setdefault(problem.run_id, []).append(problem)
        for run_id in wanted:
            report = verify_log(store, run_id)
            problems = report.problems + [str(p).removeprefix(f"{run_id}: ") for p in sealing.get(run_id, [])]
            if not problems:
                out.print(f"{run_id}: ok ({report.events_checked} events, head {(report.head_hash or '-')[:16]})")
            else:
                bad += 1
                for problem in problems:
                    err.print(f"{run_id}: {problem}", markup=False)
        receipt_problems = 0 if receipts is None else _check_receipts(store, receipts, public_key,
                                                                      wanted if run_ids else None)
    if receipt_problems:
        _fail(f"procgrade: {bad} run(s) fail verification; {receipt_problems} disagreement(s) with the signed receipts")
    if bad:
        _fail(f"procgrade: {bad} run(s) fail verification")


@app.command()
def export(
    run_id: Annotated[str, typer.Argument(help="The run.")],
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="File to write (default: stdout).")] = None,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Export a run as native JSONL (ingesting it elsewhere gives the same head hash)."""
    from procgrade.engine import api
    from procgrade.engine.native import dump_native

    if output is not None:
        api.export(db, run_id, output)  # the path is checked first; the file is written whole
        return
    with _store(db) as store:
        store.run(run_id)
        for line in dump_native(store.events(run_id)):
            sys.stdout.buffer.write(line)
        sys.stdout.flush()


ReceiptsOption = Annotated[Path, typer.Option("--receipts", help="The receipts log: a folder of signed, "
                                              "hash-chained receipt files.")]


@app.command()
def seal(
    run_id: Annotated[str, typer.Argument(help="The run.")],
    sign: Annotated[Optional[Path], typer.Option("--sign", help="Ed25519 private key (PEM): also write a signed "
                                                 "receipt of the seal and the run's scores to the receipts log.")] = None,
    receipts: ReceiptsOption = Path("receipts"),
    db: DbOption = DEFAULT_DB,
) -> None:
    """Seal a run: record its head hash as final and refuse later appends (sealing again only re-signs)."""
    with _store(db) as store:
        info = store.seal(run_id)
        out.print(f"{run_id}: sealed at {info.sealed_event_count} events, head {info.sealed_head_hash}")
        if sign is not None:
            from procgrade.engine.receipts import write_receipt

            out.print(Text(f"{run_id}: signed receipt {write_receipt(store, run_id, sign, receipts)}"))


@app.command()
def keygen(
    private: Annotated[Path, typer.Argument(help="Where to write the Ed25519 private key (PEM, mode 600).")],
    public: Annotated[Optional[Path], typer.Option("--public", help="Where to write the public key "
                                                   "(default: PRIVATE.pub).")] = None,
) -> None:
    """Make an Ed25519 key pair for signing seal receipts (keep the private key away from the database)."""
    from procgrade.engine.receipts import generate_keys

    public = public or private.with_name(private.name + ".pub")
    fingerprint = generate_keys(private, public)
    out.print(Text(f"private key {private}, public key {public} (sha256 {fingerprint})"))


def _check_receipts(store: "EventStore", receipts: Path, public_key: Optional[Path], run_ids: Optional[list[str]]) -> int:
    from procgrade.engine.receipts import verify_receipts

    if public_key is None:
        _fail("procgrade: --receipts needs --public-key (the key that signed them)", 2)
    checked, problems = verify_receipts(store, receipts, public_key, run_ids)  # type: ignore[arg-type]
    for problem in problems:
        err.print(str(problem), markup=False)
    if not problems:
        out.print(f"receipts: ok ({checked} signed receipts match the store)")
    return len(problems)


RulesOption = Annotated[
    Optional[Path],
    typer.Option("--rules", help="Rule set file (default: the built-in rules/sets/default.yaml)."),
]
MinCoverageOption = Annotated[Optional[str], typer.Option(
    "--min-coverage", help="Leave out of process analyses the runs whose share of applicable rules "
    "(rules_applicable / rules) is below this fraction (0.5, 1/2, 50%); they are listed apart.", show_default=False)]
AliasesOption = Annotated[Optional[Path], typer.Option(
    "--aliases", help="YAML or JSON mapping of raw or normalised model names to the group they belong to.",
    show_default=False)]


@app.command()
def score(
    run_ids: Annotated[list[str], typer.Argument(help="Runs to score.", show_default=False)],
    rules: RulesOption = None,
    executor: ExecutorOption = "local",
    workers: WorkersOption = 1,
    address: AddressOption = None,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Score runs with a rule set and store the score documents (identical re-scores are no-ops)."""
    from procgrade.engine.cli_errors import on_interrupt
    from procgrade.engine.parallel_scoring import score_many
    from procgrade.rules.loading import load_ruleset

    ruleset = load_ruleset(rules)
    stored: list[str] = []
    with on_interrupt(lambda: _scores_stored(stored, len(set(run_ids)), "score RUN...")), _store(db) as store, \
            executor_from(executor, workers, address) as runner:
        outcomes = score_many(store, run_ids, ruleset, executor=runner,
                              on_outcome=lambda outcome: stored.append(outcome.document.run_id))
    _print_scores(outcomes, ruleset.name)


def _scores_stored(stored: list[str], total: int | None, again: str) -> str:
    """What an interrupted score or rescore leaves: whole documents for some runs, none for the rest."""
    of = "" if total is None else f" of {total}"
    if total is not None and len(stored) == total:
        return (f"all {total} runs were scored and their documents stored; re-running `procgrade {again}` "
                "finds nothing left to do")
    return (f"{len(stored)}{of} runs were scored and their documents stored whole (no partial score "
            f"is ever written); re-running `procgrade {again}` scores the rest and keeps what is stored")


def _print_scores(outcomes: list, ruleset_name: str) -> None:
    from procgrade.engine.scoring import NOT_GRADED, display

    table = Table("run", "events", "violations", "process score", "exact", "stored",
                  title=f"rule set {ruleset_name}")
    for outcome in outcomes:
        doc = outcome.document
        violations = sum(rule["violated"] for rule in doc.body["rules"])
        exact = "-" if doc.process_score is None else f"{doc.process_score.numerator}/{doc.process_score.denominator}"
        shown = NOT_GRADED if doc.process_score is None else display(doc.process_score)
        table.add_row(Text(doc.run_id), str(doc.run_event_count), str(violations), shown,
                      exact, "new" if outcome.written else "already stored")
    out.print(table)
    if outcomes:
        out.print(f"rule set hash {outcomes[0].document.ruleset_hash}")


@app.command()
def rescore(
    all_runs: Annotated[bool, typer.Option("--all", help="Re-score every stored run.")] = False,
    rules: RulesOption = None,
    from_archive: Annotated[Optional[str], typer.Option(
        "--from-archive", help="Read fact rows from this columnar archive (path or URL), not the store; "
                               "--all then means every archived run.")] = None,
    executor: ExecutorOption = "local",
    workers: WorkersOption = 1,
    address: AddressOption = None,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Re-score stored runs; a new rule set adds scores and never replaces old ones."""
    from procgrade.engine.cli_errors import on_interrupt
    from procgrade.engine.parallel_scoring import score_many
    from procgrade.rules.loading import load_ruleset

    if not all_runs:
        _fail("procgrade rescore: say which runs: --all (or use `procgrade score RUN...`)", 2)
    ruleset = load_ruleset(rules)
    stored: list[str] = []
    planned: list[int] = []

    def plan_and_count(runs: int, events: int) -> None:
        planned.append(runs)
        plan(runs, events)

    with on_interrupt(lambda: _scores_stored(stored, planned[0] if planned else None, "rescore --all")), \
            _store(db) as store, executor_from(executor, workers, address) as runner, \
            events_progress("scoring") as (plan, advance):
        outcomes = score_many(store, None, ruleset, executor=runner, archive=from_archive,
                              on_events=advance, on_plan=plan_and_count,
                              on_outcome=lambda outcome: stored.append(outcome.document.run_id))
    _print_scores(outcomes, ruleset.name)


@app.command("verify")
def verify_command(
    run_ids: Annotated[Optional[list[str]], typer.Argument(help="Runs whose stored scores to check (default: all).")] = None,
    executor: ExecutorOption = "local",
    workers: WorkersOption = 1,
    address: AddressOption = None,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Recompute every stored score and byte-compare; exit 1 naming any drift."""
    from procgrade.engine.parallel_scoring import verify_many

    from procgrade.engine.integrity import integrity_problems

    with _store(db) as store, executor_from(executor, workers, address) as runner:
        problems = integrity_problems(store, run_ids)
        checked, drifts = verify_many(store, run_ids, executor=runner)
    for problem in problems:
        err.print(str(problem), markup=False)
    for drift in drifts:
        err.print(f"{drift.run_id}: rule set {drift.ruleset_hash[:16]}: {drift.reason}", markup=False)
    if drifts or problems:
        _fail(f"procgrade: {len(drifts)} of {checked} stored scores drifted; {len(problems)} seal or score "
              "head problem(s)")
    out.print(f"{checked} stored scores reproduce byte for byte")


@app.command()
def explain(
    run_id: Annotated[str, typer.Argument(help="The run.")],
    rules: RulesOption = None,
    show_all: Annotated[bool, typer.Option("--all", help="Also list fulfilled and vacuous activations.")] = False,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Per rule: the verdicts on a run, with the events each one cites."""
    from procgrade.engine.explanation import explain_run

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
    from procgrade.rules.loading import load_ruleset
    from procgrade.rules.model import BEHAVIOUR_PATTERNS, BINARY_CHECKS
    from procgrade.rules.planted import coverage, summary, uncovered, validate_corpus

    ruleset = load_ruleset(rules)
    results = validate_corpus(directory, ruleset)
    table = Table("rule", "case", "fault flagged", "violations on fault", "clean twin flagged by", "also flagged on fault",
                  title=f"planted faults in {directory} under rule set {ruleset.name} v{ruleset.version}")
    for result in results:
        table.add_row(result.rule_id, result.case or "-", "yes" if result.detected else Text("NO", style="bold red"),
                      str(result.fault_violations.get(result.rule_id, 0)),
                      Text(", ".join(result.false_flags) or "-", style="bold red" if result.false_flags else ""),
                      ", ".join(result.collateral) or "-")
    out.print(table)
    detected, total, false_flags = summary(results)
    missing = uncovered(results, ruleset)
    covered = coverage(results, ruleset)
    fewest = min(covered["cases_per_rule"].values()) if covered["cases_per_rule"] else 0
    out.print(f"detected {detected}/{total} faults ({100 * detected // max(total, 1)}%); {false_flags} clean twins "
              f"falsely flagged; {covered['collateral']} fault runs also flagged by another rule; at least {fewest} "
              f"cases per rule; patterns {len(covered['patterns'])}/{len(BEHAVIOUR_PATTERNS)}, "
              f"checks {len(covered['checks'])}/{len(BINARY_CHECKS)} validated"
              + (f"; rules without a case: {', '.join(missing)}" if missing else ""))
    if detected < total or false_flags:
        raise typer.Exit(1)


@app.command("rule-signal")
def rule_signal(
    rules: RulesOption = None,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Does a rule set carry signal on the stored runs? Per-rule applicability, sole deciders, AUC for resolution."""
    from procgrade.rules.loading import load_ruleset
    from procgrade.rules.signal import render

    with _store(db) as store:
        for line in render(store, load_ruleset(rules)):
            out.print(line)


@app.command()
def report(
    html: Annotated[Path, typer.Option("--html", help="The page to write: one self-contained HTML file.",
                                       show_default=False)],
    by: Annotated[str, typer.Option("--by", help="Group runs by this provenance field (model, harness, task_id, "
                                    "settings.<key>, labels.<key>, ...).")] = "model",
    rules: RulesOption = None,
    reference: Annotated[str, typer.Option("--reference", help="The grader calibration compares against.")] = "human",
    candidates: Annotated[Optional[list[str]], typer.Option("--candidate", help="A grader to calibrate "
                                                            "(repeatable; default: judge and rules).")] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the bootstrap intervals.")] = 0,
    allow_mixed: Annotated[bool, typer.Option("--allow-mixed", help="Pool runs whose settings differ within a "
                                              "group (the comparison lists which differ).")] = False,
    resamples: Annotated[Optional[int], typer.Option("--resamples", min=1, help="Bootstrap resamples of the "
                                                     "comparison and calibration intervals (default: theirs).")] = None,
    timelines: Annotated[bool, typer.Option("--timelines/--no-timelines", help="Include every run's timeline "
                                            "with its findings.")] = True,
    min_coverage: MinCoverageOption = None,
    aliases: AliasesOption = None,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Write a static HTML report: comparison, calibration, charts and every run's timeline with its findings."""
    from procgrade.engine.output_files import check_output

    check_output(html, "the report")  # before any work: a page that cannot be written costs nothing
    from procgrade.engine import api
    from procgrade.engine.cli_errors import on_interrupt
    from procgrade.rules.loading import load_ruleset

    threshold, identity = _analysis_filters(min_coverage, aliases)
    ruleset = load_ruleset(rules)
    written: list[Path] = []
    note = (lambda: f"the report was already written whole to {html}" if written else
            "the page is written whole at the end, so no report was written; re-run the command to write it")
    # the page's path is checked before any work; the page is written whole
    with on_interrupt(note), _store(db) as store:
        done = api.report(store, html, rules=ruleset, by=by, reference=reference,
                          candidates=tuple(candidates or ("judge", "rules")), seed=seed, allow_mixed=allow_mixed,
                          resamples=resamples, timelines=timelines, min_coverage=threshold,
                          identity=identity)
        written.append(html)
    out.print(Text(str(html)))
    out.print(Text(done.summary))


def _print_schema(schema: dict) -> None:
    import orjson

    sys.stdout.buffer.write(orjson.dumps(schema, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n")


@schema_app.command("rules")
def schema_rules() -> None:
    """The JSON Schema of a rule set file."""
    from procgrade.rules.model import ruleset_json_schema

    _print_schema(ruleset_json_schema())


@schema_app.command("rubric")
def schema_rubric() -> None:
    """The JSON Schema of an LLM-judge rubric file."""
    from procgrade.judges.cli import schema_rubric as print_schema

    print_schema()


@schema_app.command("events")
def schema_events() -> None:
    """The JSON Schema of one native event line."""
    from procgrade.engine.events import events_json_schema

    _print_schema(events_json_schema())


@schema_app.command("plan")
def schema_plan() -> None:
    """The JSON Schema of a browser test plan (tasks/<id>/plans/<id>.yaml)."""
    from procgrade.oracles.browser_plans import plan_json_schema

    _print_schema(plan_json_schema())


@schema_app.command("product")
def schema_product() -> None:
    """The JSON Schema of a task's product.yaml (how the product under test starts)."""
    from procgrade.oracles.browser_plans import product_json_schema

    _print_schema(product_json_schema())


# --- human and judge grades (engine/grades/) ---------------------------------------------------

grades_app = typer.Typer(help="Human and judge grades: arena grade sheets and DevAI judgments.", no_args_is_help=True)
app.add_typer(grades_app, name="grades")


@grades_app.command("import")
def grades_import(
    paths: Annotated[list[Path], typer.Argument(help="Grade sheets (CSV, JSON) and DevAI judgment files or folders.",
                                                show_default=False)],
    format: Annotated[str, typer.Option("--format", "-f", help="auto (detect per file), arena or devai.")] = "auto",
    create: Annotated[bool, typer.Option("--create/--no-create", help="Create a grades-only run for a run id the "
                                         "store does not hold (--no-create: that is an error).")] = True,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Append grades to the runs they grade: all or nothing; re-importing a sheet is a no-op."""
    from procgrade.engine.grades import GRADE_FORMATS, import_grades

    if format not in GRADE_FORMATS:
        _fail(f"procgrade: unknown grades format {format!r} (known: {', '.join(GRADE_FORMATS)})", 2)
    with _store(db, create=True) as store:
        done = import_grades(store, paths, format=format, create_runs=create)
    for run in done.runs:
        out.print(Text(run.summary))
    created = f", {len(done.created)} run(s) created" if done.created else ""
    out.print(Text(f"{done.appended} grade(s) appended to {sum(1 for r in done.runs if r.appended)} run(s){created}; "
                   f"{done.held} already held; {len(done.files)} file(s) read"))
    if done.skipped:
        shown = ", ".join(done.skipped[:5]) + (f" and {len(done.skipped) - 5} more" if len(done.skipped) > 5 else "")
        err.print(f"{len(done.skipped)} file(s) skipped, not grades: {shown}", markup=False)


@schema_app.command("grades")
def schema_grades() -> None:
    """The JSON Schema of an arena grade sheet (JSON spelling)."""
    from procgrade.engine.grades import grade_sheet_json_schema

    _print_schema(grade_sheet_json_schema())


# --- hidden-test acceptance (oracles/) --------------------------------------------------------

task_app = typer.Typer(help="Task packages: hidden-test acceptance controls and browser test plans.", no_args_is_help=True)
app.add_typer(task_app, name="task")

BackendOption = Annotated[str, typer.Option("--backend", help="Sandbox back-end: local, or docker.")]
GraderOption = Annotated[str, typer.Option("--grader", help="Browser grader: scripted, or agent (an LLM).")]
PythonOption = Annotated[Optional[str], typer.Option("--python", help="Local back-end: the judge interpreter (and the "
                                                     "base of a task's own judge environment).")]
ImageOption = Annotated[Optional[str], typer.Option("--image", help="Docker back-end: the judge image (and the base "
                                                    "of a task's own judge environment layer).")]
PackageOption = Annotated[Optional[list[Path]], typer.Option("--with-package", help="A local package (folder with "
                                                             "pyproject.toml, or a wheel) added to the task's judge "
                                                             "environment; repeatable.")]


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
    python: PythonOption = None,
    image: ImageOption = None,
    with_package: PackageOption = None,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Judge a workspace against a task's hidden tests and record the verdict (exit 0 only when accepted)."""
    from procgrade.engine import api

    verdict = api.accept(db, task, workspace, run=run, backend=backend, submit_file=submit_file, timeout=timeout,
                         python=python, image=image, packages=with_package or ())
    result = verdict.result
    counts = ", ".join(f"{n} {label}" for n, label in ((result.passed, "passed"), (result.failed, "failed"),
                                                       (result.errored, "errored"), (result.skipped, "skipped"))
                       if n is not None)
    out.print(Text(f"{verdict.run_id}: acceptance check {verdict.attempt + 1} on task {result.task_id}: "
                   f"{result.status}, reward {result.reward or 'none'}" + (f" ({counts})" if counts else "")))
    out.print(Text(f"suite {result.suite_sha256[:16]}  workspace {(result.workspace_sha256 or '-')[:16]}  "
                   f"back-end {result.backend}  {result.duration_ms} ms  {len(verdict.events)} events appended"))
    out.print(Text(result.explanation))
    for notice in result.details.get("not_honoured", []):
        out.print(Text(f"note: {notice}"))
    if not result.accepted:
        raise typer.Exit(1)


@task_app.command("validate")
def task_validate(
    directory: Annotated[Path, typer.Argument(help="Task package folder.")],
    backend: BackendOption = "local",
    grader: GraderOption = "scripted",
    grades: Annotated[int, typer.Option("--grades", min=1, help="Browser plans: grades of the reference build per plan.")] = 10,
    bug_grades: Annotated[int, typer.Option("--bug-grades", min=1, help="Browser plans: grades per planted bug.")] = 3,
    timeout: Annotated[Optional[float], typer.Option("--timeout", min=0.1, help="Override the task's judge "
                                                     "timeout for every control (seconds).")] = None,
    python: PythonOption = None,
    image: ImageOption = None,
    with_package: PackageOption = None,
) -> None:
    """Judge every control of a task package; exit 1 unless each gets its expected reward. A package with
    browser plans (product.yaml, plans/) also has its plans validated: the reference build must pass every
    plan in every grade and every planted bug's plan must fail every grade (printed like ViBench's Table 4)."""
    from procgrade.oracles.acceptance import make_sandbox, validate_task

    if (directory / "product.yaml").is_file():
        from procgrade.oracles.browser_cli import run_validate_plans

        code = run_validate_plans(out, err, directory, grader, grades, bug_grades, {})
        if not (directory / "source" / "manifest.json").is_file() or code:
            raise typer.Exit(code)

    sandbox = make_sandbox(backend, python=python, image=image, packages=with_package or ())
    task, checks = validate_task(directory, backend, sandbox=sandbox, timeout_sec=timeout)
    table = Table("control", "expected", "status", "reward", "passed", "failed", "errored", "seconds", "ok",
                  title=f"task {task.task_id} ({task.layout} layout): suite {task.suite_sha256[:16]}, "
                        f"{len(task.tests.test_files)} test files")
    for check in checks:
        r = check.result
        table.add_row(check.name, str(check.expected_reward), r.status, r.reward or "-",
                      *("-" if n is None else str(n) for n in (r.passed, r.failed, r.errored)), f"{check.seconds:.1f}",
                      Text("yes", style="green") if check.ok else Text("NO", style="bold red"))
    out.print(table)
    env = next((c.result.details.get("sandbox", {}).get("judge_env") for c in checks
                if c.result.details.get("sandbox", {}).get("judge_env")), None)
    if env:
        out.print(Text(f"judge environment {env['name']}: " + ", ".join(f"{k}=={v}" for k, v in
                                                                     sorted(env["distributions"].items()))))
    for notice in task.notices:
        out.print(Text(f"note: {notice}"))
    for check in checks:
        out.print(Text(f"{check.name}: {check.problem + ': ' if check.problem else ''}{check.result.explanation}"))
    bad = [c.name for c in checks if not c.ok]
    if not checks:
        _fail(f"procgrade: task {task.task_id} has no controls to validate")
    if bad:
        _fail(f"procgrade: {len(bad)} of {len(checks)} controls did not get their expected verdict: {', '.join(bad)}")
    out.print(f"all {len(checks)} controls get their expected verdict")


# --- process vs outcome (engine/analysis/comparison.py) ---------------------------------------

CompareByOption = Annotated[str, typer.Option("--by", help="Group runs by this provenance field: model, harness, "
                                            "harness_version, task_id, format, run_id, settings.<key>, labels.<key>.")]
CompareAllowMixedOption = Annotated[bool, typer.Option("--allow-mixed", help="Pool runs whose settings differ within a "
                                                "group (the output says which settings differ).")]


def _analysis_filters(min_coverage: str | None, aliases: Path | None):  # type: ignore[no-untyped-def]
    """The parsed --min-coverage (exact) and the model identity of --aliases."""
    from procgrade.engine.analysis.graded_runs import parse_min_coverage
    from procgrade.engine.analysis.model_identity import ModelIdentity, load_aliases

    try:
        threshold = parse_min_coverage(min_coverage)
    except ValueError as exc:
        _fail(f"procgrade: {exc}", 2)
    return threshold, (load_aliases(aliases) if aliases is not None else ModelIdentity())


@app.command("compare")
def compare_command(
    by: CompareByOption = "model",
    rules: RulesOption = None,
    allow_mixed: CompareAllowMixedOption = False,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the bootstrap intervals.")] = 0,
    resamples: Annotated[int, typer.Option("--resamples", min=1, help="Bootstrap resamples.")] = 9999,
    json_file: Annotated[Optional[Path], typer.Option("--json", help="Also write the comparison to FILE as "
                                                      "canonical JSON.")] = None,
    min_coverage: MinCoverageOption = None,
    aliases: AliasesOption = None,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Process score against outcome per group: both rankings, Spearman and Kendall tau-b, and the rank flips."""
    from procgrade.engine.analysis.comparison import check_field, compare
    from procgrade.engine.analysis.dataset import load_runs
    from procgrade.engine.canonical import canonical_json
    from procgrade.rules.loading import load_ruleset

    try:
        check_field(by)
    except ValueError as exc:
        _fail(f"procgrade: {exc}", 2)
    threshold, identity = _analysis_filters(min_coverage, aliases)
    _check_json_output(json_file)
    ruleset = load_ruleset(rules)
    with _store(db) as store:
        runs = load_runs(store, ruleset)
    if not runs:
        _fail("procgrade: no runs in the store")
    # runs whose settings differ within a group: MixedGroupSettingsError, one line by engine/cli_errors.py
    result = compare(runs, by, allow_mixed=allow_mixed, seed=seed, n_resamples=resamples, ruleset=ruleset,
                     min_coverage=threshold, identity=identity)
    _cmp_print_comparison(result)
    if json_file is not None:
        _write_json(json_file, canonical_json(result.to_dict()) + b"\n")
        out.print(Text(f"wrote {json_file}"))


@app.command("associate")
def associate_command(
    by: CompareByOption = "system",
    rules: RulesOption = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the AUC bootstrap intervals.")] = 0,
    resamples: Annotated[int, typer.Option("--resamples", min=1, help="Bootstrap resamples.")] = 1999,
    json_file: Annotated[Optional[Path], typer.Option("--json", help="Also write the result to FILE as "
                                                      "canonical JSON.")] = None,
    min_coverage: MinCoverageOption = None,
    aliases: AliasesOption = None,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Which process behaviours predict outcome: per rule, violation rate in resolved vs unresolved runs and the
    odds ratio with its exact interval, pooled and per group; and the process score's AUC for resolution."""
    from procgrade.engine.analysis.association import associate, render
    from procgrade.engine.analysis.comparison import check_field
    from procgrade.engine.analysis.dataset import load_runs
    from procgrade.rules.loading import load_ruleset

    try:
        check_field(by)
    except ValueError as exc:
        _fail(f"procgrade: {exc}", 2)
    threshold, identity = _analysis_filters(min_coverage, aliases)
    ruleset = load_ruleset(rules)
    with _store(db) as store:
        runs = load_runs(store, ruleset)
    if not runs:
        _fail("procgrade: no runs in the store")
    result = associate(runs, by, seed=seed, n_resamples=resamples, min_coverage=threshold, identity=identity)
    render(result, out)
    if json_file is not None:
        json_file.write_bytes(result.to_json() + b"\n")
        out.print(Text(f"wrote {json_file}"))


@app.command("outcomes")
def outcomes_command(
    by: CompareByOption = "model",
    allow_mixed: CompareAllowMixedOption = False,
    k: Annotated[int, typer.Option("--k", min=1, help="The k of pass^k (k builds of a product all pass).")] = 2,
    json_file: Annotated[Optional[Path], typer.Option("--json", help="Also write the metrics to FILE as "
                                                      "canonical JSON.")] = None,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Outcome metrics per group: pass@1, plan pass rate (95% intervals, ViBench 2.0), pass^k, cost and time."""
    from procgrade.engine.analysis.comparison import OUTCOME_FORMAT, check_field, group_outcomes
    from procgrade.engine.analysis.dataset import load_runs
    from procgrade.engine.canonical import canonical_json

    try:
        check_field(by)
    except ValueError as exc:
        _fail(f"procgrade: {exc}", 2)
    _check_json_output(json_file)
    with _store(db) as store:
        runs = load_runs(store, None)
    if not runs:
        _fail("procgrade: no runs in the store")
    groups = group_outcomes(runs, by, allow_mixed=allow_mixed)  # mixed settings: see compare_command
    _cmp_print_outcomes(groups, by, k)
    from procgrade.engine.analysis.comparison import runs_text
    from procgrade.engine.analysis.dataset import group_key

    ungrouped = [r.run_id for r in runs if group_key(r, by) is None]
    if ungrouped:
        out.print(Text(f"no {by}, in no group: {runs_text(ungrouped, shown=5)}"))
    if json_file is not None:
        data = {"format": OUTCOME_FORMAT, "by": by, "allow_mixed": allow_mixed, "k": k,
                "groups": [g.to_dict(k) for g in groups]}
        _write_json(json_file, canonical_json(data) + b"\n")
        out.print(Text(f"wrote {json_file}"))


def _check_json_output(path: Path | None) -> None:
    """A --json FILE that cannot be written fails before the work, not after it."""
    if path is not None:
        from procgrade.engine.output_files import check_output

        check_output(path, "the JSON file")


def _write_json(path: Path, data: bytes) -> None:
    from procgrade.engine.output_files import write_whole

    write_whole(path, data)


def _cmp_rank(rank: float | None) -> str:
    if rank is None:
        return "-"
    return str(int(rank)) if float(rank).is_integer() else f"{rank:g}"


def _cmp_score(value, interval) -> str:  # type: ignore[no-untyped-def]
    from procgrade.engine.analysis.outcome_metrics import format_percent

    if value is None:
        return "-"
    return interval.format() if interval is not None else f"{format_percent(value)} (no interval)"


def _cmp_exact(value) -> str:  # type: ignore[no-untyped-def]
    return "-" if value is None else f"{value.numerator}/{value.denominator}"


def _cmp_print_comparison(result) -> None:  # type: ignore[no-untyped-def]
    from procgrade.engine.analysis.outcome_metrics import format_percent
    from procgrade.engine.scoring import display

    table = Table(title=f"process vs outcome by {result.by}: rule set {result.ruleset_name} "
                        f"v{result.ruleset_version}, outcome rank by {result.outcome_metric} (percent, 95% interval)")
    for header in ("group", "runs", "process score", "exact", "process rank", "pass@1", "plan pass",
                   "outcome rank"):
        table.add_column(header)
    for row in result.groups:
        summary = row.outcome.summary
        table.add_row(Text(row.group), str(len(row.runs)), display(row.process_score), _cmp_exact(row.process_score),
                      _cmp_rank(row.process_rank),
                      _cmp_score(row.outcome_score, summary and summary.pass_at_1_interval),
                      _cmp_score(summary and summary.plan_pass_rate, summary and summary.plan_pass_interval),
                      _cmp_rank(row.outcome_rank))
    out.print(table)
    agreement = result.agreement
    out.print(Text(f"rank agreement, process score vs {result.outcome_metric}: {result.agreement_note}"))
    if agreement is not None:
        def corr(name: str, c) -> str:  # type: ignore[no-untyped-def]
            value = "undefined" if c.statistic is None else f"{c.statistic:.3f}"
            bounds = "undefined" if c.low is None or c.high is None else f"{c.low:.3f} to {c.high:.3f}"
            return f"{name} {value} ({int(result.confidence * 100)}% bootstrap interval {bounds})"

        out.print(Text(f"  {corr('Spearman rho', agreement.spearman)}; {corr('Kendall tau-b', agreement.kendall_tau_b)}; "
                       f"{agreement.n} groups, {agreement.n_resamples} resamples, seed {result.seed}"))
        for note in agreement.notes:
            out.print(Text(f"  note: {note}"))
    if result.flips:
        out.print(Text(f"rank flips ({len(result.flips)}):"))
        for flip in result.flips:
            a, b = flip.process_ahead, flip.outcome_ahead
            rules_text = "; ".join(
                f"{gap.rule_id} {'not applicable' if gap.ahead is None else _cmp_exact(gap.ahead)} vs "
                f"{_cmp_exact(gap.behind)}" for gap in flip.rules) or "none"
            out.print(Text(f"  {a} ahead by process ({_cmp_exact(flip.process[0])} vs {_cmp_exact(flip.process[1])}), "
                           f"{b} ahead by {result.outcome_metric} ({format_percent(flip.outcome[1])}% vs "
                           f"{format_percent(flip.outcome[0])}%); rules in {a}'s favour ({a} vs {b}): {rules_text}"))
    else:
        out.print(Text("rank flips: none"))
    for group, why in result.excluded:
        out.print(Text(f"not ranked: {group}: {why}"))
    _cmp_print_left_out(result)
    _cmp_print_lists([row.outcome for row in result.groups], result.by)


def _cmp_print_left_out(result) -> None:  # type: ignore[no-untyped-def]
    """The runs left out of the comparison, by reason, and the graded runs with no group."""
    from procgrade.engine.analysis.comparison import runs_text

    graded = sum(len(row.runs) for row in result.groups)
    out.print(Text(f"runs compared: {graded} graded; {len(result.not_graded)} left out"
                   + (f" (--min-coverage {result.to_dict()['min_coverage']})" if result.min_coverage is not None
                      else "") + f"; {len(result.ungrouped)} graded without a {result.by}"))
    by_reason: dict[str, list[str]] = {}
    for entry in result.not_graded:
        by_reason.setdefault(entry.reason, []).append(entry.run_id)
    for reason, ids in by_reason.items():
        out.print(Text(f"left out, {reason}: {runs_text(ids, shown=5)}"))
    if result.ungrouped:
        out.print(Text(f"no {result.by}, in no group: {runs_text(result.ungrouped, shown=5)}"))


def _cmp_print_outcomes(groups, by: str, k: int) -> None:  # type: ignore[no-untyped-def]
    from procgrade.engine.scoring import display

    table = Table(title=f"outcomes by {by} (percent, 95% interval as ViBench 2.0 Appendix C)")
    for header in ("group", "runs", "judged", "products", "pass@1", "plan pass", f"pass^{k}", "mean cost",
                   "mean time (s)"):
        table.add_column(header)
    for group in groups:
        summary = group.summary
        judged = len(group.builds)
        products = "-" if summary is None else str(len(summary.products))
        pass_k = group.pass_hat_k(k)
        table.add_row(Text(group.group), str(len(group.runs)), str(judged), products,
                      _cmp_score(group.pass_at_1, summary and summary.pass_at_1_interval),
                      _cmp_score(summary and summary.plan_pass_rate, summary and summary.plan_pass_interval),
                      "-" if pass_k is None else display(pass_k),
                      "-" if summary is None or summary.cost_mean is None else display(summary.cost_mean),
                      "-" if summary is None or summary.duration_mean_s is None else display(summary.duration_mean_s))
    out.print(table)
    _cmp_print_lists(groups, by)


def _cmp_print_lists(groups, by: str) -> None:  # type: ignore[no-untyped-def]
    from procgrade.engine.analysis.comparison import runs_text

    for group in groups:
        summary = group.summary
        name = group.group
        if summary is not None:
            if summary.interval_note:
                has = summary.pass_at_1_interval is not None
                out.print(Text(f"{name}: {'interval' if has else 'no interval'}: {summary.interval_note}"))
            for item in summary.no_grade:
                out.print(Text(f"{name}: no grade, left out of both scores: {item.build_id} plan {item.plan_id} "
                               f"(product {item.product})"))
            for product, build_id in summary.ungraded_builds:
                out.print(Text(f"{name}: ungraded build, left out: {build_id} (product {product})"))
        if group.unjudged:
            out.print(Text(f"{name}: unjudged (no verdict), not scored: {', '.join(group.unjudged)}"))
        if group.without_task:
            out.print(Text(f"{name}: no task id, each its own product: {', '.join(group.without_task)}"))
        for outcome in group.outcomes:
            for note in outcome.notes:
                out.print(Text(f"{name}: {outcome.run_id}: {note}"))
        for key, by_value in group.mixed_settings.items():
            shown = "; ".join(f"{value} in {runs_text(ids)}" for value, ids in by_value.items())
            out.print(Text(f"{name}: settings differ, pooled by --allow-mixed: {key}: {shown}"))


# --- calibration of automated grades (engine/analysis/calibration.py) -------------------------


@app.command("calibrate")
def calibrate_command(
    candidate: Annotated[list[str], typer.Option("--candidate", help="Grader to calibrate: a grader (judge:gpt-4o, "
                                                 "human:bob, a sheet), a set (judge, human), a rule (primary, "
                                                 "secondary, majority, adjudicated; RULE:judge) or rules; repeat "
                                                 "for two or more (McNemar between them).", show_default=False)],
    reference: Annotated[str, typer.Option("--reference", help="The reference: a grader (human:alice, a sheet), a "
                                           "set (human, judge) or a rule over each item's annotations (primary, "
                                           "secondary, majority, adjudicated).")] = "human",
    layer: Annotated[Optional[str], typer.Option("--layer", help="One grade layer (default: every layer the "
                                                 "reference graded).")] = None,
    item: Annotated[Optional[list[str]], typer.Option("--item", help="Only this item (success, a check, a rubric "
                                                      "dimension); repeat with --pool-items to pool items.",
                                                      show_default=False)] = None,
    pool_items: Annotated[bool, typer.Option("--pool-items", help="Compare different items of one layer together "
                                             "(refused otherwise when they are a study's own or named with --item).")] = False,
    by: Annotated[Optional[str], typer.Option("--by", help="A row and a grader matrix per group of this field "
                                              "(harness, model, labels.<key>, or a run label such as split); ranks "
                                              "and ratings group by it (default model).")] = None,
    rules: RulesOption = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the bootstrap resamples.")] = 0,
    bootstrap: Annotated[int, typer.Option("--bootstrap", min=1, help="Bootstrap resamples for rank-correlation "
                                           "and Bradley-Terry intervals.")] = 1000,
    json_file: Annotated[Optional[Path], typer.Option("--json", help="Also write the result as canonical JSON.")] = None,
    min_coverage: MinCoverageOption = None,
    aliases: AliasesOption = None,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Calibrate automated grades (judge, rules) against human grades: agreement, kappa, error rates, ranks."""
    from procgrade.engine.analysis.calibration import calibrate_store, render

    threshold, identity = _analysis_filters(min_coverage, aliases)
    _check_json_output(json_file)
    with _store(db) as store:
        result = calibrate_store(store, reference, candidate, layer=layer, by=by, rules=rules, seed=seed,
                                 items=item, pool_items=pool_items,
                                 bootstrap=bootstrap, min_coverage=threshold, identity=identity)
    render(result, out)
    if json_file is not None:
        _write_json(json_file, result.to_json())


@app.command("grade-browser")
def grade_browser(
    task: Annotated[Path, typer.Option("--task", help="Task package folder with product.yaml and plans/.", show_default=False)],
    workspace: Annotated[Path, typer.Option("--workspace", help="The final workspace of the build.", show_default=False)],
    run: Annotated[Optional[str], typer.Option("--run", help="Append the grading to this stored run "
                                               "(default: an outcome-only run browser/<task>/<workspace hash>).")] = None,
    grader: GraderOption = "scripted",
    plan: Annotated[Optional[list[str]], typer.Option("--plan", help="Grade only this plan (repeatable).")] = None,
    evidence: Annotated[Optional[Path], typer.Option("--evidence", help="Evidence folder (default: beside the database, "
                                                     "<db file>.evidence).")] = None,
    agent_base_url: Annotated[Optional[str], typer.Option("--agent-base-url", help="OpenAI-compatible endpoint of the "
                                                          "agent grader (or PROCGRADE_GRADER_BASE_URL).")] = None,
    agent_model: Annotated[Optional[str], typer.Option("--agent-model", help="Model of the agent grader "
                                                       "(or PROCGRADE_GRADER_MODEL).")] = None,
    screenshots: Annotated[bool, typer.Option("--screenshots/--no-screenshots", help="Send the agent grader "
                                              "screenshots as images too.")] = False,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Grade the final product in Chromium with a task's test plans (re-grade protocol of ViBench 2.0) and
    append every grade and plan verdict to the run (exit 0 only when every graded plan passed)."""
    from procgrade.oracles.browser_cli import grader_options, run_grade_browser

    if not workspace.is_dir():
        _fail(f"procgrade: the workspace {workspace} is not a folder", 2)
    with _store(db, create=True) as store:
        code = run_grade_browser(out, err, store, db, task, workspace, run, grader, evidence, plan,
                                 grader_options(grader, agent_base_url, agent_model, screenshots))
    if code:
        raise typer.Exit(code)


# --- live recording: the collector service and its tokens (engine/collector_cli.py) -------------
from procgrade.engine.collector_cli import register as _register_collector  # noqa: E402

_register_collector(app)

# --- LLM judges (judges/cli.py) -----------------------------------------------------------------
from procgrade.judges.cli import judge_app  # noqa: E402

app.add_typer(judge_app, name="judge")


def main() -> None:
    """The console script: errors become one line and an exit code (engine/cli_errors.py)."""
    from procgrade.engine.cli_errors import run

    sys.exit(run(app))


if __name__ == "__main__":
    main()
