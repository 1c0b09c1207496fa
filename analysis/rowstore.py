"""Run rows kept column by column: a report's table of one row per run, in a few bytes per run and column.

A report folds each trace into a row (a dict of plain values: strings, flags, counts) as it streams
the run's traces. Kept as a list of dicts, 100,000 rows of fifty fields take over a quarter of a
gigabyte; kept here, each column holds its distinct values once and a code of one to four bytes per
row (the values of a column repeat: agents, arms, cells, flags, small counts), so the trace and its
dict are garbage as soon as the row is added. :meth:`RowStore.frame` gives the same data frame as
``pandas.DataFrame(rows)`` would: the same columns in first-seen order, the same values and dtypes,
and NaN where a row lacks a field.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["RowStore", "rows_frame"]

_MISSING: Any = math.nan  # what pandas writes where a record lacks a field


class _CodedColumn:
    """One column: its distinct values, and each row's code into them (one byte a row while it has
    at most 256 distinct values, then two, then four)."""

    def __init__(self, rows_before: int) -> None:
        self.values: list[Any] = []
        self._codes_of: dict[Any, int] = {}
        self.codes = array("B")
        if rows_before:
            self.codes.extend([self.code(_MISSING)] * rows_before)

    def code(self, value: Any) -> int:
        # A text is its own key; any other value is keyed with its type (True == 1 == 1.0 in Python, and
        # the frame must keep each as it came) and NaN, unequal to itself, by its text.
        key = value if type(value) is str else (type(value), "nan" if value != value else value)
        try:
            found = self._codes_of.get(key)
        except TypeError:  # an unhashable value (a list): kept as it is, one entry per row
            found = None
            key = (type(value), id(value))
        if found is None:
            found = self._codes_of[key] = len(self.values)
            self.values.append(value)
            if found == 1 << (8 * self.codes.itemsize):
                self.codes = array("H" if self.codes.typecode == "B" else "I", self.codes)
        return found

    def texts(self) -> bool:
        return all(type(value) is str for value in self.values)

    def series(self, categorical: bool) -> pd.Series:
        codes = np.frombuffer(self.codes, dtype=self.codes.typecode) if len(self.codes) else np.empty(0, np.uint8)
        if categorical and self.values and self.texts():
            order = sorted(range(len(self.values)), key=self.values.__getitem__)
            rank = np.empty(len(order), dtype=np.int32)
            rank[order] = np.arange(len(order), dtype=np.int32)
            categories = pd.Index([self.values[i] for i in order], dtype="str")
            return pd.Series(pd.Categorical.from_codes(rank[codes], categories=categories))
        values = np.empty(len(self.values), dtype=object)
        values[:] = self.values
        return pd.Series(values[codes], dtype=object).infer_objects()


class RowStore:
    """Rows added one at a time, stored as coded columns (see the module doc)."""

    def __init__(self) -> None:
        self._columns: dict[str, _CodedColumn] = {}
        self._rows = 0

    def __len__(self) -> int:
        return self._rows

    def add(self, row: Mapping[str, Any]) -> None:
        """Append one row (a field the earlier rows lack is missing, NaN, in them)."""
        for name, value in row.items():
            column = self._columns.get(name)
            if column is None:
                column = self._columns[name] = _CodedColumn(self._rows)
            code = column.code(value)  # first: a new value may widen the codes
            column.codes.append(code)
        self._rows += 1
        for column in self._columns.values():
            if len(column.codes) < self._rows:  # this row lacks the field
                code = column.code(_MISSING)
                column.codes.append(code)

    def frame(self, categorical: bool = False) -> pd.DataFrame:
        """The rows as a data frame, as ``pandas.DataFrame(list_of_rows)`` makes it; with ``categorical``,
        a column of texts only is a categorical one (its categories sorted), a byte or two a row instead of
        every text's bytes again, for tables that group, filter and compare by those texts."""
        if not self._rows:
            return pd.DataFrame()
        return pd.DataFrame({name: column.series(categorical) for name, column in self._columns.items()})


def rows_frame(rows: Iterable[Mapping[str, Any] | None], categorical: bool = False) -> pd.DataFrame:
    """The data frame of rows streamed one at a time (None: no row), never all held as dicts."""
    store = RowStore()
    for row in rows:
        if row is not None:
            store.add(row)
    return store.frame(categorical)
