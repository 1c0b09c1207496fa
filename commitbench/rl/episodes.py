"""The rewards of a played run: each trace graded as the report grades it, then turned into its reward terms.

A standing run's rows come from :func:`commitbench.analysis.standing.results.load_rows` (the signals, the rule
judge's labels unless stored labels are given, the strict grade); a follow-up run's labels from the offline
checker, the labeller ``commitbench label`` stores under ``rules``. Playing is the runner's job
(:func:`commitbench.runner.run_experiment`): these functions only read what it wrote.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from commitbench.analysis.standing.results import load_rows
from commitbench.judges.followup.labellers import CheckerLabeller
from commitbench.judges.followup.rules import OfflineChecker
from commitbench.judges.standing.labels import MessageLabel
from commitbench.rl.rewards import FollowupWeights, RewardBreakdown, StandingWeights, followup_reward, standing_reward
from commitbench.suites.standing import episodes_of_run
from commitbench.traces import iter_latest_traces

__all__ = ["RunReward", "followup_run_rewards", "standing_run_rewards"]


class RunReward(BaseModel):
    """The reward of one run of a run directory."""

    model_config = ConfigDict(frozen=True)

    run_key: str = Field(description="The run's key in its run directory.")
    agent: str = Field(description="The player's name as the trace records it.")
    episode_id: str = Field(description="The episode played.")
    group: str = Field(description="The standing cell, or the follow-up setup, the episode belongs to.")
    cluster: str = Field(description="The commitment type (standing) or the request (follow-up).")
    label: str = Field(default="", description="The follow-up checker's outcome label ('' for standing runs).")
    reward: RewardBreakdown = Field(description="The reward terms and their total.")


def standing_run_rewards(
    run_dir: Path | str, weights: StandingWeights | None = None,
    labels: Mapping[str, list[MessageLabel]] | None = None, judge: str = "rules",
) -> list[RunReward]:
    """Every finished run of a standing run directory with its reward (graded with the rule judge unless
    ``labels``, a judge's stored labels by run key, are given)."""
    episodes = episodes_of_run(Path(run_dir))
    rows = load_rows(run_dir, labels=labels, judge=judge, episodes=episodes)
    out: list[RunReward] = []
    for record in rows.to_dict("records"):
        row = {str(k): v for k, v in record.items()}
        episode = episodes[str(row["episode_id"])]
        out.append(RunReward(
            run_key=str(row["run_key"]), agent=str(row["agent"]), episode_id=episode.id, group=episode.cell,
            cluster=str(row["commitment_type"]),
            reward=standing_reward(row, episode.expected, weights, events=len(episode.event_steps)),
        ))
    return out


def followup_run_rewards(run_dir: Path | str, weights: FollowupWeights | None = None) -> list[RunReward]:
    """Every finished run of a follow-up run directory with its reward (labelled by the offline checker)."""
    labeller = CheckerLabeller(OfflineChecker())
    out: list[RunReward] = []
    for trace in iter_latest_traces(run_dir):
        if trace.infra_error:
            continue
        record = labeller.label_now(trace)
        label = None if record.error else record.result.outcome
        out.append(RunReward(
            run_key=trace.run_key, agent=trace.agent.name if trace.agent else "", episode_id=trace.episode_id,
            group=str(trace.factors.get("setup", "")), cluster=str(trace.factors.get("request_id", "")),
            label=label.value if label is not None else "", reward=followup_reward(label, weights),
        ))
    return out
