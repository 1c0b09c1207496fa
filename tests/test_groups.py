"""A frame's groups by position are the groups ``groupby`` yields: the same keys, order and rows."""

from __future__ import annotations

import random

import numpy as np
import pandas as pd
import pytest

from commitbench.analysis.groups import group_positions


def _frame(seed: int) -> pd.DataFrame:
    rng = random.Random(seed)
    n = 300
    return pd.DataFrame({
        "agent": pd.Categorical([rng.choice("bca") for _ in range(n)], categories=["a", "b", "c", "unused"]),
        "arm": [rng.choice(["none", "ledger", None]) for _ in range(n)],
        "gap": [rng.choice([0, 5, 20]) for _ in range(n)],
        "value": [rng.random() for _ in range(n)],
    })


@pytest.mark.parametrize("by", [["agent"], ["arm"], ["agent", "gap"], ["gap", "arm", "agent"]])
@pytest.mark.parametrize("seed", range(3))
def test_groups_by_position_are_the_groups_groupby_yields(by: list[str], seed: int) -> None:
    frame = _frame(seed)
    expected = [((key if isinstance(key, tuple) else (key,)), part)
                for key, part in frame.groupby(by, sort=True, observed=True)]
    found = group_positions(frame, by)
    assert [key for key, _ in found] == [key for key, _ in expected]
    for (_, positions), (_, part) in zip(found, expected, strict=True):
        pd.testing.assert_frame_equal(frame.iloc[positions], part)


def test_no_column_is_one_group_of_every_row() -> None:
    frame = _frame(0)
    ((key, positions),) = group_positions(frame, [])
    assert key == () and np.array_equal(positions, np.arange(len(frame)))
