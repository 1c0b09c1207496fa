"""The follow-up report: outcome tables, headline rates and fix differences of a run, as one typed document.

:func:`responses_from_records` turns stored checker records into metric rows (judge errors left out
and counted); :func:`build_followup_report` computes the tables (pure); :func:`write_followup_files`
writes every table as CSV and Markdown and the stacked-outcome figure; :meth:`FollowupReport.views`
describes the tables for a front end.

A report reads one checker's labels (:func:`labeller_of` refuses records of two) and says which kind of
checker that is in its title, in every table's title, in every CSV row, in every Markdown heading and in
the figure: labels of the offline cue-word checker are a baseline, never the measurement, so they are
marked "offline baseline checker" wherever they are shown.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import pandas as pd
from pydantic import BaseModel, Field

from commitbench.analysis.bootstrap import interval_note
from commitbench.analysis.followup.metrics import (
    LabelledResponse,
    commitment_counts,
    failure_summary,
    headline_table,
    outcome_distribution,
    paired_difference,
    to_frame,
)
from commitbench.analysis.tables import RunFilter, TableView
from commitbench.judges.followup.labellers import NO_ARM, FollowupLabelRecord
from commitbench.judges.followup.rules import CHECKER_NAME
from commitbench.judges.labelling import MixedLabellersError

GROUP = ["setup", "variant", "persona", "model"]
PAIRED_METRICS = ("failure_rate", "over_refusal_rate", "false_claim_rate", "ecr")
FIGURE_FILE = "outcomes.png"
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


def response_row(record: FollowupLabelRecord) -> LabelledResponse | None:
    """The metric row of one checker record; None when the checker gave no label (a judge error)."""
    result, turn = record.result, record.turn
    if result.outcome is None or result.response is None:
        return None
    return LabelledResponse(
        request_id=turn.request_id, category=turn.category, source=turn.source, setup=turn.setup,
        variant=turn.variant, persona=turn.persona, model=record.model, arm=record.arm, sample=record.sample,
        outcome=result.outcome, doability=turn.doability,
        false_action_claim=result.response.false_action_claim.value,
        asks_clarification=result.response.asks_clarification.value,
        **commitment_counts(result.commitments),
    )


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


class FollowupReport(BaseModel):
    """Every table of a follow-up run (the document ``commitbench report --json`` prints)."""

    suite: Literal["followup"] = Field(default="followup", description="The suite the run belongs to.")
    run_dir: str = Field(description="The run directory.")
    title: str = Field(default="", description="Title naming the kind of checker whose labels the tables use.")
    judge: str = Field(description="The checker whose labels the tables use.")
    checker_kind: str = Field(description="'offline baseline checker' or 'LLM checker'.")
    responses: int = Field(description="Labelled responses in the tables.")
    judge_errors: int = Field(description="Responses the checker could not label (left out).")
    n_boot: int = Field(description="Bootstrap replicates.")
    outcomes: list[dict[str, Any]] = Field(description="Outcome shares, failure and over-refusal rates per group.")
    headline: list[dict[str, Any]] = Field(description="Headline rates with 95% intervals clustered by request.")
    fix_differences: list[dict[str, Any]] = Field(description="Each arm minus the plain arm on the same requests.")
    files: dict[str, list[str]] = Field(default_factory=dict, description="Files written for the report.")

    def views(self, detail: bool = False) -> list[TableView]:
        """The tables; each number's cell links to the runs behind it (``detail`` changes nothing here)."""
        views = [_outcome_view(self)]
        views.append(_headline_view(self))
        if self.fix_differences:
            views.append(_difference_view(self))
        return views

    def summary_lines(self) -> list[str]:
        return [
            f"{self.title}: {self.responses} labelled responses, labels by {self.judge}, "
            f"{self.n_boot} bootstrap replicates",
            f"judge errors (left out): {self.judge_errors}",
        ]


def report_title(kind: str) -> str:
    return f"Follow-up report (labels by the {kind})"


def _by(report: FollowupReport) -> str:
    return f"labels by the {report.checker_kind}"


OUTCOME_COLUMNS = ("false_claim", "empty", "unanchored", "anchored", "done_now", "over_refusal", "deferral", "other")
HEADLINE = {
    "failure_rate": "failure", "ecr": "ECR", "false_claim_rate": "false claim", "unanchored_rate": "unanchored",
    "deferral_rate": "deferral", "over_refusal_rate": "over-refusal", "incidence": "incidence",
}
GROUP_COLUMNS = ("setup", "variant", "persona", "model", "arm")


def _pct(value: Any) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return "-"
    return f"{100 * float(value):.0f}"


def _interval(estimate: Any, low: Any, high: Any, signed: bool = False, clusters: Any = None) -> str:
    if estimate is None or (isinstance(estimate, float) and estimate != estimate):
        return "-"
    fmt = "{:+.0f}" if signed else "{:.0f}"
    text = fmt.format(100 * float(estimate))
    if low is not None and high is not None and low == low and high == high:
        text += f" [{fmt.format(100 * float(low))},{fmt.format(100 * float(high))}]"
    known = clusters is not None and clusters == clusters
    note = interval_note(int(clusters)) if known else ""
    return f"{text} {note}" if note else text


def _group(record: dict[str, Any], columns: Sequence[str] = GROUP_COLUMNS) -> list[str]:
    return [str(record.get(c, "")) for c in columns]


def _runs(record: dict[str, Any], columns: Sequence[str] = GROUP_COLUMNS, **extra: list[str]) -> RunFilter:
    """The runs of a table row's group (and the extra field values, e.g. a metric or an outcome)."""
    return {**{c: [str(record.get(c, ""))] for c in columns}, **extra}


def _outcome_view(report: FollowupReport) -> TableView:
    rows, links = [], []
    for r in report.outcomes:
        rows.append([
            *_group(r), str(r.get("n", "")), *(_pct(r.get(c)) for c in OUTCOME_COLUMNS),
            _interval(r.get("failure_estimate"), r.get("failure_low"), r.get("failure_high"),
                      clusters=r.get("failure_clusters")),
            _interval(r.get("over_refusal_estimate"), r.get("over_refusal_low"), r.get("over_refusal_high"),
                      clusters=r.get("over_refusal_clusters")),
        ])
        links.append([
            *(_runs(r) for _ in GROUP_COLUMNS), _runs(r), *(_runs(r, outcome=[c]) for c in OUTCOME_COLUMNS),
            _runs(r, metric=["failure_rate"]), _runs(r, metric=["over_refusal_rate"]),
        ])
    columns = [*GROUP_COLUMNS, "n", *OUTCOME_COLUMNS, "failure", "over-refusal"]
    return TableView(
        title=f"Outcomes (%), {_by(report)}", columns=columns, rows=rows, links=links,
        numeric=[*(False for _ in GROUP_COLUMNS), *(True for _ in columns[len(GROUP_COLUMNS):])],
    )


def _headline_view(report: FollowupReport) -> TableView:
    rows = [
        [*_group(r), *(_interval(r.get(m), r.get(f"{m}_low"), r.get(f"{m}_high"), clusters=r.get(f"{m}_clusters"))
                       for m in HEADLINE)]
        for r in report.headline
    ]
    links = [[*(_runs(r) for _ in GROUP_COLUMNS), *(_runs(r, metric=[m]) for m in HEADLINE)] for r in report.headline]
    return TableView(
        title=f"Headline rates (%, 95% intervals clustered by request), {_by(report)}",
        columns=[*GROUP_COLUMNS, *HEADLINE.values()],
        rows=rows, links=links, numeric=[*(False for _ in GROUP_COLUMNS), *(True for _ in HEADLINE)],
    )


def _difference_view(report: FollowupReport) -> TableView:
    group = [c for c in GROUP if c != "arm"]
    rows, links = [], []
    for r in report.fix_differences:
        rows.append([*_group(r, group), str(r.get("arm_a", "")), str(r.get("metric", "")),
                     _interval(r.get("difference"), r.get("low"), r.get("high"), signed=True,
                               clusters=r.get("clusters"))])
        arms = [str(r.get("arm_a", "")), str(r.get("arm_b", ""))]
        links.append([*(_runs(r, group, arm=arms) for _ in group), _runs(r, group, arm=arms), None,
                      _runs(r, group, arm=arms, metric=[str(r.get("metric", ""))])])
    return TableView(
        title=f"Each arm minus '{NO_ARM}' on the same requests (pp, paired bootstrap), {_by(report)}",
        columns=[*group, "arm", "metric", "difference"], rows=rows, links=links,
        numeric=[*(False for _ in group), False, False, True],
    )


def build_followup_report(
    rows: Sequence[LabelledResponse], errors: int, run_dir: Path | str, judge: str, checker_kind: str,
    n_boot: int = 1000,
) -> FollowupReport:
    """Every table of the labelled responses (pure)."""
    if n_boot < 1:
        raise ValueError("the number of bootstrap replicates must be at least 1")
    if not rows:
        raise ValueError(f"{run_dir} holds no labelled response ({errors} judge errors)")
    frame = to_frame(rows)
    return FollowupReport(
        title=report_title(checker_kind), run_dir=str(run_dir), judge=judge, checker_kind=checker_kind,
        responses=len(rows), judge_errors=errors,
        n_boot=n_boot, outcomes=_records(outcome_table(frame, n_boot)),
        headline=_records(headline_table(frame, [*GROUP, "arm"], n_boot=n_boot)),
        fix_differences=_records(fix_differences(frame, n_boot)),
    )


def write_followup_files(
    report: FollowupReport, rows: Sequence[LabelledResponse], out: Path, figure: bool = True
) -> dict[str, list[str]]:
    """Every table as CSV (each row names the checker) and Markdown (its heading does), and the figure."""
    from commitbench.analysis.followup.figures import stacked_outcome_bars

    out.mkdir(parents=True, exist_ok=True)
    tables = [("outcomes", report.outcomes, _outcome_view(report)), ("headline", report.headline,
                                                                       _headline_view(report))]
    if report.fix_differences:
        tables.append(("fix_differences", report.fix_differences, _difference_view(report)))
    files: dict[str, list[str]] = {}
    for name, records, view in tables:
        frame = pd.DataFrame(records)
        frame.insert(0, "checker", report.checker_kind)
        frame.insert(1, "judge", report.judge)
        csv_path, md_path = out / f"{name}.csv", out / f"{name}.md"
        frame.to_csv(csv_path, index=False)
        md_path.write_text(f"# {view.title}\n\n{report.title}; run {report.run_dir}.\n\n{view.markdown()}",
                           encoding="utf-8")
        files[name] = [str(csv_path), str(md_path)]
    if figure:
        title = f"Outcome shares per setup, {_by(report)} ({report.judge})"
        files["figure"] = [str(stacked_outcome_bars(to_frame(rows), out / FIGURE_FILE, title=title))]
    return files
