"""The live-minus-scripted pairs the standing report finds: each arm played with live parties against the same arm
with the scripted parties, for the same player; nothing for an arm whose scripted twin was not played."""

from __future__ import annotations

import pandas as pd

from commitbench.analysis.comparisons import ComparisonKind
from commitbench.analysis.standing.report import parties_pairs


def _rows(sides: list[tuple[str, str]]) -> pd.DataFrame:
    return pd.DataFrame([{"agent": agent, "interventions": arm, "twin_group": "e1", "sample": 0}
                         for agent, arm in sides])


def test_each_live_arm_is_paired_with_its_scripted_twin() -> None:
    rows = _rows([("chat:m", "none"), ("chat:m", "parties:live"), ("chat:m", "ledger"),
                  ("chat:m", "ledger+parties:live"), ("creditor-rule", "parties:live"), ("chat:m", "policy")])
    pairs = {(p.a.label(), p.b.label()) for p in parties_pairs(rows)}
    assert pairs == {("chat:m@parties:live", "chat:m@none"), ("chat:m@ledger+parties:live", "chat:m@ledger")}
    assert {p.kind for p in parties_pairs(rows)} == {ComparisonKind.PARTIES}


def test_a_run_without_live_parties_has_no_such_pair() -> None:
    assert parties_pairs(_rows([("chat:m", "none"), ("chat:m", "ledger")])) == []
