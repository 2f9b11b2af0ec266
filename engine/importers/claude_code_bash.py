"""How a Claude Code ``Bash`` call ended, from what its ``tool_result`` says.

Claude Code logs no exit code field. What it logs, and what each form proves:

- ``is_error`` on the ``tool_result`` block. Claude Code's Bash tool throws (and the result
  becomes an error) when the command's exit status counts as a failure: any non-zero status,
  except for ``grep``/``rg``/``find``/``diff``/``test``/``[`` (the first word of the line's
  last simple command), where only a status >= 2 does and status 1 is reported as success with
  a ``returnCodeInterpretation`` ("No matches found", "Files differ", ...). An interrupted or
  timed-out command is an error too. A call Claude Code refused before running (a permission
  denial, the user rejecting it, an input-validation ``<tool_use_error>``, a blocking hook) is
  an error as well, but nothing ran.
- The text of an error result. Claude Code formats a failed command as ``Exit code N``, the
  interrupt notice, stderr, stdout (newer versions; ``Error: Exit code N`` in the session
  file's ``toolUseResult`` string). Older versions (2.0.29, the bundled Terminal-Bench casts)
  give stderr and stdout only.
- ``toolUseResult`` (``tool_use_result`` in stream-json), when the log has it: ``interrupted``,
  ``returnCodeInterpretation``, ``backgroundTaskId``; ``run_in_background`` in the call's input.

Survey of the logs this project bundles (``tests/fixtures/imports/``), counted by form: the
Terminal-Bench casts (Claude Code 2.0.29 stream-json, 60 runs) hold 267 Bash results, all
with a result block: 235 ``is_error: false`` and 32 ``is_error: true``. None of the 32 states
an exit code (each text is the command's own stderr/stdout: tracebacks, ``file: command not
found``, ``ls: cannot access``, a failed pip build, an argparse usage error) and none is a
refusal; no result carries ``tool_use_result``. Of the 235 successes, 7 are background
launches (``Command running in background with ID: ...``) and 10 end in ``grep``/``find``
(status 0 or 1: not told apart without the structured result). The session-file fixtures
(``claude-code/``) hold no real Bash result; the tests add synthetic ones in the newer
``Exit code N`` form.

The mapping (``exit_code`` is the one ending field ``command``/``test_run`` events have; the
fact layer reads 0 as passed and any other value as failed; the raw record stays in the
event's payload, so a reader can always tell a stated code from a marker):

==================================================  ===========  ============================
result                                              exit_code    ``how``
==================================================  ===========  ============================
no result (the agent died first)                    null         ``unknown``
refused before running (see ``_REFUSALS``)          not a        ``refused``: kept as
                                                    command      ``source_record``
error whose text starts ``Exit code N``             N            ``stated``
error, interrupted / timed out, no code stated      null         ``interrupted``
error, no code stated                               1            ``failed``: Claude Code's
                                                                 convention guarantees a
                                                                 failure status; its value is
                                                                 not logged, 1 (the generic
                                                                 failure status) stands for it
success launched in the background                  null         ``background`` (not ended)
success, ``interrupted: true``                      null         ``interrupted``
success with a ``returnCodeInterpretation``         1            ``interpreted`` (only status
                                                                 1 of grep/find/diff/test is
                                                                 interpreted)
success, grep/rg/find/diff/test/[ last, no          null         ``ambiguous``: 0 or 1
structured result to tell 0 from 1
other success                                       0            ``succeeded``
``is_error`` absent, no structured verdict          null         ``unknown``
==================================================  ===========  ============================

A test run's counts come from its output as for any harness
(:func:`procgrade.engine.importers.test_runs.parse_test_counts`); its exit code from this table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from procgrade.engine.importers.shell import split_pipeline

__all__ = ["BashEnding", "bash_ending"]

# Base commands whose exit status 1 Claude Code reports as a success (commandSemantics).
_STATUS_ONE_IS_SUCCESS = {"grep", "rg", "find", "diff", "test", "["}

_STATED = re.compile(r"^(?:Error:\s*)?Exit code (-?\d+)\s*$")
_INTERRUPTED = re.compile(r"\[Request interrupted by user(?: for tool use)?\]|^Command timed out after\b|"
                          r"^Command was aborted before completion", re.M)
_BACKGROUND = re.compile(r"^Command running in background with ID:")
# Claude Code's words when it did not run the call at all.
_REFUSALS = re.compile(
    r"^\s*(?:Error:\s*)?(?:<tool_use_error>"
    r"|The user doesn't want to (?:proceed with|take) this (?:tool use|action)"
    r"|Permission to use \w+ (?:with command .* )?has been denied"
    r"|Claude requested permissions? to use \w+, but you haven't granted it"
    r"|This command requires approval"
    r"|\w+ operation blocked by hook"
    r"|Blocked by hook)", re.S)


@dataclass(frozen=True)
class BashEnding:
    """How one Bash call ended: ``exit_code`` (None when the log does not tell) and
    ``how`` (a word of the module docstring's table); ``ran`` is False for a refused call."""

    exit_code: int | None
    how: str
    ran: bool = True


def bash_ending(command: str, args: dict[str, Any], block: dict[str, Any] | None, text: str | None,
                outcome: Any) -> BashEnding:
    """The ending of a Bash call. ``block`` is its ``tool_result`` block (None when there is
    none), ``text`` the result's text, ``outcome`` the record's ``toolUseResult`` as logged
    (an object, Claude Code's error string, or None)."""
    if block is None:
        return BashEnding(None, "unknown")
    text = text or ""
    structured = outcome if isinstance(outcome, dict) else {}
    outcome_text = outcome if isinstance(outcome, str) else ""
    is_error = block.get("is_error")
    if is_error is not True and outcome_text.lstrip().startswith("Error:"):
        is_error = True  # the session file's own verdict when the block does not carry one
    background = args.get("run_in_background") is True or bool(structured.get("backgroundTaskId")) \
        or bool(_BACKGROUND.match(text.lstrip()))
    interrupted = structured.get("interrupted") is True or bool(_INTERRUPTED.search(text)) \
        or bool(_INTERRUPTED.search(outcome_text))
    if is_error is True:
        if _REFUSALS.match(text) or _REFUSALS.match(outcome_text):
            return BashEnding(None, "refused", ran=False)
        stated = _stated_code(text) if _stated_code(text) is not None else _stated_code(outcome_text)
        if stated is not None:
            return BashEnding(stated, "stated")
        if interrupted:
            return BashEnding(None, "interrupted")
        return BashEnding(1, "failed")
    if is_error is not False:
        return BashEnding(None, "unknown")
    if background:
        return BashEnding(None, "background")
    if interrupted:
        return BashEnding(None, "interrupted")
    interpretation = structured.get("returnCodeInterpretation")
    if isinstance(interpretation, str) and interpretation.strip():
        return BashEnding(1, "interpreted")
    if _base_command(command) in _STATUS_ONE_IS_SUCCESS and not structured:
        return BashEnding(None, "ambiguous")
    return BashEnding(0, "succeeded")


def _stated_code(text: str) -> int | None:
    """The code of Claude Code's leading ``Exit code N`` line (never a number the command printed)."""
    for line in text.splitlines():
        if line.strip():
            found = _STATED.match(line.strip())
            return int(found.group(1)) if found else None
    return None


def _base_command(command: str) -> str | None:
    """The first word of the line's last simple command, as Claude Code picks it
    (variable assignments skipped)."""
    commands = split_pipeline(command)
    if not commands:
        return None
    words = [w for w in commands[-1] if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", w)]
    return words[0].rsplit("/", 1)[-1] if words else None
