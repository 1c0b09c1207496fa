"""A table as plain data: what a report hands the command line (or any other front end) to show.

Reports are pydantic models built in :mod:`commitbench.analysis`; each can describe itself as a list
of :class:`TableView` (a title, column headers, rows of text cells, a note). Front ends render
those without knowing what the numbers mean; a table may also say, per cell, which runs a number
stands on (:data:`RunFilter`), so a front end that lists runs can link each number to them.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

# The runs behind a number: run field -> the values it may take (any of them), ANDed over the fields.
# The key ``metric`` names a metric: the runs that metric reads (its denominator, before runs excluded
# for a missing judge label). Field names are the run rows' column names (agent, interventions, cell...).
RunFilter = dict[str, list[str]]


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

    def link(self, row: int, column: int) -> RunFilter | None:
        """The runs behind one cell, if the table says."""
        if row < len(self.links) and column < len(self.links[row]):
            return self.links[row][column]
        return None

    def markdown(self) -> str:
        """The table as a GitHub-style pipe table."""
        if not self.rows:
            return "_no rows_\n"

        def cell(value: str) -> str:
            return value.replace("|", "\\|").replace("\n", " ")

        lines = ["| " + " | ".join(cell(c) for c in self.columns) + " |"]
        lines.append("|" + "|".join("---" for _ in self.columns) + "|")
        lines.extend("| " + " | ".join(cell(v) for v in row) + " |" for row in self.rows)
        return "\n".join(lines) + "\n"
