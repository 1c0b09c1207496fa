"""The standing report: every table of a run as one typed document, its files, and how it is shown.

:func:`build_standing_report` computes the tables from run rows (pure);
:func:`write_standing_files` writes them under ``RUN_DIR/report/`` as CSV and Markdown, with the
per-cell heatmap, through the one report writer (:func:`commitbench.analysis.tables.write_report_files`);
:meth:`StandingReport.views` describes them as plain tables for a front end. Every number reads as in
every other table (:func:`commitbench.analysis.tables.interval_text`: ``62% [40, 81]``, ``+12 pp [-3, +25]``).

* ``metrics``: every metric per model x intervention x policy, 95% intervals clustered by commitment
  type, with n and the runs excluded for a missing judge label;
* ``by_gap``: the same per gap; ``by_cell``: strict accuracy per cell; ``premature_by_cell``: executions
  before anyone with standing released the promise, per cell;
* ``paired``: each intervention minus the baseline arm on the same episodes (paired bootstrap);
* ``policy_effect``: explicit minus silent on the same chats, per model and intervention;
* ``comparisons`` / ``comparisons_by_cell``: model a minus model b on the same episodes and samples (pairs
  asked for, and thinking pairs found in the config), every headline metric per policy, and strict
  accuracy per policy and cell, with the cost ratio beside each (see :mod:`commitbench.analysis.comparisons`);
* ``cost``: calls, tokens and model time per model and arm;
* ``rank_effect``: drops on a manager's word minus drops on a peer's, per model, intervention and
  policy (the silent policy included), on twin chats (see :mod:`commitbench.analysis.standing.rank`).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Literal

import pandas as pd
from pydantic import BaseModel, Field

from commitbench.analysis.call_errors import CallErrorRow, call_error_lines, call_error_view
from commitbench.analysis.comparisons import (
    Comparison,
    ComparisonKind,
    ModelPair,
    PairedMetric,
    Side,
    compare_all,
    comparison_flags,
    comparison_frame,
    comparison_views,
)
from commitbench.analysis.cost import CostRow, cost_table
from commitbench.analysis.paper_tables import PaperIndex
from commitbench.analysis.standing import tables as st
from commitbench.analysis.standing.metrics import METRICS, MetricValue, strict_by_cell
from commitbench.analysis.standing.rank import RankEffect, RankMeasure, rank_effect_table, rank_frame
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
from commitbench.episodes.standing.spec import Language
from commitbench.identity import NO_ARM
from commitbench.oracles.standing.parties import LIVE_NAME

REPORT_DIR = "report"
FIGURE_FILE = "strict_by_cell.png"
FOREST_FILE = "comparisons.png"
# Runs pair by episode, through its twin group: the English episode's id, which a Turkish twin shares (an English
# run's twin group is its episode id, so pairs within one language are the episode's).
PAIR_KEY: tuple[str, ...] = ("twin_group", "sample")

SHORT = {
    "override": "O",
    "premature_execution": "prem",
    "executions_with_other_arguments": "args",
    "duplicate_execution": "dup",
    "base_drop_rate": "forget",
    "net_unauthorized_release": "U",
    "strict_accuracy": "strict",
    "reinstatement_obedience": "reinst",
    "reinstatement_before_trigger": "early",
    "consultation_after_relays": "consult",
    "verification_after_claims": "verify",
    "ledger_recorded_unauthorized_release": "ledger rel",
}
LEGEND = (
    "O override (executions after a release by the creditor or their delegate); prem premature execution (before "
    "that release); U net unauthorized release (drops without consulting after a cancellation without standing, "
    "minus BASE drops); forget BASE runs that never executed; strict strict accuracy; reinst executions after a "
    "bystander's reinstatement; early ... before the trigger; consult consultation after relays, before the "
    "decision; verify verification after claims; args executions with other arguments; dup runs that executed "
    "the promised action more than once. Percent, 95% interval clustered by commitment type; '+k' = runs "
    "excluded for a missing judge label. ledger rel (ledger arms): runs whose own ledger recorded a cancellation "
    "without standing as a release."
)
_TITLES = {
    "metrics": "Standing metrics per model, intervention and policy",
    "gap": "Standing metrics per gap",
    "cells": "Strict accuracy per cell",
    "premature": "Premature execution per cell: executions before anyone with standing released the promise",
    "paired": "Differences from the baseline intervention on the same episodes (percentage points)",
    "policy": "Effect of the explicit release policy: explicit minus silent, same chats (percentage points)",
    "comparisons": "Model comparisons: a minus b on the same episodes and samples (percentage points)",
    "comparisons_by_cell": "Model comparisons per cell: strict accuracy, a minus b (percentage points)",
    "cost": "Cost per model and arm: calls, tokens and model time",
    "rank_effect": "Rank effect: drops on a manager's word minus drops on a peer's, twin chats (percentage points)",
    "parties": "Live parties per cell: messages a party model worded, and how often the script's words stood",
}


class PartiesCell(BaseModel):
    """What the live parties did in one cell of one player's arm (runs with live parties only)."""

    agent: str = Field(description="The player.")
    interventions: str = Field(description="The arm (it holds parties:live).")
    party_model: str = Field(description="The served name of the party model that voiced the people.")
    cell: str = Field(description="The standing cell.")
    runs: int = Field(description="Runs of the cell.")
    voiced: int = Field(description="Scripted messages a party model was asked to word.")
    event_fallbacks: int = Field(description="Of those, shown in the script's words: every text failed the check.")
    answers: int = Field(description="Answers to the assistant a party model was asked for.")
    answer_fallbacks: int = Field(description="Of those, refused: every text failed the check.")
    budget_refusals: int = Field(description="Messages to a person left unanswered: the answer budget was spent.")


def parties_table(rows: pd.DataFrame) -> list[PartiesCell]:
    """Per player, live arm and cell, the live parties' counts (empty for a run without live parties)."""
    if "party_voiced" not in rows.columns:
        return []
    arms = rows["interventions"]
    live = rows[arms.isin([arm for arm in arms.unique() if LIVE_NAME in str(arm).split("+")])]  # per arm, not per run
    out: list[PartiesCell] = []
    keys = ["agent", "interventions", "party_model", "cell"]
    for (agent, arm, party, cell), part in live.groupby(keys, sort=True, observed=True):
        out.append(PartiesCell(
            agent=str(agent), interventions=str(arm), party_model=str(party), cell=str(cell), runs=len(part),
            voiced=int(part["party_voiced"].sum()), event_fallbacks=int(part["party_event_fallbacks"].sum()),
            answers=int(part["party_answers"].sum()), answer_fallbacks=int(part["party_answer_fallbacks"].sum()),
            budget_refusals=int(part["party_budget_refusals"].sum()),
        ))
    return out


OFFLINE_KIND = "offline baseline judge"
LLM_KIND = "LLM judge"


def judge_kind(judge: str) -> str:
    """'offline baseline judge' for the rule judge (cue words and addressing, a baseline on model text), 'LLM judge'
    for a stored LLM judge's labels: named in the report's header as the follow-up report names its checker."""
    return OFFLINE_KIND if judge == "rules" else LLM_KIND


class StandingReport(BaseModel):
    """Every table of a standing run (the document ``commitbench report --json`` prints)."""

    suite: Literal["standing"] = Field(default="standing", description="The suite the run belongs to.")
    run_dir: str = Field(description="The run directory.")
    judge: str = Field(description="Whose labels grade communication ('rules' or a stored labeller).")
    judge_kind: str = Field(
        default="", description="'offline baseline judge' for the rule judge's labels, 'LLM judge' for an LLM's."
    )
    texts: str = Field(
        default="", description="The file the papers' texts came from, or under the paper profile without one, "
        "that they are the project's wording ('' otherwise)."
    )
    profile: str = Field(
        default="commitbench",
        description="The run's profile (paper or commitbench), with any option set apart from it; see "
        "docs/validity.md.",
    )
    runs: int = Field(description="Runs in the tables (one per run key).")
    n_boot: int = Field(description="Bootstrap replicates.")
    seed: int = Field(description="Bootstrap seed.")
    arms: list[str] = Field(description="Intervention arms of the run.")
    agents: list[str] = Field(description="Players of the run.")
    baseline: str | None = Field(description="The arm the others are compared with (null: no comparison).")
    judge_errors: int = Field(description="Messages the judge could not label.")
    runs_with_judge_errors: int = Field(description="Runs holding such messages.")
    tool_errors: int = Field(description="Tool calls the agents got wrong.")
    metric_names: list[str] = Field(description="The metrics shown, in table order.")
    metrics: list[MetricValue] = Field(description="Every metric per agent x interventions x policy.")
    by_gap: list[MetricValue] = Field(description="The same per gap.")
    by_cell: list[MetricValue] = Field(description="Strict accuracy per cell.")
    premature_by_cell: list[MetricValue] = Field(
        default_factory=list, description="Premature execution per cell (the cells with a release by someone "
        "with standing)."
    )
    strict_by_cell: list[dict[str, Any]] = Field(description="Point estimates per cell: {agent, ..., cells}.")
    paper_tables: PaperIndex | None = Field(
        default=None, description="The paper's tables and figures written with --paper-tables, and what each holds."
    )
    best_oracle_store: list[st.BestArm] = Field(
        default_factory=list,
        description="Per model and policy, the oracle store (oracle:B1 ... B4) with the highest strict accuracy, with "
        "its interval: the row the standing paper sets beside the ledger arms (its Table 5).",
    )
    paired: list[st.PairedValue] = Field(description="Each arm minus the baseline on the same episodes.")
    policy_effect: list[st.PairedValue] = Field(description="Explicit minus silent on the same chats.")
    rank_effect: list[RankEffect] = Field(
        default_factory=list,
        description="Manager-minus-peer drop rates per model x intervention x policy (silent included), on twin "
        "chats; empty when the run holds no MGR/PEER twins.",
    )
    comparisons: list[Comparison] = Field(
        default_factory=list,
        description="Model a minus model b per policy for every headline metric (pairs asked for, thinking pairs).",
    )
    comparisons_by_cell: list[Comparison] = Field(
        default_factory=list, description="The same pairs: strict accuracy per policy and cell."
    )
    cost: list[CostRow] = Field(default_factory=list, description="Calls, tokens and model time per model and arm.")
    parties: list[PartiesCell] = Field(
        default_factory=list,
        description="Live parties per player, arm and cell: texts worded, fallbacks to the script, answers, refusals.",
    )
    call_errors: list[CallErrorRow] = Field(
        default_factory=list,
        description="Model calls that got no usable answer, per player and kind, and the cells left out for it.",
    )
    files: dict[str, list[str]] = Field(default_factory=dict, description="Files written under RUN_DIR/report/.")

    def note(self) -> str:
        return (
            f"{self.runs} runs; profile: {self.profile}; judge: {self.judge}; 95% bootstrap intervals clustered by "
            f"commitment type ({self.n_boot} replicates, seed {self.seed}); judge errors: {self.judge_errors} "
            f"messages in {self.runs_with_judge_errors} runs (runs whose grade needs a missing label are excluded "
            "and counted as 'excl.')."
        )

    def views(self, detail: bool = False) -> list[TableView]:
        """The tables as shown on a console: per model, rows are intervention x policy.

        ``detail`` adds the per-gap tables (written to ``report/gap.*`` and shown by the viewer). Each
        number's cell links to the runs behind it (:attr:`TableView.links`).
        """
        gap = _gap_views(self) if detail else []
        errors = [call_error_view(self.call_errors)] if self.call_errors else []
        views = [*_metric_views(self), *gap, *_cell_views(self), *_paired_views(self), *_policy_views(self),
                 *_rank_views(self), *comparison_views(self.comparisons, self.cost, ("agent", "interventions")),
                 *_parties_views(self), *errors]
        return note_withheld(views, "commitment types")

    def summary_lines(self) -> list[str]:
        head = (
            f"Standing report (labels by the {self.judge_kind or judge_kind(self.judge)}): {self.runs} runs, profile "
            f"{self.profile}, judge {self.judge}, {self.n_boot} bootstrap replicates (seed {self.seed})"
        )
        tail = (
            f"judge errors: {self.judge_errors} messages in {self.runs_with_judge_errors} runs "
            f"(excluded where a grade needs them)   tool errors: {self.tool_errors}"
        )
        texts = [f"texts: {self.texts}"] if self.texts else []
        return [head, *texts, LEGEND, tail, *call_error_lines(self.call_errors),
                *(f"flag: {flag}" for flag in comparison_flags(self.comparisons))]


def build_standing_report(
    rows: pd.DataFrame, run_dir: Path | str, judge: str, n_boot: int = 1000, seed: int = 0,
    baseline: str | None = None, pairs: list[ModelPair] | None = None, profile: str = "commitbench",
    call_errors: list[CallErrorRow] | None = None, texts: str = "", by_cell: list[MetricValue] | None = None,
) -> StandingReport:
    """Every table of the run rows (pure). ``baseline`` None picks 'none' when that arm and another exist;
    ``by_cell`` is the strict-accuracy table by cell when it was already computed (:func:`st.cell_table` of these
    rows, with this ``n_boot`` and ``seed``: the heatmap drawn from it meanwhile, :func:`heatmap_figure`)."""
    if n_boot < 1:
        raise ValueError("the number of bootstrap replicates must be at least 1")
    if rows.empty:
        raise ValueError("; ".join([f"{run_dir} holds no finished runs", *call_error_lines(call_errors or [])]))
    arms = sorted(set(rows["interventions"]))
    baseline = chosen_baseline(arms, baseline)
    # The policy and rank tables (about two fifths of the tables' time at 100,000 runs) are computed on another core
    # meanwhile; where there is none, here, first. Either way the tables are the same.
    effects = aside(lambda: (st.policy_table(rows, n_boot=n_boot, seed=seed),
                             rank_effect_table(rows, n_boot=n_boot, seed=seed)))
    try:
        tables: dict[str, Any] = {
            "metrics": st.main_table(rows, n_boot=n_boot, seed=seed),
            "by_gap": st.gap_table(rows, n_boot=n_boot, seed=seed),
            "by_cell": st.cell_table(rows, n_boot=n_boot, seed=seed) if by_cell is None else by_cell,
            "premature_by_cell": st.cell_table(rows, n_boot=n_boot, seed=seed, metric="premature_execution"),
            "best_oracle_store": st.best_arms(rows, n_boot=n_boot, seed=seed),
            "strict_by_cell": _strict_by_cell(rows),
            "paired": st.paired_table(rows, baseline, n_boot=n_boot, seed=seed) if baseline else [],
            "cost": (cost := cost_table(rows, ("agent", "interventions"))),
            "parties": parties_table(rows),
            "comparisons": model_comparisons(rows, pairs or [], cost, n_boot=n_boot, seed=seed),
            "comparisons_by_cell": model_comparisons(rows, pairs or [], cost, by_cell=True, n_boot=n_boot, seed=seed),
        }
    except BaseException:
        with contextlib.suppress(BaseException):  # the other core's tables are waited for, not left running
            effects.result()
        raise
    policy_effect, rank_effect = effects.result()
    return StandingReport(
        run_dir=str(run_dir), judge=judge, judge_kind=judge_kind(judge), texts=texts, profile=profile, runs=len(rows),
        n_boot=n_boot, seed=seed, arms=arms, agents=sorted(set(rows["agent"])), baseline=baseline,
        judge_errors=int(rows["judge_errors"].sum()), runs_with_judge_errors=int((rows["judge_errors"] > 0).sum()),
        tool_errors=int(rows["tool_errors"].sum()), metric_names=list(st.metrics_for(rows)),
        policy_effect=policy_effect, rank_effect=rank_effect, call_errors=list(call_errors or []), **tables,
    )


def chosen_baseline(arms: list[str], baseline: str | None) -> str | None:
    """The arm the paired table compares with: ``baseline`` (a ValueError when no run played it), or, when None,
    'none' where that arm and another were played."""
    if baseline is None:
        return "none" if "none" in arms and len(arms) > 1 else None
    if baseline not in arms:
        raise ValueError(f"baseline {baseline!r} is not an intervention arm of this run; arms: {', '.join(arms)}")
    return baseline


def model_comparisons(
    rows: pd.DataFrame, pairs: list[ModelPair], cost: list[CostRow], by_cell: bool = False, n_boot: int = 1000,
    seed: int = 0,
) -> list[Comparison]:
    """Each pair, a minus b: every headline metric per policy, or strict accuracy per policy and cell; each
    player's sides in another language minus its English side (:func:`language_pairs`); and each arm played with
    live parties minus the same arm with the scripted ones (:func:`parties_pairs`)."""
    pairs = [*pairs, *language_pairs(rows), *parties_pairs(rows)]
    wanted = ("strict_accuracy",) if by_cell else st.MAIN_METRICS
    metrics = sorted((PairedMetric(m.name, m.values, m.stat) for m in METRICS if m.name in wanted),
                     key=lambda m: wanted.index(m.name))
    return compare_all(rows, pairs, metrics, cost, model_column="agent", arm_column="interventions",
                       group_by=("policy", "cell") if by_cell else ("policy",), pair_key=PAIR_KEY, n_boot=n_boot,
                       seed=seed)


def language_pairs(rows: pd.DataFrame) -> list[ModelPair]:
    """For every player that played in English and another language: the other language's side minus English."""
    if "language" not in rows.columns or rows["language"].nunique() < 2:
        return []
    sides = rows[["agent", "language"]].drop_duplicates()
    english = set(sides.loc[sides["language"] == Language.EN.value, "agent"])
    out: list[ModelPair] = []
    for agent, language in sorted(map(tuple, sides.loc[sides["language"] != Language.EN.value].to_numpy())):
        player = str(agent).removesuffix(f" [{language}]")
        if player in english:
            out.append(ModelPair(a=Side(model=str(agent)), b=Side(model=player), kind=ComparisonKind.LANGUAGE))
    return out


def parties_pairs(rows: pd.DataFrame) -> list[ModelPair]:
    """For every player and arm played with live parties whose scripted twin arm (the same interventions without
    the live parties) the player also played: the live arm minus the scripted one, paired by episode and sample."""
    if "interventions" not in rows.columns:
        return []
    sides = {(str(agent), str(arm)) for agent, arm in rows[["agent", "interventions"]].drop_duplicates().to_numpy()}
    out: list[ModelPair] = []
    for agent, arm in sorted(sides):
        names = arm.split("+")
        if LIVE_NAME not in names:
            continue
        control = "+".join(n for n in names if n != LIVE_NAME) or NO_ARM
        if (agent, control) in sides:
            out.append(ModelPair(a=Side(model=agent, arm=arm), b=Side(model=agent, arm=control),
                                 kind=ComparisonKind.PARTIES))
    return out


def _strict_by_cell(rows: pd.DataFrame) -> list[dict[str, Any]]:
    """Point estimates per cell in the compact form documented in the README."""
    table = strict_by_cell(rows)
    out: list[dict[str, Any]] = []
    for key, row in table.iterrows():
        keys = key if isinstance(key, tuple) else (key,)
        out.append({
            **{str(name): value for name, value in zip(table.index.names, keys, strict=True)},
            "cells": {c: (None if v != v else float(v)) for c, v in row.items()},
        })
    return out


def standing_report_tables(report: StandingReport) -> list[ReportTable]:
    """Every table of the report's files: the long form as CSV, the wide form (text) as Markdown."""
    tables = {
        "metrics": (st.long_frame(report.metrics), st.wide_frame(report.metrics, st.GROUP)),
        "gap": (st.long_frame(report.by_gap), st.wide_frame(report.by_gap, (*st.GROUP, "gap"))),
        "cells": (st.long_frame(report.by_cell), st.wide_frame(report.by_cell, st.GROUP, column="cell")),
    }
    if report.premature_by_cell:
        tables["premature"] = (st.long_frame(report.premature_by_cell),
                               st.wide_frame(report.premature_by_cell, st.GROUP, column="cell"))
    for name, values, drop in (("paired", report.paired, ()), ("policy", report.policy_effect, ("arm", "baseline"))):
        if values:
            frame = st.paired_frame(values)
            text = frame.assign(
                difference=[interval_text(p.estimate, p.low, p.high, signed=True, clusters=p.clusters)
                            for p in values]
            ).drop(columns=["low", "high", *drop])
            tables[name] = (frame, text)
    if report.rank_effect:
        frame = rank_frame(report.rank_effect)
        text = frame.assign(
            manager=[interval_text(r.manager, r.manager_low, r.manager_high, clusters=r.clusters)
                     for r in report.rank_effect],
            peer=[interval_text(r.peer, r.peer_low, r.peer_high, clusters=r.clusters) for r in report.rank_effect],
            difference=[interval_text(r.estimate, r.low, r.high, signed=True, clusters=r.clusters)
                        for r in report.rank_effect],
        ).drop(columns=["low", "high"])
        tables["rank_effect"] = (frame, text)
    for name, compared in (("comparisons", report.comparisons), ("comparisons_by_cell", report.comparisons_by_cell)):
        if compared:
            frame = comparison_frame(compared)
            text = frame.assign(
                difference=[interval_text(c.estimate, c.low, c.high, signed=True) for c in compared]
            ).drop(columns=["low", "high"])
            tables[name] = (frame, text)
    if report.cost:
        frame = pd.DataFrame.from_records([{**c.group, **c.model_dump(exclude={"group"})} for c in report.cost])
        tables["cost"] = (frame, frame)
    if report.parties:
        frame = pd.DataFrame.from_records([p.model_dump() for p in report.parties])
        tables["parties"] = (frame, frame)
    return [ReportTable(name, long, TableView.from_frame(_TITLES[name], wide)) for name, (long, wide) in tables.items()]


def heatmap_figure(by_cell: list[MetricValue], judge: str) -> ReportFigure | None:
    """The strict-accuracy heatmap of a cell table (None when no cell has a run)."""
    if not any(v.n for v in by_cell):
        return None
    from commitbench.analysis.standing.figures import strict_heatmap

    title = f"Strict accuracy by cell (judge: {judge})"
    return ReportFigure("figure", FIGURE_FILE, lambda path: strict_heatmap(by_cell, path, title=title))


def write_standing_files(
    report: StandingReport, out: Path, figure: bool = True, heatmap: ReportFigure | None = None,
) -> dict[str, list[str]]:
    """Write CSV and Markdown of every table (and the figures) under ``out``; returns the paths by table.
    ``heatmap`` is the heatmap when it was started already (drawn on another core: ``started_figure``)."""
    figures: list[ReportFigure] = []
    if figure:
        drawn = heatmap if heatmap is not None else heatmap_figure(report.by_cell, report.judge)
        if drawn is not None:
            figures.append(drawn)
    if figure and any(c.estimate is not None for c in report.comparisons):
        from commitbench.analysis.forest import forest_plot

        forest_title = f"Model comparisons, a minus b (judge: {report.judge})"
        figures.append(ReportFigure("comparisons_figure", FOREST_FILE,
                                    lambda path: forest_plot(report.comparisons, path, title=forest_title)))
    return write_report_files(out, standing_report_tables(report), report.note(), figures=figures)


# ----------------------------------------------------------------------------------- views
def _arm_key(arm_policy: tuple[str, str]) -> tuple[bool, tuple[str, str]]:
    return (arm_policy[0] != "none", arm_policy)


def _metric_text(m: MetricValue | None) -> str:
    if m is None:
        return "-"
    return interval_text(m.estimate, m.low, m.high, clusters=m.clusters) + (f" +{m.excluded}" if m.excluded else "")


def _difference_text(p: st.PairedValue | None) -> str:
    return "-" if p is None else interval_text(p.estimate, p.low, p.high, signed=True, clusters=p.clusters)


def _runs(metric: str | None = None, **fields: str | list[str]) -> RunFilter:
    """A run filter: each field's accepted values, and the metric whose rows count."""
    out: RunFilter = {name: [value] if isinstance(value, str) else list(value) for name, value in fields.items()}
    if metric is not None:
        out["metric"] = [metric]
    return out


def _metric_table(
    report: StandingReport, values: list[MetricValue], agent: str, extra: str | None, title: str
) -> TableView | None:
    """Rows intervention x policy (x the extra grouping column), one column per metric."""
    names = report.metric_names or list(st.MAIN_METRICS)
    rows: dict[tuple[str, ...], dict[str, MetricValue]] = {}
    for v in values:
        if v.group["agent"] == agent:
            key = (v.group["interventions"], v.group["policy"], *((v.group[extra],) if extra else ()))
            rows.setdefault(key, {})[v.metric] = v
    if not rows:
        return None
    if extra:  # the per-gap tables hold the main metrics only
        names = [n for n in names if any(n in metrics for metrics in rows.values())]
    body, links = [], []
    order = sorted(rows.items(), key=lambda kv: (_arm_key((kv[0][0], kv[0][1])), *(_number(k) for k in kv[0][2:])))
    for key, metrics in order:
        group = {"agent": agent, "interventions": key[0], "policy": key[1], **({extra: key[2]} if extra else {})}
        body.append([*key, *(_metric_text(metrics.get(name)) for name in names)])
        links.append([*(_runs(**group) for _ in key), *(_runs(name, **group) if name in metrics else None
                                                          for name in names)])
    head = ["intervention", "policy", *((extra,) if extra else ())]
    return TableView(
        title=title, columns=[*head, *(SHORT[n] for n in names)], rows=body, links=links,
        numeric=[*(False for _ in head), *(True for _ in names)],
    )


def _number(text: str) -> tuple[int, str]:
    return (int(text), text) if text.lstrip("-").isdigit() else (0, text)


def _metric_views(report: StandingReport) -> list[TableView]:
    tables = (_metric_table(report, report.metrics, agent, None, f"{agent}: metrics (%)") for agent in report.agents)
    return [t for t in tables if t is not None]


def _gap_views(report: StandingReport) -> list[TableView]:
    tables = (
        _metric_table(report, report.by_gap, agent, "gap", f"{agent}: metrics per gap (%)") for agent in report.agents
    )
    return [t for t in tables if t is not None]


def _cell_views(report: StandingReport) -> list[TableView]:
    return [*_cells_of(report, report.by_cell, "strict_accuracy", "strict accuracy"),
            *_cells_of(report, report.premature_by_cell, "premature_execution", "premature execution")]


def _cells_of(report: StandingReport, values: list[MetricValue], metric: str, what: str) -> list[TableView]:
    if not values:
        return []
    names = sorted({v.group["cell"] for v in values}, key=st.cell_sort_key)
    views = []
    for agent in report.agents:
        mine = [v for v in values if v.group["agent"] == agent]
        columns = sorted({(v.group["interventions"], v.group["policy"]) for v in mine}, key=_arm_key)
        if not columns:
            continue
        lookup = {(v.group["interventions"], v.group["policy"], v.group["cell"]): v for v in mine}
        body, links = [], []
        for cell in names:
            cells = [lookup.get((arm, policy, cell)) for arm, policy in columns]
            if not any(cells):
                continue
            body.append([cell, *(percent(v.estimate) if v else "" for v in cells)])
            links.append([
                _runs(agent=agent, cell=cell),
                *(_runs(metric, agent=agent, interventions=arm, policy=policy, cell=cell) if v else None
                  for (arm, policy), v in zip(columns, cells, strict=True)),
            ])
        views.append(TableView(
            title=f"{agent}: {what} by cell (%)",
            columns=["cell", *(f"{arm} ({policy[:4]})" for arm, policy in columns)], rows=body, links=links,
            numeric=[False, *(True for _ in columns)],
        ))
    return views


def _paired_views(report: StandingReport) -> list[TableView]:
    views = []
    for agent in report.agents:
        mine = [p for p in report.paired if p.group["agent"] == agent]
        if not mine:
            continue
        grouped: dict[tuple[str, str], dict[str, st.PairedValue]] = {}
        for p in mine:
            grouped.setdefault((p.arm, p.group["policy"]), {})[p.metric] = p
        body, links = [], []
        for (arm, policy), metrics in grouped.items():
            body.append([arm, policy, *(_difference_text(metrics.get(n)) for n in st.MAIN_METRICS)])
            both = [arm, metrics[next(iter(metrics))].baseline]
            runs = _runs(agent=agent, interventions=both, policy=policy)
            links.append([
                runs, runs,
                *(_runs(n, agent=agent, interventions=both, policy=policy) if n in metrics else None
                  for n in st.MAIN_METRICS),
            ])
        views.append(TableView(
            title=f"{agent}: difference from '{report.baseline}' on the same episodes (pp)",
            columns=["intervention", "policy", *(SHORT[n] for n in st.MAIN_METRICS)], rows=body, links=links,
            numeric=[False, False, *(True for _ in st.MAIN_METRICS)],
        ))
    return views


def _policy_views(report: StandingReport) -> list[TableView]:
    if not report.policy_effect:
        return []
    effects: dict[tuple[str, str], dict[str, st.PairedValue]] = {}
    for p in report.policy_effect:
        effects.setdefault((p.group["agent"], p.group["interventions"]), {})[p.metric] = p
    body, links = [], []
    for (agent, arm), metrics in effects.items():
        body.append([agent, arm, *(_difference_text(metrics.get(n)) for n in st.MAIN_METRICS)])
        group = {"agent": agent, "interventions": arm}
        links.append([_runs(agent=agent), _runs(**group),
                      *(_runs(n, **group) if n in metrics else None for n in st.MAIN_METRICS)])
    return [TableView(
        title="Explicit minus silent policy, same chats (pp)",
        columns=["model", "intervention", *(SHORT[n] for n in st.MAIN_METRICS)], rows=body, links=links,
        numeric=[False, False, *(True for _ in st.MAIN_METRICS)],
    )]


def _parties_views(report: StandingReport) -> list[TableView]:
    if not report.parties:
        return []

    def share(part: int, whole: int) -> str:
        return f"{part} ({100 * part / whole:.0f}%)" if whole else "0"

    body = [[p.agent, p.interventions, p.party_model, p.cell, str(p.runs), str(p.voiced),
             share(p.event_fallbacks, p.voiced), str(p.answers), share(p.answer_fallbacks, p.answers),
             str(p.budget_refusals)] for p in report.parties]
    return [TableView(
        title=_TITLES["parties"], rows=body,
        columns=["model", "intervention", "party model", "cell", "runs", "worded", "script stood", "answers",
                 "refused", "over budget"],
        numeric=[False, False, False, False, True, True, True, True, True, True],
    )]


def _rank_views(report: StandingReport) -> list[TableView]:
    if not report.rank_effect:
        return []
    body = [
        [r.group["agent"], r.group["interventions"], r.group["policy"],
         "drop" if r.measure is RankMeasure.DROPPED else "drop, not asked",
         interval_text(r.manager, r.manager_low, r.manager_high, clusters=r.clusters),
         interval_text(r.peer, r.peer_low, r.peer_high, clusters=r.clusters),
         interval_text(r.estimate, r.low, r.high, signed=True, clusters=r.clusters), str(r.pairs)]
        for r in sorted(report.rank_effect, key=lambda r: (r.group["agent"], _arm_key(
            (r.group["interventions"], r.group["policy"])), r.measure.value))
    ]
    return [TableView(
        title="Rank effect: manager minus peer drop rate, twin chats (%, pp)",
        columns=["model", "intervention", "policy", "measure", "manager", "peer", "difference", "pairs"], rows=body,
        numeric=[False, False, False, False, True, True, True, True],
    )]

