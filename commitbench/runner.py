"""The experiment runner: plays every cell of a config concurrently, resumably, with a manifest.

The pieces it puts together each have a module of their own: what a config plays
(:mod:`commitbench.planning`), the run directory's manifest, lock and provenance
(:mod:`commitbench.rundir`), which trace lines count (:mod:`commitbench.runcells`), the one trace
writer (:mod:`commitbench.tracewriter`), playing cells (:mod:`commitbench.cellplayer`) and the
progress display (:mod:`commitbench.progress`). A distributed run (:mod:`commitbench.cluster`) is
this runner with another play phase (:meth:`Runner.play_pending`).

Resume semantics: at start the runner drops a torn last line of ``traces.jsonl`` (a crash in
mid-write), reads the run keys already there, and plays only the cells without a good trace.
Cells whose trace records an infrastructure failure (``infra_error``: retries exhausted, a
replay-only cache miss, a crash of the harness) are played again; readers take the last good
trace per run key (:func:`latest_traces`), so nothing is ever counted twice. SIGINT / SIGTERM
stop the run cleanly: in-flight episodes are abandoned (their finished model calls stay in the
cache), finished traces are flushed, the manifest says ``interrupted``.

Episodes run as coroutines on one event loop, at most ``concurrency`` at a time. A single writer
appends finished traces in batches from a worker thread, so fsync never blocks the loop; its queue
is bounded, so players that never wait (a replay from the cache) wait for the disk instead of piling
traces up in memory. Of a finished cell the runner keeps only counters.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
import uuid
from collections import Counter, deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from commitbench import identity
from commitbench.agents.custom import CUSTOM_KIND
from commitbench.agents.local_model import LocalModelServer
from commitbench.cache import CacheError, CacheMode, CallCache
from commitbench.cellplayer import JUDGE_KEY, CellPlayer
from commitbench.config import ExperimentConfig
from commitbench.dataversion import DataCheck, UnversionedDataError
from commitbench.jsonl import repair_torn_tail
from commitbench.llm import ClientStats, merge_client_stats, redact_credentials
from commitbench.planning import (
    Cell,
    PlayerKind,
    cell_table,
    expand_cells,
    judge_serves,
    manifest_config,
    players,
    prompt_hashes,
    select_config_episodes,
)
from commitbench.progress import PROGRESS_INTERVAL_S, make_progress
from commitbench.runcells import scan_trace_file
from commitbench.rundir import (
    Invocation,
    RunDirectoryError,
    RunManifest,
    RunStatus,
    directory_lock,
    earlier_configs,
    git_state,
    mark_killed,
    now_iso,
    package_versions,
    read_manifest,
    reserve_space,
    write_final_manifest,
    write_manifest,
)
from commitbench.rundir.cells import CellTable, read_cell_table, write_cell_table
from commitbench.rundir.reader import legacy_cell_table
from commitbench.traces import TRACES_FILE
from commitbench.tracewriter import PlayCounters, TraceWriter

__all__ = ["AgentChangedError", "RunSummary", "Runner", "run_experiment"]


class AgentChangedError(ValueError):
    """A player of the user's own differs from the one the run directory was started with."""


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
    cache_replaced: int = Field(
        default=0, description="Cache entries that were no recorded completion: made again and written over."
    )
    cache_replaced_keys: list[str] = Field(default_factory=list, description="The first few of those entries' keys.")
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


class Runner:
    """Plays the pending cells of a config into a run directory. Use :func:`run_experiment`.

    Subclasses change the play phase only (:meth:`play_pending`); everything around it (the lock, the
    expansion, the trace file's repair and scan, the manifest, the cache, the embedded model's server)
    is this class's.
    """

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
        allow_unversioned: bool = False,
    ) -> None:
        if shard is not None and not 0 <= shard[0] < shard[1]:
            raise ValueError(f"shard {shard[0]}/{shard[1]}: the index must be at least 0 and below the count")
        self.config = config
        self.shard = shard
        self.out_dir = Path(out_dir)
        self.progress_mode = progress
        self.progress_interval_s = PROGRESS_INTERVAL_S
        self.argv = [redact_credentials(a) for a in (argv if argv is not None else sys.argv)]
        self.force = force
        self.allow_unversioned = allow_unversioned
        self.data_check: DataCheck | None = None
        self.traces_path = self.out_dir / TRACES_FILE
        self.counters = PlayCounters()
        self.player = CellPlayer(config)
        self.all_cells: list[Cell] = []  # every cell of the experiment (of every shard)
        # The directory's cell table: the experiment's cells and those of configs --force added before.
        self.cell_table = CellTable((), ())
        self._play_wall = 0.0
        self._play_cpu = 0.0
        # The embedded model's server, started for the run when a model is local (watched while cells play).
        self._local_server_factory = local_server or LocalModelServer
        self.local_server: LocalModelServer | None = None

    # ------------------------------------------------------------------ what the progress display reads
    @property
    def name(self) -> str:
        return self.config.name

    def failed_cells(self) -> int:
        return self.counters.failed

    def client_stats(self) -> dict[str, ClientStats]:
        """The counters of each model's clients, added up per model."""
        return self.player.client_stats()

    def client_totals(self) -> ClientStats | None:
        stats = list(self.client_stats().values())
        return merge_client_stats(stats) if stats else None

    # ------------------------------------------------------------------ preparation
    def prepare(self) -> tuple[list[Any], list[Cell], list[Cell], int]:
        """Expand the config, repair the trace file and find pending cells: (episodes, this directory's
        cells, those without a good trace, bytes of a torn last line dropped)."""
        episodes = select_config_episodes(self.config)
        cells = self.all_cells = expand_cells(self.config, episodes)
        # Every line must be a trace of a cell of the experiment (of any shard), or of an experiment whose
        # cells --force added to the directory: the rule 'merge' and every reader apply too.
        table = cell_table(self.config, cells)
        previous = read_manifest(self.out_dir)
        if previous is not None:
            self._check_custom_players(previous)
            held = read_cell_table(self.out_dir, previous.cells_hash)
            if held is None:  # a directory written before cell tables: its configs are expanded once, here
                same = previous.config_hash == identity.config_hash(manifest_config(self.config))
                held = legacy_cell_table(previous, skip_config=same)
            table = table.superseding(held)
        self.cell_table = table.of_shard(self.shard)
        known = table.facts()
        if self.shard is not None:  # this directory holds one shard of the experiment ('commitbench merge' joins them)
            cells = [c for c in cells if identity.in_shard(c.run_key, self.shard)]
        self.out_dir.mkdir(parents=True, exist_ok=True)
        torn = repair_torn_tail(self.traces_path)
        status = scan_trace_file(self.traces_path, known)
        pending = [c for c in cells if not status.get(c.run_key, False)]
        return episodes, cells, pending, torn

    def _check_custom_players(self, previous: RunManifest) -> None:
        """Refuse to resume with a player of the user's own that changed since the directory was started."""
        recorded = {p.get("name"): p for p in previous.players if p.get("kind") == CUSTOM_KIND}
        for player in players(self.config):
            before = recorded.get(player.name)
            if player.kind == PlayerKind.CUSTOM and before is not None:
                now = player.identity.model_dump(mode="json")
                if now != before and not self.force:
                    raise AgentChangedError(
                        f"agent {player.name} is not the one {self.out_dir} was played with (its identity was "
                        f"{before.get('settings')}, it is now {now.get('settings')}): its code or identity changed, "
                        "so its cells are another experiment; use another --out directory, or --force to add them"
                    )

    def cache_path(self) -> Path:
        return self.config.cache.path if self.config.cache.path is not None else self.out_dir / "cache.sqlite"

    # ------------------------------------------------------------------ running
    def run(self) -> RunSummary:
        """Play the pending cells; one process at a time per directory (a lock file guards it)."""
        select_config_episodes(self.config)  # data that does not compile is that error first (compiled once)
        self.data_check = self.config.suite.data_check(self.config.episodes)
        if self.data_check is not None and not self.data_check.ok and not self.allow_unversioned:
            raise UnversionedDataError(
                f"{self.data_check.message()}; or play it as it is with --allow-unversioned (the manifest records "
                "the data's digest and state)"
            )
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
            manifest = self._begin_manifest(cells, len(episodes), len(pending))
            write_cell_table(self.out_dir, self.cell_table)  # before any cell plays: the directory describes itself
        except OSError as exc:  # nothing has been played: the directory cannot take a run
            raise RunDirectoryError(self.out_dir, exc) from None
        reserve_space(self.out_dir)
        invocation = manifest.invocations[-1]
        status, message = RunStatus.COMPLETE, ""
        cache: CallCache | None = None
        try:
            base_urls, cache = self._open_services(pending, manifest.run_id)
            play_wall, play_cpu = time.perf_counter(), time.process_time()
            try:
                interrupted = asyncio.run(self.play_pending(episodes, pending, cache, base_urls))
            finally:
                self._play_wall = time.perf_counter() - play_wall
                self._play_cpu = time.process_time() - play_cpu
            status, message = self._status(interrupted)
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
            self._close_services(cache)
            status, message, cells_done = self._end_manifest(manifest, invocation, cells, status, message)
        return self._summary(status, message, cells, pending, cells_done, torn, started)

    def _open_services(self, pending: list[Cell], run_id: str) -> tuple[dict[str, str], CallCache | None]:
        """Start the embedded model's server when a pending cell (or the judge in play) needs it, and open
        the cache; (model name -> base URL of a server started for the run, the cache)."""
        model_pending = [c for c in pending if c.player.model is not None]  # the chat agent's, and own agents'
        judge_in_play = judge_serves(self.config, [c.arm for c in pending])
        self.player.judge_in_play = judge_in_play
        judge_model = self.config.judge.model
        local_judge = judge_in_play and judge_model is not None and judge_model.local
        base_urls: dict[str, str] = {}
        mode = CacheMode(self.config.cache.mode)
        local_player = any(c.player.model is not None and c.player.model.local for c in model_pending)
        party = self.config.party_entry()
        if party is not None and party.local and judge_in_play:  # the embedded model voices the live parties
            local_player = True
        if mode is not CacheMode.REPLAY_ONLY and (local_player or local_judge):
            server = self.local_server = self._local_server_factory().start()
            base_urls.update({e.name: server.base_url for e in self.config.models if e.local})
            if local_judge:
                base_urls[JUDGE_KEY] = server.base_url
        cache = None
        if (model_pending or judge_in_play) and mode is not CacheMode.OFF:
            cache = CallCache(self.cache_path(), self.config.cache.mode, run_id=run_id)
        return base_urls, cache

    def _close_services(self, cache: CallCache | None) -> None:
        if cache is not None:
            with contextlib.suppress(CacheError):
                cache.close()
        if self.local_server is not None:
            self.local_server.stop()
            self.local_server = None

    def _status(self, interrupted: bool) -> tuple[RunStatus, str]:
        """How the play phase ended."""
        if interrupted:
            return RunStatus.INTERRUPTED, ""
        if self.player.failure is not None:
            return RunStatus.FAILED, self.player.failure
        if self.player.fatal is not None:
            return RunStatus.ABORTED, self.player.fatal
        if self.counters.failed:
            return RunStatus.INCOMPLETE, ""
        return RunStatus.COMPLETE, ""

    def _begin_manifest(self, cells: list[Cell], n_episodes: int, n_pending: int) -> RunManifest:
        previous = read_manifest(self.out_dir)
        suite = self.config.suite
        cells_hash = identity.cells_hash(c.run_key for c in cells)
        if previous is not None:
            # Never mixed, not even with --force: the traces of two versions cannot be read together.
            suite.check_set_version(previous.episode_set_version, self.out_dir, self.config.episodes)
        if previous is not None and previous.cells_hash != cells_hash and not self.force:
            raise ValueError(
                f"{self.out_dir} holds a different experiment (cells hash {previous.cells_hash[:12]}, this config "
                f"{cells_hash[:12]}); use another --out directory, or --force to add these cells to it"
            )
        config_json = manifest_config(self.config)
        now = now_iso()
        seeds: dict[str, int | None] = {"env_reset": self.config.seed}
        for entry in self.config.models:
            seeds[f"sampling:{entry.name}"] = entry.settings.seed
        invocation = Invocation(
            started_at=now, pid=os.getpid(), argv=self.argv, cells_pending=n_pending,
            cache_mode=CacheMode(self.config.cache.mode).value,
        )
        earlier = mark_killed(list(previous.invocations) if previous is not None else [], now)
        manifest = RunManifest(
            name=self.config.name,
            suite=suite.name,
            run_id=previous.run_id if previous is not None else uuid.uuid4().hex,
            status=RunStatus.RUNNING,
            config=config_json,
            config_hash=identity.config_hash(config_json),
            cells_hash=cells_hash,
            cells_total=len(cells),
            cells_done=len(cells) - n_pending,
            players=[p.identity.model_dump(mode="json") for p in players(self.config)],
            interventions=[arm.label() for arm in self.config.interventions],
            episodes=n_episodes,
            samples=self.config.samples,
            seeds=seeds,
            prompt_hashes=prompt_hashes(self.config),
            episode_set_version=suite.set_version(self.config.episodes),
            episode_data_digest=self.data_check.digest if self.data_check is not None else None,
            episode_data_state=self.data_check.state.value if self.data_check is not None else None,
            packages=package_versions(),
            git=git_state(),
            started_at=previous.started_at if previous is not None else now,
            updated_at=now,
            invocations=[*earlier, invocation],
            earlier_configs=earlier_configs(previous, cells_hash),
        )
        write_manifest(self.out_dir, manifest)
        return manifest

    def _end_manifest(self, manifest: RunManifest, invocation: Invocation, cells: list[Cell], status: RunStatus,
                      message: str) -> tuple[RunStatus, str, int]:
        """Record how the invocation ended; (status, message, cells with a good trace)."""
        done_now = scan_trace_file(self.traces_path)
        cells_done = sum(1 for c in cells if done_now.get(c.run_key, False))
        if status is RunStatus.COMPLETE and cells_done < len(cells):
            status = RunStatus.INCOMPLETE
        invocation.ended_at = now_iso()
        invocation.status = status
        invocation.message = message
        invocation.cells_done = self.counters.done
        invocation.cells_failed = self.counters.failed
        invocation.client_stats = {name: stats.model_dump() for name, stats in self.client_stats().items()}
        manifest.status = status
        manifest.message = message
        manifest.cells_done = cells_done
        manifest.ended_at = invocation.ended_at
        manifest.updated_at = invocation.ended_at
        unwritten = write_final_manifest(self.out_dir, manifest)
        if unwritten:
            status = RunStatus.FAILED
            message = f"{message}; {unwritten}" if message else unwritten
        return status, message, cells_done

    def _summary(self, status: RunStatus, message: str, cells: list[Cell], pending: list[Cell], cells_done: int,
                 torn: int, started: float) -> RunSummary:
        stats = list(self.client_stats().values())
        errors: Counter[str] = Counter()
        for s in stats:
            errors.update(s.errors)
        return RunSummary(
            out_dir=str(self.out_dir),
            status=status,
            cells_total=len(cells),
            cells_skipped=len(cells) - len(pending),
            cells_done=self.counters.done,
            cells_failed=self.counters.failed,
            cells_remaining=len(cells) - cells_done,
            torn_bytes_dropped=torn,
            model_calls=sum(s.calls for s in stats),
            http_requests=sum(s.http_requests for s in stats),
            cache_hits=sum(s.cache_hits for s in stats),
            cache_replaced=sum(s.cache_replaced for s in stats),
            cache_replaced_keys=[key for s in stats for key in s.cache_replaced_keys][:5],
            retries=sum(s.retries for s in stats),
            prompt_tokens=sum(s.prompt_tokens for s in stats),
            completion_tokens=sum(s.completion_tokens for s in stats),
            errors=dict(errors),
            failures=list(self.counters.failures),
            wall_s=time.perf_counter() - started,
            play_wall_s=self._play_wall,
            play_cpu_s=self._play_cpu,
            message=message,
        )

    # ------------------------------------------------------------------ the play phase
    def on_write_error(self, message: str, queue: deque[Cell]) -> None:
        """The trace file cannot be written any more: play stops, the run ends 'failed'."""
        self.player.fail(message, queue)

    async def play_pending(
        self, episodes: list[Any], pending: list[Cell], cache: CallCache | None, base_urls: dict[str, str]
    ) -> bool:
        """Play the pending cells in this process; returns True when interrupted by a signal."""
        player = self.player
        player.make_clients(cache, base_urls, pending)
        loop = asyncio.get_running_loop()
        queue: deque[Cell] = deque(pending)
        writer = TraceWriter(self.traces_path, self.counters, lambda message: self.on_write_error(message, queue))
        writer.start()
        workers: list[asyncio.Task[None]] = []
        results: list[Any] = []
        stop = _SignalStop(loop, lambda: _cancel(player, workers))
        progress = make_progress(self, len(pending), self.progress_mode, self.progress_interval_s)
        try:
            shared_episodes = tuple(episodes)
            workers.extend(
                loop.create_task(player.work(index, queue, writer, shared_episodes, progress))
                for index in range(min(self.config.concurrency, len(pending)))
            )
            ticker = loop.create_task(progress.tick()) if progress is not None else None
            server = self.local_server
            watcher = loop.create_task(self._stop_when_server_dies(server, queue, workers)) if server else None
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
            await player.aclose()
            stop.remove()
            if progress is not None:
                progress.close()
        for result in results:
            if isinstance(result, BaseException) and not isinstance(result, asyncio.CancelledError):
                raise result
        return stop.fired

    async def _stop_when_server_dies(
        self, server: LocalModelServer, queue: deque[Cell], workers: list[asyncio.Task[None]]
    ) -> None:
        """Abort the run the moment the embedded model's server dies: the cells in play are cancelled
        (not written, so a later run plays them), none is retried against a server that is gone."""
        message = await server.watch()
        self.player.abort(message, queue)
        for task in workers:
            task.cancel()


def _cancel(player: CellPlayer, workers: list[asyncio.Task[None]]) -> None:
    player.stopping = True
    for task in workers:
        task.cancel()


class _SignalStop:
    """SIGINT and SIGTERM call ``on_signal`` while installed (in the main thread; elsewhere they cannot be)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, on_signal: Callable[[], None]) -> None:
        self.loop = loop
        self.fired = False
        self.installed: list[signal.Signals] = []

        def handler() -> None:
            self.fired = True
            on_signal()

        for signum in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(signum, handler)
                self.installed.append(signum)
            except (ValueError, NotImplementedError, RuntimeError):
                pass  # not the main thread (tests, embedding): no signal handling

    def remove(self) -> None:
        for signum in self.installed:
            self.loop.remove_signal_handler(signum)


def run_experiment(
    config: ExperimentConfig,
    out_dir: Path | str,
    *,
    progress: bool | str = False,
    argv: Sequence[str] | None = None,
    force: bool = False,
    shard: tuple[int, int] | None = None,
    local_server: Callable[[], LocalModelServer] | None = None,
    allow_unversioned: bool = False,
) -> RunSummary:
    """Play every pending cell of ``config`` (of its shard ``(index, count)``, when given) into ``out_dir``.

    ``progress``: True for a progress bar (a terminal), ``"lines"`` for a plain line every
    :data:`~commitbench.progress.PROGRESS_INTERVAL_S` seconds (a log or a pipe), False for nothing.

    Raises ValueError for a config that selects nothing or a directory that holds another
    experiment (unless ``force``), :class:`AgentChangedError` when a player of the user's own changed
    since the directory was started; FileNotFoundError for a replay-only cache that does not exist;
    :class:`~commitbench.agents.local_model.LocalModelError` when the embedded model (a model with
    ``local: true``) cannot start, its self-test included. ``local_server`` makes the embedded model's
    server (default :class:`~commitbench.agents.local_model.LocalModelServer`); if it dies while cells
    play, the run stops at once, ``aborted`` with the server's exit code and last log lines.
    :class:`~commitbench.dataversion.UnversionedDataError` (a ValueError) when the episode data's files are
    not the ones its VERSION was locked with, unless ``allow_unversioned``.
    """
    runner = Runner(config, out_dir, progress=progress, argv=argv, force=force, shard=shard,
                    local_server=local_server, allow_unversioned=allow_unversioned)
    return runner.run()
