"""Where the command lines print: one console for standard output, one for standard error.

What procgrade prints quotes data from logs (run ids, paths, commands, rule names), so Rich is
told to leave text as it is: no highlighting and no emoji codes (a run id holding ``:fire:``
would otherwise print as an emoji, and no longer be the id to pass back), with soft wrapping.
Piped output (CI logs, files) gets tables 200 columns wide instead of Rich's 80-column default.
Every command-line module prints through these two, so they all behave alike.
"""

from __future__ import annotations

import sys

from rich.console import Console

__all__ = ["err", "out"]

out = Console(highlight=False, soft_wrap=True, emoji=False, width=None if sys.stdout.isatty() else 200)
err = Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)
