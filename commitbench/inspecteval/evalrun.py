"""What a sample of the tasks knows of the eval it plays in: the eval's epoch count, and checks made once per eval.

inspect tells a solver the epoch of its sample, not how many epochs the eval runs: ``--epochs N`` replaces
the task's own count on a copy of the task that the solver never sees. inspect's hooks are told, so the
tasks register one with inspect (:class:`EvalRuns`, through :func:`register_hook`) when the first task is
built in a process: an eval of other tasks in a process that never builds one, even with the package
installed (inspect imports the tasks' module through its entry point), meets no hook of ours. ``inspect
eval`` names the hook in the lines it prints first (``hooks enabled: 1``). When a task starts, the hook
records the eval's epoch count from the eval's spec; when a sample is set up, which eval the sample belongs
to (by the sample's uuid, which its retries keep); when the task ends, it forgets the eval and its samples.

:func:`eval_run` gives a sample its :class:`EvalRun`. :meth:`EvalRun.once` runs an async check once per
eval, under a lock, before any sample of the eval goes on: the first sample runs it, the others wait, and
every sample gets its outcome (a failure is raised again, with the same message, in each of them).
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import anyio
from inspect_ai.hooks import Hooks, SampleInit, TaskEnd, TaskStart, hooks

__all__ = ["EvalCheckError", "EvalRun", "EvalRuns", "eval_run", "register_hook"]


class EvalCheckError(RuntimeError):
    """A check made once per eval failed: no sample of the eval plays."""


@dataclass
class EvalRun:
    """One eval as its samples see it: its id, its epoch count, and the outcome of its once-per-eval check."""

    eval_id: str
    epochs: int
    lock: anyio.Lock = field(default_factory=anyio.Lock)
    checked: bool = False
    failure: str | None = None

    async def once(self, check: Callable[[], Awaitable[None]]) -> None:
        """Run ``check`` if no sample of the eval has run it yet; raise :class:`EvalCheckError` with its failure
        (then and for every later sample)."""
        async with self.lock:
            if not self.checked:
                try:
                    await check()
                except EvalCheckError as exc:
                    self.failure = str(exc)
                except Exception as exc:  # any other failure of the check stops the eval as well, named
                    self.failure = f"{type(exc).__name__}: {exc}"
                self.checked = True
        if self.failure is not None:
            raise EvalCheckError(self.failure)


# eval id -> the eval; sample uuid -> its eval id (filled and emptied by the hook)
_RUNS: dict[str, EvalRun] = {}
_SAMPLES: dict[str, str] = {}
_registered = False
_register_lock = threading.Lock()
HOOK_NAME = "commitbench_eval_runs"


class EvalRuns(Hooks):
    """The inspect hook that records each eval's epoch count and each sample's eval (see the module doc)."""

    async def on_task_start(self, data: TaskStart) -> None:
        # inspect runs one epoch when neither the task nor the eval names a count; the tasks always name one
        _RUNS[data.eval_id] = EvalRun(eval_id=data.eval_id, epochs=data.spec.config.epochs or 1)

    async def on_sample_init(self, data: SampleInit) -> None:
        if data.eval_id in _RUNS:
            _SAMPLES[data.sample_id] = data.eval_id

    async def on_task_end(self, data: TaskEnd) -> None:
        _RUNS.pop(data.eval_id, None)
        for sample in [s for s, eval_id in _SAMPLES.items() if eval_id == data.eval_id]:
            del _SAMPLES[sample]


def register_hook() -> None:
    """Register :class:`EvalRuns` with inspect, once per process."""
    global _registered
    with _register_lock:
        if not _registered:
            hooks(name=HOOK_NAME, description="tells the samples of the commitbench tasks their eval's epochs")(
                EvalRuns)
            _registered = True


def eval_run(sample_uuid: str) -> EvalRun:
    """The eval of a running sample (``TaskState.uuid``); a RuntimeError when inspect did not report it."""
    run = _RUNS.get(_SAMPLES.get(sample_uuid, ""))
    if run is None:
        raise RuntimeError(
            f"inspect did not report the eval of sample {sample_uuid} to the hook {HOOK_NAME} (registered "
            "when a task is built by commitbench.inspecteval.tasks.build_task), so the task cannot know the eval's "
            "epochs; build the task with build_task or the registered task functions")
    return run
