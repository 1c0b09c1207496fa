"""``commitbench gateway report LOG``: rates per 1,000 checked replies, with intervals.

Every reply the gateway saw was checked, so the log is a census, and the follow-up suite's prevalence
estimator (:func:`commitbench.analysis.followup.prevalence.estimate_prevalence`) takes it as its two strata
fully judged: replies with promise- or claim-like wording (``cue``) and the rest. It gives empty commitments,
false claims and affected replies per 1,000 with bootstrap intervals clustered by session; replies marked
``check_error`` are its judge errors (left out, missing at random within their stratum). The gateway's own
labels (unanchored, check_error) get the same bootstrap (:func:`commitbench.analysis.bootstrap.cluster_bootstrap`)
over the same clusters. A reply is one choice: a request with ``n`` choices gives ``n`` replies.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, Field

from commitbench.analysis.bootstrap import cluster_bootstrap
from commitbench.analysis.followup.prevalence import (
    METRICS,
    PrevalenceMetric,
    RateEstimate,
    Stratum,
    StratumSample,
    TurnCounts,
    estimate_prevalence,
)
from commitbench.jsonl import iter_lines

PER = 1000.0
# A line longer than this is not a line the gateway wrote.
MAX_LINE_CHARS = 10_000_000


class ReplyRow(BaseModel):
    """One checked reply, as the report reads it from the log."""

    cluster: str = Field(description="Bootstrap cluster: the session pseudonym, else the turn digest.")
    cue: bool = Field(description="Promise- or claim-like wording.")
    labels: list[str] = Field(description="Its labels.")
    empty_commitments: int = Field(description="Empty commitments in it.")
    action: str = Field(description="What the gateway did.")


class GatewayReport(BaseModel):
    """The rates of one log."""

    turns: int = Field(description="Checked turns (log lines of replies the upstream gave).")
    upstream_errors: dict[str, int] = Field(
        default_factory=dict, description="Requests the upstream failed, by status (502: unreachable or not JSON, "
        "504: past the deadline, else the upstream's own status).")
    replies: int = Field(description="Checked replies (choices).")
    bad_lines: list[int] = Field(description="Line numbers that could not be read (skipped).")
    labels: dict[str, int] = Field(description="Replies per label.")
    actions: dict[str, int] = Field(description="Replies per action.")
    prevalence: dict[PrevalenceMetric, RateEstimate] = Field(description="The prevalence estimator's rates.")
    gateway_rates: dict[str, RateEstimate] = Field(description="unanchored and check_error per 1,000 replies.")
    n_boot: int = Field(description="Bootstrap replicates.")
    seed: int = Field(description="Seed of the bootstrap.")


def read_rows(path: Path, failures: Counter[str] | None = None) -> tuple[int, list[ReplyRow], list[int]]:
    """The log's checked turns, replies, and the numbers of lines that are not gateway records; a line of a
    request the upstream failed (no choice, a status other than 200) is counted in ``failures`` by status."""
    turns, rows, bad = 0, [], []
    for number, line in iter_lines(path):
        if len(line) > MAX_LINE_CHARS:
            bad.append(number)
            continue
        try:
            record = json.loads(line)
            choices = record["choices"]
            if not choices and record.get("status") != 200:
                if failures is not None:
                    failures[str(record["status"])] += 1
                continue
            cluster = record.get("session") or record["turn"]
            parsed = [ReplyRow(cluster=str(cluster), cue=bool(c["cue"]), labels=list(c["labels"]),
                               empty_commitments=int(c.get("empty_commitments", 0)), action=str(c.get("action", "")))
                      for c in choices]
        except (ValueError, RecursionError, KeyError, TypeError, AttributeError):
            bad.append(number)
            continue
        turns += 1
        rows.extend(parsed)
    return turns, rows, bad


def _rate(values: list[float], clusters: list[str], n_boot: int, seed: int) -> RateEstimate:
    if not values:
        nan = float("nan")
        return RateEstimate(estimate=nan, low=nan, high=nan, total=0.0)
    result = cluster_bootstrap(np.array(values, dtype=float), clusters, n_boot=n_boot, seed=seed)
    return RateEstimate(estimate=PER * result.estimate, low=PER * result.low, high=PER * result.high,
                        total=float(sum(values)))


def build_report(path: Path, n_boot: int = 1000, seed: int = 0) -> GatewayReport:
    """Read the log and estimate the rates."""
    failures: Counter[str] = Counter()
    turns, rows, bad = read_rows(path, failures)
    strata = []
    for stratum, cue in ((Stratum.CUE, True), (Stratum.REST, False)):
        members = [r for r in rows if r.cue is cue]
        labelled = [r for r in members if "check_error" not in r.labels]
        strata.append(StratumSample(
            stratum=stratum, population=len(members), sampled=len(members),
            judge_errors=len(members) - len(labelled),
            counts=[TurnCounts(empty_commitments=r.empty_commitments, false_claims=int("false_claim" in r.labels))
                    for r in labelled],
            clusters=[r.cluster for r in labelled],
        ))
    estimate = estimate_prevalence(strata, n_boot=n_boot, seed=seed, checker="rules")
    labelled_rows = [r for r in rows if "check_error" not in r.labels]
    gateway_rates = {
        "unanchored": _rate([float("unanchored" in r.labels) for r in labelled_rows],
                            [r.cluster for r in labelled_rows], n_boot, seed),
        "check_error": _rate([float("check_error" in r.labels) for r in rows], [r.cluster for r in rows],
                             n_boot, seed),
    }
    labels: Counter[str] = Counter(label for r in rows for label in r.labels)
    return GatewayReport(
        turns=turns, upstream_errors=dict(failures), replies=len(rows), bad_lines=bad, labels=dict(labels),
        actions=dict(Counter(r.action for r in rows)), prevalence=estimate.overall, gateway_rates=gateway_rates,
        n_boot=n_boot, seed=seed,
    )


def _cell(rate: RateEstimate) -> str:
    if math.isnan(rate.estimate):
        return "undefined"
    if math.isnan(rate.low):
        return f"{rate.estimate:.1f} (no interval: too few sessions)"
    return f"{rate.estimate:.1f} [{rate.low:.1f}, {rate.high:.1f}]"


def format_report(report: GatewayReport, path: str) -> str:
    """The report as plain text."""
    lines = [f"{path}: {report.turns} checked turns, {report.replies} replies"]
    if report.upstream_errors:
        failed = sum(report.upstream_errors.values())
        share = failed / (failed + report.turns)
        by_status = ", ".join(f"{k} {v}" for k, v in sorted(report.upstream_errors.items()))
        lines.append(f"upstream errors: {failed} of {failed + report.turns} requests ({share:.1%}; by status: "
                     f"{by_status})")
    if report.bad_lines:
        shown = ", ".join(str(n) for n in report.bad_lines[:10]) + (", ..." if len(report.bad_lines) > 10 else "")
        lines.append(f"skipped {len(report.bad_lines)} line(s) that are not gateway records: {shown}")
    lines.append("per 1,000 replies (95% bootstrap interval, clustered by session):")
    names: dict[PrevalenceMetric, str] = {
        PrevalenceMetric.FALSE_CLAIMS: "false claims", PrevalenceMetric.EMPTY_COMMITMENTS: "empty commitments",
        PrevalenceMetric.AFFECTED_TURNS: "replies with either",
    }
    for metric in (PrevalenceMetric.FALSE_CLAIMS, PrevalenceMetric.EMPTY_COMMITMENTS, PrevalenceMetric.AFFECTED_TURNS):
        lines.append(f"  {names[metric]:<22} {_cell(report.prevalence[metric])}")
    for name, rate in report.gateway_rates.items():
        lines.append(f"  {name.replace('_', ' '):<22} {_cell(rate)}")
    counts = ", ".join(f"{k} {v}" for k, v in sorted(report.labels.items()))
    actions = ", ".join(f"{k} {v}" for k, v in sorted(report.actions.items()))
    lines.append(f"replies by label: {counts or 'none'}; by action: {actions or 'none'}")
    lines.append(f"{report.n_boot} bootstrap replicates, seed {report.seed}; estimator: the prevalence estimator "
                 "with both strata fully checked")
    return "\n".join(lines)


def report_json(report: GatewayReport) -> dict[str, Any]:
    def rate(value: RateEstimate) -> dict[str, float | None]:
        return {k: (None if math.isnan(v) else v) for k, v in value.model_dump().items()}

    data = report.model_dump(mode="json", exclude={"prevalence", "gateway_rates"})
    data["rates"] = {**{m.value: rate(report.prevalence[m]) for m in METRICS},
                     **{k: rate(v) for k, v in report.gateway_rates.items()}}
    return data
