"""Distributed runs on Ray: actors play the cells, the driver alone writes the run directory.

    commitbench run CONFIG --ray                 # a local Ray started for the run (2 workers)
    commitbench run CONFIG --ray ADDRESS --workers 16

Needs the optional extra ``pip install 'commitbench[ray]'``. ``docs/scale-out.md`` has the recipes.

How it works
------------
The driver is the ordinary runner (:class:`~commitbench.runner.Runner`): it takes the directory's
lock, expands the config into cells, repairs and scans ``traces.jsonl`` for the cells still to
play, writes the manifest, opens the cache and writes every finished trace through the one trace
writer (:mod:`commitbench.tracewriter`). Only its play phase differs: instead of playing cells it
deals them out to ``--workers`` Ray actors (:class:`CellWorker`). Each actor expands the same config
and plays its cells with the same cell player (:class:`~commitbench.cellplayer.CellPlayer`, the
config's ``concurrency`` episodes at a time in each actor), and streams back what a one-process run would
have written: the trace lines, and the cache entries.

The cache: each actor reads a copy of the run's cache taken when the run starts (shipped once
through Ray's object store), and asks the driver on a miss of its copy. The driver answers with
the entry when one was recorded since (by another actor), or grants the actor a lease on that
call: the actor calls the model, and any other actor asking for the same call meanwhile waits for
its answer. The actor settles the lease with the completion, which the driver writes to the cache
at once, as a one-process run does. So a replay reads every call from a local file (no round
trip per call), one call gets one answer across all the actors (two answers to one key would
leave a trace that disagrees with the cache, and a replay that diverges), and the driver is the
only writer of the cache file. A cache served only by the driver would cost a round trip per
lookup; a snapshot without the driver would let two actors record two answers to one call; a
cache actor would be a second copy to keep in step and a second writer.

Dealing: the driver keeps each actor a little more than ``concurrency`` cells ahead, in the
config's order, and hands it more as its traces come back. A cell is finished when the driver has
its trace; an actor that dies (its node is lost, its process killed) is killed for good, its
unfinished cells go back to the front of the queue for the other actors, its leases pass to the
actors waiting for them, and a new actor is started in its place (at most ``workers`` times in a
run). A trace that arrives for a cell already finished is dropped, so no cell is written twice,
and since every cell stays queued until its trace is on disk, none is lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import os
import platform
import shutil
import signal
import sys
import tempfile
import time
from collections import defaultdict, deque
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from commitbench import __version__, identity
from commitbench.cache import CacheMiss, CacheMode, CallCache
from commitbench.cellplayer import CellPlayer
from commitbench.config import ExperimentConfig
from commitbench.llm import ClientStats, merge_client_stats, parse_cache_entry
from commitbench.planning import Cell, expand_cells, judge_serves, prompt_hashes, select_config_episodes
from commitbench.progress import Progress, make_progress
from commitbench.runner import Runner, RunSummary
from commitbench.tracewriter import TraceWriter

__all__ = ["NAMESPACE", "CellWorker", "RayOptions", "RayRunner", "RayUnavailableError", "run_on_ray"]

# The Ray namespace of the actors; each is named commitbench-<run id>-w<index>.
NAMESPACE = "commitbench"
# Seconds an actor may take to come up (its node may have to be started by the autoscaler).
START_TIMEOUT_S = 600.0
# Seconds between the counters an actor sends along with its traces.
STATS_INTERVAL_S = 1.0


class RayUnavailableError(RuntimeError):
    """Ray is not installed (the ``ray`` extra)."""


def _ray() -> Any:
    """The ray module, imported on first use (it is an optional extra)."""
    try:
        return importlib.import_module("ray")
    except ImportError:
        raise RayUnavailableError(
            "distributed runs need Ray: pip install 'commitbench[ray]' (on the driver and on every node)"
        ) from None


class RayOptions(BaseModel):
    """Where and how wide a distributed run plays."""

    address: str | None = Field(
        default=None, description="Address of a running Ray cluster (null: start a local Ray for the run)."
    )
    workers: int = Field(default=2, ge=1, description="Ray actors playing cells, each with the config's concurrency.")
    replacements: int | None = Field(
        default=None, ge=0, description="Actors started in place of lost ones, at most (null: as many as workers)."
    )
    start_timeout_s: float = Field(default=START_TIMEOUT_S, gt=0, description="Seconds an actor may take to start.")


# ----------------------------------------------------------------------------- the actor
# An actor's scratch directory (its cache copy) is TMP/commitbench-worker-<pid>-<random>.
WORKER_DIR_PREFIX = "commitbench-worker-"


def _remove_dead_workers_dirs() -> None:
    """Remove the scratch directories of actors on this node whose process is gone (killed, node restarted)."""
    for path in Path(tempfile.gettempdir()).glob(f"{WORKER_DIR_PREFIX}*-*"):
        pid = path.name[len(WORKER_DIR_PREFIX):].split("-", 1)[0]
        if not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(path, ignore_errors=True)
        except OSError:
            continue  # alive, another user's


class _Claims:
    """The actor's side of the shared cache (a :class:`~commitbench.cache.CallBroker`): misses go to the driver."""

    def __init__(self, outbox: asyncio.Queue[tuple[Any, ...]]) -> None:
        self.outbox = outbox
        self.waiting: dict[int, asyncio.Future[tuple[str, Any]]] = {}
        self.next_id = 0

    async def claim(self, key: str, model: str) -> dict[str, Any] | None:
        self.next_id += 1
        request = self.next_id
        future: asyncio.Future[tuple[str, Any]] = asyncio.get_running_loop().create_future()
        self.waiting[request] = future
        self.outbox.put_nowait(("claim", request, key, model))
        try:
            verdict, value = await future
        except asyncio.CancelledError:
            self.outbox.put_nowait(("withdraw", request, key))  # a lease granted meanwhile goes to the next
            raise
        finally:
            self.waiting.pop(request, None)
        if verdict == "entry":
            return dict(value)
        if verdict == "miss":
            raise CacheMiss(key, model)
        return None  # the lease: this actor makes the call

    def settle(self, key: str, model: str, value: dict[str, Any] | None) -> None:
        self.outbox.put_nowait(("settle", key, model, value))

    def answer(self, replies: Sequence[tuple[int, str, Any]]) -> None:
        for request, verdict, value in replies:
            future = self.waiting.get(request)
            if future is not None and not future.done():
                future.set_result((verdict, value))


class _Outbox:
    """Where the actor's players put finished traces (a :class:`~commitbench.tracewriter.TraceSink`)."""

    def __init__(self, outbox: asyncio.Queue[tuple[Any, ...]]) -> None:
        self.outbox = outbox

    async def put(self, line: str, failure: str, run_key: str) -> None:
        self.outbox.put_nowait(("trace", run_key, line, failure))


class CellWorker:
    """A Ray actor that plays the cells the driver hands it (wrapped with ``ray.remote`` when used).

    It plays with a cell player built from the same config, against a copy of the run's cache, and
    streams traces, cache claims and settlements and its counters back through :meth:`stream`.
    """

    def __init__(
        self, config: dict[str, Any], base_urls: dict[str, str], snapshot: bytes | None, run_id: str
    ) -> None:
        self.config = ExperimentConfig.model_validate(config)
        _remove_dead_workers_dirs()
        self.dir = Path(tempfile.mkdtemp(prefix=f"{WORKER_DIR_PREFIX}{os.getpid()}-"))
        episodes = select_config_episodes(self.config)
        self.episodes = tuple(episodes)
        self.cells = {cell.run_key: cell for cell in expand_cells(self.config, episodes)}
        self.base_urls = base_urls
        self.outbox: asyncio.Queue[tuple[Any, ...]] = asyncio.Queue()
        self.sink = _Outbox(self.outbox)
        self.cache: CallCache | None = None
        self.claims: _Claims | None = None
        if CacheMode(self.config.cache.mode) is not CacheMode.OFF:
            path = self.dir / "cache.sqlite"
            if snapshot:
                path.write_bytes(snapshot)
            self.cache = CallCache(path, CacheMode.READ_WRITE, run_id=run_id)
            self.claims = _Claims(self.outbox)
        # The judge serves the arms' interventions here as in the driver (the live parties' check, the flagger).
        self.player = CellPlayer(self.config, broker=self.claims,
                                 judge_in_play=judge_serves(self.config, self.config.interventions))
        self.queue: deque[Cell] = deque()
        self.tasks: set[asyncio.Task[None]] = set()
        self.next_index = 0
        self.clients_made = False
        self.reported = False
        self.closed = False

    def describe(self) -> dict[str, Any]:
        """What the driver checks before dealing cells: the same cells, prompts and version."""
        return {
            "pid": os.getpid(),
            "node": platform.node(),
            "version": __version__,
            "cells_hash": identity.cells_hash(self.cells),
            "prompt_hashes": prompt_hashes(self.config),
        }

    async def submit(self, keys: list[str]) -> None:
        """Queue cells (by run key) and start players for them, up to the config's concurrency."""
        if self.closed:
            return
        if not self.clients_made:
            self.player.make_clients(self.cache, self.base_urls)
            self.clients_made = True
        self.queue.extend(self.cells[key] for key in keys)
        while self.queue and len(self.tasks) < self.config.concurrency and not self.player.stopping:
            task = asyncio.get_running_loop().create_task(self._play(self.next_index % self.config.concurrency))
            self.next_index += 1
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    async def _play(self, index: int) -> None:
        try:
            await self.player.work(index, self.queue, self.sink, self.episodes)
        finally:
            stop = self.player.fatal or self.player.failure
            if stop and not self.reported:
                self.reported = True
                self.outbox.put_nowait(("fatal" if self.player.fatal else "failure", stop))

    def answer(self, replies: list[tuple[int, str, Any]]) -> None:
        """The driver's answers to cache claims."""
        if self.claims is not None:
            self.claims.answer(replies)

    async def stream(self) -> AsyncIterator[list[tuple[Any, ...]]]:
        """Everything for the driver, in batches, until :meth:`close` (a Ray streaming generator)."""
        last_stats = 0.0
        while True:
            batch = [await self.outbox.get()]
            while not self.outbox.empty():
                batch.append(self.outbox.get_nowait())
            closing = any(item[0] == "closed" for item in batch)
            if not closing and time.monotonic() - last_stats >= STATS_INTERVAL_S:
                batch.append(("stats", self.stats()))
                last_stats = time.monotonic()
            yield batch
            if closing:
                return

    def stats(self) -> dict[str, dict[str, Any]]:
        return {name: stats.model_dump() for name, stats in self.player.client_stats().items()}

    async def close(self) -> None:
        """Stop playing, close the clients and the cache copy, send the last counters, end the stream."""
        if self.closed:
            return
        self.closed = True
        self.player.stopping = True
        for task in list(self.tasks):
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        await self.player.aclose()
        if self.cache is not None:
            with contextlib.suppress(Exception):
                self.cache.close()
        self.outbox.put_nowait(("closed", self.stats()))
        shutil.rmtree(self.dir, ignore_errors=True)

    def pid(self) -> int:
        return os.getpid()


# ----------------------------------------------------------------------------- the driver
class _Handle:
    """The driver's view of one actor."""

    def __init__(self, index: int, name: str, actor: Any) -> None:
        self.index = index
        self.name = name
        self.actor = actor
        self.assigned: dict[str, Cell] = {}  # run key -> cell dealt to it and not finished yet
        self.starting = True
        self.alive = False
        self.pid: int | None = None
        self.task: asyncio.Task[None] | None = None


class _Dispatcher:
    """Deals the pending cells out to the actors, writes what comes back, and keeps the cache's leases."""

    def __init__(self, runner: RayRunner, ray: Any, pending: list[Cell], cache: CallCache | None,
                 base_urls: dict[str, str], run_id: str) -> None:
        self.runner = runner
        self.ray = ray
        self.options = runner.options
        self.queue: deque[Cell] = deque(pending)
        self.cache = cache
        self.base_urls = base_urls
        self.run_id = run_id
        self.replay_only = CacheMode(runner.config.cache.mode) is CacheMode.REPLAY_ONLY
        concurrency = runner.config.concurrency
        self.window = concurrency + max(1, concurrency // 2)  # cells dealt to an actor and not finished, at most
        self.refill = max(1, concurrency // 4)  # deal again once this many have finished
        self.handles: list[_Handle] = []
        self.replacements = self.options.replacements if self.options.replacements is not None else self.options.workers
        self.finished_keys: set[str] = set()
        self.leases: dict[str, tuple[_Handle, int]] = {}
        self.unusable: set[str] = set()  # keys whose stored entry is no recorded completion, being made again
        self.waiters: dict[str, deque[tuple[_Handle, int]]] = {}
        self.done = asyncio.Event()
        self.writer: TraceWriter | None = None
        self.progress: Progress | None = None
        self.snapshot: Any = None
        self.config_json = runner.config.model_dump(mode="json")
        self.expected_cells = identity.cells_hash(c.run_key for c in runner.all_cells)
        self.remote_class = ray.remote(CellWorker)
        self.expected_prompts = prompt_hashes(runner.config)
        self.lost: list[str] = []

    # ---------------------------------------------------------------- lifecycle
    async def run(self) -> bool:
        """Play every pending cell on the actors; returns True when interrupted by a signal."""
        loop = asyncio.get_running_loop()
        self.writer = TraceWriter(self.runner.traces_path, self.runner.counters, self._on_write_error)
        self.writer.start()
        interrupted = False

        def on_signal() -> None:
            nonlocal interrupted
            interrupted = True
            self.runner.player.stopping = True
            self.done.set()

        installed: list[signal.Signals] = []
        for signum in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(signum, on_signal)
                installed.append(signum)
            except (ValueError, NotImplementedError, RuntimeError):
                pass  # not the main thread: no signal handling
        runner = self.runner
        self.progress = make_progress(runner, len(self.queue), runner.progress_mode, runner.progress_interval_s)
        ticker = loop.create_task(self.progress.tick()) if self.progress is not None else None
        try:
            if self.queue:
                self.snapshot = self._snapshot()
                for index in range(self.options.workers):
                    self._start(index)
                await self.done.wait()
        finally:
            if ticker is not None:
                ticker.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await ticker
            await self._close_actors()
            await self.writer.close()
            for signum in installed:
                loop.remove_signal_handler(signum)
            if self.progress is not None:
                self.progress.close()
        return interrupted

    def _snapshot(self) -> Any:
        """The cache copy every actor starts from, in Ray's object store (None without a cache)."""
        if self.cache is None:
            return None
        with tempfile.TemporaryDirectory(prefix="commitbench-snapshot-") as tmp:
            path = Path(tmp) / "cache.sqlite"
            self.cache.copy_to(path)
            return self.ray.put(path.read_bytes())

    def _start(self, index: int) -> None:
        remote = self.remote_class.options(
            name=f"commitbench-{self.run_id[:12]}-w{index}", namespace=NAMESPACE, num_cpus=1, max_restarts=0,
        )
        actor = remote.remote(self.config_json, self.base_urls, self.snapshot, self.run_id)
        handle = _Handle(index, f"w{index}", actor)
        self.handles.append(handle)
        handle.task = asyncio.get_running_loop().create_task(self._serve(handle))

    async def _serve(self, handle: _Handle) -> None:
        """Start the actor, deal it cells and take in what it streams back, until it closes or is lost."""
        errors = self.ray.exceptions.RayError
        try:
            info = await asyncio.wait_for(_await(handle.actor.describe.remote()), self.options.start_timeout_s)
            problem = self._mismatch(info)
            if problem is not None:
                self.runner.player.abort(problem, self.queue)
                self.done.set()
                return
            handle.pid = info["pid"]
            handle.starting, handle.alive = False, True
            self._deal(handle, force=True)
            async for ref in handle.actor.stream.remote():
                batch = await ref
                closed = await self._take(handle, batch)
                if closed:
                    break
        except asyncio.CancelledError:
            raise
        except (errors, TimeoutError) as exc:
            self._lose(handle, exc)
        finally:
            handle.starting = False
            self._check_done()

    def _mismatch(self, info: dict[str, Any]) -> str | None:
        where = f"the Ray worker on {info.get('node')} (commitbench {info.get('version')})"
        if info.get("cells_hash") != self.expected_cells:
            return (f"{where} expands the config to other cells than the driver (commitbench {__version__}); "
                    "install the same commitbench and episode data on every node")
        if info.get("prompt_hashes") != self.expected_prompts:
            return f"{where} renders other prompts than the driver; install the same commitbench on every node"
        return None

    async def _close_actors(self) -> None:
        live = [h for h in self.handles if h.alive]
        for handle in live:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(_await(handle.actor.close.remote()), 30.0)
        for handle in self.handles:
            if handle.task is not None and not handle.task.done():
                with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError, Exception):
                    await asyncio.wait_for(asyncio.shield(handle.task), 10.0)
            if handle.task is not None and not handle.task.done():
                handle.task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await handle.task
            with contextlib.suppress(Exception):
                self.ray.kill(handle.actor, no_restart=True)
            handle.alive = False

    # ---------------------------------------------------------------- what comes back
    async def _take(self, handle: _Handle, batch: list[tuple[Any, ...]]) -> bool:
        """Handle one batch from an actor; True when the actor closed its stream."""
        out: dict[_Handle, list[tuple[int, str, Any]]] = defaultdict(list)
        closed = False
        for item in batch:
            kind = item[0]
            if kind == "trace":
                _, key, line, failure = item
                if key in self.finished_keys or handle.assigned.pop(key, None) is None:
                    continue  # a cell is written once, whatever an actor sends
                self.finished_keys.add(key)
                assert self.writer is not None
                await self.writer.put(line, failure, key)
                if self.progress is not None:
                    self.progress.advance()
            elif kind == "claim":
                self._claim(handle, item[1], item[2], item[3], out)
            elif kind == "settle":
                self._settle(handle, item[1], item[2], item[3], out)
            elif kind == "withdraw":
                self._withdraw(handle, item[1], item[2], out)
            elif kind in ("stats", "closed"):
                self.runner.worker_stats[handle.name] = {
                    name: ClientStats.model_validate(stats) for name, stats in item[1].items()
                }
                closed = closed or kind == "closed"
            elif kind == "fatal":
                self.runner.player.abort(item[1], self.queue)
            elif kind == "failure":
                self.runner.player.fail(item[1], self.queue)
        self._send(out)
        self._deal(handle)
        self._check_done()
        return closed

    def _on_write_error(self, message: str) -> None:
        self.runner.player.fail(message, self.queue)
        self.done.set()

    # ---------------------------------------------------------------- the shared cache
    def _claim(self, handle: _Handle, request: int, key: str, model: str,
               out: dict[_Handle, list[tuple[int, str, Any]]]) -> None:
        if key in self.leases:
            self.waiters.setdefault(key, deque()).append((handle, request))
            return
        entry = self._lookup(key, model)
        if entry is not None:
            out[handle].append((request, "entry", entry))
        elif self.replay_only:
            out[handle].append((request, "miss", None))
        else:
            self.leases[key] = (handle, request)
            out[handle].append((request, "lease", None))

    def _lookup(self, key: str, model: str) -> dict[str, Any] | None:
        if self.cache is None:
            return None
        try:
            entry = self.cache.get(key, model)
        except CacheMiss:
            return None
        if entry is not None and not self.replay_only and parse_cache_entry(entry, fallback_model=model)[1]:
            # No recorded completion: the call is made again and its answer written over the entry. (In
            # replay-only mode the entry goes to the actor, whose client names it as the cell's error.)
            self.unusable.add(key)
            return None
        return entry

    def _settle(self, handle: _Handle, key: str, model: str, value: dict[str, Any] | None,
                out: dict[_Handle, list[tuple[int, str, Any]]]) -> None:
        holder = self.leases.get(key)
        if holder is None or holder[0] is not handle:
            return  # not this actor's call (any more): its answer is not the one recorded
        del self.leases[key]
        if value is None:
            self._pass_lease(key, out)
            return
        if self.cache is not None:
            self.cache.put(key, model, value, replace=key in self.unusable)
        self.unusable.discard(key)
        for waiter, request in self.waiters.pop(key, deque()):
            out[waiter].append((request, "entry", value))

    def _withdraw(self, handle: _Handle, request: int, key: str,
                  out: dict[_Handle, list[tuple[int, str, Any]]]) -> None:
        if self.leases.get(key) == (handle, request):
            del self.leases[key]
            self._pass_lease(key, out)
        elif key in self.waiters:
            self.waiters[key] = deque(w for w in self.waiters[key] if w != (handle, request))

    def _pass_lease(self, key: str, out: dict[_Handle, list[tuple[int, str, Any]]]) -> None:
        """The call was not answered: the next actor waiting for it makes it."""
        waiting = self.waiters.get(key)
        while waiting:
            handle, request = waiting.popleft()
            if handle.alive:
                self.leases[key] = (handle, request)
                out[handle].append((request, "lease", None))
                break
        if not waiting:
            self.waiters.pop(key, None)

    def _send(self, out: dict[_Handle, list[tuple[int, str, Any]]]) -> None:
        for handle, replies in out.items():
            if replies and handle.alive:
                handle.actor.answer.remote(replies)

    # ---------------------------------------------------------------- dealing and losing
    def _deal(self, handle: _Handle, force: bool = False) -> None:
        if not handle.alive or self.runner.player.stopping or not self.queue:
            return
        room = self.window - len(handle.assigned)
        if room <= 0 or (room < self.refill and not force and len(self.queue) > room):
            return
        cells = [self.queue.popleft() for _ in range(min(room, len(self.queue)))]
        for cell in cells:
            handle.assigned[cell.run_key] = cell
        handle.actor.submit.remote([cell.run_key for cell in cells])

    def _lose(self, handle: _Handle, exc: BaseException) -> None:
        """An actor died or never came up: its unfinished cells and its leases go to the others."""
        was_alive = handle.alive
        handle.alive = False
        with contextlib.suppress(Exception):
            self.ray.kill(handle.actor, no_restart=True)
        cells = list(handle.assigned.values())
        handle.assigned.clear()
        self.queue.extendleft(reversed(cells))
        out: dict[_Handle, list[tuple[int, str, Any]]] = defaultdict(list)
        for key, (holder, _) in list(self.leases.items()):
            if holder is handle:
                del self.leases[key]
                self._pass_lease(key, out)
        for key in list(self.waiters):
            self.waiters[key] = deque(w for w in self.waiters[key] if w[0] is not handle)
        self._send(out)
        what = f"pid {handle.pid}" if handle.pid else "not started"
        reason = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
        note = f"Ray worker {handle.name} ({what}) lost: {reason}; {len(cells)} unfinished cells dealt again"
        self.lost.append(note)
        print(f"commitbench: {note}", file=sys.stderr)
        if self.runner.player.stopping or not (self.queue or any(h.assigned for h in self.handles)):
            return
        if self.replacements > 0 and (was_alive or handle.starting):
            self.replacements -= 1
            self._start(len(self.handles))
        for other in self.handles:
            self._deal(other, force=True)

    def _check_done(self) -> None:
        if self.done.is_set():
            return
        if self.runner.player.stopping:
            self.done.set()
            return
        if not self.queue and not any(h.assigned for h in self.handles if h.alive):
            self.done.set()
            return
        if not any(h.alive or h.starting for h in self.handles):
            print(f"commitbench: every Ray worker was lost; {len(self.queue)} cells were not played; run the "
                  "same command again to play them", file=sys.stderr)
            self.done.set()


async def _await(ref: Any) -> Any:
    return await ref


class RayRunner(Runner):
    """The runner whose play phase deals cells out to Ray actors (see the module doc)."""

    def __init__(self, config: ExperimentConfig, out_dir: Path | str, *, options: RayOptions | None = None,
                 progress: bool | str = False, argv: Sequence[str] | None = None, force: bool = False,
                 shard: tuple[int, int] | None = None, allow_unversioned: bool = False) -> None:
        super().__init__(config, out_dir, progress=progress, argv=argv, force=force, shard=shard,
                         allow_unversioned=allow_unversioned)
        self.options = options or RayOptions()
        self.worker_stats: dict[str, dict[str, ClientStats]] = {}
        self.lost_workers: list[str] = []

    def client_stats(self) -> dict[str, ClientStats]:
        by_model: dict[str, list[ClientStats]] = defaultdict(list)
        for stats in list(self.worker_stats.values()):
            for name, item in stats.items():
                by_model[name].append(item)
        return {name: merge_client_stats(items) for name, items in by_model.items()}

    async def play_pending(
        self, episodes: list[Any], pending: list[Cell], cache: CallCache | None, base_urls: dict[str, str]
    ) -> bool:
        """Deal the pending cells out to Ray actors; returns True when interrupted by a signal."""
        if not pending:
            return False  # every cell is done: no Ray needed
        ray = _ray()
        started_here = False
        if not ray.is_initialized():
            started_here = True
            if self.options.address:
                ray.init(address=self.options.address, namespace=NAMESPACE, logging_level="WARNING")
            else:
                # A local Ray on the loopback address, one CPU slot per actor, no dashboard.
                ray.init(num_cpus=self.options.workers, include_dashboard=False, _node_ip_address="127.0.0.1",
                         namespace=NAMESPACE, logging_level="WARNING")
        run_id = cache.run_id if cache is not None else os.urandom(8).hex()
        dispatcher = _Dispatcher(self, ray, pending, cache, base_urls, run_id)
        try:
            return await dispatcher.run()
        finally:
            self.lost_workers = dispatcher.lost
            if started_here:
                ray.shutdown()


def run_on_ray(
    config: ExperimentConfig,
    out_dir: Path | str,
    *,
    options: RayOptions | None = None,
    progress: bool | str = False,
    argv: Sequence[str] | None = None,
    force: bool = False,
    shard: tuple[int, int] | None = None,
    allow_unversioned: bool = False,
) -> RunSummary:
    """Play every pending cell of ``config`` on Ray actors into ``out_dir`` (see the module doc).

    Same directory, same result and same errors as :func:`commitbench.runner.run_experiment`;
    raises :class:`RayUnavailableError` when Ray is not installed.
    """
    _ray()
    runner = RayRunner(config, out_dir, options=options, progress=progress, argv=argv, force=force, shard=shard,
                       allow_unversioned=allow_unversioned)
    return runner.run()
