"""Appending grades to the runs they grade: every run, or none.

Grades become ``grade`` events after the graded run's events. Grades of a run the store does
not hold go to the run's *grades stream* ``<run>@grades`` (seq 0 ``run_started``: harness
``grades``, the DevAI system, or the harness the sheet names; the sheet's model, task and labels;
labels ``created_by: grades import`` and ``grades_for: <run>``), never to the run itself: the log
is append-only and a run's seq 0 is its trajectory's, so the trajectory can still arrive later
under its own id. Analysis (:func:`procgrade.engine.analysis.dataset.load_runs`) reads a run and its grades
stream as one run: the grades stream's grades first, then the run's own (the order they were
imported in, whichever came first), the trajectory's metadata first and the sheet's where it is
silent. A run created this way by an older version (grades-only, at the run's own id) is
graded in place as before. A grade whose event id the run
already holds is skipped when it is the same grade (same actor, round, layer, item,
value, pass, prose; the payload is not compared), and is a conflict otherwise: a changed
grade is a new sheet. The same grade given twice in one import (a sheet's CSV and JSON
spellings) counts once; given twice differently, it is an error. Grades for a round the run does not have (when the run has
stages) are errors, and a sealed run refuses new grades. Every check is made before
anything is written, and the whole import is one ``store.writer()`` transaction.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from procgrade.engine.errors import EventIdConflictError, RunSealedError, SeqConflictError
from procgrade.engine.events import GRADE_LAYERS, Event, Grade
from procgrade.engine.grades.arena import ROUND_LAYERS
from procgrade.engine.grades.record import GradeRecord, grade_content, grades_stream
from procgrade.engine.grades.sources import SheetFile, read_grade_files
from procgrade.engine.store import EventStore, RunInfo
from procgrade.engine.stored import STORED_COLUMNS, to_event

__all__ = ["GradesImport", "RunGrades", "append_grades", "import_grades"]

_ATTEMPTS = 3


@dataclass(frozen=True)
class RunGrades:
    """What an import did to one run."""

    run_id: str
    appended: int
    #: Grades skipped: the run already holds them, or this import gave them before (identically).
    held: int
    created: bool
    #: Grades appended, per layer.
    layers: dict[str, int] = field(default_factory=dict)

    @property
    def summary(self) -> str:
        per_layer = ", ".join(f"{layer} {n}" for layer, n in self.layers.items())
        appended = f"{self.appended} grade(s) appended" + (f" ({per_layer})" if per_layer else "")
        if self.created:
            return f"{self.run_id}: run created (grades only), {appended}"
        if not self.appended:
            return f"{self.run_id}: {self.held} grade(s) already held, nothing written"
        return f"{self.run_id}: {appended}" + (f", {self.held} already held" if self.held else "")


@dataclass(frozen=True)
class GradesImport:
    """What one import did: per run, the files read, and files skipped (not grades)."""

    runs: tuple[RunGrades, ...]
    files: tuple[SheetFile, ...] = ()
    skipped: tuple[str, ...] = ()

    @property
    def appended(self) -> int:
        return sum(r.appended for r in self.runs)

    @property
    def held(self) -> int:
        return sum(r.held for r in self.runs)

    @property
    def created(self) -> list[str]:
        return [r.run_id for r in self.runs if r.created]


def import_grades(store: EventStore, paths: Sequence[Path | str], *, format: str = "auto",
                  create_runs: bool = True) -> GradesImport:
    """Read every grade in ``paths`` (arena sheets, DevAI judgments: ``format`` auto, arena
    or devai) and append them to their runs in one transaction; see the module docstring."""
    files, skipped = read_grade_files(paths, format)
    runs = append_grades(store, [g for f in files for g in f.grades], create_runs=create_runs)
    return GradesImport(tuple(runs), tuple(files), tuple(skipped))


def append_grades(store: EventStore, grades: Iterable[GradeRecord], *, create_runs: bool = True) -> list[RunGrades]:
    """Append ``grades`` (in order, grouped by run) in one transaction: all of them, or none."""
    by_run: dict[str, list[GradeRecord]] = {}
    first: dict[str, GradeRecord] = {}
    repeated: Counter[str] = Counter()  # the same grade given again (e.g. a sheet's CSV and JSON spellings)
    for grade in grades:
        seen = first.setdefault(grade.event_id, grade)
        if seen is not grade:
            if grade_content(seen.event(0)) != grade_content(grade.event(0)):
                raise grade.error(_key_field(grade), f"{grade.describe()} on run {grade.run_id} is also given at "
                                                     f"{seen.place}, differently: one sheet gives a grade once")
            repeated[grade.run_id] += 1
            continue
        by_run.setdefault(grade.run_id, []).append(grade)
    for attempt in range(_ATTEMPTS):
        plans = _plan(store, by_run, create_runs, repeated)
        try:
            with store.writer() as writer:
                for plan in plans:
                    if plan.events:
                        writer.append(plan.stream, plan.events)
        except (SeqConflictError, EventIdConflictError):
            # Another writer appended to one of these runs meanwhile: nothing was written; plan again.
            if attempt == _ATTEMPTS - 1:
                raise
            continue
        return [plan.report for plan in plans]
    raise AssertionError("unreachable")


@dataclass(frozen=True)
class _RunPlan:
    report: RunGrades
    events: list[Event]
    #: Where they go: the run, or its grades stream.
    stream: str


def _plan(store: EventStore, by_run: dict[str, list[GradeRecord]], create_runs: bool,
          repeated: Counter[str]) -> list[_RunPlan]:
    infos = _runs(store, [name for run_id in by_run for name in (run_id, grades_stream(run_id))])
    held = _held(store, [g.event_id for grades in by_run.values() for g in grades])
    staged = [run_id for run_id, grades in by_run.items()
              if run_id in infos and any(g.layer in ROUND_LAYERS for g in grades)]
    stages = _stages(store, staged)
    plans = []
    for run_id, grades in by_run.items():
        stream = run_id
        info = infos.get(run_id)
        if info is None or info.event_count == 0:
            stream = grades_stream(run_id)
            info = infos.get(stream)
            if len(stream) > 200:
                raise grades[0].error("run_id", f"{run_id!r} is too long to hold grades before its trajectory "
                                                f"(at most {200 - len('@grades')} characters)")
        exists = info is not None and info.event_count > 0
        if not exists and not create_runs:
            raise grades[0].error("run_id", f"no run {run_id!r} in the store (runs are not created: --no-create)")
        new: list[GradeRecord] = []
        for grade in grades:
            stored = held.get(grade.event_id)
            if stored is None:
                new.append(grade)
            else:
                _same_or_conflict(grade, stored, stream)
        run_stages = stages.get(run_id)
        if run_stages:
            for grade in grades:
                if grade.round is not None and grade.round not in run_stages:
                    raise grade.error("round", f"run {run_id} has no round {grade.round} "
                                               f"(its stages: {', '.join(map(str, sorted(run_stages)))})")
        if new and info is not None and info.sealed:
            error = RunSealedError(f"{new[0].place}: run {stream} is sealed at {info.sealed_event_count} events: "
                                   f"{len(new)} new grade(s) cannot be appended; nothing written", run_id=run_id)
            error.located = True
            raise error
        events: list[Event] = []
        if not exists:
            start = next((g.new_run for g in grades if g.new_run.task_id), grades[0].new_run)
            events.append(start.event(run_id, stream))
        base = info.event_count if exists and info is not None else 1
        events.extend(g.event(base + k, stream) for k, g in enumerate(new))
        counts = Counter(g.layer for g in new)
        order = [layer for layer in GRADE_LAYERS if counts[layer]] + sorted(set(counts) - set(GRADE_LAYERS))
        layers = {layer: counts[layer] for layer in order}
        report = RunGrades(run_id, len(new), len(grades) - len(new) + repeated[run_id], not exists, layers)
        plans.append(_RunPlan(report, events, stream))
    return plans


def _same_or_conflict(grade: GradeRecord, stored: Event, stream: str) -> None:
    if stored.run_id not in (grade.run_id, grades_stream(grade.run_id)) or not isinstance(stored, Grade):
        raise _conflict(grade, None, f"its event id {grade.event_id!r} is already held by run {stored.run_id} "
                                     f"seq {stored.seq} ({stored.kind})")
    mine, theirs = grade_content(grade.event(stored.seq, stored.run_id)), grade_content(stored)
    if mine == theirs:
        return
    differing = sorted(k for k in mine.keys() | theirs.keys() if mine.get(k) != theirs.get(k))
    name = differing[0]
    field_name = {"passed": "passed", "value": "value", "stage": "round"}.get(name, name)
    raise _conflict(grade, field_name,
                    f"run {grade.run_id} already holds {grade.describe()} (seq {stored.seq}) with {name} "
                    f"{_shown(theirs.get(name))}, this sheet gives {_shown(mine.get(name))}: a changed grade "
                    "needs a new sheet name; nothing written")


def _conflict(grade: GradeRecord, field_name: str | None, reason: str) -> EventIdConflictError:
    where = f"{grade.place}: {grade.name(field_name) if field_name else '-'}"
    error = EventIdConflictError(f"{where}: {reason}", run_id=grade.run_id)
    error.located = True
    return error


def _shown(value: Any) -> str:
    text = repr(value) if value is not None else "none"
    return text if len(text) <= 60 else text[:57] + "..."


def _key_field(grade: GradeRecord) -> str:
    return "item" if grade.item is not None else ("round" if grade.round is not None else "layer")


# --- what the store holds ------------------------------------------------------------------------


def _runs(store: EventStore, run_ids: list[str]) -> dict[str, RunInfo]:
    return {info.run_id: info for info in store.runs(run_ids)}


def _held(store: EventStore, event_ids: list[str]) -> dict[str, Event]:
    found: dict[str, Event] = {}
    for row in store.stored_where(event_ids=event_ids):
        event = to_event(tuple(row))
        found[event.event_id] = event
    return found


def _stages(store: EventStore, run_ids: list[str]) -> dict[str, set[int]]:
    found: dict[str, set[int]] = {}
    stage = STORED_COLUMNS.index("stage")
    for row in store.stored_where(run_ids=run_ids, kinds=["stage_started"]):
        if row[stage] is not None:
            found.setdefault(row[0], set()).add(row[stage])
    return found
