"""A frame's groups as the positions of their rows, so that a table takes only the rows (and columns) it reads.

Iterating ``frame.groupby(by)`` copies every column of the frame once, sorted, and then every group; at
100,000 runs of 67 columns each such copy is tens of megabytes, and a report makes a table after table of
them. :func:`group_positions` gives the same groups, in the same order, as arrays of row positions.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

__all__ = ["group_positions"]


def group_positions(frame: pd.DataFrame, by: Sequence[str]) -> list[tuple[tuple[object, ...], np.ndarray]]:
    """Each group's key (a tuple, one value per column of ``by``) and its rows' positions, in the order in which
    ``frame.groupby(list(by), sort=True, observed=True)`` yields its groups (rows in frame order; a key with a
    missing value left out, as there). With no column, one group of every row."""
    if not by:
        return [((), np.arange(len(frame)))]
    grouped = frame.groupby(list(by), sort=True, observed=True)
    positions = grouped.indices
    return [((key if isinstance(key, tuple) else (key,)), np.asarray(positions[key])) for key in grouped.size().index]
