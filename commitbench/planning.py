"""What a config plays: its players, its cells, the plan of ``run --dry-run``, and the suite of a run directory.

A *cell* is (player, intervention arm, episode, sample); its run key is
:func:`commitbench.identity.run_key`. Expansion is deterministic (player, arm, episode, sample, in
config order), so every process that expands a config (a resumed run, a shard, a Ray worker, a
merge) finds the same cells.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from commitbench import identity
from commitbench.agents.base import Agent
from commitbench.agents.chat import RENDER_HASH, chat_identity
from commitbench.agents.custom import custom_identity, is_agent_path, load_agent_class, new_agent
from commitbench.agents.local_model import DEFAULT_ALIAS
from commitbench.config import CHAT_AGENT, ExperimentConfig, InterventionArm, JudgeConfig
from commitbench.modelentry import ModelEntry
from commitbench.oracles.registry import check_intervention
from commitbench.runcells import CellFacts, scan_trace_file
from commitbench.rundir import MANIFEST_FILE, RunManifest, read_manifest, redacted_json
from commitbench.suites import AnySuite, get_suite, suite_for_env
from commitbench.traces import TRACES_FILE, AgentIdentity, iter_traces

__all__ = [
    "MAX_CELLS",
    "Cell",
    "EpisodeSetMismatchError",
    "PlanRow",
    "Player",
    "PlayerKind",
    "RunPlan",
    "arm_services",
    "cell_facts",
    "check_episode_set",
    "config_of_manifest",
    "count_cells",
    "episode_set_version",
    "expand_cells",
    "experiment_cells",
    "manifest_config",
    "plan",
    "players",
    "prompt_hashes",
    "run_suite",
    "select_config_episodes",
    "service_identities",
    "stored_judge",
]

# Cells of one experiment, at most: planning 993,600 took 12 s and 274 MiB here (docs/runner.md).
MAX_CELLS = 1_000_000


class PlayerKind:
    """Who a player is (the ``kind`` of its identity)."""

    REFERENCE = "reference"  # a suite's reference agent: deterministic, played once per episode
    CHAT = "chat"  # the chat agent on one of the config's models
    CUSTOM = "custom"  # a class of the user's own (module:Class)


@dataclass(frozen=True)
class Player:
    """Who plays a cell: a reference agent, the chat agent on one model, or a class of the user's own."""

    name: str
    kind: str  # a PlayerKind
    identity: AgentIdentity
    model: ModelEntry | None = None
    privileged: bool = False  # plays through the privileged channel (reference agents read the script)
    # Makes a fresh agent per cell (not for chat: the cell player builds it on the model's client).
    factory: Callable[[], Agent] | None = field(default=None, compare=False)
    repeats: int = 1  # samples of each episode (the config's samples for players that are not deterministic)


@dataclass(frozen=True)
class Cell:
    """One unit of work: a player plays an episode under an intervention arm (sample k)."""

    run_key: str
    player: Player
    arm: InterventionArm
    episode_id: str
    sample: int


def arm_services(arm: InterventionArm) -> tuple[str, ...]:
    """The harness services the arm's interventions use (from their registry entries), in order, once each."""
    names: list[str] = []
    for spec in arm.stack:
        names.extend(n for n in check_intervention(spec.name).services if n not in names)
    return tuple(names)


def service_identities(config: ExperimentConfig, arm: InterventionArm) -> dict[str, Any]:
    """The identity of each service the arm uses, under the config's judge (what enters the run key)."""
    return {name: config.suite.service_identity(name, config.judge) for name in arm_services(arm)}


def players(config: ExperimentConfig) -> list[Player]:
    """The config's players in its order: the chat agent on each model where ``chat`` stands, reference
    agents and classes of the user's own by name."""
    suite = config.suite
    out: list[Player] = []
    for name in config.agents:
        if name == CHAT_AGENT:
            for entry in config.models:
                agent_name = f"chat:{entry.name}"
                settings = entry.model_settings(local_alias=DEFAULT_ALIAS)
                agent_identity = chat_identity(agent_name, settings, config.calls_per_turn, entry.chat_protocol(),
                                               suite.closing_call_without_tools)
                out.append(Player(name=agent_name, kind=PlayerKind.CHAT, identity=agent_identity, model=entry,
                                  repeats=config.samples))
        elif is_agent_path(name):
            cls = load_agent_class(name)
            out.append(Player(
                name=name, kind=PlayerKind.CUSTOM, identity=custom_identity(name, cls),
                privileged=bool(getattr(cls, "privileged", False)), factory=_factory(name, cls),
                repeats=config.samples,
            ))
        else:
            make = suite.reference_agents[name]
            agent = make()
            out.append(Player(name=name, kind=PlayerKind.REFERENCE, identity=agent.identity(),
                              privileged=bool(getattr(agent, "privileged", False)), factory=make))
    return out


def _factory(name: str, cls: type[Any]) -> Callable[[], Agent]:
    return lambda: new_agent(name, cls)


def select_config_episodes(config: ExperimentConfig) -> list[Any]:
    """The episodes a config selects, in a fixed order; raises ValueError naming a bad filter value."""
    return list(config.suite.select(config.episodes))


def count_cells(config: ExperimentConfig, episodes: Sequence[Any], roster: Sequence[Player] | None = None) -> int:
    """How many cells the config expands to; ValueError when more than :data:`MAX_CELLS`."""
    roster = players(config) if roster is None else roster
    count = sum(p.repeats for p in roster) * len(episodes) * len(config.interventions)
    if count > MAX_CELLS:
        raise ValueError(
            f"the config plans {count:,} cells ({len(episodes):,} episodes x {len(config.interventions)} arms x "
            f"players and samples), more than the {MAX_CELLS:,} one run directory takes; select fewer episodes "
            "(episodes: limit, a filter), samples or arms, or split the experiment into several configs"
        )
    return count


def expand_cells(config: ExperimentConfig, episodes: Sequence[Any]) -> list[Cell]:
    """Every cell of the config, in a fixed order (player, arm, episode, sample); ValueError past :data:`MAX_CELLS`."""
    roster = players(config)
    count_cells(config, episodes, roster)
    cells: list[Cell] = []
    for player in roster:
        for arm in config.interventions:
            services = service_identities(config, arm)
            stack = arm.identity()
            for episode in episodes:
                for sample in range(player.repeats):
                    key = identity.run_key(player.identity, stack, config.env, episode.id, sample, services,
                                           texts=config.texts.sha256 if config.texts else None)
                    cells.append(Cell(key, player, arm, episode.id, sample))
    return cells


def cell_facts(config: ExperimentConfig, cells: Sequence[Cell]) -> dict[str, CellFacts]:
    """run key -> what a trace of that cell says about itself (see :mod:`commitbench.runcells`)."""
    agents: dict[str, dict[str, Any]] = {}
    facts: dict[str, CellFacts] = {}
    for cell in cells:
        agent = agents.get(cell.player.name)
        if agent is None:
            agent = agents[cell.player.name] = cell.player.identity.model_dump(mode="json")
        facts[cell.run_key] = CellFacts(config.env, cell.episode_id, cell.sample, tuple(cell.arm.names()), agent)
    return facts


def config_of_manifest(data: dict[str, Any]) -> ExperimentConfig:
    """The experiment config a manifest records (its cache file is the directory's own: the path is dropped)."""
    return ExperimentConfig.model_validate({**data, "cache": {**(data.get("cache") or {}), "path": None}})


def experiment_cells(manifest: RunManifest, skip_config: bool = False) -> dict[str, CellFacts]:
    """The cells a run directory holds traces of: its config's, and those of the configs ``--force`` replaced
    (``skip_config``: the earlier configs' only)."""
    facts: dict[str, CellFacts] = {}
    for data in ([] if skip_config else [manifest.config]) + list(manifest.earlier_configs):
        config = config_of_manifest(data)
        facts.update(cell_facts(config, expand_cells(config, select_config_episodes(config))))
    return facts


def manifest_config(config: ExperimentConfig) -> dict[str, Any]:
    """The config as a manifest records it: validated, as JSON, the user-info of every URL replaced
    (hash it with :func:`commitbench.identity.config_hash`)."""
    data: dict[str, Any] = redacted_json(config.model_dump(mode="json"))
    if data.get("texts") is None:  # a run without a texts file keeps the config hash it always had
        data.pop("texts", None)
    return data


def stored_judge(suite: AnySuite, judge: JudgeConfig) -> str:
    """The name a judge's labels are stored under: the suite's offline labeller, or ``llm:<served model>``
    (:func:`commitbench.identity.stored_judge_name`)."""
    model = judge.model if judge.kind == "llm" else None
    served = model.served_model(DEFAULT_ALIAS) if model is not None else None
    return identity.stored_judge_name(suite.offline_labeller, served)


class PlanRow(BaseModel):
    """What one player plays under one intervention arm."""

    player: str = Field(description="Reference agent, chat:<model>, or module:Class.")
    arm: str = Field(description="Intervention arm label.")
    cells: int = Field(description="Cells (episodes x samples).")
    model_calls: int = Field(description="Model calls at least (one per turn; tool rounds add more).")


class RunPlan(BaseModel):
    """What ``commitbench run CONFIG`` would play, computed without contacting any server."""

    name: str = Field(description="Experiment name.")
    suite: str = Field(description="The suite.")
    env: str = Field(description="Its environment id.")
    episodes: int = Field(description="Episodes selected.")
    samples: int = Field(description="Samples per chat cell.")
    rows: list[PlanRow] = Field(description="Per player x arm.")
    cells: int = Field(description="Cells in all.")
    model_calls: int = Field(description="Model calls at least, in all (the harness's models only).")
    judge: str = Field(description="Who labels the run afterwards.")
    episode_set_version: str | None = Field(default=None, description="Version of the suite's episode set.")
    warnings: list[str] = Field(default_factory=list, description="What the config's author should know.")

    def text(self, out_dir: Path) -> str:
        """The plan as ``run --dry-run`` prints it."""
        version = f" (episode set version {self.episode_set_version})" if self.episode_set_version else ""
        lines = [
            f"{self.name}: suite {self.suite} ({self.env}), {self.episodes} episodes{version}, "
            f"{self.samples} sample(s) per chat cell",
            f"{'player':<32} {'arm':<40} {'cells':>8} {'calls >=':>10}",
        ]
        lines.extend(f"{r.player:<32} {r.arm:<40} {r.cells:>8} {r.model_calls:>10}" for r in self.rows)
        lines.append(f"{'in all':<73} {self.cells:>8} {self.model_calls:>10}")
        lines.append(f"judge: {self.judge}; run directory: {out_dir} (nothing was played: --dry-run)")
        lines.extend(f"warning: {w}" for w in self.warnings)
        return "\n".join(lines)


def plan(config: ExperimentConfig) -> RunPlan:
    """The cells a config expands to and a lower bound on its model calls; no server is contacted."""
    suite = config.suite
    episodes = select_config_episodes(config)
    roster = players(config)
    count_cells(config, episodes, roster)
    turns = sum(suite.calls_per_episode(e) for e in episodes)
    rows = []
    for player in roster:
        for arm in config.interventions:
            calls = turns * player.repeats if player.kind == PlayerKind.CHAT else 0
            rows.append(PlanRow(player=player.name, arm=arm.label(), cells=len(episodes) * player.repeats,
                                model_calls=calls))
    return RunPlan(
        name=config.name, suite=suite.name, env=config.env, episodes=len(episodes), samples=config.samples, rows=rows,
        cells=sum(r.cells for r in rows), model_calls=sum(r.model_calls for r in rows),
        judge=stored_judge(suite, config.judge),
        episode_set_version=episode_set_version(suite, config.episodes), warnings=config.warnings(),
    )


def prompt_hashes(config: ExperimentConfig) -> dict[str, str]:
    """Hashes of everything that writes text the agents see: the suite's data and the chat rendering."""
    return {**config.suite.prompt_hashes(config.episodes), "chat_render": RENDER_HASH}


class EpisodeSetMismatchError(ValueError):
    """A run directory was played on another version of its suite's episode set than this checkout compiles."""


def episode_set_version(suite: AnySuite, selection: BaseModel) -> str | None:
    """The version of the episode set a suite's filter compiles to (None: the suite has no versions)."""
    return suite.episode_set_version(selection) if suite.episode_set_version is not None else None


def check_episode_set(suite: AnySuite, recorded: str | None, run_dir: Path, selection: BaseModel) -> None:
    """Refuse a run directory whose episode-set version differs from the one this checkout compiles."""
    current = episode_set_version(suite, selection)
    if current is None or recorded == current:
        return
    made = f"version {recorded}" if recorded else "a version from before versions were recorded"
    raise EpisodeSetMismatchError(
        f"{run_dir} was played on {made} of the {suite.name} episode set; this checkout compiles version {current}. "
        "Episode texts and ids differ between versions, so their runs cannot be mixed or read together: start a "
        "new run directory, or read this one with the version of commitbench that made it"
    )


def run_suite(run_dir: Path | str) -> AnySuite:
    """The suite of a run directory: from its manifest (whose episode-set version must be this checkout's,
    and whose every trace line must be a trace of one of its cells: :mod:`commitbench.runcells`), else from
    the environment of its first trace."""
    run_dir = Path(run_dir)
    manifest = read_manifest(run_dir)
    if manifest is not None:
        suite = get_suite(manifest.suite)
        selection = suite.selection.model_validate(manifest.config.get("episodes") or {})
        check_episode_set(suite, manifest.episode_set_version, run_dir, selection)
        # Every line must be a trace of a cell of the run's experiment (the rule 'run' and 'merge' apply).
        scan_trace_file(run_dir / TRACES_FILE, experiment_cells(manifest))
        return suite
    path = run_dir / TRACES_FILE
    if not path.exists():
        raise FileNotFoundError(f"{run_dir} holds neither {MANIFEST_FILE} nor {TRACES_FILE}; is it a run directory?")
    for trace in iter_traces(path):
        return suite_for_env(trace.env_id)
    raise ValueError(f"{path} holds no trace, so the run's suite is unknown")
