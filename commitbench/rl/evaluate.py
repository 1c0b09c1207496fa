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

from pydantic import BaseModel, ConfigDict, Field

from commitbench.config import ExperimentConfig
from commitbench.envs import FOLLOWUP_ENV_ID, STANDING_ENV_ID
from commitbench.rl.episodes import RunReward, followup_run_rewards, standing_run_rewards
from commitbench.rl.rewards import FollowupWeights, StandingWeights
from commitbench.rundir import RunStatus
from commitbench.runner import run_experiment

__all__ = ["SUITE_ENVS", "PartyModel", "evaluate"]

SUITE_ENVS = {"standing": STANDING_ENV_ID, "followup": FOLLOWUP_ENV_ID}


class PartyModel(BaseModel):
    """The model that plays the people of standing episodes with live parties (docs/live-parties.md), and the
    model that checks its texts (the same one unless named). Never the policy's endpoint: its calls are the
    environment's, not the policy's."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: str = Field(description="OpenAI-compatible base URL of the party model.")
    model: str = Field(description="The party model's served name.")
    api_key_env: str | None = Field(default=None, description="Environment variable holding its API key.")
    checker_base_url: str | None = Field(default=None, description="Base URL of the checker (default: base_url).")
    checker_model: str | None = Field(default=None, description="The checker's served name (default: model).")

    def config_fields(self) -> dict[str, Any]:
        """The config's fields for live parties: the party entry, the arm, and the checker as the run's judge."""
        party = {"name": "party", "base_url": self.base_url, "api_key_env": self.api_key_env,
                 "settings": {"model": self.model}}
        checker = {"name": "checker", "base_url": self.checker_base_url or self.base_url,
                   "api_key_env": self.api_key_env, "settings": {"model": self.checker_model or self.model}}
        return {"party_model": "party", "parties": "live", "judge": {"kind": "llm", "model": checker},
                "party_entry": party}


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
    parties: PartyModel | None = None,
) -> list[RunReward]:
    """Play ``model`` at ``base_url`` on the suite's episodes (``episodes``: the suite's episode filter, e.g.
    ``{"split": "test", "cells": ["PEER-DIRECT"], "limit": 4}``) and return the reward of every run.

    ``out_dir`` keeps the run directory (a temporary one otherwise); ``settings`` adds generation settings
    (temperature, max_tokens, ...); ``interventions`` is the one arm played (names, innermost first);
    ``parties`` plays it with live parties (standing only), voiced by that model. A run that does not complete
    raises with the runner's failures.
    """
    if suite not in SUITE_ENVS:
        raise ValueError(f"unknown suite {suite!r}; known: {', '.join(SUITE_ENVS)}")
    entry = {"name": "tested", "base_url": base_url, "api_key_env": api_key_env,
             "settings": {"model": model, **(settings or {})}}
    live: dict[str, Any] = {}
    models = [entry]
    if parties is not None:
        if suite != "standing":
            raise ValueError("live parties are played on the standing suite only")
        live = parties.config_fields()
        models.append(live.pop("party_entry"))
    config = ExperimentConfig.model_validate({
        "env": SUITE_ENVS[suite], "profile": profile, "agents": ["chat"], "models": models,
        "concurrency": concurrency, "episodes": dict(episodes or {}),
        "interventions": [list(interventions)] if interventions else ["none"], **live,
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
