"""The LLM-judge layer: rubric dimensions the rules cannot capture, graded with cited evidence.

Public surface (imported lazily, so ``procgrade`` starts without loading the client):

* rubrics: :class:`Rubric`, :func:`load_rubric`, :func:`rubric_hash` (``procgrade.judges.rubric``);
* rendering a run for a judge: :func:`read_log`, :func:`view_of` (``procgrade.judges.rendering``);
* the model client, reusable by any grader: :class:`ChatModel`, :class:`ChatRequest`,
  :class:`ChatResponse`, :class:`OpenAIChatModel`, :class:`Endpoint`, :class:`RetryPolicy`,
  :func:`resolve_endpoint` (``procgrade.judges.client``);
* judging: :class:`JudgeSettings`, :func:`plan_runs`, :func:`judge_runs`, :class:`Spending`
  (``procgrade.judges.judging``); agreement between judges: :func:`judge_agreement` (``procgrade.judges.agreement``).
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Rubric": "procgrade.judges.rubric", "load_rubric": "procgrade.judges.rubric", "rubric_hash": "procgrade.judges.rubric",
    "read_log": "procgrade.judges.rendering", "view_of": "procgrade.judges.rendering",
    "ChatModel": "procgrade.judges.client", "ChatRequest": "procgrade.judges.client", "ChatResponse": "procgrade.judges.client",
    "OpenAIChatModel": "procgrade.judges.client", "Endpoint": "procgrade.judges.client", "RetryPolicy": "procgrade.judges.client",
    "resolve_endpoint": "procgrade.judges.client",
    "JudgeSettings": "procgrade.judges.judging", "plan_runs": "procgrade.judges.judging", "judge_runs": "procgrade.judges.judging",
    "Spending": "procgrade.judges.judging", "judge_agreement": "procgrade.judges.agreement",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'judges' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
