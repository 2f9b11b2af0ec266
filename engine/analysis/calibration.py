"""Calibrating automated grades against human grades: ``procgrade calibrate``.

A *reference* grader (usually ``human``) and one or more *candidates* (``judge``, ``rules``, a named actor or
sheet) are compared on the ``grade`` events of the stored runs, layer by layer (and group by group with ``by``).
Every statistic is a call into :mod:`procgrade.engine.analysis.agreement` and :mod:`procgrade.engine.analysis.rankings` (scipy,
statsmodels, scikit-learn; Krippendorff's alpha through the optional GPL package); nothing is computed by hand
here beyond counting, selecting and averaging labels.

Graders
-------
* ``human``: the actors ``human`` and ``human:<id>``; ``judge``: ``judge`` and ``judge:<id>``.
* any other name: the grades whose actor is exactly that name (``judge:agent-as-a-judge-gray-box``) or whose
  ``sheet`` is that name.
* ``rules``: labels derived from the run's process score under a rule set (never from grade events):

  - layer ``check``: per run and check, *passed* iff the check's subtotal is exactly 1 (no violation of any of
    the check's rules anywhere in the run); a check with no subtotal (no rule applied) is not graded. The
    subtotal is per run, so rules are compared at the **run level**: a grader's per-round check grades are
    collapsed to one label per (run, check), passed iff it passed every round it graded (a run-level grade,
    round unset, is used as it is).
  - layer ``pattern``: the pattern subtotal (a rational in [0, 1]) against the grader's pattern value (the mean
    over rounds if it graded per round). The scales differ, so this is an **ordinal comparison by rank
    correlation** (Kendall tau-b, Spearman rho) over the (run, pattern) items, not agreement.
  - layer ``overall``: the run's process score against the grader's overall grade, by rank correlation over
    the runs, not agreement.
  - every other layer: no rules labels (a note says so).

  Rules are read on the items the reference graded, and only on **graded runs**
  (:mod:`procgrade.engine.analysis.graded_runs`): a run with no process score ("not graded: no model decisions") or
  below ``min_coverage`` gives no rules label; the runs the reference graded that are left out this way
  are listed (``not_graded``) with the reason.

Items and labels
----------------
An item is (run, layer, item, round), the round being the grade's envelope ``stage``. A layer is *ordinal* when
its grades carry a ``value`` (label = value; kappa is quadratic-weighted over the layer's whole scale
``scale_min..scale_max``, Krippendorff's alpha at the ordinal level) and *binary* otherwise (label = ``passed``;
unweighted kappa, nominal alpha, precision, recall, wrong-pass and wrong-fail rates). An item graded more than
once by the same grader (by several of its actors, or again in another sheet) has **re-grades**: agreement, the
matrix, rank correlations and ratings use its **first grade in seq order**; the re-grades feed the variance
decomposition.

What is computed, per layer
---------------------------
* per candidate (and per group of ``by``): agreement with its Clopper-Pearson interval, Cohen's kappa with its
  asymptotic interval, Krippendorff's alpha (``None`` with a note when the GPL extra is missing), and for binary
  layers precision, recall, wrong-pass (FP/(FP+TN)) and wrong-fail (FN/(FN+TP)) with Clopper-Pearson intervals;
* McNemar's test between every two candidates on the items all three graded (is each candidate's label the
  reference's?), at the run level when rules take part;
* the pairwise agreement matrix over every actor that graded the layer (as Vibe Code Bench's evaluator table);
* the rank correlation of the per-group means (groups = the ``by`` field, else ``model``, model names through
  :mod:`procgrade.engine.analysis.model_identity`; a run without the field is in no group) of reference and
  candidate over the items both graded: resampling the tasks when every group has every task
  (:func:`~procgrade.engine.analysis.rankings.rank_agreement_over_tasks`), else the groups;
* Bradley-Terry ratings of the groups, for the reference and each candidate: runs of the same task are paired,
  the run with the higher grade (its mean label on the layer) wins, a tie is half a win; seeded bootstrap
  intervals. A group with fewer than :data:`MIN_GAMES` games gets no rating (its games are set aside, and the
  notes say so): no rating from a single game;
* the variance decomposition of the graders' run scores into generation (the run, within its task) and
  re-grading (a grading pass = one actor and sheet; a pass's run score is its mean label on the layer), where
  some run was graded more than once; otherwise a note.

Everything is deterministic: runs, items, groups and graders are sorted, bootstraps are seeded, and
:meth:`Calibration.to_dict` gives plain data for canonical JSON (:meth:`Calibration.to_json`).
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import Any

try:
    import numpy as np
except ImportError as exc:  # pragma: no cover - the analysis extra is missing
    raise ImportError("procgrade.engine.analysis.calibration needs the analysis extra: pip install 'procgrade[analysis]'") from exc

from procgrade.engine.analysis.agreement import (
    Agreement,
    AgreementMatrix,
    BinaryAgreement,
    BradleyTerry,
    KrippendorffAlpha,
    McNemar,
    VarianceComponents,
    _Plain,
    _sorted,
    agreement,
    agreement_matrix,
    binary_agreement,
    bradley_terry,
    krippendorff_alpha,
    mcnemar,
    paired_labels,
    to_plain,
    variance_decomposition,
)
from procgrade.engine.analysis.annotators import annotations_of, resolve
from procgrade.engine.analysis.annotators import design as parse_design
from procgrade.engine.analysis.dataset import GROUPING_FIELDS, RunView, group_key
from procgrade.engine.analysis.graded_runs import coverage_text, select_graded
from procgrade.engine.analysis.rankings import (
    RankAgreement,
    rank_agreement,
    rank_agreement_over_tasks,
)
from procgrade.engine.canonical import canonical_json
from procgrade.engine.errors import ProcgradeError
from procgrade.engine.events import GRADE_LAYERS, Grade

__all__ = [
    "CLASS_GRADERS",
    "RULES",
    "Calibration",
    "CalibrationError",
    "Comparison",
    "LayerCalibration",
    "McNemarRow",
    "MeanRanking",
    "Ratings",
    "Variance",
    "calibrate",
    "calibrate_store",
    "render",
]

#: Grader names that select a class of actors.
CLASS_GRADERS = ("human", "judge")
#: The grader whose labels come from the process score.
RULES = "rules"
#: Layers on which rules give labels, and how they are compared.
_RULES_MODE = {"check": "agreement", "pattern": "rank", "overall": "rank"}

#: The fewest games a group needs for a Bradley-Terry rating.
MIN_GAMES = 2

#: (run, layer, item or "", round or -1): sortable, no None inside.
Key = tuple[str, str, str, int]


class CalibrationError(ProcgradeError, ValueError):
    """The calibration cannot be run as asked (unknown grader, nothing graded, bad grouping field)."""


# ---------------------------------------------------------------------------------------------------------------
# results


@dataclass(frozen=True)
class Comparison(_Plain):
    """One candidate against the reference on one layer, over all runs (``group`` None) or one group.

    ``method`` is ``agreement`` (then ``binary`` or ``ordinal`` is set, and ``alpha``) or ``rank`` (rules against
    an ordinal layer: ``rank``). ``level`` is ``item`` or ``run`` (labels collapsed per run, see the module
    docstring)."""

    candidate: str
    group: str | None
    level: str
    method: str
    n: int
    binary: BinaryAgreement | None
    ordinal: Agreement | None
    alpha: KrippendorffAlpha | None
    rank: RankAgreement | None
    notes: tuple[str, ...]
    #: Items left out of this comparison, per reason (``reference abstained``, ``candidate single-annotated``,
    #: ``not graded by candidate``, ...), sorted by reason.
    excluded: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class McNemarRow(_Plain):
    """McNemar's test of two candidates on the items both and the reference graded (outcome: equals the
    reference's label)."""

    first: str
    second: str
    group: str | None
    level: str
    n: int
    test: McNemar | None
    notes: tuple[str, ...]


@dataclass(frozen=True)
class MeanRanking(_Plain):
    """Rank correlation of the per-group mean labels, reference (A) against candidate (B), over the items both
    graded; ``resampled`` says what the bootstrap resamples (``tasks`` or ``groups``)."""

    candidate: str
    by: str
    resampled: str | None
    result: RankAgreement | None
    notes: tuple[str, ...]


@dataclass(frozen=True)
class Ratings(_Plain):
    """Bradley-Terry ratings of the groups of ``by`` from one grader's grades (same-task pairs of runs)."""

    grader: str
    by: str
    result: BradleyTerry | None
    notes: tuple[str, ...]


@dataclass(frozen=True)
class Variance(_Plain):
    """Generation vs re-grading variance of one grader's run scores."""

    grader: str
    result: VarianceComponents | None
    notes: tuple[str, ...]


@dataclass(frozen=True)
class GroupMatrix(_Plain):
    """The pairwise agreement matrix over every grader of the layer, within one group of ``by``."""

    group: str
    matrix: AgreementMatrix


@dataclass(frozen=True)
class LayerCalibration(_Plain):
    layer: str
    scale: str  # binary or ordinal
    labels: tuple[Any, ...]
    weights: str | None
    reference_items: int
    comparisons: tuple[Comparison, ...]
    mcnemar: tuple[McNemarRow, ...]
    matrix: AgreementMatrix | None
    rankings: tuple[MeanRanking, ...]
    ratings: tuple[Ratings, ...]
    variance: tuple[Variance, ...]
    notes: tuple[str, ...]
    #: The items compared (``--item``, or every item the reference graded on the layer).
    items: tuple[str, ...] = ()
    #: Items the reference's design left out, per reason (abstained, single-annotated, ...).
    reference_excluded: tuple[tuple[str, int], ...] = ()
    #: The pairwise matrix within each group of ``by``.
    group_matrices: tuple[GroupMatrix, ...] = ()

    def comparison(self, candidate: str, group: str | None = None) -> Comparison:
        for c in self.comparisons:
            if (c.candidate, c.group) == (candidate, group):
                return c
        raise KeyError((candidate, group))


@dataclass(frozen=True)
class NotGraded(_Plain):
    """A run the reference graded that gives no rules label, and why (``coverage``: applicable/all rules)."""

    run: str
    reason: str
    coverage: str


@dataclass(frozen=True)
class Calibration(_Plain):
    reference: str
    candidates: tuple[str, ...]
    by: str | None
    rank_by: str
    seed: int
    bootstrap: int
    confidence: float
    runs: int
    ruleset_hash: str | None
    layers: tuple[LayerCalibration, ...]
    notes: tuple[str, ...]
    not_graded: tuple[NotGraded, ...] = ()
    min_coverage: str | None = None

    def layer(self, name: str) -> LayerCalibration:
        for layer in self.layers:
            if layer.layer == name:
                return layer
        raise KeyError(name)

    def to_dict(self, digits: int | None = None) -> dict[str, Any]:
        return _finite(to_plain(self, digits))

    def to_json(self) -> bytes:
        """RFC 8785 canonical JSON of :meth:`to_dict` (the same bytes for the same inputs)."""
        return canonical_json(self.to_dict())


def _finite(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


# ---------------------------------------------------------------------------------------------------------------
# graders and labels


@dataclass(frozen=True)
class _Label:
    seq: int
    actor: str
    sheet: str
    value: Any


def _selector(name: str) -> Callable[[Grade], bool]:
    """The grades ``name`` reads: a grader, a set (human, judge) or a rule's set (primary: human)."""
    try:
        return parse_design(name).selects
    except ValueError as exc:
        raise CalibrationError(str(exc)) from None


def _key(grade: Grade) -> Key:
    return (grade.run_id, grade.layer, grade.item or "", -1 if grade.stage is None else grade.stage)


def _show_key(key: Key) -> str:
    run, _layer, item, rnd = key
    return run + (f" {item}" if item else "") + (f" round {rnd}" if rnd >= 0 else "")


def _label(grade: Grade, scale: str) -> Any:
    """The grade's label on ``scale``; None for an abstention."""
    return grade.value if scale == "ordinal" else grade.label if scale == "nominal" else grade.passed


def _graded(runs: Sequence[RunView], layer: str, scale: str, select: Callable[[Grade], bool]) -> dict[Key, list[_Label]]:
    """Every label of the selected grades on ``layer``, per item, in seq order."""
    found: dict[Key, list[_Label]] = {}
    for run in runs:
        for grade in run.grades:  # seq order
            if grade.layer != layer or not select(grade):
                continue
            value = _label(grade, scale)
            if value is None:
                continue
            found.setdefault(_key(grade), []).append(_Label(grade.seq, grade.actor, grade.sheet or "", value))
    return found


def _first(graded: dict[Key, list[_Label]]) -> dict[Key, Any]:
    return {k: labels[0].value for k, labels in graded.items()}


def _run_level(first: dict[Key, Any], scale: str) -> dict[Key, Any]:
    """One label per (run, layer, item): a run-level grade as it is, else the per-round labels collapsed
    (binary: passed every round; ordinal: their mean)."""
    out = {k: v for k, v in first.items() if k[3] == -1}
    rounds: dict[Key, list[Any]] = {}
    for (run, layer, item, rnd), value in first.items():
        if rnd != -1:
            rounds.setdefault((run, layer, item, -1), []).append(value)
    for key, values in rounds.items():
        if key not in out:
            out[key] = all(values) if scale == "binary" else float(np.mean(values))
    return out


def _rules_labels(runs_by_id: dict[str, RunView], layer: str, keys: Iterable[Key]) -> dict[Key, Any]:
    """The rules' label on each run-level ``key`` the reference graded (None: not graded)."""
    out: dict[Key, Any] = {}
    for key in keys:
        process = runs_by_id[key[0]].process
        if process is None:
            continue
        if layer == "check":
            sub = process.checks.get(key[2])
            if sub is not None:
                out[key] = sub == 1
        elif layer == "pattern":
            sub = process.patterns.get(key[2])
            if sub is not None:
                out[key] = float(sub)
        elif layer == "overall" and process.total is not None:
            out[key] = float(process.total)
    return out


def _number(value: Any) -> float:
    return float(value)  # bool -> 0.0/1.0


# ---------------------------------------------------------------------------------------------------------------
# calibrate


@dataclass(frozen=True)
class _Grader:
    """A grader's labels on one layer: ``view`` is what comparisons read (first labels, at ``level``)."""

    name: str
    level: str
    mode: str  # agreement | rank
    view: dict[Key, Any]
    graded: dict[Key, list[_Label]] | None  # None for rules


def calibrate(runs: Sequence[RunView], reference: str, candidates: Sequence[str], *, layer: str | None = None,
              by: str | None = None, seed: int = 0, bootstrap: int = 1000,
              confidence: float = 0.95, min_coverage: Any = None, identity: Any = None,
              items: Sequence[str] | None = None, pool_items: bool = False) -> Calibration:
    """Calibrate ``candidates`` against ``reference`` over ``runs`` (see the module docstring).

    ``layer`` limits the calibration to one layer (default: every layer the reference graded); ``by`` adds one
    row per group of that provenance field (``harness``, ``model``, ``labels.<key>``, ...) and is what rank
    correlations and ratings group by (default ``model``). ``bootstrap`` resamples for rank-correlation and
    Bradley-Terry intervals, seeded with ``seed``. ``min_coverage`` (a Fraction) leaves rules labels out for
    runs with a smaller share of applicable rules; ``identity`` groups model names
    (:class:`~procgrade.engine.analysis.model_identity.ModelIdentity`). ``items`` limits each layer to those items;
    items of different names on a study's own layer, of different scales, or named together, are pooled
    only with ``pool_items`` (see :func:`_pooling`)."""
    runs = sorted(runs, key=lambda r: r.run_id)
    if by is not None and by not in GROUPING_FIELDS and "." not in by and any(by in r.labels for r in runs):
        by = f"labels.{by}"  # a run label: --by benchmark
    candidates = tuple(candidates)
    if not candidates:
        raise CalibrationError("name at least one candidate grader")
    if len(set(candidates)) != len(candidates):
        raise CalibrationError(f"a candidate is named twice: {', '.join(candidates)}")
    if reference == RULES:
        raise CalibrationError("rules cannot be the reference: they are what is calibrated")
    if bootstrap < 1:
        raise CalibrationError("bootstrap needs at least one resample")
    rank_by = by or "model"
    for run in runs[:1]:
        try:
            run.field(rank_by)
        except KeyError as exc:
            raise CalibrationError(str(exc.args[0])) from None
    grades = [g for run in runs for g in run.grades if items is None or g.item in items]
    if items is not None:
        every = [g for run in runs for g in run.grades]
        missing_items = [i for i in items if not any(g.item == i for g in every)]
        if missing_items:
            known_items = _sorted({g.item for g in every if g.item})
            raise CalibrationError(f"no grade of item {missing_items[0]!r} (items graded: "
                                   f"{', '.join(known_items) or 'none'})")
    known_actors = _sorted({g.actor for g in grades})
    known_sheets = _sorted({g.sheet for g in grades if g.sheet})
    for name in (reference, *candidates):
        if name == RULES:
            continue
        select = _selector(name)
        if not any(select(g) for g in grades):
            raise CalibrationError(
                f"no grade by {name!r}: name human, judge, rules, an actor ({', '.join(known_actors) or 'none stored'})"
                f" or a sheet ({', '.join(known_sheets) or 'none stored'})")
    digest = None
    not_graded: list[NotGraded] = []
    rules_runs = frozenset(r.run_id for r in runs)
    if RULES in candidates:
        missing = [r.run_id for r in runs if r.process is None]
        if missing:
            raise CalibrationError(f"rules: run {missing[0]} has no process score (load the runs with a rule set)")
        digest = runs[0].process.ruleset_hash if runs and runs[0].process else None
        selection = select_graded(runs, min_coverage)
        rules_runs = selection.graded_ids
        select_reference = _selector(reference)
        referenced = {g.run_id for g in grades if select_reference(g)}
        not_graded = [NotGraded(e.run_id, e.reason, e.coverage_text) for e in selection.left_out
                      if e.run_id in referenced]
    select_ref = _selector(reference)
    answered = {g.layer for g in grades if select_ref(g) and (g.value is not None or g.passed is not None
                                                              or g.label is not None or g.abstained is not None)}
    graded_layers = [name for name in GRADE_LAYERS if name in answered] + sorted(answered - set(GRADE_LAYERS))
    layers = [layer] if layer is not None else graded_layers
    if layer is not None and layer not in GRADE_LAYERS and not any(g.layer == layer for run in runs for g in run.grades):
        raise CalibrationError(f"unknown layer {layer!r}: no grade is on it"
                               + (f" (graded layers: {', '.join(graded_layers)})" if graded_layers else ""))
    if layer is not None and layer not in graded_layers:
        raise CalibrationError(f"{reference} graded nothing on layer {layer}"
                               + (f" (graded layers: {', '.join(graded_layers)})" if graded_layers else ""))
    with _one_blas_thread(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = tuple(_calibrate_layer(runs, name, reference, candidates, by, rank_by, seed, bootstrap,
                                         confidence, rules_runs, identity, items, pool_items) for name in layers)
    # a library's warning is never printed as it is: it becomes a note of the result (first line, once)
    leaked = tuple(f"{w.category.__name__} from {w.filename.rsplit('/site-packages/', 1)[-1]}: "
                   f"{str(w.message).splitlines()[0]}" for w in caught
                   if not issubclass(w.category, (DeprecationWarning, PendingDeprecationWarning)))
    notes = (("an item graded more than once by one grader counts once in agreement, the matrix, rank "
              "correlations and ratings: its first grade in seq order; the re-grades feed the variance "
              "decomposition"),
             ("an item several graders of a set annotated is read at its first annotation (the order the sheet "
              "states, else import order); an abstention there leaves the item out, counted"))
    notes += tuple(_sorted(set(leaked)))
    differing = [r for r in runs if r.disagreements]
    if differing:
        notes += (f"{len(differing)} run(s) described differently by a grade sheet and the trajectory (the "
                  f"trajectory's values are used), e.g. {differing[0].run_id}: {differing[0].disagreements[0]}",)
    if not_graded:
        notes += (f"rules give no label on {len(not_graded)} run(s) the reference graded: not graded (no process "
                  "score) or below --min-coverage; they are listed apart",)
    return Calibration(reference=reference, candidates=candidates, by=by, rank_by=rank_by, seed=seed,
                       bootstrap=bootstrap, confidence=confidence, runs=len(runs), ruleset_hash=digest,
                       layers=results, notes=notes, not_graded=tuple(not_graded),
                       min_coverage=None if min_coverage is None else coverage_text(min_coverage))


def _one_blas_thread() -> Any:
    """Single-threaded BLAS while calibrating: the thousands of tiny Bradley-Terry refits run an order of
    magnitude faster without thread hand-offs, and the results are the same."""
    try:
        from threadpoolctl import threadpool_limits  # a scikit-learn dependency
    except ImportError:  # pragma: no cover
        from contextlib import nullcontext

        return nullcontext()
    import importlib

    # load the BLAS the refits use (numpy's and scipy's) before limiting its threads (a library loaded later
    # is not limited); scikit-learn is not loaded for this: it costs seconds (it loads pandas), computes on
    # the same BLAS, and a calibration whose layers have nothing to compare never calls it
    for module in ("scipy.optimize", "scipy.stats"):
        importlib.import_module(module)

    return threadpool_limits(limits=1)


def calibrate_store(store: Any, reference: str, candidates: Sequence[str], *, layer: str | None = None,
                    by: str | None = None, rules: Path | str | None = None, seed: int = 0, bootstrap: int = 1000,
                    confidence: float = 0.95, min_coverage: Any = None, identity: Any = None,
                    items: Sequence[str] | None = None, pool_items: bool = False) -> Calibration:
    """:func:`calibrate` over every stored run; process scores (rule set ``rules``, default the built-in one)
    are computed only when ``rules`` is a candidate."""
    from procgrade.engine.analysis.dataset import load_runs

    ruleset = None
    if RULES in candidates:
        from procgrade.rules.loading import load_ruleset

        ruleset = load_ruleset(rules)
    runs = load_runs(store, ruleset)
    return calibrate(runs, reference, candidates, layer=layer, by=by, seed=seed, bootstrap=bootstrap,
                     confidence=confidence, min_coverage=min_coverage, identity=identity, items=items,
                     pool_items=pool_items)


def _layer_scale(grades: list[Grade]) -> tuple[str, tuple[Any, ...], list[str]]:
    declared = {g.scale for g in grades if g.scale is not None}
    if len(declared) == 1:
        kind = next(iter(declared))
        if kind == "nominal":
            categories = _sorted({c for g in grades for c in (g.categories or ())} | {g.label for g in grades if g.label})
            return "nominal", tuple(categories), []
        if kind == "binary":
            return "binary", (False, True), []
    grades = [g for g in grades if g.abstained is None]
    if not any(g.value is not None for g in grades):
        return "binary", (False, True), []
    values = [g.value for g in grades if g.value is not None]
    lows = [g.scale_min for g in grades if g.scale_min is not None] + values
    highs = [g.scale_max for g in grades if g.scale_max is not None] + values
    notes = []
    if not any(g.scale_min is not None and g.scale_max is not None for g in grades):
        notes.append(f"no grade states its scale: the scale is the observed range {min(lows)}..{max(highs)}")
    ignored = sum(1 for g in grades if g.value is None)
    if ignored:
        notes.append(f"{ignored} grade(s) without a value left out of this ordinal layer")
    return "ordinal", tuple(range(min(lows), max(highs) + 1)), notes


def _calibrate_layer(runs: list[RunView], layer: str, reference: str, candidates: tuple[str, ...], by: str | None,
                     rank_by: str, seed: int, bootstrap: int, confidence: float, rules_runs: frozenset[str],
                     identity: Any, items: Sequence[str] | None = None, pool_items: bool = False) -> LayerCalibration:
    layer_grades = [g for run in runs for g in run.grades if g.layer == layer and (items is None or g.item in items)]
    if items is not None:
        runs = [_only_items(r, items) for r in runs]
    pooled, pool_notes = _pooling(layer, layer_grades, _selector(reference), items, pool_items)
    scale, labels, notes = _layer_scale(layer_grades)
    notes = pool_notes + notes
    weights = "quadratic" if scale == "ordinal" else None
    runs_by_id = {r.run_id: r for r in runs}
    group_of = {r.run_id: group_key(r, by, identity) for r in runs} if by else {}

    ref_graded = _graded(runs, layer, scale, _selector(reference))
    ref_design = _resolved(runs, layer, scale, reference)
    ref = _Grader(reference, "item", "agreement", ref_design.labels, ref_graded)
    ref_run = _run_level(ref.view, scale)
    excluded_of: dict[str, dict[Key, str]] = {reference: ref_design.excluded}
    graders: list[_Grader] = []
    for name in candidates:
        if name == RULES:
            mode = _RULES_MODE.get(layer)
            if mode is None:
                notes.append(f"rules give no labels on layer {layer} (only check, pattern and overall)")
                continue
            keys = sorted(k for k in ref_run if k[0] in rules_runs)
            graders.append(_Grader(RULES, "run", mode, _rules_labels(runs_by_id, layer, keys), None))
        else:
            graded = _graded(runs, layer, scale, _selector(name))
            resolved = _resolved(runs, layer, scale, name)
            if not graded and not resolved.excluded:
                notes.append(f"{name} graded nothing on layer {layer}")
                continue
            excluded_of[name] = resolved.excluded
            graders.append(_Grader(name, "item", "agreement", resolved.labels, graded))
    for g in (ref, *graders):
        if g.graded is not None and parse_design(g.name).kind != "rule":
            regraded = sum(1 for labels in g.graded.values() if len(labels) > 1)
            if regraded:
                notes.append(f"{g.name} graded {regraded} item(s) more than once: agreement "
                             + ("reads the rule's label" if parse_design(g.name).kind == "rule" else
                                "uses the first grade in seq order"))

    def ref_view(level: str) -> dict[Key, Any]:
        return ref_run if level == "run" else ref.view

    def view(g: _Grader, level: str) -> dict[Key, Any]:
        return _run_level(g.view, scale) if level == "run" and g.level == "item" else g.view

    groups: list[str | None] = [None]
    if by:
        groups += _sorted({group_of[k[0]] for k in ref.view if group_of[k[0]] is not None})
        ungrouped = len({k[0] for k in ref.view if group_of[k[0]] is None})
        if ungrouped:
            notes.append(f"{ungrouped} graded run(s) have no {by}: in no group (counted under all only)")

    def in_group(mapping: dict[Key, Any], group: str | None) -> dict[Key, Any]:
        return mapping if group is None else {k: v for k, v in mapping.items() if group_of[k[0]] == group}

    comparisons = []
    for g in graders:
        for group in groups:
            compared = _compare(g, in_group(ref_view(g.level), group), in_group(g.view, group), group,
                                scale, labels, weights, confidence, seed, bootstrap)
            if g.level == "item":
                compared = dataclasses.replace(compared, excluded=_excluded(
                    in_group(ref.view, group), in_group(ref_design.excluded, group), in_group(g.view, group),
                    in_group(excluded_of[g.name], group)))
            comparisons.append(compared)
            if group is None and compared.n == 0 and g.name != RULES:
                why = "; ".join(f"{reason} {n}" for reason, n in compared.excluded)
                raise CalibrationError(
                    f"{g.name} and {reference} share no graded item on layer {layer}"
                    + (f" ({', '.join(items)})" if items else "") + f": {reference} labelled {len(ref.view)}, "
                    f"{g.name} {len(g.view)}" + (f"; left out: {why}" if why else ""))

    mcnemar_rows = []
    for a, b in combinations(graders, 2):
        if "rank" in (a.mode, b.mode):
            notes.append(f"no McNemar test of {a.name} and {b.name}: rules on layer {layer} are compared by rank")
            continue
        level = "run" if "run" in (a.level, b.level) else "item"
        for group in groups:
            mcnemar_rows.append(_mcnemar(a.name, b.name, in_group(ref_view(level), group),
                                         in_group(view(a, level), group), in_group(view(b, level), group),
                                         group, level))

    actors = _sorted({g.actor for g in layer_grades if _label(g, scale) is not None})
    matrix = None
    group_matrices: list[GroupMatrix] = []
    if len(actors) >= 2:
        per_actor = {a: _first(_graded(runs, layer, scale, lambda g, a=a: g.actor == a)) for a in actors}
        matrix = agreement_matrix(per_actor, labels=labels, weights=weights, confidence=confidence)
        for group in groups[1:]:  # the same matrix within each group of --by
            inside = {a: in_group(v, group) for a, v in per_actor.items()}
            inside = {a: v for a, v in inside.items() if v}
            if len(inside) >= 2:
                group_matrices.append(GroupMatrix(group, agreement_matrix(inside, labels=labels, weights=weights,
                                                                          confidence=confidence)))
    else:
        notes.append(f"one actor graded layer {layer}: no agreement matrix")

    rank_group = {r.run_id: group_key(r, rank_by, identity) for r in runs}
    task_of = {r.run_id: r.task_id or "(none)" for r in runs}
    rankings = tuple(_mean_ranking(g.name, rank_by, ref_view(g.level), g.view, rank_group, task_of, seed, bootstrap,
                                   confidence) for g in graders)
    ratings = tuple(_ratings(g.name, rank_by, view_, runs, rank_group, seed, bootstrap, confidence)
                    for g, view_ in [(ref, ref.view)] + [(g, g.view) for g in graders])
    variance = tuple(_variance(g, task_of) for g in (ref, *graders))
    return LayerCalibration(
        layer=layer, scale=scale, labels=labels, weights=weights, reference_items=len(ref.view),
        comparisons=tuple(comparisons), mcnemar=tuple(mcnemar_rows), matrix=matrix, rankings=rankings,
        ratings=ratings, variance=variance, notes=tuple(notes), items=pooled, group_matrices=tuple(group_matrices),
        reference_excluded=_counted(ref_design.excluded.values()),
    )


def _only_items(run: RunView, items: Sequence[str]) -> RunView:
    return dataclasses.replace(run, grades=tuple(g for g in run.grades if g.item in items))


def _resolved(runs: Sequence[RunView], layer: str, scale: str, name: str) -> Any:
    """``name``'s label per item on ``layer`` under its annotator design, and the items it leaves out."""
    chosen = parse_design(name)
    grades = (g for run in runs for g in run.grades if g.layer == layer)
    return resolve(chosen, annotations_of(grades, chosen, _key, lambda g: _label(g, scale)))


def _counted(reasons: Iterable[str]) -> tuple[tuple[str, int], ...]:
    counts: dict[str, int] = {}
    for reason in reasons:
        counts[reason] = counts.get(reason, 0) + 1
    return tuple(sorted(counts.items()))


def _excluded(ref: dict[Key, Any], ref_out: dict[Key, str], cand: dict[Key, Any],
              cand_out: dict[Key, str]) -> tuple[tuple[str, int], ...]:
    """Why items graded by either side are not in the comparison."""
    reasons = [f"reference {why}" for k, why in ref_out.items() if k in cand or k in cand_out]
    reasons += [f"candidate {why}" for k, why in cand_out.items() if k in ref]
    reasons += ["not graded by the candidate" for k in ref if k not in cand and k not in cand_out]
    return _counted(reasons)


def _scale_text(grade: Grade) -> str:
    kind = grade.kind_of_scale
    if kind == "ordinal" and grade.scale_min is not None and grade.scale_max is not None:
        return f"ordinal {grade.scale_min}..{grade.scale_max}"
    if kind == "nominal" and grade.categories:
        return "nominal " + "|".join(grade.categories)
    return kind


def _pooling(layer: str, grades: list[Grade], select_ref: Callable[[Grade], bool], items: Sequence[str] | None,
             pool_items: bool) -> tuple[tuple[str, ...], list[str]]:
    """The items a layer's comparison pools, or a :class:`CalibrationError` when it would pool what it should not
    without ``pool_items``: items of different scales, items of a study's own layer (declared scales), or items
    named together with ``--item``. Items of one scale on an engine layer (DevAI requirements, arena checks) pool
    as they always have, with a note."""
    answered = [g for g in grades if select_ref(g)]
    scales: dict[str, set[str]] = {}
    for g in answered:
        scales.setdefault(g.item or "-", set()).add(_scale_text(g))
    names = _sorted(scales)
    kinds = _sorted({text.split(" ")[0] for found in scales.values() for text in found})
    shown = ", ".join(f"{name} ({'/'.join(_sorted(scales[name]))})" for name in names[:8]) + (
        f", ... ({len(names)} items)" if len(names) > 8 else "")
    if len(kinds) > 1:
        raise CalibrationError(f"layer {layer} mixes scales: {shown}: name one item with --item (a binary, ordinal "
                               "or nominal item is compared with items of its own kind only)")
    distinct_scales = {text for found in scales.values() for text in found}
    study = any(g.scale is not None for g in answered)
    if len(names) > 1 and not pool_items and (len(distinct_scales) > 1 or study or items is not None):
        what = "items of different scales" if len(distinct_scales) > 1 else f"{len(names)} items"
        raise CalibrationError(f"layer {layer} would pool {what}: {shown}: name one with --item NAME, or give "
                               "--pool-items to compare them together")
    notes = []
    if len(names) > 1:
        notes.append(f"{len(names)} items pooled on layer {layer}: {', '.join(names[:8])}"
                     + (", ..." if len(names) > 8 else "")
                     + (" (--pool-items)" if pool_items else ""))
    return tuple(names), notes


def _compare(g: _Grader, ref: dict[Key, Any], cand: dict[Key, Any], group: str | None, scale: str,
             labels: tuple[Any, ...], weights: str | None, confidence: float, seed: int,
             bootstrap: int) -> Comparison:
    items, r, c = paired_labels(ref, cand)
    empty = Comparison(g.name, group, g.level, g.mode, len(items), None, None, None, None, ())
    if not items:
        return _with_note(empty, "no item graded by both")
    if g.mode == "rank":
        if len(items) < 2:
            return _with_note(empty, "one item graded by both: no rank correlation")
        result = rank_agreement({_show_key(k): float(v) for k, v in zip(items, r)},
                                {_show_key(k): float(v) for k, v in zip(items, c)},
                                seed=seed, n_resamples=bootstrap, confidence=confidence)
        return Comparison(g.name, group, g.level, g.mode, len(items), None, None, None, result, ())
    pair = {"reference": dict(zip(items, r)), "candidate": dict(zip(items, c))}
    if scale == "binary":
        binary = binary_agreement(r, c, confidence=confidence)
        alpha = krippendorff_alpha(pair, level="nominal", labels=list(labels))
        return Comparison(g.name, group, g.level, g.mode, len(items), binary, None, alpha, None, ())
    ordinal = agreement(r, c, labels=labels, weights=weights, confidence=confidence)  # type: ignore[arg-type]
    alpha = krippendorff_alpha(pair, level="nominal" if scale == "nominal" else "ordinal", labels=list(labels))
    return Comparison(g.name, group, g.level, g.mode, len(items), None, ordinal, alpha, None, ())


def _with_note(c: Comparison, note: str) -> Comparison:
    return Comparison(c.candidate, c.group, c.level, c.method, c.n, c.binary, c.ordinal, c.alpha, c.rank,
                      c.notes + (note,))


def _mcnemar(first: str, second: str, ref: dict[Key, Any], a: dict[Key, Any], b: dict[Key, Any],
             group: str | None, level: str) -> McNemarRow:
    items = [k for k in _sorted(ref) if k in a and k in b]
    if not items:
        return McNemarRow(first, second, group, level, 0, None, ("no item graded by the reference and both",))
    test = mcnemar([a[k] for k in items], [b[k] for k in items], reference=[ref[k] for k in items])
    return McNemarRow(first, second, group, level, len(items), test, ())


def _mean_ranking(name: str, by: str, ref: dict[Key, Any], cand: dict[Key, Any], group_of: dict[str, str],
                  task_of: dict[str, str], seed: int, bootstrap: int, confidence: float) -> MeanRanking:
    items, r, c = paired_labels(ref, cand)
    cells: dict[tuple[str, str], tuple[list[float], list[float]]] = {}
    for key, x, y in zip(items, r, c):
        if group_of[key[0]] is None:
            continue  # a run without the field is in no group
        cell = cells.setdefault((group_of[key[0]], task_of[key[0]]), ([], []))
        cell[0].append(_number(x))
        cell[1].append(_number(y))
    groups = _sorted({g for g, _ in cells})
    if len(groups) < 2:
        return MeanRanking(name, by, None, None, (f"{len(groups)} group(s) of {by} graded by both: nothing to rank",))
    tasks = _sorted({t for _, t in cells})
    if len(tasks) > 1 and all((g, t) in cells for g in groups for t in tasks):
        a = {k: float(np.mean(v[0])) for k, v in cells.items()}
        b = {k: float(np.mean(v[1])) for k, v in cells.items()}
        result = rank_agreement_over_tasks(a, b, seed=seed, n_resamples=bootstrap, confidence=confidence)
        return MeanRanking(name, by, "tasks", result, ())
    a = {g: float(np.mean([x for (h, _), v in cells.items() if h == g for x in v[0]])) for g in groups}
    b = {g: float(np.mean([x for (h, _), v in cells.items() if h == g for x in v[1]])) for g in groups}
    result = rank_agreement(a, b, seed=seed, n_resamples=bootstrap, confidence=confidence)
    why = "one task only" if len(tasks) == 1 else "not every group was graded on every task"
    return MeanRanking(name, by, "groups", result, (f"{why}: the interval resamples the groups",))


def _ratings(name: str, by: str, view: dict[Key, Any], runs: list[RunView], group_of: dict[str, str], seed: int,
             bootstrap: int, confidence: float) -> Ratings:
    per_run: dict[str, list[float]] = {}
    for key in _sorted(view):
        per_run.setdefault(key[0], []).append(_number(view[key]))
    by_task: dict[str, list[str]] = {}
    untasked = 0
    for run in runs:
        if run.run_id in per_run:
            if run.task_id is None:
                untasked += 1
            else:
                by_task.setdefault(run.task_id, []).append(run.run_id)
    comparisons: list[tuple[str, str, float]] = []
    for task in _sorted(by_task):
        for x, y in combinations(sorted(by_task[task]), 2):
            if group_of[x] == group_of[y] or group_of[x] is None or group_of[y] is None:
                continue
            gx, gy = float(np.mean(per_run[x])), float(np.mean(per_run[y]))
            comparisons.append((group_of[x], group_of[y], 1.0 if gx > gy else 0.0 if gx < gy else 0.5))
    notes = [f"{untasked} graded run(s) without a task cannot be paired"] if untasked else []
    if not comparisons:
        notes.append(f"no two runs of one task by different groups of {by}: no ratings")
        return Ratings(name, by, None, tuple(notes))
    while True:  # set aside the games of groups with too few of them, until every group left has enough
        games: dict[str, int] = {}
        for a, b, _ in comparisons:
            games[a] = games.get(a, 0) + 1
            games[b] = games.get(b, 0) + 1
        few = _sorted(g for g, n in games.items() if n < MIN_GAMES)
        if not few:
            break
        notes.append("no Bradley-Terry rating from fewer than "
                     f"{MIN_GAMES} games: " + ", ".join(f"{g} ({games[g]} game{'s' if games[g] != 1 else ''})"
                                                         for g in few) + "; their games are set aside")
        comparisons = [c for c in comparisons if c[0] not in few and c[1] not in few]
        if not comparisons:
            notes.append("no group has enough games: no ratings")
            return Ratings(name, by, None, tuple(notes))
    result = bradley_terry(comparisons, seed=seed, n_bootstrap=bootstrap, confidence=confidence)
    return Ratings(name, by, result, tuple(notes))


def _variance(g: _Grader, task_of: dict[str, str]) -> Variance:
    if g.graded is not None and g.name != RULES and parse_design(g.name).kind == "rule":
        return Variance(g.name, None, ("an annotation rule reads one label per item from several annotators: "
                                       "re-grading variance is per grader (name one)",))
    if g.graded is None:
        return Variance(g.name, None, ("rules are deterministic: a run is never re-graded",))
    passes: dict[tuple[str, str, str, int], list[float]] = {}
    for key in _sorted(g.graded):
        seen: dict[tuple[str, str], int] = {}
        for label in g.graded[key]:
            who = (label.actor, label.sheet)
            k = seen.get(who, 0)
            seen[who] = k + 1
            passes.setdefault((key[0], label.actor, label.sheet, k), []).append(_number(label.value))
    if not passes:
        return Variance(g.name, None, ("no grades",))
    order = _sorted(passes)
    result = variance_decomposition([float(np.mean(passes[p])) for p in order], [p[0] for p in order],
                                    [task_of[p[0]] for p in order])
    return Variance(g.name, result, ())


# ---------------------------------------------------------------------------------------------------------------
# rendering (rich tables for the CLI)


def _f(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _ci(low: float | None, high: float | None, digits: int = 3) -> str:
    return "-" if low is None or high is None else f"[{low:.{digits}f}, {high:.{digits}f}]"


def _group(group: str | None) -> str:
    return "all" if group is None else group


def render(result: Calibration, console: Any) -> None:
    """Print ``result`` as rich tables on ``console``."""
    from rich.text import Text

    from procgrade.engine.tables import Table

    pct = f"{result.confidence:.0%}"
    console.print(Text(f"calibration of {', '.join(result.candidates)} against {result.reference}: {result.runs} runs"
                       + (f", by {result.by}" if result.by else "") + f"; seed {result.seed}, "
                       f"{result.bootstrap} bootstrap resamples"))
    for layer in result.layers:
        scale = ("pass/fail" if layer.scale == "binary"
                 else f"nominal {'|'.join(map(str, layer.labels))}, unweighted kappa" if layer.scale == "nominal"
                 else f"ordinal {layer.labels[0]}..{layer.labels[-1]}, quadratic-weighted kappa")
        named = [i for i in layer.items if i != "-"]
        what = (f"item {named[0]}" if len(named) == 1 else f"{len(named)} items" if named else "")
        left = "; ".join(f"{reason} {n}" for reason, n in layer.reference_excluded)
        console.print(Text(f"\nlayer {layer.layer}{' ' + what if what else ''} ({scale}): {layer.reference_items} "
                           f"items labelled by {result.reference}" + (f" (left out: {left})" if left else ""),
                           style="bold"))
        agreeing = [c for c in layer.comparisons if c.method == "agreement"]
        if agreeing:
            table = Table(title=f"{layer.layer}: agreement with {result.reference}")
            for header in ("candidate", "group", "level", "n", "agreement", f"{pct} CI", "kappa", f"kappa {pct} CI",
                           "alpha"):
                table.add_column(header)
            for c in agreeing:
                stats = c.binary or c.ordinal
                row = [Text(c.candidate), Text(_group(c.group)), c.level, str(c.n)]
                if stats is None:
                    row += ["-"] * (len(table.columns) - 4)
                else:
                    row += [_f(stats.agreement.estimate), _ci(stats.agreement.low, stats.agreement.high),
                            _f(stats.kappa.value), _ci(stats.kappa.low, stats.kappa.high),
                            "-" if c.alpha is None else _f(c.alpha.value)]
                table.add_row(*row)
            console.print(table)
            if layer.scale == "binary":
                table = Table(title=f"{layer.layer}: errors against {result.reference} (positive = passed)")
                for header in ("candidate", "group", "n", "precision", f"{pct} CI", "recall", f"{pct} CI", "F1",
                               "wrong-pass", f"{pct} CI", "wrong-fail", f"{pct} CI"):
                    table.add_column(header)
                for c in agreeing:
                    b = c.binary
                    row = [Text(c.candidate), Text(_group(c.group)), str(c.n)]
                    if b is None:
                        row += ["-"] * 9
                    else:
                        pi, ri = b.precision_interval, b.recall_interval
                        row += [_f(b.precision), "-" if pi is None else _ci(pi.low, pi.high), _f(b.recall),
                                "-" if ri is None else _ci(ri.low, ri.high), _f(b.f1), _f(b.wrong_pass.estimate),
                                _ci(b.wrong_pass.low, b.wrong_pass.high), _f(b.wrong_fail.estimate),
                                _ci(b.wrong_fail.low, b.wrong_fail.high)]
                    table.add_row(*row)
                console.print(table)
        ranked = [c for c in layer.comparisons if c.method == "rank"]
        if ranked:
            table = Table("candidate", "group", "level", "n", "Kendall tau-b", f"{pct} CI", "Spearman rho",
                          f"{pct} CI", title=f"{layer.layer}: rank correlation with {result.reference}")
            for c in ranked:
                r = c.rank
                table.add_row(Text(c.candidate), Text(_group(c.group)), c.level, str(c.n),
                              *(["-"] * 4 if r is None else
                                [_f(r.kendall_tau_b.statistic), _ci(r.kendall_tau_b.low, r.kendall_tau_b.high),
                                 _f(r.spearman.statistic), _ci(r.spearman.low, r.spearman.high)]))
            console.print(table)
        for c in layer.comparisons:
            if c.excluded:
                console.print(Text(f"  {c.candidate} ({_group(c.group)}): n {c.n}; left out: "
                                   + "; ".join(f"{reason} {n}" for reason, n in c.excluded)))
            for note in c.notes:
                console.print(Text(f"  {c.candidate} ({_group(c.group)}): {note}"))
        if layer.mcnemar:
            table = Table("first", "second", "group", "level", "n", "only first right", "only second right",
                          "p-value (exact)", title=f"{layer.layer}: McNemar, right = equals {result.reference}")
            for m in layer.mcnemar:
                t = m.test
                table.add_row(Text(m.first), Text(m.second), Text(_group(m.group)), m.level, str(m.n),
                              *(["-"] * 3 if t is None else [str(t.first_only), str(t.second_only), _f(t.pvalue, 4)]))
            console.print(table)
        shown_matrices = [(None, layer.matrix)] if layer.matrix is not None else []
        shown_matrices += [(m.group, m.matrix) for m in layer.group_matrices]
        for group, mx in shown_matrices:
            table = Table("", *mx.graders,
                          title=f"{layer.layer}: pairwise agreement / kappa (n) over every grader"
                                + (f", {result.by} = {group}" if group is not None else ""))
            for i, a in enumerate(mx.graders):
                cells = []
                for j in range(len(mx.graders)):
                    n = mx.counts[i][j]
                    cells.append("-" if not n else f"{_f(mx.agreement[i][j])} / {_f(mx.kappa[i][j])} ({n})")
                table.add_row(Text(a), *cells)
            console.print(table)
        if layer.rankings:
            table = Table("candidate", "by", "groups", "resampled", "Kendall tau-b", f"{pct} CI", "Spearman rho",
                          "flips", title=f"{layer.layer}: rank correlation of per-group means, {result.reference} "
                                         "vs candidate")
            for m in layer.rankings:
                r = m.result
                if r is None:
                    table.add_row(Text(m.candidate), Text(m.by), "-", "-", "-", "-", "-", "-")
                else:
                    table.add_row(Text(m.candidate), Text(m.by), str(r.n), m.resampled or "-",
                                  _f(r.kendall_tau_b.statistic), _ci(r.kendall_tau_b.low, r.kendall_tau_b.high),
                                  _f(r.spearman.statistic), str(len(r.flips)))
            console.print(table)
            for m in layer.rankings:
                for note in m.notes + (m.result.notes if m.result else ()):
                    console.print(Text(f"  {m.candidate}: {note}"))
        if layer.ratings:
            table = Table("grader", "group", "rating", f"{pct} CI", "rank (UB)", "games", "score",
                          title=f"{layer.layer}: Bradley-Terry ratings from same-task pairs of runs")
            for rt in layer.ratings:
                if rt.result is None:
                    table.add_row(Text(rt.grader), "-", "-", "-", "-", "-", "-")
                    continue
                for x in rt.result.ratings:
                    table.add_row(Text(rt.grader), Text(x.player), f"{x.rating:.0f}", _ci(x.low, x.high, 0),
                                  str(x.rank), str(x.games), f"{x.score:g}")
            console.print(table)
            for rt in layer.ratings:
                for note in rt.notes + (rt.result.notes if rt.result else ()):
                    console.print(Text(f"  {rt.grader}: {note}"))
        if layer.variance:
            table = Table("grader", "scores", "runs", "re-graded runs", "task var", "generation var",
                          "re-grading var", "generation share", "re-grading share",
                          title=f"{layer.layer}: variance of run scores, generation vs re-grading")
            for v in layer.variance:
                x = v.result
                if x is None:
                    table.add_row(Text(v.grader), *["-"] * 8)
                else:
                    table.add_row(Text(v.grader), str(x.n_scores), str(x.n_generations), str(x.n_regraded),
                                  _f(x.group, 4), _f(x.generation, 4), _f(x.regrading, 4), _f(x.generation_share),
                                  _f(x.regrading_share))
            console.print(table)
            for v in layer.variance:
                for note in v.notes + (v.result.notes if v.result else ()):
                    console.print(Text(f"  {v.grader}: {note}"))
        for note in layer.notes:
            console.print(Text(f"note: {note}"))
    for note in result.notes:
        console.print(Text(f"note: {note}"))
    if result.min_coverage is not None:
        console.print(Text(f"--min-coverage {result.min_coverage}: rules label only runs with at least that share "
                           "of applicable rules"))
    for entry in result.not_graded:
        console.print(Text(f"not graded, no rules label: {entry.run}: {entry.reason} (coverage {entry.coverage})"))
