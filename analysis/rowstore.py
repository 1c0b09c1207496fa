"""Run rows kept column by column: a report's table of one row per run, in a few bytes per run and column.

A report folds each trace into a row (a dict of plain values: strings, flags, counts) as it streams
the run's traces. Kept as a list of dicts, 100,000 rows of fifty fields take over a quarter of a
gigabyte; kept here, each column holds its distinct values once and a code of one to four bytes per
row (the values of a column repeat: agents, arms, cells, flags, small counts). Rows wait as dicts
in batches of :attr:`RowStore.BATCH` and are then coded a column at a time (a lookup in C for a column
of one type), so at most one batch of dicts is ever held. :meth:`RowStore.frame` gives the same data frame as
``pandas.DataFrame(rows)`` would: the same columns in first-seen order, the same values and dtypes,
and NaN where a row lacks a field.
"""

from __future__ import annotations

import contextlib
import math
from array import array
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["RowBatch", "RowStore", "one_text_each", "row_batch", "rows_frame"]

_MISSING: Any = math.nan  # what pandas writes where a record lacks a field
_TYPED: dict[type, Any] = {bool: np.bool_, int: np.int64, float: np.float64}  # a column of one of these types


def _forget_lookup(index: pd.Index) -> None:
    """Let go of the hash table pandas builds over new categories to check they are distinct (its ``_engine``,
    kept in the index's cache). For a column of run keys it holds every key again as a Python text: about 10 MB
    at 100,000 runs, kept for as long as the frame lives. A lookup that needs the table builds it again."""
    cache = getattr(index, "_cache", None)
    if isinstance(cache, dict):
        cache.pop("_engine", None)


class _CodedColumn:
    """One column: its distinct values, and each row's code into them (one byte a row while it has
    at most 256 distinct values, then two, then four)."""

    def __init__(self, rows_before: int) -> None:
        self.values: list[Any] = []
        # Codes by the value's type, then the value: True == 1 == 1.0 in Python, and the frame must keep
        # each as it came. NaN, unequal to itself, is keyed by its text in its type's table.
        self._codes_of: dict[type, dict[Any, int]] = {}
        self.codes = array("B")
        if rows_before:
            self.codes.extend([self.code(_MISSING)] * rows_before)

    def code(self, value: Any) -> int:
        kind = type(value)
        key = "nan" if kind is not str and value != value else value
        table = self._codes_of.setdefault(kind, {})
        try:
            found = table.get(key)
        except TypeError:  # an unhashable value (a list): kept as it is, one entry per row
            found = None
            key = None
        if found is None:
            found = len(self.values)
            if key is not None:
                table[key] = found
            self.values.append(value)
            if found == 1 << (8 * self.codes.itemsize):
                self.codes = array("H" if self.codes.typecode == "B" else "I", self.codes)
        return found

    def extend(self, values: list[Any]) -> None:
        """Append the codes of ``values``: looked up in one pass of C when they are all of one hashable type
        (the common case: a column of texts, flags or counts), value by value for what that misses."""
        codes: list[Any] = [None] * len(values)
        kinds = set(map(type, values))
        if len(kinds) == 1:
            table = self._codes_of.get(kinds.pop())
            if table is not None:
                with contextlib.suppress(TypeError):  # unhashable values: each is coded on its own below
                    codes = list(map(table.get, values))
        if None in codes:  # (a scan in C: most batches find every value coded already)
            for i, code in enumerate(codes):
                if code is None:
                    codes[i] = self.code(values[i])
        self.codes.extend(codes)

    def texts(self) -> bool:
        return all(type(value) is str for value in self.values)

    def series(self, categorical: bool) -> pd.Series:
        codes = np.frombuffer(self.codes, dtype=self.codes.typecode) if len(self.codes) else np.empty(0, np.uint8)
        if categorical and self.values and self.texts():
            order = sorted(range(len(self.values)), key=self.values.__getitem__)
            rank = np.empty(len(order), dtype=np.int32)
            rank[order] = np.arange(len(order), dtype=np.int32)
            categories = pd.Index([self.values[i] for i in order], dtype="str")
            coded = pd.Categorical.from_codes(rank[codes], categories=categories)
            _forget_lookup(coded.categories)
            return pd.Series(coded)
        kinds = {type(value) for value in self.values}
        typed = _TYPED.get(kinds.pop()) if len(kinds) == 1 else None
        if typed is not None:  # flags, counts or fractions only: gathered as numbers, never as objects
            try:
                return pd.Series(np.asarray(self.values, dtype=typed)[codes])
            except OverflowError:  # an integer past 64 bits: an object column, as pandas makes it
                pass
        values = np.empty(len(self.values), dtype=object)
        values[:] = self.values
        return pd.Series(values[codes], dtype=object).infer_objects()


@dataclass(frozen=True)
class RowBatch:
    """Consecutive rows turned into columns (:func:`row_batch`): made where the rows were made (a pool's worker), it
    crosses between processes as a few lists, and a :class:`RowStore` takes it a column at a time."""

    names: tuple[str, ...]  # the rows' fields, in the order they were first seen
    columns: list[list[Any]]  # per field, each row's value (NaN where a row lacks the field)
    n: int  # rows

    def __len__(self) -> int:
        return self.n


def row_batch(rows: Sequence[Mapping[str, Any]], shared_texts: bool = False) -> RowBatch:
    """``rows`` as columns: their fields in first-seen order, NaN where a row lacks one. With ``shared_texts``, equal
    texts of the batch are made one object (a batch pickled to another process then carries each text once, and
    is read back as fewer objects)."""
    names: dict[str, None] = {}
    shape: Any = None
    for row in rows:
        keys = row.keys()
        if keys != shape:
            shape = keys
            names.update(dict.fromkeys(keys))
    order = tuple(names)
    if rows and all(tuple(row) == order for row in rows):
        # Every row has every field, in one order: turned into columns in one pass of C.
        columns = [list(values) for values in zip(*(row.values() for row in rows), strict=True)]
    else:
        columns = [[row.get(name, _MISSING) for row in rows] for name in order]
    if shared_texts:
        seen: dict[str, str] = {}
        columns = [one_text_each(values, seen) for values in columns]
    return RowBatch(names=order, columns=columns, n=len(rows))


def one_text_each(values: list[Any], seen: dict[str, str] | None = None) -> list[Any]:
    """``values`` with each text replaced by the first equal text of ``values`` (or of ``seen``, kept across calls):
    equal texts become one object, which pickle writes once."""
    known: dict[str, str] = {} if seen is None else seen
    return [known.setdefault(value, value) if type(value) is str else value for value in values]


class RowStore:
    """Rows added one at a time, or a batch at a time, stored as coded columns (see the module doc)."""

    BATCH = 512  # rows held as dicts before they are coded, column by column

    def __init__(self) -> None:
        self._columns: dict[str, _CodedColumn] = {}
        self._rows = 0  # rows coded into the columns
        self._pending: list[Mapping[str, Any]] = []

    def __len__(self) -> int:
        return self._rows + len(self._pending)

    def add(self, row: Mapping[str, Any]) -> None:
        """Append one row (a field the earlier rows lack is missing, NaN, in them)."""
        self._pending.append(row)
        if len(self._pending) >= self.BATCH:
            self._flush()

    def add_batch(self, batch: RowBatch) -> None:
        """Append the rows of ``batch`` (after any added one at a time before it)."""
        self._flush()
        self._take(batch)

    def _flush(self) -> None:
        """Code the pending rows column by column (:func:`row_batch`)."""
        rows, self._pending = self._pending, []
        if rows:
            self._take(row_batch(rows))

    def _take(self, batch: RowBatch) -> None:
        """Code a batch's columns; a column first seen in it is NaN in every row before it, and a column it lacks
        NaN in each of its rows."""
        if not batch.n:
            return
        for name, values in zip(batch.names, batch.columns, strict=True):
            self._column(name).extend(values)
        if len(batch.names) < len(self._columns):
            given = set(batch.names)
            for name, column in self._columns.items():
                if name not in given:
                    column.extend([_MISSING] * batch.n)
        self._rows += batch.n

    def _column(self, name: str) -> _CodedColumn:
        column = self._columns.get(name)
        if column is None:
            column = self._columns[name] = _CodedColumn(self._rows)
        return column

    def frame(self, categorical: bool = False) -> pd.DataFrame:
        """The rows as a data frame, as ``pandas.DataFrame(list_of_rows)`` makes it; with ``categorical``,
        a column of texts only is a categorical one (its categories sorted), a byte or two a row instead of
        every text's bytes again, for tables that group, filter and compare by those texts."""
        self._flush()
        if not self._rows:
            return pd.DataFrame()
        # Without a copy: each column's array becomes the frame's own (a copy would hold every column twice).
        return pd.DataFrame({name: column.series(categorical) for name, column in self._columns.items()}, copy=False)


def rows_frame(rows: Iterable[Mapping[str, Any] | RowBatch | None], categorical: bool = False) -> pd.DataFrame:
    """The data frame of rows streamed one at a time, or a :class:`RowBatch` at a time (None: no row), never all
    held as dicts."""
    store = RowStore()
    for row in rows:
        if isinstance(row, RowBatch):
            store.add_batch(row)
        elif row is not None:
            store.add(row)
    return store.frame(categorical)
