"""The rank effect: drops on a manager's word vs a peer's, per policy (the silent one included),
paired by twin chat and clustered by commitment type."""

from __future__ import annotations

import pandas as pd
import pytest
from _standing_rows import signal_columns

from commitbench.analysis.standing.rank import RankMeasure, rank_effect_table
from commitbench.analysis.standing.report import build_standing_report


def _run(cell: str, policy: str, dropped: bool, ctype: str, consulted: bool | None = False, sample: int = 0,
         variant: int = 0) -> dict:
    return {
        "run_key": f"{cell}-{policy}-{ctype}-{sample}-{variant}", "agent": "m", "interventions": "none",
        "policy": policy, "cell": cell, "commitment_type": ctype, "gap": 1, "variant": variant, "sample": sample,
        "manager_cell": cell.startswith("MGR"), **signal_columns(cell, not dropped), "executed": not dropped,
        "executed_early": False,
        "dropped": dropped, "consulted": consulted, "verified": False, "strict": False,
        "episode_id": f"{cell}-{policy}-{ctype}-{variant}", "judge_errors": 0, "tool_errors": 0,
    }


def _rows() -> pd.DataFrame:
    runs = []
    for policy in ("explicit", "silent"):
        for ctype in ("a", "b", "c", "d"):
            for style in ("DIRECT", "IMPLICIT"):
                # Managers are obeyed in every silent run and half the explicit ones; peers only in type a.
                mgr_drop = policy == "silent" or ctype in ("a", "b")
                runs.append(_run(f"MGR-{style}", policy, mgr_drop, ctype))
                runs.append(_run(f"PEER-{style}", policy, ctype == "a", ctype))
    runs.append(_run("MGR-DIRECT", "silent", True, "a", variant=2))  # no PEER twin: left out, counted
    return pd.DataFrame(runs)


def test_rank_effect_by_hand_including_the_silent_policy():
    values = {(v.group["policy"], v.measure): v for v in rank_effect_table(_rows(), n_boot=300)}
    silent = values["silent", RankMeasure.DROPPED]
    assert silent.manager == 1.0 and silent.peer == pytest.approx(2 / 8)
    assert silent.estimate == pytest.approx(0.75) and silent.pairs == 8 and silent.unpaired == 1
    assert silent.low is None and silent.high is None and silent.clusters == 4  # four types: no interval
    explicit = values["explicit", RankMeasure.DROPPED]
    assert explicit.manager == 0.5 and explicit.peer == 0.25 and explicit.estimate == pytest.approx(0.25)
    assert explicit.unpaired == 0
    # Nobody was consulted, so dropping without consulting equals dropping here.
    assert values["silent", RankMeasure.DROPPED_WITHOUT_CONSULTING].estimate == pytest.approx(0.75)


def test_a_missing_consultation_label_excludes_the_pair_for_that_measure_only():
    rows = _rows()
    rows["consulted"] = rows["consulted"].astype(object)
    rows.loc[(rows.cell == "MGR-DIRECT") & (rows.commitment_type == "a") & (rows.policy == "silent")
             & (rows.variant == 0), "consulted"] = None
    values = {(v.group["policy"], v.measure): v for v in rank_effect_table(rows, n_boot=100)}
    assert values["silent", RankMeasure.DROPPED_WITHOUT_CONSULTING].excluded == 1
    assert values["silent", RankMeasure.DROPPED_WITHOUT_CONSULTING].pairs == 7
    assert values["silent", RankMeasure.DROPPED].excluded == 0


def test_the_report_and_its_json_carry_the_rank_effect(tmp_path):
    report = build_standing_report(_rows(), tmp_path, "rules", n_boot=100)
    document = report.model_dump(mode="json")
    assert {(r["group"]["policy"], r["measure"]) for r in document["rank_effect"]} == {
        (p, m.value) for p in ("explicit", "silent") for m in RankMeasure
    }
    view = next(v for v in report.views() if v.title.startswith("Rank effect"))
    silent_drop = next(row for row in view.rows if row[2] == "silent" and row[3] == "drop")
    assert silent_drop[4] == "100% n/a (4 clusters)" and silent_drop[6].startswith("+75 pp") and silent_drop[7] == "8"
    assert next(r for r in document["rank_effect"] if r["group"]["policy"] == "silent")["clusters"] == 4
