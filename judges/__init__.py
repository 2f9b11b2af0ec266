"""The LLM-judge layer: rubric dimensions the rules cannot capture, graded with cited evidence.

Public surface (imported lazily, so ``procgrade`` starts without loading the client):

* rubrics: :class:`Rubric`, :func:`load_rubric`, :func:`rubric_hash` (``judges.rubric``);
* rendering a run for a judge: :func:`read_log`, :func:`view_of` (``judges.rendering``);
* the model client, reusable by any grader: :class:`ChatModel`, :class:`ChatRequest`,
  :class:`ChatResponse`, :class:`OpenAIChatModel`, :class:`Endpoint`, :class:`RetryPolicy`,
  :func:`resolve_endpoint` (``judges.client``);
* judging: :class:`JudgeSettings`, :func:`plan_runs`, :func:`judge_runs`, :class:`Spending`
  (``judges.judging``); agreement between judges: :func:`judge_agreement` (``judges.agreement``).
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Rubric": "judges.rubric", "load_rubric": "judges.rubric", "rubric_hash": "judges.rubric",
    "read_log": "judges.rendering", "view_of": "judges.rendering",
    "ChatModel": "judges.client", "ChatRequest": "judges.client", "ChatResponse": "judges.client",
    "OpenAIChatModel": "judges.client", "Endpoint": "judges.client", "RetryPolicy": "judges.client",
    "resolve_endpoint": "judges.client",
    "JudgeSettings": "judges.judging", "plan_runs": "judges.judging", "judge_runs": "judges.judging",
    "Spending": "judges.judging", "judge_agreement": "judges.agreement",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'judges' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
