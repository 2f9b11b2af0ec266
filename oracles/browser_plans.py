"""Browser test plans and the product they grade: ``tasks/<id>/product.yaml`` and ``tasks/<id>/plans/*.yaml``.

A plan checks only what a user of the finished product sees (ViBench 2.0, Sections 2.1-2.3): it is a list of
steps, each a few user actions (go to a page, click a control found by its role and name or its visible text,
fill a field found by its label, choose an option, press a key, reload when the step allows it) followed by
checks, each stated as what a user sees (``says``): a text visible or absent (with the wording variants the plan
accepts), a field's value, how many controls of a role are shown, the page's address. A plan may have several
users (each acts in a browser context of its own) and a seed: a script, with seed files, run against the
started product before every grade to create the data the plan needs.

``product.yaml`` declares how the product under test is set up and started in a fresh copy of its workspace on
an empty database (SQLite, or a fresh PostgreSQL database), and how its health is checked.

Planted bugs (``planted/<name>/plant.yaml``) are edits to the reference build (``builds/correct/``) that plant
one bug of ViBench's kinds; ``procgrade task validate`` checks that the plan aimed at each bug fails every grade
and the reference build passes every plan in every grade (Table 4).

Everything is validated on load; an error names the file, the line and the field.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from procgrade.engine.canonical import canonical_json
from procgrade.engine.errors import InputError
from procgrade.engine.yaml_documents import load_model

__all__ = [
    "BUG_KINDS",
    "Locator",
    "Action",
    "Check",
    "Step",
    "Seed",
    "Plan",
    "ProductSpec",
    "PlantedBug",
    "BrowserTask",
    "load_plan",
    "load_browser_task",
    "plan_json_schema",
    "product_json_schema",
    "apply_plant",
]

#: ViBench 2.0's planted-bug kinds (Table 4) and the two-user kind this project adds.
BUG_KINDS = ("cent_off", "reverts", "dropped", "no_refusal", "timing", "obvious", "two_users")
_ID = r"^[a-z0-9][a-z0-9_-]{0,79}$"
_USER = r"^[A-Za-z][A-Za-z0-9_-]{0,39}$"
#: Placeholders of the product's commands.
PRODUCT_PLACEHOLDERS = ("python", "port", "workspace", "database_url", "database_path")
_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")

NonEmpty = Annotated[str, Field(min_length=1, max_length=2000)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


def _relpath(value: str) -> str:
    if value.startswith("/") or "\\" in value or "\x00" in value:
        raise ValueError(f"must be a relative POSIX path, got {value!r}")
    norm = posixpath.normpath(value)
    if norm != value or norm.startswith("../") or norm in ("..", "."):
        raise ValueError(f"must be a normalised path inside the plans folder, got {value!r}")
    return value


def _one_of(model: BaseModel, names: tuple[str, ...], what: str) -> str:
    given = [n for n in names if getattr(model, n) is not None]
    if len(given) != 1:
        raise ValueError(f"{what} must have exactly one of {', '.join(names)} (got {', '.join(given) or 'none'})")
    return given[0]


class Locator(_Strict):
    """How a user finds a control: by its role and accessible name, by its label, or by its visible text."""

    role: Annotated[str, Field(pattern=r"^[a-z]+$")] | None = Field(
        default=None, description="ARIA role (button, link, textbox, row, ...); with name, the control's name.")
    name: NonEmpty | None = Field(default=None, description="The accessible name, matched exactly (case-insensitive).")
    label: NonEmpty | None = Field(default=None, description="The visible label of a form field.")
    text: NonEmpty | None = Field(default=None, description="Visible text of the control.")

    @model_validator(mode="after")
    def _how(self) -> "Locator":
        how = _one_of(self, ("role", "label", "text"), "a locator")
        if self.name is not None and how != "role":
            raise ValueError("name goes with role")
        return self

    def describe(self) -> str:
        if self.role is not None:
            return f"the {self.role} {self.name!r}" if self.name else f"a {self.role}"
        if self.label is not None:
            return f"the field labelled {self.label!r}"
        return f"the control reading {self.text!r}"


class FillSpec(_Strict):
    label: NonEmpty = Field(description="The field's visible label.")
    value: Annotated[str, Field(max_length=2000)] = Field(description="What the user types, key by key.")


class SelectSpec(_Strict):
    label: NonEmpty
    option: NonEmpty = Field(description="The option's visible text.")


class Action(_Strict):
    """One user action; exactly one key."""

    goto: Annotated[str, Field(pattern=r"^/[^\s]*$")] | None = Field(
        default=None, description="Open this path of the product (typed in the address bar).")
    click: Locator | None = None
    fill: FillSpec | None = None
    select: SelectSpec | None = None
    press: Annotated[str, Field(pattern=r"^[A-Za-z0-9+]{1,40}$")] | None = Field(
        default=None, description="A key, e.g. Enter.")
    reload: Literal[True] | None = Field(default=None, description="Reload the page (only in a step that allows it).")

    @model_validator(mode="after")
    def _one(self) -> "Action":
        _one_of(self, ("goto", "click", "fill", "select", "press", "reload"), "an action")
        return self

    @property
    def verb(self) -> str:
        return next(n for n in ("goto", "click", "fill", "select", "press", "reload") if getattr(self, n) is not None)

    def describe(self) -> str:
        verb = self.verb
        if verb == "goto":
            return f"open {self.goto}"
        if verb == "click":
            assert self.click is not None
            return f"click {self.click.describe()}"
        if verb == "fill":
            assert self.fill is not None
            return f"type {self.fill.value!r} into the field labelled {self.fill.label!r}"
        if verb == "select":
            assert self.select is not None
            return f"choose {self.select.option!r} in the field labelled {self.select.label!r}"
        if verb == "press":
            return f"press {self.press}"
        return "reload the page"


class FieldValue(_Strict):
    label: NonEmpty
    value: Annotated[str, Field(max_length=2000)]


class CountSpec(_Strict):
    role: Annotated[str, Field(pattern=r"^[a-z]+$")]
    name: NonEmpty | None = Field(default=None, description="Only controls whose accessible name contains this.")
    equals: Annotated[int, Field(ge=0, le=10_000)]


class Check(_Strict):
    """What a user sees after a step's actions; exactly one of the check keys, and ``says``."""

    says: NonEmpty = Field(description="The check in a user's words: what the screen shows when it passes.")
    text_visible: NonEmpty | None = Field(default=None, description="This text is on screen.")
    text_absent: NonEmpty | None = Field(default=None, description="This text is nowhere on screen.")
    variants: list[NonEmpty] = Field(default_factory=list, description="Other wordings accepted for the text.")
    field_value: FieldValue | None = None
    count: CountSpec | None = None
    url: Annotated[str, Field(pattern=r"^/[^\s]*$")] | None = Field(default=None, description="The page's path.")

    @model_validator(mode="after")
    def _one(self) -> "Check":
        kind = _one_of(self, ("text_visible", "text_absent", "field_value", "count", "url"), "a check")
        if self.variants and kind not in ("text_visible", "text_absent"):
            raise ValueError("variants go with text_visible or text_absent")
        return self

    @property
    def kind(self) -> str:
        return next(n for n in ("text_visible", "text_absent", "field_value", "count", "url") if getattr(self, n) is not None)

    @property
    def wordings(self) -> tuple[str, ...]:
        text = self.text_visible if self.text_visible is not None else self.text_absent
        return (text, *self.variants) if text is not None else ()


class Step(_Strict):
    title: NonEmpty
    user: Annotated[str, Field(pattern=_USER)] | None = Field(default=None, description="Who acts (default: the first user).")
    allow_reload: bool = Field(default=False, description="Whether the grader may reload the page in this step.")
    actions: list[Action] = Field(default_factory=list)
    checks: Annotated[list[Check], Field(min_length=1)]

    @model_validator(mode="after")
    def _reloads(self) -> "Step":
        if any(a.reload for a in self.actions) and not self.allow_reload:
            raise ValueError("a reload action needs allow_reload: true")
        return self


class Seed(_Strict):
    """A script (Python, run with the grading interpreter) that creates the plan's data through the running
    product; it gets the product's address as its argument and in ``APP_URL``, and the folder of its seed
    files in ``SEED_DIR``."""

    script: Annotated[str, Field(min_length=1, max_length=500)]
    files: list[Annotated[str, Field(min_length=1, max_length=500)]] = Field(default_factory=list)
    timeout_sec: Annotated[int, Field(gt=0, le=3600)] = 60

    @field_validator("script")
    @classmethod
    def _script(cls, value: str) -> str:
        return _relpath(value)

    @field_validator("files")
    @classmethod
    def _files(cls, value: list[str]) -> list[str]:
        return [_relpath(v) for v in value]


class Plan(_Strict):
    """One test plan (``plans/<id>.yaml``)."""

    id: Annotated[str, Field(pattern=_ID)] = Field(description="Equal to the file's stem.")
    title: NonEmpty
    aims_at: Literal["cent_off", "reverts", "dropped", "no_refusal", "timing", "obvious", "two_users"] | None = Field(
        default=None, description="The planted-bug kind this plan is written to detect, if any.")
    users: Annotated[list[Annotated[str, Field(pattern=_USER)]], Field(min_length=1)] = Field(
        default_factory=lambda: ["user"], description="The users; each acts in a browser context of its own.")
    seed: Seed | None = None
    steps: Annotated[list[Step], Field(min_length=1)]

    @model_validator(mode="after")
    def _users(self) -> "Plan":
        if len(set(self.users)) != len(self.users):
            raise ValueError("users lists a name twice")
        for i, step in enumerate(self.steps):
            if step.user is not None and step.user not in self.users:
                raise ValueError(f"steps[{i}].user {step.user!r} is not one of users ({', '.join(self.users)})")
        return self

    def user_of(self, step: Step) -> str:
        return step.user or self.users[0]


class ProductSpec(_Strict):
    """``product.yaml``: how the product under test is set up and started."""

    setup: list[NonEmpty] = Field(default_factory=list, description="Commands run once in the fresh workspace copy, "
                                  "in order, before the start (placeholders: " + ", ".join(PRODUCT_PLACEHOLDERS) + ").")
    start: NonEmpty = Field(description="The command that serves the product on {port} at 127.0.0.1.")
    database: Literal["sqlite", "postgresql"] = Field(default="sqlite", description="An empty database per grade: "
                                                      "a new SQLite file, or a new database on the local PostgreSQL.")
    health_path: Annotated[str, Field(pattern=r"^/[^\s]*$")] = Field(default="/", description="GET here must answer "
                                                                     "below 500 once the product is up.")
    start_timeout_sec: Annotated[int, Field(gt=0, le=600)] = 30
    setup_timeout_sec: Annotated[int, Field(gt=0, le=3600)] = 300
    env: dict[Annotated[str, Field(pattern=r"^[A-Z_][A-Z0-9_]*$")], Annotated[str, Field(max_length=2000)]] = Field(
        default_factory=dict, description="Fixed environment, e.g. the constants a PRD fixes.")

    @field_validator("setup", "start")
    @classmethod
    def _placeholders(cls, value: Any) -> Any:
        for command in value if isinstance(value, list) else [value]:
            unknown = sorted(set(_PLACEHOLDER.findall(command)) - set(PRODUCT_PLACEHOLDERS))
            if unknown:
                raise ValueError(f"unknown placeholder(s) {', '.join('{' + u + '}' for u in unknown)} "
                                 f"(known: {', '.join('{' + p + '}' for p in PRODUCT_PLACEHOLDERS)})")
        return value


class Edit(_Strict):
    file: Annotated[str, Field(min_length=1, max_length=500)]
    old: Annotated[str, Field(min_length=1)] = Field(description="Text that occurs exactly once in the reference file.")
    new: str

    @field_validator("file")
    @classmethod
    def _file(cls, value: str) -> str:
        return _relpath(value)


class PlantedBug(_Strict):
    """``planted/<name>/plant.yaml``: one bug planted in the reference build."""

    kind: Literal["cent_off", "reverts", "dropped", "no_refusal", "timing", "obvious", "two_users"]
    plan: Annotated[str, Field(pattern=_ID)] = Field(description="The plan aimed at this bug.")
    description: NonEmpty
    edits: Annotated[list[Edit], Field(min_length=1)]


# --- loading ----------------------------------------------------------------------------------------------


def load_plan(path: str | Path) -> Plan:
    """Load one plan file; its ``id`` must equal the file's stem, and its seed files must exist."""
    path = Path(path)
    plan: Plan = load_model(path, Plan)
    if plan.id != path.stem:
        raise InputError(str(path), None, "id", f"{plan.id!r} differs from the file name {path.stem!r}")
    if plan.seed is not None:
        for field, rel in (("seed.script", plan.seed.script), *(("seed.files", f) for f in plan.seed.files)):
            if not (path.parent / rel).is_file():
                raise InputError(str(path), None, field, f"{rel!r} is not a file in {path.parent}")
    return plan


@dataclass(frozen=True)
class BrowserTask:
    """A task package's browser-grading part."""

    root: Path
    product: ProductSpec
    plans: tuple[Plan, ...]
    planted: tuple[tuple[str, PlantedBug], ...]

    @property
    def task_id(self) -> str:
        return self.root.name

    @property
    def plans_dir(self) -> Path:
        return self.root / "plans"

    @property
    def reference_build(self) -> Path:
        return self.root / "builds" / "correct"

    def plan(self, plan_id: str) -> Plan:
        for plan in self.plans:
            if plan.id == plan_id:
                return plan
        raise KeyError(plan_id)

    @cached_property
    def plans_sha256(self) -> str:
        """sha256 over the product spec, every plan and every seed file (canonical JSON of name, hash pairs)."""
        pairs = [["product.yaml", hashlib.sha256((self.root / "product.yaml").read_bytes()).hexdigest()]]
        for plan in self.plans:
            files = [f"{plan.id}.yaml"]
            if plan.seed is not None:
                files += [plan.seed.script, *plan.seed.files]
            pairs += [[f"plans/{f}", hashlib.sha256((self.plans_dir / f).read_bytes()).hexdigest()] for f in files]
        return hashlib.sha256(canonical_json(sorted(set(map(tuple, pairs))))).hexdigest()


def load_browser_task(task_dir: str | Path) -> BrowserTask:
    """Load ``product.yaml``, every ``plans/*.yaml`` (in name order) and every ``planted/*/plant.yaml``."""
    root = Path(task_dir).resolve()
    if not root.is_dir():
        raise InputError(str(root), None, None, "not a directory")
    product_file = root / "product.yaml"
    if not product_file.is_file():
        raise InputError(str(product_file), None, None, "missing: the product's setup and start commands")
    product: ProductSpec = load_model(product_file, ProductSpec)
    plan_files = sorted((root / "plans").glob("*.yaml")) if (root / "plans").is_dir() else []
    if not plan_files:
        raise InputError(str(root / "plans"), None, None, "no plan files (plans/<id>.yaml)")
    plans = tuple(load_plan(p) for p in plan_files)
    ids = {p.id for p in plans}
    planted: list[tuple[str, PlantedBug]] = []
    pdir = root / "planted"
    if pdir.is_dir():
        for entry in sorted(pdir.iterdir()):
            plant_file = entry / "plant.yaml"
            if not plant_file.is_file():
                raise InputError(str(plant_file), None, None, "missing: a planted bug is planted/<name>/plant.yaml")
            bug: PlantedBug = load_model(plant_file, PlantedBug)
            if bug.plan not in ids:
                raise InputError(str(plant_file), None, "plan", f"{bug.plan!r} is not a plan of {root / 'plans'}")
            planted.append((entry.name, bug))
    task = BrowserTask(root, product, plans, tuple(planted))
    for name, bug in task.planted:
        try:
            _planted_texts(task.reference_build, bug)
        except ValueError as exc:
            raise InputError(str(pdir / name / "plant.yaml"), None, "edits", str(exc)) from None
    return task


def _planted_texts(reference: Path, bug: PlantedBug) -> dict[str, str]:
    texts: dict[str, str] = {}
    for i, edit in enumerate(bug.edits):
        path = reference / edit.file
        if edit.file not in texts:
            if not path.is_file():
                raise ValueError(f"[{i}]: {edit.file!r} is not a file of the reference build {reference}")
            texts[edit.file] = path.read_text(encoding="utf-8")
        found = texts[edit.file].count(edit.old)
        if found != 1:
            raise ValueError(f"[{i}]: the old text occurs {found} times in {edit.file} (must be exactly once)")
        texts[edit.file] = texts[edit.file].replace(edit.old, edit.new)
    return texts


def apply_plant(reference: Path, bug: PlantedBug, target: Path) -> Path:
    """Copy the reference build to ``target`` and plant the bug there."""
    import shutil

    shutil.copytree(reference, target, symlinks=True)
    for rel, text in _planted_texts(reference, bug).items():
        (target / rel).write_text(text, encoding="utf-8")
    return target


def _schema(model: type[BaseModel], title: str) -> dict[str, Any]:
    schema = model.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = title
    return schema


def plan_json_schema() -> dict[str, Any]:
    """JSON Schema of a plan file (``tasks/<id>/plans/<id>.yaml``)."""
    return _schema(Plan, "procgrade browser test plan")


def product_json_schema() -> dict[str, Any]:
    """JSON Schema of ``tasks/<id>/product.yaml``."""
    return _schema(ProductSpec, "procgrade product under test")
