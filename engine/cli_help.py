"""Readable help: placeholders a user understands (``--db URL``, ``RUN...``), never Python types.

Typer shows a parameter's Python type (``--all <bool>``, ``<list[str]>``) unless it has a
metavar. Rather than spelling one out on every option of every command, :func:`readable_help`
gives each parameter of the built command tree a metavar named for what it takes: by option
name where the name says it, by type otherwise; flags show none.
"""

from __future__ import annotations

from typing import Any

__all__ = ["readable_help", "OPTION_METAVARS", "ARGUMENT_METAVARS"]

#: Option (its longest name) -> what the user types after it.
OPTION_METAVARS = {
    "--db": "URL", "--rules": "FILE", "--workers": "N", "--by": "FIELD", "--seed": "N",
    "--resamples": "N", "--bootstrap": "N", "--json": "FILE", "--html": "FILE", "--output": "FILE",
    "--format": "FORMAT", "--task": "DIR", "--workspace": "DIR", "--run": "RUN", "--backend": "local|docker",
    "--candidate": "GRADER", "--reference": "GRADER", "--layer": "LAYER", "--k": "K", "--timeout": "SECONDS",
    "--submit-file": "FILE", "--min-coverage": "FRACTION", "--label": "KEY=VALUE", "--system": "NAME",
    "--model": "MODEL",
}
#: Argument name -> placeholder.
ARGUMENT_METAVARS = {
    "paths": "PATH", "run_ids": "RUN", "run_id": "RUN", "directory": "DIR", "path": "PATH",
}
_BY_TYPE = {"int": "N", "integer": "N", "float": "NUMBER", "path": "PATH", "text": "TEXT", "str": "TEXT",
            "bool": "", "boolean": ""}


def readable_help(command: Any) -> None:
    """Give every parameter of ``command`` and its subcommands a readable metavar (in place)."""
    for param in getattr(command, "params", ()):
        _name_param(param)
    make_help_option = getattr(command, "get_help_option", None)
    if make_help_option is not None and not getattr(make_help_option, "_readable", False):
        def get_help_option(ctx: Any) -> Any:  # --help is made per context: name it when it is
            option = make_help_option(ctx)
            if option is not None:
                _name_param(option)
            return option

        get_help_option._readable = True  # type: ignore[attr-defined]
        command.get_help_option = get_help_option
    for sub in getattr(command, "commands", {}).values():
        readable_help(sub)


def _name_param(param: Any) -> None:
    if getattr(param, "param_type_name", "") == "argument":
        if param.metavar is None:
            param.metavar = ARGUMENT_METAVARS.get(param.name or "", (param.name or "VALUE").upper())
        # Typer >= 0.20 prints the Python type beside an argument's name; the name says it all.
        if hasattr(param, "display_type_rich"):
            param.display_type_rich = lambda ctx: None
        if hasattr(param, "_usage_display_name"):  # ... and writes a required one as {RUN} in the usage line
            many = "..." if param.nargs != 1 else ""
            shown = f"{param.metavar}{many}" if param.required else f"[{param.metavar}{many}]"
            param._usage_display_name = lambda: shown
        return
    if getattr(param, "is_flag", False) or getattr(param, "count", False):
        param.metavar = ""
        return
    if param.metavar is not None:
        return
    longest = max(getattr(param, "opts", ()) or [""], key=len)
    named = OPTION_METAVARS.get(longest)
    if named is None:
        type_name = str(getattr(getattr(param, "type", None), "name", "text")).lower()
        named = _BY_TYPE.get(type_name, longest.lstrip("-").upper().replace("-", "_") or "VALUE")
    param.metavar = named
