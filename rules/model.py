"""The rule language: pydantic models of rules, their predicates and templates.

Rules are data. A predicate matches an event by its kind, its actor and its typed
fact columns (equality, membership, prefix, presence, integer comparison); there
are no expression strings, no ``eval`` and no floats anywhere. A rule applies one
template (Declare/LTLf-style ordering constraints over the run's seq order) to
predicates in three roles: ``activation`` (the event being judged), ``target``
(what must come before or after it) and ``reset`` (what makes earlier targets
stale). Each role takes one predicate or a list of them (any of).

Every model forbids unknown keys, so a misspelt field is an error, and
:func:`ruleset_json_schema` publishes the JSON Schema of a rule file.
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from procgrade.engine.events import EVENT_KINDS
from procgrade.engine.facts import FACT_COLUMNS

__all__ = [
    "ActorClass",
    "Comparison",
    "Predicate",
    "Rule",
    "RuleSet",
    "TEMPLATES",
    "BEHAVIOUR_PATTERNS",
    "BINARY_CHECKS",
    "SEMANTICS",
    "ruleset_json_schema",
]

#: The Arena's eight behaviour patterns (seed 002, layer 3).
BEHAVIOUR_PATTERNS = (
    "planning_and_decomposition",
    "exploration",
    "self_verification",
    "completion_claim_accuracy",
    "root_cause_vs_repeated_trial",
    "error_recovery",
    "knowledge_gap_handling",
    "scope_adherence",
)
#: The Arena's five per-round binary checks (seed 002, layer 1).
BINARY_CHECKS = (
    "requirement_understanding",
    "context_preservation",
    "implementation_path",
    "constraint_adherence",
    "next_round_readiness",
)

Field_ = Literal[tuple(FACT_COLUMNS)]  # type: ignore[valid-type]
TextField = Literal[tuple(name for name, kind in FACT_COLUMNS.items() if kind == "text")]  # type: ignore[valid-type]
IntField = Literal[tuple(["stage", "in_stage"] + [name for name, kind in FACT_COLUMNS.items() if kind == "int"])]  # type: ignore[valid-type]
EventKind = Literal[tuple(sorted(EVENT_KINDS))]  # type: ignore[valid-type]
Identifier = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_-]{0,63}$")]

#: ``model`` is the model's own actors (``agent`` and every ``subagent:<id>``).
ActorClass = Literal["model", "agent", "subagent", "harness", "user", "human", "grader", "judge", "system", "any"]

_INT_LIMIT = 2**63 - 1


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Comparison(_Strict):
    """An integer comparison on a fact column (``NULL`` never compares true)."""

    field: IntField
    op: Literal["eq", "ne", "lt", "le", "gt", "ge"]
    value: Annotated[int, Field(ge=-_INT_LIMIT, le=_INT_LIMIT)]


ScalarValue = Union[Annotated[str, Field(max_length=10_000)], Annotated[int, Field(ge=-_INT_LIMIT, le=_INT_LIMIT)]]


class Predicate(_Strict):
    """Matches an event: every condition given must hold."""

    kind: EventKind | list[EventKind] = Field(description="The event kind, or a list of kinds (any of).")
    actor: ActorClass | list[ActorClass] | None = Field(
        default=None, description="Who did it; default: the model for activations, anyone for targets and resets.")
    equals: dict[Field_, ScalarValue | list[ScalarValue]] = Field(
        default_factory=dict, description="Column equals the value, or is one of the listed values.")
    prefix: dict[TextField, list[Annotated[str, Field(min_length=1)]]] = Field(
        default_factory=dict, description="Text column starts with one of the listed prefixes.")
    not_prefix: dict[TextField, list[Annotated[str, Field(min_length=1)]]] = Field(
        default_factory=dict, description="Text column is NULL or starts with none of the listed prefixes.")
    present: list[Field_] = Field(default_factory=list, description="Columns that must not be NULL.")
    absent: list[Field_] = Field(default_factory=list, description="Columns that must be NULL.")
    compare: list[Comparison] = Field(default_factory=list, description="Integer comparisons, all of which hold.")

    @field_validator("kind", "actor")
    @classmethod
    def _non_empty(cls, value: object) -> object:
        if isinstance(value, list) and not value:
            raise ValueError("must list at least one value")
        return value

    @field_validator("equals")
    @classmethod
    def _types_fit(cls, value: dict[str, object]) -> dict[str, object]:
        for column, wanted in value.items():
            items = wanted if isinstance(wanted, list) else [wanted]
            if not items:
                raise ValueError(f"{column}: must list at least one value")
            kind = FACT_COLUMNS[column]
            for item in items:
                if (kind == "int") != isinstance(item, int):
                    raise ValueError(f"{column} is a {kind} column; {item!r} cannot equal it")
        return value

    def kinds(self) -> tuple[str, ...]:
        return tuple(sorted({self.kind} if isinstance(self.kind, str) else set(self.kind)))

    def actors(self, default: str) -> tuple[str, ...]:
        actor = self.actor if self.actor is not None else default
        return tuple(sorted({actor} if isinstance(actor, str) else set(actor)))


AnyOf = Union[Predicate, Annotated[list[Predicate], Field(min_length=1)]]


def as_list(value: AnyOf | None) -> list[Predicate]:
    if value is None:
        return []
    return [value] if isinstance(value, Predicate) else list(value)


class Correlation(_Strict):
    """Activation and target (and reset) are related when these columns are equal."""

    activation: Field_
    target: Field_ | Annotated[list[Field_], Field(min_length=1)] | None = Field(  # type: ignore[valid-type]
        default=None,
        description="Default: the same column as the activation's. A list relates a target by any of its "
                    "columns (a rename relates to both its source and its destination).")
    reset: Field_ | None = Field(default=None, description="Correlate resets too, on this column (default: no).")

    def target_columns(self) -> tuple[str, ...]:
        if self.target is None:
            return (self.activation,)
        return tuple(sorted({self.target} if isinstance(self.target, str) else set(self.target)))


class _RuleBase(_Strict):
    id: Identifier
    version: Annotated[int, Field(ge=1)] = 1
    title: Annotated[str, Field(min_length=1)]
    rationale: Annotated[str, Field(min_length=1, description="Why this behaviour matters, in a sentence or two.")]
    pattern: Literal[BEHAVIOUR_PATTERNS] | None = None  # type: ignore[valid-type]
    checks: list[Literal[BINARY_CHECKS]] = Field(default_factory=list)  # type: ignore[valid-type]
    weight: Annotated[int, Field(ge=1, le=1000)] = 1
    scope: Literal["run", "stage"] = "run"


class _Correlated(_RuleBase):
    correlate: Correlation | Field_ | None = None  # type: ignore[valid-type]

    def correlation(self) -> Correlation | None:
        if self.correlate is None or isinstance(self.correlate, Correlation):
            return self.correlate
        return Correlation(activation=self.correlate)


_APPLIES_IF = Field(
    default=None,
    description="Semantics 2: a scope is judged only if an event matching this occurred in it (otherwise its "
                "finding is vacuous). Default: absence rules apply where the model did what they guard (a model "
                "event of a kind the rule matches); count and existence rules where the model did anything.")


class CountRule(_RuleBase):
    """Per scope (the run, or each stage): the number of matching events lies in [min, max]."""

    template: Literal["count"]
    match: AnyOf
    applies_if: AnyOf | None = _APPLIES_IF
    min: Annotated[int, Field(ge=0)] = 0
    max: Annotated[int, Field(ge=0)] | None = None

    @model_validator(mode="after")
    def _bounds(self) -> "CountRule":
        if self.max is not None and self.max < self.min:
            raise ValueError("max must not be below min")
        return self


class ExistenceRule(_RuleBase):
    """Per scope: at least one matching event (count with min 1)."""

    template: Literal["existence"]
    match: AnyOf
    applies_if: AnyOf | None = _APPLIES_IF


class AbsenceRule(_RuleBase):
    """Per scope: no matching event (count with max 0)."""

    template: Literal["absence"]
    match: AnyOf
    applies_if: AnyOf | None = _APPLIES_IF


class PrecedenceRule(_Correlated):
    """Each activation needs a target earlier in its scope (with the same key)."""

    template: Literal["precedence"]
    activation: AnyOf
    target: AnyOf
    only_first: bool = Field(default=False, description="Judge only the first activation per scope and key.")


class PrecedenceSinceRule(_Correlated):
    """Each activation needs a target after the last reset before it (within its scope)."""

    template: Literal["precedence_since"]
    activation: AnyOf
    target: AnyOf
    reset: AnyOf
    reset_required: bool = Field(
        default=False, description="Activations with no reset before them are vacuous (the rule only applies after one).")


class ResponseRule(_Correlated):
    """Each activation is followed by a target later in its scope (same key), within
    ``within`` events if given, and no later than the first ``deadline`` event after it."""

    template: Literal["response"]
    activation: AnyOf
    target: AnyOf
    within: Annotated[int, Field(ge=1)] | None = None
    deadline: AnyOf | None = None
    open_at_end: Literal["violated", "vacuous"] = Field(
        default="violated",
        description="An activation still waiting when its scope ends (no target, no deadline): violated, or "
                    "vacuous when only a deadline can make it wrong (nothing depended on it).")


class ChainResponseRule(_RuleBase):
    """The event right after each activation (in its scope) is a target."""

    template: Literal["chain_response"]
    activation: AnyOf
    target: AnyOf


class ChainPrecedenceRule(_RuleBase):
    """The event right before each activation (in its scope) is a target."""

    template: Literal["chain_precedence"]
    activation: AnyOf
    target: AnyOf


class NoRepeatRule(_RuleBase):
    """An activation must not repeat an earlier one with the same key unless a reset came between."""

    template: Literal["no_repeat"]
    activation: AnyOf
    key: Field_  # type: ignore[valid-type]
    reset: AnyOf | None = None


class NotCoexistenceRule(_RuleBase):
    """Per scope: events matching ``activation`` and ``target`` do not both occur."""

    template: Literal["not_coexistence"]
    activation: AnyOf
    target: AnyOf


class DistinctRule(_RuleBase):
    """Per scope: among matching events in the first ``early_percent`` percent of the model's
    events (by seq), at most ``max`` distinct values of ``key`` (e.g. files edited early).
    A scope with no matching event in that window is vacuous."""

    template: Literal["distinct"]
    match: AnyOf
    key: Field_  # type: ignore[valid-type]
    max: Annotated[int, Field(ge=0)]
    early_percent: Annotated[int, Field(ge=1, le=100)] = 100


class SatisfiesRule(_RuleBase):
    """Each activation also matches ``require`` (a property of the event itself)."""

    template: Literal["satisfies"]
    activation: AnyOf
    require: AnyOf


Rule = Annotated[
    Union[
        CountRule, ExistenceRule, AbsenceRule, PrecedenceRule, PrecedenceSinceRule, ResponseRule,
        ChainResponseRule, ChainPrecedenceRule, NoRepeatRule, NotCoexistenceRule, SatisfiesRule, DistinctRule,
    ],
    Field(discriminator="template"),
]
TEMPLATES = (
    "count", "existence", "absence", "precedence", "precedence_since", "response",
    "chain_response", "chain_precedence", "no_repeat", "not_coexistence", "satisfies", "distinct",
)
#: Template semantics this engine evaluates -> the fact-extractor version rule sets of it read.
#: Semantics 1 (rule set v1, before issue 10): scope ``stage`` reads each event's own ``stage``;
#: count/existence/absence judge every scope. Semantics 2: scope ``stage`` reads the stage derived
#: from the log (``in_stage``); scope-level rules judge a scope only where they apply (``applies_if``).
SEMANTICS = {1: "1", 2: "2"}
#: What semantics 1 cannot say (added with semantics 2 / extractor 2).
_SEMANTICS_2_ONLY = frozenset({"not_prefix", "applies_if", "open_at_end", "distinct", "early_percent", "in_stage",
                               "io_path", "io", "status", "area", "cmd_key"})


class RuleSet(_Strict):
    """A named, versioned set of rules: what ``procgrade score --rules FILE`` loads."""

    name: Identifier
    version: Annotated[int, Field(ge=1)]
    description: str | None = None
    semantics: Literal[1, 2] = Field(
        default=2, description="Template semantics (and fact-extractor version) the set is evaluated with; "
                               "1 reproduces rule sets scored before issue 10.")
    rules: Annotated[list[Rule], Field(min_length=1)]

    @model_validator(mode="after")
    def _semantics_fit(self) -> "RuleSet":
        if self.semantics == 1:
            for index, rule in enumerate(self.rules):
                used = _names_used(rule.model_dump(mode="json", exclude_defaults=True))
                late = sorted(used & _SEMANTICS_2_ONLY)
                if late:
                    raise ValueError(f"rules[{index}] ({rule.id}): {', '.join(late)} need semantics 2")
        return self

    @field_validator("rules")
    @classmethod
    def _unique_ids(cls, rules: list[_RuleBase]) -> list[_RuleBase]:
        seen: set[str] = set()
        for rule in rules:
            if rule.id in seen:
                raise ValueError(f"rule id {rule.id!r} is used twice")
            seen.add(rule.id)
        return rules


def _names_used(value: object) -> set[str]:
    """Every key and string value in a dumped rule (to find what a semantics cannot say)."""
    found: set[str] = set()
    if isinstance(value, dict):
        for key, item in value.items():
            found.add(key)
            found |= _names_used(item)
    elif isinstance(value, list):
        for item in value:
            found |= _names_used(item)
    elif isinstance(value, str):
        found.add(value)
    return found


def ruleset_json_schema() -> dict:
    schema = RuleSet.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "procgrade rule set"
    return schema
