"""A scripted harness: a two-stage build recorded through the recorder API (same calls, any target)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from procgrade.engine.recorder import Recorder, record


class StepClock:
    """Deterministic timestamps: one second per event from a fixed start."""

    def __init__(self) -> None:
        self.n = 0

    def __call__(self) -> str:
        self.n += 1
        return f"2026-01-01T{self.n // 3600 % 24:02d}:{self.n // 60 % 60:02d}:{self.n % 60:02d}.000Z"


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def two_stage_build(run_id: str, target: Any, *, token: str | None = None,
                    between_stages: Callable[[int], None] = lambda stage: None, retry_for: float = 60.0) -> Recorder:
    """Record the build; ``between_stages(stage)`` runs after each stage (a test kills the server there)."""
    rec = record(run_id, target, token=token, harness="scripted-harness", harness_version="1.0", model="model-x",
                 task_id="todo-app", labels={"suite": "recorder"}, clock=StepClock(), retry_for=retry_for)
    with rec:
        for stage in (0, 1):
            with rec.stage(stage, title=f"stage {stage}", spec_ref=f"specs/stage{stage}.md"):
                rec.message(text=f"Plan for stage {stage}: read the spec, write the code, test it.", intent="plan")
                rec.file_read(path=f"specs/stage{stage}.md")
                for i in range(4):
                    rec.file_edit(path=f"src/stage{stage}_{i}.py", edit_kind="create", diff_sha256=_sha(f"{stage}-{i}"))
                with rec.job(f"build-{stage}", command="make build", output_path=f"out/build{stage}.log") as job:
                    job.poll("running")
                    job.finish(0, output_sha256=_sha(f"build {stage}"))
                with rec.delegate(f"tester{stage}", "Write tests for this stage", context=[f"specs/stage{stage}.md"]) as worker:
                    rec.command(command="pytest -q tests", exit_code=0, duration_ms=1200, actor=f"subagent:tester{stage}")
                    worker.report("12 tests written, all pass", evidence=[f"tests/test_stage{stage}.py"])
                rec.test_run(command="pytest -q", passed=12 + stage, failed=0, exit_code=0,
                             payload={"summary": f"{12 + stage} passed", "ratio": 1.0})
                rec.completion_claim(claim=f"stage {stage} complete", scope="stage")
            between_stages(stage)
        rec.end("completed", seal=True)
    return rec
