"""The messages a judge is sent, the JSON Schemas its replies must meet, and how replies are checked.

One dimension per call: the system message holds the rubric's instructions and the dimension's
question, scale and written standard per level; the user message holds the rendered log. A log in
several chunks is read in order: for every chunk but the last the judge returns notes (with the seqs
they rest on) that are carried into the next call; the last call returns the verdict.

The *prompt hash* covers everything but the run: the prompt version, the system message and both
reply schemas; with the rendered-input digest it pins exactly what the judge was asked.

A reply is accepted only when it is a JSON object meeting the schema (checked here with
``jsonschema``, whatever the server claims to enforce) and, when the rubric requires citations,
cites at least one seq and only seqs the judge was shown. Anything else is a :class:`Rejected`
reply with its reason: discarded, re-asked, and never counted.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import jsonschema

from procgrade.engine.canonical import canonical_json, sha256_hex
from procgrade.judges.rendering import Chunk, View
from procgrade.judges.rubric import BinaryScale, Dimension, Rubric

__all__ = ["PROMPT_VERSION", "DimensionPrompt", "Rejected", "check_reply"]

PROMPT_VERSION = "1"

# Only keywords every structured-output implementation takes (OpenAI's strict mode refused ``minimum``
# for a long time); everything else about a reply is checked here, whatever the server enforced.
_EVIDENCE = {"type": "array", "items": {"type": "integer"},
             "description": "Seqs of the events your answer rests on."}


class Rejected(ValueError):
    """A reply that cannot be counted: why, in one line."""


@dataclass(frozen=True)
class DimensionPrompt:
    """How one dimension of one rubric is asked."""

    rubric: Rubric
    dimension: Dimension
    #: Write the reply's JSON Schema into the request (for endpoints not given it as response_format).
    inline_schema: bool = False

    @property
    def cite(self) -> bool:
        return self.rubric.must_cite(self.dimension)

    @property
    def binary(self) -> bool:
        return isinstance(self.dimension.scale, BinaryScale)

    def verdict_schema(self) -> dict[str, Any]:
        scale = self.dimension.scale
        answer: dict[str, Any]
        if isinstance(scale, BinaryScale):
            answer = {"passed": {"type": "boolean", "description": "true: the pass standard is met."}}
        else:
            answer = {"value": {"type": "integer", "enum": sorted(level.value for level in scale.levels),
                                "description": "The level whose standard fits best."}}
        key = next(iter(answer))
        return {"type": "object", "additionalProperties": False,
                "properties": {**answer, "rationale": {"type": "string", "description": "Why, in a few sentences."},
                               "evidence": _EVIDENCE},
                "required": [key, "rationale", "evidence"]}

    def notes_schema(self) -> dict[str, Any]:
        return {"type": "object", "additionalProperties": False,
                "properties": {"notes": {"type": "string", "description": "What the log so far shows about "
                                                                          "the question, with seqs."},
                               "evidence": _EVIDENCE},
                "required": ["notes", "evidence"]}

    def system(self) -> str:
        dim, scale = self.dimension, self.dimension.scale
        parts = [self.rubric.instructions.strip(), "", f"Dimension: {dim.title}",
                 f"Question: {dim.question.strip()}"]
        if dim.per == "round":
            parts.append("You grade one round: the log ends where that round ends.")
        elif dim.per == "fix_round":
            parts.append("You grade one fix round (a round answering the correction given after the round before "
                         "it): the log ends where that round ends.")
        if isinstance(scale, BinaryScale):
            parts += ["Scale: pass or fail.", f"- pass (passed: true): {scale.passed.strip()}",
                      f"- fail (passed: false): {scale.failed.strip()}"]
        else:
            parts.append(f"Scale: an integer from {scale.low} to {scale.high}.")
            parts += [f"- {level.value:+d}: {level.standard.strip()}"
                      for level in sorted(scale.levels, key=lambda lv: -lv.value)]
        if self.cite:
            parts.append("Cite in evidence at least one seq, and only seqs that appear in the log you were shown.")
        parts.append("Reply with one JSON object that meets the schema you were given, and nothing else.")
        return "\n".join(parts)

    def prompt_hash(self) -> str:
        return sha256_hex(canonical_json({"prompt_version": PROMPT_VERSION, "system": self.system(),
                                          "inline_schema": self.inline_schema,
                                          "verdict_schema": self.verdict_schema(),
                                          "notes_schema": self.notes_schema()}))

    def user(self, view: View, chunk: Chunk, notes: str | None) -> str:
        n = len(view.chunks)
        what = f"Run {view.run_id}" + (f", graded at the end of round {view.round}" if view.round is not None else "")
        parts = [what + "."]
        if notes is not None:
            parts += ["", "Your notes from the earlier parts of the log:", notes.strip()]
        where = f"part {chunk.index + 1} of {n}, " if n > 1 else ""
        parts += ["", f"Event log ({where}seqs {chunk.first_seq} to {chunk.last_seq}):", chunk.text, ""]
        if chunk.index < n - 1:
            parts.append("This is not the end of the log. Do not grade yet: reply with notes on what this part (and "
                         "your earlier notes) shows about the question, citing seqs, to carry into the next part.")
        else:
            parts.append(f"Grade the dimension \"{self.dimension.title}\" now.")
        if self.inline_schema:
            schema = self.verdict_schema() if chunk.index == n - 1 else self.notes_schema()
            parts.append("The reply's JSON Schema: " + canonical_json(schema).decode())
        return "\n".join(parts)

    def messages(self, view: View, chunk: Chunk, notes: str | None) -> tuple[dict[str, str], ...]:
        return ({"role": "system", "content": self.system()},
                {"role": "user", "content": self.user(view, chunk, notes)})


def check_reply(content: str | None, schema: dict[str, Any], shown: frozenset[int], cite: bool) -> dict[str, Any]:
    """The reply as a dict, or :class:`Rejected` saying why it cannot be counted."""
    if content is None or not content.strip():
        raise Rejected("empty reply")
    try:
        parsed = json.loads(content)
    except json.JSONDecodeError as exc:
        raise Rejected(f"not JSON: {exc.msg} at character {exc.pos}") from None
    try:
        jsonschema.validate(parsed, schema)
    except jsonschema.ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "reply"
        raise Rejected(f"does not meet the schema at {where}: {exc.message}") from None
    cited = parsed["evidence"]
    unknown = sorted({s for s in cited if s not in shown})
    if unknown:
        raise Rejected(f"cites seq(s) the judge was not shown: {', '.join(map(str, unknown[:10]))}")
    if cite and not cited:
        raise Rejected("cites no seq (the rubric requires evidence)")
    return parsed
