"""Judging runs against a rubric: plan, ask (or replay), aggregate, and append the verdicts as grade events.

For every run, every dimension of the rubric is judged once per round (``per: round``; a run without
rounds is judged once over the whole run) or once over the run, ``k`` times (samples ``0..k-1`` with
seeds ``seed + i``). Each sample is one ``grade`` event by ``judge:<model>`` whose payload records
everything needed to audit and replay it (see :func:`sample_record`): rubric hash, prompt hash,
rendered-input digest, basis (the seq and chain hash of the last event the judge saw), endpoint,
every parameter, each call's raw response, parsed verdict or why it was discarded, token usage and
cost. With ``k > 1`` an aggregate grade precedes its samples: the majority (binary; a tie is
``no_grade``) or the lower median (ordinal) of the samples that gave a valid verdict, so
``calibrate`` (which reads an item's first grade in seq order) sees the aggregate, and the samples
are its re-grades.

The cache is the log itself. A sample's *cache key* is sha256 over the run, basis, rubric hash,
dimension, round, prompt hash, input digest, endpoint, parameters and sample index; its event id is
``judge:<key>``. A sample whose key the run already holds is never asked again, so ``procgrade
judge`` is idempotent, and ``replay_only`` refuses to ask at all, naming the first missing sample.

A reply that is not JSON, breaks the schema, or cites seqs the judge was not shown is discarded and
re-asked up to ``reasks`` times; then the sample is recorded as ``no_grade`` (status ``no_grade``,
neither value nor passed), which every statistic leaves out. A transport failure that outlasts the
retries leaves that run unjudged (nothing of it is written). The cost cap and the token cap are
checked before every call against the worst case of that call (and before each run against the
worst case of the whole run): when the next call might cross a cap, judging stops; runs already
judged are kept, the run in progress is not written, and the summary says where it stopped.

A run's verdicts are appended in one transaction after all of its samples are in: a process killed
mid-run leaves nothing of that run behind.
"""

from __future__ import annotations

import re
import statistics
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from procgrade.engine.canonical import canonical_json, sha256_hex
from procgrade.engine.errors import EventIdConflictError, ProcgradeError, RunSealedError, SeqConflictError
from procgrade.engine.events import Grade
from procgrade.engine.exact import rational_text
from procgrade.engine.store import EventStore
from procgrade.judges.client import ChatModel, ChatRequest, Endpoint, EndpointError, TransportError, Usage
from procgrade.judges.prompts import DimensionPrompt, Rejected, check_reply
from procgrade.judges.spending import BudgetExhausted, Spending
from procgrade.judges.rendering import RENDERER_VERSION, RunLog, View, read_log, run_rounds, view_of
from procgrade.judges.rubric import BinaryScale, Dimension, OrdinalScale, Rubric, rubric_hash
from procgrade.judges.tokens import TokenCounter

__all__ = [
    "JUDGE_FORMAT",
    "BudgetExhausted",
    "JudgeSettings",
    "JudgeSummary",
    "ReplayMissingError",
    "RunJudgement",
    "Spending",
    "judge_actor",
    "judge_runs",
    "plan_runs",
]

JUDGE_FORMAT = "procgrade.judge/1"
_WRAPPER_TOKENS = 200  # the user message around the log: run line, part line, closing instruction
_APPEND_ATTEMPTS = 3


class ReplayMissingError(ProcgradeError):
    """``--replay-only`` and a sample has no recorded verdict."""


@dataclass(frozen=True)
class JudgeSettings:
    """How to judge. Everything that can change a verdict enters the cache key (:meth:`key_params`)."""

    samples: int = 1
    temperature: float = 0.0
    seed: int = 0
    max_tokens: int = 1024
    top_p: float | None = None
    context_tokens: int = 32_000
    reasks: int = 2
    concurrency: int = 4
    response_format: str = "json_schema"
    max_cost: Fraction | None = None
    max_total_tokens: int | None = None
    dimensions: tuple[str, ...] = ()
    replay_only: bool = False

    def key_params(self) -> dict[str, Any]:
        return {"temperature": self.temperature, "top_p": self.top_p, "max_tokens": self.max_tokens,
                "context_tokens": self.context_tokens, "reasks": self.reasks,
                "response_format": self.response_format}

    def aggregation(self, dim: Dimension) -> str:
        return "majority" if isinstance(dim.scale, BinaryScale) else "lower median"


def judge_actor(model: str) -> str:
    """``judge:<model>``, characters an actor cannot hold replaced by ``_`` (the model's exact name is in
    every grade's payload)."""
    safe = re.sub(r"[^A-Za-z0-9._@/+-]", "_", model)[:128]
    if not safe[:1].isalnum():
        safe = ("m" + safe)[:128]
    return f"judge:{safe}"


# --- plans --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SamplePlan:
    run_id: str
    dimension: Dimension
    round: int | None
    view: View
    prompt: DimensionPrompt
    sample: int
    seed: int
    key: str
    #: The grade event holding this sample, when the run already has it.
    held: Grade | None

    def describe(self) -> str:
        where = f" round {self.round}" if self.round is not None else ""
        return f"run {self.run_id}: dimension {self.dimension.id}{where} sample {self.sample}"


@dataclass(frozen=True)
class JobPlan:
    dimension: Dimension
    round: int | None
    view: View
    prompt: DimensionPrompt
    samples: tuple[SamplePlan, ...]


@dataclass(frozen=True)
class RunPlan:
    run_id: str
    jobs: tuple[JobPlan, ...]
    held: dict[str, Grade]
    notes: tuple[str, ...]
    sealed: bool

    @property
    def missing(self) -> list[SamplePlan]:
        return [s for job in self.jobs for s in job.samples if s.held is None]


def _held_verdicts(log: RunLog) -> dict[str, Grade]:
    held: dict[str, Grade] = {}
    for event in log.events:
        if isinstance(event, Grade) and event.actor.startswith("judge"):
            record = event.payload.get("judge")
            if isinstance(record, dict) and record.get("format") == JUDGE_FORMAT and "cache_key" in record:
                held[record["cache_key"]] = event
    return held


def sample_key(run_id: str, view: View, digest: str, dim: Dimension, prompt_hash: str, endpoint: Endpoint,
               settings: JudgeSettings, sample: int) -> str:
    return sha256_hex(canonical_json({
        "format": JUDGE_FORMAT, "run_id": run_id, "basis": {"seq": view.basis_seq, "hash": view.basis_hash},
        "rubric_sha256": digest, "dimension": dim.id, "round": view.round, "prompt_sha256": prompt_hash,
        "input_sha256": view.digest, "endpoint": endpoint.record(),
        "params": {**settings.key_params(), "seed": settings.seed + sample}, "sample": sample,
    }))


def _log_budget(prompt: DimensionPrompt, counter: TokenCounter, settings: JudgeSettings) -> int:
    # room for the system message, the wrapper, carried notes (at most one reply long) and the reply
    budget = settings.context_tokens - counter.count(prompt.system()) - _WRAPPER_TOKENS - 2 * settings.max_tokens
    if budget < 256:
        raise ProcgradeError(f"--context-tokens {settings.context_tokens} leaves {budget} tokens for the log after "
                             f"the instructions and two replies of --max-tokens {settings.max_tokens}: raise it")
    return budget


def plan_runs(store: EventStore, run_ids: Sequence[str], rubric: Rubric, endpoint: Endpoint,
              settings: JudgeSettings, counter: TokenCounter) -> list[RunPlan]:
    """Every sample each run needs, with the ones the log already holds."""
    digest = rubric_hash(rubric)
    dims = list(rubric.dimensions)
    if settings.dimensions:
        unknown = [d for d in settings.dimensions if d not in {x.id for x in dims}]
        if unknown:
            raise ProcgradeError(f"rubric {rubric.name} has no dimension {unknown[0]!r} "
                                 f"(dimensions: {', '.join(d.id for d in dims)})")
        dims = [d for d in dims if d.id in settings.dimensions]
    plans = []
    for run_id in run_ids:
        info = store.run(run_id)
        log = read_log(store, run_id)
        held = _held_verdicts(log)
        rounds = run_rounds(log)
        notes = []
        if not rounds and any(d.per == "round" for d in dims):
            notes.append("the run has no rounds: per-round dimensions are judged once over the whole run")
        views: dict[tuple[frozenset[str], int | None, int], View] = {}
        jobs = []
        for dim in dims:
            prompt = DimensionPrompt(rubric, dim, inline_schema=settings.response_format != "json_schema")
            budget = _log_budget(prompt, counter, settings)
            kinds = rubric.visibility(dim).kinds()
            if dim.per == "fix_round":
                if len(rounds) < 2:
                    notes.append(f"dimension {dim.id}: not judged: the run has no fix round")
                    continue
                judged: list[int | None] = list(rounds[1:])
            else:
                judged = list(rounds) if dim.per == "round" and rounds else [None]
            for round_ in judged:
                try:
                    view = views.get((kinds, round_, budget))
                    if view is None:
                        view = views[kinds, round_, budget] = view_of(log, kinds, counter, budget, round_)
                except ValueError as exc:
                    notes.append(f"dimension {dim.id}: not judged: {exc}")
                    continue
                prompt_hash = prompt.prompt_hash()
                samples = []
                for i in range(settings.samples):
                    key = sample_key(run_id, view, digest, dim, prompt_hash, endpoint, settings, i)
                    samples.append(SamplePlan(run_id, dim, round_, view, prompt, i, settings.seed + i, key,
                                              held.get(key)))
                jobs.append(JobPlan(dim, round_, view, prompt, tuple(samples)))
        plans.append(RunPlan(run_id, tuple(jobs), held, tuple(notes), info.sealed))
    return plans


def request_tokens(messages: Sequence[dict[str, str]], schema: dict[str, Any], counter: TokenCounter) -> int:
    """Prompt tokens of a request: the messages, a few per message for the chat format, and the reply schema."""
    return (sum(counter.count(m["content"]) for m in messages) + 8 * len(messages)
            + counter.count(canonical_json(schema).decode()))


def planned_calls(plan: SamplePlan, counter: TokenCounter, settings: JudgeSettings) -> list[int]:
    """The worst-case prompt tokens of each call of one sample, without re-asks (notes as long as a reply)."""
    out = []
    for chunk in plan.view.chunks:
        final = chunk.index == len(plan.view.chunks) - 1
        schema = plan.prompt.verdict_schema() if final else plan.prompt.notes_schema()
        tokens = request_tokens(plan.prompt.messages(plan.view, chunk, None), schema, counter)
        out.append(tokens + (settings.max_tokens if chunk.index else 0))
    return out


# --- asking -------------------------------------------------------------------------------------------


@dataclass
class SampleResult:
    plan: SamplePlan
    status: str  # graded | no_grade
    verdict: dict[str, Any] | None
    reason: str | None
    calls: list[dict[str, Any]]
    usage: Usage
    cost: Fraction | None


def _ask(model: ChatModel, plan: SamplePlan, settings: JudgeSettings, spending: Spending,
         counter: TokenCounter) -> SampleResult:
    view, prompt = plan.view, plan.prompt
    calls: list[dict[str, Any]] = []
    usage, cost = Usage(), (Fraction(0) if spending.price else None)
    notes: str | None = None
    accepted: dict[str, Any] | None = None
    for chunk in view.chunks:
        final = chunk.index == len(view.chunks) - 1
        schema = prompt.verdict_schema() if final else prompt.notes_schema()
        shown = view.seqs if final else frozenset(s for s in view.seqs if s <= chunk.last_seq)
        accepted, reason = None, ""
        for attempt in range(settings.reasks + 1):
            messages = prompt.messages(view, chunk, notes)
            request = ChatRequest(messages=messages, schema=schema, schema_name="verdict" if final else "notes",
                                  response_format=settings.response_format, temperature=settings.temperature,
                                  seed=plan.seed, max_tokens=settings.max_tokens, top_p=settings.top_p)
            prompt_tokens = request_tokens(messages, schema, counter)
            tokens, worst = spending.worst(prompt_tokens, settings.max_tokens)
            spending.reserve(tokens, worst)
            try:
                response = model.complete(request)
            except BaseException:
                spending.settle(tokens, worst, Usage())
                raise
            used = response.usage
            source = "endpoint"
            if used.total == 0:  # the endpoint reported no usage: count it ourselves
                used, source = Usage(prompt_tokens, counter.count(response.content or "")), "counted"
            call_cost = spending.settle(tokens, worst, used)
            usage = usage + used
            if cost is not None and call_cost is not None:
                cost += call_cost
            call: dict[str, Any] = {"chunk": chunk.index, "attempt": attempt, "purpose": "verdict" if final else "notes",
                                    "request": request.params(), "response": response.record(),
                                    "usage": used.record(), "usage_source": source,
                                    "cost": None if call_cost is None else rational_text(call_cost)}
            try:
                parsed = check_reply(response.content, schema, shown, prompt.cite if final else False)
            except Rejected as exc:
                reason = str(exc)
                call["discarded"] = reason
                calls.append(call)
                continue
            call["parsed"] = parsed
            calls.append(call)
            accepted = parsed
            break
        if accepted is None:
            n = settings.reasks + 1
            why = (f"{n} {'verdict' if final else 'notes'} {'reply' if n == 1 else 'replies'} discarded"
                   + (f" on part {chunk.index + 1} of {len(view.chunks)}" if len(view.chunks) > 1 else "")
                   + f"; the last: {reason}")
            return SampleResult(plan, "no_grade", None, why, calls, usage, cost)
        if not final:
            cited = ", ".join(map(str, accepted["evidence"]))
            notes = accepted["notes"] + (f" (seqs {cited})" if cited else "")
    return SampleResult(plan, "graded", accepted, None, calls, usage, cost)


# --- events -------------------------------------------------------------------------------------------


def _scale_fields(dim: Dimension) -> dict[str, Any]:
    if isinstance(dim.scale, OrdinalScale):
        return {"scale_min": dim.scale.low, "scale_max": dim.scale.high}
    return {}


def _label_fields(dim: Dimension, verdict: dict[str, Any] | None) -> dict[str, Any]:
    if verdict is None:
        return {}
    return {"passed": verdict["passed"]} if isinstance(dim.scale, BinaryScale) else {"value": verdict["value"]}


def sample_record(result: SampleResult, rubric: Rubric, digest: str, source: str, endpoint: Endpoint,
                  settings: JudgeSettings, counter: TokenCounter) -> dict[str, Any]:
    plan, view = result.plan, result.plan.view
    return {
        "format": JUDGE_FORMAT, "cache_key": plan.key,
        "rubric": {"name": rubric.name, "version": rubric.version, "sha256": digest, "file": source},
        "dimension": plan.dimension.id, "round": plan.round,
        "basis": {"seq": view.basis_seq, "hash": view.basis_hash},
        "prompt_sha256": plan.prompt.prompt_hash(), "input_sha256": view.digest,
        "renderer": {"version": RENDERER_VERSION, "tokenizer": counter.name, "budget": view.budget,
                     "chunks": len(view.chunks), "tokens": view.tokens, "redacted": view.redacted,
                     "clipped": view.clipped},
        "endpoint": endpoint.record(),
        "params": {**settings.key_params(), "seed": plan.seed, "samples": settings.samples,
                   "aggregation": settings.aggregation(plan.dimension)},
        "sample": plan.sample, "status": result.status, "verdict": result.verdict, "reason": result.reason,
        "calls": result.calls, "usage": result.usage.record(),
        "cost": None if result.cost is None else rational_text(result.cost),
    }


def _grade(run_id: str, seq: int, key: str, actor: str, rubric: Rubric, dim: Dimension, round_: int | None,
           basis: int, status: str, verdict: dict[str, Any] | None, evidence: list[int] | None,
           rationale: str | None, sample: int | None, payload: dict[str, Any]) -> Grade:
    record: dict[str, Any] = {
        "run_id": run_id, "seq": seq, "event_id": f"judge:{key}", "kind": "grade", "actor": actor,
        "parent_seq": basis, "layer": dim.layer, "criteria": dim.question, "sheet": rubric.sheet_name(),
        "status": status, "payload": payload, **_scale_fields(dim), **_label_fields(dim, verdict),
    }
    item = rubric.item_of(dim)
    if item is not None:
        record["item"] = item
    if round_ is not None:
        record["stage"] = round_
    if sample is not None:
        record["sample"] = sample
    if evidence is not None:
        record["evidence"] = sorted(set(evidence))
    if rationale:
        record["rationale"] = rationale
    return Grade.model_validate(record)


def _label(dim: Dimension, status: str, verdict: dict[str, Any] | None) -> Any:
    if status != "graded" or verdict is None:
        return None
    return verdict["passed"] if isinstance(dim.scale, BinaryScale) else verdict["value"]


def aggregate(dim: Dimension, labels: Sequence[Any]) -> tuple[Any, str]:
    """The aggregate of the valid ``labels`` (None = no_grade) and how it was reached."""
    valid = [x for x in labels if x is not None]
    n = len(labels)
    if not valid:
        return None, f"no sample of {n} gave a valid verdict"
    if isinstance(dim.scale, BinaryScale):
        yes = sum(1 for x in valid if x)
        no = len(valid) - yes
        if yes == no:
            return None, f"majority of {len(valid)} valid sample(s) of {n}: a tie ({yes} pass, {no} fail)"
        return yes > no, f"majority of {len(valid)} valid sample(s) of {n}: {yes} pass, {no} fail"
    value = statistics.median_low(valid)
    return value, f"lower median of {len(valid)} valid sample(s) of {n}: {sorted(valid)}"


# --- the run loop -------------------------------------------------------------------------------------


@dataclass
class RunJudgement:
    run_id: str
    appended: int = 0
    held: int = 0
    asked: int = 0
    graded: int = 0
    no_grade: int = 0
    usage: Usage = field(default_factory=Usage)
    cost: Fraction | None = None
    notes: list[str] = field(default_factory=list)
    failed: str | None = None


@dataclass
class JudgeSummary:
    runs: list[RunJudgement]
    calls: int
    usage: Usage
    cost: Fraction | None
    stopped: str | None = None
    #: Runs not reached because judging stopped.
    not_reached: list[str] = field(default_factory=list)

    @property
    def failed(self) -> list[RunJudgement]:
        return [r for r in self.runs if r.failed]


def check_replay(plans: Sequence[RunPlan], rubric: Rubric, endpoint: Endpoint) -> None:
    for plan in plans:
        missing = plan.missing
        if missing:
            first = missing[0]
            raise ReplayMissingError(
                f"--replay-only: {first.describe()} has no recorded verdict by {endpoint.model} under rubric "
                f"{rubric.name} ({rubric_hash(rubric)[:12]}) with these parameters (judged view ends at seq "
                f"{first.view.basis_seq}); {len(missing)} sample(s) of this run are missing: judge it without "
                "--replay-only first")


def judge_runs(store: EventStore, plans: Sequence[RunPlan], rubric: Rubric, source: str, model: ChatModel | None,
               endpoint: Endpoint, settings: JudgeSettings, counter: TokenCounter, spending: Spending,
               progress: Callable[[int], None] | None = None) -> JudgeSummary:
    """Judge each planned run in turn (its samples ``settings.concurrency`` at a time) and append its grades."""
    if settings.replay_only:
        check_replay(plans, rubric, endpoint)
    digest = rubric_hash(rubric)
    actor = judge_actor(endpoint.model)
    done: list[RunJudgement] = []
    stopped: str | None = None
    not_reached: list[str] = []
    for plan in plans:
        if stopped is not None:
            break
        outcome = RunJudgement(plan.run_id, notes=list(plan.notes))
        missing = plan.missing
        if plan.sealed and missing:
            outcome.failed = "sealed: a sealed run takes no new grades"
            done.append(outcome)
            continue
        if missing and model is None:
            raise ProcgradeError("no model client to ask")  # replay-only never gets here
        worst_tokens, worst_cost = 0, Fraction(0)
        for sample in missing:
            for tokens in planned_calls(sample, counter, settings):
                t, c = spending.worst(tokens, settings.max_tokens)
                worst_tokens, worst_cost = worst_tokens + t, worst_cost + c
        why = spending.fits(worst_tokens, worst_cost) if missing else None
        if why is not None:
            stopped = f"stopped before run {plan.run_id}: {why}"
            continue
        try:
            results = _ask_all(model, missing, settings, spending, counter, progress)
        except BudgetExhausted as exc:
            stopped = f"stopped in run {plan.run_id} (nothing of it written): {exc}"
            continue
        except (TransportError, EndpointError) as exc:
            outcome.failed = f"not judged (nothing written): {exc}"
            done.append(outcome)
            if isinstance(exc, EndpointError):
                stopped = f"stopped: {exc}"
            continue
        _append(store, plan, results, rubric, digest, source, actor, endpoint, settings, counter, outcome)
        done.append(outcome)
    if stopped is not None:
        reached = {r.run_id for r in done}
        not_reached = [p.run_id for p in plans if p.run_id not in reached]
    cost = spending.cost if spending.price else None
    return JudgeSummary(done, spending.calls, spending.usage, cost, stopped, not_reached)


class _Cancelled(Exception):
    """A sample not asked because another one failed first."""


def _ask_all(model: ChatModel | None, missing: list[SamplePlan], settings: JudgeSettings, spending: Spending,
             counter: TokenCounter, progress: Callable[[int], None] | None) -> dict[str, SampleResult]:
    results: dict[str, SampleResult] = {}
    if not missing:
        return results
    assert model is not None
    stop = threading.Event()  # set by the first failure: samples not yet started never call

    def ask(sample: SamplePlan) -> SampleResult:
        if stop.is_set():
            raise _Cancelled()
        try:
            return _ask(model, sample, settings, spending, counter)
        except BaseException:
            stop.set()
            raise

    with ThreadPoolExecutor(max_workers=max(1, settings.concurrency)) as pool:
        futures = {pool.submit(ask, s): s for s in missing}
        pending = set(futures)
        while pending:
            finished, pending = wait(pending, return_when=FIRST_EXCEPTION)
            for future in sorted(finished, key=lambda f: missing.index(futures[f])):
                error = future.exception()
                if isinstance(error, _Cancelled):
                    continue
                if error is not None:
                    for other in pending:
                        other.cancel()
                    raise error
                results[futures[future].key] = future.result()
                if progress is not None:
                    progress(1)
    return results


def _append(store: EventStore, plan: RunPlan, results: dict[str, SampleResult], rubric: Rubric, digest: str,
            source: str, actor: str, endpoint: Endpoint, settings: JudgeSettings, counter: TokenCounter,
            outcome: RunJudgement) -> None:
    for result in results.values():
        outcome.asked += 1
        outcome.usage = outcome.usage + result.usage
        if result.cost is not None:
            outcome.cost = (outcome.cost or Fraction(0)) + result.cost

    def build(first_seq: int, held_ids: set[str]) -> list[Grade]:
        events: list[Grade] = []
        seq = first_seq

        def add(make: Callable[[int], Grade], event_id: str) -> None:
            nonlocal seq
            if event_id in held_ids:
                return
            events.append(make(seq))
            held_ids.add(event_id)
            seq += 1

        for job in plan.jobs:
            dim = job.dimension
            labels, keys, evidence = [], [], []
            sample_events: list[tuple[Callable[[int], Grade], str]] = []
            for sample in job.samples:
                keys.append(sample.key)
                if sample.held is not None:
                    status = sample.held.status or "graded"
                    verdict = sample.held.payload["judge"].get("verdict")
                    labels.append(_label(dim, status, verdict))
                    if labels[-1] is not None:
                        evidence.extend(sample.held.evidence or [])
                    continue
                result = results[sample.key]
                labels.append(_label(dim, result.status, result.verdict))
                verdict = result.verdict
                if labels[-1] is not None:
                    evidence.extend(verdict["evidence"])
                record = sample_record(result, rubric, digest, source, endpoint, settings, counter)
                sample_events.append((
                    lambda s, sample=sample, result=result, record=record, verdict=verdict: _grade(
                        plan.run_id, s, sample.key, actor, rubric, dim, job.round, job.view.basis_seq, result.status,
                        verdict, None if verdict is None else verdict["evidence"],
                        verdict["rationale"] if verdict else result.reason, sample.sample, {"judge": record}),
                    f"judge:{sample.key}"))
            if settings.samples > 1:
                value, how = aggregate(dim, labels)
                status = "no_grade" if value is None else "graded"
                verdict = None if value is None else ({"passed": value} if isinstance(dim.scale, BinaryScale)
                                                      else {"value": value})
                key = sha256_hex(canonical_json({"format": JUDGE_FORMAT, "aggregate": settings.aggregation(dim),
                                                 "samples": keys}))
                record = {"format": JUDGE_FORMAT, "cache_key": key, "aggregate": {
                    "method": settings.aggregation(dim), "how": how, "samples": keys, "labels": labels},
                    "rubric": {"name": rubric.name, "version": rubric.version, "sha256": digest, "file": source},
                    "dimension": dim.id, "round": job.round, "endpoint": endpoint.record(),
                    "basis": {"seq": job.view.basis_seq, "hash": job.view.basis_hash},
                    "status": status, "verdict": verdict}
                add(lambda s, key=key, status=status, verdict=verdict, how=how, record=record: _grade(
                    plan.run_id, s, key, actor, rubric, dim, job.round, job.view.basis_seq, status, verdict,
                    evidence if verdict else None, how, None, {"judge": record}), f"judge:{key}")
            for make, event_id in sample_events:
                add(make, event_id)
        return events

    for attempt in range(_APPEND_ATTEMPTS):
        info = store.run(plan.run_id)
        held_ids = {f"judge:{k}" for k in plan.held}
        if attempt:  # someone else appended meanwhile: what do they hold now?
            held_ids |= {f"judge:{k}" for k in _held_verdicts(read_log(store, plan.run_id))}
        events = build(info.event_count, held_ids)
        if not events:
            break
        try:
            store.append(plan.run_id, events)
        except (SeqConflictError, EventIdConflictError):  # another writer appended (perhaps these very verdicts)
            if attempt == _APPEND_ATTEMPTS - 1:
                raise
            continue
        except RunSealedError as exc:
            outcome.failed = f"not written: {exc}"
            return
        outcome.appended = len(events)
        break
    outcome.held = sum(1 for job in plan.jobs for s in job.samples if s.held is not None)
    for job in plan.jobs:
        for s in job.samples:
            status = (s.held.status or "graded") if s.held is not None else results[s.key].status
            if status == "graded":
                outcome.graded += 1
            else:
                outcome.no_grade += 1
