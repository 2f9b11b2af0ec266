"""The tables every command prints: Rich's, printed without Rich's cell-by-cell work when no
cell wraps.

Rich lays out and renders each cell of a table on its own, about half a millisecond a row on
this project's machines: ``rescore --all`` of 500 runs spent a third of its time printing its
table, and ``runs`` on a store of 10,000 runs took four seconds. When every cell is one line of
text and the table's natural width fits the console, no cell wraps and each row is one line,
so the table can be printed without that work, to the same characters:

* where no style shows (piped output, files), as lines of text built directly
  (the box, padding and justification Rich would give them);
* on a terminal, as a table whose every column holds its cells joined into one multi-line
  cell, which Rich lays out once per column instead of once per cell (styles kept).

Any other table (a cell that wraps or holds a line break of any kind, row styles, lines between
rows, fixed widths, a footer, links) is printed by Rich as it is. A property test holds both
ways to Rich's own output.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from collections.abc import Iterable
from typing import TYPE_CHECKING

from rich.cells import cell_len
from rich.errors import MarkupError
from rich.padding import Padding
from rich.segment import Segment
from rich.table import Column, Row
from rich.table import Table as RichTable
from rich.text import Text

if TYPE_CHECKING:
    from rich.box import Box
    from rich.console import Console, ConsoleOptions, RenderResult

__all__ = ["Table"]


@dataclass(frozen=True)
class _Layout:
    """A table whose rows are one line each at its columns' natural widths."""

    box: Box | None  # as Rich draws it on this console
    headers: list[Text]
    cells: list[list[Text]]  # per column, its rows' cells
    widths: list[int]  # per column, padding included
    left: int
    right: int
    joinable: bool  # each column's cells can be joined into one multi-line cell
    width: int  # the table's, borders included


class Table(RichTable):
    """:class:`rich.table.Table`, printed without Rich's per-cell work where that prints the
    same characters (see the module's docstring); built and measured like Rich's."""

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        layout = self._one_line_layout(console, options)
        plain = (console.color_system is None and not console.record and not console.legacy_windows
                 and console.encoding.startswith("utf"))
        if layout is not None and plain:
            yield from self._plain_lines(console, options, layout)
        elif layout is not None and layout.joinable:
            yield from RichTable.__rich_console__(self._by_columns(layout), console, options)
        else:
            yield from super().__rich_console__(console, options)

    def _one_line_layout(self, console: Console, options: ConsoleOptions) -> _Layout | None:
        """The table's cells as Rich renders them and its columns' widths, or None unless every
        row prints as one line: plain one-line text cells, no fixed widths, rules or row
        styles, and a natural width within ``options.max_width`` (else Rich narrows columns and
        wraps)."""
        if (not self.columns or self.show_lines or self.show_footer or self.row_styles or self.leading
                or self.expand or self.width is not None or self.min_width is not None
                or self.collapse_padding or not self.pad_edge
                or any(row.style is not None or row.end_section for row in self.rows)
                or any(len(column._cells) != len(self.rows) for column in self.columns)  # added after rows
                or _linked(console, self.style) or _linked(console, self.border_style)):
            return None
        box = self._box(console)
        if box is not None and not _rows_look_alike(box, self.show_header):
            return None
        top, right, bottom, left = Padding.unpack(self.padding)
        if top or bottom:
            return None
        headers, cells, widths, joinable = [], [], [], True
        for column in self.columns:
            if (column.width is not None or column.min_width is not None or column.max_width is not None
                    or column.ratio is not None or column.justify not in ("left", "center", "right")
                    or column.overflow == "ignore" or _linked(console, column.style)):  # "ignore": not justified
                return None
            lines = [self._one_line(console, options, column, cell) for cell in column._cells]
            if any(line is None for line in lines) or not (lines or self.show_header):  # nothing to measure
                return None
            header = self._one_line(console, options, column, column.header)
            if header is None:
                return None
            widest = max([header.cell_len if self.show_header else 0,
                          *(line.cell_len for line in lines)])  # type: ignore[union-attr]
            if not widest and any(text.plain for text in (header, *lines)):  # type: ignore[union-attr]
                return None  # zero-width characters alone in a column without room: Rich's to lay out
            # A multi-line cell drops a last line left blank, and folds its lines together in a
            # column with no room for text: joined, such a column would lose rows.
            joinable = (joinable and len(lines) > 1 and bool(widest)
                        and bool(lines[-1].plain))  # type: ignore[union-attr]
            headers.append(header)
            cells.append(lines)
            widths.append(max(widest + left + right, 1))  # Rich's width of a column of empty cells, unpadded: 1
        borders = (2 if box is not None and self.show_edge else 0) + (len(widths) - 1 if box is not None else 0)
        width = sum(widths) + borders
        if width > options.max_width:
            return None
        return _Layout(box, headers, cells, widths, left, right, joinable, width)  # type: ignore[arg-type]

    def _one_line(self, console: Console, options: ConsoleOptions, column: Column, cell: object) -> Text | None:
        """The cell as the Text Rich renders for it in ``column`` (markup read as the print
        options say, highlighted as the column says), if that is one line laid out by its column
        alone; else None. Not such a line: a tab or line break of any kind, characters whose
        width Rich reckons by grapheme (joiners, variation selectors, modifiers), a style,
        justification or overflow of the text's own (a style would also cover the padding),
        spans that are empty, run past the text or link, and anything but an exact str or Text
        (a subclass may render itself)."""
        kind = type(cell)
        if kind is str:
            try:
                text = console.render_str(cell, highlight=column.highlight, markup=options.markup)  # type: ignore[arg-type]
            except MarkupError:  # Rich's own rendering raises it, in its order of cells
                return None
        elif kind is Text:
            text = cell  # type: ignore[assignment]
        else:
            return None
        plain = text.plain
        if (text.style or text.justify is not None or text.overflow is not None or text.no_wrap is not None
                or text.end != "\n" or _NOT_ONE_LINE.search(plain) is not None):
            return None
        if text.spans and any(span.start >= span.end or span.end > len(plain) or _linked(console, span.style)
                              for span in text.spans):
            return None
        return text

    def _box(self, console: Console) -> Box | None:
        """The box Rich draws this table with on ``console`` (as in ``Table._render``)."""
        if not self.box:
            return None
        box = self.box.substitute(console.options, safe=self.safe_box if self.safe_box is not None
                                  else console.safe_box)
        return box if self.show_header else box.get_plain_headed_box()

    def _by_columns(self, layout: _Layout) -> RichTable:
        """This table with each column's cells joined into one multi-line cell."""
        columns: list[Column] = []
        for column, lines in zip(self.columns, layout.cells):
            merged = copy.copy(column)
            merged._cells = [Text("\n").join(lines)]
            columns.append(merged)
        table = copy.copy(self)
        table.columns = columns
        table.rows = [Row()]
        return table

    def _plain_lines(self, console: Console, options: ConsoleOptions, layout: _Layout) -> RenderResult:
        """The table as lines of text: what Rich prints where no style shows."""
        box, widths, left, right = layout.box, layout.widths, " " * layout.left, " " * layout.right
        inner = [width - layout.left - layout.right for width in widths]  # the text's room in each column
        justify = [column.justify for column in self.columns]
        render_options = options.update(width=layout.width, highlight=self.highlight, height=None)
        if self.title:
            yield from self._annotation(console, render_options, self.title, self.title_justify)
        head = (box.head_left, box.head_vertical, box.head_right) if box is not None else ("", "", "")
        body = (box.mid_left, box.mid_vertical, box.mid_right) if box is not None else ("", "", "")
        edges = box is not None and self.show_edge

        def line(cells: Iterable[Text], edge: str, divider: str, end: str) -> Segment:
            text = divider.join([left + _justified(cell.plain, room, how) + right
                                 for cell, room, how in zip(cells, inner, justify)])
            return Segment((edge + text + end if edges else text) + "\n")

        if edges:
            yield Segment(box.get_top(widths) + "\n")  # type: ignore[union-attr]
        if self.show_header:
            yield line(layout.headers, *head)
            if box is not None:
                yield Segment(box.get_row(widths, "head", edge=self.show_edge) + "\n")
        yield from (line(row, *body) for row in zip(*layout.cells))
        if edges:
            yield Segment(box.get_bottom(widths) + "\n")  # type: ignore[union-attr]
        if self.caption:
            yield from self._annotation(console, render_options, self.caption, self.caption_justify)

    def _annotation(self, console: Console, options: ConsoleOptions, text: object, justify: str) -> RenderResult:
        """A title or caption as Rich renders it above or below the table (styles show nowhere here)."""
        rendered = console.render_str(text, highlight=False) if isinstance(text, str) else text
        return console.render(rendered, options=options.update(justify=justify))  # type: ignore[arg-type]


#: Characters that break a cell into lines (Rich sizes cells by ``str.splitlines``), tabs, and
#: characters Rich 15 measures by grapheme cluster: zero-width joiner, variation selectors,
#: regional indicators, skin-tone modifiers, tags.
_NOT_ONE_LINE = re.compile("[\t\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029\u200d\ufe00-\ufe0f"
                           "\U0001f1e6-\U0001f1ff\U0001f3fb-\U0001f3ff\U000e0000-\U000e007f\U000e0100-\U000e01ef]")


def _linked(console: Console, style: object) -> bool:
    """Does ``style`` hold a hyperlink? Rich gives each rendered piece of a link an id of its
    own, which joined cells would share."""
    if not style:
        return False
    if isinstance(style, str):
        return "link" in style and bool(console.get_style(style, default="").link)
    return bool(getattr(style, "link", None))


def _justified(text: str, width: int, justify: str) -> str:
    """``text`` (at most ``width`` cells) padded to ``width`` as Rich justifies a line."""
    if justify == "left":
        return text + " " * (width - cell_len(text))
    text = text.rstrip()
    excess = width - cell_len(text)
    if justify == "right":
        return " " * excess + text
    return " " * (excess // 2) + text + " " * (excess - excess // 2)


def _rows_look_alike(box: Box, show_header: bool) -> bool:
    """Do the box's first, middle and last rows share their edges and dividers? Rich draws a
    table's first row with the head's, its last with the foot's; one multi-line row is both."""
    mid = (box.mid_left, box.mid_vertical, box.mid_right)
    return mid == (box.foot_left, box.foot_vertical, box.foot_right) and (
        show_header or mid == (box.head_left, box.head_vertical, box.head_right))
