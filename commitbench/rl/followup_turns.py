"""One follow-up turn played and labelled as a run's would be: the suite's environment, then the offline checker.

A completion from a trainer is no trace. :class:`FollowupTurnGrader` makes it one: it resets the suite's own
environment (:func:`commitbench.suites.followup.make_env`, as the runner builds it) on the episode, steps the
completion's tool calls (the environment's mocks run them and record which succeed), then its reply (or the end
of the turn), and labels the trace with the offline checker through the labeller
:func:`commitbench.rl.episodes.followup_run_rewards` uses. The label is the one a run with the same turn would
get, so :func:`commitbench.rl.rewards.followup_reward` of it is the reward the run would get.

Environments are built once per profile, holding every single-turn episode of the packaged requests, and reset
per completion; labels are kept for the most recent completions, so the reward functions of one batch grade
each completion once. A grader is not safe to share between threads (a lock serialises its environment).
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from typing import Any

import gymnasium as gym
from pydantic import BaseModel, ConfigDict, Field

from commitbench.agents.followup.chat import FollowUpChatAgent
from commitbench.episodes.followup.episodes import FollowUpEpisode, FollowupSelection
from commitbench.judges.followup.labellers import CheckerLabeller
from commitbench.judges.followup.outcomes import OutcomeLabel
from commitbench.judges.followup.rules import OfflineChecker
from commitbench.llm import ModelClient, ModelSettings
from commitbench.protocol import end_turn, reply
from commitbench.rl.completions import ParsedTurn, parse_completion
from commitbench.suites.followup import make_env
from commitbench.traces import EpisodeTrace

__all__ = ["EpisodeKey", "FollowupTurnGrader", "GradedTurn", "default_grader"]

DEFAULT_PROFILE = "commitbench"
# Completions whose label is kept (a GRPO batch is graded once per reward function).
LABEL_CACHE_SIZE = 4096
# The chat agent only renders the opening messages here; it never calls a model.
_RENDER_ONLY = ModelSettings(model="prompt-rendering-only")


class EpisodeKey(BaseModel):
    """Which single-turn follow-up episode a dataset row is: the columns the grader reads."""

    model_config = ConfigDict(frozen=True)

    request_id: str = Field(description="The request's id, e.g. rem-001.")
    setup: str = Field(description="C0 to C4.")
    variant: str = Field(description="inferred or stated.")
    persona: str = Field(description="generic or support.")
    profile: str = Field(default=DEFAULT_PROFILE, description="commitbench or paper.")


class GradedTurn(BaseModel):
    """A completion played as the episode's turn, and the offline checker's label of it."""

    model_config = ConfigDict(frozen=True)

    episode_id: str = Field(description="The episode played.")
    turn: ParsedTurn = Field(description="The calls and reply read from the completion.")
    called: list[str] = Field(description="The tools whose calls succeeded in the environment.")
    label: OutcomeLabel | None = Field(description="The checker's outcome label (None: it could not label).")
    error: str | None = Field(default=None, description="Why the checker could not label the turn.")


class FollowupTurnGrader:
    """Plays completions as single follow-up turns and labels them (see the module's doc)."""

    def __init__(self) -> None:
        self._envs: dict[str, tuple[gym.Env[Any, Any], dict[EpisodeKey, FollowUpEpisode]]] = {}
        self._labels: OrderedDict[tuple[EpisodeKey, str], GradedTurn] = OrderedDict()
        self._labeller = CheckerLabeller(OfflineChecker())
        self._lock = threading.Lock()
        self._client: ModelClient | None = None

    def _pool(self, profile: str) -> tuple[gym.Env[Any, Any], dict[EpisodeKey, FollowUpEpisode]]:
        if profile not in self._envs:
            episodes = FollowupSelection.model_validate({"profile": profile}).select()
            keys = {EpisodeKey(request_id=e.request.id, setup=e.setup.value, variant=e.variant.value,
                               persona=e.persona.value, profile=profile): e for e in episodes}
            self._envs[profile] = (make_env(episodes), keys)
        return self._envs[profile]

    def episode(self, key: EpisodeKey) -> FollowUpEpisode:
        """The episode a key names; a key no packaged single-turn episode has raises ValueError."""
        episode = self._pool(key.profile)[1].get(key)
        if episode is None:
            raise ValueError(f"no follow-up episode {key.request_id}:{key.setup}:{key.variant}:{key.persona} "
                             f"under the {key.profile} profile")
        return episode

    def opening(self, key: EpisodeKey) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The messages and tools (OpenAI form) the suite's chat agent sends the model for the episode's turn."""
        with self._lock:
            env = self._pool(key.profile)[0]
            observation, info = env.reset(options={"episode_id": self.episode(key).id})
        if self._client is None:
            self._client = ModelClient(_RENDER_ONLY)
        agent = FollowUpChatAgent(self._client)
        agent.begin(observation, info)
        return [dict(m) for m in agent.messages], list(info.get("tools") or [])

    def grade(self, key: EpisodeKey, completion: Any) -> GradedTurn:
        """Play ``completion`` (a string or a list of message dicts) as the episode's turn and label it."""
        memo = (key, _canonical(completion))
        with self._lock:
            cached = self._labels.get(memo)
            if cached is not None:
                self._labels.move_to_end(memo)
                return cached
            graded = self._play(key, completion)
            self._labels[memo] = graded
            if len(self._labels) > LABEL_CACHE_SIZE:
                self._labels.popitem(last=False)
            return graded

    def _play(self, key: EpisodeKey, completion: Any) -> GradedTurn:
        env = self._pool(key.profile)[0]
        episode = self.episode(key)
        _, info = env.reset(options={"episode_id": episode.id})
        names = [str((t.get("function") or {}).get("name", "")) for t in info.get("tools") or []]
        turn = parse_completion(completion, names)
        done = False
        for call in turn.calls:
            _, _, done, _, _ = env.step(call)
            if done:  # the environment's tool-call bound ended the turn
                break
        if not done:
            env.step(reply(turn.reply) if turn.reply else end_turn())
        trace: EpisodeTrace | None = env.unwrapped.trace  # type: ignore[attr-defined]
        assert trace is not None
        record = self._labeller.label_now(trace)
        label = None if record.error else record.result.outcome
        return GradedTurn(episode_id=episode.id, turn=turn, called=record.turn.called_tools, label=label,
                          error=record.error)


def _canonical(completion: Any) -> str:
    """A completion as text that two equal completions share (the label cache's key)."""
    try:
        return json.dumps(completion, sort_keys=True, default=repr, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return repr(completion)


_DEFAULT: FollowupTurnGrader | None = None


def default_grader() -> FollowupTurnGrader:
    """The grader the module-level reward functions share (built on first use)."""
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = FollowupTurnGrader()
    return _DEFAULT
