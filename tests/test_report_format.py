"""How a number reads in every report table: one format, the same in both suites, on the console and in files."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from commitbench.analysis.followup.report import FollowupReport, write_followup_files
from commitbench.analysis.standing.metrics import MetricValue
from commitbench.analysis.standing.report import StandingReport, write_standing_files
from commitbench.analysis.standing.tables import PairedValue
from commitbench.analysis.tables import ReportTable, TableView, interval_text, percent, write_report_files

NAN = math.nan


@pytest.mark.parametrize(
    ("estimate", "low", "high", "signed", "clusters", "text"),
    [
        (0.62, 0.40, 0.81, False, 8, "62% [40, 81]"),
        (0.62, 0.40, 0.81, False, None, "62% [40, 81]"),
        (0.12, -0.03, 0.25, True, 8, "+12 pp [-3, +25]"),
        (-0.5, -0.75, -0.25, True, None, "-50 pp [-75, -25]"),
        (0.0, 0.0, 0.0, True, 6, "+0 pp [+0, +0]"),
        (0.62, None, None, False, 2, "62% n/a (2 clusters)"),
        (1.0, NAN, NAN, False, 1, "100% n/a (1 cluster)"),
        (0.12, None, None, True, 4, "+12 pp n/a (4 clusters)"),
        (0.62, None, None, False, 8, "62%"),  # no replicate defined: the estimate alone
        (0.62, NAN, NAN, False, NAN, "62%"),  # a missing count from a JSON row
        (None, None, None, False, 8, "-"),
        (NAN, 0.1, 0.2, True, 8, "-"),
    ],
)
def test_interval_text(
    estimate: float | None, low: float | None, high: float | None, signed: bool, clusters: int | None, text: str
) -> None:
    assert interval_text(estimate, low, high, signed=signed, clusters=clusters) == text


@pytest.mark.parametrize(("value", "text"), [(0.62, "62%"), (0.0, "0%"), (1.0, "100%"), (None, "-"), (NAN, "-")])
def test_percent(value: float | None, text: str) -> None:
    assert percent(value) == text


CASES = {  # (estimate, low, high, clusters) -> the text both suites show
    "interval": ((0.62, 0.40, 0.81, 8), "62% [40, 81]"),
    "withheld": ((0.62, None, None, 2), "62% n/a (2 clusters)"),
}
DIFFERENCES = {
    "interval": ((0.12, -0.03, 0.25, 8), "+12 pp [-3, +25]"),
    "withheld": ((0.12, None, None, 3), "+12 pp n/a (3 clusters)"),
}


def _standing(rate: tuple[float, float | None, float | None, int],
              difference: tuple[float, float | None, float | None, int]) -> StandingReport:
    group = {"agent": "a", "interventions": "none", "policy": "explicit"}
    value = MetricValue(group=group, metric="override", estimate=rate[0], low=rate[1], high=rate[2], n=20, excluded=0,
                        clusters=rate[3])
    paired = PairedValue(group={"agent": "a", "policy": "explicit"}, metric="override", arm="ledger",
                         baseline="none", estimate=difference[0], low=difference[1], high=difference[2], episodes=20,
                         clusters=difference[3])
    return StandingReport(
        run_dir="run", judge="rules", runs=40, n_boot=100, seed=0, arms=["ledger", "none"], agents=["a"],
        baseline="none", judge_errors=0, runs_with_judge_errors=0, tool_errors=0, metric_names=["override"],
        metrics=[value], by_gap=[], by_cell=[], strict_by_cell=[], paired=[paired], policy_effect=[],
    )


def _followup(rate: tuple[float, float | None, float | None, int],
              difference: tuple[float, float | None, float | None, int]) -> FollowupReport:
    group = {"setup": "C0", "variant": "inferred", "persona": "generic", "model": "m"}
    headline = {**group, "arm": "none", "failure_rate": rate[0], "failure_rate_low": rate[1],
                "failure_rate_high": rate[2], "failure_rate_clusters": rate[3]}
    fix = {**group, "metric": "failure_rate", "arm_a": "card", "arm_b": "none", "difference": difference[0],
           "low": difference[1], "high": difference[2], "clusters": difference[3]}
    return FollowupReport(run_dir="run", title="Follow-up report", judge="rules", checker_kind="LLM checker",
                          responses=40, judge_errors=0, n_boot=100, outcomes=[], headline=[headline],
                          fix_differences=[fix])


def _cell(views: list[TableView], title: str, column: str) -> str:
    view = next(v for v in views if v.title.startswith(title))
    return view.rows[0][view.columns.index(column)]


@pytest.mark.parametrize("case", CASES)
def test_both_suites_render_a_rate_and_a_difference_the_same_way(case: str, tmp_path: Path) -> None:
    (rate, rate_text), (difference, difference_text) = CASES[case], DIFFERENCES[case]
    standing, followup = _standing(rate, difference), _followup(rate, difference)
    # The console (and the viewer): the same views.
    assert _cell(standing.views(), "a: metrics", "O") == rate_text
    assert _cell(followup.views(), "Headline rates", "failure") == rate_text
    assert _cell(standing.views(), "a: difference from 'none'", "O") == difference_text
    assert _cell(followup.views(), "Each arm minus 'none'", "difference") == difference_text
    # The files: the same text in the Markdown of each suite.
    standing_files = write_standing_files(standing, tmp_path / "standing", figure=False)
    followup_files = write_followup_files(followup, [], tmp_path / "followup", figure=False)
    assert f"| {rate_text} (n=20) |" in Path(standing_files["metrics"][1]).read_text(encoding="utf-8")
    assert f"| {rate_text} |" in Path(followup_files["headline"][1]).read_text(encoding="utf-8")
    assert f"| {difference_text} |" in Path(standing_files["paired"][1]).read_text(encoding="utf-8")
    assert f"| {difference_text} |" in Path(followup_files["fix_differences"][1]).read_text(encoding="utf-8")


def test_the_writer_stamps_every_csv_row_and_heads_every_markdown_file(tmp_path: Path) -> None:
    data = pd.DataFrame({"metric": ["x", "y"], "estimate": [0.5, None]})
    text = TableView.from_frame("Rates", data)
    files = write_report_files(tmp_path, [ReportTable("rates", data, text), ReportTable("raw", data, None)],
                               note="run r.", stamp={"checker": "LLM checker", "judge": "j"})
    assert files == {"rates": [str(tmp_path / "rates.csv"), str(tmp_path / "rates.md")],
                     "raw": [str(tmp_path / "raw.csv")]}
    written = pd.read_csv(tmp_path / "rates.csv")
    assert list(written.columns) == ["checker", "judge", "metric", "estimate"]
    assert set(written["checker"]) == {"LLM checker"} and set(written["judge"]) == {"j"}
    assert (tmp_path / "rates.md").read_text(encoding="utf-8") == (
        "# Rates\n\nrun r.\n\n| metric | estimate |\n|---|---|\n| x | 0.500 |\n| y | - |\n"
    )
    assert data.columns.tolist() == ["metric", "estimate"]  # the caller's frame is left as it was
