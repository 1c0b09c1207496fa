"""The solver: one inspect sample plays one cell of the suite, exactly as ``commitbench run`` plays it.

A :class:`TaskPlan` holds what a task selected (the suite, its episodes, its filter and settings). For
the model inspect runs and the eval's epoch count (the config's ``samples``: epoch *k* plays sample *k-1*),
it builds the experiment config ``commitbench run SUITE --agent chat`` would build
(:func:`commitbench.inspecteval.params.experiment_config`) and expands it into cells with
:func:`commitbench.planning.expand_cells`, so a sample's run key is the cell's. The eval's epoch count
comes from :mod:`commitbench.inspecteval.evalrun` (``--epochs N``, else the task's own count, ``-T
samples``); before the first sample plays, once per eval, the solver refuses a ``-T samples`` that differs
from ``--epochs`` and probes the grader, when the eval names one (:mod:`commitbench.inspecteval.grader`).
The solver then plays the cell with the runner's own :class:`commitbench.cellplayer.CellPlayer`: the
suite's environment over the episode, wrapped with the arm's interventions from the one registry
(``CellPlayer.make_env``), the suite's chat agent, and the one play loop (``CellPlayer.play``). The only
difference is the agent's client: :class:`commitbench.inspecteval.client.InspectModelClient`, which asks
inspect's model.

The finished trace goes into the sample's store under :data:`TRACE_KEY` (the scorer labels it, and it
keeps the log readable as the trace ``commitbench run`` would write), the config the cell belongs to
under :data:`CONFIG_KEY` (as a run manifest records it: :mod:`commitbench.inspecteval.logs` makes a run
directory of a log from the two), and the episode becomes the sample's messages.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import gymnasium as gym
from inspect_ai.model import CachePolicy, Model, ModelOutput, get_model
from inspect_ai.solver import Generate, Solver, TaskState, solver

from commitbench.cellplayer import CellPlayer
from commitbench.config import ExperimentConfig
from commitbench.inspecteval.client import InspectModelClient
from commitbench.inspecteval.evalrun import EvalCheckError, eval_run
from commitbench.inspecteval.grader import probe_grader
from commitbench.inspecteval.params import TaskSettings, experiment_config
from commitbench.inspecteval.transcript import ToolEventRecorder, trace_messages
from commitbench.llm import ModelClient
from commitbench.modelentry import GenerationSettings, ModelEntry
from commitbench.planning import Cell, expand_cells, manifest_config
from commitbench.suites import AnySuite
from commitbench.traces import EpisodeTrace

__all__ = [
    "CONFIG_KEY", "TRACE_KEY", "InspectCellPlayer", "TaskPlan", "check_eval", "model_entry_of", "play_cell",
    "play_episode",
]

# The sample store's key of the episode's trace (EpisodeTrace as JSON).
TRACE_KEY = "commitbench_trace"
# The sample store's key of the experiment config the cell belongs to (as a manifest records it).
CONFIG_KEY = "commitbench_config"
# The URL a model entry records for inspect's model: never called (the URL is no part of the identity).
INSPECT_URL = "http://inspect.invalid/v1"


def model_entry_of(model: Model) -> ModelEntry:
    """The config entry of inspect's model: its name and the generation settings inspect sends it (those that
    are part of a run's identity: temperature, top_p, max_tokens, seed, reasoning effort)."""
    config = model.config
    label = re.sub(r"[^A-Za-z0-9._-]+", "-", model.name).strip("-.") or "model"
    generation = GenerationSettings(
        model=model.name, temperature=config.temperature, top_p=config.top_p, max_tokens=config.max_tokens,
        seed=config.seed, reasoning_effort=config.reasoning_effort,
    )
    return ModelEntry(name=label, base_url=INSPECT_URL, api_key_env=None, settings=generation)


class InspectCellPlayer(CellPlayer):
    """The runner's cell player whose chat agents ask inspect's model (no HTTP client, no project cache)."""

    def __init__(self, config: ExperimentConfig, client: InspectModelClient) -> None:
        super().__init__(config)
        self.inspect_client = client

    def client_for(self, model: str, worker: int) -> ModelClient:
        # The chat agent reads only ``settings`` and ``complete`` of its client: the inspect client has both.
        return cast(ModelClient, self.inspect_client)


@dataclass
class TaskPlan:
    """What a task plays: the suite, the episodes its filter selected, the filter and the settings."""

    suite: AnySuite
    task_name: str
    episodes: Sequence[Any]
    filters: Mapping[str, Any]
    settings: TaskSettings
    _cells: dict[tuple[str, int], tuple[ExperimentConfig, dict[tuple[str, int], Cell]]] = field(
        default_factory=dict)

    def __post_init__(self) -> None:
        self.by_id = {episode.id: episode for episode in self.episodes}

    def samples_for(self, epochs: int) -> int:
        """The config's samples for an eval of ``epochs`` epochs; :class:`EvalCheckError` when ``-T samples``
        names another count."""
        given = self.settings.samples
        if given is not None and given != epochs:
            raise EvalCheckError(
                f"the task parameter samples={given} and the eval's {epochs} epochs (--epochs {epochs}) disagree; a "
                "config's samples are the eval's epochs, so give one of -T samples=N and --epochs N (or both the "
                "same N). No sample was played")
        return epochs

    def config_and_cells(self, entry: ModelEntry, samples: int
                         ) -> tuple[ExperimentConfig, dict[tuple[str, int], Cell]]:
        """The config for a model and a number of samples, and its cells by (episode id, sample), made once each."""
        key = (entry.model_dump_json(), samples)
        known = self._cells.get(key)
        if known is None:
            config = experiment_config(self.suite, self.filters, self.settings, entry, self.task_name, samples)
            cells = {(cell.episode_id, cell.sample): cell for cell in expand_cells(config, self.episodes)}
            known = self._cells[key] = (config, cells)
        return known

    def cache_policy(self) -> CachePolicy | None:
        return CachePolicy(expiry=None) if self.settings.cache else None


async def play_cell(plan: TaskPlan, episode_id: str, sample: int, samples: int) -> EpisodeTrace:
    """Play one cell (``sample`` of ``samples``) with inspect's active model; the trace records it (a failure as
    its infrastructure error)."""
    model = get_model()
    entry = model_entry_of(model)
    config, cells = plan.config_and_cells(entry, samples)
    cell = cells.get((episode_id, sample))
    if cell is None:
        raise ValueError(f"episode {episode_id} sample {sample} is no cell of this task ({samples} samples of "
                         f"{len(plan.episodes)} episodes)")
    client = InspectModelClient(entry.model_settings(), cache=plan.cache_policy())
    player = InspectCellPlayer(config, client)
    env: gym.Env[Any, Any] = ToolEventRecorder(player.make_env(cell, (plan.by_id[episode_id],)))
    try:
        return await player.play(cell, env)
    finally:
        env.close()


def _last_reply(trace: EpisodeTrace) -> str:
    replies = [turn.reply for turn in trace.turns if turn.reply]
    return replies[-1] if replies else ""


async def check_eval(plan: TaskPlan, epochs: int) -> None:
    """What is checked once per eval before any sample plays: ``-T samples`` against the eval's epochs, and that
    the grader, when the eval names one, answers (:func:`commitbench.inspecteval.grader.probe_grader`)."""
    plan.samples_for(epochs)
    await probe_grader()


@solver
def play_episode(plan: TaskPlan) -> Solver:
    """Play the sample's episode (``metadata['episode_id']``) for the sample's epoch (epoch k is sample k-1)."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        run = eval_run(state.uuid)
        await run.once(lambda: check_eval(plan, run.epochs))
        samples = plan.samples_for(run.epochs)
        trace = await play_cell(plan, str(state.metadata["episode_id"]), state.epoch - 1, samples)
        config, _ = plan.config_and_cells(model_entry_of(get_model()), samples)
        state.store.set(TRACE_KEY, trace.model_dump(mode="json"))
        state.store.set(CONFIG_KEY, manifest_config(config))
        state.messages = trace_messages(trace)
        state.output = ModelOutput.from_content(model=str(get_model()), content=_last_reply(trace))
        if trace.infra_error:
            raise RuntimeError(f"the episode could not be played: {trace.infra_error}")
        return state

    return solve
