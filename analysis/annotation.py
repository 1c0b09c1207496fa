"""What human labels of every suite share: the base record, the sheet error, agreement results as tables.

Each suite has its own blind annotation sheet and label fields (standing: three yes/no labels per
assistant message; follow-up: commitment spans, five booleans and the outcome per response); both
subclass :class:`HumanLabel`, read sheets that raise :class:`SheetError` naming the row and column of
a bad value, and report agreement as :class:`~commitbench.analysis.agreement.AgreementRow` tables.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, Field

from commitbench.analysis.agreement import AgreementRow
from commitbench.analysis.tables import TableView
from commitbench.jsonl import JsonlError, iter_models


class HumanLabel(BaseModel):
    """One item of a run as a person labelled it (the suites add their label fields)."""

    item_id: str = Field(description="Row id in the sheet.")
    run_key: str = Field(description="The run the item belongs to.")


class SheetError(ValueError):
    """A filled sheet cannot be read; the message names the file, the row and the column."""


LabelT = TypeVar("LabelT", bound=HumanLabel)


def read_human_labels(path: Path, label_type: type[LabelT]) -> list[LabelT]:
    """Human labels from the JSONL file ``annotate import`` writes."""
    try:
        return list(iter_models(path, label_type, what="human label"))
    except JsonlError as exc:
        raise SheetError(str(exc)) from None


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def agreement_view(title: str, rows: Sequence[AgreementRow], group: str = "", note: str = "") -> TableView:
    """Agreement rows (accuracy and kappa per label) as a table; ``group`` names the grouping column."""
    columns = [*([group] if group else []), "label", "n", "excl", "acc", "kappa", "yes A", "yes B"]
    body = [
        [*([r.group.get(group, "all")] if group else []), r.label, str(r.n), str(r.excluded), _num(r.accuracy),
         _num(r.kappa), str(r.yes_a), str(r.yes_b)]
        for r in rows
    ]
    numeric = [*([False] if group else []), False, True, True, True, True, True, True]
    return TableView(title=title, columns=columns, rows=body, note=note, numeric=numeric)
