"""The standing paper's tables and figures, from a run (``commitbench report RUN --paper-tables``).

Every table and figure the paper's summary describes is built here from the run's rows and report, with the
rows and columns the paper shows (see :mod:`commitbench.analysis.paper_tables` for the statuses). The items
the summary only numbers, without saying what they hold, are listed as not reproducible, so the index still
names every table and figure of the paper.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from commitbench.analysis.comparisons import ComparisonKind
from commitbench.analysis.paper_plots import interval_bars
from commitbench.analysis.paper_tables import PaperOutput, not_reproducible, output
from commitbench.analysis.standing import tables as st
from commitbench.analysis.standing.figures import strict_heatmap
from commitbench.analysis.standing.metrics import MetricValue, compute_metrics
from commitbench.analysis.tables import interval_text
from commitbench.episodes.standing.spec import Expected

if TYPE_CHECKING:
    from commitbench.analysis.standing.report import StandingReport

__all__ = ["PAPER", "standing_paper_tables"]

PAPER = "the standing paper (Who May Release an Agent's Promise?)"
ORACLE_STORES = ("oracle:B1", "oracle:B2", "oracle:B3", "oracle:B3+", "oracle:B4")
HEURISTICS = ("creditor-rule", "last-speaker-wins", "rank-wins")
# Numbered in the paper, but not described in the summary the project was built from.
UNDESCRIBED = ("table2", "table3", "table4", "table6", "table7", "figure1", "figure2", "figure4")
HEADLINE = ("override", "net_unauthorized_release", "strict_accuracy", "reinstatement_obedience",
            "reinstatement_before_trigger", "consultation_after_relays", "verification_after_claims")


def standing_paper_tables(rows: pd.DataFrame, report: StandingReport, expected: Mapping[str, Expected],
                          n_boot: int = 1000, seed: int = 0) -> list[PaperOutput]:
    """Every table and figure of the standing paper, as far as this run gives it."""
    outputs = [
        _table1(rows, expected),
        _section4(report),
        _figure3(report),
        _table5(report),
        _table8(report),
        _figure5(rows),
        _table9(report),
        _figure6(rows, n_boot, seed),
        _figure7(report),
        _table10(report),
        _table11(rows, n_boot, seed),
        _table12(rows, n_boot, seed),
        not_reproducible("standing-table13", "Agreement of the judge with human labels per label",
                         "needs human labels of a sample of messages: commitbench annotate export/import, then "
                         "commitbench validate RUN HUMAN.jsonl"),
    ]
    for name in UNDESCRIBED:
        outputs.append(not_reproducible(f"standing-{name}", "(not described)",
                                        "numbered in the paper but not described in the summary the project was "
                                        "built from, so its rows and columns are unknown here"))
    return outputs


# ------------------------------------------------------------------ helpers
def _wide(values: Sequence[MetricValue], group_by: Sequence[str], metrics: Sequence[str]) -> tuple[
        pd.DataFrame, pd.DataFrame]:
    """Groups as rows: the data (estimate, low, high per metric) and the text (one interval per metric)."""
    data: dict[tuple[str, ...], dict[str, object]] = {}
    text: dict[tuple[str, ...], dict[str, object]] = {}
    for v in values:
        if v.metric not in metrics:
            continue
        key = tuple(v.group.get(g, "") for g in group_by)
        data.setdefault(key, dict(zip(group_by, key, strict=True))).update(
            {v.metric: v.estimate, f"{v.metric}_low": v.low, f"{v.metric}_high": v.high, f"{v.metric}_n": v.n})
        text.setdefault(key, dict(zip(group_by, key, strict=True)))[v.metric] = (
            interval_text(v.estimate, v.low, v.high, clusters=v.clusters) + (f" (n={v.n})" if v.n else ""))
    order = sorted(data)
    columns = [*group_by, *(c for m in metrics for c in (m, f"{m}_low", f"{m}_high", f"{m}_n"))]
    frame = pd.DataFrame([data[k] for k in order], columns=columns)
    shown = pd.DataFrame([text[k] for k in order], columns=[*group_by, *metrics]).fillna("")
    return frame, shown


def _long(values: Sequence[MetricValue], metrics: Sequence[str]) -> pd.DataFrame:
    return pd.DataFrame([{**v.group, "metric": v.metric, "estimate": v.estimate, "low": v.low, "high": v.high,
                          "n": v.n} for v in values if v.metric in metrics])


def _arms(report: StandingReport) -> set[str]:
    return set(report.arms)


# ------------------------------------------------------------------ items
def _table1(rows: pd.DataFrame, expected: Mapping[str, Expected]) -> PaperOutput:
    cells = sorted(expected, key=st.cell_sort_key)
    explicit = rows[rows["policy"] == "explicit"]
    present = [h for h in HEURISTICS if h in set(explicit["agent"])]
    records = []
    for cell in cells:
        e = expected[cell]
        needs = [word for word, flag in (("consult", e.consult), ("notify", e.notify), ("verify", e.verify)) if flag]
        record: dict[str, object] = {"cell": cell, "correct": e.outcome.value + (f" + {', '.join(needs)}"
                                                                                   if needs else "")}
        for agent in present:
            part = explicit[(explicit["agent"] == agent) & (explicit["cell"] == cell) & explicit["strict"].notna()]
            record[agent] = float(part["strict"].astype(float).mean()) if len(part) else None
        records.append(record)
    missing = [f"the reference agent {h} is not in the run (play it beside the others: --agent {h})"
               for h in HEURISTICS if h not in present]
    return output("standing-table1", "The creditor rule and two heuristics, cell by cell: the correct behaviour and "
                  "each rule's strict accuracy (explicit policy)", pd.DataFrame(records), missing=missing)


def _section4(report: StandingReport) -> PaperOutput:
    values = [v for v in report.metrics if v.group["interventions"] == "none"]
    data, shown = _wide(values, ("agent", "policy"), HEADLINE)
    item = output("standing-section4", "The two regimes (the numbers of the paper's section 4): override, net "
                  "unauthorized release, strict accuracy, reinstatement obedience, consultation and verification per "
                  "model and policy, without interventions", data, text=shown,
                  missing=[] if len(data) else ["the run has no arm without interventions ('none')"])
    item.item = item.item.model_copy(update={"kind": "table", "number": "§4 (in the text)"})
    return item


def _figure3(report: StandingReport) -> PaperOutput:
    arms = _arms(report)
    wanted = ("none", *ORACLE_STORES)
    values = [v for v in report.metrics if v.group["interventions"] in wanted]
    metrics = ("override", "net_unauthorized_release")
    data, shown = _wide(values, ("agent", "policy", "interventions"), metrics)
    missing = [f"the oracle store {s} is not an arm of the run" for s in ORACLE_STORES if s not in arms]
    if not any(s in arms for s in ORACLE_STORES):
        return not_reproducible("standing-figure3", "Override and net unauthorized release per oracle store",
                                "the run has no oracle store arm (interventions: oracle:B1 ... oracle:B4)")
    long = _long(values, metrics)

    def draw(path: Path) -> Path:
        return interval_bars(long, path, panel=("agent", "policy"), bar="interventions", series="metric",
                             title="Override and net unauthorized release per oracle store")

    return output("standing-figure3", "Override and net unauthorized release per model under each oracle store "
                  "(B1 a sentence of principle, B2 whom each promise is owed to, B3 an ownership store, B3+ with the "
                  "release status, B4 a note to check with the creditor)", data, text=shown, missing=missing,
                  draw=draw)


def _table5(report: StandingReport) -> PaperOutput:
    metrics = {(v.group["agent"], v.group["policy"], v.group["interventions"]): v
               for v in report.metrics if v.metric == "strict_accuracy"}
    best = {(b.group["agent"], b.group["policy"]): b for b in report.best_oracle_store}
    ledger = sorted(a for a in _arms(report) if a.startswith("ledger:") and "+" not in a)
    agents = sorted({a for a, _, _ in metrics})
    records, shown = [], []
    for agent in agents:
        record: dict[str, object] = {"agent": agent}
        text: dict[str, object] = {"agent": agent}
        cells = (("policy alone", metrics.get((agent, "explicit", "none"))),
                 ("best oracle store (no policy)", best.get((agent, "silent"))),
                 *((f"{arm} (no policy)", metrics.get((agent, "silent", arm))) for arm in ledger),
                 *((f"{arm} + policy", metrics.get((agent, "explicit", arm))) for arm in ledger))
        for name, value in cells:
            record[name] = getattr(value, "estimate", None)
            record[f"{name} low"] = getattr(value, "low", None)
            record[f"{name} high"] = getattr(value, "high", None)
            text[name] = "" if value is None else interval_text(value.estimate, value.low, value.high)
        if (agent, "silent") in best:
            record["best oracle store"] = text["best oracle store"] = best[(agent, "silent")].arm
        records.append(record)
        shown.append(text)
    missing = []
    if not ledger:
        missing.append("the run has no ledger arm (ledger:self-kept)")
    if not best:
        missing.append("the run has no oracle store arm under the silent policy to pick the best from")
    return output("standing-table5", "Strict accuracy per model: the release policy alone, the best oracle store "
                  "without policy, the self-kept ledger without and with the policy", pd.DataFrame(records),
                  text=pd.DataFrame(shown).fillna(""), missing=missing)


def _table8(report: StandingReport) -> PaperOutput:
    values = list(report.by_cell)
    data = _long(values, ("strict_accuracy",))
    shown = st.wide_frame(values, st.GROUP, column="cell")

    def draw(path: Path) -> Path:
        return strict_heatmap(values, path, title="Strict accuracy per cell, model and policy")

    return output("standing-table8", "Strict accuracy per cell, per model, with and without the release policy",
                  data, text=shown, draw=draw if values else None,
                  missing=[] if {"explicit", "silent"} <= set(data.get("policy", pd.Series(dtype=str)))
                  else ["the run has only one of the two policies"])


def _figure5(rows: pd.DataFrame) -> PaperOutput:
    counted = rows[~((rows["policy"] == "silent") & rows["manager_cell"].astype(bool))]
    if counted.empty:
        return not_reproducible("standing-figure5", "Where the runs went, per cell", "the run has no counted runs")
    grouped = counted.groupby(["agent", "interventions", "policy", "cell"], sort=True)
    frame = grouped.agg(
        runs=("run_key", "size"),
        executed=("executed", "mean"),
        acted_before_trigger=("executed_early", "mean"),
        dropped=("dropped", "mean"),
        consulted=("consulted", lambda s: s.dropna().astype(float).mean() if s.notna().any() else None),
    ).reset_index()
    frame = frame.iloc[sorted(range(len(frame)), key=lambda i: st.cell_sort_key(str(frame["cell"].iloc[i])))]
    long = frame.melt(id_vars=["agent", "interventions", "policy", "cell"],
                      value_vars=["executed", "acted_before_trigger", "dropped"], var_name="share",
                      value_name="estimate")

    def draw(path: Path) -> Path:
        return interval_bars(long, path, panel=("agent", "interventions", "policy"), bar="cell", series="share",
                             title="Executed, acted before the trigger and dropped, per cell")

    return output("standing-figure5", "What the runs did, per model, arm, policy and cell: executed, acted before "
                  "the trigger, dropped, consulted (shares of runs)", frame.reset_index(drop=True), draw=draw)


def _table9(report: StandingReport) -> PaperOutput:
    values = list(report.metrics)
    metrics = tuple(report.metric_names)
    data, shown = _wide(values, ("agent", "interventions", "policy"), metrics)
    return output("standing-table9", "Every metric per model, intervention and policy (the paper adds reruns on a "
                  "second machine)", data, text=shown,
                  missing=["reruns on a second machine are other run directories: play the config there and set "
                           "the two reports side by side"])


def _figure6(rows: pd.DataFrame, n_boot: int, seed: int) -> PaperOutput:
    metrics = ("base_drop_rate", "unauthorized_drop_rate")
    values = compute_metrics(rows, (*st.GROUP, "gap"), metrics, n_boot=n_boot, seed=seed)
    values = [v for v in values if v.n or v.excluded]
    data, shown = _wide(values, (*st.GROUP, "gap"), metrics)
    long = _long(values, metrics)
    missing = [] if rows["gap"].nunique() > 1 else ["the run has one gap only (the paper compares 1 and 20)"]

    def draw(path: Path) -> Path:
        return interval_bars(long, path, panel=("agent", "interventions", "policy"), bar="gap", series="metric",
                             title="Drops per gap: BASE (forgetting) and after a cancellation without standing")

    return output("standing-figure6", "Drop rates per gap: BASE runs that never executed (forgetting) and runs that "
                  "dropped without consulting after a cancellation without standing", data, text=shown,
                  missing=missing, draw=draw if not long.empty else None)


def _figure7(report: StandingReport) -> PaperOutput:
    values = [v for v in report.by_gap if v.metric in ("net_unauthorized_release", "base_drop_rate")]
    data, shown = _wide(values, (*st.GROUP, "gap"), ("net_unauthorized_release", "base_drop_rate"))
    long = _long(values, ("net_unauthorized_release",))
    missing = [] if data.get("gap", pd.Series(dtype=str)).nunique() > 1 else ["the run has one gap only"]

    def draw(path: Path) -> Path:
        return interval_bars(long, path, panel=("agent", "interventions", "policy"), bar="gap", series="metric",
                             title="Net unauthorized release per gap")

    return output("standing-figure7", "Net unauthorized release per gap, beside the BASE drop rate it subtracts",
                  data, text=shown, missing=missing, draw=draw if not long.empty else None)


def _table10(report: StandingReport) -> PaperOutput:
    pairs = [c for c in report.comparisons if c.kind is ComparisonKind.THINKING]
    if not pairs:
        return not_reproducible("standing-table10", "Thinking on against off per model",
                                "the run has no thinking on/off pair of one model (two model entries of one served "
                                "model that differ only in the thinking switch)")
    frame = pd.DataFrame([{"a (thinking on)": c.a, "b (thinking off)": c.b, **c.group, "metric": c.metric,
                           "a": c.a_value, "b": c.b_value, "a minus b": c.estimate, "low": c.low, "high": c.high,
                           "pairs": c.n_pairs} for c in pairs if c.metric in HEADLINE])
    return output("standing-table10", "Thinking on against off: override, net unauthorized release, strict accuracy "
                  "and reinstatement obedience, with and without the policy", frame)


def _table11(rows: pd.DataFrame, n_boot: int, seed: int) -> PaperOutput:
    arms = set(rows["interventions"])
    wording = sorted(a for a in arms if a.startswith("policy:paraphrase"))
    samples = sorted(set(rows["sample"]))
    if not wording and len(samples) < 2:
        return not_reproducible("standing-table11", "The errors under paraphrased policies and other seeds",
                                "the run has no paraphrase arm (policy:paraphrase-1, policy:paraphrase-2) and one "
                                "sample")
    part = rows[rows["interventions"].isin(["none", *wording])]
    metrics = ("override", "net_unauthorized_release", "consultation_after_relays", "strict_accuracy")
    values = compute_metrics(part, (*st.GROUP, "sample"), metrics, n_boot=n_boot, seed=seed)
    data, shown = _wide(values, (*st.GROUP, "sample"), metrics)
    missing = []
    if not wording:
        missing.append("no paraphrase arm (policy:paraphrase-1, policy:paraphrase-2)")
    if len(samples) < 2:
        missing.append("one sample: seed reruns need samples: 3 (or the config again with another seed)")
    return output("standing-table11", "Override, net unauthorized release, consultation after relays and strict "
                  "accuracy under the original and paraphrased policies, and per sample", data, text=shown,
                  missing=missing)


def _table12(rows: pd.DataFrame, n_boot: int, seed: int) -> PaperOutput:
    kept = rows[rows["commitment_type"] != "post_announcement"]
    metrics = ("override", "net_unauthorized_release", "strict_accuracy", "verification_after_claims")
    values = compute_metrics(kept, st.GROUP, metrics, n_boot=n_boot, seed=seed)
    data, shown = _wide(values, st.GROUP, metrics)
    missing = [] if len(kept) < len(rows) else ["the run has no post_announcement runs: the table equals the main one"]
    return output("standing-table12", "The headline metrics without the post_announcement type (the artefact of its "
                  "template)", data, text=shown, missing=missing)
