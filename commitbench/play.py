"""Play one episode with a synchronous agent and return its trace (no model, no network)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from commitbench.agents.base import Agent
from commitbench.traces import EpisodeTrace

# A turn has at most 8 tool calls and a script at most a few dozen messages; this bound only
# protects against an environment bug, never ends a normal episode.
MAX_STEPS = 5_000


def unwrapped_trace(env: gym.Env[Any, Any]) -> EpisodeTrace:
    trace = getattr(env.unwrapped, "trace", None)
    if trace is None:
        raise RuntimeError("environment has no trace; was reset() called?")
    return trace


def play_episode(
    env: gym.Env[Any, Any], agent: Agent, episode_id: str | None = None, seed: int | None = None
) -> EpisodeTrace:
    options = {"episode_id": episode_id} if episode_id else None
    observation, info = env.reset(seed=seed, options=options)
    agent.begin(observation, info)
    for _ in range(MAX_STEPS):
        action = agent.act(observation, info)
        observation, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            break
    else:
        raise RuntimeError(f"episode did not end within {MAX_STEPS} steps")
    trace = unwrapped_trace(env)
    trace.agent = agent.identity()
    trace.truncated = bool(truncated)
    return trace
