"""The papers' tables and figures by name: what ``commitbench report RUN --paper-tables`` writes.

Each suite lists every table and figure of its paper (:mod:`commitbench.analysis.standing.paper`,
:mod:`commitbench.analysis.followup.paper`) as a :class:`PaperOutput`: the item (its name after the paper,
``standing-table8``, what it shows in the project's words, and whether a run can give it), the rows and
columns the paper shows (as data, written to ``NAME.csv``, and as text, ``NAME.md``), and a PNG where the
paper has a plot. The status says how close a run comes:

* ``written``: the rows and columns the paper shows, from this run;
* ``partly``: written, but something the paper shows is not in this run (an arm, a model pair, a condition),
  named in the note;
* ``not reproducible``: nothing can be computed from a run (a diagram, a table of definitions, human labels,
  another data set), or this run lacks everything it needs; the note says why and what would give it.

:func:`write_paper_tables` writes the files and ``index.csv`` / ``index.md``, which list every item.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Literal

import pandas as pd
from pydantic import BaseModel, Field

from commitbench.analysis.tables import ReportFigure, ReportTable, TableView, write_report_files

__all__ = [
    "INDEX_FILE",
    "ItemStatus",
    "PaperIndex",
    "PaperItem",
    "PaperOutput",
    "not_reproducible",
    "output",
    "write_paper_tables",
]

INDEX_FILE = "index"


class ItemStatus(str, Enum):
    """How close a run comes to a paper's table or figure."""

    WRITTEN = "written"
    PARTLY = "partly"
    NOT_REPRODUCIBLE = "not reproducible"


class PaperItem(BaseModel):
    """One table or figure of a paper, and what a run gives of it."""

    id: str = Field(description="The file name: suite, kind and the paper's number, e.g. standing-table8.")
    kind: Literal["table", "figure"] = Field(description="A table or a figure of the paper.")
    number: str = Field(description="The paper's number of it.")
    caption: str = Field(description="What it shows, in the project's words.")
    status: ItemStatus = Field(description="written, partly or not reproducible.")
    note: str = Field(
        default="", description="What is missing (partly) or why it cannot be written (not reproducible)."
    )
    files: list[str] = Field(default_factory=list, description="The files written for it.")


@dataclass
class PaperOutput:
    """An item and what is written for it: the data (CSV), its text (Markdown) and, for a plot, a PNG."""

    item: PaperItem
    data: pd.DataFrame | None = None
    text: pd.DataFrame | None = None  # the table as shown (interval texts); the data itself when None
    draw: Callable[[Path], Path] | None = None
    extra: list[ReportTable] = field(default_factory=list)


def _kind_number(item_id: str) -> tuple[Literal["table", "figure"], str]:
    tail = item_id.split("-", 1)[1]
    kind: Literal["table", "figure"] = "figure" if tail.startswith("figure") else "table"
    return kind, tail.removeprefix(kind)


def output(item_id: str, caption: str, data: pd.DataFrame, *, text: pd.DataFrame | None = None,
           missing: Sequence[str] = (), draw: Callable[[Path], Path] | None = None) -> PaperOutput:
    """An item written from this run: ``partly`` when ``missing`` names something the paper shows that the run
    lacks; ``not reproducible`` when the data has no row at all (``missing`` then says what would give it)."""
    kind, number = _kind_number(item_id)
    if data.empty:
        why = "; ".join(missing) or "this run holds no runs it is computed from"
        return not_reproducible(item_id, caption, why)
    status = ItemStatus.PARTLY if missing else ItemStatus.WRITTEN
    item = PaperItem(id=item_id, kind=kind, number=number, caption=caption, status=status, note="; ".join(missing))
    return PaperOutput(item=item, data=data, text=text, draw=draw)


def not_reproducible(item_id: str, caption: str, why: str) -> PaperOutput:
    kind, number = _kind_number(item_id)
    return PaperOutput(item=PaperItem(id=item_id, kind=kind, number=number, caption=caption,
                                      status=ItemStatus.NOT_REPRODUCIBLE, note=why))


class PaperIndex(BaseModel):
    """Every table and figure of a paper with what a run gave of it (``index.csv`` / ``index.md``)."""

    paper: str = Field(description="The paper the items belong to.")
    out_dir: str = Field(description="Where the files are.")
    items: list[PaperItem] = Field(description="Every table and figure, tables first, in the paper's order.")

    def counts(self) -> dict[str, int]:
        return {status.value: sum(1 for i in self.items if i.status is status) for status in ItemStatus}

    def view(self) -> TableView:
        rows = [[i.id, i.kind, i.number, i.status.value, i.caption, i.note,
                 ", ".join(Path(f).name for f in i.files)] for i in self.items]
        return TableView(title=f"Tables and figures of {self.paper}",
                         columns=["name", "kind", "number", "status", "shows", "note", "files"], rows=rows)


def _order(item: PaperItem) -> tuple[int, int, str]:
    digits = "".join(ch for ch in item.number if ch.isdigit())
    return (0 if item.kind == "table" else 1, int(digits) if digits else 0, item.number)


def write_paper_tables(outputs: Sequence[PaperOutput], out_dir: Path, paper: str,
                       stamp: dict[str, str] | None = None) -> PaperIndex:
    """Write every item's files under ``out_dir`` (and the index); returns the index."""
    out_dir.mkdir(parents=True, exist_ok=True)
    items: list[PaperItem] = []
    for out in sorted(outputs, key=lambda o: _order(o.item)):
        item = out.item
        if out.data is not None:
            shown = out.text if out.text is not None else out.data
            tables = [ReportTable(item.id, out.data, TableView.from_frame(item.caption, shown)), *out.extra]
            figures = [ReportFigure(f"{item.id} figure", f"{item.id}.png", out.draw)] if out.draw is not None else []
            note = f"{paper}, {item.kind} {item.number}: {item.status.value}" + (f" ({item.note})" if item.note else "")
            written = write_report_files(out_dir, tables, note, stamp, figures)
            item = item.model_copy(update={"files": [p for paths in written.values() for p in paths]})
        items.append(item)
    index = PaperIndex(paper=paper, out_dir=str(out_dir), items=items)
    frame = pd.DataFrame([{**i.model_dump(mode="json", exclude={"files"}),
                           "files": ";".join(Path(f).name for f in i.files)} for i in items])
    counts = ", ".join(f"{n} {status}" for status, n in index.counts().items())
    note = (f"{counts}. Each file is named after the paper's table or figure; 'partly' and 'not reproducible' say "
            "what is missing and why.")
    write_report_files(out_dir, [ReportTable(INDEX_FILE, frame, index.view())], note)
    return index
