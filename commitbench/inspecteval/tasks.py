"""The inspect tasks ``commitbench/<suite>``, one per registered suite (the ``inspect_ai`` entry point).

    inspect eval commitbench/standing --model openai/M --model-base-url URL -T cells=BASE,PEER-DIRECT
    inspect eval commitbench/followup --model openai/M --model-base-url URL -T setups=C0,C2 --limit 20

Every suite registered when this module loads gets its task, a plug-in's suite (``commitbench.suites`` entry
point) as much as the two built-in ones, so ``inspect eval commitbench/echo`` plays a plug-in's ``echo``
suite with no line here naming it. A task's parameters are its suite's episode filter (the fields of the
suite's ``selection`` model, as ``commitbench run SUITE`` takes them as flags) and
:class:`~commitbench.inspecteval.params.TaskSettings`. Each task function's signature is made from those
fields, so ``inspect`` lists and checks them. One sample per episode (its id is the episode id), dealt
round-robin over the factor the suite's report clusters by (:func:`spread_over`: commitment types,
requests), so that ``--limit N`` takes episodes of as many clusters as it can; a config's ``samples`` are
the eval's epochs: ``--epochs N`` or ``-T samples=N`` (the task's own count, 1 when not given; the solver
refuses the two when they differ). The score and the task's metrics come from the suite's inspect kit
(:mod:`commitbench.inspecteval.scoring`). ``docs/inspect.md`` says what differs from ``commitbench run``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

from inspect_ai import Epochs, Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.util import registry_info

from commitbench.dataversion import UnversionedDataError
from commitbench.inspecteval.evalrun import register_hook
from commitbench.inspecteval.params import DATA_KEY, TaskSettings, filter_fields, settings_from_parameters
from commitbench.inspecteval.play import TaskPlan, play_episode
from commitbench.inspecteval.scoring import GRADER_ROLE, inspect_kit, label_episode, suite_metric
from commitbench.suites import AnySuite, get_suite, suites

# The namespace of every task: commitbench/<suite>.
PACKAGE = "commitbench"

__all__ = ["SUITE_TASKS", "build_task", "spread_over", "suite_task"]

_METRICS: dict[str, Any] = {}


def _sample(suite: AnySuite, episode: Any) -> Sample:
    factors = getattr(episode, "factors", None)
    described = factors() if callable(factors) else {}
    return Sample(id=episode.id, input=f"{suite.name} episode {episode.id}",
                  metadata={"episode_id": episode.id, "suite": suite.name, **described})


def spread_over(episodes: Sequence[Any], factor: str | None) -> list[Any]:
    """The episodes dealt round-robin over the values of one of their factors (in the order each value first
    appears, each value's episodes in their own order), so that every prefix covers as many values as it can;
    the episodes as they are when ``factor`` is None."""
    if factor is None:
        return list(episodes)
    groups: dict[Any, list[Any]] = {}
    for episode in episodes:
        groups.setdefault(episode.factors().get(factor), []).append(episode)
    dealt: list[Any] = []
    for rank in range(max((len(group) for group in groups.values()), default=0)):
        dealt.extend(group[rank] for group in groups.values() if rank < len(group))
    return dealt


def _metric_of(suite: AnySuite) -> Any:
    """The suite's task metric, registered with inspect once."""
    if suite.name not in _METRICS:
        _METRICS[suite.name] = suite_metric(suite)
    return _METRICS[suite.name]


def build_task(suite_name: str, parameters: dict[str, Any]) -> Task:
    """The task of a suite for the given parameters (see the module doc)."""
    suite = get_suite(suite_name)
    register_hook()  # tells the solver the eval's epochs (commitbench.inspecteval.evalrun)
    filters, settings = settings_from_parameters(suite, parameters)
    selection = suite.selection.model_validate(filters)
    episodes = list(suite.select(selection))
    data = suite.data_check(selection)
    if data is not None and not data.ok and not settings.allow_unversioned:
        raise UnversionedDataError(f"{data.message()}; or play it as it is with -T allow_unversioned=true")
    plan = TaskPlan(suite=suite, task_name=f"inspect-{suite.name}", episodes=episodes, filters=filters,
                    settings=settings)
    samples = [_sample(suite, e) for e in spread_over(episodes, inspect_kit(suite).cluster_factor)]
    return Task(
        dataset=MemoryDataset(samples, name=f"commitbench-{suite.name}"),
        solver=play_episode(plan),
        scorer=label_episode(plan, suite.offline_labeller),
        metrics=[_metric_of(suite)(n_boot=settings.n_boot)],
        epochs=Epochs(settings.samples if settings.samples is not None else 1),
        model_roles={GRADER_ROLE: settings.grader} if settings.grader else None,
        name=suite.name,
        metadata={"suite": suite.name, "env_id": suite.env_id, "episodes": selection.model_dump(mode="json"),
                  "settings": settings.model_dump(mode="json"),
                  DATA_KEY: data.model_dump(mode="json") if data is not None else None},
    )


def _signature(suite: AnySuite) -> inspect.Signature:
    """Keyword parameters: the suite's filter fields, then the task settings, each defaulting to None."""
    names = [*filter_fields(suite), *TaskSettings.model_fields]
    return inspect.Signature([inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=Any)
                              for n in dict.fromkeys(names)])


def suite_task(suite: AnySuite) -> Callable[..., Task]:
    """The inspect task ``commitbench/<suite>`` of a registered suite, registered with inspect."""

    def play(**parameters: Any) -> Task:
        return build_task(suite.name, parameters)

    kit = inspect_kit(suite)
    play.__name__ = play.__qualname__ = suite.name.replace("-", "_")
    play.__doc__ = (f"The {suite.name} suite ({suite.env_id}). Parameters: its episode filter and the task "
                    f"settings (interventions, samples, ...). Metrics: {kit.description or 'its labels'}.")
    play.__signature__ = _signature(suite)  # type: ignore[attr-defined]
    made = task(name=suite.name)(play)
    if "/" not in registry_info(made).name:
        # inspect prefixes a task with its package's name only when it finds the package installed; a
        # commitbench.egg-info beside the source (an editable install's), found first on sys.path when Python runs
        # from the checkout, hides the install. The task keeps its documented name all the same.
        made = task(name=f"{PACKAGE}/{suite.name}")(play)
    return made


# Suite name -> its task, for every suite registered when the module loads.
SUITE_TASKS: dict[str, Callable[..., Task]] = {suite.name: suite_task(suite) for suite in suites()}
globals().update({name: made for name, made in SUITE_TASKS.items() if name.isidentifier()})
