"""A table as plain data: what a report hands the command line (or any other front end) to show.

Reports are pydantic models built in :mod:`commitbench.analysis`; each can describe itself as a list
of :class:`TableView` (a title, column headers, rows of text cells, a note). Front ends render
those without knowing what the numbers mean; a table may also say, per cell, which runs a number
stands on (:data:`RunFilter`), so a front end that lists runs can link each number to them.

Everything here is shared by every suite, so each exists once:

* the text of a number: :func:`percent` (``62%``) and :func:`interval_text` (``62% [40, 81]``,
  ``+12 pp [-3, +25]`` for a difference, ``62% n/a (2 clusters)`` when too few clusters gave no
  interval), used in every table a report shows or writes, and the note that says why a table shows
  ``n/a`` (:func:`note_withheld`);
* the Markdown of a table: :meth:`TableView.markdown` (a data frame goes through
  :meth:`TableView.from_frame` first);
* the files of a report: :func:`write_report_files` writes each :class:`ReportTable` under
  ``RUN_DIR/report/`` as CSV (its data) and Markdown (its text), and draws each :class:`ReportFigure`
  (one whose data is final may start sooner, drawn on another core: :func:`started_figure`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from commitbench.analysis.bootstrap import MIN_CLUSTERS, interval_note

if TYPE_CHECKING:
    import pandas as pd

# The runs behind a number: run field -> the values it may take (any of them), ANDed over the fields.
# The key ``metric`` names a metric: the runs that metric reads (its denominator, before runs excluded
# for a missing judge label). Field names are the run rows' column names (agent, interventions, cell...).
RunFilter = dict[str, list[str]]


def _known(value: Any) -> bool:
    """False for a missing number (None, NaN)."""
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def percent(value: float | None) -> str:
    """A share as a whole percent, ``62%``; ``-`` when undefined (None or NaN)."""
    if value is None or not _known(value):
        return "-"
    return f"{100 * value:.0f}%"


def interval_text(
    estimate: float | None, low: float | None, high: float | None, signed: bool = False, clusters: int | None = None
) -> str:
    """An estimate with its 95% interval, as every table shows it.

    ``62% [40, 81]`` for a rate; ``+12 pp [-3, +25]`` for a difference (``signed``, percentage points);
    ``62% n/a (2 clusters)`` when too few clusters gave no interval; the estimate alone when the interval
    is undefined for another reason; ``-`` when the estimate is undefined (None or NaN).
    """
    if estimate is None or not _known(estimate):
        return "-"
    number = "{:+.0f}" if signed else "{:.0f}"
    text = f"{number.format(100 * estimate)} pp" if signed else percent(estimate)
    if low is not None and high is not None and _known(low) and _known(high):
        text += f" [{number.format(100 * low)}, {number.format(100 * high)}]"
    note = interval_note(int(clusters)) if clusters is not None and _known(clusters) else ""
    return f"{text} {note}" if note else text


# What interval_note writes in place of a withheld interval, as found in a table's cells.
_WITHHELD = re.compile(r"n/a \(\d+ clusters?\)")


def withheld_note(unit: str, min_clusters: int = MIN_CLUSTERS) -> str:
    """Why a table shows ``n/a (k clusters)``: the line set under it (``unit``: what a cluster is, plural)."""
    return (f"n/a (k clusters): no 95% interval, since the runs behind the number cover fewer than {min_clusters} "
            f"{unit} and the intervals resample {unit}")


def note_withheld(views: Iterable[TableView], unit: str, min_clusters: int = MIN_CLUSTERS) -> list[TableView]:
    """The views, each that shows a withheld interval with :func:`withheld_note` added to its note."""
    out = []
    for view in views:
        if any(_WITHHELD.search(cell) for row in view.rows for cell in row):
            note = withheld_note(unit, min_clusters)
            view = view.model_copy(update={"note": f"{view.note} {note}" if view.note else note})
        out.append(view)
    return out


def cell_text(value: Any) -> str:
    """A data-frame value as a table cell: ``-`` when missing, a float with three decimals, else its text."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


class TableView(BaseModel):
    """One table ready to print: every cell already formatted as text."""

    title: str = Field(description="Title shown above the table.")
    columns: list[str] = Field(description="Column headers.")
    rows: list[list[str]] = Field(default_factory=list, description="Rows of cells, as many as there are columns.")
    note: str = Field(default="", description="A line shown under the table ('' for none).")
    numeric: list[bool] = Field(default_factory=list, description="Per column: right-align (numbers).")
    links: list[list[RunFilter | None]] = Field(
        default_factory=list,
        description="Per row and column: the runs behind the cell as a filter (null: none); empty: no links.",
    )

    @classmethod
    def from_frame(cls, title: str, frame: pd.DataFrame) -> TableView:
        """A data frame's columns and rows as text (:func:`cell_text`)."""
        return cls(title=title, columns=[str(c) for c in frame.columns],
                   rows=[[cell_text(v) for v in row] for row in frame.itertuples(index=False)])

    def link(self, row: int, column: int) -> RunFilter | None:
        """The runs behind one cell, if the table says."""
        if row < len(self.links) and column < len(self.links[row]):
            return self.links[row][column]
        return None

    def markdown(self) -> str:
        """The table as a GitHub-style pipe table (``_no rows_`` when it has none)."""
        if not self.rows:
            return "_no rows_\n"

        def cell(value: str) -> str:
            return value.replace("|", "\\|").replace("\n", " ")

        lines = ["| " + " | ".join(cell(c) for c in self.columns) + " |"]
        lines.append("|" + "|".join("---" for _ in self.columns) + "|")
        lines.extend("| " + " | ".join(cell(v) for v in row) + " |" for row in self.rows)
        return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------ report files
@dataclass(frozen=True)
class ReportTable:
    """One table of a report's files: ``NAME.csv`` holds ``data``; ``NAME.md`` holds ``text`` (None: no Markdown)."""

    name: str
    data: pd.DataFrame
    text: TableView | None


@dataclass(frozen=True)
class ReportFigure:
    """One figure of a report's files: ``draw(path)`` writes ``out/file`` and returns its path."""

    name: str
    file: str
    draw: Callable[[Path], Path]
    cancel: Callable[[], None] | None = None  # stops a drawing started on another core (None: nothing to stop)


def started_figure(figure: ReportFigure, out: Path) -> ReportFigure:
    """``figure`` drawn at ``out/file`` from now on, in a forked process (:func:`commitbench.aside.aside`) while
    this one goes on (computing the tables); the figure returned waits for that drawing and gives its path.

    Start only a figure whose data is final: the drawing sees this process's memory as it is now.
    """
    from commitbench.aside import aside

    path = out / figure.file

    def draw() -> Path:
        out.mkdir(parents=True, exist_ok=True)
        return figure.draw(path)

    drawing = aside(draw)

    def drawn(at: Path) -> Path:
        if at != path:
            raise ValueError(f"figure {figure.name!r} was started at {path}, not {at}")
        return drawing.result()

    return ReportFigure(figure.name, figure.file, drawn, drawing.cancel)


@contextmanager
def cancelled_on_error(figure: ReportFigure | None) -> Iterator[None]:
    """Within the block, an error stops the drawing of ``figure`` (one of :func:`started_figure`, or None). A report
    that fails after starting a figure never waits for it: the drawing would go on writing into its folder after
    the report has failed, even after its caller has removed that folder."""
    try:
        yield
    except BaseException:
        if figure is not None and figure.cancel is not None:
            figure.cancel()
        raise


def write_report_files(
    out: Path, tables: Iterable[ReportTable], note: str, stamp: Mapping[str, str] | None = None,
    figures: Iterable[ReportFigure] = (),
) -> dict[str, list[str]]:
    """Write every table and figure of a report under ``out``; returns the paths written, by table or figure name.

    Each CSV starts with the ``stamp`` columns (name: value, the same in every row; e.g. who labelled);
    each Markdown file is ``# title``, ``note`` and the table.
    """
    out.mkdir(parents=True, exist_ok=True)
    files: dict[str, list[str]] = {}
    for table in tables:
        frame = table.data.copy()
        for position, (column, value) in enumerate((stamp or {}).items()):
            frame.insert(position, column, value)
        paths = [out / f"{table.name}.csv"]
        frame.to_csv(paths[0], index=False)
        if table.text is not None:
            paths.append(out / f"{table.name}.md")
            paths[1].write_text(f"# {table.text.title}\n\n{note}\n\n{table.text.markdown()}", encoding="utf-8")
        files[table.name] = [str(p) for p in paths]
    for figure in figures:
        files[figure.name] = [str(figure.draw(out / figure.file))]
    return files

