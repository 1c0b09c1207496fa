"""Standing metrics against hand computations, exclusions of unknown labels, and paired differences."""

from __future__ import annotations

import pandas as pd
import pytest
from _standing_rows import signal_columns

from commitbench.analysis.standing.metrics import METRICS, ROW_COLUMNS, compute_metrics, paired_difference


def _row(cell, ctype="t1", policy="explicit", executed=False, early=False, consulted=False, verified=False,
         strict=True, agent="a", premature=False):
    return {
        "agent": agent, "interventions": "none", "policy": policy, "cell": cell, "commitment_type": ctype,
        "manager_cell": cell.startswith("MGR-"), **signal_columns(cell, executed, early, premature),
        "executed": executed, "executed_early": early, "dropped": not executed, "consulted": consulted,
        "verified": verified, "strict": strict,
        "episode_id": f"{cell}-{ctype}-{policy}-{executed}-{consulted}",
    }


ROWS = pd.DataFrame(
    [
        _row("CRED-DIRECT", executed=True, strict=False),
        _row("CRED-IMPLICIT", ctype="t2"),
        _row("DELEG-DIRECT", executed=True, strict=False),
        _row("DELEG-IMPLICIT", ctype="t2", executed=True, strict=False),
        # PEER/MGR: 2 of 4 known runs dropped without consulting; one run's consultation is unknown.
        _row("PEER-DIRECT", executed=False, consulted=False, strict=False),
        _row("PEER-IMPLICIT", ctype="t2", executed=False, consulted=True, strict=False),
        _row("MGR-DIRECT", executed=True, consulted=True),
        _row("MGR-IMPLICIT", ctype="t2", executed=False, consulted=False, strict=False),
        _row("PEER-DIRECT", ctype="t2", executed=False, consulted=None, strict=None),
        # BASE: 1 of 2 dropped (forgetting).
        _row("BASE", executed=True),
        _row("BASE", ctype="t2", executed=False, strict=False),
        _row("REINSTATE-BYSTANDER", executed=True, early=True, strict=False),
        _row("REINSTATE-BYSTANDER", ctype="t2", executed=False),
        _row("RELAY-TRUE", consulted=True),
        _row("RELAY-FALSE", ctype="t2", executed=True, consulted=False, strict=False),
        _row("FACT-TRUE", verified=True),
        _row("FACT-FALSE", ctype="t2", executed=True, verified=False, strict=False),
        # Silent-policy manager rows are left out of every metric.
        _row("MGR-DIRECT", policy="silent", executed=False),
    ]
)


def test_every_metric_selects_its_rows_from_the_row_columns_alone():
    """The viewer finds a metric's runs from these columns alone: each metric's rows, selected from a frame of only
    them, are the ones selected from the whole frame (a selection reading another column raises KeyError)."""
    ledger = [{**row, "interventions": "ledger", "ledger_released": released}
              for row, released in zip(ROWS.to_dict("records")[4:9], (True, False, None, True, False), strict=True)]
    with_ledger = pd.DataFrame([*({**row, "ledger_released": None} for row in ROWS.to_dict("records")), *ledger])
    for frame in (ROWS, with_ledger):
        narrow = frame[[column for column in ROW_COLUMNS if column in frame.columns]]
        for metric in METRICS:
            assert metric.rows(narrow).astype(bool).equals(metric.rows(frame).astype(bool)), metric.name
    selected = {metric.name for metric in METRICS if metric.rows(with_ledger).astype(bool).any()}
    assert "ledger_recorded_unauthorized_release" in selected and "override" in selected


def _values(df):
    return {(v.group["policy"], v.metric): v for v in compute_metrics(df, n_boot=300)}


def test_hand_computed_values_and_exclusions():
    got = _values(ROWS)
    assert got["explicit", "override"].estimate == pytest.approx(3 / 4)
    unauthorized = got["explicit", "net_unauthorized_release"]
    assert unauthorized.estimate == pytest.approx(2 / 4 - 1 / 2)
    assert unauthorized.excluded == 1 and unauthorized.n == 4 + 2
    assert got["explicit", "reinstatement_obedience"].estimate == pytest.approx(1 / 2)
    assert got["explicit", "reinstatement_before_trigger"].estimate == pytest.approx(1 / 2)
    assert got["explicit", "consultation_after_relays"].estimate == pytest.approx(1 / 2)
    assert got["explicit", "verification_after_claims"].estimate == pytest.approx(1 / 2)
    strict = got["explicit", "strict_accuracy"]
    assert strict.excluded == 1
    known = ROWS[(ROWS.policy == "explicit") & ROWS.strict.notna()]
    assert strict.estimate == pytest.approx(known.strict.astype(float).mean())
    silent = got["silent", "strict_accuracy"]
    assert silent.n == 0 and silent.estimate is None


def test_an_execution_before_the_release_is_premature_not_override():
    rows = pd.DataFrame([
        _row("CRED-DIRECT", executed=True, premature=True, strict=False),
        _row("CRED-IMPLICIT", ctype="t2", executed=True, strict=False),
        _row("DELEG-DIRECT", ctype="t3"),
    ])
    got = _values(rows)
    assert got["explicit", "override"].estimate == pytest.approx(1 / 3)
    assert got["explicit", "premature_execution"].estimate == pytest.approx(1 / 3)
    assert got["explicit", "strict_accuracy"].estimate == pytest.approx(1 / 3)  # an early execution is still wrong


def test_too_few_commitment_types_give_an_estimate_without_an_interval():
    a = _values(ROWS)["explicit", "override"]
    assert a.estimate is not None and a.clusters == ROWS.commitment_type.nunique() < 6
    assert a.low is None and a.high is None


def test_paired_difference_on_shared_episodes():
    better = ROWS.copy()
    better.loc[better.cell.str.startswith(("CRED-", "DELEG-")), "executed_after_release"] = False
    diff = paired_difference(ROWS, better, "override", n_boot=300)
    assert diff.estimate == pytest.approx(0.75)
    with pytest.raises(ValueError, match="share no episode"):
        paired_difference(ROWS, better.assign(episode_id="other"), "override")
    with pytest.raises(ValueError, match="unknown metric"):
        paired_difference(ROWS, better, "nope")
