"""Plain text options without pydantic: a start-up shortcut in Typer's value coercion.

Typer (0.2x and later) coerces every option value through a pydantic ``TypeAdapter``, built on
first use; for ``--db URL`` that first use imports pydantic and its plugin loader, a large part
of a short command's start (``procgrade runs --db ...``). For a ``str`` parameter given a
``str`` that encodes as UTF-8, Typer's coercion (``_parse_cli_str``, then pydantic's lax ``str``
validation) returns the value unchanged, as it does a ``bool`` for a ``bool`` parameter (``--help``)
and None for either, so :func:`install` answers exactly these cases without pydantic and hands
every other value (and every other type) to Typer's own coercion, built as Typer builds it. On a
Typer without these internals it does nothing.
"""

from __future__ import annotations

from typing import Any

__all__ = ["install"]


def install() -> None:
    """Let ``str``/``bool`` parameters pass plain values through without building pydantic adapters."""
    try:
        from typer import _coercion, core
    except ImportError:
        return
    parameter = getattr(core, "_TyperParameter", None)
    build = getattr(_coercion, "build_runtime_param", None)
    if parameter is None or build is None or not hasattr(parameter, "get_runtime_param"):
        return
    if getattr(parameter.get_runtime_param, "_plain_text", False):
        return
    typer_runtime_param = parameter.get_runtime_param

    class PlainText:
        """Typer's runtime parameter for a ``str`` or ``bool`` annotation, built only when a value needs it."""

        def __init__(self, descriptor: Any) -> None:
            self._descriptor = descriptor
            self._typer: Any = None

        def coerce(self, value: Any, param: Any, ctx: Any) -> Any:
            if not (param.multiple or param.nargs == -1):  # Typer's coerce() answers None the same way
                if value is None or type(value) is bool is self._descriptor.annotation:
                    return value
                if type(value) is str is self._descriptor.annotation and _utf8(value):
                    return value
            if self._typer is None:
                self._typer = build(self._descriptor)
            return self._typer.coerce(value, param=param, ctx=ctx)

        def __getattr__(self, name: str) -> Any:  # anything else Typer asks of its runtime parameter
            if self._typer is None:
                self._typer = build(self._descriptor)
            return getattr(self._typer, name)

    def get_runtime_param(self: Any) -> Any:
        descriptor = getattr(self, "type_descriptor", None)
        if (getattr(self, "_runtime_param", True) is None and descriptor is not None
                and descriptor.annotation in (str, bool) and descriptor.file_annotation is None
                and getattr(descriptor.parameter_info, "parser", None) is None):
            self._runtime_param = PlainText(descriptor)
            return self._runtime_param
        return typer_runtime_param(self)

    get_runtime_param._plain_text = True  # type: ignore[attr-defined]
    parameter.get_runtime_param = get_runtime_param


def _utf8(value: str) -> bool:
    """Whether pydantic takes ``value`` as it is (a string with lone surrogates, as undecodable
    arguments arrive, is left to it)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
