"""The tables every command prints: Rich's, printed a column at a time when no cell wraps.

Rich lays out and renders each cell of a table on its own, about half a millisecond a cell
row on this project's machines: ``rescore --all`` of 500 runs spent a third of its time printing
its table, and a listing of thousands of rows takes seconds. When every cell is one line of
text and the table's natural width fits the console, no cell wraps and each row is one line,
so a table holding each column's cells joined into one multi-line cell prints the very same
characters, styles included, at a quarter of the cost. Any other table (a cell that wraps or
holds several lines, row styles, lines between rows, fixed widths, a footer) prints as Rich
prints it.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING

from rich.errors import MarkupError
from rich.padding import Padding
from rich.table import Column, Row
from rich.table import Table as RichTable
from rich.text import Text

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderResult

__all__ = ["Table"]


class Table(RichTable):
    """:class:`rich.table.Table`, printed with one multi-line cell per column where that prints
    the same characters (see the module's docstring); measured and built like Rich's."""

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        merged = self._by_columns(console, options.max_width)
        if merged is None:
            yield from super().__rich_console__(console, options)
        else:
            yield from RichTable.__rich_console__(merged, console, options)

    def _by_columns(self, console: Console, max_width: int) -> RichTable | None:
        """This table with each column's cells joined into one cell, or None when the two could
        print differently: anything but plain one-line text cells, any layout that is not the
        natural width of every column, or a natural width wider than ``max_width``."""
        if (len(self.rows) < 2 or self.show_lines or self.show_footer or self.row_styles or self.leading
                or self.expand or self.width is not None or self.min_width is not None
                or any(row.style is not None or row.end_section for row in self.rows)):
            return None
        top, right, bottom, left = Padding.unpack(self.padding)
        if top or bottom:
            return None
        columns: list[Column] = []
        width = (2 if self.box and self.show_edge else 0) + (len(self.columns) - 1 if self.box else 0)
        for column in self.columns:
            if (column.width is not None or column.min_width is not None or column.max_width is not None
                    or column.ratio is not None):
                return None
            lines = [self._one_line(console, cell) for cell in column._cells]
            if any(line is None for line in lines) or not lines[-1].plain:  # a last line left blank is dropped
                return None
            header = self._one_line(console, column.header)
            if header is None:
                return None
            widest = max([header.cell_len, *(line.cell_len for line in lines)])  # type: ignore[union-attr]
            if not widest:  # no room for text at all: Rich folds the lines of a multi-line cell together
                return None
            width += widest + left + right
            merged = copy.copy(column)
            merged._cells = [Text("\n").join(lines)]  # type: ignore[arg-type]
            columns.append(merged)
        if width > max_width:  # Rich would narrow columns, and wrapped cells would shift the rows below
            return None
        table = copy.copy(self)
        table.columns = columns
        table.rows = [Row()]
        return table

    def _one_line(self, console: Console, cell: object) -> Text | None:
        """The cell as the Text Rich renders for it, if that is one line laid out by its column
        alone (no tab; no justification, overflow or style of its own, which would also cover
        the padding Rich adds to it); else None."""
        if isinstance(cell, str):
            try:
                text = console.render_str(cell, highlight=self.highlight)
            except MarkupError:  # Rich's own rendering raises it, in its order of cells
                return None
        elif isinstance(cell, Text):
            text = cell
        else:
            return None
        if (text.style or text.justify is not None or text.overflow is not None or text.no_wrap is not None
                or text.end != "\n" or "\n" in text.plain or "\t" in text.plain):
            return None
        return text
