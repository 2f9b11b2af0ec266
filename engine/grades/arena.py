"""The arena grade sheet (seed 002, section 2.3): a human expert's layered grade of runs.

Layers and scales (a sheet may set another integer scale per rubric dimension and per
behaviour pattern; the other scales are fixed):

========== ============ ======== ====================================================
layer      per          scale    item
========== ============ ======== ====================================================
round      round        -2..1    -
fix_effect fix round    -2..0    -  (rounds 1, 2, ...; round 0 is the base round)
check      round        passed   one of :data:`procgrade.rules.model.BINARY_CHECKS`
rubric     whole task   -1..1    the dimension's id; its written standard is required
pattern    whole task   -2..1    one of :data:`procgrade.rules.model.BEHAVIOUR_PATTERNS`
overall    whole task   1..5     -
========== ============ ======== ====================================================

Grade schema v2 (a study's own labels): any other layer name (``outcome``, ``trajectory``,
``safety``), each item declaring its scale: ``binary`` (passed: true/false, yes/no),
``ordinal`` (an integer on ``scale_min..scale_max``) or ``nominal`` (one of ``categories``).
Any answer may be an abstention (``Unsure``, ``N/A``, or the sheet's own values): it is kept
as a grade with ``abstained`` set and no label, and analyses count it apart. A sheet may give
each run's model, harness, task and labels (benchmark, split): they open the run's grades
stream when the store lacks the run, and fill what the trajectory leaves unsaid.

Two spellings of one sheet, both validated strictly (an unknown column or key is an
error, never ignored) and reported as ``FILE:LINE: field: reason`` (CSV) or
``FILE:record path: field: reason`` (JSON):

- CSV, one grade per row (:func:`read_csv_sheet`), header required;
- JSON, a document ``{"format": "procgrade.grades/1", ...}`` (:class:`GradeSheet`) or
  ``{"format": "procgrade.grades/2", ...}`` (:class:`StudySheet`), whose JSON Schema
  ``procgrade schema grades`` prints.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import PurePosixPath
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from procgrade.engine.errors import InputError
from procgrade.engine.events import GRADE_SCALES, LAYER_PATTERN, RUN_ID_PATTERN, StageIndex, Text
from procgrade.engine.grades.record import (
    ITEM_PATTERN,
    SHEET_PATTERN,
    GradeRecord,
    NewRun,
    Place,
    grader_actor,
)
from procgrade.rules.model import BEHAVIOUR_PATTERNS, BINARY_CHECKS

__all__ = [
    "ABSTENTIONS",
    "ARENA_LAYERS",
    "CSV_COLUMNS",
    "FORMAT_TAG",
    "FORMAT_TAG_V2",
    "LABEL_COLUMN",
    "ROUND_LAYERS",
    "SCALES",
    "GradeSheet",
    "StudySheet",
    "check_arena_grade",
    "check_grade",
    "check_study_grade",
    "grade_sheet_json_schema",
    "read_study_sheet",
    "read_csv_sheet",
    "read_json_sheet",
]

FORMAT_TAG = "procgrade.grades/1"
#: The study sheet (grade schema v2).
FORMAT_TAG_V2 = "procgrade.grades/2"
#: Abstentions every sheet knows; a sheet may declare more (CSV ``abstentions``, JSON ``abstentions``).
ABSTENTIONS = ("Unsure", "N/A")
ARENA_LAYERS = ("round", "fix_effect", "check", "rubric", "pattern", "overall")
#: Layers graded per round: the grade's round is required (and is the event's stage).
ROUND_LAYERS = ("round", "fix_effect", "check")
#: Default scales of the ordinal layers; ``check`` is binary (``passed``).
SCALES: dict[str, tuple[int, int]] = {"round": (-2, 1), "fix_effect": (-2, 0), "rubric": (-1, 1),
                                      "pattern": (-2, 1), "overall": (1, 5)}
#: Layers whose scale a sheet may set (per dimension or pattern).
_OWN_SCALE = ("rubric", "pattern")
_RUN_ID = re.compile(RUN_ID_PATTERN)
_LAYER = re.compile(LAYER_PATTERN)
#: The scale an arena layer has.
_ARENA_SCALE = {"check": "binary", **{layer: "ordinal" for layer in SCALES}}
_LABEL_KEY = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,63}$")
_LAYER_ITEMS = {"check": ("check", BINARY_CHECKS), "pattern": ("behaviour pattern", BEHAVIOUR_PATTERNS)}


# --- the rules every arena grade obeys, whichever spelling it came in ------------------------------


def check_grade(grade: GradeRecord) -> GradeRecord:
    """An arena grade (:func:`check_arena_grade`) or a study item with its declared scale
    (:func:`check_study_grade`); an abstention gives no label on either."""
    if grade.layer in ARENA_LAYERS and grade.scale in (None, _ARENA_SCALE[grade.layer]):
        return replace(check_arena_grade(replace(grade, scale=None)), scale=grade.scale)
    return check_study_grade(grade)


def check_study_grade(grade: GradeRecord) -> GradeRecord:
    """A grade of a study's own item (schema v2), or an :class:`InputError` at its place."""
    layer = grade.layer
    if layer in ARENA_LAYERS:
        raise grade.error("scale", f"the arena layer {layer} is {_ARENA_SCALE[layer]}, not {grade.scale}")
    if grade.scale is None:
        raise grade.error("layer", f"unknown layer {layer!r} (arena layers: {', '.join(ARENA_LAYERS)}; a study's own "
                                   f"layer declares each item's scale: {', '.join(GRADE_SCALES)})")
    if not _LAYER.match(layer):
        raise grade.error("layer", f"{layer!r} is not a layer name (a letter, then letters, digits, _ and -, at most 64)")
    if not _RUN_ID.match(grade.run_id):
        raise grade.error("run_id", f"{grade.run_id!r} is not a run id (letters, digits and ._:@/+-, "
                                    "starting with a letter or digit, at most 200)")
    if grade.item is None:
        raise grade.error("item", f"missing: which item of layer {layer} (success, looping, ...)")
    if not ITEM_PATTERN.match(grade.item):
        raise grade.error("item", f"{grade.item!r} is not an item id (letters, digits and ._-, at most 128)")
    if grade.scale is None:
        raise grade.error("scale", f"missing: layer {layer} is a study's own, so its items declare their scale "
                                   f"({', '.join(GRADE_SCALES)}; arena layers: {', '.join(ARENA_LAYERS)})")
    if grade.scale not in GRADE_SCALES:
        raise grade.error("scale", f"unknown scale {grade.scale!r} ({', '.join(GRADE_SCALES)})")
    if grade.scale == "ordinal":
        if grade.scale_min is None or grade.scale_max is None:
            raise grade.error("scale_min" if grade.scale_min is None else "scale_max",
                              "missing: an ordinal item declares its bounds (scale_min and scale_max)")
        if grade.scale_min >= grade.scale_max:
            raise grade.error("scale_min", f"scale {grade.scale_min}..{grade.scale_max} is empty or a single point")
    elif grade.scale_min is not None or grade.scale_max is not None:
        raise grade.error("scale_min" if grade.scale_min is not None else "scale_max",
                          f"must be blank: a {grade.scale} item has no bounds")
    if grade.scale == "nominal":
        if not grade.categories or len(grade.categories) < 2:
            raise grade.error("categories", "missing: a nominal item declares two or more categories")
        if len(set(grade.categories)) != len(grade.categories):
            raise grade.error("categories", "a category is given twice")
    elif grade.categories is not None:
        raise grade.error("categories", f"must be blank: a {grade.scale} item has no categories")
    if grade.abstained is not None:
        return grade
    if grade.scale == "binary" and grade.passed is None:
        raise grade.error("passed", "missing: a binary item passes or fails (true or false, yes or no)")
    if grade.scale == "ordinal":
        if grade.value is None:
            raise grade.error("value", f"missing: a score on {grade.scale_min}..{grade.scale_max}")
        if not grade.scale_min <= grade.value <= grade.scale_max:  # type: ignore[operator]
            raise grade.error("value", f"{grade.value} is outside the scale {grade.scale_min}..{grade.scale_max}")
    if grade.scale == "nominal":
        if grade.label is None:
            raise grade.error("value", f"missing: one of {', '.join(grade.categories or ())}")
        if grade.label not in (grade.categories or ()):
            raise grade.error("value", f"{grade.label!r} is not a category of {grade.item} "
                                       f"({', '.join(grade.categories or ())}; abstentions: see abstentions)")
    return grade


def check_arena_grade(grade: GradeRecord) -> GradeRecord:
    """``grade`` with its scale filled in, or an :class:`InputError` at its place."""
    layer = grade.layer
    if layer not in ARENA_LAYERS:
        raise grade.error("layer", f"unknown layer {layer!r} (arena layers: {', '.join(ARENA_LAYERS)}; "
                                   "a study's own layer declares its items' scale)")
    if not _RUN_ID.match(grade.run_id):
        raise grade.error("run_id", f"{grade.run_id!r} is not a run id (letters, digits and ._:@/+-, "
                                    "starting with a letter or digit, at most 200)")
    if layer in ROUND_LAYERS and grade.round is None:
        raise grade.error("round", f"missing: a {layer} grade is given per round")
    if layer not in ROUND_LAYERS and grade.round is not None:
        raise grade.error("round", f"must be blank: {'an' if layer == 'overall' else 'a'} {layer} grade is over "
                                   "the whole task, not one round")
    if layer == "fix_effect" and grade.round == 0:
        raise grade.error("round", "a fix-effect score grades a fix round (1, 2, ...); round 0 is the base round")
    _check_item(grade)
    if grade.abstained is not None:
        if layer == "check":
            return grade
        low, high = _scale_of(grade)
        return replace(grade, scale_min=low, scale_max=high)
    if layer == "check":
        if grade.value is not None:
            raise grade.error("value", "must be blank: a check is binary (give passed)")
        if grade.passed is None:
            raise grade.error("passed", "missing: a check passes or fails (true or false)")
        if grade.scale_min is not None or grade.scale_max is not None:
            raise grade.error("scale_min" if grade.scale_min is not None else "scale_max",
                              "must be blank: a check is binary")
        return grade
    if grade.passed is not None:
        raise grade.error("passed", f"must be blank: a {layer} grade is a score (give value)")
    if grade.value is None:
        raise grade.error("value", f"missing: a {layer} grade is a score on {_scale_text(SCALES[layer])}")
    low, high = _scale_of(grade)
    if not low <= grade.value <= high:
        raise grade.error("value", f"{grade.value} is outside the {layer} scale {low}..{high}")
    if layer == "rubric" and not (grade.criteria and grade.criteria.strip()):
        raise grade.error("criteria", "missing: every rubric dimension states its written standard")
    return replace(grade, scale_min=low, scale_max=high)


def _check_item(grade: GradeRecord) -> None:
    layer, item = grade.layer, grade.item
    if layer in ("round", "fix_effect", "overall"):
        if item is not None:
            raise grade.error("item", f"must be blank: there is one {layer} grade"
                                      + (" per round" if layer in ROUND_LAYERS else " per run"))
        return
    if item is None:
        what = "rubric dimension" if layer == "rubric" else _LAYER_ITEMS[layer][0]
        raise grade.error("item", f"missing: which {what}")
    if layer in _LAYER_ITEMS:
        what, known = _LAYER_ITEMS[layer]
        if item not in known:
            raise grade.error("item", f"unknown {what} {item!r} (known: {', '.join(known)})")
    elif not ITEM_PATTERN.match(item):
        raise grade.error("item", f"{item!r} is not a dimension id (letters, digits and ._-, at most 128)")


def _scale_of(grade: GradeRecord) -> tuple[int, int]:
    default = SCALES[grade.layer]
    low, high = grade.scale_min, grade.scale_max
    if low is None and high is None:
        return default
    if low is None or high is None:
        raise grade.error("scale_max" if low is not None else "scale_min",
                          "missing: give scale_min and scale_max together")
    if low >= high:
        raise grade.error("scale_min", f"scale {low}..{high} is empty or a single point: scale_min must be below scale_max")
    if grade.layer not in _OWN_SCALE and (low, high) != default:
        raise grade.error("scale_min", f"the {grade.layer} scale is fixed at {_scale_text(default)}, "
                                       f"not {low}..{high} (only rubric dimensions and patterns set their own)")
    return low, high


def _scale_text(scale: tuple[int, int]) -> str:
    return f"{scale[0]}..{scale[1]}"


def _check_sheet_name(sheet: str, error: Callable[[str], InputError]) -> str:
    if not SHEET_PATTERN.match(sheet):
        raise error(f"{sheet!r} is not a sheet name (letters, digits and ._/-, starting with a letter or digit, "
                    "at most 128)")
    return sheet


def _actor(grader: str, error: Callable[[str], InputError]) -> str:
    actor = grader_actor(grader)
    if actor is None:
        raise error(f"{grader!r} is not a grader: human, human:<id>, judge, judge:<id>, or a bare <id> (a person)")
    return actor


def _consistent(grades: list[GradeRecord]) -> None:
    """One sheet gives a rubric dimension (or a pattern) one standard and one scale, and a
    new run one task."""
    first: dict[tuple[str, str, str], GradeRecord] = {}
    tasks: dict[str, GradeRecord] = {}
    runs: dict[str, GradeRecord] = {}
    for grade in grades:
        if grade.layer not in ARENA_LAYERS:
            seen = first.setdefault((grade.sheet, grade.layer, grade.item or ""), grade)
            for name in ("scale", "scale_min", "scale_max", "categories"):
                if getattr(seen, name) != getattr(grade, name):
                    raise grade.error(name, f"{grade.layer} {grade.item} has {name} {_listed(getattr(grade, name))} "
                                            f"here but {_listed(getattr(seen, name))} at {seen.place}: one sheet, "
                                            "one scale per item")
        if grade.new_run.metadata:
            seen = runs.setdefault(grade.run_id, grade)
            if seen.new_run.metadata != grade.new_run.metadata:
                mine, theirs = grade.new_run.metadata, seen.new_run.metadata
                name = sorted(k for k in mine.keys() | theirs.keys() if mine.get(k) != theirs.get(k))[0]
                raise grade.error(name, f"{_listed(mine.get(name))} differs from {_listed(theirs.get(name))} given for "
                                        f"run {grade.run_id} at {seen.place}: one sheet, one description per run")
        if grade.layer in _OWN_SCALE:
            seen = first.setdefault((grade.sheet, grade.layer, grade.item or ""), grade)
            for name in ("criteria", "scale_min", "scale_max"):
                if getattr(seen, name) != getattr(grade, name):
                    raise grade.error(name, f"{grade.layer} {grade.item} has {getattr(grade, name)!r} here but "
                                            f"{getattr(seen, name)!r} at {seen.place}: one sheet, one standard and scale "
                                            "per dimension")
        if grade.new_run.task_id is not None:
            seen = tasks.setdefault(grade.run_id, grade)
            if seen.new_run.task_id != grade.new_run.task_id:
                raise grade.error("task_id", f"{grade.new_run.task_id!r} differs from {seen.new_run.task_id!r} given "
                                             f"for run {grade.run_id} at {seen.place}")


def _listed(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, (tuple, list)):
        return "|".join(value)
    return repr(value) if not isinstance(value, dict) else json.dumps(value, sort_keys=True)


def _new_run(task_id: str | None, model: str | None = None, harness: str | None = None,
             labels: Mapping[str, str] | None = None) -> NewRun:
    return NewRun("grades", task_id=task_id, labels=dict(labels or {}), model=model, run_harness=harness)


def _answer(text: str | None, scale: str | None, layer: str, abstentions: tuple[str, ...],
            error: Callable[[str, str], InputError], field: str = "value") -> dict[str, Any]:
    """The grade fields an answer cell gives: ``abstained``, ``passed``, ``value`` or ``label``."""
    if text is None:
        return {}
    if text in abstentions:
        return {"abstained": text}
    kind = scale or ("ordinal" if layer in ARENA_LAYERS else None)
    if kind == "binary":
        passed = _BOOLEANS.get(text.lower())
        if passed is None:
            raise error(field, f"expected true or false (or yes/no), got {text!r} "
                               f"(or an abstention: {', '.join(abstentions)})")
        return {"passed": passed}
    if kind == "nominal":
        return {"label": text}
    if not _INT.match(text):
        if kind is None:
            return {}  # a layer nobody declared: the layer is the error
        raise error(field, f"expected an integer, got {text!r} (or an abstention: {', '.join(abstentions)})")
    return {"value": int(text)}


# --- CSV -----------------------------------------------------------------------------------------

#: Columns a CSV sheet may have; the first three are required. A blank cell is absent.
CSV_COLUMNS = ("run_id", "grader", "layer", "round", "item", "value", "passed", "rationale", "shortcomings",
               "criteria", "scale_min", "scale_max", "sheet", "task_id", "scale", "categories", "abstentions",
               "annotation", "model", "harness")
#: A run label column: ``label.<key>`` (``label.benchmark``, ``label.split``).
LABEL_COLUMN = "label."
_REQUIRED_COLUMNS = CSV_COLUMNS[:3]
_PROSE = ("rationale", "shortcomings", "criteria")
_INT = re.compile(r"^[+-]?[0-9]{1,18}$")
_ROUND = re.compile(r"^[0-9]{1,10}$")
_BOOLEANS = {"true": True, "yes": True, "false": False, "no": False}


def read_csv_sheet(data: bytes, label: str, source: str) -> list[GradeRecord]:
    """The grades of a CSV sheet: one row per grade under a header row of :data:`CSV_COLUMNS`
    names (any order; ``run_id``, ``grader`` and ``layer`` required). The sheet name is the
    ``sheet`` column, else the file's stem. ``label`` names the file in errors; ``source``
    is its stable name kept in payloads."""
    text = _decode(data, label)
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    stem = PurePosixPath(source).stem
    header: list[str] | None = None
    grades: list[GradeRecord] = []
    while True:
        line = reader.line_num + 1
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            raise InputError(label, reader.line_num or line, None, f"not valid CSV: {exc}") from None
        if not row or all(not cell.strip() for cell in row):
            continue
        if header is None:
            header = _header(row, label, line)
            continue
        grades.append(_csv_grade(header, row, Place(label, str(line), source), stem))
    if header is None:
        raise InputError(label, None, None, f"empty: a CSV grade sheet starts with a header row "
                                            f"({', '.join(_REQUIRED_COLUMNS)}, ...)")
    if not grades:
        raise InputError(label, None, None, "the sheet holds no grades (only a header)")
    _consistent(grades)
    return grades


def _decode(data: bytes, label: str) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputError(label, line, None, f"not UTF-8 (byte {data[exc.start]:#04x})") from None


def _header(row: list[str], label: str, line: int) -> list[str]:
    names = [cell.strip() for cell in row]
    for name in names:
        if name.startswith(LABEL_COLUMN) and _LABEL_KEY.match(name.removeprefix(LABEL_COLUMN)):
            continue
        if name not in CSV_COLUMNS:
            raise InputError(label, line, name or "-", f"unknown column (columns: {', '.join(CSV_COLUMNS)}, "
                                                       "label.<key>)")
        if names.count(name) > 1:
            raise InputError(label, line, name, "the column is given twice")
    missing = [name for name in _REQUIRED_COLUMNS if name not in names]
    if missing:
        raise InputError(label, line, missing[0], "missing column: the first row is the header, naming "
                                                  f"at least {', '.join(_REQUIRED_COLUMNS)}")
    return names


def _csv_grade(header: list[str], row: list[str], place: Place, stem: str) -> GradeRecord:
    if len(row) != len(header):
        raise place.error(None, f"the row has {len(row)} cells, the header {len(header)}")
    cells: dict[str, str | None] = {}
    for name, cell in zip(header, row):
        if "\x00" in cell:
            raise place.error(name, "holds a NUL character")
        cells[name] = None if not cell.strip() else (cell if name in _PROSE else cell.strip())

    def integer(name: str) -> int | None:
        text = cells.get(name)
        if text is None:
            return None
        if not _INT.match(text):
            raise place.error(name, f"expected an integer, got {text!r}")
        return int(text)

    run_id = cells.get("run_id")
    if run_id is None:
        raise place.error("run_id", "missing: which run the grade is for")
    grader = cells.get("grader")
    if grader is None:
        raise place.error("grader", "missing: who gave the grade")
    layer = cells.get("layer")
    if layer is None:
        raise place.error("layer", f"missing ({', '.join(ARENA_LAYERS)})")
    round_text = cells.get("round")
    if round_text is not None and not _ROUND.match(round_text):
        raise place.error("round", f"expected a round number (0 for the base round, 1, 2, ... for fix rounds), "
                                   f"got {round_text!r}")
    scale = cells.get("scale")
    abstentions = ABSTENTIONS + tuple(a.strip() for a in (cells.get("abstentions") or "").split("|") if a.strip())
    categories = None
    if cells.get("categories") is not None:
        categories = tuple(c.strip() for c in (cells["categories"] or "").split("|"))
        if any(not c for c in categories):
            raise place.error("categories", "an empty category: categories are separated by |")
        clash = [c for c in categories if c in abstentions]
        if clash:
            raise place.error("categories", f"{clash[0]!r} is an abstention, not a category")

    def error(name: str, reason: str) -> InputError:
        return place.error(name, reason)

    answer: dict[str, Any] = {}
    for name in ("value", "passed"):
        found = _answer(cells.get(name), "binary" if name == "passed" else scale, layer, abstentions, error, name)
        if found and answer and (layer not in ARENA_LAYERS or "abstained" in found or "abstained" in answer):
            raise place.error(name, "give value or passed, not both")
        answer.update(found)
    annotation_text = cells.get("annotation")
    if annotation_text is not None and not re.match(r"^[1-9][0-9]{0,2}$", annotation_text):
        raise place.error("annotation", f"expected 1 (primary), 2 (secondary), ..., got {annotation_text!r}")
    labels = {name.removeprefix(LABEL_COLUMN): cells[name] for name in header
              if name.startswith(LABEL_COLUMN) and cells.get(name) is not None}
    sheet = _check_sheet_name(cells.get("sheet") or stem, lambda reason: place.error(
        "sheet", reason + ("" if cells.get("sheet") else " (the file's name; give a sheet column)")))
    grade = GradeRecord(
        place=place, run_id=run_id, actor=_actor(grader, lambda reason: place.error("grader", reason)),
        sheet=sheet, layer=layer, round=None if round_text is None else int(round_text), item=cells.get("item"),
        scale_min=integer("scale_min"), scale_max=integer("scale_max"), scale=scale, categories=categories,
        annotation=None if annotation_text is None else int(annotation_text),
        criteria=cells.get("criteria"), rationale=cells.get("rationale"), shortcomings=cells.get("shortcomings"),
        raw={name: cell for name, cell in zip(header, row) if cell.strip()},
        new_run=_new_run(cells.get("task_id"), cells.get("model"), cells.get("harness"), labels), **answer,
    )
    return check_grade(grade)


# --- JSON ----------------------------------------------------------------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


Prose = Annotated[Text, Field(pattern=r"^[^\x00]*$")]


class Check(_Strict):
    """A binary check; ``true``/``false`` alone is short for ``{"passed": ...}``."""

    passed: bool
    rationale: Prose | None = None


class Score(_Strict):
    """A score on the layer's scale; an integer alone is short for ``{"value": ...}``."""

    value: int
    rationale: Prose | None = None
    shortcomings: Prose | None = None


def _short(key: str, accepts: type) -> Callable[[Any], Any]:
    def expand(value: Any) -> Any:
        if isinstance(value, accepts) and (accepts is bool or not isinstance(value, bool)):
            return {key: value}
        return value

    return expand


CheckEntry = Annotated[Check, BeforeValidator(_short("passed", bool), json_schema_input_type=bool | Check)]
ScoreEntry = Annotated[Score, BeforeValidator(_short("value", int), json_schema_input_type=int | Score)]
CheckName = Literal[BINARY_CHECKS]  # type: ignore[valid-type]
PatternName = Literal[BEHAVIOUR_PATTERNS]  # type: ignore[valid-type]
ItemId = Annotated[str, Field(pattern=ITEM_PATTERN.pattern)]


class Round(_Strict):
    """One round: its score, the fix effect (fix rounds only), the five binary checks, and
    the prose rationale and main shortcomings (kept on the round-score grade)."""

    round: StageIndex = Field(description="0 for the base round, 1, 2, ... for fix rounds (the run's stage index).")
    score: int = Field(description="The state after the round, -2..1.")
    fix_effect: ScoreEntry | None = Field(default=None, description="Fix rounds: progress on the requested fix, -2..0.")
    checks: dict[CheckName, CheckEntry] = Field(default_factory=dict)
    rationale: Prose | None = None
    shortcomings: Prose | None = None


class Dimension(_Strict):
    """A rubric dimension: its written standard, and its scale when not -1..1."""

    criteria: Annotated[Prose, Field(min_length=1)]
    scale_min: int | None = None
    scale_max: int | None = None


class PatternScale(_Strict):
    """A behaviour pattern's scale when not -2..1, and optionally its standard."""

    criteria: Prose | None = None
    scale_min: int | None = None
    scale_max: int | None = None


class RunGradesEntry(_Strict):
    """The grades of one run."""

    run_id: Annotated[str, Field(pattern=RUN_ID_PATTERN)]
    task_id: Annotated[str, Field(min_length=1, pattern=r"^[^\x00]*$")] | None = Field(
        default=None, description="The task, recorded when the run has to be created (a grades-only run).")
    rounds: list[Round] = Field(default_factory=list)
    rubric: dict[ItemId, ScoreEntry] = Field(default_factory=dict, description="Scores per dimension declared in the sheet's rubric.")
    patterns: dict[PatternName, ScoreEntry] = Field(default_factory=dict)
    overall: ScoreEntry | None = Field(default=None, description="The 5-point overall grade, 1..5.")


class GradeSheet(_Strict):
    """An arena grade sheet: one grader's grades of one or more runs."""

    format: Literal["procgrade.grades/1"]
    sheet: Annotated[str, Field(pattern=SHEET_PATTERN.pattern, description="The sheet's name; with the grader, "
                                "layer, round and item it identifies each grade (re-importing is a no-op).")]
    grader: Annotated[str, Field(min_length=1, description="human, human:<id>, judge, judge:<id>, or <id> (a person).")]
    rubric: dict[ItemId, Dimension] = Field(default_factory=dict, description="The rubric's dimensions (4 fixed + "
                                             "task-specific), each with its written standard.")
    patterns: dict[PatternName, PatternScale] = Field(default_factory=dict, description="Pattern scales other than -2..1.")
    runs: Annotated[list[RunGradesEntry], Field(min_length=1)]


# --- JSON, schema v2: a study's own items ---------------------------------------------------------

Answer = Annotated[bool | int | str, Field(description="true/false (binary), an integer (ordinal), a category "
                                                       "(nominal), or an abstention (Unsure, N/A, ...).")]


class Answered(_Strict):
    """An answer with its prose; an answer alone is short for ``{"value": ...}``."""

    value: Answer
    rationale: Prose | None = None
    shortcomings: Prose | None = None


def _short_answer(value: Any) -> Any:
    return {"value": value} if isinstance(value, (bool, int, str)) else value


AnswerEntry = Annotated[Answered, BeforeValidator(_short_answer, json_schema_input_type=bool | int | str | Answered)]
LayerName = Annotated[str, Field(pattern=LAYER_PATTERN)]
LabelKey = Annotated[str, Field(pattern=_LABEL_KEY.pattern)]
OneLine = Annotated[str, Field(min_length=1, pattern=r"^[^\x00\n]*$")]


class Item(_Strict):
    """A study item: its layer, its scale, and its written standard."""

    layer: LayerName
    scale: Literal["binary", "ordinal", "nominal"]
    min: int | None = Field(default=None, description="Ordinal: the lowest value.")
    max: int | None = Field(default=None, description="Ordinal: the highest value.")
    categories: list[OneLine] | None = Field(default=None, description="Nominal: the categories.")
    criteria: Prose | None = None


class StudyRun(_Strict):
    """One run's answers, and what the sheet knows of the run."""

    run_id: Annotated[str, Field(pattern=RUN_ID_PATTERN)]
    grader: Annotated[str, Field(min_length=1)] | None = Field(default=None, description="When not the sheet's grader.")
    annotation: Annotated[int, Field(ge=1, le=999)] | None = Field(
        default=None, description="1 when this is the run's primary annotation, 2 the secondary, ...")
    model: OneLine | None = None
    harness: OneLine | None = None
    task_id: OneLine | None = None
    labels: dict[LabelKey, OneLine] = Field(default_factory=dict, description="benchmark, split, ...")
    grades: Annotated[dict[ItemId, AnswerEntry], Field(min_length=1)]


class StudySheet(_Strict):
    """A study's grade sheet (schema v2): declared items, abstentions, answers per run."""

    format: Literal["procgrade.grades/2"]
    sheet: Annotated[str, Field(pattern=SHEET_PATTERN.pattern)]
    grader: Annotated[str, Field(min_length=1, description="human:<id>, judge:<model>, ... (a run may name its own).")]
    abstentions: list[OneLine] = Field(default_factory=list, description="Abstentions besides Unsure and N/A.")
    items: Annotated[dict[ItemId, Item], Field(min_length=1)]
    runs: Annotated[list[StudyRun], Field(min_length=1)]


def grade_sheet_json_schema() -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of a grade sheet document: an arena sheet (v1) or a study sheet (v2)."""
    from pydantic import TypeAdapter

    adapter: TypeAdapter[Any] = TypeAdapter(Annotated[GradeSheet | StudySheet, Field(discriminator="format")])
    schema = adapter.json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "procgrade grade sheet (procgrade.grades/1 arena, procgrade.grades/2 study)"
    return schema


def read_study_sheet(doc: Any, label: str, source: str) -> list[GradeRecord]:
    """The grades of a parsed :class:`StudySheet` document."""
    try:
        sheet = StudySheet.model_validate(doc)
    except ValidationError as exc:
        raise _located(exc, label) from None
    abstentions = ABSTENTIONS + tuple(sheet.abstentions)
    for name, item in sheet.items.items():
        place = Place(label, f"items.{name}", source)
        if item.scale == "ordinal" and (item.min is None or item.max is None):
            raise place.error("max" if item.min is not None else "min", "missing: an ordinal item declares min and max")
        for category in item.categories or ():
            if category in abstentions:
                raise place.error("categories", f"{category!r} is an abstention, not a category")
    grades: list[GradeRecord] = []
    for i, run in enumerate(sheet.runs):
        path = f"runs[{i}]"
        actor = _actor(run.grader or sheet.grader,
                       lambda reason: InputError(label, path if run.grader else None, "grader", reason))
        new_run = _new_run(run.task_id, run.model, run.harness, run.labels)
        for name, entry in run.grades.items():
            item = sheet.items.get(name)
            where = f"{path}.grades.{name}"
            if item is None:
                raise InputError(label, f"{path}.grades", name, f"not an item of the sheet (items: {', '.join(sheet.items)})")
            place = Place(label, where, source)
            answer = _json_answer(entry.value, item, abstentions, place)
            grade = GradeRecord(place=place, run_id=run.run_id, actor=actor, sheet=sheet.sheet, layer=item.layer,
                                item=name, scale=item.scale, annotation=run.annotation,
                                scale_min=item.min if item.scale == "ordinal" else None,
                                scale_max=item.max if item.scale == "ordinal" else None,
                                categories=tuple(item.categories) if item.scale == "nominal" and item.categories else None,
                                criteria=item.criteria, rationale=entry.rationale, shortcomings=entry.shortcomings,
                                raw=doc["runs"][i]["grades"][name], new_run=new_run, names={"passed": "value", "label": "value"},
                                **answer)
            grades.append(check_grade(grade))
    _consistent(grades)
    return grades


def _json_answer(value: Any, item: Item, abstentions: tuple[str, ...], place: Place) -> dict[str, Any]:
    if isinstance(value, str) and value in abstentions:
        return {"abstained": value}
    expected = {"binary": (bool, "true or false"), "ordinal": (int, "an integer"), "nominal": (str, "a category")}
    kind, text = expected[item.scale]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise place.error("value", f"expected {text} or an abstention ({', '.join(abstentions)}), got {json.dumps(value)}")
    return {{"binary": "passed", "ordinal": "value", "nominal": "label"}[item.scale]: value}


class _Object(dict):  # type: ignore[type-arg]
    """A JSON object that remembers the keys it saw twice."""

    duplicates: list[str]


def _object(pairs: list[tuple[str, Any]]) -> _Object:
    obj = _Object()
    obj.duplicates = []
    for key, value in pairs:
        if key in obj:
            obj.duplicates.append(key)
        obj[key] = value
    return obj


def parse_json(data: bytes, label: str) -> Any:
    """The JSON document in ``data``; duplicate keys are errors (a parser keeps only one)."""
    try:
        doc = json.loads(_decode(data, label), object_pairs_hook=_object)
    except json.JSONDecodeError as exc:
        raise InputError(label, exc.lineno, None, f"not valid JSON: {exc.msg} (column {exc.colno})") from None
    _no_duplicates(doc, [], label)
    return doc


def _no_duplicates(value: Any, path: list[str | int], label: str) -> None:
    if isinstance(value, _Object):
        if value.duplicates:
            raise InputError(label, _path_text(path), value.duplicates[0], "the key is given twice")
        for key, item in value.items():
            _no_duplicates(item, [*path, key], label)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _no_duplicates(item, [*path, i], label)


def _path_text(path: list[str | int] | tuple[str | int, ...]) -> str | None:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or None


def read_json_sheet(doc: Any, label: str, source: str) -> list[GradeRecord]:
    """The grades of a parsed :class:`GradeSheet` document."""
    try:
        sheet = GradeSheet.model_validate(doc)
    except ValidationError as exc:
        raise _located(exc, label) from None
    actor = _actor(sheet.grader, lambda reason: InputError(label, None, "grader", reason))
    for kind, definitions in (("rubric", sheet.rubric), ("patterns", sheet.patterns)):
        for name, definition in definitions.items():
            _definition_scale(definition, Place(label, f"{kind}.{name}", source))
    grades: list[GradeRecord] = []
    raw_runs = doc["runs"]
    for i, run in enumerate(sheet.runs):
        grades.extend(_run_grades(sheet, actor, run, raw_runs[i], f"runs[{i}]", label, source))
    _consistent(grades)
    return grades


def _definition_scale(definition: Dimension | PatternScale, place: Place) -> None:
    low, high = definition.scale_min, definition.scale_max
    if (low is None) != (high is None):
        raise place.error("scale_max" if low is not None else "scale_min", "missing: give scale_min and scale_max together")
    if low is not None and high is not None and low >= high:
        raise place.error("scale_min", f"scale {low}..{high} is empty or a single point: scale_min must be below scale_max")


def _run_grades(sheet: GradeSheet, actor: str, run: RunGradesEntry, raw: Mapping[str, Any], path: str,
                label: str, source: str) -> list[GradeRecord]:
    new_run = _new_run(run.task_id)

    def grade(record: str, layer: str, names: Mapping[str, str] | None = None, raw_entry: Any = None,
              **fields: Any) -> GradeRecord:
        return check_grade(GradeRecord(place=Place(label, record, source), run_id=run.run_id, actor=actor,
                                             sheet=sheet.sheet, layer=layer, raw=raw_entry, new_run=new_run,
                                             names=names or {}, **fields))

    grades: list[GradeRecord] = []
    for j, entry in enumerate(run.rounds):
        where = f"{path}.rounds[{j}]"
        raw_round = raw["rounds"][j]
        grades.append(grade(where, "round", {"value": "score"}, {k: v for k, v in raw_round.items()
                                                                 if k not in ("checks", "fix_effect")},
                            round=entry.round, value=entry.score, rationale=entry.rationale,
                            shortcomings=entry.shortcomings))
        if entry.fix_effect is not None:
            grades.append(grade(where, "fix_effect", {"value": "fix_effect"}, raw_round["fix_effect"], round=entry.round, value=entry.fix_effect.value,
                                rationale=entry.fix_effect.rationale, shortcomings=entry.fix_effect.shortcomings))
        for name, check in entry.checks.items():
            grades.append(grade(f"{where}.checks.{name}", "check", None, raw_round["checks"][name], round=entry.round,
                                item=name, passed=check.passed, rationale=check.rationale))
    for name, score in run.rubric.items():
        dimension = sheet.rubric.get(name)
        if dimension is None:
            declared = ", ".join(sheet.rubric) or "none"
            raise InputError(label, f"{path}.rubric", name, f"not a dimension of the sheet's rubric (declared: {declared})")
        grades.append(grade(f"{path}.rubric.{name}", "rubric", None, raw["rubric"][name], item=name, value=score.value,
                            scale_min=dimension.scale_min, scale_max=dimension.scale_max, criteria=dimension.criteria,
                            rationale=score.rationale, shortcomings=score.shortcomings))
    for name, score in run.patterns.items():
        scale = sheet.patterns.get(name) or PatternScale()
        grades.append(grade(f"{path}.patterns.{name}", "pattern", None, raw["patterns"][name], item=name,
                            value=score.value, scale_min=scale.scale_min, scale_max=scale.scale_max,
                            criteria=scale.criteria, rationale=score.rationale, shortcomings=score.shortcomings))
    if run.overall is not None:
        grades.append(grade(f"{path}.overall", "overall", None, raw["overall"], value=run.overall.value,
                            rationale=run.overall.rationale, shortcomings=run.overall.shortcomings))
    if not grades:
        raise InputError(label, path, None, "the run entry holds no grades")
    return grades


def _located(exc: ValidationError, label: str) -> InputError:
    error = exc.errors(include_url=False)[0]
    loc = [p for p in error["loc"] if not (isinstance(p, str) and p.startswith(("function-", "json-or-python")))]
    message = error["msg"].removeprefix("Value error, ")
    if loc and loc[-1] == "[key]":  # a dict key not among the names allowed
        loc = loc[:-1]
        message = f"unknown name: {message.replace('Input should be', 'expected')}"
    elif error["type"] == "missing":
        message = "missing"
    elif error["type"] == "extra_forbidden":
        message = "unknown key"
    elif "input" in error and error["type"] != "missing":
        shown = json.dumps(error["input"], ensure_ascii=False, default=str)
        message = f"{message} (got {shown[:57] + '...' if len(shown) > 60 else shown})"
    field = str(loc[-1]) if loc else None
    record = _path_text(tuple(loc[:-1]))
    return InputError(label, record, field, message)
