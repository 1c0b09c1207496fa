"""Playing cells: the models' clients, the environment of an arm, one episode's loop, the workers' queue.

A :class:`CellPlayer` is what a run plays with, in one process (the runner) or in each worker of a
distributed run (:mod:`commitbench.cluster`): it builds the clients of the config's models (through
the run's cache), makes each cell's agent (:class:`commitbench.agents.base.Agent`) and the suite's
environment wrapped with the arm's interventions, plays the episode, and hands the finished trace's
line to a :class:`~commitbench.tracewriter.TraceSink`. Episodes run as coroutines on one event loop;
environment steps are synchronous and cheap. A harness bug in one cell fails that cell alone.
"""

from __future__ import annotations

import contextlib
import inspect
import traceback
from collections import Counter, deque
from collections.abc import Sequence
from typing import Any, Protocol

import gymnasium as gym

import commitbench.envs  # noqa: F401 - registers the environments
from commitbench.agents.base import Agent
from commitbench.agents.chat import RENDER_HASH, ChatAgent
from commitbench.agents.harness import HarnessModel
from commitbench.agents.local_model import DEFAULT_ALIAS
from commitbench.cache import CacheError, CacheMiss, CallBroker, CallCache
from commitbench.config import ExperimentConfig
from commitbench.digests import digest
from commitbench.envs.privileged import RevealScriptAnnotations
from commitbench.judges.labelling import LabellerUnavailable, pin_judge_settings
from commitbench.llm import ClientStats, ModelClient, ModelEndpointError, ReplicaPool, RetryPolicy, merge_client_stats
from commitbench.llm.client import default_http_client
from commitbench.llm.structured import judge_style
from commitbench.oracles.base import play_reset, play_step
from commitbench.oracles.registry import apply_interventions
from commitbench.oracles.standing.parties import LIVE_NAME, PartyUnavailable
from commitbench.planning import Cell, PlayerKind
from commitbench.protocol import escape_surrogates
from commitbench.suites import PlayServices
from commitbench.traces import EpisodeTrace
from commitbench.tracewriter import TraceSink

__all__ = [
    "CONNECTIONS_PER_CLIENT", "JUDGE_KEY", "MAX_STEPS_PER_EPISODE", "Advancing", "CellPlayer", "http_client_for",
    "trace_line",
]

# The base URL slot of the embedded model when it serves as the judge in play.
JUDGE_KEY = "\0judge"
# A turn has at most a few tool calls and a script a few dozen messages: this bound only stops
# an environment or agent bug from looping forever.
MAX_STEPS_PER_EPISODE = 5_000
# A model with more requests in flight than this gets several clients, each with a pool of its own:
# httpx's own pool scanned every connection on every request, so its CPU cost per call grew with the
# connections open (the clients now send through aiohttp, and the shards stay: they cost nothing).
CONNECTIONS_PER_CLIENT = 64


class Advancing(Protocol):
    """What is told when a cell is finished (a progress display)."""

    def advance(self) -> None: ...


class CellPlayer:
    """Plays the cells of one config; see the module doc.

    ``broker``: in a worker of a distributed run, the driver's side of the shared cache (misses of the
    worker's copy go to it). ``judge_in_play``: build a client for the config's LLM judge, which an arm's
    interventions use while cells play (the rewrite fix's flagger).
    """

    def __init__(self, config: ExperimentConfig, *, broker: CallBroker | None = None,
                 judge_in_play: bool = False) -> None:
        self.config = config
        self.broker = broker
        self.judge_in_play = judge_in_play
        # Model name -> its clients. A model with many requests in flight gets several clients
        # (shards), each with its own connection pool: see CONNECTIONS_PER_CLIENT.
        self.clients: dict[str, list[ModelClient]] = {}
        self.judge_client: ModelClient | None = None
        self.stopping = False
        self.fatal: str | None = None  # a configuration error stopped play (the endpoint rejects the model)
        self.failure: str | None = None  # the machine stopped play (the disk is full, the cache went bad)

    # ------------------------------------------------------------------ clients
    def make_clients(
        self, cache: CallCache | None, base_urls: dict[str, str], pending: Sequence[Cell] | None = None
    ) -> None:
        """The clients of each model, for as many requests in flight as its cells can have at once: a cell
        makes one call at a time and at most ``concurrency`` cells play at once (of ``pending``, when given).
        ``base_urls``: model name (or :data:`JUDGE_KEY`) -> the base URL of a server started for the run."""
        cells_of: Counter[str] | None = None
        if pending is not None:
            cells_of = Counter(c.player.model.name for c in pending if c.player.model is not None)
            party = self.config.party_model
            if party is not None:  # the party model speaks in every live cell
                cells_of[party] += sum(LIVE_NAME in c.arm.names() for c in pending)
        judge = self.config.judge
        if self.judge_in_play and judge.model is not None:
            served = judge.model.model_settings(base_urls.get(JUDGE_KEY), local_alias=DEFAULT_ALIAS)
            self.judge_client = ModelClient(
                pin_judge_settings(served), cache=cache, retry=judge.model.retry,
                max_concurrency=self.config.concurrency, broker=self.broker,
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
            self.clients[entry.name] = [
                ModelClient(
                    settings, cache=cache, retry=retry, max_concurrency=per_shard,
                    http_client=http_client_for(per_shard), replicas=pool, broker=self.broker,
                )
                for _ in range(n_shards)
            ]

    def client_for(self, model: str, worker: int) -> ModelClient:
        """The client of ``model`` that worker ``worker`` uses (workers are spread over a model's shards)."""
        shards = self.clients[model]
        return shards[worker % len(shards)]

    def client_stats(self) -> dict[str, ClientStats]:
        """The counters of each model's clients, added up per model."""
        return {name: merge_client_stats([c.stats() for c in shards]) for name, shards in self.clients.items()}

    async def aclose(self) -> None:
        """Close every client (their connections)."""
        clients = [c for shards in self.clients.values() for c in shards]
        for client in [*clients, *([self.judge_client] if self.judge_client is not None else [])]:
            with contextlib.suppress(Exception):
                await client.aclose()

    # ------------------------------------------------------------------ stopping
    def abort(self, message: str, queue: deque[Cell]) -> None:
        """Stop on a configuration error (the endpoint rejects the model, the cache is unusable)."""
        if self.fatal is None:
            self.fatal = message
        self.stopping = True
        queue.clear()

    def fail(self, message: str, queue: deque[Cell]) -> None:
        """Stop because the machine cannot go on (the disk is full, the directory cannot be written)."""
        if self.failure is None:
            self.failure = message
        self.stopping = True
        queue.clear()

    # ------------------------------------------------------------------ playing
    async def work(
        self, index: int, queue: deque[Cell], sink: TraceSink, episodes: tuple[Any, ...],
        progress: Advancing | None = None,
    ) -> None:
        """One worker: take cells from ``queue`` until it is empty (or play stops), play each, hand its line
        to ``sink``. A worker keeps one environment per (arm, privileged) and closes them at the end."""
        envs: dict[tuple[str, bool], gym.Env[Any, Any]] = {}
        try:
            while queue and not self.stopping:
                cell = queue.popleft()
                label = (cell.arm.label(), cell.player.privileged)
                env = envs.get(label)
                if env is None:
                    env = envs[label] = self.make_env(cell, episodes)
                try:
                    trace = await self.play(cell, env, index)
                except ModelEndpointError as exc:
                    self.abort(str(exc), queue)
                    return
                except CacheError as exc:  # the cache went bad while playing: no further cell can use it
                    if exc.damaged:  # the file's fault, which running again does not mend: as at the start
                        self.abort(str(exc), queue)
                    else:  # the machine's (a full disk, a lock held too long): running again resumes
                        self.fail(str(exc), queue)
                    return
                line, infra_error = trace_line(trace, cell, self.config.env)
                del trace  # of a finished cell only its line is kept, until the sink has it
                failure = f"{cell.player.name} {cell.episode_id} #{cell.sample}: {infra_error}" if infra_error else ""
                await sink.put(line, failure, cell.run_key)
                if progress is not None:
                    progress.advance()
        finally:
            for env in envs.values():
                with contextlib.suppress(Exception):
                    env.close()

    def make_env(self, cell: Cell, episodes: tuple[Any, ...]) -> gym.Env[Any, Any]:
        """The suite's environment over the selection, wrapped with the cell's interventions (and, for a
        privileged player, the privileged channel outermost)."""
        suite = self.config.suite
        services = suite.services(self.play_services())
        env = apply_interventions(suite.make_env(episodes, self.config.texts), cell.arm.stack, services=services)
        return RevealScriptAnnotations(env) if cell.player.privileged else env

    def play_services(self) -> PlayServices:
        """What the suite's interventions get from the harness while cells play: the run's judge, if in play."""
        judge = self.config.judge
        if self.judge_client is None or judge.model is None:
            return PlayServices()
        style = judge_style(judge.response_format, judge.model.local)
        party = self.config.party_model
        party_client = self.client_for(party, 0) if party is not None and party in self.clients else None
        return PlayServices(judge=self.judge_client, judge_style=style, judge_attempts=judge.max_attempts,
                            party=party_client, party_budget=self.config.party_budget)

    def make_agent(self, cell: Cell, worker: int) -> tuple[Agent, ChatAgent | HarnessModel | None]:
        """The agent that plays ``cell``, and what records its model calls: the harness's chat agent itself, or
        the harness's model a player of the user's own was made with (None: the player calls no model)."""
        player = cell.player
        if player.kind == PlayerKind.CHAT:
            assert player.model is not None
            chat = self.config.suite.chat_agent(
                self.client_for(player.model.name, worker),
                name=player.name,
                sample_index=cell.sample,
                session_id=cell.run_key,
                max_model_calls_per_turn=self.config.calls_per_turn,
                protocol=player.model.chat_protocol(),
                closing_call_without_tools=self.config.suite.closing_call_without_tools,
            )
            return chat, chat
        assert player.factory is not None
        if player.model is not None:  # a player of the user's own that calls the run's model through the harness
            model = HarnessModel(self.client_for(player.model.name, worker), sample_index=cell.sample,
                                 session_id=cell.run_key)
            return player.factory(model), model
        return player.factory(), None

    async def play(self, cell: Cell, env: gym.Env[Any, Any], worker: int = 0) -> EpisodeTrace:
        """Play one cell to its end; the trace records what happened, and why the cell failed when it did
        (a configuration error or a broken cache raises: no further cell could do better)."""
        failure: str | None = None
        truncated = False
        chat: ChatAgent | HarnessModel | None = None
        try:
            agent, chat = self.make_agent(cell, worker)
            observation, info = await play_reset(env, seed=self.config.seed, options={"episode_id": cell.episode_id})
            begun = agent.begin(observation, info)
            if inspect.isawaitable(begun):
                await begun
            for _ in range(MAX_STEPS_PER_EPISODE):
                turn = info.get("turn")
                if isinstance(chat, HarnessModel) and isinstance(turn, int):
                    chat.turn = turn
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
        except PartyUnavailable as exc:  # the party model or its check could not be reached
            failure = f"party: {exc}"
        except (ModelEndpointError, CacheError):
            raise
        except Exception as exc:  # a harness bug (or a bug of the user's agent) must not take the other cells down
            tail = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__, limit=-3))
            failure = f"crash: {type(exc).__name__}: {exc}\n{tail}"
        return self._finish(cell, env, chat, failure, bool(truncated))

    def _finish(self, cell: Cell, env: gym.Env[Any, Any], chat: ChatAgent | HarnessModel | None,
                failure: str | None, truncated: bool) -> EpisodeTrace:
        """The cell's trace, stamped with who played it, under which arm, and the texts it saw."""
        trace: EpisodeTrace | None = getattr(env.unwrapped, "trace", None)
        if trace is None or trace.episode_id != cell.episode_id:
            trace = EpisodeTrace(env_id=self.config.env, episode_id=cell.episode_id, factors={})
        trace.agent = cell.player.identity
        trace.interventions = cell.arm.names()
        trace.sample = cell.sample
        trace.run_key = cell.run_key
        trace.truncated = truncated
        hashes = dict(trace.prompt_hashes)  # interventions record the texts they add here
        system_events = [e for e in trace.events if e.kind.value == "system"]
        if system_events:
            hashes["system_prompt"] = digest(system_events[0].text)
        if isinstance(chat, ChatAgent):  # after what interventions recorded (a flagger's calls)
            trace.model_calls = [*trace.model_calls, *chat.model_calls]
            hashes["chat_render"] = RENDER_HASH
            failure = failure or chat.infra_error
        elif isinstance(chat, HarnessModel):  # the calls of a player of the user's own, through the harness
            trace.model_calls = [*trace.model_calls, *chat.calls]
            failure = failure or chat.infra_error
        trace.prompt_hashes = hashes
        trace.infra_error = failure
        return trace


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


def http_client_for(in_flight: int) -> Any:
    """An HTTP client that keeps a connection alive for every request in flight.

    The SDK's default pool keeps 100 idle connections: above that concurrency every response
    closes a connection and the next request opens a new one, which costs more CPU than the call.
    """
    from commitbench.sdkhttp import http

    return default_http_client(
        http.Limits(max_connections=max(1000, in_flight), max_keepalive_connections=max(100, in_flight))
    )
