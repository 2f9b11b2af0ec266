"""procgrade's Table prints exactly what Rich's prints, and takes its column-at-a-time path
where the listings need it (a listing of many one-line rows that fits the console)."""

from __future__ import annotations

import io

from hypothesis import given, settings
from hypothesis import strategies as st
from rich import box
from rich.console import Console
from rich.errors import MarkupError
from rich.table import Table as RichTable
from rich.text import Text

from procgrade.engine.tables import Table

# Letters and spaces (most of them), markup brackets, emoji-code colons, wide and zero-width
# characters, tabs and newlines: what run ids, commands and paths in real logs hold.
_CHARS = st.sampled_from(list("abcdefgh z09/-.") * 4 + ["[", "]", "[bold]", "[/]", ":", ":fire:", "漢", "🙂", "é",
                                                         "\u0301", "\u200b", "\t", "\n", "…", "\\", "  "])
_TEXT = st.lists(_CHARS, max_size=12).map("".join)
_STYLED = st.tuples(_TEXT, st.sampled_from(["", "", "bold", "red on blue"]), st.sampled_from([None, None, "right"]))


_PLAIN_CHARS = st.sampled_from(list("abcdefgh z09/-.") * 4 + ["[", "]", "[bold]", "[/]", "[/bold]", ":", ":fire:",
                                                               "漢", "🙂", "é", "\u0301", "\u200b", "…", "\\", "  "])
_PLAIN_TEXT = st.lists(_PLAIN_CHARS, max_size=12).map("".join)


@st.composite
def tables(draw: st.DrawFn) -> dict:
    """Any table; half of them listings of one-line cells (the column-at-a-time path's case)."""
    columns = draw(st.integers(1, 5))
    listing = draw(st.booleans())
    text = _PLAIN_TEXT if listing else _TEXT
    cell = st.one_of(text, text.map(Text)) if listing else st.one_of(_TEXT, _TEXT, _TEXT, _STYLED)
    return {
        "headers": draw(st.lists(text, min_size=columns, max_size=columns)),
        "justify": draw(st.lists(st.sampled_from(["left", "right", "center"]), min_size=columns, max_size=columns)),
        "rows": draw(st.lists(st.lists(cell, min_size=columns, max_size=columns), min_size=2 * listing, max_size=8)),
        "box": draw(st.sampled_from([box.HEAVY_HEAD, None, box.SIMPLE, box.ROUNDED])),
        "show_edge": draw(st.booleans()),
        "padding": draw(st.sampled_from([(0, 1), (0, 0), (0, 2)] + ([] if listing else [(1, 1)]))),
        "title": draw(st.one_of(st.none(), text)),
        "header_style": draw(st.sampled_from(["bold", "", "italic red"])),
        "show_lines": False if listing else draw(st.booleans()),
        "width": draw(st.integers(10, 160)),
        "color": draw(st.booleans()),
    }


def printed(cls: type[RichTable], spec: dict) -> str:
    console = Console(file=io.StringIO(), width=spec["width"], highlight=False, soft_wrap=True, emoji=False,
                      force_terminal=spec["color"], color_system="truecolor" if spec["color"] else None)
    table = cls(title=spec["title"], box=spec["box"], show_edge=spec["show_edge"], padding=spec["padding"],
                header_style=spec["header_style"], show_lines=spec["show_lines"])
    for header, justify in zip(spec["headers"], spec["justify"]):
        table.add_column(header, justify=justify)
    for row in spec["rows"]:
        table.add_row(*(Text(cell[0], style=cell[1], justify=cell[2]) if isinstance(cell, tuple) else cell
                        for cell in row))  # a Text cell is printed as it is, a str cell as markup
    try:
        console.print(table)
    except MarkupError as exc:  # bad markup in a str cell: the same error either way
        return f"MarkupError: {exc}"
    return console.file.getvalue()  # type: ignore[attr-defined]


@settings(max_examples=400, deadline=None)
@given(tables())
def test_prints_what_rich_prints(spec: dict) -> None:
    assert printed(Table, spec) == printed(RichTable, spec)


def listing(rows: int, run_id_length: int = 40) -> Table:
    table = Table("run", "events", "process score", title="rule set default")
    for index in range(rows):
        table.add_row(Text(f"{index}-".ljust(run_id_length, "r")), str(35 + index), "[bold]1/2[/] graded")
    return table


def test_a_listing_that_fits_prints_by_columns() -> None:
    console = Console(file=io.StringIO(), width=200, highlight=False, emoji=False)
    table = listing(500)
    merged = table._by_columns(console, 200)
    assert merged is not None
    assert len(merged.rows) == 1 and all(len(column._cells) == 1 for column in merged.columns)
    console.print(table)
    lines = console.file.getvalue().splitlines()  # type: ignore[attr-defined]
    assert len(lines) == 1 + 3 + 500 + 1  # title, top border, header, rule, a line a row, bottom border
    assert lines[4].startswith("│ 0-rrr") and "1/2 graded" in lines[4] and "[bold]" not in lines[4]


def test_a_listing_wider_than_the_console_prints_as_rich_does() -> None:
    console = Console(file=io.StringIO(), width=60, highlight=False, emoji=False)
    table = listing(3, run_id_length=70)
    assert table._by_columns(console, 60) is None
    console.print(table)
    assert console.file.getvalue() == printed_by_rich(listing(3, run_id_length=70), 60)  # type: ignore[attr-defined]


def printed_by_rich(table: Table, width: int) -> str:
    console = Console(file=io.StringIO(), width=width, highlight=False, emoji=False)
    rich = RichTable(*(column.header for column in table.columns), title=table.title)
    for index in range(len(table.rows)):
        rich.add_row(*(column._cells[index] for column in table.columns))
    console.print(rich)
    return console.file.getvalue()  # type: ignore[attr-defined]
