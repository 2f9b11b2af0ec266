"""``procgrade judge``: judge runs against a rubric with a model, and compare judge models.

``procgrade judge RUN...`` is the ``run`` sub-command given by default (a run named ``agreement``
is judged with ``procgrade judge run agreement``); ``procgrade judge agreement`` compares the judge
models (and the human graders) that graded one rubric.
"""

from __future__ import annotations

import sys
from fractions import Fraction
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.text import Text
from typer.core import TyperGroup

from procgrade.engine.errors import InputError
from procgrade.engine.settings import DEFAULT_DB
from procgrade.engine.tables import Table
from procgrade.engine.terminal import err, out

__all__ = ["judge_app", "schema_rubric"]


class _DefaultRun(TyperGroup):
    """``judge RUN...`` means ``judge run RUN...``."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if args and args[0] not in self.list_commands(ctx) and args[0] not in ("--help", "-h"):
            args = ["run", *args]
        return super().parse_args(ctx, args)


judge_app = typer.Typer(cls=_DefaultRun, no_args_is_help=True, help="LLM judges: grade runs against a rubric "
                        "(`procgrade judge RUN... --rubric arena --model M`), compare judge models.")


DbOption = Annotated[str, typer.Option("--db", envvar="PROCGRADE_DB", help="Database URL or SQLite file path.")]
RubricOption = Annotated[str, typer.Option("--rubric", help="Rubric file, or a bundled rubric's name (arena).")]


def _fraction(value: str | None, flag: str) -> Fraction | None:
    if value is None:
        return None
    try:
        result = Fraction(value)
    except (ValueError, ZeroDivisionError):
        raise InputError(flag, None, None, f"not a number: {value!r}") from None
    if result < 0:
        raise InputError(flag, None, None, "cannot be negative")
    return result


def _money(value: Fraction | None) -> str:
    if value is None:
        return "unknown (no prices given)"
    return "$" + (f"{float(value):.6f}".rstrip("0").rstrip(".") if value else "0")


@judge_app.command("run")
def judge_command(
    run_ids: Annotated[list[str], typer.Argument(help="Runs to judge.", show_default=False)],
    rubric_path: RubricOption = "arena",
    model: Annotated[Optional[str], typer.Option("--model", help="The judge model (env PROCGRADE_JUDGE_MODEL).")] = None,
    base_url: Annotated[Optional[str], typer.Option("--base-url", help="OpenAI-compatible endpoint (env "
                                                    "PROCGRADE_JUDGE_BASE_URL, OPENAI_BASE_URL).")] = None,
    api_key_env: Annotated[Optional[str], typer.Option("--api-key-env", help="Name of the environment variable "
                                                       "holding the key (default PROCGRADE_JUDGE_API_KEY, then "
                                                       "OPENAI_API_KEY). The key is never stored or printed.")] = None,
    config: Annotated[Optional[Path], typer.Option("--config", help="TOML file: base_url, model, api_key_env, "
                                                   "price_input, price_output (env PROCGRADE_JUDGE_CONFIG).")] = None,
    samples: Annotated[int, typer.Option("--samples", "-k", min=1, max=99, help="Samples per judgment: majority "
                                         "(pass/fail) or lower median (ordinal) of the valid ones.")] = 1,
    temperature: Annotated[float, typer.Option("--temperature", min=0.0, max=2.0)] = 0.0,
    seed: Annotated[int, typer.Option("--seed", help="Seed of sample 0; sample i uses seed + i.")] = 0,
    max_tokens: Annotated[int, typer.Option("--max-tokens", min=16, help="Longest reply per call.")] = 1024,
    context_tokens: Annotated[int, typer.Option("--context-tokens", min=1024, help="Longest prompt per call: a "
                                                "longer run is read in chunks with carried notes.")] = 32_000,
    reasks: Annotated[int, typer.Option("--reasks", min=0, max=10, help="Re-asks after a reply that cannot be "
                                        "counted, before recording no_grade.")] = 2,
    concurrency: Annotated[int, typer.Option("--concurrency", min=1, max=64, help="Calls in flight.")] = 4,
    response_format: Annotated[str, typer.Option("--response-format", help="json_schema (structured output), "
                                                 "json_object, or none (the schema is still checked here).")] = "json_schema",
    timeout: Annotated[float, typer.Option("--timeout", min=1.0, help="Seconds per request.")] = 120.0,
    retries: Annotated[int, typer.Option("--retries", min=0, max=20, help="Retries after a transport failure "
                                         "(connection, timeout, 429, 5xx).")] = 5,
    price_input: Annotated[Optional[str], typer.Option("--price-input", help="USD per million prompt tokens.")] = None,
    price_output: Annotated[Optional[str], typer.Option("--price-output", help="USD per million completion "
                                                        "tokens.")] = None,
    max_cost: Annotated[Optional[str], typer.Option("--max-cost", help="Stop before spending more than this "
                                                    "many USD.")] = None,
    max_total_tokens: Annotated[Optional[int], typer.Option("--max-total-tokens", min=1, help="Stop before "
                                                            "using more tokens than this.")] = None,
    dimensions: Annotated[Optional[list[str]], typer.Option("--dimension", help="Judge only this dimension "
                                                            "(repeatable).")] = None,
    replay_only: Annotated[bool, typer.Option("--replay-only", help="Never call the model: use recorded verdicts, "
                                              "fail naming the first one missing.")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Call nothing: print the first prompt, token counts "
                                          "and the estimated cost.")] = False,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Judge runs against a rubric; verdicts become grade events by judge:<model> (cached: never asked twice)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from procgrade.engine.store import open_store
    from procgrade.judges.client import OpenAIChatModel, RetryPolicy, resolve_endpoint
    from procgrade.judges.judging import JudgeSettings, Spending, judge_runs, plan_runs
    from procgrade.judges.rubric import load_rubric
    from procgrade.judges.tokens import token_counter

    if response_format not in ("json_schema", "json_object", "none"):
        raise InputError("--response-format", None, None, "json_schema, json_object or none")
    rubric, source = load_rubric(rubric_path)
    endpoint = resolve_endpoint(model=model, base_url=base_url, api_key_env=api_key_env, price_input=price_input,
                                price_output=price_output, config=config)
    settings = JudgeSettings(samples=samples, temperature=temperature, seed=seed, max_tokens=max_tokens,
                             context_tokens=context_tokens, reasks=reasks, concurrency=concurrency,
                             response_format=response_format, max_cost=_fraction(max_cost, "--max-cost"),
                             max_total_tokens=max_total_tokens, dimensions=tuple(dimensions or ()),
                             replay_only=replay_only)
    counter = token_counter(endpoint.model)
    store = open_store(db)
    try:
        plans = plan_runs(store, run_ids, rubric, endpoint, settings, counter)
        if dry_run:
            _dry_run(plans, rubric, endpoint, settings, counter)
            return
        spending = Spending(endpoint, settings.max_cost, settings.max_total_tokens)
        client = None
        missing = sum(len(p.missing) for p in plans)
        if missing and not replay_only:
            client = OpenAIChatModel(endpoint, RetryPolicy(attempts=retries + 1, timeout=timeout))
        try:
            with Progress(TextColumn("judging"), BarColumn(), MofNCompleteColumn(), console=err,
                          transient=True, disable=not missing or replay_only) as progress:
                task = progress.add_task("judging", total=missing)
                summary = judge_runs(store, plans, rubric, source, client, endpoint, settings, counter, spending,
                                     progress=lambda n: progress.advance(task, n))
        finally:
            if client is not None:
                client.close()
    finally:
        store.close()
    _print_summary(summary, rubric, endpoint, counter)
    if summary.stopped or summary.failed:
        raise typer.Exit(1)


def _print_summary(summary: Any, rubric: Any, endpoint: Any, counter: Any) -> None:
    from procgrade.judges.judging import judge_actor

    table = Table("run", "asked", "recorded before", "graded", "no_grade", "appended", "tokens", "cost",
                  title=f"rubric {rubric.name} v{rubric.version} by {judge_actor(endpoint.model)} at "
                        f"{endpoint.shown_url()}")
    for run in summary.runs:
        table.add_row(Text(run.run_id), str(run.asked), str(run.held), str(run.graded), str(run.no_grade),
                      str(run.appended), str(run.usage.total), _money(run.cost) if run.asked else "-")
    out.print(table)
    for run in summary.runs:
        for note in run.notes:
            out.print(Text(f"{run.run_id}: {note}"))
        if run.failed:
            err.print(Text(f"{run.run_id}: {run.failed}"))
    out.print(Text(f"{summary.calls} call(s), {summary.usage.prompt_tokens} prompt + "
                   f"{summary.usage.completion_tokens} completion tokens, cost {_money(summary.cost)}; "
                   f"tokens counted with {counter.name}"))
    if summary.stopped:
        err.print(Text(summary.stopped))
    if summary.not_reached:
        err.print(Text(f"not judged ({len(summary.not_reached)}): {', '.join(summary.not_reached)}"))


def _dry_run(plans: list, rubric: Any, endpoint: Any, settings: Any, counter: Any) -> None:
    from procgrade.judges.judging import planned_calls

    calls = prompt_tokens = 0
    cached = 0
    first = None
    table = Table("run", "dimension", "round", "chunks", "log tokens", "calls", "prompt tokens", "recorded",
                  title=f"dry run: rubric {rubric.name} v{rubric.version}, model {endpoint.model}, "
                        f"{settings.samples} sample(s) each; nothing is sent")
    for plan in plans:
        for job in plan.jobs:
            tokens = [planned_calls(s, counter, settings) for s in job.samples if s.held is None]
            held = sum(1 for s in job.samples if s.held is not None)
            cached += held
            n = sum(len(t) for t in tokens)
            p = sum(sum(t) for t in tokens)
            calls += n
            prompt_tokens += p
            if first is None:
                first = job
            table.add_row(Text(plan.run_id), job.dimension.id, "-" if job.round is None else str(job.round),
                          str(len(job.view.chunks)), str(job.view.tokens), str(n), str(p), str(held))
        for note in plan.notes:
            out.print(Text(f"{plan.run_id}: {note}"))
    if first is not None:
        chunk = first.view.chunks[0]
        messages = first.prompt.messages(first.view, chunk, None)
        shown = sum(counter.count(m["content"]) for m in messages)
        out.print(Text(f"--- the first prompt: run {first.view.run_id}, dimension {first.dimension.id}"
                       + (f", round {first.round}" if first.round is not None else "")
                       + f", part 1 of {len(first.view.chunks)} ({shown} tokens, {counter.name}) ---", style="bold"))
        for message in messages:
            out.print(Text(f"[{message['role']}]", style="bold"))
            out.print(Text(message["content"]))
        out.print(Text("--- end of the first prompt ---", style="bold"))
    out.print(table)
    completion = calls * settings.max_tokens
    cost = None if endpoint.price is None else endpoint.price.cost(prompt_tokens, completion)
    estimate = (f"at most {_money(cost)} (every reply {settings.max_tokens} tokens long, no re-asks)"
                if cost is not None else "unknown: give --price-input and --price-output (USD per million tokens)")
    out.print(Text(f"{calls} call(s) to make, {cached} sample(s) already recorded; {prompt_tokens} prompt tokens "
                   f"(counted with {counter.name}) and up to {completion} completion tokens; estimated cost "
                   f"{estimate}"))


@judge_app.command("agreement")
def agreement_command(
    rubric_path: RubricOption = "arena",
    humans: Annotated[bool, typer.Option("--humans/--no-humans", help="Also compare with human grades on the same "
                                         "layers and items.")] = True,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Agreement between the judge models (and human graders) that graded one rubric, per dimension."""
    from procgrade.engine.store import open_store
    from procgrade.judges.agreement import judge_agreement
    from procgrade.judges.rubric import load_rubric

    rubric, _ = load_rubric(rubric_path)
    store = open_store(db)
    try:
        result = judge_agreement(store, rubric, with_humans=humans)
    finally:
        store.close()
    for dim in result:
        if dim.matrix is None:
            out.print(Text(f"{dim.dimension}: {dim.note}"))
            continue
        table = Table("grader A", "grader B", "items", "agreement", "kappa" + (" (quadratic)" if dim.weights else ""),
                      title=f"{dim.dimension} ({dim.layer}{' ' + dim.item if dim.item else ''}): "
                            f"{len(dim.matrix.graders)} graders")
        for pair in dim.matrix.pairs:
            agree = pair.agreement
            table.add_row(Text(pair.first), Text(pair.second), str(pair.n),
                          "-" if agree.estimate is None else f"{100 * agree.estimate:.1f}%"
                          + ("" if agree.low is None else f" [{100 * agree.low:.1f}, {100 * agree.high:.1f}]"),
                          "-" if pair.kappa.value is None else f"{pair.kappa.value:.3f}")
        out.print(table)
        if dim.note:
            out.print(Text(f"{dim.dimension}: {dim.note}"))


def schema_rubric() -> None:
    """The JSON Schema of a judge rubric file."""
    import orjson

    from procgrade.judges.rubric import rubric_json_schema

    sys.stdout.buffer.write(orjson.dumps(rubric_json_schema(), option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)
                            + b"\n")
