"""Prevalence of empty commitments and false action claims in logged chat turns (two-stage estimate).

Input: (user message, reply) pairs from a tool-less chat assistant. Judging every turn is wasteful,
because most replies contain nothing that could be a promise or a claim, so the turns are split in two
strata by cue words:

* the **cue stratum**: the cue detector finds a commitment in the reply, or the write-claim grammar finds
  a completed-write sentence. Every turn of this stratum is judged;
* the **rest**: a seeded random sample of ``n`` of its ``N`` turns is judged, and its per-turn mean
  stands in for the whole stratum (each sampled turn weighs ``N / n``, the inverse sampling fraction).

The cue words only choose which turns are judged; every count comes from the checker, with the no-tool
setup (C0): a tool-less assistant can keep no promise that needs a later time, an event, a later
session, a person or an outside channel, and performs no write it could claim.

Per turn three values are counted: empty commitments (agent-initiated commitments judged infeasible),
false action claims (0 or 1), and whether the turn has at least one of the two (0 or 1). For a value
``y`` and strata ``h`` with ``N_h`` turns of which ``n_h`` were judged with a usable label::

    total    = sum_h N_h * mean_h(y)
    per_1000 = 1000 * total / sum_h N_h

Turns the checker could not label (a judge error) are left out of ``n_h``: within a stratum they are
treated as missing at random. A stratum with turns but no judged turn makes the overall estimate
undefined (NaN). Intervals come from a bootstrap that resamples judged turns within each stratum
(clustered by conversation when the log names one), with the same number of replicates in every
stratum; the overall interval combines the strata replicate by replicate.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from commitbench.analysis.bootstrap import cluster_bootstrap_replicates, percentile_interval
from commitbench.jsonl import iter_lines

if TYPE_CHECKING:
    from commitbench.judges.followup.llm import CheckResult
    from commitbench.judges.followup.turn import FollowUpTurn

PER = 1000.0


class LogTurn(BaseModel):
    """One logged exchange: what the user wrote and what the assistant answered."""

    model_config = ConfigDict(extra="ignore")

    user: str = Field(description="The user's message.")
    reply: str = Field(description="The assistant's reply.")
    id: str | None = Field(default=None, description="Identifier of the turn (default: its line number).")
    conversation: str | None = Field(
        default=None, description="Conversation the turn belongs to (the bootstrap cluster; default: the turn)."
    )


class Stratum(str, Enum):
    """The two strata of the design."""

    CUE = "cue"
    REST = "rest"


class PrevalenceMetric(str, Enum):
    """What is counted per turn."""

    EMPTY_COMMITMENTS = "empty_commitments"
    FALSE_CLAIMS = "false_claims"
    AFFECTED_TURNS = "affected_turns"


METRICS: tuple[PrevalenceMetric, ...] = tuple(PrevalenceMetric)


class TurnCounts(BaseModel):
    """The checker's counts for one judged turn."""

    model_config = ConfigDict(frozen=True)

    empty_commitments: int = Field(ge=0, description="Agent-initiated commitments judged empty.")
    false_claims: int = Field(ge=0, le=1, description="1 when the reply claims an action no tool performed.")

    @property
    def affected(self) -> int:
        return int(self.empty_commitments > 0 or self.false_claims > 0)

    def value(self, metric: PrevalenceMetric) -> int:
        if metric is PrevalenceMetric.EMPTY_COMMITMENTS:
            return self.empty_commitments
        if metric is PrevalenceMetric.FALSE_CLAIMS:
            return self.false_claims
        return self.affected


class StratumSample(BaseModel):
    """One stratum: its size and the counts of the turns judged in it."""

    stratum: Stratum = Field(description="Which stratum.")
    population: int = Field(ge=0, description="Turns in the stratum (N_h).")
    sampled: int = Field(ge=0, description="Turns sent to the checker.")
    judge_errors: int = Field(default=0, ge=0, description="Sampled turns the checker could not label.")
    counts: list[TurnCounts] = Field(default_factory=list, description="Counts of the labelled turns (n_h rows).")
    clusters: list[str] = Field(default_factory=list, description="Bootstrap cluster of each labelled turn.")

    def values(self, metric: PrevalenceMetric) -> np.ndarray:
        return np.array([c.value(metric) for c in self.counts], dtype=float)


class RateEstimate(BaseModel):
    """A rate per 1,000 turns with its bootstrap interval."""

    estimate: float = Field(description="Point estimate per 1,000 turns (NaN when undefined).")
    low: float = Field(description="Lower end of the percentile interval.")
    high: float = Field(description="Upper end of the percentile interval.")
    total: float = Field(description="Estimated number of events in the stratum (or all turns).")


class StratumReport(BaseModel):
    """Counts and rates of one stratum."""

    stratum: Stratum = Field(description="Which stratum.")
    population: int = Field(description="Turns in the stratum.")
    sampled: int = Field(description="Turns sent to the checker.")
    labelled: int = Field(description="Turns the checker labelled.")
    judge_errors: int = Field(description="Turns the checker could not label.")
    weight: float | None = Field(description="Turns each labelled turn stands for (N_h / n_h).")
    observed: dict[PrevalenceMetric, int] = Field(description="Events counted in the labelled turns.")
    rates: dict[PrevalenceMetric, RateEstimate] = Field(description="Rates per 1,000 turns of this stratum.")


class PrevalenceReport(BaseModel):
    """The two-stage estimate: per stratum and overall."""

    turns: int = Field(description="Turns in the log.")
    strata: list[StratumReport] = Field(description="One entry per stratum.")
    overall: dict[PrevalenceMetric, RateEstimate] = Field(description="Stratified rates per 1,000 turns.")
    n_boot: int = Field(description="Bootstrap replicates.")
    confidence: float = Field(description="Coverage of the intervals.")
    seed: int = Field(description="Seed of the sample and the bootstrap.")
    checker: str = Field(description="Which checker labelled the turns.")
    checker_kind: str = Field(default="", description="'offline baseline checker' or 'LLM checker'.")


# ------------------------------------------------------------------------------------------ input
def read_log(path: Path) -> list[LogTurn]:
    """Read a JSONL log of turns; a bad line (not UTF-8, not JSON, nested too deep, not a turn) raises
    ``ValueError`` naming the file and line number."""
    turns: list[LogTurn] = []
    for number, line in iter_lines(path):  # a line that is not UTF-8 raises, naming it
        try:
            data = json.loads(line)
        except RecursionError:
            raise ValueError(f"{path}:{number}: nested too deep to read") from None
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{number}: not JSON ({exc.msg} at column {exc.colno})") from None
        except ValueError as exc:  # an integer too long to convert
            raise ValueError(f"{path}:{number}: not JSON we can read ({exc})") from None
        if not isinstance(data, dict):
            raise ValueError(f"{path}:{number}: expected a JSON object, got {type(data).__name__}")
        try:
            turn = LogTurn.model_validate(data)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
            raise ValueError(f"{path}:{number}: {problems}") from None
        if turn.id is None:
            turn = turn.model_copy(update={"id": f"line-{number}"})
        turns.append(turn)
    return turns


# ------------------------------------------------------------------------------------------ design
def in_cue_stratum(reply: str) -> bool:
    """True when the reply holds promise- or claim-like wording (cue detector or write-claim grammar)."""
    from commitbench.claimguard.guard import looks_like_write_claim
    from commitbench.judges.followup.cues import detect_commitments

    return bool(detect_commitments(reply).commitments) or looks_like_write_claim(reply) is not None


def draw_sample(indices: Sequence[int], size: int, seed: int) -> list[int]:
    """A seeded simple random sample without replacement (sorted); all of them when ``size`` >= len."""
    if size < 0:
        raise ValueError(f"the sample size must be >= 0, got {size}")
    if size >= len(indices):
        return sorted(indices)
    rng = np.random.default_rng(seed)
    chosen = rng.choice(len(indices), size=size, replace=False)
    return sorted(indices[int(i)] for i in chosen)


def checker_input(turn: LogTurn) -> FollowUpTurn:
    """The checker's input for a logged turn: the no-tool setup (C0) and no tool call.

    A logged turn has no request category, doability or list of needed capabilities. The rules read
    none of them to decide feasibility or a false claim (the two things counted here), so the turn is
    filed as a not-doable request with no listed capability; the category is a fixed placeholder that
    nothing downstream reads.
    """
    from commitbench.episodes.followup.vocabulary import Doability, Persona, RequestCategory, SetupId
    from commitbench.judges.followup.turn import FollowUpTurn

    return FollowUpTurn(
        episode_id=str(turn.id), request_id=str(turn.id), category=RequestCategory.REMINDER, source="log",
        setup=SetupId.C0, variant="inferred", persona=Persona.GENERIC, doability=Doability.NOT_DOABLE,
        required_capabilities=[], user_message=turn.user, reply=turn.reply,
    )


def counts_from_result(result: CheckResult) -> TurnCounts | None:
    """The turn's counts from a checker verdict; None when the checker could not label it."""
    if result.outcome is None or result.response is None:
        return None
    empty = sum(1 for c in result.commitments if c.feasibility.agent_initiated and c.feasibility.feasible is False)
    return TurnCounts(empty_commitments=empty, false_claims=int(result.response.false_action_claim.value))


# ------------------------------------------------------------------------------------------ estimator
def stratified_total(strata: Sequence[tuple[int, Sequence[float] | np.ndarray]]) -> float:
    """``sum_h N_h * mean_h(y)`` for strata given as (N_h, judged values); NaN when a stratum with turns
    has no judged value."""
    total = 0.0
    for population, values in strata:
        if population == 0:
            continue
        if len(values) == 0:
            return float("nan")
        total += population * float(np.mean(values))
    return total


def per_thousand(strata: Sequence[tuple[int, Sequence[float] | np.ndarray]]) -> float:
    """The stratified rate per 1,000 turns (NaN for no turns, or an unjudged stratum)."""
    turns = sum(population for population, _ in strata)
    if turns == 0:
        return float("nan")
    return PER * stratified_total(strata) / turns


def _stratum_replicates(sample: StratumSample, metric: PrevalenceMetric, n_boot: int, seed: int) -> np.ndarray:
    """Replicate means of the stratum (NaN everywhere when nothing was judged)."""
    if not sample.counts:
        return np.full(n_boot, np.nan)
    clusters = sample.clusters or [str(i) for i in range(len(sample.counts))]
    _, replicates = cluster_bootstrap_replicates(sample.values(metric), clusters, n_boot=n_boot, seed=seed)
    return replicates


def estimate_prevalence(
    strata: Sequence[StratumSample],
    n_boot: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
    checker: str = "rules",
) -> PrevalenceReport:
    """Per-stratum and stratified rates per 1,000 turns with bootstrap intervals (pure)."""
    if n_boot < 1:
        raise ValueError(f"n_boot must be at least 1, got {n_boot}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence}")
    for sample in strata:
        if sample.clusters and len(sample.clusters) != len(sample.counts):
            raise ValueError(f"stratum {sample.stratum.value}: one cluster per labelled turn is needed")
        if sample.sampled > sample.population or len(sample.counts) + sample.judge_errors != sample.sampled:
            raise ValueError(
                f"stratum {sample.stratum.value}: sampled={sample.sampled} must not exceed population="
                f"{sample.population} and must equal labelled ({len(sample.counts)}) + errors ({sample.judge_errors})"
            )
    turns = sum(s.population for s in strata)
    reports: list[StratumReport] = []
    overall: dict[PrevalenceMetric, RateEstimate] = {}
    per_stratum_reps: dict[PrevalenceMetric, list[np.ndarray]] = {m: [] for m in METRICS}
    for offset, sample in enumerate(strata):
        rates: dict[PrevalenceMetric, RateEstimate] = {}
        for metric in METRICS:
            values = sample.values(metric)
            replicates = _stratum_replicates(sample, metric, n_boot, seed + offset)
            per_stratum_reps[metric].append(replicates)
            mean = float(values.mean()) if values.size else float("nan")
            low, high, _ = percentile_interval(replicates * PER, confidence)
            rates[metric] = RateEstimate(estimate=PER * mean, low=low, high=high, total=sample.population * mean)
        labelled = len(sample.counts)
        reports.append(
            StratumReport(
                stratum=sample.stratum, population=sample.population, sampled=sample.sampled, labelled=labelled,
                judge_errors=sample.judge_errors, weight=sample.population / labelled if labelled else None,
                observed={m: int(sample.values(m).sum()) for m in METRICS}, rates=rates,
            )
        )
    for metric in METRICS:
        pairs = [(s.population, s.values(metric)) for s in strata]
        estimate = per_thousand(pairs)
        combined = np.zeros(n_boot)
        for sample, replicates in zip(strata, per_stratum_reps[metric], strict=True):
            if sample.population:
                combined = combined + sample.population * replicates
        combined = PER * combined / turns if turns else np.full(n_boot, np.nan)
        low, high, _ = percentile_interval(combined, confidence)
        total = stratified_total(pairs)
        overall[metric] = RateEstimate(estimate=estimate, low=low, high=high, total=total)
    from commitbench.analysis.followup.report import checker_kind

    return PrevalenceReport(
        turns=turns, strata=reports, overall=overall, n_boot=n_boot, confidence=confidence, seed=seed,
        checker=checker, checker_kind=checker_kind(checker),
    )


def format_report(report: PrevalenceReport) -> str:
    """A plain-text table of the report."""

    def cell(rate: RateEstimate) -> str:
        if math.isnan(rate.estimate):
            return "undefined"
        return f"{rate.estimate:.2f} [{rate.low:.2f}, {rate.high:.2f}]"

    header = f"{'stratum':<8} {'turns':>7} {'judged':>7} {'errors':>6}  " + "  ".join(
        f"{m.value + ' /1000':<28}" for m in METRICS
    )
    lines = [f"Empty commitments and false claims per 1,000 turns, labels by the {report.checker_kind}", header]
    for s in report.strata:
        lines.append(
            f"{s.stratum.value:<8} {s.population:>7} {s.labelled:>7} {s.judge_errors:>6}  "
            + "  ".join(f"{cell(s.rates[m]):<28}" for m in METRICS)
        )
    labelled = sum(s.labelled for s in report.strata)
    errors = sum(s.judge_errors for s in report.strata)
    lines.append(
        f"{'overall':<8} {report.turns:>7} {labelled:>7} {errors:>6}  "
        + "  ".join(f"{cell(report.overall[m]):<28}" for m in METRICS)
    )
    lines.append(
        f"checker: {report.checker}; {report.confidence:.0%} bootstrap intervals, {report.n_boot} replicates, "
        f"seed {report.seed}"
    )
    return "\n".join(lines)
