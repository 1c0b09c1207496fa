"""The follow-up report: outcome tables, headline rates and fix differences of a run, as one typed document.

:func:`responses_from_records` turns stored checker records into metric rows (judge errors left out
and counted); :func:`build_followup_report` computes the tables (pure); :func:`write_followup_files`
writes every table as CSV and Markdown and the stacked-outcome figure, through the one report writer
(:func:`commitbench.analysis.tables.write_report_files`); :meth:`FollowupReport.views` describes the
tables for a front end. Every number reads as in every other table
(:func:`commitbench.analysis.tables.interval_text`: ``62% [40, 81]``, ``+12 pp [-3, +25]``).

A report reads one checker's labels (:func:`labeller_of` refuses records of two) and says which kind of
checker that is in its title, in every table's title, in every CSV row, in every Markdown heading and in
the figure: labels of the offline cue-word checker are a baseline, never the measurement, so they are
marked "offline baseline checker" wherever they are shown.

A run played in the follow-through mode gets one more section, ``follow_through``
(:class:`FollowThroughSection`): the follow-through rates per setup x variant x persona x model x arm
with intervals clustered by request, the chain from a promise to a kept promise (table and figure),
the paper-comparable figures (anchored as the original study counts it, the failure rate) beside the
refined split, and the fixes compared on the kept rate. The kept rate's denominator is stated with it
(``FollowThroughSection.denominator``), and every kept rate has beside it the counts of its group: graded,
not testable, and delivery-judge errors. A single-turn run's report is unchanged.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
from pydantic import BaseModel, Field

from commitbench.analysis.bootstrap import ratio_stat
from commitbench.analysis.call_errors import CallErrorRow, call_error_lines, call_error_view
from commitbench.analysis.comparisons import (
    Comparison,
    ModelPair,
    PairedMetric,
    compare_all,
    comparison_flags,
    comparison_frame,
    comparison_views,
)
from commitbench.analysis.cost import CostRow
from commitbench.analysis.followup.metrics import (
    CHAIN_METRICS,
    CLUSTER_COLUMN,
    FOLLOW_THROUGH_METRICS,
    GRADE_COLUMNS,
    GRADED,
    METRICS,
    LabelledResponse,
    RateMetric,
    ecr_by_failure_type,
    failure_summary,
    headline_table,
    outcome_distribution,
    paired_difference,
    rate_columns,
    rate_table,
    to_frame,
)
from commitbench.analysis.followup.rows import response_row
from commitbench.analysis.paper_tables import PaperIndex
from commitbench.analysis.tables import (
    ReportFigure,
    ReportTable,
    RunFilter,
    TableView,
    interval_text,
    note_withheld,
    percent,
    write_report_files,
)
from commitbench.aside import aside
from commitbench.identity import NO_ARM
from commitbench.judges.followup.labellers import FollowupLabelRecord
from commitbench.judges.followup.rules import CHECKER_NAME
from commitbench.judges.labelling import MixedLabellersError

GROUP = ["setup", "variant", "persona", "model"]
# The papers' pooled rows: every model together, one row per setup, variant, persona and arm.
POOLED = "pooled"
POOLED_GROUP = ["setup", "variant", "persona", "arm"]
# The paper's Table 12: rates by request source and by category, both personas pooled.
BY_SOURCE = ["source_kind", "setup", "variant", "model", "arm"]
BY_CATEGORY = ["category", "setup", "variant", "model", "arm"]
BREAKDOWN_METRICS = ("failure_rate", "over_refusal_rate", "false_claim_rate", "ecr", "unanchored_rate",
                     "deferral_rate")
PAIRED_METRICS = ("failure_rate", "over_refusal_rate", "false_claim_rate", "ecr")
FIGURE_FILE = "outcomes.png"
FOREST_FILE = "comparisons.png"
# The metrics model comparisons report, and what makes two runs the same episode.
COMPARED_METRICS = ("failure_rate", "ecr", "false_claim_rate", "unanchored_rate", "deferral_rate",
                    "over_refusal_rate", "incidence")
PAIR_KEY = ("request_id", "setup", "variant", "persona", "sample")
OFFLINE_KIND = "offline baseline checker"
LLM_KIND = "LLM checker"


def checker_kind(labeller: str) -> str:
    """'offline baseline checker' for the offline cue-word checker's labels, 'LLM checker' for an LLM judge's."""
    return OFFLINE_KIND if labeller == CHECKER_NAME else LLM_KIND


def labeller_of(records: Sequence[FollowupLabelRecord], expected: str) -> str:
    """The one labeller of ``records`` (``expected``); MixedLabellersError when any record is another's."""
    names = sorted({r.labeller for r in records} - {expected})
    if names:
        raise MixedLabellersError(
            f"the labels hold records of more than one labeller ({expected!r} expected; also "
            f"{', '.join(repr(n) for n in names)}); a report reads one labeller's labels only"
        )
    return expected


def response_frame(records: Iterable[FollowupLabelRecord], expected: str) -> tuple[pd.DataFrame, int]:
    """The metric rows of records streamed one at a time, as :func:`to_frame` makes them, and the number of
    judge errors left out; MixedLabellersError when a record is not ``expected``'s (as :func:`labeller_of`)."""
    errors = 0

    def rows() -> Iterator[LabelledResponse]:
        nonlocal errors
        for record in records:
            labeller_of([record], expected)
            row = response_row(record)
            if row is None:
                errors += 1
            else:
                yield row

    frame = to_frame(rows())
    return frame, errors


def responses_from_records(records: Sequence[FollowupLabelRecord]) -> tuple[list[LabelledResponse], int]:
    """Metric rows for the records with a label; also the number of judge errors left out."""
    rows: list[LabelledResponse] = []
    errors = 0
    for record in records:
        row = response_row(record)
        if row is None:
            errors += 1
        else:
            rows.append(row)
    return rows, errors


def outcome_table(frame: pd.DataFrame, n_boot: int = 1000) -> pd.DataFrame:
    """Wide outcome table: shares of every label, failure and over-refusal rates, per group."""
    by = ["setup", "variant", "persona", "model", "arm"]
    shares = outcome_distribution(frame, by, intervals=False)
    wide = shares.pivot_table(index=by, columns="outcome", values="estimate", observed=True).reset_index()
    counts = frame.groupby(by, observed=True).size().rename("n").reset_index()
    summary = failure_summary(frame, by, n_boot=n_boot)
    return counts.merge(wide, on=by).merge(summary, on=by)


def fix_differences(frame: pd.DataFrame, n_boot: int = 1000) -> pd.DataFrame:
    """Each intervention arm minus the plain arm on the same requests (paired bootstrap over requests)."""
    arms = sorted(a for a in frame["arm"].astype(str).unique() if a != NO_ARM)
    if not arms or NO_ARM not in set(frame["arm"].astype(str)):
        return pd.DataFrame()
    tables = [
        paired_difference(frame, metric, "arm", arm, NO_ARM, by=GROUP, n_boot=n_boot)
        for arm in arms
        for metric in PAIRED_METRICS
    ]
    return pd.concat(tables, ignore_index=True)


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return list(json.loads(frame.to_json(orient="records"))) if len(frame) else []


FT_PAIRED_METRICS = ("follow_through_rate", "anchored_rate", "carried_rate")
CHAIN_FIGURE_FILE = "follow_through_chain.png"
KEPT_DENOMINATOR = (
    "graded requests: the responses whose first turn left something for later (a successful schedule_task, "
    "create_reminder, memory_write, create_ticket or escalate_to_human call) or made an agent-initiated promise "
    "that needed such a call, each graded once against its request, less those not testable and those the "
    "delivery judge could not grade (both counted beside every kept rate)"
)
# The per-group counts written beside every kept rate.
FT_COUNTS = {"n_in_scope": "in scope", "n_graded": "graded", "n_not_testable": "not testable",
             "n_ungraded": "judge errors"}


class FollowThroughSection(BaseModel):
    """The follow-through tables of a run played in the follow-through mode."""

    responses: int = Field(description="Labelled follow-through responses.")
    commitments_needing_call: int = Field(description="Agent-initiated commitments that needed an enabling call.")
    denominator: str = Field(default=KEPT_DENOMINATOR, description="What the kept rate is taken over, in words.")
    in_scope: int = Field(description="Responses graded for follow-through (see ``denominator``), any grade.")
    graded: int = Field(description="Of those, the ones in the kept rate's denominator.")
    not_testable: int = Field(description="Of those in scope, the ones the episode cannot test (left out).")
    judge_errors: int = Field(description="Of those in scope, the ones the delivery judge could not grade (left out).")
    rates: list[dict[str, Any]] = Field(
        description="Per group: follow_through_rate (kept), anchored_rate, carried_rate, anchored_mismatch_rate and "
        "the rate of every other grade, each with a 95% interval clustered by request; and the group's counts "
        "n_in_scope, n_graded, n_not_testable and n_ungraded."
    )
    chain: list[dict[str, Any]] = Field(
        description="Per group: incidence -> anchored -> carried -> kept, with intervals clustered by request, and "
        "the kept rate's counts (n_graded, n_not_testable, n_ungraded)."
    )
    paper_comparable: list[dict[str, Any]] = Field(
        description="Per group: anchored as the original study counts it (anchored + anchored_mismatch) and the "
        "failure rate, beside the refined anchored and anchored_mismatch shares of responses."
    )
    fix_differences: list[dict[str, Any]] = Field(
        default_factory=list, description="Each arm minus the plain arm on kept, anchored and carried rates (paired), "
        "with each arm's not-testable count (n_not_testable_a, n_not_testable_b)."
    )


class FollowupReport(BaseModel):
    """Every table of a follow-up run (the document ``commitbench report --json`` prints)."""

    suite: Literal["followup"] = Field(default="followup", description="The suite the run belongs to.")
    run_dir: str = Field(description="The run directory.")
    title: str = Field(default="", description="Title naming the kind of checker whose labels the tables use.")
    judge: str = Field(description="The checker whose labels the tables use.")
    checker_kind: str = Field(description="'offline baseline checker' or 'LLM checker'.")
    texts: str = Field(
        default="", description="The file the paper's texts came from, or under the paper profile without one, "
        "that they are the project's wording ('' otherwise)."
    )
    profile: str = Field(
        default="commitbench",
        description="The run's profile (paper or commitbench), with any option set apart from it; see "
        "docs/validity.md.",
    )
    responses: int = Field(description="Labelled responses in the tables.")
    judge_errors: int = Field(description="Responses the checker could not label (left out).")
    n_boot: int = Field(description="Bootstrap replicates.")
    outcomes: list[dict[str, Any]] = Field(description="Outcome shares, failure and over-refusal rates per group.")
    headline: list[dict[str, Any]] = Field(description="Headline rates with 95% intervals clustered by request.")
    fix_differences: list[dict[str, Any]] = Field(description="Each arm minus the plain arm on the same requests.")
    by_source: list[dict[str, Any]] = Field(
        default_factory=list,
        description="Headline rates by request source (mined, templated) x setup x variant x model x arm, both "
        "personas pooled (the paper's Table 12): templated requests fill the categories where models promise most.",
    )
    by_category: list[dict[str, Any]] = Field(
        default_factory=list,
        description="The same by request category x setup x variant x model x arm.",
    )
    pooled: list[dict[str, Any]] = Field(
        default_factory=list,
        description="Headline rates pooled over the models (model 'pooled') per setup x variant x persona x arm, "
        "intervals clustered by request: the papers' pooled rows.",
    )
    failure_types: list[dict[str, Any]] = Field(
        default_factory=list,
        description="Empty-commitment rate overall and by primary failure type (capability, temporal, agentive) "
        "over agent-initiated commitments, per group, with intervals (metric ecr, ecr_capability, ...).",
    )
    unanchored_with_clarifying: list[dict[str, Any]] = Field(
        default_factory=list,
        description="Unanchored rate over commitments that needed a call, clarifying replies included (the headline "
        "rate leaves them out), per group, with intervals.",
    )
    comparisons: list[Comparison] = Field(
        default_factory=list,
        description="Model a minus model b per setup x variant for every headline rate (pairs asked for, thinking "
        "pairs), on the same requests, personas and samples; intervals clustered by request.",
    )
    comparisons_by_setup: list[Comparison] = Field(
        default_factory=list, description="The same pairs per setup (variants and personas together)."
    )
    cost: list[CostRow] = Field(default_factory=list, description="Calls, tokens and model time per model and arm.")
    call_errors: list[CallErrorRow] = Field(
        default_factory=list,
        description="Model calls that got no usable answer, per player and kind, and the cells left out for it.",
    )
    follow_through: FollowThroughSection | None = Field(
        default=None, description="The follow-through tables (runs of the follow-through mode only; absent otherwise)."
    )
    files: dict[str, list[str]] = Field(default_factory=dict, description="Files written for the report.")
    paper_tables: PaperIndex | None = Field(
        default=None, description="The paper's tables and figures written with --paper-tables, and what each holds."
    )

    def model_dump(self, **kwargs: Any) -> dict[str, Any]:
        """As pydantic's, without the ``follow_through`` key for a single-turn run (its report is unchanged)."""
        data = super().model_dump(**kwargs)
        if self.follow_through is None:
            data.pop("follow_through", None)
        return data

    def views(self, detail: bool = False) -> list[TableView]:
        """The tables; each number's cell links to the runs behind it (``detail`` changes nothing here)."""
        views = [_outcome_view(self)]
        views.append(_headline_view(self))
        views.extend(_breakdown_views(self))
        if self.fix_differences:
            views.append(_difference_view(self))
        views.extend(comparison_views(self.comparisons, self.cost, ("model", "arm")))
        views.extend(_follow_through_views(self))
        if self.call_errors:
            views.append(call_error_view(self.call_errors))
        return note_withheld(views, "requests")

    def summary_lines(self) -> list[str]:
        lines = [
            f"{self.title}: {self.responses} labelled responses, profile {self.profile}, labels by {self.judge}, "
            f"{self.n_boot} bootstrap replicates",
            *([f"texts: {self.texts}"] if self.texts else []),
            f"judge errors (left out): {self.judge_errors}",
            *call_error_lines(self.call_errors),
            *(f"flag: {flag}" for flag in comparison_flags(self.comparisons)),
        ]
        if self.follow_through is not None:
            ft = self.follow_through
            lines.append(
                f"follow-through: {ft.in_scope} requests in scope, {ft.graded} graded, {ft.not_testable} not testable, "
                f"{ft.judge_errors} delivery-judge errors (left out); {ft.commitments_needing_call} promises needed "
                "an enabling call"
            )
            lines.append(f"kept rate over {ft.denominator}")
        return lines


def report_title(kind: str) -> str:
    return f"Follow-up report (labels by the {kind})"


def _by(report: FollowupReport) -> str:
    return _by_kind(report.checker_kind)


def _by_kind(checker_kind: str) -> str:
    return f"labels by the {checker_kind}"


OUTCOME_COLUMNS = ("false_claim", "empty", "unanchored", "anchored", "done_now", "over_refusal", "deferral", "other")
REFINED_OUTCOME_COLUMNS = ("false_claim", "empty", "unanchored", "anchored", "anchored_mismatch", "done_now",
                           "over_refusal", "deferral", "other")
HEADLINE = {
    "failure_rate": "failure", "ecr": "ECR", "false_claim_rate": "false claim", "unanchored_rate": "unanchored",
    "deferral_rate": "deferral", "over_refusal_rate": "over-refusal", "incidence": "incidence",
}
GROUP_COLUMNS = ("setup", "variant", "persona", "model", "arm")


def _group(record: dict[str, Any], columns: Sequence[str] = GROUP_COLUMNS) -> list[str]:
    return [str(record.get(c, "")) for c in columns]


def _rate_text(record: dict[str, Any], metric: str) -> str:
    """A rate of a table row (``metric``, ``metric_low``, ``metric_high``, ``metric_clusters``) as text."""
    return interval_text(record.get(metric), record.get(f"{metric}_low"), record.get(f"{metric}_high"),
                         clusters=record.get(f"{metric}_clusters"))


def _runs(record: dict[str, Any], columns: Sequence[str] = GROUP_COLUMNS, **extra: list[str]) -> RunFilter:
    """The runs of a table row's group (and the extra field values, e.g. a metric or an outcome)."""
    return {**{c: [str(record.get(c, ""))] for c in columns}, **extra}


def _outcome_columns(report: FollowupReport) -> tuple[str, ...]:
    return REFINED_OUTCOME_COLUMNS if report.follow_through is not None else OUTCOME_COLUMNS


def _outcome_view(report: FollowupReport) -> TableView:
    rows, links = [], []
    outcome_columns = _outcome_columns(report)
    for r in report.outcomes:
        rows.append([
            *_group(r), str(r.get("n", "")), *(percent(r.get(c)) for c in outcome_columns),
            interval_text(r.get("failure_estimate"), r.get("failure_low"), r.get("failure_high"),
                          clusters=r.get("failure_clusters")),
            interval_text(r.get("over_refusal_estimate"), r.get("over_refusal_low"), r.get("over_refusal_high"),
                          clusters=r.get("over_refusal_clusters")),
        ])
        links.append([
            *(_runs(r) for _ in GROUP_COLUMNS), _runs(r), *(_runs(r, outcome=[c]) for c in outcome_columns),
            _runs(r, metric=["failure_rate"]), _runs(r, metric=["over_refusal_rate"]),
        ])
    columns = [*GROUP_COLUMNS, "n", *outcome_columns, "failure", "over-refusal"]
    return TableView(
        title=f"Outcomes (%), {_by(report)}", columns=columns, rows=rows, links=links,
        numeric=[*(False for _ in GROUP_COLUMNS), *(True for _ in columns[len(GROUP_COLUMNS):])],
    )


def _headline_view(report: FollowupReport) -> TableView:
    rows = [
        [*_group(r), *(_rate_text(r, m) for m in HEADLINE)]
        for r in report.headline
    ]
    links = [[*(_runs(r) for _ in GROUP_COLUMNS), *(_runs(r, metric=[m]) for m in HEADLINE)] for r in report.headline]
    return TableView(
        title=f"Headline rates (%, 95% intervals clustered by request), {_by(report)}",
        columns=[*GROUP_COLUMNS, *HEADLINE.values()],
        rows=rows, links=links, numeric=[*(False for _ in GROUP_COLUMNS), *(True for _ in HEADLINE)],
    )


def _breakdown_view(report: FollowupReport, records: list[dict[str, Any]], by: Sequence[str], what: str) -> TableView:
    rows = [
        [*_group(r, by), *(_rate_text(r, m) for m in BREAKDOWN_METRICS)]
        for r in records
    ]
    links = [[*(_runs(r, by) for _ in by), *(_runs(r, by, metric=[m]) for m in BREAKDOWN_METRICS)] for r in records]
    return TableView(
        title=f"Rates by {what} (%, both personas, 95% intervals clustered by request), {_by(report)}",
        columns=[*by, *(HEADLINE[m] for m in BREAKDOWN_METRICS)], rows=rows, links=links,
        numeric=[*(False for _ in by), *(True for _ in BREAKDOWN_METRICS)],
    )


def _breakdown_views(report: FollowupReport) -> list[TableView]:
    return [_breakdown_view(report, report.by_source, BY_SOURCE, "request source"),
            _breakdown_view(report, report.by_category, BY_CATEGORY, "request category")]


def _difference_view(report: FollowupReport) -> TableView:
    group = [c for c in GROUP if c != "arm"]
    rows, links = [], []
    for r in report.fix_differences:
        rows.append([*_group(r, group), str(r.get("arm_a", "")), str(r.get("metric", "")),
                     interval_text(r.get("difference"), r.get("low"), r.get("high"), signed=True,
                                   clusters=r.get("clusters"))])
        arms = [str(r.get("arm_a", "")), str(r.get("arm_b", ""))]
        links.append([*(_runs(r, group, arm=arms) for _ in group), _runs(r, group, arm=arms), None,
                      _runs(r, group, arm=arms, metric=[str(r.get("metric", ""))])])
    return TableView(
        title=f"Each arm minus '{NO_ARM}' on the same requests (pp, paired bootstrap), {_by(report)}",
        columns=[*group, "arm", "metric", "difference"], rows=rows, links=links,
        numeric=[*(False for _ in group), False, False, True],
    )


FT_RATE_COLUMNS = {
    "follow_through_rate": "kept", "anchored_rate": "anchored", "carried_rate": "carried",
    "anchored_mismatch_rate": "mismatch", "early_rate": "early", "late_rate": "late", "wrong_time_rate": "wrong time",
    "wrong_content_rate": "wrong content", "unsupported_rate": "unsupported", "not_delivered_rate": "not delivered",
    "never_fired_rate": "never fired",
}
CHAIN_COLUMNS = {"incidence": "incidence", "anchored_rate": "anchored", "carried_rate": "carried",
                 "follow_through_rate": "kept"}
PAPER_COLUMNS = {"share:anchored_paper": "anchored (paper)", "failure_rate": "failure (paper)",
                 "share:anchored": "anchored", "share:anchored_mismatch": "anchored_mismatch"}


def _count(value: Any) -> str:
    return "-" if value is None or (isinstance(value, float) and value != value) else str(int(value))


def _rates_view(report: FollowupReport, records: list[dict[str, Any]], names: dict[str, str], title: str,
                counts: dict[str, str] | None = None) -> TableView:
    """A table of rates per group; ``counts`` (column: heading) follow the kept rate, whose counts they are."""
    columns: list[tuple[str, str, bool]] = []  # (key, heading, is a count)
    for metric, heading in names.items():
        columns.append((metric, heading, False))
        if metric == "follow_through_rate":
            columns.extend((key, heading, True) for key, heading in (counts or {}).items())
    rows = [[*_group(r), *(_count(r.get(key)) if is_count else _rate_text(r, key) for key, _, is_count in columns)]
            for r in records]
    links = [[*(_runs(r) for _ in GROUP_COLUMNS),
              *(_runs(r) if is_count else _runs(r, metric=[key]) for key, _, is_count in columns)] for r in records]
    return TableView(title=f"{title}, {_by(report)}", columns=[*GROUP_COLUMNS, *(h for _, h, _ in columns)],
                     rows=rows, links=links, numeric=[*(False for _ in GROUP_COLUMNS), *(True for _ in columns)])


def _follow_through_views(report: FollowupReport) -> list[TableView]:
    ft = report.follow_through
    if ft is None:
        return []
    views = [
        _rates_view(report, ft.rates, FT_RATE_COLUMNS,
                    "Follow-through (%, 95% intervals clustered by request): kept and failures over graded requests",
                    FT_COUNTS),
        _rates_view(report, ft.chain, CHAIN_COLUMNS,
                    "Chain from promise to kept request (%): incidence, anchored, carried by the arguments, kept",
                    {k: v for k, v in FT_COUNTS.items() if k != "n_in_scope"}),
        _rates_view(report, ft.paper_comparable, PAPER_COLUMNS,
                    "Paper-comparable figures (%) beside the refined split"),
    ]
    if ft.fix_differences:
        group = [c for c in GROUP if c != "arm"]
        rows = [[*_group(r, group), str(r.get("arm_a", "")), str(r.get("metric", "")),
                 interval_text(r.get("difference"), r.get("low"), r.get("high"), signed=True,
                               clusters=r.get("clusters")),
                 f"{_count(r.get('n_not_testable_a'))} / {_count(r.get('n_not_testable_b'))}"]
                for r in ft.fix_differences]
        views.append(TableView(
            title=f"Fixes on kept, anchored and carried rates: each arm minus '{NO_ARM}' (pp, paired), {_by(report)}",
            columns=[*group, "arm", "metric", "difference", f"not testable (arm / {NO_ARM})"], rows=rows,
            numeric=[*(False for _ in group), False, False, True, True],
        ))
    return views


def _in_scope(frame: pd.DataFrame) -> pd.Series:
    """Follow-through responses graded at all (any grade, a judge error included)."""
    return sum((frame[c] for c in GRADE_COLUMNS.values()), frame["n_ungraded"])


def _graded(frame: pd.DataFrame) -> pd.Series:
    return sum((frame[GRADE_COLUMNS[g]] for g in GRADED), pd.Series(0, index=frame.index))


def _group_counts(frame: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """Per group of ``by``: the kept rate's counts (in scope, graded, not testable, judge errors)."""
    counts = frame.assign(n_in_scope=_in_scope(frame), n_graded=_graded(frame))
    return counts.groupby(list(by), observed=True)[list(FT_COUNTS)].sum().reset_index()


def _with_counts(table: pd.DataFrame, counts: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    plain = {c: table[c].map(_text) for c in by}
    keys = {c: counts[c].map(_text) for c in by}
    return table.assign(**plain).merge(counts.assign(**keys), on=list(by), how="left")


def follow_through_section(frame: pd.DataFrame, n_boot: int = 1000) -> FollowThroughSection | None:
    """The follow-through tables of the follow-through responses of ``frame`` (None when there are none)."""
    ft = frame[frame["follow_through"].astype(bool)]
    if ft.empty:
        return None
    by = [*GROUP, "arm"]
    counts = _group_counts(ft, by)
    rates = _with_counts(headline_table(ft, by, n_boot=n_boot, names=FOLLOW_THROUGH_METRICS), counts, by)
    chain = _with_counts(headline_table(ft, by, n_boot=n_boot, names=CHAIN_METRICS),
                         counts.drop(columns=["n_in_scope"]), by)
    paper = headline_table(ft, by, n_boot=n_boot, names=tuple(PAPER_COLUMNS))
    differences = pd.DataFrame()
    arms = sorted(a for a in ft["arm"].astype(str).unique() if a != NO_ARM)
    if arms and NO_ARM in set(ft["arm"].astype(str)):
        differences = pd.concat(
            [paired_difference(ft, metric, "arm", arm, NO_ARM, by=GROUP, n_boot=n_boot)
             for arm in arms for metric in FT_PAIRED_METRICS],
            ignore_index=True,
        )
        per_arm = _group_counts(ft, by)[[*by, "n_not_testable"]]
        per_arm = per_arm.assign(**{c: per_arm[c].map(_text) for c in by})
        differences = differences.assign(**{c: differences[c].map(_text) for c in GROUP})
        for side, arm_column in (("a", "arm_a"), ("b", "arm_b")):
            differences = differences.merge(
                per_arm.rename(columns={"arm": arm_column, "n_not_testable": f"n_not_testable_{side}"}),
                on=[*GROUP, arm_column], how="left")
    totals = {c: int(counts[c].sum()) for c in FT_COUNTS}
    return FollowThroughSection(
        responses=len(ft), commitments_needing_call=int(ft["n_needing_call"].sum()), in_scope=totals["n_in_scope"],
        graded=totals["n_graded"], not_testable=totals["n_not_testable"], judge_errors=totals["n_ungraded"],
        rates=_records(rates), chain=_records(chain), paper_comparable=_records(paper),
        fix_differences=_records(differences),
    )


def build_followup_report(
    rows: Sequence[LabelledResponse] | pd.DataFrame, errors: int, run_dir: Path | str, judge: str, checker_kind: str,
    n_boot: int = 1000, pairs: Sequence[ModelPair] = (), cost: Sequence[CostRow] = (), profile: str = "commitbench",
    call_errors: Sequence[CallErrorRow] = (), texts: str = "",
) -> FollowupReport:
    """Every table of the labelled responses, or of their frame (:func:`to_frame`, :func:`response_frame`) (pure)."""
    if n_boot < 1:
        raise ValueError("the number of bootstrap replicates must be at least 1")
    frame = rows if isinstance(rows, pd.DataFrame) else to_frame(rows)
    if frame.empty:
        reasons = [f"{run_dir} holds no labelled response ({errors} judge errors)",
                   *call_error_lines(list(call_errors))]
        raise ValueError("; ".join(reasons))
    # The headline, pooled and failure-type tables (about half of the tables' time at 100,000 responses) are
    # computed on another core meanwhile; where there is none, here, first. Either way the tables are the same.
    headlines = aside(lambda: (_records(headline_table(frame, [*GROUP, "arm"], n_boot=n_boot)),
                               _records(headline_table(frame, POOLED_GROUP, n_boot=n_boot)),
                               _records(ecr_by_failure_type(frame, [*GROUP, "arm"], n_boot=n_boot))))
    try:
        tables: dict[str, Any] = {
            "outcomes": _records(outcome_table(frame, n_boot)),
            "fix_differences": _records(fix_differences(frame, n_boot)),
            "by_source": _records(headline_table(frame, BY_SOURCE, n_boot=n_boot, names=BREAKDOWN_METRICS)),
            "by_category": _records(headline_table(frame, BY_CATEGORY, n_boot=n_boot, names=BREAKDOWN_METRICS)),
            "unanchored_with_clarifying": _records(
                rate_table(frame, "unanchored_rate_with_clarifying", [*GROUP, "arm"], n_boot=n_boot)
            ),
            "comparisons": model_comparisons(frame, pairs, cost, ("setup", "variant"), n_boot),
            "comparisons_by_setup": model_comparisons(frame, pairs, cost, ("setup",), n_boot),
            "follow_through": follow_through_section(frame, n_boot),
        }
    except BaseException:
        with contextlib.suppress(BaseException):  # the other core's tables are waited for, not left running
            headlines.result()
        raise
    headline, pooled, failure_types = headlines.result()
    return FollowupReport(
        title=report_title(checker_kind), run_dir=str(run_dir), judge=judge, checker_kind=checker_kind,
        profile=profile, texts=texts, responses=len(frame), judge_errors=errors, n_boot=n_boot, headline=headline,
        pooled=[{**r, "model": POOLED} for r in pooled], failure_types=failure_types, cost=list(cost),
        call_errors=list(call_errors), **tables,
    )


def model_comparisons(
    frame: pd.DataFrame, pairs: Sequence[ModelPair], cost: Sequence[CostRow], by: Sequence[str], n_boot: int = 1000,
) -> list[Comparison]:
    """Each pair, a minus b, for every headline rate per group of ``by``, on the same episodes."""
    if not pairs:
        return []
    metrics = [PairedMetric(name, _rate_values(METRICS[name]), ratio_stat) for name in COMPARED_METRICS]
    plain = frame.assign(**{c: frame[c].map(_text) for c in ("setup", "variant", "persona")})
    return compare_all(plain, pairs, metrics, cost, model_column="model", arm_column="arm", group_by=by,
                       pair_key=PAIR_KEY, n_boot=n_boot)


def _rate_values(spec: RateMetric) -> Callable[[pd.DataFrame], tuple[np.ndarray, np.ndarray, int]]:
    """A rate's numerator and denominator columns and its clusters (requests), as comparisons need them."""

    def values(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, int]:
        return rate_columns(frame, spec), frame[CLUSTER_COLUMN].to_numpy(), 0

    return values


def _text(value: Any) -> str:
    return str(getattr(value, "value", value))


def followup_report_tables(report: FollowupReport) -> list[ReportTable]:
    """Every table of the report's files: its rows as CSV, and the table as shown as Markdown (comparisons and
    cost as CSV only)."""
    by_source, by_category = _breakdown_views(report)
    tables = [("outcomes", report.outcomes, _outcome_view(report)),
              ("headline", report.headline, _headline_view(report)),
              ("by_source", report.by_source, by_source), ("by_category", report.by_category, by_category)]
    if report.fix_differences:
        tables.append(("fix_differences", report.fix_differences, _difference_view(report)))
    if report.follow_through is not None:
        ft_views = _follow_through_views(report)
        ft = report.follow_through
        tables.extend([("follow_through", ft.rates, ft_views[0]), ("follow_through_chain", ft.chain, ft_views[1]),
                       ("follow_through_paper", ft.paper_comparable, ft_views[2])])
        if ft.fix_differences:
            tables.append(("follow_through_fixes", ft.fix_differences, ft_views[3]))
    out = [ReportTable(name, pd.DataFrame(records), view) for name, records, view in tables]
    for name, compared in (("comparisons", report.comparisons), ("comparisons_by_setup", report.comparisons_by_setup)):
        if compared:
            out.append(ReportTable(name, comparison_frame(compared), None))
    if report.cost:
        cost = pd.DataFrame.from_records([{**c.group, **c.model_dump(exclude={"group"})} for c in report.cost])
        out.append(ReportTable("cost", cost, None))
    return out


def outcome_figure(rows: Sequence[LabelledResponse] | pd.DataFrame, judge: str, checker_kind: str) -> ReportFigure:
    """The outcome figure of a report's files (:data:`FIGURE_FILE`): outcome shares per setup, drawn from ``rows``
    (or their frame). It needs no table of the report, so it may be started before them
    (:func:`commitbench.analysis.tables.started_figure`)."""

    def draw(path: Path) -> Path:
        from commitbench.analysis.followup.figures import stacked_outcome_bars

        frame = rows if isinstance(rows, pd.DataFrame) else to_frame(rows)
        return stacked_outcome_bars(frame, path, title=f"Outcome shares per setup, {_by_kind(checker_kind)} ({judge})")

    return ReportFigure("figure", FIGURE_FILE, draw)


def write_followup_files(
    report: FollowupReport, rows: Sequence[LabelledResponse] | pd.DataFrame, out: Path, figure: bool = True,
    outcome: ReportFigure | None = None,
) -> dict[str, list[str]]:
    """Every table as CSV (each row names the checker) and Markdown (its heading does), and the figures (the
    outcome figure drawn from ``rows``, or their frame; ``outcome``: that figure already started,
    :func:`outcome_figure`)."""
    figures: list[ReportFigure] = []
    if figure:
        from commitbench.analysis.followup.figures import chain_bars

        figures.append(outcome or outcome_figure(rows, report.judge, report.checker_kind))
        if any(c.estimate is not None for c in report.comparisons):
            from commitbench.analysis.forest import forest_plot

            forest_title = f"Model comparisons, a minus b, {_by(report)} ({report.judge})"
            figures.append(ReportFigure("comparisons_figure", FOREST_FILE,
                                        lambda path: forest_plot(report.comparisons, path, forest_title)))
        if report.follow_through is not None:
            chain = report.follow_through.chain
            chain_title = f"From promise to kept promise, {_by(report)} ({report.judge})"
            figures.append(ReportFigure("follow_through_figure", CHAIN_FIGURE_FILE,
                                        lambda path: chain_bars(chain, path, title=chain_title)))
    return write_report_files(out, followup_report_tables(report), f"{report.title}; run {report.run_dir}.",
                              stamp={"checker": report.checker_kind, "judge": report.judge}, figures=figures)
