"""The experiment runner: plays every cell of a config concurrently, resumably, with a manifest.

A *cell* is (player, intervention arm, episode, sample); its **run key** is the sha256 of the
canonical JSON of the player's identity, the arm, the environment id, the episode id and the
sample index, so it is stable across processes and machines (never the URL or the API key).

Output directory::

    OUT/traces.jsonl    one EpisodeTrace per finished cell, appended as cells finish (fsynced)
    OUT/manifest.json   RunManifest, written atomically (tmp + rename) at start and end
    OUT/cache.sqlite    the model-call cache, unless the config names another file
    OUT/.reserve        disk space set aside while cells are played, freed for the last manifest
                        write when the disk fills up (a full disk ends the run 'failed', with why)

Resume semantics: at start the runner drops a torn last line of ``traces.jsonl`` (a crash in
mid-write), reads the run keys already there, and plays only the cells without a good trace.
Cells whose trace records an infrastructure failure (``infra_error``: retries exhausted, a
replay-only cache miss, a crash of the harness) are played again; readers take the last good
trace per run key (:func:`latest_traces`), so nothing is ever counted twice. SIGINT / SIGTERM
stop the run cleanly: in-flight episodes are abandoned (their finished model calls stay in the
cache), finished traces are flushed, the manifest says ``interrupted``.

Episodes run as coroutines on one event loop, at most ``concurrency`` at a time; environment
steps are synchronous and cheap. A single writer appends finished traces in batches from a
worker thread, so fsync never blocks the loop; its queue is bounded, so players that never wait
(a replay from the cache) wait for the disk instead of piling traces up in memory. Of a finished
cell the runner keeps only counters.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import importlib.metadata
import inspect
import os
import platform
import signal
import subprocess
import sys
import time
import traceback
import uuid
from collections import Counter, deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import Enum
from pathlib import Path
from typing import Any, Protocol

import gymnasium as gym
from pydantic import BaseModel, Field

import commitbench.envs  # noqa: F401 - registers the environments
from commitbench.agents.chat import RENDER_HASH, ChatAgent, chat_identity
from commitbench.agents.local_model import DEFAULT_ALIAS, LocalModelServer
from commitbench.cache import CacheError, CacheMiss, CacheMode, CallBroker, CallCache, canonical_json
from commitbench.config import CHAT_AGENT, ExperimentConfig, InterventionArm, ModelEntry
from commitbench.envs.privileged import RevealScriptAnnotations
from commitbench.jsonl import append_lines, repair_torn_tail, write_atomic
from commitbench.judges.followup.schemas import ResponseFormatStyle
from commitbench.judges.labelling import LabellerUnavailable, judge_name, pin_judge_settings
from commitbench.llm import (
    ClientStats,
    ModelClient,
    ModelEndpointError,
    ReplicaPool,
    RetryPolicy,
    redact_credentials,
)
from commitbench.oracles.base import play_step
from commitbench.oracles.registry import apply_interventions, check_intervention
from commitbench.protocol import escape_surrogates
from commitbench.runcells import CellFacts, scan_trace_file
from commitbench.suites import PlayServices, Suite, get_suite, suite_for_env
from commitbench.traces import TRACES_FILE, AgentIdentity, EpisodeTrace, iter_traces

__all__ = [
    "MANIFEST_FILE",
    "MAX_CELLS",
    "PROGRESS_INTERVAL_S",
    "PROGRESS_LINES",
    "TRACES_FILE",
    "Cell",
    "CellStatus",
    "EpisodeSetMismatchError",
    "Player",
    "RunDirectoryBusyError",
    "RunDirectoryError",
    "RunManifest",
    "RunSummary",
    "Runner",
    "cell_facts",
    "check_episode_set",
    "compute_run_key",
    "count_cells",
    "expand_cells",
    "experiment_cells",
    "in_shard",
    "plan",
    "prompt_hashes",
    "read_manifest",
    "run_experiment",
    "run_suite",
    "scan_trace_file",
    "select_config_episodes",
]

MANIFEST_FILE = "manifest.json"
LOCK_FILE = ".lock"
# Disk space set aside while a run plays, freed for the last manifest write if the disk fills up.
RESERVE_FILE = ".reserve"
# The base URL slot of the embedded model when it serves as the judge in play.
JUDGE_KEY = "\0judge"
RESERVE_BYTES = 256 * 1024
MANIFEST_SCHEMA_VERSION = 1
# A turn has at most a few tool calls and a script a few dozen messages: this bound only stops
# an environment or agent bug from looping forever.
MAX_STEPS_PER_EPISODE = 5_000
# httpx's connection pool scans every connection on every request, so its CPU cost per call grows
# with the connections open: a model with more requests in flight than this gets several clients.
CONNECTIONS_PER_CLIENT = 64
# A run that is not attached to a terminal prints a progress line this often (seconds).
PROGRESS_INTERVAL_S = 20.0
PROGRESS_LINES = "lines"
# Cells of one experiment, at most: planning 993,600 took 12 s and 274 MiB here (docs/runner.md).
MAX_CELLS = 1_000_000
# Finished traces waiting for the writer, at most; a player that finishes while the queue is full
# waits for the disk (backpressure), so memory does not grow with the number of cells.
WRITE_QUEUE_LINES = 128


# ---------------------------------------------------------------------------------- cells
@dataclass(frozen=True)
class Player:
    """Who plays a cell: a reference agent, or the chat agent on one model."""

    name: str
    kind: str  # "reference" or "chat"
    identity: AgentIdentity
    model: ModelEntry | None = None
    privileged: bool = False  # plays through the privileged channel (reference agents read the script)


@dataclass(frozen=True)
class Cell:
    """One unit of work: a player plays an episode under an intervention arm (sample k)."""

    run_key: str
    player: Player
    arm: InterventionArm
    episode_id: str
    sample: int


def compute_run_key(
    identity: AgentIdentity, arm: InterventionArm, env_id: str, episode_id: str, sample: int,
    services: Mapping[str, Any] | None = None,
) -> str:
    """sha256 of the canonical JSON of what defines a cell (``services``: the identity of the harness services
    the arm's interventions use, such as the rewrite fix's flagger; left out when there are none)."""
    payload: dict[str, Any] = {
        "agent": identity.model_dump(mode="json"),
        "interventions": arm.identity(),
        "env": env_id,
        "episode": episode_id,
        "sample": sample,
    }
    if services:
        payload["services"] = dict(services)
    return hashlib.sha256(canonical_json(payload).encode("utf-8")).hexdigest()


def arm_services(arm: InterventionArm) -> tuple[str, ...]:
    """The harness services the arm's interventions use (from their registry entries), in order, once each."""
    names: list[str] = []
    for spec in arm.stack:
        names.extend(n for n in check_intervention(spec.name).services if n not in names)
    return tuple(names)


def service_identities(config: ExperimentConfig, arm: InterventionArm) -> dict[str, Any]:
    """The identity of each service the arm uses, under the config's judge (what enters the run key)."""
    return {name: config.suite.service_identity(name, config.judge) for name in arm_services(arm)}


def in_shard(run_key: str, shard: tuple[int, int]) -> bool:
    """Whether a cell belongs to shard ``(index, count)``: its run key's leading 64 bits modulo count.

    The run key alone decides, so the shards of one experiment are disjoint and cover it on any
    machine, whatever the order of the config.
    """
    index, count = shard
    return int(run_key[:16], 16) % count == index


def players(config: ExperimentConfig) -> list[Player]:
    """Reference agents in config order, then the chat agent on each model."""
    suite = config.suite
    out: list[Player] = []
    for name in config.agents:
        if name == CHAT_AGENT:
            for entry in config.models:
                agent_name = f"chat:{entry.name}"
                settings = entry.model_settings(local_alias=DEFAULT_ALIAS)
                identity = chat_identity(agent_name, settings, config.calls_per_turn, entry.chat_protocol(),
                                         suite.closing_call_without_tools)
                out.append(Player(name=agent_name, kind="chat", identity=identity, model=entry))
        else:
            agent = suite.reference_agents[name]()
            out.append(Player(name=name, kind="reference", identity=agent.identity(),
                              privileged=bool(getattr(agent, "privileged", False))))
    return out


def select_config_episodes(config: ExperimentConfig) -> list[Any]:
    """The episodes a config selects, in a fixed order; raises ValueError naming a bad filter value."""
    return list(config.suite.select(config.episodes))


def count_cells(config: ExperimentConfig, episodes: Sequence[Any]) -> int:
    """How many cells the config expands to; ValueError when more than :data:`MAX_CELLS`."""
    per_arm = sum(config.samples if p.kind == "chat" else 1 for p in players(config)) * len(episodes)
    count = per_arm * len(config.interventions)
    if count > MAX_CELLS:
        raise ValueError(
            f"the config plans {count:,} cells ({len(episodes):,} episodes x {len(config.interventions)} arms x "
            f"players and samples), more than the {MAX_CELLS:,} one run directory takes; select fewer episodes "
            "(episodes: limit, a filter), samples or arms, or split the experiment into several configs"
        )
    return count


def expand_cells(config: ExperimentConfig, episodes: Sequence[Any]) -> list[Cell]:
    """Every cell of the config, in a fixed order (player, arm, episode, sample); ValueError past :data:`MAX_CELLS`."""
    count_cells(config, episodes)
    cells: list[Cell] = []
    for player in players(config):
        samples = config.samples if player.kind == "chat" else 1  # reference agents are deterministic
        for arm in config.interventions:
            services = service_identities(config, arm)
            for episode in episodes:
                for sample in range(samples):
                    key = compute_run_key(player.identity, arm, config.env, episode.id, sample, services)
                    cells.append(Cell(key, player, arm, episode.id, sample))
    return cells


class PlanRow(BaseModel):
    """What one player plays under one intervention arm."""

    player: str = Field(description="Reference agent, or chat:<model>.")
    arm: str = Field(description="Intervention arm label.")
    cells: int = Field(description="Cells (episodes x samples).")
    model_calls: int = Field(description="Model calls at least (one per turn; tool rounds add more).")


class Plan(BaseModel):
    """What ``commitbench run CONFIG`` would play, computed without contacting any server."""

    name: str = Field(description="Experiment name.")
    suite: str = Field(description="The suite.")
    env: str = Field(description="Its environment id.")
    episodes: int = Field(description="Episodes selected.")
    samples: int = Field(description="Samples per chat cell.")
    rows: list[PlanRow] = Field(description="Per player x arm.")
    cells: int = Field(description="Cells in all.")
    model_calls: int = Field(description="Model calls at least, in all.")
    judge: str = Field(description="Who labels the run afterwards.")
    episode_set_version: str | None = Field(default=None, description="Version of the suite's episode set.")
    warnings: list[str] = Field(default_factory=list, description="What the config's author should know.")

    def text(self, out_dir: Path) -> str:
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


def plan(config: ExperimentConfig) -> Plan:
    """The cells a config expands to and a lower bound on its model calls; no server is contacted."""
    suite = config.suite
    episodes = select_config_episodes(config)
    count_cells(config, episodes)
    turns = sum(suite.calls_per_episode(e) for e in episodes)
    rows = []
    for player in players(config):
        samples = config.samples if player.kind == "chat" else 1
        for arm in config.interventions:
            calls = turns * samples if player.kind == "chat" else 0
            rows.append(PlanRow(player=player.name, arm=arm.label(), cells=len(episodes) * samples, model_calls=calls))
    # The name the labels will be stored under (commitbench.labeljob.stored_name).
    judge = (suite.offline_labeller if config.judge.kind == "rules" or config.judge.model is None
             else judge_name(config.judge.model.served_model(DEFAULT_ALIAS)))
    return Plan(
        name=config.name, suite=suite.name, env=config.env, episodes=len(episodes), samples=config.samples, rows=rows,
        cells=sum(r.cells for r in rows), model_calls=sum(r.model_calls for r in rows), judge=judge,
        episode_set_version=episode_set_version(suite, config.episodes), warnings=config.warnings(),
    )


# ---------------------------------------------------------------------------- trace file
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


def experiment_cells(manifest: RunManifest, skip_config: bool = False) -> dict[str, CellFacts]:
    """The cells a run directory holds traces of: its config's, and those of the configs ``--force`` replaced
    (``skip_config``: the earlier configs' only)."""
    facts: dict[str, CellFacts] = {}
    for data in ([] if skip_config else [manifest.config]) + list(manifest.earlier_configs):
        config = ExperimentConfig.model_validate({**data, "cache": {**(data.get("cache") or {}), "path": None}})
        facts.update(cell_facts(config, expand_cells(config, select_config_episodes(config))))
    return facts


# ----------------------------------------------------------------------------- manifest
class RunStatus(str, Enum):
    RUNNING = "running"
    COMPLETE = "complete"
    INCOMPLETE = "incomplete"  # finished, but some cells failed for infrastructure reasons
    INTERRUPTED = "interrupted"
    ABORTED = "aborted"  # a configuration error stopped the run (e.g. the endpoint rejects the model)
    FAILED = "failed"  # the machine stopped the run (the disk is full, the directory cannot be written)
    KILLED = "killed"  # the process ended without recording how (SIGKILL, a crash): marked by the next invocation


class CellStatus(str, Enum):
    DONE = "done"
    FAILED = "failed"


class Invocation(BaseModel):
    """One execution of ``commitbench run`` on the directory."""

    started_at: str = Field(description="ISO time the invocation started.")
    ended_at: str | None = Field(default=None, description="ISO time it ended (null while running).")
    pid: int = Field(description="Process id.")
    argv: list[str] = Field(description="Command line (the user-info of URLs replaced by ***).")
    cells_pending: int = Field(description="Cells it set out to play.")
    cells_done: int = Field(default=0, description="Cells it finished well.")
    cells_failed: int = Field(default=0, description="Cells it finished with an infrastructure error.")
    status: RunStatus = Field(default=RunStatus.RUNNING, description="How it ended.")
    message: str = Field(default="", description="Why it stopped early, when it did (aborted, failed).")
    cache_mode: str = Field(description="Cache mode used.")
    client_stats: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="Per-model client counters (calls, cache hits, retries, errors, tokens)."
    )


class RunManifest(BaseModel):
    """What a run directory holds and how it was produced."""

    schema_version: int = Field(default=MANIFEST_SCHEMA_VERSION, description="Manifest format version.")
    name: str = Field(description="Experiment name.")
    suite: str = Field(default="standing", description="The suite the run plays (from the config's env).")
    run_id: str = Field(description="Random id of the run directory (stable across resumes).")
    status: RunStatus = Field(description="Status after the latest invocation.")
    message: str = Field(default="", description="Why the latest invocation stopped early, when it did.")
    config: dict[str, Any] = Field(
        description="The experiment config, as validated (the user-info of URLs replaced by ***: no credentials)."
    )
    config_hash: str = Field(description="sha256 of the canonical JSON of the config.")
    cells_hash: str = Field(description="sha256 of the sorted run keys: what the experiment plays.")
    cells_total: int = Field(description="Cells of the experiment.")
    cells_done: int = Field(description="Cells with a good trace in traces.jsonl.")
    players: list[dict[str, Any]] = Field(description="Agent identities (model identities, never URLs or keys).")
    interventions: list[str] = Field(description="Intervention arm labels.")
    episodes: int = Field(description="Episodes selected.")
    samples: int = Field(description="Samples per chat cell.")
    seeds: dict[str, int | None] = Field(description="Seeds: env reset seed and sampling seeds per model.")
    prompt_hashes: dict[str, str] = Field(description="sha256 of prompt templates and data files used.")
    episode_set_version: str | None = Field(
        default=None,
        description="Version of the suite's episode set the runs were played on (null: the suite has no versions, "
        "or the manifest predates them).",
    )
    packages: dict[str, str] = Field(description="Versions of Python and the packages that shape results.")
    git: dict[str, Any] | None = Field(description="Commit and dirty flag of the source checkout, if any.")
    started_at: str = Field(description="ISO time of the first invocation.")
    updated_at: str = Field(description="ISO time of the last write.")
    ended_at: str | None = Field(default=None, description="ISO time the latest invocation ended.")
    invocations: list[Invocation] = Field(default_factory=list, description="Every invocation, oldest first.")
    earlier_configs: list[dict[str, Any]] = Field(
        default_factory=list,
        description="Configs of other experiments whose cells the directory also holds (replaced by one run with "
        "--force): their traces stay traces of this run.",
    )


class RunDirectoryBusyError(RuntimeError):
    """Another process is running into the same directory."""


class RunDirectoryError(RuntimeError):
    """The run directory cannot be written (read-only, full, no permission); nothing was played."""

    def __init__(self, out_dir: Path, exc: OSError) -> None:
        where = f" ({exc.filename})" if exc.filename else ""
        super().__init__(f"cannot write to the run directory {out_dir}: {exc.strerror or exc}{where}")


@contextlib.contextmanager
def directory_lock(out_dir: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``out_dir`` (released by the kernel even on SIGKILL)."""
    import fcntl

    path = out_dir / LOCK_FILE
    handle = path.open("a+", encoding="utf-8")
    try:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            raise RunDirectoryBusyError(
                f"{out_dir} is in use by {holder}; wait for it to finish or stop it first"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()}")
        handle.flush()
        yield
    finally:
        handle.close()


def _earlier_configs(previous: RunManifest | None, cells_hash: str) -> list[dict[str, Any]]:
    """The configs whose cells a directory holds besides the new config's: the previous manifest's earlier
    configs, and its own config when --force is adding another experiment's cells."""
    if previous is None:
        return []
    earlier = list(previous.earlier_configs)
    if previous.cells_hash != cells_hash and previous.config not in earlier:
        earlier.append(previous.config)
    return earlier


def redacted_json(value: Any) -> Any:
    """A JSON value with the user-info of every URL in its strings replaced (what a manifest may hold)."""
    if isinstance(value, str):
        return redact_credentials(value)
    if isinstance(value, dict):
        return {key: redacted_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [redacted_json(item) for item in value]
    return value


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class EpisodeSetMismatchError(ValueError):
    """A run directory was played on another version of its suite's episode set than this checkout compiles."""


def episode_set_version(suite: Suite, selection: BaseModel) -> str | None:
    """The version of the episode set a suite's filter compiles to (None: the suite has no versions)."""
    return suite.episode_set_version(selection) if suite.episode_set_version is not None else None


def check_episode_set(suite: Suite, recorded: str | None, run_dir: Path, selection: BaseModel) -> None:
    """Refuse a run directory whose episode-set version differs from the one this checkout compiles."""
    current = episode_set_version(suite, selection)
    if current is None:
        return
    if recorded == current:
        return
    made = f"version {recorded}" if recorded else "a version from before versions were recorded"
    raise EpisodeSetMismatchError(
        f"{run_dir} was played on {made} of the {suite.name} episode set; this checkout compiles version {current}. "
        "Episode texts and ids differ between versions, so their runs cannot be mixed or read together: start a "
        "new run directory, or read this one with the version of commitbench that made it"
    )


def run_suite(run_dir: Path | str) -> Suite:
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


def read_manifest(out_dir: Path | str) -> RunManifest | None:
    path = Path(out_dir) / MANIFEST_FILE
    if not path.exists():
        return None
    try:
        return RunManifest.model_validate_json(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ValueError(f"{path} is not a run manifest: {exc}") from None


_PACKAGES = ("commitbench", "openai", "httpx", "httpx2", "pydantic", "gymnasium", "numpy", "pandas",
             "jinja2", "pyyaml", "llama_cpp_python")


def package_versions() -> dict[str, str]:
    versions = {"python": platform.python_version(), "platform": platform.platform()}
    for name in _PACKAGES:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            versions[name] = importlib.metadata.version(name)
    return versions


def git_state(start: Path | None = None) -> dict[str, Any] | None:
    """Commit and dirty flag of the checkout holding the source, or None outside a checkout."""
    where = start or Path(__file__).resolve().parent
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=where, capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=where, capture_output=True, text=True, timeout=20, check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": commit, "dirty": bool(dirty)}


def prompt_hashes(config: ExperimentConfig) -> dict[str, str]:
    """Hashes of everything that writes text the agents see: the suite's data and the chat rendering."""
    return {**config.suite.prompt_hashes(config.episodes), "chat_render": RENDER_HASH}


# ------------------------------------------------------------------------------ summary
class RunSummary(BaseModel):
    """What one invocation of the runner did."""

    out_dir: str = Field(description="Run directory.")
    status: RunStatus = Field(description="How the invocation ended.")
    cells_total: int = Field(description="Cells of the experiment.")
    cells_skipped: int = Field(description="Cells already done before this invocation.")
    cells_done: int = Field(description="Cells this invocation finished well.")
    cells_failed: int = Field(description="Cells this invocation finished with an infrastructure error.")
    cells_remaining: int = Field(description="Cells still without a good trace.")
    torn_bytes_dropped: int = Field(description="Bytes of a torn last trace line removed at start.")
    model_calls: int = Field(description="Model calls made (cache hits included).")
    http_requests: int = Field(description="HTTP requests sent to model servers.")
    cache_hits: int = Field(description="Calls served from the cache.")
    retries: int = Field(description="HTTP attempts that were retries.")
    prompt_tokens: int = Field(description="Prompt tokens reported by servers.")
    completion_tokens: int = Field(description="Completion tokens reported by servers.")
    errors: dict[str, int] = Field(description="Recorded model-call errors by kind.")
    failures: list[str] = Field(description="The first few failure messages (infra errors, crashes).")
    wall_s: float = Field(description="Wall time of the invocation.")
    play_wall_s: float = Field(default=0.0, description="Wall time spent playing cells (startup excluded).")
    play_cpu_s: float = Field(
        default=0.0, description="CPU time of this process while playing cells (all threads, startup excluded)."
    )
    message: str = Field(default="", description="Why the run stopped early, when it did.")


# ------------------------------------------------------------------------------- runner
@dataclass
class _Counters:
    """What the runner keeps of finished cells: counts, and the first few failure messages."""

    done: int = 0
    failed: int = 0
    failures: list[str] = field(default_factory=list)

    def fail(self, message: str) -> None:
        self.failed += 1
        if len(self.failures) < 20:
            self.failures.append(message)


class TraceSink(Protocol):
    """Where a player hands a finished cell's trace line: the run's trace writer, or (in a worker of a
    distributed run) the stream back to the driver, which alone writes the run directory."""

    async def put(self, line: str, failure: str, run_key: str) -> None: ...


class _TraceWriter:
    """Appends finished traces in batches from a worker thread (one fsync per batch).

    Players hand over traces already serialised (:func:`trace_line`), so the queue holds text and a
    trace that cannot be serialised has already failed its own cell. The queue is bounded: a player
    that finishes while it is full waits until the disk has taken a batch (backpressure), so a
    replay served from the cache cannot pile finished traces up in memory. The counters of the run
    move when a batch is on disk. When an append fails (the disk is full, the directory became
    read-only), the writer reports it once through ``on_error`` and then drains the queue without
    writing, so that no player waits forever.
    """

    def __init__(
        self, path: Path, counters: _Counters, on_error: Callable[[str], None], max_lines: int = WRITE_QUEUE_LINES
    ) -> None:
        self.path = path
        self.counters = counters
        self.on_error = on_error
        self.queue: asyncio.Queue[tuple[str, str] | None] = asyncio.Queue(max_lines)
        self.written = 0
        self.error: str | None = None
        self.task: asyncio.Task[None] | None = None
        self._late: list[tuple[str, str]] = []  # at most one line per stopped player

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._run())

    async def put(self, line: str, failure: str, run_key: str = "") -> None:
        """Queue one trace line (``failure``: '' for a good cell, else why it failed); waits while the queue is full.

        The file needs only the line (``run_key`` is for sinks that keep count of cells).

        A player stopped (Ctrl-C) while it waits hands its finished line over all the same: it is
        written when the writer closes.
        """
        if self.task is not None and self.task.done():
            return  # the writer is gone: nothing can be written any more
        try:
            await self.queue.put((line, failure))
        except asyncio.CancelledError:
            self._late.append((line, failure))
            raise

    async def _run(self) -> None:
        while True:
            first = await self.queue.get()
            if first is None:
                return
            batch = [first]
            stop = False
            while not self.queue.empty():
                item = self.queue.get_nowait()
                if item is None:
                    stop = True
                    break
                batch.append(item)
            await self._write(batch)
            if stop:
                return

    async def _write(self, batch: list[tuple[str, str]]) -> None:
        if self.error is not None or not batch:
            return
        try:
            await asyncio.to_thread(append_lines, self.path, [line for line, _ in batch])
        except Exception as exc:  # disk full, read-only, I/O error: the run cannot go on
            self.error = f"cannot write {self.path}: {type(exc).__name__}: {exc}"
            self.on_error(self.error)
            return
        self.written += len(batch)
        for _, failure in batch:
            if failure:
                self.counters.fail(failure)
            else:
                self.counters.done += 1

    async def close(self) -> None:
        if self.task is None:
            return
        if not self.task.done():
            await self.queue.put(None)
        await asyncio.shield(self.task)
        late, self._late = self._late, []
        await self._write(late)


def trace_line(trace: EpisodeTrace, cell: Cell, env_id: str) -> tuple[str, str | None]:
    """The JSON line of a finished trace, and its infrastructure error (None for a good trace).

    A trace that cannot be serialised (a value no JSON file can hold slipped past the checks at
    the edges) is replaced by a trace of the same cell that records why, as an infrastructure
    error: the cell fails alone, the other traces are written, and a resumed run plays it again.
    """
    try:
        return trace.model_dump_json(), trace.infra_error
    except (ValueError, TypeError, RecursionError, OverflowError) as exc:
        reason = escape_surrogates(f"{type(exc).__name__}: {exc}")[:1000]
    stub = EpisodeTrace(
        env_id=env_id, episode_id=cell.episode_id, factors={}, agent=cell.player.identity,
        interventions=cell.arm.names(), sample=cell.sample, run_key=cell.run_key,
        infra_error=f"unwritable_trace: the trace could not be serialised ({reason})",
    )
    return stub.model_dump_json(), stub.infra_error


class Runner:
    """Plays the pending cells of a config into a run directory. Use :func:`run_experiment`."""

    def __init__(
        self,
        config: ExperimentConfig,
        out_dir: Path | str,
        *,
        progress: bool | str = False,
        argv: Sequence[str] | None = None,
        force: bool = False,
        shard: tuple[int, int] | None = None,
        local_server: Callable[[], LocalModelServer] | None = None,
    ) -> None:
        if shard is not None and not 0 <= shard[0] < shard[1]:
            raise ValueError(f"shard {shard[0]}/{shard[1]}: the index must be at least 0 and below the count")
        self.config = config
        self.shard = shard
        self.out_dir = Path(out_dir)
        self.progress_enabled = progress
        self.progress_interval_s = PROGRESS_INTERVAL_S
        self.argv = [redact_credentials(a) for a in (argv if argv is not None else sys.argv)]
        self.force = force
        self.traces_path = self.out_dir / TRACES_FILE
        self.manifest_path = self.out_dir / MANIFEST_FILE
        self.reserve_path = self.out_dir / RESERVE_FILE
        # Model name -> its clients. A model with many requests in flight gets several clients
        # (shards), each with its own connection pool: see CONNECTIONS_PER_CLIENT.
        self._clients: dict[str, list[ModelClient]] = {}
        # Set in the workers of a distributed run: their cache is a copy, shared through the driver.
        self._broker: CallBroker | None = None
        self._counters = _Counters()
        self._stopping = False
        self._fatal: str | None = None
        self._failure: str | None = None
        self._play_wall = 0.0
        self._play_cpu = 0.0
        # The embedded model's server, started for the run when a model is local (watched while cells play).
        self._local_server_factory = local_server or LocalModelServer
        self._local_server: LocalModelServer | None = None
        # The run's LLM judge while cells play, when an arm's interventions need it (the rewrite fix's flagger).
        self._judge_in_play = False
        self._judge_client: ModelClient | None = None

    # ------------------------------------------------------------------ preparation
    def prepare(self) -> tuple[list[Any], list[Cell], list[Cell], int]:
        """Expand the config, repair the trace file and find pending cells."""
        episodes = select_config_episodes(self.config)
        cells = expand_cells(self.config, episodes)
        # Every line must be a trace of a cell of the experiment (of any shard), or of an experiment whose
        # cells --force added to the directory: the rule 'merge' and every reader apply too.
        known = cell_facts(self.config, cells)
        previous = read_manifest(self.out_dir)
        if previous is not None:
            known.update(experiment_cells(previous, skip_config=previous.config_hash == self._config_hash()))
        if self.shard is not None:  # this directory holds one shard of the experiment ('commitbench merge' joins them)
            cells = [c for c in cells if in_shard(c.run_key, self.shard)]
        self.out_dir.mkdir(parents=True, exist_ok=True)
        torn = repair_torn_tail(self.traces_path)
        status = scan_trace_file(self.traces_path, known)
        pending = [c for c in cells if not status.get(c.run_key, False)]
        return episodes, cells, pending, torn

    def _config_hash(self) -> str:
        """The manifest's hash of this config (what ``config_hash`` records)."""
        return hashlib.sha256(canonical_json(redacted_json(self.config.model_dump(mode="json"))).encode()).hexdigest()

    def cache_path(self) -> Path:
        return self.config.cache.path if self.config.cache.path is not None else self.out_dir / "cache.sqlite"

    # ------------------------------------------------------------------ running
    def run(self) -> RunSummary:
        """Play the pending cells; one process at a time per directory (a lock file guards it)."""
        with contextlib.ExitStack() as stack:
            try:
                self.out_dir.mkdir(parents=True, exist_ok=True)
                stack.enter_context(directory_lock(self.out_dir))
            except OSError as exc:
                raise RunDirectoryError(self.out_dir, exc) from None
            return self._run_locked()

    def _run_locked(self) -> RunSummary:
        started = time.perf_counter()
        try:
            episodes, cells, pending, torn = self.prepare()
            cells_hash = hashlib.sha256("\n".join(sorted(c.run_key for c in cells)).encode()).hexdigest()
            manifest = self._begin_manifest(cells, cells_hash, len(episodes), len(pending))
        except OSError as exc:  # nothing has been played: the directory cannot take a run
            raise RunDirectoryError(self.out_dir, exc) from None
        self._reserve_space()
        invocation = manifest.invocations[-1]
        status = RunStatus.COMPLETE
        message = ""
        local_server = None
        cache: CallCache | None = None
        try:
            chat_pending = [c for c in pending if c.player.kind == "chat"]
            self._judge_in_play = self.config.judge.kind == "llm" and any(arm_services(c.arm) for c in pending)
            judge_model = self.config.judge.model
            local_judge = self._judge_in_play and judge_model is not None and judge_model.local
            base_urls: dict[str, str] = {}
            replay_only = CacheMode(self.config.cache.mode) is CacheMode.REPLAY_ONLY
            local_player = any(c.player.model is not None and c.player.model.local for c in chat_pending)
            if not replay_only and (local_player or local_judge):
                local_server = self._local_server = self._local_server_factory().start()
                for entry in self.config.models:
                    if entry.local:
                        base_urls[entry.name] = local_server.base_url
                if local_judge:
                    base_urls[JUDGE_KEY] = local_server.base_url
            if (chat_pending or self._judge_in_play) and CacheMode(self.config.cache.mode) is not CacheMode.OFF:
                cache = CallCache(self.cache_path(), self.config.cache.mode, run_id=manifest.run_id)
            play_wall, play_cpu = time.perf_counter(), time.process_time()
            try:
                interrupted = asyncio.run(self._run_async(episodes, pending, cache, base_urls))
            finally:
                self._play_wall = time.perf_counter() - play_wall
                self._play_cpu = time.process_time() - play_cpu
            if interrupted:
                status = RunStatus.INTERRUPTED
            elif self._failure is not None:
                status, message = RunStatus.FAILED, self._failure
            elif self._fatal is not None:
                status, message = RunStatus.ABORTED, self._fatal
            elif self._counters.failed:
                status = RunStatus.INCOMPLETE
        except KeyboardInterrupt:
            status = RunStatus.INTERRUPTED
        except CacheError as exc:  # the cache file is damaged or cannot be opened: nothing can be played
            status, message = RunStatus.ABORTED, str(exc)
        except OSError as exc:  # the machine stopped the run (disk full, read-only directory, I/O error)
            status, message = RunStatus.FAILED, f"{type(exc).__name__}: {exc}"
        except BaseException as exc:
            status, message = RunStatus.ABORTED, f"{type(exc).__name__}: {exc}"
            raise
        finally:
            if cache is not None:
                with contextlib.suppress(CacheError):
                    cache.close()
            if local_server is not None:
                local_server.stop()
                self._local_server = None
            done_now = scan_trace_file(self.traces_path)
            cells_done = sum(1 for c in cells if done_now.get(c.run_key, False))
            if status is RunStatus.COMPLETE and cells_done < len(cells):
                status = RunStatus.INCOMPLETE
            invocation.ended_at = _now()
            invocation.status = status
            invocation.message = message
            invocation.cells_done = self._counters.done
            invocation.cells_failed = self._counters.failed
            invocation.client_stats = {name: stats.model_dump() for name, stats in self.client_stats().items()}
            manifest.status = status
            manifest.message = message
            manifest.cells_done = cells_done
            manifest.ended_at = invocation.ended_at
            manifest.updated_at = invocation.ended_at
            unwritten = self._end_manifest(manifest)
            if unwritten:
                status = RunStatus.FAILED
                message = f"{message}; {unwritten}" if message else unwritten
        stats = list(self.client_stats().values())
        errors: Counter[str] = Counter()
        for s in stats:
            errors.update(s.errors)
        return RunSummary(
            out_dir=str(self.out_dir),
            status=status,
            cells_total=len(cells),
            cells_skipped=len(cells) - len(pending),
            cells_done=self._counters.done,
            cells_failed=self._counters.failed,
            cells_remaining=len(cells) - cells_done,
            torn_bytes_dropped=torn,
            model_calls=sum(s.calls for s in stats),
            http_requests=sum(s.http_requests for s in stats),
            cache_hits=sum(s.cache_hits for s in stats),
            retries=sum(s.retries for s in stats),
            prompt_tokens=sum(s.prompt_tokens for s in stats),
            completion_tokens=sum(s.completion_tokens for s in stats),
            errors=dict(errors),
            failures=list(self._counters.failures),
            wall_s=time.perf_counter() - started,
            play_wall_s=self._play_wall,
            play_cpu_s=self._play_cpu,
            message=message,
        )

    def _reserve_space(self) -> None:
        """Set disk space aside for the last manifest write (a full disk must not leave it 'running')."""
        try:
            with self.reserve_path.open("wb") as handle:
                os.posix_fallocate(handle.fileno(), 0, RESERVE_BYTES)
        except OSError:
            self.reserve_path.unlink(missing_ok=True)  # the disk is already full: there is nothing to set aside

    def _end_manifest(self, manifest: RunManifest) -> str:
        """Write the final manifest, with the reserved space if the disk is full; '' or why it failed."""
        text = manifest.model_dump_json(indent=2)
        try:
            try:
                write_atomic(self.manifest_path, text)
            except OSError:
                self.reserve_path.unlink(missing_ok=True)
                write_atomic(self.manifest_path, text)
        except OSError as exc:
            return f"the manifest could not be updated ({type(exc).__name__}: {exc})"
        finally:
            with contextlib.suppress(OSError):
                self.reserve_path.unlink(missing_ok=True)
        return ""

    def _begin_manifest(self, cells: list[Cell], cells_hash: str, n_episodes: int, n_pending: int) -> RunManifest:
        previous = read_manifest(self.out_dir)
        suite = self.config.suite
        version = episode_set_version(suite, self.config.episodes)
        if previous is not None:
            # Never mixed, not even with --force: the traces of two versions cannot be read together.
            check_episode_set(suite, previous.episode_set_version, self.out_dir, self.config.episodes)
        if previous is not None and previous.cells_hash != cells_hash and not self.force:
            raise ValueError(
                f"{self.out_dir} holds a different experiment (cells hash {previous.cells_hash[:12]}, this config "
                f"{cells_hash[:12]}); use another --out directory, or --force to add these cells to it"
            )
        config_json = redacted_json(self.config.model_dump(mode="json"))
        now = _now()
        seeds: dict[str, int | None] = {"env_reset": self.config.seed}
        for entry in self.config.models:
            seeds[f"sampling:{entry.name}"] = entry.settings.seed
        invocation = Invocation(
            started_at=now, pid=os.getpid(), argv=self.argv, cells_pending=n_pending,
            cache_mode=CacheMode(self.config.cache.mode).value,
        )
        earlier = [*(previous.invocations if previous is not None else [])]
        for index, old in enumerate(earlier):
            if old.status is RunStatus.RUNNING:  # this process holds the lock: the one that wrote it is gone
                earlier[index] = old.model_copy(update={
                    "status": RunStatus.KILLED,
                    "message": f"pid {old.pid} ended without recording how (killed, or the machine stopped); "
                    f"marked when the invocation of {now} started",
                })
        manifest = RunManifest(
            name=self.config.name,
            suite=self.config.suite.name,
            run_id=previous.run_id if previous is not None else uuid.uuid4().hex,
            status=RunStatus.RUNNING,
            config=config_json,
            config_hash=hashlib.sha256(canonical_json(config_json).encode()).hexdigest(),
            cells_hash=cells_hash,
            cells_total=len(cells),
            cells_done=len(cells) - n_pending,
            players=[p.identity.model_dump(mode="json") for p in players(self.config)],
            interventions=[arm.label() for arm in self.config.interventions],
            episodes=n_episodes,
            samples=self.config.samples,
            seeds=seeds,
            prompt_hashes=prompt_hashes(self.config),
            episode_set_version=version,
            packages=package_versions(),
            git=git_state(),
            started_at=previous.started_at if previous is not None else now,
            updated_at=now,
            invocations=[*earlier, invocation],
            earlier_configs=_earlier_configs(previous, cells_hash),
        )
        write_atomic(self.manifest_path, manifest.model_dump_json(indent=2))
        return manifest

    def _make_clients(
        self, cache: CallCache | None, base_urls: dict[str, str], pending: Sequence[Cell] | None = None
    ) -> None:
        """The clients of each model, for as many requests in flight as its cells can have at once: a cell
        makes one call at a time and at most ``concurrency`` cells play at once (of ``pending``, when given)."""
        cells_of: Counter[str] | None = None
        if pending is not None:
            cells_of = Counter(c.player.model.name for c in pending if c.player.model is not None)
        judge = self.config.judge
        if self._judge_in_play and judge.model is not None:
            served = judge.model.model_settings(base_urls.get(JUDGE_KEY), local_alias=DEFAULT_ALIAS)
            settings = pin_judge_settings(served)
            self._judge_client = ModelClient(
                settings, cache=cache, retry=judge.model.retry, max_concurrency=self.config.concurrency,
                broker=self._broker,
            )
        for entry in self.config.models:
            retry = entry.retry
            if retry.seed is None:
                retry = RetryPolicy(**{**retry.model_dump(), "seed": self.config.seed})
            settings = entry.model_settings(base_urls.get(entry.name), local_alias=DEFAULT_ALIAS)
            in_flight = min(entry.max_concurrency or self.config.concurrency, self.config.concurrency)
            if cells_of is not None:
                if not cells_of[entry.name]:
                    continue  # nothing of this model left to play
                in_flight = min(in_flight, cells_of[entry.name])
            n_shards = -(-in_flight // CONNECTIONS_PER_CLIENT)
            per_shard = -(-in_flight // n_shards)
            # One pool of replicas per model, shared by its shards: per-replica limits and health are the model's.
            pool = ReplicaPool(settings.endpoints(), max_concurrency=in_flight, policy=entry.replicas)
            self._clients[entry.name] = [
                ModelClient(
                    settings, cache=cache, retry=retry, max_concurrency=per_shard, http_client=_http_client(per_shard),
                    replicas=pool, broker=self._broker,
                )
                for _ in range(n_shards)
            ]

    async def _run_async(
        self, episodes: list[Any], pending: list[Cell], cache: CallCache | None, base_urls: dict[str, str]
    ) -> bool:
        """Play the pending cells; returns True when interrupted by a signal."""
        self._make_clients(cache, base_urls, pending)
        loop = asyncio.get_running_loop()
        queue: deque[Cell] = deque(pending)
        writer = _TraceWriter(self.traces_path, self._counters, lambda message: self._fail(message, queue))
        writer.start()
        interrupted = False
        workers: list[asyncio.Task[None]] = []
        results: list[Any] = []

        def on_signal() -> None:
            nonlocal interrupted
            interrupted = True
            self._stopping = True
            for task in workers:
                task.cancel()

        installed: list[signal.Signals] = []
        for signum in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(signum, on_signal)
                installed.append(signum)
            except (ValueError, NotImplementedError, RuntimeError):
                pass  # not the main thread (tests, embedding): no signal handling
        progress = make_progress(self, len(pending))
        try:
            n_workers = min(self.config.concurrency, len(pending))
            shared_episodes = tuple(episodes)
            workers.extend(
                loop.create_task(self._worker(index, queue, writer, shared_episodes, progress))
                for index in range(n_workers)
            )
            ticker = loop.create_task(progress.tick()) if progress is not None else None
            watcher = (
                loop.create_task(self._stop_when_server_dies(self._local_server, queue, workers))
                if self._local_server is not None else None
            )
            try:
                results = await asyncio.gather(*workers, return_exceptions=True)
            finally:
                for task in (ticker, watcher):
                    if task is not None:
                        task.cancel()
                        with contextlib.suppress(asyncio.CancelledError):
                            await task
        finally:
            await writer.close()
            clients = [c for shards in self._clients.values() for c in shards]
            for client in [*clients, *([self._judge_client] if self._judge_client is not None else [])]:
                with contextlib.suppress(Exception):
                    await client.aclose()
            for signum in installed:
                loop.remove_signal_handler(signum)
            if progress is not None:
                progress.close()
        for result in results:
            if isinstance(result, BaseException) and not isinstance(result, asyncio.CancelledError):
                raise result
        return interrupted

    async def _stop_when_server_dies(
        self, server: LocalModelServer, queue: deque[Cell], workers: list[asyncio.Task[None]]
    ) -> None:
        """Abort the run the moment the embedded model's server dies: the cells in play are cancelled
        (not written, so a later run plays them), none is retried against a server that is gone."""
        message = await server.watch()
        self._abort(message, queue)
        for task in workers:
            task.cancel()

    def _abort(self, message: str, workers_queue: deque[Cell]) -> None:
        """Stop on a configuration error (the endpoint rejects the model, the cache is unusable)."""
        if self._fatal is None:
            self._fatal = message
        self._stopping = True
        workers_queue.clear()

    def _fail(self, message: str, workers_queue: deque[Cell]) -> None:
        """Stop because the machine cannot go on (the disk is full, the directory cannot be written)."""
        if self._failure is None:
            self._failure = message
        self._stopping = True
        workers_queue.clear()

    async def _worker(
        self,
        index: int,
        queue: deque[Cell],
        writer: TraceSink,
        episodes: tuple[Any, ...],
        progress: _Progress | _ProgressLines | None,
    ) -> None:
        envs: dict[tuple[str, bool], gym.Env[Any, Any]] = {}
        try:
            while queue and not self._stopping:
                cell = queue.popleft()
                label = (cell.arm.label(), cell.player.privileged)
                env = envs.get(label)
                if env is None:
                    env = envs[label] = self._make_env(cell, episodes)
                try:
                    trace = await self._play(cell, env, index)
                except ModelEndpointError as exc:
                    self._abort(str(exc), queue)
                    return
                except CacheError as exc:  # the cache went bad while playing: no further cell can use it
                    self._fail(str(exc), queue)
                    return
                line, infra_error = trace_line(trace, cell, self.config.env)
                del trace  # of a finished cell only its line is kept, until the writer has it on disk
                failure = f"{cell.player.name} {cell.episode_id} #{cell.sample}: {infra_error}" if infra_error else ""
                await writer.put(line, failure, cell.run_key)
                if progress is not None:
                    progress.advance()
        finally:
            for env in envs.values():
                with contextlib.suppress(Exception):
                    env.close()

    def _make_env(self, cell: Cell, episodes: tuple[Any, ...]) -> gym.Env[Any, Any]:
        """The suite's environment over the selection, wrapped with the cell's interventions (and, for a
        privileged player, the privileged channel outermost)."""
        suite = self.config.suite
        services = suite.services(self.play_services())
        env = apply_interventions(suite.make_env(episodes), cell.arm.stack, services=services)
        return RevealScriptAnnotations(env) if cell.player.privileged else env

    def play_services(self) -> PlayServices:
        """What the suite's interventions get from the harness while cells play: the run's judge, if in play."""
        judge = self.config.judge
        if self._judge_client is None or judge.model is None:
            return PlayServices()
        style = ResponseFormatStyle(judge.response_format or ("json_object" if judge.model.local else "json_schema"))
        return PlayServices(judge=self._judge_client, judge_style=style, judge_attempts=judge.max_attempts)

    async def _play(self, cell: Cell, env: gym.Env[Any, Any], worker: int = 0) -> EpisodeTrace:
        agent: Any
        chat: ChatAgent | None = None
        if cell.player.kind == "chat":
            assert cell.player.model is not None
            chat = self.config.suite.chat_agent(
                self._client_for(cell.player.model.name, worker),
                name=cell.player.name,
                sample_index=cell.sample,
                session_id=cell.run_key,
                max_model_calls_per_turn=self.config.calls_per_turn,
                protocol=cell.player.model.chat_protocol(),
                closing_call_without_tools=self.config.suite.closing_call_without_tools,
            )
            agent = chat
        else:
            agent = self.config.suite.reference_agents[cell.player.name]()
        failure: str | None = None
        truncated = False
        try:
            observation, info = env.reset(seed=self.config.seed, options={"episode_id": cell.episode_id})
            agent.begin(observation, info)
            for _ in range(MAX_STEPS_PER_EPISODE):
                action = agent.act(observation, info)
                if inspect.isawaitable(action):
                    action = await action
                observation, _, terminated, truncated, info = await play_step(env, action)
                if terminated or truncated:
                    break
            else:
                failure = f"crash: episode did not end within {MAX_STEPS_PER_EPISODE} steps"
        except CacheMiss as exc:
            failure = f"cache_miss: {exc}"
        except LabellerUnavailable as exc:  # the run's judge, in play as a flagger, could not be reached
            failure = f"judge: {exc}"
        except (ModelEndpointError, CacheError):
            raise
        except Exception as exc:  # a harness bug must not take the other cells down
            tail = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__, limit=-3))
            failure = f"crash: {type(exc).__name__}: {exc}\n{tail}"
        trace: EpisodeTrace | None = getattr(env.unwrapped, "trace", None)
        if trace is None or trace.episode_id != cell.episode_id:
            trace = EpisodeTrace(env_id=self.config.env, episode_id=cell.episode_id, factors={})
        trace.agent = cell.player.identity
        trace.interventions = cell.arm.names()
        trace.sample = cell.sample
        trace.run_key = cell.run_key
        trace.truncated = bool(truncated)
        hashes = dict(trace.prompt_hashes)  # interventions record the texts they add here
        system_events = [e for e in trace.events if e.kind.value == "system"]
        if system_events:
            hashes["system_prompt"] = hashlib.sha256(system_events[0].text.encode("utf-8")).hexdigest()
        if chat is not None:  # after what interventions recorded (a flagger's calls)
            trace.model_calls = [*trace.model_calls, *chat.model_calls]
            hashes["chat_render"] = RENDER_HASH
            failure = failure or chat.infra_error
        trace.prompt_hashes = hashes
        trace.infra_error = failure
        return trace

    def _client_for(self, model: str, worker: int) -> ModelClient:
        shards = self._clients[model]
        return shards[worker % len(shards)]

    # ------------------------------------------------------------------ progress data
    def client_stats(self) -> dict[str, ClientStats]:
        """The counters of each model's clients, added up per model."""
        return {name: merge_client_stats([c.stats() for c in shards]) for name, shards in self._clients.items()}

    def client_totals(self) -> ClientStats | None:
        stats = list(self.client_stats().values())
        return merge_client_stats(stats) if stats else None


def merge_client_stats(stats: Sequence[ClientStats]) -> ClientStats:
    """The counters of several clients added up (rates too; the elapsed time is the longest)."""
    errors: Counter[str] = Counter()
    replicas: Counter[str] = Counter()
    for s in stats:
        errors.update(s.errors)
        replicas.update(s.replica_requests)
    return ClientStats(
        calls=sum(s.calls for s in stats),
        completed=sum(s.completed for s in stats),
        in_flight=sum(s.in_flight for s in stats),
        http_requests=sum(s.http_requests for s in stats),
        retries=sum(s.retries for s in stats),
        cache_hits=sum(s.cache_hits for s in stats),
        cache_misses=sum(s.cache_misses for s in stats),
        prompt_tokens=sum(s.prompt_tokens for s in stats),
        completion_tokens=sum(s.completion_tokens for s in stats),
        errors=dict(errors),
        concurrency_limit=sum(s.concurrency_limit for s in stats),
        elapsed_s=max((s.elapsed_s for s in stats), default=0.0),
        calls_per_s=sum(s.calls_per_s for s in stats),
        replica_requests=dict(replicas),
        replica_moves=sum(s.replica_moves for s in stats),
    )


def _http_client(in_flight: int) -> Any:
    """An HTTP client that keeps a connection alive for every request in flight.

    The SDK's default pool keeps 100 idle connections: above that concurrency every response
    closes a connection and the next request opens a new one, which costs more CPU than the call.
    """
    import httpx2
    import openai

    return openai.DefaultAsyncHttpxClient(
        limits=httpx2.Limits(max_connections=max(1000, in_flight), max_keepalive_connections=max(100, in_flight))
    )


def make_progress(runner: Runner, total: int) -> _Progress | _ProgressLines | None:
    """The run's progress display for ``total`` cells: a bar on a terminal, lines every
    ``runner.progress_interval_s`` seconds otherwise, or none (``progress`` off, or nothing to play)."""
    if not runner.progress_enabled or total == 0:
        return None
    if runner.progress_enabled == PROGRESS_LINES:
        return _ProgressLines(runner, total, runner.progress_interval_s)
    return _Progress(runner, total)


class _ProgressLines:
    """For a run not attached to a terminal (a log, a pipe): one plain line on stderr every ``interval_s``
    seconds (cells done, model calls, elapsed time), and one at the end."""

    def __init__(self, runner: Runner, total: int, interval_s: float) -> None:
        self.runner = runner
        self.total = total
        self.interval_s = interval_s
        self.done = 0
        self.started = time.monotonic()

    def advance(self) -> None:
        self.done += 1

    def line(self) -> str:
        totals = self.runner.client_totals()
        calls = totals.calls if totals is not None else 0
        elapsed = time.monotonic() - self.started
        return (f"progress: {self.done}/{self.total} cells done, {calls} model calls, {elapsed:.0f} s elapsed, "
                f"{self.runner._counters.failed} failed")

    async def tick(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            print(self.line(), file=sys.stderr, flush=True)

    def close(self) -> None:
        print(self.line(), file=sys.stderr, flush=True)


class _Progress:
    """A rich progress bar refreshed from the event loop (no refresh thread)."""

    def __init__(self, runner: Runner, total: int) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.runner = runner
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[status]}"),
            auto_refresh=False,
            transient=False,
            console=Console(stderr=True),
        )
        self.task = self.progress.add_task(runner.config.name, total=total, status="")
        self.progress.start()

    def advance(self) -> None:
        self.progress.advance(self.task)

    def status_text(self) -> str:
        counters = self.runner._counters
        totals = self.runner.client_totals()
        parts = []
        if totals is not None:
            parts.append(f"{totals.calls_per_s:6.1f} calls/s")
            parts.append(f"cache {totals.cache_hits}/{totals.calls}")
            parts.append(f"tok {totals.prompt_tokens + totals.completion_tokens:,}")
            parts.append(f"retries {totals.retries}")
            errors = sum(totals.errors.values())
            parts.append(f"call errors {errors}")
        parts.append(f"failed cells {counters.failed}")
        return "  ".join(parts)

    async def tick(self) -> None:
        while True:
            self.progress.update(self.task, status=self.status_text())
            self.progress.refresh()
            await asyncio.sleep(0.25)

    def close(self) -> None:
        self.progress.update(self.task, status=self.status_text())
        self.progress.refresh()
        self.progress.stop()


def run_experiment(
    config: ExperimentConfig,
    out_dir: Path | str,
    *,
    progress: bool | str = False,
    argv: Sequence[str] | None = None,
    force: bool = False,
    shard: tuple[int, int] | None = None,
    local_server: Callable[[], LocalModelServer] | None = None,
) -> RunSummary:
    """Play every pending cell of ``config`` (of its shard ``(index, count)``, when given) into ``out_dir``.

    ``progress``: True for a progress bar (a terminal), ``"lines"`` for a plain line every
    :data:`PROGRESS_INTERVAL_S` seconds (a log or a pipe), False for nothing.

    Raises ValueError for a config that selects nothing or a directory that holds another
    experiment (unless ``force``); FileNotFoundError for a replay-only cache that does not exist;
    :class:`~commitbench.agents.local_model.LocalModelError` when the embedded model (a model with
    ``local: true``) cannot start, its self-test included. ``local_server`` makes the embedded model's
    server (default :class:`~commitbench.agents.local_model.LocalModelServer`); if it dies while cells
    play, the run stops at once, ``aborted`` with the server's exit code and last log lines.
    """
    runner = Runner(config, out_dir, progress=progress, argv=argv, force=force, shard=shard,
                    local_server=local_server)
    return runner.run()
