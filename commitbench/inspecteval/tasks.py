"""The inspect tasks ``commitbench/standing`` and ``commitbench/followup`` (the ``inspect_ai`` entry point).

    inspect eval commitbench/standing --model openai/M --model-base-url URL -T cells=BASE,PEER-DIRECT
    inspect eval commitbench/followup --model openai/M --model-base-url URL -T setups=C0,C2 --limit 20

A task's parameters are its suite's episode filter (the fields of the suite's ``selection`` model, as
``commitbench run SUITE`` takes them as flags) and :class:`~commitbench.inspecteval.params.TaskSettings`.
Each task function's signature is made from those fields, so ``inspect`` lists and checks them. One sample
per episode (its id is the episode id); a config's ``samples`` are the task's epochs (``-T samples=N`` or
``--epochs N``). ``docs/inspect.md`` says what differs from ``commitbench run``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from inspect_ai import Epochs, Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.scorer import Metric

from commitbench.inspecteval.params import TaskSettings, filter_fields, settings_from_parameters
from commitbench.inspecteval.play import TaskPlan, play_episode
from commitbench.inspecteval.scoring import GRADER_ROLE, followup_metrics, label_episode, standing_metrics
from commitbench.suites import AnySuite, get_suite

__all__ = ["build_task", "followup", "standing"]


def _sample(suite: AnySuite, episode: Any) -> Sample:
    factors = getattr(episode, "factors", None)
    described = factors() if callable(factors) else {}
    return Sample(id=episode.id, input=f"{suite.name} episode {episode.id}",
                  metadata={"episode_id": episode.id, "suite": suite.name, **described})


def build_task(suite_name: str, parameters: dict[str, Any], suite_metric: Callable[..., Metric]) -> Task:
    """The task of a suite for the given parameters (see the module doc)."""
    suite = get_suite(suite_name)
    filters, settings = settings_from_parameters(suite, parameters)
    selection = suite.selection.model_validate(filters)
    episodes = list(suite.select(selection))
    plan = TaskPlan(suite=suite, task_name=f"inspect-{suite.name}", episodes=episodes, filters=filters,
                    settings=settings)
    return Task(
        dataset=MemoryDataset([_sample(suite, e) for e in episodes], name=f"commitbench-{suite.name}"),
        solver=play_episode(plan),
        scorer=label_episode(plan, suite.offline_labeller),
        metrics=[suite_metric(n_boot=settings.n_boot)],
        epochs=Epochs(settings.samples),
        model_roles={GRADER_ROLE: settings.grader} if settings.grader else None,
        name=suite.name,
        metadata={"suite": suite.name, "env_id": suite.env_id, "episodes": selection.model_dump(mode="json"),
                  "settings": settings.model_dump(mode="json")},
    )


def _signature(suite_name: str) -> inspect.Signature:
    """Keyword parameters: the suite's filter fields, then the task settings, each defaulting to None."""
    names = [*filter_fields(get_suite(suite_name)), *TaskSettings.model_fields]
    return inspect.Signature([inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=Any)
                              for n in dict.fromkeys(names)])


def _standing(**parameters: Any) -> Task:
    """The standing suite: does the agent keep, drop or check a promise when people with and without standing
    change it? Parameters: the standing episode filter (cells, types, policies, gaps, surfaces, ...) and the
    task settings (interventions, samples, ...)."""
    return build_task("standing", parameters, standing_metrics)


def _followup(**parameters: Any) -> Task:
    """The follow-up suite: can the promise in the reply to a follow-up request be kept? Parameters: the
    follow-up episode filter (setups, variants, personas, categories, follow_through, ...) and the task
    settings (interventions, samples, ...)."""
    return build_task("followup", parameters, followup_metrics)


_standing.__signature__ = _signature("standing")  # type: ignore[attr-defined]
_followup.__signature__ = _signature("followup")  # type: ignore[attr-defined]
standing = task(name="standing")(_standing)
followup = task(name="followup")(_followup)
