"""Rubrics: what an LLM judge grades, against which written standard, seeing which events.

A rubric is YAML validated into :class:`Rubric` (strict pydantic models that also publish
JSON Schema: ``procgrade schema rubric``), read the way rule sets are read: duplicate keys
refused, errors as ``FILE:LINE: field: reason``. Each dimension has a scale (binary, or
ordinal with a written standard per level), says whether it is graded per round or over the
whole run, and names the grade it produces (layer and item), so judge grades line up with
the human grades they are calibrated against. A rubric never lets a judge see ``grade``
events: human grades are the reference a judge is measured against.

A rubric's hash is sha256 over the RFC 8785 JSON of the validated model (defaults filled in),
so two spellings of one rubric hash alike and any change to a standard is a new hash.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, model_validator

from procgrade.engine.canonical import canonical_json, sha256_hex
from procgrade.engine.errors import InputError
from procgrade.engine.events import EVENT_KINDS, GRADE_LAYERS
from procgrade.engine.yaml_documents import parse_document, validate_document

__all__ = [
    "BUNDLED_RUBRICS",
    "OUTCOME_KINDS",
    "PROCESS_KINDS",
    "BinaryScale",
    "Dimension",
    "Level",
    "OrdinalScale",
    "Rubric",
    "load_rubric",
    "parse_rubric",
    "rubric_hash",
    "rubric_json_schema",
]

#: Rubrics shipped with procgrade, by name (``--rubric arena``).
BUNDLED_RUBRICS = Path(__file__).parent / "rubrics"
#: Outcome events a rubric may show a judge (never ``grade``: grades are what judges are calibrated against).
OUTCOME_KINDS = ("acceptance_started", "denylist_scan", "acceptance_verdict", "test_result")
#: Every other kind: what happened in the run.
PROCESS_KINDS = tuple(sorted(k for k in EVENT_KINDS if k not in OUTCOME_KINDS and k != "grade"))

Identifier = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_-]{0,63}$")]
Item = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")]
Prose = Annotated[str, Field(min_length=1, max_length=20_000)]
ProcessKind = Literal[PROCESS_KINDS]  # type: ignore[valid-type]
OutcomeKind = Literal[OUTCOME_KINDS]  # type: ignore[valid-type]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Visibility(_Strict):
    """Which events the judge is shown. Default: every process event, no outcome event."""

    events: list[ProcessKind] = Field(default_factory=lambda: list(PROCESS_KINDS),
                                      description="Process event kinds shown (default: all).")
    outcomes: list[OutcomeKind] = Field(default_factory=list, description="Outcome event kinds shown "
                                        "(default: none; grades are never shown).")

    @model_validator(mode="after")
    def _sorted_unique(self) -> "Visibility":
        for name in ("events", "outcomes"):
            values = getattr(self, name)
            if len(set(values)) != len(values):
                raise ValueError(f"{name}: a kind is listed twice")
        return self

    def kinds(self) -> frozenset[str]:
        return frozenset(self.events) | frozenset(self.outcomes)


class BinaryScale(_Strict):
    """Pass or fail, each with its written standard."""

    kind: Literal["binary"] = "binary"
    passed: Prose = Field(description="The standard a pass meets.")
    failed: Prose = Field(description="What makes it a fail.")


class Level(_Strict):
    value: Annotated[int, Field(ge=-1000, le=1000)]
    standard: Prose


class OrdinalScale(_Strict):
    """Integer levels (contiguous), each with its written standard."""

    kind: Literal["ordinal"] = "ordinal"
    levels: list[Level] = Field(min_length=2)

    @model_validator(mode="after")
    def _contiguous(self) -> "OrdinalScale":
        values = sorted(level.value for level in self.levels)
        if len(set(values)) != len(values):
            raise ValueError("a level value is given twice")
        if values != list(range(values[0], values[-1] + 1)):
            raise ValueError(f"levels must be contiguous integers, got {values}")
        return self

    @property
    def low(self) -> int:
        return min(level.value for level in self.levels)

    @property
    def high(self) -> int:
        return max(level.value for level in self.levels)


Scale = Annotated[Union[BinaryScale, OrdinalScale], Field(discriminator="kind")]


class Dimension(_Strict):
    """One thing the judge grades, and the grade it becomes."""

    id: Identifier
    title: Prose
    question: Prose = Field(description="What the judge answers, in one or two sentences.")
    scale: Scale
    per: Literal["round", "fix_round", "run"] = Field(
        description="round: graded once per round (the event's stage), on the log up to that round's end; "
                    "fix_round: the same, on every round after the first (the rounds that answer a correction); "
                    "run: once over the whole run.")
    layer: Literal[GRADE_LAYERS]  # type: ignore[valid-type]
    item: Item | None = Field(default=None, description="The grade's item (default: the id; none for the round "
                                                        "score).")
    sees: Visibility | None = Field(default=None, description="Overrides the rubric's visibility.")
    cite: bool | None = Field(default=None, description="Overrides the rubric's citation rule.")


class Rubric(_Strict):
    name: Identifier
    version: Annotated[int, Field(ge=1)]
    description: Prose
    instructions: Prose = Field(description="What the judge is told before every dimension.")
    sees: Visibility = Field(default_factory=Visibility)
    cite: bool = Field(default=True, description="Each verdict must cite at least one event seq it saw, and "
                                                 "only seqs it saw.")
    sheet: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,127}$")] | None = Field(
        default=None, description="The grades' sheet (default judge/<name>).")
    dimensions: list[Dimension] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique(self) -> "Rubric":
        seen: set[str] = set()
        produced: set[tuple[str, str | None]] = set()
        for i, dim in enumerate(self.dimensions):
            if dim.id in seen:
                raise ValueError(f"dimensions[{i}].id: {dim.id!r} is given twice")
            seen.add(dim.id)
            grade = (dim.layer, self.item_of(dim))
            if grade in produced:
                raise ValueError(f"dimensions[{i}]: another dimension already produces layer {dim.layer} item "
                                 f"{grade[1]}")
            produced.add(grade)
        return self

    @staticmethod
    def item_of(dim: Dimension) -> str | None:
        if dim.item is not None:
            return dim.item
        return None if dim.layer in ("round", "fix_effect", "overall") else dim.id

    def sheet_name(self) -> str:
        return self.sheet or f"judge/{self.name}"

    def visibility(self, dim: Dimension) -> Visibility:
        return dim.sees or self.sees

    def must_cite(self, dim: Dimension) -> bool:
        return self.cite if dim.cite is None else dim.cite

    def dimension(self, dim_id: str) -> Dimension:
        for dim in self.dimensions:
            if dim.id == dim_id:
                return dim
        raise KeyError(dim_id)


def rubric_hash(rubric: Rubric) -> str:
    return sha256_hex(canonical_json(rubric.model_dump(mode="json")))


def rubric_json_schema() -> dict[str, Any]:
    schema = Rubric.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "procgrade judge rubric"
    return schema


def load_rubric(path: Path | str) -> tuple[Rubric, str]:
    """A rubric file, or a bundled rubric by name (``arena``); returns the rubric and where it came from."""
    given = Path(path)
    if not given.exists() and "/" not in str(path) and not given.suffix:
        bundled = BUNDLED_RUBRICS / f"{path}.yaml"
        if bundled.is_file():
            given = bundled
        else:
            known = ", ".join(sorted(p.stem for p in BUNDLED_RUBRICS.glob("*.yaml")))
            raise InputError(str(path), None, None, f"no such rubric file or bundled rubric (bundled: {known})")
    try:
        text = given.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(str(path), None, None, f"cannot read: {exc}") from exc
    return parse_rubric(text, str(given)), str(given)


def parse_rubric(text: str, source: str) -> Rubric:
    # Read like a rule set: the same duplicate-key refusal and FILE:LINE: field errors.
    document = parse_document(text, source)
    if not isinstance(document, dict):
        raise InputError(source, None, None, "a rubric is a mapping (name, version, dimensions, ...)")
    return validate_document(Rubric, document, source, union_tags=("binary", "ordinal"))
