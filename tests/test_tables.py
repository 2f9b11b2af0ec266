"""procgrade's Table prints exactly what Rich's prints, and takes its shortcuts where the
listings need them (many one-line rows that fit the console): lines of text where no style
shows, a column at a time on a terminal."""

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
# characters, joiners and variation selectors, tabs, newlines and the other line breaks: what
# run ids, commands and paths in real logs hold. (Links are left out: Rich numbers them anew
# each time it prints.)
_ODD = ["\u0301", "\u200b", "\u200d", "\ufe0f", "\u2028", "\x85", "\x1c", "☺"]
_CHARS = st.sampled_from(list("abcdefgh z09/-.") * 4 + ["[", "]", "[bold]", "[/]", ":", ":fire:", "漢", "🙂", "é",
                                                         "\t", "\n", "…", "\\", "  ", *_ODD])
_TEXT = st.lists(_CHARS, max_size=12).map("".join)
_STYLED = st.tuples(_TEXT, st.sampled_from(["", "", "bold", "red on blue"]), st.sampled_from([None, None, "right"]))


#: Every box Rich defines (their rows' edges and dividers differ in some).
_BOXES = [value for name, value in vars(box).items() if isinstance(value, box.Box)]

_PLAIN_CHARS = st.sampled_from(list("abcdefgh z09/-.") * 6 + ["[", "]", "[bold]", "[/]", "[/bold]", ":", ":fire:",
                                                               "漢", "🙂", "é", "…", "\\", "  ", *_ODD])
_PLAIN_TEXT = st.lists(_PLAIN_CHARS, max_size=12).map("".join)
_PLAIN_ASCII = st.text("abc xyz0123-./", max_size=12)  # most cells of real listings


@st.composite
def tables(draw: st.DrawFn) -> dict:
    """Any table; half of them listings of one-line cells (the column-at-a-time path's case)."""
    columns = draw(st.integers(1, 5))
    listing = draw(st.booleans())
    text = _PLAIN_TEXT if listing else _TEXT
    if listing:
        cell = st.one_of(text, text.map(Text), text.map(Text), _PLAIN_ASCII)
    else:
        cell = st.one_of(_TEXT, _TEXT, _TEXT, _STYLED)
    return {
        "headers": draw(st.lists(text, min_size=columns, max_size=columns)),
        "justify": draw(st.lists(st.sampled_from(["left", "right", "center"]), min_size=columns, max_size=columns)),
        "overflow": draw(st.lists(st.sampled_from(["fold", "ellipsis"] + ([] if listing else ["ignore"])),
                                  min_size=columns, max_size=columns)),
        "highlight": draw(st.lists(st.sampled_from([False, False, True]), min_size=columns, max_size=columns)),
        "markup": draw(st.sampled_from([None, None, False])),  # as console.print(table, markup=...) says
        "rows": draw(st.lists(st.lists(cell, min_size=columns, max_size=columns), max_size=8)),
        "box": draw(st.sampled_from([box.HEAVY_HEAD, None, *_BOXES])),
        "show_header": draw(st.sampled_from([True, True, False])),
        "pad_edge": True if listing else draw(st.booleans()),
        "collapse_padding": False if listing else draw(st.booleans()),
        "caption": draw(st.one_of(st.none(), text)),
        "title_justify": draw(st.sampled_from(["center", "left", "right"])),
        "show_edge": draw(st.booleans()),
        "padding": draw(st.sampled_from([(0, 1), (0, 0), (0, 2)] + ([] if listing else [(1, 1)]))),
        "title": draw(st.one_of(st.none(), text)),
        "header_style": draw(st.sampled_from(["bold", "", "italic red"])),
        "show_lines": False if listing else draw(st.booleans()),
        "width": draw(st.integers(40, 160) if listing else st.integers(10, 160)),
        "color": draw(st.booleans()),
    }


def printed(cls: type[RichTable], spec: dict) -> str:
    console = Console(file=io.StringIO(), width=spec["width"], highlight=False, soft_wrap=True, emoji=False,
                      force_terminal=spec["color"], color_system="truecolor" if spec["color"] else None)
    table = cls(title=spec["title"], caption=spec["caption"], title_justify=spec["title_justify"], box=spec["box"],
                show_edge=spec["show_edge"], show_header=spec["show_header"], padding=spec["padding"],
                pad_edge=spec["pad_edge"], collapse_padding=spec["collapse_padding"],
                header_style=spec["header_style"], show_lines=spec["show_lines"])
    for header, justify, overflow, highlight in zip(spec["headers"], spec["justify"], spec["overflow"],
                                                    spec["highlight"]):
        table.add_column(header, justify=justify, overflow=overflow, highlight=highlight)
    for row in spec["rows"]:
        table.add_row(*(Text(cell[0], style=cell[1], justify=cell[2]) if isinstance(cell, tuple) else cell
                        for cell in row))  # a Text cell is printed as it is, a str cell as markup
    try:
        console.print(table, markup=spec["markup"])
    except MarkupError as exc:  # bad markup in a str cell: the same error either way
        return f"MarkupError: {exc}"
    return console.file.getvalue()  # type: ignore[attr-defined]


@settings(max_examples=1000, deadline=None)
@given(tables())
def test_prints_what_rich_prints(spec: dict) -> None:
    assert printed(Table, spec) == printed(RichTable, spec)


def listing(rows: int, run_id_length: int = 40) -> Table:
    table = Table("run", "events", "process score", title="rule set default")
    for index in range(rows):
        table.add_row(Text(f"{index}-".ljust(run_id_length, "r")), str(35 + index), "[bold]1/2[/] graded")
    return table


def console(width: int = 200, *, color: bool = False) -> Console:
    return Console(file=io.StringIO(), width=width, highlight=False, emoji=False, force_terminal=color,
                   color_system="truecolor" if color else None)


def test_a_listing_that_fits_prints_as_lines_of_text_where_no_style_shows() -> None:
    plain, table = console(), listing(500)
    assert table._one_line_layout(plain, plain.options) is not None
    rich_path = []
    table._by_columns = lambda layout: rich_path.append(layout)  # type: ignore[method-assign]
    plain.print(table)
    assert rich_path == []
    lines = plain.file.getvalue().splitlines()  # type: ignore[attr-defined]
    assert len(lines) == 1 + 3 + 500 + 1  # title, top border, header, rule, a line a row, bottom border
    assert lines[4].startswith("│ 0-rrr") and "│ 1/2 graded    │" in lines[4] and "[bold]" not in lines[4]
    assert plain.file.getvalue() == printed_by_rich(listing(500), 200)  # type: ignore[attr-defined]


def test_a_blank_last_cell_keeps_the_shortcut_where_no_style_shows() -> None:
    """A timeline's last event often has no stage: its blank cell would be dropped from a joined
    column, but lines of text print it, so only the terminal's shortcut is given up."""
    table = listing(3)
    table.add_row(Text("last"), "", "")
    plain, terminal = console(), console(color=True)
    layout = table._one_line_layout(plain, plain.options)
    assert layout is not None and not layout.joinable
    plain.print(table)
    assert plain.file.getvalue().splitlines()[-2].startswith("│ last ")  # type: ignore[attr-defined]
    assert plain.file.getvalue() == printed_by_rich(table, 200)  # type: ignore[attr-defined]
    terminal.print(table)
    assert terminal.file.getvalue() == printed_by_rich(table, 200, color=True)  # type: ignore[attr-defined]


def test_a_listing_that_fits_prints_a_column_at_a_time_on_a_terminal() -> None:
    terminal, table = console(color=True), listing(50)
    layout = table._one_line_layout(terminal, terminal.options)
    assert layout is not None
    merged = table._by_columns(layout)
    assert len(merged.rows) == 1 and all(len(column._cells) == 1 for column in merged.columns)
    terminal.print(table)
    assert "\x1b[1m" in terminal.file.getvalue()  # type: ignore[attr-defined]  # the header's bold shows
    assert terminal.file.getvalue() == printed_by_rich(listing(50), 200, color=True)  # type: ignore[attr-defined]


def test_a_listing_wider_than_the_console_prints_as_rich_does() -> None:
    narrow, table = console(60), listing(3, run_id_length=70)
    assert table._one_line_layout(narrow, narrow.options) is None
    narrow.print(table)
    assert narrow.file.getvalue() == printed_by_rich(listing(3, run_id_length=70), 60)  # type: ignore[attr-defined]


def printed_by_rich(table: Table, width: int, *, color: bool = False) -> str:
    rich_console = console(width, color=color)
    rich = RichTable(*(column.header for column in table.columns), title=table.title)
    for index in range(len(table.rows)):
        rich.add_row(*(column._cells[index] for column in table.columns))
    rich_console.print(rich)
    return rich_console.file.getvalue()  # type: ignore[attr-defined]
