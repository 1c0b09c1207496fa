"""Both suites as environments of the ``verifiers`` library (0.4, its ``verifiers.v1`` stack).

A verifiers environment is a *taskset* (the tasks and how each rollout is scored) played by a *harness* (the
program whose model calls the library intercepts and records for training). Here:

* a task is one episode of the suite's selection (:class:`EpisodeData`: the suite, the episode id, the
  profile, the intervention arm, the language);
* :class:`CommitbenchHarness` plays it in process, through the runner, with the suite's own chat agent, env
  and wrappers (:func:`commitbench.rl.evaluate.evaluate`), every model call sent to the endpoint verifiers
  hands it (its interception server) with the rollout's token; it leaves the graded reward in the trace's
  ``info["commitbench"]``;
* the task's rewards are the suite's named terms (:mod:`commitbench.rl.rewards`), one verifiers reward each,
  weighted as :class:`~commitbench.rl.rewards.StandingWeights` and
  :class:`~commitbench.rl.rewards.FollowupWeights` say; the weighted sum is the rollout's reward, and the
  strict score (standing) or the checker's right answer (follow-up) is the term of weight 1.

``commitbench_standing`` and ``commitbench_followup`` are the installable environment modules verifiers finds
by id (``vf-eval commitbench-standing ...``); :func:`load_environment` builds the same environment in Python.
This module needs the ``verifiers`` extra (docs/rl.md, "verifiers").
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

try:
    import verifiers.v1 as vf
except ImportError as exc:  # pragma: no cover - the message is the point
    raise ImportError(
        "commitbench.rl.verifiers needs the verifiers library: pip install 'commitbench[verifiers]' in a virtual "
        "environment of its own (docs/rl.md, 'verifiers')"
    ) from exc
from pydantic import Field

from commitbench.identity import arm_label
from commitbench.oracles.standing.parties import LIVE_NAME as LIVE_PARTIES
from commitbench.rl.evaluate import SUITE_ENVS, PartyModel, evaluate
from commitbench.rl.rewards import FollowupTerm, FollowupWeights, StandingTerm, StandingWeights
from commitbench.suites import get_suite

__all__ = [
    "CommitbenchEnv",
    "CommitbenchEnvConfig",
    "CommitbenchHarness",
    "CommitbenchHarnessConfig",
    "EpisodeData",
    "FollowupTask",
    "FollowupTaskset",
    "FollowupTasksetConfig",
    "StandingTask",
    "StandingTaskset",
    "StandingTasksetConfig",
    "load_environment",
]

INFO_KEY = "commitbench"
_STANDING = StandingWeights()
_FOLLOWUP = FollowupWeights()


class EpisodeData(vf.TaskData):
    """One episode of a suite, as a verifiers task's data (recorded on every trace)."""

    suite: str = Field(description="The suite: 'standing' or 'followup'.")
    episode_id: str = Field(description="The episode's id in the suite's episode set.")
    profile: str = Field(default="commitbench", description="The suite's profile: 'commitbench' or 'paper'.")
    interventions: list[str] = Field(
        default_factory=list, description="The intervention arm played, innermost first (names as in a config)."
    )
    language: str | None = Field(default=None, description="The episode's language (standing; None: English).")
    factors: dict[str, Any] = Field(default_factory=dict, description="The episode's design factors (its cell, ...).")
    parties: PartyModel | None = Field(
        default=None, description="Live parties: the model that voices the people (standing; None: the script's words)."
    )


    def task_key(self) -> str:
        """The task's durable identity: suite, episode and the arm it is played under (as the runner labels it)."""
        arm = [*self.interventions, *([LIVE_PARTIES] if self.parties is not None else [])]
        return f"{self.suite}:{self.episode_id}:{arm_label(arm)}"


def _graded_term(trace: vf.Trace, term: str) -> float:
    """The value of one reward term the harness graded (0.0 when the rollout left no grade: a failed play)."""
    graded = trace.info.get(INFO_KEY)
    if not isinstance(graded, Mapping):
        return 0.0
    terms = graded.get("reward", {}).get("terms", {})
    value = terms.get(term, 0.0)
    return float(value) if isinstance(value, int | float) else 0.0


def _term_reward(term: str, weight: float) -> Any:
    """A verifiers reward method returning one graded term, with its default weight."""

    async def score(self: vf.Task, trace: vf.Trace) -> float:
        return _graded_term(trace, term)

    score.__name__ = term
    score.__qualname__ = term
    score.__doc__ = f"The graded term {term!r} of the episode (weight {weight:g} by default)."
    return vf.reward(score, weight=weight)


class StandingTask(vf.Task[EpisodeData]):
    """A standing episode: its rewards are the standing terms (the strict score is the headline, weight 1)."""

    strict = _term_reward(StandingTerm.STRICT.value, _STANDING.strict)
    outcome = _term_reward(StandingTerm.OUTCOME.value, _STANDING.outcome)
    communication = _term_reward(StandingTerm.COMMUNICATION.value, _STANDING.communication)
    override = _term_reward(StandingTerm.OVERRIDE.value, _STANDING.override)
    unauthorized_release = _term_reward(StandingTerm.UNAUTHORIZED_RELEASE.value, _STANDING.unauthorized_release)
    extra_creditor_messages = _term_reward(
        StandingTerm.EXTRA_CREDITOR_MESSAGES.value, _STANDING.extra_creditor_messages
    )

    @property
    def key(self) -> str:
        return self.data.task_key()


class FollowupTask(vf.Task[EpisodeData]):
    """A follow-up episode: its rewards are the checker's label terms (its right answer is the headline)."""

    correct = _term_reward(FollowupTerm.CORRECT.value, _FOLLOWUP.correct)
    false_claim = _term_reward(FollowupTerm.FALSE_CLAIM.value, _FOLLOWUP.false_claim)
    empty = _term_reward(FollowupTerm.EMPTY.value, _FOLLOWUP.empty)
    unanchored = _term_reward(FollowupTerm.UNANCHORED.value, _FOLLOWUP.unanchored)
    over_refusal = _term_reward(FollowupTerm.OVER_REFUSAL.value, _FOLLOWUP.over_refusal)

    @property
    def key(self) -> str:
        return self.data.task_key()


class _SuiteTasksetConfig(vf.TasksetConfig):
    """Which episodes of the suite become tasks (``--env.taskset.*``)."""

    split: str | None = Field(default="test", description="The split to play (None: every split).")
    filters: dict[str, Any] = Field(
        default_factory=dict,
        description="More of the suite's episode filter, as in a config's 'episodes' (e.g. {'cells': [...]}).",
    )
    profile: str = Field(default="commitbench", description="The suite's profile: 'commitbench' or 'paper'.")
    interventions: list[str] = Field(
        default_factory=list, description="One intervention arm, innermost first (e.g. ['ledger', 'policy'])."
    )


class StandingTasksetConfig(_SuiteTasksetConfig):
    """The standing suite's tasks."""

    language: str | None = Field(default=None, description="'en', 'tr' (None: English).")
    parties: PartyModel | None = Field(
        default=None,
        description="Play with live parties voiced by this model, checked by it or the checker it names "
        "(docs/live-parties.md); never the policy's endpoint. None: the scripted parties.",
    )


class FollowupTasksetConfig(_SuiteTasksetConfig):
    """The follow-up suite's tasks."""


def _episodes(suite_name: str, config: _SuiteTasksetConfig, language: str | None = None) -> list[Any]:
    """The episodes the config selects, one per id (the suite's own filter: a bad field is a clear error)."""
    suite = get_suite(suite_name)
    filters: dict[str, Any] = {**config.filters, "split": config.split, "profile": config.profile}
    if language is not None:
        filters["language"] = language
    selection = suite.selection.model_validate(filters)
    return list({str(e.id): e for e in reversed(suite.select(selection))}.values())[::-1]


def _data(suite: str, episode: Any, config: _SuiteTasksetConfig, language: str | None = None,
          parties: PartyModel | None = None) -> EpisodeData:
    """A task's data: the episode, and the arm and profile it is played under. The prompt only names the episode
    (as the inspect tasks' inputs do): the harness plays it from the environment's own opening."""
    factors = episode.factors() if callable(getattr(episode, "factors", None)) else {}
    return EpisodeData(
        id=str(episode.id), name=str(episode.id), prompt=f"{suite} episode {episode.id}", suite=suite,
        episode_id=str(episode.id), profile=config.profile, interventions=list(config.interventions),
        language=language, factors={str(k): v for k, v in factors.items()}, parties=parties,
    )


class StandingTaskset(vf.Taskset[StandingTask, StandingTasksetConfig]):
    """The standing suite's episodes as tasks."""

    SUITE: ClassVar[str] = "standing"

    def load(self) -> Iterable[StandingTask]:
        for episode in _episodes(self.SUITE, self.config, self.config.language):
            data = _data(self.SUITE, episode, self.config, self.config.language, self.config.parties)
            yield StandingTask(data, self.config.task)


class FollowupTaskset(vf.Taskset[FollowupTask, FollowupTasksetConfig]):
    """The follow-up suite's episodes as tasks."""

    SUITE: ClassVar[str] = "followup"

    def load(self) -> Iterable[FollowupTask]:
        for episode in _episodes(self.SUITE, self.config):
            yield FollowupTask(_data(self.SUITE, episode, self.config), self.config.task)


class CommitbenchHarnessConfig(vf.HarnessConfig):
    """How the harness plays a rollout."""

    timeout_s: float = Field(default=600.0, gt=0, description="A rollout that plays longer than this fails.")


class CommitbenchHarness(vf.Harness[CommitbenchHarnessConfig]):
    """Plays one episode in process through commitbench's runner, the suite's chat agent calling the model at
    the endpoint verifiers gives (so every call is intercepted and recorded), and grades it."""

    APPENDS_SYSTEM_PROMPT = True
    EXECUTES_CODE = False
    NEEDS_CONTAINER = False

    async def launch(
        self,
        ctx: vf.ModelContext,
        trace: vf.Trace,
        runtime: vf.Runtime,
        endpoint: str,
        secret: str,
        mcp_urls: dict[str, str],
        data: vf.TaskData,
    ) -> vf.ProgramResult:
        if not isinstance(data, EpisodeData):
            data = EpisodeData.model_validate(data.model_dump())
        settings = {k: v for k, v in ctx.sampling.model_dump().items() if v is not None}
        # The rollout's token reaches the model client as its API key, through a variable of this rollout's own.
        key_env = f"COMMITBENCH_VERIFIERS_KEY_{trace.id}"
        os.environ[key_env] = secret
        try:
            rewards = await asyncio.wait_for(
                asyncio.to_thread(_play, data, endpoint, ctx.model, key_env, settings), self.config.timeout_s
            )
        except Exception as exc:  # the rollout fails alone, with the reason
            return vf.ProgramResult(exit_code=1, stdout="", stderr=f"{type(exc).__name__}: {exc}"[-4000:])
        finally:
            os.environ.pop(key_env, None)
        trace.info[INFO_KEY] = rewards
        return vf.ProgramResult(exit_code=0, stdout="", stderr="")


class CommitbenchEnvConfig(vf.EnvConfig):
    """The environment's one seat, the policy under evaluation or training. Its runtime defaults to a local
    subprocess box: the harness plays in process and needs no sandbox (verifiers' own default is a remote one)."""

    agent: vf.AgentConfig = vf.AgentConfig(runtime=vf.SubprocessConfig())


class CommitbenchEnv(vf.Env[CommitbenchEnvConfig]):
    """One seat playing the suite's taskset (verifiers' single-agent shape, with a local runtime by default)."""

    async def run(self, task: vf.Task, agents: vf.Agents) -> None:
        await agents.agent.run(task)


def _play(data: EpisodeData, endpoint: str, model: str, key_env: str, settings: Mapping[str, Any]) -> dict[str, Any]:
    """Play and grade one episode; its reward as JSON."""
    episodes: dict[str, Any] = {"ids": [data.episode_id], "split": None}
    if data.language is not None:
        episodes["language"] = data.language
    played = evaluate(endpoint, model, suite=data.suite, episodes=episodes, profile=data.profile,
                      api_key_env=key_env, settings=settings, concurrency=1, interventions=data.interventions,
                      parties=data.parties)
    if len(played) != 1:
        raise RuntimeError(f"expected one graded run of episode {data.episode_id}, got {len(played)}")
    return played[0].model_dump(mode="json")


def load_environment(
    suite: str = "standing",
    split: str | None = "test",
    cells: Sequence[str] | None = None,
    profile: str = "commitbench",
    interventions: Sequence[str] = (),
    filters: Mapping[str, Any] | None = None,
    language: str | None = None,
    parties: PartyModel | None = None,
) -> vf.Env:
    """The verifiers environment of a suite: its taskset over the selected episodes, played by
    :class:`CommitbenchHarness`. ``cells`` selects standing cells (the follow-up suite's setups go in
    ``filters``, e.g. ``{"setups": ["C2"]}``); ``parties`` plays the standing episodes with live parties."""
    if suite not in SUITE_ENVS:
        raise ValueError(f"unknown suite {suite!r}; known: {', '.join(SUITE_ENVS)}")
    chosen = dict(filters or {})
    if cells is not None:
        if suite != "standing":
            raise ValueError("cells select standing episodes; the follow-up suite's setups go in filters")
        chosen["cells"] = list(cells)
    taskset: dict[str, Any] = {"id": f"commitbench-{suite}", "split": split, "profile": profile,
                               "interventions": list(interventions), "filters": chosen}
    if language is not None:
        if suite != "standing":
            raise ValueError("only the standing suite has languages")
        taskset["language"] = language
    if parties is not None:
        if suite != "standing":
            raise ValueError("live parties are played on the standing suite only")
        taskset["parties"] = parties.model_dump()
    config = vf.resolve_env_config({"taskset": taskset})
    return vf.load_environment(config)
