"""What a config plays: its players, its cells and their table, and the plan of ``run --dry-run``.

A *cell* is (player, intervention arm, episode, sample); its run key is
:func:`commitbench.identity.run_key`. Expansion is deterministic (player, arm, episode, sample, in
config order), so every process that expands a config (a resumed run, a shard, a Ray worker) finds the
same cells. Only playing expands a config: a run writes its cells into the directory's cell table
(:func:`cell_table`, :mod:`commitbench.rundir.cells`), and every verb that reads a finished run reads
that (:mod:`commitbench.rundir.reader`), without importing a player.
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
from commitbench.agents.custom import (
    custom_identity,
    is_agent_path,
    load_agent_class,
    model_player_identity,
    new_agent,
    uses_harness_model,
)
from commitbench.agents.local_model import DEFAULT_ALIAS
from commitbench.agents.registry import find_agent
from commitbench.config import CHAT_AGENT, ExperimentConfig, InterventionArm, JudgeConfig
from commitbench.modelentry import ModelEntry
from commitbench.oracles.registry import check_intervention
from commitbench.oracles.standing.parties import LIVE_NAME, PARTIES_SERVICE, PartyBudget, party_calls_at_least
from commitbench.rundir import redacted_json
from commitbench.rundir.cells import CellGroup, CellTable
from commitbench.suites import AnySuite
from commitbench.traces import AgentIdentity

__all__ = [
    "MAX_CELLS",
    "Cell",
    "PlanRow",
    "Player",
    "PlayerKind",
    "RunPlan",
    "arm_services",
    "cell_table",
    "count_cells",
    "expand_cells",
    "judge_serves",
    "manifest_config",
    "plan",
    "players",
    "prompt_hashes",
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
    model: ModelEntry | None = None  # the chat agent's model, or the model a player of the user's own calls
    privileged: bool = False  # plays through the privileged channel (reference agents read the script)
    # Makes a fresh agent per cell (not for chat: the cell player builds it on the model's client). A player
    # of the user's own that calls the harness's model (uses_model) is made with its HarnessModel.
    factory: Callable[..., Agent] | None = field(default=None, compare=False)
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


def judge_serves(config: ExperimentConfig, arms: Sequence[InterventionArm]) -> bool:
    """Whether the config's LLM judge serves the interventions of these arms while cells play (the rewrite fix's
    flagger, the live parties' check): every process that plays them builds its client."""
    return config.judge.kind == "llm" and any(arm_services(arm) for arm in arms)


def service_identities(config: ExperimentConfig, arm: InterventionArm) -> dict[str, Any]:
    """The identity of each service the arm uses, under the config's judge (what enters the run key); the live
    parties' service adds the party model's identity and the budget, which the config alone knows."""
    found = {name: config.suite.service_identity(name, config.judge) for name in arm_services(arm)}
    party = config.party_entry()
    if PARTIES_SERVICE in found and party is not None:
        found[PARTIES_SERVICE] = {**found[PARTIES_SERVICE],
                                  "party_model": party.model_settings(local_alias=DEFAULT_ALIAS).identity(),
                                  "budget": config.party_budget.model_dump(mode="json")}
    return found


def players(config: ExperimentConfig) -> list[Player]:
    """The config's players in its order: the chat agent on each model where ``chat`` stands, reference
    agents and classes of the user's own by name."""
    suite = config.suite
    out: list[Player] = []
    for name in config.agents:
        if name == CHAT_AGENT:
            for entry in config.tested_models():
                agent_name = f"chat:{entry.name}"
                settings = entry.model_settings(local_alias=DEFAULT_ALIAS)
                agent_identity = chat_identity(agent_name, settings, config.calls_per_turn, entry.chat_protocol(),
                                               suite.closing_call_without_tools)
                out.append(Player(name=agent_name, kind=PlayerKind.CHAT, identity=agent_identity, model=entry,
                                  repeats=config.samples))
        elif is_agent_path(name):
            out.extend(_own_players(config, name, load_agent_class(name)))
        else:
            registered = find_agent(name, suite.name)
            if registered.reference:
                agent = registered.make()
                identified = getattr(agent, "identity", None)
                agent_identity = identified() if callable(identified) else AgentIdentity(name=name, kind="reference")
                out.append(Player(name=name, kind=PlayerKind.REFERENCE, identity=agent_identity,
                                  privileged=bool(getattr(agent, "privileged", False)), factory=registered.make))
            elif isinstance(registered.make, type):  # a plug-in's player class, played as a class of the user's own
                out.extend(_own_players(config, name, registered.make))
            else:
                raise ValueError(f"agent {name!r} is registered with a factory, not a class: a player that is no "
                                 "reference rule must be a class (its identity is made from it)")
    return out


def _own_players(config: ExperimentConfig, name: str, cls: type[Any]) -> list[Player]:
    """A class of the user's own: one player, or one per model of the config when it calls the harness's
    model (``uses_model``; its name is then ``name@model`` and the model's identity enters its run keys)."""
    privileged = bool(getattr(cls, "privileged", False))
    if not uses_harness_model(cls):
        return [Player(name=name, kind=PlayerKind.CUSTOM, identity=custom_identity(name, cls), privileged=privileged,
                       factory=lambda: new_agent(name, cls), repeats=config.samples)]
    if not config.tested_models():
        raise ValueError(f"agent {name} calls the harness's model (uses_model): the config names no model for it")
    out = []
    for entry in config.tested_models():
        player = f"{name}@{entry.name}"
        settings = entry.model_settings(local_alias=DEFAULT_ALIAS)
        out.append(Player(
            name=player, kind=PlayerKind.CUSTOM, identity=model_player_identity(player, name, cls, settings),
            model=entry, privileged=privileged, factory=lambda model, p=player: new_agent(p, cls, model),
            repeats=config.samples,
        ))
    return out


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


def cell_table(config: ExperimentConfig, cells: Sequence[Cell], current: bool = True) -> CellTable:
    """The cell table of a config's cells (what a run writes into its directory; ``current``: cells of the
    directory's config, not of one --force replaced)."""
    groups: dict[tuple[str, str], CellGroup] = {}
    rows = []
    for cell in cells:
        label = cell.arm.label()
        group = groups.get((cell.player.name, label))
        if group is None:
            group = groups[(cell.player.name, label)] = CellGroup(
                player=cell.player.name, kind=cell.player.kind, identity=cell.player.identity.model_dump(mode="json"),
                arm=label, interventions=cell.arm.names(), env_id=config.env, profile=config.profile.value,
                current=current,
            )
        rows.append((cell.run_key, group, cell.episode_id, cell.sample))
    return CellTable.build(rows)


def manifest_config(config: ExperimentConfig) -> dict[str, Any]:
    """The config as a manifest records it: validated, as JSON, the user-info of every URL replaced
    (hash it with :func:`commitbench.identity.config_hash`)."""
    data: dict[str, Any] = redacted_json(config.model_dump(mode="json"))
    if data.get("texts") is None:  # a run without a texts file keeps the config hash it always had
        data.pop("texts", None)
    if data.get("party_model") is None:  # so does a run without live parties
        data.pop("party_model", None)
        if data.get("party_budget") == PartyBudget().model_dump(mode="json"):
            data.pop("party_budget", None)
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
    live = sum(party_calls_at_least(e) for e in episodes) if config.live_parties() else 0
    rows = []
    for player in roster:
        for arm in config.interventions:
            calls = turns * player.repeats if player.kind == PlayerKind.CHAT else 0
            if LIVE_NAME in arm.names():  # the party model's texts and their checks
                calls += live * player.repeats
            rows.append(PlanRow(player=player.name, arm=arm.label(), cells=len(episodes) * player.repeats,
                                model_calls=calls))
    return RunPlan(
        name=config.name, suite=suite.name, env=config.env, episodes=len(episodes), samples=config.samples, rows=rows,
        cells=sum(r.cells for r in rows), model_calls=sum(r.model_calls for r in rows),
        judge=stored_judge(suite, config.judge),
        episode_set_version=suite.set_version(config.episodes), warnings=config.warnings(),
    )


def prompt_hashes(config: ExperimentConfig) -> dict[str, str]:
    """Hashes of everything that writes text the agents see: the suite's data and the chat rendering."""
    return {**config.suite.prompt_hashes(config.episodes), "chat_render": RENDER_HASH}
