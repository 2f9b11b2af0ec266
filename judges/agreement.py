"""How far judge models agree with each other (and with people) on one rubric.

Vibe Code Bench found pairwise agreement between evaluators ranging from 31.8% to 93.6% depending on
which model judged (seed 001): the judge has to be measured, and swappable. For each dimension of the
rubric, every judge actor that graded it under this rubric (its grades' sheet and rubric hash) is one
grader, and, with ``with_humans``, every human actor that graded the same layer and item. An item is
(run, round); a grader's label on it is its first grade in seq order that is not ``no_grade`` (a
judge's aggregate when it took several samples). The statistics are those of
:func:`procgrade.engine.analysis.agreement.agreement_matrix`: pairwise agreement with Clopper-Pearson intervals
and Cohen's kappa, quadratic-weighted over the dimension's scale for ordinal dimensions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from procgrade.engine.analysis.agreement import AgreementMatrix, agreement_matrix
from procgrade.engine.events import Grade
from procgrade.engine.store import EventStore
from procgrade.judges.rubric import BinaryScale, Rubric, rubric_hash

__all__ = ["DimensionAgreement", "judge_agreement"]


@dataclass(frozen=True)
class DimensionAgreement:
    dimension: str
    layer: str
    item: str | None
    weights: str | None
    matrix: AgreementMatrix | None
    note: str | None


def _grades(store: EventStore) -> list[Grade]:
    from procgrade.engine.stored import to_event

    return [to_event(tuple(row)) for row in store.stored_where(kinds=["grade"])]  # type: ignore[misc]


def judge_agreement(store: EventStore, rubric: Rubric, *, with_humans: bool = True) -> list[DimensionAgreement]:
    digest = rubric_hash(rubric)
    grades = sorted(_grades(store), key=lambda g: (g.run_id.encode("utf-8"), g.seq))
    results = []
    for dim in rubric.dimensions:
        item = rubric.item_of(dim)
        per_grader: dict[str, dict[tuple[str, int], Any]] = {}
        for grade in grades:
            if grade.layer != dim.layer or grade.item != item or grade.status == "no_grade":
                continue
            label = grade.passed if isinstance(dim.scale, BinaryScale) else grade.value
            if label is None:
                continue
            if grade.actor.startswith("judge"):
                record = grade.payload.get("judge") if isinstance(grade.payload, dict) else None
                if grade.sheet != rubric.sheet_name() or not isinstance(record, dict) \
                        or record.get("rubric", {}).get("sha256") != digest:
                    continue
            elif not (with_humans and (grade.actor == "human" or grade.actor.startswith("human:"))):
                continue
            key = (grade.run_id, -1 if grade.stage is None else grade.stage)
            per_grader.setdefault(grade.actor, {}).setdefault(key, label)
        judges = [a for a in per_grader if a.startswith("judge")]
        if len(per_grader) < 2 or not judges:
            results.append(DimensionAgreement(
                dim.id, dim.layer, item, None, None,
                f"{len(judges)} judge(s) and {len(per_grader) - len(judges)} human(s) graded it under rubric "
                f"{rubric.name} ({digest[:12]}): nothing to compare"))
            continue
        if isinstance(dim.scale, BinaryScale):
            labels: list[Any] = [False, True]
            weights = None
        else:
            labels = list(range(dim.scale.low, dim.scale.high + 1))
            weights = "quadratic"
        matrix = agreement_matrix(per_grader, labels=labels, weights=weights)
        results.append(DimensionAgreement(dim.id, dim.layer, item, weights, matrix, None))
    return results
