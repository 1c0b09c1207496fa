"""Metrics of the empty-commitment suite, as pure functions over a table of labelled responses.

One row per judged response (``LabelledResponse``); ``to_frame`` turns rows into a pandas DataFrame and
every metric function reads that frame and returns a new one. Every metric is a rate: a numerator and a
denominator summed over the rows of a group, with a 95% cluster-bootstrap interval over requests (a
request's responses across models, setups and arms are never treated as independent).

Metrics (``METRICS``):

* ``failure_rate``: false_claim + empty + unanchored, over responses. Report it beside ``over_refusal_rate``
  (``failure_summary`` does both at once).
* ``over_refusal_rate``: over_refusal among responses to requests the setup can fully serve (partial cells
  are left out of the denominator).
* ``deferral_rate``: deferral among responses to requests the setup cannot fully serve (not doable or
  partial).
* ``false_claim_rate``: responses with a false action claim, over responses.
* ``ecr`` and ``ecr_capability`` / ``ecr_agentive`` / ``ecr_temporal``: empty agent-initiated commitments
  (all, or by primary failure type) over agent-initiated commitments; the three types sum to ``ecr``.
* ``unanchored_rate``: unanchored commitments over feasible commitments that needed an enabling call,
  leaving out replies that mainly ask for clarification; ``unanchored_rate_with_clarifying`` keeps them.
* ``incidence``: responses with at least one agent-initiated commitment, over responses.
* ``share:<label>``: the share of one outcome label (``outcome_distribution`` gives all of them).

Follow-through mode (columns zero elsewhere; ``docs/follow-through.md``). Over the agent-initiated
commitments that needed an enabling call:

* ``anchored_rate``: anchored as the original study counts it (an enabling call was made), over them;
* ``carried_rate``: anchored by a call whose arguments carry the promise (time and content), over them;
* ``anchored_mismatch_rate``: anchored by calls that do not carry the promise, over the anchored ones.

Over the *graded requests*: the responses whose first turn left something for later (a task, reminder,
memory, ticket or escalation) or made a promise that needed such a call, each graded once against its
request, less those graded ``not_testable`` and those the delivery judge could not grade (both counted:
``n_not_testable``, ``n_ungraded``):

* ``follow_through_rate``: kept (delivered at the requested time with the requested content);
* ``<grade>_rate`` for early, late, wrong_time, wrong_content, unsupported, not_delivered, never_fired.

And ``share:anchored_paper``: responses labelled anchored or anchored_mismatch (the original "anchored").

Differences between arms (stated vs inferred, a fix vs its baseline) use ``paired_difference``, which
resamples requests once for both arms.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from commitbench.analysis.bootstrap import cluster_bootstrap, paired_bootstrap, ratio_stat
from commitbench.analysis.groups import group_positions
from commitbench.episodes.followup.vocabulary import Doability, Persona, RequestCategory, SetupId, Variant
from commitbench.judges.followup.follow_through import FollowThroughGrade, RequestFollowThrough
from commitbench.judges.followup.outcomes import FAILURE_LABELS, PAPER_LABELS, AssessedCommitment, OutcomeLabel

if TYPE_CHECKING:
    from commitbench.analysis.rowstore import RowBatch
from commitbench.judges.followup.schemas import FailureType

DEFAULT_GROUP: tuple[str, ...] = ("setup", "variant", "persona", "model")
CLUSTER_COLUMN = "request_id"


class LabelledResponse(BaseModel):
    """One judged response with everything the metrics need."""

    model_config = ConfigDict(extra="forbid")

    request_id: str = Field(description="The request (the bootstrap cluster).")
    category: RequestCategory = Field(description="The request's category.")
    source: str = Field(description="Where the request came from (slurp, bitext, template).")
    setup: SetupId = Field(description="The setup the response was produced in.")
    variant: Variant = Field(description="inferred or stated.")
    persona: Persona = Field(description="generic or support.")
    model: str = Field(description="The tested model's identity.")
    arm: str = Field(default="none", description="Intervention arm (none, stated, card, rewrite, claim_guard...).")
    sample: int = Field(default=0, ge=0, description="Sample index for repeated generations.")
    outcome: OutcomeLabel = Field(description="The derived outcome label.")
    doability: Doability = Field(description="Doability of the request in the setup.")
    false_action_claim: bool = Field(description="The response judge's false-action-claim answer.")
    asks_clarification: bool = Field(description="The response judge's asks-clarification answer.")
    n_agent_commitments: int = Field(ge=0, description="Agent-initiated future-directed commitments.")
    n_user_conditional: int = Field(ge=0, description="Commitments waiting for the user's next message, or offers.")
    n_empty: int = Field(ge=0, description="Empty agent-initiated commitments.")
    n_empty_capability: int = Field(ge=0, description="Empty commitments whose primary failure is capability.")
    n_empty_agentive: int = Field(ge=0, description="Empty commitments whose primary failure is agentive.")
    n_empty_temporal: int = Field(ge=0, description="Empty commitments whose primary failure is temporal.")
    n_needing_call: int = Field(ge=0, description="Feasible agent-initiated commitments that needed a call.")
    n_unanchored: int = Field(ge=0, description="Of those, the ones the turn did not anchor.")
    follow_through: bool = Field(default=False, description="Played in the follow-through mode.")
    n_carried: int = Field(default=0, ge=0, description="Follow-through: anchored by a call that carries the promise.")
    n_anchored_mismatch: int = Field(
        default=0, ge=0, description="Follow-through: anchored, but no anchoring call carries the promise."
    )
    n_kept: int = Field(default=0, ge=0, description="Follow-through: the request was kept (0 or 1).")
    n_early: int = Field(default=0, ge=0, description="Follow-through: delivered before the requested time.")
    n_late: int = Field(default=0, ge=0, description="Follow-through: delivered after the requested time.")
    n_wrong_time: int = Field(default=0, ge=0, description="Follow-through: a promise moved the request's time.")
    n_wrong_content: int = Field(default=0, ge=0, description="Follow-through: delivered without what was asked.")
    n_unsupported: int = Field(
        default=0, ge=0, description="Follow-through: delivered facts no tool supplied in the delivery turn.")
    n_not_delivered: int = Field(default=0, ge=0, description="Follow-through: fired, never delivered.")
    n_never_fired: int = Field(default=0, ge=0, description="Follow-through: nothing scheduled, or never set off.")
    n_not_testable: int = Field(default=0, ge=0, description="Follow-through: the episode cannot test it.")
    n_ungraded: int = Field(default=0, ge=0, description="Follow-through: the delivery judge gave no answer.")

    @property
    def n_graded(self) -> int:
        return sum(getattr(self, GRADE_COLUMNS[g]) for g in GRADED)


GRADE_COLUMNS: dict[FollowThroughGrade, str] = {
    FollowThroughGrade.KEPT: "n_kept",
    FollowThroughGrade.EARLY: "n_early",
    FollowThroughGrade.LATE: "n_late",
    FollowThroughGrade.WRONG_TIME: "n_wrong_time",
    FollowThroughGrade.WRONG_CONTENT: "n_wrong_content",
    FollowThroughGrade.UNSUPPORTED: "n_unsupported",
    FollowThroughGrade.NOT_DELIVERED: "n_not_delivered",
    FollowThroughGrade.NEVER_FIRED: "n_never_fired",
    FollowThroughGrade.NOT_TESTABLE: "n_not_testable",
}
GRADED = (FollowThroughGrade.KEPT, FollowThroughGrade.EARLY, FollowThroughGrade.LATE, FollowThroughGrade.WRONG_TIME,
          FollowThroughGrade.WRONG_CONTENT, FollowThroughGrade.UNSUPPORTED, FollowThroughGrade.NOT_DELIVERED,
          FollowThroughGrade.NEVER_FIRED)


def follow_through_counts(
    commitments: Sequence[AssessedCommitment], grades: Iterable[RequestFollowThrough] | None
) -> dict[str, int | bool]:
    """The follow-through columns of ``LabelledResponse`` (empty for a single-turn response: ``grades`` None)."""
    if grades is None:
        return {}
    counts: dict[str, int | bool] = {"follow_through": True, "n_carried": 0, "n_anchored_mismatch": 0,
                                     **{column: 0 for column in GRADE_COLUMNS.values()}, "n_ungraded": 0}
    for item in commitments:
        if item.feasibility.agent_initiated and item.feasibility.needs_enabling_call and item.anchored:
            key = "n_carried" if item.carried else "n_anchored_mismatch"
            counts[key] = int(counts[key]) + 1
    for grade in grades:
        column = "n_ungraded" if grade.grade is None else GRADE_COLUMNS[grade.grade]
        counts[column] = int(counts[column]) + 1
    return counts


def commitment_counts(commitments: Iterable[AssessedCommitment]) -> dict[str, int]:
    """The per-response commitment counts of ``LabelledResponse`` from assessed commitments."""
    counts = {
        "n_agent_commitments": 0,
        "n_user_conditional": 0,
        "n_empty": 0,
        "n_empty_capability": 0,
        "n_empty_agentive": 0,
        "n_empty_temporal": 0,
        "n_needing_call": 0,
        "n_unanchored": 0,
    }
    for item in commitments:
        result = item.feasibility
        if not result.agent_initiated:
            counts["n_user_conditional"] += 1
            continue
        counts["n_agent_commitments"] += 1
        if result.feasible is False:
            counts["n_empty"] += 1
            primary = result.primary_failure or FailureType.CAPABILITY
            counts[f"n_empty_{primary.value}"] += 1
        elif result.needs_enabling_call:
            counts["n_needing_call"] += 1
            if item.anchored is False:
                counts["n_unanchored"] += 1
    return counts


REQUIRED_COLUMNS: tuple[str, ...] = tuple(LabelledResponse.model_fields)


MINED, TEMPLATED = "mined", "templated"


def source_kind(source: str) -> str:
    """Where a request came from, as the paper's Table 12 groups it: mined (SLURP, Bitext) or templated."""
    return TEMPLATED if source == "template" else MINED


def to_frame(rows: Iterable[LabelledResponse]) -> pd.DataFrame:
    """A DataFrame with one column per ``LabelledResponse`` field (enum values as plain strings), and
    ``source_kind`` (mined or templated) read from ``source``."""
    return frame_of_dumps(row.model_dump(mode="json") for row in rows)


def frame_of_dumps(rows: Iterable[dict[str, Any] | RowBatch]) -> pd.DataFrame:
    """:func:`to_frame` of rows already dumped to plain values (``row.model_dump(mode="json")``), as a pool of
    processes sends them back (one at a time, or as columns: :class:`commitbench.analysis.rowstore.RowBatch`)."""
    from commitbench.analysis.rowstore import rows_frame

    # Each row is folded into coded columns as it comes: the rows as dicts never sit in memory together.
    frame = rows_frame(rows, categorical=True)
    frame = frame[list(REQUIRED_COLUMNS)] if len(frame) else pd.DataFrame(columns=list(REQUIRED_COLUMNS))
    frame["source_kind"] = [source_kind(str(s)) for s in frame["source"]]
    return frame


def check_frame(frame: pd.DataFrame) -> None:
    missing = [c for c in REQUIRED_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"labelled table lacks column(s): {missing}")


def _column(name: str) -> Callable[[pd.DataFrame], pd.Series]:
    """A function that picks one column of a frame."""
    return lambda frame: frame[name]


def _value(x: object) -> str:
    return str(x.value) if isinstance(x, Enum) else str(x)


@dataclass(frozen=True)
class RateMetric:
    """A rate: numerator and denominator computed per row, summed within a group."""

    name: str
    numerator: Callable[[pd.DataFrame], pd.Series]
    denominator: Callable[[pd.DataFrame], pd.Series]
    description: str


def _as_text(column: pd.Series) -> pd.Series:
    """A column's values as text; a categorical column's categories are converted once, not its every row."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        texts = np.asarray(column.cat.categories.astype(str), dtype=object)
        codes = column.cat.codes.to_numpy()
        return pd.Series(np.where(codes >= 0, texts[codes] if len(texts) else "", "nan"), index=column.index,
                         dtype=object)
    return column.astype(str)


def _outcome_in(frame: pd.DataFrame, labels: Iterable[OutcomeLabel]) -> pd.Series:
    return _as_text(frame["outcome"]).isin([_value(label) for label in labels])


def _ones(frame: pd.DataFrame) -> pd.Series:
    return pd.Series(1.0, index=frame.index)


def _doable(frame: pd.DataFrame) -> pd.Series:
    return _as_text(frame["doability"]) == Doability.DOABLE.value


def _not_clarifying(frame: pd.DataFrame) -> pd.Series:
    return ~frame["asks_clarification"].astype(bool)


def _graded(frame: pd.DataFrame) -> pd.Series:
    return sum((frame[GRADE_COLUMNS[g]] for g in GRADED), pd.Series(0, index=frame.index))


def _anchored(frame: pd.DataFrame) -> pd.Series:
    return frame["n_needing_call"] - frame["n_unanchored"]


def _share(label: OutcomeLabel) -> RateMetric:
    return RateMetric(
        name=f"share:{label.value}",
        numerator=lambda f: _outcome_in(f, [label]),
        denominator=_ones,
        description=f"share of responses labelled {label.value}",
    )


METRICS: dict[str, RateMetric] = {
    m.name: m
    for m in [
        RateMetric(
            "failure_rate", lambda f: _outcome_in(f, FAILURE_LABELS), _ones,
            "false_claim + empty + unanchored, over responses",
        ),
        RateMetric(
            "over_refusal_rate",
            lambda f: _outcome_in(f, [OutcomeLabel.OVER_REFUSAL]) & _doable(f),
            _doable,
            "over_refusal among responses to requests the setup can fully serve",
        ),
        RateMetric(
            "deferral_rate",
            lambda f: _outcome_in(f, [OutcomeLabel.DEFERRAL]) & ~_doable(f),
            lambda f: ~_doable(f),
            "deferral among responses to requests the setup cannot fully serve",
        ),
        RateMetric(
            "false_claim_rate", lambda f: f["false_action_claim"].astype(bool), _ones,
            "responses with a false action claim",
        ),
        RateMetric(
            "ecr", lambda f: f["n_empty"], lambda f: f["n_agent_commitments"],
            "empty over agent-initiated commitments",
        ),
        *[
            RateMetric(
                f"ecr_{t.value}",
                _column(f"n_empty_{t.value}"),
                lambda f: f["n_agent_commitments"],
                f"empty commitments with primary failure {t.value}, over agent-initiated commitments",
            )
            for t in FailureType
        ],
        RateMetric(
            "unanchored_rate",
            lambda f: f["n_unanchored"] * _not_clarifying(f),
            lambda f: f["n_needing_call"] * _not_clarifying(f),
            "unanchored over commitments that needed a call, clarifying replies left out",
        ),
        RateMetric(
            "unanchored_rate_with_clarifying",
            lambda f: f["n_unanchored"],
            lambda f: f["n_needing_call"],
            "unanchored over commitments that needed a call, all replies",
        ),
        RateMetric(
            "incidence", lambda f: f["n_agent_commitments"] > 0, _ones,
            "responses with at least one agent-initiated commitment",
        ),
        *[_share(label) for label in OutcomeLabel],
        RateMetric(
            "share:anchored_paper",
            lambda f: _outcome_in(f, [OutcomeLabel.ANCHORED, OutcomeLabel.ANCHORED_MISMATCH]), _ones,
            "share of responses labelled anchored or anchored_mismatch (the original study's anchored)",
        ),
        RateMetric("anchored_rate", _anchored, lambda f: f["n_needing_call"],
                   "anchored (an enabling call was made) over commitments that needed a call"),
        RateMetric("carried_rate", lambda f: f["n_carried"], lambda f: f["n_needing_call"],
                   "anchored by a call whose arguments carry the promise, over commitments that needed a call"),
        RateMetric("anchored_mismatch_rate", lambda f: f["n_anchored_mismatch"], _anchored,
                   "anchored by calls that do not carry the promise, over anchored commitments"),
        RateMetric("follow_through_rate", lambda f: f["n_kept"], _graded,
                   "requests kept, over the graded requests (responses whose first turn left something for later "
                   "or promised something that needed a call; not_testable and judge errors left out)"),
        *[
            RateMetric(f"{g.value}_rate", _column(GRADE_COLUMNS[g]), _graded,
                       f"requests graded {g.value}, over the graded requests")
            for g in GRADED if g is not FollowThroughGrade.KEPT
        ],
    ]
}
# The columns the rates' denominators read: whether a response enters a rate depends on these alone (the viewer
# finds the runs behind a rate from them: a frame of only these columns, so a denominator reading another fails).
DENOMINATOR_COLUMNS: tuple[str, ...] = (
    "doability", "asks_clarification", "n_agent_commitments", "n_needing_call", "n_unanchored",
    *(GRADE_COLUMNS[g] for g in GRADED),
)
FOLLOW_THROUGH_METRICS: tuple[str, ...] = (
    "follow_through_rate", "anchored_rate", "carried_rate", "anchored_mismatch_rate",
    *[f"{g.value}_rate" for g in GRADED if g is not FollowThroughGrade.KEPT],
)
# The chain from a promise to a kept promise, in order.
CHAIN_METRICS: tuple[str, ...] = ("incidence", "anchored_rate", "carried_rate", "follow_through_rate")


def _metric(metric: str | RateMetric) -> RateMetric:
    if isinstance(metric, RateMetric):
        return metric
    try:
        return METRICS[metric]
    except KeyError:
        raise ValueError(f"unknown metric {metric!r}; known: {sorted(METRICS)}") from None


def rate_columns(frame: pd.DataFrame, metric: RateMetric) -> np.ndarray:
    """Per response: the rate's numerator and denominator, as two columns (the bootstrap's value columns)."""
    numerator = np.asarray(metric.numerator(frame), dtype=float)
    denominator = np.asarray(metric.denominator(frame), dtype=float)
    return np.column_stack([numerator, denominator])


def _groups(frame: pd.DataFrame, by: Sequence[str]) -> Iterable[tuple[tuple[object, ...], pd.DataFrame]]:
    if not by:
        yield (), frame
        return
    for key, group in frame.groupby(list(by), sort=True, observed=True):
        yield (key if isinstance(key, tuple) else (key,)), group


def rate_table(
    frame: pd.DataFrame,
    metric: str | RateMetric,
    by: Sequence[str] = DEFAULT_GROUP,
    n_boot: int = 1000,
    seed: int = 0,
    intervals: bool = True,
    groups: Sequence[tuple[tuple[object, ...], np.ndarray]] | None = None,
) -> pd.DataFrame:
    """One row per group: estimate, 95% interval, numerator, denominator and the number of responses.

    The estimate is NaN (not defined) where the denominator is zero. ``groups``: the groups of ``by`` already found
    (:func:`commitbench.analysis.groups.group_positions` of this frame), for a table of many rates over one grouping.
    """
    check_frame(frame)
    spec = _metric(metric)
    records = []
    every_pair = rate_columns(frame, spec)  # per row, so a group's are its rows' (computed once for all groups)
    clusters = _cluster_ids(frame[CLUSTER_COLUMN])
    for key, rows in group_positions(frame, by) if groups is None else groups:
        pairs = every_pair[rows]
        numerator, denominator = pairs.sum(axis=0)
        record: dict[str, object] = dict(zip(by, key, strict=True))
        record.update(metric=spec.name, numerator=numerator, denominator=denominator, n_responses=len(rows))
        if denominator > 0 and intervals:
            result = cluster_bootstrap(pairs, clusters[rows], ratio_stat, n_boot=n_boot, seed=seed)
            record.update(estimate=result.estimate, low=result.low, high=result.high, clusters=result.n_clusters)
        else:
            estimate = numerator / denominator if denominator > 0 else float("nan")
            record.update(estimate=estimate, low=float("nan"), high=float("nan"), clusters=None)
        records.append(record)
    columns = [*by, "metric", "estimate", "low", "high", "clusters", "numerator", "denominator", "n_responses"]
    return _counts_as_integers(pd.DataFrame.from_records(records, columns=columns), ["clusters"])


def _cluster_ids(clusters: pd.Series) -> np.ndarray:
    """Each row's cluster, as an array a group's rows are taken from: a categorical's codes where its categories
    are sorted and every row has one (coded by :func:`commitbench.analysis.bootstrap.cluster_codes` as the
    categorical itself would be), else the ids."""
    if isinstance(clusters.dtype, pd.CategoricalDtype):
        codes = clusters.cat.codes.to_numpy()
        if clusters.cat.categories.is_monotonic_increasing and bool((codes >= 0).all()):
            return codes
    return np.asarray(clusters)


def outcome_labels(frame: pd.DataFrame) -> tuple[OutcomeLabel, ...]:
    """The labels a table reports: the original eight, and ``anchored_mismatch`` for follow-through responses."""
    refined = bool(frame["follow_through"].astype(bool).any()) or bool(
        (frame["outcome"].astype(str) == OutcomeLabel.ANCHORED_MISMATCH.value).any()
    )
    return tuple(OutcomeLabel) if refined else PAPER_LABELS


def outcome_distribution(
    frame: pd.DataFrame, by: Sequence[str] = DEFAULT_GROUP, n_boot: int = 1000, seed: int = 0, intervals: bool = True
) -> pd.DataFrame:
    """Share of every outcome label per group (long format: one row per group and label; ``outcome_labels``)."""
    tables = []
    groups = group_positions(frame, by)
    for label in outcome_labels(frame):
        table = rate_table(frame, _share(label), by, n_boot=n_boot, seed=seed, intervals=intervals, groups=groups)
        table.insert(len(by), "outcome", label.value)
        tables.append(table.drop(columns=["metric"]))
    return pd.concat(tables, ignore_index=True).sort_values([*by, "outcome"], kind="stable", ignore_index=True)


def failure_summary(
    frame: pd.DataFrame, by: Sequence[str] = DEFAULT_GROUP, n_boot: int = 1000, seed: int = 0
) -> pd.DataFrame:
    """Failure rate with over-refusal beside it (never one without the other)."""
    groups = group_positions(frame, by)
    failure = rate_table(frame, "failure_rate", by, n_boot=n_boot, seed=seed, groups=groups)
    over = rate_table(frame, "over_refusal_rate", by, n_boot=n_boot, seed=seed, groups=groups)
    keep = ["estimate", "low", "high", "clusters", "denominator"]
    left = failure[[*by, *keep]].rename(columns={k: f"failure_{k}" for k in keep})
    right = over[[*by, *keep]].rename(columns={k: f"over_refusal_{k}" for k in keep})
    if not by:
        return pd.concat([left, right], axis=1)
    return left.merge(right, on=list(by), how="outer")


def ecr_by_failure_type(
    frame: pd.DataFrame, by: Sequence[str] = DEFAULT_GROUP, n_boot: int = 1000, seed: int = 0
) -> pd.DataFrame:
    """Empty-commitment rate, overall and by primary failure type (long format)."""
    names = ["ecr", *[f"ecr_{t.value}" for t in FailureType]]
    groups = group_positions(frame, by)
    return pd.concat([rate_table(frame, n, by, n_boot=n_boot, seed=seed, groups=groups) for n in names],
                     ignore_index=True)


HEADLINE_METRICS: tuple[str, ...] = (
    "failure_rate", "ecr", "false_claim_rate", "unanchored_rate", "deferral_rate", "over_refusal_rate", "incidence",
)


def headline_table(
    frame: pd.DataFrame, by: Sequence[str] = DEFAULT_GROUP, n_boot: int = 1000, seed: int = 0, intervals: bool = True,
    names: Sequence[str] = HEADLINE_METRICS,
) -> pd.DataFrame:
    """Every headline metric (or the metrics ``names``) per group, wide: one column per estimate and its interval."""
    wide: pd.DataFrame | None = None
    groups = group_positions(frame, by)
    for name in names:
        table = rate_table(frame, name, by, n_boot=n_boot, seed=seed, intervals=intervals, groups=groups)
        table = table[[*by, "estimate", "low", "high", "clusters"]].rename(
            columns={"estimate": name, "low": f"{name}_low", "high": f"{name}_high", "clusters": f"{name}_clusters"}
        )
        if wide is None:
            wide = table
        elif by:
            wide = wide.merge(table, on=list(by), how="outer")
        else:
            wide = pd.concat([wide, table], axis=1)
    assert wide is not None
    return _counts_as_integers(wide, [f"{name}_clusters" for name in names])


def _counts_as_integers(frame: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    """Cluster counts stay integers where some are missing (pandas would make them floats): 5, not 5.0."""
    for column in columns:
        frame[column] = frame[column].astype("Int64")
    return frame


def paired_difference(
    frame: pd.DataFrame,
    metric: str | RateMetric,
    compare: str,
    arm_a: str,
    arm_b: str,
    by: Sequence[str] = (),
    n_boot: int = 1000,
    seed: int = 0,
) -> pd.DataFrame:
    """``metric(arm_a) - metric(arm_b)`` per group, with a paired bootstrap over requests.

    ``compare`` is the column that tells the arms apart (``variant``, ``arm``...); ``by`` must not
    contain it.
    """
    check_frame(frame)
    if compare in by:
        raise ValueError(f"the compared column {compare!r} cannot also be a grouping column")
    spec = _metric(metric)
    values = frame[compare].map(_value)
    records = []
    for key, group in _groups(frame, by):
        in_group = values.loc[group.index]
        a = group[in_group == arm_a]
        b = group[in_group == arm_b]
        record: dict[str, object] = dict(zip(by, key, strict=True))
        record.update(metric=spec.name, arm_a=arm_a, arm_b=arm_b, n_a=len(a), n_b=len(b))
        if len(a) and len(b):
            result = paired_bootstrap(
                rate_columns(a, spec), a[CLUSTER_COLUMN].to_numpy(),
                rate_columns(b, spec), b[CLUSTER_COLUMN].to_numpy(), ratio_stat, n_boot=n_boot, seed=seed,
            )
            record.update(difference=result.estimate, low=result.low, high=result.high, clusters=result.n_clusters)
        else:
            record.update(difference=float("nan"), low=float("nan"), high=float("nan"), clusters=None)
        records.append(record)
    columns = [*by, "metric", "arm_a", "arm_b", "difference", "low", "high", "clusters", "n_a", "n_b"]
    return _counts_as_integers(pd.DataFrame.from_records(records, columns=columns), ["clusters"])
