"""Metrics over labelled responses: hand-counted rates, denominators, and paired differences."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from commitbench.analysis.followup.metrics import (
    DENOMINATOR_COLUMNS,
    METRICS,
    LabelledResponse,
    commitment_counts,
    ecr_by_failure_type,
    failure_summary,
    headline_table,
    outcome_distribution,
    paired_difference,
    rate_table,
    to_frame,
)
from commitbench.analysis.groups import group_positions
from commitbench.episodes.followup.setups import load_setups
from commitbench.episodes.followup.vocabulary import SetupId
from commitbench.judges.followup.feasibility import assess_feasibility
from commitbench.judges.followup.outcomes import PAPER_LABELS, AssessedCommitment
from commitbench.judges.followup.schemas import DetectedCommitment, Performer, TriggerType


def row(request: str, outcome: str, doability: str = "not_doable", **kw) -> LabelledResponse:
    base = {
        "request_id": request,
        "category": "reminder",
        "source": "slurp",
        "setup": "C0",
        "variant": "inferred",
        "persona": "generic",
        "model": "m",
        "outcome": outcome,
        "doability": doability,
        "false_action_claim": outcome == "false_claim",
        "asks_clarification": False,
        "n_agent_commitments": 0,
        "n_user_conditional": 0,
        "n_empty": 0,
        "n_empty_capability": 0,
        "n_empty_agentive": 0,
        "n_empty_temporal": 0,
        "n_needing_call": 0,
        "n_unanchored": 0,
    }
    base.update(kw)
    return LabelledResponse.model_validate(base)


C0_ROWS = [
    row("r1", "empty", n_agent_commitments=2, n_empty=2, n_empty_temporal=1, n_empty_capability=1),
    row("r2", "false_claim"),
    row("r3", "deferral"),
    row("r4", "deferral"),
    row("r5", "other", n_user_conditional=1),
]
C2_ROWS = [
    row("r1", "anchored", "doable", setup="C2", n_agent_commitments=1, n_needing_call=1),
    row("r2", "unanchored", "doable", setup="C2", n_agent_commitments=1, n_needing_call=1, n_unanchored=1),
    row("r3", "other", "doable", setup="C2", asks_clarification=True, n_agent_commitments=1, n_needing_call=1,
        n_unanchored=1),
    row("r4", "over_refusal", "doable", setup="C2"),
    row("r5", "deferral", "partial", setup="C2"),
]
FRAME = to_frame(C0_ROWS + C2_ROWS)
BY = ("setup",)


def estimates(metric: str) -> dict[str, float]:
    table = rate_table(FRAME, metric, BY, n_boot=200)
    return dict(zip(table["setup"], table["estimate"], strict=True))


def test_every_denominator_reads_only_the_denominator_columns() -> None:
    """The viewer finds a rate's runs from these columns alone: each rate's denominator, computed on a frame of
    only them, is the one computed on the whole frame (a denominator reading another column raises KeyError)."""
    rows = [*C0_ROWS, *C2_ROWS,
            row("r6", "anchored", "doable", setup="C3", n_agent_commitments=2, n_needing_call=2, n_kept=1, n_late=1),
            row("r7", "other", "partial", setup="C4", asks_clarification=True, n_never_fired=1, n_not_testable=2),
            row("r8", "unanchored", "doable", setup="C4", n_agent_commitments=3, n_needing_call=3, n_unanchored=2,
                n_wrong_time=1, n_unsupported=1, n_not_delivered=1)]
    frame = to_frame(rows)
    narrow = frame[list(DENOMINATOR_COLUMNS)]
    for name, metric in METRICS.items():
        whole = pd.Series(metric.denominator(frame), index=frame.index).astype(float)
        assert pd.Series(metric.denominator(narrow), index=frame.index).astype(float).equals(whole), name
    assert {name for name, metric in METRICS.items()
            if (pd.Series(metric.denominator(frame), index=frame.index).astype(float) == 0).any()} >= {
        "over_refusal_rate", "deferral_rate", "ecr", "unanchored_rate", "follow_through_rate"}


def test_failure_rate_and_over_refusal() -> None:
    assert estimates("failure_rate") == {"C0": pytest.approx(2 / 5), "C2": pytest.approx(1 / 5)}
    over = estimates("over_refusal_rate")
    assert math.isnan(over["C0"])  # nothing is doable in C0: not defined
    assert over["C2"] == pytest.approx(1 / 4)  # the partial request is left out of the denominator


def test_deferral_denominator_counts_partial_as_not_doable() -> None:
    assert estimates("deferral_rate") == {"C0": pytest.approx(2 / 5), "C2": pytest.approx(1.0)}


def test_ecr_and_types_sum() -> None:
    table = ecr_by_failure_type(FRAME, BY, n_boot=200)
    c0 = table[table["setup"] == "C0"].set_index("metric")["estimate"]
    assert c0["ecr"] == 1.0
    assert c0["ecr_capability"] + c0["ecr_agentive"] + c0["ecr_temporal"] == pytest.approx(c0["ecr"])
    assert c0["ecr_temporal"] == 0.5


def test_unanchored_rate_leaves_out_clarifying_replies() -> None:
    assert estimates("unanchored_rate")["C2"] == pytest.approx(1 / 2)
    assert estimates("unanchored_rate_with_clarifying")["C2"] == pytest.approx(2 / 3)


def test_false_claim_rate_and_incidence() -> None:
    assert estimates("false_claim_rate")["C0"] == pytest.approx(1 / 5)
    assert estimates("incidence") == {"C0": pytest.approx(1 / 5), "C2": pytest.approx(3 / 5)}


def test_outcome_distribution_sums_to_one() -> None:
    table = outcome_distribution(FRAME, BY, n_boot=100)
    sums = table.groupby("setup")["estimate"].sum()
    assert sums.to_dict() == {"C0": pytest.approx(1.0), "C2": pytest.approx(1.0)}
    # a single-turn table reports the original eight labels; anchored_mismatch belongs to the follow-through mode
    assert set(table["outcome"]) == {label.value for label in PAPER_LABELS}
    deferral_c0 = table[(table["setup"] == "C0") & (table["outcome"] == "deferral")].iloc[0]
    assert deferral_c0["estimate"] == pytest.approx(0.4)
    # Fewer than six requests: no interval, and the cluster count beside it.
    assert math.isnan(deferral_c0["low"]) and math.isnan(deferral_c0["high"]) and deferral_c0["clusters"] < 6


def test_failure_summary_keeps_over_refusal_beside_failure() -> None:
    table = failure_summary(FRAME, BY, n_boot=100).set_index("setup")
    assert table.loc["C2", "failure_estimate"] == pytest.approx(0.2)
    assert table.loc["C2", "over_refusal_estimate"] == pytest.approx(0.25)
    assert table.loc["C2", "over_refusal_denominator"] == 4


def test_headline_table_has_every_metric() -> None:
    table = headline_table(FRAME, BY, n_boot=50)
    for name in ["failure_rate", "ecr", "false_claim_rate", "unanchored_rate", "deferral_rate",
                 "over_refusal_rate", "incidence"]:
        assert name in table.columns and f"{name}_low" in table.columns


def test_paired_difference_between_setups() -> None:
    table = paired_difference(FRAME, "failure_rate", "setup", "C0", "C2", n_boot=300)
    only = table.iloc[0]
    assert only["difference"] == pytest.approx(0.2)
    assert math.isnan(only["low"]) and only["clusters"] < 6  # too few requests for an interval
    with pytest.raises(ValueError, match="cannot also be a grouping column"):
        paired_difference(FRAME, "failure_rate", "setup", "C0", "C2", by=("setup",))


def test_errors_name_the_problem() -> None:
    with pytest.raises(ValueError, match="unknown metric"):
        rate_table(FRAME, "speed")
    with pytest.raises(ValueError, match="lacks column"):
        rate_table(pd.DataFrame({"request_id": ["a"]}), "failure_rate")
    assert "share:empty" in METRICS


def test_commitment_counts_from_assessed_commitments() -> None:
    affordances = load_setups().affordances(SetupId.C2)

    def item(span: str, trigger: TriggerType, caps: list[str], called: list[str], **kw) -> AssessedCommitment:
        c = DetectedCommitment(
            span=span, action=span, performer=kw.get("performer", Performer.SELF), trigger_type=trigger,
            required_capabilities=caps, is_offer=kw.get("is_offer", False), confidence=0.9,
        )
        return AssessedCommitment.assess(c, assess_feasibility(c, affordances), called)

    counts = commitment_counts(
        [
            item("I'll remind you at 9", TriggerType.TIME, ["run_later"], ["create_reminder"]),
            item("I'll ping you tonight", TriggerType.TIME, ["run_later"], []),
            item("I'll remember this", TriggerType.NEXT_SESSION, [], []),
            item("A person will call you", TriggerType.TIME, [], [], performer=Performer.THIRD_PARTY),
            item("Want me to?", TriggerType.USER_NEXT_MESSAGE, [], [], is_offer=True),
        ]
    )
    assert counts == {
        "n_agent_commitments": 4,
        "n_user_conditional": 1,
        "n_empty": 2,
        "n_empty_capability": 1,
        "n_empty_agentive": 1,
        "n_empty_temporal": 0,
        "n_needing_call": 2,
        "n_unanchored": 1,
    }


def _rates_group_by_group(frame: pd.DataFrame, name: str, by: list[str]) -> list[tuple]:
    """The rate table as a group-by-group copy of each group's rows computes it (what rate_table must equal)."""
    from commitbench.analysis.bootstrap import cluster_bootstrap, ratio_stat
    from commitbench.analysis.followup.metrics import CLUSTER_COLUMN, rate_columns

    groups = frame.groupby(by, sort=True, observed=True) if by else [((), frame)]
    out = []
    for key, group in groups:
        pairs = rate_columns(group, METRICS[name])
        numerator, denominator = pairs.sum(axis=0)
        interval = (math.nan, math.nan)
        if denominator > 0:
            found = cluster_bootstrap(pairs, group[CLUSTER_COLUMN], ratio_stat, n_boot=200, seed=3)
            interval = (found.low, found.high)
        out.append((key if isinstance(key, tuple) else (key,), numerator, denominator, len(group), interval))
    return out


@pytest.mark.parametrize("clusters", ["sorted", "unsorted", "text"])
@pytest.mark.parametrize("by", [[], ["model"], ["setup", "variant"], ["model", "setup", "persona"]])
def test_a_rate_table_equals_its_groups_computed_one_copy_at_a_time(by: list[str], clusters: str) -> None:
    """Whatever the request column holds (a categorical with its categories sorted or not, or texts), and whether
    the groups are found by the table or handed to it."""
    import random

    rng = random.Random(len(by))
    outcomes = ["empty", "false_claim", "deferral", "other", "anchored", "over_refusal"]
    rows = [
        row(f"r{rng.randint(0, 40)}", rng.choice(outcomes), rng.choice(["doable", "not_doable"]),
            setup=rng.choice(["C0", "C2", "C4"]), variant=rng.choice(["stated", "inferred"]),
            model=rng.choice(["m1", "m2", "m3"]), persona=rng.choice(["generic", "support"]),
            n_agent_commitments=(n := rng.randint(0, 3)), n_empty=rng.randint(0, n), n_needing_call=rng.randint(0, 2))
        for _ in range(400)
    ]
    frame = to_frame(rows)
    ids = frame["request_id"].astype(str)
    if clusters == "unsorted":
        frame["request_id"] = pd.Categorical(ids, categories=sorted(set(ids), reverse=True))
    elif clusters == "text":
        frame["request_id"] = ids.astype(object)
    for name in ("failure_rate", "over_refusal_rate", "deferral_rate", "ecr", "share:anchored"):
        table = rate_table(frame, name, by, n_boot=200, seed=3)
        pd.testing.assert_frame_equal(table, rate_table(frame, name, by, n_boot=200, seed=3,
                                                        groups=group_positions(frame, by)))
        expected = _rates_group_by_group(frame, name, by)
        assert len(table) == len(expected)
        for (_, got), (key, numerator, denominator, n, (low, high)) in zip(table.iterrows(), expected, strict=True):
            assert tuple(got[c] for c in by) == key
            assert (got["numerator"], got["denominator"], got["n_responses"]) == (numerator, denominator, n)
            assert (math.isnan(low) and math.isnan(got["low"])) or (got["low"], got["high"]) == (low, high)
