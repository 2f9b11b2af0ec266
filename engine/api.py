"""procgrade's Python API: one function per command, and DataFrame views for notebooks.

``from procgrade.engine.api import *`` is the whole public surface (``import procgrade`` once the
package is installed under that name). Each function mirrors a ``procgrade`` command one to
one and takes the same choices as keyword arguments; the command line is a thin layer over
them. Functions that touch the store take ``store`` first: an open :class:`EventStore`
(kept open) or a database URL / SQLite path (opened and closed around the call)::

    import procgrade as pg

    store = pg.open_store("procgrade.db")
    pg.ingest(store, ["examples/native/todo-app-run.jsonl"])
    pg.rescore(store)
    runs = pg.runs_df(store)                      # one row per run
    scores = pg.scores_df(store)                  # one row per stored score document
    pg.compare(store, by="model", allow_mixed=True).to_dict()

Errors are :mod:`procgrade.engine.errors` exceptions (``ProcgradeError`` and its kinds), never a
driver's. The ``*_df`` functions need pandas (``pip install 'procgrade[analysis]'``), imported
only when one is called; their rows come in a fixed order (run id, then seq), so the same store
gives the same frame.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

from procgrade.engine.errors import (
    ConflictError,
    DatabaseUnavailableError,
    EventIdConflictError,
    InputError,
    MissingExtraError,
    OutputPathError,
    ProcgradeError,
    RunSealedError,
    SchemaNotReadyError,
    SeqConflictError,
    StoreError,
    UnknownRunError,
)
from procgrade.engine.events import Event
from procgrade.engine.ingest import Ingested
from procgrade.engine.log_verification import LogVerification
from procgrade.engine.rescoring import Drift, ScoreOutcome
from procgrade.engine.store import DEFAULT_DB, EventStore, RunInfo
from procgrade.engine.version import __version__

if TYPE_CHECKING:  # heavy or optional modules, imported by the functions that need them
    import pandas

    from procgrade.engine.analysis.calibration import Calibration
    from procgrade.engine.analysis.comparison import Comparison, GroupOutcome
    from procgrade.engine.grades.importing import GradesImport
    from procgrade.engine.reporting import Report
    from procgrade.oracles.acceptance import ControlCheck, Verdict
    from procgrade.oracles.task_package import Task
    from procgrade.rules.model import RuleSet
    from procgrade.rules.monitor import Finding
    from procgrade.rules.planted import PlantedResult

__all__ = [
    # the store
    "Store", "open_store", "init",
    # the log
    "ingest", "formats", "runs", "show", "verify_log", "export", "seal", "schema",
    # scores
    "score", "rescore", "verify", "Verification", "explain", "Explanation", "validate_rules",
    # outcomes and grades
    "import_grades", "accept", "validate_task", "outcomes", "compare", "calibrate", "report",
    # DataFrames
    "runs_df", "events_df", "findings_df", "scores_df", "outcomes_df", "grades_df",
    # results and errors callers handle
    "EventStore", "RunInfo", "Event", "Ingested", "LogVerification", "ScoreOutcome", "Drift",
    "ProcgradeError", "InputError", "StoreError", "SchemaNotReadyError", "ConflictError", "SeqConflictError",
    "EventIdConflictError", "RunSealedError", "UnknownRunError", "DatabaseUnavailableError",
    "MissingExtraError", "OutputPathError",
    "DEFAULT_DB", "__version__",
]

#: An open store, or where one is: a database URL (``sqlite:///FILE``, ``postgresql://...``) or a SQLite path.
Store = Union[EventStore, str, os.PathLike]
#: A rule set: a YAML file, or one already loaded; None is the built-in ``rules/sets/default.yaml``.
Rules = Union["RuleSet", str, os.PathLike, None]


# --- the store --------------------------------------------------------------------------------


def _url(db: str | os.PathLike | None) -> str:
    return os.fspath(db) if db is not None else (os.environ.get("PROCGRADE_DB") or DEFAULT_DB)


def open_store(db: str | os.PathLike | None = None, *, create: bool = False) -> EventStore:
    """Open the store at ``db`` (default ``$PROCGRADE_DB``, else ``sqlite:///procgrade.db``); close it with
    ``.close()``. ``create`` gives an empty database the schema (SQLite: creates the file); without it a
    missing SQLite file is :class:`SchemaNotReadyError`, never created."""
    from procgrade.engine.store import open_store as _open

    return _open(_url(db), create=create)


def init(db: str | os.PathLike | None = None) -> str:
    """``procgrade init``: create the schema at ``db``, or migrate it to this version; the revision."""
    from procgrade.engine.store import init_database

    return init_database(_url(db))[0]


@contextlib.contextmanager
def _using(store: Store, *, create: bool = False) -> Iterator[EventStore]:
    """The caller's open store, untouched; or one opened from a URL for this call only."""
    if isinstance(store, EventStore):
        yield store
        return
    from procgrade.engine.store import opened_store

    with opened_store(_url(store), create=create) as opened:
        yield opened


def _ruleset(rules: Rules) -> RuleSet:
    from procgrade.rules.loading import load_ruleset
    from procgrade.rules.model import RuleSet

    return rules if isinstance(rules, RuleSet) else load_ruleset(None if rules is None else Path(rules))


# --- the log ----------------------------------------------------------------------------------


def formats() -> list[str]:
    """``procgrade formats``: what ``ingest(format=...)`` takes: auto, native and every importer's name."""
    from procgrade.engine.ingest import formats as _formats

    return _formats()


def ingest(store: Store, paths: Sequence[str | os.PathLike], *, format: str = "auto", seal: bool = False) -> Ingested:
    """``procgrade ingest``: read files, directories and archives and append every run in one transaction
    (all or nothing; re-ingesting is a no-op). ``format`` is ``auto`` (detect per file), ``native`` or an
    importer's name; ``seal`` seals each run after it. Returns a report per run and the unrecognised files."""
    from procgrade.engine.ingest import ingest_paths

    known = formats()
    if format not in known:
        raise ProcgradeError(f"unknown format {format!r} (known: {', '.join(known)})")
    with _using(store, create=True) as opened:
        return ingest_paths(opened, [Path(p) for p in paths], format=format, seal=seal)


def runs(store: Store) -> list[RunInfo]:
    """``procgrade runs``: every stored run, sorted by run id."""
    with _using(store) as opened:
        return opened.runs()


def show(store: Store, run_id: str) -> list[Event]:
    """``procgrade show``: the run's events in seq order (:func:`events_df` for a table)."""
    with _using(store) as opened:
        opened.run(run_id)
        return list(opened.events(run_id))


def verify_log(store: Store, run_ids: Sequence[str] | None = None) -> list[LogVerification]:
    """``procgrade verify-log``: recompute each run's hash chain, facts and payload digests (default all
    runs); a result per run, ``.ok`` when nothing differs."""
    from procgrade.engine.log_verification import verify_log as _verify_log

    with _using(store) as opened:
        ids = list(run_ids) if run_ids is not None else [info.run_id for info in opened.runs()]
        return [_verify_log(opened, run_id) for run_id in ids]


def export(store: Store, run_id: str, path: str | os.PathLike | None = None) -> bytes | Path:
    """``procgrade export``: the run as native JSONL (ingesting it elsewhere gives the same head hash): the
    bytes, or written whole to ``path`` (checked before reading the run) and the path returned."""
    from procgrade.engine.native import dump_native
    from procgrade.engine.output_files import check_output, write_whole

    if path is not None:
        check_output(path, "the export file")
    with _using(store) as opened:
        opened.run(run_id)
        data = b"".join(dump_native(opened.events(run_id)))
    return data if path is None else write_whole(path, data)


def seal(store: Store, run_id: str) -> RunInfo:
    """``procgrade seal``: record the run's head hash as final; later appends are refused."""
    with _using(store) as opened:
        return opened.seal(run_id)


def schema(name: str) -> dict[str, Any]:
    """``procgrade schema``: the JSON Schema of ``events`` (one native line), ``rules`` (a rule set file) or
    ``grades`` (an arena grade sheet)."""
    if name == "events":
        from procgrade.engine.events import events_json_schema

        return events_json_schema()
    if name == "rules":
        from procgrade.rules.model import ruleset_json_schema

        return ruleset_json_schema()
    if name == "grades":
        from procgrade.engine.grades import grade_sheet_json_schema

        return grade_sheet_json_schema()
    raise ProcgradeError(f"no schema {name!r}: events, rules or grades")


# --- scores -----------------------------------------------------------------------------------


def score(store: Store, run_ids: Sequence[str], *, rules: Rules = None,
          progress: Callable[[str], None] | None = None) -> list[ScoreOutcome]:
    """``procgrade score``: score runs under a rule set and store one canonical document per run and rule
    set (identical re-scores are no-ops); ``progress(run_id)`` is called after each is stored."""
    return _score_many(store, list(run_ids), rules, 1, progress)


def rescore(store: Store, *, rules: Rules = None, workers: int = 1,
            progress: Callable[[str], None] | None = None) -> list[ScoreOutcome]:
    """``procgrade rescore --all``: score every stored run (``workers`` processes; the bytes stored never
    depend on it). A new rule set adds scores beside the old ones; stored scores are kept, so an
    interrupted rescore continues where it stopped when run again."""
    if workers < 1:
        raise ProcgradeError(f"workers must be at least 1, got {workers}")
    return _score_many(store, None, rules, workers, progress)


def _score_many(store: Store, run_ids: list[str] | None, rules: Rules, workers: int,
                progress: Callable[[str], None] | None) -> list[ScoreOutcome]:
    """Score through the same executor path as the command line (one writer, one transaction per task)."""
    from procgrade.engine.executors import LocalExecutor
    from procgrade.engine.parallel_scoring import score_many

    ruleset = _ruleset(rules)
    told = None if progress is None else (lambda outcome: progress(outcome.document.run_id))
    with _using(store) as opened, LocalExecutor(workers) as executor:
        return score_many(opened, run_ids, ruleset, executor=executor, on_outcome=told)


@dataclass(frozen=True)
class Verification:
    """What :func:`verify` found: how many stored scores were recomputed, and those that drifted."""

    checked: int
    drifts: list[Drift]

    @property
    def ok(self) -> bool:
        return not self.drifts


def verify(store: Store, run_ids: Sequence[str] | None = None) -> Verification:
    """``procgrade verify``: recompute every stored score (of ``run_ids``, default all) from the stored log
    prefix and the stored rule set, and byte-compare."""
    from procgrade.engine.rescoring import verify_scores

    with _using(store) as opened:
        checked, drifts = verify_scores(opened, None if run_ids is None else list(run_ids))
    return Verification(checked, drifts)


@dataclass(frozen=True)
class Explanation:
    """A run's verdicts under a rule set: the score document (not stored) and, per rule id, every
    activation with its verdict and cited seqs."""

    run_id: str
    ruleset_name: str
    document: dict[str, Any]
    process_score: Fraction | None
    findings: dict[str, list[Finding]]

    def violations(self) -> dict[str, list[Finding]]:
        """Per rule, only its violated activations (rules without one left out)."""
        found = {rule: [f for f in items if f.verdict == "violated"] for rule, items in self.findings.items()}
        return {rule: items for rule, items in found.items() if items}


def explain(store: Store, run_id: str, *, rules: Rules = None) -> Explanation:
    """``procgrade explain``: per rule, the verdicts on a run with the events each cites."""
    from procgrade.engine.rescoring import run_findings

    ruleset = _ruleset(rules)
    with _using(store) as opened:
        findings, document = run_findings(opened, ruleset, run_id)
    return Explanation(run_id, ruleset.name, document.body, document.process_score, findings)


def validate_rules(directory: str | os.PathLike, *, rules: Rules = None) -> list[PlantedResult]:
    """``procgrade validate-rules``: run a planted-fault corpus (one folder per rule id with ``fault.jsonl``
    and ``clean.jsonl``); each result says whether the fault was flagged and which rules flag the twin."""
    from procgrade.rules.planted import validate_corpus

    return validate_corpus(Path(directory), _ruleset(rules))


# --- outcomes and grades ----------------------------------------------------------------------


def import_grades(store: Store, paths: Sequence[str | os.PathLike], *, format: str = "auto",
                  create: bool = True) -> GradesImport:
    """``procgrade grades import``: append human and judge grades (arena sheets, DevAI judgments; ``format``
    auto, arena or devai) to the runs they grade, all or nothing; ``create=False`` makes a grade for a run
    the store does not hold an error instead of creating a grades-only run."""
    from procgrade.engine.grades import GRADE_FORMATS, import_grades as _import

    if format not in GRADE_FORMATS:
        raise ProcgradeError(f"unknown grades format {format!r} (known: {', '.join(GRADE_FORMATS)})")
    with _using(store, create=True) as opened:
        return _import(opened, [Path(p) for p in paths], format=format, create_runs=create)


def _workspace(path: str | os.PathLike) -> Path:
    workspace = Path(path)
    if not workspace.is_dir():
        what = "does not exist" if not workspace.exists() else "is not a folder"
        raise InputError(str(workspace), None, "workspace", f"{what}: give the submitted workspace folder")
    return workspace


def accept(store: Store, task: str | os.PathLike, workspace: str | os.PathLike, *, run: str | None = None,
           backend: str = "local", submit_file: str | os.PathLike | None = None,
           timeout: float | None = None, python: str | None = None, image: str | None = None,
           packages: Sequence[str | os.PathLike] = ()) -> Verdict:
    """``procgrade accept``: judge a workspace against a task's hidden tests (``backend`` local or docker)
    and append the check to run ``run`` (default: an outcome-only run ``acceptance/<task>/<hash>``).
    The verdict's ``.result.accepted`` says whether it passed. ``python`` (local) or ``image`` (docker)
    choose the judge environment's base, ``packages`` add local packages to the task's judge environment."""
    from procgrade.oracles.acceptance import accept as _accept, make_sandbox

    folder = _workspace(workspace)
    sandbox = make_sandbox(backend, python=python, image=image, packages=[Path(p) for p in packages])
    with _using(store, create=True) as opened:
        return _accept(opened, Path(task), folder, run, backend, submit_file=submit_file, timeout_sec=timeout,
                       sandbox=sandbox)


def validate_task(directory: str | os.PathLike, *, backend: str = "local") -> tuple[Task, list[ControlCheck]]:
    """``procgrade task validate``: judge every control of a task package; each check says whether the
    control got its expected reward."""
    from procgrade.oracles.acceptance import validate_task as _validate

    return _validate(Path(directory), backend)


def _views(store: EventStore, rules: Rules | bool) -> list[Any]:
    from procgrade.engine.analysis.dataset import load_runs

    return load_runs(store, None if rules is False else _ruleset(None if rules is True else rules))


def _by(by: str) -> str:
    from procgrade.engine.analysis.comparison import check_field

    try:
        return check_field(by)
    except ValueError as exc:
        raise ProcgradeError(str(exc)) from None


def outcomes(store: Store, *, by: str = "model", allow_mixed: bool = False) -> tuple[GroupOutcome, ...]:
    """``procgrade outcomes``: outcome metrics per group of runs (pass@1, plan pass rate with ViBench 2.0
    intervals, pass^k via ``.pass_hat_k(k)``). Runs of a group whose settings differ are refused
    (``MixedGroupSettingsError``) unless ``allow_mixed``."""
    from procgrade.engine.analysis.comparison import group_outcomes

    _by(by)
    with _using(store) as opened:
        views = _views(opened, False)
    return group_outcomes(views, by, allow_mixed=allow_mixed)


def compare(store: Store, *, by: str = "model", rules: Rules = None, allow_mixed: bool = False, seed: int = 0,
            resamples: int | None = None, min_coverage: Fraction | None = None, identity: Any = None) -> Comparison:
    """``procgrade compare``: process score against outcome per group: both rankings, Spearman and Kendall
    tau-b with seeded bootstrap intervals (``resamples``, default 9999), and the rank flips;
    ``min_coverage`` leaves out runs whose share of applicable rules is lower, ``identity`` is a model
    identity (:mod:`procgrade.engine.analysis.model_identity`, e.g. with an alias file);
    ``.to_dict()`` is the canonical JSON's content."""
    from procgrade.engine.analysis.comparison import DEFAULT_RESAMPLES
    from procgrade.engine.analysis.comparison import compare as _compare

    _by(by)
    ruleset = _ruleset(rules)
    with _using(store) as opened:
        views = _views(opened, ruleset)
    if not views:
        raise ProcgradeError("no runs in the store")
    return _compare(views, by, allow_mixed=allow_mixed, seed=seed, ruleset=ruleset,
                    n_resamples=DEFAULT_RESAMPLES if resamples is None else resamples,
                    min_coverage=min_coverage, identity=identity)


def calibrate(store: Store, *, candidates: Sequence[str] = ("judge",), reference: str = "human",
              layer: str | None = None, by: str | None = None, rules: Rules = None, seed: int = 0,
              bootstrap: int = 1000, min_coverage: Fraction | None = None, identity: Any = None,
              items: Sequence[str] | None = None, pool_items: bool = False) -> Calibration:
    """``procgrade calibrate``: automated grades (``candidates``: judge, rules, an actor or a sheet) against
    the ``reference`` grader's: agreement, kappa, error rates, rank correlation, Bradley-Terry ratings."""
    from procgrade.engine.analysis.calibration import calibrate_store

    rules_path = None if rules is None or not isinstance(rules, (str, os.PathLike)) else Path(rules)
    with _using(store) as opened:
        return calibrate_store(opened, reference, list(candidates), layer=layer, by=by, rules=rules_path,
                               seed=seed, bootstrap=bootstrap, min_coverage=min_coverage, identity=identity,
                               items=items, pool_items=pool_items)


def report(store: Store, path: str | os.PathLike, *, by: str = "model", rules: Rules = None,
           reference: str = "human", candidates: Sequence[str] = ("judge", "rules"), seed: int = 0,
           allow_mixed: bool = False, resamples: int | None = None, timelines: bool = True,
           min_coverage: Fraction | None = None, identity: Any = None) -> Report:
    """``procgrade report --html``: write one self-contained HTML page (runs, process vs outcome,
    calibration, charts, every run's timeline). ``path`` is checked before any work and written whole
    (never half a page); returns the page and its one-line summary."""
    from procgrade.engine.output_files import check_output, write_whole
    from procgrade.engine.reporting import render_report

    check_output(path, "the report")
    _by(by)
    ruleset = _ruleset(rules)
    with _using(store) as opened:
        done = render_report(opened, ruleset=ruleset, by=by, reference=reference, candidates=tuple(candidates),
                             seed=seed, allow_mixed=allow_mixed, resamples=resamples, run_pages=timelines,
                             min_coverage=min_coverage, identity=identity)
    write_whole(path, done.html.encode("utf-8"))
    return done


# --- DataFrames -------------------------------------------------------------------------------


def _pandas() -> Any:
    try:
        import pandas
    except ModuleNotFoundError:
        raise MissingExtraError("DataFrames", "analysis", "pandas") from None
    return pandas


def _frame(rows: list[dict[str, Any]], columns: Sequence[str]) -> pandas.DataFrame:
    """A frame with these columns first (also when there are no rows), extra keys after them in the
    order they first appear."""
    pd = _pandas()
    names = list(columns)
    for row in rows:
        for key in row:
            if key not in names:
                names.append(key)
    return pd.DataFrame.from_records(rows, columns=names)


def _float(value: Fraction | None) -> float | None:
    return None if value is None else float(value)


def _wanted(opened: EventStore, run_ids: Sequence[str] | None) -> list[str]:
    held = [info.run_id for info in opened.runs()]
    if run_ids is None:
        return held
    missing = sorted(set(run_ids) - set(held))
    if missing:
        raise UnknownRunError(f"no run {missing[0]!r} in the store", run_id=missing[0])
    return sorted(set(run_ids))


_RUN_COLUMNS = ("run_id", "format", "harness", "harness_version", "model", "task_id", "event_count", "head_hash",
                "sealed", "sealed_event_count", "unparsed", "redactions")


def runs_df(store: Store) -> pandas.DataFrame:
    """One row per run: provenance (``settings.<key>`` and ``labels.<key>`` columns too, as ``--by``
    names them), event count, head hash, sealing, and what an importer kept or redacted."""
    from procgrade.engine.events import RunStarted

    rows = []
    with _using(store) as opened:
        for info in opened.runs():
            start = next(opened.events(info.run_id), None)
            row: dict[str, Any] = {
                "run_id": info.run_id, "format": info.source_format or "native", "harness": info.harness,
                "harness_version": info.harness_version, "model": info.model, "task_id": info.task_id,
                "event_count": info.event_count, "head_hash": info.head_hash, "sealed": info.sealed,
                "sealed_event_count": info.sealed_event_count, "unparsed": info.unparsed,
                "redactions": info.redactions,
            }
            if isinstance(start, RunStarted):
                row.update({f"settings.{k}": v for k, v in sorted((start.model_settings or {}).items())})
                row.update({f"labels.{k}": v for k, v in sorted((start.labels or {}).items())})
            rows.append(row)
    return _frame(rows, _RUN_COLUMNS)


def events_df(store: Store, run_ids: Sequence[str] | None = None, *, payload: bool = False) -> pandas.DataFrame:
    """One row per event (of ``run_ids``, default all), by run then seq: the envelope, the typed fact
    columns rules read, ``what`` (as ``procgrade show`` describes it), the payload digest and chain hash;
    ``payload=True`` adds the raw payload (a dict) too."""
    from procgrade.engine.stored import STORED_COLUMNS, to_event
    from procgrade.engine.timeline import describe

    keep = [c for c in STORED_COLUMNS if c not in ("facts", "payload")]
    columns = [*keep[:8], "what", *keep[8:]] + (["payload"] if payload else [])
    rows = []
    with _using(store) as opened:
        for run_id in _wanted(opened, run_ids):
            for stored in opened.stored_events(run_id):
                event = to_event(stored)
                row = {name: stored[STORED_COLUMNS.index(name)] for name in keep}
                row["what"] = describe(event)
                if payload:
                    row["payload"] = event.payload
                rows.append(row)
    return _frame(rows, columns)


def findings_df(store: Store, run_ids: Sequence[str] | None = None, *, rules: Rules = None,
                verdicts: Sequence[str] = ("fulfilled", "violated", "vacuous")) -> pandas.DataFrame:
    """One row per rule activation on each run's whole log under a rule set (computed, not stored): rule,
    pattern, verdict, the seq and stage it is about, and the seqs it cites (a tuple)."""
    from procgrade.engine.rescoring import run_findings

    ruleset = _ruleset(rules)
    pattern = {rule.id: rule.pattern for rule in ruleset.rules}
    wanted = set(verdicts)
    rows = []
    with _using(store) as opened:
        for run_id in _wanted(opened, run_ids):
            findings, _document = run_findings(opened, ruleset, run_id)
            for rule in ruleset.rules:
                for finding in findings.get(rule.id, []):
                    if finding.verdict in wanted:
                        rows.append({"run_id": run_id, "rule_id": rule.id, "pattern": pattern[rule.id],
                                     "verdict": finding.verdict, "seq": finding.seq, "stage": finding.stage,
                                     "cited": tuple(finding.cited), "ruleset": ruleset.name})
    return _frame(rows, ("run_id", "rule_id", "pattern", "verdict", "seq", "stage", "cited", "ruleset"))


def scores_df(store: Store, run_ids: Sequence[str] | None = None) -> pandas.DataFrame:
    """One row per stored score document (each run under each rule set it was scored with, at the head it
    was scored at): the process score as a float and exactly (a Fraction), violations, rule set, engine
    version, document hash."""
    import orjson

    from procgrade.engine.store.scores import ScoreStore

    rows = []
    with _using(store) as opened:
        wanted = set(_wanted(opened, run_ids))
        for stored in ScoreStore(opened).scores():
            if stored.run_id not in wanted:
                continue
            body = orjson.loads(stored.document)
            exact = None if stored.process_score is None else Fraction(stored.process_score)
            ruleset = body.get("ruleset") if isinstance(body.get("ruleset"), dict) else {}
            rows.append({
                "run_id": stored.run_id, "ruleset": ruleset.get("name"), "ruleset_version": ruleset.get("version"),
                "ruleset_hash": stored.ruleset_hash, "process_score": _float(exact), "process_score_exact": exact,
                "violations": sum(int(rule.get("violated", 0)) for rule in body.get("rules", [])),
                "run_event_count": stored.run_event_count, "run_head_hash": stored.run_head_hash,
                "engine_version": stored.engine_version, "document_sha256": stored.document_sha256,
            })
    rows.sort(key=lambda r: (r["run_id"], r["ruleset_hash"], r["run_event_count"]))
    return _frame(rows, ("run_id", "ruleset", "ruleset_version", "ruleset_hash", "process_score", "process_score_exact", "violations",
                         "run_event_count", "run_head_hash", "engine_version", "document_sha256"))


def outcomes_df(store: Store, run_ids: Sequence[str] | None = None) -> pandas.DataFrame:
    """One row per run: its outcome as analysis counts it (``pass``/``fail``/the verdict's status, or none
    when unjudged) from its last acceptance verdict: verifier, status, reward (float and exact text), test
    counts, how many checks it had, and how many per-test results."""
    rows = []
    with _using(store) as opened:
        wanted = set(_wanted(opened, run_ids))
        views = [v for v in _views(opened, False) if v.run_id in wanted]
    for view in views:
        verdict = view.verdict
        reward = None if verdict is None or verdict.reward is None else str(verdict.reward)
        rows.append({
            "run_id": view.run_id, "model": view.model, "harness": view.harness, "task_id": view.task_id,
            "outcome": view.outcome, "verifier": None if verdict is None else verdict.verifier,
            "status": None if verdict is None else verdict.status,
            "reward": None if reward is None else float(Fraction(reward)), "reward_exact": reward,
            "passed": None if verdict is None else verdict.passed, "failed": None if verdict is None else verdict.failed,
            "errored": None if verdict is None else verdict.errored,
            "skipped": None if verdict is None else verdict.skipped,
            "checks": len(view.verdicts), "test_results": len(view.test_results),
        })
    return _frame(rows, ("run_id", "model", "harness", "task_id", "outcome", "verifier", "status", "reward",
                         "reward_exact", "passed", "failed", "errored", "skipped", "checks", "test_results"))


_GRADE_FIELDS = ("layer", "item", "value", "scale_min", "scale_max", "passed", "category", "criteria", "rationale",
                 "shortcomings", "sheet")


def grades_df(store: Store, run_ids: Sequence[str] | None = None) -> pandas.DataFrame:
    """One row per stored grade event (human and judge), by run then seq: who graded (``actor``), the
    round (``stage``), layer, item, value or passed, scale, and the grader's rationale."""
    rows = []
    with _using(store) as opened:
        wanted = set(_wanted(opened, run_ids))
        views = [v for v in _views(opened, False) if v.run_id in wanted]
    for view in views:
        for grade in view.grades:
            row = {"run_id": view.run_id, "seq": grade.seq, "actor": grade.actor, "stage": grade.stage}
            row.update({name: getattr(grade, name) for name in _GRADE_FIELDS})
            rows.append(row)
    return _frame(rows, ("run_id", "seq", "actor", "stage", *_GRADE_FIELDS))
