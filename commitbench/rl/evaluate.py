"""Play a served model on a suite and return each run's reward: the suite's chat agent, through the runner.

``evaluate(base_url, model)`` builds the config ``commitbench run SUITE --agent chat`` would build for one
model behind an OpenAI-compatible endpoint, plays it into a run directory (so every call goes through the
run's cache and every episode leaves its trace), then grades the run with :mod:`commitbench.rl.episodes`.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from commitbench.config import ExperimentConfig
from commitbench.envs import FOLLOWUP_ENV_ID, STANDING_ENV_ID
from commitbench.rl.episodes import RunReward, followup_run_rewards, standing_run_rewards
from commitbench.rl.rewards import FollowupWeights, StandingWeights
from commitbench.rundir import RunStatus
from commitbench.runner import run_experiment

__all__ = ["SUITE_ENVS", "evaluate"]

SUITE_ENVS = {"standing": STANDING_ENV_ID, "followup": FOLLOWUP_ENV_ID}


def evaluate(
    base_url: str,
    model: str,
    *,
    suite: str = "standing",
    episodes: Mapping[str, Any] | None = None,
    profile: str = "commitbench",
    out_dir: Path | str | None = None,
    weights: StandingWeights | FollowupWeights | None = None,
    concurrency: int = 8,
    api_key_env: str | None = None,
    settings: Mapping[str, Any] | None = None,
    interventions: Sequence[str] = (),
) -> list[RunReward]:
    """Play ``model`` at ``base_url`` on the suite's episodes (``episodes``: the suite's episode filter, e.g.
    ``{"split": "test", "cells": ["PEER-DIRECT"], "limit": 4}``) and return the reward of every run.

    ``out_dir`` keeps the run directory (a temporary one otherwise); ``settings`` adds generation settings
    (temperature, max_tokens, ...); ``interventions`` is the one arm played (names, innermost first). A run
    that does not complete raises with the runner's failures.
    """
    if suite not in SUITE_ENVS:
        raise ValueError(f"unknown suite {suite!r}; known: {', '.join(SUITE_ENVS)}")
    entry = {"name": "tested", "base_url": base_url, "api_key_env": api_key_env,
             "settings": {"model": model, **(settings or {})}}
    config = ExperimentConfig.model_validate({
        "env": SUITE_ENVS[suite], "profile": profile, "agents": ["chat"], "models": [entry],
        "concurrency": concurrency, "episodes": dict(episodes or {}),
        "interventions": [list(interventions)] if interventions else ["none"],
    })
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(out_dir) if out_dir is not None else Path(tmp) / "run"
        summary = run_experiment(config, run_dir)
        if summary.status is not RunStatus.COMPLETE:
            raise RuntimeError(f"the {suite} run at {run_dir} did not complete: {summary.failures}")
        if suite == "standing":
            if weights is not None and not isinstance(weights, StandingWeights):
                raise TypeError("the standing suite takes StandingWeights")
            return standing_run_rewards(run_dir, weights)
        if weights is not None and not isinstance(weights, FollowupWeights):
            raise TypeError("the follow-up suite takes FollowupWeights")
        return followup_run_rewards(run_dir, weights)
