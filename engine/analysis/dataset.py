"""The analysis view of the store: one record per run, with what analysis compares.

Analysis (outcome metrics, process-vs-outcome rankings, calibration, reports)
never reads raw events. It reads :class:`RunView`s: the run's provenance (the
fields runs are grouped by), its process score under one rule set at the run's
current head, and its outcome and grade events in seq order. A score stored for
exactly that head, rule set and engine version is reused; otherwise the score is
computed from the log in memory (nothing is written), so a run whose log grew
(grades or verdicts appended) is never judged by a stale document.

A run's *grades stream* (``<run>@grades``, grades imported before the run's trajectory; see
:mod:`procgrade.engine.grades.importing`) is part of the run's view, never a run of its own: its grades
come first (they were imported first), then the run's own; the trajectory's provenance wins and
the metadata the sheets give (the stream's ``run_started``, each grade's ``payload.run``) fills what
it leaves unsaid. Without a trajectory the stream alone is the run. Either import order gives the
same view.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from procgrade.engine.canonical import canonical_json, parse_json
from procgrade.engine.events import AcceptanceVerdict, Event, Grade, RunStarted, TestResult
from procgrade.engine.facts import verdict_outcome
from procgrade.engine.rescoring import compute_score
from procgrade.engine.store import EventStore
from procgrade.engine.store.scores import ScoreStore
from procgrade.engine.stored import to_event
from procgrade.engine.version import __version__ as ENGINE_VERSION
from procgrade.rules.identity import ruleset_hash
from procgrade.rules.model import RuleSet

__all__ = ["RunView", "ProcessScore", "Coverage", "load_runs", "check_field", "group_key", "GROUPING_FIELDS", "NOT_GRADED"]

#: Event kinds analysis reads besides run_started.
_ANALYSED_KINDS = ("acceptance_verdict", "test_result", "grade")

#: Provenance fields runs can be grouped by (``settings.<key>`` and ``labels.<key>`` too). ``system`` is the
#: run's ``system`` label (the experiment or agent configuration an archive names, e.g. ``claude_code_c4``).
GROUPING_FIELDS = ("model", "system", "harness", "harness_version", "task_id", "format", "run_id")

#: How a run with no process score (no rule of the set had a judged activation) is shown.
NOT_GRADED = "not graded: no model decisions"


@dataclass(frozen=True)
class Coverage:
    """How much of the rule set judged the run (the score document's ``coverage``; computed from its rules
    for documents that predate the field, ``model_events`` then unknown)."""

    rules: int
    rules_applicable: int
    judged_activations: int
    model_events: int | None

    @property
    def fraction(self) -> Fraction:
        """rules_applicable / rules, exactly (0 for an empty rule set)."""
        return Fraction(self.rules_applicable, self.rules) if self.rules else Fraction(0)


@dataclass(frozen=True)
class ProcessScore:
    """A run's process score under one rule set, from its score document."""

    ruleset_hash: str
    total: Fraction | None
    rules: dict[str, Fraction | None]
    checks: dict[str, Fraction | None]
    patterns: dict[str, Fraction | None]
    violations: dict[str, int]
    stored: bool  # True when read from a stored document, False when computed now
    #: Per rule, fulfilled + violated: the rule *applied* in the run iff this is above 0.
    judged: dict[str, int] = field(default_factory=dict)
    coverage: Coverage | None = None

    def __post_init__(self) -> None:
        if self.coverage is None and self.judged:
            judged = list(self.judged.values())
            object.__setattr__(self, "coverage", Coverage(len(judged), sum(1 for j in judged if j > 0),
                                                          sum(judged), None))

    @property
    def graded(self) -> bool:
        """Whether the run has a process score (some rule of the set judged a model decision)."""
        return self.total is not None

    def applied(self, rule: str) -> bool:
        return self.judged.get(rule, 0) > 0


@dataclass(frozen=True)
class RunView:
    run_id: str
    event_count: int
    head_hash: str | None
    harness: str | None
    harness_version: str | None
    model: str | None
    task_id: str | None
    format: str
    settings: dict[str, Any] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    process: ProcessScore | None = None
    verdicts: tuple[AcceptanceVerdict, ...] = ()
    test_results: tuple[TestResult, ...] = ()
    grades: tuple[Grade, ...] = ()
    #: Where a grade sheet describes the run differently from its trajectory (``model: sheet 'x', run 'y'``):
    #: the trajectory's value is used.
    disagreements: tuple[str, ...] = ()

    def field(self, name: str) -> str | None:
        """A provenance field by name: ``model``, ``harness``, ``task_id``, ``format``,
        ``settings.<key>`` (canonical JSON of the value) or ``labels.<key>``."""
        if name.startswith("settings."):
            key = name.removeprefix("settings.")
            return canonical_json(self.settings[key]).decode() if key in self.settings else None
        if name.startswith("labels."):
            return self.labels.get(name.removeprefix("labels."))
        if name == "system":
            return self.labels.get("system")
        if name not in GROUPING_FIELDS:
            raise KeyError(f"unknown grouping field {name!r} (known: {', '.join(GROUPING_FIELDS)}, settings.<key>, labels.<key>)")
        return getattr(self, name)

    @property
    def verdict(self) -> AcceptanceVerdict | None:
        """The run's last acceptance verdict (the latest check decides), or None."""
        return self.verdicts[-1] if self.verdicts else None

    @property
    def outcome(self) -> str | None:
        """pass / fail / the verdict's status (no_grade, timeout, ...), or None when unjudged."""
        return None if self.verdict is None else verdict_outcome(self.verdict)


def check_field(by: str) -> str:
    """``by`` if it names a provenance field runs can be grouped by, else ValueError listing the known ones."""
    if by in GROUPING_FIELDS or (by.startswith(("settings.", "labels.")) and by.split(".", 1)[1]):
        return by
    raise ValueError(f"unknown grouping field {by!r} (known: {', '.join(GROUPING_FIELDS)}, settings.<key>, labels.<key>)")


def group_key(run: RunView, by: str, identity: Any = None) -> str | None:
    """The group of ``run`` by field ``by``, or None when the run has no value for it (such a run is never a
    group: analyses list it apart). ``model`` goes through ``identity``
    (:class:`procgrade.engine.analysis.model_identity.ModelIdentity`, default: normalisation without aliases)."""
    value = run.field(by)
    if by == "model":
        if identity is None:
            from procgrade.engine.analysis.model_identity import ModelIdentity

            identity = ModelIdentity()
        return identity.group(value)
    return None if value is None or value == "" else value



def load_runs(store: EventStore, ruleset: RuleSet | None = None, run_ids: Sequence[str] | None = None) -> list[RunView]:
    """Every run (or ``run_ids``), sorted by run id, with its process score under ``ruleset``
    (None: no process scores) and its verdicts, test results and grades in seq order."""
    infos = store.runs()
    starts = _first_events(store, [info.run_id for info in infos])
    streams: dict[str, str] = {}  # run -> its grades stream
    for info in infos:
        start = starts[info.run_id]
        subject = (start.labels or {}).get("grades_for") if isinstance(start, RunStarted) else None
        if subject and info.run_id == subject + "@grades":
            streams[subject] = info.run_id
    held = {info.run_id for info in infos}
    infos = [info for info in infos if info.run_id not in set(streams.values())]
    orphans = [s for s in streams if s not in held]  # grades streams whose trajectory has not arrived
    by_id = {info.run_id: info for info in store.runs()}
    infos = sorted(infos + [by_id[streams[s]] for s in orphans], key=lambda i: _subject(i.run_id, streams))
    if run_ids is not None:
        wanted = set(run_ids)
        missing = sorted(wanted - {i.run_id for i in infos})
        if missing:
            from procgrade.engine.errors import UnknownRunError

            raise UnknownRunError(f"no run {missing[0]!r} in the store")
        infos = [i for i in infos if _subject(i.run_id, streams) in wanted]
    outcome_events = _outcome_events(store, [i.run_id for i in infos] + [streams[_subject(i.run_id, streams)]
                                                                         for i in infos
                                                                         if _subject(i.run_id, streams) in streams])
    digest = ruleset_hash(ruleset) if ruleset is not None else None
    stored_scores = _stored_scores(store, digest) if digest is not None else {}
    views = []
    for info in infos:
        subject = _subject(info.run_id, streams)
        start = starts.get(info.run_id)
        settings: dict[str, Any] = {}
        labels: dict[str, str] = {}
        if isinstance(start, RunStarted):
            settings = dict(start.model_settings or {})
            labels = dict(start.labels or {})
        events = outcome_events.get(info.run_id, [])
        described: dict[str, Any] = {}
        if subject in streams:
            stream = streams[subject]
            stream_start = starts[stream]
            extra = outcome_events.get(stream, []) if stream != info.run_id else []
            events = [e.model_copy(update={"run_id": subject}) for e in extra] + events
            if isinstance(stream_start, RunStarted):
                described = _described(stream_start)
            if stream == info.run_id:
                events = [e.model_copy(update={"run_id": subject}) for e in events]
                labels = {k: v for k, v in labels.items() if k != "grades_for"}
        for event in events:
            if isinstance(event, Grade) and isinstance(event.payload.get("run"), dict):
                for key, value in event.payload["run"].items():
                    if key == "labels" and isinstance(value, dict):
                        described.setdefault("labels", {})
                        for k, v in value.items():
                            described["labels"].setdefault(k, v)
                    else:
                        described.setdefault(key, value)
        trajectory = subject == info.run_id and not (labels.get("created_by") == "grades import")
        model, task_id, harness = info.model, info.task_id, info.harness
        if not trajectory:  # a grades-only view: the sheets' description is all there is
            model = model or described.get("model")
            task_id = task_id or described.get("task_id")
        else:
            model = model if model is not None else described.get("model")
            task_id = task_id if task_id is not None else described.get("task_id")
        if harness in (None, "grades") and described.get("harness"):
            harness = described["harness"]
        disagreements = []
        for name, used in (("model", model), ("task_id", task_id), ("harness", harness)):
            said = described.get(name)
            if said is not None and used is not None and said != used:
                disagreements.append(f"{name}: sheet {said!r}, run {used!r}")
        for k, v in (described.get("labels") or {}).items():
            if k in labels and labels[k] != v:
                disagreements.append(f"labels.{k}: sheet {v!r}, run {labels[k]!r}")
            labels.setdefault(k, v)
        process = None
        if ruleset is not None and digest is not None:
            document = stored_scores.get((info.run_id, info.head_hash or ""))
            if document is not None:
                process = _process_score(digest, document, stored=True)
            else:
                computed = compute_score(store, ruleset, info.run_id, digest=digest)
                process = _process_score(digest, computed.body, stored=False)
        views.append(RunView(
            run_id=subject, event_count=info.event_count, head_hash=info.head_hash, harness=harness,
            harness_version=info.harness_version, model=model, task_id=task_id,
            format=info.source_format or "native", settings=settings, labels=labels, process=process,
            verdicts=tuple(e for e in events if isinstance(e, AcceptanceVerdict)),
            test_results=tuple(e for e in events if isinstance(e, TestResult)),
            grades=tuple(e for e in events if isinstance(e, Grade)), disagreements=tuple(disagreements),
        ))
    return views


def _first_events(store: EventStore, run_ids: Sequence[str]) -> dict[str, Event | None]:
    """Each run's seq 0 (None for a run without events), read in one query for all of them rather than
    one per run."""
    found: dict[str, Event | None] = {run_id: None for run_id in run_ids}
    for row in store.stored_where(seq_below=1):
        if row[0] in found:
            found[row[0]] = to_event(tuple(row))
    return found


def _subject(run_id: str, streams: dict[str, str]) -> str:
    """The run a stream belongs to: itself, or the run a grades stream grades."""
    if run_id.endswith("@grades") and streams.get(run_id.removesuffix("@grades")) == run_id:
        return run_id.removesuffix("@grades")
    return run_id


def _described(start: RunStarted) -> dict[str, Any]:
    """What a grades stream's run_started says about the run."""
    found: dict[str, Any] = {}
    if start.model:
        found["model"] = start.model
    if start.task_id:
        found["task_id"] = start.task_id
    if start.harness.name not in ("grades",):
        found["harness"] = start.harness.name
    labels = {k: v for k, v in (start.labels or {}).items() if k not in ("created_by", "grades_for")}
    if labels:
        found["labels"] = labels
    return found


def _outcome_events(store: EventStore, run_ids: Iterable[str]) -> dict[str, list[Event]]:
    wanted = set(run_ids)
    found: dict[str, list[Event]] = {}
    for row in store.stored_where(kinds=list(_ANALYSED_KINDS)):
        if row[0] in wanted:
            found.setdefault(row[0], []).append(to_event(tuple(row)))
    return found


def _stored_scores(store: EventStore, digest: str) -> dict[tuple[str, str], dict[str, Any]]:
    """Stored documents of this rule set and engine version, by (run, head)."""
    documents: dict[tuple[str, str], dict[str, Any]] = {}
    for score in ScoreStore(store).scores():
        if score.ruleset_hash == digest and score.engine_version == ENGINE_VERSION:
            documents[(score.run_id, score.run_head_hash)] = parse_json(score.document)
    return documents


def _fraction(value: dict[str, str] | None) -> Fraction | None:
    """The exact rational of a score document (``{"num": ..., "den": ...}``)."""
    if value is None:
        return None
    return Fraction(int(value["num"]), int(value["den"]))


def _coverage(body: dict[str, Any]) -> Coverage:
    found = body.get("coverage")
    if isinstance(found, dict):
        return Coverage(int(found["rules"]), int(found["rules_applicable"]), int(found["judged_activations"]),
                        None if found.get("model_events") is None else int(found["model_events"]))
    judged = [r["fulfilled"] + r["violated"] for r in body["rules"]]
    return Coverage(len(judged), sum(1 for j in judged if j > 0), sum(judged), None)


def _process_score(digest: str, body: dict[str, Any], *, stored: bool) -> ProcessScore:
    return ProcessScore(
        ruleset_hash=digest,
        total=_fraction(body["process_score"]),
        rules={r["id"]: _fraction(r["score"]) for r in body["rules"]},
        checks={name: _fraction(entry.get("score")) for name, entry in sorted(body["checks"].items())},
        patterns={name: _fraction(entry.get("score")) for name, entry in sorted(body["patterns"].items())},
        violations={r["id"]: r["violated"] for r in body["rules"]},
        stored=stored,
        judged={r["id"]: r["fulfilled"] + r["violated"] for r in body["rules"]},
        coverage=_coverage(body),
    )
