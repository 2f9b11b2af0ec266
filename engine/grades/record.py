"""One grade as read from a sheet, with where it was written, and the event it becomes.

Every reader (arena CSV and JSON sheets, DevAI judgment files) turns its input into
:class:`GradeRecord`\\ s; the importer only ever sees these. A record knows its place
(``FILE:LINE`` or ``FILE:record path``) so that anything wrong with it, found while
reading or against the store, is reported there.

Event ids are deterministic: the run, the sheet, the grader, the layer, the round and
the item (``<run>@grade|<sheet>|<actor>|<layer>|<round>|<item>``, hashed when longer
than 200 characters). Importing the same sheet again therefore finds every grade held.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from procgrade.engine.errors import InputError
from procgrade.engine.events import Grade, RunStarted

__all__ = ["GRADES_FOR", "GRADES_STREAM", "ITEM_PATTERN", "grades_stream", "SHEET_PATTERN", "GradeRecord", "NewRun", "Place", "grade_content", "grader_actor"]

#: A sheet name: ``arena-gguf``, ``devai/human_as_a_judge`` (no ``|``, which separates id parts).
SHEET_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,127}$")
#: An item (rubric dimension, requirement id, flag name).
ITEM_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_GRADER = re.compile(r"^(human|judge)(:[A-Za-z0-9][A-Za-z0-9._@/+-]{0,127})?$")
#: Actor roles that are not graders: a bare grader id may not be one of them.
_ROLES = frozenset({"agent", "subagent", "harness", "user", "grader", "system"})
_BARE_GRADER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@/+-]{0,127}$")


def grader_actor(grader: str) -> str | None:
    """The actor of a grader as a sheet names it: ``human``, ``human:<id>``, ``judge``,
    ``judge:<id>``, or a bare ``<id>`` (a person: ``human:<id>``). None when it is none of these."""
    if _GRADER.match(grader):
        return grader
    if _BARE_GRADER.match(grader) and ":" not in grader and grader not in _ROLES:
        return f"human:{grader}"
    return None


@dataclass(frozen=True)
class Place:
    """Where a record was written: ``file`` as the user named it, ``record`` a line number or
    a record path (``runs[0].rounds[1]``); ``source`` is the file's stable name kept in the
    event payload (independent of the directory it was imported from)."""

    file: str
    record: str | None
    source: str

    def error(self, field: str | None, reason: str) -> InputError:
        return InputError(self.file, self.record, field, reason)

    def __str__(self) -> str:
        return self.file if self.record is None else f"{self.file}:{self.record}"


#: The suffix of a grades stream: grades of a run the store did not hold when they were imported.
GRADES_STREAM = "@grades"
#: The run_started label naming the run a grades stream grades.
GRADES_FOR = "grades_for"


def grades_stream(run_id: str) -> str:
    """The stream holding grades imported before their run's trajectory: ``<run_id>@grades``."""
    return run_id + GRADES_STREAM


@dataclass(frozen=True)
class NewRun:
    """How to open the grades stream of a run the store does not hold, and the run metadata a sheet
    gives (model, harness, task, labels): recorded with the grades, merged into the run's view when its
    trajectory arrives (the trajectory's own values win; the sheet's fill what it lacks)."""

    harness: str
    task_id: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    payload: Mapping[str, Any] = field(default_factory=dict)
    model: str | None = None
    #: The harness the sheet names for the run (the stream's own harness is ``harness``).
    run_harness: str | None = None

    @property
    def metadata(self) -> dict[str, Any]:
        """What a v2 sheet says about the run (kept in every grade's payload as ``run``); empty when it
        names no model, harness or label (a v1 sheet's task alone is kept only on the stream it creates)."""
        found: dict[str, Any] = {}
        if not (self.model or self.run_harness or self.labels):
            return found
        if self.model:
            found["model"] = self.model
        if self.run_harness:
            found["harness"] = self.run_harness
        if self.task_id:
            found["task_id"] = self.task_id
        if self.labels:
            found["labels"] = dict(self.labels)
        return found

    def event(self, run_id: str, stream: str | None = None) -> RunStarted:
        """The stream's seq 0: ``stream`` (default ``run_id``) grades ``run_id``."""
        stream = stream or run_id
        event_id = f"{run_id}@grades-start"
        if len(event_id) > 200:
            event_id = "sha256:" + hashlib.sha256(event_id.encode()).hexdigest()
        labels = {"created_by": "grades import", **self.labels}
        if stream != run_id:
            labels[GRADES_FOR] = run_id
        return RunStarted.model_validate({
            "run_id": stream, "seq": 0, "event_id": event_id, "kind": "run_started", "actor": "harness",
            "harness": {"name": self.run_harness or self.harness}, "labels": labels,
            "payload": dict(self.payload), **({"task_id": self.task_id} if self.task_id else {}),
            **({"model": self.model} if self.model else {}),
        })


@dataclass(frozen=True)
class GradeRecord:
    """One grade: on ``run_id``, by ``actor``, from ``sheet``; ``round`` becomes the event's stage."""

    place: Place
    run_id: str
    actor: str
    sheet: str
    layer: str
    round: int | None = None
    item: str | None = None
    value: int | None = None
    scale_min: int | None = None
    scale_max: int | None = None
    passed: bool | None = None
    #: A nominal grade's category.
    label: str | None = None
    #: The declared scale (schema v2): binary, ordinal or nominal.
    scale: str | None = None
    categories: tuple[str, ...] | None = None
    #: The abstention written (``Unsure``, ``N/A``): the grade gives no label.
    abstained: str | None = None
    #: 1 for the item's primary annotation, 2 for the secondary, ...
    annotation: int | None = None
    criteria: str | None = None
    prerequisites: tuple[str, ...] | None = None
    category: str | None = None
    rationale: str | None = None
    shortcomings: str | None = None
    #: The source record, kept whole in the event payload.
    raw: Any = None
    new_run: NewRun = field(default_factory=lambda: NewRun("grades"))
    #: The source's own name for a field where it differs (JSON ``score`` for the round value).
    names: Mapping[str, str] = field(default_factory=dict)

    def name(self, field_name: str) -> str:
        return self.names.get(field_name, field_name)

    def error(self, field_name: str | None, reason: str) -> InputError:
        return self.place.error(None if field_name is None else self.name(field_name), reason)

    @property
    def identity(self) -> tuple[str, str, str, str, int | None, str | None]:
        return (self.run_id, self.sheet, self.actor, self.layer, self.round, self.item)

    @property
    def event_id(self) -> str:
        base = (f"{self.run_id}@grade|{self.sheet}|{self.actor}|{self.layer}|"
                f"{'' if self.round is None else self.round}|{self.item or ''}")
        return base if len(base) <= 200 else "sha256:" + hashlib.sha256(base.encode()).hexdigest()

    def describe(self) -> str:
        """``round 1 check context_preservation by human:alice in sheet arena-gguf``"""
        what = {"round": "score", "fix_effect": "fix effect", "overall": "overall grade"}.get(self.layer, self.layer)
        what += f" {self.item}" if self.item is not None else ""
        where = f"round {self.round} " if self.round is not None else ""
        return f"{where}{what} by {self.actor} in sheet {self.sheet}"

    def event(self, seq: int, stream: str | None = None) -> Grade:
        """The ``grade`` event at ``seq`` of the run (or of its grades ``stream``)."""
        fields = {
            "layer": self.layer, "item": self.item, "value": self.value, "scale_min": self.scale_min,
            "scale_max": self.scale_max, "passed": self.passed, "label": self.label, "scale": self.scale,
            "categories": list(self.categories) if self.categories is not None else None,
            "abstained": self.abstained, "annotation": self.annotation, "criteria": self.criteria,
            "prerequisites": list(self.prerequisites) if self.prerequisites is not None else None,
            "category": self.category, "rationale": self.rationale, "shortcomings": self.shortcomings,
            "sheet": self.sheet,
        }
        payload: dict[str, Any] = {"source": [{"file": self.place.source, "record": self.place.record or "-",
                                               "raw": self.raw}]}
        if self.new_run.metadata:
            payload["run"] = self.new_run.metadata
        record = {
            "run_id": stream or self.run_id, "seq": seq, "event_id": self.event_id, "kind": "grade",
            "actor": self.actor, **({"stage": self.round} if self.round is not None else {}),
            "payload": payload,
            **{k: v for k, v in fields.items() if v is not None},
        }
        try:
            return Grade.model_validate(record)
        except ValidationError as exc:
            error = exc.errors(include_url=False)[0]
            loc = ".".join(str(p) for p in error["loc"]) or None
            raise self.error(loc, f"cannot make a grade event: {error['msg'].removeprefix('Value error, ')}") from None


def grade_content(event: Grade) -> dict[str, Any]:
    """What makes two grade events the same grade: everything but seq, time and payload."""
    return event.model_dump(exclude={"seq", "ts", "payload"}, exclude_none=True)
